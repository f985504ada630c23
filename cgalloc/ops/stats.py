"""Usage of a cgroup tree: per-cgroup records read by the C core, and the summary-API shape.

What is read, per cgroup (v1 file / v2 file):

- CPU: ``cpuacct.usage`` ns / ``cpu.stat usage_usec``×1000; throttling from ``cpu.stat``
  (``throttled_time`` ns / ``throttled_usec``×1000).
- memory: ``memory.usage_in_bytes`` / ``memory.current``; working set = usage −
  ``total_inactive_file`` / ``inactive_file``, clamped at 0; rss = ``total_rss`` / ``anon``;
  page faults ``total_pgfault``, ``total_pgmajfault`` / ``pgfault``, ``pgmajfault``.
- pids: ``pids.current``.
- limits: ``memory.limit_in_bytes`` / ``memory.max``, ``cpu.shares`` / ``cpu.weight``,
  ``cpu.cfs_quota_us`` + ``cpu.cfs_period_us`` / ``cpu.max``, ``pids.max``.

These are the sources cAdvisor feeds the kubelet's ``/stats/summary`` from, so the numbers here
are the numbers the kubelet would report for the same cgroups.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.errors import HostError
from cgalloc.host import core
from cgalloc.host.capacity import pid_sysctls
from cgalloc.host.cgroupfs import detect
from cgalloc.host.core.records import MAX, OK, FileSpec, Snapshot
from cgalloc.model import naming
from cgalloc.model.hierarchy import Hierarchy, controller_dirs
from cgalloc.model.resources import CPU, MEMORY
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, pid_capacity

if TYPE_CHECKING:
    from cgalloc.host import sampler_policy
    from cgalloc.model.nodeconfig import NodeConfig

UNLIMITED = 2**64 - 1  # how "max" is reported (cAdvisor's math.MaxUint64)
MEMORY_UNLIMITED_ABOVE = 1 << 62  # the kubelet's isMemoryUnlimited bound for availableBytes


class Field(NamedTuple):
    """One number of a cgroup: where it is read from and how it is scaled."""

    name: str
    controller: str  # v1 controller whose mount holds the file; unused on v2
    file: str
    key: str | None = None  # keyed file key; None for a single-value file
    field: int | None = None  # index in a space-separated file (cpu.max); None otherwise
    scale: int = 1  # multiply by this (usec -> ns)


V1_FIELDS: tuple[Field, ...] = (
    Field("cpu_usage_ns", "cpuacct", "cpuacct.usage"),
    Field("nr_periods", "cpu", "cpu.stat", key="nr_periods"),
    Field("nr_throttled", "cpu", "cpu.stat", key="nr_throttled"),
    Field("throttled_ns", "cpu", "cpu.stat", key="throttled_time"),
    Field("cpu_shares", "cpu", "cpu.shares"),
    Field("cpu_quota_us", "cpu", "cpu.cfs_quota_us"),
    Field("cpu_period_us", "cpu", "cpu.cfs_period_us"),
    Field("memory_usage", "memory", "memory.usage_in_bytes"),
    Field("memory_limit", "memory", "memory.limit_in_bytes"),
    Field("inactive_file", "memory", "memory.stat", key="total_inactive_file"),
    Field("rss", "memory", "memory.stat", key="total_rss"),
    Field("pgfault", "memory", "memory.stat", key="total_pgfault"),
    Field("pgmajfault", "memory", "memory.stat", key="total_pgmajfault"),
    Field("pids_current", "pids", "pids.current"),
    Field("pids_max", "pids", "pids.max"),
)

V2_FIELDS: tuple[Field, ...] = (
    Field("cpu_usage_ns", "cpu", "cpu.stat", key="usage_usec", scale=1000),
    Field("nr_periods", "cpu", "cpu.stat", key="nr_periods"),
    Field("nr_throttled", "cpu", "cpu.stat", key="nr_throttled"),
    Field("throttled_ns", "cpu", "cpu.stat", key="throttled_usec", scale=1000),
    Field("cpu_weight", "cpu", "cpu.weight"),
    Field("cpu_quota_us", "cpu", "cpu.max", field=0),
    Field("cpu_period_us", "cpu", "cpu.max", field=1),
    Field("memory_usage", "memory", "memory.current"),
    Field("memory_limit", "memory", "memory.max"),
    Field("inactive_file", "memory", "memory.stat", key="inactive_file"),
    Field("rss", "memory", "memory.stat", key="anon"),
    Field("anon", "memory", "memory.stat", key="anon"),
    Field("file", "memory", "memory.stat", key="file"),
    Field("pgfault", "memory", "memory.stat", key="pgfault"),
    Field("pgmajfault", "memory", "memory.stat", key="pgmajfault"),
    Field("pids_current", "pids", "pids.current"),
    Field("pids_max", "pids", "pids.max"),
)


def fields_for(version: str) -> tuple[Field, ...]:
    """The fields read on a hierarchy version; hybrid nodes keep their controllers on v1."""
    return V2_FIELDS if version == "v2" else V1_FIELDS


# One field's values over the dirs of a read: a number, UNLIMITED for "max"/"-1", None when the
# file or key is absent.
Column = list[int | None]
# A status byte -> 1 when the cell was read (OK or MAX), else 0.
_READ = bytes(int(st in (OK, MAX)) for st in range(256))


class CgroupStats(NamedTuple):
    """One cgroup at one instant. ``None`` = not available (file or controller missing)."""

    path: str  # relative to the hierarchy root, "" for the root cgroup
    found: bool  # False when the directory does not exist in any read mount
    time_ns: int  # CLOCK_MONOTONIC of the sample, for rates
    cpu_usage_ns: int | None
    nr_periods: int | None
    nr_throttled: int | None
    throttled_ns: int | None
    memory_usage: int | None
    working_set: int | None
    rss: int | None
    pgfault: int | None
    pgmajfault: int | None
    pids_current: int | None
    memory_limit: int | None  # UNLIMITED for no limit
    cpu_shares: int | None  # v1
    cpu_weight: int | None  # v2
    cpu_quota_us: int | None  # UNLIMITED for no quota
    cpu_period_us: int | None
    pids_max: int | None


def working_set(usage: int | None, inactive_file: int | None) -> int | None:
    """usage − inactive_file, clamped at 0 (cAdvisor setMemoryStats)."""
    if usage is None:
        return None
    if inactive_file is None:
        return usage
    return max(usage - inactive_file, 0)


def usage_nano_cores(prev: CgroupStats | None, cur: CgroupStats) -> int | None:
    """CPU rate between two samples, as cAdvisor's InstCpuStats computes it.

    ``uint64(float64(Δusage) / float64(Δt_ns) * 1e9)``; None when there is no earlier sample or
    when time or the cumulative usage went backwards (cAdvisor refuses those too).
    """
    if prev is None or prev.cpu_usage_ns is None or cur.cpu_usage_ns is None:
        return None
    dt = cur.time_ns - prev.time_ns
    if dt <= 0 or cur.cpu_usage_ns < prev.cpu_usage_ns:
        return None
    return int(float(cur.cpu_usage_ns - prev.cpu_usage_ns) / float(dt) * 1e9)


def records(
    dirs: Sequence[str], columns: dict[str, Column], found: Sequence[bool], time_ns: int
) -> list[CgroupStats]:
    """One record per dir from the columns of :func:`fields_for`'s fields (a field no mount
    had is None throughout).

    On the v2 root, which has no ``memory.current``, usage is anon + file like the kubelet.
    """
    missing: Column = [None] * len(dirs)
    col = columns.get
    usage = col("memory_usage", missing)
    if "anon" in columns and None in usage:
        parts = zip(usage, columns["anon"], col("file", missing), strict=True)
        usage = [a + f if u is None and a is not None and f is not None else u for u, a, f in parts]
    ws = list(map(working_set, usage, col("inactive_file", missing)))
    rows = zip(
        dirs, found, itertools.repeat(time_ns, len(dirs)), col("cpu_usage_ns", missing),
        col("nr_periods", missing), col("nr_throttled", missing), col("throttled_ns", missing),
        usage, ws, col("rss", missing), col("pgfault", missing), col("pgmajfault", missing),
        col("pids_current", missing), col("memory_limit", missing), col("cpu_shares", missing),
        col("cpu_weight", missing), col("cpu_quota_us", missing), col("cpu_period_us", missing),
        col("pids_max", missing), strict=True,
    )  # fmt: skip
    return list(map(CgroupStats._make, rows))


# ---- reading a tree ----------------------------------------------------------------------


class MountPlan:
    """What to read from one mount: its FileSpecs and where each field's cell sits."""

    def __init__(self, path: str, fields: Sequence[Field]):
        self.path = path
        by_file: dict[str, list[Field]] = {}
        for f in fields:
            by_file.setdefault(f.file, []).append(f)
        specs: list[FileSpec] = []
        # (field name, cell offset within a dir, scale)
        self.cells: list[tuple[str, int, int]] = []
        offset = 0
        for name, group in by_file.items():
            if group[0].key is not None:
                keys = list(dict.fromkeys(f.key for f in group))
                spec = FileSpec(name, "keyed", tuple(keys))
                self.cells += [(f.name, offset + keys.index(f.key), f.scale) for f in group]
            elif group[0].field is not None:
                width = max(f.field for f in group) + 1
                spec = FileSpec(name, "fields", tuple(f"f{i}" for i in range(width)))
                self.cells += [(f.name, offset + f.field, f.scale) for f in group]
            else:
                spec = FileSpec(name)
                self.cells += [(f.name, offset, f.scale) for f in group]
            specs.append(spec)
            offset += spec.ncells
        self.specs = tuple(specs)
        self.cells_per_dir = offset

    def fill(self, snap: Snapshot, columns: dict[str, Column], found: list[bool]) -> None:
        """Add this mount's columns; mark the dirs seen in this mount.

        Column by column, not cell by cell: a strided slice of the snapshot is one C-level copy,
        and which dirs had any cell read is one OR over the status columns as integers.
        """
        values, status, width = snap.values, snap.status, self.cells_per_dir
        read = 0
        for name, off, scale in self.cells:
            sts = bytes(status[off::width])
            vals = values[off::width].tolist()
            columns[name] = [
                v * scale if st == OK else UNLIMITED if st == MAX else None
                for v, st in zip(vals, sts, strict=True)
            ]
            read |= int.from_bytes(sts.translate(_READ), "little")
        seen = read.to_bytes(len(snap.dirs), "little")
        for d, hit in enumerate(seen):
            # A dir whose files all say ENOENT may still exist (no such controller files);
            # only a stat tells, and it is needed only when nothing was read.
            if hit or found[d] or os.path.isdir(os.path.join(self.path, snap.dirs[d])):
                found[d] = True


def mount_plans(h: Hierarchy) -> list[MountPlan]:
    """One plan per mount: the unified mount on v2, each v1 controller's mount otherwise.

    Controllers co-mounted on v1 (cpu,cpuacct) share one plan, so each file is read once.
    """
    if h.version == "v2":
        return [MountPlan(h.unified or h.root, V2_FIELDS)]
    by_mount: dict[str, list[Field]] = {}
    for f in V1_FIELDS:
        mount = h.v1_mounts.get(f.controller)
        if mount is not None:
            by_mount.setdefault(os.path.realpath(mount), []).append(f)
    return [MountPlan(m, fs) for m, fs in sorted(by_mount.items())]


def plain_tree_hierarchy(path: str) -> Hierarchy | None:
    """The layout of a directory that holds cgroup-like files but is no cgroup mount.

    A v2 tree has ``cgroup.controllers`` or ``cpu.stat`` at its top; a v1 tree has controller
    directories (``memory``, ``cpu``, ...). Used for copies of a tree and for test fixtures.
    """
    if any(os.path.exists(os.path.join(path, f)) for f in ("cgroup.controllers", "cpu.stat")):
        return Hierarchy("v2", path, {}, path, frozenset({"cpu", "memory", "pids"}))
    ctrls = {f.controller for f in V1_FIELDS}
    mounts = {c: os.path.join(path, c) for c in ctrls if os.path.isdir(os.path.join(path, c))}
    if mounts:
        return Hierarchy("v1", path, mounts, None, frozenset(mounts))
    return None


def open_hierarchy(path: str) -> tuple[Hierarchy, bool]:
    """The hierarchy at ``path`` and whether it is a plain directory tree (not cgroupfs)."""
    try:
        return detect(path), False
    except HostError:
        plain = plain_tree_hierarchy(path) if os.path.isdir(path) else None
        if plain is None:
            raise
        return plain, True


# fds kept free beyond the sampler's: Python, the roots, output, the reads' own opens and
# start times' parent dirs (when none is free, start times stat whole paths instead)
FD_RESERVE = 64


def open_fd_count() -> int:
    """File descriptors this process has open now."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # listdir's own fd
    except OSError:
        return 0


def raise_nofile(want: int) -> int:
    """RLIMIT_NOFILE's soft limit, first raised to the hard limit when ``want`` exceeds it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if want > soft and hard != soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft


class TreeReader:
    """Reads :data:`V1_FIELDS` / :data:`V2_FIELDS` of many cgroups through the core.

    One core root per mount. ``allow_any_fs`` lets a plain directory tree be read. Repeated
    samples keep the descriptors :mod:`cgalloc.host.sampler_policy` chooses open between calls.
    """

    def __init__(self, hierarchy: Hierarchy, allow_any_fs: bool = False, threads: int = 0):
        self.hierarchy = hierarchy
        self.threads = threads
        self.plans = mount_plans(hierarchy)
        self.roots = [core.open_root(p.path, allow_any_fs=allow_any_fs) for p in self.plans]
        self._samplers: list | None = None
        self._dirs: tuple[str, ...] = ()
        self.policy: sampler_policy.FdPolicy | None = None
        self._other_fds = 0  # open before the samplers were, counted once
        self._warnings: list[str] = []
        self._warned = False
        self._calls = 0  # sample() calls so far
        self.dates: ReadDates | None = None  # the last read's, when it was a dated cold read

    def _records(self, dirs: Sequence[str], snaps: Sequence[Snapshot]) -> list[CgroupStats]:
        """Records of ``dirs`` from one snapshot per plan."""
        now = time.monotonic_ns()
        columns: dict[str, Column] = {}
        found = [False] * len(dirs)
        for plan, snap in zip(self.plans, snaps, strict=True):
            plan.fill(snap, columns, found)
        return records(dirs, columns, found, now)

    def read(self, dirs: Sequence[str], dated: bool = False) -> list[CgroupStats]:
        """One cold read: open, read, parse, close every file. ``dated`` also takes what
        :func:`start_times` needs of the mounts read into :attr:`dates`."""
        return self._records(dirs, self._cold(tuple(dirs), dated))

    def _cold(self, dirs: tuple[str, ...], dated: bool = False) -> list[Snapshot]:
        """One snapshot per plan; ``dated`` keeps each cAdvisor mount's mtimes in ``dates``,
        taken through the dir fds the reads open anyway (:func:`start_times` then stats
        only the mounts not read)."""
        wanted = set(cadvisor_mounts(self.hierarchy)) if dated else set()
        marker = start_marker(self.hierarchy)
        snaps: list[Snapshot] = []
        by_mount: dict[str, list[int | None]] = {}
        for root, p in zip(self.roots, self.plans, strict=True):
            if p.path in wanted:
                snap, by_mount[p.path] = root.read_dated(dirs, p.specs, marker, self.threads)
            else:
                snap = root.read(dirs, p.specs, threads=self.threads)
            snaps.append(snap)
        self.dates = ReadDates(dirs, by_mount) if dated else None
        return snaps

    def _choose(self, ndirs: int) -> sampler_policy.FdPolicy:
        """The fd policy for ``ndirs`` cgroups, raising RLIMIT_NOFILE first if that helps."""
        from cgalloc.host import sampler_policy  # samples only: a one-shot read never keeps fds

        specs = [p.specs for p in self.plans]
        want = sampler_policy.choose(specs, ndirs, 1 << 30).fds(len(specs))
        soft = raise_nofile(self._other_fds + FD_RESERVE + want)
        policy = sampler_policy.choose(specs, ndirs, soft - self._other_fds - FD_RESERVE)
        if policy.dirfds < ndirs and not self._warned:
            self._warned = True
            self._warnings.append(
                f"the open-file limit (RLIMIT_NOFILE {soft}) holds directory descriptors for "
                f"only {policy.dirfds} of {ndirs} cgroups; the rest are opened by path on every "
                "sample (raise the hard limit, e.g. ulimit -Hn, to sample them faster)"
            )
        return policy

    def sample(self, dirs: Sequence[str], dated: bool = False) -> list[CgroupStats]:
        """A warm read: the descriptors the policy keeps stay open between calls (kept files
        are re-read with pread, the others opened through their directory's kept fd).

        The first call reads cold and opens nothing: a single read never keeps files open.
        When RLIMIT_NOFILE cannot hold a directory fd for every cgroup, the rest are opened by
        path; :meth:`pop_warnings` says so once. ``dated`` is :meth:`read`'s, for the first
        (cold) call; a warm one leaves :attr:`dates` None.
        """
        dirs = tuple(dirs)
        return self._records(dirs, self.snapshots(dirs, dated))

    def snapshots(self, dirs: tuple[str, ...], dated: bool = False) -> list[Snapshot]:
        """What :meth:`sample` reads, one snapshot per plan, before it becomes records."""
        self._calls += 1
        if self._calls == 1:
            # A read that may be the only one would pay for fds and kernel buffers it never
            # re-reads: the first call reads cold, the sampler opens at the second (stats'
            # one-shot reads call read() instead, cold every time).
            return self._cold(dirs, dated)
        self.dates = None
        if self._samplers is None:
            self._other_fds = open_fd_count()
            self._samplers = [
                root.sampler(dirs, p.specs, threads=self.threads)
                for root, p in zip(self.roots, self.plans, strict=True)
            ]
        elif dirs != self._dirs:
            for s in self._samplers:
                s.update(dirs)
        if dirs != self._dirs or self.policy is None:
            self.policy = self._choose(len(dirs))
            for s, p in zip(self._samplers, self.plans, strict=True):
                s.set_policy(self.policy.dirfds, self.policy.counts(p.specs))
        self._dirs = dirs
        return [s.sample() for s in self._samplers]

    def pop_warnings(self) -> list[str]:
        """Warnings raised since the last call (each is raised once per reader)."""
        out, self._warnings = self._warnings, []
        return out

    def close(self) -> None:
        for s in self._samplers or ():
            s.close()
        for root in self.roots:
            root.close()
        self._samplers = None

    def __enter__(self) -> TreeReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- summary API shape -------------------------------------------------------------------


def rfc3339(epoch_seconds: float) -> str:
    """A metav1.Time as JSON: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch_seconds)))


def cpu_summary(cur: CgroupStats, prev: CgroupStats | None, time: str) -> dict[str, object]:
    """The summary API's ``CPUStats``; ``usageNanoCores`` only once two samples exist."""
    out: dict[str, object] = {"time": time}
    rate = usage_nano_cores(prev, cur)
    if rate is not None:
        out["usageNanoCores"] = rate
    if cur.cpu_usage_ns is not None:
        out["usageCoreNanoSeconds"] = cur.cpu_usage_ns
    return out


def memory_summary(cur: CgroupStats, time: str, limit: int | None = None) -> dict[str, object]:
    """The summary API's ``MemoryStats``.

    ``limit`` overrides the cgroup's own (the node uses MemTotal). ``availableBytes`` is set only
    for a limit ≤ 2^62, as the kubelet does; it is limit − working set, 0 when the working set
    is over the limit (where the kubelet's uint64 subtraction would wrap around).
    """
    out: dict[str, object] = {"time": time}
    limit = cur.memory_limit if limit is None else limit
    ws = cur.working_set
    if limit is not None and ws is not None and limit <= MEMORY_UNLIMITED_ABOVE:
        out["availableBytes"] = max(limit - ws, 0)
    for key, value in (
        ("usageBytes", cur.memory_usage),
        ("workingSetBytes", ws),
        ("rssBytes", cur.rss),
        ("pageFaults", cur.pgfault),
        ("majorPageFaults", cur.pgmajfault),
    ):
        if value is not None:
            out[key] = value
    return out


def container_summary(
    name: str,
    cur: CgroupStats,
    prev: CgroupStats | None,
    time: str,
    start_time: str,
    limit: int | None = None,
) -> dict[str, object]:
    """The summary API's ``ContainerStats`` of a system container (``limit`` as
    :func:`memory_summary` takes it)."""
    return {
        "name": name,
        "startTime": start_time,
        "cpu": cpu_summary(cur, prev, time),
        "memory": memory_summary(cur, time, limit),
    }


# ---- the node's tree -----------------------------------------------------------------------

class Target(NamedTuple):
    """A cgroup of the node tree to report: what it is and what it was promised."""

    role: str  # node | kubepods | qos | pod | container | kube-reserved | system-reserved | ...
    path: str  # below the hierarchy root, "" = the root cgroup
    reserved_milli_cpu: int | None = None  # the reservation, for reserved cgroups
    reserved_memory: int | None = None
    pod_uid: str = ""
    container_id: str = ""  # a pod's container (role "container"), by its runtime's ID


def _rel(path: str) -> str:
    return path.strip("/")


def child_cgroups(h: Hierarchy, path: str) -> list[str]:
    """The names of cgroup ``path``'s children, sorted, listed in its memory directory (else
    any controller's); [] when it cannot be listed."""
    dirs = controller_dirs(h, path)
    where = dirs.get("memory") or next(iter(dirs.values()), None)
    if where is None:
        return []
    try:
        # scandir's d_type tells directories without a stat per entry
        with os.scandir(where) as it:
            return sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def discover_pods(h: Hierarchy, kubepods: str, drv: naming.Driver) -> list[Target]:
    """Pod cgroups found by listing kubepods and its burstable / besteffort tiers."""
    kp = drv.parse(kubepods)
    parents = [kubepods] + [
        drv.path(kp.child(q)) for q in naming.QOS_CLASSES if q != "guaranteed"
    ]
    out = []
    for parent in parents:
        for entry in child_cgroups(h, parent):
            uid = drv.pod_uid(entry)
            if uid is not None:
                out.append(Target("pod", _rel(f"{parent}/{entry}"), pod_uid=uid))
    return out


def _reservation(rl) -> tuple[int | None, int | None]:
    cpu, mem = rl.get(CPU), rl.get(MEMORY)
    return (cpu.milli_value() if cpu else None, mem.value() if mem else None)


def node_targets(
    cfg: NodeConfig,
    h: Hierarchy,
    kubepods: str | None,
    reserved: dict[str, str],
    daemons: dict[str, str] | None = None,
) -> list[Target]:
    """Root, kubepods, QoS tiers, pods, reserved cgroups and the named daemon cgroups.

    ``kubepods`` is the cgroup holding the pods (naming.kubepods_path: with cgroupsPerQOS false
    the cgroup root, with no tiers or pods below it; None for the root cgroup); ``reserved`` maps
    "kube-reserved" / "system-reserved" to their cgroup paths; ``daemons`` maps "kubelet",
    "runtime", "misc" to --kubelet-cgroups, --runtime-cgroups, --system-cgroups. A cgroup
    named twice is one target, under its first role.
    """
    drv = naming.driver(cfg.cgroup_driver)
    out = [Target("node", "")]
    if kubepods is not None:
        kp = drv.parse(kubepods)
        out.append(Target("kubepods", _rel(kubepods)))
        # without cgroupsPerQOS ``kubepods`` is the cgroup root, and the kubelet makes neither
        # QoS tiers nor pod cgroups below it
        if cfg.cgroups_per_qos:
            out += [
                Target("qos", _rel(drv.path(kp.child(q))))
                for q in naming.QOS_CLASSES
                if q != "guaranteed"
            ]
            out += discover_pods(h, kubepods, drv)
    promised = {"kube-reserved": cfg.kube_reserved, "system-reserved": cfg.system_reserved}
    for role, path in reserved.items():
        out.append(Target(role, _rel(path), *_reservation(promised[role])))
    out += [Target(role, _rel(path)) for role, path in (daemons or {}).items() if path]
    seen: set[str] = set()
    unique = []
    for t in out:
        if t.path not in seen:
            seen.add(t.path)
            unique.append(t)
    return unique


def overflow(target: Target, cur: CgroupStats, prev: CgroupStats | None) -> list[str]:
    """Why a reserved cgroup's usage exceeds its reservation (the seed's known issue)."""
    reasons = []
    ws, mem = cur.working_set, target.reserved_memory
    if mem is not None and ws is not None and ws > mem:
        reasons.append(f"memory working set {ws} bytes > reserved {mem} bytes")
    rate = usage_nano_cores(prev, cur)
    milli = target.reserved_milli_cpu
    if milli is not None and rate is not None and rate > milli * 1_000_000:
        reasons.append(f"cpu {rate / 1e6:.0f}m > reserved {milli}m")
    return reasons


# The v1 hierarchies the kubelet's cAdvisor takes a cgroup's creation time over: cAdvisor's
# supportedSubsystems (lib/container/libcontainer/helpers.go) narrowed by needSubsys to the
# metrics pkg/kubelet/cadvisor/cadvisor_linux.go New includes (CPU and memory usage, disk I/O,
# processes; devices needs no metric). Not cpuset, hugetlb, perf_event or name=systemd.
CADVISOR_V1_SUBSYSTEMS = ("cpu", "cpuacct", "memory", "pids", "blkio", "devices")


def cadvisor_mounts(h: Hierarchy) -> list[str]:
    """The mounts the kubelet's cAdvisor looks for a cgroup in: the unified one on v2, else
    one per distinct v1 hierarchy of :data:`CADVISOR_V1_SUBSYSTEMS`."""
    if h.version == "v2":
        return [h.unified or h.root]
    found = (h.v1_mounts[c] for c in CADVISOR_V1_SUBSYSTEMS if c in h.v1_mounts)
    return sorted({os.path.realpath(m) for m in found})


def start_marker(h: Hierarchy) -> str:
    """The file whose mtime cAdvisor's ``getSpecInternal`` takes with its cgroup directory's:
    its guard against a directory whose mtime moved when a child was made."""
    return "cgroup.events" if h.version == "v2" else "cgroup.clone_children"


class ReadDates(NamedTuple):
    """What a dated :meth:`TreeReader.read` took for :func:`start_times`: per cAdvisor mount
    it read, each of ``dirs``' mtimes as ``core.oldest_mtimes`` gives them for that mount."""

    dirs: tuple[str, ...]
    by_mount: dict[str, list[int | None]]


def start_times(
    h: Hierarchy, paths: Sequence[str], boot: float, dates: ReadDates | None = None
) -> list[float | None]:
    """When each cgroup was created, as cAdvisor's ``getSpecInternal`` tells it: the lowest
    mtime, over the mounts of :func:`cadvisor_mounts` that hold the cgroup, of its directory
    and of its :func:`start_marker` file, but not before ``boot``; in whole seconds since the
    epoch (None when no mount holds it).

    One core call stats the mounts ``dates`` lacks (all, without it), their directory fds open
    meanwhile; the mounts it has give their mtimes from it.
    """
    rels = [_rel(p) for p in paths]
    mounts = cadvisor_mounts(h)
    known: list[list[int | None]] = []
    if dates is not None:
        at = {_rel(d): i for i, d in enumerate(dates.dirs)}
        if all(r in at for r in rels):
            known = [[got[at[r]] for r in rels] for m, got in dates.by_mount.items()
                     if m in mounts]  # fmt: skip
            mounts = [m for m in mounts if m not in dates.by_mount]
    oldest = _stat_oldest(mounts, rels, start_marker(h)) if mounts else [None] * len(rels)
    for column in known:
        oldest = [a if b is None or (a is not None and a <= b) else b
                  for a, b in zip(oldest, column, strict=True)]  # fmt: skip
    return [None if t is None else max(float(t // 1_000_000_000), boot) for t in oldest]


def _stat_oldest(mounts: Sequence[str], rels: list[str], marker: str) -> list[int | None]:
    """``core.oldest_mtimes`` of ``rels`` over ``mounts`` (a mount that will not open is
    skipped, as a hierarchy without the cgroup is)."""
    fds: list[int] = []
    try:
        for m in mounts:
            try:
                fds.append(os.open(m, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
            except OSError:
                continue
        return core.oldest_mtimes(fds, rels, marker)
    finally:
        for fd in fds:
            os.close(fd)


def boot_time(proc_root: str = "/proc") -> float:
    """When the machine booted, in seconds since the epoch (``btime`` of /proc/stat: what
    psutil.boot_time reads, without importing psutil)."""
    with open(os.path.join(proc_root, "stat")) as f:
        for line in f:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise HostError(f"{proc_root}/stat has no btime line")


def rlimit_summary(
    time: str, kubelet_version: str = DEFAULT_KUBELET_VERSION, proc_root: str = "/proc"
) -> dict[str, object]:
    """The summary API's ``RlimitStats``: the pid limit as the kubelet minor takes it
    (pkg/kubelet/stats/pidlimit/pidlimit_linux.go ``Stats``: kernel.pid_max before 1.24, the
    smaller of pid_max and threads-max from 1.24) and the tasks now running (sysinfo's procs,
    the total of /proc/loadavg's fourth field); a figure that cannot be read is left out, as
    the kubelet leaves MaxPID nil."""
    out: dict[str, object] = {"time": time}
    maxpid = pid_capacity(kubelet_version, *pid_sysctls(proc_root))
    if maxpid is not None:
        out["maxpid"] = maxpid
    try:
        with open(os.path.join(proc_root, "loadavg")) as f:
            out["curproc"] = int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        pass
    return out
