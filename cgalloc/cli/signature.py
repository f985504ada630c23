"""Typer signatures built from option tables: the node inputs (``@node_inputs``) and a
command's own :class:`~cgalloc.cli.optspec.Opt` table (``@options``). The tables are data
(``cgalloc/cli/inputs.py``, ``optspec``); this is the one place they become typer options."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any

import typer
from typer.core import TyperCommand

from cgalloc.cli.inputs import _OPTIONS, _PANEL, _Opt, node_inputs_from, pflag_bools
from cgalloc.cli.optspec import Opt


class NodeInputsCommand(TyperCommand):
    """A command with the node inputs: its kubelet boolean flags parse as pflag parses them."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, pflag_bools(list(args)))


def add_options(
    command: Callable[..., object],
    name: str,
    params: Sequence[inspect.Parameter],
    build: Callable[..., object],
    context: str | None = None,
) -> Callable[..., object]:
    """Replace ``command``'s parameter ``name`` by the keyword options ``params``; the command
    gets ``build({param name: value})`` as ``name`` (``build(values, ctx)`` with the
    ``context`` parameter's value when one is named). Decorators built on this stack."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command)
    kept = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name != name
    ]
    names = [p.name for p in params]
    every = kept + list(params)

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> object:
        values = {n: kwargs.pop(n, None) for n in names}
        built = build(values) if context is None else build(values, kwargs.get(context))
        return command(*args, **{name: built}, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=every)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in every}
    return wrapper


def _parameter(opt: _Opt) -> inspect.Parameter:
    if opt.switch:
        option = typer.Option(False, *opt.decls, help=opt.help, rich_help_panel=_PANEL)
        return inspect.Parameter(
            opt.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=bool
        )
    annotation = list[str] | None if opt.multiple else str | None
    option = typer.Option(
        None,
        *opt.decls,
        help=opt.help,
        metavar=opt.metavar,
        rich_help_panel=_PANEL,
        show_default=False,
    )
    return inspect.Parameter(
        opt.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


# The command's context, for a command without one of its own: the node inputs act on the
# host the command does (ctx.obj). typer hands a context to one parameter only.
_CONTEXT = "node_inputs_context"


def node_inputs(command: Callable[..., object]) -> Callable[..., object]:
    """Give a typer command the shared node-input options as one ``inputs: NodeInputs``."""
    hints = typing.get_type_hints(command)
    own = next((name for name, hint in hints.items() if hint is typer.Context), None)
    params = [_parameter(opt) for opt in _OPTIONS]
    if own is None:
        params.insert(
            0,
            inspect.Parameter(
                _CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context
            ),
        )
    context = own or _CONTEXT

    def build(values: dict[str, Any], ctx: object) -> object:
        ctx = values.pop(_CONTEXT, None) or ctx
        return node_inputs_from(values, getattr(ctx, "obj", None))

    return add_options(command, "inputs", params, build, context=context)


def typer_option(opt: Opt) -> typer.models.OptionInfo:
    """``opt`` as typer's option (the parameter's default)."""
    return typer.Option(
        opt.default, *opt.decls, help=opt.help, metavar=opt.metavar, callback=opt.callback,
        rich_help_panel=opt.panel,
    )  # fmt: skip


def options(table: Sequence[Opt]) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """Give a typer command the options of ``table`` as one ``values`` parameter, a dict by
    parameter name."""

    def add(command: Callable[..., object]) -> Callable[..., object]:
        params = [
            inspect.Parameter(
                o.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=typer_option(o),
                annotation=o.annotation,
            )
            for o in table
        ]
        return add_options(command, "values", params, dict)

    return add
