"""The memo of setup's last plan: what it wanted, and a digest of everything that decided it.

A re-run of setup with the same inputs plans the same tree: parsing every pod and computing its
cgroup values again costs several times reading the files that tell whether the live tree still
matches (issue 11; the README's host run gives both at 1000 pods). After a run that leaves the
tree as planned, setup keeps ``plan-memo.json`` in the state directory: the digest
of its inputs, the digest of the record it left, the boot id, the plan's warnings, and every
cgroup and file value the tree wants. A later run whose inputs, record and boot are the same
checks the live tree against that list — each cgroup there in every hierarchy with no symlink
on its path, each file holding its value as the plan compares it (:func:`plan.same_value`),
each controller enabled — and when all hold, ends as the full plan would: no changes, the
same warnings. Anything else (a file off its value, a missing cgroup, another record, a
journal left by a killed run, an unreadable memo) runs the full plan; the memo never changes
what setup decides, only how fast an unchanged node is confirmed.

The digest covers the loaded configuration (flags, config file, drop-ins, kubelet version),
this host's capacity and online CPUs, the cgroup hierarchy, the tree options, the bytes of
every ``--pods`` file, and the cgalloc installation itself (each module's size and mtime), so
an upgrade or an edited module plans afresh. Runs that act on live processes or on systemd
units (``--*-reserved-procs``, the D-Bus driver) and pods read from a directory keep no memo.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from enum import Enum
from os.path import basename

from cgalloc import core
from cgalloc.cgroupfs import Hierarchy, cgroup_file
from cgalloc.errors import CgallocError
from cgalloc.ownership import JOURNAL_NAME, RECORD_NAME, Record, StateDir
from cgalloc.plan import READ_SLOT, Plan, file_text, hierarchy_mounts, same_value

MEMO_NAME = "plan-memo.json"
MEMO_VERSION = 1
PACKAGE = os.path.dirname(os.path.abspath(__file__))


class _Unstable(Exception):
    """A value with no text that stays the same from one process to the next."""


def _canon(value: object) -> object:
    """``value`` as JSON-able data that is the same in every process for equal inputs: sets
    sorted (their order follows per-process string hashing), mappings as sorted pairs."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, Enum):
        return ["enum", type(value).__name__, _canon(value.value)]
    if isinstance(value, bytes):
        return ["bytes", hashlib.sha256(value).hexdigest()]
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return [type(value).__name__, [_canon(v) for v in value]]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return [type(value).__name__, [_canon(getattr(value, f.name)) for f in fields]]
    if isinstance(value, Mapping):
        return ["map", sorted(([_canon(k), _canon(v)] for k, v in value.items()), key=_text)]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted((_canon(v) for v in value), key=_text)]
    if isinstance(value, (list, tuple)):
        return ["list", [_canon(v) for v in value]]
    raise _Unstable(type(value).__name__)


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def code_stamp() -> list[list]:
    """Each file of the installed cgalloc package (name, size, mtime): a new version, a
    rebuilt core or an edited module changes it."""
    out = []
    for base, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(base, name)
            with contextlib.suppress(OSError):
                st = os.stat(path)
                out.append([os.path.relpath(path, PACKAGE), st.st_size, st.st_mtime_ns])
    return out


def inputs_digest(parts: object) -> str | None:
    """The digest of everything a plan is made from (``parts``, with the installation's
    :func:`code_stamp`); None when a part cannot be written the same way twice."""
    try:
        text = _text([MEMO_VERSION, code_stamp(), _canon(parts)])
    except _Unstable:
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def record_digest(state: StateDir) -> str:
    """The digest of the record file as it is now ("" when there is none); InputError when
    it cannot be read (StateDir.read_state_file)."""
    data = state.read_state_file(RECORD_NAME)
    return "" if data is None else hashlib.sha256(data).hexdigest()


def _plan_mounts(plan: Plan) -> dict[str, dict]:
    """Per mount what the memo check reads there, in the plan's order: each wanted file's path
    below the mount and value, the cgroups no wanted file is in (whose existence is read as
    a directory's), and the cgroups whose subtree_control must enable controllers."""
    mounts: dict[str, dict] = {}

    def of(mount: str) -> dict:
        entry = mounts.get(mount)
        if entry is None:
            entry = mounts[mount] = {"files": [], "values": [], "dirs": [], "enabled": []}
        return entry

    having: set[tuple[str, str]] = set()
    for (mount, path, file), value in plan.wanted_files.items():
        entry = of(mount)
        entry["files"].append(cgroup_file(path, file))
        entry["values"].append(value)
        having.add((mount, path))
    for mount, path in plan.wanted_dirs:
        entry = of(mount)
        if path and (mount, path) not in having:
            entry["dirs"].append(path)
    for (mount, path), names in plan.wanted_enabled.items():
        of(mount)["enabled"].append([path, sorted(names)])
    return mounts


def mounts_text(plan: Plan) -> str:
    """The memo's ``mounts`` as JSON: what :func:`save` writes of ``plan`` alone, so setup
    makes it while the core makes the changes."""
    return json.dumps(_plan_mounts(plan), separators=(",", ":"))


def save(state: StateDir, key: str, plan: Plan, record: Record, mounts: str | None = None) -> None:
    """Keep ``plan`` (whose tree setup has just made, with nothing it no longer wants left
    over) as the memo of inputs ``key``; ``record`` is the record the run left; ``mounts`` is
    :func:`mounts_text` of ``plan`` when made already. A memo that cannot be written is only a
    slower next run: any error leaves none behind."""
    if any(k not in plan.wanted_dirs for k in record.enabled):
        # controllers enabled in a cgroup setup did not make and no longer wants (never
        # stale): the full run checks where that entry points, the memo would not
        forget(state)
        return
    target = os.path.join(state.path, MEMO_NAME)
    tmp = target + ".tmp"
    try:
        memo = {
            "version": MEMO_VERSION, "key": key, "record": record_digest(state),
            "boot": state.boot, "root": plan.root, "hierarchy": plan.version,
            "warnings": list(plan.warnings),
        }  # fmt: skip
        head = json.dumps(memo, separators=(",", ":"))  # C encoder; "mounts" goes last
        data = f'{head[:-1]},"mounts":{mounts or mounts_text(plan)}}}'.encode()
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except (OSError, ValueError, CgallocError):
        forget(state)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def forget(state: StateDir) -> None:
    """Remove the memo (a run that changed the tree or its record without keeping one)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.unlink(os.path.join(state.path, MEMO_NAME))


def _load(state: StateDir) -> dict | None:
    try:
        data = state.read_state_file(MEMO_NAME)
        if data is None:
            return None
        memo = json.loads(data.decode("ascii"))  # json.dumps escapes every other character
    except (CgallocError, ValueError, RecursionError):
        return None
    if not isinstance(memo, dict) or memo.get("version") != MEMO_VERSION:
        return None
    shapes = {"key": str, "record": str, "boot": str, "root": str, "hierarchy": str,
              "warnings": list, "mounts": dict}  # fmt: skip
    if any(type(memo.get(k)) is not t for k, t in shapes.items()):
        return None
    return memo


def in_sync(state: StateDir, key: str | None, hierarchy: Hierarchy) -> Plan | None:
    """The plan of a re-run that needs no change — empty, with the memo's warnings — when the
    memo is of inputs ``key`` and of ``hierarchy``'s mounts, of the record and boot as they
    are now, and the live tree still holds everything it wants; None otherwise (the caller
    plans in full)."""
    if key is None:
        return None
    memo = _load(state)
    root = hierarchy.root
    if memo is None or memo["key"] != key or memo["boot"] != state.boot or memo["root"] != root:
        return None
    if set(memo["mounts"]) != set(hierarchy_mounts(hierarchy).values()):
        return None  # a plan has every mount the hierarchy's controllers are in: not its memo
    if os.path.lexists(os.path.join(state.path, JOURNAL_NAME)):
        return None  # a killed run's journal: the full run folds it into the record
    try:
        if memo["record"] != record_digest(state) or not _tree_holds(memo):
            return None
    except (OSError, ValueError, TypeError, AttributeError, KeyError, RecursionError,
            CgallocError):  # fmt: skip
        return None  # a memo of the wrong shape, a tree or record that cannot be read: in full
    warnings = memo["warnings"]
    if not all(type(w) is str for w in warnings):
        return None
    return Plan(root=memo["root"], version=memo["hierarchy"], warnings=list(warnings))


def _tree_holds(memo: dict) -> bool:
    """Whether every cgroup, file value and enabled controller the memo lists is live, each
    read as a write would reach it (no symlink on the way): one core call per mount."""
    for mount, entry in memo["mounts"].items():
        files, values, dirs = entry["files"], entry["values"], entry["dirs"]
        enabled = entry["enabled"]
        if len(files) != len(values):
            return False
        paths = files + [cgroup_file(path, "cgroup.subtree_control") for path, _n in enabled]
        if not _dirs_hold(mount, dirs):
            return False
        fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            got = core.read_files(fd, paths, READ_SLOT, no_symlinks=True)
        finally:
            os.close(fd)
        for path, value, data in zip(files, values, got, strict=False):
            text = file_text(data)
            # the text is the value, as a re-run mostly finds; else compare as the plan does
            if text != value and (text is None or not same_value(basename(path), text, value)):
                return False
        for (_path, names), data in zip(enabled, got[len(files) :], strict=False):
            text = file_text(data)
            if text is None or not set(names) <= set(text.split()):
                return False
    return True


def _dirs_hold(mount: str, dirs: list[str]) -> bool:
    """Whether each of ``dirs`` (cgroups below ``mount`` with no file the memo reads) is a
    directory in its parent's listing, not a symlink: one listing per parent (a QoS tier's
    pods share one). Its parent is itself in the memo, as a cgroup with a file read without
    following a symlink or as one of ``dirs``: so no component of any path is a symlink."""
    listed: dict[str, set[str]] = {}
    for path in dirs:
        parent, _, name = path.rpartition("/")
        names = listed.get(parent)
        if names is None:
            with os.scandir(f"{mount}/{parent}" if parent else mount) as it:
                names = listed[parent] = {e.name for e in it if e.is_dir(follow_symlinks=False)}
        if name not in names:
            return False  # a cgroup missing, or a symlink where it should be
    return True
