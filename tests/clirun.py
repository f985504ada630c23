"""Run the cgalloc command line in-process, as a script would see it."""

from __future__ import annotations

import os
from pathlib import Path

from cgalloc.cli import main

# The host a test's CLI runs act on: None is this machine (fakecgroup.use_fake_tree sets a
# fake one for the test).
HOST = None


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``cgalloc ARGV`` on :data:`HOST`."""
    try:
        main(list(argv), HOST)
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def keep_escapes(monkeypatch) -> None:
    """Let escape sequences reach capsys as they would a terminal: off a terminal, click's echo
    deletes ``ESC [ ... letter`` sequences, so a raw colour code in a name would pass unseen."""
    import typer._click.utils

    monkeypatch.setattr(typer._click.utils, "should_strip_ansi", lambda *_a, **_k: False)


def files_below(root: Path) -> dict[str, str]:
    """Every file and link below ``root`` (links not followed): path -> content or '-> target';
    what a command run with ``--root`` left there."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            out[rel] = "-> " + os.readlink(path) if path.is_symlink() else path.read_text()
    return out
