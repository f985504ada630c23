"""The desired node tree: every cgroup cgalloc manages (kubepods, the QoS tiers, pods, the
reserved cgroups) with the limits the kubelet gives it, from a ``NodeConfig``, its
``Allocatable`` and the pods; and setup's refusals of values the kernel would not take. Names
and paths are :mod:`cgalloc.model.naming`'s. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.errors import InputError
from cgalloc.model import features
from cgalloc.model.kernel_ranges import value_refusal
from cgalloc.model.naming import (
    CGROUP_FIELDS,
    CgroupName,
    driver,
    node_allocatable_cgroup,
    pod_path,
    reserved_path,
)
from cgalloc.model.resources import BESTEFFORT, BURSTABLE, GUARANTEED, MEMORY, add, subtract_clamped
from cgalloc.model.versions import has

# The planning functions below import limits themselves: stats and
# kubelet-config use only the naming half of this module and should not pay for those.
if TYPE_CHECKING:
    from cgalloc.model.allocatable import Allocatable
    from cgalloc.model.hierarchy import Hierarchy
    from cgalloc.model.limits import Limits
    from cgalloc.model.nodeconfig import NodeConfig
    from cgalloc.model.podresources import PodCgroup

# The cgroup v1 controllers whose files show's figures are (cpu.shares, quota and period,
# memory in bytes).
_V1 = ("cpu", "cpuset", "memory", "pids", "hugetlb")


def value_refusals(
    cfg: NodeConfig, alloc: Allocatable, pods: Sequence[PodCgroup], cpus: frozenset[int]
) -> list[str]:
    """setup's refusals of the values this node's tree would hold (kubepods, QoS tiers, pods,
    reserved cgroups) that the kernel would refuse or change, as the warnings of show: measured
    as cgroup v1 files, since show reads no cgroup (the ranges behind v2's files are the same).
    """
    from cgalloc.model.hierarchy import Hierarchy, limit_files

    v1 = Hierarchy("v1", "/", {c: f"/{c}" for c in _V1}, None, frozenset(_V1))
    found = (
        value_refusal(d.role, d.path, file, value)
        for d in desired_tree(cfg, alloc, v1, pods, cpus)
        for _c, file, value in limit_files(v1, d.limits)
    )
    # in setup's order (plan.build sorts its refusals), so the two lists read alike
    return [f"setup refuses this value: {r}" for r in sorted(set(filter(None, found)))]


class DesiredCgroup(NamedTuple):
    """One cgroup cgalloc wants: path below the cgroupfs root (no leading '/'), role, limits."""

    path: str
    role: str  # "kubepods" | "qos" | "pod" | "kube-reserved" | "system-reserved"
    limits: Limits


def pod_limits(pod: PodCgroup, supported_sizes: Iterable[int]) -> Limits:
    """The pod cgroup's limits with ``maybeSetHugetlb``'s rule: every supported page size gets a
    limit, 0 for the sizes the pod did not request; requested sizes the host lacks are skipped."""
    sizes = sorted(set(supported_sizes))
    requested = dict(pod.limits.hugetlb)
    return pod.limits._replace(hugetlb=tuple((size, requested.get(size, 0)) for size in sizes))


def _tier_memory(pods: Sequence[PodCgroup], qos: str) -> int:
    """getQoSMemoryRequests: Σ the memory requests of one class's pods."""
    return sum(p.memory_request for p in pods if p.qos == qos)


def qos_memory_limits(
    cfg: NodeConfig, alloc: Allocatable, pods: Sequence[PodCgroup]
) -> tuple[int, int] | None:
    """The QoS-reserved memory limits (burstable, besteffort), or None when not configured.

    Only with the QOSReserved gate, as UpdateCgroups applies them. Base is
    GetNodeAllocatableAbsolute()[memory]: capacity − system − kube, no eviction term.
    """
    if not features.enabled(cfg, "QOSReserved"):
        return None
    percent = cfg.qos_reserved.get(MEMORY)
    reserved = add(cfg.system_reserved, cfg.kube_reserved)
    absolute = subtract_clamped(alloc.capacity, reserved).get(MEMORY)
    if percent is None or not absolute:  # 0% still sets both tiers' limit: allocatable
        return None
    base = absolute.value()
    guaranteed = _tier_memory(pods, GUARANTEED)
    burstable_req = _tier_memory(pods, BURSTABLE)
    burstable = base - guaranteed * percent // 100
    return burstable, burstable - burstable_req * percent // 100


def _supported(limits: Limits, controllers: frozenset[str]) -> Limits:
    # Like the kubelet, hugetlb and cpuset limits are skipped when the controller is not there.
    if "hugetlb" not in controllers:
        limits = limits._replace(hugetlb=())
    if "cpuset" not in controllers:
        limits = limits._replace(cpuset_cpus=None, cpuset_mems=None)
    return limits


def with_unrequested_hugetlb(limits: Limits, page_sizes: Iterable[int]) -> Limits:
    """maybeSetHugetlb (cgroup_manager_linux.go): every page size without a limit gets 0."""
    given = dict(limits.hugetlb)
    return limits._replace(hugetlb=tuple(sorted((s, given.get(s, 0)) for s in page_sizes)))


def _reserved_entries(cfg: NodeConfig, alloc: Allocatable) -> Iterable[tuple]:
    """(role, cgroup value, resources), in the kubelet's enforcement order."""
    yield "system-reserved", cfg.system_reserved_cgroup, alloc.system_reserved
    yield "kube-reserved", cfg.kube_reserved_cgroup, alloc.kube_reserved


def desired_tree(
    cfg: NodeConfig,
    alloc: Allocatable,
    hierarchy: Hierarchy,
    pods: Sequence[PodCgroup] = (),
    online_cpus: frozenset[int] | None = None,
) -> list[DesiredCgroup]:
    """The cgroups cgalloc manages for this node, parents first.

    ``online_cpus`` are the node's CPUs (the kubelet's GetAllCPUs); without them no cpuset is
    planned. The CPU manager policy decides the cpusets (``allocatable.cpu_sets``).
    """
    from cgalloc.model.allocatable import cpu_sets  # allocatable imports config, which is fine here
    from cgalloc.model.limits import format_cpuset, hugepage_limits, limits_from_resources

    drv = driver(cfg.cgroup_driver)
    problems: list[str] = []
    out: list[DesiredCgroup] = []
    sets = cpu_sets(cfg, online_cpus) if online_cpus is not None else None
    page_sizes = [size for size, _ in hugepage_limits(alloc.capacity)]

    def add(name: CgroupName | str, role: str, limits: Limits) -> None:
        path = name if isinstance(name, str) else drv.path(name)
        out.append(DesiredCgroup(path.lstrip("/"), role, _supported(limits, hierarchy.controllers)))

    def cpuset(limits: Limits, cpus: frozenset[int] | None) -> Limits:
        return limits if cpus is None else limits._replace(cpuset_cpus=format_cpuset(cpus))

    v2 = hierarchy.version == "v2"
    try:
        node_cgroup = node_allocatable_cgroup(cfg)
    except InputError as err:
        problems += err.problems
        node_cgroup = None
    if node_cgroup is not None:
        kube_limits = limits_from_resources(alloc.kubepods, compressible_only=False)
        kube_limits = cpuset(kube_limits, sets.kubepods if sets else None)
        if cfg.cgroups_per_qos:
            _pod_tree(cfg, alloc, node_cgroup, pods, kube_limits, v2, add)
        else:
            add(node_cgroup, "kubepods", kube_limits)

    for role, value, resources in _reserved_entries(cfg, alloc):
        if role in cfg.enforce_node_allocatable:
            compressible = False
        elif f"{role}-compressible" in cfg.enforce_node_allocatable:
            compressible = True
        else:
            continue
        if resources is None:
            continue
        try:
            paths = [reserved_path(value, CGROUP_FIELDS[role], drv, kubelets=True)]
            paths.append(reserved_path(value, CGROUP_FIELDS[role], drv))
        except InputError as err:
            problems += err.problems
            continue
        limits = limits_from_resources(resources, compressible)
        if v2 and features.enabled(cfg, "MemoryQoS") and limits.memory is not None:
            # enforceExistingCgroup: memory.min = the reservation (Unified, so v2 only),
            # whatever the memoryReservationPolicy; on by default from 1.37
            limits = limits._replace(memory_min=limits.memory)
        limits = with_unrequested_hugetlb(limits, page_sizes)
        limits = cpuset(limits, sets.reserved_cgroups if sets else None)
        for path in dict.fromkeys(paths):
            add(path, role, limits)
    if problems:
        raise InputError(problems)
    return out


def _pod_tree(
    cfg: NodeConfig,
    alloc: Allocatable,
    kubepods: CgroupName,
    pods: Sequence[PodCgroup],
    kube_limits: Limits,
    v2: bool,
    add: Callable[[CgroupName, str, Limits], None],
) -> None:
    from cgalloc.model.limits import HUGETLB_UNBOUNDED, MIN_SHARES, Limits, milli_cpu_to_shares

    kube_protect, burstable_protect = _tier_protection(cfg, pods, v2)
    add(kubepods, "kubepods", kube_limits._replace(**kube_protect))

    sizes = [size for size, _ in kube_limits.hugetlb]
    unbounded = tuple((size, HUGETLB_UNBOUNDED) for size in sizes)
    burstable_milli = sum(p.cpu_request_milli for p in pods if p.qos == BURSTABLE)
    burstable = Limits(
        cpu_shares=milli_cpu_to_shares(burstable_milli), hugetlb=unbounded, **burstable_protect
    )
    besteffort = Limits(cpu_shares=MIN_SHARES, hugetlb=unbounded)
    reserve = qos_memory_limits(cfg, alloc, pods)
    if reserve is not None:
        burstable = burstable._replace(memory=reserve[0])
        besteffort = besteffort._replace(memory=reserve[1])
    tiers = {BURSTABLE: kubepods.child("burstable"), BESTEFFORT: kubepods.child("besteffort")}
    add(tiers[BURSTABLE], "qos", burstable)
    add(tiers[BESTEFFORT], "qos", besteffort)

    for pod in pods:
        add(pod_path(kubepods, pod, driver(cfg.cgroup_driver)), "pod", pod_limits(pod, sizes))


def _tier_protection(
    cfg: NodeConfig, pods: Sequence[PodCgroup], v2: bool
) -> tuple[dict[str, int], dict[str, int]]:
    """MemoryQoS's Unified values (cgroup v2 only) for kubepods, the Guaranteed tier, and the
    burstable tier, per kubelet minor (qos_container_manager_linux.go setMemoryQoS and Start,
    node_container_manager_linux.go enforceNodeAllocatableCgroups; G and B are the Guaranteed
    and Burstable pods' memory requests):

    - 1.22 (the gate's first minor) to 1.35, with the gate: kubepods memory.min = G+B and
      burstable memory.min = B, each only when above 0; without it nothing.
    - 1.36 TieredReservation: kubepods memory.min = G+B, burstable memory.low = B, 0 written
      too; policy None: both 0; gate off: nothing.
    - 1.37 and later, TieredReservation: as 1.36 and kubepods memory.low = B (the burstable
      tier's parent must cover its protection); anything else (gate off, its new default on
      with policy None): kubepods memory.min and memory.low 0, burstable memory.low 0.
    """
    if not v2:
        return {}, {}
    mode = features.memory_qos_mode(cfg)
    burstable = _tier_memory(pods, BURSTABLE)
    guaranteed = _tier_memory(pods, GUARANTEED) + burstable
    if mode == "min":
        return (
            {"memory_min": guaranteed} if guaranteed > 0 else {},
            {"memory_min": burstable} if burstable > 0 else {},
        )
    since_137 = has(cfg.kubelet_version, "memory-qos-beta")
    if mode == "tiered":
        kube = {"memory_min": guaranteed, **({"memory_low": burstable} if since_137 else {})}
        return kube, {"memory_low": burstable}
    if since_137:
        return {"memory_min": 0, "memory_low": 0}, {"memory_low": 0}
    return ({"memory_min": 0}, {"memory_low": 0}) if mode == "none" else ({}, {})
