"""``cgalloc install-exporter-unit``: run ``cgalloc exporter`` as a systemd service."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from cgalloc.cli.install_unit import _reload, _show
from cgalloc.cli.options import dry_run_option, quiet_option
from cgalloc.cli.render import warn
from cgalloc.errors import HostError, InputError
from cgalloc.inputs.loading import read_bounded
from cgalloc.ops.bootunit import CONFIG_KIND, apply_changes
from cgalloc.ops.exporterunit import (
    CONFIG_FILE,
    DEFAULT_ARGS,
    UNIT_NAME,
    config_args,
    install_changes,
    uninstall_changes,
)

HELP = (
    "Install cgalloc-exporter.service, which serves `cgalloc exporter` (127.0.0.1:9847 by"
    " default) without any capability, the system and the cgroup tree read-only, restarted on"
    " failure, and enable it. The exporter's arguments go to /etc/cgalloc/exporter.conf,"
    " written only when absent; give them after '--' (default: --config"
    " /var/lib/kubelet/config.yaml). They are checked before anything is written. Re-running"
    " changes nothing; --uninstall removes the unit and its link (the config file stays)."
)
EXAMPLES = (
    "sudo cgalloc install-exporter-unit -- --config /var/lib/kubelet/config.yaml",
    "sudo cgalloc install-exporter-unit --uninstall",
)


def _check_exporter_args(args: list[str]) -> None:
    """Parse ``args`` as ``cgalloc exporter`` would; InputError for what it would refuse."""
    from cgalloc.cli import app

    command = typer.main.get_command(app).commands["exporter"]  # type: ignore[attr-defined]
    try:
        ctx = command.make_context("cgalloc exporter", list(args))
    except Exception as exc:  # click's UsageError
        if not hasattr(exc, "format_message"):
            raise
        raise InputError(f"exporter arguments {' '.join(args)!r}: {exc.format_message()}") from None
    from cgalloc.cli.exporter import check_options
    from cgalloc.cli.inputs import node_inputs_from

    values = dict(ctx.params)
    node_inputs_from(values).load_config()
    check_options({k: v for k, v in values.items()})


def register(app: typer.Typer) -> None:
    """Add ``install-exporter-unit`` to the app."""

    @app.command("install-exporter-unit", help=HELP)
    def install_exporter_unit(
        exporter_args: list[str] = typer.Argument(
            None, metavar="EXPORTER-ARGS", help="Arguments of `cgalloc exporter` in the unit."
        ),
        root: str = typer.Option(
            "/",
            "--root",
            metavar="DIR",
            help="Write below DIR instead of / (an image being built); systemd is not told.",
        ),
        dry_run: bool = dry_run_option(),
        uninstall: bool = typer.Option(
            False,
            "--uninstall",
            # install-unit's text: one help per option name (its drop-ins: none here)
            help="Remove the unit, its enable link and cgalloc's drop-ins instead.",
        ),
        quiet: bool = quiet_option(),
    ) -> None:
        base = Path(root)
        if not root or not base.is_dir():
            raise InputError(f"--root {root!r} is not a directory; give an existing directory.")
        if uninstall:
            if exporter_args:
                raise InputError("--uninstall takes no EXPORTER-ARGS; drop them.")
            changes = uninstall_changes(base)
        else:
            config = base / CONFIG_FILE
            existing = None
            if config.is_file():
                existing = config_args(read_bounded(str(config), "--root", kind=CONFIG_KIND))
            args = list(exporter_args or ()) or existing or list(DEFAULT_ARGS)
            if exporter_args and existing is not None and list(exporter_args) != existing:
                raise InputError(
                    f"/{CONFIG_FILE} already holds other exporter arguments"
                    f" ({' '.join(existing)}); edit that file instead."
                )
            _check_exporter_args(args)
            changes = install_changes(base, [sys.executable, "-m", "cgalloc"], args)
        if not quiet:
            _show(changes, dry_run)
        if dry_run:
            if not quiet:
                typer.echo(f"dry run: {len(changes)} files would change, nothing written")
            return
        if changes and base == Path("/") and os.geteuid() != 0:
            raise HostError("installing the unit needs root; --dry-run shows the files.")
        apply_changes(base, changes)
        warning = _reload(base) if changes else None
        if warning:
            warn([warning])
        if not quiet:
            if not changes:
                typer.echo("nothing to change")
            elif uninstall:
                typer.echo(f"removed {len(changes)} files; /{CONFIG_FILE} kept")
            else:
                typer.echo(
                    f"{UNIT_NAME} installed and enabled: {len(changes)} files changed"
                    " (systemctl start cgalloc-exporter starts it now)"
                )
