"""What ``cgalloc stats -o json`` adds to a read of the tree to make the kubelet's
``/stats/summary``: which system containers the kubelet lists, the pods' names, their
containers, the node's and the runtime's filesystems.

Read at the v1.20.2 tag and at upstream's head (both the same where not said):

- system containers (pkg/kubelet/server/stats/summary_sys_containers.go
  ``GetSystemContainersStats``): ``kubelet`` <- NodeConfig.KubeletCgroupsName, ``runtime`` <-
  RuntimeCgroupsName, ``misc`` <- SystemCgroupsName, ``pods`` <- the pod cgroup root; a name
  left empty is skipped, one whose stats cannot be had is left out; the order is a Go map's
  (none). cmd/kubelet/app/server.go fills them from ``--kubelet-cgroups``
  (``kubeletCgroups``), ``--runtime-cgroups`` and ``--system-cgroups`` (``systemCgroups``).
  ``runtimeCgroups`` is a flag only (ContainerRuntimeOptions, pkg/kubelet/config/flags.go at
  1.20, cmd/kubelet/app/options/container_runtime.go later): no KubeletConfiguration of the
  minors cgalloc matches has the field, so a config file's value is dropped by the kubelet's
  lenient decode (the real 1.20.2 listed no runtime with one in its file). With a
  remote runtime nothing else names it (the dockershim of 1.20-1.23 found dockerd's cgroup;
  cgalloc models remote runtimes only). An empty KubeletCgroupsName is filled every five minutes
  with the kubelet's own cgroup (pkg/kubelet/cm/container_manager_linux.go ``setupNode``,
  ``getContainer``): the v2 line of /proc/<pid>/cgroup, on v1 the ``name=systemd`` path (none
  when the cpu and memory paths differ).
- pods and containers (pkg/kubelet/stats/cri_stats_provider.go): a pod's name and namespace
  come from its sandbox, each running container's name from the runtime, its logs from
  ``du``/``find`` of its log directory (``getPathFsStats``), its rootfs from the runtime's
  writable-layer figures and the image filesystem's capacity. cgalloc reads the names from the
  kubelet's log directories (:mod:`cgalloc.host.podlogs`) and the figures from the filesystems
  (:mod:`cgalloc.host.fsstats`).
- ``node.fs`` (pkg/kubelet/stats/provider.go ``RootFsStats``): cAdvisor's figures of the
  filesystem holding the kubelet's root directory. ``node.runtime.imageFs``
  (``ImageFsStats``): the runtime's used bytes and inodes, capacity and free space of the
  filesystem it names. From 1.29 ``runtime.containerFs`` too, the same figures when the runtime
  keeps containers beside images (the ``summary-container-fs`` row of model/versions.py).
- ``node.cpu``/``node.memory`` (pkg/kubelet/server/stats/summary.go ``Get``, the root
  cgroup's stats): on cgroup v2 before 1.21 the kubelet's cAdvisor reads none of the root's
  files and reports zeros (row ``cadvisor-v2-root-stats``, :func:`node_root`); a cgroup v2
  memory.max of "max" is the machine's memory before 1.22 (row
  ``cadvisor-v2-unlimited-memory``, :func:`memory_limit`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import NamedTuple

from cgalloc.host.fsstats import (
    FsUsage,
    ImageStore,
    disk_usage,
    filesystem,
    image_store,
    overlay_upperdirs,
    snapshots_usage,
    writable_layer,
)
from cgalloc.host.kubelet import NodeFiles
from cgalloc.host.podlogs import (
    CONTAINER_LOG_DIR,
    POD_LOG_DIR,
    ContainerRef,
    container_refs,
    is_container_id,
    pod_names,
)
from cgalloc.host.procs import parse_proc_cgroup
from cgalloc.model.hierarchy import Hierarchy
from cgalloc.model.versions import has
from cgalloc.ops import stats

# Summary-API system containers, in a fixed order: the kubelet ranges over a Go map, so its
# order varies from one request to the next (compare them by name).
SYSTEM_CONTAINERS = ("kubelet", "runtime", "misc", "pods")
KUBELET_REFRESH_SECONDS = 300.0  # the kubelet's periodic tasks run every five minutes


def system_container_paths(
    kubepods: str | None, kubelet: str | None, runtime: str | None, misc: str | None
) -> dict[str, str]:
    """Summary-API system container name -> cgroup path, unnamed ones left out (the kubelet
    skips an empty name). ``kubelet``: kubeletCgroups or the kubelet's own cgroup; ``runtime``:
    the kubelet's --runtime-cgroups flag; ``misc``: systemCgroups; pods: the pod cgroup root."""
    sources = {"kubelet": kubelet, "runtime": runtime, "misc": misc, "pods": kubepods}
    return {name: sources[name].strip("/") for name in SYSTEM_CONTAINERS if sources[name]}


def kubelet_cgroup(cgroups: dict[str, str], unified: bool) -> str | None:
    """The kubelet's own cgroup from its /proc/<pid>/cgroup, as ``getContainer`` takes it:
    the v2 line on a unified host; on v1 the name=systemd path, else the cpu path, and none
    when the cpu and memory paths differ."""
    if unified:
        return cgroups.get("")
    cpu, memory = cgroups.get("cpu"), cgroups.get("memory")
    if cpu is None or memory is None or cpu != memory:
        return None
    return cgroups.get("systemd", cpu)


def _comm(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, 64).decode(errors="replace").rstrip("\n")
    except OSError:
        return ""
    finally:
        os.close(fd)


def find_kubelet_cgroup(files: NodeFiles, unified: bool) -> str | None:
    """The cgroup of the node's running kubelet (the root-owned process named kubelet with the
    lowest pid), None when there is none. One read of each process's ``comm``: a cheap scan."""
    proc = files.path("/proc")
    try:
        pids = sorted(int(n) for n in os.listdir(proc) if n.isdigit())
    except OSError:
        return None
    for pid in pids:
        base = os.path.join(proc, str(pid))
        if _comm(os.path.join(base, "comm")) != "kubelet":
            continue
        try:
            if os.stat(base).st_uid != 0:
                continue  # a user's process under the kubelet's name is not the kubelet
            text = files.read(f"/proc/{pid}/cgroup", 1 << 16)
        except (OSError, ValueError):
            continue  # gone meanwhile
        return kubelet_cgroup(parse_proc_cgroup(text), unified)
    return None


class KubeletCgroup:
    """The kubelet's cgroup when kubeletCgroups names none: found in /proc and kept for
    :data:`KUBELET_REFRESH_SECONDS`, as the kubelet refreshes its own."""

    def __init__(self, files: NodeFiles, unified: bool) -> None:
        self.files, self.unified = files, unified
        self._at: float | None = None
        self._path: str | None = None

    def get(self) -> str | None:
        now = time.monotonic()
        if self._at is None or now - self._at >= KUBELET_REFRESH_SECONDS:
            self._path, self._at = find_kubelet_cgroup(self.files, self.unified), now
        return self._path


def memory_limit(
    version: str, hierarchy_version: str, cur: stats.CgroupStats, machine: int
) -> int | None:
    """The memory limit the kubelet's cAdvisor gives a cgroup when it is not the cgroup's own
    (None): before 1.22, on cgroup v2, the machine's memory for a memory.max of "max" (row
    ``cadvisor-v2-unlimited-memory``)."""
    old = not has(version, "cadvisor-v2-unlimited-memory")
    if old and hierarchy_version == "v2" and cur.memory_limit == stats.UNLIMITED:
        return machine
    return None


def node_root(
    version: str, hierarchy_version: str, rec: stats.CgroupStats | None
) -> stats.CgroupStats | None:
    """The root cgroup's record as the kubelet's cAdvisor takes it for ``node.cpu`` and
    ``node.memory``: before 1.21 on cgroup v2 it reads none of the root's files and its figures
    are zeros (row ``cadvisor-v2-root-stats``); else the record as read."""
    if rec is None or hierarchy_version != "v2" or has(version, "cadvisor-v2-root-stats"):
        return rec
    zero = dict.fromkeys(("cpu_usage_ns", "memory_usage", "working_set", "rss", "pgfault",
                          "pgmajfault"), 0)  # fmt: skip
    return rec._replace(**zero)


# ---- containers ---------------------------------------------------------------------------

# How a runtime names a container's cgroup below its pod's: under the cgroupfs driver the
# container ID itself (containerd, runc cgroupsPath "<pod>/<id>"; CRI-O "crio-<id>"), under
# systemd a scope "<prefix>-<id>.scope" (containerd "cri-containerd", CRI-O "crio", cri-dockerd
# "docker").
SCOPE_PREFIXES = ("cri-containerd-", "crio-", "docker-")


def container_id(entry: str) -> str | None:
    """The container ID a cgroup directory name below a pod's carries, or None."""
    if is_container_id(entry):
        return entry
    name = entry.removesuffix(".scope")
    for prefix in SCOPE_PREFIXES:
        if name.startswith(prefix) and is_container_id(name[len(prefix) :]):
            return name[len(prefix) :]
    return None


def container_targets(
    h: Hierarchy, pods: Sequence[stats.Target], refs: dict[str, ContainerRef]
) -> list[stats.Target]:
    """The cgroups of the containers ``refs`` knows, below the pod cgroups of ``pods``: a
    listing of each pod that has some (a pod's sandbox has no log, so it is never one)."""
    with_refs = {r.pod_uid for r in refs.values()}
    out = []
    for pod in pods:
        if pod.pod_uid not in with_refs:
            continue
        for name in stats.child_cgroups(h, pod.path):
            cid = container_id(name)
            ref = refs.get(cid) if cid else None
            if ref is not None and ref.pod_uid == pod.pod_uid:
                out.append(stats.Target("container", f"{pod.path}/{name}", pod_uid=pod.pod_uid,
                                        container_id=cid))  # fmt: skip
    return out


# ---- filesystems ---------------------------------------------------------------------------


def fs_summary(
    fs: FsUsage | None, when: str, usage: tuple[int, int] | None = None, own: bool = False
) -> dict[str, object]:
    """The summary API's ``FsStats``: the filesystem's capacity and free space (none without
    ``fs``) and, as used bytes and inodes, ``usage`` or with ``own`` the filesystem's own."""
    out: dict[str, object] = {"time": when}
    if fs is not None:
        out |= {"availableBytes": fs.available, "capacityBytes": fs.capacity,
                "inodesFree": fs.inodes_free, "inodes": fs.inodes}  # fmt: skip
        if own:
            usage = (fs.used, fs.inodes_used)
    if usage is not None:
        out["usedBytes"], out["inodesUsed"] = usage
    return out


class NodeFacts(NamedTuple):
    """What the document reads from the node beside the tree, once per sample."""

    pods: dict[str, tuple[str, str]]  # pod uid -> (namespace, name)
    refs: dict[str, ContainerRef]  # container id -> the container
    root_fs: FsUsage | None  # the kubelet's root directory's filesystem
    store: ImageStore | None
    image_fs: FsUsage | None

    @classmethod
    def read(cls, files: NodeFiles, root_dir: str, runtime: str | None, endpoint: str | None,
             refs: dict[str, ContainerRef] | None = None) -> NodeFacts:  # fmt: skip
        """Pod names, container links (``refs`` when already read), the root directory's
        filesystem and the runtime's image store (``runtime``/``endpoint`` when the kubelet's
        are known)."""
        if refs is None:
            refs = container_refs(files.path(CONTAINER_LOG_DIR))
        pods = pod_names(files.path(POD_LOG_DIR))
        for ref in refs.values():  # a pod whose log directory lies elsewhere (podLogsDir)
            pods.setdefault(ref.pod_uid, (ref.namespace, ref.pod))
        root = files.path(root_dir)
        root_fs = filesystem(root) if os.path.isdir(root) else None
        store = image_store(files, runtime, endpoint)
        image_fs = filesystem(files.path(store.path)) if store else None
        return cls(pods, refs, root_fs, store, image_fs)


def runtime_summary(
    facts: NodeFacts, files: NodeFiles, when: str, version: str
) -> dict[str, object] | None:
    """``node.runtime``: ``imageFs`` (and from 1.29 ``containerFs``); None without a store.
    containerd's used figures are its snapshots' usage; CRI-O's own walk differs between its
    releases, so its used figures are left out."""
    if facts.store is None:
        return None
    used = snapshots_usage(files, facts.store) if facts.store.runtime == "containerd" else None
    image = fs_summary(facts.image_fs, when, (used.bytes, used.inodes) if used else None)
    out: dict[str, object] = {"imageFs": image}
    if has(version, "summary-container-fs"):
        out["containerFs"] = dict(image)
    return out


def container_summary(
    ref: ContainerRef,
    cur: stats.CgroupStats,
    prev: stats.CgroupStats | None,
    when: str,
    start: str,
    facts: NodeFacts,
    files: NodeFiles,
    upperdirs: dict[str, str],
    limit: int | None = None,
) -> dict[str, object]:
    """One entry of a pod's ``containers[]``: its cgroup's cpu and memory (``limit`` as
    :func:`memory_limit` gives it), its writable layer (containerd; the image filesystem's
    capacity for any runtime) and its log directory."""
    out: dict[str, object] = {
        "name": ref.name,
        "startTime": start,
        "cpu": stats.cpu_summary(cur, prev, when),
        "memory": stats.memory_summary(cur, when, limit),
    }
    if facts.store is not None:
        layer = writable_layer(facts.store, upperdirs, ref.container_id)
        got = disk_usage(files.path(layer), one_filesystem=False) if layer else None
        rootfs = fs_summary(facts.image_fs, when, (got.bytes, got.inodes) if got else None)
        out["rootfs"] = rootfs
    logs = disk_usage(files.path(f"{POD_LOG_DIR}/{ref.log_dir}"))
    if logs is not None:
        out["logs"] = fs_summary(facts.root_fs, when, (logs.bytes, logs.entries))
    return out


def upperdirs_for(facts: NodeFacts, mountinfo: str, wanted: bool) -> dict[str, str]:
    """The overlay mounts' upper directories, read only when a containerd container's
    writable layer is wanted."""
    if not wanted or facts.store is None or facts.store.runtime != "containerd":
        return {}
    return overlay_upperdirs(mountinfo)
