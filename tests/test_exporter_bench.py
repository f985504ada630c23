"""bench/exporter_suite.py's floor does every access a scrape does, and runs."""

from __future__ import annotations

import shutil

import pytest

from bench import exporter_suite, trees
from cgalloc.ops import stats


def test_the_floor_reads_what_a_scrape_reads(tmp_path):
    node = exporter_suite.make_node(str(tmp_path), 12)
    running, _measure, _parts = exporter_suite.in_process(node, 1)
    try:
        lines = exporter_suite.floor_lines(running, node)
        targets, _recs = running.run.sample()
    finally:
        running.close()
    paths = {line[2:] for line in lines}
    for t in targets:
        for f in {f.file for f in stats.V2_FIELDS}:
            assert (f"{t.path}/{f}" if t.path else f) in paths, (t.path, f)
    for r in exporter_suite.RESERVED:
        for f in ("memory.peak", "cpu.pressure", "memory.pressure", "io.pressure"):
            assert f"c {r}/{f}" in lines
    assert f"l {node['logs']}" in lines
    assert {"l kubepods", "l kubepods/burstable", "l kubepods/besteffort"} <= set(lines)
    assert sum(1 for t in targets if t.role == "pod") == 12
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler for the floor")
    binary = trees.build_c("scrape_floor", str(tmp_path))
    measure = exporter_suite.floor(binary, lines, node["root"], 2, rss := [])
    assert measure() > 0 and rss and rss[0] > 0
