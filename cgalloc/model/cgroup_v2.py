"""cgroup v2's files for ``Limits`` (opencontainers/cgroups ``fs2/``): their names, the values a
controller starts with when it is enabled, and how a value reads back. Pure: no I/O."""

from __future__ import annotations

from cgalloc.model.cpuset import parse_cpuset
from cgalloc.model.limits import Limits, format_cpuset, hugetlb_size_name, shares_to_weight

# What a v2 interface file reads when its controller has just been enabled in the parent's
# cgroup.subtree_control: the kernel creates a fresh css, so every setting starts at its default.
_FRESH = {
    "cpu.weight": "100",
    "cpu.max": "max 100000",
    "memory.max": "max",
    "memory.min": "0",
    "memory.low": "0",
    "memory.swap.max": "max",
    "pids.max": "max",
    "cpuset.cpus": "",
    "cpuset.mems": "",
}


def fresh_value(filename: str) -> str | None:
    """The value ``filename`` holds in a cgroup whose controller was just enabled."""
    if filename.startswith("hugetlb.") and filename.endswith(".max"):
        return "max"
    return _FRESH.get(filename)


def _max_or(value: int) -> str:
    return "max" if value < 0 else str(value)


def limit_files(limits: Limits, weight_formula: str = "kubelet") -> list[tuple[str, str, str]]:
    """(controller, file, value) for ``limits``: pids, memory, cpu, cpuset, hugetlb."""
    out: list[tuple[str, str, str]] = []
    if limits.pids:
        out.append(("pids", "pids.max", _max_or(limits.pids)))
    if limits.memory:
        out.append(("memory", "memory.max", _max_or(limits.memory)))
    # the kubelet's MemoryQoS (Unified settings): v1 has no counterpart
    for file, value in (("memory.min", limits.memory_min), ("memory.low", limits.memory_low)):
        if value is not None:
            out.append(("memory", file, str(value)))
    if limits.swap_max is not None:  # --reserved-swap (model/protection.py)
        out.append(("memory", "memory.swap.max", _max_or(limits.swap_max)))
    if limits.cpu_weight is not None:  # --reserved-cpu-weight proportional: a weight as is
        out.append(("cpu", "cpu.weight", str(limits.cpu_weight)))
    elif limits.cpu_shares:
        weight = shares_to_weight(limits.cpu_shares, weight_formula)
        out.append(("cpu", "cpu.weight", str(weight)))
    if limits.cpu_quota or limits.cpu_period:
        quota = "max" if not limits.cpu_quota or limits.cpu_quota < 0 else str(limits.cpu_quota)
        value = f"{quota} {limits.cpu_period}" if limits.cpu_period else quota
        out.append(("cpu", "cpu.max", value))
    if limits.cpuset_mems is not None:
        out.append(("cpuset", "cpuset.mems", limits.cpuset_mems))
    if limits.cpuset_cpus is not None:
        out.append(("cpuset", "cpuset.cpus", limits.cpuset_cpus))
    for size, limit in limits.hugetlb:
        out.append(("hugetlb", f"hugetlb.{hugetlb_size_name(size)}.max", _max_or(limit)))
    return out


def _int_or_max(text: str) -> int:
    return -1 if text == "max" else int(text)


def parse_limit_value(filename: str, text: str) -> int | str | tuple[int, int | None] | None:
    """A v2 limit file's stripped content as a ``Limits`` value (max → -1, cpusets canonical,
    ``cpu.max`` → (quota or -1, period or None)); None for a file that is not a v2 limit.
    Raises ValueError for bad text."""
    if filename in ("cpuset.cpus", "cpuset.mems"):
        return format_cpuset(parse_cpuset(text))
    if filename == "cpu.max":
        quota, _, period = text.partition(" ")
        return _int_or_max(quota), int(period) if period else None
    if filename in ("memory.max", "memory.min", "memory.low", "memory.swap.max", "pids.max") or (
        filename.startswith("hugetlb.") and filename.endswith(".max")
    ):
        return _int_or_max(text)
    if filename == "cpu.weight":
        return int(text)
    return None
