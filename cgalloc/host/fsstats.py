"""Filesystem figures of the summary API: a filesystem's size and free space, and the disk
usage of a directory, as the kubelet and the container runtime take them.

- A filesystem (``node.fs``, the image filesystem, a container's ``rootfs`` and ``logs``
  capacity): ``statfs(2)`` as cAdvisor's ``getVfsStats`` reads it (fs/fs.go): capacity
  ``f_blocks × f_frsize``, available ``f_bavail × f_frsize``, used ``capacity − f_bfree ×
  f_frsize`` (container/raw/handler.go), inodes ``f_files``, free inodes ``f_ffree``.
- A directory's usage (:func:`disk_usage`): the kubelet's ``du -x -s -B 1`` and
  ``find -xdev`` for a container's logs (pkg/volume/util/fs DiskUsage and Find), or
  containerd's snapshot usage (continuity fs.DiskUsage: every inode once, ``st_blocks × 512``,
  crossing no mount check). Walks are bounded (:data:`MAX_WALK` entries) and never follow a
  symlink; a walk past its bound gives no figure rather than a partial one.
- The image filesystem: containerd's CRI reports its snapshotter's directory
  (``<root>/io.containerd.snapshotter.v1.overlayfs``) with the summed usage of its snapshots
  (pkg/cri/server/imagefs_info.go), CRI-O its ``<graphroot>/overlay-images`` directory.
- A container's writable layer (containerd): the ``upperdir`` of the overlay mount at the
  shim's ``<state>/io.containerd.runtime.v2.task/k8s.io/<id>/rootfs``, from mountinfo.

Paths in and out are the node's; :class:`cgalloc.host.kubelet.NodeFiles` maps them below the
node root the Host names.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.host.cgroupfs import unescape

if TYPE_CHECKING:
    from cgalloc.host.kubelet import NodeFiles

MAX_WALK = 200_000  # entries one walk may visit (logs and writable layers hold a few)
BLOCK = 512  # st_blocks unit (stat(2))

CONTAINERD_ROOT = "/var/lib/containerd"
# the containerd of K3s and RKE2 (their endpoint is /run/k3s/containerd/containerd.sock)
RANCHER_CONTAINERD_ROOTS = {
    "k3s": "/var/lib/rancher/k3s/agent/containerd",
    "rke2": "/var/lib/rancher/rke2/agent/containerd",
}
CONTAINERD_STATE = "/run/containerd"
OVERLAY_SNAPSHOTTER = "io.containerd.snapshotter.v1.overlayfs"
CRI_NAMESPACE = "k8s.io"
CRIO_GRAPH_ROOT = "/var/lib/containers/storage"
CRIO_IMAGES = "overlay-images"  # <graphroot>/<driver>-images (cri-o server/image_fs_info.go)


class FsUsage(NamedTuple):
    """One filesystem's figures, in bytes and inodes."""

    capacity: int
    available: int
    used: int
    inodes: int
    inodes_free: int

    @property
    def inodes_used(self) -> int:
        return self.inodes - self.inodes_free


def filesystem(path: str) -> FsUsage | None:
    """The figures of the filesystem holding ``path`` (a path of this machine); None when it
    cannot be reached."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    size = st.f_frsize
    capacity = st.f_blocks * size
    return FsUsage(capacity, st.f_bavail * size, capacity - st.f_bfree * size, st.f_files,
                   st.f_ffree)  # fmt: skip


class DiskUsage(NamedTuple):
    """A directory's usage: bytes of its inodes counted once, the entries a walk visits
    (``find``'s count) and its distinct inodes."""

    bytes: int
    entries: int
    inodes: int


def disk_usage(
    path: str, one_filesystem: bool = True, limit: int = MAX_WALK
) -> DiskUsage | None:
    """``path`` and everything below it, symlinks not followed; ``one_filesystem`` descends
    into no other filesystem and counts no bytes there (``du -x``). None when ``path`` cannot
    be read or the walk would pass ``limit`` entries."""
    try:
        top = os.lstat(path)
    except OSError:
        return None
    if limit < 1:
        return None
    total, entries, seen = top.st_blocks * BLOCK, 1, set()
    dups = 0
    stack = [path] if stat.S_ISDIR(top.st_mode) else []
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    entries += 1
                    if entries > limit:
                        return None
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:  # gone meanwhile
                        continue
                    other = st.st_dev != top.st_dev
                    is_dir = stat.S_ISDIR(st.st_mode)
                    if not is_dir and st.st_nlink > 1:
                        key = (st.st_dev, st.st_ino)
                        if key in seen:
                            dups += 1
                            continue
                        seen.add(key)
                    if one_filesystem and other:
                        continue
                    total += st.st_blocks * BLOCK
                    if is_dir:
                        stack.append(entry.path)
        except OSError:
            continue  # a directory that went away or that we may not read
    return DiskUsage(total, entries, entries - dups)


class ImageStore(NamedTuple):
    """Where a runtime keeps its images (node paths)."""

    runtime: str  # "containerd" | "CRI-O"
    path: str  # the directory the runtime reports as the image filesystem's
    snapshots: str | None  # containerd's snapshot directories' parent; None for CRI-O
    state: str | None  # containerd's state directory (its shims' mounts); None for CRI-O


def containerd_root(endpoint: str | None) -> tuple[str, str]:
    """(root, state) of the containerd behind ``endpoint`` (None: the default one)."""
    if endpoint and "/k3s/" in endpoint:
        return RANCHER_CONTAINERD_ROOTS["k3s"], "/run/k3s/containerd"
    if endpoint and "/rke2/" in endpoint:
        return RANCHER_CONTAINERD_ROOTS["rke2"], "/run/k3s/containerd"
    return CONTAINERD_ROOT, CONTAINERD_STATE


def image_store(files: NodeFiles, runtime: str | None, endpoint: str | None) -> ImageStore | None:
    """The image store of ``runtime`` ("containerd", "CRI-O"; None: the one the node has,
    containerd first), at the runtimes' default roots; None when the node has none."""
    if runtime in (None, "containerd"):
        root, state = containerd_root(endpoint)
        snapshotter = f"{root}/{OVERLAY_SNAPSHOTTER}"
        if os.path.isdir(files.path(snapshotter)):
            return ImageStore("containerd", snapshotter, f"{snapshotter}/snapshots", state)
    if runtime in (None, "CRI-O"):
        images = f"{CRIO_GRAPH_ROOT}/{CRIO_IMAGES}"
        if os.path.isdir(files.path(images)):
            return ImageStore("CRI-O", images, None, None)
    return None


def snapshots_usage(files: NodeFiles, store: ImageStore, limit: int = MAX_WALK) -> DiskUsage | None:
    """containerd's image filesystem usage: the sum over its snapshots of each one's
    ``fs`` directory usage (what the snapshotter's Usage gives: at commit for a layer, live for
    a container's writable layer); None past ``limit`` entries or without snapshots."""
    if store.snapshots is None:
        return None
    where = files.path(store.snapshots)
    try:
        names = sorted(os.listdir(where))
    except OSError:
        return None
    total = entries = inodes = 0
    for name in names:
        fs = os.path.join(where, name, "fs")
        if not os.path.isdir(fs) or os.path.islink(fs):
            continue
        got = disk_usage(fs, one_filesystem=False, limit=limit - entries)
        if got is None:
            return None
        total, entries, inodes = total + got.bytes, entries + got.entries, inodes + got.inodes
    return DiskUsage(total, entries, inodes)


def overlay_upperdirs(mountinfo: str) -> dict[str, str]:
    """Mount point -> ``upperdir`` of every overlay mount ``mountinfo`` lists (node paths); {}
    when it cannot be read."""
    out: dict[str, str] = {}
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, after = left.split(" "), right.split(" ")
        if not sep or len(fields) < 5 or len(after) < 3 or after[0] != "overlay":
            continue
        for option in after[2].split(","):
            if option.startswith("upperdir="):
                out[unescape(fields[4])] = unescape(option[len("upperdir=") :])
    return out


def writable_layer(store: ImageStore, upperdirs: dict[str, str], container_id: str) -> str | None:
    """The node path of a containerd container's writable layer: the ``upperdir`` of its
    rootfs mount, when it is one of the store's snapshots."""
    if store.state is None or store.snapshots is None:
        return None
    mount = f"{store.state}/io.containerd.runtime.v2.task/{CRI_NAMESPACE}/{container_id}/rootfs"
    upper = upperdirs.get(mount)
    if upper is None:
        return None
    rel = upper.removeprefix(store.snapshots + "/").split("/")
    # <snapshots>/<id>/fs: nothing else is a snapshot's layer
    inside = upper.startswith(store.snapshots + "/") and rel[0] not in ("", ".", "..")
    return upper if inside and len(rel) == 2 and rel[1] == "fs" else None
