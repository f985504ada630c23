"""Integer flags read as the kubelet's pflag reads them: Int32Var (--max-pods, --pods-per-core)
and Int64Var (--pod-max-pids) call strconv.ParseInt(s, 0, 32|64) (spf13/pflag int32.go,
int64.go), so a value out of range or in non-ASCII digits is an error, not a config the
kubelet (and cgalloc's own --config) would then refuse. Found by a hostile-user probe:
``kubelet-config --max-pods=99999999999`` printed maxPods: 99999999999."""

from __future__ import annotations

import pytest
from clirun import run_cli

from cgalloc.inputs.gostrconv import parse_go_int


@pytest.mark.parametrize(
    ("text", "bits", "want"),
    [
        # strconv's own table (go/src/strconv/atoi_test.go, parseInt32Tests / parseBaseTests
        # with base 0): prefixes, a leading 0 as octal, underscores only between digits
        ("0", 31, 0),
        ("-0", 31, 0),
        ("+5", 31, 5),
        ("12345", 31, 12345),
        ("-12345", 31, -12345),
        ("2147483647", 31, (1 << 31) - 1),
        ("-2147483648", 31, -(1 << 31)),
        ("2147483648", 31, "range"),
        ("-2147483649", 31, "range"),
        ("9223372036854775807", 63, (1 << 63) - 1),
        ("9223372036854775808", 63, "range"),
        ("0x1F", 31, 31),
        ("0X1f", 31, 31),
        ("0o17", 31, 15),
        ("0b101", 31, 5),
        ("010", 31, 8),
        ("0_7", 31, 7),
        ("1_000", 31, 1000),
        ("0x_1F", 31, 31),
        ("08", 31, None),
        ("_1", 31, None),
        ("1_", 31, None),
        ("1__0", 31, None),
        ("0x", 31, None),
        ("", 31, None),
        (" 110", 31, None),
        ("110 ", 31, None),
        ("1.0", 31, None),
        ("1e3", 31, None),
        ("١٢", 31, None),  # Arabic-Indic digits: Python's int() takes them, Go does not
        ("１２", 31, None),  # fullwidth
        # ParseUint's loop stops at its first problem (atoi.go): an overflow met before the
        # byte that is no digit is ErrRange, one after it ErrSyntax; the unsigned loop allows
        # up to 2^32 - 1 for an int32, so ParseInt's own signed bound comes only after it
        ("99999999999x", 31, "range"),
        ("4294967296x", 31, "range"),
        ("2147483648x", 31, None),
        ("9x99999999999", 31, None),
        ("-99999999999x", 31, "range"),
        ("0x1_FFFF_FFFF_", 31, "range"),
        ("2147483648_", 31, None),
        ("99999999999999999999 ", 63, "range"),
    ],
)
def test_parse_go_int_is_strconv_parse_int_base_0(text, bits, want):
    assert parse_go_int(text, bits) == want


@pytest.mark.parametrize(
    ("flag", "value", "expect"),
    [
        (
            "--max-pods",
            "99999999999",
            'maxPods (--max-pods): "99999999999" is out of range for an int32',
        ),
        ("--pods-per-core", "2147483648", "is out of range for an int32"),
        ("--pod-max-pids", "99999999999999999999", "is out of range for an int64"),
        ("--max-pods", "١٢", "is not an integer"),
        ("--pod-max-pids", "٥", "is not an integer"),
    ],
)
@pytest.mark.parametrize("command", ["kubelet-config", "show"])
def test_an_integer_flag_the_kubelet_refuses_is_exit_2(capsys, command, flag, value, expect):
    extra = ["--capacity", "cpu=4,memory=8Gi"] if command == "show" else []
    code, out, err = run_cli(capsys, command, *extra, f"{flag}={value}")
    assert code == 2, (out, err)
    assert out == ""
    assert expect in err and len(err.splitlines()) == 1, err


def test_a_prefixed_integer_flag_is_read_as_the_kubelet_reads_it(capsys):
    code, out, err = run_cli(capsys, "kubelet-config", "--max-pods=0x20")
    assert code == 0, err
    assert "maxPods: 32" in out
