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


def test_show_runs_without_pydantic():
    """typer's default coercion imports pydantic; cgalloc's plain options do without it."""
    code = (
        "import sys\nfrom cgalloc.cli import main\n"
        "try:\n    main(['show', '--capacity', 'cpu=4,memory=8Gi,pid=100,ephemeral-storage=1Gi',"
        " '-o', 'json', '--kube-reserved', 'cpu=100m'])\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert '"allocatable"' in out.stdout.lower()
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_options_keep_their_types_and_errors():
    """Enum, float and list options parse as typer would, and bad values are usage errors."""
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "stats", "--interval", "soon"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--interval" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "show", "-o", "xml"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "xml" in out.stderr
