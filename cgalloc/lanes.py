"""Which of a plan's changes the core makes side by side: lanes of whole v1 hierarchies.

On cgroup v1 every hierarchy is a tree of its own, so no change in one waits for a change in
another: :func:`split` deals a plan's mounts into two lanes, each lane's changes in plan
order, and :func:`cgalloc.apply.apply` makes each lane one core call on a thread of its own
(the GIL is released in each). The kernel runs much of a mkdir under one lock for every
hierarchy (``cgroup_mutex``), but a write takes its controller's locks, and the writes are
half of a cold setup's time: at 1000 pods on a v1 host a mkdir took ~30 µs, a ``cpuset.cpus``
write ~100 µs, another write ~20 µs (csrc/setup_floor.c, one kind at a time).

One lane for a plan in one mount (cgroup v2, or a single controller), a small plan (a thread
costs more than it saves) and a process allowed one CPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

# What a change costs the kernel, in µs, as measured on a v1 host at 1000 pods (README): only
# the lanes' balance depends on these, never what is made.
MKDIR_COST = 30
WRITE_COST = 20
WRITE_COSTS = {"cpuset.cpus": 100}
LANES = 2
MIN_CHANGES = 64  # below this, one lane: starting a thread costs more than it would save


def cpus_allowed() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call here: assume one
        return 1


def cost(kind: str, file: str) -> int:
    """The kernel cost a change of ``kind`` (and ``file``, a write's) is balanced by."""
    return MKDIR_COST if kind == "mkdir" else WRITE_COSTS.get(file, WRITE_COST)


def split(changes: Sequence[tuple[str, str, str]], cpus: int | None = None) -> list[list[int]]:
    """``changes`` ((kind, mount, file) each, in plan order) as lanes: the indices of each
    lane's changes, in order. Every change of a mount is in one lane; the mounts are dealt
    largest first to the lane with the least cost so far. One lane (every index) for fewer
    than two mounts, fewer than :data:`MIN_CHANGES` changes or fewer than two ``cpus``
    (default: :func:`cpus_allowed`)."""
    every = list(range(len(changes)))
    if len(changes) < MIN_CHANGES or (cpus if cpus is not None else cpus_allowed()) < 2:
        return [every]
    per_mount: dict[str, int] = {}
    for kind, mount, file in changes:
        per_mount[mount] = per_mount.get(mount, 0) + cost(kind, file)
    if len(per_mount) < 2:
        return [every]
    loads = [0] * LANES
    lane_of: dict[str, int] = {}
    # largest first, then by name: the same plan always splits the same way
    for mount, c in sorted(per_mount.items(), key=lambda mc: (-mc[1], mc[0])):
        k = loads.index(min(loads))
        lane_of[mount] = k
        loads[k] += c
    lanes: list[list[int]] = [[] for _ in range(LANES)]
    for i, (_kind, mount, _file) in enumerate(changes):
        lanes[lane_of[mount]].append(i)
    return [lane for lane in lanes if lane]
