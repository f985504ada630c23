"""The lanes' initramfs (built once, cached): static busybox, 9p/overlay modules, init scripts."""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import stat
import tempfile
from pathlib import Path

from .prereqs import Prereqs

HERE = Path(__file__).resolve().parent
INIT_SCRIPTS = ("init.sh", "stage2.sh")


class NewcArchive:
    """A cpio archive in the "newc" format the kernel unpacks as initramfs."""

    def __init__(self) -> None:
        self._out = io.BytesIO()
        self._ino = 0

    def _entry(
        self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)
    ) -> None:
        self._ino += 1
        encoded = name.encode() + b"\0"
        fields = (self._ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0)
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        self._out.write(header + encoded + _pad(len(header) + len(encoded)))
        self._out.write(data + _pad(len(data)))

    def directory(self, name: str) -> None:
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | mode, data)

    def chardev(self, name: str, major: int, minor: int) -> None:
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return self._out.getvalue()


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 4)


def _module_bytes(path: Path) -> bytes:
    # busybox insmod takes plain .ko files only
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes())
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes())
    return path.read_bytes()


def _module_name(path: Path) -> str:
    return path.name.split(".ko")[0]


def build(p: Prereqs) -> bytes:
    """The initramfs image: /init (stage 1) runs the host root over 9p, then /stage2.sh."""
    cpio = NewcArchive()
    for d in ("bin", "dev", "proc", "sys", "lower", "rw", "newroot", "modules"):
        cpio.directory(d)
    # Without /dev/console the kernel starts init with no stdin/stdout.
    cpio.chardev("dev/console", 5, 1)
    cpio.file("bin/busybox", p.busybox.read_bytes(), 0o755)
    for name in INIT_SCRIPTS:
        target = "init" if name == "init.sh" else name
        cpio.file(target, (HERE / name).read_bytes(), 0o755)
    for ko in p.modules:
        cpio.file(f"modules/{_module_name(ko)}.ko", _module_bytes(ko))
    cpio.file("modules.order", "".join(_module_name(ko) + "\n" for ko in p.modules).encode())
    return cpio.finish()


def cache_dir() -> Path:
    """$CGALLOC_VM_CACHE, else $XDG_CACHE_HOME/cgalloc-vm, else ~/.cache/cgalloc-vm."""
    if os.environ.get("CGALLOC_VM_CACHE"):
        return Path(os.environ["CGALLOC_VM_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cgalloc-vm"


def cache_key(p: Prereqs) -> str:
    digest = hashlib.sha256()
    for name in INIT_SCRIPTS:
        digest.update((HERE / name).read_bytes())
    digest.update(p.busybox.read_bytes())
    for ko in p.modules:
        digest.update(str(ko).encode())
    return f"{p.kernel_version}-{digest.hexdigest()[:16]}"


def cached_initramfs(p: Prereqs, directory: Path | None = None) -> Path:
    """Path of the initramfs for this kernel and these init scripts, built on first use."""
    directory = directory or cache_dir()
    path = directory / f"initramfs-{cache_key(p)}.cpio"
    if not path.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        # a name of its own: the lanes' threads (and other runs) may build it at the same time
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(build(p))
        os.replace(tmp, path)  # concurrent runs never see a half-written image
    return path
