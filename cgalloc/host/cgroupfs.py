"""The cgroup hierarchy mounted on this host: read from ``/proc/self/mountinfo`` and the root's
``cgroup.controllers`` (:class:`cgalloc.model.hierarchy.Hierarchy` says what it holds). Writing is
the C core's job."""

from __future__ import annotations

import os

from cgalloc.errors import HostError
from cgalloc.model.hierarchy import V1_CONTROLLERS, Hierarchy


def unescape(text: str) -> str:
    """A mountinfo field with its escapes undone: space, tab, newline and backslash are
    written as \\ooo octal."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 4].isdigit():
            out.append(chr(int(text[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str, frozenset[str]]]:
    """Cgroup mounts in mountinfo text as (mountpoint, fstype, super options)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if len(fields) < sep + 4 or len(fields) < 5:
            continue
        fstype = fields[sep + 1]
        if fstype in ("cgroup", "cgroup2"):
            options = frozenset(fields[sep + 3].split(","))
            mounts.append((unescape(fields[4]), fstype, options))
    return mounts


def _v1_controllers(options: frozenset[str]) -> set[str]:
    names = {o for o in options if o in V1_CONTROLLERS}
    names.update(o.split("=", 1)[1] for o in options if o.startswith("name="))
    return names


def _read_words(path: str) -> frozenset[str]:
    try:
        with open(path, encoding="ascii") as f:
            return frozenset(f.read().split())
    except OSError:
        return frozenset()


def detect(root: str = "/sys/fs/cgroup", mountinfo: str = "/proc/self/mountinfo") -> Hierarchy:
    """The hierarchy mounted at or under ``root``.

    v2: cgroup2 at ``root``. v1: per-controller cgroup mounts below it; "hybrid" when a cgroup2
    mount sits beside them (``root/unified``). Each v1 controller maps to its shortest
    mountpoint, as the kubelet does (kubernetes #95488).
    """
    root = root.rstrip("/") or "/"
    try:
        with open(mountinfo, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise HostError(f"cannot read {mountinfo}: {err.strerror or err}.") from None
    prefix = root if root.endswith("/") else root + "/"
    below = [m for m in parse_mountinfo(text) if m[0] == root or m[0].startswith(prefix)]
    unified = next((m[0] for m in below if m[1] == "cgroup2" and m[0] == root), None)
    if unified is not None:
        controllers = _read_words(os.path.join(root, "cgroup.controllers"))
        return Hierarchy("v2", root, {}, unified, controllers)
    v1_mounts: dict[str, str] = {}
    for mountpoint, fstype, options in below:
        if fstype != "cgroup":
            continue
        for ctrl in _v1_controllers(options):
            if ctrl not in v1_mounts or len(mountpoint) < len(v1_mounts[ctrl]):
                v1_mounts[ctrl] = mountpoint
    unified = min((m[0] for m in below if m[1] == "cgroup2"), key=len, default=None)
    if not v1_mounts:
        if unified is not None:
            raise HostError(
                f"only a cgroup2 mount at {unified} and no v1 controllers under {root}; "
                f"give the cgroup2 mountpoint as the root."
            )
        raise HostError(f"no cgroup filesystem is mounted at or under {root}.")
    version = "hybrid" if unified is not None else "v1"
    return Hierarchy(version, root, v1_mounts, unified, frozenset(v1_mounts))
