"""Choosing the implementation, and the Python status codes matching the C ones."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cgalloc.host.core._cgcore import lib

from cgalloc.host.core import records

# A None entry in sys.modules makes importing the extension raise ImportError, as a missing
# build does; the hook is here, in the test, not in the installed package.
_BLOCK = "import sys; sys.modules['cgalloc.host.core._cgcore'] = None; "


@pytest.mark.parametrize(("prefix", "expected"), [("", "native"), (_BLOCK, "pure")])
def test_the_pure_core_is_loaded_only_when_the_extension_cannot_be(prefix, expected):
    code = prefix + "import cgalloc.host.core as c; print(c.IMPLEMENTATION, c.Root, c.PURE_REASON)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.stdout.split()[0] == expected
    assert f"cgalloc.host.core.{expected}.Root" in out.stdout
    assert out.stdout.rstrip().endswith("None") == (expected == "native")


def test_no_environment_variable_selects_the_pure_core():
    """A root tool runs the code it was installed with: the old CGALLOC_PURE=1 is ignored."""
    out = subprocess.run(
        [sys.executable, "-c", "import cgalloc.host.core as c; print(c.IMPLEMENTATION)"],
        capture_output=True, text=True, check=True,
        env={"PATH": "/usr/bin:/bin", "CGALLOC_PURE": "1"},
    )  # fmt: skip
    assert out.stdout.split() == ["native"]


def test_status_codes_match_the_c_core():
    for code, name in enumerate(records.STATUS_NAMES):
        assert getattr(records, name) == code == getattr(lib, f"CG_{name}")
    assert [getattr(lib, f"CG_{k.upper()}") for k in records.KINDS] == [0, 1, 2]
