"""Prometheus metrics of the node's tree: what ``cgalloc exporter`` serves.

Two kinds of series (docs/metrics.md lists each with its type, unit and labels):

- the kubelet's cAdvisor names for usage (``container_cpu_usage_seconds_total``,
  ``container_memory_working_set_bytes``, ...), one series per cgroup of the node's tree (root,
  kubepods, QoS tiers, pods, kube-reserved, system-reserved, the daemons' cgroups) with ``id``
  the cgroup path and ``pod``/``namespace`` where known, so dashboards and alerts written for
  ``container_*{id="/system.slice"}`` work unchanged under the exporter's own scrape job;
- ``cgalloc_*`` gauges for what only cgalloc knows: capacity, reservations, eviction thresholds,
  Allocatable, the limits the inputs want against those read (drift), usage against the
  reservation, pressure alerts for the reserved cgroups, and the state record of setup.

Reads go through :class:`cgalloc.ops.stats.TreeReader`'s sampler (kept dir fds, the C core) for the
usage files, and one ``core.read_files`` call per mount for the few files of the non-pod cgroups
the sampler's parsers do not take (PSI ``*.pressure``, ``memory.peak``). A cgroup that vanishes
mid-read is a missing series, never an error. Samples are taken on one worker thread
(:class:`Engine`): a scrape waits for a fresh one at most its deadline, then answers with the
last one it has (``cgalloc_exporter_sample_age_seconds`` says how old), so a slow cgroup never
blocks a scrape.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample as PromSample

from cgalloc import __version__
from cgalloc.errors import CgallocError
from cgalloc.host import core
from cgalloc.host.machine import read_boot_id
from cgalloc.host.podlogs import pod_names
from cgalloc.model.allocatable import Allocatable
from cgalloc.model.hierarchy import Hierarchy, limit_files, parse_limit_value
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import CPU, MEMORY, PID
from cgalloc.model.tree import desired_tree
from cgalloc.ops import stats
from cgalloc.ops.plan import same_value
from cgalloc.ops.state import JOURNAL_NAME, RECORD_NAME, Record, StateDir

INF = math.inf
PSI_RESOURCES = ("cpu", "memory", "io")
# The roles whose limits setup writes from the inputs alone (the tiers' and pods' need the pods)
DRIFT_ROLES = ("kubepods", "kube-reserved", "system-reserved")
RESERVED_ROLES = ("kube-reserved", "system-reserved")
STATE_REFRESH_SECONDS = 60.0  # how often the state record is re-read
V1_UNLIMITED_FLOOR = 1 << 62  # a v1 memory limit at or above this is "no limit" (cAdvisor too)


# ---- pressure (PSI) ------------------------------------------------------------------------


class Pressure(NamedTuple):
    """One ``*.pressure`` file: the "some" and "full" lines' avg10 (%) and total (µs)."""

    some_avg10: float
    some_total_us: int
    full_avg10: float | None = None  # cpu.pressure has no "full" line before Linux 5.13
    full_total_us: int | None = None


def parse_pressure(data: bytes) -> Pressure | None:
    """A PSI file's content (``some avg10=0.00 avg60=0.00 avg300=0.00 total=123``, then the
    same for ``full``), or None when it is not one."""
    lines: dict[str, tuple[float, int]] = {}
    try:
        for line in data.decode("ascii").splitlines():
            kind, _, rest = line.partition(" ")
            fields = dict(item.split("=", 1) for item in rest.split())
            lines[kind] = (float(fields["avg10"]), int(fields["total"]))
    except (UnicodeDecodeError, ValueError, KeyError):
        return None
    if "some" not in lines:
        return None
    full = lines.get("full")
    return Pressure(*lines["some"], *(full if full else (None, None)))


class Extras(NamedTuple):
    """What one sample reads besides the sampler's files."""

    peaks: dict[str, int]  # cgroup path -> memory.peak / memory.max_usage_in_bytes
    pressure: dict[str, dict[str, Pressure]]  # cgroup path -> resource -> PSI
    node_pressure: dict[str, Pressure]  # /proc/pressure/*


def _open_dir(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None


class ExtraReader:
    """PSI and memory-peak files of the non-pod cgroups, and the node's /proc/pressure: one
    ``core.read_files`` call per directory fd, the fds kept open between samples."""

    def __init__(self, h: Hierarchy, proc_root: str = "/proc"):
        self.v2 = h.version == "v2"
        mount = (h.unified or h.root) if self.v2 else h.v1_mounts.get("memory")
        self.peak_file = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        self.fd = _open_dir(mount) if mount else None
        self.proc_pressure = os.path.join(proc_root, "pressure")
        self.proc_fd = _open_dir(self.proc_pressure)
        self.node_reason = self._node_reason()
        self.cgroup_reason = (
            ""
            if self.v2
            else ("cgroup v1: the kernel keeps no pressure (PSI) per cgroup on v1 hierarchies")
        )

    def _node_reason(self) -> str:
        if self.proc_fd is None:
            return (
                f"no {self.proc_pressure}: a kernel without PSI (CONFIG_PSI) or booted with psi=0"
            )
        got = core.read_files(self.proc_fd, ["memory"])[0]
        if isinstance(got, int):
            return f"{self.proc_pressure}/memory cannot be read ({os.strerror(-got)}): PSI is off"
        return ""

    def read(self, paths: Sequence[str]) -> Extras:
        peaks: dict[str, int] = {}
        pressure: dict[str, dict[str, Pressure]] = {}
        if self.fd is not None and paths:
            per = [self.peak_file] + ([f"{r}.pressure" for r in PSI_RESOURCES] if self.v2 else [])
            files = [f"{p}/{f}" if p else f for p in paths for f in per]
            got = core.read_files(self.fd, files, slot=512, threads=1)
            width = len(per)
            for i, path in enumerate(paths):
                cells = got[i * width : (i + 1) * width]
                peak = cells[0]
                if not isinstance(peak, int):
                    with contextlib.suppress(ValueError):
                        peaks[path] = int(peak)
                psi = {}
                for res, data in zip(PSI_RESOURCES, cells[1:], strict=False):
                    parsed = None if isinstance(data, int) else parse_pressure(data)
                    if parsed is not None:
                        psi[res] = parsed
                if psi:
                    pressure[path] = psi
        node: dict[str, Pressure] = {}
        if self.proc_fd is not None and not self.node_reason:
            for res, data in zip(
                PSI_RESOURCES, core.read_files(self.proc_fd, PSI_RESOURCES), strict=True
            ):
                parsed = None if isinstance(data, int) else parse_pressure(data)
                if parsed is not None:
                    node[res] = parsed
        return Extras(peaks, pressure, node)

    def close(self) -> None:
        for fd in (self.fd, self.proc_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self.proc_fd = None


# ---- the setup state record ----------------------------------------------------------------


class SetupState(NamedTuple):
    """What the state directory tells of setup's last run."""

    state: str  # recorded | interrupted | earlier_boot | none | unreadable
    timestamp: float | None  # mtime of the record (or of the journal a killed run left)
    reason: str = ""


SETUP_STATES = ("recorded", "interrupted", "earlier_boot", "none", "unreadable")


def setup_state(path: str, boot_id_file: str | None = None) -> SetupState:
    """Read setup's record in the state directory ``path`` without its lock, as verify does."""
    state = StateDir(path, read_boot_id(boot_id_file)) if boot_id_file else StateDir(path)
    if not os.access(path, os.R_OK | os.X_OK):
        why = "does not exist" if not os.path.lexists(path) else "cannot be read by this user"
        return SetupState("unreadable" if os.path.lexists(path) else "none", None, f"{path} {why}")
    try:
        raw = state.read_state_file(RECORD_NAME)
        journal = state.read_state_file(JOURNAL_NAME)
    except CgallocError as exc:
        return SetupState("unreadable", None, str(exc))
    stamps = []
    for name, data in ((RECORD_NAME, raw), (JOURNAL_NAME, journal)):
        if data is not None:
            with contextlib.suppress(OSError):
                stamps.append(os.stat(os.path.join(path, name)).st_mtime)
    when = max(stamps) if stamps else None
    if journal:
        return SetupState("interrupted", when, f"{JOURNAL_NAME}: a run was killed midway")
    if raw is None:
        return SetupState("none", None, f"no {RECORD_NAME} in {path}")
    try:
        import json

        rec = Record.from_json(json.loads(raw.decode("utf-8")))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return SetupState("unreadable", when, f"{RECORD_NAME}: {exc}")
    if rec.boot and state.boot and rec.boot != state.boot:
        return SetupState(
            "earlier_boot",
            when,
            "the record is of an earlier boot: setup has not run since this boot",
        )
    return SetupState("recorded", when)


# ---- what the inputs want ------------------------------------------------------------------


class Expected(NamedTuple):
    """The values setup writes to one cgroup, by file: text as written, and as a number."""

    role: str
    files: dict[str, str]


def expected_limits(
    cfg: NodeConfig, alloc: Allocatable, h: Hierarchy, weight_formula: str = "kubelet"
) -> dict[str, Expected]:
    """Cgroup path -> the limit files of :data:`DRIFT_ROLES` setup writes for these inputs,
    among those the sampler reads (memory, cpu weight/shares and quota, pids)."""
    sampled = {
        "memory.max",
        "memory.limit_in_bytes",
        "cpu.weight",
        "cpu.shares",
        "cpu.max",
        "cpu.cfs_quota_us",
        "pids.max",
    }
    out: dict[str, Expected] = {}
    for d in desired_tree(cfg, alloc, h):
        if d.role not in DRIFT_ROLES:
            continue
        files = {f: v for _c, f, v in limit_files(h, d.limits, weight_formula) if f in sampled}
        if files:
            out[d.path] = Expected(d.role, files)
    return out


def _max_text(value: int | None, v2: bool, v1_unlimited: str = "-1") -> str | None:
    if value is None:
        return None
    if value == stats.UNLIMITED:
        return "max" if v2 else v1_unlimited
    return str(value)


def live_limit_text(rec: stats.CgroupStats, file: str) -> str | None:
    """A limit file's content as the sampler read it (None when it was not read)."""
    if file in ("memory.max", "pids.max"):
        value = rec.memory_limit if file == "memory.max" else rec.pids_max
        return _max_text(value, True)
    if file == "memory.limit_in_bytes":
        return None if rec.memory_limit is None else str(rec.memory_limit)
    if file == "cpu.weight":
        return _max_text(rec.cpu_weight, True)
    if file == "cpu.shares":
        return _max_text(rec.cpu_shares, False)
    if file == "cpu.cfs_quota_us":
        return _max_text(rec.cpu_quota_us, False)
    if file == "cpu.max":
        quota = _max_text(rec.cpu_quota_us, True)
        if quota is None or rec.cpu_period_us is None:
            return None
        return f"{quota} {rec.cpu_period_us}"
    return None


def limit_number(file: str, text: str) -> float:
    """A limit's value for a gauge: bytes, weight, shares, pids or quota µs; +Inf for none."""
    try:
        parsed = parse_limit_value(file, text)
    except ValueError:
        return math.nan
    if isinstance(parsed, tuple):
        parsed = parsed[0]
    if not isinstance(parsed, int):
        return math.nan
    return INF if parsed < 0 else float(parsed)


# ---- samples and the engine that takes them ------------------------------------------------


class Sample(NamedTuple):
    """One reading of the tree."""

    wall: float  # time.time() when it was taken
    mono: float  # time.monotonic() when it was taken
    duration: float  # seconds it took
    targets: list[stats.Target]
    records: list[stats.CgroupStats]
    extras: Extras
    pods: dict[str, tuple[str, str]]  # uid -> (namespace, name)


class Engine:
    """Takes samples on one worker thread. :meth:`get` asks for a fresh sample and waits for
    it at most ``deadline`` seconds; past that it returns the newest it has (or None), the
    worker finishing in the background. One sample at a time: scrapes that arrive while one is
    being taken share it."""

    def __init__(
        self,
        take: Callable[[], Sample],
        deadline: float,
        on_sample: Callable[[Sample], None] | None = None,
    ):
        self._take = take
        self.deadline = deadline
        self._on_sample = on_sample
        self._cond = threading.Condition()
        self._wanted = False
        self._stopped = False
        self.latest: Sample | None = None
        self.generation = 0  # samples taken so far
        self.timeouts = 0  # scrapes answered with an older sample
        self.errors = 0  # samples that failed
        self.last_error = ""
        self._worker = threading.Thread(target=self._run, name="cgalloc-sampler", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                self._wanted = False
            try:
                sample = self._take()
                error = ""
            except Exception as exc:  # a failed sample is a counted error, not a dead exporter
                sample, error = None, f"{type(exc).__name__}: {exc}"
            if sample is not None and self._on_sample is not None:
                try:
                    self._on_sample(sample)
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
            with self._cond:
                if sample is not None:
                    self.latest = sample
                if error:
                    self.errors += 1
                    self.last_error = error
                self.generation += 1
                self._cond.notify_all()

    def get(self) -> Sample | None:
        with self._cond:
            target = self.generation + 1
            if not self._wanted:
                self._wanted = True
                self._cond.notify_all()
            end = time.monotonic() + self.deadline
            while self.generation < target:
                left = end - time.monotonic()
                if left <= 0:
                    self.timeouts += 1
                    break
                self._cond.wait(left)
            return self.latest

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


# ---- metric families -----------------------------------------------------------------------


class Thresholds(NamedTuple):
    """When ``cgalloc_reserved_cgroup_alert`` turns 1."""

    memory_pressure: float = 10.0  # memory.pressure "some avg10" at or above this (%)
    near_limit: float = 0.9  # working set at or above this share of memory.max


class NodeModel(NamedTuple):
    """What the inputs say, computed once when the exporter starts."""

    cfg: NodeConfig
    capacity: dict[str, Quantity]
    alloc: Allocatable
    hierarchy: Hierarchy
    expected: dict[str, Expected]
    expected_problem: str = ""  # why no limits could be planned (then no drift series)
    core_name: str = ""


def _unit(resource: str) -> tuple[str, Callable[[Quantity], float]]:
    if resource == CPU:
        return "core", lambda q: q.milli_value() / 1000
    if resource in (PID, "pods"):
        return "integer", lambda q: float(q.value())
    return "byte", lambda q: float(q.value())


def _resource_family(name: str, doc: str, rl: dict[str, Quantity]) -> Metric:
    fam = GaugeMetricFamily(name, doc, labels=["resource", "unit"])
    for res, q in sorted(rl.items()):
        unit, conv = _unit(res)
        fam.add_metric([res, unit], conv(q))
    return fam


def _id(path: str) -> str:
    return "/" + path


def _labels(t: stats.Target, pods: dict[str, tuple[str, str]]) -> dict[str, str]:
    labels = {"id": _id(t.path)}
    if t.pod_uid and t.pod_uid in pods:
        ns, name = pods[t.pod_uid]
        labels["namespace"], labels["pod"] = ns, name
    return labels


def _spec_memory(limit: int | None) -> float | None:
    # cAdvisor's specMemoryValue: "no limit" (above MaxInt64) is 0
    if limit is None:
        return None
    return 0.0 if limit > (1 << 63) - 1 else float(limit)


def _threads_max(limit: int | None) -> float | None:
    if limit is None:
        return None
    return 0.0 if limit == stats.UNLIMITED else float(limit)


# (name, help, kind, value of a record or None); per cgroup of the tree
_USAGE: tuple[tuple[str, str, str, Callable[[stats.CgroupStats], float | None]], ...] = (
    (
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed in seconds.",
        "counter",
        lambda r: None if r.cpu_usage_ns is None else r.cpu_usage_ns / 1e9,
    ),
    (
        "container_cpu_cfs_periods_total",
        "Number of elapsed enforcement period intervals.",
        "counter",
        lambda r: r.nr_periods,
    ),
    (
        "container_cpu_cfs_throttled_periods_total",
        "Number of throttled period intervals.",
        "counter",
        lambda r: r.nr_throttled,
    ),
    (
        "container_memory_usage_bytes",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
        "gauge",
        lambda r: r.memory_usage,
    ),
    (
        "container_memory_working_set_bytes",
        "Current working set in bytes.",
        "gauge",
        lambda r: r.working_set,
    ),
    ("container_memory_rss", "Size of RSS in bytes.", "gauge", lambda r: r.rss),
    (
        "container_spec_memory_limit_bytes",
        "Memory limit for the container.",
        "gauge",
        lambda r: _spec_memory(r.memory_limit),
    ),
    (
        "container_threads",
        "Number of threads running inside the container",
        "gauge",
        lambda r: r.pids_current,
    ),
    (
        "container_threads_max",
        "Maximum number of threads allowed inside the container, infinity if value is zero",
        "gauge",
        lambda r: _threads_max(r.pids_max),
    ),
)

_PSI_HELP = {
    "waiting": "Total time duration tasks in the container have waited due to {} pressure in"
    " seconds.",
    "stalled": "Total time duration no tasks in the container could make progress due to {}"
    " pressure in seconds.",
}


def _family(name: str, doc: str, kind: str) -> Metric:
    if kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), doc)
    return GaugeMetricFamily(name, doc)


def usage_families(sample: Sample) -> list[Metric]:
    """The cAdvisor-named series of every cgroup found."""
    found = [
        (t, r, _labels(t, sample.pods))
        for t, r in zip(sample.targets, sample.records, strict=True)
        if r.found
    ]
    out = []
    for name, doc, kind, value in _USAGE:
        fam = _family(name, doc, kind)
        add = fam.samples.append
        sample_name = name  # counters' samples keep the _total suffix
        for _t, r, labels in found:
            v = value(r)
            if v is not None:
                add(_sample(sample_name, labels, v))
        out.append(fam)
    quota = GaugeMetricFamily("container_spec_cpu_quota", "CPU quota of the container.")
    period = GaugeMetricFamily("container_spec_cpu_period", "CPU period of the container.")
    for _t, r, labels in found:
        # cAdvisor sets both only for a cgroup with a quota
        if r.cpu_quota_us not in (None, stats.UNLIMITED) and r.cpu_period_us is not None:
            quota.samples.append(_sample("container_spec_cpu_quota", labels, r.cpu_quota_us))
            period.samples.append(_sample("container_spec_cpu_period", labels, r.cpu_period_us))
    out += [quota, period]
    peak = GaugeMetricFamily(
        "container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes"
    )
    for t, _r, labels in found:
        if t.path in sample.extras.peaks:
            peak.samples.append(_sample(peak.name, labels, sample.extras.peaks[t.path]))
    out.append(peak)
    out += pressure_families(sample, found)
    return out


def _sample(name: str, labels: dict[str, str], value: float) -> PromSample:
    # Metric.add_sample's Sample, with one labels dict shared by a cgroup's families
    return PromSample(name, labels, value, None, None)


def pressure_families(sample: Sample, found) -> list[Metric]:
    """cAdvisor's KEP-4205 PSI counters of the non-pod cgroups (v2) and of the node (id="/",
    from /proc/pressure on v1 and v2 alike)."""
    fams = {}
    for res in PSI_RESOURCES:
        for kind in ("waiting", "stalled"):
            fams[res, kind] = CounterMetricFamily(
                f"container_pressure_{res}_{kind}_seconds", _PSI_HELP[kind].format(res)
            )

    def add(labels: dict[str, str], psi: dict[str, Pressure]) -> None:
        for res, p in psi.items():
            f = fams[res, "waiting"]
            f.samples.append(_sample(f.name + "_total", labels, p.some_total_us / 1e6))
            if p.full_total_us is not None:
                f = fams[res, "stalled"]
                f.samples.append(_sample(f.name + "_total", labels, p.full_total_us / 1e6))

    for t, _r, labels in found:
        if t.path and t.path in sample.extras.pressure:
            add(labels, sample.extras.pressure[t.path])
    if sample.extras.node_pressure:
        add({"id": "/"}, sample.extras.node_pressure)
    return list(fams.values())


class Collector:
    """The prometheus_client collector: every family of one sample, and the node's figures."""

    def __init__(
        self,
        model: NodeModel,
        engine: Engine,
        extra_reasons: tuple[str, str],
        state_dir: str | None = None,
        thresholds: Thresholds = Thresholds(),
        boot_id_file: str | None = None,
    ):
        self.model = model
        self.engine = engine
        self.node_reason, self.cgroup_reason = extra_reasons
        self.state_dir = state_dir
        self.boot_id_file = boot_id_file
        self.thresholds = thresholds
        self._state: SetupState | None = None
        self._state_at = -INF

    def describe(self) -> list[Metric]:
        return []  # no sample at registration: the families are known once one is read

    def setup(self) -> SetupState | None:
        if self.state_dir is None:
            return None
        now = time.monotonic()
        if self._state is None or now - self._state_at >= STATE_REFRESH_SECONDS:
            self._state = setup_state(self.state_dir, self.boot_id_file)
            self._state_at = now
        return self._state

    def collect(self) -> Iterable[Metric]:
        sample = self.engine.get()
        yield from self.node_families()
        if sample is not None:
            yield from usage_families(sample)
            yield from reserved_families(self.model, sample, self.thresholds)
        yield from self.exporter_families(sample)

    def node_families(self) -> list[Metric]:
        m = self.model
        cfg, alloc = m.cfg, m.alloc
        info = GaugeMetricFamily(
            "cgalloc_build_info",
            "cgalloc's version, I/O core, the kubelet version it matches,"
            " the cgroup version and driver; always 1.",
            labels=["version", "core", "kubelet_version", "cgroup_version", "driver"],
        )
        info.add_metric(
            [
                __version__,
                m.core_name or core.IMPLEMENTATION,
                cfg.kubelet_version,
                m.hierarchy.version,
                cfg.cgroup_driver,
            ],
            1,
        )
        out: list[Metric] = [info]
        out.append(
            _resource_family(
                "cgalloc_node_capacity",
                "The node's capacity, as the kubelet reports it (pid included).",
                alloc_capacity(m),
            )
        )
        out.append(
            _resource_family(
                "cgalloc_node_allocatable",
                "Node Allocatable as the kubelet computes it from these inputs.",
                alloc.allocatable,
            )
        )
        out.append(
            _resource_family(
                "cgalloc_kubepods_limit",
                "The limits the inputs give the"
                " kubepods cgroup (capacity minus kube- and system-reserved"
                " when pods is enforced).",
                alloc.kubepods,
            )
        )
        reserved = GaugeMetricFamily(
            "cgalloc_reserved",
            "What each reservation takes from capacity: kube-reserved,"
            " system-reserved, and the hard-eviction thresholds that lower Allocatable.",
            labels=["reservation", "resource", "unit"],
        )
        for term in alloc.breakdown:
            kind = _RESERVATIONS.get(term.source.split(" ")[0])
            if kind is None:
                continue
            unit, conv = _unit(term.resource)
            reserved.add_metric([kind, term.resource, unit], conv(term.quantity))
        out.append(reserved)
        thresholds = GaugeMetricFamily(
            "cgalloc_eviction_hard_threshold",
            "Each hard-eviction threshold as configured:"
            " bytes (or a count) for a quantity, a ratio for a percentage.",
            labels=["signal", "unit"],
        )
        for signal, t in sorted(cfg.eviction_hard.items()):
            if t.quantity is not None:
                thresholds.add_metric(
                    [signal, "byte" if "available" in signal else "integer"],
                    float(t.quantity.value()),
                )
            elif t.percentage is not None:
                # the kubelet's float32 fraction, to the 7 digits a float32 holds
                thresholds.add_metric([signal, "ratio"], float(f"{t.percentage:.7g}"))
        out.append(thresholds)
        avail = GaugeMetricFamily(
            "cgalloc_pressure_available",
            "1 when pressure (PSI) is read for that scope (node:"
            " /proc/pressure; cgroup: the cgroups' *.pressure files, cgroup v2 only), else 0"
            " with the reason.",
            labels=["scope", "reason"],
        )
        for scope, reason in (("node", self.node_reason), ("cgroup", self.cgroup_reason)):
            avail.add_metric([scope, reason], 0 if reason else 1)
        out.append(avail)
        state = self.setup()
        if state is not None:
            fam = GaugeMetricFamily(
                "cgalloc_setup_state",
                "1 for the state setup's record is in (recorded,"
                " interrupted, earlier_boot, none, unreadable), 0 for the others.",
                labels=["state", "reason"],
            )
            for s in SETUP_STATES:
                fam.add_metric(
                    [s, state.reason if s == state.state else ""], 1 if s == state.state else 0
                )
            out.append(fam)
            if state.timestamp is not None:
                out.append(
                    GaugeMetricFamily(
                        "cgalloc_setup_record_timestamp_seconds",
                        "When setup (or teardown) last"
                        " wrote its record: the record's mtime, in seconds since the epoch.",
                        value=state.timestamp,
                    )
                )
        return out

    def exporter_families(self, sample: Sample | None) -> list[Metric]:
        e = self.engine
        out: list[Metric] = []
        if sample is not None:
            out.append(
                GaugeMetricFamily(
                    "cgalloc_exporter_sample_timestamp_seconds",
                    "When the sample served was taken, in seconds since the epoch.",
                    value=sample.wall,
                )
            )
            out.append(
                GaugeMetricFamily(
                    "cgalloc_exporter_sample_age_seconds",
                    "How old the sample served is: above"
                    " the scrape deadline when the last sample did not finish in time.",
                    value=max(time.monotonic() - sample.mono, 0.0),
                )
            )
            out.append(
                GaugeMetricFamily(
                    "cgalloc_exporter_sample_duration_seconds",
                    "Wall time the sample served took.",
                    value=sample.duration,
                )
            )
            out.append(
                GaugeMetricFamily(
                    "cgalloc_exporter_cgroups",
                    "Cgroups found in the sample served.",
                    value=sum(r.found for r in sample.records),
                )
            )
        out.append(
            CounterMetricFamily(
                "cgalloc_exporter_sample_timeouts",
                "Scrapes answered with an older sample because a"
                " fresh one took longer than the deadline.",
                value=e.timeouts,
            )
        )
        out.append(
            CounterMetricFamily(
                "cgalloc_exporter_sample_errors", "Samples that failed.", value=e.errors
            )
        )
        return out


_RESERVATIONS = {
    "kube-reserved": "kube",
    "system-reserved": "system",
    "eviction-hard": "eviction_hard",
}


def alloc_capacity(m: NodeModel) -> dict[str, Quantity]:
    """Capacity with pid (which node status leaves out)."""
    out = dict(m.alloc.capacity)
    if PID in m.capacity:
        out[PID] = m.capacity[PID]
    return out


def reserved_families(model: NodeModel, sample: Sample, th: Thresholds) -> list[Metric]:
    """Limits against the inputs (drift), usage against each reservation, and the alerts."""
    v2 = model.hierarchy.version == "v2"
    by_path = {t.path: (t, r) for t, r in zip(sample.targets, sample.records, strict=True)}
    limit = GaugeMetricFamily(
        "cgalloc_cgroup_limit",
        "A limit read from the cgroup (bytes, cpu weight or shares,"
        " quota µs, pids); +Inf for no limit.",
        labels=["id", "role", "file"],
    )
    want = GaugeMetricFamily(
        "cgalloc_cgroup_expected_limit",
        "The limit setup writes there for these inputs; +Inf for no limit.",
        labels=["id", "role", "file"],
    )
    drift = GaugeMetricFamily(
        "cgalloc_cgroup_limit_drift",
        "1 when the cgroup's limit differs from the one the"
        " inputs want (or the cgroup is missing), else 0.",
        labels=["id", "role", "file"],
    )
    for path, exp in sorted(model.expected.items()):
        t_r = by_path.get(path)
        rec = t_r[1] if t_r else None
        for file, text in sorted(exp.files.items()):
            labels = [_id(path), exp.role, file]
            want.add_metric(labels, limit_number(file, text))
            live = live_limit_text(rec, file) if rec is not None and rec.found else None
            if live is not None:
                limit.add_metric(labels, limit_number(file, live))
            drift.add_metric(labels, 0 if live is not None and same_value(file, live, text) else 1)
    found = GaugeMetricFamily(
        "cgalloc_cgroup_found",
        "1 when a cgroup the inputs name (kubepods, the reserved"
        " cgroups, the daemons') exists, else 0.",
        labels=["id", "role"],
    )
    ratio = GaugeMetricFamily(
        "cgalloc_reservation_usage_ratio",
        "A reserved cgroup's usage over its reservation: memory working set, pids.",
        labels=["id", "role", "resource"],
    )
    headroom = GaugeMetricFamily(
        "cgalloc_reservation_headroom_bytes",
        "A reserved cgroup's memory reservation minus its"
        " working set; negative when under-reserved.",
        labels=["id", "role"],
    )
    alert = GaugeMetricFamily(
        "cgalloc_reserved_cgroup_alert",
        "1 when a reserved cgroup is under memory pressure"
        f" (memory.pressure some avg10 >= {th.memory_pressure:g}%), near its memory limit"
        f" (working set >= {th.near_limit:g} of memory.max) or over its memory reservation;"
        " else 0.",
        labels=["id", "role", "reason"],
    )
    promised = {
        "kube-reserved": model.cfg.kube_reserved,
        "system-reserved": model.cfg.system_reserved,
    }
    for t, r in zip(sample.targets, sample.records, strict=True):
        if t.role in ("node", "qos", "pod"):
            continue
        found.add_metric([_id(t.path), t.role], 1 if r.found else 0)
        if t.role not in RESERVED_ROLES or not r.found:
            continue
        labels = [_id(t.path), t.role]
        rl = promised[t.role]
        ws = r.working_set
        if MEMORY in rl and ws is not None:
            reserved = rl[MEMORY].value()
            if reserved:
                ratio.add_metric([*labels, MEMORY], ws / reserved)
            headroom.add_metric(labels, reserved - ws)
            alert.add_metric([*labels, "over_reservation"], 1 if ws > reserved else 0)
        if PID in rl and r.pids_current is not None and rl[PID].value():
            ratio.add_metric([*labels, PID], r.pids_current / rl[PID].value())
        if ws is not None and r.memory_limit is not None:
            lim = r.memory_limit
            limited = lim != stats.UNLIMITED and lim < V1_UNLIMITED_FLOOR
            near = limited and lim > 0 and ws >= th.near_limit * lim
            alert.add_metric([*labels, "near_memory_limit"], 1 if near else 0)
        psi = sample.extras.pressure.get(t.path, {}).get(MEMORY)
        if psi is not None and v2:
            alert.add_metric(
                [*labels, "memory_pressure"], 1 if psi.some_avg10 >= th.memory_pressure else 0
            )
    out: list[Metric] = [found, ratio, headroom, alert]
    if model.expected or not model.expected_problem:
        out += [limit, want, drift]
    return out


# ---- the sample source ---------------------------------------------------------------------


def take_sample(
    read: Callable[[], tuple[list[stats.Target], list[stats.CgroupStats]]],
    extra: ExtraReader,
    pod_log_dir: str | None,
) -> Sample:
    """One sample: the sampler's read, the extra files of the non-pod cgroups found, the pod
    names."""
    wall, mono = time.time(), time.monotonic()
    targets, recs = read()
    # the root's pressure is the node's (/proc/pressure); it has no memory.peak on v2
    paths = [
        t.path for t, r in zip(targets, recs, strict=True) if r.found and t.path and t.role != "pod"
    ]
    extras = extra.read(paths)
    pods = pod_names(pod_log_dir) if pod_log_dir else {}
    return Sample(wall, mono, time.monotonic() - mono, targets, recs, extras, pods)
