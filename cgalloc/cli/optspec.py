"""Options as data, and the converters of their values; no typer here.

An :class:`Opt` becomes a typer option in ``cgalloc/cli/signature.py``. The converters take the
place of typer's pydantic coercion (``cgalloc/cli/group.py``), whose import would cost more
than ``show`` computes.
"""

from __future__ import annotations

import enum
import functools
import re
import types
import typing
from collections.abc import Callable
from typing import Any, NamedTuple


class Opt(NamedTuple):
    """One option of a command, as typer.Option takes it, with the parameter's type."""

    name: str  # the command function's parameter
    decls: tuple[str, ...]
    annotation: Any  # str, int, float, bool, an Enum, or one of those | None
    default: object
    help: str
    metavar: str | None = None
    callback: Callable[[Any], Any] | None = None  # the value -> the value the command gets
    panel: str | None = None  # typer's rich_help_panel


class Invalid(ValueError):
    """A value the option's type does not take; the text is typer's sentence for it."""


@functools.cache
def _number_text(kind: type) -> re.Pattern[str]:
    """The text an int or float option takes: ASCII decimal only, where Python's int() and
    float() also take "1_0", " 5" and other scripts' digits."""
    if kind is int:
        return re.compile(r"[+-]?[0-9]+")
    # plain decimal, narrower than Go's ParseFloat (no hex, no "_"); inf and nan pass, for the
    # option's own range check to name them in one sentence
    return re.compile(
        r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|nan)", re.I
    )


def _number(kind: type, what: str) -> Callable[[object], object]:
    article = "an" if kind is int else "a"

    def convert(value: object) -> object:
        try:
            if isinstance(value, str) and not _number_text(kind).fullmatch(value):
                raise ValueError(value)
            return kind(value)
        except (TypeError, ValueError):
            raise Invalid(
                f"Input should be a valid {what}, unable to parse string as {article} {what}"
            ) from None

    return convert


def _choice(kind: type[enum.Enum]) -> Callable[[object], object]:
    def convert(value: object) -> object:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in kind)
            raise Invalid(f"{value!r} is not one of {allowed}.") from None

    return convert


def converter(annotation: object) -> Callable[[object], object] | None:
    """A plain converter, with typer's messages, for the annotations cgalloc's options use;
    None for any other annotation."""
    if annotation in (str, bool):
        return annotation  # type: ignore[return-value]
    if annotation is int:
        return _number(int, "integer")
    if annotation is float:
        return _number(float, "number")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _choice(annotation)
    if typing.get_origin(annotation) is list and typing.get_args(annotation) == (str,):
        return lambda v: [str(x) for x in v]
    return None


def without_none(annotation: object) -> object:
    """``X`` of ``X | None``; any other annotation as it is."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation
