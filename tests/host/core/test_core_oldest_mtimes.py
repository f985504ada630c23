"""``oldest_mtimes``: each dir's oldest mtime over several hierarchies, of the dir and of a
marker file, as stats' start times need (cAdvisor's creation time, google/cadvisor
container/libcontainer/handler.go / container/common/helpers.go ``getSpecInternal``: the
lowest of each cgroup path's directory mtime and its ``cgroup.clone_children`` /
``cgroup.events`` mtime, over every hierarchy holding it)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

import pytest


def _fd(path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _fds(stack: ExitStack, *paths) -> list[int]:
    fds = [_fd(p) for p in paths]
    for fd in fds:
        stack.callback(os.close, fd)
    return fds


def _at(path: Path, ns: int) -> None:
    os.utime(path, ns=(0, ns), follow_symlinks=False)


def test_each_dir_gets_its_own_mtime_in_ns_and_a_missing_one_none(impl, tree):
    _at(tree / "kubepods", 1_700_000_000_123_456_789)
    _at(tree / "kubepods/burstable", 1_600_000_000_000_000_001)
    _at(tree, 1_500_000_000_999_999_999)
    with ExitStack() as stack:
        got = impl.oldest_mtimes(_fds(stack, tree), ["kubepods", "gone", "kubepods/burstable", ""])
    assert got == [1_700_000_000_123_456_789, None, 1_600_000_000_000_000_001,
                   1_500_000_000_999_999_999]  # fmt: skip


def test_the_oldest_over_hierarchies_of_the_dir_and_its_marker(impl, tmp_path):
    """Per hierarchy the lower of dir and marker; over hierarchies the lowest; a hierarchy
    without the cgroup, or a cgroup without the marker, counts for nothing."""
    cpu, mem, pids = (tmp_path / h for h in ("cpu", "memory", "pids"))
    for h in (cpu, mem, pids):
        (h / "pod-a").mkdir(parents=True)
    (mem / "pod-b").mkdir()
    (cpu / "pod-a/cgroup.clone_children").write_text("0\n")
    (mem / "pod-a/cgroup.clone_children").write_text("0\n")
    _at(cpu / "pod-a/cgroup.clone_children", 300)
    _at(cpu / "pod-a", 400)  # marker older: 300 here
    _at(mem / "pod-a/cgroup.clone_children", 900)
    _at(mem / "pod-a", 250)  # dir older: 250 here, the oldest
    _at(pids / "pod-a", 260)  # no marker in pids: its dir alone
    _at(mem / "pod-b", 777)
    with ExitStack() as stack:
        fds = _fds(stack, cpu, mem, pids)
        assert impl.oldest_mtimes(fds, ["pod-a", "pod-b", "pod-c"], "cgroup.clone_children") == [
            250, 777, None
        ]  # fmt: skip
        _at(pids / "pod-a", 100)
        assert impl.oldest_mtimes(fds, ["pod-a"], "cgroup.clone_children") == [100]
        assert impl.oldest_mtimes(fds[:1], ["pod-a"], "cgroup.clone_children") == [300]
        assert impl.oldest_mtimes(fds[:1], ["pod-a"]) == [400]  # no marker: the dir's own
        assert impl.oldest_mtimes([], ["pod-a"], "cgroup.clone_children") == [None]


def test_a_marker_found_outside_its_dir_is_not_taken(impl, tmp_path):
    """A marker is looked up only in a hierarchy holding the dir (cAdvisor stats it below
    the cgroup path it found)."""
    (tmp_path / "cpu/pod").mkdir(parents=True)
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory/cgroup.events").write_text("populated 0\n")  # the parent's own
    (tmp_path / "cpu/cgroup.events").write_text("populated 0\n")
    for older in ("memory/cgroup.events", "cpu/cgroup.events"):
        _at(tmp_path / older, 100)
    _at(tmp_path / "cpu/pod", 500)
    with ExitStack() as stack:
        fds = _fds(stack, tmp_path / "cpu", tmp_path / "memory")
        assert impl.oldest_mtimes(fds, ["pod", "gone"], "cgroup.events") == [500, None]


def test_a_symlinked_dir_is_the_link_not_its_target(impl, tree):
    os.symlink("kubepods", tree / "link")
    _at(tree / "kubepods", 2_000_000_000_000_000_000)
    with ExitStack() as stack:
        [got] = impl.oldest_mtimes(_fds(stack, tree), ["link"])
    assert got == os.lstat(tree / "link").st_mtime_ns != 2_000_000_000_000_000_000


@pytest.mark.parametrize("bad", ["../etc", "/abs", "a//b", "a/./b"])
def test_a_malformed_dir_is_refused_before_any_stat(impl, tree, bad):
    with ExitStack() as stack, pytest.raises(ValueError, match="directory"):
        impl.oldest_mtimes(_fds(stack, tree), ["kubepods", bad])


@pytest.mark.parametrize("bad", ["a/b", "..", ".", "x\0y", "m" * 256])
def test_a_malformed_marker_is_refused_before_any_stat(impl, tree, bad):
    with ExitStack() as stack, pytest.raises(ValueError, match="marker"):
        impl.oldest_mtimes(_fds(stack, tree), ["kubepods"], bad)


def test_no_dirs_no_stats(impl, tree):
    with ExitStack() as stack:
        assert impl.oldest_mtimes(_fds(stack, tree), [], "cgroup.events") == []


def test_more_hierarchies_than_the_core_takes_are_refused(impl, tree):
    from cgalloc.host.core import native, records

    assert records.MAX_MTIME_FDS == native.lib.CG_MAX_MTIME_FDS
    with ExitStack() as stack:
        fds = _fds(stack, tree) * (records.MAX_MTIME_FDS + 1)
        with pytest.raises(ValueError, match="at most 32"):
            impl.oldest_mtimes(fds, ["kubepods"])
        assert impl.oldest_mtimes(fds[:-1], ["kubepods"]) == [
            os.stat(tree / "kubepods").st_mtime_ns
        ]


def test_dirs_below_several_parents_in_any_order(impl, tmp_path):
    """Dirs come grouped by parent (a QoS tier's pods) but need not: each gets its own time
    whatever came before it, top-level dirs and the root included."""
    times = {"": 10, "a": 20, "a/p1": 30, "a/p2": 40, "b": 50, "b/p1": 60, "a/p1/c": 70}
    for rel in sorted(times, key=len):
        if rel:
            (tmp_path / rel).mkdir()
    for rel, t in times.items():
        _at(tmp_path / rel, t)
    order = ["a/p1", "b/p1", "a/p2", "", "a/p1/c", "b", "a", "a/gone", "gone/x", "a/p2"]
    with ExitStack() as stack:
        got = impl.oldest_mtimes(_fds(stack, tmp_path), order, "m", threads=1)
    assert got == [30, 60, 40, 10, 70, 50, 20, None, None, 40]
