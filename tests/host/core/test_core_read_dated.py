"""``Root.read_dated``: a bulk read that also takes each dir's mtime, as ``oldest_mtimes``
gives it for the root's one fd, through the dir fd the read opens anyway. ``stats -o json``
takes cAdvisor's start times this way (google/cadvisor container/common/helpers.go
``getSpecInternal``: per hierarchy the lower of the cgroup directory's mtime and its
``cgroup.clone_children`` / ``cgroup.events`` mtime)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cgalloc.host.core import FileSpec

SPECS = [FileSpec("memory.max"), FileSpec("cpu.max", "fields", ("quota", "period"))]
MARKER = "cgroup.clone_children"


def _at(path: Path, ns: int) -> None:
    os.utime(path, ns=(0, ns), follow_symlinks=False)


def _undated(impl, root, dirs, marker=MARKER):
    fd = os.open(root.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return impl.oldest_mtimes([fd], dirs, marker)
    finally:
        os.close(fd)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_each_dir_dated_as_oldest_mtimes_dates_it_and_read_as_read_reads_it(impl, tree, threads):
    (tree / "kubepods" / MARKER).write_text("0\n")
    _at(tree / "kubepods" / MARKER, 1_600_000_000_000_000_007)  # the marker older
    _at(tree / "kubepods", 1_700_000_000_000_000_000)
    _at(tree / "kubepods/burstable", 1_500_000_000_000_000_003)  # no marker: the dir's own
    (tree / "old").mkdir()
    (tree / "old" / MARKER).write_text("0\n")
    _at(tree / "old" / MARKER, 1_900_000_000_000_000_000)  # the dir older than its marker
    _at(tree / "old", 1_400_000_000_000_000_000)
    os.symlink("kubepods", tree / "link")  # the read will not open it: resolved as before
    dirs = ["kubepods", "gone", "kubepods/burstable", "", "old", "link", "kubepods/gone"]
    root = impl.open_root(str(tree), allow_any_fs=True)
    snap, mtimes = root.read_dated(dirs, SPECS, MARKER, threads=threads)
    assert mtimes[:5] == [1_600_000_000_000_000_007, None, 1_500_000_000_000_000_003,
                          os.stat(tree).st_mtime_ns, 1_400_000_000_000_000_000]  # fmt: skip
    # the link's own time, or the marker found through it: oldest_mtimes' answer
    assert mtimes[5] == min(os.lstat(tree / "link").st_mtime_ns, 1_600_000_000_000_000_007)
    assert mtimes == _undated(impl, root, dirs)
    plain = root.read(dirs, SPECS, threads=threads)
    assert list(snap.values) == list(plain.values) and bytes(snap.status) == bytes(plain.status)


@pytest.mark.parametrize("threads", [2, 3])
def test_many_dirs_over_threads_each_get_their_own_time(impl, tmp_path, threads):
    """Over threads (two files a dir, so a cut could fall inside a dir): each dir's time and
    values are its own, whichever thread took it."""
    dirs = [f"p{i:03d}" for i in range(301)]
    for i, d in enumerate(dirs):
        (tmp_path / d).mkdir()
        (tmp_path / d / "memory.max").write_text(f"{i}\n")
        (tmp_path / d / "cpu.max").write_text(f"{i} 100000\n")
        _at(tmp_path / d, 1_000_000_000 * (i + 1) + i)
    root = impl.open_root(str(tmp_path), allow_any_fs=True)
    snap, mtimes = root.read_dated(dirs, SPECS, MARKER, threads=threads)
    assert mtimes == [1_000_000_000 * (i + 1) + i for i in range(301)]
    assert list(snap.values) == [v for i in range(301) for v in (i, i, 100000)]


def test_no_marker_dates_the_dir_alone(impl, tree):
    (tree / "kubepods" / MARKER).write_text("0\n")
    _at(tree / "kubepods" / MARKER, 100)
    _at(tree / "kubepods", 500)
    root = impl.open_root(str(tree), allow_any_fs=True)
    assert root.read_dated(["kubepods"], SPECS, "")[1] == [500]


@pytest.mark.parametrize("bad", ["a/b", "..", ".", "x\0y", "m" * 256])
def test_a_malformed_marker_is_refused_before_any_read(impl, tree, bad):
    root = impl.open_root(str(tree), allow_any_fs=True)
    with pytest.raises(ValueError, match="marker"):
        root.read_dated(["kubepods"], SPECS, bad)


def test_a_dated_read_needs_a_file_to_open_each_dir_for(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    with pytest.raises(ValueError, match="at least one file spec"):
        root.read_dated(["kubepods"], [], MARKER)


def test_a_malformed_dir_is_refused_before_any_read(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    with pytest.raises(ValueError, match="directory"):
        root.read_dated(["kubepods", "../etc"], SPECS, MARKER)
