"""`cgalloc stats -o json` against the real kubelet v1.20.2's `/stats/summary`, read in the
Vagrant guests (kept in tests/data/kubelet-1.20.2/<guest>/<config>/: summary/summary.json, the
same moment's stats.json, and the kubelet's inputs, copied from that run's vagrant/results).

Each case builds a node mirroring the guest's: the cgroup tree the kubelet ran (its driver's
names, the pods' uids and QoS tiers, one container and one sandbox per pod) holding the
counters the kubelet reported, the kubelet's log directories, containerd's image store and the
containers' overlay mounts, /proc's pid limits; then runs stats with the lane's own inputs
(kubelet.yaml, kubelet.env's flags, --kubelet-version 1.20) and holds the document against the
kubelet's: field by field (every field the kubelet has, cgalloc has, but the ones named below),
and through the lane's own comparison (vagrant/kubelet/steps.py compare_summary), which must
find no difference but those of the machine itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import FakeHost
from statstree import write_files

from cgalloc.host import fsstats

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "data" / "kubelet-1.20.2"
_spec = importlib.util.spec_from_file_location("kubelet_steps", ROOT / "vagrant/kubelet/steps.py")
ksteps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ksteps)

INACTIVE = 4096  # inactive file bytes in every fake cgroup: usage = working set + this
V1_UNLIMITED = 9223372036854771712
CASES = {"v1-systemd": ("v1", "systemd"), "v2-cgroupfs": ("v2", "cgroupfs")}
# What the kubelet's document has that cgalloc's has not, each for a stated reason:
# - a pod's network: the sandbox's interfaces (hostNetwork pods: the node's), read by cAdvisor
#   from the sandbox's network namespace; cgalloc reads no pod network.
ABSENT = {"pods[].network"}
# Fields cgalloc adds: a container's memory beyond the working set on v1 (1.20's cAdvisor does
# not match the systemd driver's cri-containerd-<id>.scope to a container ID and falls back to
# the CRI's working set alone; cgalloc reads the container's cgroup as for any other).
EXTRA = {f"pods[].containers[].memory.{k}" for k in
         ("usageBytes", "rssBytes", "pageFaults", "majorPageFaults", "availableBytes")}  # fmt: skip


def _id(n: int) -> str:
    return f"{n:064x}"


def _qos(name: str) -> str:
    return name.split("-")[0]


def _pod_dir(driver: str, qos: str, uid: str) -> str:
    if driver == "systemd":
        flat = uid.replace("-", "_")
        if qos == "guaranteed":
            return f"kubepods.slice/kubepods-pod{flat}.slice"
        return f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{flat}.slice"
    return f"kubepods/pod{uid}" if qos == "guaranteed" else f"kubepods/{qos}/pod{uid}"


def _container_dir(driver: str, cid: str) -> str:
    return f"cri-containerd-{cid}.scope" if driver == "systemd" else cid


def _cgroup(root: str, version: str, rel: str, stats: dict) -> None:
    """A cgroup whose files give ``stats``' cpu and memory figures (a summary ContainerStats).
    On v2 its memory.max is availableBytes + workingSetBytes only where ``memory.limited`` says
    so: 1.20 also has availableBytes (MemTotal minus the working set) for "max"."""
    cpu = stats.get("cpu", {}).get("usageCoreNanoSeconds", 0)
    mem = stats.get("memory", {})
    ws = mem.get("workingSetBytes", 0)
    limit = mem["availableBytes"] + ws if "availableBytes" in mem else None
    faults = f"{mem.get('pageFaults', 0)}", f"{mem.get('majorPageFaults', 0)}"
    if version == "v2":
        write_files(os.path.join(root, rel), {
            "cgroup.controllers": "cpu memory pids\n",
            "cpu.stat": f"usage_usec {cpu // 1000}\nnr_periods 0\nnr_throttled 0\n",
            "memory.current": f"{ws + INACTIVE}\n",
            "memory.max": "max\n" if limit is None or not mem.get("limited") else f"{limit}\n",
            "memory.stat": f"anon {mem.get('rssBytes', 0)}\nfile {INACTIVE}\n"
                           f"inactive_file {INACTIVE}\npgfault {faults[0]}\n"
                           f"pgmajfault {faults[1]}\n",
            "pids.current": "1\n",
        })  # fmt: skip
        return
    write_files(os.path.join(root, "cpuacct", rel), {"cpuacct.usage": f"{cpu}\n"})
    write_files(os.path.join(root, "cpu", rel), {"cpu.shares": "1024\n"})
    write_files(os.path.join(root, "memory", rel), {
        "memory.usage_in_bytes": f"{ws + INACTIVE}\n",
        "memory.limit_in_bytes": f"{limit if limit is not None else V1_UNLIMITED}\n",
        "memory.stat": f"total_inactive_file {INACTIVE}\ntotal_rss {mem.get('rssBytes', 0)}\n"
                       f"total_pgfault {faults[0]}\ntotal_pgmajfault {faults[1]}\n",
    })  # fmt: skip
    write_files(os.path.join(root, "pids", rel), {"pids.current": "1\n"})


def mirror(tmp_path: Path, config: str) -> tuple[dict, list[str], FakeHost]:
    """The guest's node for ``config`` under ``tmp_path``: the kubelet's summary, the stats
    arguments, and the host to run them on."""
    guest, driver = CASES[config]
    results = RESULTS / guest / config
    summary = json.loads((results / "summary" / "summary.json").read_text())
    version = "v1" if guest == "v1" else "v2"
    root = str(tmp_path / "cg")
    node = tmp_path / "node"
    kubepods = "kubepods.slice" if driver == "systemd" else "kubepods"
    knode = summary["node"]
    machine = knode["memory"]["availableBytes"] + knode["memory"]["workingSetBytes"]
    # the root: the node's counters; on v2, where 1.20 reports 0 (row cadvisor-v2-root-stats),
    # what cgalloc read in the guest at the same moment (the v2 root has cpu.stat and
    # memory.stat): cgalloc must report 0 all the same
    same_moment = json.loads((results / "summary" / "stats.json").read_text())["node"]
    _cgroup(root, version, "", knode if version == "v1" else same_moment)
    if version == "v2":
        os.unlink(os.path.join(root, "memory.current"))  # the v2 root has none
    for qos in ("burstable", "besteffort"):
        tier = f"{kubepods}/{kubepods.split('.')[0]}-{qos}.slice" if driver == "systemd" else \
            f"{kubepods}/{qos}"  # fmt: skip
        _cgroup(root, version, tier, {})
    system = {c["name"]: c for c in knode["systemContainers"]}
    pods_stats = dict(system["pods"])
    pods_stats["memory"] = dict(pods_stats["memory"], limited=True)
    _cgroup(root, version, kubepods, pods_stats)
    env = dict(line.split("=", 1) for line in (results / "kubelet.env").read_text().splitlines())
    conf = (results / "kubelet.yaml").read_text()
    kubelet_cgroup = next(line.split(": ", 1)[1] for line in conf.splitlines()
                          if line.startswith("kubeletCgroups:"))  # fmt: skip
    _cgroup(root, version, kubelet_cgroup.strip("/"), system["kubelet"])
    # containerd's store: one layer per image, one writable layer per container
    snaps = node / "var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
    write_files(str(snaps / "1" / "fs" / "bin"), {"busybox": "b" * 20000})
    write_files(str(snaps / "2" / "fs"), {"pause": "p" * 3000})
    mounts = []
    for n, pod in enumerate(summary["pods"], start=1):
        ref = pod["podRef"]
        qos = _qos(ref["name"])
        pod_rel = _pod_dir(driver, qos, ref["uid"])
        limited = "availableBytes" in pod["memory"] and qos != "besteffort"
        _cgroup(root, version, pod_rel, dict(pod, memory=dict(pod["memory"], limited=limited)))
        _cgroup(root, version, f"{pod_rel}/{_container_dir(driver, _id(100 + n))}", {})  # sandbox
        for c in pod["containers"]:
            cid = _id(n)
            mem = dict(c["memory"], limited=limited)
            _cgroup(root, version, f"{pod_rel}/{_container_dir(driver, cid)}", dict(c, memory=mem))
            logs = f"var/log/pods/{ref['namespace']}_{ref['name']}_{ref['uid']}/{c['name']}"
            write_files(str(node / logs), {"0.log": "started\n"})
            link = node / "var/log/containers" / f"{ref['name']}_{ref['namespace']}_{c['name']}-{cid}.log"  # noqa: E501
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(f"/{logs}/0.log", link)
            write_files(str(snaps / str(10 + n) / "fs" / "etc"), {"hosts": "127.0.0.1 x\n"})
            mounts.append(
                f"{900 + n} 29 0:{90 + n} / /run/containerd/io.containerd.runtime.v2.task/k8s.io/"
                f"{cid}/rootfs rw,relatime - overlay overlay rw,lowerdir={snaps}/1/fs,"
                f"upperdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/"
                f"{10 + n}/fs,workdir=/w"
            )
    (node / "var/lib/kubelet").mkdir(parents=True)
    write_files(str(node / "proc/sys/kernel"), {"pid_max": "4194304\n", "threads-max": "15599\n"})
    write_files(str(node / "proc"), {"loadavg": "0.50 0.40 0.30 1/167 4242\n"})
    (tmp_path / "mountinfo").write_text("\n".join(mounts) + "\n")
    (tmp_path / "kubelet.yaml").write_text(conf)
    args = [
        "stats", "--config", str(tmp_path / "kubelet.yaml"),
        *shlex.split(env["KUBELET_ALLOC_FLAGS"]), "--kubelet-version", "1.20",
        "--capacity", f"cpu=2,memory={machine},pid=4194304,ephemeral-storage=8Gi",
        "--cgroupfs", root, "-o", "json", "--interval", "0.01", "--node-name", knode["nodeName"],
    ]  # fmt: skip
    if driver == "cgroupfs":
        args.append("--allow-driver-mismatch")  # as vagrant/kubelet.sh k_use gives it to stats
    return summary, args, FakeHost(tmp_path)


def paths(doc, at: str = "") -> set[str]:
    """Every field's path, list items as ``[]``."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            here = f"{at}.{k}" if at else k
            out |= {here} | paths(v, here)
    elif isinstance(doc, list):
        for v in doc:
            out |= paths(v, at + "[]")
    return out


@pytest.mark.parametrize("config", sorted(CASES))
def test_stats_json_is_the_real_kubelets_summary(tmp_path, monkeypatch, capsys, config):
    import time

    import clirun

    summary, args, host = mirror(tmp_path, config)
    monkeypatch.setattr(clirun, "HOST", host)
    # read as the lane did: seconds after the kubelet's sample (step-5.txt's timings)
    kubelet_read = ksteps._ts(summary["node"]["cpu"]["time"])
    monkeypatch.setattr(time, "time", lambda: kubelet_read + 5)
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    doc = json.loads(out)

    # 1. the same fields, but the ones named above (the node's interfaces are this machine's)
    here = "node.network."
    kubelet, ours = (paths(d) for d in (summary, doc))
    assert {here + "time", here + "name"} <= ours
    kubelet, ours = ({p for p in got if not p.startswith(here)} for got in (kubelet, ours))
    missing = {p for p in kubelet - ours if not any(p.startswith(a) for a in ABSENT)}
    assert missing == set()
    assert any(p.startswith("pods[].network") for p in kubelet) == (config == "v2-cgroupfs")
    assert ours - kubelet <= EXTRA, ours - kubelet

    # 2. the lane's comparison: no difference but the machine's own
    lines, _ = ksteps.compare_summary(summary, doc, cpus=2)
    differs = sorted(line.split(":")[1].strip() for line in lines if line.startswith("DIFFERS"))
    # the node's filesystem is this machine's, not the guest's disk
    machine = ["node.fs.capacityBytes", "node.fs.inodes"]
    assert differs == sorted(machine), "\n".join(lines)

    # 3. the values the tree and the node's files give, each as the kubelet takes it
    node = doc["node"]
    # v1.20.2's cAdvisor (v0.38.6) container/libcontainer/handler.go GetStats reads no file of
    # the v2 root: the kubelet's node.cpu and node.memory are zeros, and so are cgalloc's
    if config == "v2-cgroupfs":
        assert node["cpu"]["usageCoreNanoSeconds"] == 0
        assert node["memory"]["workingSetBytes"] == node["memory"]["usageBytes"] == 0
        assert node["memory"]["availableBytes"] == summary["node"]["memory"]["availableBytes"]
    else:
        assert node["cpu"]["usageCoreNanoSeconds"] == summary["node"]["cpu"][
            "usageCoreNanoSeconds"] > 0  # fmt: skip
    assert node["rlimit"]["maxpid"] == summary["node"]["rlimit"]["maxpid"] == 4194304
    assert [c["name"] for c in node["systemContainers"]] == ["kubelet", "pods"]
    fs = fsstats.filesystem(str(tmp_path / "node/var/lib/kubelet"))
    assert node["fs"]["capacityBytes"] == fs.capacity and node["fs"]["inodes"] == fs.inodes
    image = node["runtime"]["imageFs"]
    store = tmp_path / "node/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
    layers = [fsstats.disk_usage(str(d / "fs"), one_filesystem=False) for d in store.iterdir()]
    assert image["usedBytes"] == sum(u.bytes for u in layers)
    assert image["inodesUsed"] == sum(u.inodes for u in layers)
    assert "containerFs" not in node["runtime"]  # 1.29+
    kpods = {p["podRef"]["uid"]: p for p in summary["pods"]}
    for pod in doc["pods"]:
        want = kpods[pod["podRef"]["uid"]]
        assert pod["podRef"] == want["podRef"]
        assert pod["memory"].get("availableBytes") == want["memory"].get("availableBytes")
        [c] = pod["containers"]
        [kc] = want["containers"]
        assert c["name"] == kc["name"]
        assert c["cpu"]["usageCoreNanoSeconds"] == kc["cpu"]["usageCoreNanoSeconds"]
        assert c["memory"]["workingSetBytes"] == kc["memory"]["workingSetBytes"]
        if config == "v2-cgroupfs":  # unlimited: MemTotal - working set in 1.20 on v2
            assert c["memory"]["availableBytes"] == kc["memory"]["availableBytes"]
        assert c["rootfs"]["capacityBytes"] == image["capacityBytes"]
        assert (c["rootfs"]["usedBytes"], c["rootfs"]["inodesUsed"]) == (
            fsstats.disk_usage(str(store / "11" / "fs"), one_filesystem=False)[::2]
        )
        assert c["logs"]["inodesUsed"] == 2  # the directory and 0.log, as find counts them
        assert c["logs"]["capacityBytes"] == node["fs"]["capacityBytes"]
