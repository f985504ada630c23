"""apply's systemd hook and the record of what cgalloc did through systemd (``systemd.json`` in
the state directory): the transient units it started and the unit properties it changed, with
their old values, so rollback and teardown can undo both (:mod:`cgalloc.host.systemd` is the
D-Bus client)."""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cgalloc.errors import InputError
from cgalloc.host.systemd import (
    ACCOUNTING,
    Property,
    SystemdError,
    existing_unit,
    is_slice_name,
    role_of,
    slice_unit,
    unit_properties,
)
from cgalloc.model.naming import expand_slice
from cgalloc.ops.state import STATE_FILE_LIMIT, UNITS_NAME, Managed, StateDir

if TYPE_CHECKING:
    from cgalloc.host.dbus import Systemd


@dataclass
class UnitRecord:
    """What cgalloc did through systemd: transient units it started, properties it changed."""

    started: list[str] = field(default_factory=list)
    changed: dict[str, dict[str, list]] = field(default_factory=dict)  # unit → prop → [sig, old]

    def is_empty(self) -> bool:
        return not (self.started or self.changed)

    @classmethod
    def load(cls, state: StateDir) -> UnitRecord:
        """The record in ``state`` (read as its other files are: no symlink followed, a
        HostError when this user may not read it); empty when there is none or the state
        loaded is of an earlier boot (its units are gone with it)."""
        raw = None if state.earlier_boot else state.read_state_file(UNITS_NAME)
        if raw is None:
            return cls()
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
                f"--state-dir {state.path}: {UNITS_NAME} cannot be used: it is not cgalloc's "
                "record of systemd units; restore it from a backup, or move it aside (cgalloc "
                "then forgets the units it started: stop them with systemctl) and run again."
            )
        return cls(list(started), dict(changed))

    def save(self, state: StateDir) -> None:
        """Replace the record in ``state`` (remove it when empty), atomically and durably."""
        data = None
        if not self.is_empty():
            text = json.dumps({"started": self.started, "changed": self.changed}, indent=1)
            data = text.encode()
        state.write_state_file(UNITS_NAME, data)

    def foreign(self, managed: Managed) -> list[str]:
        """The units this record names whose cgroups lie outside ``managed`` (a slice started
        is its cgroup; a unit whose properties were set is a managed cgroup, or a service or
        scope that is one), as lines naming each."""
        out = []
        for name in self.started:
            if not managed.covers("created", expand_slice(name).lstrip("/")):
                out.append(f"  started unit {name}")
        reserved_units = {posixpath.basename(p) for p in managed.reserved if existing_unit(p)}
        for name in self.changed:
            if name.endswith(".slice") and is_slice_name(name):
                ok = managed.covers("changed", expand_slice(name).lstrip("/"))
            else:
                ok = name in reserved_units
            if not ok:
                out.append(f"  properties of unit {name!r}")
        return out


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
        state: StateDir,
        v2: bool,
        files: dict[str, dict[str, str]],
        roles: dict[str, str] | None = None,
        start_slices: bool = True,
    ) -> None:
        self.client = client
        self.start_slices = start_slices
        self.state = state
        self.v2 = v2
        self.files = files  # cgroup path → {file: value} the plan writes there
        self.roles = roles or {}
        self.record = UnitRecord.load(state)
        self._touched: set[str] = set()
        self._new: set[str] = set()  # units this run started, with their properties
        self._before: dict[str, dict[str, list]] = {}  # unit → prop → [sig, value] this run

    @classmethod
    def for_plan(
        cls, client: Systemd, state: StateDir, plan, v2: bool, roles=None, start_slices=True
    ):
        files: dict[str, dict[str, str]] = {}
        for a in plan.actions:
            if a.kind == "write":
                files.setdefault(a.path, {})[a.file] = a.new
        return cls(client, state, v2, files, roles, start_slices)

    def properties(self, path: str) -> list[Property]:
        # Under the cgroupfs driver the cpuset stays cgroupfs's alone: systemd never rewrites
        # cpuset files of a unit without AllowedCPUs, and setting it would make systemd count
        # cpuset as enabled at the root after teardown disabled it there, so the next slice
        # it starts would get no cpuset files (seen on the Vagrant v2 guest).
        return unit_properties(self.files.get(path, {}), self.v2, cpuset=self.start_slices)

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
            self.record.save(self.state)
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
            self.record.save(self.state)
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
        self.record.save(self.state)
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


def undo(client: Systemd, record: UnitRecord, state: StateDir) -> list[str]:
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
    record.save(state)
    return problems
