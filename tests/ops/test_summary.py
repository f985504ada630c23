"""ops/summary.py: the system containers the kubelet lists, its own cgroup, the pods'
containers, the filesystems' figures and the pid limit, by kubelet minor."""

from __future__ import annotations

import os

import pytest
from statstree import make_v2, write_files

from cgalloc.host.fsstats import FsUsage, ImageStore
from cgalloc.host.kubelet import NodeFiles
from cgalloc.host.podlogs import ContainerRef
from cgalloc.ops import stats, summary

CID = "3f" * 32
SANDBOX = "ab" * 32
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="ownership by root needs root")


def test_system_containers_are_the_kubelets_named_ones():
    # pkg/kubelet/server/stats/summary_sys_containers.go GetSystemContainersStats: an empty
    # name is skipped; the kubelet's order is a Go map's (random), cgalloc's fixed
    got = summary.system_container_paths("/kubepods", "/kube.slice/kubelet.service", None, None)
    assert got == {"kubelet": "kube.slice/kubelet.service", "pods": "kubepods"}
    assert list(summary.system_container_paths("/kubepods.slice", "/k", "/r", "/m")) == [
        "kubelet", "runtime", "misc", "pods"]  # fmt: skip
    assert summary.system_container_paths(None, None, None, None) == {}


@pytest.mark.parametrize(
    ("cgroups", "unified", "want"),
    [
        # cgroup v2: the unified line
        ({"": "/system.slice/kubelet.service"}, True, "/system.slice/kubelet.service"),
        # v1 under systemd: name=systemd's path when cpu and memory agree
        ({"cpu": "/k", "cpuacct": "/k", "memory": "/k", "systemd": "/kube.slice/kubelet.service"},
         False, "/kube.slice/kubelet.service"),
        # v1 without systemd: the cpu path
        ({"cpu": "/kubelet", "memory": "/kubelet"}, False, "/kubelet"),
        # "cpu and memory cgroup hierarchy not unified": no kubelet container
        ({"cpu": "/", "memory": "/kube.slice", "systemd": "/kube.slice"}, False, None),
        ({"memory": "/k"}, False, None),
        ({"cpu": "/k", "memory": "/k"}, True, None),
    ],
)
def test_the_kubelets_own_cgroup_as_getcontainer_takes_it(cgroups, unified, want):
    assert summary.kubelet_cgroup(cgroups, unified) == want


def proc(root, pid: int, comm: str, cgroup: str) -> None:
    write_files(os.path.join(root, "proc", str(pid)), {"comm": comm + "\n", "cgroup": cgroup})


@ROOT_ONLY
def test_the_running_kubelet_is_found_in_proc(tmp_path):
    files = NodeFiles(str(tmp_path))
    assert summary.find_kubelet_cgroup(files, True) is None  # no /proc at all
    proc(tmp_path, 12, "containerd", "0::/system.slice/containerd.service\n")
    proc(tmp_path, 40, "kubelet", "0::/system.slice/kubelet.service\n")
    proc(tmp_path, 9, "kubelet", "0::/user.slice\n")
    os.chown(tmp_path / "proc" / "9", 1000, 1000)  # a user's process under the name
    assert summary.find_kubelet_cgroup(files, True) == "/system.slice/kubelet.service"
    v1 = "12:memory:/kube.slice\n11:cpu,cpuacct:/kube.slice\n1:name=systemd:/kube.slice\n"
    proc(tmp_path, 41, "kubelet", v1)
    os.rename(tmp_path / "proc" / "40", tmp_path / "proc" / "x40")
    assert summary.find_kubelet_cgroup(files, False) == "/kube.slice"
    cached = summary.KubeletCgroup(files, False)
    assert cached.get() == "/kube.slice"
    os.rename(tmp_path / "proc" / "41", tmp_path / "proc" / "x41")
    assert cached.get() == "/kube.slice"  # kept until the kubelet's next refresh


@pytest.mark.parametrize(
    ("entry", "want"),
    [
        (CID, CID),  # cgroupfs driver: the ID
        (f"cri-containerd-{CID}.scope", CID),  # systemd, containerd
        (f"crio-{CID}.scope", CID),  # systemd, CRI-O
        (f"crio-{CID}", CID),  # cgroupfs, CRI-O
        (f"docker-{CID}.scope", CID),
        (f"crio-conmon-{CID}.scope", None),  # CRI-O's monitor, no container
        (f"cri-containerd-{CID[:-1]}.scope", None),
        ("init.scope", None),
    ],
)
def test_container_cgroup_names(entry, want):
    assert summary.container_id(entry) == want


def test_container_targets_are_the_linked_containers_of_each_pod(tmp_path):
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    uid = "u-1"
    pod = f"kubepods/burstable/pod{uid}"
    other = "kubepods/podu-2"
    for rel in (pod, f"{pod}/{CID}", f"{pod}/{SANDBOX}", other, f"{other}/{CID}"):
        make_v2(root, rel, usage=4096)
    h, _ = stats.open_hierarchy(root)
    pods = [stats.Target("pod", pod, pod_uid=uid), stats.Target("pod", "kubepods/podu-2",
                                                                pod_uid="u-2")]  # fmt: skip
    refs = {CID: ContainerRef("default", "p", uid, "main", CID)}
    got = summary.container_targets(h, pods, refs)
    # the sandbox has no log link; u-2's directory of the same ID belongs to another pod
    assert got == [stats.Target("container", f"{pod}/{CID}", pod_uid=uid, container_id=CID)]
    assert summary.container_targets(h, pods, {}) == []


FS = FsUsage(capacity=8000, available=6000, used=1500, inodes=100, inodes_free=90)


def test_fs_summary_fields():
    assert summary.fs_summary(FS, "T", own=True) == {
        "time": "T", "availableBytes": 6000, "capacityBytes": 8000, "usedBytes": 1500,
        "inodesFree": 90, "inodes": 100, "inodesUsed": 10,
    }  # fmt: skip
    logs = summary.fs_summary(FS, "T", (4096, 2))
    assert (logs["usedBytes"], logs["inodesUsed"], logs["capacityBytes"]) == (4096, 2, 8000)
    assert summary.fs_summary(None, "T", (1, 1)) == {"time": "T", "usedBytes": 1, "inodesUsed": 1}
    assert summary.fs_summary(FS, "T") == {"time": "T", "availableBytes": 6000,
                                           "capacityBytes": 8000, "inodesFree": 90,
                                           "inodes": 100}  # fmt: skip


def test_runtime_has_container_fs_from_1_29(tmp_path):
    files = NodeFiles(str(tmp_path))
    store = ImageStore("CRI-O", "/var/lib/containers/storage/overlay-images", None, None)
    facts = summary.NodeFacts({}, {}, FS, store, FS)
    old = summary.runtime_summary(facts, files, "T", "1.28")
    assert set(old) == {"imageFs"}
    # CRI-O's used figures are its own walk's, not read: left out
    assert "usedBytes" not in old["imageFs"] and old["imageFs"]["capacityBytes"] == 8000
    new = summary.runtime_summary(facts, files, "T", "1.29")
    assert new["containerFs"] == new["imageFs"] == old["imageFs"]
    assert summary.runtime_summary(facts._replace(store=None), files, "T", "1.29") is None


def test_rlimit_maxpid_follows_the_kubelet_minor(tmp_path):
    # pidlimit_linux.go Stats: pid_max alone at 1.20 (the real 1.20.2 showed 4194304 where
    # threads-max was 15599); the smaller of the two from 1.24
    write_files(str(tmp_path / "sys/kernel"), {"pid_max": "4194304\n", "threads-max": "15599\n"})
    write_files(str(tmp_path), {"loadavg": "0.10 0.20 0.30 2/167 4242\n"})
    assert stats.rlimit_summary("T", "1.20", str(tmp_path)) == {
        "time": "T", "maxpid": 4194304, "curproc": 167}  # fmt: skip
    assert stats.rlimit_summary("T", "1.23", str(tmp_path))["maxpid"] == 4194304
    assert stats.rlimit_summary("T", "1.24", str(tmp_path))["maxpid"] == 15599
    os.unlink(tmp_path / "sys/kernel/pid_max")
    assert "maxpid" not in stats.rlimit_summary("T", "1.20", str(tmp_path))  # MaxPID nil
    assert stats.rlimit_summary("T", "1.37", str(tmp_path / "none")) == {"time": "T"}


def record(**values) -> stats.CgroupStats:
    """A found cgroup's record: every figure None but ``values``."""
    fields = dict.fromkeys(stats.CgroupStats._fields)
    return stats.CgroupStats(**(fields | {"path": "", "found": True, "time_ns": 1} | values))


ROOT = record(cpu_usage_ns=7_000_000, memory_usage=500, working_set=400, rss=300, pgfault=9,
              pgmajfault=1, memory_limit=stats.UNLIMITED)  # fmt: skip


def test_node_root_is_zeros_on_v2_before_1_21():
    # v1.20.2 vendors cAdvisor v0.38.6: container/libcontainer/handler.go GetStats reads no
    # file of the v2 root ("On cgroup v2 there are no stats at the root cgroup"); the real
    # 1.20.2 reported node.cpu and node.memory as zeros in the v2 guest
    # (tests/data/kubelet-1.20.2/v2/v2-cgroupfs/summary/summary.json)
    zero = summary.node_root("1.20", "v2", ROOT._replace(time_ns=10**9))
    prev = summary.node_root("1.20", "v2", ROOT)
    assert zero is not None
    assert stats.cpu_summary(zero, prev, "T") == {"time": "T", "usageNanoCores": 0,
                                                  "usageCoreNanoSeconds": 0}  # fmt: skip
    # availableBytes: the machine's memory, minus a working set of 0
    assert stats.memory_summary(zero, "T", limit=2060414976) == {
        "time": "T", "availableBytes": 2060414976, "usageBytes": 0, "workingSetBytes": 0,
        "rssBytes": 0, "pageFaults": 0, "majorPageFaults": 0,
    }  # fmt: skip
    # google/cadvisor PR #2801 (v0.39.0, vendored for 1.21): the root is read; v1 always was
    assert summary.node_root("1.21", "v2", ROOT) == ROOT
    assert summary.node_root("1.20", "v1", ROOT) == ROOT
    assert summary.node_root("1.20", "v2", None) is None  # no previous sample


def test_unlimited_memory_is_the_machines_on_v2_before_1_22():
    # cAdvisor v0.38.6 container/common/helpers.go readUInt64 reads "max" as 0 and manager.go
    # getSpec puts MachineInfo.MemoryCapacity in its place (v1.20.2's pods' containers had
    # availableBytes = MemTotal - working set); from v0.39.2 "max" is no limit
    assert summary.memory_limit("1.20", "v2", ROOT, 2 << 30) == 2 << 30
    assert summary.memory_limit("1.22", "v2", ROOT, 2 << 30) is None
    assert summary.memory_limit("1.20", "v1", ROOT, 2 << 30) is None
    limited = ROOT._replace(memory_limit=100 << 20)
    assert summary.memory_limit("1.20", "v2", limited, 2 << 30) is None  # its own limit
