"""`cgalloc setup --cgroup-driver systemd` with systemd as PID 1 (the v2-systemd lane): the
slices are transient units carrying the limits, they survive a daemon-reload, and teardown
stops them and restores what it changed on existing units.

Expected values follow the kubelet: kubepods memory = 600Mi − 150Mi kube − 150Mi system
reserved; kubepods cpu.shares = MilliCPUToShares(1000) = 1024 on this one-vCPU lane, which the
kubelet's linear conversion makes weight 1 + (1024 − 2) · 9999 / 262142 = 39 (79 for 2048 on
two vCPUs); an empty burstable tier has the minimum 2 shares = weight 1.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from cgalloc.host.dbus import Systemd
from cgalloc.host.systemd import SystemdError
from kernel.test_setup_kernel import CPUS, NODE, cgalloc, listing
from kernel.util import CGROUP_ROOT, read

LANES = ("v2-systemd",)

SYSTEMD_NODE = [
    *NODE,
    "--cgroup-driver",
    "systemd",
    "--enforce",
    "pods,kube-reserved,system-reserved",
    "--kube-reserved-cgroup",
    "/kube.slice",
    "--system-reserved-cgroup",
    "/system.slice",
]
KUBEPODS_MEMORY = str(300 << 20)
KUBEPODS_WEIGHT = {1: "39", 2: "79"}[CPUS]
RESERVED_MEMORY = str(150 << 20)
UNITS = ("kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice", "kube.slice")


def kube_reserved_at(cgroup: str) -> list[str]:
    """The systemd-driver node with only kube-reserved enforced, at ``cgroup``."""
    return [*NODE, "--cgroup-driver", "systemd", "--enforce", "pods,kube-reserved",
            "--kube-reserved-cgroup", cgroup]  # fmt: skip


def systemctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=60)


def show(unit: str, prop: str) -> str:
    done = systemctl("show", unit, "-p", prop, "--value")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def tree_files() -> dict[str, str]:
    return {
        "kubepods memory.max": read(CGROUP_ROOT / "kubepods.slice/memory.max"),
        "kubepods cpu.weight": read(CGROUP_ROOT / "kubepods.slice/cpu.weight"),
        "burstable cpu.weight": read(
            CGROUP_ROOT / "kubepods.slice/kubepods-burstable.slice/cpu.weight"
        ),
        "kube.slice memory.max": read(CGROUP_ROOT / "kube.slice/memory.max"),
        "system.slice memory.max": read(CGROUP_ROOT / "system.slice/memory.max"),
    }


def test_slices_are_transient_units_that_survive_reload_and_teardown(tmp_path):
    assert show("system.slice", "MemoryMax") == "infinity"
    before = listing()
    state = ["--state-dir", str(tmp_path / "state")]
    done = cgalloc("setup", *SYSTEMD_NODE, *state)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        for unit in UNITS:
            assert systemctl("is-active", unit).stdout.strip() == "active", unit
            assert show(unit, "Transient") == "yes", unit
        assert show("kubepods.slice", "Description") == "cgalloc: kubepods"
        assert show("kubepods-burstable.slice", "Description") == "cgalloc: qos"
        assert show("kube.slice", "Description") == "cgalloc: kube-reserved"
        assert show("kubepods.slice", "MemoryMax") == KUBEPODS_MEMORY
        assert show("kubepods.slice", "CPUWeight") == KUBEPODS_WEIGHT
        assert show("kubepods-burstable.slice", "CPUWeight") == "1"
        assert show("kube.slice", "MemoryMax") == RESERVED_MEMORY
        # system.slice is systemd's own: not started, its MemoryMax set as a runtime property
        assert show("system.slice", "Transient") == "no"
        assert show("system.slice", "MemoryMax") == RESERVED_MEMORY
        expected = {
            "kubepods memory.max": KUBEPODS_MEMORY,
            "kubepods cpu.weight": KUBEPODS_WEIGHT,
            "burstable cpu.weight": "1",
            "kube.slice memory.max": RESERVED_MEMORY,
            "system.slice memory.max": RESERVED_MEMORY,
        }
        assert tree_files() == expected
        reload = systemctl("daemon-reload")
        assert reload.returncode == 0, reload.stderr
        assert tree_files() == expected
        verify = cgalloc("verify", *SYSTEMD_NODE)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    for unit in UNITS:
        assert systemctl("is-active", unit).stdout.strip() == "inactive", unit
    assert show("system.slice", "MemoryMax") == "infinity"
    assert read(CGROUP_ROOT / "system.slice/memory.max") == "max"
    assert listing() == before
    # Seen in the Vagrant v2 guest: after that teardown the systemd driver's setup found no
    # cpuset files in the slices it started (systemd still counted cpuset as enabled at the
    # root, set there by an AllowedCPUs= on system.slice). The cpuset stays cgroupfs's.
    assert show("system.slice", "AllowedCPUs") == ""
    try:
        done = cgalloc("setup", *SYSTEMD_NODE, *state)
        assert done.returncode == 0, done.stdout + done.stderr
        assert read(CGROUP_ROOT / "kube.slice/cpuset.cpus") != ""
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr


def test_kube_reserved_may_be_a_service_unit_path(tmp_path):
    # kubernetes#110288: the kubelet turns /system.slice/<unit>.service into /<unit>.service.slice
    # (ParseSystemdToCgroupName keeps path.Base; "-" then nests the slice). cgalloc creates and
    # limits that slice, so a kubelet given the same value starts, and also limits the
    # service's real cgroup through the unit's properties.
    unit = "cgallocdaemon.service"
    run = subprocess.run(
        ["systemd-run", f"--unit={unit}", "--slice=system.slice", "sleep", "300"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    service = CGROUP_ROOT / "system.slice" / unit
    state = ["--state-dir", str(tmp_path / "state")]
    args = kube_reserved_at(f"/system.slice/{unit}")
    try:
        done = cgalloc("setup", *args, *state)
        assert done.returncode == 0, done.stdout + done.stderr
        assert show(unit, "MemoryMax") == str(150 << 20)
        assert read(service / "memory.max") == str(150 << 20)
        kubelets = CGROUP_ROOT / "cgallocdaemon.service.slice"
        assert read(kubelets / "memory.max") == str(150 << 20)
        assert "110288" in done.stderr  # the one warning line naming both paths
        assert cgalloc("verify", *args).returncode == 0
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
        assert show(unit, "MemoryMax") == "infinity"
        assert read(service / "memory.max") == "max"
        assert systemctl("is-active", unit).stdout.strip() == "active"  # only its limits went
        assert not kubelets.exists()
    finally:
        systemctl("stop", unit)


def test_kube_reserved_slice_nests_as_the_kubelet_maps_it(tmp_path):
    # pkg/kubelet/cm/cgroup_manager_linux.go ParseSystemdToCgroupName + systemd's slice naming:
    # --kube-reserved-cgroup /kube-reserved.slice is /kube.slice/kube-reserved.slice to the
    # kubelet. cgalloc starts kube.slice first (it did not exist), then the nested slice, and
    # limits the cgroup the kubelet looks for; teardown stops both.
    state = ["--state-dir", str(tmp_path / "state")]
    args = kube_reserved_at("/kube-reserved.slice")
    before = listing()
    try:
        done = cgalloc("setup", *args, *state)
        assert done.returncode == 0, done.stdout + done.stderr
        nested = CGROUP_ROOT / "kube.slice" / "kube-reserved.slice"
        assert read(nested / "memory.max") == RESERVED_MEMORY
        assert show("kube-reserved.slice", "MemoryMax") == RESERVED_MEMORY
        assert "kube.slice/kube-reserved.slice" in done.stderr  # the warning names both paths
        assert cgalloc("verify", *args).returncode == 0
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    for unit in ("kube.slice", "kube-reserved.slice"):
        assert systemctl("is-active", unit).stdout.strip() == "inactive", unit
    assert listing() == before


def test_dropped_and_moved_reservations_converge_through_systemd(tmp_path):
    # Issue 8 "dropped enforcement leaves old limits", under the systemd driver: a reservation
    # moved to another slice, one dropped from --enforce, and kubepods' limits dropped (pods
    # no longer enforced: kubepods gets the node's capacity, as createNodeAllocatableCgroups
    # in pkg/kubelet/cm/node_container_manager_linux.go).
    state = ["--state-dir", str(tmp_path / "state")]
    before = listing()
    moved = [*NODE, "--cgroup-driver", "systemd", "--enforce", "kube-reserved",
             "--kube-reserved-cgroup", "/kubelet.slice"]  # fmt: skip
    done = cgalloc("setup", *SYSTEMD_NODE, *state)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert show("system.slice", "MemoryMax") == RESERVED_MEMORY
        assert show("kubepods.slice", "MemoryMax") == KUBEPODS_MEMORY
        drift = cgalloc("verify", *moved, *state)
        assert drift.returncode == 1, drift.stdout + drift.stderr
        assert "systemd unit kube.slice (cgroup kube.slice) was started by cgalloc" in drift.stdout
        # MemoryMin: kubelet 1.37's MemoryQoS (on by default) protects an enforced reservation
        assert (
            "systemd unit system.slice: AllowedCPUs, MemoryMax, MemoryMin set by cgalloc"
            in drift.stdout
        )
        assert f"system.slice/memory.max: is {RESERVED_MEMORY}, no longer wanted" in drift.stdout
        plan = cgalloc("setup", "--dry-run", *moved, *state)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert "  stop kube.slice (cgroup kube.slice) (no longer wanted)" in plan.stdout
        done = cgalloc("setup", *moved, *state)
        assert done.returncode == 0, done.stdout + done.stderr
        assert systemctl("is-active", "kube.slice").stdout.strip() == "inactive"
        assert not (CGROUP_ROOT / "kube.slice").exists()
        assert show("kubelet.slice", "MemoryMax") == RESERVED_MEMORY
        assert show("system.slice", "MemoryMax") == "infinity"
        assert read(CGROUP_ROOT / "system.slice/memory.max") == "max"
        kubepods = read(CGROUP_ROOT / "kubepods.slice/memory.max")
        assert kubepods != KUBEPODS_MEMORY
        # the started unit carries the new limit too, so a daemon-reload keeps it
        assert show("kubepods.slice", "MemoryMax") == kubepods
        reload = systemctl("daemon-reload")
        assert reload.returncode == 0, reload.stderr
        assert read(CGROUP_ROOT / "kubepods.slice/memory.max") == kubepods
        assert read(CGROUP_ROOT / "system.slice/memory.max") == "max"
        verify = cgalloc("verify", *moved, *state)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    for unit in (*UNITS, "kubelet.slice"):
        assert systemctl("is-active", unit).stdout.strip() == "inactive", unit
    assert show("system.slice", "MemoryMax") == "infinity"
    assert listing() == before


def test_reports_say_what_was_done_over_dbus(tmp_path):
    """issue 10 §3: under systemd, setup's report lists the units it started and the
    properties it set (not cgroupfs mkdirs that did not happen); teardown counts the units
    it stopped."""
    state = ["--state-dir", str(tmp_path / "state")]
    done = cgalloc("setup", *SYSTEMD_NODE, *state, "-o", "json")
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)["systemd"]
        assert sorted(report["unitsStarted"]) == sorted(UNITS)
        props = {e["unit"]: e["properties"] for e in report["propertiesSet"]}
        assert "MemoryMax" in props["system.slice"] and "kubepods.slice" not in props
        dry = cgalloc("teardown", *state, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        for unit in UNITS:
            assert f"  stop unit {unit}" in dry.stdout.splitlines()
            assert systemctl("is-active", unit).stdout.strip() == "active", unit
    finally:
        down = cgalloc("teardown", *state)
    assert down.returncode == 0, down.stdout + down.stderr
    lines = down.stdout.splitlines()
    for unit in UNITS:
        assert f"  stopped unit {unit}" in lines
    assert "  restored the properties of unit system.slice" in lines
    assert lines[-1].endswith(f"; stopped {len(UNITS)} systemd units")
    assert not any(line.startswith("  rmdir kubepods.slice") for line in lines)


def test_every_fresh_connection_answers_its_first_call():
    """sd-bus keeps a message read together with the auth's BEGIN unprocessed until more
    bytes arrive (bus_socket_auth_verify_server); under qemu that hit most fresh connections
    in one CI run and a teardown gave up after 4 reconnects. Each new client here makes one
    call on a new connection, as every cgalloc command does."""
    from cgalloc.host.dbus import Systemd

    paths = set()
    for _ in range(25):
        client = Systemd(timeout=30.0)
        try:
            paths.add(client.unit_path("system.slice"))
        finally:
            client.close()
    assert paths == {"/org/freedesktop/systemd1/unit/system_2eslice"}


@pytest.mark.parametrize("name", ["cgalloc test.slice", "cgalloc@test.slice"])
def test_a_slice_name_systemd_refuses_is_exit_2_before_any_write(tmp_path, name):
    """systemd src/basic/unit-name.c slice_name_is_valid: a slice is a plain unit name of
    VALID_CHARS (no space, no '@'). systemd refuses these names when asked as cgalloc asks
    (StartTransientUnit), so setup refuses them before it writes anything."""
    client = Systemd()
    try:
        with pytest.raises(SystemdError, match="StartTransientUnit"):
            client.start_slice(name, "cgalloc test", [])
    finally:
        client.close()
        if systemctl("is-active", name).stdout.strip() == "active":  # the claim failed
            systemctl("stop", name)
    before = listing()
    done = cgalloc("setup", *kube_reserved_at(f"/{name}"), "--state-dir", str(tmp_path / "s"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"invalid slice name {name!r}: it holds " in done.stderr
    assert listing() == before
    assert systemctl("is-active", "kubepods.slice").stdout.strip() != "active"
    assert not (tmp_path / "s").exists()


CGROUPFS_NODE = [
    *NODE, "--cgroup-driver", "cgroupfs", "--allow-driver-mismatch",
    "--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/system.slice",
]  # fmt: skip


def test_under_the_cgroupfs_driver_systemds_own_units_keep_the_limits_a_reload(tmp_path):
    # Seen with kubelet v1.20.2 in the Vagrant lane (cgroupfs driver on a systemd v2 host): a
    # daemon-reload put system.slice's memory.max, memory.min and cpu.weight back to the
    # unit's values, and the kubelet enforces reserved cgroups only at its start. cgalloc sets
    # them as system.slice's unit properties too, so systemd re-applies cgalloc's values.
    before = listing()
    state = ["--state-dir", str(tmp_path / "state")]
    try:
        done = cgalloc("setup", *CGROUPFS_NODE, *state)
        assert done.returncode == 0, done.stdout + done.stderr
        want = read(CGROUP_ROOT / "system.slice/memory.max")
        assert want == RESERVED_MEMORY
        assert show("system.slice", "MemoryMax") == RESERVED_MEMORY
        assert not (CGROUP_ROOT / "kubepods.slice").exists()  # no slice units: cgroupfs names
        reload = systemctl("daemon-reload")
        assert reload.returncode == 0, reload.stderr
        assert read(CGROUP_ROOT / "system.slice/memory.max") == RESERVED_MEMORY
        verify = cgalloc("verify", *CGROUPFS_NODE)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    assert show("system.slice", "MemoryMax") == "infinity"
    assert read(CGROUP_ROOT / "system.slice/memory.max") == "max"
    assert listing() == before
    # Seen in the Vagrant v2 guest: after that teardown the systemd driver's setup found no
    # cpuset files in the slices it started (systemd still counted cpuset as enabled at the
    # root, set there by an AllowedCPUs= on system.slice). The cpuset stays cgroupfs's.
    assert show("system.slice", "AllowedCPUs") == ""
    try:
        done = cgalloc("setup", *SYSTEMD_NODE, *state)
        assert done.returncode == 0, done.stdout + done.stderr
        assert read(CGROUP_ROOT / "kube.slice/cpuset.cpus") != ""
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
