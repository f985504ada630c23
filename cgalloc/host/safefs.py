"""Paths a root tool must not let a local user steer: directories and files it trusts only when
nobody but root can change them, and files opened below a directory descriptor without
following a symlink.

Trust (sshd's StrictModes, checked from ``/`` down): a directory or file is trusted when it is
owned by root, or by the user running cgalloc (an unprivileged run gains nothing from its own
files; a run as root trusts root's only), and neither group nor others may write it. A
directory that others may write is trusted as a *parent* only when it is sticky (``/tmp``):
there only the owner of an entry may remove or rename it, so a trusted entry below it cannot be
swapped. The final directory or file itself is never trusted writable by group or others,
sticky or not: anyone could add or change what it holds. Symlinks on the way are followed, each
read from a directory already trusted, and every directory they lead through is checked in
turn, so every directory that names a part of the path is.

Files in a trusted directory are opened through its descriptor with ``O_NOFOLLOW``, only as
regular files; temporaries are created with ``O_EXCL | O_NOFOLLOW`` and their mode is set on
the descriptor (whatever the umask). An entry that is not what cgalloc writes there (a symlink,
a directory, a file of another owner, a second hard link) is :class:`Unsafe`, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator

MAX_LINKS = 40  # symlinks followed in one path: the kernel's MAXSYMLINKS
_OPEN_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class Untrusted(Exception):
    """A path the trust rules refuse; ``reason`` says which part and why, as a clause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unsafe(OSError):
    """An entry in a trusted directory that cgalloc will not open, replace or remove: a
    symlink, a directory, a FIFO, a file another user owns or linked elsewhere. An OSError, so a
    run that meets one midway undoes its changes as for any failed write."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(errno.ELOOP if what == "a symbolic link" else errno.EPERM, what, name)
        self.what = what


def trusted_owners() -> frozenset[int]:
    """Root, and the user this process runs as (the same when it runs as root)."""
    return frozenset({0, os.geteuid()})


def trust_problem(
    st: os.stat_result, *, parent: bool, owners: Iterable[int] | None = None
) -> str | None:
    """Why a directory or file with status ``st`` is not trusted, as a predicate ("is owned
    by uid 1000, not by root"); None when it is. ``parent``: a directory only passed
    through, where a sticky one may be writable by others."""
    allowed = trusted_owners() if owners is None else owners
    if st.st_uid not in allowed:
        return f"is owned by uid {st.st_uid}, not by root"
    writable = st.st_mode & 0o022
    sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if writable and not (parent and sticky):
        who = {0o020: "its group", 0o002: "others", 0o022: "its group and others"}[writable]
        return f"is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def _parts(path: str) -> list[str]:
    return [c for c in path.split("/") if c not in ("", ".")]


class TrustedDir:
    """A directory every part of whose path passed the trust rules, open as ``fd``
    (O_RDONLY); ``made`` holds the directories this open created, outermost first, as
    (parent fd, name), for :meth:`remove_made`."""

    def __init__(self, fd: int, path: str, made: list[tuple[int, str]]) -> None:
        self.fd = fd
        self.path = path
        self.made = made

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for parent, _name in self.made:
            os.close(parent)
        self.made = []

    def remove_made(self) -> None:
        """Remove the directories this open created, deepest first, as far as they are empty
        (the directory itself must be emptied by the caller); then close."""
        for parent, name in reversed(self.made):
            try:
                os.rmdir(name, dir_fd=parent)
            except OSError:
                break
        self.close()


def open_trusted_dir(
    path: str, *, create_mode: int | None = None, owners: Iterable[int] | None = None
) -> TrustedDir | None:
    """Resolve ``path`` (relative to the working directory when not absolute) from ``/``,
    checking each directory on the way (:func:`trust_problem`), and open it. None when a part
    is missing, unless ``create_mode`` is given: then the missing directories are made (mode
    0755, the last one ``create_mode``, exactly; never where a symlink points). Raises
    :class:`Untrusted` for a refused part or one that is not a directory, OSError when one
    cannot be looked up (EACCES)."""
    owners = trusted_owners() if owners is None else frozenset(owners)
    if not path.startswith("/"):
        path = _join(os.getcwd(), path)
    todo = _parts(path)[::-1]  # a stack: the next component last
    given = len(todo)  # components of ``path`` itself still in todo (the bottom of the stack)
    root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[tuple[int, str]] = [(root, "/")]  # the physical chain of directories
    made: list[tuple[int, str]] = []
    links = 0
    here = "/"
    try:
        _require(os.fstat(root), "/", parent=True, owners=owners)
        while todo:
            own = len(todo) == given  # a component of ``path``, not of a link's target
            given -= own
            name = todo.pop()
            fd, where = stack[-1]
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            here = _join(where, name)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if create_mode is None:
                    return None  # nothing was made: made is empty
                if not own:  # never made where a symlink points (a dangling one)
                    raise
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                except FileExistsError:
                    todo.append(name)  # made meanwhile: look again
                    given += 1
                    continue
                made.append((os.dup(fd), name))
                _set_mode(fd, name, create_mode if not todo else 0o755)
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise Untrusted(f"{here} leads through more than {MAX_LINKS} symbolic links")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                todo.extend(_parts(target)[::-1])
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise Untrusted(f"{here} is not a directory")
            nfd = os.open(name, _OPEN_DIR, dir_fd=fd)
            stack.append((nfd, here))
            _require(os.fstat(nfd), here, parent=True, owners=owners)
        fd, here = stack[-1]
        _require(os.fstat(fd), here, parent=False, owners=owners)
        out = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    except BaseException as exc:
        TrustedDir(-1, path, made).remove_made()  # what this failed open made goes again
        if isinstance(exc, OSError):
            exc.filename = here  # the whole path of the part that failed
        raise
    finally:
        for fd, _where in stack:
            os.close(fd)
    return TrustedDir(out, path, made)


def _require(st: os.stat_result, where: str, *, parent: bool, owners: frozenset[int]) -> None:
    problem = trust_problem(st, parent=parent, owners=owners)
    if problem:
        raise Untrusted(f"{where} {problem}")


def _set_mode(dirfd: int, name: str, mode: int) -> None:
    """The exact mode of a directory just made (mkdir's mode passes through the umask)."""
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def check_trusted_file(path: str, owners: Iterable[int] | None = None) -> None:
    """Refuse (:class:`Untrusted`) a file that is not regular or that someone but root (and
    the trusted ``owners``) could change, or whose directories up to ``/`` are not trusted;
    symlinks to it are followed as :func:`open_trusted_dir` follows them.
    FileNotFoundError when it is missing."""
    owners = trusted_owners() if owners is None else frozenset(owners)
    seen = 0
    while True:
        parent, name = os.path.split(os.path.abspath(path))
        where = _join(parent, name)
        directory = open_trusted_dir(parent, owners=owners)
        if directory is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), parent)
        try:
            st = os.stat(name, dir_fd=directory.fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                seen += 1
                if seen > MAX_LINKS:
                    raise Untrusted(f"{where} leads through more than {MAX_LINKS} symbolic links")
                target = os.readlink(name, dir_fd=directory.fd)
                path = target if target.startswith("/") else _join(parent, target)
                continue
            if not stat.S_ISREG(st.st_mode):
                raise Untrusted(f"{where} is not a regular file")
            _require(st, where, parent=False, owners=owners)
            return
        finally:
            directory.close()


# ---------------------------------------------------------------- files below a directory fd


def entry_problem(dirfd: int, name: str, owners: Iterable[int] | None = None) -> str | None:
    """Why entry ``name`` of the directory ``dirfd`` is not a file cgalloc may open, replace or
    remove there (as a clause: "is a symbolic link"), None when it is such a file or missing:
    a regular file with one link, owned by a trusted user, writable by them only."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink != 1:
        return f"has {st.st_nlink} hard links"
    return trust_problem(st, parent=False, owners=owners)


def _refuse(dirfd: int, name: str) -> None:
    problem = entry_problem(dirfd, name)
    if problem:
        raise Unsafe(name, _what(problem))


def _what(problem: str) -> str:
    return problem[3:] if problem.startswith("is ") else problem


def _open_regular(dirfd: int, name: str, flags: int) -> int:
    """``name`` below ``dirfd`` opened with ``flags`` | O_NOFOLLOW: the descriptor of a regular
    file; :class:`Unsafe` for a symlink or anything else."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unsafe(name, "a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Unsafe(name, "not a regular file")
    return fd


def open_read_at(dirfd: int, name: str) -> int:
    """The regular file ``name`` below ``dirfd`` opened for reading, without following a
    symlink and without waiting on a FIFO (read it with
    :func:`cgalloc.inputs.loading.read_fd`). FileNotFoundError when missing; :class:`Unsafe`
    for a symlink or anything but a regular file; other OSErrors (EACCES) as they come."""
    return _open_regular(dirfd, name, _OPEN_READ)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` whole and fsync it; a short write (a full disk) is an OSError."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def create_exclusive(dirfd: int, name: str, mode: int) -> int:
    """A new file ``name`` below ``dirfd`` open for writing, created with O_EXCL|O_NOFOLLOW
    and given ``mode`` on its descriptor. A file cgalloc itself could have left there (a
    killed run's temporary: regular, one link, trusted owner) is removed first; anything
    else there is :class:`Unsafe` and left as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o600, dir_fd=dirfd)
    except FileExistsError:
        _refuse(dirfd, name)
        os.unlink(name, dir_fd=dirfd)
        fd = os.open(name, flags, 0o600, dir_fd=dirfd)
    return _with_mode(fd, mode)


def _with_mode(fd: int, mode: int) -> int:
    """``fd``, its file given ``mode`` (closed if that fails)."""
    try:
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_at(dirfd: int, name: str, data: bytes, mode: int, tmp: str | None = None) -> None:
    """Replace ``name`` below ``dirfd`` with ``data`` atomically and durably: written to the
    exclusive temporary ``tmp`` (default ``name.tmp``), fsync-ed, renamed over ``name``. An
    existing ``name`` that is not a file cgalloc may replace is :class:`Unsafe` (the
    temporary is removed again)."""
    tmp = tmp or f"{name}.tmp"
    _refuse(dirfd, name)
    fd = create_exclusive(dirfd, tmp, mode)
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        _refuse(dirfd, name)
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dirfd)
        raise


def append_at(dirfd: int, name: str, data: bytes, mode: int) -> None:
    """Append ``data`` to ``name`` below ``dirfd`` (created with ``mode`` when missing),
    durably; :class:`Unsafe` when it is not a file cgalloc may write."""
    _refuse(dirfd, name)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = open_file_at(dirfd, name, flags, mode)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def open_file_at(dirfd: int, name: str, flags: int, mode: int) -> int:
    """``name`` below ``dirfd`` opened with ``flags`` | O_NOFOLLOW (a symlink is
    :class:`Unsafe`), a regular file only, with ``mode`` set on the descriptor."""
    return _with_mode(_open_regular(dirfd, name, flags), mode)


def unlink_at(dirfd: int, name: str) -> None:
    """Remove the file ``name`` below ``dirfd`` if it is there; :class:`Unsafe` (and left as
    it is) when it is not a file cgalloc may remove."""
    _refuse(dirfd, name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dirfd)


def sync_dir(dirfd: int) -> None:
    """Make a name created, replaced or removed in the directory durable."""
    os.fsync(dirfd)


def first_problems(paths: Iterable[str], most: int = 5) -> tuple[list[str], int]:
    """The trust problems of ``paths`` (:func:`open_trusted_dir` for a directory, which must
    not be writable by others itself, :func:`check_trusted_file` for a file, whose directory
    must not be either), each as "PATH is ...": at most ``most`` of them, and how many there
    are in all. Paths missing or unreadable here are skipped."""
    found: list[str] = []
    for path in dict.fromkeys(os.path.abspath(p) for p in paths):
        try:
            if os.path.isdir(path):
                opened = open_trusted_dir(path)
                if opened is not None:
                    opened.close()
            else:
                check_trusted_file(path)
        except Untrusted as exc:
            found.append(exc.reason)
        except OSError:
            pass  # gone meanwhile, or not ours to read
    unique = list(dict.fromkeys(found))
    return unique[:most], len(unique)


# ---------------------------------------------------------------- paths below an operator's root


class Beneath:
    """A directory the operator names (``--root``), opened once; every path below it is
    resolved through :func:`cgalloc.host.core.open_beneath` (openat2 without symlinks, or the
    O_NOFOLLOW walk): a symlink in any component is ELOOP, so nothing outside the directory is
    ever reached, and the last component is acted on through its parent's descriptor."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @contextlib.contextmanager
    def parent(self, rel: str) -> Iterator[tuple[int, str]]:
        """(descriptor of ``rel``'s directory, ``rel``'s last component)."""
        from cgalloc.host import core

        head, _, name = rel.rpartition("/")
        if not head:
            yield self.fd, name
            return
        fd = core.open_beneath(self.fd, head, os.O_PATH | os.O_DIRECTORY)
        try:
            yield fd, name
        finally:
            os.close(fd)

    def lstat(self, rel: str) -> os.stat_result | None:
        """``rel``'s own status (a symlink's, not its target's); None when it is missing (or
        a part of its path is a file)."""
        try:
            with self.parent(rel) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def readlink(self, rel: str) -> str:
        with self.parent(rel) as (fd, name):
            return os.readlink(name, dir_fd=fd)

    def open_read(self, rel: str) -> int:
        """:func:`open_read_at` below the root."""
        with self.parent(rel) as (fd, name):
            return open_read_at(fd, name)

    def entry_problem(self, rel: str) -> str | None:
        """:func:`entry_problem` of ``rel``; None also when its directory is missing."""
        try:
            with self.parent(rel) as (fd, name):
                return entry_problem(fd, name)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def directories(self, rel: str) -> list[tuple[str, os.stat_result]]:
        """(path, status) of each existing directory ``rel`` lies in, the root's first ("");
        stops at the first one missing or not a directory."""
        out = [("", os.fstat(self.fd))]
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            st = self.lstat("/".join(parts[:i]))
            if st is None or not stat.S_ISDIR(st.st_mode):
                break
            out.append(("/".join(parts[:i]), st))
        return out

    def symlink_on_the_way(self, rel: str) -> str | None:
        """The first component of ``rel`` that is a symlink (for a refusal's words)."""
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            try:
                st = self.lstat("/".join(parts[:i]))
            except OSError:
                return None
            if st is None:
                return None
            if stat.S_ISLNK(st.st_mode):
                return "/".join(parts[:i])
        return None

    def makedirs(self, rel: str, mode: int) -> list[str]:
        """Make the missing directories of ``rel`` (itself included), each with ``mode``
        exactly; the ones made, outermost first."""
        made = []
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if self.lstat(sub) is not None:
                continue
            with self.parent(sub) as (fd, name):
                os.mkdir(name, 0o700, dir_fd=fd)
                made.append(sub)
                _set_mode(fd, name, mode)
        return made

    def write(self, rel: str, data: bytes, mode: int) -> None:
        """Replace ``rel`` with ``data`` (:func:`replace_at`, the temporary ``.NAME.cgalloc-tmp``
        beside it)."""
        with self.parent(rel) as (fd, name):
            replace_at(fd, name, data, mode, tmp=temporary(name))

    def symlink(self, rel: str, target: str) -> None:
        with self.parent(rel) as (fd, name):
            os.symlink(target, name, dir_fd=fd)

    def unlink(self, rel: str) -> None:
        """Remove the file or symlink ``rel`` (never what a symlink points to)."""
        with self.parent(rel) as (fd, name):
            os.unlink(name, dir_fd=fd)

    def rmdir(self, rel: str) -> None:
        with self.parent(rel) as (fd, name):
            os.rmdir(name, dir_fd=fd)


def temporary(name: str) -> str:
    """The temporary a file ``name`` below an operator's root is written to first."""
    return f".{name}.cgalloc-tmp"
