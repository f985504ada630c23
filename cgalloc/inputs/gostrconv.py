"""Go's scalar syntax where the kubelet's inputs go through it: ``strconv.ParseInt`` (pflag's
integer flags) and go-yaml v2's resolution of plain YAML scalars (a KubeletConfiguration or a
pods file, decoded by sigs.k8s.io/yaml), which differs from PyYAML's YAML 1.1 rules."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

_GO_BASES = {"0x": 16, "0o": 8, "0b": 2}

# What Go's strings.TrimSpace trims (unicode.IsSpace): Python's str.strip() also takes the
# separators \x1c-\x1f, which Go keeps ("10%\x1c" stays no percentage to the kubelet).
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)


def trim_space(text: str) -> str:
    """Go's ``strings.TrimSpace``, as the kubelet's map and pair flags trim keys and values."""
    return text.strip(GO_SPACE)


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


# The IEEE binary formats strconv.ParseFloat rounds to, by its bitSize: significand bits, the
# exponent of the smallest denormal's unit, and the power of two the largest finite value is below.
_FLOAT_FORMATS = {32: (24, -149, 128), 64: (53, -1074, 1024)}
# Beyond these decimal or binary magnitudes a value is surely out of range or surely rounds to
# zero: checked before building big integers for it (1e-99999 must not build 10**99999).
_DECIMAL_BOUNDS = {32: (-46, 40), 64: (-324, 310)}
_BINARY_BOUNDS = {32: (-150, 129), 64: (-1075, 1025)}
# Go's decimal slow path keeps 800 digits and a truncation flag: enough to round any halfway
# case of float64 (those have up to 768 significant digits); a sticky 1 stands for the flag.
_MAX_DIGITS = 800
_INFINITIES = ("inf", "infinity")


def parse_go_float(text: str, bits: int) -> float | str | None:
    """``text`` as strconv.ParseFloat(text, bits) reads it (go/src/strconv/atof.go: special,
    readFloat, underscoreOK): decimal or hex ("0x1p-3") floats, "_" between digits, "inf",
    "infinity" (any case, signed) and "nan" (unsigned), correctly rounded half to even to a
    float of ``bits`` (32 or 64). Returns the float, "range" when it rounds past the largest
    finite one (Go's ErrRange), None for a syntax error; at or below half the smallest denormal
    it is a signed zero, as in Go.

    One difference: past 800 significant digits before the point (:func:`go_may_misread`), Go's
    fallback (decimal.set, taken when its fast paths give up) loses the point's place and can
    give another value; this gives the exact one."""
    lowered = text.lower() if text.isascii() else ""  # Go folds ASCII letters only
    unsigned = lowered[1:] if lowered[:1] in ("+", "-") else lowered
    if unsigned in _INFINITIES:
        return -math.inf if lowered[:1] == "-" else math.inf
    if lowered == "nan":
        return math.nan
    read = _read_float(text)
    if read is None:
        return None
    value = _round_float(read.hexadecimal, read.digits, read.exponent, bits)
    return "range" if value is None else (-value if read.neg else value)


def go_may_misread(text: str) -> bool:
    """Whether ``text`` is a decimal float with more than 800 significant digits (leading zeros
    and "_" not counted) before its point, which Go's ParseFloat can read as another value
    (see :func:`parse_go_float`)."""
    read = _read_float(text)
    return read is not None and not read.hexadecimal and read.whole > _MAX_DIGITS


class _Float(NamedTuple):
    neg: bool
    hexadecimal: bool
    digits: str  # significant: no leading zeros, at most _MAX_DIGITS and a sticky digit
    exponent: int  # of the last digit's unit: a power of 10, or of 2 in hex
    whole: int  # digits before the point, leading zeros not counted


def _read_float(s: str) -> _Float | None:
    """readFloat over all of ``s``; None when ``s`` is not wholly a float."""
    start = i = 1 if s[:1] in ("+", "-") else 0
    n = len(s)
    neg = s[:1] == "-"
    hexadecimal = i + 2 < n and s[i] == "0" and s[i + 1] in "xX"
    if hexadecimal:
        i += 2
    digit_chars = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
    underscores = saw_dot = saw_digits = False
    digits: list[str] = []
    dot = 0  # digits before the point, leading zeros counting down (readFloat's dp)
    while i < n:
        c = s[i]
        if c == "_":
            underscores = True
        elif c == ".":
            if saw_dot:
                break
            saw_dot, dot = True, len(digits)
        elif c in digit_chars:
            saw_digits = True
            if c == "0" and not digits:
                dot -= 1
            else:
                digits.append(c)
        else:
            break
        i += 1
    if not saw_digits:
        return None
    if not saw_dot:
        dot = len(digits)
    exponent = 0
    if i < n and s[i] in ("pP" if hexadecimal else "eE"):
        i += 1
        sign = -1 if s[i : i + 1] == "-" else 1
        if s[i : i + 1] in ("+", "-"):
            i += 1
        if i >= n or not "0" <= s[i] <= "9":
            return None
        while i < n and ("0" <= s[i] <= "9" or s[i] == "_"):
            if s[i] == "_":
                underscores = True
            elif exponent < 10000:  # Go's cap, kept for Go's answers (golang/go#42436)
                exponent = exponent * 10 + int(s[i])
            i += 1
        exponent *= sign
    elif hexadecimal:
        return None  # a hex float must have its p exponent
    if i != n or (underscores and not _underscore_ok(s[start:])):
        return None
    scale = 4 if hexadecimal else 1
    exponent += scale * (dot - len(digits))
    if len(digits) > _MAX_DIGITS:
        rest = digits[_MAX_DIGITS:]
        exponent += scale * (len(rest) - 1)
        digits = [*digits[:_MAX_DIGITS], "1" if rest.count("0") < len(rest) else "0"]
    return _Float(neg, hexadecimal, "".join(digits), exponent, dot)


def _round_float(hexadecimal: bool, digits: str, exponent: int, bits: int) -> float | None:
    """digits * base**exponent (base 2 in hex, whose digits are of 16, else 10) rounded half
    to even to a float of ``bits``; None past its largest finite value."""
    if not digits:
        return 0.0
    mantissa = int(digits, 16 if hexadecimal else 10)
    low, high = (_BINARY_BOUNDS if hexadecimal else _DECIMAL_BOUNDS)[bits]
    magnitude = (mantissa.bit_length() if hexadecimal else len(digits)) + exponent
    if magnitude >= high:
        return None
    if magnitude <= low:
        return 0.0
    power = 1 << abs(exponent) if hexadecimal else 10 ** abs(exponent)
    num, den = (mantissa * power, 1) if exponent >= 0 else (mantissa, power)
    precision, min_exp, max_exp = _FLOAT_FORMATS[bits]
    # floor(log2(num / den)), then the unit that leaves `precision` bits above it
    log2 = num.bit_length() - den.bit_length()
    if (num << -log2 if log2 < 0 else num) < (den << log2 if log2 > 0 else den):
        log2 -= 1
    unit = max(log2 - (precision - 1), min_exp)
    scaled_num, scaled_den = (num, den << unit) if unit >= 0 else (num << -unit, den)
    significand, rest = divmod(scaled_num, scaled_den)
    if 2 * rest > scaled_den or (2 * rest == scaled_den and significand & 1):
        significand += 1
    if significand.bit_length() + unit > max_exp:
        return None
    return math.ldexp(significand, unit)


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


def go_yaml_scalar(text: str) -> object:
    """The value go-yaml v2 resolves the plain scalar ``text`` to (one whose first character
    is a sign, a digit, "." or one of resolveMap's words); ``text`` itself when a string."""
    if text in GO_YAML_WORDS:
        return GO_YAML_WORDS[text]
    if text.startswith("."):
        value = parse_go_float(text, 64)  # as it stands: ".1_5" is 0.15
        return value if isinstance(value, float) else text
    plain = text.replace("_", "")
    number = parse_go_int(plain, 63)
    if number == "range" and plain[:1] not in "+-":
        number = parse_go_int(plain, 64)  # ParseUint: up to 2^64 - 1
    if isinstance(number, int):
        return number
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        if go_may_misread(plain):  # the loader turns it into "holds a value out of range"
            raise ValueError(
                "a number with more than 800 significant digits before its point, which the"
                " kubelet's YAML decoder can misread"
            )
        value = parse_go_float(plain, 64)
        if isinstance(value, float):  # not ErrRange
            return value
    return text
