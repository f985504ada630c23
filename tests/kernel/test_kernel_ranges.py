"""The kernel facts behind cgalloc/model/kernel_ranges.py, on a real kernel (v1 and v2 lanes), and
setup refusing such values with exit 2 before writing anything.

mm/page_counter.c page_counter_memparse: memparse() reads an unsigned 64-bit number without an
overflow check, so 2^64 + 4096 is stored as 4096 (issue 8: "setup says applied, verify drifts
forever"); kernel/cgroup/pids.c pids_max_write: a limit above PID_MAX_LIMIT is EINVAL.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.util import CGROUP_ROOT, is_v2, read, scratch_cgroup

WRAPPED = 2**64 + 4096


def test_the_kernel_wraps_a_memory_limit_of_2_to_the_64_plus_4096():
    with scratch_cgroup("memory") as cg:
        limit = cg.dirs["memory"] / ("memory.max" if is_v2() else "memory.limit_in_bytes")
        limit.write_text(str(WRAPPED))
        assert read(limit) == "4096"  # not "max": the value wrapped modulo 2^64


def test_the_kernel_refuses_pids_above_pid_max_limit():
    with scratch_cgroup("pids") as cg:
        fd = os.open(cg.dirs["pids"] / "pids.max", os.O_WRONLY)
        try:
            with pytest.raises(OSError) as exc:
                os.write(fd, b"4194305")
            assert exc.value.errno == errno.EINVAL
        finally:
            os.close(fd)


def _pod_limiting_memory_to(limit: int) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "wrapped", "uid": "0f6e1d5c-0000-4000-8000-00000000000a"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {
            "cpu": "1", "memory": str(limit)}}}]},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("capacity", "pod_memory", "expect"),
    [
        # a planned capacity is bounded to int64 before any kernel range (an int64 is what the
        # kubelet holds): a pod's limit is what can still reach the kernel's wrap
        ("cpu=2,memory=1Gi,pid=4096", WRAPPED, "9223372036854771712 (PAGE_COUNTER_MAX pages)"),
        ("cpu=2,memory=1Gi,pid=4194305", None, "between 0 and 4194304 (PID_MAX_LIMIT)"),
    ],
)
def test_setup_refuses_what_the_kernel_would_wrap_or_refuse(tmp_path, capacity, pod_memory, expect):
    before = sorted(str(p) for p, _, _ in os.walk(CGROUP_ROOT))
    pods = []
    if pod_memory is not None:
        (tmp_path / "pods.json").write_text(json.dumps(_pod_limiting_memory_to(pod_memory)))
        pods = ["--pods", str(tmp_path / "pods.json")]
    run = subprocess.run(
        # a planned node of this capacity (planned.py): setup refuses --capacity for real
        [sys.executable, str(Path(__file__).with_name("planned.py")), capacity, "--", "setup",
         "--state-dir", str(tmp_path / "state"), *pods],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert expect in run.stderr and len(run.stderr.splitlines()) == 1
    assert sorted(str(p) for p, _, _ in os.walk(CGROUP_ROOT)) == before
    assert not (tmp_path / "state").exists()
