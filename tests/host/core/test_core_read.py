"""Bulk reads on fake trees: layout, per-cell errors, buffer limits, threads, C = Python."""

from __future__ import annotations

import shutil
import threading
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cgalloc.host.core import (
    EIO,
    EMISSING_KEY,
    ENOENT,
    ETOOLONG,
    MAX,
    OK,
    FileSpec,
    native,
    pure,
)

SPECS = [
    FileSpec("memory.max"),
    FileSpec("memory.stat", "keyed", ("anon", "file", "swap")),
    FileSpec("cpu.max", "fields", ("quota", "period")),
]


def test_read_fills_cells_in_documented_layout(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    snap = root.read(["kubepods", "kubepods/burstable", "", "kubepods/gone"], SPECS)
    assert snap.cells_per_dir == 6
    assert snap.as_dict(0) == {
        "memory.max": 104857600,
        "memory.stat": {"anon": 4096, "file": 8192, "swap": None},
        "cpu.max": ["max", 100000],
    }
    assert snap.get(0, 1, 2) == (EMISSING_KEY, 0)
    assert snap.as_dict(1) == {
        "memory.max": "max",
        "memory.stat": {"anon": 1, "file": 2, "swap": None},
        "cpu.max": [50000, 100000],
    }
    assert snap.get(2, 0) == (MAX, 0)  # the root's own memory.max
    assert snap.as_dicts() == [snap.as_dict(d) for d in range(4)]
    assert snap.as_dicts()[3] == {
        "memory.max": None,
        "memory.stat": {"anon": None, "file": None, "swap": None},
        "cpu.max": [None, None],
    }
    assert snap.get(2, 1, 0) == (ENOENT, 0)  # the root has no memory.stat
    assert [snap.get(3, f, 0)[0] for f in range(3)] == [ENOENT] * 3
    # raw layout: dir 1, file 2 (cpu.max), key 0 (quota)
    assert snap.values[1 * 6 + 4] == 50000 and snap.status[1 * 6 + 4] == OK


def test_content_that_fills_the_buffer_is_too_long(impl, tree):
    (tree / "kubepods/memory.max").write_text("1" * 15)  # 15 bytes: fits a 16-byte buffer
    (tree / "kubepods/memory.stat").write_text("anon 1\n" * 3)  # 21 bytes: does not
    snap = impl.open_root(str(tree), allow_any_fs=True).read(["kubepods"], SPECS, bufsize=16)
    assert snap.get(0, 0) == (OK, 111111111111111)
    assert [snap.get(0, 1, k) for k in range(3)] == [(ETOOLONG, 0)] * 3


def test_symlinks_are_not_followed(impl, tree):
    (tree / "link").symlink_to(tree / "kubepods")
    (tree / "kubepods/burstable/memory.max").unlink()
    (tree / "kubepods/burstable/memory.max").symlink_to(tree / "kubepods/memory.max")
    snap = impl.open_root(str(tree), allow_any_fs=True).read(["link", "kubepods/burstable"], SPECS)
    assert snap.get(0, 0) == (EIO, 0)  # a symlinked directory
    assert snap.get(1, 0) == (EIO, 0)  # a symlinked file
    assert snap.get(1, 1, 0) == (OK, 1)


def test_threads_split_the_work_without_changing_results(tree):
    dirs = []
    for i in range(300):
        d = tree / f"kubepods/pod{i}"
        d.mkdir()
        (d / "memory.max").write_text(f"{i * 4096}\n")
        (d / "memory.stat").write_text(f"anon {i}\nfile {2 * i}\nswap {3 * i}\n")
        (d / "cpu.max").write_text(f"{i} 100000\n")
        dirs.append(f"kubepods/pod{i}")
    root = native.open_root(str(tree), allow_any_fs=True)
    snaps = [root.read(dirs, SPECS, threads=n) for n in (1, 2, 7)]
    for snap in snaps:
        assert [snap.as_dict(i)["memory.stat"]["swap"] for i in range(300)] == [
            3 * i for i in range(300)
        ]
        assert bytes(snap.status) == bytes(snaps[0].status)
        assert list(snap.values) == list(snaps[0].values)
    assert snaps[0].as_dict(299)["cpu.max"] == [299, 100000]


def test_cffi_releases_the_gil_around_core_calls():
    # cffi's generated wrapper brackets the C call with Py_BEGIN/END_ALLOW_THREADS
    import importlib.util
    import io

    spec = importlib.util.spec_from_file_location(
        "build_core", Path(__file__).parents[3] / "csrc" / "build_core.py"
    )
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    out = io.StringIO()
    build.ffibuilder.emit_c_code(out)
    code = out.getvalue()
    wrapper = code[code.index("_cffi_f_cg_read(") :]
    wrapper = wrapper[: wrapper.index("\n}\n")]
    assert "Py_BEGIN_ALLOW_THREADS" in wrapper
    assert wrapper.index("Py_BEGIN_ALLOW_THREADS") < wrapper.index("cg_read(x0")


def test_other_python_threads_run_during_a_read(tree):
    for i in range(200):
        (tree / f"p{i}").mkdir()
        (tree / f"p{i}/memory.max").write_text("1\n")
    root = native.open_root(str(tree), allow_any_fs=True)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)

    t = threading.Thread(target=count)
    t.start()
    try:
        before = len(ticks)
        for _ in range(20):
            root.read([f"p{i}" for i in range(200)], [FileSpec("memory.max")], threads=1)
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
    assert during > 0


_CONTENT = st.one_of(
    st.binary(max_size=80),
    st.sampled_from([b"max\n", b"-1\n", b"12\n", b"", b"1 2\n", b"max 5", b"anon 1\nfile x\n"]),
    st.lists(
        st.tuples(st.sampled_from([b"anon", b"file", b"swap", b"x"]), st.binary(max_size=24)),
        max_size=6,
    ).map(lambda kv: b"".join(k + b" " + v + b"\n" for k, v in kv)),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(contents=st.lists(st.tuples(_CONTENT, _CONTENT, _CONTENT, st.booleans()), min_size=1,
                         max_size=4),
       bufsize=st.sampled_from([2, 8, 32, 65536]))  # fmt: skip
def test_c_and_python_reads_agree(tmp_path_factory, contents, bufsize):
    base = tmp_path_factory.mktemp("diff")
    dirs = []
    for i, (mx, stat, cpu, present) in enumerate(contents):
        d = base / f"cg{i}"
        dirs.append(f"cg{i}")
        if not present:
            continue
        d.mkdir()
        for spec, data in zip(SPECS, (mx, stat, cpu), strict=True):
            (d / spec.name).write_bytes(data)
    a = native.open_root(str(base), allow_any_fs=True).read(dirs, SPECS, bufsize=bufsize)
    b = pure.open_root(str(base), allow_any_fs=True).read(dirs, SPECS, bufsize=bufsize)
    assert bytes(a.status) == bytes(b.status)
    assert list(a.values) == list(b.values)
    shutil.rmtree(base)


def test_bad_directory_is_refused_before_reading(impl, tree):
    root = impl.open_root(str(tree), allow_any_fs=True)
    for bad in ("/kubepods", "kubepods/../..", "a//b", "x\0y"):
        try:
            root.read([bad], SPECS)
        except ValueError as exc:
            assert repr(bad) in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_snapshot_memory_is_compact(impl, tree):
    dirs = [f"kubepods/pod{i}" for i in range(1000)]  # missing: cells are still stored
    root = impl.open_root(str(tree), allow_any_fs=True)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        snap = root.read(dirs, SPECS)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert memoryview(snap.values).nbytes + len(snap.status) == 1000 * 6 * 9
    assert held / len(dirs) <= 1024
