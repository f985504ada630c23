"""systemd unit properties from cgroup limit files, slice/unit naming, --systemd modes, the
unit record. The D-Bus calls themselves run against a real systemd in the v2-systemd VM lane
(tests/kernel/test_systemd_kernel.py)."""

from __future__ import annotations

import pytest

from cgalloc.errors import HostError, InputError
from cgalloc.systemd import (
    UINT64_MAX,
    UnitRecord,
    cpuset_bitmask,
    existing_unit,
    role_of,
    slice_unit,
    unit_properties,
    use_dbus,
)


def test_cpuset_bitmask_is_little_endian_bytes_like_runc_range_to_bits():
    assert cpuset_bitmask("0") == b"\x01"
    assert cpuset_bitmask("0-2,9") == b"\x07\x02"
    assert cpuset_bitmask("1,3") == b"\x0a"
    assert cpuset_bitmask("8-15") == b"\x00\xff"


def test_v2_files_become_v2_properties():
    files = {
        "pids.max": "max",
        "memory.max": "314572800",
        "cpu.weight": "79",
        "cpu.max": "10000 100000",
        "cpuset.cpus": "1",
        "hugetlb.2MB.max": "0",  # no systemd property: cgroupfs only
    }
    assert unit_properties(files, v2=True) == [
        ("MemoryMax", ("t", 314572800)),
        ("CPUWeight", ("t", 79)),
        ("CPUQuotaPerSecUSec", ("t", 100_000)),  # 10 ms per 100 ms = 100 ms per second
        ("CPUQuotaPeriodUSec", ("t", 100_000)),
        ("AllowedCPUs", ("ay", b"\x02")),
        ("TasksMax", ("t", UINT64_MAX)),
    ]


def test_unlimited_values_are_systemd_infinity():
    props = unit_properties({"memory.max": "max", "cpu.max": "max 100000"}, v2=True)
    assert props[0] == ("MemoryMax", ("t", UINT64_MAX))
    assert props[1] == ("CPUQuotaPerSecUSec", ("t", UINT64_MAX))


def test_v1_files_become_v1_properties():
    files = {
        "memory.limit_in_bytes": "-1",
        "cpu.shares": "2048",
        "cpu.cfs_period_us": "100000",
        "cpu.cfs_quota_us": "50000",
        "pids.max": "4096",
        "cpuset.cpus": "0-1",  # systemd has no v1 cpuset support
    }
    assert unit_properties(files, v2=False) == [
        ("MemoryLimit", ("t", UINT64_MAX)),
        ("CPUShares", ("t", 2048)),
        ("CPUQuotaPerSecUSec", ("t", 500_000)),
        ("TasksMax", ("t", 4096)),
    ]


@pytest.mark.parametrize(
    ("path", "unit"),
    [
        ("kubepods.slice", "kubepods.slice"),
        ("kubepods.slice/kubepods-burstable.slice", "kubepods-burstable.slice"),
        ("kube.slice", "kube.slice"),
        ("kube.slice/other.slice", None),  # other.slice lives at /other.slice
        ("kubepods", None),
    ],
)
def test_slice_unit_only_where_systemd_puts_it(path, unit):
    assert slice_unit(path) == unit


def test_existing_unit_includes_services_in_their_slice():
    assert existing_unit("system.slice/kubelet.service") == "kubelet.service"
    assert existing_unit("system.slice") == "system.slice"
    assert existing_unit("foo/kubelet.service") is None
    assert existing_unit("kube") is None


def test_roles_for_descriptions():
    roles = {"kubepods.slice": "kubepods", "kube.slice": "kube-reserved"}
    assert role_of("kubepods.slice", roles) == "kubepods"
    assert role_of("kubepods.slice/kubepods-besteffort.slice", roles) == "qos"
    assert role_of("kubepods.slice/kubepods-pod12_34.slice", roles) == "pod"
    assert (
        role_of("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx.slice", roles)
        == "pod"
    )
    assert role_of("kube.slice", roles) == "kube-reserved"


def test_systemd_modes():
    assert use_dbus("auto", "systemd", running=True)
    assert not use_dbus("auto", "systemd", running=False)
    assert not use_dbus("auto", "cgroupfs", running=True)
    assert not use_dbus("no", "systemd", running=True)
    assert use_dbus("yes", "systemd", running=True)
    with pytest.raises(InputError, match=r"--systemd 'maybe' is not one of auto, yes, no\."):
        use_dbus("maybe", "systemd", running=True)
    with pytest.raises(InputError, match="--cgroup-driver systemd"):
        use_dbus("yes", "cgroupfs", running=True)
    with pytest.raises(HostError, match="systemd as PID 1"):
        use_dbus("yes", "systemd", running=False)


def test_unit_record_round_trips_and_vanishes_when_empty(tmp_path):
    rec = UnitRecord(["kubepods.slice"], {"system.slice": {"MemoryMax": ["t", UINT64_MAX]}})
    rec.save(str(tmp_path))
    assert UnitRecord.load(str(tmp_path)) == rec
    UnitRecord().save(str(tmp_path))
    assert not (tmp_path / "systemd.json").exists()
    assert UnitRecord.load(str(tmp_path)).is_empty()
