"""Read the same files of ~4000 cgroups with every reader and record ns/file for the table.

Each reader reads exactly the files cgalloc's stats read (``stats.mount_plans``): on v1
memory.stat, memory.usage_in_bytes, memory.limit_in_bytes, cpu.stat, cpu.shares,
cpu.cfs_quota_us, cpu.cfs_period_us, cpuacct.usage (+ pids.current, pids.max on the fake tree);
on v2 memory.stat, memory.current, memory.max, cpu.stat, cpu.weight, cpu.max, pids.current,
pids.max.

Every reader is timed as its best round (and the floors as their best iteration): the bench
machine is shared, and other load only ever adds time.
"""

from __future__ import annotations

import shutil
import subprocess
import tracemalloc

import pytest

from bench import naive, results
from cgalloc import stats
from cgalloc.core import pure
from cgalloc.core.records import MAX, OK

COLD_ROUNDS = 5


def _ns_per_file(benchmark, case) -> float:
    return benchmark.stats.stats.min / case.nfiles * 1e9


def _snapshot_bytes(snaps, ndirs: int) -> float:
    """Bytes a snapshot holds per cgroup: its value and status cells plus the dirs tuple slot."""
    total = 0
    for snap in snaps:
        total += snap.values.nbytes + snap.status.nbytes + 8 * len(snap.dirs)
    return total / ndirs


def _warm_note(case, dirs) -> str:
    if len(dirs) == len(case.dirs):
        return ""
    return f"first {len(dirs)} cgroups: RLIMIT_NOFILE holds no more open files"


def _run_floor(floor_bin: str, mode: str, iterations: int, case, dirs) -> float:
    """ns/file of the floor over the case's files, weighted over its mounts.

    The floor runs in each mount with paths relative to it, as the core opens them beneath its
    root fd, so neither pays for walking /sys/fs/cgroup/<controller>.
    """
    total, count = 0.0, 0
    for plan in case.plans:
        paths = [f"{d}/{s.name}" for d in dirs for s in plan.specs]
        out = subprocess.run(
            [floor_bin, mode, str(iterations)],
            input="\n".join(paths),
            capture_output=True,
            text=True,
            check=True,
            cwd=plan.path,
        )
        total += float(out.stdout.split()[2]) * len(paths)
        count += len(paths)
    return total / count


def test_floor_cold(benchmark, case, floor_bin):
    args = (floor_bin, "cold", 3, case, case.dirs)
    ns = benchmark.pedantic(_run_floor, args, rounds=1, iterations=1)
    results.record(case.name, "floor open/read/close (C)", ns)


def test_floor_warm(benchmark, case, floor_bin):
    dirs = case.warm_dirs()
    args = (floor_bin, "warm", 20, case, dirs)
    ns = benchmark.pedantic(_run_floor, args, rounds=1, iterations=1)
    results.record(case.name, "floor pread (C)", ns, _warm_note(case, dirs))


@pytest.mark.parametrize("threads", [1, 2])
def test_core_cold(benchmark, case, threads):
    roots = case.roots()
    plans = case.plans

    def read():
        return [
            r.read(case.dirs, p.specs, threads=threads) for r, p in zip(roots, plans, strict=True)
        ]

    snaps = benchmark.pedantic(read, rounds=COLD_ROUNDS, warmup_rounds=1)
    assert all(st in (OK, MAX) for snap in snaps for st in snap.status)
    name = "core cold, 1 thread" if threads == 1 else "core cold, 2 threads"
    mem = _snapshot_bytes(snaps, len(case.dirs))
    results.record(case.name, name, _ns_per_file(benchmark, case), mem=mem)
    for r in roots:
        r.close()


def test_core_warm(benchmark, case):
    roots = case.roots()
    dirs = case.warm_dirs()
    # A plain tree would otherwise get an fstat per file per sample to notice removed files:
    # that is test-tree emulation, not the cost of sampling cgroupfs.
    samplers = [
        r.sampler(dirs, p.specs, threads=1, detect_unlinked=False)
        for r, p in zip(roots, case.plans, strict=True)
    ]

    def sample():
        return [s.sample() for s in samplers]

    snaps = benchmark.pedantic(sample, rounds=20, warmup_rounds=1)
    # Every cell must be a real read, or the timing measures failures.
    assert all(st in (OK, MAX) for snap in snaps for st in snap.status)
    nfiles = len(dirs) * sum(len(p.specs) for p in case.plans)
    ns = benchmark.stats.stats.min / nfiles * 1e9
    results.record(case.name, "core warm (sampler)", ns, _warm_note(case, dirs))
    for s in samplers:
        s.close()
    for r in roots:
        r.close()


def test_stats_records(benchmark, case):
    reader = stats.TreeReader(case.hierarchy, allow_any_fs=case.plain, threads=1)
    benchmark.pedantic(reader.read, (case.dirs,), rounds=COLD_ROUNDS, warmup_rounds=1)
    tracemalloc.start()
    recs = reader.read(case.dirs)
    size, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    note = "snapshot + per-cgroup CgroupStats records"
    results.record(
        case.name, "stats records cold (TreeReader)", _ns_per_file(benchmark, case), note,
        mem=size / len(recs),
    )  # fmt: skip
    reader.close()


def test_pure_core(benchmark, case):
    roots = case.roots(pure)
    plans = case.plans
    benchmark.pedantic(
        lambda: [r.read(case.dirs, p.specs) for r, p in zip(roots, plans, strict=True)], rounds=2
    )
    results.record(case.name, "pure-Python core cold", _ns_per_file(benchmark, case))


def test_naive(benchmark, case):
    mounts, files = case.naive_layout()
    benchmark.pedantic(naive.read_tree, (mounts, case.dirs, files), rounds=2)
    results.record(case.name, "naive Python (open/readlines/split)", _ns_per_file(benchmark, case))


def test_cgget(benchmark, case):
    cgget = shutil.which("cgget")
    if case.cgget_note or cgget is None:
        note = case.cgget_note or "cgget not installed (Debian cgroup-tools)"
        results.record(case.name, "cgget (libcgroup)", None, note)
        pytest.skip(note)
    args = [cgget]
    for plan in case.plans:
        for spec in plan.specs:
            args += ["-r", spec.name]
    args += ["/" + d for d in case.dirs]
    proc = benchmark.pedantic(
        subprocess.run, (args,), {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE},
        rounds=1, iterations=1,
    )  # fmt: skip
    # cgget opens exactly the files named with -r in each cgroup (checked with strace), so
    # it reads the same file set as the core.
    note = "one process for all cgroups" if proc.returncode == 0 else proc.stderr[:120].decode()
    results.record(case.name, "cgget (libcgroup)", _ns_per_file(benchmark, case), note)


def test_cgget_per_cgroup(benchmark, case):
    """How scripts usually call it: one cgget per cgroup (timed on the first 50 cgroups)."""
    cgget = shutil.which("cgget")
    name = "cgget, one call per cgroup"
    if case.cgget_note or cgget is None:
        results.record(case.name, name, None, case.cgget_note or "cgget not installed")
        pytest.skip(case.cgget_note or "cgget not installed")
    opts = [a for plan in case.plans for spec in plan.specs for a in ("-r", spec.name)]
    sample = case.dirs[:50]

    def run():
        for d in sample:
            subprocess.run([cgget, *opts, "/" + d], stdout=subprocess.DEVNULL, check=True)

    benchmark.pedantic(run, rounds=1, iterations=1)
    per_file = benchmark.stats.stats.min / (len(sample) * len(opts) // 2) * 1e9
    results.record(case.name, name, per_file, f"{len(sample)} processes")
