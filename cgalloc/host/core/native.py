"""The C core (``_cgcore``, cffi API mode) behind the interface described in cgalloc.host.core.

cffi releases the GIL around every call into ``_cgcore``, so a bulk read or a sample runs
while other Python threads proceed.
"""

from __future__ import annotations

import errno
import os
from array import array
from collections.abc import Sequence
from itertools import accumulate

from cgalloc.host.core import records as r
from cgalloc.host.core._cgcore import ffi, lib

IMPLEMENTATION = "native"
NO_MTIME = -(2**63)  # INT64_MIN: no fd of cg_oldest_mtimes holds the dir


class _CSpecs:
    """The cffi ``cg_spec[]`` for a list of FileSpec, holding the memory it points into."""

    def __init__(self, specs: Sequence[FileSpec]):
        self.specs = tuple(specs)
        self.array = ffi.new("cg_spec[]", max(len(self.specs), 1))
        self._keep: list = []
        for i, spec in enumerate(self.specs):
            name = ffi.new("char[]", spec.name.encode())
            self._keep.append(name)
            c = self.array[i]
            c.name = name
            c.kind = spec.kind_code
            c.ncells = spec.ncells
            if spec.kind == "keyed":
                raw = [k.encode() for k in spec.keys]
                keys = [ffi.new("char[]", k) for k in raw]
                karr = ffi.new("char *[]", keys)
                lens = ffi.new("uint32_t[]", [len(k) for k in raw])
                self._keep += [keys, karr, lens]
                c.keys = karr
                c.keylens = lens


FileSpec = r.FileSpec


def _pack_dirs(dirs: Sequence[str]):
    """dirs as one NUL-separated buffer plus offsets: one allocation instead of N. The C side
    validates them (a few ns each, GIL released) and answers -EINVAL; see _check_rc."""
    joined = "\0".join(dirs) + "\0"
    buf = os.fsencode(joined)
    # ASCII (the usual case): byte offsets are character offsets
    lens = map(len, dirs) if len(buf) == len(joined) else (len(os.fsencode(d)) for d in dirs)
    offs = array("Q", [0])
    offs.extend(accumulate(n + 1 for n in lens))
    return buf, ffi.from_buffer("size_t[]", offs), offs


def _buffers(ncells: int):
    vals = ffi.new("uint64_t[]", max(ncells, 1))
    st = ffi.new("uint8_t[]", max(ncells, 1))
    return vals, st


def _snapshot(dirs, specs, vals, st, ncells: int) -> r.Snapshot:
    values = memoryview(ffi.buffer(vals, 8 * ncells)).cast("Q")
    status = memoryview(ffi.buffer(st, ncells))
    return r.Snapshot(dirs, specs, values, status)


def _raise_errno(rc: int, what: str, dirs: Sequence[str] = ()) -> None:
    if rc == -errno.EINVAL:
        r.check_dirs(dirs)  # raises the ValueError naming the bad directory
    if rc < 0:
        raise OSError(-rc, f"{what}: {os.strerror(-rc)}")


class Sampler(r.Closing):
    """Keeps every (dir, file) open and re-reads it with one pread per sample, or what
    :meth:`set_policy` says."""

    def __init__(self, root: Root, dirs, specs, threads: int, bufsize: int, detect_unlinked: bool):
        r.check_bufsize(bufsize)
        self.root = root
        self.threads = threads
        self._cspecs = _CSpecs(specs)
        self.specs = self._cspecs.specs
        self._cells_per_dir = r.cell_offsets(self.specs)[1]
        ptr = lib.cg_sampler_new(
            root._fileno(), self._cspecs.array, len(self.specs), bufsize, detect_unlinked
        )
        if ptr == ffi.NULL:
            raise MemoryError("cannot allocate a sampler")
        self._ptr = ffi.gc(ptr, lib.cg_sampler_free)
        self.dirs: tuple[str, ...] = ()
        self.update(dirs)

    def update(self, dirs: Sequence[str]) -> None:
        """Sample ``dirs`` from now on: kept dirs keep their fds, dropped ones are closed."""
        dirs = r.distinct_dirs(dirs)
        old = {d: i for i, d in enumerate(self.dirs)}
        dirbuf, offs, _keep = _pack_dirs(dirs)
        carry = ffi.new("int[]", [old.get(d, -1) for d in dirs] or [0])
        rc = lib.cg_sampler_set_dirs(self._live(), dirbuf, offs, len(dirs), carry)
        _raise_errno(rc, "sampler update", dirs)
        self.dirs = dirs

    def set_policy(self, dirfds: int, kept: Sequence[int] | None = None) -> None:
        """Keep an O_PATH fd for the first ``dirfds`` dirs and file f open for the first
        ``kept[f]`` dirs (None: every file of every dir); the rest is opened, read and closed
        each sample (through the dir's fd where it has one). Fds no longer kept close now."""
        counts = r.policy_counts(dirfds, kept, len(self.specs))
        arr = ffi.NULL if counts is None else ffi.new("long[]", counts or [0])
        _raise_errno(lib.cg_sampler_set_policy(self._live(), dirfds, arr), "sampler policy")

    def sample(self) -> r.Snapshot:
        """Re-read everything; a vanished cgroup's cells say ENOENT and its fds are closed."""
        ncells = len(self.dirs) * self._cells_per_dir
        vals, st = _buffers(ncells)
        _raise_errno(lib.cg_sampler_sample(self._live(), self.threads, vals, st), "sample")
        return _snapshot(self.dirs, self.specs, vals, st, ncells)

    def _live(self):
        if self._ptr is None:
            raise ValueError("sampler is closed")
        self.root._fileno()
        return self._ptr

    def close(self) -> None:
        """Close every fd now rather than at garbage collection."""
        if self._ptr is not None:
            ptr, self._ptr = self._ptr, None
            ffi.release(ptr)  # runs cg_sampler_free now


class Root(r.RootBase):
    """An open cgroupfs root; every path below is resolved beneath it without symlinks."""

    sampler_class = Sampler

    def __init__(self, path: str, fd: int, magic: int, force_walk: bool = False):
        super().__init__(path, fd, magic)
        self._flags = lib.CG_FORCE_WALK if force_walk else 0

    def _read(self, dirs, specs, threads: int, bufsize: int) -> r.Snapshot:
        return self._read_into(dirs, specs, threads, bufsize, "", ffi.NULL)

    def _read_dated(self, dirs, specs, marker: str, threads: int, bufsize: int):
        out = ffi.new("int64_t[]", max(len(dirs), 1))
        snap = self._read_into(dirs, specs, threads, bufsize, marker, out)
        return snap, [None if t == NO_MTIME else t for t in ffi.unpack(out, len(dirs))]

    def _read_into(self, dirs, specs, threads: int, bufsize: int, marker: str, mtimes):
        cspecs = _CSpecs(specs)
        dirbuf, offs, _keep = _pack_dirs(dirs)
        ncells = len(dirs) * r.cell_offsets(cspecs.specs)[1]
        vals, st = _buffers(ncells)
        rc = lib.cg_read_dated(
            self._fileno(), dirbuf, offs, len(dirs), cspecs.array, len(cspecs.specs),
            bufsize, threads, vals, st, os.fsencode(marker), mtimes,
        )  # fmt: skip
        _raise_errno(rc, "bulk read", dirs)
        return _snapshot(dirs, cspecs.specs, vals, st, ncells)

    def write(self, relpath: str, value: str | bytes | int) -> None:
        """Write ``value`` to ``relpath`` in one write(); raises WriteError."""
        shown, data = r.value_text(value)
        r.check_op_path(relpath, r.write_error, shown)
        rc = lib.cg_write(self._fileno(), os.fsencode(relpath), data, len(data), self._flags)
        if rc < 0:
            raise r.write_error(-rc, relpath, shown)

    def mkdir(self, relpath: str, mode: int = 0o755) -> None:
        r.check_op_path(relpath, r.mkdir_error)
        rc = lib.cg_mkdir(self._fileno(), os.fsencode(relpath), mode, self._flags)
        if rc < 0:
            raise r.mkdir_error(-rc, relpath)

    def rmdir(self, relpath: str) -> None:
        r.check_op_path(relpath, r.rmdir_error)
        rc = lib.cg_rmdir(self._fileno(), os.fsencode(relpath), self._flags)
        if rc < 0:
            raise r.rmdir_error(-rc, relpath)

    def read_text(self, relpath: str, limit: int = r.DEFAULT_BUFSIZE) -> str:
        """A small file's whole content (fewer than ``limit`` bytes, else EFBIG)."""
        r.check_op_path(relpath, r.read_error)
        buf = ffi.new("char[]", limit)
        n = lib.cg_read_text(self._fileno(), os.fsencode(relpath), buf, limit, self._flags)
        if n < 0:
            raise r.read_error(-n, relpath)
        return ffi.unpack(buf, n).decode("utf-8", "replace")


def oldest_mtimes(
    dirfds: Sequence[int], dirs: Sequence[str], marker: str = "", threads: int = 0
) -> list[int | None]:
    """Each dir's oldest mtime in ns over the ``dirfds`` that hold it, of the dir and of its
    file ``marker`` ("" for none), not following a last-component symlink; None where no fd
    holds it. ValueError for a malformed dir or marker, before any I/O. ``threads`` as for
    reads (0: one per CPU when there is enough work)."""
    r.check_mtime_args(dirfds, marker)
    if not dirs:
        return []
    dirbuf, offs, _keep = _pack_dirs(dirs)
    fds = ffi.new("int[]", list(dirfds) or [-1])
    out = ffi.new("int64_t[]", len(dirs))
    rc = lib.cg_oldest_mtimes(
        fds, len(dirfds), os.fsencode(marker), dirbuf, offs, len(dirs), threads, out
    )
    _raise_errno(rc, "mtimes", dirs)
    return [None if t == NO_MTIME else t for t in out]


def read_files(
    dirfd: int, paths: Sequence[str], slot: int = 512, threads: int = 0, no_symlinks: bool = False
) -> list[bytes | int]:
    """Each file below ``dirfd`` (resolved as openat does, or with ``no_symlinks`` as writes
    are: a symlink anywhere on the path is -ELOOP) with one read of ``slot`` bytes: its
    content, or -errno (-EFBIG when it fills the slot, -EISDIR for a directory). ValueError
    for a malformed path, before any I/O. ``threads`` as for reads."""
    if slot < 1:
        r.check_files(paths, slot)
    if not paths:
        return []
    buf, offs, _keep = _pack_dirs(paths)
    out = ffi.new("char[]", slot * len(paths))
    lens = ffi.new("long[]", len(paths))
    flags = lib.CG_NO_SYMLINKS if no_symlinks else 0
    rc = lib.cg_read_files(dirfd, buf, offs, len(paths), threads, out, slot, lens, flags)
    if rc == -errno.EINVAL:
        r.check_files(paths, slot)
    _raise_errno(rc, "read files")
    data = ffi.buffer(out)
    return [data[i * slot : i * slot + n] if n >= 0 else n for i, n in enumerate(lens)]


def open_beneath(
    dirfd: int, relpath: str, flags: int, mode: int = 0, force_walk: bool = False
) -> int:
    """``relpath`` opened below ``dirfd`` as a write resolves it (cg_open_beneath: parents
    through openat2 without symlinks, the last component with O_NOFOLLOW and ``mode`` when
    ``flags`` create it): the fd; OSError (ELOOP for a symlink), ValueError for a malformed
    path before any I/O. ``force_walk`` (tests) resolves without openat2."""
    r.check_relpath(relpath)
    walk = lib.CG_FORCE_WALK if force_walk else 0
    fd = lib.cg_open_beneath(dirfd, os.fsencode(relpath), flags, mode, walk)
    if fd < 0:
        raise OSError(-fd, os.strerror(-fd), relpath)
    return fd


def open_root(path: str, allow_any_fs: bool = False, force_walk: bool = False) -> Root:
    """Open ``path`` as a cgroup root; refuse it unless statfs says cgroup or cgroup2.

    ``allow_any_fs`` and ``force_walk`` (resolve without openat2) exist for tests only.
    """
    magic = ffi.new("long *")
    fd = lib.cg_open_root(os.fsencode(path), lib.CG_ALLOW_ANY_FS if allow_any_fs else 0, magic)
    if fd == -errno.EMEDIUMTYPE:
        raise r.not_cgroupfs(path, f"statfs magic {magic[0]:#x}")
    if fd < 0:
        raise r.root_error(-fd, path)
    return Root(path, fd, magic[0], force_walk)


def parse(spec: FileSpec, data: bytes) -> list[tuple[int, int]]:
    """Cells of one file's content as the C parser fills them (pure.parse's twin)."""
    cspecs = _CSpecs([spec])
    vals, st = _buffers(spec.ncells)
    lib.cg_parse(cspecs.array, data, len(data), vals, st)
    return [(st[k], vals[k]) for k in range(spec.ncells)]


def pack_ops(ops: Sequence[tuple[Root, str, str | None]]) -> r.Packed:
    """``ops`` (as :func:`apply_ops` takes them) as the buffers of one ``cg_apply_ops`` call;
    ops it cannot carry (a NUL inside a path or value, a surrogate outside surrogateescape's)
    are packed to be made each alone, which says which op is at fault."""
    ops = list(ops)
    pieces = [x for _root, path, value in ops for x in (path, "" if value is None else value)]
    joined = "\0".join(pieces)
    if joined.count("\0") != len(pieces) - 1:  # a NUL inside a path or value
        return r.Packed(ops)
    joined += "\0"
    try:
        buf = os.fsencode(joined)
    except UnicodeEncodeError:
        return r.Packed(ops)
    # ASCII (the usual case): byte offsets are character offsets
    lens = map(len, pieces) if len(buf) == len(joined) else (len(os.fsencode(x)) for x in pieces)
    offs = array("Q", [0])
    offs.extend(accumulate(n + 1 for n in lens))
    fds = array("i", [root._fileno() for root, _p, _v in ops])
    # a root on cgroupfs: an op may go below a parent kept from an op before (apply_batch.c)
    kinds = bytes(
        (lib.CG_OP_MKDIR if value is None else lib.CG_OP_WRITE)
        | (lib.CG_OP_FORCE_WALK if root._flags else 0)
        | (lib.CG_OP_KEEP_PARENT if root.is_cgroupfs else 0)
        for root, _p, value in ops
    )
    return r.Packed(ops, (fds, kinds, buf, offs))


def apply_ops(
    ops: Sequence[tuple[Root, str, str | None]] | r.Packed, stop: r.Stop | None = None
) -> tuple[int, r.WriteError | None]:
    """Make ``ops`` (or :func:`pack_ops`' of them) in order (``(root, relpath, value)``; value
    None = mkdir) until one fails or ``stop`` is set: (how many were made, the failing one's
    error or None). One C call (csrc/apply_batch.c) for them all, each op as
    ``Root.mkdir``/``Root.write`` makes it."""
    packed = ops if isinstance(ops, r.Packed) else pack_ops(ops)
    if not packed.ops or stop:
        return 0, None
    if packed.args is None:
        return r.apply_ops_each(packed.ops, stop)
    fds, kinds, buf, offs = packed.args
    err = ffi.new("int *")
    cell = ffi.NULL if stop is None else ffi.from_buffer("int[]", stop.cell)
    done = lib.cg_apply_ops(
        ffi.from_buffer("int[]", fds), kinds, buf, ffi.from_buffer("size_t[]", offs),
        len(packed.ops), err, cell,
    )  # fmt: skip
    if done == len(packed.ops) or not err[0]:  # all made, or stopped before op ``done``
        return done, None
    _root, path, value = packed.ops[done]
    return done, r.op_error(-err[0], path, value)
