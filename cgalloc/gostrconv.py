"""Go's scalar syntax where the kubelet's inputs go through it: ``strconv.ParseInt`` (pflag's
integer flags) and go-yaml v2's resolution of plain YAML scalars (a KubeletConfiguration or a
pods file, decoded by sigs.k8s.io/yaml), which differs from PyYAML's YAML 1.1 rules."""

from __future__ import annotations

import math
import re

_GO_BASES = {"0x": 16, "0o": 8, "0b": 2}

# The decimal text strconv.ParseFloat takes, less its hex, inf and nan forms and the "_" it
# allows between digits (atof_test.go: "1_23.50_0_0e+1_2" is 1.235e+14), which the README lists
# as refused: the eviction thresholds' percentages and the CLI's float options (which add inf and
# nan themselves).
DECIMAL = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"


def parse_go_int(text: str, bits: int) -> int | str | None:
    """``text`` as strconv.ParseInt(text, 0, bits + 1) reads it, as pflag's Int32Var and
    Int64Var call it (go/src/strconv/atoi.go, step by step): the int, "range" when it does not
    fit, None for a syntax error. Which of the two comes first follows Go: "99999999999x" is
    out of range for an int32, "9x" is no integer."""
    neg = text[:1] == "-"
    magnitude = _parse_uint(text[1:] if text[:1] in ("+", "-") else text, bits + 1)
    if not isinstance(magnitude, int):
        return magnitude
    value = -magnitude if neg else magnitude
    return value if -(1 << bits) <= value < (1 << bits) else "range"


def _parse_uint(s: str, bit_size: int) -> int | str | None:
    """strconv.ParseUint(s, 0, bit_size): a 0x/0o/0b prefix or a leading 0 for octal, "_"
    between digits; its digit loop stops at the first problem, a byte that is no digit of the
    base (syntax) or a value past 2^bit_size - 1 (range)."""
    if not s:
        return None
    base, digits = 10, s
    if s[0] == "0":
        prefix = s[:2].lower()
        if len(s) >= 3 and prefix in _GO_BASES:
            base, digits = _GO_BASES[prefix], s[2:]
        else:
            base, digits = 8, s[1:]  # "0755" is octal in Go
    limit, n, underscores = (1 << bit_size) - 1, 0, False
    for byte in digits.encode("utf-8", "surrogatepass"):  # Go ranges over the bytes
        if byte == 0x5F:  # "_": its placement is judged after the loop
            underscores = True
            continue
        char = chr(byte).lower()
        digit = int(char, 36) if char.isascii() and char.isalnum() else base
        if digit >= base:
            return None
        n = n * base + digit
        if n > limit:
            return "range"
    return None if underscores and not _underscore_ok(s) else n


def _underscore_ok(s: str) -> bool:
    """strconv.underscoreOK: each "_" between two digits (a base prefix counts as one)."""
    saw, i = "^", 0
    hexadecimal = False
    if len(s) >= 2 and s[0] == "0" and s[1].lower() in "box":
        saw, i, hexadecimal = "0", 2, s[1].lower() == "x"
    for char in s[i:]:
        if char.isascii() and (char.isdigit() or (hexadecimal and char.lower() in "abcdef")):
            saw = "0"
        elif char == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


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
