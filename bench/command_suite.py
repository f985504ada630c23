"""Whole-process time of the commands users run, interleaved with what they are held against:
``python -c pass``, ``python -c 'import typer'`` and the C floor reading the same files as
``cgalloc stats``. Peak RSS of ``cgalloc stats`` comes from separate runs (/usr/bin/time).

A second C run adds the stats ``-o json``'s start times take (cAdvisor's rule: each dated
cgroup's directory and marker file in each hierarchy cAdvisor reads), as lstats by path, in
the process reading that mount: how a program without the read's dir fds makes them. It is no
lower bound (stats makes four hierarchies' of them through the dir fds its read opens, which
costs less) and not the issue's floor, so the CPU ratio against it is shown apart, "not an
issue target", to tell the syscalls the document needs from the Python around them.

Flatness: the same ``stats -o json`` also runs, in the same rounds, on trees of other sizes made
alongside the main one (knob ``CGALLOC_BENCH_FLAT_PODS``, e.g. ``3000,10000``; unset or empty:
none, so a VM lane under its time bound does not build 50,000 cgroups unasked) and on one with
no pods. A size's per-cgroup cost is its CPU time beyond the no-pod run's, per
pod cgroup, in the same round; "flat" means that cost at each larger size is at most 1.2 × the
main tree's (median of the per-round ratios).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

from bench import trees
from bench.report import Suite, Target
from bench.rounds import Contender, interleave, process
from cgalloc.ops import stats

NODE = [
    "--capacity", "cpu=32,memory=128Gi,pid=4194304,ephemeral-storage=500Gi",
    "--kube-reserved", "cpu=500m,memory=2Gi", "--system-reserved", "cpu=500m,memory=1Gi",
]  # fmt: skip
PASS = "python -c pass"
TYPER = "python -c 'import typer'"
HELP = "cgalloc --help"
SHOW = "cgalloc show"
KUBELET_CONFIG = "cgalloc kubelet-config"
STATS = "cgalloc stats -o json --interval 0"
FLOOR = "C floor, the files stats reads (whole process)"
TYPER_PLUS_FLOOR = "import typer + C floor"
FLOOR_DATED = "C, the files stats reads and its start times' lstats by path (whole process)"
TYPER_PLUS_DATED = "import typer + C with start times' lstats by path"
STATS_RSS = "cgalloc stats peak RSS (/usr/bin/time, separate runs)"
FLAT_PODS = [int(n) for n in os.environ.get("CGALLOC_BENCH_FLAT_PODS", "").split(",")
             if n.strip()]  # fmt: skip
FLAT_BOUND = 1.2  # per-cgroup cost at a larger size, at most this times the main tree's


def _cgalloc() -> list[str]:
    """The console script users run, next to this interpreter; ``-m cgalloc`` without one."""
    script = os.path.join(os.path.dirname(sys.executable), "cgalloc")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "cgalloc"]


def _peak_rss(argv: list[str], runs: int = 3) -> list[float]:
    """Peak RSS (MiB) of ``argv``, measured by /usr/bin/time in runs of their own.

    Not from our own wait4: a child forked from this large process carries the parent's
    resident size into its ru_maxrss until exec, so it would report the bench, not cgalloc.
    """
    timer = shutil.which("time") or "/usr/bin/time"
    if not os.path.exists(timer):
        return []
    out = []
    with tempfile.NamedTemporaryFile("r") as f:
        for _ in range(runs):
            cmd = [timer, "-f", "%M", "-o", f.name, *argv]
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            f.seek(0)
            out.append(int(f.read().split()[-1]) / 1024)
    return out


def _stats_argv(cgalloc: list[str], case: trees.Case) -> list[str]:
    argv = [*cgalloc, "stats", *NODE, "--cgroupfs", case.hierarchy.root, "-o", "json",
            "--interval", "0"]  # fmt: skip
    return argv + (["--cgroup-root", f"/{case.top}"] if case.top else [])


def _sized(n: int) -> str:
    return f"{STATS}, {n} pods"


def _sized_cases(case: trees.Case, stack: contextlib.ExitStack,
                 notes: list[str]) -> dict[int, trees.Case]:  # fmt: skip
    """Trees of the flatness sizes (and one of no pods) made like ``case``; a size this host
    cannot make is left out with a note saying why."""
    out: dict[int, trees.Case] = {}
    sizes = [n for n in FLAT_PODS if n != trees.PODS]
    for n in [0, *sizes] if sizes else []:
        try:
            if case.plain:
                made = stack.enter_context(trees.fake(case.hierarchy.version, n))
            else:
                made = stack.enter_context(trees.real(n, suffix=f"-p{n}"))
        except OSError as err:
            notes.append(f"no tree of {n} pods here: {err}")
            if n == 0:
                return {}  # no fixed cost to subtract: no flatness figures
            continue
        out[n] = made
    return out


def _flat_rows(result: Suite, cpu: dict[str, list], pods: dict[int, int]) -> list[Target]:
    """Per round, each size's CPU time beyond the no-pod run's; units: its pod cgroups."""
    base = cpu.get(_sized(0))
    if not base:
        return []
    names = {}
    for n, key in pods.items():
        values = cpu.get(key)
        if not n or not values or len(values) != len(base):
            continue
        name = f"stats, {n} pods, CPU beyond the no-pod run (ns column: per pod cgroup)"
        result.times[name] = [a - b for a, b in zip(values, base, strict=True)]
        result.contenders.append(Contender(name, lambda: 0.0, n, note="per round, subtracted"))
        names[n] = name
    main = names.get(trees.PODS)
    return [
        Target(f"stats per-cgroup CPU flat: {n} pods <= {FLAT_BOUND}x {trees.PODS} pods",
               name, main, "ratio", FLAT_BOUND)
        for n, name in names.items() if main and n > trees.PODS
    ]  # fmt: skip


def _stats_dirs(case: trees.Case) -> list[str]:
    """The cgroups ``cgalloc stats`` reads: the hierarchy's root (``""``: ``--cgroup-root``
    moves kubepods, not the node), kubepods, QoS tiers, pods (not containers)."""
    return [""] + [d for d in case.dirs if not os.path.basename(d)[:1].isdigit()
                   or os.path.basename(d).startswith("pod")]  # fmt: skip


def floor_inputs(case: trees.Case) -> list[tuple[str, list[str]]]:
    """Per mount, the files (relative to it) ``stats --cgroupfs <root>`` reads, its mounts
    found as stats finds them: on a real v1 host every controller's mount (pids too), not only
    the hierarchies the tree was built for.

    Only files that exist: stats also tries the root's (the v1 pids root has no pids.*, nor
    does a fake tree's root), and a mount without the tree would fail every open; the bench
    tree is made in every mount stats reads, so that last never happens here.
    """
    h, _ = stats.open_hierarchy(case.hierarchy.root)
    dirs = _stats_dirs(case)
    out = []
    for plan in stats.mount_plans(h):
        if case.top and not os.path.isdir(os.path.join(plan.path, case.top)):
            continue
        files = [os.path.join(d, s.name) for d in dirs for s in plan.specs]
        # a root file (no "/": dir "") only where the root has it
        out.append((plan.path, [f for f in files if "/" in f
                                or os.path.exists(os.path.join(plan.path, f))]))  # fmt: skip
    return out


def start_inputs(case: trees.Case) -> list[tuple[str, list[str]]]:
    """Per cAdvisor mount holding the tree, the paths (relative to it) ``stats -o json``'s start
    times stat: kubepods' and each pod's directory and marker file (the document dates the
    system containers and the pods, not the root or the QoS tiers)."""
    h, _ = stats.open_hierarchy(case.hierarchy.root)
    marker = stats.start_marker(h)
    names = {d: os.path.basename(d) for d in _stats_dirs(case)}
    dated = [d for d, name in names.items() if name == "kubepods" or name.startswith("pod")]
    out = []
    for mount in stats.cadvisor_mounts(h):
        paths = [p for d in dated for p in (d, os.path.join(d, marker))]
        paths = [p for p in paths if os.path.lexists(os.path.join(mount, p))]
        if paths:
            out.append((mount, paths))
    return out


def _floor(floor_bin: str, inputs: list[tuple[str, list[str]]], cpu: list[float],
           stat_inputs: list[tuple[str, list[str]]] = ()):  # fmt: skip
    """One measure: a cold ``floor_bin`` process per (mount, files), in turn, the wall time
    summed and their CPU time summed into one entry of ``cpu``. With ``stat_inputs`` (mount,
    paths), each mount's process (one of its own where nothing is read there) also lstats
    those paths (mode ``mixed``: ``c`` lines read, ``s`` lines stat)."""
    each: list[float] = []
    reads, stat = dict(inputs), dict(stat_inputs)
    if stat:
        mode = "mixed"
        work = {m: [f"c {f}" for f in reads.get(m, ())] + [f"s {p}" for p in stat.get(m, ())]
                for m in dict.fromkeys([*reads, *stat])}  # fmt: skip
    else:
        mode, work = "cold", reads
    runs = [process([floor_bin, mode, "1"], stdin="\n".join(lines), cwd=mount, cpu=each)
            for mount, lines in work.items()]  # fmt: skip

    def run() -> float:
        each.clear()
        wall = sum(r() for r in runs)
        cpu.append(sum(each))
        return wall

    return run


def _byte_compile() -> None:
    """Compile cgalloc's modules as a pip install does, so no run pays for compiling them
    (an editable install under PYTHONDONTWRITEBYTECODE=1 would, on every run)."""
    import cgalloc

    package = os.path.dirname(os.path.abspath(cgalloc.__file__))
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _cpu_rows(result: Suite, kept: dict[str, list]) -> list[Target]:
    """Rows and targets of the CPU time of the same runs (``kept``: every run succeeded)."""
    for name, values in kept.items():
        result.times[f"{name} (CPU)"] = values
        result.contenders.append(Contender(f"{name} (CPU)", lambda: 0.0, 1,
                                           note="user + system of the same runs"))  # fmt: skip
    out = []
    if TYPER in kept and KUBELET_CONFIG in kept:
        out.append(Target("kubelet-config <= 1.5x import typer, CPU time",
                          f"{KUBELET_CONFIG} (CPU)", f"{TYPER} (CPU)", "ratio", 1.5))  # fmt: skip
    if TYPER in kept and FLOOR in kept and STATS in kept:
        both = f"{TYPER_PLUS_FLOOR} (CPU)"
        result.times[both] = [a + b for a, b in zip(kept[TYPER], kept[FLOOR], strict=True)]
        result.contenders.append(Contender(both, lambda: 0.0, 1, note="per round, added"))
        out.append(Target("stats -o json <= 1.3x (import typer + C floor), CPU time",
                          f"{STATS} (CPU)", both, "ratio", 1.3))  # fmt: skip
    if TYPER in kept and FLOOR_DATED in kept and STATS in kept:
        dated = f"{TYPER_PLUS_DATED} (CPU)"
        result.times[dated] = [a + b for a, b in zip(kept[TYPER], kept[FLOOR_DATED],
                                                     strict=True)]  # fmt: skip
        result.contenders.append(Contender(dated, lambda: 0.0, 1, note="per round, added"))
        out.append(Target("stats -o json <= 1.3x (import typer + C with start times' lstats "
                          "by path), CPU time (not an issue target)", f"{STATS} (CPU)", dated,
                          "ratio", 1.3))  # fmt: skip
    return out


def suite(case: trees.Case, floor_bin: str | None) -> Suite:
    with contextlib.ExitStack() as stack:
        notes: list[str] = []
        sized = _sized_cases(case, stack, notes)
        result = _suite(case, floor_bin, sized)
        result.notes += notes
        return result


def _suite(case: trees.Case, floor_bin: str | None, sized: dict[int, trees.Case]) -> Suite:
    _byte_compile()
    cgalloc = _cgalloc()
    stats_argv = _stats_argv(cgalloc, case)
    dirs = _stats_dirs(case)
    # CPU seconds of the same runs, one list per contender (the first entry is the warm-up):
    # on a loaded machine wall time waits for a CPU, CPU time does not.
    cpu: dict[str, list] = {n: [] for n in (TYPER, KUBELET_CONFIG, STATS, FLOOR, FLOOR_DATED)}
    cpu |= {_sized(n): [] for n in sized}
    cs = [
        Contender(PASS, process([sys.executable, "-c", "pass"]), 1),
        Contender(TYPER, process([sys.executable, "-c", "import typer"], cpu=cpu[TYPER]), 1),
        Contender(HELP, process([*cgalloc, "--help"]), 1),
        Contender(SHOW, process([*cgalloc, "show", *NODE]), 1),
        Contender(KUBELET_CONFIG,
                  process([*cgalloc, "kubelet-config", *NODE], cpu=cpu[KUBELET_CONFIG]), 1),
        Contender(STATS, process(stats_argv, cpu=cpu[STATS]), 1,
                  note=f"{len(dirs)} cgroups of {case.name}"),
    ]  # fmt: skip
    for n, made in sized.items():
        cs.append(Contender(_sized(n), process(_stats_argv(cgalloc, made), cpu=cpu[_sized(n)]),
                            1, note=f"{len(_stats_dirs(made))} cgroups"))  # fmt: skip
    if floor_bin:
        reads = floor_inputs(case)
        cs.append(Contender(FLOOR, _floor(floor_bin, reads, cpu[FLOOR]), 1,
                            note="one process per mount"))  # fmt: skip
        cs.append(Contender(FLOOR_DATED, _floor(floor_bin, reads, cpu[FLOOR_DATED],
                                                start_inputs(case)), 1,
                            note="one process per mount: reads and lstats"))  # fmt: skip
    result = Suite(f"whole-process time, {case.name}", "process", cs)
    result.times = interleave(cs)
    if floor_bin:
        result.times[TYPER_PLUS_FLOOR] = [
            None if a is None or b is None else a + b
            for a, b in zip(result.times[TYPER], result.times[FLOOR], strict=True)
        ]
        result.contenders.append(Contender(TYPER_PLUS_FLOOR, lambda: 0.0, 1,
                                           note="per round: the two above added"))  # fmt: skip
    # CPU times of the contenders whose every run succeeded, the warm-up run dropped
    kept = {n: v[1:] for n, v in cpu.items() if len(v) == len(result.times[TYPER]) + 1}
    cpu_targets = _cpu_rows(result, kept)
    if sized:
        # the main tree is the flatness reference: its runs are the STATS contender's
        sizes = {n: _sized(n) for n in sized} | {trees.PODS: STATS}
        cpu_targets += _flat_rows(result, kept, sizes)
    result.values[STATS_RSS] = (_peak_rss(stats_argv), "MiB")
    result.targets = [
        Target("--help <= 1.5x import typer", HELP, TYPER, "ratio", 1.5),
        Target("show <= 1.5x import typer", SHOW, TYPER, "ratio", 1.5),
        Target("kubelet-config <= 1.5x import typer", KUBELET_CONFIG, TYPER, "ratio", 1.5),
        Target(
            "stats -o json <= 1.3x (import typer + C floor)", STATS, TYPER_PLUS_FLOOR, "ratio", 1.3
        ),
        Target("stats peak RSS <= 40 MiB", STATS_RSS, "", "value", 40.0),
        *cpu_targets,
    ]
    if not shutil.which("cc") and not shutil.which("gcc"):
        result.notes.append("no C compiler: no floor")
    return result
