"""The sampler's fd policy on a real cgroupfs: kept dir fds and kept files follow a cgroup that
is removed and re-created, files not kept show writes at once, and fds close as the policy says.

On kernfs a removed cgroup's kept fd answers ENODEV and an openat through its kept dir fd
ENOENT; the plain-file trees of tests/core cannot show either.
"""

from __future__ import annotations

import os

from cgalloc.host import core
from cgalloc.host.core import ENOENT, OK, FileSpec
from kernel.util import is_v2, read, scratch_cgroup

MiB = 1 << 20


def _fds_under(path: str) -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(path + "/"):
            out.add(target[len(path) + 1 :])
    return out


def test_policy_sampler_follows_a_removed_and_recreated_cgroup() -> None:
    limit = "memory.max" if is_v2() else "memory.limit_in_bytes"
    usage = "memory.current" if is_v2() else "memory.usage_in_bytes"
    specs = [FileSpec(limit), FileSpec(usage)]
    with scratch_cgroup("memory") as cg:
        mount = str(cg.dirs["memory"].parent)
        dirs = [f"{cg.name}/a", f"{cg.name}/b"]
        if is_v2():  # the children need memory delegated to them
            cg.file("memory", "cgroup.subtree_control").write_text("+memory")
        for i, d in enumerate(dirs):
            os.mkdir(os.path.join(mount, d))
            with open(os.path.join(mount, d, limit), "w") as f:
                f.write(str((i + 1) * 64 * MiB))
        try:
            root = core.open_root(mount)
            with root.sampler(dirs, specs, threads=1) as sampler:
                sampler.set_policy(dirfds=2, kept=[1, 0])  # a's limit kept; everything via dir fds
                snap = sampler.sample()
                assert [snap.get(0, 0), snap.get(1, 0)] == [(OK, 64 * MiB), (OK, 128 * MiB)]
                assert snap.get(0, 1)[0] == OK
                assert _fds_under(mount) == {dirs[0], dirs[1], f"{dirs[0]}/{limit}"}
                with open(os.path.join(mount, dirs[1], limit), "w") as f:
                    f.write(str(96 * MiB))
                assert sampler.sample().get(1, 0) == (OK, 96 * MiB)

                for d in dirs:
                    os.rmdir(os.path.join(mount, d))
                gone = sampler.sample()
                assert {gone.get(d, f)[0] for d in (0, 1) for f in (0, 1)} == {ENOENT}

                for i, d in enumerate(dirs):
                    os.mkdir(os.path.join(mount, d))
                    with open(os.path.join(mount, d, limit), "w") as f:
                        f.write(str((i + 3) * 64 * MiB))
                back = sampler.sample()
                assert [back.get(0, 0), back.get(1, 0)] == [(OK, 192 * MiB), (OK, 256 * MiB)]
                assert read(os.path.join(mount, dirs[0], limit)) == str(192 * MiB)

                sampler.set_policy(dirfds=0, kept=[0, 0])
                assert _fds_under(mount) == set()
                assert sampler.sample().get(1, 0) == (OK, 256 * MiB)
            root.close()
        finally:
            for d in reversed(dirs):
                if os.path.isdir(os.path.join(mount, d)):
                    os.rmdir(os.path.join(mount, d))
