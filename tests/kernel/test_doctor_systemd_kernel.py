"""`cgalloc doctor` with systemd as PID 1 (the v2-systemd lane), faults introduced on the VM:
the cgroupfs driver under systemd; systemd's own system.slice as the system-reserved cgroup,
lacking controllers the kubelet validates until setup enables them; the boot unit as systemctl
reports it: not installed, installed and ordered, disabled, not ordered before the kubelet, and
a last run that failed."""

from __future__ import annotations

from pathlib import Path

from kernel.test_boot_unit_kernel import ETC, STAND_INS, WRITTEN, systemctl
from kernel.test_boot_unit_kernel import cgalloc as unplanned
from kernel.test_doctor_kernel import doctor as doctor_on
from kernel.test_doctor_kernel import setup_then_reserved_ok
from kernel.test_setup_kernel import NODE
from kernel.util import CGROUP_ROOT, read

LANES = ("v2-systemd",)

CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: {driver}
systemReservedCgroup: /system.slice
enforceNodeAllocatable: [pods, system-reserved]
"""
UNIT = ETC / "cgalloc-setup.service"


def doctor(config: Path) -> tuple[int, dict[str, dict]]:
    return doctor_on(config, *NODE)


def evidence(check: dict) -> dict[str, str]:
    return {e["source"]: e["value"] for e in check["evidence"]}


def test_driver_and_reserved_cgroups_under_systemd(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(driver="cgroupfs"))
    _, checks = doctor(config)
    assert checks["systemd-driver"]["verdict"] == "fail"
    assert evidence(checks["systemd-driver"])["PID 1"] == "systemd"
    versions = evidence(checks["versions"])
    assert versions["`systemctl --version`"].startswith("systemd ")

    config.write_text(CONFIG.format(driver="systemd"))
    _, checks = doctor(config)
    assert checks["systemd-driver"]["verdict"] == "ok"
    have = set(read(CGROUP_ROOT / "system.slice/cgroup.controllers").split())
    wanted = {"cpu", "cpuset", "memory", "hugetlb", "pids"} & set(
        read(CGROUP_ROOT / "cgroup.controllers").split()
    )
    reserved = checks["reserved-cgroups"]
    if wanted <= have:  # systemd enabled them all already
        assert reserved["verdict"] == "ok", reserved
    else:  # what the kubelet would refuse: "cgroup ... has some missing controllers"
        assert reserved["verdict"] == "fail", reserved
        missing = evidence(reserved)["system-reserved /system.slice"]
        assert missing == "missing: " + ", ".join(
            c for c in ("cpu", "cpuset", "memory", "hugetlb", "pids") if c in wanted - have
        )
    setup_then_reserved_ok(config, NODE, tmp_path)


def test_boot_unit_as_systemctl_reports_it(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(driver="systemd"))
    (ETC / "kubelet.service").write_text(
        f"[Unit]\nDescription=stand-in\n{STAND_INS['kubelet.service']}"
    )
    assert systemctl("daemon-reload").returncode == 0
    try:
        _, checks = doctor(config)
        assert checks["boot-unit"]["verdict"] == "warn"  # enforced, and no unit
        args = ["--config", str(config), *NODE, "--state-dir", str(tmp_path / "state")]
        done = unplanned("install-unit", "--", *args)  # the unit would run on this VM
        assert done.returncode == 0, done.stdout + done.stderr
        _, checks = doctor(config)
        boot = checks["boot-unit"]
        assert boot["verdict"] == "ok", boot
        assert evidence(boot)["systemctl"] == f"cgalloc-setup.service: {UNIT}"
        assert evidence(boot)["cgalloc-setup.service enabled"] == "yes"

        assert systemctl("disable", "cgalloc-setup.service").returncode == 0
        _, checks = doctor(config)
        assert checks["boot-unit"]["verdict"] == "fail"
        assert "not enabled" in checks["boot-unit"]["finding"]
        assert systemctl("enable", "cgalloc-setup.service").returncode == 0

        text = UNIT.read_text()
        UNIT.write_text(text.replace("Before=kubelet.service ", "Before="))
        assert systemctl("daemon-reload").returncode == 0
        _, checks = doctor(config)
        assert checks["boot-unit"]["verdict"] == "fail"
        assert "not ordered before kubelet.service" in checks["boot-unit"]["finding"]
        UNIT.write_text(text)

        config.unlink()  # the next run of the unit cannot read its kubelet config
        assert systemctl("daemon-reload").returncode == 0
        assert systemctl("start", "cgalloc-setup.service").returncode != 0
        config.write_text(CONFIG.format(driver="systemd"))
        _, checks = doctor(config)
        boot = checks["boot-unit"]
        assert boot["verdict"] == "fail"
        assert evidence(boot)["cgalloc-setup.service ActiveState"] == "failed"
        assert "journalctl -u cgalloc-setup.service" in boot["fix"]
    finally:
        systemctl("stop", "cgalloc-setup.service")
        for path in (*WRITTEN, ETC / "kubelet.service"):
            path.unlink(missing_ok=True)
        systemctl("daemon-reload")
        systemctl("reset-failed")
