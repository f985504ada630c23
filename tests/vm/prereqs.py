"""What a VM lane needs on this host: qemu, a distro kernel with its modules, static busybox."""

from __future__ import annotations

import os
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

# Loaded (with their dependencies) in the initramfs so it can mount the host root over 9p.
NEEDED_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")
MODULE_SUFFIXES = (".ko", ".xz", ".gz")


class MissingPrerequisite(Exception):
    """The host lacks something a VM lane needs; the message says what and how to get it."""


@dataclass(frozen=True)
class Prereqs:
    qemu: str
    kernel: Path  # vmlinuz
    kernel_version: str
    modules: tuple[Path, ...]  # .ko files in load order
    busybox: Path


def _version_key(version: str) -> list[tuple[int, str]]:
    return [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"[.-]", version)]


def find_kernel(
    boot: Path = Path("/boot"), lib_modules: Path = Path("/lib/modules")
) -> tuple[Path, str]:
    """The newest /boot/vmlinuz-<version> whose modules are installed (or $CGALLOC_VM_KERNEL)."""
    override = os.environ.get("CGALLOC_VM_KERNEL")
    candidates = [Path(override)] if override else sorted(boot.glob("vmlinuz-*"))
    usable = []
    for image in candidates:
        version = image.name.removeprefix("vmlinuz-")
        if image.is_file() and os.access(image, os.R_OK) and (lib_modules / version).is_dir():
            usable.append((version, image))
    if not usable:
        wanted = f"CGALLOC_VM_KERNEL={override}" if override else "/boot/vmlinuz-<version>"
        raise MissingPrerequisite(
            f"no readable {wanted} with /lib/modules/<version> "
            "(install linux-image-amd64: .ci/install-vm-deps)"
        )
    version, image = max(usable, key=lambda vi: _version_key(vi[0]))
    return image, version


def module_load_order(modules_dir: Path, wanted: tuple[str, ...] = NEEDED_MODULES) -> list[Path]:
    """The .ko files for `wanted` and their dependencies, dependencies first (as modprobe would)."""
    dep_file = modules_dir / "modules.dep"
    if not dep_file.is_file():
        raise MissingPrerequisite(f"{dep_file} is missing (reinstall the kernel package)")
    deps: dict[str, tuple[str, list[str]]] = {}
    for line in dep_file.read_text().splitlines():
        path, _, rest = line.partition(":")
        deps[_module_name(path)] = (path, rest.split())
    builtin_file = modules_dir / "modules.builtin"
    builtin = (
        {_module_name(p) for p in builtin_file.read_text().split()}
        if builtin_file.is_file()
        else set()
    )
    order: list[str] = []
    for name in wanted:
        if name in builtin:
            continue
        if name not in deps:
            raise MissingPrerequisite(f"kernel module {name} not found in {dep_file}")
        path, needs = deps[name]
        # modules.dep lists a module's dependencies so that the last one loads first.
        for rel in [*reversed(needs), path]:
            if rel not in order:
                order.append(rel)
    return [modules_dir / rel for rel in order]


def _module_name(path: str) -> str:
    return Path(path).name.split(".ko")[0].replace("-", "_")


def is_static_elf(path: Path) -> bool:
    """True for an ELF64 executable without a PT_INTERP (dynamic loader) program header."""
    with path.open("rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def find_busybox() -> Path:
    for candidate in (shutil.which("busybox"), "/bin/busybox", "/usr/bin/busybox"):
        if candidate and Path(candidate).is_file() and is_static_elf(Path(candidate)):
            return Path(candidate)
    raise MissingPrerequisite("no statically linked busybox (install busybox-static)")


def find_prereqs() -> Prereqs:
    """Everything a lane needs, or MissingPrerequisite naming the first thing missing."""
    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        raise MissingPrerequisite("qemu-system-x86_64 not found (install qemu-system-x86)")
    kernel, version = find_kernel()
    modules = module_load_order(Path("/lib/modules") / version)
    for ko in modules:
        if ko.suffix not in MODULE_SUFFIXES:
            raise MissingPrerequisite(f"{ko}: only .ko, .ko.xz and .ko.gz modules are supported")
    return Prereqs(qemu, kernel, version, tuple(modules), find_busybox())
