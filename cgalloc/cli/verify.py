"""``cgalloc verify``: does the live tree match the inputs? Exit 0 if so, 1 with the drift."""

from __future__ import annotations

import typer

from cgalloc.cli.inputs import CAPACITY_IS_PLANNED, NodeInputs
from cgalloc.cli.options import output_option, quiet_option, state_dir_option
from cgalloc.cli.render import OutputFormat, warn
from cgalloc.cli.setup import report, tree_options
from cgalloc.cli.signature import NodeInputsCommand, node_inputs
from cgalloc.host.machine import Host
from cgalloc.ops.setup import TreeOptions, verify
from cgalloc.ops.state import StateDir

VERIFY_HELP = (
    "Check the live cgroup tree against the one setup makes for these inputs: exit 0 when "
    "it matches, 1 with every difference (missing cgroups, values, controllers, processes). "
    "Also reports what setup changed earlier that these inputs no longer want (from the record "
    "in --state-dir) until setup undoes it. Reads only: it changes nothing and needs no "
    "privileges."
)
EXAMPLES = (
    "cgalloc verify --config /var/lib/kubelet/config.yaml   # exit 0: in sync, 1: drift",
    "cgalloc verify --config /var/lib/kubelet/config.yaml --static-pods -o json",
    "cgalloc verify --match-kubelet --reserved-protection protect   # as setup was given",
)


def register(app: typer.Typer) -> None:
    """Add ``verify`` to the app."""

    @app.command("verify", help=VERIFY_HELP, cls=NodeInputsCommand)
    @node_inputs
    @tree_options
    def verify_command(
        ctx: typer.Context,
        inputs: NodeInputs,
        tree: TreeOptions,
        state_dir: str = state_dir_option(),
        output: OutputFormat = output_option(),
        quiet: bool = quiet_option(),
    ) -> None:
        host: Host = ctx.obj
        cfg = inputs.load_config()
        warn(inputs.check_drivers(cfg))
        if cfg.capacity_overrides:
            warn([CAPACITY_IS_PLANNED])
        state = StateDir(state_dir, host.boot_id())
        p, found = verify(tree, cfg, host, state)
        warn([*p.warnings, *tree.notes()])
        warn(state.notes)
        lines = [line for line, _ in found]
        summary = f"drift: {len(lines)} differences" if lines else "in sync: the tree matches"
        doc = {"inSync": not lines, "drift": [item for _, item in found], **inputs.document()}
        report(doc, lines, summary, output, quiet and not lines)
        if lines:
            raise typer.Exit(1)
