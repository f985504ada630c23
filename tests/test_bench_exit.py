"""``python -m bench`` exits non-zero when a contender failed (the VM lanes' bench step relies on
it: before, every setup contender could fail inside the VMs and the step still passed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import bench.__main__ as bench_main
from bench import setup_suite
from bench.report import Suite
from bench.rounds import Contender, interleave


def _suite(broken: bool) -> Suite:
    """A real interleaved suite: one contender that works, one that raises when ``broken``."""

    def fine() -> float:
        return 0.001

    def fails() -> float:
        if broken:
            raise AssertionError(2)
        return 0.002

    cs = [Contender("works", fine, 1), Contender("breaks", fails, 1)]
    s = Suite("a suite", "file", cs)
    s.times = interleave(cs, rounds=2)
    return s


@pytest.mark.parametrize("broken, status", [(False, 0), (True, 1)])
def test_exit_status_follows_failed_rows(monkeypatch, tmp_path, capsys, broken, status):
    # The setup suite is the one asked for; it is replaced by a suite of our own so the test
    # needs no cgroup tree. Everything else (tables, files, exit status) is main()'s own path.
    monkeypatch.setattr(setup_suite, "suite", lambda bindir=None: _suite(broken))
    out = tmp_path / "bench.json"
    assert bench_main.main(["--suites", "setup", "--json", str(out)]) == status
    rows = {r["contender"]: r["note"] for s in json.loads(out.read_text())["suites"]
            for r in s["rows"]}  # fmt: skip
    err = capsys.readouterr().err
    if broken:
        assert rows["breaks"] == "failed: AssertionError: 2"
        assert "bench: FAILED row: a suite: breaks: failed: AssertionError: 2" in err
    else:
        assert rows == {"works": "", "breaks": ""}
        assert "FAILED" not in err


@pytest.mark.parametrize(
    "env, pods",
    [({"CGALLOC_BENCH_PODS": "1000"}, 1000),
     ({"CGALLOC_BENCH_PODS": "1000", "CGALLOC_BENCH_SETUP_PODS": "110"}, 110)],
)  # fmt: skip
def test_the_setup_suite_takes_its_own_pod_count(env, pods):
    """One run reads a tree of 1000 pods and sets up a node of 110 (docs/performance.md)."""
    code = "from bench import bench_setup, trees; print(bench_setup.PODS, trees.PODS)"
    base = {k: v for k, v in os.environ.items() if not k.startswith("CGALLOC_BENCH_")}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, check=True,
                         capture_output=True, text=True).stdout.split()  # fmt: skip
    assert out == [str(pods), "1000"]
