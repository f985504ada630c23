"""Kubernetes ``resource.Quantity`` with exact integer arithmetic.

Mirrors apimachinery's pkg/api/resource (quantity.go, suffix.go, amount.go):

* parsing accepts ``<signedNumber><suffix>`` exactly as upstream's scanner does, including its
  quirks (``"1."``, ``".5"``, ``"1.G"``, and a bare sign or ``"."`` meaning zero);
* a parsed value is rounded up, away from zero, to nano (1e-9); a BinarySI value is capped at
  2^63-1 and one strictly between 0 and 1 becomes DecimalSI;
* ``str()`` is upstream's canonical form (``CanonicalizeBytes``);
* ``value()``/``milli_value()`` round away from zero like ``Value()``/``MilliValue()``.

Deliberate differences, all outside what a kubelet flag or config can reach in practice:
``str()`` always emits the canonical form (upstream echoes an already-canonical-looking input
such as ``"+1"`` or ``"1.500"`` verbatim); numbers are limited to 1000 digits and exponents to
±1000 (upstream's big-decimal maths would exhaust memory long before its limits); BinarySI
values above 1023Ei keep their magnitude when formatted (upstream drops the suffix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"
FORMATS = (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT)

NANO = 10**9
MAX_BINARY_SI = 2**63 - 1  # upstream's maxAllowed, in whole units
MAX_DIGITS = 1000
MAX_EXPONENT = 1000

_DECIMAL_SUFFIXES = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip
_DECIMAL_SUFFIX_FOR = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX_FOR = {exp // 10: suffix for suffix, exp in _BINARY_SUFFIXES.items()}
_BINARY_SUFFIX_FOR[0] = ""

# The same shape upstream's hand-written scanner accepts; ASCII digits only, and fullmatch so
# that a trailing newline is not silently allowed.
# The suffix never starts with a digit (the number's digits are greedy): without the lookahead a
# failing match gave digits back one at a time, quadratic in the length (32 s for 100,000).
_SPLIT = re.compile(
    r"([+-]?)([0-9]*)(?:\.([0-9]*))?((?![0-9])[eEinumkKMGTP]*[+-]?[0-9]*)", re.ASCII
)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)", re.ASCII)

ACCEPTED_FORM = (
    "a quantity is an optionally signed decimal number (such as 1, 0.5, .5 or -2) followed by"
    " at most one suffix: n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent"
    " e<integer>/E<integer> (for example 100m, 1.5Gi, 12e6)"
)


class QuantityError(ValueError):
    """A string is not a Kubernetes quantity; the message says what is accepted."""

    def __init__(self, text: str, problem: str):
        self.text = text
        self.problem = problem
        super().__init__(f"{text!r} {problem}; {ACCEPTED_FORM}")


def _round_away(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded away from zero (``denominator`` > 0)."""
    magnitude = -(-abs(numerator) // denominator)
    return -magnitude if numerator < 0 else magnitude


def _strip_factors(value: int, base: int) -> tuple[int, int]:
    """Remove every factor ``base`` from a non-zero ``value``: ``(rest, count)``."""
    count = 0
    while value % base == 0:
        value //= base
        count += 1
    return value, count


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, str]:
    """``(base, exponent, fmt)`` for a suffix, in upstream's order: tables, then exponent."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    match = _EXPONENT.fullmatch(suffix)
    if match is None:
        raise QuantityError(text, f"has an unknown suffix {suffix!r}")
    # Check the size before int(): a huge digit string would hit Python's int() length limit.
    signed = match.group(1)
    digits = signed.lstrip("+-").lstrip("0") or "0"
    exponent = int(digits) if len(digits) <= 4 else MAX_EXPONENT + 1
    if signed.startswith("-"):
        exponent = -exponent
    if abs(exponent) > MAX_EXPONENT:
        raise QuantityError(
            text, f"has an exponent outside -{MAX_EXPONENT}..{MAX_EXPONENT} that cgalloc accepts"
        )
    return 10, exponent, DECIMAL_EXPONENT


@dataclass(frozen=True, eq=False)
class Quantity:
    """A fixed-point quantity: ``nanos`` is the value × 10^9, ``fmt`` how it is written.

    Equality, hashing and ordering compare values only (upstream ``Cmp``/``Equal``), so
    ``parse("1Ki") == parse("1024")``; compare ``fmt`` explicitly when it matters.
    """

    nanos: int
    fmt: str = DECIMAL_SI

    def __post_init__(self) -> None:
        if type(self.nanos) is not int:
            raise TypeError(f"Quantity nanos must be an int, not {type(self.nanos).__name__}")
        if self.fmt not in FORMATS:
            raise ValueError(f"Quantity fmt must be one of {', '.join(FORMATS)}, not {self.fmt!r}")

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse like ``resource.ParseQuantity``; raises :class:`QuantityError`."""
        if not isinstance(text, str):
            raise TypeError(f"a quantity is parsed from a str, not {type(text).__name__}")
        match = _SPLIT.fullmatch(text)
        if not text or match is None:
            raise QuantityError(text, "is not a quantity")
        sign, whole, fraction, suffix = match.groups()
        fraction = (fraction or "").rstrip("0")  # trailing zeros change neither value nor digits
        base, exponent, fmt = _interpret_suffix(text, suffix)
        digits = (whole + fraction).lstrip("0")
        if len(digits) > MAX_DIGITS:
            raise QuantityError(text, f"has more than the {MAX_DIGITS} digits cgalloc accepts")
        mantissa = int(digits or "0")
        # value = mantissa × base^exponent / 10^len(fraction), exactly, then × 10^9 for nanos
        numerator, denominator = mantissa * NANO, 10 ** len(fraction)
        if base == 2:
            numerator <<= exponent
        elif exponent >= 0:
            numerator *= 10**exponent
        else:
            denominator *= 10**-exponent
        nanos = _round_away(numerator, denominator)
        if fmt == BINARY_SI:
            nanos = min(nanos, MAX_BINARY_SI * NANO)
            if 0 < nanos < NANO:
                fmt = DECIMAL_SI
        return cls(-nanos if sign == "-" else nanos, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        """``NewQuantity(value, fmt)``."""
        return cls(value * NANO, fmt)

    @classmethod
    def from_milli(cls, milli: int, fmt: str = DECIMAL_SI) -> Quantity:
        """``NewMilliQuantity(milli, fmt)``: the value ``milli`` / 1000."""
        return cls(milli * (NANO // 1000), fmt)

    def value(self) -> int:
        """Whole units, rounded away from zero (a ceiling for non-negative values)."""
        return _round_away(self.nanos, NANO)

    def milli_value(self) -> int:
        """Thousandths, rounded away from zero (a ceiling for non-negative values)."""
        return _round_away(self.nanos, NANO // 1000)

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def __bool__(self) -> bool:
        return self.nanos != 0

    def __str__(self) -> str:
        return _canonical(self.nanos, self.fmt)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self.fmt})"

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity(self.nanos + other.nanos, self._result_fmt(other))

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity(self.nanos - other.nanos, self._result_fmt(other))

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.fmt)

    def _result_fmt(self, other: Quantity) -> str:
        # Upstream Add/Sub: a zero left operand takes the right one's format.
        return self.fmt if self.nanos else other.fmt

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos >= other.nanos


def _canonical(nanos: int, fmt: str) -> str:
    """Upstream ``CanonicalizeBytes``: the largest suffix that leaves no fractional digits."""
    if nanos == 0:
        return "0"
    negative, magnitude = nanos < 0, abs(nanos)
    if fmt == BINARY_SI and magnitude >= 1024 * NANO and magnitude % NANO == 0:
        mantissa, power = _strip_factors(magnitude // NANO, 1024)
        if power > 6:  # no suffix beyond Ei: keep the magnitude in the number
            mantissa, power = mantissa * 1024 ** (power - 6), 6
        return f"{'-' if negative else ''}{mantissa}{_BINARY_SUFFIX_FOR[power]}"
    # BinarySI that would need rounding, or below 1024, is written as DecimalSI.
    mantissa, power = _strip_factors(magnitude, 10)
    exponent = power - 9
    shift = exponent % 3  # down to a multiple of three, moving zeros into the mantissa
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if fmt != DECIMAL_EXPONENT and exponent in _DECIMAL_SUFFIX_FOR:
        suffix = _DECIMAL_SUFFIX_FOR[exponent]
    else:  # DecimalExponent, or DecimalSI beyond E (upstream falls back to e<n>)
        suffix = f"e{exponent}" if exponent else ""
    return f"{'-' if negative else ''}{mantissa}{suffix}"


parse_quantity = Quantity.parse
