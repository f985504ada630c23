"""Pure-Python core with the native interface: the fallback, and the oracle for tests.

Paths are resolved one component at a time with O_NOFOLLOW (Python has no openat2), and the
filesystem type comes from /proc/self/mountinfo (Python has no statfs f_type).
"""

from __future__ import annotations

import errno
import os
import stat
from array import array
from collections.abc import Sequence

from cgalloc.host.core import records as r

IMPLEMENTATION = "pure"
FileSpec = r.FileSpec
_U64 = 2**64 - 1
_MAGIC = {"cgroup": r.MAGIC_CGROUP, "cgroup2": r.MAGIC_CGROUP2}


def parse_token(tok: bytes) -> tuple[int, int]:
    """(status, value) of one value: digits, "max" or "-1"."""
    if tok in (b"max", b"-1"):
        return r.MAX, 0
    if not tok.isdigit():  # bytes.isdigit is ASCII-only, unlike int()
        return r.EPARSE, 0
    digits = tok.lstrip(b"0")
    # int() refuses very long digit strings, and anything past 20 digits overflows anyway
    if len(digits) > 20 or (digits and int(digits) > _U64):
        return r.ERANGE, 0
    return r.OK, int(digits or b"0")


def _strip_newline(data: bytes) -> bytes:
    return data[:-1] if data.endswith(b"\n") else data


def parse(spec: FileSpec, data: bytes) -> list[tuple[int, int]]:
    """Cells of one file's content, exactly as cg_parse fills them."""
    if spec.kind == "single":
        return [parse_token(_strip_newline(data))]
    if spec.kind == "fields":
        tokens = _strip_newline(data).split(b" ")
        if len(tokens) != spec.ncells:
            return [(r.EPARSE, 0)] * spec.ncells
        return [parse_token(t) for t in tokens]
    cells = [(r.EMISSING_KEY, 0)] * spec.ncells
    want = {k.encode(): i for i, k in enumerate(spec.keys)}
    for line in data.split(b"\n"):
        key, sep, tok = line.partition(b" ")
        i = want.pop(key, None) if sep else None  # pop: the first occurrence wins
        if i is not None:
            cells[i] = parse_token(tok)
    return cells


def _open_component(dirfd: int, name: str, flags: int, mode: int = 0) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirfd)
    except NotADirectoryError:
        # O_NOFOLLOW|O_DIRECTORY reports a symlink as ENOTDIR; openat2 says ELOOP
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


def _open_beneath(rootfd: int, relpath: str, flags: int) -> int:
    """open relpath beneath rootfd without following any symlink; relpath is checked."""
    *parents, last = relpath.split("/")
    cur = rootfd
    try:
        for part in parents:
            nxt = _open_component(cur, part, os.O_PATH | os.O_DIRECTORY)
            if cur != rootfd:
                os.close(cur)
            cur = nxt
        return _open_component(cur, last, flags)
    finally:
        if cur != rootfd:
            os.close(cur)


def open_beneath(
    dirfd: int, relpath: str, flags: int, mode: int = 0, force_walk: bool = False
) -> int:
    """``relpath`` opened below ``dirfd`` as a write resolves it (no symlink in any component,
    the last opened with O_NOFOLLOW and ``mode`` when ``flags`` create it): the fd; OSError
    (ELOOP for a symlink), ValueError for a malformed path before any I/O."""
    r.check_relpath(relpath)
    parent, _, last = relpath.rpartition("/")
    pfd = _open_beneath(dirfd, parent, os.O_PATH | os.O_DIRECTORY) if parent else dirfd
    try:
        return _open_component(pfd, last, flags, mode)
    finally:
        if pfd != dirfd:
            os.close(pfd)


def _read_cells(fd: int, spec: FileSpec, bufsize: int, pread: bool) -> list[tuple[int, int]]:
    try:
        data = os.pread(fd, bufsize, 0) if pread else os.read(fd, bufsize)
    except OSError as exc:
        return [(r.errno_status(exc.errno), 0)] * spec.ncells
    if len(data) >= bufsize:
        return [(r.ETOOLONG, 0)] * spec.ncells
    return parse(spec, data)


def _store(values: array, status: bytearray, at: int, cells: list[tuple[int, int]]) -> None:
    for k, (s, v) in enumerate(cells):
        status[at + k] = s
        values[at + k] = v


def _buffers(ncells: int) -> tuple[array, bytearray]:
    return array("Q", bytes(8 * ncells)), bytearray(ncells)


class Sampler(r.Closing):
    """Keeps every (dir, file) open and re-reads it with one pread per sample, or what
    :meth:`set_policy` says."""

    def __init__(self, root: Root, dirs, specs, threads: int, bufsize: int, detect_unlinked: bool):
        r.check_bufsize(bufsize)
        self.root = root
        self._detect_unlinked = detect_unlinked
        self.threads = threads
        self.specs = tuple(specs)
        self._bufsize = bufsize
        self._offs, self._per_dir = r.cell_offsets(self.specs)
        self._fds: dict[tuple[str, int], int] = {}  # (dir, spec index) -> open fd
        self._dirfds: dict[str, int] = {}  # dir -> its O_PATH fd
        self._ndirfds = 0
        self._kept: list[int] | None = None  # None: every file of every dir
        self._closed = False
        self.dirs: tuple[str, ...] = ()
        self.update(dirs)

    def update(self, dirs: Sequence[str]) -> None:
        """Sample ``dirs`` from now on: kept dirs keep their fds, dropped ones are closed."""
        dirs = r.distinct_dirs(dirs)
        r.check_dirs(dirs)
        self._live()
        self.dirs = dirs
        self._trim()

    def set_policy(self, dirfds: int, kept: Sequence[int] | None = None) -> None:
        """As the native core's: dir fds for the first ``dirfds`` dirs, file f kept open for
        the first ``kept[f]`` dirs; fds no longer kept close now."""
        self._kept = r.policy_counts(dirfds, kept, len(self.specs))
        self._ndirfds = dirfds
        self._trim()

    def _keeps(self, d: int, f: int) -> bool:
        return self._kept is None or d < self._kept[f]

    def _trim(self) -> None:
        index = {d: i for i, d in enumerate(self.dirs)}
        gone = [k for k in self._fds if k[0] not in index or not self._keeps(index[k[0]], k[1])]
        for key in gone:
            os.close(self._fds.pop(key))
        for d in [d for d in self._dirfds if index.get(d, self._ndirfds) >= self._ndirfds]:
            os.close(self._dirfds.pop(d))

    def sample(self) -> r.Snapshot:
        """Re-read everything; a vanished cgroup's cells say ENOENT and its fds are closed."""
        self._live()
        values, status = _buffers(len(self.dirs) * self._per_dir)
        for d, directory in enumerate(self.dirs):
            for f, spec in enumerate(self.specs):
                if self._keeps(d, f):
                    cells = self._sample_one(d, directory, f, spec)
                else:
                    cells = self._read_once(d, directory, spec)
                _store(values, status, d * self._per_dir + self._offs[f], cells)
        return r.Snapshot(self.dirs, self.specs, values, status)

    def _open(self, d: int, directory: str, spec: FileSpec) -> int:
        """The file, through the dir's kept fd when it may have one (reopened once when the
        cgroup was removed and re-created), else beneath the root."""
        if d >= self._ndirfds or not directory or "/" in spec.name:
            return _open_beneath(self.root._fileno(), r.join(directory, spec.name), r.READ_FLAGS)
        for attempt in (0, 1):
            dfd = self._dirfds.get(directory)
            if dfd is None:
                dfd = _open_beneath(self.root._fileno(), directory, os.O_PATH | os.O_DIRECTORY)
                self._dirfds[directory] = dfd
            try:
                return _open_component(dfd, spec.name, r.READ_FLAGS)
            except OSError as exc:
                if attempt or exc.errno not in (errno.ENOENT, errno.ENODEV):
                    raise
                os.close(self._dirfds.pop(directory))
        raise AssertionError("unreachable")

    def _read_once(self, d: int, directory: str, spec: FileSpec) -> list[tuple[int, int]]:
        try:
            fd = self._open(d, directory, spec)
        except OSError as exc:
            return [(r.errno_status(exc.errno), 0)] * spec.ncells
        try:
            return _read_cells(fd, spec, self._bufsize, pread=False)
        finally:
            os.close(fd)

    def _sample_one(self, d: int, directory: str, f: int, spec: FileSpec) -> list[tuple[int, int]]:
        key = (directory, f)
        fd = self._fds.get(key)
        if fd is None:
            return self._reopen(d, key, spec)
        try:
            data = os.pread(fd, self._bufsize, 0)
        except OSError as exc:
            if exc.errno not in (errno.ENODEV, errno.ENOENT):
                return [(r.errno_status(exc.errno), 0)] * spec.ncells
            return self._reopen(d, key, spec)
        if self._detect_unlinked and os.fstat(fd).st_nlink == 0:
            return self._reopen(d, key, spec)
        if len(data) >= self._bufsize:
            return [(r.ETOOLONG, 0)] * spec.ncells
        return parse(spec, data)

    def _reopen(self, d: int, key: tuple[str, int], spec: FileSpec) -> list[tuple[int, int]]:
        """(Re)open once and read; a file that cannot be opened is reported, not raised."""
        old = self._fds.pop(key, None)
        if old is not None:
            os.close(old)
        try:
            fd = self._open(d, key[0], spec)
        except OSError as exc:
            return [(r.errno_status(exc.errno), 0)] * spec.ncells
        self._fds[key] = fd
        return _read_cells(fd, spec, self._bufsize, pread=True)

    def _live(self) -> None:
        if self._closed:
            raise ValueError("sampler is closed")

    def close(self) -> None:
        for fd in [*self._fds.values(), *self._dirfds.values()]:
            os.close(fd)
        self._fds.clear()
        self._dirfds.clear()
        self._closed = True

    def __del__(self) -> None:
        self.close()


class Root(r.RootBase):
    """An open cgroupfs root; every path below is resolved beneath it without symlinks."""

    sampler_class = Sampler

    def __init__(self, path: str, fd: int, fstype: str, force_walk: bool = False):
        super().__init__(path, fd, _MAGIC.get(fstype, 0))
        self.fstype = fstype

    def _read(self, dirs, specs, threads: int, bufsize: int) -> r.Snapshot:
        r.check_dirs(dirs)
        offs, per_dir = r.cell_offsets(specs)
        values, status = _buffers(len(dirs) * per_dir)
        rootfd = self._fileno()
        for d, directory in enumerate(dirs):
            for f, spec in enumerate(specs):
                try:
                    fd = _open_beneath(rootfd, r.join(directory, spec.name), r.READ_FLAGS)
                except OSError as exc:
                    cells = [(r.errno_status(exc.errno), 0)] * spec.ncells
                else:
                    try:
                        cells = _read_cells(fd, spec, bufsize, pread=False)
                    finally:
                        os.close(fd)
                _store(values, status, d * per_dir + offs[f], cells)
        return r.Snapshot(dirs, specs, values, status)

    def _read_dated(self, dirs, specs, marker: str, threads: int, bufsize: int):
        snap = self._read(dirs, specs, threads, bufsize)
        return snap, oldest_mtimes([self._fileno()], dirs, marker)

    def write(self, relpath: str, value: str | bytes | int) -> None:
        """Write ``value`` to ``relpath`` in one write(); raises WriteError."""
        shown, data = r.value_text(value)
        r.check_op_path(relpath, r.write_error, shown)
        try:
            fd = _open_beneath(self._fileno(), relpath, os.O_WRONLY | os.O_TRUNC)
            try:
                n = os.write(fd, data)  # os.write retries EINTR (PEP 475)
            finally:
                os.close(fd)
        except OSError as exc:
            raise r.write_error(exc.errno, relpath, shown) from None
        if n != len(data):
            raise r.write_error(errno.EIO, relpath, shown)

    def mkdir(self, relpath: str, mode: int = 0o755) -> None:
        r.check_op_path(relpath, r.mkdir_error)
        try:
            self._at_parent(relpath, lambda fd, name: os.mkdir(name, mode, dir_fd=fd))
        except OSError as exc:
            raise r.mkdir_error(exc.errno, relpath) from None

    def rmdir(self, relpath: str) -> None:
        r.check_op_path(relpath, r.rmdir_error)
        try:
            self._at_parent(relpath, lambda fd, name: os.rmdir(name, dir_fd=fd))
        except OSError as exc:
            raise r.rmdir_error(exc.errno, relpath) from None

    def read_text(self, relpath: str, limit: int = r.DEFAULT_BUFSIZE) -> str:
        """A small file's whole content (fewer than ``limit`` bytes, else EFBIG)."""
        r.check_op_path(relpath, r.read_error)
        try:
            fd = _open_beneath(self._fileno(), relpath, r.READ_FLAGS)
            try:
                chunks, got = [], 0
                while got < limit:
                    chunk = os.read(fd, limit - got)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    got += len(chunk)
            finally:
                os.close(fd)
        except OSError as exc:
            raise r.read_error(exc.errno, relpath) from None
        if got >= limit:
            raise r.read_error(errno.EFBIG, relpath)
        return b"".join(chunks).decode("utf-8", "replace")

    def _at_parent(self, relpath: str, op) -> None:
        parent, _, last = relpath.rpartition("/")
        rootfd = self._fileno()
        if not parent:
            op(rootfd, last)
            return
        fd = _open_beneath(rootfd, parent, os.O_PATH | os.O_DIRECTORY)
        try:
            op(fd, last)
        finally:
            os.close(fd)


def _fstype(fd: int) -> str:
    """The filesystem type of the mount holding fd, from /proc/self/mountinfo."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
        for line in mounts:
            fields, _, tail = line.partition(" - ")
            parts = fields.split()
            if len(parts) > 2 and parts[2] == dev and tail:
                return tail.split()[0]
    return "unknown"


def _mtime(dirfd: int, path: str) -> int | None:
    try:
        return os.stat(path or ".", dir_fd=dirfd, follow_symlinks=False).st_mtime_ns
    except OSError:
        return None


def oldest_mtimes(
    dirfds: Sequence[int], dirs: Sequence[str], marker: str = "", threads: int = 0
) -> list[int | None]:
    """Each dir's oldest mtime in ns over the ``dirfds`` that hold it, of the dir and of its
    file ``marker`` ("" for none), not following a last-component symlink; None where no fd
    holds it. ValueError for a malformed dir or marker, before any I/O. ``threads`` is
    accepted for the C core's interface; this one stats in turn."""
    r.check_mtime_args(dirfds, marker)
    r.check_dirs(dirs)
    out: list[int | None] = []
    for d in dirs:
        oldest = None
        for fd in dirfds:
            t = _mtime(fd, d)
            if t is None:
                continue  # not in this hierarchy: its marker is not either
            m = _mtime(fd, r.join(d, marker)) if marker else None
            t = t if m is None or t < m else m
            oldest = t if oldest is None or t < oldest else oldest
        out.append(oldest)
    return out


def read_files(
    dirfd: int, paths: Sequence[str], slot: int = 512, threads: int = 0, no_symlinks: bool = False
) -> list[bytes | int]:
    """Each file below ``dirfd`` (resolved as openat does, or with ``no_symlinks`` as writes
    are: a symlink anywhere on the path is -ELOOP) with one read of ``slot`` bytes: its
    content, or -errno (-EFBIG when it fills the slot, -EISDIR for a directory). ValueError
    for a malformed path, before any I/O. ``threads`` is accepted for the C core's interface;
    this one reads in turn."""
    r.check_files(paths, slot)
    out: list[bytes | int] = []
    for p in paths:
        try:
            if no_symlinks:
                fd = _open_beneath(dirfd, p, r.READ_FLAGS)
            else:
                fd = os.open(p, r.READ_FLAGS | os.O_CLOEXEC, dir_fd=dirfd)
        except OSError as exc:
            out.append(-exc.errno)
            continue
        try:
            data = os.read(fd, slot)
            out.append(-errno.EFBIG if len(data) == slot else data)
        except OSError as exc:
            out.append(-exc.errno)
        finally:
            os.close(fd)
    return out


def open_root(path: str, allow_any_fs: bool = False, force_walk: bool = False) -> Root:
    """Open ``path`` as a cgroup root; refuse it unless it is a cgroup or cgroup2 mount.

    ``allow_any_fs`` exists for tests only; ``force_walk`` is accepted for interface parity
    (this implementation always walks).
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise r.root_error(exc.errno, path) from None
    try:
        fstype = _fstype(fd)
    except OSError as exc:
        os.close(fd)
        raise r.root_error(exc.errno, path) from None
    if fstype not in ("cgroup", "cgroup2") and not allow_any_fs:
        os.close(fd)
        raise r.not_cgroupfs(path, f"filesystem type {fstype}")
    return Root(path, fd, fstype, force_walk)


def pack_ops(ops: Sequence[tuple[Root, str, str | None]]) -> r.Packed:
    """``ops`` ready for :func:`apply_ops` (here, as they are: each op is its own call)."""
    return r.Packed(list(ops))


def apply_ops(
    ops: Sequence[tuple[Root, str, str | None]] | r.Packed, stop: r.Stop | None = None
) -> tuple[int, r.WriteError | None]:
    """Make ``ops`` (or :func:`pack_ops`' of them) in order (``(root, relpath, value)``; value
    None = mkdir) until one fails or ``stop`` is set: (how many were made, the failing one's
    error or None)."""
    return r.apply_ops_each(ops, stop)
