"""The ``/stats/summary`` side of ``cgalloc stats -o json|yaml``: which system containers the
kubelet lists, the pods' containers and the node's files (:mod:`cgalloc.ops.summary`) around
one sample of the tree. Imported only for a document: the table reads none of it."""

from __future__ import annotations

import time
from typing import Protocol

from cgalloc.cli.inputs import NodeInputs
from cgalloc.host import netstats
from cgalloc.host.kubelet import NodeFiles
from cgalloc.host.machine import Host
from cgalloc.host.podlogs import CONTAINER_LOG_DIR, ContainerRef, container_refs
from cgalloc.model.hierarchy import Hierarchy
from cgalloc.model.naming import clean_cgroupfs_path as _daemon_path
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.resources import MEMORY, ResourceList
from cgalloc.ops import stats, summary


class RunLike(Protocol):
    """What the summary takes from a `cgalloc stats` run (cli/stats.py ``_Run``)."""

    inputs: NodeInputs
    cfg: NodeConfig
    capacity: ResourceList
    h: Hierarchy
    kubepods: str | None
    prev: dict[str, stats.CgroupStats]
    reader: stats.TreeReader


class Summary:
    """The summary side of one run: the daemon cgroups it lists, and per sample the pods'
    containers and the document."""

    def __init__(self, run: RunLike, given: dict[str, str]) -> None:
        self.run = run
        self.host = run.inputs.host or Host()
        self.files = NodeFiles(self.host.node_root)
        cfg = run.cfg
        # kubeletCgroups (flag or file), else the running kubelet's own cgroup
        kubelet = given.get("kubelet") or cfg.kubelet_cgroups
        self.kubelet = _daemon_path(kubelet) if kubelet else None
        self.own = summary.KubeletCgroup(self.files, run.h.version == "v2")
        # --runtime-cgroups is a kubelet flag only: a config file's runtimeCgroups is dropped
        runtime = given.get("runtime") or (cfg.runtime_cgroups if _runtime_flag(run.inputs)
                                           else "")  # fmt: skip
        self.runtime = _daemon_path(runtime) if runtime else None
        misc = given.get("misc") or cfg.system_cgroups
        self.misc = _daemon_path(misc) if misc else None
        self.refs: dict[str, ContainerRef] = {}  # the last sample's container links
        self.chosen: dict[str, str] = {}  # the last sample's daemons()

    def daemons(self) -> dict[str, str]:
        """The daemon cgroups the kubelet's summary lists, by role, for this sample."""
        kubelet = self.kubelet or self.own.get()
        found = {"kubelet": kubelet, "runtime": self.runtime, "misc": self.misc}
        self.chosen = {k: v for k, v in found.items() if v}
        return self.chosen

    def containers(self, targets: list[stats.Target]) -> list[stats.Target]:
        """The cgroups of the pods' containers the kubelet's log links name."""
        self.refs = container_refs(self.files.path(CONTAINER_LOG_DIR))
        if not self.refs:
            return []
        pods = [t for t in targets if t.role == "pod"]
        return summary.container_targets(self.run.h, pods, self.refs)

    def document(self, targets, recs, node_name: str) -> dict:
        """The /stats/summary document of one sample."""
        run = self.run
        now = time.time()
        when = stats.rfc3339(now)
        by_path = {t.path: (t, r) for t, r in zip(targets, recs, strict=True)}
        d = self.chosen
        sys_paths = summary.system_container_paths(
            run.kubepods, d.get("kubelet"), d.get("runtime"), d.get("misc")
        )
        read = [(t, r) for t, r in zip(targets, recs, strict=True) if r.found]
        pods_read = [(t, r) for t, r in read if t.role == "pod"]
        containers_read = [(t, r) for t, r in read if t.role == "container"]
        wanted = [*sys_paths.values(), *(t.path for t, _ in pods_read + containers_read)]
        boot = stats.boot_time()
        times = stats.start_times(run.h, wanted, boot, run.reader.dates)
        started = dict(zip(wanted, times, strict=True))

        def start(path: str) -> str:
            created = started[path]
            return stats.rfc3339(created if created is not None else now)

        machine = run.capacity[MEMORY].value()
        version = run.cfg.kubelet_version

        def limit(rec: stats.CgroupStats) -> int | None:
            return summary.memory_limit(version, run.h.version, rec, machine)

        system = []
        for name, path in sys_paths.items():
            _, rec = by_path[path]
            if rec.found:
                system.append(stats.container_summary(name, rec, run.prev.get(path), when,
                                                      start(path), limit(rec)))  # fmt: skip
        facts = summary.NodeFacts.read(self.files, run.cfg.root_dir, *_runtime(run.inputs),
                                       refs=self.refs)  # fmt: skip
        # the root as the kubelet's cAdvisor reads it (zeros on v2 before 1.21)
        hv = run.h.version
        root = summary.node_root(version, hv, by_path[""][1])
        prev_root = summary.node_root(version, hv, run.prev.get(""))
        assert root is not None
        node = {
            "nodeName": node_name,
            "systemContainers": system,
            "startTime": stats.rfc3339(boot),
            "cpu": stats.cpu_summary(root, prev_root, when),
            "memory": stats.memory_summary(root, when, limit=machine),
            "network": netstats.network_summary(netstats.interface_stats(), when),
            "rlimit": stats.rlimit_summary(when, version, self.files.path("/proc")),
        }
        if facts.root_fs is not None:
            node["fs"] = summary.fs_summary(facts.root_fs, when, own=True)
        runtime = summary.runtime_summary(facts, self.files, when, version)
        if runtime is not None:
            node["runtime"] = runtime
        upperdirs = summary.upperdirs_for(facts, self.host.mountinfo, bool(containers_read))
        by_pod: dict[str, list[dict]] = {}
        for t, rec in containers_read:
            entry = summary.container_summary(
                self.refs[t.container_id], rec, run.prev.get(t.path), when, start(t.path),
                facts, self.files, upperdirs, limit(rec),
            )  # fmt: skip
            by_pod.setdefault(t.pod_uid, []).append(entry)
        pods = []
        for t, rec in pods_read:
            ref: dict[str, object] = {"uid": t.pod_uid}
            if t.pod_uid in facts.pods:
                ref["namespace"], ref["name"] = facts.pods[t.pod_uid]
            pod: dict[str, object] = {
                "podRef": ref,
                "startTime": start(t.path),
                "cpu": stats.cpu_summary(rec, run.prev.get(t.path), when),
                "memory": stats.memory_summary(rec, when, limit(rec)),
            }
            if t.pod_uid in by_pod:
                pod["containers"] = sorted(by_pod[t.pod_uid], key=lambda c: str(c["name"]))
            if rec.pids_current is not None:
                pod["process_stats"] = {"process_count": rec.pids_current}
            pods.append(pod)
        return {"node": node, "pods": pods}


def _runtime_flag(inputs: NodeInputs) -> bool:
    """Whether the kubelet's inputs give --runtime-cgroups as a flag (its command line as
    --match-kubelet read it, or an OpenShift node-config's kubeletArguments)."""
    if "runtime-cgroups" in inputs.flags:
        return True
    if inputs.node_config:
        from cgalloc.inputs.openshift import node_config_layer

        return "runtime-cgroups" in node_config_layer(inputs.node_config, [])
    return False


def _runtime(inputs: NodeInputs) -> tuple[str | None, str | None]:
    """(runtime, CRI endpoint) of the kubelet, when --match-kubelet read its endpoint."""
    if not inputs.endpoint:
        return None, None
    from cgalloc.inputs.runtime import runtime_of

    return runtime_of(inputs.endpoint), inputs.endpoint
