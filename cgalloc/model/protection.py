"""Beyond the kubelet, and only when asked: the reserved cgroups protected instead of capped,
kept out of swap, and weighted for CPU in proportion to their reservation; and the figures that
show a node whose reservation the CPU weights do not honour. Pure: no I/O.

``Protection()`` is the kubelet's behaviour: nothing here changes a value unless an operator
chose another mode (``setup --reserved-protection``, ``--reserved-swap``,
``--reserved-cpu-weight``). What each mode writes, per reserved cgroup that is named
(kubeReservedCgroup / systemReservedCgroup) and reserves the resource:

memory (``--reserved-protection``; cgroup v2 only, see :data:`V1_MEMORY_REFUSAL`)
  - ``cap``: the kubelet's limits: ``memory.max`` = the reservation where the role is enforced in
    full, and MemoryQoS's ``memory.min`` = the reservation there when the gate is on.
  - ``protect``: ``memory.min`` = the reservation and ``memory.max`` = max: the kernel does not
    reclaim the daemons' memory below their reservation, and nothing OOM-kills them at it
    (kubernetes#128284). Talos protects its runtime the same way (siderolabs/talos#13782).
  - ``protect-low``: ``memory.low`` instead of ``memory.min``: protected while other memory can
    be reclaimed, reclaimed before anything is OOM-killed.
  - ``both``: the kubelet's cap where it caps, and ``memory.min`` = the reservation on every
    reserved cgroup (what the 1.37 kubelet's MemoryQoS writes on an enforced one, at any minor).

swap (``--reserved-swap``)
  - ``allow``: nothing (the kubelet never writes swap on a reserved cgroup).
  - ``none``: ``memory.swap.max`` = 0 on cgroup v2, KEP-2400's first best practice for system
    daemons ("Disable swap for system critical daemons"). cgroup v1 counts memory and swap
    together: ``memory.memsw.limit_in_bytes`` equal to the memory cap is "no swap", so v1 takes
    it where the reserved cgroup has a cap, and refuses it where it has none
    (:data:`V1_SWAP_REFUSAL`).

CPU (``--reserved-cpu-weight``)
  - ``kubelet``: the kubelet's shares where it enforces the role, nothing elsewhere.
  - ``proportional``: the weight kubepods has per CPU of its own, times the CPUs reserved:
    ``weight = round(kubepods' weight × reserved CPU ÷ kubepods' CPU)`` within 1..10000 (v1:
    the same with ``cpu.shares``, within 2..262144), so that under contention the reserved
    cgroup and kubepods split the CPU as their reservations do. kubernetes#139790: kubepods'
    weight grows with the node's CPUs (2500 on 64 CPUs) while ``system.slice`` stays at the
    default 100, so the daemons get a few percent of a contended node whatever was reserved for
    them; the kubelet cannot fix it on kubepods (it does not own the siblings), only on a
    sibling it is told to weigh (the ``*-compressible`` enforcement, kubernetes#125982).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cgalloc.model.limits import MAX_SHARES, MAX_WEIGHT, MIN_SHARES, Limits

MEMORY_MODES = ("cap", "protect", "protect-low", "both")
SWAP_MODES = ("allow", "none")
WEIGHT_MODES = ("kubelet", "proportional")
DEFAULT_WEIGHT = {"v2": 100, "v1": 1024}  # a cgroup's cpu.weight / cpu.shares until written
WEIGHT_FILE = {"v2": "cpu.weight", "v1": "cpu.shares"}

V1_MEMORY_REFUSAL = (
    "--reserved-protection {mode} needs cgroup v2: cgroup v1 has no memory protection. "
    "memory.soft_limit_in_bytes is not one: under memory pressure the kernel reclaims first from "
    "the groups furthest above their soft limit, then from every group, below its soft limit "
    "too, and the OOM killer ignores it (Documentation/admin-guide/cgroup-v1/memory.rst, "
    "'Soft limits'). On v1 keep --reserved-protection cap, or move the node to cgroup v2."
)
V1_SWAP_REFUSAL = (
    "--reserved-swap none on cgroup v1 needs a memory cap on {path}: v1 limits memory and swap "
    "together (memory.memsw.limit_in_bytes), so 'no swap' is that limit equal to the memory "
    "limit, and {path} has none ({why}). memory.swappiness 0 is no substitute: it keeps only the "
    "group's own limit reclaim off swap; global reclaim still swaps it out (mm/vmscan.c "
    "get_scan_count). Enforce the role in full (--enforce-node-allocatable) with "
    "--reserved-protection cap or both, or move the node to cgroup v2."
)


class Protection(NamedTuple):
    """The modes chosen for the reserved cgroups; the defaults are the kubelet's."""

    memory: str = "cap"
    swap: str = "allow"
    cpu_weight: str = "kubelet"

    @property
    def is_kubelet(self) -> bool:
        return self == Protection()

    def problems(self) -> list[str]:
        """Unknown modes, one sentence each."""
        out = []
        for flag, value, accepted in (
            ("--reserved-protection", self.memory, MEMORY_MODES),
            ("--reserved-swap", self.swap, SWAP_MODES),
            ("--reserved-cpu-weight", self.cpu_weight, WEIGHT_MODES),
        ):
            if value not in accepted:
                out.append(f"{flag} {value!r} is not one of {', '.join(accepted)}.")
        return out

    def reaches(self, reserved: Mapping[str, object]) -> bool:
        """Whether these modes write anything on a reserved cgroup the kubelet leaves alone
        (not enforced) that reserves ``reserved`` (resource names)."""
        memory = "memory" in reserved
        return (
            (self.memory != "cap" and memory)
            or (self.swap == "none" and memory)
            or (self.cpu_weight == "proportional" and "cpu" in reserved)
        )


def proportional(kubepods_weight: int, kubepods_milli: int, reserved_milli: int, v2: bool) -> int:
    """The weight (v2 ``cpu.weight``, v1 ``cpu.shares``) that gives ``reserved_milli`` CPUs
    the weight per CPU kubepods has: ``round(kubepods_weight × reserved ÷ kubepods)``, within
    the kernel's range (1..10000, 2..262144)."""
    low, high = (1, MAX_WEIGHT) if v2 else (MIN_SHARES, MAX_SHARES)
    if kubepods_milli <= 0:
        return high  # every CPU reserved: nothing to weigh against
    value = (kubepods_weight * reserved_milli * 2 + kubepods_milli) // (2 * kubepods_milli)
    return min(max(value, low), high)


def reserved_limits(
    kubelet: Limits,
    reservation: Mapping[str, int],
    protection: Protection,
    weigh: tuple[int, int] | None,
    v2: bool,
) -> Limits:
    """A reserved cgroup's limits under ``protection``, from the kubelet's (``kubelet``: what
    the kubelet writes, ``Limits()`` where it does not enforce the role).

    ``reservation`` is the role's reservation by resource ("memory" bytes, "cpu" millicores);
    ``weigh`` kubepods' (weight, millicores), the
    weight as this hierarchy writes it (v2 cpu.weight, v1 cpu.shares). The v1 refusals are the
    caller's (:func:`v1_problems`)."""
    limits = kubelet
    memory = reservation.get("memory")
    if memory is not None and protection.memory != "cap":
        cap = limits.memory if protection.memory == "both" else -1
        limits = limits._replace(memory=cap)
        if protection.memory == "protect-low":
            limits = limits._replace(memory_low=memory, memory_min=None)
        else:
            limits = limits._replace(memory_min=memory)
    if protection.swap == "none" and memory is not None:
        limits = limits._replace(swap_max=0)
    cpu = reservation.get("cpu")
    if protection.cpu_weight == "proportional" and cpu is not None and weigh is not None:
        value = proportional(weigh[0], weigh[1], cpu, v2)
        limits = limits._replace(**({"cpu_weight": value} if v2 else {"cpu_shares": value}))
    return limits


def v1_problems(
    protection: Protection,
    path: str,
    limits: Limits,
    enforced: str | None,
    reservation: Mapping[str, int],
) -> list[str]:
    """What cgroup v1 cannot do of ``protection`` on the reserved cgroup ``path`` (its
    ``limits`` as planned, ``reservation`` by resource): one sentence each."""
    out = []
    if protection.memory != "cap" and "memory" in reservation:
        out.append(V1_MEMORY_REFUSAL.format(mode=protection.memory))
    if limits.swap_max is not None and not (limits.memory and limits.memory > 0):
        why = {
            None: "its role is not enforced",
            "compressible": "its role is enforced for CPU only (-compressible)",
            "full": "its reservation names no memory",
        }[enforced]
        out.append(V1_SWAP_REFUSAL.format(path="/" + path, why=why))
    return out


# ---------------------------------------------------------------- notes for an operator


def kubelet_conflicts(
    role: str, path: str, enforced: str | None, protection: Protection, memory_qos: bool,
    kubelet_weight: int | None, planned_weight: int | None,
) -> list[str]:  # fmt: skip
    """What the kubelet writes back over ``protection`` on the reserved cgroup ``path`` at its
    next start (it enforces the roles in its enforceNodeAllocatable at every start)."""
    out = []
    where = f"/{path}"
    if enforced == "full" and protection.memory in ("protect", "protect-low"):
        also = (
            " and memory.min (MemoryQoS), which makes memory.low moot"
            if protection.memory == "protect-low" and memory_qos
            else ""
        )
        out.append(
            f"--reserved-protection {protection.memory}: the kubelet enforces {role} in full "
            f"and writes {where}'s memory.max back to the reservation at its next start{also}; "
            f"enforce {role}-compressible in the kubelet instead (it keeps the CPU weight), so "
            "the daemons stay protected and uncapped."
        )
    if (
        enforced is not None
        and kubelet_weight is not None
        and planned_weight is not None
        and kubelet_weight != planned_weight
    ):
        out.append(
            f"--reserved-cpu-weight proportional: the kubelet enforces {role} and writes "
            f"{where}'s CPU weight back to {kubelet_weight} at its next start (cgalloc's is "
            f"{planned_weight}); verify reports the difference until setup runs again."
        )
    return out


def contention(
    kubepods: str,
    kubepods_weight: int,
    siblings: Mapping[str, int],
    capacity_milli: int,
    kubepods_milli: int,
    assumed: bool = False,
) -> str | None:
    """A warning when kubepods' CPU weight leaves its siblings (the daemons' cgroups) less than
    half the CPU reserved for them, under contention; None otherwise.

    Under full contention a cgroup gets its weight's fraction of its parent's CPU: the siblings
    together get ``Σ siblings ÷ (kubepods + Σ siblings)``, while the reservation sets aside
    ``(capacity − kubepods' CPU) ÷ capacity`` (kubernetes#139790). ``assumed``: the siblings'
    weights are defaults, not read (show reads no cgroup)."""
    if not siblings or capacity_milli <= 0 or kubepods_weight <= 0:
        return None
    reserved_milli = capacity_milli - kubepods_milli
    if reserved_milli <= 0:
        return None
    others = sum(siblings.values())
    share = others / (kubepods_weight + others)
    reserved_share = reserved_milli / capacity_milli
    if share * 2 >= reserved_share:
        return None
    listed = ", ".join(f"{name} {weight}" for name, weight in sorted(siblings.items()))
    assumption = "; defaults assumed: show reads no cgroup, verify reads them" if assumed else ""
    return (
        f"CPU weight: {kubepods} weighs {kubepods_weight} against {others} for its siblings "
        f"({listed}{assumption}): under contention they get {share:.1%} of the CPU "
        f"({_cpus(share * capacity_milli)} of {_cpus(capacity_milli)} CPUs), though "
        f"{_cpus(reserved_milli)} CPUs ({reserved_share:.0%}) are reserved for the daemons "
        "(kubernetes#139790). --reserved-cpu-weight proportional weighs the reserved cgroups by "
        "their reservation; give them cgroups beside kubepods so the weight counts against it."
    )


def _cpus(milli: float) -> str:
    return f"{milli / 1000:.1f}".removesuffix(".0")


def weight_of(limits: Limits, v2: bool, formula) -> int | None:
    """The cpu.weight (v2) or cpu.shares (v1) ``limits`` write; ``formula`` converts shares to
    a weight (limits.shares_to_weight's)."""
    if v2 and limits.cpu_weight is not None:
        return limits.cpu_weight
    if not limits.cpu_shares:
        return None
    return formula(limits.cpu_shares) if v2 else limits.cpu_shares
