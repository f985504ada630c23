"""Shell completion (issue 10 §3): `cgalloc completion SHELL` (and --show-completion) print a
script that completes commands and options in a real shell."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def cgalloc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cgalloc", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    ("words", "expect"),
    [("cgalloc se", {"setup"}), ("cgalloc teardown --dr", {"--dry-run"})],
)
def test_bash_completes_commands_and_options(tmp_path, words, expect):
    script = cgalloc("completion", "bash")
    assert script.returncode == 0, script.stderr
    # the script runs `cgalloc`: a wrapper on PATH stands for the installed entry point
    wrapper = tmp_path / "cgalloc"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m cgalloc "$@"\n')
    wrapper.chmod(0o755)
    (tmp_path / "completion.bash").write_text(script.stdout)
    cword = len(words.split()) - 1
    shell = (
        f"source {tmp_path}/completion.bash; COMP_WORDS=({words}); COMP_CWORD={cword}; "
        '_cgalloc_completion cgalloc; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", shell], capture_output=True, text=True, timeout=60,
        env={"PATH": f"{tmp_path}:{BIN}:/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) == expect


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_scripts_for_zsh_and_fish_call_back_into_cgalloc(shell):
    done = cgalloc("completion", shell)
    assert done.returncode == 0
    assert f"_CGALLOC_COMPLETE=complete_{shell}" in done.stdout


def test_unknown_shell_is_a_usage_error():
    done = cgalloc("completion", "tcsh")
    assert done.returncode == 2 and "'tcsh' is not one of" in done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_root_offers_install_and_show_completion():
    # typer finds the shell among the parent processes: run it from bash, which must stay
    # its parent (bash -c execs a lone command in its place; a run with no shell above it,
    # such as a detached one, then found none)
    done = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m cgalloc --show-completion; exit $?"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "_CGALLOC_COMPLETE=complete_bash" in done.stdout
    assert "--install-completion" in cgalloc("--help").stdout
