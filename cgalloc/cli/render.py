"""Output for every command: the ``--output`` option and the table / JSON / YAML emitters."""

from __future__ import annotations

import codecs
import enum
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cgalloc.cli.optspec import Opt

if TYPE_CHECKING:
    import typer


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


def output_option() -> typer.models.OptionInfo:
    """:data:`OUTPUT` as typer's option."""
    from cgalloc.cli.signature import typer_option

    return typer_option(OUTPUT)


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
    """``data`` as JSON or YAML text with sorted keys.

    ``compact`` JSON is one line, as the kubelet's /stats/summary answers; it goes through the
    json module's C encoder, ~10x faster than the indenting one on a 1000-pod summary.
    """
    if fmt is OutputFormat.json:
        if compact:
            return json.dumps(data, sort_keys=True, separators=(",", ":"))
        from cgalloc import jsonout  # the indenting json encoder is pure Python: ~2x slower

        return jsonout.dump(data)
    from cgalloc import yamlout  # PyYAML's bytes without its import; it for the rest

    try:
        return yamlout.dump(data).rstrip("\n")
    except yamlout.Unsupported:
        import yaml

        return yaml.safe_dump(data, sort_keys=True, default_flow_style=False).rstrip("\n")


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
    if fmt is OutputFormat.json and sys.stdout is not None:
        # JSON text is ASCII with every control character escaped, so the ANSI codes
        # click.echo looks for off a terminal cannot be in it; its scan of a 1000-pod setup
        # report (~5 MB) cost as much again as writing it
        sys.stdout.write(dumps(data, fmt) + "\n")
        sys.stdout.flush()
        return
    echo(printable(table()) if fmt is OutputFormat.table else dumps(data, fmt))


def echo(text: str, err: bool = False) -> None:
    """``text`` and a newline on stdout (stderr with ``err``), flushed, as ``click.echo``
    writes them: each ``stats --watch`` sample reaches a pipe when it is taken, and a stream
    whose encoding is ASCII (``PYTHONIOENCODING=ascii``, an ASCII locale) gets UTF-8, as
    click rewraps such a stream, where writing the text would raise UnicodeEncodeError (or
    escape it, on stderr). Without click's scan for ANSI codes to strip off a terminal: the
    text cgalloc prints has none (:func:`printable` escapes ESC, JSON and YAML escape every
    control character; ``stats --watch`` clears the screen only on a terminal)."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # as click.echo: no stream, nothing written
        return
    line = text + "\n"
    raw = getattr(stream, "buffer", None)
    if raw is not None and not line.isascii() and _ascii(stream):
        stream.flush()
        raw.write(line.encode("utf-8", "surrogateescape"))
    else:
        stream.write(line)
    stream.flush()


def _ascii(stream: object) -> bool:
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return False


def warn(messages: Sequence[str]) -> None:
    """Warnings go to stderr so stdout stays machine-readable."""
    for message in messages:
        echo(f"cgalloc: warning: {printable(message)}", err=True)
