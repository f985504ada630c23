"""The settings cgalloc reads: each one's KubeletConfiguration name, kubelet flag, kind and
accepted form (``FIELDS``), and the kubelet's defaults (``DEFAULTS``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cgalloc.model import features
from cgalloc.model.cpuset import CPUSET_FORM
from cgalloc.model.eviction import DEFAULT_EVICTION_HARD
from cgalloc.model.nodeconfig import (
    DEFAULT_MAX_PODS,
    DEFAULT_ROOT_DIR,
)
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, VERSION_FORM

CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"
CONFIG_KIND = "KubeletConfiguration"

class Field(NamedTuple):  # a NamedTuple: a dataclass costs ~1.5 ms per process to build
    """One setting: its KubeletConfiguration name (None if flag-only), flag, kind, accepted form."""

    config: str | None
    flag: str
    kind: str  # "map" | "pairs" | "gates" | "list" | "str" | "bool" | "int"
    form: str

    @property
    def label(self) -> str:
        if self.flag in CONFIG_ONLY:
            return str(self.config)
        return f"{self.config} (--{self.flag})" if self.config else f"--{self.flag}"


DAEMON_CGROUP_FORM = "an absolute cgroupfs path such as /kube.slice/kubelet.service"
_RESERVED_FORM = "name=quantity pairs separated by commas, such as cpu=500m,memory=1Gi,pid=1000"
FIELDS = (
    Field("kubeReserved", "kube-reserved", "map", _RESERVED_FORM),
    Field("systemReserved", "system-reserved", "map", _RESERVED_FORM),
    Field(
        "evictionHard",
        "eviction-hard",
        "pairs",
        "signal<value pairs separated by commas, such as"
        " memory.available<100Mi,nodefs.available<10%",
    ),
    Field(
        "enforceNodeAllocatable",
        "enforce-node-allocatable",
        "list",
        "a comma-separated list of pods, system-reserved, system-reserved-compressible,"
        " kube-reserved, kube-reserved-compressible, or none",
    ),
    Field("kubeReservedCgroup", "kube-reserved-cgroup", "str", "an absolute cgroup name"),
    # The daemons' own cgroups (cmd/kubelet/app/options): literal cgroupfs paths whatever the
    # driver, as the kubelet's newSystemCgroups (pkg/kubelet/cm) opens them.
    Field("kubeletCgroups", "kubelet-cgroups", "str", DAEMON_CGROUP_FORM),
    Field("runtimeCgroups", "runtime-cgroups", "str", DAEMON_CGROUP_FORM),
    Field("systemCgroups", "system-cgroups", "str", DAEMON_CGROUP_FORM + ", not /"),
    Field("systemReservedCgroup", "system-reserved-cgroup", "str", "an absolute cgroup name"),
    Field("cgroupsPerQOS", "cgroups-per-qos", "bool", "true or false"),
    Field("cgroupDriver", "cgroup-driver", "str", "cgroupfs or systemd"),
    Field("cgroupRoot", "cgroup-root", "str", "an absolute cgroup name such as /"),
    Field("reservedSystemCPUs", "reserved-cpus", "str", CPUSET_FORM),
    Field("qosReserved", "qos-reserved", "map", "memory=N% with an integer N from 0 to 100"),
    Field(
        "podPidsLimit",
        "pod-max-pids",
        "int",
        "an integer, -1 (or any number below 1) for unlimited",
    ),
    Field("featureGates", "feature-gates", "gates", features.FORM),
    Field("cpuCFSQuota", "cpu-cfs-quota", "bool", "true or false"),
    Field(
        "cpuCFSQuotaPeriod",
        "cpu-cfs-quota-period",
        "str",
        "a duration such as 100ms, from 1ms to 1s",
    ),
    Field("staticPodPath", "pod-manifest-path", "str", "a directory or file path"),
    Field("maxPods", "max-pods", "int", "a whole number of pods such as 110"),
    Field("podsPerCore", "pods-per-core", "int", "a whole number, 0 for no per-core cap"),
    Field("cpuManagerPolicy", "cpu-manager-policy", "str", "none or static"),
    Field(
        "cpuManagerPolicyOptions",
        "cpu-manager-policy-options",
        "map",
        "one name=value pair per flag, such as strict-cpu-reservation=true",
    ),
    Field(
        "memoryReservationPolicy",
        "memory-reservation-policy",  # no kubelet flag: the config file's field only
        "str",
        "None or TieredReservation",
    ),
    # 1.31+: true makes the kubelet refuse a cgroup v1 host (default true from 1.35)
    Field("failCgroupV1", "fail-cgroupv1", "bool", "true or false"),
    Field(None, "experimental-allocatable-ignore-eviction", "bool", "true or false"),
    Field(None, "root-dir", "str", "an absolute directory path such as /var/lib/kubelet"),
    Field(
        None,
        "capacity",
        "map",
        "name=quantity pairs separated by commas, such as cpu=16,memory=64Gi;"
        " names are cpu, memory, ephemeral-storage, pid or hugepages-<size>",
    ),
    Field(None, "kubelet-version", "str", VERSION_FORM),
)
BY_FLAG = {f.flag: f for f in FIELDS}
BY_CONFIG = {f.config: f for f in FIELDS if f.config}
# Flags a node-config.yaml may carry; cgalloc's own options are command-line only.
# Config-file fields the kubelet has no flag for (their "flag" is an internal key)
CONFIG_ONLY = frozenset({"memory-reservation-policy"})
KUBELET_FLAGS = frozenset(BY_FLAG) - {"capacity", "kubelet-version"} - CONFIG_ONLY
# Settings a kubelet minor may lack: flag -> the ``versions.BEHAVIOURS`` row that brought it.
# Before that minor the kubelet's lenient decode drops the config field (whatever its type:
# DecodeKubeletConfiguration falls back to lenient decoding and logs a warning) and pflag
# refuses the flag as unknown.
SINCE = {
    "cpu-manager-policy-options": "cpu-manager-policy-options",
    "memory-reservation-policy": "memory-reservation-policy",
    "fail-cgroupv1": "fail-cgroup-v1",
}

DEFAULTS: dict[str, object] = {
    "kube-reserved": {},
    "system-reserved": {},
    "eviction-hard": dict(DEFAULT_EVICTION_HARD),
    "enforce-node-allocatable": ["pods"],
    "kube-reserved-cgroup": "",
    "kubelet-cgroups": "",
    "runtime-cgroups": "",
    "system-cgroups": "",
    "system-reserved-cgroup": "",
    "cgroups-per-qos": True,
    "cgroup-driver": "cgroupfs",
    "cgroup-root": "",  # no default in the config types: run() makes "" "/" after validation
    "reserved-cpus": "",
    "qos-reserved": {},
    "pod-max-pids": -1,
    "experimental-allocatable-ignore-eviction": False,
    "root-dir": DEFAULT_ROOT_DIR,
    "capacity": {},
    "feature-gates": {},
    "cpu-cfs-quota": True,
    "cpu-cfs-quota-period": "100ms",
    "pod-manifest-path": "",
    "max-pods": DEFAULT_MAX_PODS,
    "pods-per-core": 0,
    "cpu-manager-policy": "none",
    "cpu-manager-policy-options": {},
    "memory-reservation-policy": "None",
    "fail-cgroupv1": None,  # unset: the minor's default (versions.refuses_cgroup_v1)
    "kubelet-version": DEFAULT_KUBELET_VERSION,
}

# strconv.ParseBool's spellings
BOOL_WORDS = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``; raises ValueError."""
    try:
        return BOOL_WORDS[text]
    except KeyError:
        raise ValueError(text) from None


def dedup(problems: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(problems))
