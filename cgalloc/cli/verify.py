"""``cgalloc verify``: does the live tree match the inputs? Exit 0 if so, 1 with the drift."""

from __future__ import annotations

import typer

from cgalloc.apply import switches as current_switches
from cgalloc.cli.inputs import (
    CAPACITY_IS_PLANNED,
    NodeInputs,
    NodeInputsCommand,
    node_inputs,
)
from cgalloc.cli.options import quiet_option, state_dir_option
from cgalloc.cli.render import OutputFormat, output_option, warn
from cgalloc.cli.setup import TreeOptions, report, tree_options
from cgalloc.ownership import Record, StateDir
from cgalloc.plan import Action, Plan, drift, is_cgroup, read_file, same_value, stale_drift

VERIFY_HELP = (
    "Check the live cgroup tree against the one setup makes for these inputs: exit 0 when "
    "it matches, 1 with every difference (missing cgroups, values, controllers, processes). "
    "Also reports what setup changed earlier that these inputs no longer want (from the record "
    "in --state-dir) until setup undoes it. Reads only: it changes nothing and needs no "
    "privileges."
)


def _dir(mount: str, path: str, root: str) -> str:
    return Action("mkdir", mount, path).where(root)


def drift_objects(plan: Plan, stale: Record) -> list[dict]:
    """Each difference as ``{cgroup, file, is, want}``: ``cgroup`` is the directory relative to
    --cgroupfs, ``file`` null for the cgroup itself, ``is`` null for what does not exist."""
    out = []
    for a in plan.actions:
        where = _dir(a.mount, a.path, plan.root)
        if a.kind == "mkdir":
            out.append({"cgroup": where, "file": None, "is": None, "want": "cgroup"})
        elif a.kind == "move":
            # the process's cgroup is what differs: it is in a.old, it belongs in this one
            out.append(
                {
                    "cgroup": where,
                    "file": "cgroup.procs",
                    "is": None,
                    "want": a.new,
                    "process": a.note,
                    "processIsIn": a.old,
                }
            )
        else:
            out.append({"cgroup": where, "file": a.file, "is": a.old, "want": a.new})
    for (mount, path, file), original in sorted(stale.changed.items()):
        current = read_file(mount, path, file)
        if current is not None and not same_value(file, current, original or "\n"):
            where = _dir(mount, path, plan.root)
            out.append({"cgroup": where, "file": file, "is": current, "want": original})
    for mount, path in sorted(stale.created):
        if is_cgroup(mount, path):
            out.append(
                {"cgroup": _dir(mount, path, plan.root), "file": None, "is": "cgroup", "want": None}
            )
    return out


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
        cfg = inputs.load_config()
        if cfg.capacity_overrides:
            warn([CAPACITY_IS_PLANNED])
        p = tree.plan(inputs, current_switches())
        stale = StateDir(state_dir).peek().stale(p.wanted_dirs, p.wanted_files)
        lines = drift(p) + stale_drift(stale, p.root)
        summary = f"drift: {len(lines)} differences" if lines else "in sync: the tree matches"
        doc = {"inSync": not lines, "drift": drift_objects(p, stale)}
        report(doc, lines, summary, output, quiet and not lines)
        if lines:
            raise typer.Exit(1)
