"""strconv.ParseFloat as the kubelet's eviction thresholds call it (pkg/kubelet/eviction/
helpers.go parsePercentage: ParseFloat(TrimRight(s, "%"), 32)) and go-yaml v2 resolves plain
scalars with it (ParseFloat(s, 64)): ``gostrconv.parse_go_float``.

The tables are Go's own (go/src/strconv/atof_test.go, atoftests and atof32tests), run as
testAtof runs them: every atoftests row at bitSize 64, and again at 32 when its value is a
float32; every atof32tests row at 32. Go's error kinds map to "range" (ErrRange) and None
(ErrSyntax). glibc's strtof/strtod, which round correctly too, check random texts besides."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cgalloc.inputs.gostrconv import go_may_misread, parse_go_float

SYNTAX, RANGE = "syntax", "range"  # parse_go_float gives None and "range"

# go/src/strconv/atof_test.go atoftests (the rows built with strings.Repeat are below)
ATOFTESTS = [
    ("", "0", SYNTAX),
    ("1", "1", None),
    ("+1", "1", None),
    ("1x", "0", SYNTAX),
    ("1.1.", "0", SYNTAX),
    ("1e23", "1e+23", None),
    ("1E23", "1e+23", None),
    ("100000000000000000000000", "1e+23", None),
    ("1e-100", "1e-100", None),
    ("123456700", "1.234567e+08", None),
    ("99999999999999974834176", "9.999999999999997e+22", None),
    ("100000000000000000000001", "1.0000000000000001e+23", None),
    ("100000000000000008388608", "1.0000000000000001e+23", None),
    ("100000000000000016777215", "1.0000000000000001e+23", None),
    ("100000000000000016777216", "1.0000000000000003e+23", None),
    ("-1", "-1", None),
    ("-0.1", "-0.1", None),
    ("-0", "-0", None),
    ("1e-20", "1e-20", None),
    ("625e-3", "0.625", None),
    ("0x1p0", "1", None),
    ("0x1p1", "2", None),
    ("0x1p-1", "0.5", None),
    ("0x1ep-1", "15", None),
    ("-0x1ep-1", "-15", None),
    ("-0x1_ep-1", "-15", None),
    ("0x1p-200", "6.223015277861142e-61", None),
    ("0x1p200", "1.6069380442589903e+60", None),
    ("0x1fFe2.p0", "131042", None),
    ("0x1fFe2.P0", "131042", None),
    ("-0x2p3", "-16", None),
    ("0x0.fp4", "15", None),
    ("0x0.fp0", "0.9375", None),
    ("0x1e2", "0", SYNTAX),
    ("1p2", "0", SYNTAX),
    ("0", "0", None),
    ("0e0", "0", None),
    ("-0e0", "-0", None),
    ("+0e0", "0", None),
    ("0e-0", "0", None),
    ("-0e-0", "-0", None),
    ("+0e-0", "0", None),
    ("0e+0", "0", None),
    ("-0e+0", "-0", None),
    ("+0e+0", "0", None),
    ("0e+01234567890123456789", "0", None),
    ("0.00e-01234567890123456789", "0", None),
    ("-0e+01234567890123456789", "-0", None),
    ("-0.00e-01234567890123456789", "-0", None),
    ("0x0p+01234567890123456789", "0", None),
    ("0x0.00p-01234567890123456789", "0", None),
    ("-0x0p+01234567890123456789", "-0", None),
    ("-0x0.00p-01234567890123456789", "-0", None),
    ("0e291", "0", None),
    ("0e292", "0", None),
    ("0e347", "0", None),
    ("0e348", "0", None),
    ("-0e291", "-0", None),
    ("-0e292", "-0", None),
    ("-0e347", "-0", None),
    ("-0e348", "-0", None),
    ("0x0p126", "0", None),
    ("0x0p127", "0", None),
    ("0x0p128", "0", None),
    ("0x0p129", "0", None),
    ("0x0p130", "0", None),
    ("0x0p1022", "0", None),
    ("0x0p1023", "0", None),
    ("0x0p1024", "0", None),
    ("0x0p1025", "0", None),
    ("0x0p1026", "0", None),
    ("-0x0p126", "-0", None),
    ("-0x0p127", "-0", None),
    ("-0x0p128", "-0", None),
    ("-0x0p129", "-0", None),
    ("-0x0p130", "-0", None),
    ("-0x0p1022", "-0", None),
    ("-0x0p1023", "-0", None),
    ("-0x0p1024", "-0", None),
    ("-0x0p1025", "-0", None),
    ("-0x0p1026", "-0", None),
    ("nan", "NaN", None),
    ("NaN", "NaN", None),
    ("NAN", "NaN", None),
    ("inf", "+Inf", None),
    ("-Inf", "-Inf", None),
    ("+INF", "+Inf", None),
    ("-Infinity", "-Inf", None),
    ("+INFINITY", "+Inf", None),
    ("Infinity", "+Inf", None),
    ("1.7976931348623157e308", "1.7976931348623157e+308", None),
    ("-1.7976931348623157e308", "-1.7976931348623157e+308", None),
    ("0x1.fffffffffffffp1023", "1.7976931348623157e+308", None),
    ("-0x1.fffffffffffffp1023", "-1.7976931348623157e+308", None),
    ("0x1fffffffffffffp+971", "1.7976931348623157e+308", None),
    ("-0x1fffffffffffffp+971", "-1.7976931348623157e+308", None),
    ("0x.1fffffffffffffp1027", "1.7976931348623157e+308", None),
    ("-0x.1fffffffffffffp1027", "-1.7976931348623157e+308", None),
    ("1.7976931348623159e308", "+Inf", RANGE),
    ("-1.7976931348623159e308", "-Inf", RANGE),
    ("0x1p1024", "+Inf", RANGE),
    ("-0x1p1024", "-Inf", RANGE),
    ("0x2p1023", "+Inf", RANGE),
    ("-0x2p1023", "-Inf", RANGE),
    ("0x.1p1028", "+Inf", RANGE),
    ("-0x.1p1028", "-Inf", RANGE),
    ("0x.2p1027", "+Inf", RANGE),
    ("-0x.2p1027", "-Inf", RANGE),
    ("1.7976931348623158e308", "1.7976931348623157e+308", None),
    ("-1.7976931348623158e308", "-1.7976931348623157e+308", None),
    ("0x1.fffffffffffff7fffp1023", "1.7976931348623157e+308", None),
    ("-0x1.fffffffffffff7fffp1023", "-1.7976931348623157e+308", None),
    ("1.797693134862315808e308", "+Inf", RANGE),
    ("-1.797693134862315808e308", "-Inf", RANGE),
    ("0x1.fffffffffffff8p1023", "+Inf", RANGE),
    ("-0x1.fffffffffffff8p1023", "-Inf", RANGE),
    ("0x1fffffffffffff.8p+971", "+Inf", RANGE),
    ("-0x1fffffffffffff8p+967", "-Inf", RANGE),
    ("0x.1fffffffffffff8p1027", "+Inf", RANGE),
    ("-0x.1fffffffffffff9p1027", "-Inf", RANGE),
    ("1e308", "1e+308", None),
    ("2e308", "+Inf", RANGE),
    ("1e309", "+Inf", RANGE),
    ("0x1p1025", "+Inf", RANGE),
    ("1e310", "+Inf", RANGE),
    ("-1e310", "-Inf", RANGE),
    ("1e400", "+Inf", RANGE),
    ("-1e400", "-Inf", RANGE),
    ("1e400000", "+Inf", RANGE),
    ("-1e400000", "-Inf", RANGE),
    ("0x1p1030", "+Inf", RANGE),
    ("0x1p2000", "+Inf", RANGE),
    ("0x1p2000000000", "+Inf", RANGE),
    ("-0x1p1030", "-Inf", RANGE),
    ("-0x1p2000", "-Inf", RANGE),
    ("-0x1p2000000000", "-Inf", RANGE),
    ("1e-305", "1e-305", None),
    ("1e-306", "1e-306", None),
    ("1e-307", "1e-307", None),
    ("1e-308", "1e-308", None),
    ("1e-309", "1e-309", None),
    ("1e-310", "1e-310", None),
    ("1e-322", "1e-322", None),
    ("5e-324", "5e-324", None),
    ("4e-324", "5e-324", None),
    ("3e-324", "5e-324", None),
    ("2e-324", "0", None),
    ("1e-350", "0", None),
    ("1e-400000", "0", None),
    ("0x2.00000000000000p-1010", "1.8227805048890994e-304", None),
    ("0x1.fffffffffffff0p-1010", "1.8227805048890992e-304", None),
    ("0x1.fffffffffffff7p-1010", "1.8227805048890992e-304", None),
    ("0x1.fffffffffffff8p-1010", "1.8227805048890994e-304", None),
    ("0x1.fffffffffffff9p-1010", "1.8227805048890994e-304", None),
    ("0x2.00000000000000p-1022", "4.450147717014403e-308", None),
    ("0x1.fffffffffffff0p-1022", "4.4501477170144023e-308", None),
    ("0x1.fffffffffffff7p-1022", "4.4501477170144023e-308", None),
    ("0x1.fffffffffffff8p-1022", "4.450147717014403e-308", None),
    ("0x1.fffffffffffff9p-1022", "4.450147717014403e-308", None),
    ("0x1.00000000000000p-1022", "2.2250738585072014e-308", None),
    ("0x0.fffffffffffff0p-1022", "2.225073858507201e-308", None),
    ("0x0.ffffffffffffe0p-1022", "2.2250738585072004e-308", None),
    ("0x0.ffffffffffffe7p-1022", "2.2250738585072004e-308", None),
    ("0x1.ffffffffffffe8p-1023", "2.225073858507201e-308", None),
    ("0x1.ffffffffffffe9p-1023", "2.225073858507201e-308", None),
    ("0x0.00000003fffff0p-1022", "2.072261e-317", None),
    ("0x0.00000003456780p-1022", "1.694649e-317", None),
    ("0x0.00000003456787p-1022", "1.694649e-317", None),
    ("0x0.00000003456788p-1022", "1.694649e-317", None),
    ("0x0.00000003456790p-1022", "1.6946496e-317", None),
    ("0x0.00000003456789p-1022", "1.6946496e-317", None),
    ("0x0.0000000345678800000000000000000000000001p-1022", "1.6946496e-317", None),
    ("0x0.000000000000f0p-1022", "7.4e-323", None),
    ("0x0.00000000000060p-1022", "3e-323", None),
    ("0x0.00000000000058p-1022", "3e-323", None),
    ("0x0.00000000000057p-1022", "2.5e-323", None),
    ("0x0.00000000000050p-1022", "2.5e-323", None),
    ("0x0.00000000000010p-1022", "5e-324", None),
    ("0x0.000000000000081p-1022", "5e-324", None),
    ("0x0.00000000000008p-1022", "0", None),
    ("0x0.00000000000007fp-1022", "0", None),
    ("1e-4294967296", "0", None),
    ("1e+4294967296", "+Inf", RANGE),
    ("1e-18446744073709551616", "0", None),
    ("1e+18446744073709551616", "+Inf", RANGE),
    ("0x1p-4294967296", "0", None),
    ("0x1p+4294967296", "+Inf", RANGE),
    ("0x1p-18446744073709551616", "0", None),
    ("0x1p+18446744073709551616", "+Inf", RANGE),
    ("1e", "0", SYNTAX),
    ("1e-", "0", SYNTAX),
    (".e-1", "0", SYNTAX),
    ("1\x00.2", "0", SYNTAX),
    ("0x", "0", SYNTAX),
    ("0x.", "0", SYNTAX),
    ("0x1", "0", SYNTAX),
    ("0x.1", "0", SYNTAX),
    ("0x1p", "0", SYNTAX),
    ("0x.1p", "0", SYNTAX),
    ("0x1p+", "0", SYNTAX),
    ("0x.1p+", "0", SYNTAX),
    ("0x1p-", "0", SYNTAX),
    ("0x.1p-", "0", SYNTAX),
    ("0x1p+2", "4", None),
    ("0x.1p+2", "0.25", None),
    ("0x1p-2", "0.25", None),
    ("0x.1p-2", "0.015625", None),
    ("2.2250738585072012e-308", "2.2250738585072014e-308", None),
    ("2.2250738585072011e-308", "2.225073858507201e-308", None),
    ("4.630813248087435e+307", "4.630813248087435e+307", None),
    ("22.222222222222222", "22.22222222222222", None),
    ("0x1.1111111111111p222", "7.18931911124017e+66", None),
    ("0x2.2222222222222p221", "7.18931911124017e+66", None),
    ("1.00000000000000011102230246251565404236316680908203125", "1", None),
    ("0x1.00000000000008p0", "1", None),
    ("1.00000000000000011102230246251565404236316680908203124", "1", None),
    ("0x1.00000000000007Fp0", "1", None),
    ("1.00000000000000011102230246251565404236316680908203126", "1.0000000000000002", None),
    ("0x1.000000000000081p0", "1.0000000000000002", None),
    ("0x1.00000000000009p0", "1.0000000000000002", None),
    ("1.00000000000000033306690738754696212708950042724609375", "1.0000000000000004", None),
    ("0x1.00000000000018p0", "1.0000000000000004", None),
    # halfway between 1090544144181609278303144771584 and 1090544144181609419040633126912,
    # rounds to even (issue 36657); slightly above, rounds up
    ("1090544144181609348671888949248", "1.0905441441816093e+30", None),
    ("1090544144181609348835077142190", "1.0905441441816094e+30", None),
    ("1_23.50_0_0e+1_2", "1.235e+14", None),
    ("-_123.5e+12", "0", SYNTAX),
    ("+_123.5e+12", "0", SYNTAX),
    ("_123.5e+12", "0", SYNTAX),
    ("1__23.5e+12", "0", SYNTAX),
    ("123_.5e+12", "0", SYNTAX),
    ("123._5e+12", "0", SYNTAX),
    ("123.5_e+12", "0", SYNTAX),
    ("123.5__0e+12", "0", SYNTAX),
    ("123.5e_+12", "0", SYNTAX),
    ("123.5e+_12", "0", SYNTAX),
    ("123.5e_-12", "0", SYNTAX),
    ("123.5e-_12", "0", SYNTAX),
    ("123.5e+1__2", "0", SYNTAX),
    ("123.5e+12_", "0", SYNTAX),
    ("0x_1_2.3_4_5p+1_2", "74565", None),
    ("-_0x12.345p+12", "0", SYNTAX),
    ("+_0x12.345p+12", "0", SYNTAX),
    ("_0x12.345p+12", "0", SYNTAX),
    ("0x__12.345p+12", "0", SYNTAX),
    ("0x1__2.345p+12", "0", SYNTAX),
    ("0x12_.345p+12", "0", SYNTAX),
    ("0x12._345p+12", "0", SYNTAX),
    ("0x12.3__45p+12", "0", SYNTAX),
    ("0x12.345_p+12", "0", SYNTAX),
    ("0x12.345p_+12", "0", SYNTAX),
    ("0x12.345p+_12", "0", SYNTAX),
    ("0x12.345p_-12", "0", SYNTAX),
    ("0x12.345p-_12", "0", SYNTAX),
    ("0x12.345p+1__2", "0", SYNTAX),
    ("0x12.345p+12_", "0", SYNTAX),
    ("1e100x", "0", SYNTAX),
    ("1e1000x", "0", SYNTAX),
    ("2." + "2" * 4000 + "e+1", "22.22222222222222", None),
    ("0x2." + "2" * 4000 + "p221", "7.18931911124017e+66", None),
    (
        "1.00000000000000011102230246251565404236316680908203125" + "0" * 10000 + "1",
        "1.0000000000000002",
        None,
    ),
    ("0x1.00000000000008" + "0" * 10000 + "1p0", "1.0000000000000002", None),
]

# go/src/strconv/atof_test.go atof32tests
ATOF32TESTS = [
    ("0x1p-100", "7.888609e-31", None),
    ("0x1p100", "1.2676506e+30", None),
    ("1.000000059604644775390625", "1", None),
    ("0x1.000001p0", "1", None),
    ("1.000000059604644775390624", "1", None),
    ("0x1.0000008p0", "1", None),
    ("0x1.000000fp0", "1", None),
    ("1.000000059604644775390626", "1.0000001", None),
    ("0x1.000002p0", "1.0000001", None),
    ("0x1.0000018p0", "1.0000001", None),
    ("0x1.0000011p0", "1.0000001", None),
    ("340282346638528859811704183484516925440", "3.4028235e+38", None),
    ("-340282346638528859811704183484516925440", "-3.4028235e+38", None),
    ("0x.ffffffp128", "3.4028235e+38", None),
    ("-340282346638528859811704183484516925440", "-3.4028235e+38", None),
    ("-0x.ffffffp128", "-3.4028235e+38", None),
    ("3.4028236e38", "+Inf", RANGE),
    ("-3.4028236e38", "-Inf", RANGE),
    ("0x1.0p128", "+Inf", RANGE),
    ("-0x1.0p128", "-Inf", RANGE),
    ("3.402823567e38", "3.4028235e+38", None),
    ("-3.402823567e38", "-3.4028235e+38", None),
    ("0x.ffffff7fp128", "3.4028235e+38", None),
    ("-0x.ffffff7fp128", "-3.4028235e+38", None),
    ("3.4028235678e38", "+Inf", RANGE),
    ("-3.4028235678e38", "-Inf", RANGE),
    ("0x.ffffff8p128", "+Inf", RANGE),
    ("-0x.ffffff8p128", "-Inf", RANGE),
    ("1e-38", "1e-38", None),
    ("1e-39", "1e-39", None),
    ("1e-40", "1e-40", None),
    ("1e-41", "1e-41", None),
    ("1e-42", "1e-42", None),
    ("1e-43", "1e-43", None),
    ("1e-44", "1e-44", None),
    ("6e-45", "6e-45", None),
    ("5e-45", "6e-45", None),
    ("1e-45", "1e-45", None),
    ("2e-45", "1e-45", None),
    ("3e-45", "3e-45", None),
    ("0x0.89aBcDp-125", "1.2643093e-38", None),
    ("0x0.8000000p-125", "1.1754944e-38", None),
    ("0x0.1234560p-125", "1.671814e-39", None),
    ("0x0.1234567p-125", "1.671814e-39", None),
    ("0x0.1234568p-125", "1.671814e-39", None),
    ("0x0.1234569p-125", "1.671815e-39", None),
    ("0x0.1234570p-125", "1.671815e-39", None),
    ("0x0.0000010p-125", "1e-45", None),
    ("0x0.00000081p-125", "1e-45", None),
    ("0x0.0000008p-125", "0", None),
    ("0x0.0000007p-125", "0", None),
    ("4951760157141521099596496896", "4.9517602e+27", None),
    ("1.000000059604644775390625" + "0" * 10000 + "1", "1.0000001", None),
    ("0x1.000001" + "0" * 10000 + "1p0", "1.0000001", None),
]


def _float32(value: float) -> float:
    """float32(value), or NaN when it lies past the largest float32 (Go would give Inf)."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.nan


def _check(text: str, bits: int, out: str, err: str | None) -> None:
    got = parse_go_float(text, bits)
    if err is not None:
        assert got == (None if err == SYNTAX else err), (text, bits, got)
        return
    # out is FormatFloat(value, 'g', -1, bits): the shortest text that reads back as it
    want = float(out) if bits == 64 else _float32(float(out))
    assert isinstance(got, float), (text, bits, got)
    if math.isnan(want):
        assert math.isnan(got)
    else:  # the same float, signed zeros told apart
        assert (got, math.copysign(1, got)) == (want, math.copysign(1, want)), (text, bits)


def _id(row: tuple) -> str:
    return row[0] if len(row[0]) < 40 else f"{row[0][:30]}...({len(row[0])})"


@pytest.mark.parametrize("row", ATOFTESTS, ids=_id)
def test_atoftests(row):
    text, out, err = row
    _check(text, 64, out, err)
    # testAtof: "if float64(float32(out)) == out", the row holds at bitSize 32 too (NaN never
    # equals itself; a syntax error's out is 0)
    value = float(out)
    if not math.isnan(value) and _float32(value) == value:
        _check(text, 32, out, err)


@pytest.mark.parametrize("row", ATOF32TESTS, ids=_id)
def test_atof32tests(row):
    text, out, err = row
    _check(text, 32, out, err)


def test_round_trip_32():
    # TestRoundTrip32: a stride through the positive and negative float32s, each read back
    # from its shortest text (Python's repr of the float32 widened to float64 is longer than
    # Go's 'g' -1 32, but names the same float32)
    for bits in range(0, 0xFF << 23, 99991):
        f = struct.unpack("<f", struct.pack("<I", bits))[0]
        f = -f if bits & 1 else f
        assert parse_go_float(repr(f), 32) == f


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.strtof.restype, _libc.strtod.restype = ctypes.c_float, ctypes.c_double
_libc.strtof.argtypes = _libc.strtod.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]

_digits = st.text("0123456789", min_size=1, max_size=30)
_hex_digits = st.text("0123456789abcdefABCDEF", min_size=1, max_size=20)
_decimal = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "+", "-"]),
    _digits,
    st.one_of(st.just(""), _digits.map(lambda d: "." + d)),
    st.one_of(st.just(""), st.integers(-400, 400).map(lambda e: f"e{e}")),
)
_hexadecimal = st.builds(
    lambda sign, whole, frac, exp: f"{sign}0x{whole}{frac}p{exp}",
    st.sampled_from(["", "-"]),
    _hex_digits,
    st.one_of(st.just(""), _hex_digits.map(lambda d: "." + d)),
    st.integers(-1200, 1200),
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.one_of(_decimal, _hexadecimal), st.sampled_from([32, 64]))
def test_matches_glibc_strtof_and_strtod(text, bits):
    # glibc rounds decimal and hex text correctly half to even, as Go does; it reports
    # overflow as +-HUGE_VAL where Go reports ErrRange (its underflow ERANGE is no error in Go)
    end = ctypes.c_char_p()
    raw = text.encode()
    buf = ctypes.create_string_buffer(raw)
    value = (_libc.strtof if bits == 32 else _libc.strtod)(buf, ctypes.byref(end))
    assert ctypes.cast(end, ctypes.c_void_p).value == ctypes.addressof(buf) + len(raw)
    got = parse_go_float(text, bits)
    if math.isinf(value):
        assert got == "range"
    else:
        assert got == value and math.copysign(1, got) == math.copysign(1, value)


@pytest.mark.parametrize(
    "text", ["+nan", "-nan", "infin", "nanx", "Infinityx", "i nf", "1_", "0x1p1_", "\u0661"]
)
def test_specials_and_strays_are_syntax_errors(text):
    # special(): "nan" takes no sign; "inf" or "infinity", nothing between or after
    assert parse_go_float(text, 32) is None


def test_below_half_the_smallest_float32_denormal_is_zero():
    # 2**-149 (1.4e-45) is the smallest float32 denormal: 9e-46 is above its half, 7e-46 below
    assert parse_go_float("9e-46", 32) == 2.0**-149
    assert parse_go_float("7e-46", 32) == 0.0
    assert (
        parse_go_float("-7e-46", 32) == 0.0 and math.copysign(1, parse_go_float("-7e-46", 32)) < 0
    )


def test_exponent_digits_stop_counting_as_go_does():
    # readFloat stops adding exponent digits once it passes 10000 (golang/go#42436): Go reads
    # "0.<100000 zeros>9e100000" as 0, where the exact value is 0.9
    assert parse_go_float("0." + "0" * 100000 + "9e100000", 64) == 0.0


def test_more_than_800_digits_before_the_point_are_flagged():
    # Go's decimal.set keeps 800 digits and sets the point from that count: when its fast
    # paths give up, "1<800 zeros>e-800" reads as 0.1 in Go (1.0 exactly); cgalloc gives the
    # exact value and lets callers refuse such text
    long = "1" + "0" * 800 + "e-800"
    assert parse_go_float(long, 64) == 1.0
    assert go_may_misread(long)
    assert go_may_misread("1" + "_0" * 801)
    assert not go_may_misread("1" + "0" * 799 + ".5")  # 800 digits before the point: kept
    assert not go_may_misread("0." + "0" * 900 + "1")  # zeros after the point
    assert not go_may_misread("0" * 900 + "5")  # leading zeros are not significant
    assert not go_may_misread("1" + "_0" * 400 + ".5")  # 401 digits in 801 characters
    assert not go_may_misread("0x1" + "0" * 900 + "p0")  # hex floats take another path
    assert not go_may_misread("1" + "0" * 900 + "x")  # no float at all
