"""Kubelet feature gates that change a number cgalloc computes, with their defaults per minor.

Specs follow ``pkg/features/kube_features.go`` (``defaultVersionedKubernetesFeatureGates``): a
gate's default at a kubelet minor is the last spec whose version is at or below that minor. A
modelled gate does not exist before its first spec: the kubelet of such a minor refuses it as
unrecognized (v1.20.2's ``defaultKubernetesFeatureGates`` has QOSReserved and
CustomCPUCFSQuotaPeriod, alpha and off, and none of the others).
The flag is parsed as ``cliflag.MapStringBool.Set`` parses it; names and values are refused as
component-base ``featuregate.SetFromMap`` refuses them, with the ``AllAlpha`` and ``AllBeta``
meta-gates. Gates cgalloc does not model (the kubelet has hundreds) are accepted and ignored
when they are well-formed names; a near miss of a modelled gate (``MemoryQos``) is refused as
the kubelet would refuse it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.model.versions import has, minor_tuple

if TYPE_CHECKING:
    from cgalloc.model.nodeconfig import NodeConfig

ALPHA, BETA, GA = "ALPHA", "BETA", ""


class Spec(NamedTuple):
    since: tuple[int, int]  # the kubelet minor this spec starts at
    default: bool
    stage: str  # ALPHA | BETA | GA
    locked: bool = False


GATES: dict[str, tuple[Spec, ...]] = {
    # qos_container_manager_linux.go: qosReserved memory limits on the QoS tiers
    "QOSReserved": (Spec((1, 11), False, ALPHA),),
    # memory.min/memory.low on pods, QoS tiers and enforced reserved cgroups (cgroup v2);
    # beta and on by default from 1.37 (KEP-2570, kubernetes#140007)
    "MemoryQoS": (Spec((1, 22), False, ALPHA), Spec((1, 37), True, BETA)),
    # pod-level spec.resources decide the QoS class and the pod cgroup
    "PodLevelResources": (Spec((1, 32), False, ALPHA), Spec((1, 34), True, BETA)),
    # restartable init containers (sidecars) count in the pod's requests; with the gate off
    # the kubelet rejects a pod that has one (lifecycle/predicate.go)
    "SidecarContainers": (
        Spec((1, 28), False, ALPHA),
        Spec((1, 29), True, BETA),
        Spec((1, 33), True, GA, locked=True),
    ),
    # cpuCFSQuotaPeriod other than 100ms, and MilliCPUToQuota's period (Go's constant is
    # features.CPUCFSQuotaPeriod; the gate users write is its string)
    "CustomCPUCFSQuotaPeriod": (Spec((1, 12), False, ALPHA),),
}
# Go identifiers of modelled gates whose string differs: the kubelet knows no such gate.
GO_NAMES = {"CPUCFSQuotaPeriod": "CustomCPUCFSQuotaPeriod"}
META = ("AllAlpha", "AllBeta")
_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
FORM = "gate=true|false pairs separated by commas, such as MemoryQoS=true,QOSReserved=true"


def exists(name: str, version: str) -> bool:
    """Whether the kubelet ``version`` knows modelled gate ``name``."""
    return GATES[name][0].since <= minor_tuple(version)


def spec_at(name: str, version: str) -> Spec:
    """The spec of a modelled gate in force at kubelet ``version`` (its first spec when the
    gate does not exist yet at that minor: see :func:`exists`)."""
    at = minor_tuple(version)
    chosen = GATES[name][0]
    for spec in GATES[name]:
        if spec.since <= at:
            chosen = spec
    return chosen


def check_gates(gates: Mapping[str, bool], version: str) -> list[str]:
    """``SetFromMap``'s refusals: unknown names and values that differ from a locked default."""
    problems: list[str] = []
    lowered = {g.lower(): g for g in (*GATES, *META)}
    for name, value in gates.items():
        if name in GATES and not exists(name, version):
            problems.append(
                f"unrecognized feature gate: {name} (the kubelet {version} has no such gate; it"
                f" arrived in 1.{GATES[name][0].since[1]})"
            )
        elif name in GATES:
            spec = spec_at(name, version)
            if spec.locked and spec.default != value:
                problems.append(
                    f"cannot set feature gate {name} to {str(value).lower()}, feature is locked"
                    f" to {str(spec.default).lower()}"
                )
        elif name in META:
            continue
        elif name in GO_NAMES:
            problems.append(
                f"unrecognized feature gate: {name} (the gate is named {GO_NAMES[name]})"
            )
        elif not _NAME.fullmatch(name) or name.lower() in lowered:
            problems.append(f"unrecognized feature gate: {name}")
    return problems


def memory_qos_mode(cfg: NodeConfig) -> str:
    """How MemoryQoS protects memory at ``cfg``'s kubelet minor: "off" (gate off); "min"
    (1.22 to 1.35: memory.min from requests everywhere); "tiered" (1.36+ TieredReservation:
    Guaranteed memory.min, Burstable memory.low); "none" (1.36+ policy None: no protection)."""
    if not enabled(cfg, "MemoryQoS"):
        return "off"
    if not has(cfg.kubelet_version, "memory-reservation-policy"):
        return "min"
    return "tiered" if cfg.memory_reservation_policy == "TieredReservation" else "none"


def sidecar_mode(cfg: NodeConfig) -> str:
    """How the kubelet at ``cfg``'s minor treats an init container with restartPolicy Always:
    "unknown" (before 1.28: no such field, a plain init container), "rejected" (the
    SidecarContainers gate off: the pod is refused admission), "sidecar"."""
    if not exists("SidecarContainers", cfg.kubelet_version):
        return "unknown"
    return "sidecar" if enabled(cfg, "SidecarContainers") else "rejected"


def enabled(cfg: NodeConfig, name: str) -> bool:
    """Whether gate ``name`` is on: its explicit value, else AllAlpha/AllBeta, else the default;
    off at a minor that does not have it."""
    if not exists(name, cfg.kubelet_version):
        return False
    if name in cfg.feature_gates:
        return cfg.feature_gates[name]
    spec = spec_at(name, cfg.kubelet_version)
    if spec.stage == ALPHA and "AllAlpha" in cfg.feature_gates:
        return cfg.feature_gates["AllAlpha"]
    if spec.stage == BETA and "AllBeta" in cfg.feature_gates:
        return cfg.feature_gates["AllBeta"]
    return spec.default
