"""Which descriptors a sampler keeps open between samples, within a memory budget per cgroup.

Every cgroupfs file is a seq_file: a read descriptor pins the page its first read allocated
plus the seq_file, kernfs_open_file and struct file until it is closed, while an O_PATH
directory descriptor is a struct file alone. Measured by ``python -m bench`` ("fd costs":
``csrc/floor.c hold`` in a ``cgalloc-test-fdcost-<pid>`` memory cgroup, v1 host, kernel 6.18):
a read fd costs 4.3-6.1 KiB, a directory fd 0.26-0.44 KiB. A kept read fd saves an
openat+read+close through the directory fd (~8 µs for a one-line file, ~4 µs for memory.stat,
whose content the kernel generates on every read anyway); a directory fd saves resolving the
path for each of its files (1-5 µs each, more for deeper cgroups).

The policy, for ``n`` cgroups sampled through ``m`` mounts, with ``free`` descriptors to spare:

1. every cgroup gets one directory fd per mount (the best gain per KiB), as far as the budget
   and the descriptors go;
2. what is left of ``n × BUDGET_KIB`` (less the sampler's own memory, ``USER_KIB`` per cgroup)
   buys kept read fds, file by file in order of measured gain, for the first cgroups in the
   order given (kubepods and the QoS tiers before pods), until the budget or the descriptors
   run out;
3. everything else is opened, read and closed on each sample: through the directory fd where
   the cgroup has one, by path beneath the mount where it has none.

A shortage only makes sampling slower, never fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cgalloc.host.core.records import FileSpec

BUDGET_KIB = 4.0  # total memory per sampled cgroup, user and kernel
USER_KIB = 0.7  # the sampler's own memory per cgroup (measured 0.66 KiB of RSS at 4000 cgroups)
DIR_FD_KIB = 0.3  # an O_PATH directory fd (measured 0.26-0.44 KiB)
KEPT_FD_KIB = 6.0  # a read fd after its first read (measured 4.3-6.1 KiB: the worst is budgeted)

# µs a kept fd's pread saves per sample over openat+read+close through the directory fd
# (medians of interleaved rounds, ``csrc/floor.c`` warm vs dirfd, v1 host, lightly loaded; the
# one-line files all gain 7-9 µs, within each other's noise, and memory.stat 4-11 µs).
KEEP_GAIN_US: dict[str, float] = {
    "memory.limit_in_bytes": 8.0,
    "cpu.shares": 8.0,
    "cpuacct.usage": 8.0,
    "cpu.cfs_quota_us": 7.8,
    "pids.current": 7.8,
    "pids.max": 7.6,
    "memory.usage_in_bytes": 7.0,
    "cpu.stat": 7.0,
    "memory.stat": 4.0,
}
# files not measured: by kind (a keyed file is usually generated, like memory.stat)
KIND_GAIN_US = {"single": 7.5, "fields": 7.5, "keyed": 4.0}


def keep_gain(spec: FileSpec) -> float:
    """The measured (or, for an unmeasured file, its kind's) µs a kept fd saves per sample."""
    return KEEP_GAIN_US.get(spec.name, KIND_GAIN_US[spec.kind])


@dataclass(frozen=True)
class FdPolicy:
    """Dirs ``[0, dirfds)`` keep one O_PATH fd per mount; ``kept[name]``: how many of the first
    dirs keep that file open."""

    dirfds: int
    kept: dict[str, int]

    def counts(self, specs: Sequence[FileSpec]) -> list[int]:
        """Per spec, for ``Sampler.set_policy``."""
        return [self.kept.get(s.name, 0) for s in specs]

    def fds(self, nmounts: int) -> int:
        return self.dirfds * nmounts + sum(self.kept.values())


def choose(
    specs_per_mount: Sequence[Sequence[FileSpec]],
    ndirs: int,
    free_fds: int,
    budget_kib: float = BUDGET_KIB,
) -> FdPolicy:
    """The policy for ``ndirs`` cgroups read through one spec list per mount (module doc)."""
    nmounts = len(specs_per_mount)
    free = max(free_fds, 0)
    pool = ndirs * (budget_kib - USER_KIB)
    dirfds = 0
    if nmounts:
        dirfds = min(ndirs, free // nmounts, max(int(pool // (nmounts * DIR_FD_KIB)), 0))
    free -= dirfds * nmounts
    pool -= dirfds * nmounts * DIR_FD_KIB
    kept: dict[str, int] = {}
    by_gain = sorted(
        (s for specs in specs_per_mount for s in specs), key=lambda s: (-keep_gain(s), s.name)
    )
    for spec in by_gain:
        n = max(min(dirfds, free, int(pool // KEPT_FD_KIB)), 0)
        kept[spec.name] = n
        free -= n
        pool -= n * KEPT_FD_KIB
    return FdPolicy(dirfds, kept)
