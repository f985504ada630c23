"""The lanes boot a real kernel with the expected cgroup layout, and the limits cgalloc will
write have their kernel effects there: OOM kill, CPU throttling, fork refusal, CPU confinement.

These use raw control-file writes on a scratch cgroup: they prove the kernel and the harness,
not cgalloc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kernel.util import CGROUP_ROOT, is_v2, lane, read, read_keyed, run_in, scratch_cgroup

MiB = 1 << 20


def _mounts() -> dict[str, tuple[str, set[str]]]:
    """mountpoint -> (fs type, mount + super options) from /proc/self/mountinfo."""
    mounts = {}
    for line in read("/proc/self/mountinfo").splitlines():
        left, right = line.split(" - ")
        mountpoint, opts = left.split()[4], left.split()[5]
        fstype, _source, super_opts = right.split()
        mounts[mountpoint] = (fstype, set(opts.split(",")) | set(super_opts.split(",")))
    return mounts


def test_lane_layout() -> None:
    mounts = _mounts()
    assert os.geteuid() == 0
    assert mounts["/"][0] == "overlay"
    assert mounts["/tmp"][0] == "tmpfs"
    if is_v2():
        assert mounts["/sys/fs/cgroup"][0] == "cgroup2"
        controllers = set(read(CGROUP_ROOT / "cgroup.controllers").split())
        assert {"cpuset", "cpu", "io", "memory", "hugetlb", "pids"} <= controllers
        assert read("/proc/self/cgroup") == "0::/"
    else:
        assert lane() == "v1"
        assert mounts["/sys/fs/cgroup"][0] == "tmpfs"
        assert not [m for m, (fstype, _) in mounts.items() if fstype == "cgroup2"]
        for directory, options in {
            "cpuset": {"cpuset"},
            "cpu,cpuacct": {"cpu", "cpuacct"},
            "memory": {"memory"},
            "pids": {"pids"},
            "blkio": {"blkio"},
            "hugetlb": {"hugetlb"},
            "systemd": {"name=systemd"},
        }.items():
            fstype, opts = mounts[f"/sys/fs/cgroup/{directory}"]
            assert fstype == "cgroup"
            assert options <= opts
        assert os.readlink(CGROUP_ROOT / "cpu") == "cpu,cpuacct"
        assert os.readlink(CGROUP_ROOT / "cpuacct") == "cpu,cpuacct"


# Touches every page it allocates, so the memory is charged, far beyond the 64 MiB limit.
_MEMORY_HOG = "chunks = [b'x' * (1 << 20) for _ in range(512)]"


def test_memory_limit_oom_kills() -> None:
    limit = 64 * MiB
    with scratch_cgroup("memory") as cg:
        if is_v2():
            cg.write("memory", "memory.max", str(limit))
            cg.write("memory", "memory.swap.max", "0")
            assert cg.read("memory", "memory.max") == "67108864"
        else:
            cg.write("memory", "memory.limit_in_bytes", str(limit))
            assert cg.read("memory", "memory.limit_in_bytes") == "67108864"
        proc = run_in(cg, [sys.executable, "-c", _MEMORY_HOG])
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        if is_v2():
            events = read_keyed(cg.file("memory", "memory.events"))
            assert events["oom_kill"] >= 1
            assert events["max"] >= 1
        else:
            assert read_keyed(cg.file("memory", "memory.oom_control"))["oom_kill"] >= 1
            assert int(cg.read("memory", "memory.failcnt")) >= 1


def test_cpu_quota_throttles() -> None:
    with scratch_cgroup("cpu") as cg:
        if is_v2():
            cg.write("cpu", "cpu.max", "10000 100000")
            assert cg.read("cpu", "cpu.max") == "10000 100000"
        else:
            cg.write("cpu", "cpu.cfs_period_us", "100000")
            cg.write("cpu", "cpu.cfs_quota_us", "10000")
        # Started outside and moved in by this process, so nothing here waits on a throttled
        # child: a CI run's v1 lane sat silent in this test for 38 min when the child joined
        # through preexec_fn, which Popen waits on until the child's exec.
        busy = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])
        start = time.monotonic()
        for f in cg.procs_files:
            f.write_text(str(busy.pid))
        time.sleep(1.5)
        busy.kill()
        busy.wait(timeout=60)
        elapsed = time.monotonic() - start
        stat = read_keyed(cg.file("cpu", "cpu.stat"))
        assert stat["nr_throttled"] > 0
        if is_v2():
            used = stat["usage_usec"] / 1e6
            assert stat["throttled_usec"] > 0
        else:
            used = int(cg.read("cpu", "cpuacct.usage")) / 1e9
            assert stat["throttled_time"] > 0
        # 10 % of one CPU, with slack for period boundaries; unthrottled it would be ~100 %.
        assert used < 0.5 * elapsed


_FORKER = """
import errno, os
r, w = os.pipe()
forks = 0
while forks < 64:
    try:
        pid = os.fork()
    except OSError as e:
        print(forks, errno.errorcode[e.errno])
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # hold the pid until the parent closes the pipe
        os._exit(0)
    forks += 1
else:
    print(forks, "unlimited")
os.close(w)
for _ in range(forks):
    os.wait()
"""


def test_pids_max_stops_forks() -> None:
    with scratch_cgroup("pids") as cg:
        cg.write("pids", "pids.max", "5")
        proc = run_in(cg, [sys.executable, "-c", _FORKER])
        assert proc.returncode == 0, proc.stderr
        # The forking process is one of the 5 pids, so the 5th fork is refused.
        assert proc.stdout.split() == ["4", "EAGAIN"]
        assert read_keyed(cg.file("pids", "pids.events"))["max"] >= 1


def test_cpuset_confines() -> None:
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip(f"needs 2 CPUs in the VM, has {sorted(cpus)}")
    target = max(cpus)
    with scratch_cgroup("cpuset") as cg:
        cg.write("cpuset", "cpuset.cpus", str(target))
        if is_v2():
            assert cg.read("cpuset", "cpuset.cpus.effective") == str(target)
        code = "import os; print(sorted(os.sched_getaffinity(0)))"
        proc = run_in(cg, [sys.executable, "-c", code])
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"[{target}]"
