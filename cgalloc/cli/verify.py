"""``cgalloc verify``: does the live tree match the inputs? Exit 0 if so, 1 with the drift."""

from __future__ import annotations

import typer

from cgalloc.apply import TestSwitches
from cgalloc.cli.inputs import NodeInputs, node_inputs
from cgalloc.cli.render import OutputFormat, emit, output_option
from cgalloc.cli.setup import (
    TreeOptions,
    cgroupfs_option,
    create_reserved_option,
    pods_option,
    procs_option,
    weight_option,
)
from cgalloc.plan import drift

VERIFY_HELP = (
    "Check the live cgroup tree against what setup would create for these inputs: exit 0 when "
    "it matches, 1 with every difference (missing cgroups, values, controllers, processes). "
    "Reads only."
)


def register(app: typer.Typer) -> None:
    """Add ``verify`` to the app."""

    @app.command("verify", help=VERIFY_HELP)
    @node_inputs
    def verify(
        inputs: NodeInputs,
        cgroupfs: str = cgroupfs_option(),
        pods: str | None = pods_option(),
        cpu_weight_formula: str = weight_option(),
        create_reserved: bool = create_reserved_option(),
        kube_reserved_procs: list[str] = procs_option("kube-reserved"),
        system_reserved_procs: list[str] = procs_option("system-reserved"),
        output: OutputFormat = output_option(),
    ) -> None:
        opts = TreeOptions(
            cgroupfs,
            pods,
            cpu_weight_formula,
            create_reserved,
            kube_reserved_procs,
            system_reserved_procs,
        )
        p = opts.plan(inputs, TestSwitches.from_env())
        lines = drift(p)
        summary = f"drift: {len(lines)} differences" if lines else "in sync: the tree matches"
        emit(
            {"in_sync": not lines, "drift": lines, "summary": summary},
            output,
            lambda: "\n".join([*(f"  {line}" for line in lines), summary]),
        )
        if lines:
            raise typer.Exit(1)
