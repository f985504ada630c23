"""The recorded window ``cgalloc recommend`` reads: a bounded file of usage samples.

Written by ``cgalloc record --for DURATION`` and by ``cgalloc exporter --history PATH``; one JSON
document per line:

- a header, first and again whenever the cgroups followed change:
  ``{"cgalloc-history": 1, "cgroups": {role: "/path"}, "interval": seconds, "host": name}``;
- one line per sample: ``{"t": epoch seconds, "c": {role: [cpu_ns, working_set, usage, rss,
  pids, peak]}, "mem": [MemTotal, MemAvailable], "tasks": n}``, null where a value was not read.

Roles are those of ``cgalloc stats``: ``node`` (the root cgroup), ``kubepods``, ``kube-reserved``,
``system-reserved``, ``kubelet``, ``runtime``, ``misc``. ``mem`` is /proc/meminfo's, ``tasks``
the node's tasks (/proc/loadavg), for what runs outside every cgroup followed.

Bounded: past ``max_samples`` sample lines (plus a tenth, so the file is not rewritten at every
sample), the file is rewritten, atomically, with its header and the newest ``max_samples``.
A torn last line (a writer killed mid-line) is skipped when read.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from cgalloc.errors import InputError

HEADER_KEY = "cgalloc-history"
VERSION = 1
TRACKED_ROLES = (
    "node",
    "kubepods",
    "kube-reserved",
    "system-reserved",
    "kubelet",
    "runtime",
    "misc",
)
DEFAULT_MAX_SAMPLES = 60480  # a week at 10 s
READ_LIMIT = 512 << 20  # a history file larger than this is refused, not read whole


class Point(NamedTuple):
    """One cgroup in one sample; None where the value was not read."""

    cpu_ns: int | None
    working_set: int | None
    usage: int | None
    rss: int | None
    pids: int | None
    peak: int | None = None


class HistorySample(NamedTuple):
    t: float
    cgroups: dict[str, Point]  # role -> point
    mem_total: int | None = None
    mem_available: int | None = None
    tasks: int | None = None


class History(NamedTuple):
    headers: list[dict]
    samples: list[HistorySample]
    skipped: int = 0  # lines that were not samples (a torn last line)


def point(rec, peak: int | None = None) -> Point:
    """A :class:`Point` of a ``stats.CgroupStats`` record."""
    return Point(
        rec.cpu_usage_ns, rec.working_set, rec.memory_usage, rec.rss, rec.pids_current, peak
    )


def meminfo(proc_root: str = "/proc") -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo; None for each one not found."""
    found: dict[str, int] = {}
    try:
        with open(os.path.join(proc_root, "meminfo"), encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "MemAvailable"):
                    found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return found.get("MemTotal"), found.get("MemAvailable")


def tasks(proc_root: str = "/proc") -> int | None:
    """Tasks on the node now (the 4th field of /proc/loadavg, after the '/')."""
    try:
        with open(os.path.join(proc_root, "loadavg"), encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None


def sample_line(s: HistorySample) -> str:
    doc = {
        "t": round(s.t, 3),
        "c": {r: list(p) for r, p in sorted(s.cgroups.items())},
        "mem": [s.mem_total, s.mem_available],
        "tasks": s.tasks,
    }
    return json.dumps(doc, separators=(",", ":"))


def header(cgroups: dict[str, str], interval: float, host: str) -> dict:
    return {
        HEADER_KEY: VERSION,
        "cgroups": dict(sorted(cgroups.items())),
        "interval": interval,
        "host": host,
    }


def _int_or_none(v: object) -> int | None:
    return v if type(v) is int else None


def _parse_sample(doc: dict) -> HistorySample | None:
    t = doc.get("t")
    cg = doc.get("c")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not isinstance(cg, dict):
        return None
    points = {}
    for role, values in cg.items():
        if not isinstance(values, list) or len(values) not in (5, 6):
            return None
        points[role] = Point(*(_int_or_none(v) for v in values))
    mem = doc.get("mem") or [None, None]
    if not isinstance(mem, list) or len(mem) != 2:
        mem = [None, None]
    return HistorySample(
        float(t), points, _int_or_none(mem[0]), _int_or_none(mem[1]), _int_or_none(doc.get("tasks"))
    )


def parse(lines: Iterable[bytes], source: str) -> History:
    """The history in ``lines``; InputError (naming ``source``) when it is not one."""
    headers: list[dict] = []
    samples: list[HistorySample] = []
    skipped = 0
    lines = list(lines)
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and doc.get(HEADER_KEY) == VERSION:
            headers.append(doc)
            continue
        if not headers:
            break  # a first line that is no header: no history file
        parsed = _parse_sample(doc) if isinstance(doc, dict) else None
        if parsed is None:
            if i == len(lines) - 1 and headers:
                skipped += 1  # a writer killed mid-line
                continue
            raise InputError(
                f"--history {source}: line {i + 1} is not a cgalloc history line; give a file"
                " `cgalloc record` or `cgalloc exporter --history` wrote."
            )
        samples.append(parsed)
    if not headers:
        raise InputError(
            f"--history {source} is not a cgalloc history file (no header line first); give a file"
            " `cgalloc record` or `cgalloc exporter --history` wrote."
        )
    samples.sort(key=lambda s: s.t)
    return History(headers, samples, skipped)


def load(path: str) -> History:
    """Read the history at ``path``; InputError with one sentence when it cannot be used."""
    try:
        with open(path, "rb") as f:
            data = f.read(READ_LIMIT + 1)
    except FileNotFoundError:
        raise InputError(
            f"--history {path} does not exist; record a window first (cgalloc record --for 1h"
            f" --history {path})."
        ) from None
    except OSError as exc:
        raise InputError(f"--history {path} cannot be read: {exc.strerror or exc}.") from None
    if len(data) > READ_LIMIT:
        raise InputError(
            f"--history {path} is larger than {READ_LIMIT >> 20} MiB; record a"
            " shorter window or lower --max-samples."
        )
    return parse(data.split(b"\n"), path)


# the history is appended to by root (the exporter, cgalloc record): never through a symlink
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


class Writer:
    """Appends samples to a history file, keeping it bounded (see the module's docstring)."""

    def __init__(self, path: str, head: dict, max_samples: int = DEFAULT_MAX_SAMPLES):
        if max_samples < 1:
            raise InputError("--max-samples must be a whole number of samples, 1 or more.")
        self.path = path
        self.max_samples = max_samples
        self.head = head
        self.count = 0
        existing: History | None = None
        if os.path.islink(path):  # opened with O_NOFOLLOW too, should one be planted later
            raise InputError(
                f"--history {path} is a symbolic link; cgalloc writes the history only to a "
                "regular file, never through a link: give the file itself."
            )
        if os.path.exists(path):
            existing = load(path)  # refuses a file that is not a history
            self.count = len(existing.samples)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise InputError(
                f"--history {path}: the directory {directory} does not exist;"
                " create it or give another path."
            )
        try:
            self._fd = os.open(path, APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(
                f"--history {path} cannot be written: {exc.strerror or exc}."
            ) from None
        if existing is None or existing.headers[-1].get("cgroups") != head.get("cgroups"):
            self._write(json.dumps(head, separators=(",", ":")))

    def _write(self, line: str) -> None:
        os.write(self._fd, (line + "\n").encode())

    def append(self, s: HistorySample) -> None:
        self._write(sample_line(s))
        self.count += 1
        if self.count > self.max_samples + max(self.max_samples // 10, 1):
            self.compact()

    def compact(self) -> None:
        """Rewrite the file with its last header and the newest ``max_samples`` samples."""
        hist = load(self.path)
        kept = hist.samples[-self.max_samples :]
        lines = [json.dumps(hist.headers[-1], separators=(",", ":"))]
        lines += [sample_line(s) for s in kept]
        tmp = f"{self.path}.{os.getpid()}.tmp"
        # exclusive and no-follow: a name planted beside the history fails the write, unused
        fd = os.open(tmp, APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(fd, "w", encoding="ascii") as f:
                f.write("\n".join(lines) + "\n")
            os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        os.close(self._fd)
        self._fd = os.open(self.path, APPEND)
        self.count = len(kept)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def tracked(
    targets: Sequence, recs: Sequence, peaks: dict[str, int] | None = None
) -> dict[str, Point]:
    """Role -> point of the cgroups a history follows (the first cgroup of each role found)."""
    out: dict[str, Point] = {}
    for t, r in zip(targets, recs, strict=True):
        if t.role in TRACKED_ROLES and t.role not in out and r.found:
            out[t.role] = point(r, (peaks or {}).get(t.path))
    return out


class Recorder:
    """Appends a sample of the tree (an ``exporter.Sample``) to a history file, at most one
    every ``interval`` seconds of the samples' own clock."""

    def __init__(
        self,
        path: str,
        cgroups: dict[str, str],
        interval: float,
        max_samples: int,
        proc_root: str = "/proc",
    ):
        head = header(cgroups, interval, os.uname().nodename)
        self.writer = Writer(path, head, max_samples)
        self.interval = interval
        self.proc_root = proc_root
        self.last: float | None = None

    def maybe(self, sample) -> bool:
        """Append ``sample`` unless the last one appended is younger than the interval."""
        if self.last is not None and sample.mono - self.last < self.interval * 0.95:
            return False
        self.last = sample.mono
        total, available = meminfo(self.proc_root)
        points = tracked(sample.targets, sample.records, sample.extras.peaks)
        self.writer.append(
            HistorySample(sample.wall, points, total, available, tasks(self.proc_root))
        )
        return True

    def close(self) -> None:
        self.writer.close()
