"""Apply a plan through the C core, all or nothing; and tear down what cgalloc created.

Every change is journaled before it is made (see :mod:`cgalloc.ownership`). If one fails,
the changes already made are undone in reverse — values restored, processes moved back,
controllers disabled, created cgroups removed deepest first — and the error says so.

The commands run with :data:`SWITCHES`, all off. Nothing in the installed tool (no
environment variable, no option) changes them: the test suite replaces them in-process to drive
a fake tree in a temporary directory (``tests/fakecgroup.py``).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cgalloc import core
from cgalloc.errors import CgallocError, InputError
from cgalloc.ownership import Record, StateDir, journal_entry
from cgalloc.plan import Action, Plan, read_file
from cgalloc.systemd import Systemd, SystemdError, SystemdUnits, UnitRecord
from cgalloc.systemd import undo as undo_units


class KernelHooks(Protocol):
    def after_mkdir(self, mount: str, path: str) -> None: ...
    def before_rmdir(self, mount: str, path: str) -> None: ...
    def on_write(self, mount: str, relpath: str, value: str) -> str: ...
    def after_write(self, mount: str, relpath: str) -> None: ...


@dataclass(frozen=True)
class TestSwitches:
    """Stand-ins for a fake tree, set only by the test suite (module docstring).

    ``allow_any_fs`` accepts a hierarchy root that is not a cgroup filesystem; ``kernel``
    stands in for the kernel populating and clearing a fake cgroup directory and resolving
    ``+cpu``/``-cpu`` in ``cgroup.subtree_control``; ``mountinfo`` is read instead of
    ``/proc/self/mountinfo``.
    """

    __test__ = False  # not a pytest test class

    allow_any_fs: bool = False
    kernel: KernelHooks | None = None
    mountinfo: str = "/proc/self/mountinfo"


# What the commands run with: always these defaults outside the test suite.
SWITCHES = TestSwitches()


def switches() -> TestSwitches:
    """The switches in force (the defaults, unless a test replaced :data:`SWITCHES`)."""
    return SWITCHES


@dataclass
class Result:
    """What a run changed; ``done`` lists the actions made, in order."""

    root: str
    done: list[Action] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # teardown: what it left, and why

    @property
    def writes(self) -> int:
        return len(self.done)

    def summary(self) -> str:
        if not self.done:
            return "no changes: 0 writes"
        return f"applied {len(self.done)} changes"

    def to_json(self) -> dict:
        return {
            "writes": self.writes,
            "done": [a.to_json(self.root) for a in self.done],
            "kept": list(self.kept),
        }


class Roots:
    """One core root per hierarchy mount, opened on first use."""

    def __init__(self, opener: Callable | None = None, allow_any_fs: bool = False):
        self._opener = opener or core.open_root
        self._allow = allow_any_fs
        self._roots: dict[str, object] = {}

    def __getitem__(self, mount: str):
        if mount not in self._roots:
            self._roots[mount] = self._opener(mount, allow_any_fs=self._allow)
        return self._roots[mount]


def _rel(path: str, file: str = "") -> str:
    return os.path.join(path, file) if path else file


def _write(roots: Roots, mount: str, rel: str, value: str, kernel: KernelHooks | None) -> None:
    if kernel is not None:
        value = kernel.on_write(mount, rel, value)
    roots[mount].write(rel, value)
    if kernel is not None:
        kernel.after_write(mount, rel)  # effects of a write that succeeded


def _perform(
    roots: Roots, a: Action, kernel: KernelHooks | None, units: SystemdUnits | None = None
) -> None:
    if a.kind == "mkdir":
        if units is not None and units.create(a.mount, a.path):
            return  # systemd made the directory of the slice unit
        roots[a.mount].mkdir(a.path)
        if kernel is not None:
            kernel.after_mkdir(a.mount, a.path)
    else:
        value = a.new
        if units is not None and a.kind == "write":
            units.before_write(a.path)
        _write(roots, a.mount, _rel(a.path, a.file), value, kernel)


def _undo(roots: Roots, a: Action, kernel: KernelHooks | None, created: set, units=None) -> None:
    if a.kind == "mkdir":
        stopped = units is not None and units.remove(a.path)
        if stopped and not os.path.isdir(os.path.join(a.mount, a.path)):
            return  # systemd removed the unit's cgroup
        if kernel is not None:
            kernel.before_rmdir(a.mount, a.path)
        roots[a.mount].rmdir(a.path)
    elif a.kind == "enable":
        _write(roots, a.mount, _rel(a.path, a.file), a.new.replace("+", "-"), kernel)
    elif a.kind == "move":
        rel = _rel(a.old.strip("/"), "cgroup.procs")
        with contextlib.suppress(ProcessLookupError):
            _move(roots, a.mount, rel, a.new, kernel)
    elif (a.mount, a.path) not in created and a.old is not None:
        # An empty value cannot be written as zero bytes; a newline clears the same way.
        _write(roots, a.mount, _rel(a.path, a.file), a.old or "\n", kernel)


def _move(roots: Roots, mount: str, rel: str, pid: str, kernel: KernelHooks | None) -> None:
    """Move a pid; a process that exited meanwhile is not an error (ProcessLookupError)."""
    try:
        _write(roots, mount, rel, pid, kernel)
    except OSError as exc:  # core.WriteError is an OSError
        if getattr(exc, "errno", None) == errno.ESRCH:
            raise ProcessLookupError(pid) from exc
        raise


def _reason(exc: BaseException) -> str:
    code = getattr(exc, "errno", None)
    if code:
        return f"{os.strerror(code)} (errno {code})"
    return str(exc) or type(exc).__name__


def apply(
    plan: Plan,
    state: StateDir,
    record: Record,
    *,
    roots: Roots | None = None,
    switches: TestSwitches = TestSwitches(),
    units: SystemdUnits | None = None,
    on_done: Callable[[Action], None] | None = None,
) -> Result:
    """Make every action of ``plan``; on the first failure undo them all and raise.

    The caller holds ``state``'s lock and built ``plan`` under it. ``record`` is updated and
    saved on success. With ``units`` (systemd driver, systemd as PID 1) new slices are started
    as transient units and existing units get the limits as properties before the writes.
    """
    roots = roots or Roots(allow_any_fs=switches.allow_any_fs)
    result = Result(plan.root)
    created: set[tuple[str, str]] = set()
    if not plan.actions:
        return result
    try:
        state.journal([_entry(a) for a in plan.actions if a.kind != "move"])
    except OSError as exc:
        with contextlib.suppress(OSError):
            state.discard_journal()
        raise CgallocError(
            f"cannot record the planned changes in the state directory {state.path} "
            f"(--state-dir): {_reason(exc)}; nothing was changed."
        ) from exc
    for a in plan.actions:
        try:
            if a.kind == "move":
                _move(roots, a.mount, _rel(a.path, a.file), a.new, switches.kernel)
            else:
                _perform(roots, a, switches.kernel, units)
        except ProcessLookupError:
            continue
        except (OSError, SystemdError) as exc:
            _fail(
                state, record, result, created, roots, switches, units, exc, a.describe(plan.root)
            )
        if a.kind == "mkdir":
            created.add((a.mount, a.path))
        result.done.append(a)
        if on_done is not None:  # progress for the command line
            on_done(a)
    try:
        state.save(_fold(record, result.done))
    except OSError as exc:
        what = f"recording the {len(result.done)} changes in {state.path} (--state-dir)"
        _fail(state, record, result, created, roots, switches, units, exc, what)
    return result


def _entry(a: Action) -> dict:
    controllers = a.new.replace("+", "").split() if a.kind == "enable" else ()
    return journal_entry(a.kind, a.mount, a.path, a.file, a.old, controllers)


def _fail(state, record, result, created, roots, switches, units, exc, what: str) -> None:
    """Undo what the run did after ``what`` failed with ``exc``, and raise saying so."""
    failed = f"{what} failed: {_reason(exc)}"
    done = result.done
    problems = _rollback(roots, done, switches.kernel, created, result.root, units)
    if problems:
        try:
            state.save(_fold(record, done))
            kept = "the record of what cgalloc changed keeps these for teardown."
        except OSError:
            kept = f"the journal in {state.path} keeps these for teardown."
        raise CgallocError(
            "\n".join([failed, "rollback was incomplete; still changed:", *problems, kept])
        ) from exc
    with contextlib.suppress(OSError):
        state.discard_journal()
    raise CgallocError(
        f"{failed}; all {len(done)} earlier changes were undone, the node is as it was."
    ) from exc


def _fold(record: Record, done: list[Action]) -> Record:
    for a in done:
        if a.kind != "move":
            record.note(_entry(a))
    return record


def _rollback(
    roots: Roots, done: list[Action], kernel, created: set, root: str, units=None
) -> list[str]:
    """Undo ``done`` in reverse; returns what could not be undone."""
    problems = []
    if units is not None:
        # Before the writes are undone, so systemd does not re-apply the new limits over them.
        problems += [f"  {p}" for p in units.rollback_properties()]
    for a in reversed(done):
        try:
            _undo(roots, a, kernel, created, units)
        except (OSError, SystemdError) as exc:
            problems.append(f"  undo of {a.describe(root)}: {_reason(exc)}")
    return problems


# ---------------------------------------------------------------- teardown


def _depth(path: str) -> int:
    return path.count("/") + 1 if path else 0


def _has_procs(mount: str, path: str) -> bool:
    return bool((read_file(mount, path, "cgroup.procs") or "").strip())


def _outside(root: str, mount: str, path: str, what: str) -> bool:
    """Whether a record entry points outside the hierarchy mounted at (or just below) ``root``:
    setup only ever records a mount that is the root (v2) or a directory in it (v1), and a
    normalised relative cgroup path below that mount (the root cgroup itself only for the
    controllers it enabled)."""
    root = os.path.normpath(root)
    if not os.path.isabs(mount) or os.path.normpath(mount) != mount:
        return True
    if mount != root and os.path.dirname(mount) != root:
        return True
    if not path:
        return what != "enabled"
    parts = path.split("/")
    if any(p in ("", ".", "..") or "\x00" in p or "\n" in p for p in parts):
        return True
    real_mount = os.path.realpath(mount)
    real = os.path.realpath(os.path.join(mount, path))
    return not real.startswith(real_mount + "/")  # through a symlink


def check_managed(root: str, record: Record) -> None:
    """Refuse a record with entries outside the tree below ``root`` (a tampered record)."""
    bad = [
        f"  {what} {os.path.join(mount, path)}"
        for what, mount, path in record.entries()
        if _outside(root, mount, path, what)
    ]
    bad += [
        f"  changed file {f!r} of {os.path.join(m, p)}"
        for m, p, f in sorted(record.changed)
        if not f or "/" in f or f.startswith(".") or "\x00" in f
    ]
    if bad:
        raise InputError(
            "\n".join(
                [
                    f"--state-dir: the record names cgroups outside the tree setup manages below "
                    f"--cgroupfs {root}; teardown acts only inside it and changed nothing. "
                    "Check --cgroupfs, or remove these entries from the record:",
                    *bad,
                ]
            )
        )


def _restore_values(root: str, record: Record, roots: Roots, switches, result: Result) -> None:
    """Write back every original value in ``record.changed``; what fails stays, in ``kept``."""
    for (mount, path, file), original in sorted(record.changed.items()):
        if not os.path.isdir(os.path.join(mount, path)):
            del record.changed[(mount, path, file)]
            continue
        current = read_file(mount, path, file)
        action = Action("write", mount, path, file, current, original or "\n", cgroup=path)
        try:
            if current is None or current != original:
                _write(roots, mount, _rel(path, file), original or "\n", switches.kernel)
                result.done.append(action)
            del record.changed[(mount, path, file)]
        except OSError as exc:
            result.kept.append(
                f"{action.where(root)}: restoring {original!r} failed: {_reason(exc)}"
            )


def _remove_created(root: str, record: Record, roots: Roots, switches, result: Result) -> None:
    """Remove the empty cgroups ``record`` says cgalloc created (deepest first) and disable the
    controllers it enabled; what cannot be undone stays in the record, listed in ``kept``."""
    for mount, path in sorted(record.created, key=lambda mp: (-_depth(mp[1]), mp)):
        where = Action("mkdir", mount, path).where(root)
        if not os.path.isdir(os.path.join(mount, path)):
            record.created.discard((mount, path))
            continue
        if _has_procs(mount, path):
            result.kept.append(f"{where}: kept, it still has processes")
            continue
        try:
            if switches.kernel is not None:
                switches.kernel.before_rmdir(mount, path)
            roots[mount].rmdir(path)
        except OSError as exc:
            result.kept.append(f"{where}: kept, rmdir failed: {_reason(exc)}")
            continue
        record.created.discard((mount, path))
        result.done.append(Action("rmdir", mount, path, cgroup=path))
    deepest_first = sorted(record.enabled.items(), key=lambda t: -_depth(t[0][1]))
    for (mount, path), controllers in deepest_first:
        if (mount, path) in record.created:
            continue  # kept because it is not empty; its controllers stay enabled too
        if not os.path.isdir(os.path.join(mount, path)):
            del record.enabled[(mount, path)]
            continue
        value = " ".join("-" + c for c in sorted(controllers))
        action = Action("enable", mount, path, "cgroup.subtree_control", None, value, path)
        try:
            _write(roots, mount, _rel(path, "cgroup.subtree_control"), value, switches.kernel)
        except OSError as exc:
            result.kept.append(f"{action.where(root)}: {value} failed: {_reason(exc)}")
            continue
        del record.enabled[(mount, path)]
        result.done.append(action)


def converge(
    root: str,
    state: StateDir,
    record: Record,
    stale: Record,
    *,
    roots: Roots | None = None,
    switches: TestSwitches = TestSwitches(),
) -> Result:
    """After a successful apply: undo what cgalloc did that the inputs no longer want
    (``stale``, from :meth:`Record.stale`): restore values it changed, remove the cgroups it
    made. What cannot be undone yet (a cgroup with processes) stays in the record."""
    check_managed(root, stale)
    roots = roots or Roots(allow_any_fs=switches.allow_any_fs)
    result = Result(root)
    left = Record(
        set(stale.created), dict(stale.changed), {k: set(v) for k, v in stale.enabled.items()}
    )
    _restore_values(root, left, roots, switches, result)
    _remove_created(root, left, roots, switches, result)
    stale.forget(left)  # what remains in ``left`` could not be undone yet
    record.forget(stale)
    if not stale.is_empty():
        state.save(record)
    return result


def teardown(
    root: str,
    state: StateDir,
    record: Record,
    *,
    roots: Roots | None = None,
    switches: TestSwitches = TestSwitches(),
    systemd: Systemd | None = None,
) -> Result:
    """Undo what ``record`` says cgalloc did: restore changed values, stop the systemd units
    it started and restore the unit properties it set (``systemd.json`` in the state dir),
    remove the cgroups it created (only when empty, deepest first), disable the controllers it
    enabled.

    What cannot be undone stays in the record and is listed in ``Result.kept``. A record naming
    anything outside the tree setup manages below ``root`` is refused whole (InputError listing
    the entries) before anything is written.
    """
    check_managed(root, record)
    roots = roots or Roots(allow_any_fs=switches.allow_any_fs)
    result = Result(root)
    _restore_values(root, record, roots, switches, result)
    units = UnitRecord.load(state.path)
    if not units.is_empty():
        result.kept += undo_units(systemd or Systemd(), units, state.path)
    _remove_created(root, record, roots, switches, result)
    state.save(record)
    return result
