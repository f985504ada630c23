"""``python -m bench``: interleaved benchmarks of reading, whole commands and conversion, with
every target's verdict. ``python -m bench setup`` runs the setup benchmark (pytest-benchmark).

  python -m bench [--trees fake-v1,fake-v2,real] [--suites read,commands,setup]
                  [--json PATH] [--markdown PATH]

Knobs: CGALLOC_BENCH_PODS (pods, default 1000, 3 containers each), CGALLOC_BENCH_SETUP_PODS
(the setup suite's pods, default CGALLOC_BENCH_PODS), CGALLOC_BENCH_ROUNDS (rounds, default 5),
CGALLOC_BENCH_SLOW_ROUNDS (rounds the slow contenders take part in, default 3; 0 leaves them
out).

Exit status 1 when any contender failed (its row says "failed: ..."), after every table and file
is written: a broken contender must not pass as a benchmark run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import sys
import tempfile

from bench import command_suite, read_suite, report, rounds, trees

# the environment the suites read: printed with the command, which reproduces nothing without it
KNOBS = (
    "CGALLOC_BENCH_REAL",
    "CGALLOC_BENCH_PODS",
    "CGALLOC_BENCH_SETUP_PODS",
    "CGALLOC_BENCH_ROUNDS",
    "CGALLOC_BENCH_SLOW_ROUNDS",
    "CGALLOC_BENCH_FLAT_PODS",
)

TREES = ("fake-v1", "fake-v2", "real")


def _setup(argv: list[str]) -> int:
    import pytest

    here = os.path.dirname(os.path.abspath(__file__))
    args = [os.path.join(here, "bench_setup.py"), "--benchmark-only", "-q",
            "-p", "no:cacheprovider", *argv]  # fmt: skip
    return pytest.main(args)


def _case(name: str):
    if name == "real":
        return trees.real()
    return trees.fake(name.split("-")[1])


def main(argv: list[str]) -> int:
    if argv[:1] == ["setup"]:
        return _setup(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default=",".join(TREES), help="comma-separated: " + ", ".join(TREES))
    ap.add_argument(
        "--suites", default="read,commands",
        help="comma-separated: read, commands, setup (setup: its own fresh trees, see "
        "bench/setup_suite.py)",
    )  # fmt: skip
    ap.add_argument("--json", metavar="PATH", help="write every row and target verdict as JSON")
    ap.add_argument(
        "--markdown", metavar="PATH", help="write the tables as Markdown (docs/performance.md)"
    )
    args = ap.parse_args(argv)
    wanted = set(args.suites.split(","))
    # the setup suite makes its own trees: asked alone, no tree is built for the others
    names = [t for t in args.trees.split(",") if t] if wanted - {"setup"} else []
    for t in names:
        if t not in TREES:
            ap.error(f"--trees: {t!r} is not one of {', '.join(TREES)}")
    skipped = []
    if "real" in names and (why := trees.real_unavailable()):
        names.remove("real")
        skipped.append(f"real tree: {why}")
    suites: list[report.Suite] = []
    with tempfile.TemporaryDirectory(prefix="cgalloc-bench-bin-") as bindir:
        floor = trees.build_c("floor", bindir) if names else None  # setup alone: no read floor
        for name in names:
            with _case(name) as case:
                print(f"bench: {case.name}, {len(case.dirs)} cgroups ...", file=sys.stderr)
                if "read" in wanted:
                    suites.append(read_suite.suite(case, floor))
                    print(report.text(suites[-1]), flush=True)
                # Whole commands once, on the most telling tree: the real one when there is one.
                if "commands" in wanted and name == (names[-1] if "real" in names else names[0]):
                    suites.append(command_suite.suite(case, floor))
                    print(report.text(suites[-1]), flush=True)
        if "setup" in wanted:
            from bench import setup_suite  # imports the test suite's fake kernel

            suites.append(setup_suite.suite(bindir))
            print(report.text(suites[-1]), flush=True)
    for s in skipped:
        print(f"skipped: {s}")
    knobs = [f"{k}={os.environ[k]}" for k in KNOBS if k in os.environ]
    env = f"env {shlex.join(knobs)} " if knobs else ""
    command = f"sudo {env}.venv/bin/python -m bench " + shlex.join(argv)
    machine = {
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pods": trees.PODS,
        "rounds": rounds.ROUNDS,
        "slow_rounds": rounds.SLOW_ROUNDS,
        "skipped": skipped,
        "command": command,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report.as_json(suites, machine), f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(suites, command))
    failed = [f"{s.title}: {c.name}: {c.note}" for s in suites for c in s.contenders
              if c.note.startswith("failed:")]  # fmt: skip
    for row in failed:
        print(f"bench: FAILED row: {row}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1:]))
