"""cgroup v1's files for ``Limits`` (opencontainers/cgroups ``fs/``): their names, the values a
new cgroup starts with, and how a value reads back. Pure: no I/O."""

from __future__ import annotations

from cgalloc.model.cpuset import parse_cpuset
from cgalloc.model.limits import Limits, format_cpuset, hugetlb_size_name

# v1 reports "no limit" as the largest page-counter value, rounded down to the page size
# (4 KiB: 9223372036854771712; hugetlb rounds to its own page size), so anything at or above
# 2^63 − 1 GiB cannot be a limit anyone wrote.
UNLIMITED_FLOOR = (1 << 63) - (1 << 30)

# A new v1 cgroup's settings (its cpusets start empty and are seeded, so they have no value to
# go back to).
_FRESH = {
    "cpu.shares": "1024",
    "cpu.cfs_quota_us": "-1",
    "cpu.cfs_period_us": "100000",
    "memory.limit_in_bytes": "-1",
    "memory.memsw.limit_in_bytes": "-1",
    "pids.max": "max",
}


def fresh_value(filename: str) -> str | None:
    """What ``filename`` holds in a newly created v1 cgroup; None: no default to restore."""
    if filename.startswith("hugetlb.") and filename.endswith(".limit_in_bytes"):
        return "-1"
    return _FRESH.get(filename)


def limit_files(limits: Limits) -> list[tuple[str, str, str]]:
    """(controller, file, value) for ``limits``: pids, memory, cpu, cpuset, hugetlb."""
    out: list[tuple[str, str, str]] = []
    if limits.pids:
        out.append(("pids", "pids.max", "max" if limits.pids < 0 else str(limits.pids)))
    if limits.memory:
        out.append(("memory", "memory.limit_in_bytes", str(max(limits.memory, -1))))
    if limits.swap_max is not None and limits.memory and limits.memory > 0:
        # --reserved-swap: v1 limits memory+swap together; the plan orders it against the
        # memory limit (never below it). Without a memory limit there is nothing to write:
        # tree.desired_tree refuses that (model/protection.py V1_SWAP_REFUSAL)
        memsw = -1 if limits.swap_max < 0 else limits.memory + limits.swap_max
        out.append(("memory", "memory.memsw.limit_in_bytes", str(memsw)))
    if limits.cpu_shares:
        out.append(("cpu", "cpu.shares", str(limits.cpu_shares)))
    # The period goes first: the kernel checks a new quota against the current period.
    if limits.cpu_period:
        out.append(("cpu", "cpu.cfs_period_us", str(limits.cpu_period)))
    if limits.cpu_quota:
        out.append(("cpu", "cpu.cfs_quota_us", str(max(limits.cpu_quota, -1))))
    # mems first: a v1 cgroup needs them before it can hold tasks
    if limits.cpuset_mems is not None:
        out.append(("cpuset", "cpuset.mems", limits.cpuset_mems))
    if limits.cpuset_cpus is not None:
        out.append(("cpuset", "cpuset.cpus", limits.cpuset_cpus))
    for size, limit in limits.hugetlb:
        name = f"hugetlb.{hugetlb_size_name(size)}.limit_in_bytes"
        out.append(("hugetlb", name, str(max(limit, -1))))
    return out


def parse_limit_value(filename: str, text: str) -> int | str | None:
    """A v1 limit file's stripped content as a ``Limits`` value (unlimited → -1, cpusets
    canonical); None for a file that is not a v1 limit. Raises ValueError for bad text."""
    if filename in ("cpuset.cpus", "cpuset.mems"):
        return format_cpuset(parse_cpuset(text))
    if filename in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes") or (
        filename.startswith("hugetlb.") and filename.endswith(".limit_in_bytes")
    ):
        value = int(text)
        return -1 if value >= UNLIMITED_FLOOR else value
    if filename in ("cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us"):
        return int(text)  # the quota is already -1 for no limit
    if filename == "pids.max":
        return -1 if text == "max" else int(text)
    return None
