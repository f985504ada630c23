"""protection: the reserved cgroups protected, out of swap and weighted by their reservation
(--reserved-protection, --reserved-swap, --reserved-cpu-weight); the CPU-weight warning
(kubernetes#139790); and oomscore, the daemons' OOM score (EKS AMI #2175)."""

from __future__ import annotations

import pytest
from nodeargs import V1_HUGETLB

from cgalloc.errors import InputError
from cgalloc.model import cgroup_v1, cgroup_v2, oomscore
from cgalloc.model.allocatable import compute
from cgalloc.model.hierarchy import Hierarchy, limit_files
from cgalloc.model.limits import Limits
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.protection import (
    Protection,
    contention,
    proportional,
    reserved_limits,
)
from cgalloc.model.quantity import Quantity
from cgalloc.model.tree import assumed_contention, desired_tree, protection_notes

MI = 1 << 20
GI = 1 << 30
V2 = Hierarchy("v2", "/sys/fs/cgroup", {}, "/sys/fs/cgroup", frozenset({"cpu", "memory", "pids"}))
V1 = Hierarchy(
    "v1", "/sys/fs/cgroup", {c: f"/sys/fs/cgroup/{c}" for c in ("cpu", "memory", "pids")},
    None, frozenset({"cpu", "memory", "pids"}),
)  # fmt: skip


def rl(**items: str) -> dict[str, Quantity]:
    return {k: Quantity.parse(v) for k, v in items.items()}


def node(enforce=("pods",), version="1.37", **over) -> tuple[NodeConfig, object]:
    """A 64-CPU, 64Gi node with 32 CPUs and 1Gi reserved in /system.slice (kubernetes#139790's
    reporter's split)."""
    cfg = NodeConfig(
        system_reserved=rl(cpu="32", memory="1Gi"),
        system_reserved_cgroup="/system.slice",
        enforce_node_allocatable=tuple(enforce),
        kubelet_version=version,
        **over,
    )
    return cfg, compute(cfg, rl(cpu="64", memory="64Gi", pid="4096"))


def reserved(cfg, alloc, hierarchy=V2, protection=Protection(), formula="kubelet") -> Limits | None:
    tree = desired_tree(cfg, alloc, hierarchy, protection=protection, weight_formula=formula)
    return next((d.limits for d in tree if d.path == "system.slice"), None)


# ------------------------------------------------------------------------ the modes, per value


@pytest.mark.parametrize(
    ("kubepods", "milli", "reserved_milli", "v2", "want"),
    [
        (1250, 32000, 32000, True, 1250),  # half the node: the same weight
        (2500, 64000, 32000, True, 1250),
        (39, 1000, 500, True, 20),  # round half up: 19.5 → 20
        (1250, 32000, 100, True, 4),
        (1, 1000, 1, True, 1),  # never below the kernel's 1
        (9000, 1000, 2000, True, 10000),  # nor above 10000
        (32768, 32000, 32000, False, 32768),  # v1 shares: MilliCPUToShares again
        (1024, 1000, 1, False, 2),
        (100, 0, 500, True, 10000),  # every CPU reserved
    ],
)
def test_proportional_weight(kubepods, milli, reserved_milli, v2, want):
    assert proportional(kubepods, milli, reserved_milli, v2) == want


KUBELET_CAP = Limits(cpu_shares=512, memory=GI, pids=100, memory_min=GI)


@pytest.mark.parametrize(
    ("mode", "memory", "memory_min", "memory_low"),
    [
        ("cap", GI, GI, None),  # unchanged: the kubelet's, MemoryQoS's min included
        ("protect", -1, GI, None),  # no cap (max), protected at the reservation
        ("protect-low", -1, None, GI),  # no cap, best-effort protection; min left alone
        ("both", GI, GI, None),
    ],
)
def test_memory_modes_on_an_enforced_reserved_cgroup(mode, memory, memory_min, memory_low):
    got = reserved_limits(KUBELET_CAP, {"memory": GI}, Protection(memory=mode), None, True)
    assert (got.memory, got.memory_min, got.memory_low) == (memory, memory_min, memory_low)
    assert (got.cpu_shares, got.pids) == (512, 100)  # CPU and pids stay the kubelet's


def test_memory_modes_where_the_kubelet_does_not_enforce():
    plain = Limits()
    assert reserved_limits(plain, {"memory": GI}, Protection("protect"), None, True) == Limits(
        memory=-1, memory_min=GI
    )
    # both: no cap the kubelet would not write, the protection all the same
    assert reserved_limits(plain, {"memory": GI}, Protection("both"), None, True) == Limits(
        memory_min=GI
    )
    # nothing to protect without a memory reservation
    assert reserved_limits(plain, {"cpu": 500}, Protection("protect"), None, True) == plain


def test_swap_and_weight_modes():
    both = Protection(swap="none", cpu_weight="proportional")
    got = reserved_limits(Limits(), {"memory": GI, "cpu": 32000}, both, (1250, 32000), True)
    assert got == Limits(swap_max=0, cpu_weight=1250)
    v1 = reserved_limits(Limits(memory=GI), {"memory": GI, "cpu": 500}, both, (3072, 3000), False)
    assert v1 == Limits(memory=GI, swap_max=0, cpu_shares=512)


def test_protection_refuses_unknown_modes():
    assert Protection().problems() == []
    assert Protection("cap", "off", "linear").problems() == [
        "--reserved-swap 'off' is not one of allow, none.",
        "--reserved-cpu-weight 'linear' is not one of kubelet, proportional.",
    ]
    cfg, alloc = node()
    with pytest.raises(InputError, match="--reserved-protection 'min' is not one of cap, protect"):
        desired_tree(cfg, alloc, V2, protection=Protection("min"))


# ------------------------------------------------------------------------ the files written


def test_v2_files_for_protection():
    limits = Limits(memory=-1, memory_min=GI, swap_max=0, cpu_weight=1250, cpu_shares=512)
    assert cgroup_v2.limit_files(limits) == [
        ("memory", "memory.max", "max"),
        ("memory", "memory.min", str(GI)),
        ("memory", "memory.swap.max", "0"),
        ("cpu", "cpu.weight", "1250"),  # as given, not converted from the shares
    ]
    assert cgroup_v2.fresh_value("memory.swap.max") == "max"
    assert cgroup_v2.parse_limit_value("memory.swap.max", "max") == -1


def test_v1_memory_and_swap_is_the_memory_cap():
    files = cgroup_v1.limit_files(Limits(memory=GI, swap_max=0))
    assert files == [
        ("memory", "memory.limit_in_bytes", str(GI)),
        ("memory", "memory.memsw.limit_in_bytes", str(GI)),
    ]
    # no memory cap, nothing to make memory+swap equal to
    assert cgroup_v1.limit_files(Limits(swap_max=0)) == []
    assert cgroup_v1.parse_limit_value("memory.memsw.limit_in_bytes", "9223372036854771712") == -1


# ------------------------------------------------------------------------ the tree


def test_default_is_the_kubelets_tree():
    compressible = ("pods", "system-reserved-compressible")
    for enforce in (("pods",), ("pods", "system-reserved"), compressible):
        cfg, alloc = node(enforce)
        assert desired_tree(cfg, alloc, V2) == desired_tree(
            cfg, alloc, V2, protection=Protection(), weight_formula="runc"
        )
    cfg, alloc = node()
    assert reserved(cfg, alloc) is None  # not enforced: not cgalloc's to touch


def test_protect_reaches_a_reserved_cgroup_the_kubelet_does_not_enforce():
    cfg, alloc = node()
    got = reserved(cfg, alloc, protection=Protection("protect", "none", "proportional"))
    # kubepods: 32 CPUs → 32768 shares → weight 1250 (linear); the reservation is as large
    assert got == Limits(memory=-1, memory_min=GI, swap_max=0, cpu_weight=1250)
    runc = reserved(cfg, alloc, protection=Protection(cpu_weight="proportional"), formula="runc")
    assert runc == Limits(cpu_weight=1681)  # runc's curve: 32768 shares → 1681


def test_protect_on_a_compressible_role_keeps_the_kubelets_shares():
    cfg, alloc = node(("pods", "system-reserved-compressible"))
    got = reserved(cfg, alloc, protection=Protection("protect"))
    assert (got.cpu_shares, got.memory, got.memory_min) == (32768, -1, GI)


@pytest.mark.parametrize(
    ("version", "mode", "memory", "memory_min"),
    [
        # MemoryQoS (on by default at 1.37) already writes memory.min on an enforced one
        ("1.37", "cap", GI, GI),
        ("1.35", "cap", GI, None),
        ("1.35", "both", GI, GI),  # the same files as 1.37's, at any minor
        ("1.35", "protect", -1, GI),
        ("1.37", "protect", -1, GI),
    ],
)
def test_memory_qos_and_protection_agree(version, mode, memory, memory_min):
    cfg, alloc = node(("pods", "system-reserved"), version)
    got = reserved(cfg, alloc, protection=Protection(mode))
    assert (got.memory, got.memory_min) == (memory, memory_min)


def test_cgroup_v1_refusals():
    cfg, alloc = node(("pods", "system-reserved"))
    with pytest.raises(InputError) as err:
        desired_tree(cfg, alloc, V1, protection=Protection("protect"))
    assert err.value.problems == [
        "--reserved-protection protect needs cgroup v2: cgroup v1 has no memory protection. "
        "memory.soft_limit_in_bytes is not one: under memory pressure the kernel reclaims first "
        "from the groups furthest above their soft limit, then from every group, below its soft "
        "limit too, and the OOM killer ignores it (Documentation/admin-guide/cgroup-v1/"
        "memory.rst, 'Soft limits'). On v1 keep --reserved-protection cap, or move the node to "
        "cgroup v2."
    ]
    # swap none maps to memory+swap = the cap where there is one ...
    got = reserved(cfg, alloc, V1, Protection(swap="none"))
    assert (got.memory, got.swap_max) == (GI, 0)
    assert ("memory", "memory.memsw.limit_in_bytes", str(GI)) in limit_files(V1, got)
    # ... and is refused where there is none
    cfg, alloc = node(("pods", "system-reserved-compressible"))
    with pytest.raises(InputError, match=r"needs a memory cap on /system.slice: .*\(its role is "
                       r"enforced for CPU only \(-compressible\)\)"):  # fmt: skip
        desired_tree(cfg, alloc, V1_HUGETLB, protection=Protection(swap="none"))
    # what v1 can do passes: proportional shares
    assert reserved(cfg, alloc, V1, Protection(cpu_weight="proportional")).cpu_shares == 32768


def test_reservation_without_a_cgroup_gets_a_note_not_a_write():
    cfg = NodeConfig(kube_reserved=rl(memory="1Gi"), kubelet_version="1.37")
    alloc = compute(cfg, rl(cpu="4", memory="8Gi", pid="4096"))
    assert [d.role for d in desired_tree(cfg, alloc, V2, protection=Protection("protect"))] == [
        "kubepods", "qos", "qos",
    ]  # fmt: skip
    assert protection_notes(cfg, alloc, True, Protection("protect"), "kubelet") == [
        "kube-reserved reserves memory but names no cgroup (kubeReservedCgroup "
        "(--kube-reserved-cgroup)): the --reserved-* options have nothing to protect there."
    ]


def test_notes_say_what_the_kubelet_writes_back():
    cfg, alloc = node(("pods", "system-reserved"))
    notes = protection_notes(cfg, alloc, True, Protection("protect-low"), "kubelet")
    assert notes == [
        "--reserved-protection protect-low: the kubelet enforces system-reserved in full and "
        "writes /system.slice's memory.max back to the reservation at its next start and "
        "memory.min (MemoryQoS), which makes memory.low moot; enforce "
        "system-reserved-compressible in the kubelet instead (it keeps the CPU weight), so the "
        "daemons stay protected and uncapped."
    ]
    assert protection_notes(cfg, alloc, True, Protection("both"), "kubelet") == []
    # the kubelet's linear weight for 32 CPUs equals kubepods': nothing to say; runc's curve
    # on a 60/4 split does not: kubepods 61440 shares → 2862, × 4/60 → 191; 4096 → 303
    weigh = Protection(cpu_weight="proportional")
    assert protection_notes(cfg, alloc, True, weigh, "kubelet") == []
    cfg = cfg._replace(system_reserved=rl(cpu="4"))
    alloc = compute(cfg, rl(cpu="64", memory="64Gi", pid="4096"))
    notes = protection_notes(cfg, alloc, True, weigh, "runc")
    assert notes == [
        "--reserved-cpu-weight proportional: the kubelet enforces system-reserved and writes "
        "/system.slice's CPU weight back to 303 at its next start (cgalloc's is 191); verify "
        "reports the difference until setup runs again."
    ]


# ------------------------------------------------------------------------ kubernetes#139790


def test_contention_warns_with_the_numbers():
    # the 64-CPU node, 32 reserved: 1250 (v2 linear) against system.slice's 100
    got = contention("/kubepods", 1250, {"/system.slice": 100}, 64000, 32000)
    assert got == (
        "CPU weight: /kubepods weighs 1250 against 100 for its siblings (/system.slice 100): "
        "under contention they get 7.4% of the CPU (4.7 of 64 CPUs), though 32 CPUs (50%) are "
        "reserved for the daemons (kubernetes#139790). --reserved-cpu-weight proportional weighs "
        "the reserved cgroups by their reservation; give them cgroups beside kubepods so the "
        "weight counts against it."
    )
    # proportional: no warning; a usual small reservation: none either
    assert contention("/kubepods", 1250, {"/system.slice": 1250}, 64000, 32000) is None
    assert contention("/kubepods", 118, {"/system.slice": 100}, 4000, 3000) is None
    # nothing reserved, or no sibling: nothing to say
    assert contention("/kubepods", 2500, {"/system.slice": 100}, 64000, 64000) is None
    assert contention("/kubepods", 2500, {}, 64000, 32000) is None


def test_show_assumes_the_default_weight_beside_kubepods():
    cfg, alloc = node()
    (v2,) = assumed_contention(cfg, alloc, "v2")
    assert "/kubepods weighs 1250 against 100 for its siblings (/system.slice 100; defaults " in v2
    (v1,) = assumed_contention(cfg, alloc, "hybrid")  # v1's shares
    assert "weighs 32768 against 1024" in v1 and "3.0% of the CPU" in v1
    # the kubelet weighing system.slice itself (compressible): in proportion, nothing to say
    cfg, alloc = node(("pods", "system-reserved-compressible"))
    assert assumed_contention(cfg, alloc, "v2") == []


# ------------------------------------------------------------------------ EKS AMI #2175


@pytest.mark.parametrize(
    ("current", "want"),
    [(None, -998), (0, -998), (-500, -998), (-997, -998), (-998, None), (-999, None),
     (-1000, None), (300, -998)],
)  # fmt: skip
def test_daemon_adjustment_never_raises_a_units_own(current, want):
    assert oomscore.daemon_adjust(current) == want


def test_badness_ranks_a_default_daemon_above_a_guaranteed_container():
    # mm/oom_kill.c oom_badness on a 1 GiB node without swap (262144 pages): a 250 MiB daemon
    # at 0 against a 700 MiB Guaranteed container at -997
    total = 262144
    daemon = oomscore.badness(64000, 0, 150, 0, total)
    pod = oomscore.badness(179200, 0, 400, oomscore.GUARANTEED, total)
    assert daemon > pod  # the kernel kills the daemon
    assert oomscore.badness(64000, 0, 150, oomscore.DAEMON, total) < pod
    assert oomscore.badness(64000, 0, 150, -1000, total) is None
    assert oomscore.SANDBOX < oomscore.GUARANTEED and oomscore.KUBELET < oomscore.DAEMON


def test_outranking_note_names_the_processes():
    found = [(812, "sshd", "/system.slice", -1000), (900, "journald", "/system.slice", 0)]
    assert oomscore.outranking_note(found) == (
        "oom_score_adj above Guaranteed pods' -997: journald (pid 900, /system.slice) 0. In a "
        "node-wide OOM the kernel kills these daemons before a Guaranteed container of their "
        "size (EKS AMI #2175); give their units OOMScoreAdjust=-998 (docs/protect.md)."
    )
    assert oomscore.outranking_note(found[:1]) is None
