"""A FIFO where a cgroup file belongs (a plain directory tree given to ``stats --cgroupfs``)
is read as empty at once, by both cores, on every read path: a blocking open or read would
hang the command (found by a hostile-user probe)."""

from __future__ import annotations

import os

import pytest

from cgalloc.host.core import OK, FileSpec

SPECS = [FileSpec("memory.max"), FileSpec("memory.stat", "keyed", ("anon",))]


pytestmark = pytest.mark.usefixtures("no_hang")


@pytest.fixture
def fifo_tree(tree):
    os.unlink(tree / "kubepods" / "memory.max")
    os.mkfifo(tree / "kubepods" / "memory.max")
    return tree


def test_a_bulk_read_takes_a_fifo_as_an_unparsable_file(impl, fifo_tree):
    root = impl.open_root(str(fifo_tree), allow_any_fs=True)
    snap = root.read(["kubepods"], SPECS)
    cells = snap.as_dict(0)
    assert cells["memory.stat"] == {"anon": 4096}  # the other file of the dir is read
    assert cells["memory.max"] is None
    assert snap.status[0] != OK


def test_a_sampler_keeping_the_fifo_open_does_not_block(impl, fifo_tree):
    root = impl.open_root(str(fifo_tree), allow_any_fs=True)
    sampler = root.sampler(["kubepods"], SPECS)
    try:
        for _ in range(2):  # the second sample reads through the kept fd
            assert sampler.sample().as_dict(0)["memory.max"] is None
    finally:
        sampler.close()


def test_read_files_and_read_text_give_a_fifo_as_empty(impl, fifo_tree):
    fd = os.open(fifo_tree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        assert impl.read_files(fd, ["kubepods/memory.max"]) == [b""]
    finally:
        os.close(fd)
    root = impl.open_root(str(fifo_tree), allow_any_fs=True)
    assert root.read_text("kubepods/memory.max") == ""
