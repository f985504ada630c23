"""The plan: the desired node tree diffed against the live one, as an ordered list of actions.

Reading only — building a plan never writes, so ``setup --dry-run`` and ``verify`` work
unprivileged. The order is the safe order to apply in:

1. structure, parents first: enable controllers in ``cgroup.subtree_control`` (v2), ``mkdir``
   in every hierarchy the kubelet validates (v1), and give each new v1 cpuset cgroup its cpus
   and mems so processes can join it;
2. limits that grow, parents first (a child never needs more than its parent allows);
3. limits that shrink, children first; on v1 the memory+swap limit is raised before and lowered
   after the memory limit, as the kernel requires;
4. processes moved into the reserved cgroups.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from cgalloc.errors import CgallocError, HostError, InputError
from cgalloc.host import core, procs
from cgalloc.host.capacity import online_cpus
from cgalloc.host.core.records import READ_FLAGS
from cgalloc.inputs.pods import pod_cgroups
from cgalloc.model import cgroup_v2
from cgalloc.model.allocatable import check_enforceable, compute, cpu_sets
from cgalloc.model.cpuset import node_cpus, parse_cpuset
from cgalloc.model.hierarchy import (
    cgroup_file,
    controller_dirs,
    fresh_value,
    limit_files,
    parse_limit_value,
)
from cgalloc.model.kernel_ranges import name_refusal, value_refusal
from cgalloc.model.naming import (
    CGROUP_FIELDS,
    RESERVED_ROLES,
    expand_slice,
    naming_notes,
    overlapping_reserved,
    placement_problem,
)
from cgalloc.model.protection import DEFAULT_WEIGHT, WEIGHT_FILE, Protection, contention
from cgalloc.model.resources import CPU
from cgalloc.model.tree import desired_tree, protection_notes
from cgalloc.ops.state import Managed

# Controllers a node cannot be enforced without; others (cpuset, hugetlb) are skipped if absent.
ESSENTIAL = ("cpu", "memory", "pids")
PAGE_SIZE = 4096
USAGE_FILES = ("memory.current", "memory.usage_in_bytes")
MEMORY_LIMIT_FILES = ("memory.max", "memory.limit_in_bytes")
MEMSW_FILE = "memory.memsw.limit_in_bytes"
READ_CHUNK = 65536
READ_SLOT = 512  # read_many's bytes per file: a managed file's value is far shorter
GONE = (-errno.ENOENT, -errno.ENOTDIR)  # read_file's None
SEED_FILES = ("cpuset.mems", "cpuset.cpus")  # a new v1 cpuset cgroup's, mems first


class Action(NamedTuple):
    """One change. ``mount`` is a hierarchy mount point, ``path`` a cgroup below it ("" = root).

    A NamedTuple, not a frozen dataclass: a 1000-pod setup makes ~11,000 of them, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost ~15 ms of its plan."""

    kind: str  # "mkdir" | "enable" | "write" | "move"; undoing: "restore" | "rmdir" | "stop" |
    # "unit" (restore a unit's properties: ``file`` lists them)
    mount: str
    path: str
    file: str = ""
    old: str | None = None  # current value (None: cgroup or file does not exist yet);
    # for "move" the cgroup the process is in now ("/a/b")
    new: str = ""  # value to write; "+cpu +memory" for enable; the pid for move
    cgroup: str = ""  # the desired cgroup this belongs to (display, ordering)
    note: str = ""  # process name for a move; the systemd unit for "stop" and "unit"

    def where(self, root: str) -> str:
        """The file or directory, relative to the cgroupfs root."""
        rel = _below(root, self.mount, self.path)
        if self.kind in ("mkdir", "rmdir", "stop", "unit"):
            return rel or "."
        return os.path.join(rel, self.file) if rel else self.file

    def describe(self, root: str) -> str:
        where = self.where(root)
        if self.kind in ("mkdir", "rmdir"):
            return f"{self.kind} {where}"
        if self.kind == "enable":
            verb = "disable" if self.new.startswith("-") else "enable"
            return f"{verb} {self.new} in {where}"
        if self.kind == "move":
            return f"move pid {self.new} ({self.note}) from {self.old} to {where}"
        if self.kind == "stop":
            return f"stop {self.note} (cgroup {where})"
        if self.kind == "unit":
            return f"restore {self.file} of {self.note}"
        old = "(new)" if self.old is None else self.old or '""'
        verb = "restore" if self.kind == "restore" else "write"
        return f"{verb} {where}: {old} -> {self.new or chr(34) * 2}"

    def to_json(self, root: str) -> dict:
        out = {"action": self.kind, "path": self.where(root), "cgroup": self.cgroup}
        if self.kind in ("write", "enable", "move", "restore"):
            out["old"] = self.old
            out["new"] = self.new
        if self.kind in ("stop", "unit"):
            out["unit"] = self.note
            if self.kind == "unit":
                out["path"], out["properties"] = "", self.file.split(", ")
        elif self.note:
            out["process"] = self.note
        return out


def _below(root: str, mount: str, path: str) -> str:
    """``mount``/``path`` relative to ``root`` ("" for the root itself). The plain prefix cut
    is the common case (a plan's mounts are its root or directories in it), decided once per
    mount; relpath, ~10x the cost per action, only for anything else."""
    rest = _mount_below(root, mount)
    if rest is None:
        rel = os.path.relpath(os.path.join(mount, path), root)
        return "" if rel == "." else rel
    if not rest:
        return path
    return f"{rest}/{path}" if path else rest


@functools.lru_cache(maxsize=64)
def _mount_below(root: str, mount: str) -> str | None:
    """``mount`` relative to ``root`` when it is the root or a plain directory below it
    ("" for the root), else None."""
    if mount == root or mount == root.rstrip("/"):
        return ""
    if mount.startswith(root.rstrip("/") + "/") and "/." not in mount and "//" not in mount:
        return mount[len(root.rstrip("/")) + 1 :]
    return None


class EveryMount(Collection):
    """(mount, path) for every path in every mount, without a tuple made for each (a
    1000-pod node wants ~6,000 on v1)."""

    __slots__ = ("mounts", "paths")

    def __init__(self, paths: Collection[str], mounts: Iterable[str]) -> None:
        self.paths = paths
        self.mounts = frozenset(mounts)

    def __contains__(self, key: object) -> bool:
        return (
            isinstance(key, tuple) and len(key) == 2 and key[1] in self.paths
            and key[0] in self.mounts
        )  # fmt: skip

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return ((m, p) for p in self.paths for m in self.mounts)

    def __len__(self) -> int:
        return len(self.paths) * len(self.mounts)


@dataclass
class Plan:
    root: str  # the cgroupfs root the plan was made for
    version: str = "v2"  # that hierarchy's version: "v1", "v2" or "hybrid"
    actions: list[Action] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # memory limits below usage
    warnings: list[str] = field(default_factory=list)
    # what the desired tree holds: (mount, cgroup) with their ancestors, (mount, cgroup, file)
    # → value
    wanted_dirs: Collection[tuple[str, str]] = field(default_factory=set)
    wanted_files: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # the v1 cpuset.cpus/mems a new cgroup is given (_cpuset_seed): still wanted while the
    # cgroup is, though a re-run that finds the cgroup plans no value for them (for the files
    # cgalloc wrote in cgroups it made only: a value it changed elsewhere is wanted or not by
    # wanted_files alone)
    seeded: set[tuple[str, str, str]] = field(default_factory=set)
    # v2: (mount, cgroup) → the controllers its cgroup.subtree_control must enable
    wanted_enabled: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # what earlier runs did that these inputs no longer want, to undo after ``actions``
    # (:func:`undo_actions`)
    undo: list[Action] = field(default_factory=list)
    # the cgroups these inputs manage: what the record may name (state.Managed)
    managed: Managed = field(default_factory=Managed)

    def describe(self) -> list[str]:
        lines = [a.describe(self.root) for a in self.actions]
        return lines + [f"{a.describe(self.root)} (no longer wanted)" for a in self.undo]

    def to_json(self) -> dict:
        """The plan as reports have it."""
        return {
            "root": self.root,
            "actions": [a.to_json(self.root) for a in self.actions],
            "undo": [a.to_json(self.root) for a in self.undo],
            "refusals": list(self.refusals),
            "warnings": list(self.warnings),
        }


# ---------------------------------------------------------------- live tree access (read only)


def read_file(mount: str, path: str, file: str) -> str | None:
    """A cgroup file's content without the trailing newline; None if it does not exist.

    os.open/os.read, not open(): a setup re-run reads every file it manages, and the text
    layer's per-file setup costs about twice the syscalls themselves."""
    try:
        fd = os.open(f"{mount}/{cgroup_file(path, file)}", READ_FLAGS | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        data = os.read(fd, READ_CHUNK)
        if len(data) == READ_CHUNK:  # a short read is the end: cgroup files come whole
            chunks = [data]
            while chunk := os.read(fd, READ_CHUNK):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data.decode("utf-8").rstrip("\n")


def read_many(keys: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str, str], str | None]:
    """``read_file`` of many (mount, cgroup, file) at once: one core call per mount, on one
    thread per CPU, where a setup re-run read them one by one (its files are most of its
    syscalls). A file the call could not read (an error other than its absence, or bytes that
    are not UTF-8) is left out, for ``read_file`` to read, or raise, as it would."""
    out: dict[tuple[str, str, str], str | None] = {}
    by_mount: dict[str, list[tuple[str, str]]] = {}
    for mount, path, file in keys:
        by_mount.setdefault(mount, []).append((path, file))
    for mount, items in by_mount.items():
        try:
            fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            got = core.read_files(fd, [cgroup_file(p, f) for p, f in items], READ_SLOT)
        except ValueError:
            continue  # a path the core refuses: read_file reads it
        finally:
            os.close(fd)
        for (path, file), data in zip(items, got, strict=True):
            text = file_text(data)
            if text is not None:
                out[(mount, path, file)] = text
            elif data in GONE:
                out[(mount, path, file)] = None
    return out


def file_text(data: bytes | int) -> str | None:
    """A file's value as a plan compares it, from what ``core.read_files`` gave for it: the
    text without its trailing newline; None for an error or bytes that are not UTF-8."""
    if not isinstance(data, bytes):
        return None
    try:
        return data.decode("utf-8").rstrip("\n")
    except UnicodeDecodeError:
        return None


def is_cgroup(mount: str, path: str) -> bool:
    return os.path.isdir(os.path.join(mount, path))


UNLISTED: dict[str, tuple[bool, bool]] = {}  # a directory scandir may not list


class LiveTree:
    """The live tree's directories as one plan build sees them, each parent listed once.

    A build asks, for every desired cgroup and every mount, whether it exists and whether a
    component is a symlink: one ``scandir`` of each parent answers that for all its children
    (the pods of a QoS tier share one), where ``lstat``/``isdir`` per path made it several
    syscalls per pod and mount. Read-only and short-lived: nothing writes during a build.
    """

    def __init__(self) -> None:
        # (mount, parent) -> {child name: (is a symlink, is a directory following links)},
        # or None when the parent is missing
        self._lists: dict[tuple[str, str], dict[str, tuple[bool, bool]] | None] = {}
        self._entries: dict[tuple[str, str], tuple[bool, bool] | None] = {}
        self._links: dict[tuple[str, str], str | None] = {}  # symlink_in's answers

    def _children(self, mount: str, parent: str) -> dict[str, tuple[bool, bool]] | None:
        key = (mount, parent)
        if key not in self._lists:
            directory = f"{mount}/{parent}" if parent else mount
            try:
                with os.scandir(directory) as it:
                    self._lists[key] = {e.name: (e.is_symlink(), e.is_dir()) for e in it}
            except (FileNotFoundError, NotADirectoryError):
                self._lists[key] = None
            except OSError:  # searchable but not listable: ask per path, as before
                self._lists[key] = UNLISTED
        return self._lists[key]

    def _entry(self, mount: str, path: str) -> tuple[bool, bool] | None:
        # the parents of a record's thousands of cgroups are asked about once per cgroup
        key = (mount, path)
        if key in self._entries:
            return self._entries[key]
        entry = self._entries[key] = self._look_up(mount, path)
        return entry

    def _look_up(self, mount: str, path: str) -> tuple[bool, bool] | None:
        parent, _, name = path.rpartition("/")
        children = self._children(mount, parent)
        if children is UNLISTED:
            full = os.path.join(mount, path)
            try:
                return stat.S_ISLNK(os.lstat(full).st_mode), os.path.isdir(full)
            except OSError:
                return None
        return None if children is None else children.get(name)

    def is_cgroup(self, mount: str, path: str) -> bool:
        if not path:
            return os.path.isdir(mount)
        entry = self._entry(mount, path)
        return entry is not None and entry[1]

    def symlink_in(self, mount: str, parts: list[str]) -> str | None:
        """The first component of ``mount``/``parts`` that is a symlink, or None."""
        link = self._link(mount, "/".join(parts))
        return None if link is MISSING else link

    def _link(self, mount: str, path: str) -> str | None:
        # A path's answer is its parent's, or else its own entry's: thousands of pods share
        # a few parents, so each is looked at once (walking up to the nearest known parent,
        # not recursing: a record's path may be deep). MISSING: nothing below it exists.
        links = self._links
        pending = []
        while (mount, path) not in links:
            pending.append(path)
            path = path.rpartition("/")[0]
            if not path:
                break
        link = links.get((mount, path)) if path else None
        for p in reversed(pending):
            if link is None:
                entry = self._entry(mount, p)
                if entry is None:
                    link = MISSING
                elif entry[0]:
                    link = os.path.join(mount, p)
            links[(mount, p)] = link
        return link

    def links_below(self, mount: str, parent: str, names: Iterable[str]) -> list[tuple[str, str]]:
        """(name, the first symlink on its path) for each of ``names`` (children of ``parent``
        below ``mount``) whose path goes through one: :meth:`symlink_in` for a QoS tier's
        thousands of pods with one look at their parent."""
        link = self._link(mount, parent) if parent else None
        if link is MISSING:  # nothing below it exists
            return []
        if link is not None:
            return [(name, link) for name in names]
        children = self._children(mount, parent)
        if children is UNLISTED:
            found = ((n, self._link(mount, f"{parent}/{n}" if parent else n)) for n in names)
            return [(n, lk) for n, lk in found if lk is not None and lk is not MISSING]
        if children is None:
            return []
        under = f"{mount}/{parent}/" if parent else f"{mount}/"
        return [(n, under + n) for n in names if (e := children.get(n)) is not None and e[0]]

    def lacking_each(self, paths: Iterable[str], each_mount: Sequence[str]) -> dict[str, list[str]]:
        """:func:`lacking` for each of ``paths`` (none the root): the pods of a QoS tier share
        one listing of their parent per mount, looked up without a call per pod and mount."""
        by_parent: dict[str, list[str]] = {}
        for path in paths:
            by_parent.setdefault(path.rpartition("/")[0], []).append(path)
        out: dict[str, list[str]] = {}
        for parent, group in by_parent.items():
            lists = [(m, self._children(m, parent)) for m in each_mount]
            if any(children is UNLISTED for _m, children in lists):
                out.update((p, lacking(p, each_mount, self)) for p in group)
                continue
            for path in group:
                name = path.rpartition("/")[2]
                out[path] = [
                    m for m, children in lists
                    if children is None or (e := children.get(name)) is None or not e[1]
                ]  # fmt: skip
        return out


MISSING = "\x00missing"  # LiveTree._link: a path that does not exist (never a real path)


def lacking(path: str, each_mount: Sequence[str], live: LiveTree) -> list[str]:
    """The mount points of ``each_mount`` (each once: ``_distinct``) without a cgroup ``path``."""
    return [m for m in each_mount if not live.is_cgroup(m, path)]


def _missing_error(heading: str, missing: Iterable[str]) -> HostError:
    return HostError("\n".join([heading, *(f"  missing {m}" for m in missing)]))


def hierarchy_mounts(h) -> dict[str, str]:
    """Controller → the mount point holding it, for the controllers cgalloc manages.

    A hybrid host is enforced on its v1 controllers, as the kubelet does.
    """
    return controller_dirs(h, "")


def _distinct(values: Iterable[str]) -> list[str]:
    return sorted(set(values))


# ---------------------------------------------------------------- value comparison

INF = float("inf")


def _comparable(file: str, value: str):
    """A value in a form where the kernel's rounding and spellings compare equal and order:
    cpusets as sets, limits as numbers with "no limit" = infinity, memory in whole pages."""
    try:
        parsed = parse_limit_value(file, value)
        if file.startswith("cpuset."):
            return parse_cpuset(parsed)
    except ValueError:
        return value.strip()
    if isinstance(parsed, tuple):
        quota, period = parsed
        return (INF if quota < 0 else quota, period)
    # Ints, not floats: above 2**53 floats round distinct limits together, and a fuzzed
    # 1e400 capacity overflows float() (ints order against INF exactly).
    if parsed < 0:
        return INF
    if file.startswith("memory."):
        return parsed // PAGE_SIZE * PAGE_SIZE  # the kernel keeps whole pages
    return parsed


def _is_number(value) -> bool:
    """A comparable limit (int bytes/count, or INF for no limit), not an unparsed string."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_value(file: str, live: str | None, desired: str) -> bool:
    """True when the live content already is the desired value."""
    if live == desired:  # what a re-run mostly finds: no parsing needed to say so
        return True
    return live is not None and _comparable(file, live) == _comparable(file, desired)


def _shrinks(file: str, old: str | None, new: str) -> bool:
    """True when writing ``new`` over ``old`` tightens a limit (so children go first)."""
    if old is None:
        return True  # a new cgroup starts unlimited
    a, b = _comparable(file, old), _comparable(file, new)
    if isinstance(a, frozenset):
        return b < a
    if isinstance(a, tuple):
        a, b = a[0], b[0]
    if _is_number(a) and _is_number(b):
        return b < a
    return False


# ---------------------------------------------------------------- building the plan


_PLAIN = frozenset(("", ".", ".."))  # path components that name no cgroup of their own


def check_targets(desired: Sequence, mounts: dict[str, str], live: LiveTree) -> None:
    """Refuse cgroups cgalloc must not touch; one sentence per problem, naming the field."""
    problems: list[str] = []
    kubepods = next((d.path for d in desired if d.role == "kubepods"), None)
    named: set[str] = set()
    below: dict[str, dict[str, list[str]]] = {}  # parent -> {child name: its fields}
    each_mount = _distinct(mounts.values())
    longest = max(mounts.values(), key=len, default="")
    for d in desired:
        fld = CGROUP_FIELDS.get(d.role, d.role)
        parts = d.path.split("/")
        bad_name = name_refusal(fld, d.path, longest)
        if bad_name:
            if fld not in named:  # its descendants have the same problem: say it once
                problems.append(bad_name)
                named.add(fld)
            continue
        if not d.path.strip("/"):
            problems.append(f"{fld} must name a cgroup below the root, not the root cgroup itself.")
            continue
        if d.path.startswith("/") or not _PLAIN.isdisjoint(parts):
            problems.append(
                f"{fld} path {d.path!r} must stay inside the cgroupfs mount "
                "(no '..', '.' or empty components)."
            )
            continue
        placement = placement_problem(d.role, d.path, kubepods)
        if placement:
            problems.append(placement)
            continue
        parent, _, name = d.path.rpartition("/")
        below.setdefault(parent, {}).setdefault(name, []).append(fld)
    for parent, names in below.items():  # a QoS tier's pods: their parent looked at once
        for mount in each_mount:
            for name, link in live.links_below(mount, parent, names):
                path = f"{parent}/{name}" if parent else name
                problems += [
                    f"{f} /{path} goes through the symlink {link}; give the real cgroup path."
                    for f in names[name]
                ]
    problems += overlapping_reserved({d.role: d.path for d in desired if d.role in RESERVED_ROLES})
    if problems:
        raise InputError(_distinct(problems))


def _ancestors(path: str) -> list[str]:
    """ "a/b/c" → ["", "a", "a/b"]: the cgroups whose subtree_control must enable controllers."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts))]


def _grow_order(t: tuple[int, Action]) -> tuple[int, bool]:
    # parents first; memsw must stay >= memory: raise it first ...
    return t[0], t[1].file != MEMSW_FILE


def _shrink_order(t: tuple[int, Action]) -> tuple[int, bool]:
    # ... children first, and lower it last
    return -t[0], t[1].file == MEMSW_FILE


def build(
    hierarchy,
    desired: Sequence,
    limit_files=limit_files,
    *,
    weight_formula: str = "kubelet",
    create_reserved: bool = True,
    moves: Sequence[tuple[str, Sequence[str]]] = (),
    proc_root: str = procs.PROC,
    delegated: frozenset[str] = frozenset(),
) -> Plan:
    """Diff ``desired`` (parents first, tree.DesiredCgroup) against the live tree.

    ``limit_files(hierarchy, limits, weight_formula)`` maps a cgroup's limits to
    (controller, file, value) triples (hierarchy.limit_files). ``moves`` lists
    (role, process names) to move into the cgroup of that role. ``delegated`` controllers are
    enabled in cgroup.subtree_control by another manager (systemd, for the units' properties),
    so the plan neither enables nor requires them there.
    """
    root = hierarchy.root
    mounts = hierarchy_mounts(hierarchy)
    each_mount = _distinct(mounts.values())
    live = LiveTree()
    check_targets(desired, mounts, live)
    plan = Plan(root=root, version=hierarchy.version, managed=managed_cgroups(desired))
    v2 = hierarchy.version == "v2"
    missing_ctrl = [c for c in ESSENTIAL if c not in mounts]
    if missing_ctrl and desired:
        where = "the root's cgroup.controllers" if v2 else "the mounted v1 hierarchies"
        raise HostError(
            f"cgroup controller(s) {', '.join(missing_ctrl)} not available in {where} "
            f"under {root}; the node cannot be enforced."
        )
    _require_cgroup_root(desired, each_mount, live)

    structure: list[Action] = []
    writes: list[tuple[int, Action, bool]] = []  # (depth index, action, shrinking)
    created: set[tuple[str, str]] = set()
    subtree: dict[tuple[str, str], set[str]] = {}
    subtree_old: dict[tuple[str, str], str | None] = {}
    final: dict[tuple[str, str, str], str] = {}  # planned values, for cpuset inheritance
    enabling: dict[tuple[str, str], set[str]] = {}  # controllers this plan enables, per parent
    missing_reserved: list[str] = []
    out_of_range: list[str] = []

    per_cgroup = [
        [(c, f, v) for c, f, v in limit_files(hierarchy, d.limits, weight_formula) if c in mounts]
        for d in desired
    ]
    wanted = [
        (mounts[c], d.path, f) for d, fs in zip(desired, per_cgroup, strict=True) for c, f, _ in fs
    ]
    if v2:
        wanted += [(mounts["cpu"], a, "cgroup.subtree_control") for d in desired
                   for a in _ancestors(d.path)]  # fmt: skip
    absent_in = live.lacking_each((d.path for d in desired), each_mount)

    def exists(mount: str, path: str) -> bool:
        absent = absent_in.get(path)
        return live.is_cgroup(mount, path) if absent is None else mount not in absent

    current = read_many(k for k in dict.fromkeys(wanted) if exists(k[0], k[1]))

    def read(mount: str, path: str, file: str) -> str | None:
        key = (mount, path, file)
        return current[key] if key in current else read_file(mount, path, file)

    for index, (d, files) in enumerate(zip(desired, per_cgroup, strict=True)):
        out_of_range += filter(None, (value_refusal(d.role, d.path, f, v) for _c, f, v in files))
        for c, f, v in files:
            final[(mounts[c], d.path, f)] = v
        if d.role in RESERVED_ROLES and create_reserved:
            # mkdir -p, as libcontainer's cgroupfs manager: a reserved cgroup's missing parents
            # first (with systemd they start as the parent slices, e.g. kube.slice for the
            # kubelet's /kube.slice/kube-reserved.slice)
            for anc in _ancestors(d.path)[1:]:
                for mount in lacking(anc, each_mount, live):
                    if (mount, anc) not in created:
                        structure.append(Action("mkdir", mount, anc, cgroup=anc))
                        created.add((mount, anc))
                        if not v2 and mounts.get("cpuset") == mount:
                            structure.extend(_cpuset_seed(mount, anc, final))
        if v2:
            for anc in _ancestors(d.path):
                key = (mounts["cpu"], anc)
                if key not in subtree:
                    text = None if key in created else read(*key, "cgroup.subtree_control")
                    subtree[key] = set((text or "").split())
                    subtree_old[key] = text
                want = [c for c in mounts if c not in subtree[key] and c not in delegated]
                if want:
                    structure.append(
                        Action(
                            "enable",
                            key[0],
                            anc,
                            "cgroup.subtree_control",
                            old=subtree_old[key],
                            new=" ".join("+" + c for c in want),
                            cgroup=d.path,
                        )
                    )
                    subtree[key].update(want)
                    enabling.setdefault(key, set()).update(want)
        absent = absent_in[d.path]
        if d.role in RESERVED_ROLES and not create_reserved:
            missing_reserved += [f"{d.role} /{d.path}: {os.path.join(m, d.path)}" for m in absent]
            absent = []
        for mount in absent:
            structure.append(Action("mkdir", mount, d.path, "", None, "", d.path))
            created.add((mount, d.path))
            if not v2 and mounts.get("cpuset") == mount:
                structure.extend(_cpuset_seed(mount, d.path, final))
        for c, f, v in files:
            mount = mounts[c]
            new_dir = (mount, d.path) in created
            if new_dir and c == "cpuset" and not v2:
                continue  # already written by the seed, right after mkdir
            old = None if new_dir else read(mount, d.path, f)
            if old is None and not new_dir and v2:
                # an existing cgroup whose controller this plan enables: the file appears with
                # the kernel's default, which is what undo must restore
                parent = (mounts["cpu"], os.path.dirname(d.path))
                if c in enabling.get(parent, ()):
                    old = cgroup_v2.fresh_value(f)
            if same_value(f, old, v):
                continue
            shrinking = _shrinks(f, old, v)
            action = Action("write", mount, d.path, f, old, v, d.path)
            writes.append((index, action, shrinking))

    if out_of_range:
        raise InputError(_distinct(out_of_range))
    if missing_reserved:
        raise _missing_error(
            "reserved cgroups are missing and --no-create-reserved was given:", missing_reserved
        )

    grow = [(i, a) for i, a, s in writes if not s]
    shrink = [(i, a) for i, a, s in writes if s]
    grow.sort(key=_grow_order)
    shrink.sort(key=_shrink_order)
    plan.actions = structure + [a for _, a in grow] + [a for _, a in shrink]
    plan.wanted_files = dict(final)
    paths = {d.path for d in desired}
    for parent in {d.path.rpartition("/")[0] for d in desired}:  # a path's ancestors: its parent's
        paths.update(_ancestors(parent + "/"))
    plan.wanted_dirs = EveryMount(paths, each_mount)
    if not v2 and "cpuset" in mounts:
        plan.seeded = {(mounts["cpuset"], p, f) for p in paths for f in SEED_FILES}
    required = frozenset(c for c in mounts if c not in delegated)
    plan.wanted_enabled = dict.fromkeys(subtree, required)
    plan.refusals = _below_usage(plan.actions, root)
    plan.actions += _moves(desired, moves, mounts, v2, proc_root, plan.warnings)
    return plan


def managed_cgroups(desired: Sequence) -> Managed:
    """What the record may name for ``desired``: kubepods' tree whole (the QoS tiers and pods
    are in it; one outside any kubepods cgroup is a tree of its own), the reserved cgroups
    alone. The root cgroup is never a tree setup manages."""
    trees = {d.path for d in desired if d.role == "kubepods" and d.path}
    for d in desired:
        inside = any(d.path.startswith(t + "/") for t in trees)
        if d.role in ("qos", "pod") and d.path and not inside:
            trees.add(d.path)
    reserved = {d.path for d in desired if d.role in RESERVED_ROLES and d.path}
    return Managed(frozenset(trees), frozenset(reserved))


def _require_cgroup_root(desired: Sequence, each_mount: Sequence[str], live: LiveTree) -> None:
    """Like the kubelet, kubepods' parent (the cgroup root) must already exist everywhere."""
    kubepods = next((d.path for d in desired if d.role == "kubepods"), None)
    root = os.path.dirname(kubepods) if kubepods else ""
    absent = lacking(root, each_mount, live) if root else []
    if absent:
        raise _missing_error(
            f"{CGROUP_FIELDS['kubepods']} /{root} must exist, as the kubelet requires; cgalloc"
            " creates only the cgroups below it, so create it in every hierarchy first:",
            [os.path.join(m, root) for m in absent],
        )


def _cpuset_seed(mount: str, path: str, final: dict) -> list[Action]:
    """A new v1 cpuset cgroup starts with no cpus or mems; give it its final or parent's ones."""
    parent = os.path.dirname(path)
    out = []
    for file in SEED_FILES:
        value = final.get((mount, path, file))
        if value is None:
            value = final.get((mount, parent, file))
        if value is None:
            value = read_file(mount, parent, file) or ""
        final[(mount, path, file)] = value
        out.append(Action("write", mount, path, file, None, value, cgroup=path))
    return out


def _below_usage(actions: list[Action], root: str) -> list[str]:
    """Memory limits that would drop below what the cgroup uses now."""
    refusals = []
    for a in actions:
        if a.kind != "write" or a.file not in MEMORY_LIMIT_FILES or a.old is None:
            continue
        new = _comparable(a.file, a.new)
        usage_text = None
        for f in USAGE_FILES:
            usage_text = read_file(a.mount, a.path, f)
            if usage_text is not None:
                break
        if usage_text is None or not usage_text.strip().isdigit():
            continue
        usage = int(usage_text)
        if _is_number(new) and new < usage:
            refusals.append(
                f"refusing to lower the memory limit of /{a.path} to {a.new} bytes: it uses "
                f"{usage} bytes now (give --force to lower it anyway and let the kernel "
                "reclaim or OOM-kill)."
            )
    return refusals


def _moves(desired, moves, mounts, v2, proc_root, warnings) -> list[Action]:
    by_role = {d.role: d.path for d in desired}
    out: list[Action] = []
    for role, names in moves:
        target = by_role.get(role)
        if target is None:
            raise InputError(f"--{role}-procs needs the {role} cgroup: set {CGROUP_FIELDS[role]}.")
        found = procs.find(list(names), proc_root)
        for name in names:
            if not any(p.name == name for p in found):
                warnings.append(f"no running process named {name!r} to move into /{target}")
        for p in found:
            for mount in _distinct(mounts.values()):
                ctrls = [c for c, m in mounts.items() if m == mount]
                current = (
                    p.cgroups.get("")
                    if v2
                    else next((p.cgroups[c] for c in ctrls if c in p.cgroups), None)
                )
                if current is None or current == "/" + target:
                    continue
                out.append(
                    Action(
                        "move", mount, target, "cgroup.procs", current, str(p.pid), target, p.name
                    )
                )
    return out


def _drift(a: Action, root: str) -> tuple[str, dict]:
    """One action of a plan as a difference: verify's line and its ``-o json`` object, from
    one dispatch so the two never disagree."""
    where, directory = a.where(root), _below(root, a.mount, a.path) or "."
    if a.kind == "mkdir":
        return f"missing cgroup {where}", {
            "cgroup": directory, "file": None, "is": None, "want": "cgroup"
        }  # fmt: skip
    if a.kind == "enable":
        line = f"{where}: controllers not enabled: {a.new.replace('+', '')}"
    elif a.kind == "move":
        # the process's cgroup is what differs: it is in a.old, it belongs in this one
        return f"process {a.new} ({a.note}) is in {a.old}, not /{a.path}", {
            "cgroup": directory, "file": "cgroup.procs", "is": None, "want": a.new,
            "process": a.note, "processIsIn": a.old,
        }  # fmt: skip
    else:
        line = f"{where}: is {a.old if a.old is not None else '(missing)'}, want {a.new}"
    return line, {"cgroup": directory, "file": a.file, "is": a.old, "want": a.new}


def _stale_drift(a: Action, root: str) -> tuple[str, dict]:
    """One action of ``plan.undo`` (what setup did that the inputs no longer want, still in
    place) as verify's line and its ``-o json`` object."""
    where, directory = a.where(root), _below(root, a.mount, a.path) or "."
    if a.kind == "restore":
        return f"{where}: is {a.old}, no longer wanted; setup restores {a.new!r}", {
            "cgroup": directory, "file": a.file, "is": a.old, "want": a.new
        }  # fmt: skip
    if a.kind == "unit":
        return (
            f"systemd unit {a.note}: {a.file} set by cgalloc, no longer wanted; setup "
            "restores them",
            {"cgroup": None, "file": None, "is": "set", "want": "restored", "unit": a.note,
             "properties": a.file.split(", ")},
        )  # fmt: skip
    # rmdir, stop: a cgroup (and its unit) cgalloc made and no longer wants
    item = {"cgroup": directory, "file": None, "is": "cgroup", "want": None}
    if a.kind == "rmdir":
        return f"cgroup {where} was made by cgalloc and is no longer wanted", item
    line = f"systemd unit {a.note} (cgroup {where}) was started by cgalloc and is no longer wanted"
    return line, {**item, "unit": a.note}


def drift(plan: Plan) -> list[tuple[str, dict]]:
    """Every difference verify reports, as (line, ``-o json`` object): what the live tree lacks
    (``plan.actions``), then what setup no longer wants (``plan.undo``). In an object,
    ``cgroup`` is the directory relative to --cgroupfs, ``file`` null for the cgroup itself,
    ``is`` null for what does not exist, ``unit`` present when it is a systemd unit's."""
    return [_drift(a, plan.root) for a in plan.actions] + [
        _stale_drift(a, plan.root) for a in plan.undo
    ]


def cgroup_depth(path: str) -> int:
    """How deep a cgroup path is ("" = the root, 0)."""
    return path.count("/") + 1 if path else 0


def undo_actions(stale, version: str, root: str, units=None) -> list[Action]:
    """How to undo ``stale`` (ownership.Record.stale: what earlier runs did that the inputs no
    longer want) and ``units`` (units.stale_units), in order: restore the values changed in
    cgroups cgalloc did not create, reset the files it wrote in its own cgroups that stay to
    the kernel's default for a new cgroup, restore unit properties, then stop the transient
    units and remove the cgroups it made, deepest first. An entry with nothing left to undo
    (its cgroup gone, its value already back) gives no action."""
    out = []
    originals = [(key, original) for key, original in sorted(stale.changed.items())]
    originals += [
        ((m, p, f), fresh_value(version, f))
        for m, p, f in sorted(stale.written)
        if (m, p) not in stale.created
    ]
    for (mount, path, file), original in originals:
        current = read_file(mount, path, file)
        if original is None or current is None or same_value(file, current, original or "\n"):
            continue
        out.append(Action("restore", mount, path, file, current, original, cgroup=path))
    first: dict[tuple[str, str], int] = {}
    for i, a in enumerate(out):
        first.setdefault((a.mount, a.path), i)
    out.sort(key=lambda a: (first[(a.mount, a.path)], memsw_rank(a)))
    started = list(units.started) if units is not None else []
    for name, props in sorted(units.changed.items()) if units is not None else ():
        out.append(Action("unit", root, "", ", ".join(sorted(props)), note=name))
    removals = []
    stopped = set()
    for name in started:
        path = expand_slice(name).lstrip("/")
        mounts = sorted(m for m, p in stale.created if p == path) or [root]
        stopped.update((m, path) for m in mounts)
        removals.append(Action("stop", mounts[0], path, cgroup=path, note=name))
    removals += [
        Action("rmdir", m, p, cgroup=p)
        for m, p in stale.created
        if (m, p) not in stopped and is_cgroup(m, p)
    ]
    removals.sort(key=lambda a: (-cgroup_depth(a.path), a.path, a.mount))
    return out + removals


def memsw_rank(a: Action) -> int:
    """Where a restore goes among its cgroup's: v1's memory+swap limit, which the kernel keeps
    at or above the memory limit, is raised before that limit and lowered after it."""
    if a.file != MEMSW_FILE or a.old is None:
        return 0
    return 1 if _shrinks(a.file, a.old, a.new) else -1


def require_no_refusals(plan: Plan, force: bool) -> None:
    if plan.refusals and not force:
        raise CgallocError("\n".join([*plan.refusals, "nothing was written."]))


# ---------------------------------------------------------------- from node inputs


def node_plan(
    cfg,
    capacity,
    hierarchy,
    pods: Sequence = (),
    *,
    weight_formula: str = "kubelet",
    create_reserved: bool = True,
    moves: Sequence[tuple[str, Sequence[str]]] = (),
    delegated: frozenset[str] = frozenset(),
    cpus: frozenset[int] | None = None,
    protection: Protection = Protection(),
) -> tuple[Plan, list]:
    """The plan for a NodeConfig and capacity: Allocatable → desired tree → diff.

    ``pods`` are podresources.Pod objects (pods.load_pods); their cgroup values follow the
    hierarchy's version (MemoryQoS is v2-only). ``cpus`` are the node's CPUs
    (cpuset.node_cpus, read when not given). ``protection``: the reserved cgroups beyond the
    kubelet (model/protection.py), its notes among the plan's warnings.

    Returns the plan and the desired cgroups.
    """
    alloc = compute(cfg, capacity)
    check_enforceable(alloc)
    v2 = hierarchy.version == "v2"
    cgroups = pod_cgroups(pods, cfg, v2)
    if cpus is None:
        cpus = node_cpus(cfg.capacity_overrides, online_cpus)
    desired = desired_tree(cfg, alloc, hierarchy, cgroups, cpus, protection, weight_formula)
    p = build(
        hierarchy,
        desired,
        weight_formula=weight_formula,
        create_reserved=create_reserved,
        moves=moves,
        delegated=delegated,
    )
    p.warnings[:0] = [*alloc.warnings, *naming_notes(cfg), *cpu_sets(cfg, cpus).notes]
    p.warnings += protection_notes(cfg, alloc, v2, protection, weight_formula)
    p.warnings += weight_contention(p, desired, hierarchy, alloc)
    return p, desired


def weight_contention(plan: Plan, desired: Sequence, hierarchy, alloc) -> list[str]:
    """The CPU-weight warning (model/protection.py ``contention``) for this node as the plan
    leaves it: kubepods' planned weight against its siblings' live ones (the planned value for
    the cgroups the plan writes, the kernel's default where the plan turns the cpu controller
    on)."""
    kubepods = next((d.path for d in desired if d.role == "kubepods"), None)
    mount = hierarchy_mounts(hierarchy).get("cpu")
    version = "v2" if hierarchy.version == "v2" else "v1"
    file = WEIGHT_FILE[version]
    weight = plan.wanted_files.get((mount, kubepods, file)) if kubepods and mount else None
    capacity, pods = alloc.capacity.get(CPU), alloc.kubepods.get(CPU)
    if weight is None or capacity is None or pods is None:
        return []
    parent, _, name = kubepods.rpartition("/")
    try:
        with os.scandir(f"{mount}/{parent}" if parent else mount) as it:
            names = sorted(e.name for e in it if e.is_dir(follow_symlinks=False) and e.name != name)
    except OSError:
        return []
    siblings = {}
    for entry in names:
        path = f"{parent}/{entry}" if parent else entry
        value = plan.wanted_files.get((mount, path, file)) or read_file(mount, path, file)
        if value is None and version == "v2":
            value = str(DEFAULT_WEIGHT[version])  # the controller is on there once setup ran
        if value is not None and value.strip().isdigit():
            siblings[f"/{path}"] = int(value)
    found = contention(
        f"/{kubepods}", int(weight), siblings, capacity.milli_value(), pods.milli_value()
    )
    return [found] if found else []
