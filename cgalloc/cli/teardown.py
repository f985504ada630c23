"""``cgalloc teardown``: undo exactly what setup recorded, leaving everything else alone."""

from __future__ import annotations

import typer

from cgalloc.cli.options import (
    cgroupfs_option,
    dry_run_option,
    output_option,
    quiet_option,
    state_dir_option,
)
from cgalloc.cli.render import OutputFormat, warn
from cgalloc.cli.setup import report
from cgalloc.host.machine import Host
from cgalloc.ops.apply import peek_units, preview_teardown, teardown
from cgalloc.ops.setup import require_root
from cgalloc.ops.state import StateDir
from cgalloc.ops.units import UnitRecord

TEARDOWN_HELP = (
    "Undo what setup recorded in the state directory: restore the values it changed in "
    "cgroups it did not create, stop the systemd units it started and restore the unit "
    "properties it set, remove the cgroups it created (only empty ones, deepest first) and "
    "disable the controllers it enabled. Exit 1 if something had to be kept."
)
EXAMPLES = (
    "cgalloc teardown --dry-run          # what would be undone",
    "sudo cgalloc teardown               # undo what setup recorded",
)


def _units(before: UnitRecord, after: UnitRecord) -> dict:
    """The systemd part of the report: units stopped, units whose properties were restored."""
    return {
        "unitsStopped": [u for u in reversed(before.started) if u not in after.started],
        "propertiesRestored": [u for u in before.changed if u not in after.changed],
    }


def _unit_lines(units: dict, verb: tuple[str, str] = ("stopped", "restored")) -> list[str]:
    lines = [f"{verb[0]} unit {u}" for u in units["unitsStopped"]]
    lines += [f"{verb[1]} the properties of unit {u}" for u in units["propertiesRestored"]]
    return lines


def register(app: typer.Typer) -> None:
    """Add ``teardown`` to the app."""

    @app.command("teardown", help=TEARDOWN_HELP)
    def teardown_cmd(
        ctx: typer.Context,
        cgroupfs: str = cgroupfs_option(),
        state_dir: str = state_dir_option(),
        dry_run: bool = dry_run_option(),
        output: OutputFormat = output_option(),
        quiet: bool = quiet_option(),
    ) -> None:
        host: Host = ctx.obj
        state = StateDir(state_dir, host.boot_id())
        if dry_run:
            state.require_existing()
            record = state.peek()
            warn(state.notes)
            units = _units(peek_units(state, cgroupfs, record), UnitRecord())
            lines, kept = preview_teardown(cgroupfs, record)
            lines += _unit_lines(units, ("stop", "restore"))
            summary = f"dry run: {len(lines) - kept} changes to undo, nothing written"
            doc = {"dryRun": True, "wouldUndo": lines, "systemd": units}
            report(doc, lines, summary, output, quiet)
            return
        require_root(host)
        with state.locked(create=False):
            record = state.load()
            warn(state.notes)
            # after load: an earlier boot's systemd record is discarded there
            before = UnitRecord.load(state)
            result = teardown(cgroupfs, state, record, host=host)
            after = UnitRecord.load(state)
        units = _units(before, after)
        stopped = len(units["unitsStopped"])
        if result.kept:
            summary = f"undid {result.writes} changes, kept {len(result.kept)}"
        else:
            summary = f"undid {result.writes} changes; nothing cgalloc made is left"
        if before.started:
            summary += f"; stopped {stopped} systemd units"
        lines = [a.describe(cgroupfs) for a in result.done]
        lines += _unit_lines(units)
        lines += [f"kept {k}" for k in result.kept]
        lines += [f"left {p}: not made by cgalloc (the kubelet's, say), left to its owner"
                  for p in result.others]  # fmt: skip
        report({"dryRun": False, **result.to_json(), "systemd": units}, lines, summary, output,
               quiet and not result.kept)  # fmt: skip
        if result.kept:
            raise typer.Exit(1)
