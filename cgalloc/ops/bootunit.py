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
"""

from __future__ import annotations

import os
import posixpath
import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cgalloc.errors import CgallocError, InputError
from cgalloc.host.systemd import slice_unit
from cgalloc.inputs.loading import read_bounded
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


def _current(root: Path, rel: str) -> tuple[str, str | None]:
    """``(kind, value)`` of a path: ("absent", None), ("link", target) or ("file", text)."""
    path = root / rel
    if path.is_symlink():
        return "link", os.readlink(path)
    if path.is_file():  # bounded and strict: a root tool reads what a user may have put there
        return "file", read_bounded(str(path), "--root", kind=CONFIG_KIND)
    if path.exists():
        raise InputError(f"/{rel} exists and is not a file; remove it first.")
    return "absent", None


def _needed(root: Path, change: FileChange) -> bool:
    kind, value = _current(root, change.path)
    if change.link is not None:
        return (kind, value) != ("link", change.link)
    if change.content is not None:
        return (kind, value) != ("file", change.content)
    return kind != "absent"


def install_changes(
    root: Path, command: list[str], args: list[str], dropins: dict[str, str | None]
) -> list[FileChange]:
    """The changes that install the unit, enable it, write the config file when absent and the
    drop-ins (daemon -> slice); empty when all is in place."""
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


def uninstall_changes(root: Path) -> list[FileChange]:
    """Remove the unit, its enable link and the drop-ins cgalloc wrote; the config file stays
    (it holds the operator's arguments)."""
    paths = [f"{UNIT_DIR}/{UNIT_NAME}", f"{WANTS_DIR}/{UNIT_NAME}"]
    paths += [f"{UNIT_DIR}/{unit}.d/{DROPIN_NAME}" for unit in DAEMON_UNITS.values()]
    out = []
    for rel in paths:
        kind, value = _current(root, rel)
        ours = kind == "link" or (kind == "file" and value is not None and value.startswith(MARKER))
        if ours:
            out.append(FileChange(rel))
    return out


def _restore(root: Path, rel: str, kind: str, value: str | None) -> None:
    path = root / rel
    if path.is_symlink() or path.exists():
        path.unlink()
    if kind == "link":
        path.symlink_to(value)
    elif kind == "file":
        path.write_text(value or "")


def apply_changes(root: Path, changes: list[FileChange]) -> None:
    """Make ``changes`` below ``root``; if one fails, undo the earlier ones and raise."""
    done: list[tuple[str, str, str | None]] = []
    made: list[Path] = []  # directories created, removed again on failure
    try:
        for change in changes:
            kind, value = _current(root, change.path)
            path = root / change.path
            done.append((change.path, kind, value))
            if kind != "absent":
                path.unlink()
            if change.content is None and change.link is None:
                continue
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            for directory in reversed(missing):
                directory.mkdir()
                made.append(directory)
            if change.link is not None:
                path.symlink_to(change.link)
            else:
                tmp = path.with_name(f".{path.name}.cgalloc-tmp")
                tmp.write_text(change.content)
                tmp.chmod(0o644)
                tmp.rename(path)
    except OSError as exc:
        for rel, kind, value in reversed(done):
            _restore(root, rel, kind, value)
        for directory in reversed(made):
            directory.rmdir()
        raise CgallocError(
            f"cannot write /{change.path}: {exc.strerror or exc}; "
            "every file changed before it was restored."
        ) from None
