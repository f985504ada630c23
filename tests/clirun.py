"""Run the cgalloc command line in-process, as a script would see it."""

from __future__ import annotations

from cgalloc.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``cgalloc ARGV``."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err
