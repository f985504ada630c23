"""apply's systemd hook and the record of what cgalloc did through systemd (``systemd.json`` in
the state directory): the transient units it started and the unit properties it changed, with
their old values, so rollback and teardown can undo both (:mod:`cgalloc.host.systemd` is the
D-Bus client)."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field

from cgalloc.errors import InputError
from cgalloc.host.systemd import (
    ACCOUNTING,
    Property,
    Systemd,
    SystemdError,
    existing_unit,
    is_slice_name,
    role_of,
    slice_unit,
    unit_properties,
)
from cgalloc.inputs.loading import NotRegularFile, read_regular
from cgalloc.model.naming import expand_slice
from cgalloc.ops.state import STATE_FILE_LIMIT, UNITS_NAME


@dataclass
class UnitRecord:
    """What cgalloc did through systemd: transient units it started, properties it changed."""

    started: list[str] = field(default_factory=list)
    changed: dict[str, dict[str, list]] = field(default_factory=dict)  # unit → prop → [sig, old]

    def is_empty(self) -> bool:
        return not (self.started or self.changed)

    @classmethod
    def load(cls, state_dir: str) -> UnitRecord:
        path = os.path.join(state_dir, UNITS_NAME)
        try:
            raw = read_regular(path, STATE_FILE_LIMIT)
        except FileNotFoundError:
            return cls()
        except NotRegularFile:
            raw = b""  # refused below as not cgalloc's record
        try:
            if len(raw) > STATE_FILE_LIMIT:
                raise ValueError(f"it is larger than {STATE_FILE_LIMIT >> 20} MiB")
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8
            data = exc
        started = data.get("started", []) if isinstance(data, dict) else None
        changed = data.get("changed", {}) if isinstance(data, dict) else None
        # the undo expands each started name: one that is no slice cgalloc could name is not
        # cgalloc's record (it would fail there, midway)
        ok = isinstance(started, list) and all(is_slice_name(n) for n in started)
        ok = (
            ok
            and isinstance(changed, dict)
            and all(
                isinstance(props, dict)
                and all(isinstance(v, list) and len(v) == 2 for v in props.values())
                for props in changed.values()
            )
        )
        if not ok:
            raise InputError(
                f"--state-dir {state_dir}: {UNITS_NAME} cannot be used: it is not cgalloc's "
                "record of systemd units; restore it from a backup, or move it aside (cgalloc "
                "then forgets the units it started: stop them with systemctl) and run again."
            )
        return cls(list(started), dict(changed))

    def save(self, state_dir: str) -> None:
        target = os.path.join(state_dir, UNITS_NAME)
        if self.is_empty():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
            return
        tmp = target + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"started": self.started, "changed": self.changed}, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)


def restorable(sig: str, value: object) -> list:
    return [sig, list(value) if isinstance(value, bytes | bytearray) else value]


def wire_props(props: dict[str, list]) -> list[Property]:
    """Recorded [signature, value] pairs back into D-Bus a(sv) (byte arrays were lists)."""
    return [(p, (sig, bytes(v) if sig == "ay" else v)) for p, (sig, v) in props.items()]


class SystemdUnits:
    """apply's hook (:func:`cgalloc.ops.apply.apply`): the plan's slices become systemd units
    (``start_slices``: the systemd driver), and systemd's own units get the limits written in
    their cgroups as unit properties, so a daemon-reload puts back cgalloc's values, not the
    unit's old ones (under either driver, wherever systemd is PID 1)."""

    def __init__(
        self,
        client: Systemd,
        state_dir: str,
        v2: bool,
        files: dict[str, dict[str, str]],
        roles: dict[str, str] | None = None,
        start_slices: bool = True,
    ) -> None:
        self.client = client
        self.start_slices = start_slices
        self.state_dir = state_dir
        self.v2 = v2
        self.files = files  # cgroup path → {file: value} the plan writes there
        self.roles = roles or {}
        self.record = UnitRecord.load(state_dir)
        self._touched: set[str] = set()
        self._new: set[str] = set()  # units this run started, with their properties
        self._before: dict[str, dict[str, list]] = {}  # unit → prop → [sig, value] this run

    @classmethod
    def for_plan(
        cls, client: Systemd, state_dir: str, plan, v2: bool, roles=None, start_slices=True
    ):
        files: dict[str, dict[str, str]] = {}
        for a in plan.actions:
            if a.kind == "write":
                files.setdefault(a.path, {})[a.file] = a.new
        return cls(client, state_dir, v2, files, roles, start_slices)

    def properties(self, path: str) -> list[Property]:
        return unit_properties(self.files.get(path, {}), self.v2)

    def create(self, mount: str, path: str) -> bool:
        """Before the plan's mkdir of ``path``: start it as a transient slice. True when the
        directory exists afterwards (systemd made it), so the mkdir is skipped."""
        name = slice_unit(path)
        if name is None or not self.start_slices:
            return False
        if name not in self.record.started and self.client.unit_path(name) is not None:
            # A unit systemd already has (system.slice on v1, whose cpuset or hugetlb directory
            # systemd never makes): not cgalloc's to start or stop; the plan makes the missing
            # directory and before_write keeps the unit's old properties for teardown.
            return False
        if name not in self.record.started:
            # Recorded first: a run killed during the call still stops the unit on teardown.
            self.record.started.append(name)
            self.record.save(self.state_dir)
            props = [*((p, ("b", True)) for p in ACCOUNTING), *self.properties(path)]
            self._new.add(name)
            self.client.start_slice(name, f"cgalloc: {role_of(path, self.roles)}", props)
        return os.path.isdir(os.path.join(mount, path))

    def before_write(self, path: str) -> None:
        """Before the plan's first write in an existing cgroup: set its unit's properties,
        keeping the old values for rollback and (for a unit cgalloc did not start) teardown.
        A unit an earlier run started gets the new values too, or systemd would put its old
        ones back on the next daemon-reload."""
        if path in self._touched:
            return
        self._touched.add(path)
        name = existing_unit(path)
        if name is None or name in self._new:
            return
        props = self.properties(path)
        if not props or self.client.unit_path(name) is None:
            return
        before = {prop: restorable(*self.client.get(name, prop)) for prop, _ in props}
        self._before[name] = before
        if name not in self.record.started:  # stopping a started unit undoes all of it
            original = self.record.changed.setdefault(name, {})
            for prop, value in before.items():
                original.setdefault(prop, value)  # the first original wins, as in ownership
            self.record.save(self.state_dir)
        self.client.set_properties(name, props)

    def rollback_properties(self) -> list[str]:
        """Put back the properties this run set (their values before this run)."""
        problems = []
        for name, before in self._before.items():
            try:
                self.client.set_properties(name, wire_props(before))
            except SystemdError as err:
                problems.append(f"{name}: restoring {', '.join(before)} failed: {err}")
        self._before.clear()
        return problems

    def remove(self, path: str) -> bool:
        """Undo ``create``: stop the unit (systemd removes its cgroup). False if not ours."""
        name = slice_unit(path)
        if name is None or name not in self.record.started:
            return False
        self.client.stop_unit(name)
        self.record.started.remove(name)
        self.record.save(self.state_dir)
        return True


def stale_units(
    record: UnitRecord, dirs: set[str], files: dict[str, dict[str, str]], v2: bool
) -> UnitRecord:
    """What ``record`` holds that the desired tree no longer wants: the slices it started
    whose cgroup is not in ``dirs`` (cgroup paths, ancestors included), and the properties it
    set on existing units that the desired ``files`` ({cgroup path: {file: value}}) no longer
    give. A copy; ``record`` is unchanged."""
    out = UnitRecord()
    out.started = [n for n in record.started if expand_slice(n).lstrip("/") not in dirs]
    wanted: dict[str, set[str]] = {}
    for path, values in files.items():
        name = existing_unit(path)
        if name is not None:
            wanted.setdefault(name, set()).update(p for p, _ in unit_properties(values, v2))
    for name, props in record.changed.items():
        left = {p: v for p, v in props.items() if p not in wanted.get(name, set())}
        if left:
            out.changed[name] = left
    return out


def reset_properties(path: str, file: str, value: str, v2: bool) -> tuple[str, list[Property]]:
    """The unit cgalloc started for ``path`` and its properties for ``file`` set back to
    ``value`` (the kernel's default), or ("", []) when ``path`` is no such unit's cgroup."""
    name = slice_unit(path)
    return (name, unit_properties({file: value}, v2)) if name else ("", [])


def undo(client: Systemd, record: UnitRecord, state_dir: str) -> list[str]:
    """Restore the properties ``record`` changed and stop the units it started (last first)."""
    problems = []
    for name, props in list(record.changed.items()):
        try:
            if client.unit_path(name) is not None:
                client.set_properties(name, wire_props(props))
            del record.changed[name]
        except SystemdError as err:
            problems.append(f"{name}: restoring {', '.join(props)} failed: {err}")
    for name in reversed(list(record.started)):
        try:
            client.stop_unit(name)
            record.started.remove(name)
        except SystemdError as err:
            problems.append(f"{name}: stopping the transient unit failed: {err}")
    record.save(state_dir)
    return problems
