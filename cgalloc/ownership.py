"""What cgalloc owns on this node, and the lock that serialises runs.

The state directory (default ``/run/cgalloc``) holds:

- ``lock``: an ``flock``-ed file; one setup/teardown at a time.
- ``owned.json``: the record of what cgalloc did to the hierarchy — cgroup directories it created,
  the original value of every file it changed in a cgroup it did not create, and the controllers
  it enabled in ``cgroup.subtree_control``. ``teardown`` undoes exactly that.
- ``journal.jsonl``: one line per change, appended *before* the change is made. A run that is
  killed midway leaves it behind; the next run folds it into the record, so nothing it did is
  forgotten.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from cgalloc.errors import HostError

DEFAULT_STATE_DIR = "/run/cgalloc"
RECORD_NAME = "owned.json"
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
RECORD_VERSION = 1


@dataclass
class Record:
    """Everything cgalloc changed, keyed by (mount, cgroup path)."""

    created: set[tuple[str, str]] = field(default_factory=set)
    # (mount, path, file) -> the value before cgalloc first changed it
    changed: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # (mount, path) -> controllers cgalloc added to that cgroup's subtree_control
    enabled: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.created or self.changed or self.enabled)

    def note(self, entry: dict) -> None:
        """Fold one journal entry (see :func:`journal_entry`) into the record."""
        mount, path = entry["mount"], entry["path"]
        kind = entry["kind"]
        if kind == "mkdir":
            self.created.add((mount, path))
        elif kind == "write":
            key = (mount, path, entry["file"])
            # The first original wins: later runs see cgalloc's own values, not the node's.
            ours = (mount, path) in self.created
            if not ours and key not in self.changed and entry.get("old") is not None:
                self.changed[key] = entry["old"]
        elif kind == "enable":
            self.enabled.setdefault((mount, path), set()).update(entry["controllers"])

    def to_json(self) -> dict:
        return {
            "version": RECORD_VERSION,
            "created": sorted([m, p] for m, p in self.created),
            "changed": sorted([m, p, f, v] for (m, p, f), v in self.changed.items()),
            "enabled": sorted([m, p, sorted(c)] for (m, p), c in self.enabled.items() if c),
        }

    @classmethod
    def from_json(cls, data: dict) -> Record:
        rec = cls()
        rec.created = {(m, p) for m, p in data.get("created", [])}
        rec.changed = {(m, p, f): v for m, p, f, v in data.get("changed", [])}
        rec.enabled = {(m, p): set(c) for m, p, c in data.get("enabled", [])}
        return rec


def journal_entry(
    kind: str, mount: str, path: str, file: str = "", old: str | None = None, controllers=()
) -> dict:
    """A journal line for a change about to be made."""
    entry: dict = {"kind": kind, "mount": mount, "path": path}
    if kind == "write":
        entry["file"] = file
        entry["old"] = old
    if kind == "enable":
        entry["controllers"] = sorted(controllers)
    return entry


class StateDir:
    """The state directory: lock, record and journal."""

    def __init__(self, path: str = DEFAULT_STATE_DIR):
        self.path = path
        self._journal = None

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @contextlib.contextmanager
    def locked(self) -> Iterator[StateDir]:
        """Hold the exclusive lock; a second run waits here until the first is done."""
        try:
            os.makedirs(self.path, mode=0o700, exist_ok=True)
            fd = os.open(self._file(LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise HostError(
                f"cannot use the state directory {self.path} (--state-dir): {exc.strerror}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self
        finally:
            self.close_journal()
            os.close(fd)

    def load(self) -> Record:
        """The record, with any journal a killed run left behind folded in (and saved)."""
        rec = Record()
        try:
            with open(self._file(RECORD_NAME), encoding="utf-8") as fh:
                rec = Record.from_json(json.load(fh))
        except FileNotFoundError:
            pass
        pending = self._read_journal()
        if pending:
            for entry in pending:
                rec.note(entry)
            self.save(rec)
        return rec

    def save(self, rec: Record) -> None:
        """Replace the record atomically (or remove it when empty) and drop the journal."""
        target = self._file(RECORD_NAME)
        if rec.is_empty():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
        else:
            tmp = target + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(rec.to_json(), fh, indent=1, sort_keys=True)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        self.discard_journal()

    def _read_journal(self) -> list[dict]:
        try:
            with open(self._file(JOURNAL_NAME), encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            # A run killed mid-append leaves a torn last line; everything before it is whole.
            with contextlib.suppress(ValueError):
                entries.append(json.loads(line))
        return entries

    def append(self, entry: dict) -> None:
        """Journal a change before it is made (one write; the page cache survives SIGKILL)."""
        if self._journal is None:
            self._journal = open(self._file(JOURNAL_NAME), "a", encoding="utf-8")  # noqa: SIM115
        self._journal.write(json.dumps(entry, sort_keys=True) + "\n")
        self._journal.flush()

    def close_journal(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def discard_journal(self) -> None:
        self.close_journal()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._file(JOURNAL_NAME))
