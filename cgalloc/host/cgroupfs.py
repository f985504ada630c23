"""The cgroup hierarchy on this host (v1, v2, hybrid) and ``Limits`` ↔ files for v1 and v2.

Read-only: detection reads ``/proc/self/mountinfo`` and ``cgroup.controllers``; writing is the
C core's job. File names and value spellings follow the kernel and opencontainers/cgroups.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from cgalloc.errors import HostError
from cgalloc.host.capacity import parse_cpuset
from cgalloc.model.limits import (
    Limits,
    format_cpuset,
    hugetlb_size_from_name,
    hugetlb_size_name,
    shares_to_weight,
)

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
# v1 reports "no limit" as the largest page-counter value, rounded down to the page size
# (4 KiB: 9223372036854771712; hugetlb rounds to its own page size), so anything at or above
# 2^63 − 1 GiB cannot be a limit anyone wrote.
V1_UNLIMITED_FLOOR = (1 << 63) - (1 << 30)


class Hierarchy(NamedTuple):
    """How cgroups are mounted under ``root``."""

    version: str  # "v1" | "v2" | "hybrid"
    root: str
    v1_mounts: dict[str, str]  # controller -> mountpoint ({} on v2)
    unified: str | None = None  # the cgroup2 mountpoint (== root on v2)
    # Controllers usable for limits: v2 the root's cgroup.controllers; v1/hybrid the mounted ones.
    controllers: frozenset[str] = frozenset()


def _unescape(text: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str, frozenset[str]]]:
    """Cgroup mounts in mountinfo text as (mountpoint, fstype, super options)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if len(fields) < sep + 4 or len(fields) < 5:
            continue
        fstype = fields[sep + 1]
        if fstype in ("cgroup", "cgroup2"):
            options = frozenset(fields[sep + 3].split(","))
            mounts.append((_unescape(fields[4]), fstype, options))
    return mounts


def _v1_controllers(options: frozenset[str]) -> set[str]:
    names = {o for o in options if o in V1_CONTROLLERS}
    names.update(o.split("=", 1)[1] for o in options if o.startswith("name="))
    return names


def _read_words(path: str) -> frozenset[str]:
    try:
        with open(path, encoding="ascii") as f:
            return frozenset(f.read().split())
    except OSError:
        return frozenset()


def detect(root: str = "/sys/fs/cgroup", mountinfo: str = "/proc/self/mountinfo") -> Hierarchy:
    """The hierarchy mounted at or under ``root``.

    v2: cgroup2 at ``root``. v1: per-controller cgroup mounts below it; "hybrid" when a cgroup2
    mount sits beside them (``root/unified``). Each v1 controller maps to its shortest
    mountpoint, as the kubelet does (kubernetes #95488).
    """
    root = root.rstrip("/") or "/"
    try:
        with open(mountinfo, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise HostError(f"cannot read {mountinfo}: {err.strerror or err}.") from None
    prefix = root if root.endswith("/") else root + "/"
    below = [m for m in parse_mountinfo(text) if m[0] == root or m[0].startswith(prefix)]
    unified = next((m[0] for m in below if m[1] == "cgroup2" and m[0] == root), None)
    if unified is not None:
        controllers = _read_words(os.path.join(root, "cgroup.controllers"))
        return Hierarchy("v2", root, {}, unified, controllers)
    v1_mounts: dict[str, str] = {}
    for mountpoint, fstype, options in below:
        if fstype != "cgroup":
            continue
        for ctrl in _v1_controllers(options):
            if ctrl not in v1_mounts or len(mountpoint) < len(v1_mounts[ctrl]):
                v1_mounts[ctrl] = mountpoint
    unified = min((m[0] for m in below if m[1] == "cgroup2"), key=len, default=None)
    if not v1_mounts:
        if unified is not None:
            raise HostError(
                f"only a cgroup2 mount at {unified} and no v1 controllers under {root}; "
                f"give the cgroup2 mountpoint as the root."
            )
        raise HostError(f"no cgroup filesystem is mounted at or under {root}.")
    version = "hybrid" if unified is not None else "v1"
    return Hierarchy(version, root, v1_mounts, unified, frozenset(v1_mounts))


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
    if limits.cpu_shares or limits.cpu_quota or limits.cpu_period:
        needed.add("cpu")
    if limits.memory or limits.memory_min is not None or limits.memory_low is not None:
        needed.add("memory")
    if limits.pids:
        needed.add("pids")
    if limits.cpuset_cpus is not None or limits.cpuset_mems is not None:
        needed.add("cpuset")
    if limits.hugetlb:
        needed.add("hugetlb")
    return frozenset(needed)


def _max_or(value: int) -> str:
    return "max" if value < 0 else str(value)


# What a v2 interface file reads when its controller has just been enabled in the parent's
# cgroup.subtree_control: the kernel creates a fresh css, so every setting starts at its default.
_V2_FRESH = {
    "cpu.weight": "100",
    "cpu.max": "max 100000",
    "memory.max": "max",
    "memory.min": "0",
    "memory.low": "0",
    "pids.max": "max",
    "cpuset.cpus": "",
    "cpuset.mems": "",
}


def v2_fresh_value(filename: str) -> str | None:
    """The value ``filename`` holds in a cgroup whose controller was just enabled (v2)."""
    if filename.startswith("hugetlb.") and filename.endswith(".max"):
        return "max"
    return _V2_FRESH.get(filename)


# The v1 counterpart: a new v1 cgroup's settings (its cpusets start empty and are seeded, so
# they have no value to go back to).
_V1_FRESH = {
    "cpu.shares": "1024",
    "cpu.cfs_quota_us": "-1",
    "cpu.cfs_period_us": "100000",
    "memory.limit_in_bytes": "-1",
    "memory.memsw.limit_in_bytes": "-1",
    "pids.max": "max",
}


def fresh_value(version: str, filename: str) -> str | None:
    """What ``filename`` holds in a newly created cgroup of a ``version`` hierarchy ("v2", or
    v1 for "v1" and "hybrid"); None when there is no such default to restore."""
    if version == "v2":
        return v2_fresh_value(filename)
    if filename.startswith("hugetlb.") and filename.endswith(".limit_in_bytes"):
        return "-1"
    return _V1_FRESH.get(filename)


def limit_files(
    h: Hierarchy, limits: Limits, weight_formula: str = "kubelet"
) -> list[tuple[str, str, str]]:
    """(controller, file, value) to write for ``limits``, in opencontainers/cgroups' order:
    pids, memory, cpu, cpuset, hugetlb. 0 for shares, quota, memory or pids means unset,
    as in the library; -1 means no limit.
    """
    v2 = h.version == "v2"
    out: list[tuple[str, str, str]] = []
    if limits.pids:
        out.append(("pids", "pids.max", _max_or(limits.pids)))
    if limits.memory:
        if v2:
            out.append(("memory", "memory.max", _max_or(limits.memory)))
        else:
            out.append(("memory", "memory.limit_in_bytes", str(max(limits.memory, -1))))
    if v2:  # Unified settings; v1 has no counterpart (the kubelet's MemoryQoS is v2-only)
        for file, value in (("memory.min", limits.memory_min), ("memory.low", limits.memory_low)):
            if value is not None:
                out.append(("memory", file, str(value)))
    if v2:
        if limits.cpu_shares:
            weight = shares_to_weight(limits.cpu_shares, weight_formula)
            out.append(("cpu", "cpu.weight", str(weight)))
        if limits.cpu_quota or limits.cpu_period:
            quota = "max" if not limits.cpu_quota or limits.cpu_quota < 0 else str(limits.cpu_quota)
            value = f"{quota} {limits.cpu_period}" if limits.cpu_period else quota
            out.append(("cpu", "cpu.max", value))
    else:
        if limits.cpu_shares:
            out.append(("cpu", "cpu.shares", str(limits.cpu_shares)))
        # The period goes first: the kernel checks a new quota against the current period.
        if limits.cpu_period:
            out.append(("cpu", "cpu.cfs_period_us", str(limits.cpu_period)))
        if limits.cpu_quota:
            out.append(("cpu", "cpu.cfs_quota_us", str(max(limits.cpu_quota, -1))))
    # v1 needs mems before a cgroup can hold tasks; write it first on both.
    if limits.cpuset_mems is not None:
        out.append(("cpuset", "cpuset.mems", limits.cpuset_mems))
    if limits.cpuset_cpus is not None:
        out.append(("cpuset", "cpuset.cpus", limits.cpuset_cpus))
    suffix = "max" if v2 else "limit_in_bytes"
    for size, limit in limits.hugetlb:
        value = _max_or(limit) if v2 else str(max(limit, -1))
        out.append(("hugetlb", f"hugetlb.{hugetlb_size_name(size)}.{suffix}", value))
    return out


def _int_or_max(text: str) -> int:
    return -1 if text == "max" else int(text)


def parse_limit_value(filename: str, text: str) -> int | str | tuple[int, int | None]:
    """A limit file's content as a ``Limits`` value: unlimited → -1, cpusets canonical,
    ``cpu.max`` → (quota or -1, period or None). Raises ValueError for other files or text.
    """
    text = text.strip()
    if filename in ("cpuset.cpus", "cpuset.mems"):
        return format_cpuset(parse_cpuset(text))
    if filename == "cpu.max":
        quota, _, period = text.partition(" ")
        return _int_or_max(quota), int(period) if period else None
    if filename in ("memory.min", "memory.low"):
        return _int_or_max(text)
    if filename in ("memory.max", "pids.max") or (
        filename.startswith("hugetlb.") and filename.endswith(".max")
    ):
        return _int_or_max(text)
    if filename == "memory.limit_in_bytes" or (
        filename.startswith("hugetlb.") and filename.endswith(".limit_in_bytes")
    ):
        value = int(text)
        return -1 if value >= V1_UNLIMITED_FLOOR else value
    if filename in ("cpu.shares", "cpu.weight", "cpu.cfs_period_us", "cpu.cfs_quota_us"):
        return int(text)  # v1 quota is already -1 for no limit
    raise ValueError(f"{filename!r} is not a limit file cgalloc knows")


def hugetlb_page_size(filename: str) -> int:
    """The page size of a hugetlb limit file: "hugetlb.2MB.max" → 2097152."""
    parts = filename.split(".")
    if len(parts) < 3 or parts[0] != "hugetlb":
        raise ValueError(f"{filename!r} is not a hugetlb file")
    return hugetlb_size_from_name(parts[1])
