"""Reservations sized from what the node used, beside the vendors' formulas. Pure: no I/O.

Method (docs/recommend.md says it with worked numbers):

- CPU of a cgroup between two samples: Δ cumulative usage / Δ time, in cores.
- Each series' high percentile is the nearest-rank one: the value at rank ⌈p/100 × n⌉ of the
  n values sorted (p=99 of 100 values is the 99th smallest).
- kube-reserved is measured on the kube-reserved cgroup, else on the kubelet's and the runtime's
  cgroups added up; system-reserved on the system-reserved cgroup, else on --system-cgroups.
  What the node uses outside kubepods and outside both (the kernel, user sessions, processes in
  no cgroup followed: MemTotal − MemAvailable − kubepods' working set, the method of Gardener's
  reserved-resources-recommender) is added to system-reserved.
- cpu = p × (1 + headroom), rounded up to 10m; memory = the working set's p × (1 + headroom),
  never below the largest working set seen, rounded up to 1Mi; pid = the most tasks seen ×
  (1 + headroom), rounded up to 100 (running out of pids is fatal, so the peak, not a
  percentile).
- memory.available (hard eviction) holds what the node's memory in use grew by in 10 s, the
  kubelet's eviction-monitoring period, at its p × (1 + headroom), at least the kubelet's
  default 100Mi. The other thresholds stay as configured.
- ephemeral-storage: no cgroup accounts disk use, so it is not measured; the configured value
  stays.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from cgalloc.inputs.thresholds import parse_threshold
from cgalloc.model.allocatable import compute
from cgalloc.model.eviction import DEFAULT_EVICTION_HARD
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.quantity import BINARY_SI, Quantity
from cgalloc.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PID
from cgalloc.ops.history import HistorySample

MIB = 1 << 20
GIB = 1 << 30
EVICTION_PERIOD_S = 10  # the kubelet's eviction manager monitoring period
MIN_MEMORY_AVAILABLE = 100 * MIB  # the kubelet's default memory.available


class Policy(NamedTuple):
    percentile: float = 99.0
    headroom: float = 0.20  # a fraction: 0.2 = 20 %
    min_window_s: float = 1800.0
    min_samples: int = 30


# ---- small exact helpers -------------------------------------------------------------------


def nearest_rank(values: Sequence[float], p: float) -> float | None:
    """The nearest-rank p-th percentile (0 < p <= 100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(p / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def ceil_to(value: float, step: int) -> int:
    return math.ceil(value / step - 1e-12) * step if value > 0 else 0


def mib(n_bytes: int) -> Quantity:
    return Quantity.parse(f"{ceil_to(n_bytes, MIB) // MIB}Mi")


def milli(m: int) -> Quantity:
    return Quantity.parse(f"{m}m") if m % 1000 else Quantity.from_int(m // 1000)


# ---- series from the window ----------------------------------------------------------------


def _sum_points(sample: HistorySample, roles: Sequence[str], field: str) -> int | None:
    values = [getattr(sample.cgroups[r], field) for r in roles if r in sample.cgroups]
    if not values or any(v is None for v in values):
        return None
    return sum(values)


def cpu_rates(samples: Sequence[HistorySample], roles: Sequence[str]) -> list[float]:
    """Cores used by ``roles`` together between each two consecutive samples that have them."""
    out = []
    for a, b in itertools.pairwise(samples):
        if not all(r in a.cgroups and r in b.cgroups for r in roles):
            continue
        ua, ub = _sum_points(a, roles, "cpu_ns"), _sum_points(b, roles, "cpu_ns")
        dt = b.t - a.t
        if ua is None or ub is None or dt <= 0 or ub < ua:
            continue  # a counter reset (the cgroup was made again) is no rate
        out.append((ub - ua) / 1e9 / dt)
    return out


def values(samples: Sequence[HistorySample], roles: Sequence[str], field: str) -> list[int]:
    out = []
    for s in samples:
        if all(r in s.cgroups for r in roles):
            v = _sum_points(s, roles, field)
            if v is not None:
                out.append(v)
    return out


def outside_memory(s: HistorySample) -> int | None:
    """Memory in use outside kubepods: MemTotal − MemAvailable − kubepods' working set, else
    the root cgroup's working set − kubepods'."""
    kp = s.cgroups.get("kubepods")
    kp_ws = kp.working_set if kp is not None else None
    if kp_ws is None:
        return None
    if s.mem_total is not None and s.mem_available is not None:
        return max(s.mem_total - s.mem_available - kp_ws, 0)
    node = s.cgroups.get("node")
    if node is not None and node.working_set is not None:
        return max(node.working_set - kp_ws, 0)
    return None


def outside_cpu(samples: Sequence[HistorySample]) -> list[float]:
    node, kp = cpu_rates(samples, ["node"]), cpu_rates(samples, ["node", "kubepods"])
    if not node or len(node) != len(kp):
        return []
    pods = cpu_rates(samples, ["kubepods"])
    return [max(n - p, 0.0) for n, p in zip(node, pods, strict=False)]


def memory_growth(samples: Sequence[HistorySample]) -> list[float]:
    """Growth of the node's memory in use (MemTotal − MemAvailable) per eviction period."""
    out = []
    for a, b in itertools.pairwise(samples):
        if None in (a.mem_total, a.mem_available, b.mem_total, b.mem_available):
            continue
        dt = b.t - a.t
        if dt <= 0:
            continue
        grew = (b.mem_total - b.mem_available) - (a.mem_total - a.mem_available)
        out.append(max(grew, 0) / dt * EVICTION_PERIOD_S)
    return out


# ---- the recommendation --------------------------------------------------------------------


class Measured(NamedTuple):
    """What one reservation's sources used over the window."""

    sources: tuple[str, ...]  # roles measured
    cpu_p: float | None  # cores at the percentile
    cpu_max: float | None
    memory_p: int | None  # working set bytes at the percentile
    memory_max: int | None
    pids_max: int | None
    peak: int | None = None  # the largest memory.peak / max_usage_in_bytes read (usage, cache too)


class Window(NamedTuple):
    start: float
    end: float
    samples: int
    interval_s: float | None  # median gap between samples

    @property
    def seconds(self) -> float:
        return self.end - self.start


class Profile(NamedTuple):
    """A vendor's reservations for a node of this size."""

    name: str
    kube: dict[str, Quantity]
    system: dict[str, Quantity]
    eviction: dict[str, str]
    source: str
    notes: tuple[str, ...] = ()


class Recommendation(NamedTuple):
    window: Window
    policy: Policy
    kube: dict[str, Quantity]
    system: dict[str, Quantity]
    eviction: dict[str, str]
    measured: dict[str, Measured]  # "kube" / "system" / "outside" -> what was measured
    notes: tuple[str, ...]
    memory_growth_p: float | None = None


class TooShort(ValueError):
    """The window is too short to mean anything; the message is the sentence to print."""


def window_of(samples: Sequence[HistorySample]) -> Window:
    if not samples:
        return Window(0.0, 0.0, 0, None)
    gaps = [b.t - a.t for a, b in itertools.pairwise(samples)]
    gaps.sort()
    mid = gaps[len(gaps) // 2] if gaps else None
    return Window(samples[0].t, samples[-1].t, len(samples), mid)


def human_seconds(s: float) -> str:
    s = round(s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m}m{sec}s" if h else f"{m}m{sec}s" if m else f"{sec}s"


def check_window(w: Window, policy: Policy) -> None:
    if w.seconds < policy.min_window_s or w.samples < policy.min_samples:
        raise TooShort(
            f"--history holds {human_seconds(w.seconds)} of usage in {w.samples} samples, too"
            f" short to size a reservation: recommend needs at least"
            f" {human_seconds(policy.min_window_s)} and {policy.min_samples} samples (record"
            " longer, e.g. cgalloc record --for 1h, or lower --min-window, at least 5m0s)."
        )


def measure(samples: Sequence[HistorySample], roles: Sequence[str], p: float) -> Measured:
    rates = cpu_rates(samples, roles)
    ws = values(samples, roles, "working_set")
    pids = values(samples, roles, "pids")
    peaks = [
        s.cgroups[r].peak
        for s in samples
        for r in roles
        if r in s.cgroups and s.cgroups[r].peak is not None
    ]
    return Measured(
        tuple(roles),
        nearest_rank(rates, p),
        max(rates) if rates else None,
        None if not ws else int(nearest_rank(ws, p)),
        max(ws) if ws else None,
        max(pids) if pids else None,
        max(peaks) if peaks else None,
    )


def _present(samples: Sequence[HistorySample], role: str) -> bool:
    return any(role in s.cgroups for s in samples)


def sources(samples: Sequence[HistorySample]) -> tuple[list[str], list[str]]:
    """The roles kube-reserved and system-reserved are measured on (see the docstring)."""
    if _present(samples, "kube-reserved"):
        kube = ["kube-reserved"]
    else:
        kube = [r for r in ("kubelet", "runtime") if _present(samples, r)]
    if _present(samples, "system-reserved"):
        system = ["system-reserved"]
    else:
        system = ["misc"] if _present(samples, "misc") else []
    return kube, system


def size(
    m: Measured | None, h: float, extra_cpu: float = 0.0, extra_mem: int = 0
) -> dict[str, Quantity]:
    """Reservation quantities of a measurement, headroom ``h`` (a fraction) applied."""
    out: dict[str, Quantity] = {}
    cpu = (m.cpu_p if m is not None and m.cpu_p is not None else 0.0) + extra_cpu
    mem_p = (m.memory_p if m is not None and m.memory_p is not None else 0) + extra_mem
    mem_max = (m.memory_max if m is not None and m.memory_max is not None else 0) + extra_mem
    if (m is not None and m.cpu_p is not None) or extra_cpu:
        out[CPU] = milli(max(ceil_to(cpu * 1000 * (1 + h), 10), 10))
    if (m is not None and m.memory_p is not None) or extra_mem:
        out[MEMORY] = mib(max(ceil_to(mem_p * (1 + h), MIB), ceil_to(mem_max, MIB)))
    if m is not None and m.pids_max is not None:
        out[PID] = Quantity.from_int(max(ceil_to(m.pids_max * (1 + h), 100), 100))
    return out


def recommend(
    samples: Sequence[HistorySample], cfg: NodeConfig, policy: Policy = Policy()
) -> Recommendation:
    """The reservations for the window ``samples`` (oldest first); TooShort when the window is
    shorter than the policy's minimum."""
    w = window_of(samples)
    check_window(w, policy)
    p, h = policy.percentile, policy.headroom
    notes: list[str] = []
    kube_roles, system_roles = sources(samples)
    measured: dict[str, Measured] = {}
    if kube_roles:
        measured["kube"] = measure(samples, kube_roles, p)
    else:
        notes.append(
            "kube-reserved: no kube-reserved cgroup, --kubelet-cgroups or"
            " --runtime-cgroups was recorded; what the daemons use is counted in"
            " what runs outside kubepods, added to system-reserved."
        )
    if system_roles:
        measured["system"] = measure(samples, system_roles, p)
    out_mem = [v for v in map(outside_memory, samples) if v is not None]
    out_cpu = outside_cpu(samples)
    extra_cpu, extra_mem = 0.0, 0
    if out_mem or out_cpu:
        outside = Measured(
            ("outside kubepods",),
            nearest_rank(out_cpu, p),
            max(out_cpu) if out_cpu else None,
            None if not out_mem else int(nearest_rank(out_mem, p)),
            max(out_mem) if out_mem else None,
            None,
        )
        measured["outside"] = outside
        covered_mem = sum(m.memory_p or 0 for k, m in measured.items() if k != "outside")
        covered_cpu = sum(m.cpu_p or 0.0 for k, m in measured.items() if k != "outside")
        if outside.memory_p is not None and outside.memory_p > covered_mem:
            extra_mem = outside.memory_p - covered_mem
            notes.append(
                f"memory used outside kubepods and outside the reserved cgroups"
                f" (p{p:g}: {extra_mem // MIB}Mi; the kernel, sessions, other"
                " processes) is added to system-reserved."
            )
        if outside.cpu_p is not None and outside.cpu_p > covered_cpu:
            extra_cpu = outside.cpu_p - covered_cpu
            notes.append(
                f"cpu used outside kubepods and outside the reserved cgroups"
                f" (p{p:g}: {round(extra_cpu * 1000)}m) is added to system-reserved."
            )
    elif not system_roles:
        notes.append(
            "system-reserved: neither a system-reserved cgroup, --system-cgroups nor"
            " the node and kubepods were recorded: not measured."
        )
    kube = size(measured.get("kube"), h)
    system = size(measured.get("system"), h, extra_cpu, extra_mem)
    pids_out = [
        s.tasks - s.cgroups["kubepods"].pids
        for s in samples
        if s.tasks is not None
        and "kubepods" in s.cgroups
        and s.cgroups["kubepods"].pids is not None
    ]
    if pids_out:
        covered = sum(m.pids_max or 0 for k, m in measured.items() if k != "outside")
        top = max(pids_out)
        if top > covered:
            need = max(ceil_to((top - covered) * (1 + h), 100), 100)
            system[PID] = Quantity.from_int((system[PID].value() if PID in system else 0) + need)
    for role, rl in (("kube", cfg.kube_reserved), ("system", cfg.system_reserved)):
        if EPHEMERAL_STORAGE in rl:
            (kube if role == "kube" else system)[EPHEMERAL_STORAGE] = rl[EPHEMERAL_STORAGE]
    if any(EPHEMERAL_STORAGE in rl for rl in (cfg.kube_reserved, cfg.system_reserved)):
        notes.append(
            "ephemeral-storage: no cgroup accounts disk use, so it is not measured;"
            " the configured value is kept."
        )
    growth = memory_growth(samples)
    grow_p = nearest_rank(growth, p)
    eviction = {s: t.value for s, t in sorted(cfg.eviction_hard.items())}
    need = max(ceil_to((grow_p or 0) * (1 + h), MIB), MIN_MEMORY_AVAILABLE)
    current = cfg.eviction_hard.get("memory.available")
    if current is not None and current.quantity is not None and current.quantity.value() >= need:
        notes.append(
            f"memory.available: the configured {current.value} already holds the"
            " measured 10-second growth; kept."
        )
    else:
        eviction["memory.available"] = str(mib(need))
    if not growth:
        notes.append(
            "memory.available: /proc/meminfo was not recorded, so the node's growth is"
            " unknown; the kubelet's default 100Mi is the floor used."
        )
    return Recommendation(w, policy, kube, system, eviction, measured, tuple(notes), grow_p)


# ---- the vendors' formulas -----------------------------------------------------------------
# Sources: shared/reference/reservations-in-practice.md §1 and operators.md (b); the section
# each follows is named in its docstring.


def tiered(amount: int, tiers: Sequence[tuple[int, int]], rest_rate: int, denominator: int) -> int:
    """Σ over consecutive tiers (size, rate) of min(what is left, size) × rate, the rest at
    ``rest_rate``; divided by ``denominator`` once (exact, then floored)."""
    total, left = 0, amount
    for tier, rate in tiers:
        part = min(left, tier)
        total += part * rate
        left -= part
    total += max(left, 0) * rest_rate
    return total // denominator


GKE_MEMORY_TIERS = ((4 * GIB, 25), (4 * GIB, 20), (8 * GIB, 10), (112 * GIB, 6))


def gke_memory_mib(memory: int) -> int:
    """GKE kube-reserved memory (§1.1): 255 MiB below 1 GiB, else 25 % of the first 4 GiB, 20 %
    of the next 4, 10 % of the next 8, 6 % of the next 112, 2 % above 128 GiB; whole MiB
    (floored, as Gardener's tests expect 9543Mi for 128Gi)."""
    if memory < GIB:
        return 255
    return tiered(memory, GKE_MEMORY_TIERS, 2, 100 * MIB)


def gke_cpu_milli(cpus: int) -> int:
    """GKE/EKS kube-reserved cpu (§1.1, §1.3): 6 % of the first core, 1 % of the second, 0.5 %
    of cores 3–4, 0.25 % above, per range in integer millicores as EKS's bootstrap computes
    ``(min(total,end) − start) × pct / 10000`` with pct 600/100/50/25."""
    total = cpus * 1000
    out = 0
    for start, end, pct in (
        (0, 1000, 600),
        (1000, 2000, 100),
        (2000, 4000, 50),
        (4000, max(total, 4000), 25),
    ):
        if total > start:
            out += (min(total, end) - start) * pct // 10000
    return out


def aks_cpu_milli(cpus: int) -> int:
    """AKS kube-reserved cpu (§1.2): the table 60/100/140/180/260/420/740m for 1/2/4/8/16/32/64
    cores, i.e. 6 % of the first core, 4 % of the second, 2 % of cores 3–4, 1 % above."""
    return tiered(cpus * 1000, ((1000, 6), (1000, 4), (2000, 2)), 1, 100)


def aks_memory_mib(memory: int, max_pods: int) -> int:
    """AKS ≥ 1.29 kube-reserved memory (§1.2): min(20 MB × maxPods + 50 MB, 25 % of memory),
    "MB" taken as MiB as Karpenter's Azure provider does (the docs' unit is ambiguous)."""
    return min(20 * max_pods + 50, memory // 4 // MIB)


def aks_legacy_memory_mib(memory: int) -> int:
    """AKS < 1.29 kube-reserved memory (§1.2): 25/20/10/6/2 % tiers like GKE's, no 255 MiB
    floor; AKS applies them to the VM's nominal size, cgalloc to MemTotal."""
    return tiered(memory, GKE_MEMORY_TIERS, 2, 100 * MIB)


def eks_memory_mib(max_pods: int) -> int:
    """EKS kube-reserved memory (§1.3): 11 MiB × maxPods + 255 MiB."""
    return 11 * max_pods + 255


def openshift_memory_gib(memory: int) -> int:
    """OpenShift auto-sizing system-reserved memory (§1.4, dynamic-system-reserved-calc.sh
    after commit 3a1921c23): on ``free -g`` GiB (floored here), 1 GiB up to 8 GiB, then 6 % of
    the next 120 GiB, 2 % above, with the script's quirk (past 128 GiB it adds 6.72 and
    subtracts 112, not 120), printed as ``%d`` of the value + 0.5. In hundredths, exactly."""
    total = memory // GIB
    rec = 100
    total = 0 if total <= 8 else total - 8
    if total <= 120:
        rec += total * 6
        total = 0
    else:
        rec += 672
        total -= 112
    rec += total * 2
    return (rec + 50) // 100


def openshift_cpu_milli(cpus: int) -> int:
    """OpenShift auto-sizing system-reserved cpu, node-sizing version 2 (§1.4):
    max(0.5, 0.06 + 0.012 × (ncpu − 1)) printed with %.2f, as millicores."""
    raw = 60 + 12 * (cpus - 1)  # always even: %.2f never meets a tie
    return max((raw + 5) // 10 * 10, 500)


def gke_ephemeral(disk: int) -> int:
    """GKE's ephemeral-storage reservation as one reporter quotes GKE's docs (operators.md (b),
    [S]): min(50 % of the boot disk, 6 GiB + 35 % of it, 100 GiB)."""
    return min(disk // 2, 6 * GIB + disk * 35 // 100, 100 * GIB)


def _q(text: str) -> Quantity:
    return Quantity.parse(text)


def profiles(
    cpus: int, memory: int, max_pods: int, disk: int | None, control_plane: bool = False
) -> list[Profile]:
    """Each vendor's reservations for a node of ``cpus`` cores, ``memory`` bytes (MemTotal),
    ``max_pods`` and a ``disk``-byte root filesystem (None: unknown)."""
    kubelet_defaults = dict(DEFAULT_EVICTION_HARD)
    gke_kube = {CPU: milli(gke_cpu_milli(cpus)), MEMORY: _q(f"{gke_memory_mib(memory)}Mi")}
    if disk:
        gke_kube[EPHEMERAL_STORAGE] = Quantity.from_int(gke_ephemeral(disk), BINARY_SI)
    aks_cpu = milli(aks_cpu_milli(cpus))
    talos_mem = "512Mi" if control_plane else "384Mi"
    return [
        Profile(
            "gke",
            gke_kube,
            {},
            {"memory.available": "100Mi", "nodefs.available": "10%"},
            "GKE node sizing (reservations-in-practice.md §1.1; ephemeral [S])",
            ("nodefs.available 10% is unconfirmed [U]",),
        ),
        Profile(
            "eks",
            {
                CPU: milli(gke_cpu_milli(cpus)),
                MEMORY: _q(f"{eks_memory_mib(max_pods)}Mi"),
                EPHEMERAL_STORAGE: _q("1Gi"),
            },
            {},
            {"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"},
            "EKS AMI bootstrap / nodeadm (§1.3)",
            ("EKS takes maxPods from the instance type's ENI table; this node's is used",),
        ),
        Profile(
            "aks",
            {CPU: aks_cpu, MEMORY: _q(f"{aks_memory_mib(memory, max_pods)}Mi")},
            {},
            {"memory.available": "100Mi"},
            "AKS 1.29 and later (§1.2)",
            ("the docs' MB read as MiB",),
        ),
        Profile(
            "aks-legacy",
            {CPU: aks_cpu, MEMORY: _q(f"{aks_legacy_memory_mib(memory)}Mi")},
            {},
            {"memory.available": "750Mi"},
            "AKS before 1.29 (§1.2)",
            ("AKS applies the tiers to the VM's nominal memory; MemTotal is used here",),
        ),
        Profile(
            "openshift",
            {},
            {
                CPU: milli(openshift_cpu_milli(cpus)),
                MEMORY: _q(f"{openshift_memory_gib(memory)}Gi"),
                EPHEMERAL_STORAGE: _q("1Gi"),
            },
            kubelet_defaults,
            "OpenShift 4 autoSizingReserved, node-sizing v2 (§1.4)",
            ("free -g taken as MemTotal floored to GiB [U]",),
        ),
        Profile(
            "talos",
            {},
            {CPU: _q("50m"), MEMORY: _q(talos_mem), PID: _q("100")},
            kubelet_defaults,
            "Talos machine config defaults (operators.md (b))",
            ("control plane" if control_plane else "worker",),
        ),
        Profile(
            "k3s",
            {},
            {},
            {"imagefs.available": "5%", "nodefs.available": "5%"},
            "k3s / RKE2 defaults (§1.5)",
            ("no memory eviction: the partial evictionHard zeroes memory.available",),
        ),
        Profile(
            "kubespray",
            {CPU: _q("100m"), MEMORY: _q("256Mi"), EPHEMERAL_STORAGE: _q("500Mi"), PID: _q("1000")},
            {CPU: _q("500m"), MEMORY: _q("512Mi"), EPHEMERAL_STORAGE: _q("500Mi"), PID: _q("1000")},
            kubelet_defaults,
            "Kubespray role defaults (§1.6)",
        ),
    ]


def thresholds(eviction: Mapping[str, str]) -> dict:
    """Parsed thresholds of a signal -> value map (disabled ones left out)."""
    out = {}
    for signal, value in eviction.items():
        t = parse_threshold(signal, value)
        if t is not None:
            out[signal] = t
    return out


def allocatable_with(
    cfg: NodeConfig,
    capacity: Mapping[str, Quantity],
    kube: Mapping,
    system: Mapping,
    eviction: Mapping[str, str],
) -> dict[str, Quantity]:
    """Node Allocatable with these reservations, the rest of ``cfg`` as it is."""
    changed = cfg._replace(
        kube_reserved=dict(kube),
        system_reserved=dict(system),
        eviction_hard=thresholds(eviction),
        reserved_cpus=frozenset(),
    )
    return compute(changed, capacity).allocatable


def covers(
    kube: Mapping[str, Quantity],
    system: Mapping[str, Quantity],
    need: Mapping[str, Quantity],
    resource: str,
) -> bool | None:
    """Whether kube + system reserve at least ``need``'s total of ``resource`` (None when
    nothing was measured)."""
    if resource not in need:
        return None
    have = sum((rl[resource].nanos for rl in (kube, system) if resource in rl), 0)
    return have >= need[resource].nanos


def total(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> dict[str, Quantity]:
    out = dict(a)
    for k, v in b.items():
        out[k] = Quantity(out[k].nanos + v.nanos, v.fmt) if k in out else v
    return out


def measured_need(rec: Recommendation) -> dict[str, Quantity]:
    """What kube + system must hold to cover the window's percentile, no headroom: the larger
    of the reserved cgroups' sum and what ran outside kubepods."""
    cpu = sum(m.cpu_p or 0.0 for k, m in rec.measured.items() if k != "outside")
    mem = sum(m.memory_p or 0 for k, m in rec.measured.items() if k != "outside")
    out = rec.measured.get("outside")
    if out is not None:
        cpu = max(cpu, out.cpu_p or 0.0)
        mem = max(mem, out.memory_p or 0)
    need: dict[str, Quantity] = {}
    if cpu:
        need[CPU] = milli(max(ceil_to(cpu * 1000, 1), 1))
    if mem:
        need[MEMORY] = mib(mem)
    return need


Formatter = Callable[[Mapping[str, Quantity]], str]


def pairs(rl: Mapping[str, Quantity]) -> str:
    """``cpu=100m,memory=1Gi`` in the kubelet's resource order."""
    order = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2, PID: 3}
    return ",".join(f"{k}={v}" for k, v in sorted(rl.items(), key=lambda kv: order.get(kv[0], 9)))
