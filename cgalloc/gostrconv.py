"""Go's scalar syntax where the kubelet's inputs go through it: ``strconv.ParseInt`` (pflag's
integer flags) and go-yaml v2's resolution of plain YAML scalars (a KubeletConfiguration or a
pods file, decoded by sigs.k8s.io/yaml), which differs from PyYAML's YAML 1.1 rules."""

from __future__ import annotations

import math
import re

# strconv.ParseInt(s, 0, bits), as pflag's Int32Var/Int64Var call it: ASCII digits only, an
# optional sign, a 0x/0o/0b prefix or a leading 0 for octal, "_" only between digits
_GO_INT = re.compile(
    r"[+-]?(?:0[xX](?:_?[0-9a-fA-F])+|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0(?:_?[0-7])*"
    r"|[1-9](?:_?[0-9])*)"
)
_GO_BASES = {"0x": 16, "0o": 8, "0b": 2}


def parse_go_int(text: str, bits: int) -> int | str | None:
    """``text`` as strconv.ParseInt(text, 0, bits + 1) reads it: the int, "range" when it
    does not fit, None when it is not an integer."""
    if not text.isascii() or not _GO_INT.fullmatch(text):
        return "range" if _overflows_first(text, bits) else None
    body = text.lstrip("+-").replace("_", "")
    prefix = body[:2].lower()
    if prefix in _GO_BASES:
        magnitude = int(body[2:], _GO_BASES[prefix])
    else:
        magnitude = int(body, 8 if body.startswith("0") else 10)  # "0755" is octal in Go
    value = -magnitude if text.startswith("-") else magnitude
    return value if -(1 << bits) <= value < (1 << bits) else "range"


def _overflows_first(text: str, bits: int) -> bool:
    """Whether ParseUint's digit loop, which stops at the first problem, meets one past
    2^(bits + 1) - 1 before a byte that is no digit: Go then says "out of range", not
    "invalid syntax" ("99999999999x" for an int32)."""
    s = text[1:] if text[:1] in ("+", "-") else text
    base = 10
    if s[:1] == "0":
        prefix = s[:2].lower()
        if len(s) >= 3 and prefix in _GO_BASES:
            base, s = _GO_BASES[prefix], s[2:]
        else:
            base, s = 8, s[1:]
    limit, n = (1 << (bits + 1)) - 1, 0
    for byte in s.encode("utf-8", "surrogatepass"):  # Go ranges over the bytes
        if byte == 0x5F:  # "_": its placement is judged after the loop, as syntax
            continue
        char = chr(byte).lower()
        digit = int(char, 36) if char.isascii() and char.isalnum() else 99
        if digit >= base:
            return False
        n = n * base + digit
        if n > limit:
            return True
    return False


# go-yaml v2 resolve.go (sigs.k8s.io/yaml's YAMLToJSON decodes with it): a plain scalar that
# starts with a sign or a digit is an int when strconv.ParseInt(s without "_", 0, 64) or
# ParseUint reads it, else a float when it has yamlStyleFloat's shape and ParseFloat reads it
# in range, else a string; one that starts with "." is a float when ParseFloat reads it; the
# words of resolveMap are bools, nulls and the special floats. PyYAML (YAML 1.1) differs:
# "1e3" and "1.5e3" are strings there, "1:30" an int, "08" a string, "y"/"n" strings.
GO_YAML_WORDS: dict[str, object] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "on", "On", "ON"), True),
    **dict.fromkeys(("true", "True", "TRUE"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "off", "Off", "OFF"), False),
    **dict.fromkeys(("false", "False", "FALSE"), False),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
}
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")  # what ParseFloat takes after "."


def go_yaml_scalar(text: str) -> object:
    """The value go-yaml v2 resolves the plain scalar ``text`` to (one whose first character
    is a sign, a digit, "." or one of resolveMap's words); ``text`` itself when a string."""
    if text in GO_YAML_WORDS:
        return GO_YAML_WORDS[text]
    if text.startswith("."):
        return float(text) if _DOT_FLOAT.fullmatch(text) else text
    plain = text.replace("_", "")
    number = parse_go_int(plain, 63)
    if number == "range" and plain[:1] not in "+-":
        number = parse_go_int(plain, 64)  # ParseUint: up to 2^64 - 1
    if isinstance(number, int):
        return number
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        value = float(plain)
        if not math.isinf(value):  # ParseFloat's ErrRange
            return value
    return text
