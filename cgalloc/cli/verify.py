"""``cgalloc verify``: does the live tree match the inputs? Exit 0 if so, 1 with the drift."""

from __future__ import annotations

import typer

from cgalloc.apply import peek_units, plan_undo
from cgalloc.apply import switches as current_switches
from cgalloc.cli.inputs import NodeInputs, NodeInputsCommand, node_inputs
from cgalloc.cli.render import OutputFormat, output_option
from cgalloc.cli.setup import TreeOptions, report, state_dir_option, tree_options
from cgalloc.ownership import StateDir
from cgalloc.plan import drift, stale_drift

VERIFY_HELP = (
    "Check the live cgroup tree against what setup would create for these inputs: exit 0 when "
    "it matches, 1 with every difference (missing cgroups, values, controllers, processes). "
    "Also reports what setup changed earlier that these inputs no longer want (from the record "
    "in --state-dir) until setup undoes it. Reads only."
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
    ) -> None:
        switches = current_switches()
        p = tree.plan(inputs, switches)
        state = StateDir(state_dir, switches.boot_id_file)
        dbus = tree.dbus(inputs.load_config().cgroup_driver, switches)
        plan_undo(p, state.peek(), peek_units(state) if dbus else None)
        lines = drift(p) + stale_drift(p)
        summary = f"drift: {len(lines)} differences" if lines else "in sync: the tree matches"
        report({"in_sync": not lines, "drift": lines}, lines, summary, output)
        if lines:
            raise typer.Exit(1)
