"""The lazy command group: --help lists every command without importing any of them."""

from __future__ import annotations

import subprocess
import sys

import typer.main

from cgalloc.cli import COMMANDS, app


def test_listing_is_the_start_of_each_commands_help():
    group = typer.main.get_command(app)
    for name, (_module, short) in COMMANDS.items():
        assert group.commands[name].help.startswith(short), name


def test_help_imports_no_command_module():
    code = (
        "import sys\nfrom cgalloc.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('cgalloc.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip().splitlines()[-1]
    assert "Commands:" in out.stdout
    for name in COMMANDS:
        assert name in out.stdout
    assert loaded == "['cgalloc.cli', 'cgalloc.errors']"


def test_unknown_command_is_a_usage_error():
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "nope"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2
    assert "No such command 'nope'" in out.stderr
