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

A record or journal that cgalloc cannot use (corrupt, truncated, foreign) stops the run with
one sentence saying what is wrong and how to recover, rather than being silently ignored; one
it may not read (an unprivileged verify or dry run) is an error naming the file and the
privilege needed, never taken as "nothing recorded".

What the record may name: setup records the cgroups its inputs manage (``Managed``: the
kubepods tree, whole, and the reserved cgroups, each alone) with its entries, in the record and
at the head of every journal; :func:`cgalloc.ops.apply.check_managed` refuses an entry outside
them before anything is changed.

Trust (:mod:`cgalloc.host.safefs`): every command resolves ``--state-dir`` the same way, from
``/`` down, and refuses it (exit 2, nothing written) unless it and every directory above it are
root's and writable by nobody else (a sticky parent such as ``/tmp`` excepted, as only an
entry's owner may replace it there). The state files are opened through the directory's
descriptor without following a symlink, temporaries are created exclusively with their mode
set on the descriptor, and a state file name holding anything but a regular file of root's (a
planted symlink, a FIFO, a hard link) stops the run before any write, its target untouched.
A run writes nothing to the directory before its first change: a journal folded in and a
record of an earlier boot discarded at load are written then (:meth:`StateDir.load`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from cgalloc.errors import CgallocError, HostError, InputError
from cgalloc.host import safefs
from cgalloc.host.machine import read_boot_id
from cgalloc.inputs.loading import read_fd

DEFAULT_STATE_DIR = "/var/lib/cgalloc"
RECORD_NAME = "owned.json"
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
UNITS_NAME = "systemd.json"
# every name cgalloc opens in the state directory: each must be a regular file of root's
STATE_NAMES = (LOCK_NAME, RECORD_NAME, f"{RECORD_NAME}.tmp", JOURNAL_NAME, UNITS_NAME,
               f"{UNITS_NAME}.tmp")  # fmt: skip
RECORD_VERSION = 2  # 2: the record names the cgroups it manages ("managed")
STATE_DIR_FORM = (
    "a directory only root can change: owned by root and not writable by its group or others, "
    "as every directory above it up to / (a sticky one such as /tmp excepted), such as "
    f"{DEFAULT_STATE_DIR}"
)


class Managed(NamedTuple):
    """The cgroups setup's inputs manage (paths below the cgroup root, no leading '/'):
    ``kubepods``, the roots of whole trees (kubepods with its QoS tiers and pods),
    ``reserved``, cgroups managed alone (kube-reserved, system-reserved: never what is in them).
    Setup also makes a reserved cgroup's missing parents and enables controllers in the
    ancestors of both, so those are managed for that."""

    kubepods: frozenset[str] = frozenset()
    reserved: frozenset[str] = frozenset()

    def union(self, other: Managed) -> Managed:
        return Managed(self.kubepods | other.kubepods, self.reserved | other.reserved)

    def covers(self, what: str, path: str) -> bool:
        """Whether a record entry ``what`` ("created", "changed", "enabled", "written") of
        ``path`` lies in what these inputs manage."""
        if path in self.reserved or path in self.kubepods:
            return True
        if any(path.startswith(k + "/") for k in self.kubepods):
            return True
        if what == "changed":  # setup changes values in its own cgroups only
            return False
        # a parent setup made (mkdir -p of a reserved cgroup) or enabled controllers in
        below = path + "/" if path else ""
        return any(r.startswith(below) for r in (*self.kubepods, *self.reserved))

    def to_json(self) -> dict:
        return {"kubepods": sorted(self.kubepods), "reserved": sorted(self.reserved)}

    @classmethod
    def from_json(cls, data: object) -> Managed:
        """ValueError unless ``data`` is the form :meth:`to_json` writes, of valid paths."""
        if not isinstance(data, dict) or set(data) - {"kubepods", "reserved"}:
            raise ValueError("its managed cgroups are not in the form of cgalloc's record")
        out = []
        for key in ("kubepods", "reserved"):
            paths = data.get(key, [])
            if type(paths) is not list or not all(map(_cgroup_path, paths)):
                raise ValueError(f"its managed {key} cgroups are not cgroup paths")
            out.append(frozenset(paths))
        return cls(*out)


def _cgroup_path(path: object) -> bool:
    """A cgroup below the root as setup names one: relative, normalised, not the root."""
    if not isinstance(path, str) or not path or "\x00" in path or "\n" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


@dataclass
class Record:
    """Everything cgalloc changed, keyed by (mount, cgroup path), and what it manages."""

    created: set[tuple[str, str]] = field(default_factory=set)
    # (mount, path, file) -> the value before cgalloc first changed it
    changed: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # (mount, path) -> controllers cgalloc added to that cgroup's subtree_control
    enabled: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # (mount, path, file) cgalloc wrote in a cgroup it created: its original is the kernel's
    # default for a new cgroup
    written: set[tuple[str, str, str]] = field(default_factory=set)
    boot: str = ""  # the boot id of the boot whose tree this record describes
    # the cgroups the inputs of the runs that made these entries manage: no entry lies outside
    managed: Managed = field(default_factory=Managed)

    def is_empty(self) -> bool:
        return not (self.created or self.changed or self.enabled or self.written)

    def copy(self) -> Record:
        """A copy whose changes leave this record as it is."""
        enabled = {k: set(v) for k, v in self.enabled.items()}
        return Record(
            set(self.created), dict(self.changed), enabled, set(self.written), self.boot,
            self.managed,
        )  # fmt: skip

    def assign(self, other: Record) -> None:
        """Make this record hold what ``other`` holds (apply's prepared copy, once every change
        is made: the caller's record object is the one later steps update)."""
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))

    def note(self, entry: dict) -> None:
        """Fold one journal entry (a line of :func:`_journal_text`) into the record."""
        if entry["kind"] == "managed":
            self.managed = self.managed.union(Managed.from_json(_managed_part(entry)))
            return
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
            "managed": self.needed_managed().to_json(),
        }

    def needed_managed(self) -> Managed:
        """The managed cgroups some entry lies in (those of inputs long gone drop out)."""
        entries = {(what, path) for what, _m, path in self.entries()}

        def needed(alone: Managed) -> bool:
            return any(alone.covers(what, path) for what, path in entries)

        kubepods = {k for k in self.managed.kubepods if needed(Managed(frozenset({k})))}
        reserved = {r for r in self.managed.reserved if needed(Managed(reserved=frozenset({r})))}
        return Managed(frozenset(kubepods), frozenset(reserved))

    @classmethod
    def from_json(cls, data: object) -> Record:
        """The record from its JSON form; ValueError saying what is wrong with its shape."""
        # type first: JSON's true and 1.0 compare equal to 1 in Python, not in the record
        version = data.get("version") if isinstance(data, dict) else None
        if type(version) is int and version == 1:
            raise ValueError(
                "it was written by an earlier cgalloc (record version 1), which did not record "
                "the cgroups it manages, so nothing in it can be checked"
            )
        if type(version) is not int or version != RECORD_VERSION:
            raise ValueError(f"it is not a cgalloc record of version {RECORD_VERSION}")
        if "managed" not in data:
            raise ValueError("it does not name the cgroups it manages")
        rec = cls(managed=Managed.from_json(data["managed"]))
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
        out.managed = self.managed
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


JOURNAL_KINDS = {"mkdir": (), "write": ("file", "old"), "enable": ("controllers",), "managed": ()}


def _managed_part(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k in ("kubepods", "reserved")}


def _journal_entry_ok(entry: object) -> bool:
    if not isinstance(entry, dict) or entry.get("kind") not in JOURNAL_KINDS:
        return False
    if not isinstance(entry.get("boot", ""), str):
        return False
    kind = entry["kind"]
    if kind == "managed":
        try:
            Managed.from_json(_managed_part(entry))
        except ValueError:
            return False
        return True
    if not (isinstance(entry.get("mount"), str) and isinstance(entry.get("path"), str)):
        return False
    if kind == "write":
        return isinstance(entry.get("file"), str) and isinstance(entry.get("old"), str | None)
    if kind == "enable":
        ctrls = entry.get("controllers")
        return isinstance(ctrls, list) and all(isinstance(c, str) for c in ctrls)
    return True


# A refused run that removes the directory between our open and the lock file's is retried;
# this many times in a row is not such a race.
LOCK_ATTEMPTS = 100
STATE_FILE_LIMIT = 64 << 20  # a record of 100,000 cgroups is a few MiB


class StateDir:
    """The state directory: lock, record and journal, resolved and checked once
    (:mod:`cgalloc.host.safefs`) and then used through its descriptor."""

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
        self._dir: safefs.TrustedDir | None = None
        # what load() found to write before this run's first write: the record with a
        # journal folded in (None: nothing), or an earlier boot's files to discard
        self._folded: Record | None = None
        self._discard = False

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the directory's descriptor (it is opened again when used)."""
        if getattr(self, "_dir", None) is not None:
            self._dir.close()
            self._dir = None

    # ------------------------------------------------------------ the directory

    def _open(self, create: bool) -> safefs.TrustedDir | None:
        """The checked directory (made, with its missing parents, when ``create``); None when
        it does not exist. InputError when the trust rules refuse it or a state file name
        in it, HostError when it cannot be looked up or made."""
        if self._dir is not None:
            return self._dir
        try:
            found = safefs.open_trusted_dir(self.path, create_mode=0o700 if create else None)
        except safefs.Untrusted as exc:
            raise InputError(
                f"--state-dir {self.path}: {exc.reason}; give {STATE_DIR_FORM}."
            ) from None
        except PermissionError as exc:
            raise self._no_access(exc.filename or self.path) from None
        except OSError as exc:
            what = "create" if create else "use"
            raise HostError(
                f"cannot {what} the state directory {self.path} (--state-dir): "
                f"{exc.strerror or exc} ({exc.filename or self.path})."
            ) from None
        if found is not None:
            try:
                self._check_names(found.fd)
            except BaseException:
                found.close()
                raise
            self._dir = found
        return found

    def _check_names(self, fd: int) -> None:
        """Refuse the directory when a state file name holds anything cgalloc would not
        write there, before anything is read or written."""
        for name in STATE_NAMES:
            try:
                problem = safefs.entry_problem(fd, name)
            except PermissionError:
                raise self._no_access(os.path.join(self.path, name)) from None
            if problem:
                raise self._planted(name, problem)

    def _planted(self, name: str, problem: str) -> InputError:
        return InputError(
            f"--state-dir {self.path}: {name} cannot be used: it {problem}; cgalloc's state "
            "files are regular files only root can write, opened without following links, so "
            "it changed nothing: move it aside and run again."
        )

    def _no_access(self, where: str) -> HostError:
        return HostError(
            f"cannot read {where} (--state-dir {self.path}): permission denied; what setup "
            "recorded there is readable by root only: run this command as root."
        )

    def _broken(self, name: str, what: str) -> InputError:
        return InputError(
            f"--state-dir {self.path}: {name} cannot be used: {what}; cgalloc wrote neither it "
            f"nor anything else this run. Restore it from a backup, or move it aside (cgalloc "
            f"then forgets what it made: remove those cgroups by hand) and run again."
        )

    def require_existing(self) -> None:
        """teardown's refusal of a state directory that is not there (it creates none), for
        its dry run as for the run."""
        if self._open(create=False) is None:
            raise InputError(
                f"--state-dir {self.path} does not exist; give the directory setup used "
                f"(default {DEFAULT_STATE_DIR})."
            )

    def _fd(self) -> int:
        found = self._open(create=False)
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), self.path)
        return found.fd

    @contextlib.contextmanager
    def locked(self, create: bool = True) -> Iterator[StateDir]:
        """Hold the exclusive lock; a second run waits here until the first is done.

        ``create`` makes the directory (and its missing parents) and the lock when missing
        (setup). The directories this run made are removed again when the run ends on a
        cgalloc error (bad input, a host problem, a failure it undid) with nothing recorded in
        them, so such a run leaves nothing behind. ``create=False`` (teardown) refuses a
        missing directory with exit 2 and creates nothing.
        """
        for attempt in itertools.count(1):
            found = self._open(create)
            if found is None:
                self.require_existing()
            flags = os.O_RDWR | os.O_CREAT
            try:
                fd = safefs.open_file_at(found.fd, LOCK_NAME, flags, 0o600)
            except safefs.Unsafe as exc:
                raise self._planted(LOCK_NAME, f"is {exc.what}") from None
            except OSError as exc:
                self.close()
                if create and isinstance(exc, FileNotFoundError) and attempt < LOCK_ATTEMPTS:
                    continue  # removed by a refused run between our open and the lock's: again
                raise HostError(
                    f"cannot use the state directory {self.path} (--state-dir): {exc.strerror}."
                ) from exc
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A refused first run may have removed the lock file while we waited on it: lock
            # the file now in the directory, or two runs would each hold "the" lock.
            try:
                now = os.stat(LOCK_NAME, dir_fd=found.fd, follow_symlinks=False)
                same = os.path.samestat(os.fstat(fd), now)
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
            self.close()
        made = bool(found.made)
        try:
            yield self
        except CgallocError:  # refused, or failed with everything undone: nothing to keep
            if made:
                self._remove_if_unused()
            raise
        finally:
            os.close(fd)

    def _remove_if_unused(self) -> None:
        found = self._dir
        if found is None:
            return
        with contextlib.suppress(OSError):
            if os.listdir(found.fd) == [LOCK_NAME]:
                os.unlink(LOCK_NAME, dir_fd=found.fd)
                self._dir = None
                found.remove_made()

    # ------------------------------------------------------------ the record

    def peek(self) -> Record:
        """The record with any journal folded in, read only and without the lock (verify, a
        dry run); an empty record when the directory does not exist or the record is of an
        earlier boot (see the boot rule). HostError naming the file when it may not be read
        (an unprivileged user), InputError when it cannot be used."""
        if self._open(create=False) is None:
            return Record()
        rec, pending = self._read_record(), self._read_journal()
        if self._earlier_boot(rec, pending):
            return Record()
        for entry in pending:
            rec.note(entry)
        return rec

    def load(self) -> Record:
        """The record, with any journal a killed run left behind folded in; an empty one when
        they are of an earlier boot (boot rule). Nothing is written here: the folded record,
        or the discarding of an earlier boot's files, is written before this run's first
        write (:meth:`_before_write`), so a run refused after loading writes nothing."""
        rec = self._read_record()
        journal = self.read_state_file(JOURNAL_NAME)
        pending = self._journal_entries(journal)
        if self._earlier_boot(rec, pending):
            self.notes.append(
                f"the record in {self.path} (--state-dir) is of an earlier boot (boot id "
                f"{rec.boot or pending[0].get('boot')}); the reboot undid what it lists, so it "
                "is discarded and this run starts a new one."
            )
            self._discard = True
            return Record()
        for entry in pending:
            rec.note(entry)
        if journal is not None:  # folded (or, with no entry, dropped) at the first write
            self._folded = rec.copy()
        return rec

    def _before_write(self) -> None:
        """Make durable what :meth:`load` decided, before anything else is written."""
        fd = self._fd()
        if self._discard:
            self._discard = False
            for name in (RECORD_NAME, JOURNAL_NAME, UNITS_NAME):
                safefs.unlink_at(fd, name)
            safefs.sync_dir(fd)
        elif self._folded is not None:
            folded, self._folded = self._folded, None
            self.save(folded)

    def _earlier_boot(self, rec: Record, pending: list[dict]) -> bool:
        boots = {rec.boot, *(e.get("boot", "") for e in pending)} - {""}
        self.earlier_boot = bool(self.boot) and any(b != self.boot for b in boots)
        return self.earlier_boot

    def read_state_file(self, name: str) -> bytes | None:
        """The bytes of state file ``name``, None when it or the directory is missing. A file
        that is not a regular one or is larger than STATE_FILE_LIMIT is refused
        (InputError naming it); one this user may not read is a HostError saying so."""
        found = self._open(create=False)
        if found is None:
            return None
        try:
            fd = safefs.open_read_at(found.fd, name)
            try:
                raw = read_fd(fd, STATE_FILE_LIMIT)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None
        except safefs.Unsafe as exc:
            raise self._planted(name, f"is {exc.what}") from None
        except PermissionError:
            raise self._no_access(os.path.join(self.path, name)) from None
        except OSError as exc:
            raise self._broken(name, exc.strerror or str(exc)) from exc
        if len(raw) > STATE_FILE_LIMIT:
            raise self._broken(name, f"it is larger than {STATE_FILE_LIMIT >> 20} MiB")
        return raw

    def write_state_file(self, name: str, data: bytes | None) -> None:
        """Replace state file ``name`` with ``data`` atomically and durably (remove it when
        None). OSError when the directory cannot take it."""
        self._before_write()
        fd = self._fd()
        if data is None:
            safefs.unlink_at(fd, name)
        else:
            safefs.replace_at(fd, name, data, 0o600)
        safefs.sync_dir(fd)

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
        if data is None:
            data = self.record_data(rec)
        self.write_state_file(RECORD_NAME, data)
        self.discard_journal()

    def _read_journal(self) -> list[dict]:
        return self._journal_entries(self.read_state_file(JOURNAL_NAME))

    def _journal_entries(self, raw: bytes | None) -> list[dict]:
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

    def journal(self, changes: list[tuple], managed: Managed | None = None) -> None:
        """Record changes about to be made, durably (written and fsync-ed), before the first
        is made: the cgroups the run's inputs manage, then each change, a (kind, mount, path,
        file, old, controllers) tuple, one journal line each (:func:`_journal_text`).
        OSError when the directory cannot take it."""
        self._before_write()
        data = _journal_text(self.boot, changes, managed).encode()
        fd = self._fd()
        safefs.append_at(fd, JOURNAL_NAME, data, 0o600)
        safefs.sync_dir(fd)

    def discard_journal(self) -> None:
        fd = self._fd()
        safefs.unlink_at(fd, JOURNAL_NAME)


# One encoder for the record and every journal line: sorted keys, no indent (an indenting
# encoder is the json module's pure-Python one, ~5x slower on a 1000-pod record).
_JSON = json.JSONEncoder(sort_keys=True)


def _record_text(data: dict) -> str:
    """The record as JSON with sorted keys."""
    return _JSON.encode(data) + "\n"


def _journal_text(boot: str, changes: Iterable[tuple], managed: Managed | None = None) -> str:
    """The journal lines of ``changes``, one JSON object each with sorted keys: ``boot``,
    ``kind``, ``mount`` and ``path``; a write adds ``file`` and ``old`` (null for a file
    of a cgroup being made), an enable the sorted ``controllers``. ``managed`` comes first,
    as a line of kind ``managed`` with its ``kubepods`` and ``reserved`` cgroups."""
    lines = []
    if managed is not None:
        entry: dict[str, object] = {"boot": boot, "kind": "managed", **managed.to_json()}
        lines.append(json.dumps(entry, sort_keys=True) + "\n")
    for kind, mount, path, file, old, controllers in changes:
        entry = {"boot": boot, "kind": kind, "mount": mount, "path": path}
        if kind == "write":
            entry.update(file=file, old=old)
        elif kind == "enable":
            entry["controllers"] = sorted(controllers)
        lines.append(_JSON.encode(entry) + "\n")
    return "".join(lines)
