"""Allocatable, kubepods and reserved-cgroup limits with the kubelet's exact figures."""

import pytest

from cgalloc.errors import InputError
from cgalloc.inputs.thresholds import parse_threshold
from cgalloc.model.allocatable import Term, check_enforceable, compute
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.quantity import Quantity

Q = Quantity.parse


def rl(**kw):
    return {k.replace("_", "-"): Q(v) for k, v in kw.items()}


def evict(**kw):
    return {k.replace("_", "."): parse_threshold(k.replace("_", "."), v) for k, v in kw.items()}


def strs(resources):
    return {k: str(v) for k, v in resources.items()}


def test_openshift_example_allocatable_below_kubepods_limit():
    # 32Gi, kube 2Gi, system 1Gi, eviction 100Mi: Allocatable 29Gi-100Mi, kubepods 29Gi.
    cfg = NodeConfig(
        kube_reserved=rl(memory="2Gi"),
        system_reserved=rl(memory="1Gi"),
        eviction_hard=evict(memory_available="100Mi"),
    )
    result = compute(cfg, rl(memory="32Gi", pid="4194304"))
    assert str(result.allocatable["memory"]) == "29596Mi"
    assert str(result.kubepods["memory"]) == "29Gi"
    assert "pid" not in result.capacity and "pid" not in result.allocatable


def test_sixteen_cpu_node():
    cfg = NodeConfig(
        kube_reserved=rl(cpu="1000m", memory="2Gi", ephemeral_storage="1Gi"),
        system_reserved=rl(cpu="500m", memory="1Gi", ephemeral_storage="1Gi"),
        eviction_hard=evict(memory_available="500Mi", nodefs_available="10%"),
    )
    result = compute(cfg, rl(cpu="16", memory="32Gi", ephemeral_storage="100Gi"))
    assert strs(result.allocatable) == {
        "cpu": "14500m",
        "memory": "29196Mi",  # 32Gi - 3Gi - 500Mi
        # 100Gi - 2Gi - float32 10% (10737418400, not 10737418240)
        "ephemeral-storage": "94489280352",
        "pods": "110",
    }
    assert strs(result.kubepods) == {"cpu": "14500m", "memory": "29Gi"}
    assert (
        Term(
            "ephemeral-storage",
            "eviction-hard nodefs.available<10%",
            Quantity.from_int(10737418400),
        )
        in result.breakdown
    )


def test_aks_node_matches_kubectl_describe():
    # Azure/AKS#3525 (Standard_F2s_v2): kubectl shows cpu 1900m, memory 2209260Ki,
    # ephemeral-storage 119703055367 from capacity 2 / 4025836Ki / 129886128Ki.
    cfg = NodeConfig(
        kube_reserved=rl(cpu="100m", memory="1024Mi"),
        eviction_hard=evict(memory_available="750Mi", nodefs_available="10%"),
    )
    cap = rl(cpu="2", memory="4025836Ki", ephemeral_storage="129886128Ki")
    cap.update(rl(hugepages_1Gi="0", hugepages_2Mi="0"))
    result = compute(cfg, cap)
    assert strs(result.allocatable) == {
        "cpu": "1900m",
        "memory": "2209260Ki",
        "ephemeral-storage": "119703055367",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "pods": "110",
    }


def test_hugepages_leave_allocatable_memory_but_not_kubepods():
    cfg = NodeConfig(eviction_hard={})
    cap = rl(memory="8Gi", hugepages_2Mi="1Gi", hugepages_1Gi="2Gi")
    result = compute(cfg, cap)
    assert str(result.allocatable["memory"]) == "5Gi"
    assert str(result.kubepods["memory"]) == "8Gi"
    assert str(result.kubepods["hugepages-2Mi"]) == "1Gi"
    assert Term("memory", "hugepages-1Gi", Q("2Gi")) in result.breakdown


def test_ignore_eviction_drops_the_eviction_term():
    cfg = NodeConfig(eviction_hard=evict(memory_available="1Gi"), ignore_eviction=True)
    assert str(compute(cfg, rl(memory="4Gi")).allocatable["memory"]) == "4Gi"


@pytest.mark.parametrize(
    "cfg",
    [
        NodeConfig(kube_reserved=rl(memory="1Gi", pid="100"), enforce_node_allocatable=()),
        NodeConfig(
            kube_reserved=rl(memory="1Gi", pid="100"),
            cgroups_per_qos=False,
            enforce_node_allocatable=(),
        ),
    ],
)
def test_kubepods_full_capacity_without_pods_enforcement(cfg):
    result = compute(cfg, rl(cpu="4", memory="4Gi", pid="1000", ephemeral_storage="10Gi"))
    assert strs(result.kubepods) == {"cpu": "4", "memory": "4Gi", "pid": "1k"}
    assert str(result.allocatable["memory"]) == "3Gi"


def test_pid_reservation_lowers_only_kubepods():
    cfg = NodeConfig(system_reserved=rl(pid="1000"), kube_reserved=rl(pid="24"))
    result = compute(cfg, rl(memory="1Gi", pid="4096"))
    assert str(result.kubepods["pid"]) == "3072"
    assert "pid" not in result.allocatable
    assert Term("pid", "kube-reserved", Q("24"), ("kubepods",)) in result.breakdown


def test_reserved_cpus_replace_cpu_reservations():
    cfg = NodeConfig(
        kube_reserved=rl(cpu="500m", memory="1Gi"),
        system_reserved=rl(cpu="250m"),
        reserved_cpus=frozenset({0, 1}),
    )
    result = compute(cfg, rl(cpu="8", memory="8Gi"))
    assert str(result.allocatable["cpu"]) == "6"
    assert str(result.kubepods["cpu"]) == "6"
    cpu_terms = [t for t in result.breakdown if t.resource == "cpu"]
    assert cpu_terms == [Term("cpu", "system-reserved", Q("2"), ("allocatable", "kubepods"))]


def test_reserved_cgroup_limits_full_and_compressible():
    reserved = rl(cpu="1", memory="2Gi", ephemeral_storage="1Gi", pid="500")
    cfg = NodeConfig(
        kube_reserved=reserved,
        system_reserved=reserved,
        enforce_node_allocatable=("pods", "kube-reserved", "system-reserved-compressible"),
        kube_reserved_cgroup="/kube.slice",
        system_reserved_cgroup="/system.slice",
    )
    result = compute(cfg, rl(cpu="8", memory="16Gi", pid="10000", ephemeral_storage="100Gi"))
    assert strs(result.kube_reserved) == {"cpu": "1", "memory": "2Gi", "pid": "500"}
    assert strs(result.system_reserved) == {"cpu": "1"}
    check_enforceable(result)  # nothing over capacity


def test_unenforced_reserved_cgroups_have_no_limits():
    result = compute(NodeConfig(kube_reserved=rl(cpu="1")), rl(cpu="2"))
    assert result.kube_reserved is None and result.system_reserved is None


def test_reservation_above_capacity_shows_zero_and_cannot_be_enforced():
    cfg = NodeConfig(kube_reserved=rl(memory="3Gi"), system_reserved=rl(memory="2Gi"))
    result = compute(cfg, rl(memory="4Gi"))
    assert str(result.allocatable["memory"]) == "0"
    assert str(result.kubepods["memory"]) == "0"
    assert any("memory" in w and "shows 0" in w for w in result.warnings)
    with pytest.raises(InputError) as exc:
        check_enforceable(result)
    assert exc.value.problems == [
        # the sum starts from a zero DecimalSI quantity, which takes the BinarySI format on Add
        'invalid Node Allocatable configuration: Resource "memory" has a reservation of'
        " 5Gi but capacity of 4Gi. Expected capacity >= reservation."
    ]


def test_enforced_reserved_cgroup_with_nothing_reserved_cannot_be_enforced():
    cfg = NodeConfig(
        enforce_node_allocatable=("pods", "system-reserved"), system_reserved_cgroup="/sys.slice"
    )
    result = compute(cfg, rl(cpu="2"))
    assert result.system_reserved == {}
    with pytest.raises(InputError, match="systemReserved"):
        check_enforceable(result)


def test_reservations_absent_from_capacity_are_ignored():
    cfg = NodeConfig(kube_reserved=rl(ephemeral_storage="1Gi"), eviction_hard={})
    result = compute(cfg, rl(cpu="2", memory="1Gi"))
    assert strs(result.allocatable) == {"cpu": "2", "memory": "1Gi", "pods": "110"}
    assert result.breakdown == ()


# ---- issue 7, node level ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_pods", "per_core", "cpus", "pods"),
    [
        (110, 0, "16", "110"),  # maxPods alone
        (110, 4, "16", "64"),  # podsPerCore × cores below maxPods
        (110, 10, "16", "110"),  # capped by maxPods
        (250, 10, "2", "20"),
    ],
)
def test_pods_in_capacity_and_allocatable(max_pods, per_core, cpus, pods):
    # pkg/kubelet/nodestatus/setters.go MachineInfo: pods = maxPods, or
    # min(NumCores × podsPerCore, maxPods) when podsPerCore > 0; nothing reserves pods.
    cfg = NodeConfig(max_pods=max_pods, pods_per_core=per_core, kube_reserved=rl(cpu="1"))
    result = compute(cfg, rl(cpu=cpus, memory="8Gi"))
    assert str(result.capacity["pods"]) == pods
    assert str(result.allocatable["pods"]) == pods
    assert "pods" not in result.kubepods


def test_pid_reservation_above_pid_capacity_starts_with_kubepods_at_zero():
    # node_container_manager_linux.go validateNodeAllocatable iterates cm.capacity (no pid), so
    # the kubelet starts; getNodeAllocatableAbsoluteImpl clamps kubepods' pid to 0.
    cfg = NodeConfig(kube_reserved=rl(pid="5000"))
    result = compute(cfg, rl(cpu="2", memory="1Gi", pid="4096"))
    assert result.enforce_problems == ()
    check_enforceable(result)
    assert str(result.kubepods["pid"]) == "0"
    assert any("kubelet still starts" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("enforce", "reserved"),
    [
        (("pods", "kube-reserved"), rl(ephemeral_storage="1Gi")),
        (("pods", "kube-reserved-compressible"), rl(memory="1Gi")),
    ],
)
def test_reserved_cgroup_with_nothing_enforceable_succeeds(enforce, reserved):
    # node_container_manager_linux.go enforceExistingCgroup: getCgroupConfigInternal returns a
    # config for any non-nil list, so only an empty reservation is "not configured properly".
    cfg = NodeConfig(
        kube_reserved=reserved, enforce_node_allocatable=enforce, kube_reserved_cgroup="/kube"
    )
    result = compute(cfg, rl(cpu="2", memory="4Gi", ephemeral_storage="10Gi"))
    check_enforceable(result)
    assert result.kube_reserved == {}


def test_reserved_cgroup_with_an_empty_reservation_fails_like_the_kubelet():
    cfg = NodeConfig(enforce_node_allocatable=("kube-reserved",), kube_reserved_cgroup="/kube")
    result = compute(cfg, rl(cpu="2", memory="4Gi"))
    with pytest.raises(InputError, match="not configured properly"):
        check_enforceable(result)
