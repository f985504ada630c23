"""The persistent sampler on fake trees: re-reads, vanished and new cgroups, update()."""

from __future__ import annotations

import os
import shutil

import pytest

from cgalloc.host.core import ENOENT, MAX, OK, FileSpec

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


# ---- set_policy: kept dir fds, kept files, the rest opened and closed each sample ----------


def _fds_under(tree) -> list[str]:
    return sorted(p for p in _open_fds(tree) if p.startswith(str(tree) + "/"))


def test_policy_keeps_dir_fds_and_only_the_kept_files(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    dirs = ["kubepods", "kubepods/burstable"]
    with root.sampler(dirs, SPECS) as sampler:
        sampler.set_policy(dirfds=2, kept=[1, 0])  # memory.max kept for kubepods only
        snap = sampler.sample()
        assert snap.get(0, 0) == (OK, 104857600)
        assert snap.get(1, 0) == (MAX, 0)
        assert snap.as_dict(0)["cpu.stat"] == {"usage_usec": 1500, "user_usec": 1000}
        assert _fds_under(tree) == sorted(
            [str(tree / "kubepods"), str(tree / "kubepods/burstable"),
             str(tree / "kubepods/memory.max")]
        )  # fmt: skip
        # files not kept are read afresh: a replaced file (new inode) shows at once
        (tree / "kubepods/burstable/memory.max").write_text("77\n")
        assert sampler.sample().get(1, 0) == (OK, 77)
        sampler.set_policy(dirfds=0, kept=[0, 0])  # fds no longer kept close at once
        assert _fds_under(tree) == []
        assert sampler.sample().get(1, 0) == (OK, 77)  # read by path beneath the root
        assert _fds_under(tree) == []


def test_policy_dir_fd_of_a_removed_cgroup_is_reopened_when_it_comes_back(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    with root.sampler(["kubepods", "kubepods/burstable"], SPECS) as sampler:
        sampler.set_policy(dirfds=2, kept=[0, 0])
        sampler.sample()
        shutil.rmtree(tree / "kubepods/burstable")
        gone = sampler.sample()
        assert [gone.get(1, 0), gone.get(1, 1, 0)] == [(ENOENT, 0), (ENOENT, 0)]
        assert gone.get(0, 0) == (OK, 104857600)
        (tree / "kubepods/burstable").mkdir()
        (tree / "kubepods/burstable/memory.max").write_text("5\n")
        assert sampler.sample().get(1, 0) == (OK, 5)


def test_policy_with_threads_reads_what_a_cold_read_reads(impl, tree):
    # 2 threads split the dirs on whole rows: each dir's fd is touched by one thread only
    dirs = []
    for i in range(300):
        rel = f"kubepods/pod{i:03d}"
        (tree / rel).mkdir()
        (tree / rel / "memory.max").write_text(f"{i * 4096}\n")
        (tree / rel / "cpu.stat").write_text(f"usage_usec {i}\nuser_usec {2 * i}\n")
        dirs.append(rel)
    root = impl.open_root(str(tree), allow_any_fs=True)
    cold = root.read(dirs, SPECS, threads=1)
    with root.sampler(dirs, SPECS, threads=2) as sampler:
        sampler.set_policy(dirfds=200, kept=[100, 7])
        for _ in range(2):
            snap = sampler.sample()
            assert list(snap.values) == list(cold.values)
            assert list(snap.status) == list(cold.status)
        assert len(_fds_under(tree)) == 200 + 100 + 7


@pytest.mark.parametrize(
    "bad", [{"dirfds": -1}, {"dirfds": 1, "kept": [1]}, {"dirfds": 1, "kept": [1, -2]}]
)
def test_policy_counts_are_checked(impl, tree, bad):
    root = impl.open_root(str(tree), allow_any_fs=True)
    with root.sampler(["kubepods"], SPECS) as sampler, pytest.raises(ValueError):
        sampler.set_policy(**bad)
