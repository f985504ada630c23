"""Protect, don't cap (docs/protect.md) on a real kernel: each --reserved-* option against the
kubelet's behaviour, with the difference measured.

- A daemon in the reserved cgroup that grows past its reservation is OOM-killed at the kubelet's
  cap and lives with --reserved-protection protect, while a hog in kubepods is stopped at
  kubepods' own cap either way (kubernetes#128284; memory.events oom_kill counted).
- Under reclaim (the root's memory.reclaim, with zram swap on) an unprotected daemon is swapped
  out; memory.min (protect, or the 1.37 kubelet's MemoryQoS) and memory.swap.max 0
  (--reserved-swap none) keep it in memory (KEP-2400's best practice).
- In a node-wide OOM the kernel kills a daemon at oom_score_adj 0 before a Guaranteed pod's
  container (-997), and the container when the daemon runs at cgalloc's value (EKS AMI #2175).
- Under CPU contention the reserved cgroup gets less than half its reserved half of the CPU at
  the kubelet's weights on a 64-CPU node (a few percent in theory), and its reserved half with
  --reserved-cpu-weight proportional (kubernetes#139790).
- teardown restores every value the options changed in a reserved cgroup cgalloc did not make;
  v1 refuses what it cannot do and writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cgalloc.model import oomscore
from kernel.test_setup_kernel import cgalloc, ctrl_dir, dirs_of, listing, manifest, node, run_in
from kernel.util import CGROUP_ROOT, is_v2, read, read_keyed

MI = 1 << 20
SYSTEM = ["--system-reserved-cgroup", "/system.slice", "--eviction-hard", "memory.available<1Mi"]
# 600Mi node: kubepods 300Mi, each reservation 150Mi (as test_setup_kernel's)
SMALL = "cpu=2,memory=600Mi,pid=4096,ephemeral-storage=10Gi"
RESERVED = (*SYSTEM, "--kube-reserved", "memory=150Mi", "--system-reserved", "memory=150Mi")


GROW = "b = []\nfor _ in range({n}): b.append(bytearray(bytes(range(256)) * 40960))\n"


def daemon(mib: int) -> str:
    """A daemon growing to ``mib`` MiB in 10 MiB steps (a pattern the kernel finds neither zero
    nor same-filled, which zram would store as a marker), saying 'holding', then waiting for a
    line."""
    tail = "print('holding', flush=True)\nsys.stdin.readline()\nprint('survived', flush=True)"
    return "import sys\n" + GROW.format(n=mib // 10) + tail


def hog(mib: int) -> str:
    return GROW.format(n=mib // 10) + "print('done')"


def joiner(path: str, adj: int | None = None):
    """A preexec: set the OOM score adjustment (as systemd's OOMScoreAdjust= or the runtime
    does) and join cgroup ``path`` in every hierarchy."""

    def join() -> None:
        if adj is not None:
            Path("/proc/self/oom_score_adj").write_text(str(adj))
        for d in dict.fromkeys(dirs_of(path)):
            (d / "cgroup.procs").write_text(str(os.getpid()))

    return join


@contextlib.contextmanager
def started(path: str, code: str, adj: int | None = None) -> Iterator[subprocess.Popen]:
    """``code`` running in cgroup ``path``, once it said 'holding' (or died); killed after."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        preexec_fn=joiner(path, adj),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.stdout.readline()  # 'holding', or '' when it was killed first
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def release(proc: subprocess.Popen) -> tuple[int, str]:
    """Let a started daemon finish: (its exit status, what it printed after 'holding')."""
    if proc.poll() is None:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


def events(path: str) -> dict[str, int]:
    return read_keyed(CGROUP_ROOT / path / "memory.events")


v2_only = pytest.mark.skipif("not is_v2()", reason="memory protection is cgroup v2's")
# Minutes each under TCG: run with CGALLOC_VM_SLOW=1 on the host (docs/testing.md), not in CI.
slow = pytest.mark.skipif(
    "not os.environ.get('CGALLOC_VM_SLOW')", reason="a slow proof: CGALLOC_VM_SLOW=1 runs it"
)


# ----------------------------------------------------------------- kubernetes#128284


@v2_only
@pytest.mark.parametrize("mode", ["cap", "protect"])
def test_daemon_past_its_reservation_is_killed_by_the_cap_not_when_protected(tmp_path, mode):
    pod = "kubepods/besteffort/podhog"
    extra = ["--enforce", "pods,system-reserved", "--reserved-protection", mode]
    with node(tmp_path, *extra, pods=[manifest("hog", {})], capacity=SMALL, base=RESERVED):
        slice_ = CGROUP_ROOT / "system.slice"
        if mode == "cap":  # the kubelet's: capped at the reservation (and MemoryQoS's min)
            assert read(slice_ / "memory.max") == str(150 * MI)
        else:
            assert read(slice_ / "memory.max") == "max"
            assert read(slice_ / "memory.min") == str(150 * MI)
        # a daemon spiking to 200Mi, 50Mi past its reservation, while a pod hogs memory
        with started("system.slice", daemon(200)) as proc:
            pig = run_in(pod, hog(400), timeout=600)
            status, said = release(proc)
        assert pig.returncode == -9, pig.stdout + pig.stderr  # stopped at kubepods' 300Mi
        assert events("kubepods")["oom_kill"] >= 1
        killed = events("system.slice")["oom_kill"]
        if mode == "cap":
            assert (status, killed >= 1) == (-9, True), said
        else:
            assert (status, said.strip(), killed) == (0, "survived", 0)


# ----------------------------------------------------------------- KEP-2400: swap


@pytest.fixture
def zram_swap() -> Iterator[None]:
    """256 MiB of swap on zram for one test, off again after it (the lane's other tests run
    without swap)."""
    loaded = subprocess.run(["modprobe", "zram", "num_devices=1"], capture_output=True, text=True)
    if loaded.returncode != 0 or not Path("/sys/block/zram0").exists():
        pytest.skip(f"no zram in this kernel: {loaded.stderr.strip()}")
    Path("/sys/block/zram0/disksize").write_text("256M")
    subprocess.run(["mkswap", "/dev/zram0"], check=True, capture_output=True)
    subprocess.run(["swapon", "/dev/zram0"], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["swapoff", "/dev/zram0"], check=True, capture_output=True)
        Path("/sys/block/zram0/reset").write_text("1")


def reclaim_everything() -> None:
    """Proactive reclaim from the root (memory.reclaim exists in every cgroup, the root too):
    the kernel reclaims what it can, swapping anonymous memory, then gives up with EAGAIN."""
    with contextlib.suppress(BlockingIOError):
        (CGROUP_ROOT / "memory.reclaim").write_text("2G")


@slow
@v2_only
@pytest.mark.parametrize(
    ("version", "options", "kept"),
    [
        ("1.35", [], False),  # the kubelet's cap alone: swapped out
        ("1.37", [], True),  # MemoryQoS (on by default): memory.min at the reservation
        ("1.35", ["--reserved-protection", "protect"], True),
        ("1.35", ["--reserved-swap", "none"], True),
    ],
)
def test_reclaim_swaps_the_daemon_out_unless_protected(tmp_path, zram_swap, version, options, kept):
    extra = ["--enforce", "pods,system-reserved", "--kubelet-version", version, *options]
    with node(tmp_path, *extra, capacity=SMALL, base=RESERVED):
        with started("system.slice", daemon(100)) as proc:
            before = int(read(CGROUP_ROOT / "system.slice/memory.current"))
            reclaim_everything()
            swapped = int(read(CGROUP_ROOT / "system.slice/memory.swap.current"))
            after = int(read(CGROUP_ROOT / "system.slice/memory.current"))
            assert release(proc) == (0, "survived\n")
        if "none" in options:
            assert read(CGROUP_ROOT / "system.slice/memory.swap.max") == "0"
        measured = f"{before >> 20} MiB before, {after >> 20} after, {swapped >> 20} swapped"
        if kept:
            assert swapped < 4 * MI and after > 90 * MI, measured
        else:
            assert swapped > 50 * MI, measured


# ----------------------------------------------------------------- EKS AMI #2175


def mem_total_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    raise AssertionError("no MemTotal")


@contextlib.contextmanager
def only_candidates() -> Iterator[None]:
    """Every other process of the VM out of the OOM killer's reach (-1000) for one test, so a
    node-wide OOM chooses between the processes the test starts; restored after."""
    saved = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and entry != "1":
            with contextlib.suppress(OSError):
                saved[entry] = read(f"/proc/{entry}/oom_score_adj")
                Path(f"/proc/{entry}/oom_score_adj").write_text("-1000")
    try:
        yield
    finally:
        for entry, value in saved.items():
            with contextlib.suppress(OSError):
                Path(f"/proc/{entry}/oom_score_adj").write_text(value)


@slow
@v2_only
@pytest.mark.parametrize("adj", [0, oomscore.DAEMON], ids=["unit-default", "cgalloc"])
def test_node_oom_kills_the_guaranteed_pod_first_at_the_daemon_score(tmp_path, adj):
    # the node's real memory, 100Mi reserved for the daemons: protected and uncapped, a daemon
    # using 250Mi (past its reservation) and a Guaranteed pod growing to its limit push the node
    # into a node-wide OOM before kubepods' cap is reached
    capacity = f"cpu=2,memory={mem_total_kib()}Ki,pid=4096,ephemeral-storage=10Gi"
    res = {"cpu": "2", "memory": "900Mi"}
    pod = manifest("gua", {"requests": res, "limits": res})
    extra = ["--system-reserved", "memory=100Mi", "--kube-reserved", "memory=50Mi"]
    # the node's own system.slice, uncapped (system-reserved not enforced); protected on v2
    extra += ["--enforce", "pods", *(["--reserved-protection", "protect"] if is_v2() else [])]
    with (
        existing_system_slice(),
        node(tmp_path, *extra, pods=[pod], capacity=capacity, base=SYSTEM),
        only_candidates(),
    ):
        with started("system.slice", daemon(250), adj) as proc:
            pig = subprocess.run(
                [sys.executable, "-c", hog(2000)], preexec_fn=joiner("kubepods/podgua",
                oomscore.GUARANTEED), capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            status, said = release(proc)
        if adj == 0:
            assert status == -9, said  # the daemon went first
        else:
            assert (status, said.strip()) == (0, "survived")
            assert pig.returncode == -9, pig.stdout + pig.stderr


# ----------------------------------------------------------------- kubernetes#139790


def cpu_usage(path: str) -> int:
    """CPU time the cgroup used, in µs."""
    if is_v2():
        return read_keyed(CGROUP_ROOT / path / "cpu.stat")["usage_usec"]
    return int(read(ctrl_dir("cpuacct", path) / "cpuacct.usage")) // 1000


@slow
@pytest.mark.parametrize("weight", ["kubelet", "proportional"])
def test_reserved_cgroup_gets_its_reserved_cpu_under_contention(tmp_path, weight):
    # a planned 64-CPU node with 32 reserved: kubepods 32768 shares (weight 1250) against
    # system.slice's default 1024 (100), or the same with proportional. 1.31: no cpuset, which
    # would name CPUs this VM lacks
    capacity = "cpu=64,memory=600Mi,pid=4096,ephemeral-storage=10Gi"
    pod = "kubepods/besteffort/podspin"
    extra = ["--system-reserved", "cpu=32", "--enforce", "pods", "--kubelet-version", "1.31"]
    extra += ["--reserved-cpu-weight", weight]
    # each says so once its interpreter is up (module loads over 9p block, leaving the CPU to
    # the others), then spins
    spin = [sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"]
    with (
        existing_system_slice(),
        node(tmp_path, *extra, pods=[manifest("spin", {})], capacity=capacity, base=SYSTEM),
    ):
        procs = []
        try:
            for path in (pod, pod, "system.slice", "system.slice"):
                out = {"stdout": subprocess.PIPE, "text": True}
                procs.append(subprocess.Popen(spin, preexec_fn=joiner(path), **out))
            for proc in procs:
                assert proc.stdout.readline() == "spinning\n"
            time.sleep(1)
            start = {p: cpu_usage(p) for p in ("kubepods", "system.slice")}
            time.sleep(5)
            used = {p: cpu_usage(p) - start[p] for p in start}
        finally:
            for p in procs:
                p.kill()
                p.wait()
    share = used["system.slice"] / (used["system.slice"] + used["kubepods"])
    if weight == "kubelet":
        # 100/1350 = 7% on v2, 1024/33792 = 3% on v1 in theory; the bound is setup's warning:
        # less than half the 50% reserved (a loaded TCG host measured 23% on v2 once)
        assert share < 0.25, used
    else:
        assert 0.35 < share < 0.65, used  # half, as reserved


# ----------------------------------------------------------------- teardown, v1


def values(files: dict[str, Path]) -> dict[str, str]:
    return {name: read(path) for name, path in files.items()}


@contextlib.contextmanager
def existing_system_slice() -> Iterator[None]:
    """The node's own /system.slice (not cgalloc's), removed after the test."""
    control = CGROUP_ROOT / "cgroup.subtree_control"
    enabled = read(control).split() if is_v2() else []
    if is_v2():
        for c in ("cpu", "memory", "pids"):
            control.write_text(f"+{c}")
    made = []
    for d in dirs_of("system.slice"):
        d.mkdir()
        made.append(d)
        if d.parent.name == "cpuset":  # a v1 cpuset cgroup takes no task until filled
            for f in ("cpuset.mems", "cpuset.cpus"):
                (d / f).write_text(read(d.parent / f))
    try:
        yield
    finally:
        for d in made:
            d.rmdir()
        if is_v2():
            for c in ("cpu", "memory", "pids"):
                if c not in enabled:
                    with contextlib.suppress(OSError):  # a test's other cgroups may need it
                        control.write_text(f"-{c}")


def test_teardown_restores_what_the_options_changed_in_an_existing_reserved_cgroup(tmp_path):
    if is_v2():
        names = ("memory.min", "memory.max", "memory.swap.max", "cpu.weight")
        extra = ["--enforce", "pods", "--reserved-protection", "protect"]
        # kubepods 1500m → 1536 shares → weight 59; × 500m / 1500m → 20
        want = {"memory.min": str(150 * MI), "memory.swap.max": "0", "cpu.weight": "20"}
    else:
        names = ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "cpu.shares")
        extra = ["--enforce", "pods,system-reserved"]
        # the memory+swap limit at the memory cap: no swap; 1536 × 500m / 1500m = 512 shares
        want = {"memory.limit_in_bytes": str(150 * MI), "cpu.shares": "512"}
        want["memory.memsw.limit_in_bytes"] = str(150 * MI)
    extra += ["--reserved-swap", "none", "--reserved-cpu-weight", "proportional"]
    base = (*SYSTEM, "--system-reserved", "cpu=500m,memory=150Mi")
    with existing_system_slice():
        files = {n: ctrl_dir(n.split(".")[0], "system.slice") / n for n in names}
        if not all(f.exists() for f in files.values()):
            pytest.skip(f"this kernel lacks {[n for n, f in files.items() if not f.exists()]}")
        before = values(files)
        with node(tmp_path, *extra, capacity=SMALL, base=base) as args:
            assert {n: v for n, v in values(files).items() if n in want} == want
            assert cgalloc("verify", *args, capacity=SMALL).returncode == 0
        assert values(files) == before


@pytest.mark.skipif("is_v2()", reason="cgroup v1's refusals")
@pytest.mark.parametrize(
    ("enforce", "option"),
    [
        ("pods,system-reserved", ["--reserved-protection", "protect"]),
        ("pods", ["--reserved-swap", "none"]),  # no cap to make memory+swap equal to
    ],
)
def test_v1_refuses_what_it_cannot_do_and_writes_nothing(tmp_path, enforce, option):
    before = listing()
    done = cgalloc(
        "setup", *RESERVED, "--enforce", enforce, *option,
        "--state-dir", str(tmp_path / "state"), capacity=SMALL,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cgroup v1" in done.stderr
    assert listing() == before
