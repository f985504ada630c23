"""Parsers: exact cells for kernel-shaped and hostile content, C and Python identical."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cgalloc.host.core import EMISSING_KEY, EPARSE, ERANGE, MAX, OK, FileSpec, native, pure

SINGLE = FileSpec("memory.max")
CPU_MAX = FileSpec("cpu.max", "fields", ("quota", "period"))
STAT = FileSpec("cpu.stat", "keyed", ("usage_usec", "user_usec", "system_usec"))
U64 = 2**64 - 1
MISSING = (EMISSING_KEY, 0)

CASES = [
    (SINGLE, b"104857600\n", [(OK, 104857600)]),
    (SINGLE, b"104857600", [(OK, 104857600)]),  # no trailing newline
    (SINGLE, b"max\n", [(MAX, 0)]),
    (SINGLE, b"-1\n", [(MAX, 0)]),  # v1 cpu.cfs_quota_us
    (SINGLE, b"0\n", [(OK, 0)]),
    (SINGLE, b"007\n", [(OK, 7)]),
    (SINGLE, b"18446744073709551615\n", [(OK, U64)]),
    (SINGLE, b"18446744073709551616\n", [(ERANGE, 0)]),
    (SINGLE, b"9" * 400 + b"\n", [(ERANGE, 0)]),
    (SINGLE, b"9" * 400 + b"x\n", [(EPARSE, 0)]),
    (SINGLE, b"", [(EPARSE, 0)]),
    (SINGLE, b"\n", [(EPARSE, 0)]),
    (SINGLE, b"12\n\n", [(EPARSE, 0)]),
    (SINGLE, b"-2\n", [(EPARSE, 0)]),
    (SINGLE, b"+5\n", [(EPARSE, 0)]),
    (SINGLE, b" 5\n", [(EPARSE, 0)]),
    (SINGLE, b"1\x002\n", [(EPARSE, 0)]),
    (SINGLE, b"MAX\n", [(EPARSE, 0)]),
    (SINGLE, b"1_000\n", [(EPARSE, 0)]),  # int() would accept this
    (SINGLE, "١٢".encode(), [(EPARSE, 0)]),  # Arabic-Indic digits; int() would accept
    (CPU_MAX, b"max 100000\n", [(MAX, 0), (OK, 100000)]),
    (CPU_MAX, b"50000 100000\n", [(OK, 50000), (OK, 100000)]),
    (CPU_MAX, b"50000 100000", [(OK, 50000), (OK, 100000)]),
    (CPU_MAX, b"50000\n", [(EPARSE, 0), (EPARSE, 0)]),
    (CPU_MAX, b"1 2 3\n", [(EPARSE, 0), (EPARSE, 0)]),
    (CPU_MAX, b"max  100000\n", [(EPARSE, 0), (EPARSE, 0)]),
    (CPU_MAX, b"x 18446744073709551616\n", [(EPARSE, 0), (ERANGE, 0)]),
    (STAT, b"usage_usec 15\nuser_usec 10\nsystem_usec 5\n", [(OK, 15), (OK, 10), (OK, 5)]),
    (STAT, b"system_usec 5\nusage_usec 6", [(OK, 6), (EMISSING_KEY, 0), (OK, 5)]),
    (STAT, b"usage_usec 1\nusage_usec 2\n", [(OK, 1), (EMISSING_KEY, 0), (EMISSING_KEY, 0)]),
    (STAT, b"usage_usec\nuser_usec 1 2\n usage_usec 3\n", [MISSING, (EPARSE, 0), MISSING]),
    (STAT, b"usage_usec x\nusage_usec 4\n", [(EPARSE, 0), (EMISSING_KEY, 0), (EMISSING_KEY, 0)]),
    (STAT, b"usage_usec\x00 4\nuser_usec 4\x00\n", [MISSING, (EPARSE, 0), MISSING]),
    (STAT, b"", [(EMISSING_KEY, 0)] * 3),
    (STAT, b"\n\n\n", [(EMISSING_KEY, 0)] * 3),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "data", "cells"), CASES)
def test_parse_exact(impl, spec, data, cells):
    assert impl.parse(spec, data) == cells


_TOKENS = st.sampled_from(
    [b"max", b"-1", b"0", b"7", b"18446744073709551615", b"18446744073709551616", b"", b"-",
     b"x", b"\x00", b" ", b"\n", b"usage_usec", b"user_usec", b"system_usec", b"00012"]
)  # fmt: skip
_HOSTILE = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(_TOKENS, st.binary(max_size=4)), max_size=40).map(b"".join),
    st.lists(st.tuples(_TOKENS, _TOKENS), max_size=12).map(
        lambda kv: b"".join(k + b" " + v + b"\n" for k, v in kv)
    ),
    st.integers(0, 2**70).map(lambda n: str(n).encode() + b"\n"),
)


@settings(max_examples=1500, deadline=None)
@given(data=_HOSTILE, spec=st.sampled_from([SINGLE, CPU_MAX, STAT]))
def test_c_and_python_parsers_agree(data, spec):
    assert native.parse(spec, data) == pure.parse(spec, data)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 2**64 - 1))
def test_every_u64_round_trips(n):
    assert native.parse(SINGLE, b"%d\n" % n) == [(OK, n)]
