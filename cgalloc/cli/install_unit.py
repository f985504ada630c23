"""``cgalloc install-unit``: run setup at every boot, and keep the daemons in their slices."""

from __future__ import annotations

import os
import subprocess
import sys

import typer

from cgalloc.cli.inputs import node_inputs_from
from cgalloc.cli.options import dry_run_option, quiet_option
from cgalloc.cli.render import printable, warn
from cgalloc.errors import HostError, InputError
from cgalloc.host import safefs
from cgalloc.host.systemd import systemd_running
from cgalloc.ops.bootunit import (
    BOOT_REFUSED,
    CONFIG_FILE,
    DEFAULT_SETUP_ARGS,
    UNIT_NAME,
    FileChange,
    apply_changes,
    boot_code_paths,
    config_args,
    daemon_slice,
    dropin_slices,
    install_changes,
    read_config,
    stop_loaded_slices,
    trust_problems,
    uninstall_changes,
)

HELP = (
    "Install cgalloc-setup.service, which runs `cgalloc setup` at boot before containerd, "
    "CRI-O and the kubelet (a cgroupfs tree and transient slices do not survive a reboot), and "
    "enable it. Setup's arguments go to /etc/cgalloc/setup.conf, written only when absent; "
    "give them after '--' (default: --match-kubelet, the node's kubelet's own inputs). They are "
    "checked before anything is written, and so is that root alone can change what the unit "
    "runs and reads at boot. Re-running changes nothing; --uninstall removes the unit, its link "
    "and the drop-ins it wrote (the config file stays)."
)
UNSAFE_CODE = (
    "{unit} would run {exe} -m cgalloc as root at every boot, but a user other than root "
    "can change what it runs ({what}); install cgalloc where only root can change it (a "
    "root-owned virtual environment, or the system's packages), or give "
    "--allow-unsafe-interpreter to install it anyway."
)
UNSAFE_FILES = (
    "--root {root}: {unit} runs as root what these files say, and a user other than root "
    "can change them ({what}); {command} writes only where root alone can: correct the "
    "owner or mode, and run again."
)
UNINSTALL_HELP = (
    "Remove what it installed instead: the unit and cgalloc's drop-ins when they carry its "
    "marker line, and the enable link when it points at the unit; the config file stays. "
    "On a running node it then stops the slice those drop-ins named when systemd loaded it "
    "only for them (no unit file) and nothing runs in it any more."
)
ALLOW_UNSAFE_HELP = (
    "Install even when a user other than root can change the interpreter or the cgalloc "
    "package the unit runs as root at boot (a warning instead of a refusal)."
)
EXAMPLES = (
    "sudo cgalloc install-unit                      # setup --match-kubelet at every boot",
    "sudo cgalloc install-unit --daemons kubelet,containerd -- --config \\",
    "    /var/lib/kubelet/config.yaml --kube-reserved-cgroup /kube.slice",
    "sudo cgalloc install-unit --root /mnt/image     # into an image being built",
    "sudo cgalloc install-unit --uninstall",
)


def _setup_inputs(args: list[str]):
    """Parse ``args`` as ``cgalloc setup`` would and return its validated NodeConfig."""
    from cgalloc.cli import app

    setup = typer.main.get_command(app).commands["setup"]  # type: ignore[attr-defined]
    try:
        ctx = setup.make_context("cgalloc setup", list(args))
    except Exception as exc:  # click's UsageError (typer vendors click since 0.16)
        if not hasattr(exc, "format_message"):
            raise
        raise InputError(f"setup arguments {' '.join(args)!r}: {exc.format_message()}") from None
    for name, flag in BOOT_REFUSED.items():
        if ctx.params.get(name):
            raise InputError(f"setup arguments: {flag} has no place in the boot unit; drop it.")
    return node_inputs_from(ctx.params).load_config()


def _daemon_names(values: list[str]) -> list[str]:
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _is_real_root(root: str) -> bool:
    return os.path.realpath(root) == "/"


def _listed(problems: list[str], total: int) -> str:
    more = f"; and {total - len(problems)} more" if total > len(problems) else ""
    return "; ".join(problems) + more


def check_interpreter(command: list[str], allow: bool, unit: str = "the boot unit") -> None:
    """Refuse (or with ``allow`` warn of) an interpreter or package a user could change."""
    problems, total = safefs.first_problems(boot_code_paths(command[0]))
    if not problems:
        return
    message = UNSAFE_CODE.format(unit=unit, exe=command[0], what=_listed(problems, total))
    if not allow:
        raise InputError(message)
    warn([message.split("; install cgalloc")[0] + "; installing it as --allow-unsafe-interpreter"
          " asks."])  # fmt: skip


def open_root(root: str) -> safefs.Beneath:
    """``--root`` opened for the no-follow walk below it (InputError when not a directory)."""
    try:  # "" would be the current directory
        base = safefs.Beneath(root) if root else None
    except OSError:
        base = None
    if base is None:
        raise InputError(f"--root {root!r} is not a directory; give an existing directory.")
    return base


def chosen_args(
    given: list[str] | None,
    existing: list[str] | None,
    default: tuple[str, ...],
    config_file: str,
    what: str,
) -> list[str]:
    """The unit's arguments: those ``given``, else those the config file holds (``existing``),
    else ``default``; given ones that differ from the file's are refused (edit the file)."""
    if given and existing is not None and list(given) != existing:
        raise InputError(
            f"/{config_file} already holds other {what} arguments "
            f"({' '.join(existing)}); edit that file instead."
        )
    return list(given or ()) or existing or list(default)


def check_trust(base: safefs.Beneath, paths: list[str], unit: str) -> None:
    """Refuse to write below ``base`` unless root alone can change ``paths`` (what ``unit``
    reads as root) and the directories that hold them."""
    problems = trust_problems(base, list(dict.fromkeys(paths)))
    if problems:
        command = "install-unit" if unit == "the boot unit" else "install-exporter-unit"
        raise InputError(
            UNSAFE_FILES.format(root=base.path, unit=unit, command=command,
                                what="; ".join(problems))
        )  # fmt: skip


def write_changes(
    base: safefs.Beneath, changes: list[FileChange], dry_run: bool, quiet: bool
) -> bool:
    """Show ``changes`` and, unless ``dry_run``, make them below ``base`` and tell systemd on a
    real root. False when nothing was to be written (a dry run)."""
    if not quiet:
        _show(changes, dry_run)
    if dry_run:
        if not quiet:
            typer.echo(f"dry run: {len(changes)} files would change, nothing written")
        return False
    if changes and _is_real_root(base.path) and os.geteuid() != 0:
        raise HostError("installing the unit needs root; --dry-run shows the files.")
    apply_changes(base, changes)
    warning = _reload(base.path) if changes else None
    if warning:
        warn([warning])
    return True


def _reload(root: str) -> str | None:
    """``systemctl daemon-reload`` on a real root under systemd; a warning when it fails."""
    if not _is_real_root(root) or not systemd_running():
        return None
    done = subprocess.run(
        ["systemctl", "daemon-reload"], capture_output=True, text=True, timeout=120
    )
    return None if done.returncode == 0 else f"systemctl daemon-reload: {done.stderr.strip()}"


def _show(changes: list[FileChange], dry_run: bool) -> None:
    for change in changes:
        typer.echo(printable(("would " if dry_run else "") + change.describe()))
        if dry_run and change.content is not None:  # setup.conf holds the arguments as given
            text = "".join(f"    {line}\n" for line in change.content.splitlines())
            typer.echo(printable(text), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``install-unit`` to the app."""

    @app.command("install-unit", help=HELP)
    def install_unit(
        setup_args: list[str] = typer.Argument(
            None, metavar="SETUP-ARGS", help="Arguments of `cgalloc setup` at boot."
        ),
        daemons: list[str] = typer.Option(
            [],
            "--daemons",
            metavar="NAME,...",
            help="Also write drop-ins that put these units (kubelet, containerd, crio) in the "
            "kube-reserved slice with Slice= and start them after the tree exists; systemd "
            "keeps them there across restarts and reboots. Needs --cgroup-driver systemd and "
            "a --kube-reserved-cgroup slice in the setup arguments.",
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
            help=UNINSTALL_HELP,
        ),
        allow_unsafe_interpreter: bool = typer.Option(
            False,
            "--allow-unsafe-interpreter",
            help=ALLOW_UNSAFE_HELP,
        ),
        quiet: bool = quiet_option(),
    ) -> None:
        base = open_root(root)
        try:
            _install_unit(
                base, setup_args, daemons, dry_run, uninstall, allow_unsafe_interpreter, quiet
            )
        finally:
            base.close()


def _install_unit(
    base: safefs.Beneath,
    setup_args: list[str] | None,
    daemons: list[str],
    dry_run: bool,
    uninstall: bool,
    allow_unsafe: bool,
    quiet: bool,
) -> None:
    """install-unit's run below ``base``: every check before anything is written."""
    if uninstall:
        if setup_args or _daemon_names(daemons):
            given = "SETUP-ARGS" if setup_args else "--daemons"
            raise InputError(
                f"--uninstall removes what install-unit wrote and takes no {given}; drop them."
            )
        changes = uninstall_changes(base)
        slices = dropin_slices(base, changes)
    else:
        text = read_config(base)
        existing = config_args(text) if text is not None else None
        args = chosen_args(setup_args, existing, DEFAULT_SETUP_ARGS, CONFIG_FILE, "setup")
        cfg = _setup_inputs(args)
        dropins = {d: daemon_slice(cfg, d) for d in _daemon_names(daemons)}
        command = [sys.executable, "-m", "cgalloc"]
        changes = install_changes(base, command, args, dropins)
        check_trust(base, [CONFIG_FILE, *(c.path for c in changes)], "the boot unit")
        check_interpreter(command, allow_unsafe)
    if not write_changes(base, changes, dry_run, quiet):
        return
    if uninstall and slices and _is_real_root(base.path) and systemd_running():
        for line in stop_loaded_slices(slices):
            if line.startswith("left "):
                warn([line])
            elif not quiet:
                typer.echo(printable(line))
    if not changes:
        summary = "nothing to change"
    elif uninstall:
        summary = f"removed {len(changes)} files; /{CONFIG_FILE} kept"
    else:
        summary = f"{UNIT_NAME} installed and enabled: {len(changes)} files changed"
    if not quiet:
        typer.echo(summary)
