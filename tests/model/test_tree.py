"""tree: kubelet cgroup naming (cgroupfs, systemd) and the desired node tree."""

from __future__ import annotations

import re

import pytest
from nodeargs import V1_HUGETLB

from cgalloc.errors import InputError
from cgalloc.inputs.pods import pod_cgroups
from cgalloc.model import allocatable
from cgalloc.model.allocatable import Allocatable
from cgalloc.model.hierarchy import Hierarchy
from cgalloc.model.limits import HUGETLB_UNBOUNDED, Limits
from cgalloc.model.naming import (
    CGROUPFS,
    ROOT,
    SYSTEMD,
    CgroupName,
    CgroupNameError,
    expand_slice,
    parse_cgroupfs,
    parse_systemd,
    reserved_mapping_note,
    to_cgroupfs,
    to_systemd,
)
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.podresources import Container, Pod
from cgalloc.model.quantity import Quantity
from cgalloc.model.tree import DesiredCgroup, desired_tree

GI = 1024**3
MI = 1024**2

# ------------------------------------------------------------------------------------ naming


def test_cgroupfs_naming():
    name = CgroupName(("kubepods", "burstable", "pod1234-abcd"))
    assert to_cgroupfs(name) == "/kubepods/burstable/pod1234-abcd"
    assert to_cgroupfs(ROOT) == "/"
    assert parse_cgroupfs("/kubepods/burstable/pod1234-abcd") == name
    assert parse_cgroupfs("/") == ROOT
    assert parse_cgroupfs("kubepods") == CgroupName(("kubepods",))


def test_systemd_naming_matches_kubelet_examples():
    name = CgroupName(("kubepods", "burstable", "pod1234-abcd-5678"))
    assert to_systemd(name) == (
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678.slice"
    )
    assert to_systemd(CgroupName(("kubepods", "pod12-ab"))) == (
        "/kubepods.slice/kubepods-pod12_ab.slice"
    )
    assert to_systemd(ROOT) == "/"


def test_expand_slice():
    assert expand_slice("a-b-c.slice") == "/a.slice/a-b.slice/a-b-c.slice"
    assert expand_slice("system.slice") == "/system.slice"
    assert expand_slice("-.slice") == "/"
    assert expand_slice("x" * 249 + ".slice") == "/" + "x" * 249 + ".slice"  # 255: the most
    assert expand_slice("a:b_c\\x2d.slice") == "/a:b_c\\x2d.slice"
    for bad, reason in [
        ("a--b.slice", "empty component"),
        ("-a.slice", "empty component"),
        ("a-.slice", "empty component"),
        ("kubelet.service", "must end in '.slice'"),
        (".slice", "it has no name before '.slice'"),
        ("a/b.slice", "must not contain '/'"),
        # systemd src/basic/unit-name.c slice_name_is_valid: unit_name_is_valid(name,
        # UNIT_NAME_PLAIN), i.e. only VALID_CHARS (no '@' in a slice) and < UNIT_NAME_MAX (256)
        ("a b.slice", "holds ' ', which systemd refuses in a unit name"),
        ("getty@tty1.slice", "holds '@', which systemd refuses in a unit name"),
        ("x" * 250 + ".slice", "has 256 characters; a systemd unit name has at most 255"),
    ]:
        with pytest.raises(CgroupNameError, match=re.escape(reason)):
            expand_slice(bad)


def test_parse_systemd():
    assert parse_systemd("/system.slice") == CgroupName(("system",))
    assert parse_systemd("system.slice") == CgroupName(("system",))
    assert parse_systemd("kube_reserved.slice") == CgroupName(("kube-reserved",))
    assert parse_systemd("/kube.slice/kube-reserved.slice") == CgroupName(("kube", "reserved"))
    assert parse_systemd("-.slice") == ROOT
    # The kubelet keeps only the base name; a path whose parents disagree would name another cgroup.
    with pytest.raises(CgroupNameError, match=re.escape("the systemd driver would use /b.slice")):
        parse_systemd("/a.slice/b.slice")
    with pytest.raises(CgroupNameError, match="empty component"):
        parse_systemd("a--b.slice")


def test_round_trip_systemd():
    for parts in [("kubepods",), ("kubepods", "burstable", "pod1-2-3"), ("mycg", "kubepods")]:
        name = CgroupName(parts)
        assert parse_systemd(to_systemd(name)) == name


def test_names_that_cannot_round_trip_are_rejected():
    with pytest.raises(CgroupNameError, match="contains '/'"):
        CgroupName(("a/b",))
    with pytest.raises(CgroupNameError, match="empty or relative"):
        CgroupName(("..",))
    with pytest.raises(CgroupNameError, match="empty or relative"):
        parse_cgroupfs("/a//b")
    with pytest.raises(CgroupNameError, match="contains '_'"):
        ROOT.child("kube_pods")
    with pytest.raises(CgroupNameError, match="contains '_'"):
        to_systemd(CgroupName(("x_y",)))
    # cgroupfs itself has no such restriction.
    assert to_cgroupfs(parse_cgroupfs("/kube_reserved")) == "/kube_reserved"


def test_reserved_cgroup_paths_systemd():
    sd = SYSTEMD
    assert sd.reserved_cgroup_path("/system.slice") == "/system.slice"
    assert sd.reserved_cgroup_path("system.slice") == "/system.slice"
    assert sd.reserved_cgroup_path("podruntime.slice") == "/podruntime.slice"
    assert sd.reserved_cgroup_path("kube-reserved.slice") == "/kube.slice/kube-reserved.slice"
    # Unit paths stay the unit's real cgroup (kubernetes #110288).
    assert sd.reserved_cgroup_path("/system.slice/kubelet.service") == (
        "/system.slice/kubelet.service"
    )
    assert sd.reserved_cgroup_path("/system.slice/containerd.service") == (
        "/system.slice/containerd.service"
    )
    assert sd.reserved_cgroup_path("/podruntime.slice/kubelet.service") == (
        "/podruntime.slice/kubelet.service"
    )
    assert sd.reserved_cgroup_path("/kube.slice/kube-runtime.slice/crio.service") == (
        "/kube.slice/kube-runtime.slice/crio.service"
    )
    # A bad unit parent is not a unit path: the kubelet's own mapping applies.
    assert sd.reserved_cgroup_path("/system/kubelet.service") == "/kubelet.service.slice"
    for bad, reason in [
        ("", "empty"),
        ("/", "root cgroup"),
        ("-.slice", "root cgroup"),
        ("a--b.slice", "empty component"),
        (".slice", "slice name '.slice' has no name before '.slice'"),
    ]:
        with pytest.raises(CgroupNameError, match=re.escape(reason)):
            sd.reserved_cgroup_path(bad)
    # the kubelet's name for a unit path, /my svc.service.slice, is what systemd refuses
    with pytest.raises(CgroupNameError, match=re.escape("'my svc.service.slice': it holds ' '")):
        sd.kubelet_reserved_path("/system.slice/my svc.service")


@pytest.mark.parametrize(
    ("value", "kubelet"),
    [
        # pkg/kubelet/cm/cgroup_manager_linux.go ParseSystemdToCgroupName keeps path.Base only,
        # then CgroupName.ToSystemd expands the slice (kubernetes#110288)
        ("/kube-reserved.slice", "/kube.slice/kube-reserved.slice"),
        ("/test", "/test.slice"),
        ("/system.slice/kubelet.service", "/kubelet.service.slice"),
        ("kubelet.service", "/kubelet.service.slice"),
        ("/a.slice/b.slice", "/b.slice"),
        ("system.slice", "/system.slice"),
        ("/my_daemons.slice", "/my_daemons.slice"),
    ],
)
def test_kubelet_reserved_path_systemd(value, kubelet):
    assert SYSTEMD.kubelet_reserved_path(value) == kubelet


def test_reserved_mapping_note_names_both_paths():
    note = reserved_mapping_note("kubeReservedCgroup", "/system.slice/kubelet.service", SYSTEMD)
    assert "/kubelet.service.slice" in note and "/system.slice/kubelet.service" in note
    assert reserved_mapping_note("x", "/system.slice", SYSTEMD) is None
    assert "/kube.slice/kube-reserved.slice" in reserved_mapping_note(
        "x", "/kube-reserved.slice", SYSTEMD
    )


@pytest.mark.parametrize(
    ("root", "kubepods"),
    [
        # ParseCgroupfsToCgroupName + ToCgroupfs ("/" + path.Join): relative and trailing "/"
        ("/a/", "/a/kubepods"),
        ("kubelet", "/kubelet/kubepods"),
        ("/", "/kubepods"),
    ],
)
def test_cgroupfs_cgroup_root_forms(root, kubepods):
    assert CGROUPFS.path(CGROUPFS.root(root).child("kubepods")) == kubepods


def test_reserved_cgroup_paths_cgroupfs():
    assert CGROUPFS.reserved_cgroup_path("/kube-reserved") == "/kube-reserved"
    assert CGROUPFS.reserved_cgroup_path("/system.slice/kubelet.service") == (
        "/system.slice/kubelet.service"
    )
    with pytest.raises(CgroupNameError, match="root cgroup"):
        CGROUPFS.reserved_cgroup_path("/")


def test_kubepods_name_with_cgroup_root():
    assert to_cgroupfs(CGROUPFS.root("/").child("kubepods")) == "/kubepods"
    assert to_cgroupfs(CGROUPFS.root("/mycg").child("kubepods")) == "/mycg/kubepods"
    assert to_systemd(SYSTEMD.root("/").child("kubepods")) == "/kubepods.slice"
    assert to_systemd(SYSTEMD.root("/mycg").child("kubepods")) == "/mycg.slice/mycg-kubepods.slice"
    with pytest.raises(CgroupNameError, match=r"/mycg means /mycg\.slice"):
        SYSTEMD.root("/mycg.slice").child("kubepods")


# ------------------------------------------------------------------------------- desired tree


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def rl(**items: str) -> dict[str, Quantity]:
    return {k.replace("_", "-"): q(v) for k, v in items.items()}


def make_cfg(**over) -> NodeConfig:
    return NodeConfig(**over)


def make_alloc(kubepods, capacity=None, kube=None, system=None) -> Allocatable:
    capacity = capacity or rl(cpu="4", memory="16Gi")
    return Allocatable(capacity, {}, kubepods, kube, system, (), ())


V2_NO_HUGETLB = Hierarchy(
    "v2", "/sys/fs/cgroup", {}, "/sys/fs/cgroup", frozenset({"cpu", "memory", "pids", "cpuset"})
)
KUBEPODS_RL = rl(cpu="3500m", memory="15Gi", pid="4194304", hugepages_2Mi="256Mi")


def test_tree_cgroupfs_no_pods():
    tree = desired_tree(make_cfg(), make_alloc(KUBEPODS_RL), V1_HUGETLB)
    tiers = ((2 * MI, HUGETLB_UNBOUNDED),)
    assert tree == [
        DesiredCgroup(
            "kubepods",
            "kubepods",
            Limits(cpu_shares=3584, memory=15 * GI, pids=4194304, hugetlb=((2 * MI, 256 * MI),)),
        ),
        DesiredCgroup("kubepods/burstable", "qos", Limits(cpu_shares=2, hugetlb=tiers)),
        DesiredCgroup("kubepods/besteffort", "qos", Limits(cpu_shares=2, hugetlb=tiers)),
    ]


def test_tree_drops_hugetlb_without_the_controller():
    tree = desired_tree(make_cfg(), make_alloc(KUBEPODS_RL), V2_NO_HUGETLB)
    assert [d.limits.hugetlb for d in tree] == [(), (), ()]
    assert tree[0].limits.memory == 15 * GI


GUARANTEED_2G = {"cpu": "1", "memory": "2Gi"}


def container(req: dict | None = None, lim: dict | None = None) -> Container:
    return Container("c", rl(**(req or {})), rl(**(lim or {})))


def test_tree_systemd_with_pods():
    # Pod cgroups (pod_container_manager_linux.go): NewCgroupName(qos parent, "pod"+UID);
    # Guaranteed pods sit directly in kubepods. Values: helpers_linux.go ResourceConfigForPod.
    pods = [
        Pod("1234-abcd", "d/g", (container({"cpu": "500m", "memory": "256Mi"},
                                           {"cpu": "500m", "memory": "256Mi"}),)),
        Pod("5678-ef", "d/b1", (container({"cpu": "250m", "memory": "128Mi"},
                                          {"memory": "512Mi"}),)),
        Pod("9a-bc", "d/b2", (container({"cpu": "100m"}, {"cpu": "400m"}),)),
        Pod("be-01", "d/be", (container(),)),
    ]  # fmt: skip
    cfg = make_cfg(cgroup_driver="systemd", pod_max_pids=1024)
    cgroups = pod_cgroups(pods, cfg, cgroup_v2=True)
    tree = desired_tree(cfg, make_alloc(rl(cpu="3", memory="8Gi")), V2_NO_HUGETLB, cgroups)
    assert [(d.path, d.role) for d in tree] == [
        ("kubepods.slice", "kubepods"),
        ("kubepods.slice/kubepods-burstable.slice", "qos"),
        ("kubepods.slice/kubepods-besteffort.slice", "qos"),
        ("kubepods.slice/kubepods-pod1234_abcd.slice", "pod"),
        ("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5678_ef.slice", "pod"),
        ("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod9a_bc.slice", "pod"),
        ("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podbe_01.slice", "pod"),
    ]
    limits = [d.limits for d in tree]
    # cgroup v2, kubelet 1.37: MemoryQoS is on with memoryReservationPolicy None, so the QoS
    # manager's Start() writes kubepods memory.min/low and the burstable memory.low as 0.
    assert limits[0] == Limits(cpu_shares=3072, memory=8 * GI, memory_min=0, memory_low=0)
    # Burstable tier: MilliCPUToShares(250 + 100) = 358.
    assert limits[1] == Limits(cpu_shares=358, memory_low=0)
    assert limits[2] == Limits(cpu_shares=2)
    assert limits[3] == Limits(
        cpu_shares=512, cpu_quota=50000, cpu_period=100000, memory=256 * MI, pids=1024
    )
    assert limits[4] == Limits(cpu_shares=256, memory=512 * MI, pids=1024)
    # defaulting: the memory request is absent, so it stays absent; cpu request 100m
    assert limits[5] == Limits(cpu_shares=102, cpu_quota=40000, cpu_period=100000, pids=1024)
    assert limits[6] == Limits(cpu_shares=2, pids=1024)


def test_tree_cgroup_root():
    alloc = make_alloc(rl(cpu="2"))
    tree = desired_tree(make_cfg(cgroup_root="/mycg"), alloc, V2_NO_HUGETLB)
    assert [d.path for d in tree] == ["mycg/kubepods", "mycg/kubepods/burstable",
                                      "mycg/kubepods/besteffort"]  # fmt: skip
    tree = desired_tree(
        make_cfg(cgroup_root="/mycg", cgroup_driver="systemd"), alloc, V2_NO_HUGETLB
    )
    assert [d.path for d in tree] == [
        "mycg.slice/mycg-kubepods.slice",
        "mycg.slice/mycg-kubepods.slice/mycg-kubepods-burstable.slice",
        "mycg.slice/mycg-kubepods.slice/mycg-kubepods-besteffort.slice",
    ]


def test_tree_qos_reserved_memory():
    # qos_container_manager_linux.go setMemoryReserve, applied only with the QOSReserved gate.
    # base = capacity 16Gi − system 1Gi − kube 1Gi = 14Gi (no eviction term)
    # burstable = 14Gi − 2Gi×50% = 13Gi; besteffort = 13Gi − 1Gi×50% = 12.5Gi
    cfg = make_cfg(
        qos_reserved={"memory": 50},
        system_reserved=rl(memory="1Gi"),
        kube_reserved=rl(memory="1Gi"),
        feature_gates={"QOSReserved": True},
    )
    pods = [
        Pod("g1", "d/g", (container(GUARANTEED_2G, GUARANTEED_2G),)),
        Pod("b1", "d/b", (container({"memory": "1Gi"}),)),
    ]  # fmt: skip
    cgroups = pod_cgroups(pods, cfg, cgroup_v2=True)
    alloc = make_alloc(rl(cpu="4", memory="14Gi"), capacity=rl(cpu="4", memory="16Gi"))
    tree = desired_tree(cfg, alloc, V2_NO_HUGETLB, cgroups)
    assert tree[1].limits.memory == 13 * GI
    assert tree[2].limits.memory == 13 * GI - GI // 2
    # Without pods both tiers get the whole base.
    tree = desired_tree(cfg, alloc, V2_NO_HUGETLB)
    assert (tree[1].limits.memory, tree[2].limits.memory) == (14 * GI, 14 * GI)
    # 0% is in the map, so UpdateCgroups still calls setMemoryReserve: both tiers get the whole
    # base (capacity 16Gi, nothing reserved); the kubelet-compat review found cgalloc wrote none
    zero = make_cfg(qos_reserved={"memory": 0}, feature_gates={"QOSReserved": True})
    tree = desired_tree(zero, alloc, V2_NO_HUGETLB, cgroups)
    assert (tree[1].limits.memory, tree[2].limits.memory) == (16 * GI, 16 * GI)
    # Unset leaves the tiers without a memory limit.
    unset = make_cfg(feature_gates={"QOSReserved": True})
    tree = desired_tree(unset, alloc, V2_NO_HUGETLB, cgroups)
    assert (tree[1].limits.memory, tree[2].limits.memory) == (None, None)
    # Without the gate (alpha, off by default) the kubelet ignores qosReserved.
    off = make_cfg(qos_reserved={"memory": 50}, system_reserved=rl(memory="1Gi"))
    tree = desired_tree(off, alloc, V2_NO_HUGETLB, cgroups)
    assert (tree[1].limits.memory, tree[2].limits.memory) == (None, None)


# KEP-2570 by kubelet minor: (version, gate, memoryReservationPolicy) -> kubepods memory.min and
# memory.low, burstable tier memory.min and memory.low, the Guaranteed, Burstable and BestEffort
# pods' (memory.min, memory.low), and system-reserved's memory.min. Pods: g1 requests 2Gi
# (Guaranteed), b1 1Gi (Burstable), e1 nothing. Sources: qos_container_manager_linux.go
# setMemoryQoS and Start, helpers_linux.go ResourceConfigForPod, node_container_manager_linux.go
# enforceNodeAllocatableCgroups and enforceExistingCgroup (1.35; 1.36 with PR #137584's policy;
# 1.37 with #138903, #140267 and #140007's beta), and their tests TestQoSContainerCgroup,
# TestQoSContainerCgroupWithMemoryReservationPolicyNone and
# TestResourceConfigForPodWithEnforceMemoryQoS.
G3, N = 3 * GI, None
MEMORY_QOS_BY_VERSION = [
    # before 1.36 every request is memory.min, each tier's only when above 0
    ("1.35", True, "None", (G3, N), (GI, N), [(2 * GI, N), (GI, N), (N, N)], GI),
    ("1.35", False, "None", (N, N), (N, N), [(N, N)] * 3, N),
    # 1.36 TieredReservation: Burstable protection is memory.low
    ("1.36", True, "TieredReservation", (G3, N), (N, GI), [(2 * GI, N), (N, GI), (N, N)], GI),
    # 1.36 policy None: the tiers are set to 0, the pods get nothing, reserved keeps memory.min
    ("1.36", True, "None", (0, N), (N, 0), [(N, N)] * 3, GI),
    ("1.36", False, "None", (N, N), (N, N), [(N, N)] * 3, N),
    # 1.37: kubepods also gets memory.low = Σ burstable (the tier's parent must cover it)
    ("1.37", True, "TieredReservation", (G3, GI), (N, GI), [(2 * GI, N), (N, GI), (N, N)], GI),
    # 1.37's default: the gate on, policy None: zeros on the tiers, memory.min on reserved
    ("1.37", True, "None", (0, 0), (N, 0), [(N, N)] * 3, GI),
    # the gate off: the same zeros (Start and enforceNodeAllocatableCgroups), no memory.min
    ("1.37", False, "None", (0, 0), (N, 0), [(N, N)] * 3, N),
]


@pytest.mark.parametrize(
    ("version", "gate", "policy", "kubepods", "burstable", "pods", "reserved"),
    MEMORY_QOS_BY_VERSION,
    ids=[f"{r[0]}-{'on' if r[1] else 'off'}-{r[2]}" for r in MEMORY_QOS_BY_VERSION],
)
def test_tree_memory_qos_by_kubelet_version(
    version, gate, policy, kubepods, burstable, pods, reserved
):
    cfg = make_cfg(
        feature_gates={"MemoryQoS": gate},
        memory_reservation_policy=policy,
        kubelet_version=version,
        enforce_node_allocatable=("pods", "system-reserved"),
        system_reserved_cgroup="/system.slice",
    )
    given = [
        Pod("g1", "d/g", (container(GUARANTEED_2G, GUARANTEED_2G),)),
        Pod("b1", "d/b", (container({"memory": "1Gi"}),)),
        Pod("e1", "d/e", (container(),)),
    ]  # fmt: skip
    alloc = make_alloc(rl(cpu="3", memory="14Gi"), system=rl(cpu="1", memory="1Gi"))
    tree = desired_tree(cfg, alloc, V2_NO_HUGETLB, pod_cgroups(given, cfg, cgroup_v2=True))
    by_path = {d.path: d.limits for d in tree}

    def protection(path):
        return (by_path[path].memory_min, by_path[path].memory_low)

    assert protection("kubepods") == kubepods
    assert protection("kubepods/burstable") == burstable
    assert protection("kubepods/besteffort") == (N, N)
    assert [
        protection(p) for p in ("kubepods/podg1", "kubepods/burstable/podb1",
                                "kubepods/besteffort/pode1")
    ] == pods  # fmt: skip
    assert by_path["system.slice"].memory_min == reserved
    # cgroup v1 has no Unified files (IsCgroup2UnifiedMode): nothing anywhere
    v1 = desired_tree(cfg, alloc, V1_HUGETLB, pod_cgroups(given, cfg, cgroup_v2=False))
    assert all((d.limits.memory_min, d.limits.memory_low) == (N, N) for d in v1)


def test_tree_pod_hugetlb_zero_for_sizes_not_requested():
    # cgroup_manager_linux.go maybeSetHugetlb: every supported size gets a limit, 0 when the
    # pod did not request it.
    pods = [
        Pod("h1", "d/h", (container({"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "64Mi"},
                                    {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "64Mi"}),)),
        Pod("n1", "d/n", (container({"cpu": "1"}),)),
    ]  # fmt: skip
    cfg = make_cfg()
    alloc = make_alloc(rl(cpu="3", memory="8Gi", hugepages_2Mi="256Mi", hugepages_1Gi="2Gi"))
    tree = desired_tree(cfg, alloc, V1_HUGETLB, pod_cgroups(pods, cfg, cgroup_v2=False))
    by_path = {d.path: d.limits for d in tree}
    assert by_path["kubepods/podh1"].hugetlb == ((2 * MI, 64 * MI), (GI, 0))
    assert by_path["kubepods/burstable/podn1"].hugetlb == ((2 * MI, 0), (GI, 0))


def test_tree_none_policy_gives_kubepods_all_cpus():
    # node_container_manager_linux.go getCgroupConfig: CPUSet = GetAllCPUs() under the none
    # policy (kubernetes#125923), reserved CPUs included
    cfg = make_cfg(reserved_cpus=frozenset({0, 1}))
    tree = desired_tree(
        cfg, make_alloc(rl(cpu="6")), V2_NO_HUGETLB, online_cpus=frozenset(range(8))
    )
    assert tree[0].limits == Limits(cpu_shares=6144, cpuset_cpus="0-7", memory_min=0, memory_low=0)
    assert tree[1].limits.cpuset_cpus is None


def test_tree_strict_cpu_reservation_keeps_pods_off_reserved_cpus():
    # cpumanager/policy_static.go: strict-cpu-reservation leaves the reserved CPUs out of the
    # shared pool; the static policy sets no cpuset through getCgroupConfig
    strict = {"strict-cpu-reservation": "true"}
    cfg = make_cfg(
        reserved_cpus=frozenset({0, 1}),
        cpu_manager_policy="static",
        cpu_manager_policy_options=strict,
    )
    tree = desired_tree(
        cfg, make_alloc(rl(cpu="6")), V2_NO_HUGETLB, online_cpus=frozenset(range(8))
    )
    assert tree[0].limits.cpuset_cpus == "2-7"
    cfg = make_cfg(cpu_manager_policy="static", kube_reserved=rl(cpu="1500m"))
    tree = desired_tree(
        cfg, make_alloc(rl(cpu="6")), V2_NO_HUGETLB, online_cpus=frozenset(range(8))
    )
    assert tree[0].limits.cpuset_cpus is None
    cfg = make_cfg(
        cpu_manager_policy="static",
        cpu_manager_policy_options=strict,
        kube_reserved=rl(cpu="1500m"),
    )
    sets = allocatable.cpu_sets(cfg, frozenset(range(8)))
    assert (sets.kubepods, sets.kept_off) == (frozenset(range(2, 8)), frozenset({0, 1}))
    assert sets.notes  # the topology caveat


def test_tree_reserved_cgroups():
    # getCgroupConfig + maybeSetHugetlb: every page size not reserved gets limit 0, also in
    # -compressible mode; the none policy's cpuset of all CPUs reaches reserved cgroups too
    cfg = make_cfg(
        cgroup_driver="systemd",
        enforce_node_allocatable=("pods", "kube-reserved", "system-reserved-compressible"),
        kube_reserved_cgroup="/podruntime.slice/kubelet.service",
        system_reserved_cgroup="/system.slice",
    )
    alloc = make_alloc(
        rl(cpu="2500m", memory="12Gi"),
        capacity=rl(cpu="4", memory="16Gi", hugepages_2Mi="0", hugepages_1Gi="1Gi"),
        kube=rl(cpu="500m", memory="1Gi", pid="1000"),
        system=rl(cpu="1", memory="2Gi"),
    )
    zero = ((2 * MI, 0), (GI, 0))
    tree = desired_tree(cfg, alloc, V1_HUGETLB, online_cpus=frozenset(range(4)))
    kube = Limits(cpu_shares=512, memory=GI, pids=1000, cpuset_cpus="0-3", hugetlb=zero)
    assert tree[3:] == [
        DesiredCgroup(
            "system.slice",
            "system-reserved",
            Limits(cpu_shares=1024, cpuset_cpus="0-3", hugetlb=zero),
        ),
        # the cgroup the kubelet looks for, then the unit's real cgroup
        DesiredCgroup("kubelet.service.slice", "kube-reserved", kube),
        DesiredCgroup("podruntime.slice/kubelet.service", "kube-reserved", kube),
    ]


def test_tree_reserved_with_only_ephemeral_storage_gets_hugetlb_and_cpuset():
    cfg = make_cfg(enforce_node_allocatable=("kube-reserved",), kube_reserved_cgroup="/kube")
    alloc = make_alloc(rl(cpu="4"), capacity=rl(cpu="4", hugepages_2Mi="0"), kube={}, system=None)
    tree = desired_tree(cfg, alloc, V1_HUGETLB, online_cpus=frozenset(range(4)))
    assert tree[-1] == DesiredCgroup(
        "kube", "kube-reserved", Limits(cpuset_cpus="0-3", hugetlb=((2 * MI, 0),))
    )


def test_tree_without_cgroups_per_qos_limits_a_non_root_cgroup_root():
    # enforceNodeAllocatableCgroups updates cm.cgroupRoot (the cgroup root itself when
    # cgroupsPerQOS is false) with the full capacity whenever it is not the root cgroup
    cfg = make_cfg(cgroups_per_qos=False, enforce_node_allocatable=(), cgroup_root="/a/")
    tree = desired_tree(cfg, make_alloc(rl(cpu="4", memory="16Gi")), V1_HUGETLB)
    assert tree == [DesiredCgroup("a", "kubepods", Limits(cpu_shares=4096, memory=16 * GI))]
    cfg = make_cfg(cgroups_per_qos=False, enforce_node_allocatable=())
    assert desired_tree(cfg, make_alloc(rl(cpu="4")), V1_HUGETLB) == []


def test_tree_reserved_not_enforced_is_absent():
    cfg = make_cfg(kube_reserved_cgroup="/kube", system_reserved_cgroup="/system")
    alloc = make_alloc(rl(cpu="2"), kube=rl(cpu="1"), system=rl(cpu="1"))
    assert [d.role for d in desired_tree(cfg, alloc, V1_HUGETLB)] == ["kubepods", "qos", "qos"]


def test_tree_bad_names_reported_together():
    cfg = make_cfg(
        cgroup_driver="systemd",
        cgroup_root="/mycg.slice",
        enforce_node_allocatable=("pods", "kube-reserved"),
        kube_reserved_cgroup="a--b.slice",
    )
    alloc = make_alloc(rl(cpu="2"), kube=rl(cpu="1"))
    with pytest.raises(InputError) as err:
        desired_tree(cfg, alloc, V1_HUGETLB)
    problems = err.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("cgroupRoot (--cgroup-root) '/mycg.slice': ")
    assert problems[1].startswith("kubeReservedCgroup (--kube-reserved-cgroup) ")
    assert "empty component" in problems[1]
    assert err.value.exit_code == 2


def test_tree_without_cgroups_per_qos_has_only_reserved():
    cfg = make_cfg(
        cgroups_per_qos=False,
        enforce_node_allocatable=("system-reserved",),
        system_reserved_cgroup="/system",
    )
    alloc = make_alloc(rl(cpu="2"), system=rl(cpu="1", memory="1Gi"))
    assert desired_tree(cfg, alloc, V1_HUGETLB) == [
        DesiredCgroup("system", "system-reserved", Limits(cpu_shares=1024, memory=GI))
    ]


def test_tree_from_computed_allocatable():
    # capacity 4 CPU / 16Gi / 4194304 pids; kube 500m+1Gi, system 1+2Gi, all enforced.
    cfg = make_cfg(
        kube_reserved=rl(cpu="500m", memory="1Gi"),
        system_reserved=rl(cpu="1", memory="2Gi"),
        enforce_node_allocatable=("pods", "kube-reserved", "system-reserved-compressible"),
        kube_reserved_cgroup="/kube",
        system_reserved_cgroup="/system",
    )
    capacity = rl(cpu="4", memory="16Gi", pid="4194304")
    tree = desired_tree(cfg, allocatable.compute(cfg, capacity), V1_HUGETLB)
    assert [(d.path, d.limits) for d in tree] == [
        ("kubepods", Limits(cpu_shares=2560, memory=13 * GI, pids=4194304)),
        ("kubepods/burstable", Limits(cpu_shares=2)),
        ("kubepods/besteffort", Limits(cpu_shares=2)),
        ("system", Limits(cpu_shares=1024)),
        ("kube", Limits(cpu_shares=512, memory=GI)),
    ]


@pytest.mark.parametrize("file", ["memory.min", "memory.low"])
def test_memory_protection_past_page_counter_max_is_a_value_refusal(file):
    # Σ requests on the tiers can pass PAGE_COUNTER_MAX; the kernel would clamp the value and
    # read back "max", a drift verify could never settle (found by review of 7500b40)
    from cgalloc.model.kernel_ranges import MEMORY_MAX, value_problem

    assert value_problem(file, "0") is None
    assert value_problem(file, str(MEMORY_MAX)) is None
    assert value_problem(file, str(2**63)) == value_problem("memory.max", str(2**63)) is not None
