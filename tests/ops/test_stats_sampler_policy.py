"""The sampler policy (cgalloc.host.sampler_policy): which fds a budget of 4 KiB per cgroup and the
descriptor limit buy, and that TreeReader holds those and no others.

Fake v2 trees (plain files): what is checked is which fds the reader holds, not kernel effects
(the per-fd costs and gains are measured by bench/read_suite.py on real cgroupfs).
"""

from __future__ import annotations

import os

from statstree import make_v2

from cgalloc.host import sampler_policy
from cgalloc.host.core import FileSpec
from cgalloc.ops import stats


def _fds() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}  # fmt: skip


V2_SPECS = [
    FileSpec("memory.stat", "keyed", ("anon",)), FileSpec("memory.current"),
    FileSpec("memory.max"), FileSpec("cpu.stat", "keyed", ("usage_usec",)),
    FileSpec("cpu.weight"), FileSpec("cpu.max", "fields", ("f0", "f1")),
    FileSpec("pids.current"), FileSpec("pids.max"),
]  # fmt: skip


def test_budget_buys_dir_fds_first_then_the_highest_gain_file():
    # 1000 cgroups x 4 KiB = 4000 KiB; less 0.7 KiB each of the sampler's own = 3300;
    # 1000 dir fds x 0.3 KiB = 300 -> 3000 left; kept fds of 6 KiB: 500 of pids.current
    # (7.8 µs, the highest measured gain of these files), nothing left for the next one.
    policy = sampler_policy.choose([V2_SPECS], 1000, free_fds=100_000)
    assert policy.dirfds == 1000
    assert policy.kept["pids.current"] == 500
    assert sum(policy.kept.values()) == 500
    assert policy.counts(V2_SPECS) == [0, 0, 0, 0, 0, 0, 500, 0]


def test_a_larger_budget_keeps_files_in_order_of_gain():
    # 10 cgroups, 20 KiB each, less 0.7 KiB own and 0.3 KiB dir fd each: 190 KiB, 31 kept fds:
    # pids.current 10, pids.max 10, then the 7.5 µs one-line files by name: cpu.max 10,
    # cpu.weight 1
    policy = sampler_policy.choose([V2_SPECS], 10, free_fds=100_000, budget_kib=20.0)
    assert policy.dirfds == 10
    assert {k: v for k, v in policy.kept.items() if v} == {
        "pids.current": 10, "pids.max": 10, "cpu.max": 10, "cpu.weight": 1
    }  # fmt: skip


def test_descriptor_limit_caps_dir_fds_per_mount_and_leaves_none_for_kept_files():
    # v1: three mounts, 1000 cgroups, 1500 free fds -> dir fds for 500 cgroups, none kept
    mounts = [V2_SPECS[:3], V2_SPECS[3:6], V2_SPECS[6:]]
    policy = sampler_policy.choose(mounts, 1000, free_fds=1500)
    assert policy.dirfds == 500
    assert sum(policy.kept.values()) == 0
    assert policy.fds(3) == 1500


def test_no_room_at_all_keeps_nothing():
    assert sampler_policy.choose([V2_SPECS], 1000, free_fds=0) == sampler_policy.FdPolicy(
        0, dict.fromkeys((s.name for s in V2_SPECS), 0)
    )
    assert sampler_policy.choose([V2_SPECS], 1000, 10**6, budget_kib=0.5).fds(1) == 0


def test_first_sample_reads_cold_and_the_second_keeps_the_policy_fds(tmp_path):
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
    # 3 cgroups x 3.3 KiB = 9.9 KiB: 3 dir fds (0.9), then one 6 KiB fd of the top file
    assert kept_after_second == {
        f"{root}/kubepods", f"{root}/kubepods/burstable", f"{root}/kubepods/burstable/pod0001",
        f"{root}/kubepods/pids.current",
    }  # fmt: skip


def test_files_not_kept_are_read_afresh_through_the_dir_fd(tmp_path):
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    make_v2(root, "kubepods", usage=10 * 4096)
    h = stats.plain_tree_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True, threads=1) as reader:
        reader.sample(["kubepods"])
        reader.sample(["kubepods"])
        stat = os.path.join(root, "kubepods", "memory.stat")
        with open(stat) as f:
            text = f.read()
        with open(stat, "w") as f:
            f.write(text.replace("inactive_file ", "inactive_file 4096\nold_inactive_file "))
        os.replace(os.path.join(root, "kubepods", "memory.current"), stat + ".tmp")
        with open(os.path.join(root, "kubepods", "memory.current"), "w") as f:
            f.write(f"{11 * 4096}\n")
        [rec] = reader.sample(["kubepods"])
    assert rec.memory_usage == 11 * 4096
    assert rec.working_set == 10 * 4096


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
