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
from cgalloc.model.protection import Protection, reserved_limits, v1_problems
from cgalloc.model.resources import (
    BESTEFFORT,
    BURSTABLE,
    CPU,
    GUARANTEED,
    MEMORY,
    ResourceList,
    add,
    subtract_clamped,
)
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


def reserved_enforcement(cfg: NodeConfig, role: str) -> str | None:
    """How the kubelet enforces ``role``'s reservation: "full", "compressible" (CPU only) or
    None (not at all)."""
    if role in cfg.enforce_node_allocatable:
        return "full"
    if f"{role}-compressible" in cfg.enforce_node_allocatable:
        return "compressible"
    return None


def reservation(resources: ResourceList) -> dict[str, int]:
    """A reservation by resource as protection reads it: memory in bytes, cpu in millicores."""
    out = {}
    if MEMORY in resources:
        out["memory"] = resources[MEMORY].value()
    if CPU in resources:
        out["cpu"] = resources[CPU].milli_value()
    return out


def _kubepods_weight(alloc: Allocatable, v2: bool, formula: str) -> tuple[int, int] | None:
    """kubepods' CPU weight as this hierarchy writes it (v2 cpu.weight, v1 cpu.shares) and its
    millicores: what proportional weights start from; None without a CPU figure."""
    from cgalloc.model.limits import milli_cpu_to_shares, shares_to_weight

    cpu = alloc.kubepods.get(CPU)
    if cpu is None:
        return None
    milli = cpu.milli_value()
    shares = milli_cpu_to_shares(milli)
    return (shares_to_weight(shares, formula) if v2 else shares), milli


def _reserved_entries(cfg: NodeConfig, alloc: Allocatable) -> Iterable[tuple]:
    """(role, cgroup value, its limits when enforced or None, its reservation), in the
    kubelet's enforcement order."""
    from cgalloc.model.allocatable import effective_reservations

    kube, system = effective_reservations(cfg)
    yield "system-reserved", cfg.system_reserved_cgroup, alloc.system_reserved, system
    yield "kube-reserved", cfg.kube_reserved_cgroup, alloc.kube_reserved, kube


def desired_tree(
    cfg: NodeConfig,
    alloc: Allocatable,
    hierarchy: Hierarchy,
    pods: Sequence[PodCgroup] = (),
    online_cpus: frozenset[int] | None = None,
    protection: Protection = Protection(),
    weight_formula: str = "kubelet",
) -> list[DesiredCgroup]:
    """The cgroups cgalloc manages for this node, parents first.

    ``online_cpus`` are the node's CPUs (the kubelet's GetAllCPUs); without them no cpuset is
    planned. The CPU manager policy decides the cpusets (``allocatable.cpu_sets``).
    ``protection`` changes the reserved cgroups beyond the kubelet (model/protection.py; the
    default is the kubelet's), ``weight_formula`` is the v2 shares→weight conversion its
    proportional weight starts from.
    """
    from cgalloc.model.allocatable import cpu_sets  # allocatable imports config, which is fine here
    from cgalloc.model.limits import (
        Limits,
        format_cpuset,
        hugepage_limits,
        limits_from_resources,
    )

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

    problems += protection.problems()
    weigh = _kubepods_weight(alloc, v2, weight_formula)
    for role, value, resources, reserved in _reserved_entries(cfg, alloc):
        enforced = reserved_enforcement(cfg, role) if resources is not None else None
        if enforced is None and not (value and protection.reaches(reserved)):
            continue
        try:
            paths = [reserved_path(value, CGROUP_FIELDS[role], drv, kubelets=True)]
            paths.append(reserved_path(value, CGROUP_FIELDS[role], drv))
        except InputError as err:
            problems += err.problems
            continue
        limits = Limits()
        if enforced is not None:
            limits = limits_from_resources(resources, enforced == "compressible")
            if v2 and features.enabled(cfg, "MemoryQoS") and limits.memory is not None:
                # enforceExistingCgroup: memory.min = the reservation (Unified, so v2 only),
                # whatever the memoryReservationPolicy; on by default from 1.37
                limits = limits._replace(memory_min=limits.memory)
            limits = with_unrequested_hugetlb(limits, page_sizes)
            limits = cpuset(limits, sets.reserved_cgroups if sets else None)
        if not protection.is_kubelet:
            wants = reservation(reserved)
            limits = reserved_limits(limits, wants, protection, weigh, v2)
            if not v2:
                problems += v1_problems(protection, paths[-1].lstrip("/"), limits, enforced, wants)
        for path in dict.fromkeys(paths):
            add(path, role, limits)
    if problems:
        raise InputError(list(dict.fromkeys(problems)))
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


def protection_notes(
    cfg: NodeConfig, alloc: Allocatable, v2: bool, protection: Protection, formula: str
) -> list[str]:
    """What an operator should hear about ``protection`` on this node: a reservation with no
    cgroup to protect, and what the kubelet writes back over it at its next start."""
    from cgalloc.model.limits import Limits, limits_from_resources, shares_to_weight
    from cgalloc.model.protection import kubelet_conflicts, weight_of

    if protection.is_kubelet:
        return []

    def convert(shares: int) -> int:
        return shares_to_weight(shares, formula)

    notes = []
    weigh = _kubepods_weight(alloc, v2, formula)
    memory_qos = v2 and features.enabled(cfg, "MemoryQoS")
    for role, value, resources, reserved in _reserved_entries(cfg, alloc):
        if not protection.reaches(reserved):
            continue
        if not value:
            notes.append(
                f"{role} reserves {', '.join(sorted(reservation(reserved)))} but names no "
                f"cgroup ({CGROUP_FIELDS[role]}): the --reserved-* options have nothing to "
                "protect there."
            )
            continue
        enforced = reserved_enforcement(cfg, role) if resources is not None else None
        kubelet = Limits()
        if enforced is not None:
            kubelet = limits_from_resources(resources, enforced == "compressible")
        planned = reserved_limits(kubelet, reservation(reserved), protection, weigh, v2)
        try:
            path = reserved_path(value, CGROUP_FIELDS[role], driver(cfg.cgroup_driver))
        except InputError:
            continue  # desired_tree says so
        notes += kubelet_conflicts(
            role, path.lstrip("/"), enforced, protection, memory_qos,
            weight_of(kubelet, v2, convert), weight_of(planned, v2, convert),
        )  # fmt: skip
    return notes


def assumed_contention(
    cfg: NodeConfig, alloc: Allocatable, version: str, formula: str = "kubelet"
) -> list[str]:
    """show's CPU-weight warning (model/protection.py ``contention``), from the planned tree
    alone: kubepods against the reserved cgroups beside it at the weight the kubelet gives them
    (the default weight where it does not enforce them), or against a ``/system.slice`` at the
    default weight when none is beside it."""
    from cgalloc.model.limits import limits_from_resources, shares_to_weight
    from cgalloc.model.naming import kubepods_path
    from cgalloc.model.protection import DEFAULT_WEIGHT, contention, weight_of

    v2 = version == "v2"
    version = "v2" if v2 else "v1"  # a hybrid host weighs with v1's shares
    try:
        kubepods = kubepods_path(cfg)
    except InputError:
        return []
    weigh = _kubepods_weight(alloc, v2, formula)
    if kubepods is None or weigh is None or CPU not in alloc.capacity:
        return []
    parent = kubepods.rpartition("/")[0]
    drv = driver(cfg.cgroup_driver)
    siblings: dict[str, int] = {}
    assumed = False
    for role, value, resources, _reserved in _reserved_entries(cfg, alloc):
        try:
            path = reserved_path(value, CGROUP_FIELDS[role], drv) if value else ""
        except InputError:
            continue
        if not path or path.rpartition("/")[0] != parent:
            continue
        weight = None
        if resources is not None:
            limits = limits_from_resources(resources, compressible_only=True)
            weight = weight_of(limits, v2, lambda s: shares_to_weight(s, formula))
        assumed = assumed or weight is None
        siblings[path] = weight or DEFAULT_WEIGHT[version]
    if not siblings:
        assumed = True
        siblings[f"{parent}/system.slice"] = DEFAULT_WEIGHT[version]
    found = contention(
        kubepods, weigh[0], siblings, alloc.capacity[CPU].milli_value(), weigh[1], assumed
    )
    return [found] if found else []
