"""The sampler policy: a one-shot read keeps nothing open; sampling again keeps files open.

Fake v2 tree (plain files): what is measured is which fds the reader holds, not kernel effects.
"""

from __future__ import annotations

import os

from test_stats import make_v2

from cgalloc import stats


def _fds() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}  # fmt: skip


def test_first_sample_reads_cold_and_the_second_keeps_files_open(tmp_path):
    root = str(tmp_path / "cg")
    dirs = ["kubepods", "kubepods/burstable", "kubepods/burstable/pod0001"]
    make_v2(root, "", usage=0)
    for i, rel in enumerate(dirs):
        make_v2(root, rel, usage=(i + 1) * 4096)
    h = stats.plain_tree_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True, threads=1) as reader:
        before = _fds()
        first = reader.sample(dirs)
        kept_after_first = {p for p in _fds() - before if p.startswith(root + "/kubepods")}
        second = reader.sample(dirs)
        kept_after_second = {p for p in _fds() - before if p.startswith(root + "/kubepods")}
    assert [r.memory_usage for r in first] == [4096, 8192, 12288]
    assert [r.memory_usage for r in second] == [4096, 8192, 12288]
    assert kept_after_first == set()
    assert f"{root}/kubepods/burstable/pod0001/memory.current" in kept_after_second


def test_sampling_keeps_only_one_line_files_open_and_rereads_generated_ones(tmp_path):
    # memory.stat and cpu.stat are generated on every read (a kept fd saves little) while each
    # kept fd pins a kernel page: they are re-read cold, so a change between samples shows.
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    make_v2(root, "kubepods", usage=10 * 4096)
    h = stats.plain_tree_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True, threads=1) as reader:
        before = _fds()
        reader.sample(["kubepods"])
        reader.sample(["kubepods"])
        kept = {os.path.basename(p) for p in _fds() - before if "/kubepods/" in p}
        stat = os.path.join(root, "kubepods", "memory.stat")
        with open(stat) as f:
            text = f.read()
        with open(stat, "w") as f:
            f.write(text.replace("inactive_file ", "inactive_file 4096\nold_inactive_file "))
        [rec] = reader.sample(["kubepods"])
    assert kept == {"memory.current", "memory.max", "cpu.weight", "cpu.max", "pids.current",
                    "pids.max"}  # fmt: skip
    assert rec.working_set == 9 * 4096


def test_boot_time_is_btime_of_proc_stat(tmp_path):
    (tmp_path / "stat").write_text("cpu  1 2 3 4 5 6 7 8 9 10\nintr 0\nbtime 1763856000\n")
    assert stats.boot_time(str(tmp_path)) == 1763856000.0
    psutil = __import__("pytest").importorskip("psutil")
    assert abs(stats.boot_time() - psutil.boot_time()) <= 1


def test_stats_json_is_one_compact_line(tmp_path, capsys):
    """Like the kubelet's /stats/summary: json.Marshal output, one line (C-encoded here)."""
    import json

    from clirun import run_cli

    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    for rel in ("kubepods", "kubepods/burstable", "kubepods/besteffort", "kubepods/poda-b"):
        make_v2(root, rel, usage=4096)
    code, out, _ = run_cli(capsys, "stats", "--cgroupfs", root, "-o", "json", "--interval", "0")
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert [p["podRef"]["uid"] for p in doc["pods"]] == ["a-b"]
    assert ", " not in lines[0] and ": " not in lines[0]
