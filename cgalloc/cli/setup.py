"""``cgalloc setup``: create and enforce the node's cgroup tree (plan, then apply).

Also holds what ``verify`` and ``teardown`` share with it: the tree options (``@tree_options``),
the root check and the report layout.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass

import typer

from cgalloc.cli.inputs import NodeInputs, enforcement_warnings, node_capacity
from cgalloc.cli.options import (
    TREE_PANEL,
    cgroupfs_option,
    dry_run_option,
    output_option,
    pods_option,
    quiet_option,
    state_dir_option,
)
from cgalloc.cli.render import OutputFormat, emit, printable, warn
from cgalloc.cli.signature import NodeInputsCommand, add_options, node_inputs
from cgalloc.errors import HostError, InputError
from cgalloc.host.capacity import online_cpus
from cgalloc.host.cgroupfs import detect
from cgalloc.host.systemd import (
    SYSTEMD_CONTROLLERS,
    Systemd,
    cgroup_roles,
    existing_unit,
    slice_unit,
    systemd_running,
    use_dbus,
)
from cgalloc.inputs.pods import load_pods, resize_warnings
from cgalloc.model.allocatable import pods_capacity
from cgalloc.model.cpuset import node_cpus
from cgalloc.model.limits import WEIGHT_FORMULAS
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.ops.apply import (
    Interrupted,
    Result,
    SignalGuard,
    TestSwitches,
    apply,
    check_managed,
    converge,
    peek_record,
    peek_units,
    plan_undo,
    signal_name,
)
from cgalloc.ops.apply import switches as current_switches
from cgalloc.ops.plan import Action, Plan, node_plan, require_no_refusals
from cgalloc.ops.state import StateDir
from cgalloc.ops.units import SystemdUnits

SETUP_HELP = (
    "Create and enforce the node's cgroup tree: kubepods with the Node Allocatable limits, "
    "the QoS tiers (and pods from --pods), and the kube-reserved / system-reserved cgroups "
    "when enforced. Prints the plan (mkdir, writes old -> new, controllers enabled, processes "
    "moved), then applies it in a safe order, one progress line per change on stderr; if any "
    "change fails, every change is undone. Re-running with the same inputs writes nothing. "
    "--capacity plans another node type and is refused without --dry-run."
)
CAPACITY_NOT_REAL = (
    "--capacity plans another node type and must not write real limits: add --dry-run to see "
    "the plan, or leave --capacity out to enforce this node's own capacity."
)
# A terminal shows one redrawn progress line instead of one line per change above this many.
COMPACT_PROGRESS = 20
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

    def __post_init__(self) -> None:
        # typer hands a tuple (or None) for repeatable options; keep them plain lists
        object.__setattr__(self, "pods", list(self.pods or ()))
        object.__setattr__(self, "kube_procs", list(self.kube_procs or ()))
        object.__setattr__(self, "system_procs", list(self.system_procs or ()))

    def dbus(self, driver: str, switches: TestSwitches) -> bool:
        """Whether the slices are systemd units made over D-Bus (``--systemd``)."""
        # A fake tree (tests) is never systemd's, even when systemd runs this host.
        running = systemd_running() and not switches.allow_any_fs
        return use_dbus(self.systemd_mode, driver, running)

    def plan(self, cfg: NodeConfig, switches: TestSwitches) -> Plan:
        """The plan for ``cfg`` (loaded once by the command) on this host's tree."""
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
        hierarchy = detect(self.cgroupfs, switches.mountinfo)
        delegated = SYSTEMD_CONTROLLERS if self.dbus(cfg.cgroup_driver, switches) else frozenset()
        admits = pods_capacity(cfg, capacity).value()
        pods = load_pods(paths, admits) if paths else []
        moves = self.moves()
        p, _ = node_plan(
            cfg,
            capacity,
            hierarchy,
            pods,
            weight_formula=self.weight_formula,
            create_reserved=self.create_reserved,
            moves=moves,
            delegated=delegated,
            cpus=node_cpus(cfg.capacity_overrides, online_cpus),
        )
        p.warnings[:0] = resize_warnings(pods)  # in -o json's warnings too
        warn(p.warnings)
        if moves:
            warn([PROCS_DO_NOT_PERSIST])
        return p

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


def _names(values: list[str]) -> list[str]:
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _keyword(
    name: str, annotation: object, default: object, *decls: str, **kw
) -> inspect.Parameter:
    option = typer.Option(default, *decls, rich_help_panel=TREE_PANEL, **kw)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


def _procs(role: str) -> inspect.Parameter:
    return _keyword(
        f"{role.split('-')[0]}_procs",
        list[str],
        [],
        f"--{role}-procs",
        metavar="NAME,...",
        help=f"Processes with these names (comm or executable basename), e.g. "
        f"kubelet,containerd, belong in the {role} cgroup. Repeatable. Placing a running "
        "process there is a one-off: a daemon is back in its unit's cgroup after its next "
        "restart; `cgalloc install-unit --daemons` keeps it there.",
    )


def tree_options(command: Callable[..., object]) -> Callable[..., object]:
    """Give a typer command the tree options as one ``tree: TreeOptions`` argument."""
    params = [
        inspect.Parameter(
            "cgroupfs", inspect.Parameter.KEYWORD_ONLY, default=cgroupfs_option(), annotation=str
        ),
        inspect.Parameter(
            "pods", inspect.Parameter.KEYWORD_ONLY, default=pods_option(), annotation=list[str]
        ),
        _keyword(
            "static_pods",
            bool,
            False,
            "--static-pods",
            help="Also the static pods in staticPodPath (--pod-manifest-path).",
        ),
        _keyword(
            "weight_formula",
            str,
            "kubelet",
            "--cpu-weight-formula",
            metavar="kubelet|runc",
            help="cgroup v2 shares→weight conversion: kubelet (linear, what the kubelet writes) "
            "or runc (the runtimes' newer curve, 1024 shares → weight 100).",
        ),
        _keyword(
            "create_reserved",
            bool,
            True,
            "--create-reserved/--no-create-reserved",
            help="Missing reserved cgroups are part of the tree (default); with the --no- form "
            "they are required, as the kubelet requires them, and a missing one fails the "
            "command, listing its paths per controller.",
        ),
        _procs("kube-reserved"),
        _procs("system-reserved"),
        _keyword(
            "systemd_mode",
            str,
            "auto",
            "--systemd",
            metavar="auto|yes|no",
            help="Slices are transient systemd units made over D-Bus (as the kubelet makes "
            "them) and existing units carry the limits as unit properties; systemd then manages "
            "the cpu, cpuset, io, memory and pids controllers. auto = when the cgroup driver is "
            "systemd and systemd is PID 1.",
        ),
    ]
    return add_options(command, "tree", params, lambda values: TreeOptions(**values))


def report(
    doc: dict, lines: list[str], summary: str, output: OutputFormat, quiet: bool = False
) -> None:
    """``doc`` plus its summary as JSON/YAML, or the lines indented above the summary."""
    if quiet:
        return
    emit(
        {**doc, "summary": summary},
        output,
        lambda: "\n".join([*(f"  {line}" for line in lines), summary]),
    )


def describe(action: Action, root: str, dbus: bool) -> str:
    """One plan line; with ``dbus``, a slice's mkdir is the unit start systemd makes it by."""
    unit = slice_unit(action.path) if dbus and action.kind == "mkdir" else None
    if unit is None:
        return action.describe(root)
    return f"start {unit} over D-Bus (systemd makes {action.where(root)})"


def plan_lines(plan: Plan, dbus: bool) -> list[str]:
    """The plan as shown: the changes, then the undo of what is no longer wanted."""
    lines = [describe(a, plan.root, dbus) for a in plan.actions]
    return lines + [f"{a.describe(plan.root)} (no longer wanted)" for a in plan.undo]


def progress(plan: Plan, dbus: bool) -> Callable[[Action], None]:
    """A per-change progress printer on stderr: one line per change, or on a terminal with
    many changes one line redrawn in place (a newline after the last change)."""
    import sys

    total = len(plan.actions)
    compact = total > COMPACT_PROGRESS and sys.stderr.isatty()
    count = 0

    def done(action: Action) -> None:
        nonlocal count
        count += 1
        line = printable(f"[{count}/{total}] {describe(action, plan.root, dbus)}")
        if compact:
            typer.echo(f"\r\033[Kapplying {line}", err=True, nl=count == total)
        else:
            typer.echo(line, err=True)

    return done


def dbus_report(result: Result, units: SystemdUnits, started: set[str]) -> dict:
    """What this run did over D-Bus: the transient units it started (``started`` is what the
    record held before) and the units whose properties it set, with the property names."""
    written: dict[str, list[str]] = {}
    for a in result.done:
        if a.kind == "write":
            written.setdefault(a.path, [])
    new = [u for u in units.record.started if u not in started]
    props = []
    for path in written:
        name = existing_unit(path)
        if name is None or name in units.record.started or name not in units.record.changed:
            continue
        names = [prop for prop, _ in units.properties(path)]
        if names:
            props.append({"unit": name, "properties": names})
    return {"unitsStarted": new, "propertiesSet": props}


def dbus_lines(doc: dict) -> list[str]:
    lines = [f"started transient unit {u} over D-Bus" for u in doc["unitsStarted"]]
    lines += [
        f"set {', '.join(e['properties'])} on {e['unit']} over D-Bus" for e in doc["propertiesSet"]
    ]
    return lines


def require_root(switches: TestSwitches) -> None:
    if os.geteuid() != 0 and not switches.allow_any_fs:
        raise HostError("changing cgroups needs root; --dry-run shows the plan without it.")


def register(app: typer.Typer) -> None:
    """Add ``setup`` to the app."""

    @app.command("setup", help=SETUP_HELP, cls=NodeInputsCommand)
    @node_inputs
    @tree_options
    def setup(
        inputs: NodeInputs,
        tree: TreeOptions,
        state_dir: str = state_dir_option(),
        dry_run: bool = dry_run_option(),
        force: bool = typer.Option(
            False,
            "--force",
            help="Lower a memory limit even below the cgroup's current usage "
            "(the kernel then reclaims or OOM-kills).",
        ),
        output: OutputFormat = output_option(),
        quiet: bool = quiet_option(),
    ) -> None:
        switches = current_switches()
        cfg = inputs.load_config()
        # A fake tree (the test suite's) is not this node: planned capacity may go there.
        if cfg.capacity_overrides and not dry_run and not switches.allow_any_fs:
            raise InputError(CAPACITY_NOT_REAL)
        dbus = tree.dbus(cfg.cgroup_driver, switches)
        state = StateDir(state_dir, switches.boot_id_file)
        if dry_run:
            p = tree.plan(cfg, switches)
            plan_undo(p, peek_record(state, tree.cgroupfs), peek_units(state) if dbus else None)
            warn(enforcement_warnings(cfg))
            count = len(p.actions) + len(p.undo)
            summary = (
                "no changes: 0 writes"
                if not count
                else f"dry run: {count} changes planned, nothing written"
            )
            if not quiet:
                doc = {"dryRun": True, "plan": p.to_json(), "writes": 0}
                report(doc, plan_lines(p, dbus), summary, output)
            require_no_refusals(p, force)
            return
        require_root(switches)
        signals = SignalGuard()  # entered around the changes only
        with state.locked():
            p, result, cleaned, units, started = _plan_and_apply(
                tree, cfg, switches, state, state_dir, dbus, force, output, quiet, signals
            )
        if not quiet or cleaned.kept:  # kept is a failure: said even with --quiet
            doc = {"dryRun": False, "plan": p.to_json(), **result.to_json()}
            lines = [f"{a.describe(p.root)} (no longer wanted)" for a in cleaned.done]
            lines += [f"kept {k}" for k in cleaned.kept]
            if units is not None:
                doc["systemd"] = dbus_report(result, units, started)
                lines += dbus_lines(doc["systemd"])
            doc["noLongerWanted"] = cleaned.to_json()
            summary = result.summary()
            if cleaned.done:
                summary += f"; undid {cleaned.writes} changes no longer wanted"
            if signals.signo is not None:
                doc["interruptedBy"] = signal_name(signals.signo)
            try:
                report(doc, lines, summary, output)
            except OSError:
                if signals.signo is None:  # a SIGHUP's terminal is gone: the status tells
                    raise
        if signals.signo is not None:
            raise Interrupted(signals.signo, late_signal(signals.signo, result, cleaned))
        if cleaned.kept:
            raise typer.Exit(1)


def _plan_and_apply(
    tree: TreeOptions,
    cfg: NodeConfig,
    switches: TestSwitches,
    state: StateDir,
    state_dir: str,
    dbus: bool,
    force: bool,
    output: OutputFormat,
    quiet: bool,
    signals: SignalGuard,
) -> tuple[Plan, Result, Result, SystemdUnits | None, set[str]]:
    """setup's full run under the state lock: load and check the record, plan, show the plan,
    apply it and undo what is no longer wanted, with ``signals`` guarding the changes.
    Returns the plan, what apply and converge did, the systemd units and those the record
    held before."""
    record = state.load()
    warn(state.notes)
    check_managed(tree.cgroupfs, record)
    p = tree.plan(cfg, switches)
    require_no_refusals(p, force)
    warn(enforcement_warnings(cfg))
    units = client = None
    if dbus:
        v2 = p.version == "v2"
        client = Systemd()
        units = SystemdUnits.for_plan(client, state_dir, p, v2, cgroup_roles(cfg))
    started = set(units.record.started) if units else set()
    # What earlier runs did that these inputs no longer want, undone after applying.
    # Planned now, so the plan shown is whole: applying adds only wanted entries to
    # either record, so it cannot change what is stale.
    unit_record = units.record if units else None
    stale, stale_u = plan_undo(p, record, unit_record)
    table = output is OutputFormat.table and not quiet
    if table and (p.actions or p.undo):
        # the plan first, so an operator sees what is about to change
        typer.echo(printable("\n".join(f"  {line}" for line in plan_lines(p, dbus))))
    on_done = progress(p, dbus) if table and p.actions else None
    # SIGINT/SIGTERM/SIGHUP from here on are recorded, not raised: before the last
    # change apply undoes every change and raises Interrupted; after it the changes
    # stay (they are recorded), converge stops, and the run ends with 128 + signo.
    with signals:
        result: Result = apply(
            p, state, record, switches=switches, units=units, on_done=on_done, signals=signals
        )
        cleaned = converge(
            p, state, record, stale, switches=switches, systemd=client,
            units=unit_record, stale_u=stale_u, signals=signals,
        )  # fmt: skip
    return p, result, cleaned, units, started


def late_signal(signo: int, result: Result, cleaned: Result) -> str:
    """What a signal that came after apply's last change left: the changes made and recorded
    (a complete setup is not undone), and the undo of what is no longer wanted it cut short."""
    name = signal_name(signo)
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
