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

import contextlib
import os
import resource
import threading
from collections.abc import Sequence

# What a change costs the kernel, in µs, as measured on a v1 host at 1000 pods (README): only
# the lanes' balance depends on these, never what is made.
MKDIR_COST = 30
WRITE_COST = 20
WRITE_COSTS = {"cpuset.cpus": 100}
LANES = 2
MIN_CHANGES = 64  # below this, one lane: starting a thread costs more than it would save
CAP_SYS_NICE = 23  # capability(7): may lower a nice value, i.e. put this thread's back
LOWEST = 19  # the nice value of a thread that runs only where nothing else would


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


def restorable(old: int, nice_limit: int, caps: int, uid_map: str) -> bool:
    """Whether a thread at nice ``old`` may come back to it from :data:`LOWEST`: its
    RLIMIT_NICE (``nice_limit``, -1 for none) allows ``old``, or it has CAP_SYS_NICE (in
    ``caps``, CapEff's bits) in the initial user namespace (``uid_map`` is the identity map):
    CAP_SYS_NICE inside another user namespace shows in CapEff but does not allow lowering."""
    if nice_limit == -1 or 20 - old <= nice_limit:
        return True
    initial = uid_map.split() == ["0", "0", "4294967295"]
    return initial and bool(caps >> CAP_SYS_NICE & 1)


def may_renice(old: int) -> bool:
    """:func:`restorable` for this thread, from its status and limits; False where it cannot
    tell."""
    try:
        with open("/proc/thread-self/status", encoding="ascii") as f:
            caps = next(line for line in f if line.startswith("CapEff:"))
        with open("/proc/self/uid_map", encoding="ascii") as f:
            uid_map = f.read()
        limit = resource.getrlimit(resource.RLIMIT_NICE)[0]
        return restorable(old, limit, int(caps.split()[1], 16), uid_map)
    except (OSError, StopIteration, ValueError, IndexError):
        return False


class Behind:
    """The calling thread at the lowest CPU priority while two or more lanes run on other
    threads, so what it does meanwhile (setup's record and report, needed only once the lanes
    end) runs on what CPU their kernel work leaves. The last lane to end puts it back (it
    is not left lowered while a busy node's other work would starve it), and :meth:`restore`
    does at the latest. Only where the priority can be put back (:func:`may_renice`); the nice
    value is a thread's own on Linux (setpriority(2))."""

    def __init__(self, lanes: int) -> None:
        self._tid = threading.get_native_id()
        self._left = lanes
        self._old: int | None = None
        self._lock = threading.Lock()

    def lower(self) -> None:
        """Lower the calling thread, if two or more lanes are still running."""
        with self._lock, contextlib.suppress(OSError):
            if self._left < 2:
                return
            old = os.getpriority(os.PRIO_PROCESS, self._tid)
            if old < LOWEST and may_renice(old):
                self._old = old
                os.setpriority(os.PRIO_PROCESS, self._tid, LOWEST)

    def lane_ended(self) -> None:
        """A lane's thread has ended its call; the last one restores the calling thread."""
        with self._lock:
            self._left -= 1
            ended = self._left <= 0
        if ended:
            self.restore()

    def restore(self) -> None:
        """The calling thread back at its priority (once; a no-op if it was not lowered)."""
        with self._lock:
            old, self._old = self._old, None
            if old is not None:
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, self._tid, old)
