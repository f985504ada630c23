"""Applying a plan on fake trees: values land, re-runs write nothing, teardown restores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fakecgroup import KERNEL, FakeHost, fake_hierarchy, snapshot

from cgalloc.model.limits import Limits
from cgalloc.model.tree import DesiredCgroup
from cgalloc.ops import plan
from cgalloc.ops.apply import apply, teardown
from cgalloc.ops.state import StateDir

MI = 1 << 20
HOST = FakeHost(kernel=KERNEL)


def _desired():
    return [
        DesiredCgroup("kubepods", "kubepods", Limits(cpu_shares=2048, memory=300 * MI, pids=1000)),
        DesiredCgroup("kubepods/besteffort", "qos", Limits(cpu_shares=2)),
        DesiredCgroup("system.slice", "system-reserved", Limits(cpu_shares=512, memory=100 * MI)),
    ]


def _run(state: StateDir, h, desired, **kw):
    with state.locked():
        record = state.load()
        p = plan.build(h, desired, **kw)
        return apply(p, state, record, host=HOST)


def _teardown(state: StateDir, root):
    with state.locked():
        return teardown(str(root), state, state.load(), host=HOST)


def _read(path: Path) -> str:
    return path.read_text().rstrip("\n")


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_setup_rerun_teardown_round_trip(tmp_path, version):
    root, h = fake_hierarchy(tmp_path, version)
    state = StateDir(str(tmp_path / "state"))
    before = snapshot(root)
    result = _run(state, h, _desired())
    assert result.writes > 0
    if version == "v2":
        assert _read(root / "kubepods" / "memory.max") == "314572800"
        assert _read(root / "kubepods" / "cpu.weight") == "79"
        assert _read(root / "kubepods" / "besteffort" / "cpu.weight") == "1"
        assert _read(root / "system.slice" / "cpu.weight") == "20"
        assert _read(root / "cgroup.subtree_control") == "cpuset cpu memory hugetlb pids"
    else:
        assert _read(root / "memory" / "kubepods" / "memory.limit_in_bytes") == "314572800"
        assert _read(root / "cpu,cpuacct" / "kubepods" / "cpu.shares") == "2048"
        assert _read(root / "pids" / "kubepods" / "pids.max") == "1000"
        assert _read(root / "cpuset" / "kubepods" / "besteffort" / "cpuset.cpus") == "0-3"
    again = _run(state, h, _desired())
    assert again.writes == 0
    assert again.summary() == "no changes: 0 writes"
    down = _teardown(state, root)
    assert down.kept == []
    assert snapshot(root) == before
    assert os.listdir(tmp_path / "state") == ["lock"]  # record gone: nothing owned


def _node_with_system_slice(tmp_path, procs: str, usage: int | None = None):
    """A v2 node whose root enables cpu, memory and pids and that has its own system.slice."""
    root, h = fake_hierarchy(tmp_path, "v2")
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    sys_slice = root / "system.slice"
    sys_slice.mkdir()
    files = {
        "cgroup.controllers": "cpu memory pids",
        "cgroup.procs": procs,
        "cgroup.subtree_control": "",
        "cpu.weight": "100",
        "memory.max": "max",
    }
    if usage is not None:
        files["memory.current"] = str(usage)
    for name, value in files.items():
        (sys_slice / name).write_text(value + "\n")
    return root, h, sys_slice


def test_preexisting_reserved_cgroup_is_restored_not_removed(tmp_path):
    root, h, sys_slice = _node_with_system_slice(tmp_path, procs="", usage=5 * MI)
    before = snapshot(root)
    state = StateDir(str(tmp_path / "state"))
    desired = [_desired()[2]]
    _run(state, h, desired)
    assert _read(sys_slice / "memory.max") == str(100 * MI)
    record = json.loads((tmp_path / "state" / "owned.json").read_text())
    assert record["created"] == []
    assert record["changed"] == [
        [str(root), "system.slice", "cpu.weight", "100"],
        [str(root), "system.slice", "memory.max", "max"],
    ]
    # cpu memory pids were on already; only the others were enabled by cgalloc
    assert record["enabled"] == [[str(root), "", ["cpuset", "hugetlb"]]]
    _teardown(state, root)
    assert snapshot(root) == before


def test_teardown_of_a_populated_v2_cpuset_ends_with_the_controller_disabled(tmp_path):
    # Found in the Vagrant v2 run (kernel 6.1): system.slice has services, so its cpuset.cpus
    # cannot be emptied again (ENOSPC); teardown then disables cpuset at the root, which takes
    # the file away: the tree is as before and nothing is reported kept.
    root, h, sys_slice = _node_with_system_slice(tmp_path, procs="4242")
    before = snapshot(root)
    state = StateDir(str(tmp_path / "state"))
    desired = [DesiredCgroup("system.slice", "system-reserved", Limits(cpuset_cpus="0-1"))]
    _run(state, h, desired)
    assert _read(sys_slice / "cpuset.cpus") == "0-1"
    down = _teardown(state, root)
    assert down.kept == []
    assert snapshot(root) == before
    assert os.listdir(tmp_path / "state") == ["lock"]


def test_teardown_keeps_a_cgroup_with_processes(tmp_path):
    root, h = fake_hierarchy(tmp_path, "v2")
    state = StateDir(str(tmp_path / "state"))
    _run(state, h, _desired())
    (root / "kubepods" / "besteffort" / "cgroup.procs").write_text("4242\n")
    down = _teardown(state, root)
    assert down.kept == [
        "kubepods/besteffort: kept, it still has processes",
        "kubepods: kept, a cgroup below it is kept",
    ]
    assert (root / "kubepods" / "besteffort").is_dir()
    assert not (root / "system.slice").exists()
    record = json.loads((tmp_path / "state" / "owned.json").read_text())
    assert record["created"] == [[str(root), "kubepods"], [str(root), "kubepods/besteffort"]]


@pytest.fixture
def named_sleeper(tmp_path):
    """A running process whose comm is a unique name (a symlink to sleep carries its name)."""
    name = f"cgt{os.getpid() % 100000}"
    link = tmp_path / name
    os.symlink(shutil.which("sleep"), link)
    proc = subprocess.Popen([str(link), "60"])
    deadline = time.monotonic() + 5
    while Path(f"/proc/{proc.pid}/comm").read_text().strip() != name:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    yield name, proc.pid
    proc.kill()
    proc.wait()


def test_reserved_procs_are_moved_by_name(tmp_path, named_sleeper):
    name, pid = named_sleeper
    root, h = fake_hierarchy(tmp_path, "v2")
    state = StateDir(str(tmp_path / "state"))
    desired = [DesiredCgroup("kube.slice", "kube-reserved", Limits(cpu_shares=512))]
    with state.locked():
        p = plan.build(h, desired, moves=[("kube-reserved", [name, "no-such-proc-xyz"])])
        moves = [a for a in p.actions if a.kind == "move"]
        host_cgroup = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        v2_line = next(line for line in host_cgroup if line.startswith("0::"))
        assert [(a.new, a.note, a.old, a.path) for a in moves] == [
            (str(pid), name, v2_line[3:], "kube.slice")
        ]
        assert p.warnings == [
            "no running process named 'no-such-proc-xyz' to move into /kube.slice"
        ]
        apply(p, state, state.load(), host=HOST)
    assert _read(root / "kube.slice" / "cgroup.procs") == str(pid)


class _Systemd:
    """Stands in for systemd's D-Bus API on a fake v1 tree. Like systemd on v1, starting a
    slice with CPU accounting realizes the cpu controller for its siblings too (systemd's
    unit_add_siblings_to_cgroup_realize_queue): system.slice's cpu,cpuacct directory appears."""

    def __init__(self, root: Path, loaded: set[str]):
        self.root, self.loaded, self.props = root, loaded, {}

    def unit_path(self, name: str):
        return f"/unit/{name}" if name in self.loaded else None

    def start_slice(self, name, description, props):
        self.loaded.add(name)
        for mount in ("cpu,cpuacct", "cpuset", "memory", "pids", "hugetlb", "systemd"):
            (self.root / mount / name).mkdir(exist_ok=True)
            KERNEL.after_mkdir(str(self.root / mount), name)
        sibling = self.root / "cpu,cpuacct" / "system.slice"
        if not sibling.exists():
            sibling.mkdir()
            KERNEL.after_mkdir(str(self.root / "cpu,cpuacct"), "system.slice")

    def get(self, name, prop):
        return self.props.get((name, prop), ("t", 0))

    def set_properties(self, name, props):
        self.props.update({(name, p): v for p, v in props})


def test_a_directory_systemd_made_after_the_plan_is_not_cgallocs(tmp_path):
    # Found in the Vagrant v1 + systemd run: the plan saw no cpu,cpuacct/system.slice; starting
    # kubepods.slice made systemd create it; cgalloc's mkdir then failed with EEXIST and the
    # whole setup rolled back. The directory is systemd's: used, never recorded as created.
    from cgalloc.ops.units import SystemdUnits

    root, h = fake_hierarchy(tmp_path, "v1")
    for mount in ("memory", "systemd"):
        (root / mount / "system.slice").mkdir()
        KERNEL.after_mkdir(str(root / mount), "system.slice")
    state = StateDir(str(tmp_path / "state"))
    desired = [
        DesiredCgroup("kubepods.slice", "kubepods", Limits(cpu_shares=2048, memory=300 * MI)),
        DesiredCgroup("system.slice", "system-reserved", Limits(cpu_shares=512, memory=100 * MI)),
    ]
    client = _Systemd(root, {"system.slice"})
    with state.locked():
        p = plan.build(h, desired)
        assert any(a.kind == "mkdir" and a.path == "system.slice" for a in p.actions)
        units = SystemdUnits.for_plan(client, state, p, v2=False)
        apply(p, state, state.load(), host=HOST, units=units)
    assert _read(root / "cpu,cpuacct" / "system.slice" / "cpu.shares") == "512"
    record = json.loads((tmp_path / "state" / "owned.json").read_text())
    assert [str(root / "cpu,cpuacct"), "system.slice"] not in record["created"]
