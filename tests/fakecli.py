"""``python tests/fakecli.py BASE [--pause-after N] -- ARGS``: the cgalloc CLI on the fake tree
under BASE, in a process of its own (so a test can kill it midway or run two at once).

With ``--pause-after N`` it stops for an hour once N changes are made, before the next one is
journaled, announcing ``cgalloc: test pause after N changes`` on stderr.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakecgroup import fake_switches

import cgalloc.apply
from cgalloc.cli import main
from cgalloc.ownership import StateDir


def pause_after(changes: int) -> None:
    """Make StateDir stop before journaling change ``changes + 1`` (every change is journaled
    right before it is made, so exactly ``changes`` are made then)."""
    append = StateDir.append
    seen = [0]

    def pausing(self: StateDir, entry: dict) -> None:
        if seen[0] == changes:
            print(f"cgalloc: test pause after {changes} changes", file=sys.stderr, flush=True)
            time.sleep(3600)
        seen[0] += 1
        append(self, entry)

    StateDir.append = pausing  # type: ignore[method-assign]


def run(argv: list[str]) -> None:
    base, rest = argv[0], argv[1:]
    if rest[:1] == ["--pause-after"]:
        pause_after(int(rest[1]))
        rest = rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    cgalloc.apply.SWITCHES = fake_switches(Path(base))
    main(rest)


if __name__ == "__main__":
    run(sys.argv[1:])
