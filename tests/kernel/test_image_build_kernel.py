"""An image build with `install-unit --root`, then those files as the booted node's (the
v2-systemd lane): what install-unit writes below a directory standing for the image root is
what systemd loads once the files are the root's: the unit from its path, enabled through the
wants link, the kubelet's drop-in ordering it after the tree; starting the kubelet (as the boot
does) runs setup first and puts the kubelet in its slice.

Booting the built image itself is not possible here: a lane boots the host's root under an
overlay with a fixed test target, not a root of the test's making. So the image's files are laid
over the running VM's root and systemd is told (daemon-reload), the nearest a single boot gets.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from kernel.test_boot_unit_kernel import (
    ETC,
    KUBELET_CONFIG,
    SLICE,
    STAND_INS,
    WRITTEN,
    cgalloc,
    cgroup_of,
    systemctl,
)
from kernel.util import CGROUP_ROOT

LANES = ("v2-systemd",)


def test_files_written_below_an_image_root_are_what_systemd_loads(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(KUBELET_CONFIG)
    state = tmp_path / "state"
    image = tmp_path / "image"
    image.mkdir()
    args = ["--config", str(config), "--root-dir", str(tmp_path), "--state-dir", str(state)]
    done = cgalloc("install-unit", "--root", str(image), "--daemons", "kubelet", "--", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted(str(p.relative_to(image)) for p in image.rglob("*") if not p.is_dir())
    assert written == [
        "etc/cgalloc/setup.conf",
        "etc/systemd/system/cgalloc-setup.service",
        "etc/systemd/system/kubelet.service.d/50-cgalloc.conf",
        "etc/systemd/system/multi-user.target.wants/cgalloc-setup.service",
    ]
    assert not (ETC / "cgalloc-setup.service").exists()  # nothing written outside the root
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(image / "etc/systemd/system/cgalloc-setup.service")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr

    (ETC / "kubelet.service").write_text(
        f"[Unit]\nDescription=stand-in kubelet\n{STAND_INS['kubelet.service']}"
    )
    shutil.copytree(image / "etc", "/etc", dirs_exist_ok=True, symlinks=True)
    try:
        assert systemctl("daemon-reload").returncode == 0
        show = systemctl(
            "show",
            "cgalloc-setup.service",
            "-p",
            "FragmentPath",
            "-p",
            "UnitFileState",
            "-p",
            "Before",
        ).stdout
        assert f"FragmentPath={ETC}/cgalloc-setup.service" in show
        assert "UnitFileState=enabled" in show
        assert "kubelet.service" in show
        wants = systemctl("show", "multi-user.target", "-p", "Wants", "--value").stdout.split()
        assert "cgalloc-setup.service" in wants
        after = systemctl("show", "kubelet.service", "-p", "After", "--value").stdout.split()
        assert "cgalloc-setup.service" in after
        assert not (CGROUP_ROOT / "kubepods.slice").exists()

        start = systemctl("start", "kubelet.service")  # the boot's transaction, for the kubelet
        assert start.returncode == 0, (
            start.stderr + systemctl("status", "cgalloc-setup.service", "kubelet.service").stdout
        )
        assert (CGROUP_ROOT / "kubepods.slice").is_dir()
        assert cgroup_of("kubelet.service") == f"/{SLICE}/kubelet.service"
        check = cgalloc("verify", *args[:4])
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        for unit in ("kubelet.service", "cgalloc-setup.service", SLICE):
            systemctl("stop", unit)
        if state.exists():
            subprocess.run(
                [sys.executable, "-m", "cgalloc", "teardown", "--state-dir", str(state)],
                capture_output=True,
                text=True,
                timeout=600,
            )
        for path in (*WRITTEN, ETC / "kubelet.service"):
            path.unlink(missing_ok=True)
        systemctl("daemon-reload")
        systemctl("reset-failed")
