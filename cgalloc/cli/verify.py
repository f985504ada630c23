"""``cgalloc verify``: does the live tree match the inputs? Exit 0 if so, 1 with the drift."""

from __future__ import annotations

import typer

from cgalloc.cli.inputs import CAPACITY_IS_PLANNED, NodeInputs
from cgalloc.cli.options import output_option, quiet_option, state_dir_option
from cgalloc.cli.render import OutputFormat, warn
from cgalloc.cli.setup import TreeOptions, report, tree_options
from cgalloc.cli.signature import NodeInputsCommand, node_inputs
from cgalloc.ops.apply import peek_record, peek_units, plan_undo
from cgalloc.ops.apply import switches as current_switches
from cgalloc.ops.plan import drift
from cgalloc.ops.state import StateDir

VERIFY_HELP = (
    "Check the live cgroup tree against the one setup makes for these inputs: exit 0 when "
    "it matches, 1 with every difference (missing cgroups, values, controllers, processes). "
    "Also reports what setup changed earlier that these inputs no longer want (from the record "
    "in --state-dir) until setup undoes it. Reads only: it changes nothing and needs no "
    "privileges."
)


def register(app: typer.Typer) -> None:
    """Add ``verify`` to the app."""

    @app.command("verify", help=VERIFY_HELP, cls=NodeInputsCommand)
    @node_inputs
    @tree_options
    def verify(
        inputs: NodeInputs,
        tree: TreeOptions,
        state_dir: str = state_dir_option(),
        output: OutputFormat = output_option(),
        quiet: bool = quiet_option(),
    ) -> None:
        switches = current_switches()
        cfg = inputs.load_config()
        if cfg.capacity_overrides:
            warn([CAPACITY_IS_PLANNED])
        p = tree.plan(cfg, switches)
        state = StateDir(state_dir, switches.boot_id_file)
        dbus = tree.dbus(cfg.cgroup_driver, switches)
        plan_undo(p, peek_record(state, tree.cgroupfs), peek_units(state) if dbus else None)
        warn(state.notes)
        found = drift(p)
        lines = [line for line, _ in found]
        summary = f"drift: {len(lines)} differences" if lines else "in sync: the tree matches"
        doc = {"inSync": not lines, "drift": [item for _, item in found]}
        report(doc, lines, summary, output, quiet and not lines)
        if lines:
            raise typer.Exit(1)
