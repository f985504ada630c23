"""The version table (cgalloc/model/versions.py BEHAVIOURS): each row's value at the minor
before the one that introduced it and at that minor.

Where upstream has a test table for the behaviour, the row's cases come from it (named at each
test); the 1.20 side comes from the v1.20.2 tag (Debian's orig tarball of it, the source of the
real kubelet the Vagrant lane runs) and from what that kubelet did in the guests
(shared/reference/real-kubelet.md).
"""

from __future__ import annotations

import pytest

from cgalloc.model import features, versions
from cgalloc.model.allocatable import compute, cpu_sets
from cgalloc.model.eviction import DEFAULT_EVICTION_HARD, default_eviction_hard
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.podresources import (
    Container,
    Pod,
    as_read_by,
    pod_requests,
    sidecar_refusal,
)
from cgalloc.model.quantity import Quantity

Q = Quantity.parse


def before(name: str) -> str:
    """The minor just before behaviour ``name`` arrived."""
    major, minor = versions.minor_tuple(versions.since(name))
    return f"{major}.{minor - 1}"


# ---------------------------------------------------------------- the table itself


def test_every_minor_from_1_20_to_1_37_is_accepted():
    assert versions.SUPPORTED_VERSIONS[0] == "1.20"
    assert versions.SUPPORTED_VERSIONS[-1] == versions.DEFAULT_KUBELET_VERSION == "1.37"
    assert len(versions.SUPPORTED_VERSIONS) == 18
    assert versions.normalise("v1.20.2") == "1.20"  # the real kubelet's `kubelet --version`
    assert versions.normalise("1.19") is None


def test_rows_are_in_order_named_once_and_cite_upstream():
    names = [b.name for b in versions.BEHAVIOURS]
    assert len(names) == len(set(names))
    minors = [versions.minor_tuple(b.since) for b in versions.BEHAVIOURS]
    assert minors == sorted(minors)
    for b in versions.BEHAVIOURS:
        assert (1, 21) <= versions.minor_tuple(b.since) <= (1, 37), b
        assert ".go" in b.source, b  # every row names the upstream file


@pytest.mark.parametrize("row", versions.BEHAVIOURS, ids=lambda b: b.name)
def test_has_switches_at_the_row_minor(row):
    assert not versions.has(before(row.name), row.name)
    assert versions.has(row.since, row.name)
    assert versions.has(versions.DEFAULT_KUBELET_VERSION, row.name)


def test_help_lists_every_behaviour_with_its_minor():
    text = versions.help_text()
    assert "1.20 to 1.37" in text and "default 1.37" in text
    for b in versions.BEHAVIOURS:
        assert f"{b.since}: {b.what}." in text


# ---------------------------------------------------------------- pid capacity (1.24)

# The real kubelet v1.20.2 in the Vagrant guests (real-kubelet.md): kernel.pid_max 4194304 and
# pid reservations 2000 gave kubepods pids.max 4194304 − 2000 = 4192304, whatever
# kernel.threads-max said.
PID_MAX = 4194304
THREADS_MAX = 63704  # a 2 GiB guest's kernel.threads-max: below pid_max


def kubepods_pids(version: str, pid_max: int | None, threads_max: int | None) -> int:
    cfg = NodeConfig(
        kube_reserved={"pid": Q("1000")},
        system_reserved={"pid": Q("1000")},
        kubelet_version=version,
    )
    pid = versions.pid_capacity(version, pid_max, threads_max)
    capacity = {"cpu": Q("2"), "memory": Q("2Gi"), "pid": Quantity.from_int(pid)}
    return compute(cfg, capacity).kubepods["pid"].value()


def test_real_kubelet_1_20_2_kubepods_pids_max():
    assert kubepods_pids("1.20", PID_MAX, THREADS_MAX) == 4192304


def test_pid_capacity_before_and_at_1_24():
    # pkg/kubelet/stats/pidlimit/pidlimit_linux.go Stats: v1.20.2 reads pid_max alone; from
    # kubernetes#107111 (PR #107112) the smaller of pid_max and threads-max
    assert kubepods_pids("1.23", PID_MAX, THREADS_MAX) == PID_MAX - 2000
    assert kubepods_pids("1.24", PID_MAX, THREADS_MAX) == THREADS_MAX - 2000
    assert kubepods_pids("1.37", PID_MAX, THREADS_MAX) == THREADS_MAX - 2000
    # either unreadable: before 1.24 MaxPID stays nil without pid_max; after, the readable one
    assert versions.pid_capacity("1.23", None, THREADS_MAX) is None
    assert versions.pid_capacity("1.24", None, THREADS_MAX) == THREADS_MAX
    assert versions.pid_capacity("1.24", PID_MAX, None) == PID_MAX
    assert versions.pid_capacity("1.24", None, None) is None


# ---------------------------------------------------------------- eviction defaults (1.30)


def test_default_eviction_hard_before_and_at_1_30():
    # v1.20.2 pkg/kubelet/apis/config/v1beta1/defaults_linux.go DefaultEvictionHard
    v120 = {
        "memory.available": "100Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
    }
    assert default_eviction_hard("1.20") == v120
    assert default_eviction_hard("1.29") == v120
    # pkg/kubelet/eviction/defaults_linux.go after PR #121834 (CHANGELOG-1.30.md)
    assert default_eviction_hard("1.30") == {**v120, "imagefs.inodesFree": "5%"}
    assert default_eviction_hard("1.37") == DEFAULT_EVICTION_HARD


# ---------------------------------------------------------------- cpusets (1.32)


def test_kubepods_cpuset_under_the_none_policy_before_and_at_1_32():
    # node_container_manager_linux.go getCgroupConfig: PR #125923 sets CPUSet = all CPUs when
    # the policy's allocatable CPUs are empty (none); v1.20.2 sets no CPUSet
    cpus = frozenset(range(4))
    old = cpu_sets(NodeConfig(kubelet_version="1.31"), cpus)
    assert (old.kubepods, old.reserved_cgroups) == (None, None)
    new = cpu_sets(NodeConfig(kubelet_version="1.32"), cpus)
    assert (new.kubepods, new.reserved_cgroups) == (cpus, cpus)


# ---------------------------------------------------------------- sidecars (1.28)


def sidecar_pod() -> Pod:
    # k8s.io/component-helpers/resource/helpers_test.go TestPodResourceRequests "restartable
    # init container": init (restartable) cpu 1, container cpu 1 -> cpu 2
    return Pod(
        "u1",
        "default/sidecar",
        (Container("c", {"cpu": Q("1")}),),
        (Container("i", {"cpu": Q("1")}, restartable=True),),
    )


def mode(version: str, **gates: bool) -> str:
    return features.sidecar_mode(NodeConfig(kubelet_version=version, feature_gates=gates))


def test_sidecar_before_1_28_is_a_plain_init_container():
    # v1.20.2: core/v1 Container has no restartPolicy and PodRequestsAndLimits takes the max of
    # the init containers: max(1, 1) = 1
    assert mode("1.27") == "unknown"
    assert pod_requests(as_read_by(sidecar_pod(), mode("1.27")))["cpu"] == Q("1")


def test_sidecar_at_1_28_is_rejected_unless_the_gate_is_on():
    # kube_features.go SidecarContainers {1.28 Alpha false}; lifecycle/predicate.go
    assert mode("1.28") == "rejected"
    assert "InitContainerRestartPolicyForbidden" in sidecar_refusal(sidecar_pod(), "rejected")
    assert mode("1.28", SidecarContainers=True) == "sidecar"
    assert pod_requests(as_read_by(sidecar_pod(), "sidecar"))["cpu"] == Q("2")
    # a pod without a sidecar is admitted whatever the gate
    plain = Pod("u2", "default/plain", (Container("c", {"cpu": Q("1")}),))
    assert sidecar_refusal(plain, "rejected") is None


def test_sidecar_gate_beta_on_1_29_and_locked_from_1_33():
    assert mode("1.29") == "sidecar"
    assert mode("1.29", SidecarContainers=False) == "rejected"
    assert features.check_gates({"SidecarContainers": False}, "1.32") == []
    assert features.check_gates({"SidecarContainers": False}, "1.33") == [
        "cannot set feature gate SidecarContainers to false, feature is locked to true"
    ]


# ---------------------------------------------------------------- gates that arrive


@pytest.mark.parametrize(
    ("gate", "row"),
    [("MemoryQoS", "memory-qos-gate"), ("PodLevelResources", "pod-level-resources"),
     ("SidecarContainers", "sidecar-containers")],
)  # fmt: skip
def test_a_gate_is_unrecognized_before_its_first_minor(gate, row):
    # component-base featuregate SetFromMap: "unrecognized feature gate: %s"; v1.20.2's
    # kube_features.go has none of these
    old = features.check_gates({gate: True}, before(row))
    assert len(old) == 1 and old[0].startswith(f"unrecognized feature gate: {gate}")
    assert features.check_gates({gate: True}, versions.since(row)) == []
    assert not features.enabled(
        NodeConfig(kubelet_version=before(row), feature_gates={gate: True}), gate
    )


def test_memory_qos_by_minor():
    def qos(version: str, **gates: bool) -> str:
        return features.memory_qos_mode(NodeConfig(kubelet_version=version, feature_gates=gates))

    assert qos("1.21", MemoryQoS=True) == "off"  # refused in validation; never on
    assert qos("1.22") == "off"  # alpha, off by default
    assert qos("1.22", MemoryQoS=True) == "min"  # memory.min from requests (KEP-2570)
    assert qos("1.35", MemoryQoS=True) == "min"
    assert qos("1.36", MemoryQoS=True) == "none"  # memoryReservationPolicy None
    assert qos("1.36") == "off"
    assert qos("1.37") == "none"  # beta, on by default


def test_qos_reserved_and_cfs_period_gates_exist_at_1_20():
    # v1.20.2 kube_features.go: QOSReserved and CustomCPUCFSQuotaPeriod, alpha and off
    gates = {"QOSReserved": True, "CustomCPUCFSQuotaPeriod": True}
    assert features.check_gates(gates, "1.20") == []
    cfg = NodeConfig(kubelet_version="1.20")
    assert not features.enabled(cfg, "QOSReserved")
    assert features.enabled(cfg._replace(feature_gates={"AllAlpha": True}), "QOSReserved")


# ---------------------------------------------------------------- the host's hierarchy


def test_cgroup_v1_refusal_default_from_1_35():
    # k8s.io/kubelet config/v1beta1 FailCgroupV1: Default false at kubernetes-1.31.0 to 1.34,
    # true at kubernetes-1.35.0
    assert versions.hierarchy_notes("1.34", "v1", "systemd") == []
    (note,) = versions.hierarchy_notes("1.35", "v1", "systemd")
    assert "failCgroupV1: false" in note
    assert versions.hierarchy_notes("1.35", "v2", "systemd") == []


def test_systemd_driver_on_v2_with_1_20():
    # real-kubelet.md: 1.20.2's systemd driver on v2 writes to cgroupfs-named twins
    (note,) = versions.hierarchy_notes("1.20", "v2", "systemd")
    assert "cgroupfs driver" in note
    assert versions.hierarchy_notes("1.20", "v2", "cgroupfs") == []
    assert versions.hierarchy_notes("1.21", "v2", "systemd") == []


def test_fail_cgroup_v1_as_given_from_1_31():
    # failCgroupV1 is dropped before 1.31 (lenient decode); from 1.31 an explicit value wins
    assert not versions.refuses_cgroup_v1("1.30", True)
    assert versions.refuses_cgroup_v1("1.31", True)
    assert not versions.refuses_cgroup_v1("1.31", None)
    assert not versions.refuses_cgroup_v1("1.37", False)
    assert versions.hierarchy_notes("1.37", "v1", "cgroupfs", fail_cgroup_v1=False) == []
