"""Stats records: working set, key selection per version, CPU rate, summary shapes, reads."""

from __future__ import annotations

import os

import pytest
from statstree import fake_sysfs_net, make_v1, make_v2, write_files

from cgalloc.model.hierarchy import Hierarchy
from cgalloc.model.naming import (
    CGROUPFS,
    SYSTEMD,
)
from cgalloc.ops import stats
from cgalloc.ops.stats import UNLIMITED

# ---- pure computations ---------------------------------------------------------------------


def test_working_set_subtracts_inactive_file():
    assert stats.working_set(10_485_760, 4_194_304) == 6_291_456


def test_working_set_clamps_at_zero():
    # cAdvisor: inactive_file can exceed usage transiently; the working set is then 0.
    assert stats.working_set(4096, 8192) == 0


def test_working_set_without_inactive_file_is_usage():
    assert stats.working_set(4096, None) == 4096
    assert stats.working_set(None, 10) is None


def _build(path: str, raw: dict[str, int | None], t_ns: int) -> stats.CgroupStats:
    """The record of one found dir whose fields read as ``raw``."""
    return stats.records([path], {k: [v] for k, v in raw.items()}, [True], t_ns)[0]


def _rec(cpu_ns: int | None, t_ns: int) -> stats.CgroupStats:
    return _build("x", {"cpu_usage_ns": cpu_ns}, t_ns)


def test_usage_nano_cores_two_samples():
    # 0.5 s of CPU over 2 s of wall time is a quarter of a core.
    prev, cur = _rec(1_000_000_000, 10_000_000_000), _rec(1_500_000_000, 12_000_000_000)
    assert stats.usage_nano_cores(prev, cur) == 250_000_000


def test_usage_nano_cores_truncates_like_uint64_of_float64():
    # 1 ns over 3 ns: float64(1)/float64(3)*1e9 = 333333333.33..., uint64() truncates.
    assert stats.usage_nano_cores(_rec(0, 0), _rec(1, 3)) == 333_333_333
    # 2 cores busy over 1 s: 2e9 ns of CPU per 1e9 ns.
    assert stats.usage_nano_cores(_rec(5, 1), _rec(2_000_000_005, 1_000_000_001)) == 2_000_000_000


def test_usage_nano_cores_refuses_backwards_and_single_sample():
    assert stats.usage_nano_cores(None, _rec(10, 10)) is None
    assert stats.usage_nano_cores(_rec(10, 10), _rec(5, 20)) is None  # cumulative decrease
    assert stats.usage_nano_cores(_rec(10, 20), _rec(15, 20)) is None  # no time passed
    assert stats.usage_nano_cores(_rec(10, 30), _rec(15, 20)) is None  # time backwards


def test_key_selection_v1_uses_hierarchical_totals():
    by_name = {f.name: f for f in stats.fields_for("v1")}
    assert (by_name["inactive_file"].file, by_name["inactive_file"].key) == (
        "memory.stat",
        "total_inactive_file",
    )
    assert by_name["rss"].key == "total_rss"
    assert by_name["pgfault"].key == "total_pgfault"
    assert by_name["pgmajfault"].key == "total_pgmajfault"
    assert (by_name["cpu_usage_ns"].controller, by_name["cpu_usage_ns"].file) == (
        "cpuacct",
        "cpuacct.usage",
    )
    assert by_name["throttled_ns"].key == "throttled_time"
    assert by_name["memory_usage"].file == "memory.usage_in_bytes"
    assert by_name["memory_limit"].file == "memory.limit_in_bytes"
    # hybrid nodes keep every controller on v1
    assert stats.fields_for("hybrid") == stats.fields_for("v1")


def test_key_selection_v2():
    by_name = {f.name: f for f in stats.fields_for("v2")}
    assert by_name["inactive_file"].key == "inactive_file"
    assert by_name["rss"].key == "anon"
    assert by_name["pgfault"].key == "pgfault"
    assert (by_name["cpu_usage_ns"].file, by_name["cpu_usage_ns"].key) == ("cpu.stat", "usage_usec")
    assert by_name["cpu_usage_ns"].scale == 1000
    assert (by_name["throttled_ns"].key, by_name["throttled_ns"].scale) == ("throttled_usec", 1000)
    assert by_name["memory_usage"].file == "memory.current"
    assert by_name["memory_limit"].file == "memory.max"


def test_v2_root_usage_is_anon_plus_file():
    rec = _build("", {"anon": 300, "file": 700, "inactive_file": 200}, 0)
    assert (rec.memory_usage, rec.working_set) == (1000, 800)


def test_memory_summary_available_bytes_only_below_2_pow_62():
    limited = _build("a", {"memory_usage": 100, "inactive_file": 40, "memory_limit": 1000}, 0)
    out = stats.memory_summary(limited, "T")
    assert out["availableBytes"] == 940
    assert out["workingSetBytes"] == 60
    at_bound = _build("b", {"memory_usage": 0, "memory_limit": 1 << 62}, 0)
    assert stats.memory_summary(at_bound, "T")["availableBytes"] == 1 << 62
    v1_none = _build("c", {"memory_usage": 0, "memory_limit": 9223372036854771712}, 0)
    assert "availableBytes" not in stats.memory_summary(v1_none, "T")
    v2_max = _build("d", {"memory_usage": 0, "memory_limit": UNLIMITED}, 0)
    assert "availableBytes" not in stats.memory_summary(v2_max, "T")


def test_rfc3339_is_utc_whole_seconds():
    assert stats.rfc3339(0.9) == "1970-01-01T00:00:00Z"
    assert stats.rfc3339(1_700_000_000) == "2023-11-14T22:13:20Z"


# ---- reading fake trees with known contents --------------------------------------------------


def test_read_v1_tree_selects_hierarchical_keys(tmp_path):
    root = str(tmp_path)
    make_v1(root, "kubepods", usage=4194304)
    h, plain = stats.open_hierarchy(root)
    assert (h.version, plain) == ("v1", True)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        [rec] = reader.read(["kubepods"])
    assert rec.found
    assert rec.cpu_usage_ns == 987654321000
    assert (rec.nr_periods, rec.nr_throttled, rec.throttled_ns) == (40, 3, 123456789)
    assert rec.memory_usage == 4194304
    assert rec.working_set == 4194304 - 3145728  # total_inactive_file, not inactive_file
    assert rec.rss == 2097152  # total_rss
    assert (rec.pgfault, rec.pgmajfault) == (777, 9)
    assert rec.pids_current == 17
    assert rec.memory_limit == 9223372036854771712
    assert (rec.cpu_shares, rec.cpu_quota_us, rec.cpu_period_us) == (1024, UNLIMITED, 100000)
    assert rec.pids_max == UNLIMITED
    assert rec.cpu_weight is None


def test_read_v1_working_set_clamped(tmp_path):
    root = str(tmp_path)
    make_v1(root, "kubepods", usage=1048576)  # below total_inactive_file (3 MiB)
    h, _ = stats.open_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        [rec] = reader.read(["kubepods"])
    assert rec.working_set == 0


def test_read_v2_tree_scales_usec_and_reads_cpu_max(tmp_path):
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    make_v2(root, "kubepods", usage=8388608, memory_max="16777216")
    h, plain = stats.open_hierarchy(root)
    assert (h.version, plain) == ("v2", True)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        [rec, missing] = reader.read(["kubepods", "kubepods/pod-gone"])
    assert rec.cpu_usage_ns == 5000001000
    assert rec.throttled_ns == 7000
    assert (rec.nr_periods, rec.nr_throttled) == (10, 2)
    assert rec.memory_usage == 8388608
    assert rec.working_set == 8388608 - 3145728
    assert rec.rss == 2097152  # anon
    assert (rec.pgfault, rec.pgmajfault) == (1234, 56)
    assert (rec.cpu_weight, rec.cpu_quota_us, rec.cpu_period_us) == (39, 150000, 100000)
    assert (rec.memory_limit, rec.pids_current, rec.pids_max) == (16777216, 4, 1024)
    assert rec.cpu_shares is None
    assert not missing.found
    assert missing.memory_usage is None and missing.cpu_usage_ns is None


def test_a_dir_with_none_of_the_files_is_found_and_a_max_counts_as_read(tmp_path):
    """``found`` is whether the directory exists: a cgroup without these controllers' files
    (every cell ENOENT) is found; a dir missing from the mount is not. Mixed with read dirs
    on both sides, so the per-dir flags cannot come out shifted."""
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    make_v2(root, "a", usage=4096)
    os.mkdir(os.path.join(root, "bare"))
    make_v2(root, "b", usage=8192, memory_max="max")
    h, _ = stats.open_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        recs = reader.read(["a", "gone", "bare", "b"])
    assert [r.found for r in recs] == [True, False, True, True]
    assert [r.memory_usage for r in recs] == [4096, None, None, 8192]
    assert recs[3].memory_limit == stats.UNLIMITED


def test_v2_root_without_memory_current_uses_anon_plus_file(tmp_path):
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    os.unlink(os.path.join(root, "memory.current"))
    h, _ = stats.open_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        [rec] = reader.read([""])
    assert rec.memory_usage == 2097152 + 5242880
    assert rec.working_set == 2097152 + 5242880 - 3145728


def test_sampler_rereads_changed_values_and_follows_dir_changes(tmp_path):
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    make_v2(root, "a", usage=4096)
    h, _ = stats.open_hierarchy(root)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        [first] = reader.sample(["a"])
        write_files(os.path.join(root, "a"), {"memory.current": "8192\n"})
        make_v2(root, "b", usage=12288)
        second_a, second_b = reader.sample(["a", "b"])
    assert first.memory_usage == 4096
    assert (second_a.memory_usage, second_b.memory_usage) == (8192, 12288)
    assert second_a.time_ns > first.time_ns


def test_real_host_hierarchy_read_only():
    """This machine's own hierarchy, read only: the root cgroup has usage on every layout."""
    if not os.path.isdir("/sys/fs/cgroup"):
        pytest.skip("no /sys/fs/cgroup on this host")
    h, plain = stats.open_hierarchy("/sys/fs/cgroup")
    assert not plain
    with stats.TreeReader(h) as reader:
        [rec] = reader.read([""])
    assert rec.found
    assert rec.cpu_usage_ns is not None and rec.cpu_usage_ns > 0
    assert rec.memory_usage is not None and rec.memory_usage > 0
    assert 0 <= rec.working_set <= rec.memory_usage


def test_overflow_flags_cpu_over_reservation_from_two_samples():
    target = stats.Target("kube-reserved", "kube-reserved", reserved_milli_cpu=100)
    prev = _build("kube-reserved", {"cpu_usage_ns": 0}, 0)
    busy = _build("kube-reserved", {"cpu_usage_ns": 200_000_000}, 1_000_000_000)
    idle = _build("kube-reserved", {"cpu_usage_ns": 50_000_000}, 1_000_000_000)
    assert stats.overflow(target, busy, prev) == ["cpu 200m > reserved 100m"]
    assert stats.overflow(target, idle, prev) == []
    assert stats.overflow(target, busy, None) == []  # one sample: no rate to compare


def test_pod_uid_from_directory_names():
    assert CGROUPFS.pod_uid("pod0f1e-22") == "0f1e-22"
    assert CGROUPFS.pod_uid("burstable") is None
    assert SYSTEMD.pod_uid("kubepods-burstable-pod0f1e_22.slice") == "0f1e-22"
    assert SYSTEMD.pod_uid("kubepods-pod0f1e_22.slice") == "0f1e-22"
    assert SYSTEMD.pod_uid("kubepods-besteffort.slice") is None
    assert SYSTEMD.pod_uid("kubepods-pod.slice") is None


# ---- node network ----------------------------------------------------------------------------


def test_sysfs_counters_leave_out_loopback_and_put_eth0_inline(tmp_path):
    from cgalloc.host import netstats

    base = dict(rx_bytes=0, rx_errors=0, tx_bytes=0, tx_errors=0)
    net = fake_sysfs_net(
        tmp_path,
        {
            "lo": base,
            "eth0": dict(rx_bytes=1500, rx_errors=2, tx_bytes=900, tx_errors=1),
            "eth1": dict(base, rx_bytes=7),
        },
    )
    ifaces = netstats.from_sysfs(net)
    assert [i.name for i in ifaces] == ["eth0", "eth1"]
    doc = netstats.network_summary(ifaces, "T")
    assert doc == {
        "time": "T",
        "name": "eth0",
        "rxBytes": 1500,
        "rxErrors": 2,
        "txBytes": 900,
        "txErrors": 1,
        "interfaces": [
            {"name": "eth0", "rxBytes": 1500, "rxErrors": 2, "txBytes": 900, "txErrors": 1},
            {"name": "eth1", "rxBytes": 7, "rxErrors": 0, "txBytes": 0, "txErrors": 0},
        ],
    }
    # no eth0: the inline interface's name is still there (no omitempty), empty; no
    # interfaces at all: the list is left out (omitempty), as the kubelet's summary has it
    assert netstats.network_summary(ifaces[1:], "T")["name"] == ""
    assert netstats.network_summary([], "T") == {"time": "T", "name": ""}


def test_netlink_and_sysfs_name_the_same_interfaces_on_this_host():
    from cgalloc.host import netstats

    try:
        via_netlink = netstats.from_netlink()
    except OSError as err:
        pytest.skip(f"no rtnetlink here: {err}")
    assert [i.name for i in via_netlink] == [i.name for i in netstats.from_sysfs()]


def test_start_times_take_the_oldest_directory_mtime_across_mounts(tmp_path):
    # cAdvisor container/common/helpers.go getSpecInternal: the creation time is the lowest
    # ModTime of the cgroup's directory over every hierarchy; a hierarchy without it is skipped.
    for ctrl in ("memory", "cpu", "pids"):
        (tmp_path / ctrl / "kubepods" / "podA").mkdir(parents=True)
    (tmp_path / "memory" / "kubepods" / "podB").mkdir()
    os.utime(tmp_path / "memory" / "kubepods" / "podA", (0, 2_000_000_000))
    os.utime(tmp_path / "cpu" / "kubepods" / "podA", (0, 1_000_000_000))
    os.utime(tmp_path / "pids" / "kubepods" / "podA", (0, 3_000_000_000))
    os.utime(tmp_path / "memory" / "kubepods" / "podB", (0, 1_500_000_000))
    h = stats.plain_tree_hierarchy(str(tmp_path))
    got = stats.start_times(h, ["kubepods/podA", "/kubepods/podB/", "kubepods/gone"], 0.0)
    assert got == [1_000_000_000, 1_500_000_000, None]


def test_start_times_use_the_hierarchies_the_kubelets_cadvisor_uses(tmp_path):
    # cAdvisor lib/container/libcontainer/helpers.go getCgroupSubsystemsHelper keeps a
    # subsystem when needSubsys says so: supportedSubsystems, narrowed to the metrics the
    # kubelet includes (pkg/kubelet/cadvisor/cadvisor_linux.go New: cpu/memory usage, disk I/O,
    # processes; devices always). cpuset, hugetlb and name=systemd are not looked at.
    names = ("cpu", "cpuacct", "memory", "pids", "blkio", "devices", "cpuset", "hugetlb",
             "systemd", "freezer")  # fmt: skip
    mounts = {c: str(tmp_path / c) for c in names}
    h = Hierarchy("v1", str(tmp_path), mounts, None, frozenset(names))
    oldest = {"podA": "cpuset", "podB": "systemd", "podC": "blkio", "podD": "devices",
              "podE": "hugetlb"}  # fmt: skip
    for pod, where in oldest.items():
        for c in names:
            d = tmp_path / c / "kubepods" / pod
            d.mkdir(parents=True)
            (d / "cgroup.clone_children").write_text("0\n")
            when = 1_600_000_000 if c == where else 1_700_000_000
            os.utime(d / "cgroup.clone_children", (0, when))
            os.utime(d, (0, when))
    got = stats.start_times(h, [f"kubepods/{p}" for p in oldest], 0.0)
    assert got == [1_700_000_000, 1_700_000_000, 1_600_000_000, 1_600_000_000, 1_700_000_000]


@pytest.mark.parametrize(("version", "marker"), [("v1", "cgroup.clone_children"),
                                                 ("v2", "cgroup.events")])  # fmt: skip
def test_start_times_take_the_marker_file_when_it_is_older_than_the_directory(
    tmp_path, version, marker
):
    # cAdvisor getSpecInternal: a directory's mtime moves when a child cgroup is made, so the
    # ModTime of cgroup.clone_children (cgroup.events when cgroup2UnifiedMode) counts too, in
    # every hierarchy that has the directory; and no time is before the boot.
    if version == "v2":
        (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
        dirs = [tmp_path]
    else:
        dirs = [tmp_path / c for c in ("memory", "cpu")]
    for base in dirs:
        for pod, created, child_made in (("podA", 1_700_000_000, 1_700_000_500),
                                         ("podB", 1_700_000_100, 1_700_000_100)):  # fmt: skip
            d = base / "kubepods" / pod
            d.mkdir(parents=True)
            if pod == "podA" or base == dirs[0]:
                (d / marker).write_text("")
                os.utime(d / marker, (0, created))
            os.utime(d, (0, child_made))
    (dirs[0] / "kubepods" / "podC").mkdir()
    os.utime(dirs[0] / "kubepods" / "podC", (0, 1_000))
    h = stats.plain_tree_hierarchy(str(tmp_path))
    assert h.version == version
    pods = ["kubepods/podA", "kubepods/podB", "kubepods/podC"]
    # podA: its file, not the directory a child moved; podB: equal; podC: clamped to the boot
    assert stats.start_times(h, pods, 1_600_000_000.0) == [1_700_000_000, 1_700_000_100,
                                                             1_600_000_000]  # fmt: skip


def _dated_tree(tmp_path):
    """A v1 tree of the mounts cAdvisor dates over, two of them (blkio, devices) not read by
    stats: per pod the oldest time sits in a different mount, on the dir or its marker."""
    names = ("cpu", "cpuacct", "memory", "pids", "blkio", "devices", "cpuset")
    h = Hierarchy("v1", str(tmp_path), {c: str(tmp_path / c) for c in names}, None,
                  frozenset(names))  # fmt: skip
    oldest = {"podA": ("memory", "marker"), "podB": ("cpuacct", "dir"),
              "podC": ("blkio", "marker"), "podD": ("devices", "dir"),
              "podE": ("cpuset", "dir")}  # fmt: skip
    for pod, (where, what) in oldest.items():
        for c in names:
            d = tmp_path / c / "kubepods" / pod
            d.mkdir(parents=True)
            (d / "cgroup.clone_children").write_text("0\n")
            (d / "memory.usage_in_bytes").write_text("4096\n")
            old = c == where
            os.utime(d / "cgroup.clone_children", (0, 1_600_000_000 if old and what == "marker"
                                                    else 1_700_000_050))  # fmt: skip
            os.utime(d, (0, 1_600_000_001 if old and what == "dir" else 1_700_000_000))
    return h, [f"kubepods/{p}" for p in oldest]


def test_start_times_from_a_dated_read_equal_those_stat_for_alone(tmp_path):
    # cAdvisor getSpecInternal: the lowest of dir and marker mtimes over the hierarchies it
    # uses. A dated read takes the mounts it reads; the others (blkio, devices) are stat'd.
    h, pods = _dated_tree(tmp_path)
    want = [1_600_000_000, 1_600_000_001, 1_600_000_000, 1_600_000_001, 1_700_000_000]
    assert stats.start_times(h, pods, 0.0) == want
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        reader.read([*pods, "kubepods/gone"], dated=True)
        assert reader.dates is not None
        assert sorted(reader.dates.by_mount) == [
            str(tmp_path / c) for c in ("cpu", "cpuacct", "memory", "pids")
        ]
        assert stats.start_times(h, pods, 0.0, reader.dates) == want
        assert stats.start_times(h, ["kubepods/gone"], 0.0, reader.dates) == [None]
        # a path the read did not take: every mount is stat'd for it
        assert stats.start_times(h, ["kubepods/podA", "kubepods"], 0.0, reader.dates) == [
            1_600_000_000, stats.start_times(h, ["kubepods"], 0.0)[0]]  # fmt: skip
        reader.read(pods)
        assert reader.dates is None


def test_a_dated_read_leaves_only_the_mounts_it_did_not_read_to_stat(tmp_path, monkeypatch):
    h, pods = _dated_tree(tmp_path)
    asked: list[list[str]] = []
    stat_oldest = stats._stat_oldest

    def spy(mounts, rels, marker):
        asked.append(list(mounts))
        return stat_oldest(mounts, rels, marker)

    monkeypatch.setattr(stats, "_stat_oldest", spy)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        reader.read(pods, dated=True)
        stats.start_times(h, pods, 0.0, reader.dates)
    assert asked == [[str(tmp_path / "blkio"), str(tmp_path / "devices")]]


def test_a_dated_read_of_a_v2_tree_leaves_nothing_to_stat(tmp_path, monkeypatch):
    # cAdvisor's cgroup2UnifiedMode: the one hierarchy, with cgroup.events as the marker
    make_v2(str(tmp_path), "", usage=0)
    make_v2(str(tmp_path), "kubepods/podA", usage=4096)
    (tmp_path / "kubepods/podA/cgroup.events").write_text("populated 0\n")
    os.utime(tmp_path / "kubepods/podA/cgroup.events", (0, 1_600_000_000))
    os.utime(tmp_path / "kubepods/podA", (0, 1_700_000_000))
    h = stats.plain_tree_hierarchy(str(tmp_path))
    monkeypatch.setattr(stats, "_stat_oldest", lambda *a: pytest.fail("stat pass on v2"))
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        reader.read(["kubepods/podA"], dated=True)
        assert stats.start_times(h, ["kubepods/podA"], 0.0, reader.dates) == [1_600_000_000]


def test_a_warm_sample_leaves_no_dates_and_a_cold_first_one_takes_them(tmp_path):
    h, pods = _dated_tree(tmp_path)
    with stats.TreeReader(h, allow_any_fs=True) as reader:
        reader.sample(pods, dated=True)
        assert reader.dates is not None and reader.dates.dirs == tuple(pods)
        reader.sample(pods, dated=True)
        assert reader.dates is None
