"""``cgalloc setup``: create and enforce the node's cgroup tree (plan, then apply).

Also holds what ``verify`` and ``teardown`` share with it: the tree options (``@tree_options``)
and the report layout.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable

import typer

from cgalloc.cli.inputs import NodeInputs
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
from cgalloc.host.machine import Host
from cgalloc.host.systemd import slice_unit
from cgalloc.model.nodeconfig import enforcement_warnings
from cgalloc.ops.apply import Interrupted, signal_name
from cgalloc.ops.plan import Action, Plan, require_no_refusals
from cgalloc.ops.setup import (
    Setup,
    TreeOptions,
    dbus_report,
    late_signal,
    preview,
    setup,
)
from cgalloc.ops.state import StateDir

SETUP_HELP = (
    "Create and enforce the node's cgroup tree: kubepods with the Node Allocatable limits, "
    "the QoS tiers (and pods from --pods), and the kube-reserved / system-reserved cgroups "
    "when enforced. Prints the plan (mkdir, writes old -> new, controllers enabled, processes "
    "moved), then applies it in a safe order, one progress line per change on stderr; if any "
    "change fails, every change is undone. Re-running with the same inputs writes nothing. "
    "--capacity plans another node type and is refused without --dry-run."
)
EXAMPLES = (
    "cgalloc setup --match-kubelet --dry-run          # what would change, as the kubelet is set",
    "sudo cgalloc setup --match-kubelet                # make it so",
    "sudo cgalloc setup --config /var/lib/kubelet/config.yaml --kube-reserved-cgroup /kube.slice",
    "sudo cgalloc setup --enforce pods,kube-reserved --kube-reserved cpu=500m,memory=1Gi \\",
    "    --kube-reserved-cgroup /kube.slice -o json > setup-report.json",
    "cgalloc setup --match-kubelet --reserved-protection protect --dry-run   # memory.min, no cap",
    "sudo cgalloc setup --match-kubelet --reserved-protection protect --reserved-swap none \\",
    "    --reserved-cpu-weight proportional   # protected, out of swap, weighted by reservation",
)
# A terminal shows one redrawn progress line instead of one line per change above this many.
COMPACT_PROGRESS = 20
PROTECT_PANEL = "Protection beyond the kubelet (opt in, docs/protect.md)"
def _keyword(
    name: str, annotation: object, default: object, *decls: str, panel: str = TREE_PANEL, **kw
) -> inspect.Parameter:
    option = typer.Option(default, *decls, rich_help_panel=panel, **kw)
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


def _protection_options() -> list[inspect.Parameter]:
    """The reserved cgroups beyond the kubelet (docs/protect.md): off by default."""
    return [
        _keyword(
            "reserved_protection",
            str,
            "cap",
            "--reserved-protection",
            metavar="cap|protect|protect-low|both",
            panel=PROTECT_PANEL,
            help="Memory of the reserved cgroups. cap (default): the kubelet's memory.max at the "
            "reservation where the role is enforced in full. protect: memory.min at the "
            "reservation and no memory.max, so the daemons are kept from reclaim and not "
            "OOM-killed at their reservation (kubernetes#128284). protect-low: memory.low "
            "instead (protected while other memory can be reclaimed). both: the kubelet's cap "
            "and memory.min. Applies to every named reserved cgroup that reserves memory, "
            "enforced or not; cgroup v2 only (v1 has no memory protection).",
        ),
        _keyword(
            "reserved_swap",
            str,
            "allow",
            "--reserved-swap",
            metavar="allow|none",
            panel=PROTECT_PANEL,
            help="none: keep the reserved cgroups out of swap, KEP-2400's best practice for "
            "system daemons: memory.swap.max 0 on cgroup v2, memory.memsw.limit_in_bytes equal "
            "to the memory cap on v1 (refused where v1 has no cap). allow (default): the "
            "kernel's default, as the kubelet leaves it.",
        ),
        _keyword(
            "reserved_cpu_weight",
            str,
            "kubelet",
            "--reserved-cpu-weight",
            metavar="kubelet|proportional",
            panel=PROTECT_PANEL,
            help="proportional: give every named reserved cgroup that reserves CPU the weight "
            "kubepods has per CPU, times its reserved CPUs (kubepods' cpu.weight x reserved CPU "
            "/ kubepods' CPU; cpu.shares on v1), so under contention the CPU splits as the "
            "reservations do (kubernetes#139790). kubelet (default): the kubelet's shares where "
            "it enforces the role.",
        ),
    ]


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
        *_protection_options(),
        _keyword(
            "systemd_mode",
            str,
            "auto",
            "--systemd",
            metavar="auto|yes|no",
            help="Slices are transient systemd units made over D-Bus (as the kubelet makes "
            "them) and existing units carry the limits as unit properties; systemd then manages "
            "the cpu, cpuset, io, memory and pids controllers. auto = when the cgroup driver is "
            "systemd and systemd is PID 1. With the cgroupfs driver, where systemd is PID 1, "
            "systemd's own units (system.slice, a service) get the limits written in their "
            "cgroups as unit properties too, or a daemon-reload would put their old values "
            "back; no = never over D-Bus.",
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


def dbus_lines(doc: dict) -> list[str]:
    lines = [f"started transient unit {u} over D-Bus" for u in doc["unitsStarted"]]
    lines += [
        f"set {', '.join(e['properties'])} on {e['unit']} over D-Bus" for e in doc["propertiesSet"]
    ]
    return lines


def register(app: typer.Typer) -> None:
    """Add ``setup`` to the app."""

    @app.command("setup", help=SETUP_HELP, cls=NodeInputsCommand)
    @node_inputs
    @tree_options
    def setup_command(
        ctx: typer.Context,
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
        host: Host = ctx.obj
        cfg = inputs.load_config()
        warn(inputs.check_drivers(cfg, refuse=True))  # refused unless --allow-driver-mismatch
        state = StateDir(state_dir, host.boot_id())
        if dry_run:
            p = preview(tree, cfg, host, state)
            warn([*p.warnings, *tree.notes(), *enforcement_warnings(cfg)])
            count = len(p.actions) + len(p.undo)
            summary = (
                "no changes: 0 writes"
                if not count
                else f"dry run: {count} changes planned, nothing written"
            )
            if not quiet:
                doc = {"dryRun": True, "plan": p.to_json(), "writes": 0, **inputs.document()}
                report(doc, plan_lines(p, tree.dbus(cfg.cgroup_driver, host)), summary, output)
            require_no_refusals(p, force)
            return

        def before(p: Plan, dbus: bool) -> Callable[[Action], None] | None:
            table = output is OutputFormat.table and not quiet
            if table and (p.actions or p.undo):
                # the plan first, so an operator sees what is about to change
                typer.echo(printable("\n".join(f"  {line}" for line in plan_lines(p, dbus))))
            return progress(p, dbus) if table and p.actions else None

        run = setup(tree, cfg, host, state, force=force, warn=warn, before=before)
        if not quiet or run.cleaned.kept:  # kept is a failure: said even with --quiet
            _report(run, output, inputs.document())
        if run.signo is not None:
            raise Interrupted(run.signo, late_signal(run))
        if run.cleaned.kept:
            raise typer.Exit(1)


def _report(run: Setup, output: OutputFormat, inputs_doc: dict) -> None:
    p, result, cleaned = run.plan, run.result, run.cleaned
    doc = {"dryRun": False, "plan": p.to_json(), **result.to_json(), **inputs_doc}
    lines = [f"{a.describe(p.root)} (no longer wanted)" for a in cleaned.done]
    lines += [f"kept {k}" for k in cleaned.kept]
    if run.units is not None:
        doc["systemd"] = dbus_report(run)
        lines += dbus_lines(doc["systemd"])
    doc["noLongerWanted"] = cleaned.to_json()
    summary = result.summary()
    if cleaned.done:
        summary += f"; undid {cleaned.writes} changes no longer wanted"
    if run.signo is not None:
        doc["interruptedBy"] = signal_name(run.signo)
    try:
        report(doc, lines, summary, output)
    except OSError:
        if run.signo is None:  # a SIGHUP's terminal is gone: the status tells
            raise
