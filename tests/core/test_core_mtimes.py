"""``mtimes``: each dir's mtime below an fd, as stats' start times need (cAdvisor's creation
time is the oldest directory mtime, google/cadvisor container/common/helpers.go GetSpec)."""

from __future__ import annotations

import os

import pytest


def _fd(path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def test_each_dir_gets_its_own_mtime_in_ns_and_a_missing_one_none(impl, tree):
    os.utime(tree / "kubepods", ns=(0, 1_700_000_000_123_456_789))
    os.utime(tree / "kubepods/burstable", ns=(0, 1_600_000_000_000_000_001))
    os.utime(tree, ns=(0, 1_500_000_000_999_999_999))
    fd = _fd(tree)
    try:
        got = impl.mtimes(fd, ["kubepods", "gone", "kubepods/burstable", ""])
    finally:
        os.close(fd)
    assert got == [1_700_000_000_123_456_789, None, 1_600_000_000_000_000_001,
                   1_500_000_000_999_999_999]  # fmt: skip


def test_a_symlinked_dir_is_the_link_not_its_target(impl, tree):
    os.symlink("kubepods", tree / "link")
    os.utime(tree / "kubepods", ns=(0, 2_000_000_000_000_000_000))
    fd = _fd(tree)
    try:
        [got] = impl.mtimes(fd, ["link"])
    finally:
        os.close(fd)
    assert got == os.lstat(tree / "link").st_mtime_ns != 2_000_000_000_000_000_000


@pytest.mark.parametrize("bad", ["../etc", "/abs", "a//b", "a/./b"])
def test_a_malformed_dir_is_refused_before_any_stat(impl, tree, bad):
    fd = _fd(tree)
    try:
        with pytest.raises(ValueError):
            impl.mtimes(fd, ["kubepods", bad])
    finally:
        os.close(fd)


def test_no_dirs_no_stats(impl, tree):
    fd = _fd(tree)
    try:
        assert impl.mtimes(fd, []) == []
    finally:
        os.close(fd)
