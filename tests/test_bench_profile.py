"""``python -m bench.profile`` (docs/performance.md, "Where the time beyond the floors goes"):
the profile of a guarded command, and its refusal of anything else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CGALLOC_BENCH_")}
    return subprocess.run([sys.executable, "-m", "bench.profile", *args], cwd=ROOT,
                          env={**env, "CGALLOC_BENCH_PODS": "20"}, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_the_stats_profile_is_of_the_command_that_ran():
    done = _run("stats")
    assert done.returncode == 0, done.stderr
    assert "Ordered by: cumulative time" in done.stdout
    assert "cgalloc/cli/stats.py" in done.stdout and "(run_stats)" in done.stdout


def test_anything_but_a_guarded_command_is_refused():
    done = _run("show")
    assert done.returncode == 2 and done.stdout == ""
    assert "setup|teardown|stats" in done.stderr
