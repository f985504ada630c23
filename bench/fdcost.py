"""What a kept descriptor gains and costs, and the sampler's total memory, on a real cgroupfs.

- gain per file kind: ``csrc/floor.c`` cold (open by path), dirfd (openat through a kept
  O_PATH dir fd) and warm (pread of a kept fd) on the same files, interleaved round by round;
- kernel memory per kept fd: ``floor hold`` opens N fds (a read fd read once, or an O_PATH dir
  fd) inside a ``cgalloc-test-fdcost-<pid>`` memory cgroup; the cgroup's charge before and after
  (memory.usage_in_bytes on v1, memory.current on v2), divided by N;
- the sampler's total: a child process (``python -m bench.fdcost``) runs ``stats.TreeReader``'s
  samplers under its policy in such a cgroup; the charge delta across opening them and two
  samples covers its user pages and every kernel object charged to it (struct file, seq_file
  pages), divided by the cgroups sampled. memcg charges in per-CPU batches of 64 pages, so the
  figure is within ±256 KiB per CPU of the truth.

Only processes started here are moved, into a cgroup made here and always removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator

from bench.rounds import Contender, interleave

MODES = ("cold", "dirfd", "warm")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAIN_DIRS = 500  # cgroups per file kind in the gain rounds


def floor_run(binary: str, mode: str, cwd: str, paths: list[str], iterations: int = 3) -> float:
    """Seconds per file the floor spends (its own clock, best of ``iterations``)."""
    out = subprocess.run([binary, mode, str(iterations)], input="\n".join(paths),
                         capture_output=True, text=True, check=True, cwd=cwd)  # fmt: skip
    return float(out.stdout.split()[2]) / 1e9


def gain_contenders(binary: str, plans: list, dirs: list[str]) -> list[Contender]:
    """One contender per (file, mode), timed per file over the first GAIN_DIRS cgroups."""
    sample = dirs[:GAIN_DIRS]
    out = []
    for plan in plans:
        for spec in plan.specs:
            paths = [f"{d}/{spec.name}" for d in sample]
            for mode in MODES:
                run = (lambda m, p, c: lambda: floor_run(binary, m, c, p))(mode, paths, plan.path)
                out.append(Contender(f"{spec.name} {mode}", run, 1))
    return out


def gains(binary: str, plans: list, dirs: list[str], rounds: int) -> dict[str, dict[str, list]]:
    """Per file name, per mode, µs per file in each interleaved round."""
    times = interleave(gain_contenders(binary, plans, dirs), rounds)
    out: dict[str, dict[str, list]] = {}
    for name, ts in times.items():
        file, mode = name.rsplit(" ", 1)
        out.setdefault(file, {})[mode] = [None if t is None else t * 1e6 for t in ts]
    return out


def memory_mount(hierarchy) -> str | None:
    """Where memory cgroups are made: the v1 memory mount, or the v2 mount when its root
    delegates memory; None when neither (the figures are then not measurable here)."""
    if hierarchy.version == "v2":
        root = hierarchy.unified or hierarchy.root
        try:
            with open(os.path.join(root, "cgroup.subtree_control")) as f:
                return root if "memory" in f.read().split() else None
        except OSError:
            return None
    return hierarchy.v1_mounts.get("memory")


@contextlib.contextmanager
def memcg(mount: str) -> Iterator[str]:
    """A fresh ``cgalloc-test-fdcost-<pid>`` memory cgroup, removed on exit."""
    path = os.path.join(mount, f"cgalloc-test-fdcost-{os.getpid()}")
    os.mkdir(path)
    try:
        yield path
    finally:
        os.rmdir(path)


def charge(cg: str) -> tuple[int, int | None]:
    """(bytes charged, of which kernel) of a memory cgroup, v1 or v2."""

    def num(name: str) -> int | None:
        try:
            with open(os.path.join(cg, name)) as f:
                return int(f.read())
        except OSError:
            return None

    total = num("memory.usage_in_bytes")
    if total is not None:
        return total, num("memory.kmem.usage_in_bytes")
    kernel = None
    with open(os.path.join(cg, "memory.stat")) as f:
        for line in f:
            key, _, value = line.partition(" ")
            if key == "kernel":
                kernel = int(value)
    return num("memory.current") or 0, kernel


def _in_cgroup(cg: str, argv: list[str], cwd: str | None, setup: str) -> subprocess.Popen:
    """Starts ``argv`` with pipes, moves it into ``cg`` and sends it ``setup`` (its input up to
    the point where it waits for "go")."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=cwd)  # fmt: skip
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(proc.pid))
    assert proc.stdin is not None
    proc.stdin.write(setup)
    proc.stdin.flush()
    return proc


def _measured(cg: str, proc: subprocess.Popen, ready: bool) -> tuple[float, float | None, str]:
    """Charge delta (bytes; kernel part) across the child's work between "go" and its reply."""
    assert proc.stdin is not None and proc.stdout is not None
    if ready:
        assert proc.stdout.readline().strip() == "ready"
    before, kbefore = charge(cg)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    reply = proc.stdout.readline().strip()
    after, kafter = charge(cg)
    proc.stdin.close()
    proc.wait(timeout=120)
    kernel = None if kbefore is None or kafter is None else kafter - kbefore
    return after - before, kernel, reply


def fd_kib(binary: str, cg: str, cwd: str, lines: list[str]) -> float:
    """KiB charged per fd the floor holds for ``lines`` ("k PATH" or "d PATH", distinct dirs)."""
    proc = _in_cgroup(cg, [binary, "hold"], cwd, "\n".join(lines) + "\n")
    delta, _kernel, reply = _measured(cg, proc, ready=False)
    assert reply == f"held {len(lines)}", reply
    return delta / len(lines) / 1024


def sampler_kib(cg: str, root: str, dirs: list[str]) -> dict[str, float]:
    """The policy sampler's memory per cgroup: total, kernel part, user RSS (KiB)."""
    argv = [sys.executable, "-m", "bench.fdcost"]
    proc = _in_cgroup(cg, argv, REPO, json.dumps({"root": root, "dirs": dirs}) + "\n")
    delta, kernel, reply = _measured(cg, proc, ready=True)
    rss, fds = (float(x) for x in reply.split())
    n = len(dirs)
    return {"total": delta / n / 1024, "kernel": (kernel or 0) / n / 1024, "rss": rss / n,
            "fds": fds}  # fmt: skip


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def child() -> None:
    """In the measured cgroup: a cold read (nothing kept), then on "go" the two samples that
    open and settle the policy's samplers; replies "<RSS delta KiB> <fds kept>"."""
    from cgalloc.ops import stats

    job = json.loads(sys.stdin.readline())
    h, plain = stats.open_hierarchy(job["root"])
    dirs = tuple(job["dirs"])
    reader = stats.TreeReader(h, allow_any_fs=plain, threads=1)
    snaps = reader.snapshots(dirs)
    del snaps
    print("ready", flush=True)
    sys.stdin.readline()
    rss0 = _rss_kib()
    snaps = [reader.snapshots(dirs) for _ in range(2)][-1]  # the watch loop holds the last one
    assert reader.policy is not None and len(snaps) == len(reader.plans)
    print(_rss_kib() - rss0, reader.policy.fds(len(reader.plans)), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    child()
