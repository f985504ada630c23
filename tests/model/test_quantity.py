"""cgalloc.model.quantity against upstream apimachinery's own expectations.

Unless a case says otherwise, expected values are copied from kubernetes/apimachinery
pkg/api/resource/quantity_test.go (tables named in each test's docstring). Cases marked
"traced" were derived by following parseQuantityString/ParseQuantity/CanonicalizeBytes in
quantity.go and suffix.go by hand for inputs upstream's tables do not list.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cgalloc.model.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    MAX_BINARY_SI,
    Quantity,
    QuantityError,
    parse_quantity,
)

BIN, DEC, EXP = BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT
MOST_POSITIVE = 2**63 - 1


def dec(mantissa: int, exponent: int, fmt: str) -> Quantity:
    """Upstream's test helper ``decQuantity(i, exponent, format)``: ``i`` × 10^exponent."""
    nanos = Fraction(mantissa) * Fraction(10) ** (exponent + 9)
    assert nanos.denominator == 1, "a test value finer than nano"
    return Quantity(int(nanos), fmt)


def same(a: Quantity, b: Quantity) -> bool:
    """Equal value and format (``==`` compares the value only)."""
    return (a.nanos, a.fmt) == (b.nanos, b.fmt)


# TestQuantityParse: input -> decQuantity(mantissa, exponent, format)
PARSE_TABLE = [
    ("0", 0, 0, DEC),
    ("0n", 0, 0, DEC),
    ("0u", 0, 0, DEC),
    ("0m", 0, 0, DEC),
    ("0Ki", 0, 0, BIN),
    ("0k", 0, 0, DEC),
    ("0Mi", 0, 0, BIN),
    ("0M", 0, 0, DEC),
    ("0Gi", 0, 0, BIN),
    ("0G", 0, 0, DEC),
    ("0Ti", 0, 0, BIN),
    ("0T", 0, 0, DEC),
    ("1", 1, 0, DEC),
    ("1Ki", 1024, 0, BIN),
    ("8Ki", 8 * 1024, 0, BIN),
    ("7Mi", 7 * 1024**2, 0, BIN),
    ("6Gi", 6 * 1024**3, 0, BIN),
    ("5Ti", 5 * 1024**4, 0, BIN),
    ("4Pi", 4 * 1024**5, 0, BIN),
    ("3Ei", 3 * 1024**6, 0, BIN),
    ("10Ti", 10 * 1024**4, 0, BIN),
    ("100Ti", 100 * 1024**4, 0, BIN),
    ("5n", 5, -9, DEC),
    ("4u", 4, -6, DEC),
    ("3m", 3, -3, DEC),
    ("9", 9, 0, DEC),
    ("8k", 8, 3, DEC),
    ("50k", 5, 4, DEC),
    ("7M", 7, 6, DEC),
    ("6G", 6, 9, DEC),
    ("5T", 5, 12, DEC),
    ("40T", 4, 13, DEC),
    ("300T", 3, 14, DEC),
    ("2P", 2, 15, DEC),
    ("1E", 1, 18, DEC),
    ("1E-3", 1, -3, EXP),
    ("1e3", 1, 3, EXP),
    ("1E6", 1, 6, EXP),
    ("1e9", 1, 9, EXP),
    ("1E12", 1, 12, EXP),
    ("1e15", 1, 15, EXP),
    ("1E18", 1, 18, EXP),
    ("1e14", 1, 14, EXP),
    ("1e13", 1, 13, EXP),
    ("100.035k", 100035, 0, DEC),
    ("0.001", 1, -3, DEC),
    ("0.0005k", 5, -1, DEC),
    ("0.005", 5, -3, DEC),
    ("0.05", 5, -2, DEC),
    ("0.5", 5, -1, DEC),
    ("0.00050k", 5, -1, DEC),
    ("0.00500", 5, -3, DEC),
    ("0.05000", 5, -2, DEC),
    ("0.50000", 5, -1, DEC),
    ("0.5e0", 5, -1, EXP),
    ("0.5e-1", 5, -2, EXP),
    ("0.5e-2", 5, -3, EXP),
    ("10.035M", 10035, 3, DEC),
    ("1.2e3", 12, 2, EXP),
    ("1.3E+6", 13, 5, EXP),
    ("1.40e9", 14, 8, EXP),
    ("1.53E12", 153, 10, EXP),
    ("1.6e15", 16, 14, EXP),
    ("1.7E18", 17, 17, EXP),
    ("9.01", 901, -2, DEC),
    ("8.1k", 81, 2, DEC),
    ("7.123456M", 7123456, 0, DEC),
    ("6.987654321G", 6987654321, 0, DEC),
    ("5.444T", 5444, 9, DEC),
    ("40.1T", 401, 11, DEC),
    ("300.2T", 3002, 11, DEC),
    ("2.5P", 25, 14, DEC),
    ("1.01E", 101, 16, DEC),
    # things that saturate or round
    ("3.001n", 4, -9, DEC),
    ("1.1E-9", 2, -9, EXP),
    ("0.0000000001", 1, -9, DEC),
    ("0.0000000005", 1, -9, DEC),
    ("0.00000000050", 1, -9, DEC),
    ("0.5e-9", 1, -9, EXP),
    ("0.9n", 1, -9, DEC),
    ("0.00000012345", 124, -9, DEC),
    ("0.00000012354", 124, -9, DEC),
    ("9Ei", MOST_POSITIVE, 0, BIN),
    ("9223372036854775807Ki", MOST_POSITIVE, 0, BIN),
    ("12E", 12, 18, DEC),
    # fractional binary
    ("100.035Ki", 10243584, -2, BIN),
    ("0.5Mi", 512 * 1024, 0, BIN),
    ("0.05Gi", 536870912, -1, BIN),
    ("0.025Ti", 274877906944, -1, BIN),
    # "things written by trolls"
    ("0.000000000001Ki", 2, -9, DEC),
    (".001", 1, -3, DEC),
    (".0001k", 100, -3, DEC),
    ("1.", 1, 0, DEC),
    ("1.G", 1, 9, DEC),
]


@pytest.mark.parametrize(("text", "mantissa", "exponent", "fmt"), PARSE_TABLE)
def test_parse_matches_upstream_table(text: str, mantissa: int, exponent: int, fmt: str) -> None:
    """TestQuantityParse, including its negative and explicit-plus variants."""
    expected = dec(mantissa, exponent, fmt)
    assert same(Quantity.parse(text), expected)
    assert same(Quantity.parse("+" + text), expected)
    assert same(Quantity.parse("-" + text), Quantity(-expected.nanos, fmt))


# Upstream accepts these through quirks of its scanner (traced): an empty numeral is zero and
# the suffix still sets the format, and "E" alone is the exa suffix, not an exponent.
QUIRKS = [
    ("-", 0, DEC),
    ("+", 0, DEC),
    (".", 0, DEC),
    ("-.", 0, DEC),
    ("Ki", 0, BIN),
    ("m", 0, DEC),
    ("e3", 0, EXP),
    ("-0", 0, DEC),
    ("00012", 12 * 10**9, DEC),
    ("1E", 10**18 * 10**9, DEC),
    ("1e+03", 10**3 * 10**9, EXP),
    ("1E-0", 10**9, EXP),
    ("1.000000000000000000000000000000000001", 10**9 + 1, DEC),
    ("-0.5n", -1, DEC),
    ("-10Ei", -MAX_BINARY_SI * 10**9, BIN),
    ("0.5Ki", 512 * 10**9, BIN),
]


@pytest.mark.parametrize(("text", "nanos", "fmt"), QUIRKS)
def test_parse_upstream_quirks(text: str, nanos: int, fmt: str) -> None:
    assert same(Quantity.parse(text), Quantity(nanos, fmt))


# TestQuantityParse's invalid list first, then forms traced through the scanner/suffixer.
INVALID = [
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    "K",
    "1K",
    "1KB",
    "1Kb",
    "1mi",
    "1ki",
    "1MB",
    "1e",
    "1E+",
    "1ee3",
    "1e3.5",
    "1e1e1",
    "1k1",
    "1Gi3",
    "--1",
    "+-1",
    "1.2.3",
    "1\n",
    "\t1",
    "0x10",
    "1_000",
    "1,5",
    "١",  # an Arabic-Indic digit: upstream's scanner takes ASCII digits only
    "NaN",
    "Infinity",
    "1 Gi",
    "1e99999",
    "1" * 1001,
]


@pytest.mark.parametrize("text", INVALID)
def test_rejected_forms(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        Quantity.parse(text)
    message = str(caught.value)
    assert message.startswith(repr(text))
    assert "Ki, Mi, Gi, Ti, Pi, Ei" in message and "e<integer>" in message
    assert message.count(". ") == 0  # one sentence


def test_error_names_unknown_suffix() -> None:
    with pytest.raises(QuantityError) as caught:
        Quantity.parse("512MB")
    assert str(caught.value).startswith("'512MB' is not a quantity;")
    with pytest.raises(QuantityError) as caught:
        Quantity.parse("512K")
    assert str(caught.value).startswith("'512K' has an unknown suffix 'K';")
    assert caught.value.text == "512K"
    assert isinstance(caught.value, ValueError)


def test_parse_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        Quantity.parse(5)  # type: ignore[arg-type]


# TestQuantityString: (mantissa, exponent, format) -> canonical, alternate spelling or None
STRING_TABLE = [
    (1024**3, 0, BIN, "1Gi", "1024Mi"),
    (300 * 1024**2, 0, BIN, "300Mi", "307200Ki"),
    (6 * 1024, 0, BIN, "6Ki", None),
    (1001 * 1024**3, 0, BIN, "1001Gi", "1025024Mi"),
    (1024**4, 0, BIN, "1Ti", "1024Gi"),
    (5, 0, BIN, "5", "5000m"),
    (500, -3, BIN, "500m", "0.5"),
    (1, 9, DEC, "1G", "1000M"),
    (1000, 6, DEC, "1G", "0.001T"),
    (1000000, 3, DEC, "1G", None),
    (1000000000, 0, DEC, "1G", None),
    (1, -3, DEC, "1m", "1000u"),
    (80, -3, DEC, "80m", None),
    (1080, -3, DEC, "1080m", "1.08"),
    (108, -2, DEC, "1080m", "1080000000n"),
    (10800, -4, DEC, "1080m", None),
    (300, 6, DEC, "300M", None),
    (1, 12, DEC, "1T", None),
    (1, 18, DEC, "1E", None),
    (1, 21, DEC, "1e21", "1000E"),
    (5, 21, DEC, "5e21", "5000E"),
    (1, 24, DEC, "1e24", "1000000E"),
    (1234567, 6, DEC, "1234567M", None),
    (1234567, -3, BIN, "1234567m", None),
    (3, 3, DEC, "3k", None),
    (1025, 0, BIN, "1025", None),
    (0, 0, DEC, "0", None),
    (0, 0, BIN, "0", None),
    (1, 9, EXP, "1e9", ".001e12"),
    (1, -3, EXP, "1e-3", "0.001e0"),
    (1, -9, EXP, "1e-9", "1000e-12"),
    (80, -3, EXP, "80e-3", None),
    (300, 6, EXP, "300e6", None),
    (1, 12, EXP, "1e12", None),
    (1, 3, EXP, "1e3", None),
    (3, 3, EXP, "3e3", None),
    (0, 0, EXP, "0", "00"),
    (1, -9, DEC, "1n", None),
    (80, -9, DEC, "80n", None),
    (1080, -9, DEC, "1080n", None),
    (108, -8, DEC, "1080n", None),
    (10800, -10, DEC, "1080n", None),
    (1, -6, DEC, "1u", None),
    (80, -6, DEC, "80u", None),
    (1080, -6, DEC, "1080u", None),
]


@pytest.mark.parametrize(("mantissa", "exponent", "fmt", "canonical", "alternate"), STRING_TABLE)
def test_canonical_string(
    mantissa: int, exponent: int, fmt: str, canonical: str, alternate: str | None
) -> None:
    """TestQuantityString: canonical form, re-parse, alternate spelling, negation."""
    q = dec(mantissa, exponent, fmt)
    assert str(q) == canonical
    assert str(Quantity.parse(canonical)) == canonical
    if alternate is not None:
        assert str(Quantity.parse(alternate)) == canonical
    if q:
        assert str(-q) == "-" + canonical


# TestQuantityParseEmit
@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ],
)
def test_parse_emit(text: str, canonical: str) -> None:
    assert str(Quantity.parse(text)) == canonical
    assert str(Quantity.parse("-" + text)) == "-" + canonical


# The examples the reference (§8) and the Quantity doc comment give, plus traced cases.
@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("0.1", "100m"),
        ("100Mi", "100Mi"),
        ("1e3", "1e3"),
        ("12e6", "12e6"),
        ("1.5e3", "1500"),  # traced: 15e2 -> exponent lowered to a multiple of 3
        ("0.5e0", "500e-3"),  # traced
        ("1.2345", "1234500u"),  # the Quantity doc comment
        ("0.9n", "1n"),  # the Quantity doc comment
        ("1.5Ki", "1536"),  # traced: not a whole number of Ki, so no suffix
        ("100.035Ki", "102435840m"),  # traced: BinarySI that needs a fraction -> DecimalSI
        ("0.5Mi", "512Ki"),
        ("9Ei", "9223372036854775807"),  # capped at 2^63-1, which has no factor of 1024
        ("1023", "1023"),
        ("1024", "1024"),  # DecimalSI: 1024 has no trailing zeros to move into a suffix
        ("1000", "1k"),
        ("+1", "1"),  # upstream would echo "+1" from its string cache; canonical is "1"
        ("1.500", "1500m"),  # likewise upstream echoes "1.500"
        ("18446744073709551616", "18446744073709551616"),  # doc comment: not capped
    ],
)
def test_canonical_examples(text: str, canonical: str) -> None:
    assert str(Quantity.parse(text)) == canonical


def test_binary_si_plain_number_reparses_as_decimal() -> None:
    """Traced: BinarySI 5000 has no factor 1024, so it prints with no suffix ("1025" in
    TestQuantityString is the same case); "5000" then parses as DecimalSI, which is "5k"."""
    assert str(Quantity.from_int(5000, BIN)) == "5000"
    assert same(Quantity.parse("5000"), Quantity.from_int(5000, DEC))
    assert str(Quantity.parse("5000")) == "5k"


def test_binary_si_beyond_exa_keeps_its_magnitude() -> None:
    """TestZeroSubMostNegativeInheritsFormat: 0 - (-2^63 BinarySI) is BinarySI "8Ei"."""
    result = Quantity(0, DEC) - Quantity(-(2**63) * 10**9, BIN)
    assert same(result, Quantity(2**63 * 10**9, BIN))
    assert str(result) == "8Ei"
    # Upstream would drop the suffix of 2^70 (no suffix beyond Ei); we keep the value.
    assert str(Quantity.from_int(2**70, BIN)) == "1024Ei"


# TestQuantityCmp
@pytest.mark.parametrize(
    ("x", "y", "expect"),
    [("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1)],
)
def test_compare(x: str, y: str, expect: int) -> None:
    a, b = parse_quantity(x), parse_quantity(y)
    assert (a > b) - (a < b) == expect
    assert (a == b) == (expect == 0)
    assert (a >= b) == (expect >= 0) and (a <= b) == (expect <= 0)


def test_equality_is_by_value_across_formats() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert hash(Quantity.parse("1Ki")) == hash(Quantity.parse("1024"))
    assert Quantity.parse("1k") == Quantity.parse("1e3")
    assert Quantity.parse("1k") != Quantity.parse("1001")
    assert Quantity.parse("1") != 1  # not comparable with plain numbers


# TestAdd / TestSub: (a, b) -> expected value and format
@pytest.mark.parametrize(
    ("a", "b", "added", "subtracted"),
    [
        (dec(10, 0, DEC), dec(1, 1, DEC), dec(20, 0, DEC), dec(0, 0, DEC)),
        (dec(10, 0, DEC), dec(1, 0, BIN), dec(11, 0, DEC), dec(9, 0, DEC)),
        (dec(10, 0, BIN), dec(1, 0, DEC), dec(11, 0, BIN), dec(9, 0, BIN)),
        (dec(0, 0, DEC), dec(50, 0, DEC), dec(50, 0, DEC), dec(-50, 0, DEC)),
        (dec(50, 0, DEC), dec(0, 0, DEC), dec(50, 0, DEC), dec(50, 0, DEC)),
        (dec(0, 0, DEC), dec(0, 0, DEC), dec(0, 0, DEC), dec(0, 0, DEC)),
    ],
)
def test_add_sub(a: Quantity, b: Quantity, added: Quantity, subtracted: Quantity) -> None:
    assert same(a + b, added)
    assert same(a - b, subtracted)


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_zero_operand_preserves_suffix(text: str) -> None:
    """TestQuantityAddZeroPreservesSuffix / TestQuantitySubZeroPreservesSuffix."""
    zero, value = Quantity.parse("0"), Quantity.parse(text)
    assert str(value + zero) == text
    assert str(zero + value) == text
    assert str(value - zero) == text
    assert str(zero - value) == str(-value) == "-" + text


def test_negation() -> None:
    """TestQuantityNeg: 9.01 negated is -9010m; TestNeg keeps the format."""
    q = dec(901, -2, DEC)
    assert str(-q) == "-9010m"
    assert str(q) == "9010m"  # frozen: negation returned a new value
    assert same(-dec(10, 0, BIN), dec(-10, 0, BIN))
    assert same(-dec(-10, 0, BIN), dec(10, 0, BIN))
    assert same(-Quantity(0), Quantity(0))


def test_sign_and_bool() -> None:
    assert [Quantity.parse(t).sign() for t in ("-1n", "0", "1n")] == [-1, 0, 1]
    assert not Quantity.parse("0Ki")
    assert Quantity.parse("1n")


# TestScaledValue, for the two scales cgalloc uses: NewScaledQuantity(1, from) -> value at to.
@pytest.mark.parametrize(
    ("from_exponent", "value", "milli"),
    [(-9, 1, 1), (-6, 1, 1), (-3, 1, 1), (0, 1, 1000), (2, 100, 100_000)],
)
def test_scaled_value(from_exponent: int, value: int, milli: int) -> None:
    q = dec(1, from_exponent, DEC)
    assert q.value() == value
    assert q.milli_value() == milli


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("0.1m", 1, 1),  # reference §8: cpu 0.1m -> milli 1
        ("1.0005", 2, 1001),  # reference §8: 1.0005 -> 1001m
        ("1.5", 2, 1500),  # reference §8: memory 1.5 -> 2 bytes
        ("100m", 1, 100),
        ("1Mi", 1048576, 1048576000),  # TestQuantityValueSet
        ("9Ei", MOST_POSITIVE, MOST_POSITIVE * 1000),
        ("-1.5", -2, -1500),  # amount.go negativeScaleInt64: away from zero
        ("-0.1m", -1, -1),
        ("0", 0, 0),
    ],
)
def test_value_and_milli_value(text: str, value: int, milli: int) -> None:
    q = Quantity.parse(text)
    assert q.value() == value
    assert q.milli_value() == milli


# TestNewSet / TestMilliNewSet (the invalid-format rows are rejected here, see below)
@pytest.mark.parametrize(
    ("value", "fmt", "canonical"),
    [
        (1, DEC, "1"),
        (1000, DEC, "1k"),
        (1234000, DEC, "1234k"),
        (1024, BIN, "1Ki"),
        (1024 * 1024, BIN, "1Mi"),
        (1000000, EXP, "1e6"),
    ],
)
def test_from_int(value: int, fmt: str, canonical: str) -> None:
    q = Quantity.from_int(value, fmt)
    assert str(q) == canonical
    assert Quantity.parse(canonical).value() == value


@pytest.mark.parametrize(
    ("milli", "fmt", "canonical"),
    [
        (1, DEC, "1m"),
        (1000, DEC, "1"),
        (1234000, DEC, "1234"),
        (1024, BIN, "1024m"),
        (1024 * 1024, BIN, "1048576m"),
        (1000000, EXP, "1e3"),
    ],
)
def test_from_milli(milli: int, fmt: str, canonical: str) -> None:
    q = Quantity.from_milli(milli, fmt)
    assert str(q) == canonical
    assert Quantity.parse(canonical).milli_value() == milli


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="fmt must be one of"):
        Quantity.from_int(1, "invalidFormatDefaultsToExponent")
    with pytest.raises(TypeError, match="must be an int"):
        Quantity(1.5, DEC)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Quantity(True, DEC)


def test_repr_is_readable() -> None:
    assert repr(Quantity.parse("1.5Gi")) == "Quantity('1536Mi', BinarySI)"


# --- properties ---------------------------------------------------------------------------

FMT = st.sampled_from([DEC, BIN, EXP])
NANOS = st.one_of(
    st.integers(-(10**30), 10**30),
    st.builds(lambda m, e: m * 10**e, st.integers(-999_999, 999_999), st.integers(0, 40)),
    st.builds(lambda m, e: m * 1024**e * 10**9, st.integers(-2047, 2047), st.integers(0, 6)),
)


def parseable(nanos: int, fmt: str) -> Quantity:
    """A quantity parse can give back: BinarySI magnitudes stay within upstream's cap."""
    if fmt == BIN and abs(nanos) > MAX_BINARY_SI * 10**9:
        fmt = DEC
    return Quantity(nanos, fmt)


@given(NANOS, FMT)
def test_canonical_form_is_a_fixed_point(nanos: int, fmt: str) -> None:
    canonical = str(parseable(nanos, fmt))
    again = str(Quantity.parse(canonical))
    # A BinarySI value that is no whole number of Ki is written as a plain number, which
    # parses back as DecimalSI (see test_binary_si_plain_number_reparses_as_decimal).
    if not (fmt == BIN and canonical.lstrip("-").isdigit()):
        assert again == canonical
    assert str(Quantity.parse(again)) == again


@given(NANOS, FMT)
def test_parse_of_str_keeps_the_value(nanos: int, fmt: str) -> None:
    q = parseable(nanos, fmt)
    assert Quantity.parse(str(q)) == q


@given(NANOS, NANOS, FMT, FMT)
def test_add_then_subtract_is_exact(a: int, b: int, fa: str, fb: str) -> None:
    qa, qb = Quantity(a, fa), Quantity(b, fb)
    assert (qa + qb - qb).nanos == a
    assert (qa - qb + qb).nanos == a


def away_from_zero(x: Fraction) -> int:
    """The reference rounding, computed independently with Fractions."""
    if x >= 0:
        return -(-x.numerator // x.denominator)
    return -away_from_zero(-x)


SUFFIX_SCALE = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000)}
SUFFIX_SCALE.update({"": Fraction(1), "k": Fraction(1000), "Ki": Fraction(1024)})


@given(
    st.sampled_from(["", "-"]),
    st.integers(0, 10**20),
    st.text("0123456789", max_size=14),
    st.sampled_from(sorted(SUFFIX_SCALE)),
)
def test_value_and_milli_value_round_away_from_zero(
    sign: str, whole: int, fraction: str, suffix: str
) -> None:
    q = Quantity.parse(f"{sign}{whole}.{fraction}{suffix}")
    exact = (whole + Fraction(int(fraction or "0"), 10 ** len(fraction))) * SUFFIX_SCALE[suffix]
    if sign:
        exact = -exact
    nanos = away_from_zero(exact * 10**9)  # parse rounds away from zero at nano
    if suffix == "Ki" and abs(nanos) > MAX_BINARY_SI * 10**9:  # upstream's BinarySI cap
        nanos = MAX_BINARY_SI * 10**9 * (-1 if sign else 1)
    assert q.nanos == nanos
    assert q.value() == away_from_zero(Fraction(nanos, 10**9))
    assert q.milli_value() == away_from_zero(Fraction(nanos, 10**6))
    if nanos >= 0:  # a ceiling for the non-negative values cgalloc feeds to cgroups
        assert q.value() - 1 < Fraction(nanos, 10**9) <= q.value()
        assert q.milli_value() - 1 < Fraction(nanos, 10**6) <= q.milli_value()
