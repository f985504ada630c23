"""The node's kubelet as the machine shows it: its unit files (where systemd would load them,
or where ``systemctl show`` says it did), its running process and its version.

Everything is read below a root (:class:`NodeFiles`, ``Host.node_root``: ``/`` on a real
node, a directory standing for it in the tests); parsing the text is
``cgalloc/inputs/kubeletunit.py``'s.
"""

from __future__ import annotations

import glob
import os
import posixpath
import stat
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cgalloc.host.machine import Host

FILE_LIMIT = 4 << 20  # a unit, environment or runtime config file is a few KiB
# systemd's unit search path for the system manager, highest priority first
# (systemd.unit(5) "Unit File Load Path"; /lib/systemd/system where /usr is not merged).
UNIT_PATH = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
)
SYSTEMCTL_PROPERTIES = (
    "LoadState",
    "FragmentPath",
    "DropInPaths",
    "NeedDaemonReload",
    "WorkingDirectory",
)


class NodeFiles:
    """The node's files below ``root``; paths in and out are the node's (absolute)."""

    def __init__(self, root: str = "/") -> None:
        self.root = root

    def path(self, node_path: str) -> str:
        """Where ``node_path`` of the node is on this machine."""
        return os.path.join(self.root, node_path.lstrip("/")) if self.root != "/" else node_path

    def read(self, node_path: str, limit: int = FILE_LIMIT) -> str:
        """A regular file's text (UTF-8, at most ``limit`` bytes); OSError (FileNotFoundError
        when absent) or ValueError (too large, not UTF-8, not a regular file)."""
        fd = os.open(self.path(node_path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError("not a regular file")
            chunks, size = [], 0
            while chunk := os.read(fd, 1 << 16):
                size += len(chunk)
                if size > limit:
                    raise ValueError(f"larger than {limit >> 20} MiB")
                chunks.append(chunk)
        finally:
            os.close(fd)
        try:
            return b"".join(chunks).decode()
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None

    def exists(self, node_path: str) -> bool:
        return os.path.lexists(self.path(node_path))

    def is_file(self, node_path: str) -> bool:
        return os.path.isfile(self.path(node_path))

    def is_masked(self, node_path: str) -> bool:
        """A unit or drop-in linked to /dev/null (or empty and linked so): systemd masks it."""
        try:
            return os.readlink(self.path(node_path)) == "/dev/null"
        except OSError:
            return False

    def listdir(self, node_path: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(node_path)))
        except OSError:
            return []

    def glob(self, pattern: str) -> list[str]:
        """The node's paths matching ``pattern``, sorted (glob(3) as systemd and containerd
        expand EnvironmentFile= and imports)."""
        base = self.path("/")
        found = glob.glob(self.path(pattern))
        return sorted("/" + posixpath.relpath(p, base) if self.root != "/" else p for p in found)

    def readlink(self, node_path: str) -> str | None:
        try:
            return os.readlink(self.path(node_path))
        except OSError:
            return None


class UnitFiles(NamedTuple):
    """Where a unit's settings come from, in the order systemd reads them."""

    fragment: str | None
    dropins: list[str]
    masked: bool  # the fragment is linked to /dev/null


def unit_files_on_disk(files: NodeFiles, unit: str) -> UnitFiles:
    """The files systemd would load for ``unit``, from its search path: the first fragment,
    then every ``*.conf`` drop-in of ``<unit>.d/`` and ``service.d/`` in any search directory,
    sorted by name, a name in a higher directory hiding the same name below."""
    fragment = next((d + "/" + unit for d in UNIT_PATH if files.exists(d + "/" + unit)), None)
    masked = fragment is not None and files.is_masked(fragment)
    suffix = unit.rpartition(".")[2]
    by_name: dict[str, str] = {}
    for directory in UNIT_PATH:
        for sub in (f"{unit}.d", f"{suffix}.d"):
            where = f"{directory}/{sub}"
            for name in files.listdir(where):
                if name.endswith(".conf") and name not in by_name:
                    by_name[name] = f"{where}/{name}"
    dropins = [by_name[n] for n in sorted(by_name) if not files.is_masked(by_name[n])]
    return UnitFiles(fragment, dropins, masked)


def systemctl_show(host: Host, unit: str) -> str | None:
    """``systemctl show UNIT -p ...``'s output, None where systemctl does not answer."""
    argv = ["systemctl", "show", unit]
    for prop in SYSTEMCTL_PROPERTIES:
        argv += ["-p", prop]
    return host.run_command(argv)


class Process(NamedTuple):
    """A running kubelet as /proc shows it."""

    pid: int
    argv: list[str]
    cwd: str
    exe: str | None


def kubelet_processes(files: NodeFiles) -> list[Process]:
    """Processes named kubelet that run as root (a process any user may start under that
    name is not the node's kubelet), by pid."""
    found = []
    for name in files.listdir("/proc"):
        if not name.isdigit():
            continue
        base = f"/proc/{name}"
        try:
            if os.stat(files.path(base)).st_uid != 0:
                continue
            comm = files.read(base + "/comm", 4096).strip()
            raw = files.read(base + "/cmdline", 1 << 20)
        except (OSError, ValueError):
            continue  # gone, or not ours to read
        argv = raw.split("\0")
        if argv and argv[-1] == "":
            argv.pop()
        if comm != "kubelet" and not (argv and posixpath.basename(argv[0]) == "kubelet"):
            continue
        cwd = files.readlink(base + "/cwd") or "/"
        found.append(Process(int(name), argv, cwd, files.readlink(base + "/exe")))
    return sorted(found)


def untrusted_executable(files: NodeFiles, node_path: str) -> str | None:
    """Why cgalloc (root) must not run ``node_path``, None when only root can change it: an
    absolute path to a regular file that root owns and no one else may write, in directories
    likewise."""
    if not posixpath.isabs(node_path):
        return f"{node_path} is not an absolute path"
    try:
        st = os.stat(files.path(node_path))
    except OSError as err:
        return f"{node_path}: {err.strerror or err}"
    if not stat.S_ISREG(st.st_mode):
        return f"{node_path} is not a regular file"
    where = node_path
    while True:
        try:
            st = os.stat(files.path(where))
        except OSError as err:
            return f"{where}: {err.strerror or err}"
        if st.st_uid != 0 or st.st_mode & 0o022:
            return f"{where} is writable by others than root"
        if where == "/":
            return None
        where = posixpath.dirname(where)


def run_version(host: Host, files: NodeFiles, node_path: str) -> tuple[str | None, str | None]:
    """(``node_path --version``'s output, why it was not run or failed)."""
    reason = untrusted_executable(files, node_path)
    if reason is not None:
        return None, reason
    out = host.run_command([node_path, "--version"])
    return (out, None) if out else (None, f"`{node_path} --version` gave no answer")
