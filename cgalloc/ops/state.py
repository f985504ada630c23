"""What cgalloc owns on this node, and the lock that serialises runs.

The state directory (default ``/var/lib/cgalloc``, which survives a reboot; the cgroup tree,
the transient units and their runtime properties do not) holds:

- ``lock``: an ``flock``-ed file; one setup/teardown at a time.
- ``owned.json``: the record of what cgalloc did to the hierarchy — cgroup directories it created,
  the original value of every file it changed in a cgroup it did not create, and the controllers
  it enabled in ``cgroup.subtree_control``, the files it wrote in cgroups it created, and the
  kernel's boot id of the boot it describes. ``teardown`` undoes exactly that.
- ``systemd.json``: the transient units cgalloc started and the unit properties it set
  (:mod:`cgalloc.host.systemd`).
- ``journal.jsonl``: one line per change of a run, written and fsync-ed *before* the first
  change is made (a change is never made before its record is durable). A run that is killed
  midway leaves it behind; the next run folds it into the record, so nothing it did is
  forgotten. An entry for a change never made is harmless: teardown skips cgroups that do not
  exist and restores values that were never changed to what they already are. One with no
  entry (a run killed before its first line) is removed by the next run.

Boot rule: the record and journal carry ``/proc/sys/kernel/random/boot_id``. A record or journal
of another boot describes a tree the reboot wiped: its cgroups are gone, its transient units
stopped, every file is back at the kernel's default, so none of its "old values" is true any
more. It is discarded whole (with ``systemd.json``) when it is loaded, and the run starts a new
record: setup creates the cgroups again and records them, and the values it finds now as the
ones to restore. A journal of the same boot is a crash, and folded in as above. A record without
a boot id (written before this rule) or a host without a boot id is taken as the same boot.

A record or journal that cgalloc cannot read (corrupt, truncated, foreign) stops the run with
one sentence saying what is wrong and how to recover, rather than being silently ignored.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, fields

from cgalloc.errors import CgallocError, HostError, InputError
from cgalloc.host.machine import read_boot_id
from cgalloc.inputs.loading import read_regular

DEFAULT_STATE_DIR = "/var/lib/cgalloc"
RECORD_NAME = "owned.json"
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
UNITS_NAME = "systemd.json"
RECORD_VERSION = 1
@dataclass
class Record:
    """Everything cgalloc changed, keyed by (mount, cgroup path)."""

    created: set[tuple[str, str]] = field(default_factory=set)
    # (mount, path, file) -> the value before cgalloc first changed it
    changed: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # (mount, path) -> controllers cgalloc added to that cgroup's subtree_control
    enabled: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # (mount, path, file) cgalloc wrote in a cgroup it created: its original is the kernel's
    # default for a new cgroup
    written: set[tuple[str, str, str]] = field(default_factory=set)
    boot: str = ""  # the boot id of the boot whose tree this record describes

    def is_empty(self) -> bool:
        return not (self.created or self.changed or self.enabled or self.written)

    def copy(self) -> Record:
        """A copy whose changes leave this record as it is."""
        enabled = {k: set(v) for k, v in self.enabled.items()}
        return Record(set(self.created), dict(self.changed), enabled, set(self.written), self.boot)

    def assign(self, other: Record) -> None:
        """Make this record hold what ``other`` holds (apply's prepared copy, once every change
        is made: the caller's record object is the one later steps update)."""
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))

    def note(self, entry: dict) -> None:
        """Fold one journal entry (a line of :func:`_journal_text`) into the record."""
        self.note_change(
            entry["kind"], entry["mount"], entry["path"], entry.get("file", ""),
            entry.get("old"), entry.get("controllers", ()),
        )  # fmt: skip

    def note_change(
        self, kind: str, mount: str, path: str, file: str, old: str | None, controllers=()
    ) -> None:
        """Fold one change (a journal entry's fields) into the record."""
        if kind == "mkdir":
            self.created.add((mount, path))
        elif kind == "write":
            key = (mount, path, file)
            # The first original wins: later runs see cgalloc's own values, not the node's.
            if (mount, path) in self.created:
                self.written.add(key)
            elif key not in self.changed and old is not None:
                self.changed[key] = old
        elif kind == "enable":
            self.enabled.setdefault((mount, path), set()).update(controllers)

    def to_json(self) -> dict:
        return {
            "version": RECORD_VERSION,
            # tuples sort faster than lists; the rows are lists, as JSON reads them back
            "created": [list(r) for r in sorted(self.created)],
            "changed": [[*k, v] for k, v in sorted(self.changed.items())],
            "enabled": sorted([m, p, sorted(c)] for (m, p), c in self.enabled.items() if c),
            "written": [list(r) for r in sorted(self.written)],
            "boot": self.boot,
        }

    @classmethod
    def from_json(cls, data: object) -> Record:
        """The record from its JSON form; ValueError saying what is wrong with its shape."""
        # type first: JSON's true and 1.0 compare equal to 1 in Python, not in the record
        version = data.get("version") if isinstance(data, dict) else None
        if type(version) is not int or version != RECORD_VERSION:
            raise ValueError(f"it is not a cgalloc record of version {RECORD_VERSION}")
        rec = cls()
        rec.created = {(m, p) for m, p in _rows(data, "created", (str, str))}
        rec.changed = {(m, p, f): v for m, p, f, v in _rows(data, "changed", (str,) * 4)}
        rec.enabled = {(m, p): set(c) for m, p, c in _rows(data, "enabled", (str, str, list))}
        rec.written = {(m, p, f) for m, p, f in _rows(data, "written", (str,) * 3)}
        if any(not all(isinstance(x, str) for x in c) for c in rec.enabled.values()):
            raise ValueError("its enabled controllers are not names")
        rec.boot = data.get("boot", "")
        if not isinstance(rec.boot, str):
            raise ValueError("its boot id is not text")
        return rec

    def stale(
        self,
        dirs: Collection[tuple[str, str]],
        files: Collection[tuple[str, str, str]],
        seeded: Collection[tuple[str, str, str]] = (),
    ) -> Record:
        """What this record holds that the desired tree no longer wants: cgroups it created
        outside ``dirs`` (with the controllers it enabled in them), values it changed in files
        outside ``files``, files it wrote in its own cgroups outside ``files`` and ``seeded``
        (what a new cgroup is given and keeps while it is wanted). A copy; this record is
        unchanged."""
        out = Record()
        out.created = {k for k in self.created if k not in dirs}
        out.changed = {k: v for k, v in self.changed.items() if k not in files}
        out.enabled = {k: set(v) for k, v in self.enabled.items() if k in out.created}
        out.written = {k for k in self.written if k not in files and k not in seeded}
        return out

    def forget(self, undone: Record) -> None:
        """Drop the entries of ``undone`` (what was restored or removed) from this record."""
        self.created -= undone.created
        for key in undone.changed:
            self.changed.pop(key, None)
        for key in undone.enabled:
            self.enabled.pop(key, None)
        self.written -= undone.written
        # a removed cgroup takes its files with it
        self.written = {k for k in self.written if (k[0], k[1]) not in undone.created}

    def entries(self) -> list[tuple[str, str, str]]:
        """(what, mount, path) of every entry, for checking where they point (unordered)."""
        out = [("created", m, p) for m, p in self.created]
        out += [("changed", m, p) for m, p, _f in self.changed]
        out += [("enabled", m, p) for m, p in self.enabled]
        out += [("written", m, p) for m, p, _f in self.written]
        return out


def _rows(data: dict, key: str, shape: tuple[type, ...]) -> list:
    rows = data.get(key, [])
    # exact types, as json.loads makes them: one list comparison per row, not a generator per
    # cell (a 1000-pod record has ~5000 rows, read on every run)
    want = list(shape)
    if type(rows) is not list or any(type(r) is not list or [*map(type, r)] != want for r in rows):
        raise ValueError(f"its {key!r} entries do not have the form of cgalloc's record")
    return rows


JOURNAL_KINDS = {"mkdir": (), "write": ("file", "old"), "enable": ("controllers",)}


def _journal_entry_ok(entry: object) -> bool:
    if not isinstance(entry, dict) or entry.get("kind") not in JOURNAL_KINDS:
        return False
    if not isinstance(entry.get("boot", ""), str):
        return False
    if not (isinstance(entry.get("mount"), str) and isinstance(entry.get("path"), str)):
        return False
    kind = entry["kind"]
    if kind == "write":
        return isinstance(entry.get("file"), str) and isinstance(entry.get("old"), str | None)
    if kind == "enable":
        ctrls = entry.get("controllers")
        return isinstance(ctrls, list) and all(isinstance(c, str) for c in ctrls)
    return True


# A refused run that removes the directory between our makedirs and open is retried; this
# many times in a row is not such a race.
LOCK_ATTEMPTS = 100
STATE_FILE_LIMIT = 64 << 20  # a record of 100,000 cgroups is a few MiB


class StateDir:
    """The state directory: lock, record and journal."""

    def __init__(self, path: str = DEFAULT_STATE_DIR, boot: str | None = None):
        if not path or "\x00" in path:
            raise InputError(
                f"--state-dir {path!r} names no directory; give a directory path such as "
                f"{DEFAULT_STATE_DIR}."
            )
        self.path = path
        # this boot's id (Host.boot_id); records of another boot are discarded (boot rule)
        self.boot = read_boot_id() if boot is None else boot
        self.notes: list[str] = []  # what loading decided that the user should hear about
        self.earlier_boot = False  # the record read was of an earlier boot (and is ignored)

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _broken(self, name: str, what: str) -> InputError:
        return InputError(
            f"--state-dir {self.path}: {name} cannot be used: {what}; cgalloc wrote neither it "
            f"nor anything else this run. Restore it from a backup, or move it aside (cgalloc "
            f"then forgets what it made: remove those cgroups by hand) and run again."
        )

    def require_existing(self) -> None:
        """teardown's refusal of a state directory that is not there (it creates none), for
        its dry run as for the run."""
        if os.path.isdir(self.path):
            return
        what = "is not a directory" if os.path.lexists(self.path) else "does not exist"
        raise InputError(
            f"--state-dir {self.path} {what}; give the directory setup used "
            f"(default {DEFAULT_STATE_DIR})."
        )

    def _open_lock(self, create: bool) -> int:
        if create:
            try:
                os.makedirs(self.path, mode=0o700, exist_ok=True)
            except FileNotFoundError as exc:
                # not a race to retry (that is the lock file's open, below): a component of
                # the path cannot be made, as under a dangling symlink or in /proc
                raise HostError(
                    f"cannot create the state directory {self.path} (--state-dir): {exc.strerror}."
                ) from exc
        else:
            self.require_existing()
        return os.open(self._file(LOCK_NAME), os.O_RDWR | os.O_CLOEXEC | os.O_CREAT, 0o600)

    @contextlib.contextmanager
    def locked(self, create: bool = True) -> Iterator[StateDir]:
        """Hold the exclusive lock; a second run waits here until the first is done.

        ``create`` makes the directory and lock when missing (setup). A directory this run made
        is removed again when the run ends on a cgalloc error (bad input, a host problem, a
        failure it undid) with nothing recorded in it, so such a run leaves nothing behind.
        ``create=False`` (teardown) refuses a missing directory with exit 2 and creates nothing.
        """
        made = create and not os.path.isdir(self.path)
        for attempt in itertools.count(1):
            try:
                fd = self._open_lock(create)
            except OSError as exc:
                if create and isinstance(exc, FileNotFoundError) and attempt < LOCK_ATTEMPTS:
                    continue  # removed by a refused run between our makedirs and open: again
                raise HostError(
                    f"cannot use the state directory {self.path} (--state-dir): {exc.strerror}."
                ) from exc
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A refused first run may have removed the lock file while we waited on it: lock
            # the file now in the directory, or two runs would each hold "the" lock.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self._file(LOCK_NAME)))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            yield self
        except CgallocError:  # refused, or failed with everything undone: nothing to keep
            if made:
                self._remove_if_unused()
            raise
        finally:
            os.close(fd)

    def _remove_if_unused(self) -> None:
        with contextlib.suppress(OSError):
            if os.listdir(self.path) == [LOCK_NAME]:
                os.unlink(self._file(LOCK_NAME))
                os.rmdir(self.path)

    def peek(self) -> Record:
        """The record with any journal folded in, read only and without the lock (verify);
        an empty record when the directory is missing or unreadable (an unprivileged user)
        or the record is of an earlier boot (see the boot rule)."""
        if not os.access(self.path, os.R_OK | os.X_OK):
            return Record()
        rec, pending = self._read_record(), self._read_journal()
        if self._earlier_boot(rec, pending):
            return Record()
        for entry in pending:
            rec.note(entry)
        return rec

    def load(self) -> Record:
        """The record, with any journal a killed run left behind folded in (and saved); an
        empty one when they are of an earlier boot, which are then discarded (boot rule)."""
        rec = self._read_record()
        pending = self._read_journal()
        if self._earlier_boot(rec, pending):
            self.notes.append(
                f"the record in {self.path} (--state-dir) is of an earlier boot (boot id "
                f"{rec.boot or pending[0].get('boot')}); the reboot undid what it lists, so it "
                "was discarded and this run starts a new one."
            )
            self.save(Record())
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._file(UNITS_NAME))
            return Record()
        if pending:
            for entry in pending:
                rec.note(entry)
            self.save(rec)
        else:
            self.discard_journal()  # one with no entry: a run killed before its first line
        return rec

    def _earlier_boot(self, rec: Record, pending: list[dict]) -> bool:
        boots = {rec.boot, *(e.get("boot", "") for e in pending)} - {""}
        self.earlier_boot = bool(self.boot) and any(b != self.boot for b in boots)
        return self.earlier_boot

    def read_state_file(self, name: str) -> bytes | None:
        """The bytes of state file ``name``, None when it is missing; a file that is not a
        regular one, cannot be read or is larger than STATE_FILE_LIMIT is refused
        (InputError naming it)."""
        try:
            raw = read_regular(self._file(name), STATE_FILE_LIMIT)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._broken(name, exc.strerror or str(exc)) from exc
        if len(raw) > STATE_FILE_LIMIT:
            raise self._broken(name, f"it is larger than {STATE_FILE_LIMIT >> 20} MiB")
        return raw

    def _read_record(self) -> Record:
        rec = Record()
        raw = self.read_state_file(RECORD_NAME)
        if raw is not None:
            try:
                rec = Record.from_json(json.loads(raw.decode("utf-8")))
            except UnicodeDecodeError as exc:
                raise self._broken(RECORD_NAME, "it is not UTF-8 text") from exc
            except json.JSONDecodeError as exc:
                raise self._broken(RECORD_NAME, f"it is not valid JSON ({exc.msg})") from exc
            except (ValueError, RecursionError) as exc:
                raise self._broken(RECORD_NAME, str(exc) or "bad shape") from exc
        return rec

    def record_data(self, rec: Record) -> bytes | None:
        """``rec`` stamped with this boot, as its file holds it; None when it is empty (no
        file)."""
        rec.boot = self.boot
        return None if rec.is_empty() else _record_text(rec.to_json()).encode()

    def save(self, rec: Record, data: bytes | None = None) -> None:
        """Replace the record atomically and durably (or remove it when empty), then drop the
        journal; ``data`` is ``record_data(rec)`` when the caller made it already. OSError
        when the directory cannot take it."""
        target = self._file(RECORD_NAME)
        if data is None:
            data = self.record_data(rec)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        else:
            tmp = target + ".tmp"
            try:
                _write_file(tmp, data, os.O_TRUNC)
                os.replace(tmp, target)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        self._sync_dir()
        self.discard_journal()

    def _read_journal(self) -> list[dict]:
        raw = self.read_state_file(JOURNAL_NAME)
        if raw is None:
            return []
        lines = raw.split(b"\n")
        entries = []
        for i, line in enumerate(lines):
            if not line:
                continue
            try:
                entry = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                if i == len(lines) - 1:
                    break  # a run killed mid-write leaves a torn last line; the rest is whole
                entry = None
            if not _journal_entry_ok(entry):
                raise self._broken(JOURNAL_NAME, f"line {i + 1} is not a cgalloc journal entry")
            entries.append(entry)
        return entries

    def journal(self, changes: list[tuple]) -> None:
        """Record changes about to be made, durably (written and fsync-ed), before the first
        is made: each a (kind, mount, path, file, old, controllers) tuple, one journal line
        (:func:`_journal_text`). OSError when the directory cannot take it."""
        data = _journal_text(self.boot, changes).encode()
        _write_file(self._file(JOURNAL_NAME), data, os.O_APPEND)
        self._sync_dir()

    def _sync_dir(self) -> None:
        """Make a created, replaced or removed name in the directory durable."""
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def discard_journal(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._file(JOURNAL_NAME))


# One encoder for the record and every journal line: sorted keys, no indent (an indenting
# encoder is the json module's pure-Python one, ~5x slower on a 1000-pod record).
_JSON = json.JSONEncoder(sort_keys=True)


def _record_text(data: dict) -> str:
    """The record as JSON with sorted keys."""
    return _JSON.encode(data) + "\n"


def _journal_text(boot: str, changes: list[tuple]) -> str:
    """The journal lines of ``changes``, one JSON object each with sorted keys: ``boot``,
    ``kind``, ``mount`` and ``path``; a write adds ``file`` and ``old`` (null for a file
    of a cgroup being made), an enable the sorted ``controllers``."""
    lines = []
    for kind, mount, path, file, old, controllers in changes:
        entry: dict[str, object] = {"boot": boot, "kind": kind, "mount": mount, "path": path}
        if kind == "write":
            entry.update(file=file, old=old)
        elif kind == "enable":
            entry["controllers"] = sorted(controllers)
        lines.append(_JSON.encode(entry) + "\n")
    return "".join(lines)


def _write_file(path: str, data: bytes, mode: int) -> None:
    """Write ``data`` whole and fsync it; a short write (a full disk) is an OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | mode, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
