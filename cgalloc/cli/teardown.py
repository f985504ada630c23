"""``cgalloc teardown``: undo exactly what setup recorded, leaving everything else alone."""

from __future__ import annotations

import typer

from cgalloc.apply import switches as current_switches
from cgalloc.apply import teardown
from cgalloc.cli.render import OutputFormat, output_option, warn
from cgalloc.cli.setup import cgroupfs_option, report, require_root, state_dir_option
from cgalloc.ownership import StateDir

TEARDOWN_HELP = (
    "Undo what setup recorded in the state directory: restore the values it changed in "
    "cgroups it did not create, remove the cgroups it created (only empty ones, deepest "
    "first) and disable the controllers it enabled. Exit 1 if something had to be kept."
)


def register(app: typer.Typer) -> None:
    """Add ``teardown`` to the app."""

    @app.command("teardown", help=TEARDOWN_HELP)
    def teardown_cmd(
        cgroupfs: str = cgroupfs_option(),
        state_dir: str = state_dir_option(),
        output: OutputFormat = output_option(),
    ) -> None:
        switches = current_switches()
        require_root(switches)
        state = StateDir(state_dir, switches.boot_id_file)
        with state.locked(create=False):
            record = state.load()
            warn(state.notes)
            result = teardown(cgroupfs, state, record, switches=switches)
        if result.kept:
            summary = f"undid {result.writes} changes, kept {len(result.kept)}"
        else:
            summary = f"undid {result.writes} changes; nothing cgalloc made is left"
        lines = [a.describe(cgroupfs) for a in result.done]
        lines += [f"kept {k}" for k in result.kept]
        report(result.to_json(), lines, summary, output)
        if result.kept:
            raise typer.Exit(1)
