"""teardown beside a kubelet that ran (issue 36 step 8, seen with kubelet v1.20.2 in the Vagrant
lane): the cgroups the kubelet made itself below kubepods, in hierarchies cgalloc does not
manage, are named and left to it; an empty cpuset the kernel will not put back on a populated
cgroup is given its parent's set, which is what empty meant."""

from __future__ import annotations

import json
import os

from clirun import run_cli
from fakecgroup import existing_system_slice, fake_tree, where
from nodeargs import NODE


def test_cgroups_the_kubelet_made_below_kubepods_are_named_and_left(tmp_path, monkeypatch,
                                                                     capsys):  # fmt: skip
    root = fake_tree(tmp_path, monkeypatch, "v1")
    # a hierarchy cgalloc does not manage, as the kubelet's libcontainer joins it
    (root / "freezer").mkdir()
    with open(tmp_path / "mountinfo", "a") as f:
        f.write(f"60 25 0:60 / {root / 'freezer'} rw,nosuid - cgroup cgroup rw,freezer\n")
    code, _, err = run_cli(capsys, "setup", *NODE, *where(root, tmp_path))
    assert code == 0, err
    pod = root / "freezer" / "kubepods" / "burstable" / "pod1234"
    pod.mkdir(parents=True)
    code, out, err = run_cli(capsys, "teardown", *where(root, tmp_path), "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["othersLeft"] == [
        "freezer/kubepods", "freezer/kubepods/burstable", "freezer/kubepods/burstable/pod1234"
    ]
    assert doc["kept"] == []
    assert pod.is_dir()  # left to its owner
    assert not (root / "memory" / "kubepods").exists()  # cgalloc's own are gone
    code, out, _ = run_cli(capsys, "teardown", *where(root, tmp_path))
    assert code == 0 and "0 changes" in out  # nothing recorded is left


def test_an_empty_cpuset_a_populated_cgroup_refuses_gets_its_parents(tmp_path, monkeypatch,
                                                                      capsys):  # fmt: skip
    root = fake_tree(tmp_path, monkeypatch, "v2")
    existing_system_slice(root, "v2")
    (root / "cgroup.subtree_control").write_text("cpuset cpu memory pids\n")
    (root / "cpuset.cpus.effective").write_text("0-3\n")
    for f in ("cpuset.cpus", "cpuset.mems"):
        (root / "system.slice" / f).write_text("\n")
    code, _, err = run_cli(capsys, "setup", *NODE, *where(root, tmp_path))
    assert code == 0, err
    assert (root / "system.slice" / "cpuset.cpus").read_text().strip()  # setup gave it CPUs
    (root / "system.slice" / "cgroup.procs").write_text("4242\n")  # the node's daemons
    code, out, err = run_cli(capsys, "teardown", *where(root, tmp_path))
    assert code == 0, out + err
    assert "restore system.slice/cpuset.cpus" in out and "(its parent's: 0-3)" in out
    assert (root / "system.slice" / "cpuset.cpus").read_text() == "0-3\n"
    assert not os.path.exists(tmp_path / "state" / "owned.json")
