"""cgroupfs: hierarchy detection from mountinfo and Limits ↔ v1/v2 files."""

from __future__ import annotations

import os

import pytest

from cgalloc.errors import HostError
from cgalloc.host.cgroupfs import detect, parse_mountinfo
from cgalloc.model.hierarchy import (
    Hierarchy,
    controller_dirs,
    hugetlb_page_size,
    limit_files,
    parse_limit_value,
    required_controllers,
)
from cgalloc.model.limits import HUGETLB_UNBOUNDED, Limits

MI = 1024**2
GI = 1024**3


def write_mountinfo(tmp_path, root, lines):
    path = tmp_path / "mountinfo"
    text = "\n".join(line.replace("ROOT", str(root)) for line in lines) + "\n"
    path.write_text(text)
    return str(path)


V1_LINES = [
    "22 1 0:21 / /proc rw,nosuid - proc proc rw",
    "31 23 0:28 / ROOT rw,relatime - tmpfs tmpfs rw,mode=755",
    "32 31 0:29 / ROOT/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
    "34 31 0:31 / ROOT/cpuset rw,relatime - cgroup cgroup rw,cpuset",
    "35 31 0:32 / ROOT/memory rw,relatime - cgroup cgroup rw,memory",
    "39 31 0:36 / ROOT/pids rw,relatime - cgroup cgroup rw,pids",
    "40 31 0:37 / ROOT/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd",
    "42 31 0:39 / ROOT/hugetlb rw,relatime shared:9 - cgroup cgroup rw,hugetlb",
    # A second mount of memory deeper down: the shortest mountpoint wins.
    "43 35 0:32 / ROOT/memory/nested/memory rw - cgroup cgroup rw,memory",
    # Elsewhere: ignored.
    "50 1 0:40 / /other/cgroup rw - cgroup cgroup rw,blkio",
]


def test_detect_v1_comounted(tmp_path):
    root = tmp_path / "cg"
    h = detect(str(root), write_mountinfo(tmp_path, root, V1_LINES))
    assert h.version == "v1"
    assert h.unified is None
    assert h.v1_mounts == {
        "cpu": f"{root}/cpu,cpuacct",
        "cpuacct": f"{root}/cpu,cpuacct",
        "cpuset": f"{root}/cpuset",
        "memory": f"{root}/memory",
        "pids": f"{root}/pids",
        "systemd": f"{root}/systemd",
        "hugetlb": f"{root}/hugetlb",
    }
    assert h.controllers == frozenset(h.v1_mounts)
    dirs = controller_dirs(h, "kubepods/burstable")
    assert dirs["cpu"] == dirs["cpuacct"] == f"{root}/cpu,cpuacct/kubepods/burstable"
    assert dirs["systemd"] == f"{root}/systemd/kubepods/burstable"
    assert len(set(dirs.values())) == 6
    assert controller_dirs(h, "")["memory"] == f"{root}/memory"


def test_detect_hybrid(tmp_path):
    root = tmp_path / "cg"
    lines = [*V1_LINES, "41 31 0:38 / ROOT/unified rw,relatime - cgroup2 cgroup2 rw"]
    h = detect(str(root), write_mountinfo(tmp_path, root, lines))
    assert h.version == "hybrid"
    assert h.unified == f"{root}/unified"
    assert "memory" in h.controllers


def test_detect_v2(tmp_path):
    root = tmp_path / "cg"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    lines = ["30 23 0:27 / ROOT rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate"]
    h = detect(str(root), write_mountinfo(tmp_path, root, lines))
    assert h == Hierarchy(
        "v2",
        str(root),
        {},
        str(root),
        frozenset({"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}),
    )
    # The kubelet's needed set ∩ what the root offers, all in one directory.
    assert controller_dirs(h, "kubepods.slice") == {
        c: f"{root}/kubepods.slice" for c in ("cpu", "cpuset", "memory", "hugetlb", "pids")
    }


def test_detect_errors(tmp_path):
    root = tmp_path / "cg"
    with pytest.raises(HostError, match="no cgroup filesystem is mounted"):
        detect(str(root), write_mountinfo(tmp_path, root, V1_LINES[:2]))
    only_unified = ["41 31 0:38 / ROOT/unified rw - cgroup2 cgroup2 rw"]
    with pytest.raises(HostError, match="only a cgroup2 mount"):
        detect(str(root), write_mountinfo(tmp_path, root, only_unified))
    with pytest.raises(HostError, match="cannot read"):
        detect(str(root), str(tmp_path / "missing"))


def test_mountinfo_escapes_and_optional_fields():
    text = "32 31 0:29 / /a\\040b rw shared:1 master:2 - cgroup cgroup rw,cpu\n"
    assert parse_mountinfo(text) == [("/a b", "cgroup", frozenset({"rw", "cpu"}))]


V1 = Hierarchy("v1", "/sys/fs/cgroup", {}, None, frozenset())
V2 = Hierarchy("v2", "/sys/fs/cgroup", {}, "/sys/fs/cgroup", frozenset())
FULL = Limits(
    cpu_shares=1024,
    cpu_quota=50000,
    cpu_period=100000,
    memory=512 * MI,
    pids=1024,
    cpuset_cpus="2-7",
    cpuset_mems="0",
    hugetlb=((2 * MI, 256 * MI), (GI, HUGETLB_UNBOUNDED)),
)


def test_limit_files_v1():
    assert limit_files(V1, FULL) == [
        ("pids", "pids.max", "1024"),
        ("memory", "memory.limit_in_bytes", "536870912"),
        ("cpu", "cpu.shares", "1024"),
        ("cpu", "cpu.cfs_period_us", "100000"),
        ("cpu", "cpu.cfs_quota_us", "50000"),
        ("cpuset", "cpuset.mems", "0"),
        ("cpuset", "cpuset.cpus", "2-7"),
        ("hugetlb", "hugetlb.2MB.limit_in_bytes", "268435456"),
        ("hugetlb", "hugetlb.1GB.limit_in_bytes", "4611686018427387904"),
    ]


def test_limit_files_v2_weights():
    assert limit_files(V2, FULL) == [
        ("pids", "pids.max", "1024"),
        ("memory", "memory.max", "536870912"),
        ("cpu", "cpu.weight", "39"),
        ("cpu", "cpu.max", "50000 100000"),
        ("cpuset", "cpuset.mems", "0"),
        ("cpuset", "cpuset.cpus", "2-7"),
        ("hugetlb", "hugetlb.2MB.max", "268435456"),
        ("hugetlb", "hugetlb.1GB.max", "4611686018427387904"),
    ]
    assert limit_files(V2, Limits(cpu_shares=1024), "runc") == [("cpu", "cpu.weight", "100")]


def test_limit_files_unlimited_and_unset():
    unlimited = Limits(cpu_quota=-1, cpu_period=100000, memory=-1, pids=-1, hugetlb=((65536, -1),))
    assert limit_files(V2, unlimited) == [
        ("pids", "pids.max", "max"),
        ("memory", "memory.max", "max"),
        ("cpu", "cpu.max", "max 100000"),
        ("hugetlb", "hugetlb.64KB.max", "max"),
    ]
    assert limit_files(V1, unlimited) == [
        ("pids", "pids.max", "max"),
        ("memory", "memory.limit_in_bytes", "-1"),
        ("cpu", "cpu.cfs_period_us", "100000"),
        ("cpu", "cpu.cfs_quota_us", "-1"),
        ("hugetlb", "hugetlb.64KB.limit_in_bytes", "-1"),
    ]
    # 0 leaves shares, quota, memory and pids unset, as opencontainers/cgroups does.
    assert limit_files(V1, Limits(cpu_shares=0, memory=0, pids=0, cpu_quota=0)) == []
    assert limit_files(V2, Limits()) == []


def test_parse_limit_value():
    assert parse_limit_value("memory.limit_in_bytes", "9223372036854771712\n") == -1
    assert parse_limit_value("memory.limit_in_bytes", "536870912\n") == 512 * MI
    assert parse_limit_value("hugetlb.2MB.limit_in_bytes", "9223372036852678656\n") == -1
    assert parse_limit_value("hugetlb.1GB.limit_in_bytes", "4611686018427387904") == 1 << 62
    assert parse_limit_value("cpu.cfs_quota_us", "-1\n") == -1
    assert parse_limit_value("cpu.shares", "1024\n") == 1024
    assert parse_limit_value("memory.max", "max\n") == -1
    assert parse_limit_value("pids.max", "max\n") == -1
    assert parse_limit_value("pids.max", "4096\n") == 4096
    assert parse_limit_value("hugetlb.2MB.max", "max\n") == -1
    assert parse_limit_value("cpu.max", "max 100000\n") == (-1, 100000)
    assert parse_limit_value("cpu.max", "50000 100000\n") == (50000, 100000)
    assert parse_limit_value("cpuset.cpus", "0,1,2,3,6\n") == "0-3,6"
    assert parse_limit_value("cpuset.mems", "\n") == ""
    with pytest.raises(ValueError, match="not a limit file"):
        parse_limit_value("memory.stat", "")


def test_limit_files_round_trip_through_parse():
    parsed = {f: parse_limit_value(f, v) for h in (V1, V2) for _, f, v in limit_files(h, FULL)}
    assert parsed["memory.limit_in_bytes"] == parsed["memory.max"] == FULL.memory
    assert parsed["cpu.cfs_quota_us"] == FULL.cpu_quota
    assert parsed["cpu.max"] == (FULL.cpu_quota, FULL.cpu_period)
    assert parsed["cpuset.cpus"] == FULL.cpuset_cpus
    for name in ("hugetlb.1GB.max", "hugetlb.2MB.limit_in_bytes"):
        assert dict(FULL.hugetlb)[hugetlb_page_size(name)] == parsed[name]


def test_required_controllers():
    assert required_controllers(FULL) == {"cpu", "memory", "pids", "cpuset", "hugetlb"}
    assert required_controllers(Limits(cpu_shares=2)) == {"cpu"}
    assert required_controllers(Limits()) == frozenset()


@pytest.mark.skipif(
    not os.path.isdir("/sys/fs/cgroup/memory"), reason="needs this host's v1/hybrid cgroups"
)
def test_detect_this_host_read_only():
    h = detect()
    assert h.version in ("v1", "hybrid")
    for ctrl in ("cpu", "memory", "pids", "cpuset"):
        assert os.path.isdir(h.v1_mounts[ctrl])
    assert os.path.isfile(os.path.join(h.v1_mounts["memory"], "memory.limit_in_bytes"))
    assert os.path.isfile(os.path.join(h.v1_mounts["cpu"], "cpu.shares"))
