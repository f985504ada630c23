"""A pod's QoS class, effective requests and limits, and cgroup values, as the kubelet has them.

Pure: no I/O. Each function names the upstream code it follows:

- API defaulting (``pkg/apis/core/v1/defaults.go`` ``SetDefaults_Pod``, ``defaultPodRequests``):
  a container's missing requests default to its limits; pod-level requests default to the
  containers' aggregate, then to pod-level limits.
- QoS (``pkg/apis/core/v1/helper/qos`` ``GetPodQOS`` / ``ComputePodQOS``).
- Requests and limits (``k8s.io/component-helpers/resource`` ``PodRequests`` / ``PodLimits``):
  max of each init container (plus the sidecars started before it) against the sum of regular
  containers and sidecars; pod-level values replace the aggregate; overhead is added.
- The pod cgroup (``pkg/kubelet/cm/helpers_linux.go`` ``ResourceConfigForPod``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from cgalloc.model.limits import (
    MIN_SHARES,
    QUOTA_PERIOD,
    Limits,
    hugepage_limits,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import (
    BESTEFFORT,
    BURSTABLE,
    CPU,
    GUARANTEED,
    MEMORY,
    ResourceList,
    is_hugepages,
)

QOS_CLASSES = (GUARANTEED, BURSTABLE, BESTEFFORT)
QOS_COMPUTE = (CPU, MEMORY)  # supportedQoSComputeResources
ZERO = Quantity.from_int(0)


@dataclass(frozen=True)
class Container:
    """One container's resources; ``restartable`` marks a sidecar (init, restartPolicy Always)."""

    name: str
    requests: ResourceList = field(default_factory=dict)
    limits: ResourceList = field(default_factory=dict)
    restartable: bool = False


@dataclass(frozen=True)
class Pod:
    """The parts of a Pod object the kubelet's cgroup code reads."""

    uid: str
    name: str  # namespace/name, for messages
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    overhead: ResourceList = field(default_factory=dict)
    # spec.resources (PodLevelResources): None when absent
    pod_requests: ResourceList | None = None
    pod_limits: ResourceList | None = None
    status_qos: str = ""  # status.qosClass, which GetPodQOS prefers
    # the reason of a PodResizePending condition ("Deferred", "Infeasible"): spec is ahead
    # of what the kubelet allocated, and sized the pod's cgroup from
    resize_pending: str = ""

    @property
    def has_pod_resources(self) -> bool:
        """``pod.Spec.Resources != nil``."""
        return self.pod_requests is not None or self.pod_limits is not None


def _add(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, q in other.items():
        into[name] = into[name] + q if name in into else q


def _max(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, q in other.items():
        if name not in into or q.nanos > into[name].nanos:
            into[name] = q


def supported_pod_level(name: str) -> bool:
    """``IsSupportedPodLevelResource``: cpu, memory and hugepages-*."""
    return name in QOS_COMPUTE or is_hugepages(name)


def _any_supported(rl: Mapping[str, Quantity] | None) -> bool:
    return any(supported_pod_level(n) for n in rl or {})


def pod_level_set(pod: Pod) -> bool:
    """``IsPodLevelResourcesSet``."""
    return _any_supported(pod.pod_requests) or _any_supported(pod.pod_limits)


# ---------------------------------------------------------------- the kubelet's minor


def as_read_by(pod: Pod, sidecars: str) -> Pod:
    """``pod`` as a kubelet with ``sidecars`` (:func:`features.sidecar_mode`) decodes it: before
    1.28 core/v1 Container has no restartPolicy, so a sidecar is a plain init container (v1.20.2
    PodRequestsAndLimits takes the max of the init containers)."""
    if sidecars != "unknown" or not any(c.restartable for c in pod.init_containers):
        return pod
    inits = tuple(replace(c, restartable=False) for c in pod.init_containers)
    return replace(pod, init_containers=inits)


def sidecar_refusal(pod: Pod, sidecars: str) -> str | None:
    """The kubelet's admission refusal of a pod with a sidecar while the SidecarContainers gate
    is off (pkg/kubelet/lifecycle/predicate.go, InitContainerRestartPolicyForbidden)."""
    if sidecars != "rejected":
        return None
    names = [c.name for c in pod.init_containers if c.restartable]
    if not names:
        return None
    return (
        f"pod {pod.name}: init container {names[0]} has restartPolicy Always and the"
        " SidecarContainers gate is off, so the kubelet rejects the pod"
        " (InitContainerRestartPolicyForbidden) and makes no cgroup for it; enable the gate"
        " (on by default from 1.29) or drop the restartPolicy."
    )


# ---------------------------------------------------------------- API defaulting


def with_defaults(pod: Pod, pod_level_resources: bool) -> Pod:
    """``SetDefaults_Pod``: container requests from limits; pod-level requests with the gate."""

    def defaulted(c: Container) -> Container:
        missing = {n: q for n, q in c.limits.items() if n not in c.requests}
        return Container(c.name, {**c.requests, **missing}, dict(c.limits), c.restartable)

    containers = tuple(defaulted(c) for c in pod.containers)
    inits = tuple(defaulted(c) for c in pod.init_containers)
    pod_requests = pod.pod_requests
    if pod_level_resources and pod.pod_limits:
        requests = dict(pod.pod_requests or {})
        aggregate = _aggregate(containers, inits, "requests")
        # Upstream defaults from the containers' aggregate only for hugepages (defaults.go at
        # 6df7e09, defaultPodRequests); cpu and memory fall through to the pod-level limits.
        for name, q in aggregate.items():
            if name not in requests and is_hugepages(name):
                requests[name] = q
        for name, q in pod.pod_limits.items():
            if name not in requests and supported_pod_level(name):
                requests[name] = q
        pod_requests = requests or pod.pod_requests
    return Pod(
        pod.uid, pod.name, containers, inits, dict(pod.overhead), pod_requests,
        pod.pod_limits, pod.status_qos,
    )  # fmt: skip


# ---------------------------------------------------------------- QoS


def _positive(into: ResourceList, rl: Mapping[str, Quantity]) -> set[str]:
    """Add the positive cpu/memory quantities of ``rl`` into ``into``; the names added."""
    found = set()
    for name, q in rl.items():
        if name in QOS_COMPUTE and q.nanos > 0:
            into[name] = into[name] + q if name in into else q
            found.add(name)
    return found


def compute_qos(pod: Pod, pod_level_resources: bool) -> str:
    """``ComputePodQOS``: sums of positive cpu/memory requests and limits; Guaranteed when every
    container (or the pod-level resources, with the gate) limits both and the sums match."""
    requests: ResourceList = {}
    limits: ResourceList = {}
    guaranteed = True
    if pod_level_resources and pod.has_pod_resources:
        _positive(requests, pod.pod_requests or {})
        if pod.pod_limits:
            found = _positive(limits, pod.pod_limits)
            guaranteed = set(QOS_COMPUTE) <= found
    else:
        for c in (*pod.containers, *pod.init_containers):
            _positive(requests, c.requests)
            if not set(QOS_COMPUTE) <= _positive(limits, c.limits):
                guaranteed = False
    if not requests and not limits:
        return BESTEFFORT
    matched = all(limits.get(n) == q for n, q in requests.items())
    return GUARANTEED if guaranteed and matched and len(requests) == len(limits) else BURSTABLE


def get_qos(pod: Pod, pod_level_resources: bool) -> str:
    """``GetPodQOS``: ``status.qosClass`` when the object carries one, else computed."""
    return pod.status_qos or compute_qos(pod, pod_level_resources)


# ---------------------------------------------------------------- requests and limits


def _aggregate(
    containers: Iterable[Container],
    inits: Iterable[Container],
    kind: str,
    declared: list[bool] | None = None,
) -> ResourceList:
    """``AggregateContainerRequests`` / ``AggregateContainerLimits`` (``kind``: requests|limits).

    ``declared`` = [cpu, memory] is cleared as ``ResourceConfigForPod``'s ``ContainerFn`` does:
    for every regular container's list and every init container's cumulative list.
    """

    def seen(rl: Mapping[str, Quantity]) -> None:
        if declared is not None:
            for i, name in enumerate(QOS_COMPUTE):
                if not rl.get(name, ZERO):
                    declared[i] = False

    result: ResourceList = {}
    for c in containers:
        rl = getattr(c, kind)
        seen(rl)
        _add(result, rl)
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in inits:
        rl = getattr(c, kind)
        if c.restartable:
            _add(result, rl)
            _add(sidecars, rl)
            running = dict(sidecars)
        else:
            running = dict(rl)
            _add(running, sidecars)
        seen(running)
        _max(init_peak, running)
    _max(result, init_peak)
    return result


def pod_requests(pod: Pod, pod_level: bool = True, overhead: bool = True) -> ResourceList:
    """``PodRequests``; ``pod_level`` = not SkipPodLevelResources."""
    reqs = _aggregate(pod.containers, pod.init_containers, "requests")
    if pod_level and _any_supported(pod.pod_requests):
        reqs.update({n: q for n, q in (pod.pod_requests or {}).items() if supported_pod_level(n)})
    if overhead:
        _add(reqs, pod.overhead)
    return reqs


def pod_limits(
    pod: Pod, pod_level: bool = True, declared: list[bool] | None = None
) -> ResourceList:
    """``PodLimits``: overhead is added only to limits that are present and non-zero."""
    limits = _aggregate(pod.containers, pod.init_containers, "limits", declared)
    if pod_level and pod_level_set(pod):
        limits.update({n: q for n, q in (pod.pod_limits or {}).items() if supported_pod_level(n)})
    for name, q in pod.overhead.items():
        if limits.get(name, ZERO):
            limits[name] = limits[name] + q
    return limits


# ---------------------------------------------------------------- the pod cgroup


class PodCgroup(NamedTuple):
    """What the kubelet needs of a pod for its cgroup and its QoS tier."""

    uid: str
    name: str
    qos: str
    limits: Limits  # ResourceConfigForPod (+ podPidsLimit), hugetlb for requested sizes only
    cpu_request_milli: int  # PodRequests cpu, for the burstable tier's shares
    memory_request: int  # PodRequests memory (pod-level always counted), for the tier sums


def resource_config(
    pod: Pod,
    *,
    pod_level_resources: bool,
    enforce_cpu_limits: bool = True,
    cpu_period: int = QUOTA_PERIOD,
    custom_period: bool = False,
    memory_qos: str = "off",
    pod_pids_limit: int = -1,
) -> PodCgroup:
    """``ResourceConfigForPod`` plus the pod container manager's ``PidsLimit`` (when > 0).

    ``pod`` must already carry the API defaults (:func:`with_defaults`). ``custom_period`` is the
    CustomCPUCFSQuotaPeriod gate: without it the quota is computed over 100ms whatever the period.
    ``memory_qos`` is :func:`features.memory_qos_mode` on cgroup v2 ("off" on v1).
    """
    reqs = pod_requests(pod, pod_level=pod_level_resources)
    declared = [True, True]
    limits = pod_limits(pod, pod_level=pod_level_resources, declared=declared)
    if pod_level_resources and pod_level_set(pod):
        pod_lim = pod.pod_limits or {}
        declared = [declared[i] or bool(pod_lim.get(n, ZERO)) for i, n in enumerate(QOS_COMPUTE)]
    cpu_req = reqs[CPU].milli_value() if CPU in reqs else 0
    cpu_lim = limits[CPU].milli_value() if CPU in limits else 0
    memory = limits[MEMORY].value() if MEMORY in limits else 0
    shares = milli_cpu_to_shares(cpu_req)
    quota = milli_cpu_to_quota(cpu_lim, cpu_period if custom_period else QUOTA_PERIOD)
    if not enforce_cpu_limits:
        quota = -1
    qos = get_qos(pod, pod_level_resources)
    out = Limits(cpu_shares=MIN_SHARES)
    if qos == GUARANTEED:
        out = Limits(cpu_shares=shares, cpu_quota=quota, cpu_period=cpu_period, memory=memory)
    elif qos == BURSTABLE:
        out = Limits(
            cpu_shares=shares,
            cpu_quota=quota if declared[0] else None,
            cpu_period=cpu_period if declared[0] else None,
            memory=memory if declared[1] else None,
        )
    memory_req = reqs[MEMORY].value() if MEMORY in reqs else 0
    protect = memory_req if memory_req > 0 else None
    # before 1.36 every pod with a request gets memory.min; TieredReservation gives Burstable
    # pods the softer memory.low (ResourceConfigForPod's Cgroup2MemoryLow)
    low = memory_qos == "tiered" and qos != GUARANTEED
    minimum = memory_qos == "min" or (memory_qos == "tiered" and qos == GUARANTEED)
    out = Limits(
        cpu_shares=out.cpu_shares,
        cpu_quota=out.cpu_quota,
        cpu_period=out.cpu_period,
        memory=out.memory,
        pids=pod_pids_limit if pod_pids_limit > 0 else None,
        hugetlb=hugepage_limits(reqs),
        memory_min=protect if minimum else None,
        memory_low=protect if low else None,
    )
    # getQoSMemoryRequests calls PodRequests with default options: pod-level values count.
    # (the same as reqs unless pod-level requests were skipped above)
    same = pod_level_resources or not _any_supported(pod.pod_requests)
    tier_reqs = reqs if same else pod_requests(pod, pod_level=True)
    tier_memory = tier_reqs[MEMORY].value() if MEMORY in tier_reqs else 0
    return PodCgroup(pod.uid, pod.name, qos, out, cpu_req, tier_memory)
