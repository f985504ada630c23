"""How a cgroup hierarchy is laid out (v1, v2, hybrid) and where a cgroup's files are: the
record :func:`cgalloc.host.cgroupfs.detect` fills, and ``Limits`` as the files of either version
(:mod:`cgalloc.model.cgroup_v1`, :mod:`cgalloc.model.cgroup_v2`). Pure: no I/O. File names and
value spellings follow the kernel and opencontainers/cgroups."""

from __future__ import annotations

import os
from typing import NamedTuple

from cgalloc.model import cgroup_v1, cgroup_v2
from cgalloc.model.limits import Limits, hugetlb_size_from_name

V1_CONTROLLERS = frozenset(
    {
        "blkio",
        "cpu",
        "cpuacct",
        "cpuset",
        "devices",
        "freezer",
        "hugetlb",
        "memory",
        "misc",
        "net_cls",
        "net_prio",
        "perf_event",
        "pids",
        "rdma",
    }
)
# Hierarchies the kubelet's v1 Validate requires a directory in (hugetlb only when mounted).
V1_VALIDATED = ("cpu", "cpuacct", "cpuset", "memory", "systemd", "pids", "hugetlb")
# Controllers the kubelet needs on v2, intersected with what the root offers.
V2_NEEDED = ("cpu", "cpuset", "memory", "hugetlb", "pids")

class Hierarchy(NamedTuple):
    """How cgroups are mounted under ``root``."""

    version: str  # "v1" | "v2" | "hybrid"
    root: str
    v1_mounts: dict[str, str]  # controller -> mountpoint ({} on v2)
    unified: str | None = None  # the cgroup2 mountpoint (== root on v2)
    # Controllers usable for limits: v2 the root's cgroup.controllers; v1/hybrid the mounted ones.
    controllers: frozenset[str] = frozenset()


def cgroup_file(path: str, file: str) -> str:
    """The relative path of ``file`` in the cgroup ``path`` ("" is the root cgroup).

    An f-string, not os.path.join: setup and stats join one per file at thousands of cgroups."""
    return f"{path}/{file}" if path else file


def controller_dirs(h: Hierarchy, path: str) -> dict[str, str]:
    """Controller → absolute directory of cgroup ``path`` (relative to the root) for each
    controller the kubelet validates. Co-mounted v1 controllers (cpu,cpuacct) share a dir;
    ``sorted(set(dirs.values()))`` gives each directory once.
    """
    rel = path.strip("/")
    if h.version == "v2":
        base = os.path.join(h.unified or h.root, rel) if rel else h.unified or h.root
        return {c: base for c in V2_NEEDED if c in h.controllers}
    out = {}
    for ctrl in V1_VALIDATED:
        mount = h.v1_mounts.get(ctrl)
        if mount is not None:
            out[ctrl] = os.path.join(mount, rel) if rel else mount
    return out


def required_controllers(limits: Limits) -> frozenset[str]:
    """Controllers that must be enabled (v2 ``cgroup.subtree_control``) to apply ``limits``."""
    needed = set()
    if limits.cpu_shares or limits.cpu_quota or limits.cpu_period or limits.cpu_weight:
        needed.add("cpu")
    memory = (limits.memory_min, limits.memory_low, limits.swap_max)
    if limits.memory or any(v is not None for v in memory):
        needed.add("memory")
    if limits.pids:
        needed.add("pids")
    if limits.cpuset_cpus is not None or limits.cpuset_mems is not None:
        needed.add("cpuset")
    if limits.hugetlb:
        needed.add("hugetlb")
    return frozenset(needed)


def fresh_value(version: str, filename: str) -> str | None:
    """What ``filename`` holds in a newly created cgroup of a ``version`` hierarchy ("v2", or
    v1 for "v1" and "hybrid"); None when there is no such default to restore."""
    module = cgroup_v2 if version == "v2" else cgroup_v1
    return module.fresh_value(filename)


def limit_files(
    h: Hierarchy, limits: Limits, weight_formula: str = "kubelet"
) -> list[tuple[str, str, str]]:
    """(controller, file, value) to write for ``limits`` in ``h``'s version, in
    opencontainers/cgroups' order: pids, memory, cpu, cpuset, hugetlb. 0 for shares, quota,
    memory or pids means unset, as in the library; -1 means no limit."""
    if h.version == "v2":
        return cgroup_v2.limit_files(limits, weight_formula)
    return cgroup_v1.limit_files(limits)


def parse_limit_value(filename: str, text: str) -> int | str | tuple[int, int | None]:
    """A limit file's content as a ``Limits`` value: unlimited → -1, cpusets canonical,
    ``cpu.max`` → (quota or -1, period or None). Raises ValueError for other files or text."""
    for module in (cgroup_v2, cgroup_v1):
        value = module.parse_limit_value(filename, text.strip())
        if value is not None:
            return value
    raise ValueError(f"{filename!r} is not a limit file cgalloc knows")


def hugetlb_page_size(filename: str) -> int:
    """The page size of a hugetlb limit file: "hugetlb.2MB.max" → 2097152."""
    parts = filename.split(".")
    if len(parts) < 3 or parts[0] != "hugetlb":
        raise ValueError(f"{filename!r} is not a hugetlb file")
    return hugetlb_size_from_name(parts[1])
