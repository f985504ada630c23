"""Record types, status codes, errors and path rules shared by the native and pure cores."""

from __future__ import annotations

import errno as _errno
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from cgalloc.errors import CgallocError, HostError

# Every open for reading, as csrc/cgcore.c's READ_FLAGS: a FIFO in a plain directory tree
# (stats reads one) must not block the open or the read; kernfs and regular files ignore it.
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK

# Per-cell status codes; the same numbers as CG_* in csrc/cgcore.h.
OK = 0
MAX = 1  # "max" or "-1": no limit
ENOENT = 2  # the cgroup or the file is gone
EPARSE = 3  # not a number, "max" or "-1"
ERANGE = 4  # a number beyond 2**64 - 1
ETOOLONG = 5  # the content does not fit the read buffer
EMISSING_KEY = 6  # a keyed file without the requested key
EIO = 7  # any other read error
STATUS_NAMES = ("OK", "MAX", "ENOENT", "EPARSE", "ERANGE", "ETOOLONG", "EMISSING_KEY", "EIO")

KINDS = ("single", "keyed", "fields")  # index = CG_SINGLE, CG_KEYED, CG_FIELDS
DEFAULT_BUFSIZE = 65536
MAGIC_CGROUP = 0x27E0EB
MAGIC_CGROUP2 = 0x63677270


@dataclass(frozen=True)
class FileSpec:
    """One file to read in every directory.

    kind "single": one value, ``keys`` unused (one cell). "keyed": "key value" lines, one cell
    per key in ``keys``. "fields": space-separated values on one line, one cell per name in
    ``keys`` (e.g. cpu.max with keys ("quota", "period")).
    """

    name: str
    kind: str = "single"
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"FileSpec kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        try:
            check_relpath(self.name)
        except ValueError as exc:
            raise ValueError(f"FileSpec name {self.name!r}: {exc}") from None
        object.__setattr__(self, "keys", tuple(self.keys))
        if self.kind != "single" and not self.keys:
            raise ValueError(f"FileSpec {self.name}: a {self.kind} file needs at least one key")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"FileSpec {self.name}: keys must be distinct")
        for key in self.keys:
            if not key or any(c in key for c in " \n\0"):
                raise ValueError(
                    f"FileSpec {self.name}: key {key!r} must be non-empty without space, "
                    "newline or NUL"
                )

    @property
    def ncells(self) -> int:
        return 1 if self.kind == "single" else len(self.keys)

    @property
    def kind_code(self) -> int:
        return KINDS.index(self.kind)


def check_relpath(path: str) -> None:
    """Raise ValueError unless ``path`` is relative with no '', '.', '..' component or NUL."""
    if not path or path.startswith("/") or "\0" in path:
        raise ValueError("the path must be relative to the root, non-empty, without NUL bytes")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError("the path must not have empty, '.' or '..' components")


def check_dir(path: str) -> None:
    """A directory to read: ``""`` is the root itself, anything else a relative path."""
    if path != "":
        try:
            check_relpath(path)
        except ValueError as exc:
            raise ValueError(f"directory {path!r}: {exc}") from None


MAX_MTIME_FDS = 32  # csrc/cgcore.h CG_MAX_MTIME_FDS: hierarchies oldest_mtimes takes


def check_mtime_args(dirfds: Sequence[int], marker: str) -> None:
    """``oldest_mtimes``' hierarchies (at most :data:`MAX_MTIME_FDS`) and its marker: ""
    (none) or one file name."""
    if len(dirfds) > MAX_MTIME_FDS:
        raise ValueError(f"at most {MAX_MTIME_FDS} hierarchy fds, not {len(dirfds)}")
    if marker and (
        "/" in marker or "\0" in marker or marker in (".", "..") or len(marker.encode()) > 255
    ):
        raise ValueError(
            f"marker {marker!r} must be one file name (at most 255 bytes), without '/' or NUL"
        )


def check_bufsize(bufsize: int) -> None:
    if bufsize < 2:
        raise ValueError(f"bufsize must be at least 2, not {bufsize}")


def policy_counts(dirfds: int, kept: Sequence[int] | None, nspecs: int) -> list[int] | None:
    """A sampler policy's per-spec kept counts, checked; ValueError names the bad one."""
    if dirfds < 0:
        raise ValueError(f"dirfds must be a count >= 0, not {dirfds}")
    if kept is None:
        return None
    counts = [int(k) for k in kept]
    if len(counts) != nspecs or min(counts, default=0) < 0:
        raise ValueError(f"kept must be {nspecs} counts >= 0, one per file spec, not {kept!r}")
    return counts


def distinct_dirs(dirs: Sequence[str]) -> tuple[str, ...]:
    """A sampler's directories as a tuple; ValueError when one repeats."""
    dirs = tuple(dirs)
    if len(set(dirs)) != len(dirs):
        raise ValueError("sampler directories must be distinct")
    return dirs


def check_dirs(dirs: Sequence[str]) -> None:
    """check_dir for many directories at once; the fast path does a few substring scans."""
    named = [d for d in dirs if d]
    probe = "/" + "/\0/".join(named) + "/"
    if "//" in probe or "/./" in probe or "/../" in probe or probe.count("\0") != len(named) - 1:
        for d in dirs:
            check_dir(d)


def check_files(paths: Sequence[str], slot: int) -> None:
    """``read_files``' arguments: relative file paths (no "", '.', '..' or empty component)
    and a slot of at least one byte."""
    if slot < 1:
        raise ValueError(f"slot must be at least 1 byte, not {slot}")
    for p in paths:
        try:
            check_relpath(p)
        except ValueError as exc:
            raise ValueError(f"file {p!r}: {exc}") from None


def cell_offsets(specs: Sequence[FileSpec]) -> tuple[list[int], int]:
    """First cell of each spec within a directory, and the cells per directory."""
    offs, total = [], 0
    for spec in specs:
        offs.append(total)
        total += spec.ncells
    return offs, total


def join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def errno_status(err: int) -> int:
    """Status of a cell whose file could not be opened or read."""
    return ENOENT if err in (_errno.ENOENT, _errno.ENODEV, _errno.ENOTDIR) else EIO


def _cells(values, status) -> list[int | str | None]:
    """Cell values as Python objects: the number when OK, "max" for MAX, None on an error."""
    pairs = zip(values, status, strict=True)
    return [v if st == OK else "max" if st == MAX else None for v, st in pairs]


class Snapshot:
    """Values read from ``dirs`` × ``specs``: one uint64 value and one status per cell.

    Cell (d, f, k) sits at ``d * cells_per_dir + offsets[f] + k`` in ``values`` (array-like of
    uint64) and ``status`` (array-like of uint8); non-OK cells hold value 0.
    """

    __slots__ = ("_offsets", "cells_per_dir", "dirs", "specs", "status", "values")

    def __init__(self, dirs: Sequence[str], specs: Sequence[FileSpec], values, status):
        self.dirs = tuple(dirs)
        self.specs = tuple(specs)
        self._offsets, self.cells_per_dir = cell_offsets(self.specs)
        self.values = values
        self.status = status

    def index(self, dir_index: int, file_index: int, key_index: int = 0) -> int:
        if not 0 <= key_index < self.specs[file_index].ncells:
            raise IndexError(f"key index {key_index} out of range for {self.specs[file_index]}")
        if not 0 <= dir_index < len(self.dirs):
            raise IndexError(f"dir index {dir_index} out of range")
        return dir_index * self.cells_per_dir + self._offsets[file_index] + key_index

    def get(self, dir_index: int, file_index: int, key_index: int = 0) -> tuple[int, int]:
        """(status, value) of one cell."""
        i = self.index(dir_index, file_index, key_index)
        return self.status[i], self.values[i]

    def as_dict(self, dir_index: int) -> dict[str, int | str | dict | list | None]:
        """One directory as {file: value}; keyed files as {key: value}, fields as a list.

        A value is an int, "max", or None when the cell's status is an error (see ``get``).
        """
        if not 0 <= dir_index < len(self.dirs):
            raise IndexError(f"dir index {dir_index} out of range")
        base, width = dir_index * self.cells_per_dir, self.cells_per_dir
        cells = _cells(self.values[base : base + width], self.status[base : base + width])
        return self._shape(cells, 0)

    def as_dicts(self) -> list[dict[str, int | str | dict | list | None]]:
        """``as_dict`` of every directory; the cells are converted in one pass, not per dir."""
        cells = _cells(self.values, self.status)
        return [self._shape(cells, d * self.cells_per_dir) for d in range(len(self.dirs))]

    def _shape(self, cells: list, base: int) -> dict[str, int | str | dict | list | None]:
        out: dict[str, int | str | dict | list | None] = {}
        for spec, off in zip(self.specs, self._offsets, strict=True):
            at = base + off
            if spec.kind == "single":
                out[spec.name] = cells[at]
            elif spec.kind == "keyed":
                out[spec.name] = dict(zip(spec.keys, cells[at : at + len(spec.keys)], strict=True))
            else:
                out[spec.name] = cells[at : at + len(spec.keys)]
        return out

    def __len__(self) -> int:
        return len(self.dirs)

    def __repr__(self) -> str:
        return f"Snapshot({len(self.dirs)} dirs × {len(self.specs)} files)"


class RootBase:
    """What both cores' ``Root`` share: the root fd's life cycle, argument checks of ``read``
    and the sampler factory. A subclass sets ``sampler_class`` and implements ``_read`` and
    ``_read_dated``."""

    sampler_class: type

    def __init__(self, path: str, fd: int, magic: int):
        self.path = path
        self.fd = fd
        self.magic = magic
        self.is_cgroupfs = magic in (MAGIC_CGROUP, MAGIC_CGROUP2)

    def read(
        self,
        dirs: Sequence[str],
        specs: Sequence[FileSpec],
        threads: int = 0,
        bufsize: int = DEFAULT_BUFSIZE,
    ) -> Snapshot:
        """Open, read and parse every (dir, file) once; threads 0 = one per CPU if worth it
        (the pure core reads sequentially)."""
        check_bufsize(bufsize)
        return self._read(tuple(dirs), tuple(specs), threads, bufsize)

    def read_dated(
        self,
        dirs: Sequence[str],
        specs: Sequence[FileSpec],
        marker: str,
        threads: int = 0,
        bufsize: int = DEFAULT_BUFSIZE,
    ) -> tuple[Snapshot, list[int | None]]:
        """:meth:`read`, and each dir's mtime as ``oldest_mtimes([root fd], dirs, marker)``
        gives it, taken while the read has the dir open (a stat of an open fd resolves no
        path). ValueError for a malformed marker or no specs, before any I/O."""
        check_bufsize(bufsize)
        check_mtime_args((), marker)
        if not specs:
            raise ValueError("a dated read needs at least one file spec")
        return self._read_dated(tuple(dirs), tuple(specs), marker, threads, bufsize)

    def _read(
        self, dirs: tuple[str, ...], specs: tuple[FileSpec, ...], threads: int, bufsize: int
    ) -> Snapshot:
        raise NotImplementedError

    def _read_dated(
        self,
        dirs: tuple[str, ...],
        specs: tuple[FileSpec, ...],
        marker: str,
        threads: int,
        bufsize: int,
    ) -> tuple[Snapshot, list[int | None]]:
        raise NotImplementedError

    def sampler(
        self,
        dirs: Sequence[str],
        specs: Sequence[FileSpec],
        threads: int = 0,
        bufsize: int = DEFAULT_BUFSIZE,
        detect_unlinked: bool | None = None,
    ):
        """A persistent sampler. ``detect_unlinked`` (default: when the root is not cgroupfs)
        adds an fstat per file per sample so a removed file of a plain test tree reads as
        ENOENT; cgroupfs itself answers ENODEV, which needs no extra syscall."""
        if detect_unlinked is None:
            detect_unlinked = not self.is_cgroupfs
        return self.sampler_class(self, dirs, specs, threads, bufsize, detect_unlinked)

    def _fileno(self) -> int:
        if self.fd < 0:
            raise ValueError("cgroup root is closed")
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Closing:
    """``with sampler:`` closes it on exit."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CoreError(OSError, CgallocError):
    """An operation beneath a cgroup root failed; ``errno``, ``path`` and ``value`` say which."""

    def __init__(self, err: int, message: str, path: str, value: str | None = None):
        super().__init__(err, message)
        self.path = path
        self.value = value

    def __str__(self) -> str:
        return self.strerror


class WriteError(CoreError):
    """A write, mkdir or rmdir beneath the root failed."""


def _message(err: int, what: str, reason: str | None) -> str:
    name = _errno.errorcode.get(err, f"errno {err}")
    return f"{what}: {reason or os.strerror(err)} ({name})"


def write_error(err: int, path: str, value: str, reason: str | None = None) -> WriteError:
    return WriteError(err, _message(err, f"cannot write {value!r} to {path}", reason), path, value)


def mkdir_error(err: int, path: str, reason: str | None = None) -> WriteError:
    return WriteError(err, _message(err, f"cannot create directory {path}", reason), path)


def rmdir_error(err: int, path: str, reason: str | None = None) -> WriteError:
    return WriteError(err, _message(err, f"cannot remove directory {path}", reason), path)


def read_error(err: int, path: str, reason: str | None = None) -> CoreError:
    return CoreError(err, _message(err, f"cannot read {path}", reason), path)


def check_op_path(path: str, error, *args) -> None:
    """Raise ``error(EINVAL, path, *args, reason)`` unless ``path`` passes check_relpath."""
    try:
        check_relpath(path)
    except ValueError as exc:
        raise error(_errno.EINVAL, path, *args, reason=str(exc)) from None


def value_text(value: str | bytes | int) -> tuple[str, bytes]:
    """The value as shown in messages and as the bytes written."""
    if isinstance(value, bool) or not isinstance(value, (str, bytes, int)):
        raise TypeError(f"a cgroup value must be str, bytes or int, not {type(value).__name__}")
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace"), value
    text = str(value)
    return text, text.encode()


def not_cgroupfs(path: str, fs: str) -> HostError:
    return HostError(
        f"{path} is not a cgroup filesystem ({fs}); give a cgroup2 mount or, on a v1 or "
        "hybrid host, one controller's mount such as /sys/fs/cgroup/memory"
    )


def root_error(err: int, path: str) -> HostError:
    name = _errno.errorcode.get(err, f"errno {err}")
    return HostError(f"cannot open cgroup root {path}: {os.strerror(err)} ({name})")


def op_error(err: int, path: str, value: str | None) -> WriteError:
    """The error ``Root.mkdir`` (``value`` None) or ``Root.write`` raises for ``err``, with the
    path's problem when it is malformed (EINVAL from the path check)."""
    error, args = (mkdir_error, ()) if value is None else (write_error, (value,))
    if err == _errno.EINVAL:
        try:
            check_op_path(path, error, *args)
        except WriteError as exc:
            return exc
    return error(err, path, *args)


class Stop:
    """A flag ``apply_ops`` checks before each op: ``set()`` (a signal handler's) stops it
    there. One int in an array, so the C core reads the very cell Python sets while it runs
    with the GIL released on another thread."""

    __slots__ = ("cell",)

    def __init__(self) -> None:
        self.cell = array("i", [0])

    def set(self) -> None:
        self.cell[0] = 1

    def clear(self) -> None:
        self.cell[0] = 0

    def __bool__(self) -> bool:
        return self.cell[0] != 0


class Packed:
    """Ops made ready for one ``apply_ops`` call by ``pack_ops`` (``args``: the C core's
    buffers; None: each op alone), so a caller can pack them on one thread and make them on
    another whose call then holds the GIL for nothing but the call."""

    __slots__ = ("args", "ops")

    def __init__(self, ops: list, args: tuple | None = None) -> None:
        self.ops, self.args = ops, args

    def __len__(self) -> int:
        return len(self.ops)


def apply_ops_each(ops, stop: Stop | None = None) -> tuple[int, WriteError | None]:
    """``apply_ops`` one call per op: the pure core's, and the C core's for what its batch
    cannot carry."""
    if isinstance(ops, Packed):
        ops = ops.ops
    for i, (root, path, value) in enumerate(ops):
        if stop:
            return i, None
        try:
            if value is None:
                root.mkdir(path)
            else:
                root.write(path, value)
        except (WriteError, ValueError) as exc:  # ValueError: a path no kernel call can take
            return i, exc
    return len(ops), None
