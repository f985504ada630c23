"""``python tests/kernel/planned.py CAPACITY -- ARGS``: the cgalloc CLI with this machine's
capacity replaced by CAPACITY (the ``--capacity`` form, e.g. ``cpu=2,memory=600Mi``).

``setup`` refuses ``--capacity`` without ``--dry-run`` (a planned node must not write real
limits); the kernel tests still need a small, fixed node on the VM, so the test suite, not the
tool, stands in for the machine's capacity here.
"""

from __future__ import annotations

import sys

import cgalloc.cli.inputs
from cgalloc.cli import main
from cgalloc.inputs.config import load_node_config


def run(argv: list[str]) -> None:
    capacity, rest = argv[0], argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    planned = load_node_config({"capacity": [capacity]}).capacity_overrides
    real = cgalloc.cli.inputs.read_capacity
    cgalloc.cli.inputs.read_capacity = lambda root_dir: {**real(root_dir), **planned}
    main(rest)


if __name__ == "__main__":
    run(sys.argv[1:])
