"""`cgalloc install-unit` with systemd as PID 1 (the v2-systemd lane): the boot unit runs setup
before a stand-in kubelet.service that needs its reserved cgroup, the daemon drop-ins put the
stand-ins in the kube-reserved slice (at once for a start, after a restart for one already
running), and a setup that cannot run fails the unit with the reason in its journal.

The stand-ins are sleeps; the kubelet one refuses to start (ExecStartPre) unless its slice
already carries cgalloc's memory limit, as the kubelet refuses to start without its reserved
cgroup (kubernetes#50770: "Failed to start ContainerManager ... cgroup ... does not exist").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernel.test_systemd_kernel import show
from kernel.util import CGROUP_ROOT, read

LANES = ("v2-systemd",)

ETC = Path("/etc/systemd/system")
# Not kube.slice: a slice a daemon's Slice= made stays loaded, and the lane's other systemd tests
# expect to create kube.slice as a transient unit themselves.
SLICE = "bootkube.slice"
RESERVED_MEMORY = str(150 << 20)
KUBELET_CONFIG = f"""\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
kubeReserved: {{memory: 150Mi}}
kubeReservedCgroup: /{SLICE}
enforceNodeAllocatable: [pods, kube-reserved]
evictionHard: {{memory.available: 1Mi}}
"""
STAND_INS = {
    # Starts only when the reserved cgroup exists with its limit, as the kubelet needs it.
    "kubelet.service": (
        "[Service]\n"
        f"ExecStartPre=/bin/grep -qx {RESERVED_MEMORY} {CGROUP_ROOT}/{SLICE}/memory.max\n"
        "ExecStart=/bin/sleep infinity\n"
    ),
    "containerd.service": "[Service]\nExecStart=/bin/sleep infinity\n",
}
UNITS = ("cgalloc-setup.service", *STAND_INS)
# What install-unit may write; removed directly afterwards, so a failed or timed-out cgalloc
# cannot leave drop-ins behind for the lane's next test.
WRITTEN = (
    ETC / "cgalloc-setup.service",
    ETC / "multi-user.target.wants/cgalloc-setup.service",
    ETC / "kubelet.service.d/50-cgalloc.conf",
    ETC / "containerd.service.d/50-cgalloc.conf",
    Path("/etc/cgalloc/setup.conf"),
)


# Python start-up alone takes tens of seconds under TCG on a loaded 2-core host, and starting
# the stand-in kubelet waits for the setup unit's whole run.
def cgalloc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cgalloc", *args], capture_output=True, text=True, timeout=900
    )


def systemctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=900)


def cgroup_of(unit: str) -> str:
    pid = show(unit, "MainPID")
    assert pid != "0", f"{unit} has no main process"
    return read(Path(f"/proc/{pid}/cgroup")).split("::", 1)[1]


def monotonic(unit: str, prop: str) -> int:
    return int(show(unit, prop))


@pytest.fixture
def boot(tmp_path: Path):
    """Stand-in daemons and the setup arguments; removes units, drop-ins and the tree after."""
    (tmp_path / "config.yaml").write_text(KUBELET_CONFIG)
    state = tmp_path / "state"
    args = ["--config", str(tmp_path / "config.yaml"), "--root-dir", str(tmp_path)]
    args += ["--state-dir", str(state)]
    for unit, text in STAND_INS.items():
        (ETC / unit).write_text(f"[Unit]\nDescription=stand-in {unit}\n{text}")
    assert systemctl("daemon-reload").returncode == 0
    try:
        yield args
    finally:
        for unit in (*reversed(UNITS), SLICE):
            systemctl("stop", unit)
        down = cgalloc("teardown", "--state-dir", str(state)) if state.exists() else None
        for path in (*WRITTEN, *(ETC / unit for unit in STAND_INS)):
            path.unlink(missing_ok=True)
        systemctl("daemon-reload")
        systemctl("reset-failed")
        assert down is None or down.returncode == 0, down.stdout + down.stderr


def test_unit_sets_up_the_tree_before_the_kubelet_and_keeps_daemons_in_their_slice(boot):
    assert systemctl("start", "containerd.service").returncode == 0
    assert cgroup_of("containerd.service") == "/system.slice/containerd.service"

    done = cgalloc("install-unit", "--daemons", "kubelet,containerd", "--", *boot)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installed and enabled: 5 files changed" in done.stdout
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(ETC / "cgalloc-setup.service")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert systemctl("is-enabled", "cgalloc-setup.service").stdout.strip() == "enabled"
    assert systemctl("is-active", "cgalloc-setup.service").stdout.strip() == "inactive"
    assert not (CGROUP_ROOT / "kubepods.slice").exists()

    # As at boot: starting the kubelet pulls in the setup unit and waits for it.
    start = systemctl("start", "kubelet.service")
    assert start.returncode == 0, start.stderr + systemctl("status", *UNITS).stdout
    assert systemctl("is-active", "cgalloc-setup.service").stdout.strip() == "active"
    assert monotonic("cgalloc-setup.service", "ExecMainExitTimestampMonotonic") <= monotonic(
        "kubelet.service", "ExecMainStartTimestampMonotonic"
    )
    assert read(CGROUP_ROOT / SLICE / "memory.max") == RESERVED_MEMORY
    assert read(CGROUP_ROOT / "kubepods.slice/memory.max") != "max"
    assert cgroup_of("kubelet.service") == f"/{SLICE}/kubelet.service"

    # A daemon already running stays put until its next start, which the drop-in places.
    assert cgroup_of("containerd.service") == "/system.slice/containerd.service"
    assert systemctl("restart", "containerd.service").returncode == 0
    assert cgroup_of("containerd.service") == f"/{SLICE}/containerd.service"
    assert systemctl("restart", "kubelet.service").returncode == 0
    assert cgroup_of("kubelet.service") == f"/{SLICE}/kubelet.service"

    again = cgalloc("install-unit", "--daemons", "kubelet,containerd", "--", *boot)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.strip() == "nothing to change"
    config = boot[: boot.index("--state-dir")]
    check = cgalloc("verify", *config)
    assert check.returncode == 0, check.stdout + check.stderr

    for unit in reversed(UNITS):
        assert systemctl("stop", unit).returncode == 0
    state = boot[boot.index("--state-dir") + 1]
    down = cgalloc("teardown", "--state-dir", state)
    assert down.returncode == 0, down.stdout + down.stderr
    # Starting the kubelet started its slice for the drop-in's Slice= beside the boot unit, as
    # at every boot: setup found it there, so it is no unit of setup's and teardown leaves it
    # (had setup started it, teardown stopped it: started here as systemd does at boot).
    if show(SLICE, "ActiveState") != "active":
        assert systemctl("start", SLICE).returncode == 0
    assert show(SLICE, "FragmentPath") == ""

    # Uninstall stops it, but never while a process runs in it (stopping a slice stops its
    # units).
    busy = ["systemd-run", "--unit", "cgalloc-test-busy", f"--slice={SLICE}", "sleep", "600"]
    assert subprocess.run(busy, capture_output=True, timeout=120).returncode == 0
    try:
        kept = cgalloc("install-unit", "--uninstall")
        assert kept.returncode == 0, kept.stdout + kept.stderr
        assert f"left {SLICE} active: processes run in it" in kept.stderr
        assert show(SLICE, "ActiveState") == "active"
    finally:
        systemctl("stop", "cgalloc-test-busy.service")
    again = cgalloc("install-unit", "--daemons", "kubelet,containerd", "--", *boot)
    assert again.returncode == 0, again.stdout + again.stderr
    gone = cgalloc("install-unit", "--uninstall")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert f"stopped {SLICE}: systemd had loaded it only for the drop-ins" in gone.stdout
    assert show(SLICE, "ActiveState") != "active"
    assert [p for p in WRITTEN if p.exists()] == [Path("/etc/cgalloc/setup.conf")]


def test_a_setup_that_cannot_run_fails_the_unit_with_the_reason_in_the_journal(boot, tmp_path):
    done = cgalloc("install-unit", "--", *boot)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "config.yaml").unlink()  # the kubelet config is gone at the next boot
    start = systemctl("start", "cgalloc-setup.service")
    assert start.returncode != 0
    assert show("cgalloc-setup.service", "ActiveState") == "failed"
    assert show("cgalloc-setup.service", "ExecMainStatus") == "2"
    journal = subprocess.run(
        ["journalctl", "-u", "cgalloc-setup.service", "--no-pager", "-o", "cat"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"cgalloc: --config: cannot read {tmp_path}/config.yaml" in journal.stdout
    assert not (CGROUP_ROOT / "kubepods.slice").exists()
