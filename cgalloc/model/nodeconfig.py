"""``NodeConfig``: the node-allocatable settings the kubelet runs with, validated (built by
:mod:`cgalloc.inputs.config`), and the kubelet's constants for them."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from cgalloc.model.eviction import Threshold
from cgalloc.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PID,
    ResourceList,
)
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION

ENFORCE_OPTIONS = (
    "pods",
    "system-reserved",
    "system-reserved-compressible",
    "kube-reserved",
    "kube-reserved-compressible",
    "none",
)
RESERVABLE = (CPU, MEMORY, EPHEMERAL_STORAGE, PID)
DEFAULT_ROOT_DIR = "/var/lib/kubelet"

DEFAULT_CFS_PERIOD_US = 100000  # cpuCFSQuotaPeriod's default, 100ms
DEFAULT_MAX_PODS = 110
CPU_MANAGER_POLICIES = ("none", "static")
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
# The static policy's options (pkg/kubelet/cm/cpumanager/policy_options.go); only
# strict-cpu-reservation changes a cgroup, the others are accepted and have no cgroup effect.
CPU_MANAGER_OPTIONS = (
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    STRICT_CPU_RESERVATION,
    "prefer-align-cpus-by-uncorecache",
)


_NO_ENTRIES: Mapping = MappingProxyType({})


class NodeConfig(NamedTuple):
    """The validated node-allocatable settings.

    A NamedTuple, not a dataclass: building one costs every process ~1.5 ms. The empty
    mappings the defaults share are read-only, so no instance can change another's.
    """

    kube_reserved: ResourceList = _NO_ENTRIES  # type: ignore[assignment]
    system_reserved: ResourceList = _NO_ENTRIES  # type: ignore[assignment]
    eviction_hard: dict[str, Threshold] = _NO_ENTRIES  # type: ignore[assignment]
    enforce_node_allocatable: tuple[str, ...] = ("pods",)
    kube_reserved_cgroup: str = ""
    system_reserved_cgroup: str = ""
    cgroups_per_qos: bool = True
    cgroup_driver: str = "cgroupfs"
    cgroup_root: str = "/"
    reserved_cpus: frozenset[int] = frozenset()
    ignore_eviction: bool = False
    qos_reserved: dict[str, int] = _NO_ENTRIES  # type: ignore[assignment]
    pod_max_pids: int = -1
    root_dir: str = DEFAULT_ROOT_DIR
    capacity_overrides: ResourceList = _NO_ENTRIES  # type: ignore[assignment]
    # pod-level inputs (issue 7): feature gates, CFS quota, the static pod directory
    feature_gates: dict[str, bool] = _NO_ENTRIES  # type: ignore[assignment]
    cpu_cfs_quota: bool = True
    cpu_cfs_quota_period: int = DEFAULT_CFS_PERIOD_US  # µs
    static_pod_path: str = ""
    max_pods: int = DEFAULT_MAX_PODS
    pods_per_core: int = 0
    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: dict[str, str] = _NO_ENTRIES  # type: ignore[assignment]
    kubelet_version: str = DEFAULT_KUBELET_VERSION
    # MemoryQoS's memoryReservationPolicy (1.36+, config file only): None or TieredReservation
    memory_reservation_policy: str = "None"
    # failCgroupV1 as given (1.31+); None: the minor's default (versions.refuses_cgroup_v1)
    fail_cgroup_v1: bool | None = None
    # where the kubelet, the runtime and the other system daemons run (kubeletCgroups, ...)
    kubelet_cgroups: str = ""
    runtime_cgroups: str = ""
    system_cgroups: str = ""

    def enforces(self, role: str) -> bool:
        """Whether ``role``'s cgroup is enforced: in full, or its compressible resources only."""
        wanted = self.enforce_node_allocatable
        return role in wanted or f"{role}-compressible" in wanted

    @property
    def strict_cpu_reservation(self) -> bool:
        """The static policy's strict-cpu-reservation option: pods stay off the reserved CPUs."""
        return (
            self.cpu_manager_policy == "static"
            and self.cpu_manager_policy_options.get(STRICT_CPU_RESERVATION) == "true"
        )


SYSTEM_RESERVED_RISK = (
    "enforcing system-reserved can CPU-starve or OOM-kill critical system services; enforce it "
    "only on nodes profiled exhaustively, and be ready to recover from an OOM kill in that "
    "cgroup (Kubernetes' Reserve Compute Resources for System Daemons)."
)


def enforcement_warnings(cfg: NodeConfig) -> list[str]:
    """Warnings the Kubernetes documentation gives for what ``cfg`` enforces."""
    return [SYSTEM_RESERVED_RISK] if "system-reserved" in cfg.enforce_node_allocatable else []
