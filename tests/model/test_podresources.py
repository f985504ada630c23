"""QoS class, PodRequests/PodLimits and ResourceConfigForPod against upstream's own test tables."""

from __future__ import annotations

import pytest

from cgalloc.model.limits import Limits
from cgalloc.model.podresources import (
    BESTEFFORT,
    BURSTABLE,
    GUARANTEED,
    Container,
    Pod,
    compute_qos,
    get_qos,
    pod_limits,
    pod_requests,
    resource_config,
    with_defaults,
)
from cgalloc.model.quantity import Quantity

MI = 1 << 20


def rl(cpu: str = "", memory: str = "", **extra: str) -> dict[str, Quantity]:
    """getResourceList(cpu, memory) of the upstream tests, plus any other resources."""
    out = {k.replace("_", "-"): Quantity.parse(v) for k, v in extra.items()}
    if cpu:
        out["cpu"] = Quantity.parse(cpu)
    if memory:
        out["memory"] = Quantity.parse(memory)
    return out


def c(requests=None, limits=None, sidecar: bool = False) -> Container:
    return Container("c", requests or {}, limits or {}, sidecar)


def pod(containers, inits=(), pod_req=None, pod_lim=None, overhead=None) -> Pod:
    return Pod(
        "uid", "default/p", tuple(containers), tuple(inits), overhead or {}, pod_req, pod_lim
    )


# pkg/apis/core/v1/helper/qos/qos_test.go TestComputePodQOS (every case, same order)
# fmt: off
QOS_CASES = [
    ("guaranteed", pod([c(rl("100m", "100Mi"), rl("100m", "100Mi"))]), GUARANTEED, False),
    ("guaranteed-guaranteed", pod([c(rl("100m", "100Mi"), rl("100m", "100Mi"))] * 2), GUARANTEED, False),  # noqa: E501
    ("best-effort-best-effort", pod([c(), c()]), BESTEFFORT, False),
    ("best-effort", pod([c()]), BESTEFFORT, False),
    ("best-effort-burstable", pod([c(), c(rl("1"), rl("2"))]), BURSTABLE, False),
    ("best-effort-guaranteed", pod([c(), c(rl("10m", "100Mi"), rl("10m", "100Mi"))]), BURSTABLE, False),  # noqa: E501
    ("burstable-cpu-guaranteed-memory", pod([c(rl("", "100Mi"), rl("", "100Mi"))]), BURSTABLE, False),  # noqa: E501
    ("burstable-no-limits", pod([c(rl("100m", "100Mi"))]), BURSTABLE, False),
    ("burstable-guaranteed", pod([c(rl("1", "100Mi"), rl("2", "100Mi")), c(rl("100m", "100Mi"), rl("100m", "100Mi"))]), BURSTABLE, False),  # noqa: E501
    ("burstable-unbounded-but-requests-match-limits", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi")), c(rl("100m", "100Mi"))]), BURSTABLE, False),  # noqa: E501
    ("burstable-1", pod([c(rl("10m", "100Mi"), rl("100m", "200Mi"))]), BURSTABLE, False),
    ("burstable-2", pod([c(rl("0", "0"), rl("100m", "200Mi"))]), BURSTABLE, False),
    ("best-effort-hugepages", pod([c(rl("0", "0", hugepages_2Mi="1Gi"), rl("0", "0", hugepages_2Mi="1Gi"))]), BESTEFFORT, False),  # noqa: E501
    ("init-container", pod([c()], [c(rl("10m", "100Mi"), rl("100m", "200Mi"))]), BURSTABLE, False),
    ("guaranteed-with-pod-level-resources", pod([c()], pod_req=rl("10m", "100Mi"), pod_lim=rl("10m", "100Mi")), GUARANTEED, True),  # noqa: E501
    ("guaranteed-with-pod-and-container-level-resources", pod([c(rl("3m", "10Mi"), rl("5m", "20Mi"))], pod_req=rl("10m", "100Mi"), pod_lim=rl("10m", "100Mi")), GUARANTEED, True),  # noqa: E501
    ("burstable-with-pod-level-resources", pod([c()], pod_req=rl("10m", "10Mi"), pod_lim=rl("20m", "50Mi")), BURSTABLE, True),  # noqa: E501
    ("burstable-with-pod-and-container-level-resources", pod([c(rl("5m", "10Mi"), rl("5m", "10Mi"))], pod_req=rl("10m", "10Mi"), pod_lim=rl("20m", "50Mi")), BURSTABLE, True),  # noqa: E501
    ("burstable-with-pod-and-container-level-requests", pod([c(rl("5m", "10Mi"))], pod_req=rl("10m", "10Mi"), pod_lim={}), BURSTABLE, True),  # noqa: E501
    ("burstable-with-pod-and-container-level-resources-2", pod([c(rl("5m", "10Mi")), c(rl("5m", "10Mi"), rl("5m", "10Mi"))], pod_req=rl("10m", "10Mi"), pod_lim=rl("5m")), BURSTABLE, True),  # noqa: E501
]
# fmt: on


@pytest.mark.parametrize(("name", "p", "want", "gate"), QOS_CASES, ids=[c[0] for c in QOS_CASES])
def test_compute_pod_qos_upstream_table(name, p, want, gate):
    assert compute_qos(p, gate) == want


def test_pod_level_resources_ignored_without_the_gate():
    # ComputePodQOS reads spec.resources only with PodLevelResources on.
    p = pod([c()], pod_req=rl("10m", "100Mi"), pod_lim=rl("10m", "100Mi"))
    assert compute_qos(p, False) == BESTEFFORT


def test_get_pod_qos_prefers_status():
    # qos.go GetPodQOS: a non-empty status.qosClass wins over the computed class.
    p = Pod("u", "d/p", (c(),), status_qos=GUARANTEED)
    assert get_qos(p, True) == GUARANTEED


# k8s.io/component-helpers/resource/helpers_test.go TestPodResourceRequests / Limits
R = rl


@pytest.mark.parametrize(
    ("inits", "containers", "overhead", "want"),
    [
        ([c(R("4"))], [c(R("1"))], None, R("4")),  # nil options, larger init container
        ([c(R("2"))], [c(R("2")), c(R("3"))], None, R("5")),  # larger containers
        ([c(R("2"), R("2"))], [c(R("2")), c(R("3"))], R("1", "1Gi"), R("6", "1Gi")),  # overhead
        ([c(R("1"), sidecar=True)], [c(R("1"))], None, R("2")),  # restartable init container
        # multiple restartable init containers: max(5, 3+2+1 + 1) = 7
        ([c(R("5")), c(R("1"), sidecar=True), c(R("2"), sidecar=True), c(R("3"), sidecar=True)],
         [c(R("1"))], None, R("7")),
        # init-2 needs 5 + the sidecars started before it (1+2) = 8
        ([c(R("5")), c(R("1"), sidecar=True), c(R("2"), sidecar=True), c(R("5")),
          c(R("3"), sidecar=True)], [c(R("1"))], None, R("8")),
        ([c(R("10"), sidecar=True), c(R("200"))], [c(R("100"))], None, R("210")),
    ],
)  # fmt: skip
def test_pod_requests_upstream_table(inits, containers, overhead, want):
    assert pod_requests(pod(containers, inits, overhead=overhead)) == want


@pytest.mark.parametrize(
    ("inits", "containers", "overhead", "want"),
    [
        ([c(limits=R("4"))], [c(limits=R("1"))], None, R("4")),
        ([c(limits=R("2"))], [c(limits=R("2")), c(limits=R("3"))], None, R("5")),
        # overhead is only added to non-zero limits: no memory limit appears
        ([c(limits=R("2"))], [c(limits=R("2")), c(limits=R("3"))], R("1", "1Gi"), R("6")),
        ([], [c()], None, {}),
        ([], [c(limits=R("2", "2Gi")), c()], None, R("2", "2Gi")),
        ([c(limits=R("2", "2Gi")), c()], [c(limits=R("1", "1Gi"))], None, R("2", "2Gi")),
    ],
)  # fmt: skip
def test_pod_limits_upstream_table(inits, containers, overhead, want):
    assert pod_limits(pod(containers, inits, overhead=overhead)) == want


# pkg/kubelet/cm/helpers_linux_test.go TestResourceConfigForPod: quotaPeriod 100000 (default)
# and 5000 (tuned, with the CustomCPUCFSQuotaPeriod gate on as the test sets it).
DEF, TUNED = 100000, 5000
BURST_SHARES, PARTIAL_SHARES, GUAR_SHARES = 102, 204, 102  # MilliCPUToShares(100/200/100)
G = Limits(cpu_shares=GUAR_SHARES, cpu_quota=10000, cpu_period=DEF, memory=100 * MI)
# fmt: off
CONFIG_CASES = [
    ("besteffort", pod([c()]), True, DEF, False, Limits(cpu_shares=2)),
    ("burstable-no-limits", pod([c(rl("100m", "100Mi"))]), True, DEF, False, Limits(cpu_shares=BURST_SHARES)),  # noqa: E501
    ("burstable-with-limits", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi"))]), True, DEF, False, Limits(cpu_shares=BURST_SHARES, cpu_quota=20000, cpu_period=DEF, memory=200 * MI)),  # noqa: E501
    ("burstable-with-limits-no-cpu-enforcement", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi"))]), False, DEF, False, Limits(cpu_shares=BURST_SHARES, cpu_quota=-1, cpu_period=DEF, memory=200 * MI)),  # noqa: E501
    ("burstable-partial-limits", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi")), c(rl("100m", "100Mi"))]), True, DEF, False, Limits(cpu_shares=PARTIAL_SHARES)),  # noqa: E501
    ("burstable-with-limits-with-tuned-quota", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi"))]), True, TUNED, False, Limits(cpu_shares=BURST_SHARES, cpu_quota=1000, cpu_period=TUNED, memory=200 * MI)),  # noqa: E501
    ("burstable-with-limits-no-cpu-enforcement-with-tuned-quota", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi"))]), False, TUNED, False, Limits(cpu_shares=BURST_SHARES, cpu_quota=-1, cpu_period=TUNED, memory=200 * MI)),  # noqa: E501
    ("burstable-partial-limits-with-tuned-quota", pod([c(rl("100m", "100Mi"), rl("200m", "200Mi")), c(rl("100m", "100Mi"))]), True, TUNED, False, Limits(cpu_shares=PARTIAL_SHARES)),  # noqa: E501
    ("guaranteed", pod([c(rl("100m", "100Mi"), rl("100m", "100Mi"))]), True, DEF, False, G),
    ("guaranteed-no-cpu-enforcement", pod([c(rl("100m", "100Mi"), rl("100m", "100Mi"))]), False, DEF, False, Limits(cpu_shares=GUAR_SHARES, cpu_quota=-1, cpu_period=DEF, memory=100 * MI)),  # noqa: E501
    ("guaranteed-with-tuned-quota", pod([c(rl("100m", "100Mi"), rl("100m", "100Mi"))]), True, TUNED, False, Limits(cpu_shares=GUAR_SHARES, cpu_quota=1000, cpu_period=TUNED, memory=100 * MI)),  # noqa: E501
    ("guaranteed-no-cpu-enforcement-with-tuned-quota", pod([c(rl("100m", "100Mi"), rl("100m", "100Mi"))]), False, TUNED, False, Limits(cpu_shares=GUAR_SHARES, cpu_quota=-1, cpu_period=TUNED, memory=100 * MI)),  # noqa: E501
    ("burstable-partial-limits-with-init-containers", pod([c(rl("100m", "100m"), rl("100m", "100Mi")), c(rl("100m", "100m"))], [c(rl("100m", "100m"), rl("100m", "100Mi")), c(rl("100m", "100m"))]), True, TUNED, False, Limits(cpu_shares=PARTIAL_SHARES)),  # noqa: E501
    ("besteffort-with-pod-level-resources-enabled", pod([c()], pod_req={}, pod_lim={}), True, DEF, True, Limits(cpu_shares=2)),  # noqa: E501
    ("burstable-with-pod-level-requests", pod([c()], pod_req=rl("100m", "100Mi")), True, DEF, True, Limits(cpu_shares=BURST_SHARES)),  # noqa: E501
    ("burstable-with-pod-and-container-level-requests", pod([c(rl("10m", "50Mi"))], pod_req=rl("100m", "100Mi")), True, DEF, True, Limits(cpu_shares=BURST_SHARES)),  # noqa: E501
    ("burstable-with-pod-level-resources", pod([c()], pod_req=rl("100m", "100Mi"), pod_lim=rl("200m", "200Mi")), True, DEF, True, Limits(cpu_shares=BURST_SHARES, cpu_quota=20000, cpu_period=DEF, memory=200 * MI)),  # noqa: E501
    ("burstable-with-pod-and-container-level-resources", pod([c(rl("10m", "50Mi"), rl("50m", "100Mi"))], pod_req=rl("100m", "100Mi"), pod_lim=rl("200m", "200Mi")), True, DEF, True, Limits(cpu_shares=BURST_SHARES, cpu_quota=20000, cpu_period=DEF, memory=200 * MI)),  # noqa: E501
    ("burstable-with-partial-pod-level-resources-limits", pod([c(rl("200m", "200Mi"), rl("200m", "200Mi"))], pod_req=rl("200m", "300Mi")), True, DEF, True, Limits(cpu_shares=PARTIAL_SHARES, cpu_quota=20000, cpu_period=DEF, memory=200 * MI)),  # noqa: E501
    ("guaranteed-with-pod-level-resources", pod([c()], pod_req=rl("100m", "100Mi"), pod_lim=rl("100m", "100Mi")), True, DEF, True, G),  # noqa: E501
    ("guaranteed-with-pod-and-container-level-resources", pod([c(rl("10m", "50Mi"), rl("50m", "100Mi"))], pod_req=rl("100m", "100Mi"), pod_lim=rl("100m", "100Mi")), True, DEF, True, G),  # noqa: E501
    ("guaranteed-pod-level-resources-with-init-containers", pod([c(rl("10m", "50Mi"), rl("50m", "50Mi"))], [c(rl("10m", "50Mi"), rl("50m", "50Mi"))], pod_req=rl("100m", "100Mi"), pod_lim=rl("100m", "100Mi")), True, DEF, True, G),  # noqa: E501
]
# fmt: on


@pytest.mark.parametrize(
    ("name", "p", "enforce", "period", "gate", "want"),
    CONFIG_CASES,
    ids=[x[0] for x in CONFIG_CASES],
)
def test_resource_config_for_pod_upstream_table(name, p, enforce, period, gate, want):
    got = resource_config(
        p, pod_level_resources=gate, enforce_cpu_limits=enforce, cpu_period=period,
        custom_period=True,
    )  # fmt: skip
    assert got.limits == want


def test_quota_period_without_the_gate_uses_100ms_for_the_quota():
    # helpers_linux.go MilliCPUToQuota: the period argument is ignored without the
    # CustomCPUCFSQuotaPeriod gate,
    # while ResourceConfigForPod still writes the configured period.
    p = pod([c(rl("100m", "100Mi"), rl("200m", "200Mi"))])
    got = resource_config(p, pod_level_resources=False, cpu_period=TUNED).limits
    assert (got.cpu_quota, got.cpu_period) == (20000, TUNED)


# helpers_linux_test.go TestResourceConfigForPodWithEnforceMemoryQoS: (memory.min, memory.low)
# of a pod. Before 1.36 ("min") every request is memory.min; 1.36 and later call it with
# TieredReservation ("tiered"): Burstable pods get memory.low, Guaranteed memory.min; policy
# None ("none") and the gate off write neither.
MEMORY_QOS_PODS = [
    ("burstable-no-limits", [c(rl("100m", "100Mi"))], "min", (100 * MI, None)),
    ("burstable-with-limits", [c(rl("100m", "100Mi"), rl("200m", "200Mi"))], "min",
     (100 * MI, None)),
    ("burstable-partial-limits", [c(rl("100m", "100Mi"), rl("200m", "200Mi")),
                                  c(rl("100m", "100Mi"))], "min", (200 * MI, None)),
    ("guaranteed", [c(rl("100m", "100Mi"), rl("100m", "100Mi"))], "min", (100 * MI, None)),
    ("besteffort", [c()], "min", (None, None)),
    ("burstable-no-limits", [c(rl("100m", "100Mi"))], "tiered", (None, 100 * MI)),
    ("burstable-with-limits", [c(rl("100m", "100Mi"), rl("200m", "200Mi"))], "tiered",
     (None, 100 * MI)),
    ("burstable-partial-limits", [c(rl("100m", "100Mi"), rl("200m", "200Mi")),
                                  c(rl("100m", "100Mi"))], "tiered", (None, 200 * MI)),
    ("guaranteed", [c(rl("100m", "100Mi"), rl("100m", "100Mi"))], "tiered", (100 * MI, None)),
    ("besteffort", [c()], "tiered", (None, None)),
    ("guaranteed", [c(rl("100m", "100Mi"), rl("100m", "100Mi"))], "none", (None, None)),
    ("burstable-no-limits", [c(rl("100m", "100Mi"))], "off", (None, None)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("containers", "mode", "protection"),
    [row[1:] for row in MEMORY_QOS_PODS],
    ids=[f"{row[0]}-{row[2]}" for row in MEMORY_QOS_PODS],
)
def test_memory_qos_protects_pods_by_kubelet_version(containers, mode, protection):
    got = resource_config(pod(containers), pod_level_resources=False, memory_qos=mode).limits
    assert (got.memory_min, got.memory_low) == protection


def test_hugepages_and_pids_and_overhead():
    # ResourceConfigForPod: HugePageLimit = HugePageLimits(PodRequests); PidsLimit when > 0;
    # RuntimeClass overhead counts in requests and in non-zero limits.
    p = pod(
        [c(rl("500m", "128Mi", hugepages_2Mi="4Mi"), rl("500m", "128Mi", hugepages_2Mi="4Mi"))],
        overhead=rl("250m", "64Mi"),
    )
    got = resource_config(p, pod_level_resources=False, pod_pids_limit=1024)
    assert got.qos == GUARANTEED
    assert got.limits == Limits(
        cpu_shares=768, cpu_quota=75000, cpu_period=DEF, memory=192 * MI, pids=1024,
        hugetlb=((2 * MI, 4 * MI),),
    )  # fmt: skip
    assert (got.cpu_request_milli, got.memory_request) == (750, 192 * MI)


def test_sidecar_limit_counts_as_declared_for_a_later_init_container():
    # AggregateContainerLimits hands ContainerFn the init container's cumulative list (itself +
    # earlier sidecars), so an init container without a cpu limit after a limited sidecar still
    # leaves the CPU limit "declared".
    p = pod(
        [c(rl("100m", "100Mi"), rl("200m", "200Mi"))],
        [
            c(rl("100m", "100Mi"), rl("100m", "100Mi"), sidecar=True),
            c(rl("", "10Mi"), rl("", "10Mi")),
        ],
    )
    got = resource_config(p, pod_level_resources=False).limits
    # limits: regular 200m + sidecar 100m = 300m; init peak 100m+0 → 300m
    assert (got.cpu_quota, got.memory) == (30000, 300 * MI)


def test_defaults_fill_requests_from_limits():
    # pkg/apis/core/v1/defaults.go SetDefaults_Pod: missing requests default to the limits.
    p = with_defaults(pod([c(limits=rl("1", "1Gi"))]), False)
    assert p.containers[0].requests == rl("1", "1Gi")
    assert compute_qos(p, False) == GUARANTEED
    # defaultPodRequests: pod-level requests from pod-level limits, only with the gate.
    q = pod([c()], pod_lim=rl("1", "1Gi"))
    assert with_defaults(q, True).pod_requests == rl("1", "1Gi")
    assert with_defaults(q, False).pod_requests is None


@pytest.mark.parametrize("gate", [False, True])
def test_tier_memory_counts_pod_level_requests_with_the_gate_off_too(gate):
    # qos_container_manager_linux.go getQoSMemoryRequests calls resource.PodRequests(pod,
    # PodResourcesOptions{}) — pod-level requests counted whatever the PodLevelResources gate,
    # while the pod's own cgroup values (ResourceConfigForPod) follow the gate.
    p = pod([c(rl("100m", "100Mi"))], pod_req=rl("1", "300Mi"))
    got = resource_config(p, pod_level_resources=gate)
    assert got.memory_request == 300 * MI
    assert got.cpu_request_milli == (1000 if gate else 100)
