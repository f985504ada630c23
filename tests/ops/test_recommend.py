"""recommend's model: percentiles, headroom, sources, eviction, the window's refusal, and the
vendors' formulas against the values in shared/reference (reservations-in-practice.md §1,
operators.md (b)), each computed by hand in the comment beside it."""

from __future__ import annotations

import pytest
from exportertree import GI, MI, window

from cgalloc.inputs.config import load_node_config
from cgalloc.model.quantity import Quantity
from cgalloc.ops import recommend
from cgalloc.ops.history import Point

# ---- the vendors' formulas ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "mib"),
    [
        (512 * MI, 255),  # below 1 GiB: the flat 255 MiB
        (1 * GI, 256),  # 25 % of 1024 MiB
        (4 * GI, 1024),  # 25 % of 4096
        (8 * GI, 1843),  # 1024 + 20 % of 4096 = 1843.2 (§1.8: 1843 MiB)
        (16 * GI, 2662),  # 1843.2 + 10 % of 8192 = 2662.4 (§1.8: 2662 MiB)
        (64 * GI, 5611),  # 2662.4 + 6 % of 49152 = 5611.52 (§1.8: 5611.5 MiB)
        (128 * GI, 9543),  # 2662.4 + 6 % of 114688 = 9543.68 (Gardener's test: 9543Mi)
        (256 * GI, 12165),  # 9543.68 + 2 % of 131072 = 12165.12 (§1.8: 12165 MiB)
    ],
)
def test_gke_memory(memory, mib):
    assert recommend.gke_memory_mib(memory) == mib


@pytest.mark.parametrize(
    ("cpus", "milli"),
    # 60 + 10 + 10 + 2.5 per core above 4, truncated per range as EKS's bootstrap does
    [(1, 60), (2, 70), (4, 80), (8, 90), (16, 110), (64, 230), (128, 390)],
)
def test_gke_eks_cpu(cpus, milli):
    # §1.8: 2 vCPU 70m, 4 vCPU 80m, 16 vCPU 110m, 64 vCPU 230m, 128 vCPU 390m; §1.1: 4 → 3920m
    assert recommend.gke_cpu_milli(cpus) == milli


@pytest.mark.parametrize(
    ("cpus", "milli"),
    # §1.2's table: 60/100/140/180/260/420/740m for 1/2/4/8/16/32/64 cores
    [(1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (32, 420), (64, 740), (128, 1380)],
)
def test_aks_cpu_table(cpus, milli):
    assert recommend.aks_cpu_milli(cpus) == milli


@pytest.mark.parametrize(
    ("memory", "pods", "mib"),
    [
        (8 * GI, 30, 650),  # §1.2: 20 × 30 + 50 = 650 (less than 25 % = 2048)
        (4 * GI, 70, 1024),  # §1.2: 25 % of 4 GiB, less than 20 × 70 + 50 = 1450
        (16 * GI, 110, 2250),  # §1.8: P=110 → 2250
        (64 * GI, 250, 5050),  # §1.8: P=250 → 5050
    ],
)
def test_aks_memory(memory, pods, mib):
    assert recommend.aks_memory_mib(memory, pods) == mib


def test_aks_legacy_memory_is_the_f2s_v2_sample():
    # §1.2: Standard_F2s_v2 (4 GiB) reserved 1774Mi = 1024Mi (25 % × 4096Mi) + 750Mi eviction
    assert recommend.aks_legacy_memory_mib(4 * GI) == 1024
    legacy = next(p for p in recommend.profiles(2, 4 * GI, 110, None) if p.name == "aks-legacy")
    assert legacy.eviction == {"memory.available": "750Mi"}
    assert legacy.kube[recommend.CPU] == Quantity.parse("100m")  # 2 cores → 100m, 1900m left


@pytest.mark.parametrize(("pods", "mib"), [(29, 574), (58, 893), (234, 2829), (110, 1465)])
def test_eks_memory(pods, mib):
    # §1.3: 11 × maxPods + 255; §1.8: m5.large 574Mi, m5.xlarge 893Mi, m5.4xlarge 2829Mi
    assert recommend.eks_memory_mib(pods) == mib


@pytest.mark.parametrize(
    ("gib", "reserved"),
    [
        (4, 1),  # up to 8 GiB: 1
        (8, 1),
        (16, 1),  # 1 + 8 × 0.06 = 1.48 → %d of 1.98 → 1 (§1.8: "1Gi (1.42–1.48)")
        (32, 2),  # 1 + 24 × 0.06 = 2.44 → 2 (commit 3a1921c23's table: 2.44)
        (64, 4),  # 1 + 56 × 0.06 = 4.36 → 4
        (128, 8),  # 1 + 120 × 0.06 = 8.2 → 8
        (129, 8),  # the quirk: 1 + 6.72 + (121 − 112) × 0.02 = 7.90 → 8 (below 128's 8.2)
        (256, 10),  # 1 + 6.72 + 136 × 0.02 = 10.44 → 10
        (512, 16),  # 1 + 6.72 + 392 × 0.02 = 15.56 → %d of 16.06 → 16
    ],
)
def test_openshift_memory(gib, reserved):
    assert recommend.openshift_memory_gib(gib * GI) == reserved


@pytest.mark.parametrize(
    ("cpus", "milli"),
    # max(0.5, 0.06 + 0.012 × (n − 1)) %.2f: 64 → 0.816 → 0.82; 128 → 1.584 → 1.58 (§1.4)
    [(2, 500), (37, 500), (38, 500), (42, 550), (64, 820), (128, 1580)],
)
def test_openshift_cpu(cpus, milli):
    assert recommend.openshift_cpu_milli(cpus) == milli


def test_gke_ephemeral_quoted_formula():
    # min(50 % × 100 GiB, 6 GiB + 35 % × 100 GiB, 100 GiB) = 41 GiB
    assert recommend.gke_ephemeral(100 * GI) == 41 * GI
    assert recommend.gke_ephemeral(1000 * GI) == 100 * GI


def test_profiles_for_a_4_cpu_16_gib_node():
    got = {p.name: p for p in recommend.profiles(4, 16 * GI, 110, 100 * GI)}
    assert set(got) == {"gke", "eks", "aks", "aks-legacy", "openshift", "talos", "k3s", "kubespray"}
    assert recommend.pairs(got["gke"].kube) == "cpu=80m,memory=2662Mi,ephemeral-storage=41Gi"
    assert recommend.pairs(got["eks"].kube) == "cpu=80m,memory=1465Mi,ephemeral-storage=1Gi"
    assert recommend.pairs(got["aks"].kube) == "cpu=140m,memory=2250Mi"
    assert recommend.pairs(got["openshift"].system) == "cpu=500m,memory=1Gi,ephemeral-storage=1Gi"
    assert got["openshift"].kube == {}
    assert recommend.pairs(got["talos"].system) == "cpu=50m,memory=384Mi,pid=100"
    assert got["k3s"].kube == got["k3s"].system == {}
    assert "memory.available" not in got["k3s"].eviction
    talos_cp = next(p for p in recommend.profiles(4, 16 * GI, 110, None, True) if p.name == "talos")
    assert talos_cp.system[recommend.MEMORY] == Quantity.parse("512Mi")


def test_allocatable_with_a_profile_uses_the_kubelets_arithmetic():
    cfg = load_node_config({})
    capacity = {"cpu": Quantity.parse("2"), "memory": Quantity.parse("4Gi"),
                "ephemeral-storage": Quantity.parse("129886128Ki")}  # fmt: skip
    legacy = next(p for p in recommend.profiles(2, 4 * GI, 110, None) if p.name == "aks-legacy")
    alloc = recommend.allocatable_with(cfg, capacity, legacy.kube, legacy.system, legacy.eviction)
    assert alloc["cpu"] == Quantity.parse("1900m")
    assert alloc["memory"].value() == 4 * GI - 1774 * MI
    # k3s: no memory eviction at all, nodefs 5 %
    k3s = next(p for p in recommend.profiles(2, 4 * GI, 110, None) if p.name == "k3s")
    alloc = recommend.allocatable_with(cfg, capacity, k3s.kube, k3s.system, k3s.eviction)
    assert alloc["memory"].value() == 4 * GI


# ---- the measurement ------------------------------------------------------------------------


def test_nearest_rank():
    assert recommend.nearest_rank([], 99) is None
    assert recommend.nearest_rank([5], 99) == 5
    # ⌈0.99 × 100⌉ = 99: the 99th smallest of 1..100
    assert recommend.nearest_rank(list(range(100, 0, -1)), 99) == 99
    assert recommend.nearest_rank(list(range(1, 101)), 100) == 100
    assert recommend.nearest_rank([1, 2, 3, 4], 50) == 2


def test_a_window_sized_by_hand():
    cfg = load_node_config({})
    rec = recommend.recommend(window(), cfg)
    kube = rec.measured["kube"]
    # 180 rates: 178 × 0.1, one 0.3, one 0.9; rank ⌈0.99 × 180⌉ = 179 → 0.3
    assert kube.cpu_p == pytest.approx(0.3)
    assert kube.cpu_max == pytest.approx(0.9)
    # 181 working sets: 179 × 100Mi, 150Mi, 200Mi; rank ⌈0.99 × 181⌉ = 180 → 150Mi
    assert kube.memory_p == 150 * MI
    assert kube.memory_max == 200 * MI
    assert kube.pids_max == 37
    assert kube.peak == 250 * MI
    # cpu 0.3 × 1.2 = 360m; memory max(150 × 1.2 = 180Mi, the 200Mi seen); pid 37 × 1.2 → 100
    assert recommend.pairs(rec.kube) == "cpu=360m,memory=200Mi,pid=100"
    # outside kubepods 500Mi > 150 + 300 measured: 50Mi more for system-reserved;
    # cpu 0.05 × 1.2 = 60m; memory (300 + 50) × 1.2 = 420Mi; pid 120 × 1.2 = 144 → 200
    assert recommend.pairs(rec.system) == "cpu=60m,memory=420Mi,pid=200"
    assert rec.measured["outside"].memory_p == 500 * MI
    assert any("added to system-reserved" in n for n in rec.notes)
    # no growth of the node's memory: the default 100Mi holds it, and is kept
    assert rec.eviction["memory.available"] == "100Mi"
    assert rec.window.seconds == 1800 and rec.window.samples == 181
    assert rec.window.interval_s == 10


def test_memory_available_holds_the_growth_in_10_seconds():
    samples = window()
    for i in range(100, 110):  # five 10-s steps of +200Mi, five of −200Mi
        grew = 200 * MI if i < 105 else -200 * MI
        for s in samples[i + 1 :]:
            samples[samples.index(s)] = s._replace(mem_available=s.mem_available - grew)
    rec = recommend.recommend(samples, load_node_config({}))
    # 180 growths: 175 × 0 and 5 × 200Mi; rank 179 → 200Mi × 1.2 = 240Mi
    assert rec.memory_growth_p == 200 * MI
    assert rec.eviction["memory.available"] == "240Mi"
    # the other thresholds stay as configured (the kubelet's defaults)
    assert rec.eviction["nodefs.available"] == "10%"
    assert rec.eviction["imagefs.available"] == "15%"


def test_tasks_outside_every_cgroup_add_pids_to_system_reserved():
    rec = recommend.recommend(window(tasks=700), load_node_config({}))
    # 700 − 500 in kubepods = 200 outside; 37 + 120 measured; 43 × 1.2 = 51.6 → 100 more
    assert recommend.pairs(rec.system) == "cpu=60m,memory=420Mi,pid=300"


def test_kubelet_and_runtime_cgroups_measure_kube_reserved_without_its_cgroup():
    samples = []
    for s in window():
        cg = dict(s.cgroups)
        kube = cg.pop("kube-reserved")
        half = Point(*(None if v is None else v // 2 for v in kube))
        cg["kubelet"] = cg["runtime"] = half
        samples.append(s._replace(cgroups=cg))
    rec = recommend.recommend(samples, load_node_config({}))
    assert rec.measured["kube"].sources == ("kubelet", "runtime")
    assert rec.measured["kube"].memory_max == 200 * MI
    assert recommend.pairs(rec.kube).startswith("cpu=360m,memory=200Mi")


def test_configured_ephemeral_storage_is_kept_and_said():
    cfg = load_node_config({"kube-reserved": ["ephemeral-storage=1Gi"]})
    rec = recommend.recommend(window(), cfg)
    assert rec.kube["ephemeral-storage"] == Quantity.parse("1Gi")
    assert any("ephemeral-storage" in n for n in rec.notes)


def test_a_larger_configured_memory_available_is_kept():
    cfg = load_node_config({"eviction-hard": ["memory.available<500Mi"]})
    rec = recommend.recommend(window(), cfg)
    assert rec.eviction == {"memory.available": "500Mi"}


@pytest.mark.parametrize(
    ("n", "step", "policy", "says"),
    [
        (180, 10.0, recommend.Policy(), "29m50s of usage in 180 samples"),  # 1790 s < 30m
        (20, 120.0, recommend.Policy(), "38m0s of usage in 20 samples"),  # long, too few
        (2, 10.0, recommend.Policy(min_window_s=300, min_samples=30), "10s of usage in 2"),
    ],
)
def test_a_window_too_short_is_refused_in_one_sentence(n, step, policy, says):
    with pytest.raises(recommend.TooShort) as err:
        recommend.recommend(window(n, step), load_node_config({}), policy)
    assert says in str(err.value)
    assert "at least" in str(err.value) and "\n" not in str(err.value)


def test_a_counter_reset_is_no_rate():
    samples = window()
    base = samples[90].cgroups["kube-reserved"].cpu_ns
    for i in range(90, len(samples)):  # the cgroup was made again: its counter restarts at 0
        s = samples[i]
        kube = s.cgroups["kube-reserved"]
        samples[i] = s._replace(
            cgroups={**s.cgroups, "kube-reserved": kube._replace(cpu_ns=kube.cpu_ns - base)}
        )
    rates = recommend.cpu_rates(samples, ["kube-reserved"])
    assert len(rates) == 179  # the step down gives none; the others are as before
    assert max(rates) == pytest.approx(0.9)


def test_ceil_helpers():
    assert recommend.ceil_to(0.3 * 1000 * 1.2, 10) == 360
    assert recommend.ceil_to(361, 10) == 370
    assert str(recommend.mib(150 * MI * 6 // 5)) == "180Mi"
    assert str(recommend.mib(1)) == "1Mi"
    assert str(recommend.milli(2000)) == "2"
    assert str(recommend.milli(60)) == "60m"
