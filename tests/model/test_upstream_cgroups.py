"""Upstream's own test tables for cgroup naming and cgroup limit conversions, run on cgalloc.

Sources (the expected values below are copied from these tables, never computed by cgalloc):

- kubernetes/kubernetes ``pkg/kubelet/cm/cgroup_manager_linux_test.go``,
  ``pkg/kubelet/cm/helpers_linux_test.go`` and
  ``pkg/kubelet/cm/qos_container_manager_linux_test.go``, as the source index stores their
  newest revision (written with Go 1.26's ``new(expr)``; it has the DRANodeAllocatableResources
  rows and the memoryReservationPolicy, both from 1.36).
- opencontainers/cgroups ``utils_test.go`` at the tags named in each test (HEAD is v0.1.0).

Tables already ported elsewhere are not repeated: TestResourceConfigForPod and
TestResourceConfigForPodWithEnforceMemoryQoS (tests/model/test_podresources.py). Rows a table holds
for behaviour cgalloc does not model are left out with a comment saying why.
"""

from __future__ import annotations

import pytest
from nodeargs import V1_HUGETLB

from cgalloc.inputs.pods import pod_cgroups
from cgalloc.model.allocatable import Allocatable
from cgalloc.model.hierarchy import Hierarchy, limit_files, parse_limit_value
from cgalloc.model.limits import (
    Limits,
    convert_memory_swap_to_v2,
    format_cpuset,
    hugepage_limits,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    shares_to_weight_kubelet,
    shares_to_weight_runc,
)
from cgalloc.model.naming import (
    ROOT,
    CgroupName,
    kubelet_systemd_name,
    node_allocatable_cgroup,
    pod_name,
    to_cgroupfs,
    to_systemd,
)
from cgalloc.model.naming import driver as cgroup_driver
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.podresources import GUARANTEED, Container, Pod, PodCgroup, resource_config
from cgalloc.model.quantity import Quantity
from cgalloc.model.tree import desired_tree

MI = 1 << 20
GI = 1 << 30
# pkg/kubelet/cm/helpers_linux.go
MIN_SHARES, MAX_SHARES = 2, 262144

V1 = V1_HUGETLB  # every controller mounted on its own hierarchy
V2 = Hierarchy(
    "v2",
    "/sys/fs/cgroup",
    {},
    "/sys/fs/cgroup",
    frozenset({"cpu", "cpuset", "memory", "pids", "hugetlb"}),
)


def go_path_base(p: str) -> str:
    """Go's ``path.Base``, which the upstream basename table applies: "/" stays "/"."""
    if not p:
        return "."
    p = p.rstrip("/")
    return p.rsplit("/", 1)[-1] if p else "/"


def name(*parts: str) -> CgroupName:
    """``NewCgroupName(RootCgroupName, parts...)``."""
    return CgroupName(parts)


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def rl(**items: str) -> dict[str, Quantity]:
    return {k.replace("_", "-"): q(v) for k, v in items.items()}


# ============================================================ cgroup_manager_linux_test.go

# TestNewCgroupName (kubernetes#68416, NewCgroupName aliasing the parent's slice) is left out:
# cgalloc's CgroupName is an immutable tuple, and the table's names hold an empty part
# (ParseCgroupfsToCgroupName("/a/") = ["a", ""]) which cgalloc never builds (it cleans the
# cgroup root first; tests/model/test_tree.py test_cgroupfs_cgroup_root_forms has "/a/").
# TestCgroupNameWithEmptyPartToSystemd exists only in an older stored revision, not in the one
# ported here (current ToSystemd panics on an empty part; cgalloc refuses it).

SYSTEMD_BASENAME = [
    (name(), "/"),
    (name("system"), "system.slice"),
    (name("system", "Burstable"), "system-Burstable.slice"),
    (name("Burstable", "pod-123"), "Burstable-pod_123.slice"),
    (name("test", "a", "b"), "test-a-b.slice"),
    (name("test", "a", "b", "Burstable"), "test-a-b-Burstable.slice"),
    (name("Burstable"), "Burstable.slice"),
    (
        name("BestEffort", "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"),
        "BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
    ),
]


@pytest.mark.parametrize(
    ("cgroup", "expected"), SYSTEMD_BASENAME, ids=[e for _, e in SYSTEMD_BASENAME]
)
def test_cgroup_name_to_systemd_basename(cgroup, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go
    # TestCgroupNameToSystemdBasename: path.Base(input.ToSystemd())
    assert go_path_base(to_systemd(cgroup)) == expected


SYSTEMD_NAMES = [
    (name(), "/"),
    (name("Burstable"), "/Burstable.slice"),
    (name("Burstable", "pod-123"), "/Burstable.slice/Burstable-pod_123.slice"),
    (
        name("BestEffort", "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"),
        "/BestEffort.slice/BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice",
    ),
    (name("kubepods"), "/kubepods.slice"),
]


@pytest.mark.parametrize(("cgroup", "expected"), SYSTEMD_NAMES, ids=[e for _, e in SYSTEMD_NAMES])
def test_cgroup_name_to_systemd(cgroup, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go TestCgroupNameToSystemd
    assert to_systemd(cgroup) == expected


CGROUPFS_NAMES = [(name(), "/"), (name("Burstable"), "/Burstable")]


@pytest.mark.parametrize(("cgroup", "expected"), CGROUPFS_NAMES, ids=[e for _, e in CGROUPFS_NAMES])
def test_cgroup_name_to_cgroupfs(cgroup, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go TestCgroupNameToCgroupfs
    assert to_cgroupfs(cgroup) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("/test", ("test",)), ("/test.slice", ("test",))],
    ids=["/test", "/test.slice"],
)
def test_parse_systemd_to_cgroup_name(value, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go
    # TestParseSystemdToCgroupName: the kubelet's ParseSystemdToCgroupName, which cgalloc has as
    # kubelet_systemd_name (its stricter parse_systemd refuses "/test" as not a slice path).
    assert kubelet_systemd_name(value) == CgroupName(expected)


# TestCpuWeightToCPUShares (cpuWeightToCPUShares, cpu.weight back to shares when reading a v2
# cgroup) is left out: cgalloc only converts shares to weight, never back.


# TestCgroupCommonToResources: ResourceConfig -> libcontainer Resources under v1 and v2. cgalloc
# goes from Limits straight to the files opencontainers/cgroups writes for those Resources, so
# each row is checked on limit_files: {file: value} wanted under v1, under v2, and the files that
# must be absent (the Resources field the row expects to stay 0 or nil).
TO_RESOURCES = [
    # "nil config yields default empty resources": Memory, CpuShares, CpuWeight all 0 (unset)
    ("nil config yields default empty resources", Limits(), {}, {}, set()),
    (
        "memory limits translation",
        Limits(memory=500 * 1024 * 1024),
        {"memory.limit_in_bytes": str(500 * 1024 * 1024)},
        {"memory.max": str(500 * 1024 * 1024)},
        set(),
    ),
    (
        "cpu limits period and quota translation",
        Limits(cpu_period=100000, cpu_quota=50000),
        {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"},
        {"cpu.max": (50000, 100000)},
        set(),
    ),
    (
        "pids limit translation",
        Limits(pids=1000),
        {"pids.max": "1000"},
        {"pids.max": "1000"},
        set(),
    ),
    (
        # cpuset.New(1, 2, 3) is serialized as "1-3"
        "cpuset translation and string serialization",
        Limits(cpuset_cpus=format_cpuset({1, 2, 3})),
        {"cpuset.cpus": "1-3"},
        {"cpuset.cpus": "1-3"},
        set(),
    ),
    (
        # v1: CpuShares 1024, CpuWeight 0; v2: CpuWeight 39, CpuShares 0
        "cpu shares to weight non-trivial translation",
        Limits(cpu_shares=1024),
        {"cpu.shares": "1024"},
        {"cpu.weight": "39"},
        {"v1:cpu.weight", "v2:cpu.shares"},
    ),
    (
        # Unified is nil on v1
        "unified maps translation conditionally enabled",
        Limits(memory_min=104857600, memory_low=209715200),
        {},
        {"memory.min": "104857600", "memory.low": "209715200"},
        {"v1:memory.min", "v1:memory.low"},
    ),
    (
        # Pagesize "2MB", Limit 1024*1024*1024
        "hugepages limit conversion and host padding",
        Limits(hugetlb=((2 * 1024 * 1024, 1024 * 1024 * 1024),)),
        {"hugetlb.2MB.limit_in_bytes": str(1024 * 1024 * 1024)},
        {"hugetlb.2MB.max": str(1024 * 1024 * 1024)},
        set(),
    ),
]


@pytest.mark.parametrize(
    ("case", "limits", "want_v1", "want_v2", "absent"),
    TO_RESOURCES,
    ids=[r[0] for r in TO_RESOURCES],
)
def test_cgroup_common_to_resources(case, limits, want_v1, want_v2, absent):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go
    # TestCgroupCommonToResources (toResources; v2 weight via getCPUWeight, the linear formula)
    for version, hierarchy, want in (("v1", V1, want_v1), ("v2", V2, want_v2)):
        files = {f: v for _c, f, v in limit_files(hierarchy, limits)}
        got = {
            f: parse_limit_value(f, files[f])
            if isinstance(w, tuple) and f in files
            else files.get(f)
            for f, w in want.items()
        }
        assert got == want, version
        if not want:
            assert files == {}, version
        assert not {f"{version}:{f}" for f in files} & absent


# TestCgroupManagerGetCgroupConfig: reading a pod cgroup's CPU and memory files back. cgalloc
# reads them with parse_limit_value (cpu.max as (quota, period), "max" as -1).
# Left out: the v2 cpu.weight "39" -> CPUShares 998 (weight back to shares, not modelled); the
# v1 memory file holding "max" (the v1 kernel never prints it: unlimited reads as the page
# counter maximum, which parse_limit_value maps to -1); a one-token cpu.max "50000" (the kernel
# always prints "quota period"; cgalloc also parses the one-token form it writes itself); the
# missing-mount and unsupported-resource rows (no CgroupSubsystems in cgalloc's reader).
GET_CONFIG = [
    ("valid CPU quota, period, and shares", "cpu.cfs_quota_us", "50000\n", 50000),
    ("valid CPU quota, period, and shares", "cpu.cfs_period_us", "100000\n", 100000),
    ("valid CPU quota, period, and shares", "cpu.shares", "998\n", 998),
    ("valid CPU quota, period, and shares", "cpu.max", "50000 100000\n", (50000, 100000)),
    ("unlimited CPU quota ('max')", "cpu.cfs_quota_us", "-1\n", -1),
    ("unlimited CPU quota ('max')", "cpu.cfs_period_us", "100000\n", 100000),
    ("unlimited CPU quota ('max')", "cpu.shares", "2597\n", 2597),
    ("unlimited CPU quota ('max')", "cpu.max", "max 100000\n", (-1, 100000)),
    ("valid memory limit", "memory.limit_in_bytes", "209715200\n", 209715200),
    ("valid memory limit", "memory.max", "209715200\n", 209715200),
    ("memory limit max returns -1 limit", "memory.max", "max\n", -1),
]


@pytest.mark.parametrize(
    ("case", "file", "content", "expected"),
    GET_CONFIG,
    ids=[f"{c}-{f}" for c, f, _, _ in GET_CONFIG],
)
def test_cgroup_manager_get_cgroup_config(case, file, content, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go
    # TestCgroupManagerGetCgroupConfig (the v1 and v2 runners' files and expectedCfg)
    assert parse_limit_value(file, content) == expected


@pytest.mark.parametrize(
    ("file", "content"),
    [
        ("cpu.cfs_quota_us", "invalid\n"),  # malformed CPU quota integer returns error (v1)
        ("cpu.max", "invalid 100000\n"),  # malformed CPU quota integer returns error (v2)
        ("cpu.max", "50000 invalid\n"),  # malformed cpu.max invalid period integer (v2)
    ],
    ids=["v1-quota-invalid", "v2-quota-invalid", "v2-period-invalid"],
)
def test_cgroup_manager_get_cgroup_config_errors(file, content):
    # kubernetes/kubernetes pkg/kubelet/cm/cgroup_manager_linux_test.go
    # TestCgroupManagerGetCgroupConfig, the expectErr rows
    with pytest.raises(ValueError):
        parse_limit_value(file, content)


# ================================================================= helpers_linux_test.go

# TestResourceConfigForPod: the rows without DRA are in tests/model/test_podresources.py; the DRA
# rows (burstable-with-dra-*, besteffort-with-dra-direct-claims, guaranteed-with-dra-direct-claims,
# status.nodeAllocatableResourceClaimStatuses, DRANodeAllocatableResources alpha in 1.36) are left
# out: cgalloc does not read DRA claim statuses.
# TestResourceConfigForPodWithEnforceMemoryQoS: ported in tests/model/test_podresources.py.
# TestApplyPodLevelMemoryHigh: memory.high is not modelled (cgalloc writes no memory.high).
# TestCPUSharesEqualAfterV2RoundTrip, TestSharesToMilliCPU, TestMilliCPUToSharesRoundTrip,
# TestQuotaToMilliCPU, TestCPURequestsFromConfig, TestCPULimitsFromConfig,
# TestMemoryLimitsFromConfig: reading cgroup values back into requests and limits, not modelled.
# TestGetCgroupProcs: cgalloc has no cgroup.procs parser of this shape (it only checks emptiness).

MILLI_CPU_TO_QUOTA = [
    (0, 0, 0),
    (5, 1000, 100000),
    (9, 1000, 100000),
    (10, 1000, 100000),
    (200, 20000, 100000),
    (500, 50000, 100000),
    (1000, 100000, 100000),
    (1500, 150000, 100000),
]


@pytest.mark.parametrize(
    ("milli", "quota", "period"),
    MILLI_CPU_TO_QUOTA,
    ids=[f"{m}m-period{p}" for m, _, p in MILLI_CPU_TO_QUOTA],
)
def test_milli_cpu_to_quota(milli, quota, period):
    # kubernetes/kubernetes pkg/kubelet/cm/helpers_linux_test.go TestMilliCPUToQuota
    assert milli_cpu_to_quota(milli, period) == quota


MILLI_CPU_TO_SHARES = [
    ("zero milliCPU returns MinShares", 0, MIN_SHARES),
    ("1 milliCPU rounds down to MinShares", 1, MIN_SHARES),
    ("2 milliCPU computes to exactly MinShares (2*1024/1000=2)", 2, MIN_SHARES),
    ("3 milliCPU computes to 3 shares (3*1024/1000=3)", 3, 3),
    ("100 milliCPU maps to 102 shares", 100, 102),
    ("500 milliCPU maps to 512 shares", 500, 512),
    ("1000 milliCPU (1 CPU) maps to 1024 shares", 1000, 1024),
    # uint64(255999 * 1024 / 1000): Go's integer constant division
    ("255999 milliCPU just below MaxShares", 255999, 255999 * 1024 // 1000),
    ("256000 milliCPU hits exactly MaxShares", 256000, MAX_SHARES),
    ("256001 milliCPU clamped to MaxShares", 256001, MAX_SHARES),
    ("1000000 milliCPU clamped to MaxShares", 1000000, MAX_SHARES),
    ("negative milliCPU clamped to MinShares", -1, MIN_SHARES),
    ("large negative clamped to MinShares", -1000000, MIN_SHARES),
]


@pytest.mark.parametrize(
    ("case", "milli", "expected"), MILLI_CPU_TO_SHARES, ids=[r[0] for r in MILLI_CPU_TO_SHARES]
)
def test_milli_cpu_to_shares(case, milli, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/helpers_linux_test.go TestMilliCPUToShares
    assert milli_cpu_to_shares(milli) == expected


HUGE_PAGE_LIMITS = [
    ("no valid hugepages", [("2Mi", "128")], {}),
    ("2Mi only", [("hugepages-2Mi", "128")], {2 * MI: 128}),
    (
        "2Mi and 4Mi",
        [
            ("hugepages-2Mi", "128"),
            (f"hugepages-{2 * MI}", "256"),  # v1.ResourceHugePagesPrefix + FormatInt(2*Mi, 10)
            ("hugepages-4Mi", "512"),
            ("4Mi", "1024"),
        ],
        {2 * MI: 384, 4 * MI: 512},
    ),
]


@pytest.mark.parametrize(
    ("case", "inputs", "expected"), HUGE_PAGE_LIMITS, ids=[r[0] for r in HUGE_PAGE_LIMITS]
)
def test_huge_page_limits(case, inputs, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/helpers_linux_test.go TestHugePageLimits: HugePageLimits
    # of the list, and ResourceConfigForPod(&p, false, 0, false, ...) of a pod whose one container
    # requests that list.
    resources = {key: q(value) for key, value in inputs}
    want = tuple(sorted(expected.items()))
    assert hugepage_limits(resources) == want
    p = Pod("uid", "default/p", (Container("c", resources, {}),))
    got = resource_config(p, pod_level_resources=False, enforce_cpu_limits=False, cpu_period=0)
    assert got.limits.hugetlb == want


NODE_ALLOCATABLE_ROOT = [
    ("cgroupfs with cgroupsPerQOS from root", "/", True, "cgroupfs", "/kubepods"),
    ("cgroupfs without cgroupsPerQOS from root", "/", False, "cgroupfs", "/"),
    ("cgroupfs with cgroupsPerQOS custom root", "/custom", True, "cgroupfs", "/custom/kubepods"),
    ("cgroupfs without cgroupsPerQOS custom root", "/custom", False, "cgroupfs", "/custom"),
    ("systemd with cgroupsPerQOS from root", "/", True, "systemd", "/kubepods.slice"),
    ("empty root with cgroupsPerQOS cgroupfs", "", True, "cgroupfs", "/kubepods"),
]


@pytest.mark.parametrize(
    ("case", "root", "per_qos", "driver", "expected"),
    NODE_ALLOCATABLE_ROOT,
    ids=[r[0] for r in NODE_ALLOCATABLE_ROOT],
)
def test_node_allocatable_root(case, root, per_qos, driver, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/helpers_linux_test.go TestNodeAllocatableRoot.
    # cgalloc's node_allocatable_cgroup answers None for the root cgroup (nothing to enforce
    # there), which is RootCgroupName.
    cfg = NodeConfig(cgroup_root=root, cgroups_per_qos=per_qos, cgroup_driver=driver)
    assert cgroup_driver(driver).path(node_allocatable_cgroup(cfg) or ROOT) == expected


POD_SUFFIX = [
    ("standard UID", "abc123-def456", "podabc123-def456"),
    (
        "full UUID format",
        "a1b2c3d4-e5f6-7890-abcd-ef1234567890",
        "poda1b2c3d4-e5f6-7890-abcd-ef1234567890",
    ),
    ("empty UID returns prefix only", "", "pod"),
]


@pytest.mark.parametrize(("case", "uid", "expected"), POD_SUFFIX, ids=[r[0] for r in POD_SUFFIX])
def test_get_pod_cgroup_name_suffix(case, uid, expected):
    # kubernetes/kubernetes pkg/kubelet/cm/helpers_linux_test.go TestGetPodCgroupNameSuffix: the
    # pod cgroup's leaf name (cgalloc's pod_name, here for a Guaranteed pod directly in kubepods)
    pod = PodCgroup(uid, "default/p", GUARANTEED, Limits(), 0, 0)
    assert pod_name(name("kubepods"), pod).parts[-1] == expected


# ======================================================== qos_container_manager_linux_test.go


def qos_pod(uid: str, requests: dict | None = None, limits: dict | None = None) -> Pod:
    return Pod(
        uid, f"test/{uid}", (Container("foo", rl(**(requests or {})), rl(**(limits or {}))),)
    )


def guaranteed_pod(uid: str = "12345678") -> Pod:
    return qos_pod(uid, {"memory": "128Mi", "cpu": "1"}, {"memory": "128Mi", "cpu": "1"})


def burstable_pod(uid: str = "87654321") -> Pod:
    return qos_pod(uid, {"cpu": "1", "memory": "128Mi"}, {"cpu": "2", "memory": "256Mi"})


def besteffort_pod(uid: str = "99999999") -> Pod:
    return qos_pod(uid)


def tiers(pods: list[Pod], cfg: NodeConfig) -> dict[str, Limits]:
    """The QoS cgroups' limits cgalloc plans on cgroup v2 for ``pods``: role → Limits."""
    alloc = Allocatable(
        rl(cpu="8", memory="16Gi"), {}, rl(cpu="8", memory="16Gi"), None, None, (), ()
    )
    tree = desired_tree(cfg, alloc, V2, pod_cgroups(pods, cfg, cgroup_v2=True))
    paths = {d.path: d.limits for d in tree}
    return {
        "guaranteed": paths["kubepods"],
        "burstable": paths["kubepods/burstable"],
        "besteffort": paths["kubepods/besteffort"],
    }


QOS_CPU = [
    ("guaranteed-pods-only", [guaranteed_pod()], MIN_SHARES),
    ("burstable-pods-only", [burstable_pod()], 1024),
    ("besteffort-pods-only", [besteffort_pod()], MIN_SHARES),
    ("guaranteed-and-burstable-pods", [guaranteed_pod(), burstable_pod()], 1024),
    ("besteffort-and-burstable-pods", [besteffort_pod(), burstable_pod()], 1024),
]


@pytest.mark.parametrize(("case", "pods", "burstable"), QOS_CPU, ids=[r[0] for r in QOS_CPU])
def test_qos_cpu_config_update(case, pods, burstable):
    # kubernetes/kubernetes pkg/kubelet/cm/qos_container_manager_linux_test.go
    # TestQOSCPUConfigUpdate: burstable shares from the burstable pods' CPU requests, besteffort
    # always MinShares. (The table's third check, that the QoS manager sets no shares on the
    # Guaranteed tier, is about which manager writes kubepods' shares: cgalloc writes them from
    # Node Allocatable, as enforceNodeAllocatableCgroups does.)
    got = tiers(pods, NodeConfig())
    assert got["burstable"].cpu_shares == burstable
    assert got["besteffort"].cpu_shares == MIN_SHARES


# TestQoSContainerCgroup, with memoryReservationPolicy TieredReservation (1.36+): the Guaranteed
# tier (kubepods) gets memory.min = Σ guaranteed + Σ burstable requests, the burstable tier
# memory.low = Σ burstable requests, and both are written as "0" when there is nothing to
# protect. The rows run as the test does: MemoryQoS on, memoryReservationPolicy
# TieredReservation, at kubelet 1.37.
# Left out: "writes zero memory min for best effort pod with DRA", "writes memory min including
# DRA allocations" and "writes memory min with pod-level resources" (their pods carry DRA claim
# statuses, which cgalloc does not read).
# TestQoSContainerCgroupWithMemoryReservationPolicyNone is the last row: policy None writes 0.
# TestQOSCgroupsWithSystemPartition and TestQOSContainerManagerStartTakesPodsUnderRoot: the
# system partition (kubepods/system) is not modelled.
BURSTABLE_2 = qos_pod("01234567", {"memory": "256Mi", "cpu": "2"})
NO_MEMORY_REQUEST = qos_pod("88888888", {"cpu": "1"})
MEMORY_QOS_TIERS = [
    (
        "writes aggregated memory min",
        [guaranteed_pod(), burstable_pod(), BURSTABLE_2],
        384 * MI + 128 * MI,  # burstableMin + guaranteedMin
        384 * MI,  # burstableMin
    ),
    ("writes zero memory min for best effort pod", [besteffort_pod()], 0, 0),
    (
        "writes zero memory min for burstable pod without memory request",
        [NO_MEMORY_REQUEST],
        0,
        0,
    ),
    # initial memory.min 1234 / memory.low 5678 on the tiers: cgalloc plans from the pods alone
    ("clears stale memory min when all pods removed", [], 0, 0),
    (
        "MemoryReservationPolicyNone",
        [guaranteed_pod(), burstable_pod(), BURSTABLE_2],
        0,
        0,
    ),
]


@pytest.mark.parametrize(
    ("case", "pods", "guaranteed_min", "burstable_low"),
    MEMORY_QOS_TIERS,
    ids=[r[0] for r in MEMORY_QOS_TIERS],
)
def test_qos_container_cgroup_memory_qos(case, pods, guaranteed_min, burstable_low):
    # kubernetes/kubernetes pkg/kubelet/cm/qos_container_manager_linux_test.go
    # TestQoSContainerCgroup (setMemoryQoS with TieredReservation)
    policy = "None" if case == "MemoryReservationPolicyNone" else "TieredReservation"
    cfg = NodeConfig(
        feature_gates={"MemoryQoS": True}, kubelet_version="1.37", memory_reservation_policy=policy
    )
    got = tiers(pods, cfg)
    assert (got["guaranteed"].memory_min, got["burstable"].memory_low) == (
        guaranteed_min,
        burstable_low,
    )


# ============================================================ opencontainers/cgroups utils_test.go

# TestConvertCPUSharesToCgroupV2Value since v0.0.3 (2025-06, the quadratic curve in log2(shares);
# HEAD v0.1.0 unchanged): cgalloc's "runc" formula. The runtimes use it for the container
# cgroups they create from CRI shares; the kubelet itself sets CpuWeight with its own linear
# getCPUWeight, so the library never converts the kubelet's cgroups (kubelet 1.35 builds with
# v0.0.4, already the curve).
SHARES_DEF, WEIGHT_MIN, WEIGHT_MAX, WEIGHT_DEF = 1024, 1, 10000, 100
RUNC_WEIGHT = [
    (0, 0),  # unset
    (MIN_SHARES - 1, WEIGHT_MIN),  # below the minimum (out of range)
    (MIN_SHARES, WEIGHT_MIN),  # minimum
    (MIN_SHARES + 1, WEIGHT_MIN + 1),  # just above the minimum
    (SHARES_DEF, WEIGHT_DEF),  # default
    (MAX_SHARES - 1, WEIGHT_MAX),  # just below the maximum
    (MAX_SHARES, WEIGHT_MAX),  # maximum
    (MAX_SHARES + 1, WEIGHT_MAX),  # above the maximum (out of range)
]


@pytest.mark.parametrize(("shares", "weight"), RUNC_WEIGHT, ids=[str(s) for s, _ in RUNC_WEIGHT])
def test_convert_cpu_shares_to_cgroup_v2_value(shares, weight):
    # opencontainers/cgroups utils_test.go TestConvertCPUSharesToCgroupV2Value (v0.0.3 .. v0.1.0)
    assert shares_to_weight_runc(shares) == weight


# The same test at v0.0.1 and v0.0.2 (2025-02 and 2025-04), when the library used the linear
# formula the kubelet's getCPUWeight still uses: cgalloc's "kubelet" formula. Its row 0 -> 0
# ("unset") is the library's special case, which getCPUWeight does not have: for cgalloc it is
# the absence of any cpu.weight file when the shares are 0.
LINEAR_WEIGHT = [(2, 1), (262144, 10000)]


@pytest.mark.parametrize(
    ("shares", "weight"), LINEAR_WEIGHT, ids=[str(s) for s, _ in LINEAR_WEIGHT]
)
def test_convert_cpu_shares_to_cgroup_v2_value_linear(shares, weight):
    # opencontainers/cgroups utils_test.go TestConvertCPUSharesToCgroupV2Value (v0.0.1, v0.0.2)
    assert shares_to_weight_kubelet(shares) == weight


def test_convert_cpu_shares_zero_is_unset():
    # opencontainers/cgroups utils_test.go TestConvertCPUSharesToCgroupV2Value: 0 -> 0 (unset)
    assert [f for _c, f, _v in limit_files(V2, Limits(cpu_shares=0))] == []


MEMORY_SWAP = [
    ("all unset", 0, 0, 0),
    ("unlimited memory+swap, unset memory", -1, 0, -1),
    ("unlimited memory", 300, -1, 300),
    ("all unlimited", -1, -1, -1),
    ("negative memory+swap", -2, 0, None),
    ("unlimited memory+swap, set memory", -1, 1000, -1),
    ("memory+swap == memory", 1000, 1000, 0),
    ("memory+swap > memory", 500, 200, 300),
    ("memory+swap < memory", 300, 400, None),
    ("unset memory", 300, 0, None),
    ("negative memory", 300, -300, None),
]


@pytest.mark.parametrize(
    ("case", "memswap", "memory", "expected"), MEMORY_SWAP, ids=[r[0] for r in MEMORY_SWAP]
)
def test_convert_memory_swap_to_cgroup_v2_value(case, memswap, memory, expected):
    # opencontainers/cgroups utils_test.go TestConvertMemorySwapToCgroupV2Value (v0.0.1 .. v0.1.0,
    # unchanged); None = expErr
    if expected is None:
        with pytest.raises(ValueError):
            convert_memory_swap_to_v2(memswap, memory)
    else:
        assert convert_memory_swap_to_v2(memswap, memory) == expected


# TestConvertBlkIOToIOWeightValue is left out: cgalloc sets no io/blkio weight.
