"""setup, verify and teardown as operations: the desired tree from the inputs, planned against
the live one, applied under the state lock with the signal guard, and what is no longer wanted
undone. The command line renders what these return."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from cgalloc.errors import HostError, InputError
from cgalloc.host import procs
from cgalloc.host.capacity import node_capacity, online_cpus
from cgalloc.host.cgroupfs import detect
from cgalloc.host.machine import Host
from cgalloc.host.systemd import SYSTEMD_CONTROLLERS, cgroup_roles, existing_unit, use_dbus
from cgalloc.inputs.pods import load_pods, resize_warnings
from cgalloc.model import naming
from cgalloc.model.allocatable import pods_capacity
from cgalloc.model.cpuset import node_cpus
from cgalloc.model.limits import WEIGHT_FORMULAS
from cgalloc.model.nodeconfig import NodeConfig, enforcement_warnings
from cgalloc.model.oomscore import outranking_note
from cgalloc.model.protection import Protection
from cgalloc.model.versions import hierarchy_notes
from cgalloc.ops.apply import (
    Result,
    SignalGuard,
    apply,
    check_managed,
    converge,
    peek_record,
    peek_units,
    plan_undo,
    signal_name,
)
from cgalloc.ops.plan import Action, Plan, drift, node_plan, require_no_refusals
from cgalloc.ops.state import StateDir
from cgalloc.ops.units import SystemdUnits

CAPACITY_NOT_REAL = (
    "--capacity plans another node type and must not write real limits: add --dry-run to see "
    "the plan, or leave --capacity out to enforce this node's own capacity."
)
PROCS_DO_NOT_PERSIST = (
    "processes moved by --kube-reserved-procs/--system-reserved-procs return to their unit's "
    "cgroup when they restart; `cgalloc install-unit --daemons` keeps daemons in their slice."
)
@dataclass(frozen=True)
class TreeOptions:
    """The options that decide the desired tree, shared by setup and verify."""

    cgroupfs: str
    pods: list[str]
    static_pods: bool
    weight_formula: str
    create_reserved: bool
    kube_procs: list[str]
    system_procs: list[str]
    systemd_mode: str
    # beyond the kubelet, opt in (model/protection.py); the defaults are the kubelet's
    reserved_protection: str = "cap"
    reserved_swap: str = "allow"
    reserved_cpu_weight: str = "kubelet"

    def __post_init__(self) -> None:
        # typer hands a tuple (or None) for repeatable options; keep them plain lists
        object.__setattr__(self, "pods", list(self.pods or ()))
        object.__setattr__(self, "kube_procs", list(self.kube_procs or ()))
        object.__setattr__(self, "system_procs", list(self.system_procs or ()))

    @property
    def protection(self) -> Protection:
        """The reserved cgroups' modes beyond the kubelet (``--reserved-*``)."""
        return Protection(self.reserved_protection, self.reserved_swap, self.reserved_cpu_weight)

    def dbus(self, driver: str, host: Host) -> bool:
        """Whether the slices are systemd units made over D-Bus (``--systemd``)."""
        return use_dbus(self.systemd_mode, naming.driver(driver), host.systemd_manages_cgroups())

    def unit_properties(self, driver: str, host: Host) -> bool:
        """Whether systemd's own units (system.slice, a service) get the limits written in their
        cgroups as unit properties: wherever systemd is PID 1 (and ``--systemd`` is not no),
        or a daemon-reload would put the units' old values back over cgalloc's."""
        return self.dbus(driver, host) or (
            self.systemd_mode != "no" and host.systemd_manages_cgroups()
        )

    def moves(self) -> list[tuple[str, list[str]]]:
        """(role, process names) to move into that role's cgroup."""
        return [
            (role, names)
            for role, names in (
                ("kube-reserved", _names(self.kube_procs)),
                ("system-reserved", _names(self.system_procs)),
            )
            if names
        ]

    def notes(self) -> list[str]:
        """What an operator should hear about these options, besides the plan's warnings."""
        return [PROCS_DO_NOT_PERSIST] if self.moves() else []

    def plan(self, cfg: NodeConfig, host: Host) -> Plan:
        """The plan for ``cfg`` (loaded once by the command) on ``host``'s tree."""
        if self.weight_formula not in WEIGHT_FORMULAS:
            raise InputError(
                f"--cpu-weight-formula {self.weight_formula!r} is not one of "
                f"{', '.join(WEIGHT_FORMULAS)}."
            )
        capacity = node_capacity(cfg)
        paths = list(self.pods)
        if self.static_pods:
            if not cfg.static_pod_path:
                raise InputError(
                    "--static-pods needs staticPodPath (--pod-manifest-path): the directory or"
                    " file the kubelet reads static pods from."
                )
            paths.append(cfg.static_pod_path)
        hierarchy = detect(self.cgroupfs, host.mountinfo)
        delegated = SYSTEMD_CONTROLLERS if self.dbus(cfg.cgroup_driver, host) else frozenset()
        admits = pods_capacity(cfg, capacity).value()
        pods = load_pods(paths, admits) if paths else []
        p, desired = node_plan(
            cfg,
            capacity,
            hierarchy,
            pods,
            weight_formula=self.weight_formula,
            create_reserved=self.create_reserved,
            moves=self.moves(),
            delegated=delegated,
            cpus=node_cpus(cfg.capacity_overrides, online_cpus),
            protection=self.protection,
        )
        p.warnings[:0] = resize_warnings(pods)  # in -o json's warnings too
        if host.is_this_node and self.protection.memory in ("protect", "protect-low"):
            # uncapped daemons: the OOM killer's ranking, not their cap, decides who goes
            # (model/oomscore.py); read from this node's /proc, never written
            reserved = {"/" + d.path for d in desired if d.role in naming.RESERVED_ROLES}
            key = "" if hierarchy.version == "v2" else "memory"
            note = outranking_note(procs.in_cgroups(reserved, key))
            p.warnings += [note] if note else []
        p.warnings.extend(
            hierarchy_notes(
                cfg.kubelet_version, hierarchy.version, cfg.cgroup_driver, cfg.fail_cgroup_v1
            )
        )
        return p


def _names(values: list[str]) -> list[str]:
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def require_root(host: Host) -> None:
    if not host.privileged():
        raise HostError("changing cgroups needs root; --dry-run shows the plan without it.")


def preview(tree: TreeOptions, cfg: NodeConfig, host: Host, state: StateDir) -> Plan:
    """setup's plan without the lock or a write (``--dry-run``), with what the record holds
    that these inputs no longer want as its undo."""
    p = tree.plan(cfg, host)
    record = peek_record(state, tree.cgroupfs)
    wanted = tree.unit_properties(cfg.cgroup_driver, host)
    plan_undo(p, record, peek_units(state, tree.cgroupfs, record) if wanted else None)
    return p


def verify(
    tree: TreeOptions, cfg: NodeConfig, host: Host, state: StateDir
) -> tuple[Plan, list[tuple[str, dict]]]:
    """The plan and the differences between the live tree and the one setup makes: (line,
    object) each."""
    p = preview(tree, cfg, host, state)
    return p, drift(p)


class Setup(NamedTuple):
    """What a setup run did: its plan, what apply and converge did, the systemd units (with
    those the record held before), and the signal that came after the last change."""

    plan: Plan
    result: Result
    cleaned: Result
    units: SystemdUnits | None
    started: set[str]
    signo: int | None


def setup(
    tree: TreeOptions,
    cfg: NodeConfig,
    host: Host,
    state: StateDir,
    *,
    force: bool = False,
    warn: Callable[[list[str]], None],
    before: Callable[[Plan, bool], Callable[[Action], None] | None],
) -> Setup:
    """setup's full run: under the state lock, load and check the record, plan, hand the plan
    to ``before`` (it shows it and returns the per-change progress callback, or None), apply
    it and undo what is no longer wanted, SIGINT/SIGTERM/SIGHUP guarded. Warnings go to
    ``warn`` as they are found."""
    if cfg.capacity_overrides and host.is_this_node:
        raise InputError(CAPACITY_NOT_REAL)
    require_root(host)
    dbus = tree.dbus(cfg.cgroup_driver, host)
    signals = SignalGuard()  # entered around the changes only
    with state.locked():
        record = state.load()
        warn(state.notes)
        check_managed(tree.cgroupfs, record)
        p = tree.plan(cfg, host)
        warn(p.warnings)
        require_no_refusals(p, force)
        warn([*tree.notes(), *enforcement_warnings(cfg)])
        units = client = None
        if tree.unit_properties(cfg.cgroup_driver, host):
            from cgalloc.host.dbus import Systemd  # jeepney, only where systemd is called

            client = Systemd()
            units = SystemdUnits.for_plan(
                client, state, p, p.version == "v2", cgroup_roles(cfg), start_slices=dbus
            )
            # the systemd record is refused like the record, before anything is changed
            check_managed(tree.cgroupfs, record, units.record)
        started = set(units.record.started) if units else set()
        # What earlier runs did that these inputs no longer want, undone after applying.
        # Planned now, so the plan shown is whole: applying adds only wanted entries to
        # either record, so it cannot change what is stale.
        unit_record = units.record if units else None
        stale, stale_u = plan_undo(p, record, unit_record)
        on_done = before(p, dbus)
        # SIGINT/SIGTERM/SIGHUP from here on are recorded, not raised: before the last
        # change apply undoes every change and raises Interrupted; after it the changes
        # stay (they are recorded), converge stops, and the run ends with 128 + signo.
        with signals:
            result = apply(p, state, record, host=host, units=units, on_done=on_done,
                           signals=signals)  # fmt: skip
            cleaned = converge(
                p, state, record, stale, host=host, systemd=client,
                units=unit_record, stale_u=stale_u, signals=signals,
            )  # fmt: skip
    return Setup(p, result, cleaned, units, started, signals.signo)


def dbus_report(run: Setup) -> dict:
    """What a run did over D-Bus: the transient units it started and the units whose
    properties it set, with the property names."""
    assert run.units is not None
    record = run.units.record
    written = dict.fromkeys(a.path for a in run.result.done if a.kind == "write")
    props = []
    for path in written:
        name = existing_unit(path)
        if name is None or name in record.started or name not in record.changed:
            continue
        names = [prop for prop, _ in run.units.properties(path)]
        if names:
            props.append({"unit": name, "properties": names})
    new = [u for u in record.started if u not in run.started]
    return {"unitsStarted": new, "propertiesSet": props}


def late_signal(run: Setup) -> str:
    """What a signal that came after apply's last change left: the changes made and recorded
    (a complete setup is not undone), and the undo of what is no longer wanted it cut short."""
    assert run.signo is not None
    name = signal_name(run.signo)
    result, cleaned = run.result, run.cleaned
    recorded = sum(a.kind != "move" for a in result.done)  # a process move is not recorded
    if not result.done:
        said = f"setup interrupted by {name}; it had no change to make"
    else:
        said = (
            f"setup interrupted by {name} after its last change; all {recorded} changes "
            "are made and recorded"
        )
    if cleaned.left:
        return (
            f"{said}; undoing what is no longer wanted stopped with {cleaned.left} changes "
            "left, which the next setup makes (verify lists them)."
        )
    if cleaned.kept:
        return f"{said}; what is no longer wanted and could not be undone is listed above."
    return f"{said}, the tree is as planned."
