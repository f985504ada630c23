"""pytest hooks for ``python -m bench setup`` (bench_setup.py, pytest-benchmark): its table is
printed at the end of the run. ``bench_*.py`` are collected through ``python_files``."""

from __future__ import annotations

from bench import results


def pytest_terminal_summary(terminalreporter):
    for title, lines in results.SECTIONS:
        terminalreporter.write_sep("=", title)
        terminalreporter.write_line("\n".join(lines))
