"""The boot unit and the daemons' drop-ins: what ``cgalloc install-unit`` writes, and writing it.

Files (below a root, ``/`` on a real node):

- ``/etc/systemd/system/cgalloc-setup.service`` runs ``cgalloc setup`` at boot before the
  container runtime and the kubelet (template: ``cgalloc/data/cgalloc-setup.service``);
- ``/etc/systemd/system/multi-user.target.wants/cgalloc-setup.service``, the link
  ``systemctl enable`` makes;
- ``/etc/cgalloc/setup.conf``, the setup arguments, written only when absent;
- ``/etc/systemd/system/<daemon>.service.d/50-cgalloc.conf`` per daemon: ``Slice=`` its
  kube-reserved slice, and ordered after the boot unit.

Changes are computed first (``FileChange``), then applied with every earlier change undone if
one fails.

Below the root (``--root DIR``, an image being built, or ``/``), every path is resolved through
:class:`cgalloc.host.safefs.Beneath`: no component may be a symlink (one that could lead out of
DIR is refused, with exit 2, before anything is written), files are written to an exclusive
temporary made with O_EXCL|O_NOFOLLOW and their mode set on its descriptor, then renamed into
place. install-unit writes only where root alone can change what it writes (the trust rules of
:mod:`cgalloc.host.safefs`, as for the state directory), replaces only files that carry
:data:`MARKER`, and uninstall removes only those and the enable link that points at cgalloc's
unit: a packaged unit, an operator's drop-in or another link at the same path stays. The boot
unit runs this interpreter and package as root at every boot, so install-unit refuses them when
a user other than root could change them (:func:`boot_code_paths`).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import posixpath
import shlex
import site
import stat
import sys
from dataclasses import dataclass
from importlib import resources

from cgalloc.errors import CgallocError, InputError
from cgalloc.host import safefs
from cgalloc.host.systemd import slice_unit
from cgalloc.inputs.kubeletunit import unit_assignments
from cgalloc.inputs.loading import FILE_LIMIT, bounded_text, read_fd
from cgalloc.model.naming import SYSTEMD, driver, reserved_path
from cgalloc.model.nodeconfig import NodeConfig

UNIT_NAME = "cgalloc-setup.service"
UNIT_DIR = "etc/systemd/system"
WANTS_DIR = f"{UNIT_DIR}/multi-user.target.wants"
CONFIG_FILE = "etc/cgalloc/setup.conf"
CONFIG_KIND = "systemd unit or environment file"  # what install-unit reads below --root
DROPIN_NAME = "50-cgalloc.conf"
DEFAULT_SETUP_ARGS = ("--match-kubelet",)  # a boot run follows the node's kubelet
DAEMON_UNITS = {
    "kubelet": "kubelet.service",
    "containerd": "containerd.service",
    "crio": "crio.service",
}
# First line of every file cgalloc writes: uninstall removes only files that carry it.
MARKER = "# Written by cgalloc install-unit"
# Setup options that make no sense at boot: a dry run does nothing, --capacity plans another node.
BOOT_REFUSED = {"dry_run": "--dry-run", "capacity": "--capacity"}


def _template(name: str) -> str:
    return resources.files("cgalloc.data").joinpath(name).read_text()


def unit_text(command: list[str]) -> str:
    """The boot unit, running ``command`` (the cgalloc executable, as argv) ``setup``."""
    return f"{MARKER}\n" + _template(UNIT_NAME).replace("@CGALLOC@", shlex.join(command))


def config_text(args: list[str]) -> str:
    """``/etc/cgalloc/setup.conf`` holding ``args``."""
    for arg in args:
        if not arg or any(c.isspace() for c in arg) or any(c in arg for c in "\"'\\$"):
            raise InputError(
                f"setup argument {arg!r}: the boot unit's config file is split at whitespace "
                "by systemd; give arguments without spaces, quotes, backslashes or '$'."
            )
    return f"{MARKER}\n" + _template("setup.conf").replace("@ARGS@", " ".join(args))


def config_args(text: str) -> list[str] | None:
    """The setup arguments in a config file's text, None when it sets none."""
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key == "CGALLOC_SETUP_ARGS":
            return value.split()
    return None


def daemon_slice(cfg: NodeConfig, daemon: str) -> str | None:
    """The slice unit ``daemon`` belongs in (its kube-reserved cgroup), None when its unit
    already is that cgroup. InputError when systemd cannot keep it there."""
    if daemon not in DAEMON_UNITS:
        raise InputError(
            f"--daemons {daemon!r} is not one of {', '.join(DAEMON_UNITS)} (comma-separated)."
        )
    if not driver(cfg.cgroup_driver).slices:
        raise InputError(
            "--daemons needs --cgroup-driver systemd in the setup arguments: systemd keeps a "
            "unit only in a slice; with cgroupfs set kubeletCgroups in the kubelet config and "
            "the runtime's own cgroup (containerd [cgroup] path) instead."
        )
    if not cfg.kube_reserved_cgroup:
        raise InputError(
            "--daemons needs --kube-reserved-cgroup (e.g. /kube.slice) in the setup arguments: "
            "it is the slice the daemons are put in."
        )
    path = reserved_path(cfg.kube_reserved_cgroup, "--kube-reserved-cgroup", SYSTEMD).lstrip("/")
    if posixpath.basename(path) == DAEMON_UNITS[daemon]:
        return None  # the reservation is the daemon's own unit: nothing to move
    unit = slice_unit(path)
    if unit is None:
        raise InputError(
            f"--daemons {daemon}: --kube-reserved-cgroup {cfg.kube_reserved_cgroup!r} is another "
            "unit, not a slice; give a slice such as /kube.slice to hold several daemons."
        )
    return unit


def dropin_text(daemon: str, slice_name: str | None) -> str:
    """The drop-in keeping ``daemon`` in ``slice_name`` and ordered after the boot unit."""
    lines = [
        f"{MARKER}: {daemon} starts after the cgroup tree exists,",
        "# in its kube-reserved slice (systemd re-applies Slice= on every start).",
        "[Unit]",
        f"Wants={UNIT_NAME}",
        f"After={UNIT_NAME}",
    ]
    if slice_name:
        lines += ["", "[Service]", f"Slice={slice_name}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class FileChange:
    """One file below the root: write ``content``, link to ``link``, or remove (both None)."""

    path: str  # relative to the root, no leading '/'
    content: str | None = None
    link: str | None = None

    def describe(self) -> str:
        if self.link is not None:
            return f"link /{self.path} -> {self.link}"
        return f"{'write' if self.content is not None else 'remove'} /{self.path}"


def _refusal(root: safefs.Beneath, rel: str, exc: OSError) -> InputError:
    if exc.errno == errno.ELOOP:
        link = root.symlink_on_the_way(rel) or rel
        return InputError(
            f"--root {root.path}: /{link} is a symbolic link; install-unit resolves every path "
            "below --root without following one (it could lead out of --root), so it wrote "
            "nothing: make it a directory, or give the directory it points to as --root."
        )
    return InputError(f"--root {root.path}: cannot read /{rel} ({exc.strerror or exc}).")


def _current(root: safefs.Beneath, rel: str) -> tuple[str, str | None]:
    """``(kind, value)`` of a path: ("absent", None), ("link", target) or ("file", text)."""
    try:
        st = root.lstat(rel)
        if st is None:
            return "absent", None
        if stat.S_ISLNK(st.st_mode):
            return "link", root.readlink(rel)
        if stat.S_ISREG(st.st_mode):  # bounded and strict: a user may have put it there
            fd = root.open_read(rel)
            try:
                data = read_fd(fd, FILE_LIMIT)
            finally:
                os.close(fd)
            where = os.path.join(root.path, rel)
            return "file", bounded_text(data, where, "--root", kind=CONFIG_KIND)
    except NotADirectoryError:
        return "absent", None  # below a file: writing it fails, and is undone (apply_changes)
    except OSError as exc:
        raise _refusal(root, rel, exc) from None
    raise InputError(f"/{rel} exists and is not a file; remove it first.")


def _ours(change: FileChange, kind: str, value: str | None) -> None:
    """Refuse to replace what install-unit did not write (no :data:`MARKER`; a link where a
    file goes, or a link to another unit)."""
    if kind == "absent":
        return
    if change.link is not None:
        if kind == "link" and value == change.link:
            return
        what = f"links to {value}" if kind == "link" else "is a file"
        raise InputError(
            f"/{change.path} {what}, not to cgalloc's unit; install-unit replaces only what it "
            "wrote: remove it first (systemctl disable) and run again."
        )
    if kind == "file" and value is not None and value.startswith(MARKER):
        return
    what = f"is a symbolic link to {value}" if kind == "link" else "was not written by cgalloc"
    raise InputError(
        f"/{change.path} {what}; install-unit replaces only files that carry its marker line "
        "(a packaged unit or an operator's drop-in stays): move it aside and run again."
    )


def _needed(root: safefs.Beneath, change: FileChange) -> bool:
    kind, value = _current(root, change.path)
    if change.link is not None:
        _ours(change, kind, value)
        return (kind, value) != ("link", change.link)
    if change.content is not None:
        _ours(change, kind, value)
        return (kind, value) != ("file", change.content)
    return kind != "absent"


def install_changes(
    root: safefs.Beneath, command: list[str], args: list[str], dropins: dict[str, str | None]
) -> list[FileChange]:
    """The changes that install the unit, enable it, write the config file when absent and the
    drop-ins (daemon -> slice); empty when all is in place. InputError when a file in the way
    is not one install-unit wrote."""
    wanted = [
        FileChange(f"{UNIT_DIR}/{UNIT_NAME}", unit_text(command)),
        FileChange(f"{WANTS_DIR}/{UNIT_NAME}", link=f"/{UNIT_DIR}/{UNIT_NAME}"),
    ]
    if _current(root, CONFIG_FILE)[0] == "absent":
        wanted.append(FileChange(CONFIG_FILE, config_text(args)))
    for daemon, slice_name in dropins.items():
        rel = f"{UNIT_DIR}/{DAEMON_UNITS[daemon]}.d/{DROPIN_NAME}"
        wanted.append(FileChange(rel, dropin_text(daemon, slice_name)))
    return [c for c in wanted if _needed(root, c)]


def read_config(root: safefs.Beneath) -> str | None:
    """The text of ``/etc/cgalloc/setup.conf`` below the root, None when it is absent."""
    kind, value = _current(root, CONFIG_FILE)
    if kind == "link":
        raise InputError(
            f"/{CONFIG_FILE} is a symbolic link (to {value}); the boot unit reads it as root, so "
            "install-unit takes it only as a file of its own: replace the link with the file."
        )
    return value


def trust_problems(root: safefs.Beneath, paths: list[str]) -> list[str]:
    """Why root alone could not change what the boot unit reads at boot below the root: the
    root and its parents up to /, the directories of ``paths`` (relative to the root; those
    that hold them must not be writable by others even when sticky), the files among them that
    exist and their temporaries (:func:`cgalloc.host.safefs.entry_problem`). One line each."""
    found: list[str] = []
    try:
        opened = safefs.open_trusted_dir(root.path)
    except safefs.Untrusted as exc:
        found.append(exc.reason)
    else:
        if opened is not None:
            opened.close()
    for rel in paths:
        holder = rel.rpartition("/")[0]
        for sub, st in root.directories(rel)[1:]:
            problem = safefs.trust_problem(st, parent=sub != holder)
            if problem:
                found.append(f"/{sub} {problem}")
        for name in (rel, f"{holder}/{safefs.temporary(posixpath.basename(rel))}"):
            st = root.lstat(name)
            if st is None or (name == rel and stat.S_ISLNK(st.st_mode)):
                continue  # a link in place of a file is refused by _ours, with its target
            problem = root.entry_problem(name)
            if problem:
                found.append(f"/{name} {problem}")
    return list(dict.fromkeys(found))


def boot_code_paths(executable: str) -> list[str]:
    """What the boot unit runs as root at every boot: the interpreter, its virtual
    environment's ``pyvenv.cfg``, the directories Python searches at boot (``sys.path`` but
    its first entry, the working directory or the script's, ``/`` at boot) and the ``.pth``
    files it runs from the site directories, every file of the cgalloc package, and every
    module this process loaded from those directories."""
    paths = [executable]
    cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    if os.path.exists(cfg):
        paths.append(cfg)
    search = [p for p in sys.path[1:] if p and os.path.isdir(p)]
    paths += search
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    for directory in dict.fromkeys(d for d in sites if os.path.isdir(d)):
        paths += sorted(glob.glob(os.path.join(glob.escape(directory), "*.pth")))
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        paths += [os.path.join(dirpath, n) for n in sorted(filenames)]
    prefixes = tuple(os.path.join(p, "") for p in search)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.startswith(prefixes):
            paths.append(file)
    return list(dict.fromkeys(paths))


def uninstall_changes(root: safefs.Beneath) -> list[FileChange]:
    """Remove the unit and the drop-ins cgalloc wrote (those carrying its marker) and the
    enable link that points at its unit; the config file stays (it holds the operator's
    arguments), and so does anything else at those paths."""
    unit = f"{UNIT_DIR}/{UNIT_NAME}"
    out = []
    for rel in [unit, f"{WANTS_DIR}/{UNIT_NAME}"] + [
        f"{UNIT_DIR}/{u}.d/{DROPIN_NAME}" for u in DAEMON_UNITS.values()
    ]:
        kind, value = _current(root, rel)
        if rel.startswith(WANTS_DIR):
            ours = kind == "link" and value == f"/{unit}"
        else:
            ours = kind == "file" and value is not None and value.startswith(MARKER)
        if ours:
            out.append(FileChange(rel))
    return out


def dropin_slices(root: safefs.Beneath, changes: list[FileChange]) -> list[str]:
    """The slices named by ``Slice=`` in the drop-ins ``changes`` remove (read before they go)."""
    names = []
    for change in changes:
        if not change.path.endswith(f".d/{DROPIN_NAME}"):
            continue
        kind, text = _current(root, change.path)
        if kind == "file" and text:
            names += [
                v for sec, k, v in unit_assignments(text) if (sec, k) == ("Service", "Slice") and v
            ]
    return list(dict.fromkeys(names))


def stop_loaded_slices(names: list[str]) -> list[str]:
    """After uninstall: stop each slice in ``names`` that systemd loaded only for the removed
    ``Slice=`` drop-ins (no unit file of its own, not a transient unit setup started, which
    teardown stops) once no process runs in it. At boot systemd starts such a slice for the
    daemons before the boot unit runs, so setup never started it and teardown leaves it.
    Returns what was done or left, a line each."""
    from cgalloc.host import procs
    from cgalloc.host.dbus import Systemd
    from cgalloc.host.systemd import UNIT, SystemdError

    out = []
    client = Systemd()
    try:
        for name in names:
            try:
                if client.unit_path(name) is None:
                    continue
                if client.get(name, "ActiveState", UNIT)[1] != "active":
                    continue
                if client.get(name, "FragmentPath", UNIT)[1]:
                    continue  # an operator's unit file, or setup's transient slice
                cgroup = str(client.get(name, "ControlGroup")[1])
                if not cgroup.startswith("/") or cgroup == "/":
                    continue  # not realized: nothing to tell its processes by
                pids = [p for key in ("", "systemd") for p, *_ in procs.in_cgroups({cgroup}, key)]
                if pids:
                    shown = ", ".join(str(p) for p in sorted(set(pids))[:5])
                    out.append(
                        f"left {name} active: processes run in it (pid {shown}); once they"
                        f" have ended, `systemctl stop {name}`"
                    )
                    continue
                client.stop_unit(name)
                out.append(f"stopped {name}: systemd had loaded it only for the drop-ins")
            except SystemdError as err:
                out.append(f"left {name}: {err}")
    finally:
        client.close()
    return out


def _restore(root: safefs.Beneath, rel: str, kind: str, value: str | None) -> None:
    if root.lstat(rel) is not None:
        root.unlink(rel)
    if kind == "link":
        root.symlink(rel, value or "")
    elif kind == "file":
        root.write(rel, (value or "").encode(), 0o644)


def apply_changes(root: safefs.Beneath, changes: list[FileChange]) -> None:
    """Make ``changes`` below ``root``; if one fails, undo the earlier ones and raise."""
    done: list[tuple[str, str, str | None]] = []
    made: list[str] = []  # directories created, removed again on failure
    try:
        for change in changes:
            kind, value = _current(root, change.path)
            done.append((change.path, kind, value))
            if change.content is None and change.link is None:
                root.unlink(change.path)
                continue
            made += root.makedirs(change.path.rpartition("/")[0], 0o755)
            if change.link is not None:
                if kind != "absent":
                    root.unlink(change.path)
                root.symlink(change.path, change.link)
            else:
                root.write(change.path, change.content.encode(), 0o644)
    except OSError as exc:
        for rel, kind, value in reversed(done):
            with contextlib.suppress(OSError):
                _restore(root, rel, kind, value)
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                root.rmdir(directory)
        raise CgallocError(
            f"cannot write /{change.path}: {exc.strerror or exc}; "
            "every file changed before it was restored."
        ) from None
