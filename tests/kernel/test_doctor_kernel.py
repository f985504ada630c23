"""`cgalloc doctor` on real kernels without systemd (the v2 and v1 lanes): the cgroup-v1 check
against the kubelet's failCgroupV1 on the hierarchy the kernel really mounts, the reserved
cgroups the kubelet validates (missing, then made by setup), and PSI as the kernel has it."""

from __future__ import annotations

import json
from pathlib import Path

from kernel.test_setup_kernel import NODE, cgalloc
from kernel.util import is_v2

CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
"""
RESERVED = [
    "--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/doctor-system",
]  # fmt: skip


def doctor(config: Path, *args: str) -> tuple[int, dict[str, dict]]:
    done = cgalloc("doctor", "--config", str(config), "--history", "", *args, "-o", "json")
    assert done.returncode in (0, 1, 4), done.stdout + done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks


def test_cgroup_v1_check_on_the_mounted_hierarchy(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    code, checks = doctor(config, "--kubelet-version", "1.36")
    check = checks["cgroup-v1"]
    if is_v2():
        assert check["verdict"] == "ok"
        assert check["evidence"][0]["value"] == "cgroup2 at /sys/fs/cgroup"
        return
    # v1: the 1.36 kubelet refuses it (failCgroupV1 defaults to true from 1.35) ...
    assert check["verdict"] == "fail", check
    assert "/sys/fs/cgroup/memory" in check["evidence"][0]["value"]
    assert code == 4
    # ... and starts, warned, once the config opts out
    config.write_text(CONFIG + "failCgroupV1: false\n")
    code, checks = doctor(config, "--kubelet-version", "1.36")
    assert checks["cgroup-v1"]["verdict"] == "warn"
    assert code in (1, 4)


def test_reserved_cgroup_missing_then_made_by_setup(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + ("failCgroupV1: false\n" if not is_v2() else ""))
    args = [*NODE, *RESERVED, "--kubelet-version", "1.36"]
    _, checks = doctor(config, *args)
    check = checks["reserved-cgroups"]
    assert check["verdict"] == "fail", check
    missing = check["evidence"][-1]["value"]
    if is_v2():
        assert missing == "missing: the cgroup itself (/sys/fs/cgroup/doctor-system)"
    else:
        assert "/sys/fs/cgroup/memory/doctor-system" in missing
    setup_then_reserved_ok(config, args, tmp_path)


def setup_then_reserved_ok(config: Path, args: list[str], tmp_path: Path) -> None:
    """setup makes the reserved cgroups; doctor then finds them; teardown undoes setup."""
    state = tmp_path / "state"
    done = cgalloc("setup", "--config", str(config), *args, "--state-dir", str(state))
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        _, checks = doctor(config, *args)
        assert checks["reserved-cgroups"]["verdict"] == "ok", checks["reserved-cgroups"]
    finally:
        down = cgalloc("teardown", "--state-dir", str(state))
        assert down.returncode == 0, down.stdout + down.stderr


def test_psi_as_the_kernel_has_it(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    _, checks = doctor(config)
    try:
        Path("/proc/pressure/memory").read_text()
        readable = True
    except OSError:
        readable = False
    assert checks["psi"]["verdict"] == ("ok" if readable else "warn"), checks["psi"]
    release = Path("/proc/sys/kernel/osrelease").read_text().strip()
    versions = {e["source"]: e["value"] for e in checks["versions"]["evidence"]}
    assert versions["/proc/sys/kernel/osrelease"] == release
