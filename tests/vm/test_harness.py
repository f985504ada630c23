"""Host-side pieces of the VM harness that need no VM: initramfs format, module order, naming,
the job file stage2.sh sources."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vm import initramfs, qemu
from vm.initramfs import NewcArchive
from vm.plugin import _headline, lane_item_name
from vm.prereqs import MissingPrerequisite, is_static_elf, module_load_order
from vm.qemu import job_env, tmp_keep_paths


@pytest.mark.skipif(not shutil.which("cpio"), reason="needs the cpio tool to read the archive")
def test_newc_archive_reads_back_with_cpio(tmp_path: Path) -> None:
    cpio = NewcArchive()
    cpio.directory("bin")
    cpio.file("bin/hello", b"odd length", 0o755)
    cpio.chardev("console", 5, 1)
    image = cpio.finish()
    assert len(image) % 4 == 0
    listing = subprocess.run(
        ["cpio", "-itv", "--quiet"], input=image, capture_output=True, check=True
    ).stdout.decode()
    lines = listing.splitlines()
    assert [ln.split()[-1] for ln in lines] == ["bin", "bin/hello", "console"]
    assert lines[1].startswith("-rwxr-xr-x")
    assert lines[2].startswith("crw-------")
    assert "5,   1" in lines[2] or "5, 1" in lines[2]
    subprocess.run(
        ["cpio", "-id", "--quiet", "--no-absolute-filenames", "bin/hello"],
        input=image,
        cwd=tmp_path,
        check=True,
    )
    assert (tmp_path / "bin/hello").read_bytes() == b"odd length"


def _fake_modules(tmp_path: Path, builtin: str = "") -> Path:
    # The dependency lines for these modules in Debian's 6.1 kernel.
    (tmp_path / "modules.dep").write_text(
        "kernel/drivers/virtio/virtio_ring.ko:\n"
        "kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/drivers/virtio/virtio_pci_modern_dev.ko:\n"
        "kernel/drivers/virtio/virtio_pci_legacy_dev.ko:\n"
        "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko "
        "kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko "
        "kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/net/9p/9pnet.ko:\n"
        "kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko "
        "kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/fs/netfs/netfs.ko:\n"
        "kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko\n"
        "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko "
        "kernel/fs/netfs/netfs.ko\n"
        "kernel/fs/overlayfs/overlay.ko:\n"
    )
    (tmp_path / "modules.builtin").write_text(builtin)
    return tmp_path


def test_module_order_loads_dependencies_first(tmp_path: Path) -> None:
    order = [p.name for p in module_load_order(_fake_modules(tmp_path))]
    # The load order verified by hand when the harness was first booted.
    assert order == [
        "virtio_ring.ko",
        "virtio.ko",
        "virtio_pci_modern_dev.ko",
        "virtio_pci_legacy_dev.ko",
        "virtio_pci.ko",
        "9pnet.ko",
        "9pnet_virtio.ko",
        "netfs.ko",
        "fscache.ko",
        "9p.ko",
        "overlay.ko",
    ]


def test_builtin_modules_are_not_loaded(tmp_path: Path) -> None:
    modules = _fake_modules(tmp_path, builtin="kernel/fs/overlayfs/overlay.ko\n")
    assert "overlay.ko" not in [p.name for p in module_load_order(modules)]


def test_missing_module_is_a_missing_prerequisite(tmp_path: Path) -> None:
    (tmp_path / "modules.dep").write_text("kernel/fs/overlayfs/overlay.ko:\n")
    with pytest.raises(MissingPrerequisite, match="virtio_pci not found"):
        module_load_order(tmp_path)


def test_static_elf_detection() -> None:
    assert not is_static_elf(Path("/bin/sh"))  # dynamically linked on every distro we run on
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox not installed")
    ldd = subprocess.run(["ldd", busybox], capture_output=True, text=True, check=False)
    assert is_static_elf(Path(busybox)) == ("not a dynamic executable" in ldd.stdout + ldd.stderr)


def test_lane_item_names() -> None:
    assert lane_item_name("test_y", "v2") == "test_y[vm-v2]"
    assert lane_item_name("test_y[a-1]", "v1") == "test_y[a-1-vm-v1]"


def test_headline_is_the_first_error_line() -> None:
    report = "def test():\n>   assert 1 == 2\nE   assert 1 == 2\nE   more\n\nt.py:2: AssertionError"
    assert _headline(report) == "assert 1 == 2"
    assert _headline("just text\nlast line") == "last line"


def test_tmp_keep_paths() -> None:
    paths = ["/tmp/venv/bin/python", "/tmp/venv/lib", "/usr/lib/python3", "/tmp/co", "/tmp"]
    assert tmp_keep_paths(paths) == ["/tmp/co", "/tmp/venv"]


def test_job_env_round_trips_through_sh(tmp_path: Path) -> None:
    args = ["tests/kernel/test x.py", "-k", "a and not 'b'", "$HOME", "-v"]
    (tmp_path / "job.env").write_text(job_env("v2", Path("/work/co"), args))
    script = '. ./job.env; printf "%s\\n" "$LANE" "$CHECKOUT" "$@"'
    out = subprocess.run(
        ["/bin/sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines() == ["v2", "/work/co", *args]


def test_run_prints_only_the_command_output() -> None:
    import io

    from vm.run import CommandOutput

    out = io.BytesIO()
    show = CommandOutput("v2", out)
    serial = b"\x1bcSeaBIOS\r\ncgalloc-vm: lane v2: running command at 3.1 s after boot\r\nhel"
    show(serial)
    show(b"lo\r\nworld\r\ncgalloc-vm: lane v2: command exited 0 at 4 s after boot\r\n[ 4.1] reb")
    assert out.getvalue() == b"hello\nworld\n"


def test_every_lane_has_a_start_order() -> None:
    # a lane missing from START_ORDER would never be booted ahead, only when its item runs
    assert sorted(qemu.START_ORDER) == sorted(qemu.LANES)


def test_lane_items_run_after_every_host_test() -> None:
    # A lane's first item waits for its whole VM run: host tests collected after tests/kernel/
    # would otherwise wait for it too, instead of running beside the VMs.
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/kernel/test_kernel_basics.py", "tests/test_layers.py"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    ids = [line for line in out if "::" in line]
    lane = [i for i, n in enumerate(ids) if n.startswith("tests/kernel/")]
    host = [i for i, n in enumerate(ids) if n.startswith("tests/test_layers.py")]
    assert lane and host and max(host) < min(lane)
    assert all(ids[i].endswith(("[vm-v2]", "[vm-v1]")) for i in lane)


def test_lanes_building_the_initramfs_at_once_all_get_it(tmp_path: Path, monkeypatch) -> None:
    """The lanes boot from threads of one process, each building the missing initramfs: on
    a fresh machine all three built it at once, into one temporary name, and two lanes failed
    renaming a file the first had already moved."""
    together = threading.Barrier(3)

    def build(_p) -> bytes:
        together.wait(10)  # every thread inside the build before any finishes
        return b"image"

    monkeypatch.setattr(initramfs, "build", build)
    monkeypatch.setattr(initramfs, "cache_key", lambda _p: "key")
    got, errors = [], []

    def lane() -> None:
        try:
            got.append(initramfs.cached_initramfs(None, tmp_path))
        except Exception as exc:  # whatever a lane would raise
            errors.append(exc)

    threads = [threading.Thread(target=lane) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert got == [tmp_path / "initramfs-key.cpio"] * 3
    assert [p.name for p in tmp_path.iterdir()] == ["initramfs-key.cpio"]
    assert (tmp_path / "initramfs-key.cpio").read_bytes() == b"image"
