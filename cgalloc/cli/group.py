"""The typer app: a lazy command group, and typer's coercion replaced by cgalloc's plain one.

Each sub-command lives in its own module and registers itself with ``register(app)``. Modules are
imported only when their command runs (a lazy command group): ``cgalloc show`` pays for what
``show`` uses, and ``cgalloc --help`` for typer alone.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

import typer
import typer.main
from typer.core import TyperGroup

from cgalloc.cli import COMMANDS
from cgalloc.cli.optspec import Invalid, converter


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
        _plain_coercion(cmd)
        _sectioned_help(cmd, getattr(module, "EXAMPLES", ()))
        self[name] = cmd
        return cmd


def _sectioned_help(cmd, examples: tuple[str, ...]) -> None:
    """``cmd``'s help with its options under their panels (the node inputs apart from
    cgalloc's own options) and its examples last, as written (click would rewrap them)."""

    def format_options(ctx, formatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in cmd.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                # typer appends the type to the metavar ("bash|zsh|fish <bash|zsh|fish>")
                sections.setdefault("Arguments", []).append((param.metavar, record[1]))
                continue
            panel = getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(panel, []).append(record)
        order = {"Arguments": 0, "Options": 1}  # then the panels: tree options, node inputs
        for panel in sorted(sections, key=lambda p: order.get(p, 2)):
            with formatter.section(panel):
                formatter.write_dl(sections[panel])

    def format_epilog(ctx, formatter) -> None:
        if examples:
            with formatter.section("Examples"):
                for line in examples:
                    formatter.write(f"{' ' * formatter.current_indent}{line}\n")

    cmd.format_options = format_options
    cmd.format_epilog = format_epilog


@functools.cache
def _plain_param_class() -> type | None:
    """typer's RuntimeParam with a plain converter; None for a typer without that layer.

    A plain subclass, not a dataclass: building a dataclass compiles its methods, about 1.5 ms
    per class in every process.
    """
    try:
        from typer._coercion import RuntimeParam
    except ImportError:
        return None

    class Plain(RuntimeParam):
        def __init__(self, parameter_info, annotation, convert: Callable[[object], object]):
            super().__init__(parameter_info, annotation)
            object.__setattr__(self, "convert", convert)  # RuntimeParam is frozen

        def _coerce_value(self, value, param, ctx):
            try:
                return self.convert(value)
            except Invalid as exc:
                raise typer.BadParameter(str(exc)) from None

    return Plain


def _plain_coercion(cmd) -> None:
    """Give each simple option of ``cmd`` (and its help option) a plain converter.

    typer coerces every parameter value through a pydantic TypeAdapter it builds on first use,
    which imports pydantic: about 0.15 s per process, more than ``show`` computes. Parameters
    with any other annotation, or a typer without this layer, keep typer's own coercion.
    """
    plain_param = _plain_param_class()
    if plain_param is None:
        return

    def plain(param) -> None:
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", False) is not None:
            return
        convert = None if desc.file_annotation is not None else converter(desc.annotation)
        if convert is not None:
            param._runtime_param = plain_param(desc.parameter_info, desc.annotation, convert)

    for param in cmd.params:
        plain(param)
    help_option = cmd.get_help_option  # built on first use, per command

    def get_help_option(ctx):
        option = help_option(ctx)
        if option is not None:
            plain(option)
        return option

    cmd.get_help_option = get_help_option


class LazyGroup(TyperGroup):
    """A typer group whose sub-commands are imported when they are invoked or asked for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)
        self._coerced = False

    def make_context(self, *args, **kwargs):
        # typer adds the completion options after __init__: convert them too, once
        if not self._coerced:
            self._coerced = True
            _plain_coercion(self)
        return super().make_context(*args, **kwargs)

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
    add_completion=True,  # typer imports its completion code anyway: the options cost nothing
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
