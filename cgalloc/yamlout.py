"""YAML text for the shapes cgalloc prints, without importing PyYAML (~30 ms of a command).

``dump(data)`` is byte-identical to ``yaml.safe_dump(data, sort_keys=True,
default_flow_style=False)`` for dicts with str keys, lists, str, int, bool and None. What it
cannot promise to match (floats, other types, non-ASCII or multi-line strings, strings PyYAML
would fold at 80 columns, empty keys or keys of 128 characters or more, a container met twice)
raises :class:`Unsupported`, so the caller can hand that document to PyYAML instead.

The scalar rules follow PyYAML's emitter (``Emitter.analyze_scalar`` and
``choose_scalar_style``) and resolver (its implicit resolvers), restricted to printable ASCII.
"""

from __future__ import annotations

import re

from cgalloc.jsonout import plain_scalar

WIDTH = 80  # PyYAML's best_width: plain and quoted scalars with spaces fold past it
SIMPLE_KEY_MAX = 128  # longer keys are written as "? key" by PyYAML

# PyYAML resolver.py's implicit resolvers: (first characters, pattern). A string one of them
# matches would read back as another type, so it must be quoted.
_IMPLICIT = (
    ("yYnNtTfFoO", r"(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE"
     r"|on|On|ON|off|Off|OFF)"),
    ("-+0123456789.", r"(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?"
     r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*"
     r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))"),
    ("-+0123456789", r"(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)"
     r"|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)"),
    ("<", r"<<"),
    ("~nN", r"(?:~|null|Null|NULL)"),
    ("0123456789", r"(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
     r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?"
     r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)"),
    ("=", r"="),
    ("!&*", r"(?:!|&|\*)"),
)  # fmt: skip
_compiled: dict[str, re.Pattern[str]] = {}  # compiled on first use: compiling all costs ms


class Unsupported(TypeError):
    """A value this emitter does not promise to write as PyYAML would."""


def _resolves_to_other_type(s: str) -> bool:
    for first, pattern in _IMPLICIT:
        if s[0] in first:
            rx = _compiled.get(pattern) or _compiled.setdefault(pattern, re.compile(f"^{pattern}$"))
            if rx.match(s):
                return True
    return False


def _plain_allowed(s: str) -> bool:
    """PyYAML's ``allow_block_plain`` for a non-empty single-line printable-ASCII string."""
    if s[0] == " " or s[-1] == " " or s.startswith(("---", "...")):
        return False
    n = len(s)
    for i, ch in enumerate(s):
        followed_by_space = i + 1 >= n or s[i + 1] == " "
        if i == 0:
            if ch in "#,[]{}&*!|>'\"%@`":
                return False
            if ch in "?:-" and followed_by_space:
                return False
        elif (ch == ":" and followed_by_space) or (ch == "#" and s[i - 1] == " "):
            return False
    return True


def _scalar(value: object, column: int, key: bool = False) -> str:
    """One scalar as PyYAML writes it, starting at ``column`` of its line."""
    word = plain_scalar(value)
    if word is not None:
        return word
    if type(value) is not str:
        raise Unsupported(f"no YAML rule here for {type(value).__name__}")
    if not (value.isascii() and value.isprintable()) or (
        key and not 0 < len(value) < SIMPLE_KEY_MAX
    ):
        raise Unsupported("a string PyYAML escapes or writes as a complex key")
    if value and _plain_allowed(value) and not _resolves_to_other_type(value):
        out = value
    else:
        out = "'" + value.replace("'", "''") + "'"
    if not key and " " in value and column + len(out) > WIDTH:
        raise Unsupported("a string PyYAML folds at 80 columns")
    return out


def _is_block(value: object) -> bool:
    return type(value) in (dict, list) and bool(value)


class _Writer:
    """Lines of one document; containers seen, since PyYAML anchors one met twice."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.seen: set[int] = set()

    def container(self, value: object) -> None:
        if id(value) in self.seen:
            raise Unsupported("a container met twice (PyYAML writes an anchor and alias)")
        self.seen.add(id(value))

    def inline(self, value: object, column: int) -> str:
        """A scalar, or an empty container in flow style."""
        if type(value) in (dict, list):
            self.container(value)
            return "{}" if type(value) is dict else "[]"
        return _scalar(value, column)

    def block(self, value: dict | list, indent: int) -> None:
        """A non-empty container, each line starting at ``indent``."""
        self.container(value)
        pad, lines = " " * indent, self.lines
        if type(value) is dict:
            if any(type(k) is not str for k in value):
                raise Unsupported("mapping keys other than str")
            for k in sorted(value):
                v = value[k]
                head = pad + _scalar(k, indent, key=True) + ":"
                if not _is_block(v):
                    lines.append(f"{head} {self.inline(v, len(head) + 1)}")
                    continue
                lines.append(head)
                # PyYAML indents a mapping's values but not a sequence inside a mapping.
                self.block(v, indent + 2 if type(v) is dict else indent)
            return
        for item in value:
            if not _is_block(item):
                lines.append(f"{pad}- {self.inline(item, indent + 2)}")
                continue
            start = len(lines)
            self.block(item, indent + 2)
            lines[start] = f"{pad}- {lines[start][indent + 2 :]}"


def dump(data: object) -> str:
    """``yaml.safe_dump(data, sort_keys=True, default_flow_style=False)``, or Unsupported."""
    w = _Writer()
    if not _is_block(data):
        text = w.inline(data, 0)
        # PyYAML ends a document whose root is a plain scalar with an explicit "...".
        return f"{text}\n" if text[0] in "'{[" else f"{text}\n...\n"
    w.block(data, 0)
    return "\n".join(w.lines) + "\n"
