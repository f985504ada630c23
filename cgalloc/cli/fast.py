"""``cgalloc stats`` without typer: its command lines in the common forms, read here.

Importing typer is about 30 ms of CPU, a sixth of a 1000-pod ``stats -o json``, and the
command's typer object costs more to build than this parse. So :func:`stats_command` reads a
``stats`` line itself from the same option tables typer's command is built from
(``stats.OPTIONS``, the node inputs), converts each value with the same converters and
callbacks, and calls the same function. It gives up (None) on anything outside these forms,
and typer then runs the line as before, with its help and its usage errors:

- ``--name value``, ``--name=value``, ``-o value``; the last of an option given twice counts,
  a repeatable one keeps every value in order;
- a switch bare (``--no-headers``); the kubelet's boolean flags bare or ``--flag=value``, made
  ``--flag=true`` first by the same rule typer's path applies (``inputs.pflag_bools``).

Given up on: an option not in the tables (``--help`` too), a positional argument, ``--`` where
an option would be, a switch given a value, what ``pflag_bools`` refuses (a boolean flag
followed by a true/false word), a value an option's converter or callback refuses (typer's
path says why), and shell completion. ``tests/test_cli_fast.py`` holds the two parsers
to the same values for every line this one accepts.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cgalloc.cli.optspec import Opt, converter, without_none


def stats_command(args: Sequence[str]) -> Callable[[], None] | None:
    """The call that runs ``cgalloc stats *args``, or None for typer's path."""
    from cgalloc.cli import COMPLETE_VAR, inputs, stats

    if os.environ.get(COMPLETE_VAR):
        return None
    given = parse(args, stats.OPTIONS, inputs._OPTIONS)
    if given is None:
        return None
    try:
        values = table_values(stats.OPTIONS, given)
    except Exception:  # refused here: typer's path says why, in its own words
        return None
    node = inputs.node_inputs_from({o.name: given.get(o.name) for o in inputs._OPTIONS})
    return lambda: stats.run_stats(node, **values)


def parse(args: Sequence[str], table: Sequence[Opt], node: Sequence[Any]) -> dict[str, Any] | None:
    """Each given option's text by parameter name (a list for a repeatable one; True for a
    switch), or None for a line in another form. The kubelet's boolean flags are first made
    ``--flag=true`` by the rule typer's path applies (``pflag_bools``); what it refuses is
    left to that path to say."""
    from cgalloc.cli.inputs import pflag_bools
    from cgalloc.errors import InputError

    try:
        args = pflag_bools(list(args))
    except InputError:
        return None
    kinds: dict[str, tuple[str, bool, bool]] = {}  # decl -> (name, switch, repeatable)
    for o in table:
        kinds.update((d, (o.name, without_none(o.annotation) is bool, False)) for d in o.decls)
    for o in node:
        kinds.update((d, (o.name, False, o.multiple)) for d in o.decls)
    given: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        decl, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if decl not in kinds:
            return None
        name, switch, repeatable = kinds[decl]
        if switch:
            if eq:
                return None
            text: Any = True
        elif eq:
            text = value
        elif i < len(args):  # the next word, whatever it looks like, as click takes it
            text = args[i]
            i += 1
        else:
            return None
        if repeatable:
            given.setdefault(name, []).append(text)
        else:
            given[name] = text
    return given


def table_values(table: Sequence[Opt], given: dict[str, Any]) -> dict[str, Any]:
    """The value of each option of ``table``, as typer hands it to the command: converted (the
    default too), then through the option's callback."""
    out = {}
    for o in table:
        value = given.get(o.name, o.default)
        if value is not None:
            convert = converter(without_none(o.annotation))
            value = convert(value) if convert is not None else value
        out[o.name] = o.callback(value) if o.callback is not None else value
    return out


def invoke(call: Callable[[], None]) -> None:
    """``call`` as typer's standalone mode runs a command: it ends in SystemExit, 0 when the
    call returns; end of input is "Aborted!" and 1, Ctrl-C a quiet 130, a closed pipe a quiet
    1 (stdout and stderr then flush without EPIPE, as click's PacifyFlushWrapper makes them)."""
    try:
        call()
    except EOFError:
        print(file=sys.stderr)
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout, sys.stderr = _Pacified(sys.stdout), _Pacified(sys.stderr)
        sys.exit(1)
    sys.exit(0)


class _Pacified:
    """A stream whose flush ignores a closed pipe: the exit's flush has nowhere to go."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
