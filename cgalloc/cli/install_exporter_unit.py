"""``cgalloc install-exporter-unit``: run ``cgalloc exporter`` as a systemd service."""

from __future__ import annotations

import sys

import typer

from cgalloc.cli.install_unit import (
    ALLOW_UNSAFE_HELP,
    UNINSTALL_HELP,
    check_interpreter,
    check_trust,
    chosen_args,
    open_root,
    write_changes,
)
from cgalloc.cli.options import dry_run_option, quiet_option
from cgalloc.errors import InputError
from cgalloc.host import safefs
from cgalloc.ops.exporterunit import (
    CONFIG_FILE,
    DEFAULT_ARGS,
    UNIT_NAME,
    config_args,
    install_changes,
    read_config,
    uninstall_changes,
)

HELP = (
    "Install cgalloc-exporter.service, which serves `cgalloc exporter` (127.0.0.1:9847 by"
    " default) without any capability, the system and the cgroup tree read-only, restarted on"
    " failure, and enable it. The exporter's arguments go to /etc/cgalloc/exporter.conf,"
    " written only when absent; give them after '--' (default: --config"
    " /var/lib/kubelet/config.yaml). They are checked before anything is written, and so is"
    " that root alone can change what the unit runs and reads. Re-running changes nothing;"
    " --uninstall removes the unit and its link when cgalloc wrote them (the config file"
    " stays)."
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
            help=UNINSTALL_HELP,  # install-unit's text: one help per option name
        ),
        allow_unsafe_interpreter: bool = typer.Option(
            False, "--allow-unsafe-interpreter", help=ALLOW_UNSAFE_HELP
        ),
        quiet: bool = quiet_option(),
    ) -> None:
        base = open_root(root)
        try:
            _install(base, exporter_args, dry_run, uninstall, allow_unsafe_interpreter, quiet)
        finally:
            base.close()


def _install(
    base: safefs.Beneath,
    exporter_args: list[str] | None,
    dry_run: bool,
    uninstall: bool,
    allow_unsafe: bool,
    quiet: bool,
) -> None:
    """install-exporter-unit's run below ``base``: every check before anything is written."""
    if uninstall:
        if exporter_args:
            raise InputError("--uninstall takes no EXPORTER-ARGS; drop them.")
        changes = uninstall_changes(base)
    else:
        text = read_config(base)
        existing = config_args(text) if text is not None else None
        args = chosen_args(exporter_args, existing, DEFAULT_ARGS, CONFIG_FILE, "exporter")
        _check_exporter_args(args)
        command = [sys.executable, "-m", "cgalloc"]
        changes = install_changes(base, command, args)
        check_trust(base, [CONFIG_FILE, *(c.path for c in changes)], "the exporter unit")
        check_interpreter(command, allow_unsafe, "the exporter unit")
    if not write_changes(base, changes, dry_run, quiet):
        return
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
