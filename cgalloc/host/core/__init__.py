"""The cgroup I/O core: bulk reads, a persistent sampler and safe writes beneath a root.

Two implementations share one interface: ``native`` (csrc/cgcore.c through cffi; the GIL is
released during every call, reads run on one thread per CPU) and ``pure`` (Python, used only
when the extension cannot be imported; no environment variable or option selects it, so a root
tool never loads other code than it was installed with). ``IMPLEMENTATION`` names the one in
use, ``PURE_REASON`` why the pure one (None with the C core). Tests import ``core.pure``
directly.

Interface::

    root = open_root(path, allow_any_fs=False)   # HostError unless statfs says cgroup/cgroup2;
                                                 # on v1/hybrid open each controller mount
    snap = root.read(dirs, specs, threads=0, bufsize=65536)
    snap, mtimes = root.read_dated(dirs, specs, marker, threads=0, bufsize=65536)
        # read, and each dir's mtime as oldest_mtimes([root's fd], dirs, marker) gives it,
        # taken through the dir fd the read opens anyway
    sampler = root.sampler(dirs, specs, threads=0, bufsize=65536, detect_unlinked=None)
    sampler.set_policy(dirfds, kept=None)
    snap = sampler.sample(); sampler.update(new_dirs); sampler.close()
        # by default keeps one fd per file, one pread per file per sample; set_policy keeps an
        # O_PATH fd for dirs [0, dirfds) and file f open for dirs [0, kept[f]) only, the rest
        # opened (through the dir fd where there is one), read and closed each sample, so
        # no seq_file page stays pinned for them; a vanished cgroup's fds are
        # closed and its cells read ENOENT (reopened once, and again each sample, so a
        # re-created cgroup comes back). detect_unlinked (default: root is not cgroupfs) adds
        # an fstat per file so plain test trees can show removal; leave it off for benches.
    root.write(relpath, value); root.mkdir(relpath); root.rmdir(relpath)
    text = root.read_text(relpath)
    ns = oldest_mtimes(dirfds, dirs, marker="", threads=0)
        # each dir's oldest mtime in ns, of the dir and its file marker, over the fds that
        # hold it (None where none does); on one thread per CPU as reads are
    got = read_files(dirfd, paths, slot=512, threads=0, no_symlinks=False)
        # each file below an fd with one read: its bytes, or -errno (-EFBIG when it fills
        # the slot, -EISDIR for a directory: it exists); no_symlinks resolves as writes do
    made, error = apply_ops([(root, relpath, value_or_None_for_mkdir), ...], stop=None)
        # in order until one fails (error: the WriteError write/mkdir raise, else None) or
        # a Stop (set by a signal handler, even while the call runs) is found set before an
        # op (made < len, error None); the C core makes them all in one call
        # (csrc/apply_batch.c)
    packed = pack_ops(ops)
        # the same ops ready for apply_ops(packed, stop), which then only makes them: pack
        # on one thread, make on another
    fd = open_beneath(dirfd, relpath, flags, mode=0)
        # a file or directory below any directory fd, resolved as writes are (no symlink in
        # any component: ELOOP); the boot unit's files below --root

Records:

``FileSpec(name, kind="single", keys=())`` - a file read in every directory. ``kind`` is
  ``"single"`` (one value: ``123``, ``max``), ``"keyed"`` (``key value`` lines such as
  memory.stat, cpu.stat, cpuacct.stat; one cell per key in ``keys``; when a key repeats, the
  first line wins) or ``"fields"`` (space-separated values on one line such as cpu.max
  ``max 100000``; one cell per name in ``keys``; a different field count makes every cell
  EPARSE).

``Snapshot`` - ``dirs``, ``specs``, and per cell (dir d, file f, key k) a uint64 in
  ``values`` and a uint8 in ``status`` at ``d * cells_per_dir + offset(f) + k``;
  ``get(d, f, k) -> (status, value)``; ``as_dict(d)`` -> ``{file: value}`` with
  ``{key: value}`` for keyed and a list for fields files, each value an int, ``"max"``, or
  None on error. Memory: 9 bytes per cell.

Status codes: ``OK`` (value holds the number), ``MAX`` (``max`` or ``-1``; value 0),
``ENOENT`` (the cgroup or file is gone; a cgroup removed mid-read is data, not an exception),
``EPARSE`` (not a number: empty, NUL, sign, letters...), ``ERANGE`` (beyond 2**64-1),
``ETOOLONG`` (content of ``bufsize`` bytes or more), ``EMISSING_KEY``, ``EIO`` (any other
error, including a symlink in the path).

A malformed directory raises ValueError before any I/O. Paths are relative to the root
(``""`` is the root itself as a read directory) with no ``.``, ``..`` or empty components;
below a Root they are resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
RESOLVE_NO_MAGICLINKS), or an O_NOFOLLOW walk where openat2 is missing. ``oldest_mtimes`` and
``read_files`` take plain directory fds and resolve as openat does (symlinks followed but a
final one's own mtime taken), as the paths they replace did: they only read. ``read_files``
with ``no_symlinks`` resolves as a Root does (a symlink anywhere is ELOOP).
Failures raise ``WriteError`` (write, mkdir, rmdir) or ``CoreError`` (read_text), both
OSError with ``errno``, ``path`` and ``value``, e.g. ``cannot write '104857600' to
kubepods/memory.max: Device or resource busy (EBUSY)``.
"""

from __future__ import annotations

from cgalloc.host.core.records import (
    EIO,
    EMISSING_KEY,
    ENOENT,
    EPARSE,
    ERANGE,
    ETOOLONG,
    MAX,
    OK,
    STATUS_NAMES,
    CoreError,
    FileSpec,
    Packed,
    Snapshot,
    Stop,
    WriteError,
)

# Why the pure core is in use (None with the C core): `cgalloc --version` reports it.
PURE_REASON: str | None = None
try:
    from cgalloc.host.core import native as _impl
except ImportError as exc:  # extension not built: same interface, slower
    from cgalloc.host.core import pure as _impl

    PURE_REASON = f"C extension not importable: {exc}"

IMPLEMENTATION: str = _impl.IMPLEMENTATION
Root = _impl.Root
Sampler = _impl.Sampler
open_root = _impl.open_root
oldest_mtimes = _impl.oldest_mtimes
open_beneath = _impl.open_beneath
read_files = _impl.read_files
apply_ops = _impl.apply_ops
pack_ops = _impl.pack_ops

__all__ = [
    "EIO",
    "EMISSING_KEY",
    "ENOENT",
    "EPARSE",
    "ERANGE",
    "ETOOLONG",
    "IMPLEMENTATION",
    "MAX",
    "OK",
    "PURE_REASON",
    "STATUS_NAMES",
    "CoreError",
    "FileSpec",
    "Packed",
    "Root",
    "Sampler",
    "Snapshot",
    "Stop",
    "WriteError",
    "apply_ops",
    "oldest_mtimes",
    "open_beneath",
    "open_root",
    "pack_ops",
    "read_files",
]
