"""``read_files``: many small files below an fd, one read each, as a setup re-run compares every
file it manages (the plan's ``read_many``)."""

from __future__ import annotations

import errno
import os

import pytest


def _fd(path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _read(impl, root, paths, **kw):
    fd = _fd(root)
    try:
        return impl.read_files(fd, paths, **kw)
    finally:
        os.close(fd)


def test_each_file_whole_or_its_errno(impl, tree):
    (tree / "empty").write_text("")
    (tree / "plain").write_text("x")
    got = _read(impl, tree, [
        "kubepods/memory.max", "memory.max", "kubepods/gone", "gone/memory.max",
        "plain/memory.max", "empty", "kubepods/burstable", "kubepods/burstable/cpu.max",
    ])  # fmt: skip
    assert got == [b"104857600\n", b"max\n", -errno.ENOENT, -errno.ENOENT,
                   -errno.ENOTDIR, b"", -errno.EISDIR, b"50000 100000\n"]  # fmt: skip


def test_a_file_that_fills_the_slot_is_efbig_not_cut(impl, tree):
    (tree / "big").write_text("1" * 16)
    assert _read(impl, tree, ["big"], slot=16) == [-errno.EFBIG]
    assert _read(impl, tree, ["big"], slot=17) == [b"1" * 16]


def test_files_under_parents_in_any_order_over_threads(impl, tmp_path):
    """Files come grouped by cgroup but need not: each is its own, whatever came before it,
    on any number of threads (the cuts fall inside a cgroup's files)."""
    expected = {}
    for i in range(40):
        for name in ("a", "b", "c"):
            rel = f"p{i % 7}/c{i}/{name}" if i % 2 else f"t{i}{name}"
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(rel)
            expected[rel] = rel.encode()
    paths = sorted(expected, key=lambda p: (p[::-1], p))  # parents interleaved
    paths += ["p9/c1/a", "p1/c1/a"]  # a missing parent, then a file read before
    for threads in (1, 2, 3):
        got = _read(impl, tmp_path, paths, threads=threads)
        assert got == [expected[p] for p in paths[:-2]] + [-errno.ENOENT, b"p1/c1/a"]


@pytest.mark.parametrize("bad", ["", "../etc/passwd", "/etc/passwd", "a//b", "a/./b"])
def test_a_malformed_path_is_refused_before_any_read(impl, tree, bad):
    with pytest.raises(ValueError, match="file"):
        _read(impl, tree, ["memory.max", bad])


def test_a_slot_of_no_bytes_is_refused(impl, tree):
    with pytest.raises(ValueError, match="slot"):
        _read(impl, tree, ["memory.max"], slot=0)


def test_no_files_no_reads(impl, tree):
    assert _read(impl, tree, []) == []


def test_no_symlinks_refuses_a_link_anywhere_on_the_path(impl, tree):
    """``no_symlinks`` (setup's memo check, plan_memo) resolves as writes do: a symlinked
    cgroup or file is ELOOP where a plain read follows it; a directory answers EISDIR (it
    exists, not through a link); everything else reads as without it."""
    os.symlink("kubepods", tree / "linkdir")
    os.symlink("memory.max", tree / "kubepods" / "link.max")
    paths = ["kubepods/memory.max", "linkdir/memory.max", "kubepods/link.max",
             "kubepods/burstable", "linkdir", "kubepods/gone", "gone/memory.max"]  # fmt: skip
    followed = [b"104857600\n", b"104857600\n", b"104857600\n", -errno.EISDIR,
                -errno.EISDIR, -errno.ENOENT, -errno.ENOENT]  # fmt: skip
    assert _read(impl, tree, paths) == followed
    for threads in (1, 2):
        got = _read(impl, tree, paths, threads=threads, no_symlinks=True)
        assert got == [b"104857600\n", -errno.ELOOP, -errno.ELOOP, -errno.EISDIR,
                       -errno.ELOOP, -errno.ENOENT, -errno.ENOENT]  # fmt: skip
