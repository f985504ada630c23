"""The real cgroupfs of this host, read only: v1 memory root accepted, anything else refused."""

from __future__ import annotations

import os

import pytest

from cgalloc.errors import HostError
from cgalloc.host.core import MAX, OK, FileSpec

MEMORY = "/sys/fs/cgroup/memory"
CPU = "/sys/fs/cgroup/cpu"
# v1 prints an unlimited memcg as PAGE_COUNTER_MAX pages: (2**63 - 1) // 4096 * 4096
V1_UNLIMITED = 9223372036854771712

needs_v1 = pytest.mark.skipif(
    not os.path.isfile(f"{MEMORY}/memory.usage_in_bytes"), reason="no cgroup v1 memory mount"
)


@needs_v1
def test_v1_memory_root_is_accepted_and_read(impl):
    with impl.open_root(MEMORY) as root:
        assert root.is_cgroupfs and root.magic == 0x27E0EB
        specs = [
            FileSpec("memory.usage_in_bytes"),
            FileSpec("memory.limit_in_bytes"),
            FileSpec("memory.stat", "keyed", ("hierarchical_memory_limit", "cache", "rss")),
        ]
        snap = root.read([""], specs)
        status, usage = snap.get(0, 0)
        assert status == OK and usage > 0
        assert snap.get(0, 1) == (OK, V1_UNLIMITED)
        assert snap.get(0, 2, 0) == (OK, V1_UNLIMITED)
        assert snap.get(0, 2, 1)[0] == OK and snap.get(0, 2, 2)[0] == OK
        with root.sampler([""], specs) as sampler:
            assert sampler.sample().get(0, 1) == (OK, V1_UNLIMITED)


@pytest.mark.skipif(not os.path.isfile(f"{CPU}/cpu.cfs_quota_us"), reason="no cgroup v1 cpu")
def test_v1_root_quota_minus_one_reads_as_max(impl):
    with impl.open_root(CPU) as root:
        assert root.read([""], [FileSpec("cpu.cfs_quota_us")]).get(0, 0) == (MAX, 0)


def test_non_cgroup_filesystems_are_refused(impl):
    with pytest.raises(HostError, match=r"^/tmp is not a cgroup filesystem \("):
        impl.open_root("/tmp")


@pytest.mark.skipif(os.path.ismount("/sys/fs/cgroup/unified") is False, reason="not hybrid")
def test_hybrid_tmpfs_root_is_refused(impl):
    with pytest.raises(HostError, match="one controller's mount"):
        impl.open_root("/sys/fs/cgroup")


def test_missing_root_is_a_host_error(impl, tmp_path):
    with pytest.raises(HostError, match=r"No such file or directory \(ENOENT\)$"):
        impl.open_root(str(tmp_path / "absent"), allow_any_fs=True)
