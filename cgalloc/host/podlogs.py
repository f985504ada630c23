"""The kubelet's log directories: which pod and container a cgroup belongs to, without the CRI.

The kubelet names them (pkg/kubelet/kuberuntime/kuberuntime_container.go, ``BuildPodLogsDirectory``,
``BuildContainerLogsDirectory`` and ``legacyLogSymlink``):

- ``/var/log/pods/<namespace>_<pod name>_<pod uid>/<container name>/<restart>.log``;
- ``/var/log/containers/<pod name>_<namespace>_<container name>-<container id>.log``, a symlink
  to the first's file.

A pod name, a namespace and a container name hold no ``_`` (DNS names), so each name splits
into its parts; the second adds the container ID the runtime names the container's cgroup by.
Every read is bounded (:data:`MAX_ENTRIES` per directory) and follows no symlink: a link's text
is parsed, never opened. The disk usage of a container's log directory is what the kubelet's
``du -x -s -B 1`` and ``find -xdev`` tell it (:func:`cgalloc.host.fsstats.disk_usage`).
"""

from __future__ import annotations

import os
from typing import NamedTuple

POD_LOG_DIR = "/var/log/pods"
CONTAINER_LOG_DIR = "/var/log/containers"
MAX_ENTRIES = 100_000  # entries read from one directory; a node runs a few hundred pods
_HEX = frozenset("0123456789abcdef")
CONTAINER_ID_LENGTH = 64  # containerd, CRI-O and Docker IDs: 64 lowercase hex digits


def is_container_id(text: str) -> bool:
    """Whether ``text`` is a runtime's container ID (64 lowercase hex digits)."""
    return len(text) == CONTAINER_ID_LENGTH and _HEX.issuperset(text)


class ContainerRef(NamedTuple):
    """One container the kubelet started, as its log link names it."""

    namespace: str
    pod: str
    pod_uid: str
    name: str
    container_id: str

    @property
    def log_dir(self) -> str:
        """The container's log directory below the pod log directory (a relative path)."""
        return f"{self.namespace}_{self.pod}_{self.pod_uid}/{self.name}"


def _names(directory: str) -> list[str]:
    """At most :data:`MAX_ENTRIES` names of ``directory``; [] when it cannot be read."""
    out: list[str] = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                out.append(entry.name)
                if len(out) >= MAX_ENTRIES:
                    break
    except OSError:
        return []
    return out


def _pod_dir(name: str) -> tuple[str, str, str] | None:
    """``<namespace>_<pod>_<uid>`` -> (namespace, pod, uid)."""
    parts = name.split("_")
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    return None


def pod_names(log_dir: str = POD_LOG_DIR) -> dict[str, tuple[str, str]]:
    """Pod UID -> (namespace, name), from the pod log directory's
    ``<namespace>_<name>_<uid>`` entries; {} when the directory cannot be read."""
    out: dict[str, tuple[str, str]] = {}
    for name in _names(log_dir):
        parts = _pod_dir(name)
        if parts is not None:
            out[parts[2]] = (parts[0], parts[1])
    return out


def parse_link(name: str, target: str) -> ContainerRef | None:
    """The container a ``/var/log/containers`` entry names, with the pod UID its link text
    gives; None when the name or the text is not the kubelet's, or the two disagree."""
    if not name.endswith(".log"):
        return None
    parts = name[: -len(".log")].split("_")
    if len(parts) != 3 or not all(parts):
        return None
    pod, namespace, rest = parts
    container, _, cid = rest.rpartition("-")
    if not container or not is_container_id(cid):
        return None
    # <pod log dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log
    where = target.rstrip("/").split("/")
    if len(where) < 3:
        return None
    owner = _pod_dir(where[-3])
    if owner is None or owner[:2] != (namespace, pod) or where[-2] != container:
        return None
    return ContainerRef(namespace, pod, owner[2], container, cid)


def container_refs(link_dir: str = CONTAINER_LOG_DIR) -> dict[str, ContainerRef]:
    """Container ID -> the container, from the links of ``link_dir`` (their text only, never
    followed); {} when the directory cannot be read."""
    out: dict[str, ContainerRef] = {}
    for name in _names(link_dir):
        try:
            target = os.readlink(os.path.join(link_dir, name))
        except OSError:  # not a link, or gone
            continue
        ref = parse_link(name, target)
        if ref is not None:
            out[ref.container_id] = ref
    return out
