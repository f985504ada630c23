"""Abstract cgroup limits and the kubelet's conversions between CPU, shares, weight and quota.

Pure: no I/O. Constants and formulas follow the kubelet's ``pkg/kubelet/cm/helpers_linux.go``,
its linear ``getCPUWeight`` and the runtimes' newer shares→weight curve
(opencontainers/cgroups ``ConvertCPUSharesToCgroupV2Value``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import CPU, MEMORY, PID, hugepage_size_bytes, is_hugepages

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
MILLI_CPU_TO_CPU = 1000
QUOTA_PERIOD = 100000  # µs
MIN_QUOTA_PERIOD = 1000  # µs
MAX_WEIGHT = 10000
# The QoS manager lifts hugetlb limits on the tiers to this value ("unbounded").
HUGETLB_UNBOUNDED = 1 << 62


class Limits(NamedTuple):
    """Limits for one cgroup; ``None`` leaves the file unset."""

    cpu_shares: int | None = None  # v1 shares; converted to cpu.weight on v2
    cpu_quota: int | None = None  # µs, -1 = max
    cpu_period: int | None = None
    memory: int | None = None  # bytes, -1 = max
    pids: int | None = None  # -1 = max
    cpuset_cpus: str | None = None
    cpuset_mems: str | None = None
    hugetlb: tuple[tuple[int, int], ...] = ()  # (page size bytes, limit bytes), sorted by size
    # cgroup v2 only (the kubelet's ResourceConfig.Unified): MemoryQoS protection, or 0 to reset
    memory_min: int | None = None
    memory_low: int | None = None
    # beyond the kubelet, on reserved cgroups only (model/protection.py): a v2 cpu.weight
    # written as is instead of converted from cpu_shares, and the swap a cgroup may use in bytes
    # (v2 memory.swap.max; v1 memory.memsw.limit_in_bytes = memory + swap_max)
    cpu_weight: int | None = None
    swap_max: int | None = None


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """MilliCPUToShares: 0 → 2, else ``m*1024/1000`` clamped to [2, 262144]."""
    if milli_cpu == 0:
        return MIN_SHARES
    shares = milli_cpu * SHARES_PER_CPU // MILLI_CPU_TO_CPU
    return min(max(shares, MIN_SHARES), MAX_SHARES)


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    """MilliCPUToQuota: 0 → 0 (no quota), else ``m*period/1000`` raised to at least 1000µs."""
    if milli_cpu == 0:
        return 0
    quota = milli_cpu * period // MILLI_CPU_TO_CPU
    return max(quota, MIN_QUOTA_PERIOD)


def shares_to_weight_kubelet(shares: int) -> int:
    """The kubelet's linear ``getCPUWeight``: ``1 + (s-2)*9999/262142``, ≥262144 → 10000."""
    if shares < 0:
        raise ValueError(f"cpu shares must be >= 0, got {shares}")
    if shares >= MAX_SHARES:
        return MAX_WEIGHT
    # Go truncates toward zero, so shares 0 and 1 give 1 like shares 2.
    if shares <= MIN_SHARES:
        return 1
    return 1 + (shares - MIN_SHARES) * (MAX_WEIGHT - 1) // (MAX_SHARES - MIN_SHARES)


def shares_to_weight_runc(shares: int) -> int:
    """The runtimes' curve (runc ≥ 1.3.2, crun ≥ 1.23): 2→1, 1024→100, 262144→10000."""
    if shares < 0:
        raise ValueError(f"cpu shares must be >= 0, got {shares}")
    if shares == 0:
        return 0
    if shares <= MIN_SHARES:
        return 1
    if shares >= MAX_SHARES:
        return MAX_WEIGHT
    log = math.log2(shares)
    exponent = (log * log + 125 * log) / 612.0 - 7.0 / 34.0
    return math.ceil(math.pow(10, exponent))


WEIGHT_FORMULAS = {"kubelet": shares_to_weight_kubelet, "runc": shares_to_weight_runc}


def shares_to_weight(shares: int, formula: str = "kubelet") -> int:
    """cpu.shares → cpu.weight with the named formula ("kubelet" linear or "runc" curve)."""
    try:
        convert = WEIGHT_FORMULAS[formula]
    except KeyError:
        raise ValueError(
            f"unknown weight formula {formula!r}; accepted: {', '.join(WEIGHT_FORMULAS)}"
        ) from None
    return convert(shares)


def convert_memory_swap_to_v2(memswap: int, memory: int) -> int:
    """v1 memory+swap limit → v2 ``memory.swap.max`` (swap only); -1 = max, 0 = none."""
    if memory == -1 and memswap == 0:
        return -1
    if memswap in (-1, 0):
        return memswap
    if memory == -1:
        return memswap
    if memory == 0:
        raise ValueError("unable to set swap limit without memory limit")
    if memory < 0:
        raise ValueError(f"invalid memory value: {memory}")
    if memswap < memory:
        raise ValueError("memory+swap limit should be >= memory limit")
    return memswap - memory


def hugetlb_size_name(page_size: int) -> str:
    """Kernel hugetlb file naming of a page size: 65536 → "64KB", 2MiB → "2MB", 1GiB → "1GB"."""
    for shift, unit in ((30, "GB"), (20, "MB")):
        if page_size >= 1 << shift:
            return f"{page_size >> shift}{unit}"
    return f"{page_size >> 10}KB"


def hugetlb_size_from_name(name: str) -> int:
    """The reverse of :func:`hugetlb_size_name`: "2MB" → 2097152."""
    units = {"KB": 10, "MB": 20, "GB": 30}
    unit = name[-2:]
    if unit not in units or not name[:-2].isdigit():
        raise ValueError(f"hugetlb size {name!r} is not of the form <n>KB, <n>MB or <n>GB")
    return int(name[:-2]) << units[unit]


def format_cpuset(cpus: Iterable[int]) -> str:
    """A CPU set in the kernel's list format: {0, 1, 2, 5} → "0-2,5"."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        ranges.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(ranges)


def hugepage_limits(rl: Mapping[str, Quantity]) -> tuple[tuple[int, int], ...]:
    """HugePageLimits: ``hugepages-<size>`` entries summed per page size in bytes, sorted."""
    totals: dict[int, int] = {}
    for name, quantity in rl.items():
        if is_hugepages(name):
            size = hugepage_size_bytes(name)
            totals[size] = totals.get(size, 0) + quantity.value()
    return tuple(sorted(totals.items()))


def limits_from_resources(rl: Mapping[str, Quantity], compressible_only: bool = False) -> Limits:
    """getCgroupConfigInternal: cpu → shares; unless compressible-only, memory, pid, hugepages."""
    shares = milli_cpu_to_shares(rl[CPU].milli_value()) if CPU in rl else None
    if compressible_only:
        return Limits(cpu_shares=shares)
    return Limits(
        cpu_shares=shares,
        memory=rl[MEMORY].value() if MEMORY in rl else None,
        pids=rl[PID].value() if PID in rl else None,
        hugetlb=hugepage_limits(rl),
    )
