"""apply_ops: a setup's mkdirs and writes in one core call (csrc/apply_batch.c), made in order
until one fails, each exactly as Root.mkdir/Root.write makes it; the pure core's loop is the
reference the C batch must match, op for op and error for error."""

from __future__ import annotations

import errno
import itertools
import os
import threading
import time

import pytest

from cgalloc.host.core import Stop, WriteError, native, pure

RESOLVERS = [(native, False), (native, True), (pure, False)]


def _open(tree, impl, walk):
    return impl.open_root(str(tree), allow_any_fs=True, force_walk=walk)


def _apply(impl, ops, stop=None, packed=False):
    """``impl.apply_ops`` on the ops, or on ``impl.pack_ops``' of them (packed on this thread,
    made by a later call: setup's whole plan)."""
    return impl.apply_ops(impl.pack_ops(ops) if packed else ops, stop)


def _snapshot(tree) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(tree)): None if p.is_dir() else p.read_bytes()
        for p in sorted(tree.rglob("*"))
    }


@pytest.mark.parametrize("packed", [False, True], ids=["ops", "packed"])
@pytest.mark.parametrize(("impl", "walk"), RESOLVERS, ids=["openat2", "walk", "pure"])
def test_all_ops_made_in_order(tree, impl, walk, packed):
    root = _open(tree, impl, walk)
    ops = [
        (root, "kubepods/guaranteed", None),
        (root, "kubepods/guaranteed/pod1", None),  # needs the mkdir before it
        (root, "kubepods/memory.max", "2048"),
        (root, "kubepods/burstable/cpu.max", "max 100000"),
        (root, "memory.max", ""),  # an empty value is one write of zero bytes
        (root, "kubepods/burstable/memory.max", "1Gi é"),  # non-ASCII: byte offsets differ
    ]
    assert _apply(impl, ops, packed=packed) == (len(ops), None)
    assert (tree / "kubepods/guaranteed/pod1").is_dir()
    assert (tree / "kubepods/memory.max").read_bytes() == b"2048"
    assert (tree / "kubepods/burstable/cpu.max").read_bytes() == b"max 100000"
    assert (tree / "memory.max").read_bytes() == b""
    assert (tree / "kubepods/burstable/memory.max").read_bytes() == "1Gi é".encode()
    assert _apply(impl, [], packed=packed) == (0, None)
    root.close()


# (ops, index of the failing op, its errno): the failure stops the batch there
FAILING = [
    ([("mkdir", "a"), ("mkdir", "kubepods"), ("write", "memory.max", "1")], 1, errno.EEXIST),
    ([("write", "kubepods/memory.max", "5"), ("write", "kubepods/nope", "1")], 1, errno.ENOENT),
    ([("mkdir", "x"), ("mkdir", "x/../y"), ("mkdir", "z")], 1, errno.EINVAL),
    ([("write", "/memory.max", "1")], 0, errno.EINVAL),
    ([("mkdir", "b"), ("write", "kubepods/mem\0ory.max", "1")], 1, errno.EINVAL),
    ([("mkdir", "c"), ("write", "linkdir/memory.max", "1")], 1, errno.ELOOP),
    # a symlinked last component below the parent of the op before it
    ([("write", "kubepods/memory.max", "5"), ("write", "kubepods/lnk", "1")], 1, errno.ELOOP),
    ([("mkdir", "kubepods/d"), ("mkdir", "kubepods/lnk/e")], 1, errno.ELOOP),
]


@pytest.mark.parametrize(("spec", "stop", "code"), FAILING)
def test_stops_at_the_first_failure_like_the_single_calls(tree, tmp_path_factory, spec, stop,
                                                          code):  # fmt: skip
    """Each core and resolver: the ops before the failing one are made, none after it, and the
    error is the one Root.mkdir/Root.write raise for that op alone (pure core as reference);
    the same when the ops were packed first (a NUL is made op by op, which names it)."""
    (tree / "linkdir").symlink_to(tree / "kubepods")
    (tree / "kubepods" / "lnk").symlink_to(tree / "kubepods")
    outcomes = []
    for (impl, walk), packed in itertools.product(RESOLVERS, (False, True)):
        copy = tmp_path_factory.mktemp("copy")
        for p in sorted(tree.rglob("*")):
            target = copy / p.relative_to(tree)
            if p.is_symlink():
                target.symlink_to(copy / "kubepods")
            elif p.is_dir():
                target.mkdir()
            else:
                target.write_bytes(p.read_bytes())
        root = _open(copy, impl, walk)
        ops = [(root, s[1], s[2] if s[0] == "write" else None) for s in spec]
        made, err = _apply(impl, ops, packed=packed)
        assert made == stop and isinstance(err, WriteError)
        assert err.errno == code
        single = None
        try:
            kind, path = spec[stop][0], spec[stop][1]
            root.mkdir(path) if kind == "mkdir" else root.write(path, spec[stop][2])
        except WriteError as exc:
            single = exc
        assert single is not None and str(err) == str(single) and err.path == single.path
        for later in spec[stop + 1 :]:
            assert later[0] != "mkdir" or not (copy / later[1]).exists()
        outcomes.append((made, err.errno, str(err), _snapshot(copy)))
        root.close()
    assert all(o == outcomes[-1] for o in outcomes)


@pytest.mark.parametrize("packed", [False, True], ids=["ops", "packed"])
@pytest.mark.parametrize(("impl", "walk"), RESOLVERS, ids=["openat2", "walk", "pure"])
def test_a_stop_set_before_the_call_makes_nothing(tree, impl, walk, packed):
    root, stop = _open(tree, impl, walk), Stop()
    stop.set()
    ops = [(root, "a", None), (root, "kubepods/memory.max", "5")]
    assert _apply(impl, ops, stop, packed) == (0, None)
    assert not (tree / "a").exists()
    root.close()


@pytest.mark.parametrize("packed", [False, True], ids=["ops", "packed"])
@pytest.mark.parametrize(("impl", "walk"), RESOLVERS, ids=["openat2", "walk", "pure"])
def test_a_stop_set_during_the_call_stops_it_before_the_next_op(tree, impl, walk, packed):
    """Set from another thread while the call runs (as setup's signal handler does): the op
    under way is made, none after it, and no error. The FIFO holds the call in its second op
    until the reading end is opened, after the stop is set."""
    os.mkfifo(tree / "fifo")
    root, stop, out = _open(tree, impl, walk), Stop(), []
    ops = [(root, "a", None), (root, "fifo", "1"), (root, "b", None)]
    worker = threading.Thread(target=lambda: out.append(_apply(impl, ops, stop, packed)))
    worker.start()
    deadline = time.monotonic() + 10  # a broken call fails the test instead of hanging it
    while not (tree / "a").exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)  # now blocked opening the FIFO
    try:
        stop.set()
    finally:
        fd = os.open(tree / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    worker.join()
    try:
        assert os.read(fd, 8) == b"1"
    finally:
        os.close(fd)
    assert out == [(2, None)]
    assert not (tree / "b").exists()
    root.close()


def _cgroupfs_mount() -> str | None:
    """A mount of this machine's cgroupfs, opened read-only by the test below (nothing is
    written to it)."""
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] in ("cgroup", "cgroup2"):
                return fields[1]
    return None


def test_parents_are_kept_across_ops_only_for_roots_on_cgroupfs(tree):
    """apply_batch.c may make an op below a parent opened for an op before it only where the
    kernel has no symlinks and moves a cgroup only within its parent: a plain tree's ops are
    each resolved whole, as alone."""
    plain = native.open_root(str(tree), allow_any_fs=True)
    kinds = native.pack_ops([(plain, "a", None), (plain, "kubepods/memory.max", "1")]).args[1]
    assert [k & native.lib.CG_OP_KEEP_PARENT for k in kinds] == [0, 0]
    plain.close()
    mount = _cgroupfs_mount()
    if mount is None:
        pytest.skip("no cgroupfs mounted here")
    real = native.open_root(mount)
    kinds = native.pack_ops([(real, "a", None), (real, "b/memory.max", "1")]).args[1]
    assert all(k & native.lib.CG_OP_KEEP_PARENT for k in kinds)
    real.close()
