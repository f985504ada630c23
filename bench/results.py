"""Tables that pytest-run benchmarks (bench_setup.py) hand to the terminal summary."""

from __future__ import annotations

SECTIONS: list[tuple[str, list[str]]] = []  # (title, lines)
