"""Apply a plan through the C core, all or nothing; and tear down what cgalloc created.

Every change is journaled before it is made (see :mod:`cgalloc.ops.state`). If one fails,
the changes already made are undone in reverse — values restored, processes moved back,
controllers disabled, created cgroups removed deepest first — and the error says so. SIGINT,
SIGTERM and SIGHUP while the changes are made lead to the same rollback (:class:`SignalGuard`):
the handler only records the signal, and the apply loop acts on it between two core calls.

Every operation acts on the :class:`~cgalloc.host.machine.Host` it is handed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from cgalloc.errors import SIGNALS, CgallocError, HostError, InputError, Interrupted
from cgalloc.host import core
from cgalloc.host.machine import Host, KernelHooks
from cgalloc.host.systemd import SystemdError
from cgalloc.model.hierarchy import cgroup_file
from cgalloc.model.naming import KUBEPODS, SLICE_SUFFIX
from cgalloc.ops.plan import (
    Action,
    LiveTree,
    Plan,
    cgroup_depth,
    memsw_rank,
    read_file,
    undo_actions,
)
from cgalloc.ops.state import Record, StateDir
from cgalloc.ops.units import SystemdUnits, UnitRecord, reset_properties, stale_units, wire_props

if TYPE_CHECKING:
    from cgalloc.host.dbus import Systemd
from cgalloc.ops.units import undo as undo_units

# SIGNALS stop setup with a rollback. SIGKILL cannot be handled: the journal covers it (the
# next run folds it in).


def signal_name(signo: int) -> str:
    return signal.Signals(signo).name


class SignalGuard:
    """While entered, SIGINT, SIGTERM and SIGHUP are only recorded in ``received`` (in the
    order they came), never raised: an exception raised asynchronously between a core call and
    the bookkeeping of what it made would lose track of changes made. :func:`apply` and
    :func:`converge` look at ``received`` between changes; the rollback ignores it, so later
    signals cannot cut it short. Installed only in the main thread (the only one Python
    delivers signals to) and not over a signal that is ignored (``nohup``, a background job of
    a non-interactive shell: it stays ignored); the previous handlers are back on exit."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, object] = {}

    @property
    def signo(self) -> int | None:
        """The first signal received, the one the command answers to."""
        return self.received[0] if self.received else None

    def _record(self, signo: int, _frame: object) -> None:
        self.received.append(signo)  # nothing else (see the class docstring)

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signo in SIGNALS:
                previous = signal.getsignal(signo)
                # SIG_IGN stays; None: a handler set outside Python, which could not be put back
                if previous is not signal.SIG_IGN and previous is not None:
                    self._previous[signo] = previous
                    signal.signal(signo, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._previous:
            return
        # blocked while the handlers go back: one arriving in between stays pending for the
        # handler put back, where CPython would drop it ("ignored due to race condition")
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            while self._previous:
                signo, previous = self._previous.popitem()
                signal.signal(signo, previous)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@dataclass
class Result:
    """What a run changed; ``done`` lists the actions made, in order."""

    root: str
    done: list[Action] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # teardown: what it left, and why
    left: int = 0  # converge: the changes a signal left for the next run (still recorded)
    # teardown: cgroups below those cgalloc made that something else (the kubelet's
    # libcontainer, in hierarchies cgalloc does not manage) made, left to their owner
    others: list[str] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return len(self.done)

    def summary(self) -> str:
        if not self.done:
            return "no changes: 0 writes"
        return f"applied {len(self.done)} changes"

    def to_json(self) -> dict:
        """The result as the report has it."""
        done = [a.to_json(self.root) for a in self.done]
        out = {"writes": self.writes, "done": done, "kept": list(self.kept)}
        if self.others:
            out["othersLeft"] = list(self.others)
        return out


class Roots:
    """One core root per hierarchy mount, opened on first use."""

    def __init__(self, opener: Callable[[str], object]):
        self._opener = opener
        self._roots: dict[str, object] = {}

    def __getitem__(self, mount: str):
        if mount not in self._roots:
            self._roots[mount] = self._opener(mount)
        return self._roots[mount]


def _write(roots: Roots, mount: str, rel: str, value: str, kernel: KernelHooks | None) -> None:
    if kernel is not None:
        value = kernel.on_write(mount, rel, value)
    roots[mount].write(rel, value)
    if kernel is not None:
        kernel.after_write(mount, rel)  # effects of a write that succeeded


def _perform(
    roots: Roots, a: Action, kernel: KernelHooks | None, units: SystemdUnits | None = None
) -> bool:
    """Make ``a``; False when a planned mkdir found systemd had made the directory since."""
    if a.kind == "mkdir":
        if units is not None and units.create(a.mount, a.path):
            return True  # systemd made the directory of the slice unit
        if units is not None and os.path.isdir(os.path.join(a.mount, a.path)):
            # An existing unit's new properties made systemd realize its cgroup in this v1
            # controller after the plan was made: systemd's directory, not cgalloc's.
            return False
        roots[a.mount].mkdir(a.path)
        if kernel is not None:
            kernel.after_mkdir(a.mount, a.path)
    else:
        value = a.new
        if units is not None and a.kind == "write":
            units.before_write(a.path)
        _write(roots, a.mount, cgroup_file(a.path, a.file), value, kernel)
    return True


def _undo(roots: Roots, a: Action, kernel: KernelHooks | None, created: set, units=None) -> None:
    if a.kind == "mkdir":
        stopped = units is not None and units.remove(a.path)
        if stopped and not os.path.isdir(os.path.join(a.mount, a.path)):
            return  # systemd removed the unit's cgroup
        if kernel is not None:
            kernel.before_rmdir(a.mount, a.path)
        roots[a.mount].rmdir(a.path)
    elif a.kind == "enable":
        _write(roots, a.mount, cgroup_file(a.path, a.file), a.new.replace("+", "-"), kernel)
    elif a.kind == "move":
        rel = cgroup_file(a.old.strip("/"), "cgroup.procs")
        with contextlib.suppress(ProcessLookupError):
            _move(roots, a.mount, rel, a.new, kernel)
    elif (a.mount, a.path) not in created and a.old is not None:
        # An empty value cannot be written as zero bytes; a newline clears the same way.
        _write(roots, a.mount, cgroup_file(a.path, a.file), a.old or "\n", kernel)


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
    host: Host,
    units: SystemdUnits | None = None,
    on_done: Callable[[Action], None] | None = None,
    signals: SignalGuard | None = None,
) -> Result:
    """Make every action of ``plan``; on the first failure undo them all and raise.

    The caller holds ``state``'s lock and built ``plan`` under it. ``record`` is updated and
    saved on success. With ``units`` (systemd driver, systemd as PID 1) new slices are started
    as transient units and existing units get the limits as properties before the writes.

    A signal of :data:`SIGNALS` before the last change is made undoes them all like a failure
    and raises :class:`Interrupted`; one after it leaves the run to complete (the changes are
    recorded). ``signals`` is the caller's guard (setup keeps it over converge too, and acts on
    a late signal itself); without one, apply guards itself and re-raises a late signal to the
    previous handler once it is back, as if the signal had come just after apply returned.

    Changes that need no Python between them (no process move, systemd unit or test kernel)
    go to the core in calls of up to :data:`BATCH`, on this thread; a signal is acted on
    between two calls.
    """
    if signals is None:
        with SignalGuard() as own:
            result = apply(
                plan, state, record, roots=roots, host=host, units=units,
                on_done=on_done, signals=own,
            )  # fmt: skip
        if own.signo is not None:
            signal.raise_signal(own.signo)
        return result
    roots = roots or Roots(host.open_root)
    result = Result(plan.root)
    created: set[tuple[str, str]] = set()
    if not plan.actions:
        return result
    # the cgroups these inputs manage: recorded first, so every entry below lies in them
    record.managed = record.managed.union(plan.managed)
    try:
        state.journal([_change(a) for a in plan.actions if a.kind != "move"], plan.managed)
    except OSError as exc:
        with contextlib.suppress(OSError):
            state.discard_journal()
        raise CgallocError(
            f"cannot record the planned changes in the state directory {state.path} "
            f"(--state-dir): {_reason(exc)}; nothing was changed."
        ) from exc

    def made(actions: list[Action]) -> None:
        nonlocal on_done
        created.update([(a.mount, a.path) for a in actions if a.kind == "mkdir"])
        result.done.extend(actions)
        for a in actions if on_done is not None else ():  # progress for the command line
            try:
                on_done(a)
            except OSError:  # stderr gone (a hung-up terminal: EIO): no more progress lines
                on_done = None
                break

    batched = host.kernel is None and units is None
    stopped = _make(plan, roots, host, units, signals, made, batched)
    if stopped is not None:
        if stopped.exc is None:
            _interrupt(state, record, result, created, roots, host, units, signals.signo)
        _fail(state, record, result, created, roots, host, units, stopped.exc, stopped.what)
    # Every change is made: a signal from here on does not undo a complete setup; the record
    # is saved and the caller answers the signal (see the docstring).
    try:
        state.save(_fold(record, result.done))
    except OSError as exc:
        what = f"recording the {len(result.done)} changes in {state.path} (--state-dir)"
        _fail(state, record, result, created, roots, host, units, exc, what)
    return result


BATCH = 256  # changes per core call when progress (on_done) is reported after each


class _Stopped(NamedTuple):
    """Why the changes stopped short: ``exc`` and ``what`` failed, or a signal (exc None)."""

    exc: BaseException | None
    what: str = ""


def _make(
    plan: Plan,
    roots: Roots,
    host: Host,
    units: SystemdUnits | None,
    signals: SignalGuard,
    made: Callable[[list[Action]], None],
    batched: bool,
) -> _Stopped | None:
    """Make ``plan``'s changes in order — ``batched``: those that are not process moves in
    core calls of up to :data:`BATCH`; else each alone, with its hooks — handing each run made
    to ``made``; stop at the first failure or signal and say which (None: all were made)."""
    for run in _runs(plan.actions, batched):
        # Between core calls: every change made so far is in result.done.
        if signals.signo is not None:
            return _Stopped(None)
        if batched and run[0].kind != "move":
            n, exc = _run_job(_pack(roots, run))
            made(run[:n])
            if exc is not None:
                return _Stopped(exc, run[n].describe(plan.root))
            continue
        a = run[0]
        try:
            if a.kind == "move":
                _move(roots, a.mount, cgroup_file(a.path, a.file), a.new, host.kernel)
            elif not _perform(roots, a, host.kernel, units):
                continue
        except ProcessLookupError:
            continue
        # ValueError: a path no call takes; HostError: its mount's root cannot be opened
        except (OSError, SystemdError, ValueError, HostError) as exc:
            return _Stopped(exc, a.describe(plan.root))
        made(run)
    return None


def _runs(actions: list[Action], batched: bool) -> Iterator[list[Action]]:
    """``actions`` in order as runs of at most :data:`BATCH` changes that are not process moves
    (``batched``), every other action alone."""
    run: list[Action] = []
    for a in actions:
        if batched and a.kind != "move":
            run.append(a)
            if len(run) == BATCH:
                yield run
                run = []
            continue
        if run:
            yield run
            run = []
        yield [a]
    if run:
        yield run


class _Job(NamedTuple):
    """A run of changes packed for one core call: the ops up to the first whose mount's root
    cannot be opened, and that error (None: every op is there)."""

    packed: core.Packed
    exc: BaseException | None


def _pack(roots: Roots, chunk: list[Action]) -> _Job:
    """``chunk`` (no moves) as :class:`_Job`: each change as ``core.apply_ops`` takes it."""
    ops: list[tuple[object, str, str | None]] = []
    exc: BaseException | None = None
    for a in chunk:
        try:
            root = roots[a.mount]
        except (OSError, HostError) as err:  # open_root's refusal of the mount is a HostError
            exc = err
            break
        if a.kind == "mkdir":
            ops.append((root, a.path, None))
        else:
            ops.append((root, cgroup_file(a.path, a.file), a.new))
    return _Job(core.pack_ops(ops), exc)


def _run_job(job: _Job) -> tuple[int, BaseException | None]:
    """Make ``job``'s changes through ``core.apply_ops`` until one fails:
    how many were made and the error. A mount whose root cannot be opened fails at its first
    change."""
    made, err = core.apply_ops(job.packed)
    return made, err if made < len(job.packed) else job.exc


def _change(a: Action) -> tuple:
    """``a`` as the journal and the record take a change: (kind, mount, path, file, old,
    controllers)."""
    controllers = a.new.replace("+", "").split() if a.kind == "enable" else ()
    return a.kind, a.mount, a.path, a.file, a.old, controllers


def _fail(state, record, result, created, roots, host, units, exc, what: str) -> NoReturn:
    """Undo what the run did after ``what`` failed with ``exc``, and raise saying so."""
    failed = f"{what} failed: {_reason(exc)}"
    _abort(state, record, result, created, roots, host, units, failed, CgallocError, exc)


def _interrupt(state, record, result, created, roots, host, units, signo: int) -> NoReturn:
    """Undo what the run did, as :func:`_fail` does, because signal ``signo`` came; raise
    :class:`Interrupted` (exit 128 + signo). The guard is still in place: a signal during the
    rollback is recorded and ignored."""
    why = f"setup interrupted by {signal_name(signo)}"
    error = functools.partial(Interrupted, signo)
    _abort(state, record, result, created, roots, host, units, why, error, None)


def _abort(state, record, result, created, roots, host, units, why, error, exc) -> NoReturn:
    """Undo ``result.done`` in reverse; then discard the journal and raise ``error`` saying
    the node is as it was, or (some undo failed) save what is still changed and say what."""
    done = result.done
    problems = _rollback(roots, done, host.kernel, created, result.root, units)
    if problems:
        try:
            state.save(_fold(record, done))
            kept = "the record of what cgalloc changed keeps these for teardown."
        except OSError:
            kept = f"the journal in {state.path} keeps these for teardown."
        raise error(
            "\n".join([why, "rollback was incomplete; still changed:", *problems, kept])
        ) from exc
    with contextlib.suppress(OSError):
        state.discard_journal()
    raise error(
        f"{why}; all {len(done)} earlier changes were undone, the node is as it was."
    ) from exc


def _fold(record: Record, done: list[Action]) -> Record:
    note = record.note_change
    for a in done:
        if a.kind != "move":
            note(*_change(a))
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

KUBEPODS_SLICE = KUBEPODS + SLICE_SUFFIX


def _has_procs(mount: str, path: str) -> bool:
    return bool((read_file(mount, path, "cgroup.procs") or "").strip())


def _bad_file(f: str) -> bool:
    """A recorded file name setup never writes: empty, a path, hidden, or unsafe."""
    return not f or "/" in f or f.startswith(".") or _unsafe(f)


def _unsafe(name: str) -> bool:
    # a NUL cannot reach a syscall (ValueError) and setup never writes a newline in a name
    return "\x00" in name or "\n" in name


def _mount_outside(root: str, mount: str) -> bool:
    """Whether a record's mount is not one setup records below ``root`` (normalised): the
    root itself (v2) or a directory in it (v1)."""
    if not os.path.isabs(mount) or os.path.normpath(mount) != mount or _unsafe(mount):
        return True
    return mount != root and os.path.dirname(mount) != root


def _outside(mount: str, path: str, what: str, live: LiveTree) -> bool:
    """Whether a record entry of a mount that passed :func:`_mount_outside` points outside
    it: setup only ever records a normalised relative cgroup path below that mount (the root
    cgroup itself only for the controllers it enabled)."""
    if not path:
        return what != "enabled"
    parts = path.split("/")
    if "" in parts or "." in parts or ".." in parts or _unsafe(path):
        return True
    if live.symlink_in(mount, parts) is None:
        return False  # no symlink below the mount: the path stays below it
    real_mount = os.path.realpath(mount)
    real = os.path.realpath(os.path.join(mount, path))
    return not real.startswith(real_mount + "/")  # through a symlink


def _shown(paths: Collection[str]) -> str:
    return ", ".join(f"/{p}" for p in sorted(paths)) or "none"


def check_managed(root: str, record: Record, units: UnitRecord | None = None) -> None:
    """Refuse a record with entries outside the tree below ``root``, or outside the cgroups
    the record says its inputs manage (``Record.managed``: kubepods whole, the reserved
    cgroups alone); with ``units``, also the systemd record's units outside those (a tampered
    or foreign record). Raised before anything is changed, naming every such entry."""
    # a record lists thousands of cgroups under a few shared parents: each listed once, and
    # each cgroup judged once, though it has several entries (created, written, changed)
    live = LiveTree()
    root = os.path.normpath(root)
    mounts: dict[str, bool] = {}
    judged: dict[tuple[str, str, bool], bool] = {}
    outside_entries = []
    for what, mount, path in record.entries():
        key = (mount, path, what == "enabled")  # what matters only for the root cgroup
        outside = judged.get(key)
        if outside is None:
            bad_mount = mounts.get(mount)
            if bad_mount is None:
                bad_mount = mounts[mount] = _mount_outside(root, mount)
            outside = bad_mount or _outside(mount, path, what, live)
            judged[key] = outside
        if outside or not record.managed.covers(what, path):
            outside_entries.append((what, mount, path))
    bad = []
    for what, mount, path in sorted(outside_entries):  # only these need an order
        where = os.path.join(mount, path)
        bad.append(f"  {what} {where!r}" if _unsafe(where) else f"  {what} {where}")
    bad += [
        f"  {kind} file {f!r} of {os.path.join(m, p)}"
        for kind, files in (("changed", record.changed), ("written", record.written))
        for m, p, f in sorted(k for k in files if _bad_file(k[2]))
    ]
    if units is not None:
        bad += units.foreign(record.managed)
    if bad:
        raise InputError(
            "\n".join(
                [
                    f"--state-dir: the record names cgroups outside the tree setup manages below "
                    f"--cgroupfs {root} (kubepods {_shown(record.managed.kubepods)}, reserved "
                    f"{_shown(record.managed.reserved)}); cgalloc acts only inside it; this run "
                    "changed nothing. Check --cgroupfs, or remove these entries from the record:",
                    *bad,
                ]
            )
        )


class Step(NamedTuple):
    """One thing teardown does with a record entry: ``action`` made, or kept because ``why``."""

    action: Action
    why: str = ""  # the reason it is kept; "" when the action is made


def restore_steps(root: str, record: Record) -> list[Step]:
    """The values teardown writes back: each recorded original whose file still exists and
    does not hold it (a file gone with its cgroup or controller has nothing to restore)."""
    steps = []
    for (mount, path, file), original in sorted(record.changed.items()):
        if not os.path.isdir(os.path.join(mount, path)):
            continue
        current = read_file(mount, path, file)
        if current is not None and current != original:
            steps.append(Step(Action("restore", mount, path, file, current, original, path)))
    # v1's memory+swap limit goes before or after its cgroup's memory limit (memsw_rank)
    return sorted(steps, key=lambda s: (s.action.mount, s.action.path, memsw_rank(s.action)))


KEPT_PROCS = "it still has processes"
KEPT_CHILD = "a cgroup below it is kept"  # its rmdir would fail (EBUSY)


def _kept_below(mount: str, path: str, kept: set[tuple[str, str]]) -> bool:
    return any(m == mount and p.startswith(path + "/") for m, p in kept)


def removal_steps(root: str, record: Record) -> list[Step]:
    """The cgroups teardown removes (deepest first, each existing one without processes or a
    kept cgroup below it) and the controllers it disables in cgroups it did not create."""
    steps = []
    kept: set[tuple[str, str]] = set()
    for mount, path in _deepest_first(record.created):
        if not os.path.isdir(os.path.join(mount, path)):
            continue
        action = Action("rmdir", mount, path, cgroup=path)
        why = KEPT_CHILD if _kept_below(mount, path, kept) else ""
        why = why or (KEPT_PROCS if _has_procs(mount, path) else "")
        if why:
            kept.add((mount, path))
        steps.append(Step(action, why))
    for mount, path in _deepest_first(record.enabled):
        if (mount, path) in record.created or not os.path.isdir(os.path.join(mount, path)):
            continue  # a created cgroup kept is kept with its controllers
        value = " ".join("-" + c for c in sorted(record.enabled[(mount, path)]))
        disable = Action("enable", mount, path, "cgroup.subtree_control", None, value, path)
        steps.append(Step(disable))
    return steps


def _deepest_first(created) -> list[tuple[str, str]]:
    """The order teardown removes cgroups in: children before their parents."""
    return sorted(created, key=lambda mp: (-cgroup_depth(mp[1]), mp))


def preview_teardown(root: str, record: Record) -> tuple[list[str], int]:
    """What ``teardown`` would do with ``record``, one line each, reading only: the same
    refusal of a tampered record and the same rules (:func:`restore_steps`,
    :func:`removal_steps`). Also returns how many of the lines are kept (no change)."""
    check_managed(root, record)
    steps = restore_steps(root, record) + removal_steps(root, record)
    lines = [_step_line(s, root) for s in steps]
    return lines, sum(bool(s.why) for s in steps)


def _step_line(step: Step, root: str) -> str:
    """A step as teardown reports it once made, or why it is kept."""
    if step.why:
        return f"keep {step.action.where(root)}: {step.why}"
    return step.action.describe(root)


def _restore_values(
    root: str, record: Record, roots: Roots, host, result: Result, signals: SignalGuard
) -> dict[tuple[str, str, str], str]:
    """Write back every original value :func:`restore_steps` names; what fails stays, in
    ``kept`` (returned too: message per file). Entries of cgroups gone are forgotten."""
    for key in [k for k in record.changed if not os.path.isdir(os.path.join(*k[:2]))]:
        del record.changed[key]
    failed = {}
    done: set[tuple[str, str, str]] = set()
    steps = restore_steps(root, record)
    for step in steps:
        if signals.signo is not None:
            break
        a = step.action
        key = (a.mount, a.path, a.file)
        try:
            # an empty value cannot be written as zero bytes; a newline clears the same way
            _write(roots, a.mount, cgroup_file(a.path, a.file), a.new or "\n", host.kernel)
        except OSError as exc:
            if _inherit_cpuset(roots, a, exc, host.kernel):
                result.done.append(a._replace(new=f"(its parent's: {_parent_effective(a)})"))
                done.add(key)
                continue
            original = record.changed[key]
            failed[key] = f"{a.where(root)}: restoring {original!r} failed: {_reason(exc)}"
            result.kept.append(failed[key])
            continue
        result.done.append(a)
        done.add(key)
    # what holds its original already needs nothing more; what a signal left stays recorded
    wanted = {(s.action.mount, s.action.path, s.action.file) for s in steps}
    for key in list(record.changed):
        if key in done or key not in wanted:
            del record.changed[key]
    return failed


def _parent_effective(a: Action) -> str | None:
    """The parent's effective CPUs or memory nodes of ``a``'s cpuset file."""
    parent = os.path.dirname(a.path)
    return read_file(a.mount, parent, a.file.replace(".cpus", ".cpus.effective").replace(
        ".mems", ".mems.effective"))


def _inherit_cpuset(roots: Roots, a: Action, exc: OSError, kernel) -> bool:
    """An empty cpuset.cpus/mems the kernel refuses to put back (ENOSPC: a populated cpuset
    cannot go empty, kernel/cgroup/cpuset.c validate_change): write the parent's effective set
    instead, which is what empty meant, and say so. False where that is not the case."""
    if a.new or a.file not in ("cpuset.cpus", "cpuset.mems") or exc.errno != errno.ENOSPC:
        return False
    inherited = _parent_effective(a)
    if not inherited:
        return False
    try:
        _write(roots, a.mount, cgroup_file(a.path, a.file), inherited, kernel)
    except OSError:
        return False
    return True


def others_left(root: str, created: set[tuple[str, str]], host: Host) -> list[str]:
    """Every cgroup at or below the kubepods cgalloc made (in ``created``, what the record
    held) that is still there, in any hierarchy mounted below ``root``: the kubelet's
    libcontainer makes the pods' cgroups in controllers cgalloc does not manage too, and they
    are the kubelet's to remove. Relative to root. (Only kubepods: a reserved cgroup such as
    system.slice is systemd's in the hierarchies cgalloc leaves alone.)"""
    from cgalloc.host.cgroupfs import detect

    try:
        h = detect(root, host.mountinfo)
    except HostError:
        return []
    mounts = sorted({*h.v1_mounts.values(), *([h.unified] if h.unified else [])})
    paths = {p for _m, p in created if p}
    tops = sorted(
        p for p in paths
        if os.path.dirname(p) not in paths and os.path.basename(p) in (KUBEPODS, KUBEPODS_SLICE)
    )
    out = []
    for mount in mounts:
        for top in tops:
            start = os.path.join(mount, top)
            if not os.path.isdir(start) or os.path.islink(start):
                continue
            for dirpath, dirs, _files in os.walk(start):
                dirs.sort()
                dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(dirpath, d))]
                out.append(os.path.relpath(dirpath, root))
    return out


def _forget_vanished(record: Record, failed: dict, result: Result) -> None:
    """A value that could not be restored whose file is gone since teardown disabled its
    controller: the cgroup is as it was. (A populated cpuset refuses an empty cpuset.cpus with
    ENOSPC, kernel 6.1 validate_change, though empty is what it had before setup.)"""
    for (mount, path, file), message in failed.items():
        if not os.path.exists(os.path.join(mount, path, file)):
            record.changed.pop((mount, path, file), None)
            result.kept.remove(message)


def _remove_created(
    root: str, record: Record, roots: Roots, host, result: Result, signals: SignalGuard
) -> None:
    """Make :func:`removal_steps`: remove the cgroups cgalloc created and disable the
    controllers it enabled; what cannot be undone stays in the record, listed in ``kept``.
    The rules are evaluated as the changes are made: a cgroup's rmdir is tried, and only a
    refusal (EBUSY) reads whether it has processes."""
    kept: set[tuple[str, str]] = set()
    gone: set[tuple[str, str]] = set()
    for mount, path in _deepest_first(record.created):
        if signals.signo is not None:
            break
        a = Action("rmdir", mount, path, cgroup=path)
        if _kept_below(mount, path, kept):
            kept.add((mount, path))
            result.kept.append(f"{a.where(root)}: kept, {KEPT_CHILD}")
            continue
        try:
            if host.kernel is not None:
                host.kernel.before_rmdir(mount, path)
            roots[mount].rmdir(path)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                gone.add((mount, path))  # removed already: nothing to do
                continue
            kept.add((mount, path))
            busy = exc.errno == errno.EBUSY and _has_procs(mount, path)
            why = KEPT_PROCS if busy else f"rmdir failed: {_reason(exc)}"
            result.kept.append(f"{a.where(root)}: kept, {why}")
            continue
        gone.add((mount, path))
        result.done.append(a)
    for mount, path in _deepest_first(record.enabled):
        if (mount, path) in record.created:
            if (mount, path) in gone:
                del record.enabled[(mount, path)]
            continue  # kept with its cgroup
        if signals.signo is not None:
            break
        value = " ".join("-" + c for c in sorted(record.enabled[(mount, path)]))
        a = Action("enable", mount, path, "cgroup.subtree_control", None, value, path)
        try:
            _write(roots, mount, cgroup_file(path, a.file), value, host.kernel)
        except OSError as exc:
            if exc.errno == errno.ENOENT:  # the cgroup is gone, and its controllers with it
                del record.enabled[(mount, path)]
                continue
            result.kept.append(f"{a.where(root)}: {value} failed: {_reason(exc)}")
            continue
        del record.enabled[(mount, path)]
        result.done.append(a)
    record.created -= gone
    record.written = {k for k in record.written if k[:2] not in gone}


def plan_undo(plan: Plan, record: Record, units: UnitRecord | None = None):
    """Fill ``plan.undo`` with what ``record`` (and the systemd ``units`` record, under D-Bus)
    holds that ``plan``'s inputs no longer want; returns the stale parts (Record, UnitRecord
    or None) for :func:`converge`. ``record`` has passed :func:`check_managed`: this reads
    the files its stale entries name."""
    stale = record.stale(plan.wanted_dirs, plan.wanted_files, plan.seeded)
    stale_u = None
    if units is not None:
        files: dict[str, dict[str, str]] = {}
        for (_m, path, file), value in plan.wanted_files.items():
            files.setdefault(path, {})[file] = value
        dirs = {path for _m, path in plan.wanted_dirs}
        stale_u = stale_units(units, dirs, files, plan.version == "v2")
    plan.undo = undo_actions(stale, plan.version, plan.root, stale_u)
    return stale, stale_u


def peek_record(state: StateDir, root: str) -> Record:
    """The record as :meth:`StateDir.peek` reads it (verify, a dry run), refused like the real
    run refuses it when it names anything outside the tree below ``root``."""
    record = state.peek()
    check_managed(root, record)
    return record


def peek_units(state: StateDir, root: str, record: Record) -> UnitRecord:
    """The systemd record, read only (after ``state.peek()``): empty when it is of an earlier
    boot; a HostError naming it when this user may not read it, as for the record; refused
    like the record when it names units outside what ``record`` manages."""
    units = UnitRecord.load(state)
    check_managed(root, record, units)
    return units


def _populated(mount: str, path: str) -> bool:
    """Whether a process lives in the cgroup or below it (stopping its unit would kill it)."""
    events = read_file(mount, path, "cgroup.events") or ""
    if "populated 1" in events.splitlines():
        return True
    return any(
        _has_procs(mount, os.path.relpath(d, mount))
        for d, _s, _f in os.walk(os.path.join(mount, path))
    )


def converge(
    plan: Plan,
    state: StateDir,
    record: Record,
    stale: Record,
    *,
    roots: Roots | None = None,
    host: Host,
    systemd: Systemd | None = None,
    units: UnitRecord | None = None,
    stale_u: UnitRecord | None = None,
    signals: SignalGuard | None = None,
) -> Result:
    """After a successful apply, make ``plan.undo`` (:func:`plan_undo`): undo what cgalloc did
    that the inputs no longer want (restore values, reset the files of its own cgroups,
    restore unit properties, stop the units it started, remove the cgroups it made). What
    cannot be undone yet (a cgroup with processes, a failed write) stays in the records and is
    listed in ``Result.kept``; ``stale`` is left holding what was undone. Once ``signals``
    has received a signal, the changes not yet made stay in the records too (counted in
    ``Result.left``): each undo stands alone, so stopping between two leaves a recorded tree
    a later run finishes."""
    root = plan.root
    check_managed(root, stale, stale_u)
    roots = roots or Roots(host.open_root)
    result = Result(root)
    kept = Record()
    v2 = plan.version == "v2"
    from cgalloc.host.dbus import Systemd  # jeepney, only where systemd is called

    client = systemd or Systemd()  # connects on its first call only
    for i, a in enumerate(plan.undo):
        if signals is not None and signals.signo is not None:
            for rest in plan.undo[i:]:
                _keep_undo(kept, stale, rest)
            result.left = len(plan.undo) - i
            break
        try:
            if a.kind == "restore":
                _write(roots, a.mount, cgroup_file(a.path, a.file), a.new or "\n", host.kernel)
                name, props = reset_properties(a.path, a.file, a.new, v2)
                own = (a.mount, a.path, a.file) in stale.written
                if own and units is not None and name in units.started and props:
                    client.set_properties(name, props)
            elif a.kind == "unit":
                _restore_unit(client, a.note, units, stale_u, state)
            elif (a.kind == "stop" and _populated(a.mount, a.path)) or (
                a.kind == "rmdir" and _has_procs(a.mount, a.path)
            ):
                result.kept.append(f"{a.where(root)}: kept, it still has processes")
                _keep_cgroup(kept, stale, a.path)
                continue
            elif a.kind == "stop":
                client.stop_unit(a.note)
                units.started.remove(a.note)
                units.save(state)
            else:
                if host.kernel is not None:
                    host.kernel.before_rmdir(a.mount, a.path)
                roots[a.mount].rmdir(a.path)
        except (OSError, SystemdError) as exc:
            result.kept.append(f"{a.describe(root)}: failed: {_reason(exc)}")
            _keep_undo(kept, stale, a)
            continue
        result.done.append(a)
    stale.forget(kept)
    record.forget(stale)
    if not stale.is_empty():
        state.save(record)
    return result


def _keep_undo(kept: Record, stale: Record, a: Action) -> None:
    """Keep what undo action ``a`` (not made) is about in the record for a later run. A unit's
    properties stay recorded until :func:`_restore_unit` puts them back."""
    if a.kind == "restore":
        key = (a.mount, a.path, a.file)
        if key in stale.changed:
            kept.changed[key] = stale.changed[key]
        kept.written.update({key} & stale.written)
    elif a.kind in ("stop", "rmdir"):
        _keep_cgroup(kept, stale, a.path)


def _keep_cgroup(kept: Record, stale: Record, path: str) -> None:
    """Keep a no longer wanted cgroup's entries (every mount) in the record for a later run."""
    kept.created |= {k for k in stale.created if k[1] == path}
    kept.enabled |= {k: set(v) for k, v in stale.enabled.items() if k[1] == path}
    kept.written |= {k for k in stale.written if k[1] == path}


def _restore_unit(client: Systemd, name: str, units, stale_u, state: StateDir) -> None:
    """Put back the properties of ``name`` that cgalloc set and no longer wants."""
    props = stale_u.changed[name]
    if client.unit_path(name) is not None:
        client.set_properties(name, wire_props(props))
    left = {p: v for p, v in units.changed.get(name, {}).items() if p not in props}
    if left:
        units.changed[name] = left
    else:
        units.changed.pop(name, None)
    units.save(state)


def teardown(
    root: str,
    state: StateDir,
    record: Record,
    *,
    roots: Roots | None = None,
    host: Host,
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
    units = UnitRecord.load(state)
    check_managed(root, record, units)
    roots = roots or Roots(host.open_root)
    result = Result(root)
    created = set(record.created)
    # SIGINT/SIGTERM/SIGHUP stop the undoing between two changes; what is left stays recorded
    with SignalGuard() as signals:
        failed = _restore_values(root, record, roots, host, result, signals)
        if not units.is_empty() and signals.signo is None:
            from cgalloc.host.dbus import Systemd  # jeepney, only where systemd is called

            result.kept += undo_units(systemd or Systemd(), units, state)
        _remove_created(root, record, roots, host, result, signals)
        _forget_vanished(record, failed, result)
        state.save(record)
    kept = {os.path.relpath(os.path.join(m, p), root) for m, p in record.created}
    result.others = [p for p in others_left(root, created, host) if p not in kept]
    if signals.signo is not None:
        raise Interrupted(
            signals.signo,
            f"teardown interrupted by {signal_name(signals.signo)} after {result.writes} "
            "changes; the record keeps what is left: run teardown again to undo it.",
        )
    return result
