"""host/fsstats.py: a filesystem's figures as cAdvisor takes them, a directory's usage as the
kubelet's du/find and containerd's snapshotter take it, the image store and writable layers."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from cgalloc.host import fsstats
from cgalloc.host.kubelet import NodeFiles

CID = "3f" * 32


def test_filesystem_figures_are_cadvisors_getvfsstats(tmp_path):
    fs = fsstats.filesystem(str(tmp_path))
    st = os.statvfs(str(tmp_path))
    assert fs is not None
    assert fs.capacity == st.f_blocks * st.f_frsize
    assert fs.used == (st.f_blocks - st.f_bfree) * st.f_frsize  # capacity - free
    assert fs.inodes == st.f_files
    assert fs.inodes_used == st.f_files - fs.inodes_free
    assert 0 <= fs.available <= fs.capacity
    assert fsstats.filesystem(str(tmp_path / "missing")) is None


def tree(base) -> None:
    (base / "a" / "b").mkdir(parents=True)
    (base / "a" / "0.log").write_bytes(b"x" * 10000)
    (base / "a" / "b" / "1.log").write_bytes(b"y" * 5000)
    os.link(base / "a" / "0.log", base / "a" / "hard")  # one inode, counted once
    os.symlink("/etc", base / "a" / "etc")  # never followed


@pytest.mark.skipif(not (shutil.which("du") and shutil.which("find")), reason="no du/find")
def test_disk_usage_is_the_kubelets_du_and_find(tmp_path):
    # pkg/volume/util/fs: `du -x -s -B 1 <dir>` and `find <dir> -xdev -printf .`
    tree(tmp_path)
    got = fsstats.disk_usage(str(tmp_path))
    du = subprocess.run(["du", "-x", "-s", "-B", "1", str(tmp_path)], capture_output=True,
                        text=True, check=True).stdout.split()[0]  # fmt: skip
    find = subprocess.run(["find", str(tmp_path), "-xdev", "-printf", "."], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert got is not None
    assert got.bytes == int(du)
    assert got.entries == len(find)
    assert got.inodes == got.entries - 1  # the hard link's second name


def test_disk_usage_is_bounded_and_none_for_what_it_cannot_read(tmp_path):
    tree(tmp_path)
    assert fsstats.disk_usage(str(tmp_path), limit=3) is None  # never a partial figure
    assert fsstats.disk_usage(str(tmp_path / "missing")) is None
    one = fsstats.disk_usage(str(tmp_path / "a" / "0.log"))
    assert one is not None and one.entries == 1


def test_overlay_upperdirs_from_mountinfo(tmp_path):
    mount = f"/run/containerd/io.containerd.runtime.v2.task/k8s.io/{CID}/rootfs"
    snap = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
    (tmp_path / "mountinfo").write_text(
        "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
        f"812 29 0:77 / {mount} rw,relatime - overlay overlay rw,lowerdir={snap}/1/fs,"
        f"upperdir={snap}/7/fs,workdir={snap}/7/work\n"
        "813 29 0:78 / /with\\040space rw - overlay overlay rw,upperdir=/u\\040p,workdir=/w\n"
    )
    got = fsstats.overlay_upperdirs(str(tmp_path / "mountinfo"))
    assert got == {mount: f"{snap}/7/fs", "/with space": "/u p"}
    assert fsstats.overlay_upperdirs(str(tmp_path / "missing")) == {}
    store = fsstats.ImageStore("containerd", snap.rsplit("/", 1)[0], snap, "/run/containerd")
    assert fsstats.writable_layer(store, got, CID) == f"{snap}/7/fs"
    assert fsstats.writable_layer(store, got, "ab" * 32) is None
    # an upperdir outside the snapshotter is never walked
    outside = {mount: "/etc/fs"}
    assert fsstats.writable_layer(store, outside, CID) is None
    assert fsstats.writable_layer(store, {mount: f"{snap}/7/fs/../../.."}, CID) is None
    assert fsstats.writable_layer(store, {mount: f"{snap}/../fs"}, CID) is None


def test_image_store_and_containerds_snapshot_usage(tmp_path):
    files = NodeFiles(str(tmp_path))
    assert fsstats.image_store(files, None, None) is None
    snaps = tmp_path / "var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"
    for n, size in ((1, 3000), (2, 9000)):
        (snaps / str(n) / "fs" / "bin").mkdir(parents=True)
        (snaps / str(n) / "fs" / "bin" / "sh").write_bytes(b"z" * size)
        (snaps / str(n) / "work").mkdir()
    store = fsstats.image_store(files, None, None)
    assert store == fsstats.ImageStore(
        "containerd", "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs",
        "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots", "/run/containerd",
    )  # fmt: skip
    got = fsstats.snapshots_usage(files, store)
    each = [fsstats.disk_usage(str(snaps / n / "fs"), one_filesystem=False) for n in ("1", "2")]
    assert got == fsstats.DiskUsage(sum(e.bytes for e in each), 6, 6)  # fs, bin, sh twice
    assert fsstats.snapshots_usage(files, store, limit=4) is None
    # K3s' containerd keeps its own root
    assert fsstats.image_store(files, None, "unix:///run/k3s/containerd/containerd.sock") is None
    # CRI-O: <graphroot>/overlay-images, found when asked for or when containerd has none
    (tmp_path / "var/lib/containers/storage/overlay-images").mkdir(parents=True)
    crio = fsstats.image_store(files, "CRI-O", None)
    assert crio == fsstats.ImageStore("CRI-O", "/var/lib/containers/storage/overlay-images",
                                      None, None)  # fmt: skip
    assert fsstats.snapshots_usage(files, crio) is None
