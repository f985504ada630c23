"""The rules of ``cgalloc doctor``: what on a node makes the kubelet refuse to start, restart
every pod, or run unprotected, as verdicts with their evidence and fix. Pure: the facts come in
as values (read by ``cgalloc/ops/doctor.py``); each rule names the upstream code or document
it follows.

A verdict is ``ok``, ``warn`` (the node runs, with a risk named), ``fail`` (the kubelet or
``cgalloc setup`` refuses to run with it, or every pod is restarted) or ``skip`` (the check does
not apply here, or cannot be made: the reason says which). The exit status of a run is the
worst verdict's (:func:`exit_status`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
VERDICTS = (OK, WARN, FAIL, SKIP)
# Exit statuses: 2 (bad input) and 3 (the host cannot do what was asked) are every command's.
EXIT_OK, EXIT_WARN, EXIT_FAIL = 0, 1, 4


class Evidence(NamedTuple):
    """What a check read: where (a file, a command, an input) and what it said there."""

    source: str
    value: str


class Check(NamedTuple):
    """One check's result."""

    name: str  # stable id, e.g. "cgroup-v1"
    verdict: str  # OK | WARN | FAIL | SKIP
    finding: str  # one sentence: what was found, or why the check was skipped
    evidence: tuple[Evidence, ...] = ()
    fix: str = ""  # what to do; empty for ok and skip

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "finding": self.finding,
            "evidence": [{"source": e.source, "value": e.value} for e in self.evidence],
            "fix": self.fix,
        }


def exit_status(checks: Iterable[Check]) -> int:
    """4 when a check failed, else 1 when one warned, else 0 (ok and skip count as ok)."""
    verdicts = {c.verdict for c in checks}
    return EXIT_FAIL if FAIL in verdicts else EXIT_WARN if WARN in verdicts else EXIT_OK


def counts(checks: Sequence[Check]) -> dict[str, int]:
    return {v: sum(c.verdict == v for c in checks) for v in VERDICTS}


# ---- cgroup v1 and failCgroupV1 -------------------------------------------------------------

# failCgroupV1 came in 1.31 with default false (KEP-4569, cgroup v1 in maintenance mode) and
# defaults to true from 1.35 (KEP-5573, kubernetes#134298): kubernetes/kubelet
# config/v1beta1/types.go at v0.31.0 ("Default: false") and v0.35.0 ("Default: true"). It is a
# KubeletConfiguration field only: the kubelet has no flag for it.
FAIL_CGROUP_V1_SINCE = (1, 31)
FAIL_CGROUP_V1_TRUE_SINCE = (1, 35)
V1_REFUSAL = "kubelet is configured to not run on a host using cgroup v1"  # the kubelet's error


def cgroup_v1(
    version: str,
    mount: Evidence,
    minor: tuple[int, int],
    minor_from: str,
    setting: tuple[bool, str] | None,
) -> Check:
    """The node's hierarchy against the kubelet's failCgroupV1. ``setting`` is the field's
    value and the file that sets it, None when no file does (the minor's default)."""
    name = "cgroup-v1"
    shown = f"{minor[0]}.{minor[1]}"
    evidence = [mount, Evidence("kubelet minor", f"{shown} ({minor_from})")]
    if version == "v2":
        return Check(
            name, OK, f"cgroup v2 is mounted; the kubelet {shown} runs on it.", tuple(evidence)
        )
    if setting is not None:
        value, where = setting
        evidence.append(Evidence(where, f"failCgroupV1: {str(value).lower()}"))
    elif minor >= FAIL_CGROUP_V1_SINCE:
        default = minor >= FAIL_CGROUP_V1_TRUE_SINCE
        evidence.append(Evidence("the kubelet's default", f"failCgroupV1: {str(default).lower()}"))
    refuses = minor >= FAIL_CGROUP_V1_SINCE and (
        setting[0] if setting is not None else minor >= FAIL_CGROUP_V1_TRUE_SINCE
    )
    layout = "cgroup v1" if version == "v1" else "a hybrid (v1 controllers) hierarchy"
    move = (
        "boot the node with cgroup v2 (systemd.unified_cgroup_hierarchy=1 on the kernel command"
        " line, or a distribution that defaults to it)"
    )
    if refuses:
        return Check(
            name,
            FAIL,
            f"the node runs {layout} and the kubelet {shown} has failCgroupV1 true, so it"
            f' refuses to start ("{V1_REFUSAL}").',
            tuple(evidence),
            f"{move}; or, to stay on v1 for now, set failCgroupV1: false in the kubelet's"
            " config file (there is no flag for it).",
        )
    return Check(
        name,
        WARN,
        f"the node runs {layout}: the kubelet {shown} starts, but v1 is in maintenance mode"
        " since 1.31 and the kubelet refuses it by default from 1.35 (failCgroupV1).",
        tuple(evidence),
        f"{move} before the kubelet is upgraded to 1.35 or later.",
    )


# ---- swap ----------------------------------------------------------------------------------

SWAP_REFUSAL = "running with swap on is not supported, please disable swap"  # the kubelet's


def swap(
    devices: Sequence[str],
    fail_swap_on: tuple[bool, str],
    behaviour: tuple[str, str] | None,
    version: str,
) -> Check:
    """Swap against the kubelet's failSwapOn and memorySwap.swapBehavior (KEP-2400; the
    kubelet's failSwapOn defaults to true, swapBehavior to NoSwap: kubernetes/kubelet
    config/v1beta1/types.go)."""
    name = "swap"
    evidence = [Evidence("/proc/swaps", "; ".join(devices) or "no swap device")]
    if not devices:
        return Check(name, OK, "swap is off.", tuple(evidence))
    value, where = fail_swap_on
    evidence.append(Evidence(where, f"failSwapOn: {str(value).lower()}"))
    if value:
        return Check(
            name,
            FAIL,
            f"swap is on and failSwapOn is true, so the kubelet refuses to start"
            f' ("{SWAP_REFUSAL}").',
            tuple(evidence),
            "turn swap off (swapoff -a, and remove it from /etc/fstab), or allow it with"
            " failSwapOn: false (--fail-swap-on=false) and choose memorySwap.swapBehavior.",
        )
    if behaviour is None:
        evidence.append(Evidence("the kubelet's default", "memorySwap.swapBehavior: NoSwap"))
        return Check(
            name,
            WARN,
            "swap is on with no swap policy chosen: pods do not swap (NoSwap), the system"
            " daemons swap without limit, and nothing reserves swap for them"
            " (kubernetes#120802).",
            tuple(evidence),
            "set memorySwap.swapBehavior (NoSwap or LimitedSwap) in the kubelet's config, and"
            " memory.swap.max=0 on the system slice as KEP-2400's best practices advise.",
        )
    chosen, source = behaviour
    evidence.append(Evidence(source, f"memorySwap.swapBehavior: {chosen or 'NoSwap'}"))
    if chosen == "LimitedSwap" and version != "v2":
        return Check(
            name,
            WARN,
            "swapBehavior is LimitedSwap, which the kubelet applies on cgroup v2 only: on this"
            " hierarchy pods get no swap limit from it.",
            tuple(evidence),
            "move the node to cgroup v2, or choose NoSwap.",
        )
    return Check(
        name,
        OK,
        f"swap is on and the kubelet's swap policy is {chosen or 'NoSwap'}.",
        tuple(evidence),
    )


# ---- PSI -----------------------------------------------------------------------------------


def psi(readable: dict[str, str | None], cmdline_psi: str | None) -> Check:
    """Pressure stall information: /proc/pressure/{cpu,memory,io} (kernel 4.20+, CONFIG_PSI;
    ``psi=0`` on the command line or CONFIG_PSI_DEFAULT_DISABLED turns it off). ``readable``
    maps each file to None when it reads, else the reason."""
    name = "psi"
    evidence = [Evidence(f"/proc/pressure/{r}", why or "readable") for r, why in readable.items()]
    if cmdline_psi is not None:
        evidence.append(Evidence("/proc/cmdline", f"psi={cmdline_psi}"))
    missing = [r for r, why in readable.items() if why is not None]
    if not missing:
        return Check(name, OK, "PSI is available (cpu, memory, io).", tuple(evidence))
    return Check(
        name,
        WARN,
        f"PSI is unavailable ({', '.join(missing)}): the kubelet's pressure metrics (KEP-4205,"
        " GA in 1.36) and cgalloc exporter's PSI gauges are empty, and stalls of the system"
        " daemons go unseen.",
        tuple(evidence),
        "boot with psi=1 on the kernel command line (kernels built with"
        " CONFIG_PSI_DEFAULT_DISABLED), or use a kernel built with CONFIG_PSI (4.20 or later).",
    )


# ---- kernel and systemd versions ------------------------------------------------------------


class Requirement(NamedTuple):
    """A version a feature needs (``at_most`` False) or cannot go past (True)."""

    feature: str
    component: str  # "kernel" | "systemd"
    version: tuple[int, ...]
    at_most: bool
    source: str
    key: str  # the fact that makes it apply (see ``Facts``)


REQUIREMENTS = (
    Requirement(
        "cgroup v2",
        "kernel",
        (5, 8),
        False,
        "kubernetes.io/docs/concepts/architecture/cgroups, Requirements: Linux kernel 5.8 or later",
        "cgroup_v2",
    ),
    Requirement(
        "MemoryQoS (memory.high, memory.min on cgroup v2)",
        "kernel",
        (5, 9),
        False,
        "KEP-2570 (kubernetes/enhancements#5879): memory.high can livelock before 5.9; the"
        " kubelet warns",
        "memory_qos",
    ),
    Requirement(
        "the systemd cgroup driver on cgroup v2 with cpusets (kubepods' cpuset since 1.31)",
        "systemd",
        (244,),
        False,
        "opencontainers/cgroups systemd/v2.go: AllowedCPUs= and AllowedMemoryNodes= only from"
        " systemd v244; runc docs/cgroup-v2.md: systemd 244 or later",
        "systemd_driver_v2",
    ),
    Requirement(
        "cgroup v1 under systemd",
        "systemd",
        (255,),
        True,
        "systemd NEWS: 256 deprecates cgroup v1 and refuses to boot on it unless"
        " SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1; 258 removes it",
        "v1_systemd",
    ),
)


class Facts(NamedTuple):
    """Which features the node's inputs choose (the keys of ``REQUIREMENTS``)."""

    cgroup_v2: bool
    memory_qos: bool
    systemd_driver_v2: bool
    v1_systemd: bool


def _shown(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def versions(
    facts: Facts,
    kernel: tuple[tuple[int, int] | None, Evidence],
    systemd: tuple[int | None, Evidence] | None,
) -> Check:
    """Each requirement that applies against the versions read; ``systemd`` is None when
    systemd is not PID 1."""
    name = "versions"
    evidence = [kernel[1]] + ([systemd[1]] if systemd is not None else [])
    found = {"kernel": kernel[0], "systemd": systemd[0] if systemd is not None else None}
    applies = [r for r in REQUIREMENTS if getattr(facts, r.key)]
    short, unknown, met = [], [], []
    for r in applies:
        have = found[r.component]
        bound = ("at most " if r.at_most else "") + _shown(r.version)
        if have is None:
            unknown.append(f"{r.feature} ({r.component} {bound})")
            continue
        have_t = have if isinstance(have, tuple) else (have,)
        ok = have_t <= r.version if r.at_most else have_t >= r.version
        line = f"{r.feature}: {r.component} {bound}, have {_shown(have_t)} [{r.source}]"
        evidence.append(Evidence("needs", line))
        (met if ok else short).append(line)
    if not applies:
        return Check(
            name,
            SKIP,
            "no feature chosen here has a kernel or systemd requirement.",
            tuple(evidence),
        )
    if short:
        return Check(
            name,
            WARN,
            f"{len(short)} of the features chosen need another version: "
            + "; ".join(s.split(" [")[0] for s in short)
            + ".",
            tuple(evidence),
            "upgrade the kernel or systemd as named, or turn the feature off.",
        )
    if unknown and not met:
        return Check(
            name, SKIP, f"could not read the versions for: {'; '.join(unknown)}.", tuple(evidence)
        )
    note = f" (not read: {'; '.join(unknown)})" if unknown else ""
    return Check(
        name,
        OK,
        f"the kernel and systemd have what the chosen features need{note}.",
        tuple(evidence),
    )


# ---- the reserved cgroups the kubelet validates ---------------------------------------------


class Validated(NamedTuple):
    """A cgroup the kubelet validates at start, and what it lacks."""

    role: str  # "cgroupRoot" | "kube-reserved" | "system-reserved"
    cgroup: str  # the kubelet's name for it, e.g. /system.slice
    missing: tuple[str, ...]  # v1: directories; v2: controllers, or the directory itself


def reserved_cgroups(version: str, cgroups: Sequence[Validated], enforced: Sequence[str]) -> Check:
    """The kubelet's ``cgroupManager.Validate`` on cgroupRoot and each enforced reserved
    cgroup (pkg/kubelet/cm/cgroup_v1_manager_linux.go, cgroup_v2_manager_linux.go): on v1 the
    directory must exist in every mounted hierarchy of cpu, cpuacct, cpuset, memory, systemd,
    pids and hugetlb; on v2 its cgroup.controllers must list cpu, cpuset, memory, hugetlb and
    pids, as far as the root offers them. A missing one stops the kubelet at start."""
    name = "reserved-cgroups"
    evidence = tuple(
        Evidence(
            f"{v.role} {v.cgroup}",
            "missing: " + ", ".join(v.missing)
            if v.missing
            else "present in every controller the kubelet validates",
        )
        for v in cgroups
    )
    if not enforced:
        return Check(
            name,
            SKIP,
            "no reserved cgroup is enforced (enforceNodeAllocatable), so"
            " the kubelet looks for none but cgroupRoot.",
            evidence,
        )
    bad = [v for v in cgroups if v.missing]
    if not bad:
        return Check(
            name,
            OK,
            f"the cgroups the kubelet validates at start exist ({', '.join(enforced)}).",
            evidence,
        )
    what = "hierarchies" if version != "v2" else "controllers"
    listed = "; ".join(f"{v.role} {v.cgroup}" for v in bad)
    error = "has some missing paths" if version != "v2" else "has some missing controllers"
    return Check(
        name,
        FAIL,
        f"{listed}: missing in some {what} the kubelet validates, so it refuses to start"
        f' ("cgroup ... {error}").',
        evidence,
        "create them with `sudo cgalloc setup` and these inputs (it makes the reserved cgroups"
        " and enables their controllers), and keep them across reboots with `sudo cgalloc"
        " install-unit`.",
    )


# ---- the boot unit -------------------------------------------------------------------------


class BootUnit(NamedTuple):
    """What the node shows of cgalloc-setup.service."""

    fragment: str | None  # None: not installed
    enabled: bool | None  # None: cannot tell
    ordered: dict[str, bool]  # daemon unit present on the node -> setup runs before it
    state: str | None  # "active", "failed", ... (systemctl), None when not asked
    reported_by: str  # "systemctl" | "unit files"


def boot_unit(unit: BootUnit, needed: bool, evidence: Sequence[Evidence]) -> Check:
    """The boot unit against the kubelet and the runtime: installed, enabled, ordered before
    them (Before= in it or After= in theirs), and its last run not failed. ``needed``: the
    kubelet needs the reserved cgroups at its start (some are enforced)."""
    name = "boot-unit"
    ev = tuple(evidence)
    if unit.fragment is None:
        if not needed:
            return Check(
                name,
                SKIP,
                "cgalloc-setup.service is not installed, and no reserved"
                " cgroup is enforced, so the kubelet needs nothing of it at boot.",
                ev,
            )
        return Check(
            name,
            WARN,
            "cgalloc-setup.service is not installed: the reserved cgroups (a cgroupfs tree, or"
            " transient slices) are gone after a reboot, and the kubelet then refuses to start.",
            ev,
            "run `sudo cgalloc install-unit` with setup's arguments after '--'.",
        )
    problems, fixes = [], []
    if unit.enabled is False:
        problems.append("it is not enabled, so nothing runs it at boot")
        fixes.append("`sudo systemctl enable cgalloc-setup.service` (or re-run install-unit)")
    late = [d for d, ok in sorted(unit.ordered.items()) if not ok]
    if late:
        problems.append(
            f"it is not ordered before {', '.join(late)}, which can then start before the tree"
            " exists"
        )
        fixes.append(
            f"add Before={' '.join(late)} to it, or After=cgalloc-setup.service to"
            " those units (install-unit --daemons writes such drop-ins)"
        )
    if unit.state == "failed":
        problems.append("its last run failed")
        fixes.append("read why with `journalctl -u cgalloc-setup.service`")
    if problems:
        return Check(
            name,
            FAIL,
            f"cgalloc-setup.service ({unit.fragment}): " + "; ".join(problems) + ".",
            ev,
            "; ".join(fixes) + ".",
        )
    daemons = ", ".join(sorted(unit.ordered)) or "no kubelet or runtime unit found"
    enabled = "enabled" if unit.enabled else "enablement unknown"
    return Check(
        name,
        OK,
        f"cgalloc-setup.service is installed, {enabled}, and ordered before {daemons}.",
        ev,
    )


def unit_ordered_before(
    setup_before: Iterable[str], daemon_after: Iterable[str], daemon: str
) -> bool:
    """Whether systemd starts cgalloc-setup.service before ``daemon``: Before= in the setup
    unit or After= in the daemon's (systemd reads the two as one ordering)."""
    return daemon in set(setup_before) or "cgalloc-setup.service" in set(daemon_after)


# ---- reservations against what recommend measured -------------------------------------------


def reservations(
    configured: dict[str, tuple[int, str]],
    recommended: dict[str, tuple[int, str]],
    need: dict[str, tuple[int, str]],
    window: Evidence,
) -> Check:
    """Configured kube + system reservations (resource -> (nanos, shown)) against what
    ``recommend`` makes of the recorded window: above its recommendation is waste (warn),
    below what was measured (no headroom) invites the OOMs of kubernetes#82793 (warn)."""
    name = "reservations"
    evidence = [window]
    above, below = [], []
    for resource in ("cpu", "memory"):
        have = configured.get(resource)
        rec, got = recommended.get(resource), need.get(resource)
        evidence.append(
            Evidence(
                resource,
                f"configured {have[1] if have else 'none'}, recommended"
                f" {rec[1] if rec else '-'}, measured {got[1] if got else '-'}",
            )
        )
        amount = have[0] if have else 0
        if rec is not None and amount > rec[0]:
            above.append(f"{resource} {have[1] if have else 0} > {rec[1]}")
        if got is not None and amount < got[0]:
            below.append(f"{resource} {have[1] if have else 'none'} < {got[1]}")
    if below:
        return Check(
            name,
            WARN,
            "kube-reserved + system-reserved hold less than the daemons used at the window's"
            f" percentile: {'; '.join(below)}.",
            tuple(evidence),
            "raise them toward `cgalloc recommend`'s values (--emit dropin writes them).",
        )
    if above:
        return Check(
            name,
            WARN,
            "kube-reserved + system-reserved are above what `cgalloc recommend` sizes from"
            f" the recorded usage: {'; '.join(above)}; Allocatable is smaller than it needs be.",
            tuple(evidence),
            "lower them toward `cgalloc recommend`'s values, or record a longer window first.",
        )
    return Check(
        name,
        OK,
        "the reservations cover the measured usage and are not above the recommendation.",
        tuple(evidence),
    )
