"""The exporter's systemd unit: what ``cgalloc install-exporter-unit`` writes.

Files (below a root, ``/`` on a real node), each written through :mod:`cgalloc.ops.bootunit`'s
change list (computed first, applied with every earlier change undone if one fails):

- ``/etc/systemd/system/cgalloc-exporter.service`` (template:
  ``cgalloc/data/cgalloc-exporter.service``): ``cgalloc exporter`` without any capability,
  the system and the cgroup tree read-only, restarted on failure;
- ``/etc/systemd/system/multi-user.target.wants/cgalloc-exporter.service``, the enable link;
- ``/etc/cgalloc/exporter.conf``, the exporter's arguments, written only when absent.
"""

from __future__ import annotations

import shlex
from importlib import resources

from cgalloc.errors import InputError
from cgalloc.host import safefs
from cgalloc.ops.bootunit import MARKER, UNIT_DIR, WANTS_DIR, FileChange, _current, _needed

UNIT_NAME = "cgalloc-exporter.service"
CONFIG_FILE = "etc/cgalloc/exporter.conf"
DEFAULT_ARGS = ("--config", "/var/lib/kubelet/config.yaml")


def _template(name: str) -> str:
    return resources.files("cgalloc.data").joinpath(name).read_text()


def unit_text(command: list[str]) -> str:
    """The unit, running ``command`` (the cgalloc executable, as argv) ``exporter``."""
    return f"{MARKER}\n" + _template(UNIT_NAME).replace("@CGALLOC@", shlex.join(command))


def config_text(args: list[str]) -> str:
    """``/etc/cgalloc/exporter.conf`` holding ``args`` (systemd splits it at whitespace)."""
    for arg in args:
        if not arg or any(c.isspace() for c in arg) or any(c in arg for c in "\"'\\$"):
            raise InputError(
                f"exporter argument {arg!r}: the unit's config file is split at whitespace by"
                " systemd; give arguments without spaces, quotes, backslashes or '$'."
            )
    return f"{MARKER}\n" + _template("exporter.conf").replace("@ARGS@", " ".join(args))


def config_args(text: str) -> list[str] | None:
    """The exporter arguments a config file's text sets, None when it sets none."""
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key == "CGALLOC_EXPORTER_ARGS":
            return value.split()
    return None


def install_changes(root: safefs.Beneath, command: list[str], args: list[str]) -> list[FileChange]:
    """Install and enable the unit, write the config file when absent; [] when in place."""
    wanted = [
        FileChange(f"{UNIT_DIR}/{UNIT_NAME}", unit_text(command)),
        FileChange(f"{WANTS_DIR}/{UNIT_NAME}", link=f"/{UNIT_DIR}/{UNIT_NAME}"),
    ]
    if _current(root, CONFIG_FILE)[0] == "absent":
        wanted.append(FileChange(CONFIG_FILE, config_text(args)))
    return [c for c in wanted if _needed(root, c)]


def read_config(root: safefs.Beneath) -> str | None:
    """The text of ``/etc/cgalloc/exporter.conf`` below the root, None when it is absent; a
    link there is refused (the unit reads it as root)."""
    kind, value = _current(root, CONFIG_FILE)
    if kind == "link":
        raise InputError(
            f"/{CONFIG_FILE} is a symbolic link (to {value}); the exporter unit reads it as root, "
            "so install-exporter-unit takes it only as a file of its own: replace the link with "
            "the file."
        )
    return value


def uninstall_changes(root: safefs.Beneath) -> list[FileChange]:
    """Remove the unit when it carries cgalloc's marker and the enable link that points at it;
    the config file stays, and so does anything else at those paths."""
    unit = f"{UNIT_DIR}/{UNIT_NAME}"
    out = []
    for rel in (unit, f"{WANTS_DIR}/{UNIT_NAME}"):
        kind, value = _current(root, rel)
        if rel == unit:
            ours = kind == "file" and value is not None and value.startswith(MARKER)
        else:
            ours = kind == "link" and value == f"/{unit}"
        if ours:
            out.append(FileChange(rel))
    return out
