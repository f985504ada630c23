"""The ``cgalloc`` command line: parses, calls one operation, renders. No logic of its own.

Each sub-command lives in its own module and registers itself with ``register(app)``. Modules are
imported only when their command runs (a lazy command group): ``cgalloc show`` pays for what
``show`` uses, and ``cgalloc --help`` for typer alone.
"""

from __future__ import annotations

import importlib
import sys

import typer
import typer.main
from typer.core import TyperGroup

from cgalloc.errors import CgallocError

# Command name -> (module in cgalloc.cli, what --help lists for it), in --help order. The listing
# is the start of each command's own help (tests/test_cli_lazy.py checks), so it needs no import.
COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("show", "Show this node's Capacity and Allocatable"),
    "stats": ("stats", "Read the usage of this node's cgroup tree"),
    "setup": ("setup", "Create and enforce the node's cgroup tree"),
    "verify": ("verify", "Check the live cgroup tree against what setup would create"),
    "teardown": ("teardown", "Undo what setup recorded in the state directory"),
    "kubelet-config": ("kubelet_config", "Print the KubeletConfiguration fragment (YAML)"),
}


class _Commands(dict):
    """The group's commands, each built from its module on first use."""

    def __missing__(self, name: str) -> typer.core.TyperCommand:
        if name not in COMMANDS:
            raise KeyError(name)
        module = importlib.import_module(f"cgalloc.cli.{COMMANDS[name][0]}")
        sub = typer.Typer()
        module.register(sub)
        (info,) = sub.registered_commands
        cmd = typer.main.get_command_from_info(
            info, pretty_exceptions_short=True, rich_markup_mode=None
        )
        self[name] = cmd
        return cmd


class LazyGroup(TyperGroup):
    """A typer group whose sub-commands are imported when they are invoked or asked for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name: str):
        try:
            return self.commands[cmd_name]
        except KeyError:
            return None

    def format_commands(self, ctx, formatter) -> None:
        # The listing uses the short help kept here, so --help imports no command module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in COMMANDS.items()])


app = typer.Typer(
    name="cgalloc",
    cls=LazyGroup,
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


@app.callback()
def _root() -> None:
    """Keep ``cgalloc <command>`` a command group even while only one command is registered."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning cgalloc errors into one message and an exit status."""
    try:
        app(args=argv, prog_name="cgalloc", standalone_mode=True)
    except CgallocError as exc:
        for line in str(exc).splitlines():
            print(f"cgalloc: {line}", file=sys.stderr)
        sys.exit(exc.exit_code)
