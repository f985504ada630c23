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

from cgalloc.apply import (
    Result,
    TestSwitches,
    apply,
    check_managed,
    converge,
    peek_units,
    plan_undo,
)
from cgalloc.apply import switches as current_switches
from cgalloc.cgroupfs import detect
from cgalloc.cli.inputs import NodeInputs, NodeInputsCommand, add_options, node_inputs
from cgalloc.cli.render import OutputFormat, emit, output_option, warn
from cgalloc.errors import HostError, InputError
from cgalloc.limits import WEIGHT_FORMULAS
from cgalloc.ownership import DEFAULT_STATE_DIR, StateDir
from cgalloc.plan import Plan, node_plan, require_no_refusals
from cgalloc.pods import load_pods
from cgalloc.systemd import (
    SYSTEMD_CONTROLLERS,
    Systemd,
    SystemdUnits,
    UnitRecord,
    cgroup_roles,
    systemd_running,
    use_dbus,
)

SETUP_HELP = (
    "Create and enforce the node's cgroup tree: kubepods with the Node Allocatable limits, "
    "the QoS tiers (and pods from --pods), and the kube-reserved / system-reserved cgroups "
    "when enforced. Prints the plan (mkdir, writes old -> new, controllers enabled, processes "
    "moved) and applies it in a safe order; if any change fails, every change is undone. "
    "Re-running with the same inputs writes nothing."
)
_PANEL = "Tree options"
PROCS_DO_NOT_PERSIST = (
    "processes moved by --kube-reserved-procs/--system-reserved-procs return to their unit's "
    "cgroup when they restart; `cgalloc install-unit --daemons` keeps daemons in their slice."
)


def cgroupfs_option() -> typer.models.OptionInfo:
    return typer.Option(
        "/sys/fs/cgroup",
        "--cgroupfs",
        metavar="PATH",
        help="Root of the cgroup hierarchy (v2 mount, or the directory holding the v1 mounts).",
        rich_help_panel=_PANEL,
    )


def state_dir_option() -> typer.models.OptionInfo:
    return typer.Option(
        DEFAULT_STATE_DIR,
        "--state-dir",
        metavar="DIR",
        help="Where cgalloc keeps its lock and the record of what it created (for teardown).",
        rich_help_panel=_PANEL,
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

    def plan(self, inputs: NodeInputs, switches: TestSwitches) -> Plan:
        if self.weight_formula not in WEIGHT_FORMULAS:
            raise InputError(
                f"--cpu-weight-formula {self.weight_formula!r} is not one of "
                f"{', '.join(WEIGHT_FORMULAS)}."
            )
        cfg, capacity = inputs.load()
        delegated = SYSTEMD_CONTROLLERS if self.dbus(cfg.cgroup_driver, switches) else frozenset()
        paths = list(self.pods)
        if self.static_pods:
            if not cfg.static_pod_path:
                raise InputError(
                    "--static-pods needs staticPodPath (--pod-manifest-path): the directory or"
                    " file the kubelet reads static pods from."
                )
            paths.append(cfg.static_pod_path)
        pods = load_pods(paths) if paths else []
        hierarchy = detect(self.cgroupfs, switches.mountinfo)
        moves = [
            (role, names)
            for role, names in (
                ("kube-reserved", _names(self.kube_procs)),
                ("system-reserved", _names(self.system_procs)),
            )
            if names
        ]
        p, _ = node_plan(
            cfg,
            capacity,
            hierarchy,
            pods,
            weight_formula=self.weight_formula,
            create_reserved=self.create_reserved,
            moves=moves,
            delegated=delegated,
        )
        warn(p.warnings)
        if moves:
            warn([PROCS_DO_NOT_PERSIST])
        return p


def _names(values: list[str]) -> list[str]:
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _keyword(
    name: str, annotation: object, default: object, *decls: str, **kw
) -> inspect.Parameter:
    option = typer.Option(default, *decls, rich_help_panel=_PANEL, **kw)
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
        help=f"Move running processes with these names (comm or executable basename) into the "
        f"{role} cgroup, e.g. kubelet,containerd. Repeatable. A one-off: it does not persist, a "
        "daemon is back in its unit's cgroup after its next restart; `cgalloc install-unit "
        "--daemons` keeps it there.",
    )


def tree_options(command: Callable[..., object]) -> Callable[..., object]:
    """Give a typer command the tree options as one ``tree: TreeOptions`` argument."""
    params = [
        inspect.Parameter(
            "cgroupfs", inspect.Parameter.KEYWORD_ONLY, default=cgroupfs_option(), annotation=str
        ),
        _keyword(
            "pods",
            list[str],
            [],
            "--pods",
            metavar="PATH",
            help="Pods to create pod cgroups for, as the kubelet would: a Pod manifest, a"
            " multi-document YAML, a List/PodList (kubectl get pods -o json, filtered to this"
            " node), or a static-pod directory; JSON or YAML. QoS class, shares, quota, memory,"
            " hugetlb and the burstable tier's shares come from them. Repeatable.",
        ),
        _keyword(
            "static_pods",
            bool,
            False,
            "--static-pods",
            help="Also read the static pods in staticPodPath (--pod-manifest-path).",
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
            help="Create missing reserved cgroups (default), or, like the kubelet, require them "
            "and fail listing the missing paths per controller.",
        ),
        _procs("kube-reserved"),
        _procs("system-reserved"),
        _keyword(
            "systemd_mode",
            str,
            "auto",
            "--systemd",
            metavar="auto|yes|no",
            help="Create the slices as transient systemd units over D-Bus (like the kubelet) and "
            "set the limits of existing units as unit properties; systemd then manages the "
            "cpu, cpuset, io, memory and pids controllers. auto = when the cgroup driver is "
            "systemd and systemd is PID 1.",
        ),
    ]
    return add_options(command, "tree", params, lambda values: TreeOptions(**values))


def report(doc: dict, lines: list[str], summary: str, output: OutputFormat) -> None:
    """``doc`` plus its summary as JSON/YAML, or the lines indented above the summary."""
    emit(
        {**doc, "summary": summary},
        output,
        lambda: "\n".join([*(f"  {line}" for line in lines), summary]),
    )


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
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Print the plan and stop; reads only, works unprivileged."
        ),
        force: bool = typer.Option(
            False,
            "--force",
            help="Lower a memory limit even below the cgroup's current usage "
            "(the kernel then reclaims or OOM-kills).",
        ),
        output: OutputFormat = output_option(),
    ) -> None:
        switches = current_switches()
        cfg = inputs.load_config()
        dbus = tree.dbus(cfg.cgroup_driver, switches)
        state = StateDir(state_dir, switches.boot_id_file)
        if dry_run:
            p = tree.plan(inputs, switches)
            plan_undo(p, state.peek(), peek_units(state) if dbus else None)
            count = len(p.actions) + len(p.undo)
            summary = (
                "no changes: 0 writes"
                if not count
                else f"dry run: {count} changes planned, nothing written"
            )
            doc = {"dry_run": True, "plan": p.to_json(), "writes": 0}
            report(doc, p.describe(), summary, output)
            require_no_refusals(p, force)
            return
        require_root(switches)
        with state.locked():
            record = state.load()
            warn(state.notes)
            check_managed(tree.cgroupfs, record)
            p = tree.plan(inputs, switches)
            require_no_refusals(p, force)
            units = client = None
            if dbus:
                v2 = p.version == "v2"
                client = Systemd()
                units = SystemdUnits.for_plan(client, state_dir, p, v2, cgroup_roles(cfg))
            result: Result = apply(p, state, record, switches=switches, units=units)
            # then undo what earlier runs did that these inputs no longer want
            unit_record = UnitRecord.load(state_dir) if dbus else None
            stale, stale_u = plan_undo(p, record, unit_record)
            cleaned = converge(
                p, state, record, stale, switches=switches, systemd=client,
                units=unit_record, stale_u=stale_u,
            )  # fmt: skip
        doc = {"dry_run": False, "plan": p.to_json(), **result.to_json()}
        lines = p.describe() + [f"kept {k}" for k in cleaned.kept]
        doc["no_longer_wanted"] = cleaned.to_json()
        summary = result.summary()
        if cleaned.done:
            summary += f"; undid {cleaned.writes} changes no longer wanted"
        report(doc, lines, summary, output)
        if cleaned.kept:
            raise typer.Exit(1)
