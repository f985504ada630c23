"""Output for every command: the ``--output`` option and the table / JSON / YAML emitters."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Sequence

from cgalloc.cli.optspec import Opt


class OutputFormat(str, enum.Enum):
    """How a command prints its result."""

    table = "table"
    json = "json"
    yaml = "yaml"


OUTPUT_HELP = (
    "Output format: table (human-readable, kubectl-describe layout), json or yaml"
    " (stable sorted keys, quantities as canonical strings)."
)


# The shared ``--output/-o`` option (default: table).
OUTPUT = Opt("output", ("--output", "-o"), OutputFormat, OutputFormat.table, OUTPUT_HELP)


def aligned(rows: Sequence[Sequence[str]], padding: int = 2) -> list[str]:
    """Rows as lines with columns aligned like Go's tabwriter (cell width + ``padding``).

    The last cell of a row is never padded, so no line has trailing spaces.
    """
    widths: dict[int, int] = {}
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths.get(i, 0), len(cell))
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i] + padding) for i, cell in enumerate(row[:-1])]
        lines.append("".join([*cells, row[-1]]) if row else "")
    return lines


def dumps(data: object, fmt: OutputFormat, compact: bool = False) -> str:
    """``data`` as JSON or YAML text with sorted keys; ``compact`` JSON is one line, as the
    kubelet's /stats/summary answers."""
    if fmt is OutputFormat.json:
        if compact:
            return json.dumps(data, sort_keys=True, separators=(",", ":"))
        return json.dumps(data, sort_keys=True, indent=2)
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=True, default_flow_style=False).rstrip("\n")


def printable(text: str) -> str:
    """``text`` for a terminal: each character that is not printable written as its escape
    (``\x1b``, ``\x85``, ``\u2028``), but for the newlines between its lines and the bytes
    that are not UTF-8 (surrogate escapes), which go out as the bytes the kernel holds. Messages,
    plans and tables quote cgroup names, which may hold any byte but '/' and NUL: a name must
    not move the cursor, recolour the screen or split a line (str.splitlines splits at
    ``\x85`` and ``\x1c``)."""
    lines = text.split("\n")
    if all(map(str.isprintable, lines)):  # a 1000-pod table: C speed, no loop per character
        return text
    return "\n".join(
        line if line.isprintable() else "".join(map(_shown_char, line)) for line in lines
    )


def _shown_char(c: str) -> str:
    return c if c.isprintable() or "\udc80" <= c <= "\udcff" else repr(c)[1:-1]


def emit(data: object, fmt: OutputFormat, table: Callable[[], str]) -> None:
    """Print ``data`` in ``fmt``; ``table`` renders the human-readable form."""
    echo(printable(table()) if fmt is OutputFormat.table else dumps(data, fmt))


def echo(text: str, err: bool = False) -> None:
    """``text`` and a newline on stdout (stderr with ``err``), flushed: each ``stats --watch``
    sample reaches a pipe when it is taken."""
    import typer

    typer.echo(text, err=err)


def warn(messages: Sequence[str], kind: str = "warning") -> None:
    """Warnings (or notes, with ``kind``) go to stderr so stdout stays machine-readable."""
    for message in messages:
        echo(f"cgalloc: {kind}: {printable(message)}", err=True)
