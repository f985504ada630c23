"""``python -m bench --suites setup``: cgalloc setup of PODS pods against csrc/setup_floor.c
(the same mkdir/write syscalls and nothing else, one after another) and a shell script
batching ``mkdir -p`` / ``echo``, interleaved round by round; and the 0-write re-run against
the C floor reading the same files.

Every contender gets a fresh tree each round, made and removed outside its timing (the tree,
node arguments and scripts are bench_setup.py's). The floor needs a real cgroupfs (its mkdir
makes the interface files): as root on a cgroup v1 host (setup writes only below the bench's
own ``cgalloc-test-bench-*`` cgroups there), or with ``CGALLOC_BENCH_REAL=1`` in a VM lane (on
v2 setup enables controllers in the root's cgroup.subtree_control). Elsewhere the tree is the
fake v2 one, and the floor claims are reported as not measurable here.

cgalloc's contenders run in this process (``cgalloc.cli.main``), as the floor's clock times its
syscalls only; the same commands as whole processes (``python -m cgalloc``, with the
interpreter's start and the imports) are shown beside them, without a target.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable

from bench import bench_setup as bs
from bench.report import Suite, Target
from bench.rounds import Contender, interleave, process, timed
from bench.trees import build_c
from cgalloc.host.cgroupfs import detect

CGALLOC_COLD = "cgalloc setup, cold"
CGALLOC_QUIET = "cgalloc setup --quiet, cold"
FLOOR_COLD = "C floor: the same mkdir/write syscalls"
SHELL_COLD = "shell script, batched mkdir -p + echo"
CGALLOC_RERUN = "cgalloc setup, re-run (0 writes)"
FLOOR_RERUN = "C floor: reading the same files"
TEARDOWN = "cgalloc teardown --quiet"
FLOOR_TEARDOWN = "C floor: the same rmdir/write syscalls"
WHOLE_COLD = "cgalloc setup --quiet, cold, whole process"
WHOLE_RERUN = "cgalloc setup --quiet, re-run, whole process"
NO_FLOOR = "the floor needs a real cgroupfs (as root on a v1 host, or CGALLOC_BENCH_REAL=1 in a VM)"


def _on_fresh(prepare: Callable[[bs.Node], object], timed: Callable[[object], float]):
    """A measure: a fresh tree, ``prepare`` untimed, ``timed`` (which returns seconds), removal."""

    def run() -> float:
        node = bs._fresh()
        try:
            return timed(prepare(node))
        finally:
            node.remove()

    return run


def _cgalloc_rerun(node: bs.Node) -> bs.Node:
    node.cgalloc()
    return node


def _quiet_checked(node: bs.Node) -> float:
    """``setup --quiet`` timed; then, untimed, proof it did the whole setup: a dry run finds
    nothing left to change."""
    seconds = timed(node.quiet)()
    left = node.actions()
    if left:
        raise RuntimeError(f"setup --quiet left {len(left)} changes undone")
    return seconds


def _json_checked(node: bs.Node) -> float:
    """``setup -o json`` timed (the command, not the bench reading its report back); then,
    untimed, proof it made every change of a cold setup."""
    seconds, report = node.timed_json()
    if not report["writes"] or report["writes"] != len(report["plan"]["actions"]):
        raise RuntimeError(f"setup -o json made {report['writes']} changes of its plan's")
    return seconds


def _zero_writes(node: bs.Node) -> float:
    """The re-run, ``setup -o json``, timed as the command alone; then, untimed, proof it
    made no change."""
    seconds, report = node.timed_json()
    if report["writes"]:
        raise RuntimeError(f"the re-run made {report['writes']} writes")
    return seconds


def _whole(node: bs.Node) -> float:
    """``python -m cgalloc setup --quiet`` as a process (the interpreter's start and imports
    included); then, untimed, proof it did the whole setup."""
    seconds = process([sys.executable, "-m", "cgalloc", "setup", *node.args, "--quiet"])()
    if node.actions():
        raise RuntimeError("setup --quiet (whole process) left changes undone")
    return seconds


def _floor_run(binary: str) -> Callable[[object], float]:
    def run(ops: object) -> float:
        out = subprocess.run([binary], input=ops, capture_output=True, text=True, check=True)
        return float(out.stdout.split()[1]) / 1e9  # its own clock: the syscalls only

    return run


def _set_up(node: bs.Node) -> bs.Node:
    node.quiet()
    return node


def _teardown_checked(node: bs.Node) -> float:
    """``teardown --quiet`` timed; then, untimed, proof it undid the whole setup: no record
    is left."""
    seconds = timed(node.teardown)()
    if (node.base / "state" / "owned.json").exists():
        raise RuntimeError("teardown left a record")
    return seconds


def _floor_teardown_ops(node: bs.Node) -> str:
    """The teardown's syscalls for csrc/setup_floor.c, after a setup (untimed): each recorded
    original written back, each created cgroup removed (deepest first), each controller
    enabled outside them disabled."""
    node.quiet()
    rec = node.record()
    lines = [f"write {os.path.join(m, p, f)} {old or chr(10)}" for m, p, f, old in rec["changed"]]
    created = sorted(rec["created"], key=lambda mp: (-mp[1].count("/"), mp))
    lines += [f"rmdir {os.path.join(m, p)}" for m, p in created]
    made = {tuple(c) for c in rec["created"]}
    lines += [
        f"write {os.path.join(m, p, 'cgroup.subtree_control')} "
        + " ".join(f"-{c}" for c in sorted(ctrls))
        for m, p, ctrls in rec["enabled"]
        if (m, p) not in made
    ]
    return "\n".join(lines) + "\n"


def _floor_rerun_ops(node: bs.Node) -> str:
    ops = bs._floor_ops(node, rerun=True)  # from the plan, while there is one
    node.cgalloc()
    return ops


def suite(bindir: str | None = None) -> Suite:
    """The setup suite; ``bindir`` holds the compiled floor (a temporary dir by default)."""
    bindir = bindir or tempfile.mkdtemp(prefix="cgalloc-bench-bin-")
    shell = lambda node: node.shell_script()[0]  # noqa: E731
    cs = [
        Contender(CGALLOC_COLD, _on_fresh(lambda n: n, _json_checked), bs.PODS,
                  note="-o json: the plan and every change rendered"),
        Contender(CGALLOC_QUIET, _on_fresh(lambda n: n, _quiet_checked), bs.PODS,
                  note="no report rendered"),
        Contender(
            SHELL_COLD,
            _on_fresh(shell, lambda s: process(["bash", str(s)])()),
            bs.PODS,
        ),
        Contender(
            CGALLOC_RERUN, _on_fresh(_cgalloc_rerun, _zero_writes), bs.PODS,
        ),
        Contender(TEARDOWN, _on_fresh(_set_up, _teardown_checked), bs.PODS,
                  note="after a setup of the same tree"),
        Contender(WHOLE_COLD, _on_fresh(lambda n: n, _whole), bs.PODS,
                  note="python -m cgalloc: start and imports included"),
        Contender(WHOLE_RERUN, _on_fresh(_cgalloc_rerun, _whole), bs.PODS,
                  note="python -m cgalloc: start and imports included"),
    ]  # fmt: skip
    why = "" if bs.REAL else NO_FLOOR
    binary = build_c("setup_floor", bindir) if bs.REAL else None
    if bs.REAL and binary is None:
        why = "no C compiler for csrc/setup_floor.c"
    if binary:
        cold_ops = lambda n: bs._floor_ops(n, rerun=False)  # noqa: E731
        cs.insert(1, Contender(FLOOR_COLD, _on_fresh(cold_ops, _floor_run(binary)), bs.PODS))
        cs.append(Contender(FLOOR_RERUN, _on_fresh(_floor_rerun_ops, _floor_run(binary)), bs.PODS))
        cs.append(
            Contender(FLOOR_TEARDOWN, _on_fresh(_floor_teardown_ops, _floor_run(binary)), bs.PODS)
        )
    where = f"real {detect().version} cgroupfs" if bs.REAL else "fake v2 tree (tmpfs)"
    result = Suite(f"setup of {bs.PODS} pods, {where}", "pod", cs)
    result.times = interleave(cs)
    result.targets = [
        Target("setup <= 1.5x the C floor", CGALLOC_COLD, FLOOR_COLD, "ratio", 1.5,
               unmeasurable=why),
        Target("setup --quiet <= 1.5x the C floor", CGALLOC_QUIET, FLOOR_COLD, "ratio", 1.5,
               unmeasurable=why),
        Target("teardown <= 2x the C floor", TEARDOWN, FLOOR_TEARDOWN, "ratio", 2.0,
               unmeasurable=why),
        Target("setup faster than the batched shell script", CGALLOC_COLD, SHELL_COLD, "ratio",
               1.0),
    ]  # fmt: skip
    if not bs.REAL:
        result.notes.append(
            "fake tree: cgalloc's time includes the test-only fake kernel filling new dirs"
        )
    return result
