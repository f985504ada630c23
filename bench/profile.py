"""``python -m bench.profile setup|teardown|stats``: where a guarded command's time goes beyond
its floor (docs/performance.md), as cProfile's cumulative table of one run in this process.

- ``setup``: ``setup --quiet`` of the setup suite's node (CGALLOC_BENCH_SETUP_PODS; the real
  cgroupfs as root on a v1 host, as ``--suites setup`` makes it), after one run unprofiled, as
  the bench's in-process rounds run it;
- ``teardown``: the same for ``teardown --quiet``, after a setup of that node;
- ``stats``: ``stats -o json`` over the commands suite's fake v2 tree (CGALLOC_BENCH_PODS), the
  first run of this process, so the imports the command makes (typer, its own modules) are in
  it, as in the bench's whole-process runs.

cProfile slows Python, not the syscalls: read the parts, not their sum.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import pstats
import sys
from collections.abc import Callable

from bench import bench_setup, trees
from bench.command_suite import _stats_argv
from cgalloc.cli import main as cli_main

LINES = 40


def _node_run(which: str) -> Callable[[cProfile.Profile], None]:
    """One run of ``which`` on a fresh node, the command alone under ``prof``."""

    def once(prof: cProfile.Profile) -> None:
        node = bench_setup._fresh()
        try:
            if which == "teardown":
                node.quiet()
            prof.runcall(node.teardown if which == "teardown" else node.quiet)
        finally:
            node.remove()

    return once


def profile(which: str) -> pstats.Stats:
    prof = cProfile.Profile()
    if which == "stats":
        with trees.fake("v2") as case, contextlib.redirect_stdout(io.StringIO()):
            try:
                prof.runcall(cli_main, _stats_argv([], case))
            except SystemExit as exc:
                if exc.code:  # a failed command's profile would say nothing of the guard
                    raise
    else:
        once = _node_run(which)
        once(cProfile.Profile())  # the warm-up the bench's rounds have; its profile dropped
        once(prof)
    return pstats.Stats(prof, stream=sys.stdout)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("setup", "teardown", "stats"):
        print(__doc__.strip().split("\n\n")[0], file=sys.stderr)
        return 2
    profile(argv[0]).sort_stats("cumulative").print_stats(LINES)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
