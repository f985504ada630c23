"""The persistent sampler on fake trees: re-reads, vanished and new cgroups, update()."""

from __future__ import annotations

import os
import shutil

from cgalloc.core import ENOENT, MAX, OK, FileSpec

SPECS = [FileSpec("memory.max"), FileSpec("cpu.stat", "keyed", ("usage_usec", "user_usec"))]


def _open_fds(path) -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}  # fmt: skip


def test_sample_sees_content_changed_in_place(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    with root.sampler(["kubepods", "kubepods/burstable"], SPECS) as sampler:
        first = sampler.sample()
        assert first.as_dict(0) == {
            "memory.max": 104857600,
            "cpu.stat": {"usage_usec": 1500, "user_usec": 1000},
        }
        # rewrite in place (same inode), shorter than before, as the kernel regenerates it
        with open(tree / "kubepods/cpu.stat", "r+b") as f:
            f.write(b"usage_usec 9\n")
            f.truncate()
        (tree / "kubepods/burstable/memory.max").write_text("2048\n")
        second = sampler.sample()
        assert second.as_dict(0)["cpu.stat"] == {"usage_usec": 9, "user_usec": None}
        assert second.get(1, 0) == (OK, 2048)
        assert first.get(1, 0) == (MAX, 0)  # earlier snapshots are not overwritten


def test_sampler_keeps_files_open_between_samples(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    target = str(tree / "kubepods/memory.max")
    with root.sampler(["kubepods"], SPECS) as sampler:
        sampler.sample()
        assert target in _open_fds(tree)
    assert target not in _open_fds(tree)


def test_removed_cgroup_becomes_enoent_and_its_fds_close(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    sampler = root.sampler(["kubepods", "kubepods/burstable"], SPECS)
    assert sampler.sample().get(1, 1, 0) == (OK, 7)
    shutil.rmtree(tree / "kubepods/burstable")
    snap = sampler.sample()
    assert [snap.get(1, 0), snap.get(1, 1, 0), snap.get(1, 1, 1)] == [(ENOENT, 0)] * 3
    assert snap.get(0, 0) == (OK, 104857600)
    assert not any("burstable" in p for p in _open_fds(tree))
    # re-created under the same name: picked up again
    (tree / "kubepods/burstable").mkdir()
    (tree / "kubepods/burstable/memory.max").write_text("5\n")
    assert sampler.sample().get(1, 0) == (OK, 5)
    sampler.close()


def test_update_adds_new_dirs_and_drops_old_ones(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    sampler = root.sampler(["kubepods/burstable"], SPECS)
    sampler.sample()
    (tree / "kubepods/besteffort").mkdir()
    (tree / "kubepods/besteffort/memory.max").write_text("4096\n")
    sampler.update(["kubepods/besteffort", "kubepods"])
    snap = sampler.sample()
    assert snap.dirs == ("kubepods/besteffort", "kubepods")
    assert snap.get(0, 0) == (OK, 4096)
    assert snap.get(0, 1, 0) == (ENOENT, 0)  # no cpu.stat there
    assert snap.get(1, 0) == (OK, 104857600)
    assert not any("burstable" in p for p in _open_fds(tree))
    sampler.close()


def test_update_keeps_fds_of_kept_dirs(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    sampler = root.sampler(["kubepods", "kubepods/burstable"], SPECS)
    sampler.sample()
    held = tree / "kubepods/memory.max"
    # replace the file by a new inode: a kept fd still reads the old one
    os.link(held, tree / "keepalive")  # the old inode stays linked, so it is not "gone"
    held.unlink()
    held.write_text("1\n")
    sampler.update(["kubepods/burstable", "kubepods"])
    assert sampler.sample().get(1, 0) == (OK, 104857600)
    sampler.close()
