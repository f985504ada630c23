"""``python tests/fakecli.py BASE [--pause-after N] -- ARGS``: the cgalloc CLI on the fake tree
under BASE, in a process of its own (so a test can kill it midway or run two at once).

With ``--pause-after N`` it stops for an hour once N changes are made, before the next one,
announcing ``cgalloc: test pause after N changes`` on stderr.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakecgroup import fake_host

import cgalloc.ops.apply
from cgalloc import cli


def pause_after(changes: int) -> None:
    """Make apply stop before change ``changes + 1`` (so exactly ``changes`` are made)."""
    perform = cgalloc.ops.apply._perform
    seen = [0]

    def pausing(*args, **kwargs) -> bool:
        if seen[0] == changes:
            print(f"cgalloc: test pause after {changes} changes", file=sys.stderr, flush=True)
            time.sleep(3600)
        seen[0] += 1
        return perform(*args, **kwargs)  # False: a mkdir systemd made meanwhile, not recorded

    cgalloc.ops.apply._perform = pausing


def start(argv: list[str]) -> None:
    base, rest = argv[0], argv[1:]
    if rest[:1] == ["--pause-after"]:
        pause_after(int(rest[1]))
        rest = rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    cli.run(rest, fake_host(Path(base)))  # as the installed program runs it


if __name__ == "__main__":
    start(sys.argv[1:])
