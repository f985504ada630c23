"""Node Allocatable as the kubelet computes it, with every term that went into it.

Two results differ on purpose (pkg/kubelet/cm/node_container_manager_linux.go and
pkg/kubelet/nodestatus/setters.go):

* node-status Allocatable = capacity − system-reserved − kube-reserved − hard-eviction
  (memory.available, nodefs.available), then − every hugepages-* capacity from memory;
* the kubepods cgroup limits = capacity − system-reserved − kube-reserved over the internal
  capacity (cpu, memory, hugepages-*, pid): no eviction term, so the eviction manager acts before
  the kernel OOM-kills. Without "pods" enforced they are the full capacity.

``pods`` (maxPods, capped by podsPerCore × cores) is in Capacity and Allocatable alike
(nodestatus.MachineInfo); nothing reserves it.

Values are clamped at 0, as the kubelet does. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cgalloc.errors import InputError
from cgalloc.model import eviction
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PID,
    PODS,
    ResourceList,
    add,
    is_hugepages,
    subtract_clamped,
)
from cgalloc.model.versions import has

# What a reserved cgroup's limits hold (getCgroupConfigInternal); ephemeral-storage has no cgroup.
FULL_RESOURCES = (CPU, MEMORY, PID)
COMPRESSIBLE_RESOURCES = (CPU,)


class Term(NamedTuple):
    """One subtraction: ``quantity`` of ``resource`` taken by ``source``."""

    resource: str
    source: str  # "kube-reserved", "system-reserved", "eviction-hard memory.available<100Mi", ...
    quantity: Quantity
    lowers: tuple[str, ...] = ("allocatable",)  # "allocatable" and/or "kubepods"


class Allocatable(NamedTuple):
    """Node-status Allocatable, the cgroup limits, and how they were reached."""

    capacity: ResourceList  # as `kubectl describe node` shows (no pid)
    allocatable: ResourceList  # node-status Allocatable
    kubepods: ResourceList  # kubepods cgroup limits (cpu, memory, pid, hugepages-*)
    kube_reserved: ResourceList | None  # limits for the kube-reserved cgroup when enforced
    system_reserved: ResourceList | None
    breakdown: tuple[Term, ...]  # every subtraction
    warnings: tuple[str, ...]
    # Why enforcing this would fail (kubelet wording); see check_enforceable.
    enforce_problems: tuple[str, ...] = ()


def effective_reservations(cfg: NodeConfig) -> tuple[ResourceList, ResourceList]:
    """(kube, system) reservations after --reserved-cpus: the set's size replaces both CPU values.

    The kubelet (cmd/kubelet/app/server.go) deletes kubeReserved cpu and sets systemReserved cpu
    to the number of reserved CPUs.
    """
    kube, system = dict(cfg.kube_reserved), dict(cfg.system_reserved)
    if cfg.reserved_cpus:
        kube.pop(CPU, None)
        system[CPU] = Quantity.parse(str(len(cfg.reserved_cpus)))
    return kube, system


def _over_capacity(name: str, reserved: Quantity, capacity: Quantity) -> str:
    return (
        f'Resource "{name}" has a reservation of {reserved} but capacity of {capacity}.'
        " Expected capacity >= reservation."
    )


def pods_capacity(cfg: NodeConfig, capacity: Mapping[str, Quantity]) -> Quantity:
    """nodestatus.MachineInfo: maxPods, or min(podsPerCore × cores, maxPods) when podsPerCore
    is above 0."""
    pods = cfg.max_pods
    if cfg.pods_per_core > 0 and CPU in capacity:
        pods = min(capacity[CPU].value() * cfg.pods_per_core, cfg.max_pods)
    return Quantity.from_int(pods)


def _reserved_cgroup(
    kind: str, reserved: ResourceList, cfg: NodeConfig, problems: list[str]
) -> ResourceList | None:
    """Limits of the ``kind``-reserved cgroup when it is enforced, else None.

    Like enforceExistingCgroup, a reservation that holds nothing the mode enforces (only
    ephemeral-storage, or memory under -compressible) still succeeds: the cgroup gets the
    cpuset and hugetlb limits only. Only an empty reservation fails, as the kubelet's nil map
    does in getCgroupConfig.
    """
    enforce = cfg.enforce_node_allocatable
    if f"{kind}-reserved" in enforce:
        keep = FULL_RESOURCES
    elif f"{kind}-reserved-compressible" in enforce:
        keep = COMPRESSIBLE_RESOURCES
    else:
        return None
    given = cfg.kube_reserved if kind == "kube" else cfg.system_reserved
    if not given and not (kind == "system" and cfg.reserved_cpus):
        title = "Kube" if kind == "kube" else "System"
        value = cfg.kube_reserved_cgroup if kind == "kube" else cfg.system_reserved_cgroup
        problems.append(
            f"Failed to enforce {title} Reserved Cgroup Limits on {value!r}: the cgroup is not"
            f" configured properly ({kind}Reserved is empty); reserve at least one resource in"
            f" {kind}Reserved (--{kind}-reserved) or stop enforcing {kind}-reserved."
        )
    return {name: q for name, q in reserved.items() if name in keep}


def compute(cfg: NodeConfig, capacity: Mapping[str, Quantity]) -> Allocatable:
    """Allocatable, kubepods and reserved-cgroup limits for ``cfg`` on a node of ``capacity``."""
    kube, system = effective_reservations(cfg)
    thresholds = {} if cfg.ignore_eviction else cfg.eviction_hard
    evicted = eviction.reservation(thresholds, dict(capacity))
    enforce_pods = cfg.cgroups_per_qos and "pods" in cfg.enforce_node_allocatable
    terms: list[Term] = []
    warnings: list[str] = []
    problems: list[str] = []

    # GetNodeAllocatableReservation: only keys present in capacity count.
    reservation: ResourceList = {}
    for name, cap in sorted(capacity.items()):
        total = Quantity.from_int(0)
        # pid is not in node-status Allocatable; no cgroup holds ephemeral-storage.
        lowers = tuple(
            target
            for target, applies in (
                ("allocatable", name != PID),
                ("kubepods", enforce_pods and name != EPHEMERAL_STORAGE),
            )
            if applies
        )
        for source, rl in (("system-reserved", system), ("kube-reserved", kube)):
            if name in rl:
                total = total + rl[name]
                terms.append(Term(name, source, rl[name], lowers=lowers))
        if name in evicted:
            total = total + evicted[name]
            source = next(
                f"eviction-hard {t}"
                for s, t in thresholds.items()
                if eviction.RESERVING_SIGNALS.get(s) == name
            )
            terms.append(Term(name, source, evicted[name]))
        if total:
            reservation[name] = total
        if total > cap and name == PID:
            # validateNodeAllocatable checks cm.capacity, which has no pid: the kubelet starts.
            warnings.append(
                f"pid: the reservation of {total} exceeds the pid capacity of {cap}; the kubelet"
                " still starts (its reservation check leaves pid out) and the kubepods pids"
                " limit clamps to 0, which the cgroup library leaves unwritten."
            )
        elif total > cap:
            problems.append(_over_capacity(name, total, cap))
            warnings.append(
                f"{name}: the reservation of {total} exceeds the capacity of {cap}, so"
                " Allocatable shows 0; the kubelet would refuse to start with this configuration."
            )

    node_capacity = {k: v for k, v in capacity.items() if k != PID}
    allocatable = subtract_clamped(node_capacity, reservation)
    # The node-status setter takes every hugepages capacity from allocatable memory.
    for name, pages in sorted(node_capacity.items()):
        if is_hugepages(name) and MEMORY in allocatable:
            terms.append(Term(MEMORY, name, pages))
            if pages > allocatable[MEMORY] and pages:
                warnings.append(
                    f"memory: {name} ({pages}) exceeds what remains of memory"
                    f" ({allocatable[MEMORY]}), so Allocatable memory shows 0."
                )
            allocatable[MEMORY] = subtract_clamped({MEMORY: allocatable[MEMORY]}, {MEMORY: pages})[
                MEMORY
            ]

    internal = {k: v for k, v in capacity.items() if k != EPHEMERAL_STORAGE}
    kubepods = subtract_clamped(internal, add(system, kube)) if enforce_pods else dict(internal)

    kube_limits = _reserved_cgroup("kube", kube, cfg, problems)
    system_limits = _reserved_cgroup("system", system, cfg, problems)
    pods = pods_capacity(cfg, capacity)
    node_capacity[PODS] = pods
    allocatable[PODS] = pods
    return Allocatable(
        capacity=node_capacity,
        allocatable=allocatable,
        kubepods=kubepods,
        kube_reserved=kube_limits,
        system_reserved=system_limits,
        breakdown=tuple(terms),
        warnings=tuple(warnings),
        enforce_problems=tuple(problems),
    )


def check_enforceable(result: Allocatable) -> None:
    """Raise InputError when enforcing ``result`` would fail as the kubelet's start-up would."""
    if result.enforce_problems:
        raise InputError(
            [f"invalid Node Allocatable configuration: {p}" for p in result.enforce_problems]
        )


class CpuSets(NamedTuple):
    """The cpusets the kubelet's CPU manager policy gives kubepods and the reserved cgroups."""

    policy: str  # "none", "static", or "static (strict-cpu-reservation)"
    kubepods: frozenset[int] | None  # None: the kubelet leaves kubepods' cpuset alone
    reserved_cgroups: frozenset[int] | None
    kept_off: frozenset[int] = frozenset()  # reserved CPUs pods stay off (strict)
    notes: tuple[str, ...] = ()


def cpu_sets(cfg: NodeConfig, cpus: frozenset[int]) -> CpuSets:
    """kubepods' and the reserved cgroups' cpusets for ``cfg`` on a node with ``cpus``.

    getCgroupConfig (node_container_manager_linux.go) sets ``CPUSet = GetAllCPUs()`` whenever
    the policy's GetAllocatableCPUs is empty, which is the none policy; the static policy sets
    no cpuset there and instead keeps containers' cpusets within its shared pool, which with
    strict-cpu-reservation leaves out the reserved CPUs (cpumanager/policy_static.go). cgalloc
    expresses that last rule on kubepods itself, so pods stay off the reserved CPUs.
    Before 1.32 (``versions`` row kubepods-cpuset) getCgroupConfig sets no cpuset at all.
    """
    if cfg.cpu_manager_policy != "static":
        if not has(cfg.kubelet_version, "kubepods-cpuset"):
            return CpuSets("none", None, None)
        return CpuSets("none", cpus, cpus)
    if not cfg.strict_cpu_reservation:
        return CpuSets("static", None, None)
    notes: tuple[str, ...] = ()
    reserved = cfg.reserved_cpus
    if not reserved:
        kube, system = effective_reservations(cfg)
        milli = sum(rl[CPU].milli_value() for rl in (kube, system) if CPU in rl)
        count = -(-milli // 1000)  # the static policy reserves ceil(reserved cpu) whole CPUs
        reserved = frozenset(sorted(cpus)[:count])
        notes = (
            f"strict-cpu-reservation without reservedSystemCPUs: the kubelet picks {count}"
            " reserved CPU(s) by topology (takeByTopology); cgalloc assumes the lowest-numbered"
            " ones. Give --reserved-cpus to pin them.",
        )
    return CpuSets("static (strict-cpu-reservation)", cpus - reserved, None, reserved, notes)
