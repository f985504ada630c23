"""Reading the files cgalloc's stats read (``stats.mount_plans``) of ~4000 cgroups, by every
reader users have, interleaved round by round with the C floors.

On v1: memory.stat, memory.usage_in_bytes, memory.limit_in_bytes, cpu.stat, cpu.shares,
cpu.cfs_quota_us, cpu.cfs_period_us, cpuacct.usage (+ pids.current, pids.max on the fake tree);
on v2: memory.stat, memory.current, memory.max, cpu.stat, cpu.weight, cpu.max, pids.current,
pids.max.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from bench import fdcost, naive, trees
from bench.report import Suite, Target
from bench.rounds import ROUNDS, Contender, idle_cores, interleave, process, timed
from cgalloc.host.core.records import MAX, OK
from cgalloc.ops import stats

COLD_FLOOR = "floor open/read/close (C)"
WARM_FLOOR = "floor, the sampler's access pattern (C)"
CORE_COLD = "core cold, 1 thread"
CORE_COLD2 = "core cold, 2 threads"
CORE_WARM = "core warm (sampler, its fd policy)"
AS_DICTS = "snapshot -> as_dicts()"
SUMMARY = "snapshot -> records -> summary JSON"
NAIVE = "naive Python (open/readlines/split)"
CGGET = "cgget, one process"
CGGET_EACH = "cgget, one process per cgroup"
CGTOP = "systemd-cgtop -b -n 1"
CGROUPSPY = "cgroupspy (PyPI)"
CGUTILS = "cgroup-utils (PyPI)"
WARM_SAMPLES = 3  # the warm readers take the best of this many passes per round, alike
SAMPLER_MEMORY = "sampler memory per cgroup, user + kernel (memcg charge)"
SAMPLER_KERNEL = "  kernel part of that charge (kmem / memory.stat kernel)"
SAMPLER_RSS = "  the process RSS delta (user pages)"
READ_FD_KIB = "kernel memory per kept read fd (memcg charge)"
DIR_FD_KIB = "kernel memory per kept O_PATH dir fd (memcg charge)"


def _floor(binary: str, mode: str, plans: list, dirs: list[str], lines=None) -> float:
    """Seconds the floor program spends on the plans' files (its own clock, per mount, summed).

    It runs in each mount with paths relative to it, as the core opens them beneath its root fd.
    ``lines(plan)``: the "k|d|c PATH" lines of mode "mixed" for that mount.
    """
    total = 0.0
    iterations = 1 if mode == "cold" else WARM_SAMPLES
    for plan in plans:
        paths = lines(plan) if lines else [f"{d}/{s.name}" for d in dirs for s in plan.specs]
        total += fdcost.floor_run(binary, mode, plan.path, paths, iterations) * len(paths)
    return total


def _policy_lines(policy, dirs: list[str]):
    """The floor's "mixed" lines for one mount: what the sampler keeps (k), opens through a
    kept dir fd (d) or by path (c)."""

    def lines(plan) -> list[str]:
        kept = policy.counts(plan.specs)
        return [
            f"{'k' if i < kept[f] else 'd' if i < policy.dirfds else 'c'} "
            + (f"{d}/{s.name}" if d else s.name)
            for i, d in enumerate(dirs)
            for f, s in enumerate(plan.specs)
        ]

    return lines


def _emulated() -> bool:
    """qemu's software CPU (TCG): its vCPUs are host threads, idle or not. The qemu lanes show
    qemu's own CPU model; the CI's Vagrant VMs (libvirt's host-model CPU under TCG) name a real
    model, so systemd-detect-virt tells them apart from KVM ("qemu" against "kvm")."""
    with open("/proc/cpuinfo") as f:
        if "QEMU Virtual CPU" in f.read():
            return True
    try:
        found = subprocess.run(
            ["systemd-detect-virt", "--vm"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.stdout.strip() == "qemu"


def _fd_figures(case: trees.Case, floor_bin: str | None, result: Suite) -> str:
    """The fd policy's inputs and the sampler's memory, measured on a real memory cgroup (see
    bench/fdcost.py); returns why they cannot be measured here, or ""."""
    mount = None if case.plain else fdcost.memory_mount(case.hierarchy)
    if mount is None or not floor_bin or os.geteuid() != 0:
        return "needs a real cgroupfs with a memory controller, as root"
    with fdcost.memcg(mount) as cg:
        mem = fdcost.sampler_kib(cg, case.hierarchy.root, case.dirs)
        plan = case.plans[0]
        dirs = case.dirs  # memcg charges in 256 KiB batches: the more fds, the finer
        single = next(s.name for s in plan.specs if s.kind == "single")
        per_fd = {
            name: fdcost.fd_kib(floor_bin, cg, plan.path, [f"{m} {d}/{single}" for d in dirs])
            for name, m in ((READ_FD_KIB, "k"), (DIR_FD_KIB, "d"))
        }
    result.values[SAMPLER_MEMORY] = ([mem["total"]], "KiB")
    result.values[SAMPLER_KERNEL] = ([mem["kernel"]], "KiB")
    result.values[SAMPLER_RSS] = ([mem["rss"]], "KiB")
    for name, kib in per_fd.items():
        result.values[name] = ([kib], "KiB")
    gains = fdcost.gains(floor_bin, case.plans, case.dirs, ROUNDS)
    for file, modes in gains.items():
        for what, slow, fast in (("kept fd vs openat via dir fd", "dirfd", "warm"),
                                 ("dir fd vs open by path", "cold", "dirfd")):  # fmt: skip
            diffs = [a - b for a, b in zip(modes[slow], modes[fast], strict=True)
                     if a is not None and b is not None]  # fmt: skip
            result.values[f"gain of a {what}, {file}"] = (diffs, "µs per read")
    result.notes.append(
        f"memory: a child process sampling the {len(case.dirs)} cgroups under the fd policy "
        f"({mem['fds']:.0f} fds) in {os.path.basename(cg)}; the charge delta across opening "
        "and two samples per cgroup (memcg batches charges: ±256 KiB per CPU in total)"
    )
    return ""


def _cgget_args(case: trees.Case, dirs: list[str]) -> list[str]:
    args = [shutil.which("cgget") or "cgget"]
    for plan in case.plans:
        for spec in plan.specs:
            args += ["-r", spec.name]
    return args + ["/" + d for d in dirs]


def _cgroupspy(case: trees.Case):
    """How cgroupspy reads a tree: build its node tree, read each node's properties."""
    from cgroupspy import trees as cgtrees

    props = {"memory": ("stat", "usage_in_bytes", "limit_in_bytes"),
             "cpu": ("stat", "shares", "cfs_quota_us", "cfs_period_us"),
             "cpuacct": ("usage",), "pids": ()}  # fmt: skip
    parent = os.path.dirname(case.hierarchy.v1_mounts["memory"])
    groups = [c.encode() for c in props if c in case.hierarchy.v1_mounts]
    wanted = {d.encode() for d in case.dirs}

    def run() -> None:
        tree = cgtrees.Tree(root_path=parent.encode(), groups=groups)
        for node in tree.walk():
            ctrl = node.controller_type
            if node.controller is None or not node.path.startswith(b"/" + (ctrl or b"-") + b"/"):
                continue
            if node.path[len(ctrl) + 2 :] not in wanted:
                continue
            for prop in props.get(ctrl.decode(), ()):
                getattr(node.controller, prop)

    return run


def _cgutils(case: trees.Case):
    """How cgroup-utils reads a cgroup: get_cgroup(path).get_stats() per controller dir."""
    from cgutils import cgroup

    paths = [os.path.join(p.path, d) for p in case.plans for d in case.dirs]

    def run() -> None:
        for p in paths:
            cgroup.get_cgroup(p).get_stats()

    return run


def suite(case: trees.Case, floor_bin: str | None) -> Suite:
    roots = case.roots()
    plans = case.plans
    nfiles = case.nfiles
    trees.raise_nofile()

    def cold(threads: int):
        return lambda: [r.read(case.dirs, p.specs, threads=threads)
                        for r, p in zip(roots, plans, strict=True)]  # fmt: skip

    # the sampler as `stats --watch` runs it: a cold first read, then its fd policy
    sampler = stats.TreeReader(case.hierarchy, allow_any_fs=case.plain, threads=1)
    dirs = tuple(case.dirs)
    for _ in range(2):
        first = sampler.snapshots(dirs)
    assert all(st in (OK, MAX) for snap in first for st in snap.status), "warm read failed"
    policy = sampler.policy
    assert policy is not None
    warm_note = (
        f"{policy.dirfds} of {len(dirs)} cgroups keep a dir fd per mount; kept read fds: "
        + (", ".join(f"{k} {n}" for k, n in policy.kept.items() if n) or "none")
    )

    def warm() -> float:
        best = None
        for _ in range(WARM_SAMPLES):
            t = timed(lambda: sampler.snapshots(dirs))()
            best = t if best is None else min(best, t)
        return best

    snaps = cold(1)()
    assert all(st in (OK, MAX) for snap in snaps for st in snap.status), "cold read failed"
    reader = stats.TreeReader(case.hierarchy, allow_any_fs=case.plain, threads=1)

    def summary() -> None:
        recs = reader._records(case.dirs, snaps)
        when = stats.rfc3339(0)
        json.dumps([{"cpu": stats.cpu_summary(r, None, when),
                     "memory": stats.memory_summary(r, when)} for r in recs])  # fmt: skip

    mounts, files = case.naive_layout()
    cs = [
        Contender(CORE_COLD, timed(cold(1)), nfiles),
        Contender(CORE_COLD2, timed(cold(2)), nfiles),
        Contender(CORE_WARM, warm, nfiles, note=warm_note),
        Contender(AS_DICTS, timed(lambda: [s.as_dicts() for s in snaps]), nfiles),
        Contender(SUMMARY, timed(summary), nfiles, note="what `stats -o json` does after reading"),
        Contender(
            NAIVE, timed(lambda: naive.read_tree(mounts, case.dirs, files)), nfiles, slow=True
        ),
    ]
    if floor_bin:
        cs.insert(0, Contender(COLD_FLOOR, lambda: _floor(floor_bin, "cold", plans, case.dirs),
                               nfiles))  # fmt: skip
        lines = _policy_lines(policy, case.dirs)
        cs.insert(1, Contender(WARM_FLOOR, lambda: _floor(floor_bin, "mixed", plans, [], lines),
                               nfiles, note="the same kept fds, dir fds and opens"))  # fmt: skip
    real = not case.plain
    skipped: list[str] = []
    if real and shutil.which("cgget"):
        args = _cgget_args(case, case.dirs)
        cs.append(Contender(CGGET, process(args), nfiles, slow=True))
        sample = case.dirs[:50]
        each = [process(_cgget_args(case, [d])) for d in sample]

        cs.append(
            Contender(
                CGGET_EACH,
                lambda: sum(run() for run in each),
                len(sample) * case.files_per_dir,
                slow=True,
                note=f"{len(sample)} cgroups, as scripts call it",
            )
        )
    if real and shutil.which("systemd-cgtop"):
        run = process(["systemd-cgtop", "-b", "-n", "1", "--depth=20", "-r"], check=False)
        cs.append(
            Contender(
                CGTOP,
                run,
                nfiles,
                slow=True,
                note="every cgroup of the host, its own file set",
            )
        )
    for tool in ("cgget", "systemd-cgtop"):
        if real and not shutil.which(tool):
            skipped.append(f"{tool} not run: not on PATH")
    if case.hierarchy.version == "v1":
        libraries = [(CGROUPSPY, _cgroupspy, "walks the tree, reads the same files")]
        if real:
            libraries.append(
                (CGUTILS, _cgutils, "get_stats() of each controller dir: its own file set")
            )
        for name, make, note in libraries:
            try:
                cs.append(Contender(name, timed(make(case)), nfiles, slow=True, note=note))
            except ImportError as err:
                skipped.append(f"{name} not run: {err} (pip install -e '.[bench]')")

    idle = idle_cores()
    result = Suite(f"read, {case.name}: {len(case.dirs)} cgroups, {nfiles} files", "file", cs)
    result.times = interleave(cs)
    memory_gap = _fd_figures(case, floor_bin, result)
    two = "" if idle >= 1.8 else f"{idle:.1f} of {os.cpu_count()} cores idle before the run"
    if _emulated():
        two = "emulated vCPUs (qemu TCG) are host threads: no two free cores to show"
    result.targets = [
        Target(
            "cold, 1 thread <= 1.15x open/read/close floor", CORE_COLD, COLD_FLOOR, "ratio", 1.15
        ),
        Target(
            "cold, 2 threads <= 0.7x that 1-thread floor",
            CORE_COLD2,
            COLD_FLOOR,
            "ratio",
            0.7,
            unmeasurable=two,
        ),
        Target("warm sampling <= 1.15x floor, same fds", CORE_WARM, WARM_FLOOR, "ratio", 1.15),
        Target(
            "sampler memory <= 4 KiB per cgroup",
            SAMPLER_MEMORY,
            "",
            "value",
            4.0,
            unmeasurable=memory_gap,
        ),
        Target("as_dicts <= 1.5x the C read", AS_DICTS, CORE_COLD, "ratio", 1.5),
        Target("summary JSON <= 1.5x the C read", SUMMARY, CORE_COLD, "ratio", 1.5),
        Target(">= 5x faster than naive Python, cold", CORE_COLD, NAIVE, "speedup", 5),
        Target(">= 5x faster than naive Python, warm", CORE_WARM, NAIVE, "speedup", 5),
    ]
    if any(c.name == CGGET for c in cs):
        result.targets += [
            Target(
                ">= 100x faster than cgget (one process), cold", CORE_COLD, CGGET, "speedup", 100
            ),
            Target(
                ">= 100x faster than cgget per cgroup, cold", CORE_COLD, CGGET_EACH, "speedup", 100
            ),
            Target(
                ">= 100x faster than cgget per cgroup, warm", CORE_WARM, CGGET_EACH, "speedup", 100
            ),
        ]
    result.notes.append(f"{idle:.1f} of {os.cpu_count()} CPUs idle just before the rounds")
    result.notes += skipped
    sampler.close()
    reader.close()
    for r in roots:
        r.close()
    return result
