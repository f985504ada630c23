"""`cgalloc stats --watch` under a small open-file limit: raise it, or open the overflow by path.

Each case runs the CLI in a subprocess whose RLIMIT_NOFILE was lowered first, so the limit
of the test process itself is left alone.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest
from statstree import make_v2

PODS = 40
FDS_PER_CGROUP = 1  # the v2 policy's O_PATH dir fd (kept read fds come from a 4 KiB budget)

CHILD = """
import resource, sys
soft, hard = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
from cgalloc.cli import main
try:
    main(sys.argv[3:])
finally:
    print("soft-limit", resource.getrlimit(resource.RLIMIT_NOFILE)[0], file=sys.stderr)
"""


def pod_usage(i: int) -> int:
    return (i + 1) * 1048576


@pytest.fixture
def tree(tmp_path) -> str:
    """A v2 root, kubepods, its tiers and PODS burstable pods with distinct memory usage."""
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    os.unlink(os.path.join(root, "memory.current"))  # the v2 root has none
    for rel in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        make_v2(root, rel, usage=8388608)
    for i in range(PODS):
        make_v2(root, f"kubepods/burstable/pod{i:04d}", usage=pod_usage(i))
    return root


def run_limited(tree: str, soft: int, hard: int) -> tuple[list[dict], list[str], int]:
    """Two --watch samples as JSON documents, the stderr lines, and the child's final soft limit."""
    args = ["stats", "--cgroupfs", tree, "-o", "json", "--watch", "0.01", "--count", "2"]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(soft), str(hard), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    decoder, docs, text = json.JSONDecoder(), [], proc.stdout.strip()
    while text:
        doc, end = decoder.raw_decode(text)
        docs.append(doc)
        text = text[end:].strip()
    lines = proc.stderr.splitlines()
    final_soft = int(lines[-1].split()[1])
    return docs, lines[:-1], final_soft


def usage_by_uid(doc: dict) -> dict[str, int | None]:
    return {p["podRef"]["uid"]: p["memory"].get("usageBytes") for p in doc["pods"]}


def expected_usage() -> dict[str, int]:
    return {f"{i:04d}": pod_usage(i) for i in range(PODS)}


@pytest.mark.parametrize("limit", [64 + 16 + 10 * FDS_PER_CGROUP, 64])
def test_overflow_beyond_the_hard_limit_is_opened_by_path_with_one_warning(tree, limit):
    # Room for the dir fds of a few cgroups (the process holds some fds of its own), or, at
    # the 64 fds stats reserves, none: the rest are opened by path every sample.
    docs, warnings, final_soft = run_limited(tree, limit, limit)
    assert len(docs) == 2
    for doc in docs:
        assert usage_by_uid(doc) == expected_usage()
        assert all(p["memory"]["workingSetBytes"] is not None for p in doc["pods"])
    # the second sample has a rate for every pod, warm or cold
    assert all(p["cpu"]["usageNanoCores"] == 0 for p in docs[1]["pods"])
    assert len(warnings) == 1
    assert warnings[0].startswith(f"cgalloc: warning: the open-file limit (RLIMIT_NOFILE {limit})")
    assert f"of {PODS + 4} cgroups" in warnings[0]
    if limit == 64:
        assert f"for only 0 of {PODS + 4} cgroups" in warnings[0]
    assert final_soft == limit


def test_soft_limit_is_raised_to_the_hard_limit_when_needed(tree):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    need = (PODS + 4) * (FDS_PER_CGROUP + 1) + 64  # dir fds and some kept files
    if hard != resource.RLIM_INFINITY and hard < need + 64:
        pytest.skip(f"the hard open-file limit {hard} is below what this test needs")
    docs, warnings, final_soft = run_limited(tree, 100, hard)
    assert warnings == []
    assert final_soft == hard
    for doc in docs:
        assert usage_by_uid(doc) == expected_usage()


def test_no_raise_when_the_soft_limit_suffices(tree):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft = 1024
    if hard != resource.RLIM_INFINITY and hard < soft:
        pytest.skip(f"the hard open-file limit {hard} is below {soft}")
    docs, warnings, final_soft = run_limited(tree, soft, hard)
    assert warnings == []
    assert final_soft == soft
    assert usage_by_uid(docs[0]) == expected_usage()
