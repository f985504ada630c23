"""Choosing the implementation, and the Python status codes matching the C ones."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cgalloc.core._cgcore import lib

from cgalloc.core import records


@pytest.mark.parametrize(("env", "expected"), [({}, "native"), ({"CGALLOC_PURE": "1"}, "pure")])
def test_cgalloc_pure_forces_the_python_core(env, expected):
    out = subprocess.run(
        [sys.executable, "-c", "import cgalloc.core as c; print(c.IMPLEMENTATION, c.Root)"],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    assert out.stdout.split()[0] == expected
    assert f"cgalloc.core.{expected}.Root" in out.stdout


def test_status_codes_match_the_c_core():
    for code, name in enumerate(records.STATUS_NAMES):
        assert getattr(records, name) == code == getattr(lib, f"CG_{name}")
    assert [getattr(lib, f"CG_{k.upper()}") for k in records.KINDS] == [0, 1, 2]
