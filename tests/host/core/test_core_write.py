"""Writes, mkdir, rmdir and read_text beneath a fake root, through openat2 and the walk."""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
import sys

import pytest

from cgalloc.errors import CgallocError
from cgalloc.host.core import CoreError, WriteError, native, pure

# (implementation, force the O_NOFOLLOW walk): native runs both resolution paths
RESOLVERS = [(native, False), (native, True), (pure, False)]


@pytest.fixture(params=RESOLVERS, ids=["openat2", "walk", "pure"])
def root(request, tree):
    impl, walk = request.param
    r = impl.open_root(str(tree), allow_any_fs=True, force_walk=walk)
    yield r
    r.close()


def test_write_replaces_the_value(root, tree):
    root.write("kubepods/memory.max", "2048")
    assert (tree / "kubepods/memory.max").read_bytes() == b"2048"
    root.write("kubepods/memory.max", 7)
    assert (tree / "kubepods/memory.max").read_bytes() == b"7"
    root.write("memory.max", b"max")
    assert (tree / "memory.max").read_bytes() == b"max"


def test_write_to_missing_file_names_file_value_and_errno(root):
    with pytest.raises(WriteError) as info:
        root.write("kubepods/memory.high", "104857600")
    err = info.value
    assert err.errno == errno.ENOENT
    assert err.path == "kubepods/memory.high" and err.value == "104857600"
    assert str(err) == (
        "cannot write '104857600' to kubepods/memory.high: No such file or directory (ENOENT)"
    )
    assert isinstance(err, OSError) and isinstance(err, CgallocError)


def test_symlinks_are_refused(root, tree):
    (tree / "kubepods/link.max").symlink_to(tree / "kubepods/memory.max")
    (tree / "linkdir").symlink_to(tree / "kubepods")
    for path in ("kubepods/link.max", "linkdir/memory.max"):
        with pytest.raises(WriteError) as info:
            root.write(path, "1")
        assert info.value.errno == errno.ELOOP, path
    assert (tree / "kubepods/memory.max").read_text() == "104857600\n"


def test_escaping_paths_are_refused(root, tree):
    for path in ("../memory.max", "kubepods/../../x", "/etc/passwd", "kubepods//memory.max",
                 "./memory.max", "", "a\0b"):  # fmt: skip
        with pytest.raises(WriteError) as info:
            root.write(path, "1")
        assert info.value.errno == errno.EINVAL
        assert str(info.value).startswith(f"cannot write '1' to {path}: the path must")
    assert (tree / "memory.max").read_text() == "max\n"


def test_mkdir_and_rmdir(root, tree):
    root.mkdir("kubepods/besteffort")
    assert (tree / "kubepods/besteffort").is_dir()
    with pytest.raises(WriteError) as info:
        root.mkdir("kubepods/besteffort")
    assert info.value.errno == errno.EEXIST
    assert str(info.value) == ("cannot create directory kubepods/besteffort: File exists (EEXIST)")
    root.mkdir("top")
    root.rmdir("top")
    root.rmdir("kubepods/besteffort")
    assert not (tree / "kubepods/besteffort").exists() and not (tree / "top").exists()
    with pytest.raises(WriteError) as info:
        root.rmdir("kubepods/burstable")  # not empty
    assert info.value.errno == errno.ENOTEMPTY
    (tree / "linkdir").symlink_to(tree / "kubepods")
    with pytest.raises(WriteError) as info:
        root.mkdir("linkdir/x")
    assert info.value.errno == errno.ELOOP
    with pytest.raises(WriteError):
        root.rmdir("..")
    assert not (tree / "kubepods/x").exists()


def test_read_text(root, tree):
    assert root.read_text("kubepods/cpu.max") == "max 100000\n"
    (tree / "cpuset.cpus").write_text("0-3,5\n")
    assert root.read_text("cpuset.cpus") == "0-3,5\n"
    with pytest.raises(CoreError) as info:
        root.read_text("cpuset.cpus", limit=6)
    assert info.value.errno == errno.EFBIG
    with pytest.raises(CoreError) as info:
        root.read_text("nope")
    assert str(info.value) == "cannot read nope: No such file or directory (ENOENT)"


def _traced_syscalls(tree, force_walk: bool) -> str:
    script = (
        "import sys; from cgalloc.host.core import native; "
        "r = native.open_root(sys.argv[1], allow_any_fs=True, force_walk=sys.argv[2] == '1'); "
        "r.write('kubepods/burstable/memory.max', '4096')"
    )
    proc = subprocess.run(
        ["strace", "-f", "-e", "trace=openat,openat2", sys.executable, "-c", script,
         str(tree), "1" if force_walk else "0"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[-200:]}")
    return proc.stderr


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_resolution_path_is_the_one_asked_for(tree):
    plain = _traced_syscalls(tree, force_walk=False)
    assert re.search(
        r'openat2\(\d+, "kubepods/burstable/memory.max", \{flags=O_WRONLY\|O_TRUNC\|O_CLOEXEC, '
        r"resolve=RESOLVE_NO_MAGICLINKS\|RESOLVE_NO_SYMLINKS\|RESOLVE_BENEATH",
        plain,
    )
    walk = _traced_syscalls(tree, force_walk=True)
    assert "openat2(" not in walk
    for name in ("kubepods", "burstable"):
        assert re.search(
            rf'openat\(\d+, "{name}", O_RDONLY\|O_NOFOLLOW\|O_CLOEXEC\|O_PATH\|O_DIRECTORY\)', walk
        )
    assert re.search(r'openat\(\d+, "memory.max", O_WRONLY\|O_TRUNC\|O_NOFOLLOW\|O_CLOEXEC\)', walk)
    assert (tree / "kubepods/burstable/memory.max").read_text() == "4096"
