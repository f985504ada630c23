"""Indented JSON at C-encoder speed: ``dump(data)`` is byte-identical to
``json.dumps(data, indent=2, sort_keys=True)``.

With ``indent`` the json module drops to its pure-Python encoder (generators per node), which
was the largest cost of ``setup -o json`` on a 1000-pod plan. Here containers are joined in one
pass and strings go through the C ``encode_basestring_ascii``; anything the fast path does not
know (a non-string key, a float, another type) is handed to the json module whole, so the
output never differs from it. :class:`Encoded` carries a value's text made ahead of time (setup
encodes its report while the core makes the changes), placed as it is where it fits.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _string


class _Other(Exception):
    """The value holds something only the json module should encode."""


class Encoded:
    """``value`` with its text as it is written at nesting ``depth`` (0: the document itself),
    made now: :func:`dump` writes that text where the value sits at that depth, and encodes the
    value again anywhere else. Either way the output is the plain value's."""

    __slots__ = ("_make", "_value", "pad", "text")

    def __init__(self, value: object, depth: int) -> None:
        self._value, self._make = value, None
        self.pad = "\n" + "  " * depth
        try:
            self.text: str | None = _encode(value, self.pad)
        except (_Other, RecursionError):  # the json module's to encode, in its place
            self.text = None

    @classmethod
    def ahead(cls, text: str, depth: int, make: Callable[[], object]) -> Encoded:
        """The text of a value made elsewhere (exactly :func:`dump`'s at ``depth``), and
        ``make`` to build the value itself only where the text does not fit."""
        out = cls.__new__(cls)
        out._value, out._make, out.pad, out.text = None, make, "\n" + "  " * depth, text
        return out

    @property
    def value(self) -> object:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value

    def deeper(self) -> Encoded:
        """The same value with its text as written one level deeper, without encoding it
        again: each line break gains one indent (JSON text holds no raw newline in a string)."""
        out = Encoded.__new__(Encoded)
        out._value, out._make, out.pad = self._value, self._make, self.pad + "  "
        out.text = None if self.text is None else self.text.replace("\n", "\n  ")
        return out


def _encode(value: object, pad: str) -> str:
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is dict:
        if not value:
            return "{}"
        inner = pad + "  "
        try:
            keys = sorted(value)
        except TypeError:
            raise _Other from None
        parts = []
        for key in keys:
            if type(key) is not str:
                raise _Other
            parts.append(_string(key) + ": " + _encode(value[key], inner))
        return "{" + inner + ("," + inner).join(parts) + pad + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        inner = pad + "  "
        return "[" + inner + ("," + inner).join([_encode(v, inner) for v in value]) + pad + "]"
    if kind is Encoded:
        if value.pad == pad and value.text is not None:
            return value.text
        return _encode(value.value, pad)
    word = plain_scalar(value)
    if word is None:
        raise _Other
    return word


def plain_scalar(value: object) -> str | None:
    """null, true, false or an int's digits — written alike in JSON and YAML; None otherwise."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return int.__repr__(value)
    return None


def dump(data: object) -> str:
    """``data`` as ``json.dumps(data, indent=2, sort_keys=True)`` gives it."""
    try:
        return _encode(data, "\n")
    except (_Other, RecursionError):
        return json.dumps(data, indent=2, sort_keys=True, default=_plain)


def _plain(value: object) -> object:
    """The json module's ``default``: an Encoded is its value; anything else is refused as the
    json module refuses it."""
    if type(value) is Encoded:
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
