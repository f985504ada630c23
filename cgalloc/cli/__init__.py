"""The ``cgalloc`` command line: parses, calls one operation, renders. No logic of its own.

Each sub-command lives in its own module and registers itself with :func:`register`.
"""

from __future__ import annotations

import importlib
import sys

import typer

from cgalloc.errors import CgallocError

app = typer.Typer(
    name="cgalloc",
    help=(
        "Kubernetes Node Allocatable on this node: compute it exactly as the kubelet does, "
        "create and enforce the kubepods / QoS / reserved cgroup tree, and read its usage."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich truncates the long kubelet flag names at 80 columns
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from cgalloc.cli.version import version_lines

        typer.echo("\n".join(version_lines()))
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version, which I/O core is loaded (C or pure Python), the kubelet "
        "version matched and the library versions, then exit.",
    ),
) -> None:
    """Keep ``cgalloc <command>`` a command group even while only one command is registered."""


# Sub-command modules, in the order --help lists them.
_COMMAND_MODULES = (
    "show",
    "stats",
    "setup",
    "verify",
    "teardown",
    "kubelet_config",
    "install_unit",
)

for _name in _COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"cgalloc.cli.{_name}")
    except ModuleNotFoundError as exc:  # a command not built yet must not break the others
        if exc.name != f"cgalloc.cli.{_name}":
            raise
        continue
    _mod.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning cgalloc errors into one message and an exit status."""
    try:
        app(args=argv, prog_name="cgalloc", standalone_mode=True)
    except CgallocError as exc:
        for line in str(exc).splitlines():
            print(f"cgalloc: {line}", file=sys.stderr)
        sys.exit(exc.exit_code)
