"""Runs csrc/sanitize.sh: the C core under ASan/UBSan, its C test driver and the parser fuzz."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[3] / "csrc" / "sanitize.sh"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_core_is_clean_under_address_and_undefined_sanitizers():
    proc = subprocess.run(
        ["sh", str(SCRIPT)], capture_output=True, text=True, timeout=180, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "test_cgcore: ok" in proc.stdout
    assert "fuzz_parsers: 200000 inputs, no findings" in proc.stdout
