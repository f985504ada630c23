"""``python tests/kernel/planned.py CAPACITY -- ARGS``: the cgalloc CLI with this machine's
capacity replaced by CAPACITY (the ``--capacity`` form, e.g. ``cpu=2,memory=600Mi``).

``setup`` refuses ``--capacity`` without ``--dry-run`` (a planned node must not write real
limits); the kernel tests still need a small, fixed node on the VM, so the test suite hands the
CLI a host that takes the planned capacity.
"""

from __future__ import annotations

import sys

from cgalloc.cli import main
from cgalloc.host.machine import Host


class PlannedHost(Host):
    """This VM, with setup allowed to write a planned node's limits to it."""

    is_this_node = False


def run(argv: list[str]) -> None:
    capacity, rest = argv[0], argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if rest[:1] != ["teardown"]:  # the one command without the node inputs
        rest = [*rest[:1], "--capacity", capacity, *rest[1:]]
    main(rest, PlannedHost())


if __name__ == "__main__":
    run(sys.argv[1:])
