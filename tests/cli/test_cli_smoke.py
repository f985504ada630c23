"""The command line starts and explains itself, both as an entry point and as a module."""

import subprocess
import sys


def test_module_help_lists_commands():
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "--help"], capture_output=True, text=True, check=True
    )
    assert "Node Allocatable" in out.stdout
