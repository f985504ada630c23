"""systemd unit properties from cgroup limit files, slice/unit naming, --systemd modes, the
unit record. The D-Bus calls themselves run against a real systemd in the v2-systemd VM lane
(tests/kernel/test_systemd_kernel.py)."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time

import pytest
from fakecgroup import FakeHost
from jeepney import HeaderFields, Parser, new_method_return

from cgalloc.errors import CgallocError, HostError, InputError
from cgalloc.host.dbus import Systemd
from cgalloc.host.systemd import (
    UINT64_MAX,
    SystemdError,
    cpuset_bitmask,
    existing_unit,
    role_of,
    slice_unit,
    unit_properties,
    use_dbus,
)
from cgalloc.model.naming import CGROUPFS, SYSTEMD
from cgalloc.ops.apply import teardown
from cgalloc.ops.state import Managed, Record, StateDir
from cgalloc.ops.units import UnitRecord


def test_cpuset_bitmask_is_little_endian_bytes_like_runc_range_to_bits():
    assert cpuset_bitmask("0") == b"\x01"
    assert cpuset_bitmask("0-2,9") == b"\x07\x02"
    assert cpuset_bitmask("1,3") == b"\x0a"
    assert cpuset_bitmask("8-15") == b"\x00\xff"


def test_v2_files_become_v2_properties():
    files = {
        "pids.max": "max",
        "memory.max": "314572800",
        "memory.min": "0",  # MemoryQoS reset; runc maps unified memory.min to MemoryMin
        "memory.low": "0",
        "cpu.weight": "79",
        "cpu.max": "10000 100000",
        "cpuset.cpus": "1",
        "hugetlb.2MB.max": "0",  # no systemd property: cgroupfs only
    }
    assert unit_properties(files, v2=True) == [
        ("MemoryMax", ("t", 314572800)),
        ("MemoryMin", ("t", 0)),
        ("MemoryLow", ("t", 0)),
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


def test_reserved_swap_none_is_memory_swap_max_zero():
    # --reserved-swap none on a slice systemd owns: MemorySwapMax=0, not a file under it
    props = unit_properties({"memory.swap.max": "0", "memory.min": "1073741824"}, v2=True)
    assert props == [("MemoryMin", ("t", 1 << 30)), ("MemorySwapMax", ("t", 0))]


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
    assert use_dbus("auto", SYSTEMD, running=True)
    assert not use_dbus("auto", SYSTEMD, running=False)
    assert not use_dbus("auto", CGROUPFS, running=True)
    assert not use_dbus("no", SYSTEMD, running=True)
    assert use_dbus("yes", SYSTEMD, running=True)
    with pytest.raises(InputError, match=r"--systemd 'maybe' is not one of auto, yes, no\."):
        use_dbus("maybe", SYSTEMD, running=True)
    with pytest.raises(InputError, match="--cgroup-driver systemd"):
        use_dbus("yes", CGROUPFS, running=True)
    with pytest.raises(HostError, match="systemd as PID 1"):
        use_dbus("yes", SYSTEMD, running=False)


def test_unit_record_round_trips_and_vanishes_when_empty(tmp_path):
    rec = UnitRecord(["kubepods.slice"], {"system.slice": {"MemoryMax": ["t", UINT64_MAX]}})
    state = StateDir(str(tmp_path))
    rec.save(state)
    assert UnitRecord.load(state) == rec
    UnitRecord().save(state)
    assert not (tmp_path / "systemd.json").exists()
    assert UnitRecord.load(state).is_empty()


def _peer_server(path: str, answer, stall_after_begin: bool = False) -> list[socket.socket]:
    """A unix socket completing the D-Bus EXTERNAL auth; then, per connection ``n`` (from 0),
    each method call is answered with ``answer(n, call)``'s body tuple, or ignored for None.

    ``stall_after_begin`` acts as sd-bus does (bus_socket_auth_verify_server, systemd 252):
    messages read together with BEGIN stay in the buffer until more bytes arrive; the server
    waits after its OK so that the client's first message does arrive with BEGIN."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    peers = [server]

    def talk(n: int, peer: socket.socket) -> None:
        with contextlib.suppress(OSError):
            data = b""
            while b"BEGIN\r\n" not in data:
                chunk = peer.recv(256)
                if not chunk:
                    return
                data += chunk
                if b"AUTH" in data and b"OK" not in data:
                    peer.sendall(b"OK 66ccd6889867419ba09ce8970dd161d4\r\n")
                    data += b"OK"
                    if stall_after_begin:
                        time.sleep(0.1)
            parser = Parser()
            parser.add_data(data.split(b"BEGIN\r\n", 1)[1])
            if stall_after_begin:
                chunk = peer.recv(4096)
                if not chunk:
                    return
                parser.add_data(chunk)
            while True:
                for call in iter(parser.get_next_message, None):
                    body = answer(n, call)
                    if body is not None:
                        reply = new_method_return(call, "o" if body else "", body)
                        peer.sendall(reply.serialise(serial=1000 + call.header.serial))
                chunk = peer.recv(4096)
                if not chunk:
                    return
                parser.add_data(chunk)

    def serve() -> None:
        with contextlib.suppress(OSError):
            for n in itertools.count():
                peer, _ = server.accept()
                peers.append(peer)
                threading.Thread(target=talk, args=(n, peer), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return peers


@pytest.fixture
def silent_systemd(tmp_path):
    """systemd that accepts connections and never answers anything."""
    path = str(tmp_path / "private")
    peers = _peer_server(path, lambda n, call: None)
    yield path
    for sock in peers:
        sock.close()


def test_an_unanswering_systemd_is_a_systemd_error_after_a_few_connections(silent_systemd):
    client = Systemd(silent_systemd, timeout=0.3)
    with pytest.raises(SystemdError) as err:
        client.unit_path("system.slice")
    assert str(err.value) == (
        f"systemd at {silent_systemd} answered none of 4 Pings on a new connection "
        "(the last waited 0.3 s)."
    )
    assert isinstance(err.value, CgallocError)
    assert client._conn is None  # the next call connects afresh


def test_an_unanswered_call_names_the_call_and_the_unit(tmp_path):
    path = str(tmp_path / "private")
    pings_only = lambda n, call: () if call.header.fields[HeaderFields.member] == "Ping" else None  # noqa: E731
    peers = _peer_server(path, pings_only)
    client = Systemd(path, timeout=0.3)
    try:
        with pytest.raises(SystemdError) as err:
            client.unit_path("system.slice")
    finally:
        for sock in peers:
            sock.close()
    assert str(err.value) == "systemd did not answer GetUnit system.slice within 0.3 s."
    assert client._conn is None  # the next call connects afresh


def test_a_first_message_read_with_the_auth_is_answered_after_another_ping(tmp_path):
    path = str(tmp_path / "private")
    seen: list[tuple[int, str]] = []
    unit = "/org/freedesktop/systemd1/unit/system_2eslice"

    def answer(n, call):
        seen.append((n, call.header.fields[HeaderFields.member]))
        return () if call.header.fields[HeaderFields.member] == "Ping" else (unit,)

    peers = _peer_server(path, answer, stall_after_begin=True)
    try:
        assert Systemd(path, timeout=0.3).unit_path("system.slice") == unit
    finally:
        for sock in peers:
            sock.close()
    # One connection: the stalled Ping is answered once the second one arrives.
    assert seen == [(0, "Ping"), (0, "Ping"), (0, "GetUnit")]


def test_teardown_keeps_units_systemd_did_not_answer_for(tmp_path, silent_systemd):
    state = StateDir(str(tmp_path / "state"))
    units = UnitRecord(["kubepods.slice"], {"system.slice": {"MemoryMax": ["t", UINT64_MAX]}})
    managed = Managed(frozenset({"kubepods.slice"}), frozenset({"system.slice"}))
    with state.locked():
        units.save(state)
        result = teardown(
            str(tmp_path), state, Record(managed=managed), host=FakeHost(),
            systemd=Systemd(silent_systemd, timeout=0.3),
        )  # fmt: skip
    unanswered = (
        f"systemd at {silent_systemd} answered none of 4 Pings on a new connection "
        "(the last waited 0.3 s)."
    )
    assert result.kept == [
        f"system.slice: restoring MemoryMax failed: {unanswered}",
        f"kubepods.slice: stopping the transient unit failed: {unanswered}",
    ]
    assert UnitRecord.load(state) == units  # kept for the next teardown


class _Client:
    """Stands in for the D-Bus client: which units are loaded, and what was started."""

    def __init__(self, loaded: set[str]):
        self.loaded, self.started = loaded, []

    def unit_path(self, name: str):
        return f"/org/freedesktop/systemd1/unit/{name}" if name in self.loaded else None

    def start_slice(self, name, description, props):
        self.started.append(name)
        self.loaded.add(name)


def test_an_existing_slice_missing_one_v1_directory_is_not_started_or_recorded(tmp_path):
    # Found in the Vagrant v1 + systemd run: system.slice has no cpuset directory on v1, so the
    # plan creates it there; cgalloc must not take the unit as one it started (teardown would
    # StopUnit system.slice and skip restoring its properties).
    from cgalloc.ops.units import SystemdUnits

    client = _Client({"system.slice"})
    units = SystemdUnits(client, StateDir(str(tmp_path)), v2=False, files={})
    assert units.create(str(tmp_path / "cpuset"), "system.slice") is False
    assert client.started == [] and units.record.started == []
    # a slice systemd does not have is started and recorded, as before
    units.create(str(tmp_path / "cpuset"), "kube.slice")
    assert client.started == ["kube.slice"] and units.record.started == ["kube.slice"]


class _Recorder(_Client):
    """A loaded-units double that also records property and stop calls, and removes a stopped
    slice's cgroup directory (as systemd does) under ``root``."""

    def __init__(self, loaded: set[str], root=None, props=None):
        super().__init__(loaded)
        self.root, self.calls, self.props = root, [], props or {}

    def get(self, name, prop):
        return self.props.get((name, prop), ("t", UINT64_MAX))

    def set_properties(self, name, props):
        self.calls.append(("set", name, props))

    def stop_unit(self, name):
        self.calls.append(("stop", name))
        self.loaded.discard(name)
        if self.root is not None:
            (self.root / name).rmdir()


def test_a_started_unit_gets_new_limits_as_properties_on_a_later_run(tmp_path):
    # The kubelet's systemd manager Update (pkg/kubelet/cm/cgroup_manager_linux.go) sets the
    # unit's properties on every change; a unit's old properties would come back on the next
    # daemon-reload otherwise.
    from cgalloc.ops.units import SystemdUnits

    state = StateDir(str(tmp_path))
    UnitRecord(["kubepods.slice"]).save(state)
    client = _Recorder({"kubepods.slice"})
    files = {"kubepods.slice": {"memory.max": "629145600"}}
    units = SystemdUnits(client, state, v2=True, files=files)
    units.before_write("kubepods.slice")
    assert client.calls == [("set", "kubepods.slice", [("MemoryMax", ("t", 629145600))])]
    # kept for rollback, not as an original for teardown (stopping the unit undoes it all)
    assert units._before == {"kubepods.slice": {"MemoryMax": ["t", UINT64_MAX]}}
    assert UnitRecord.load(state).changed == {}


def _converge_tree(tmp_path):
    from cgalloc.ops.state import StateDir

    root = tmp_path / "cg"
    for d in ("kube.slice", "system.slice", "kubepods.slice"):
        (root / d).mkdir(parents=True)
    (root / "kubepods.slice" / "memory.max").write_text("314572800\n")
    (root / "system.slice" / "cpu.weight").write_text("20\n")
    state = StateDir(str(tmp_path / "state"))
    os.makedirs(state.path)
    record = Record(
        created={(str(root), "kube.slice"), (str(root), "kubepods.slice")},
        changed={(str(root), "system.slice", "cpu.weight"): "100"},
        written={(str(root), "kubepods.slice", "memory.max")},
        managed=Managed(frozenset({"kubepods.slice"}), frozenset({"kube.slice", "system.slice"})),
    )
    units = UnitRecord(
        ["kubepods.slice", "kube.slice"],
        {"system.slice": {"MemoryMax": ["t", UINT64_MAX], "CPUWeight": ["t", UINT64_MAX]}},
    )
    units.save(state)
    return root, state, record, units


def test_converge_undoes_units_and_properties_no_longer_wanted(tmp_path):
    # kube-reserved (/kube.slice, a slice cgalloc started) no longer enforced; system.slice
    # keeps its memory limit but not its CPU weight; kubepods keeps its cgroup but not its
    # memory limit (reset to the kernel's default, on the unit too).
    from cgalloc.ops.apply import converge, plan_undo
    from cgalloc.ops.plan import Plan

    root, state, record, units = _converge_tree(tmp_path)
    plan = Plan(root=str(root), version="v2")
    plan.wanted_dirs = {(str(root), "kubepods.slice"), (str(root), "system.slice")}
    plan.wanted_files = {(str(root), "system.slice", "memory.max"): "157286400"}
    stale, stale_u = plan_undo(plan, record, units)
    assert plan.describe() == [
        "restore system.slice/cpu.weight: 20 -> 100 (no longer wanted)",
        "restore kubepods.slice/memory.max: 314572800 -> max (no longer wanted)",
        "restore CPUWeight of system.slice (no longer wanted)",
        "stop kube.slice (cgroup kube.slice) (no longer wanted)",
    ]
    client = _Recorder({"kubepods.slice", "kube.slice", "system.slice"}, root)
    result = converge(
        plan, state, record, stale, host=FakeHost(), systemd=client,
        units=units, stale_u=stale_u,
    )  # fmt: skip
    assert result.kept == []
    assert client.calls == [
        ("set", "kubepods.slice", [("MemoryMax", ("t", UINT64_MAX))]),
        ("set", "system.slice", [("CPUWeight", ("t", UINT64_MAX))]),
        ("stop", "kube.slice"),
    ]
    assert (root / "system.slice" / "cpu.weight").read_text().strip() == "100"
    assert (root / "kubepods.slice" / "memory.max").read_text().strip() == "max"
    assert not (root / "kube.slice").exists()
    assert UnitRecord.load(state) == UnitRecord(
        ["kubepods.slice"], {"system.slice": {"MemoryMax": ["t", UINT64_MAX]}}
    )
    assert record == Record(
        created={(str(root), "kubepods.slice")}, boot=record.boot, managed=record.managed
    )


def test_a_no_longer_wanted_slice_with_processes_is_not_stopped(tmp_path):
    from cgalloc.ops.apply import converge, plan_undo
    from cgalloc.ops.plan import Plan, drift

    root, state, record, units = _converge_tree(tmp_path)
    (root / "kube.slice" / "kubelet.service").mkdir()
    (root / "kube.slice" / "kubelet.service" / "cgroup.procs").write_text("4242\n")
    plan = Plan(root=str(root), version="v2")
    plan.wanted_dirs = {(str(root), "kubepods.slice"), (str(root), "system.slice")}
    stale, stale_u = plan_undo(plan, record, units)
    client = _Recorder({"kubepods.slice", "kube.slice", "system.slice"}, root)
    result = converge(
        plan, state, record, stale, host=FakeHost(), systemd=client,
        units=units, stale_u=stale_u,
    )  # fmt: skip
    assert result.kept == ["kube.slice: kept, it still has processes"]
    assert ("stop", "kube.slice") not in client.calls
    assert "kube.slice" in UnitRecord.load(state).started
    assert (str(root), "kube.slice") in record.created
    plan_undo(plan, record, UnitRecord.load(state))
    assert drift(plan) == [
        (
            "systemd unit kube.slice (cgroup kube.slice) was started by cgalloc and is no longer "
            "wanted",
            {"cgroup": "kube.slice", "file": None, "is": "cgroup", "want": None,
             "unit": "kube.slice"},
        )
    ]  # fmt: skip


@pytest.mark.parametrize(
    "content",
    [
        b"{",
        b"\xff\xfe",
        b"[1]",
        b'{"started": [1]}',
        # names the undo would expand as slices, and fail on midway (a traceback)
        b'{"started": ["a b.slice"]}',
        b'{"started": ["a--b.slice"]}',
        b'{"started": ["kubelet.service"]}',
    ],
)
def test_a_broken_unit_record_is_one_sentence(tmp_path, content):
    (tmp_path / "systemd.json").write_bytes(content)
    with pytest.raises(InputError, match=r"systemd\.json cannot be used: it is not cgalloc's"):
        UnitRecord.load(StateDir(str(tmp_path)))
