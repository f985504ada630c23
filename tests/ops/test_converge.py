"""Dropped or moved enforcement converges: setup restores what it changed and removes what it
made that the inputs no longer want (from its record); verify reports it until then."""

from __future__ import annotations

import json

import pytest
from clirun import run_cli
from fakecgroup import KERNEL, fake_hierarchy, snapshot, use_fake_tree

CAP = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]
RESERVE = ["--system-reserved", "cpu=500m,memory=1Gi"]


def _enforce(cgroup: str) -> list[str]:
    return ["--enforce", "pods,system-reserved", "--system-reserved-cgroup", cgroup]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root, _ = fake_hierarchy(tmp_path, "v2")
    # an existing reserved cgroup cgalloc does not own: only its values are changed
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (root / "system.slice").mkdir()
    KERNEL.after_mkdir(str(root), "system.slice")
    use_fake_tree(monkeypatch, tmp_path)
    return root


def _run(capsys, tree, tmp_path, command, *args):
    extra = ["--state-dir", str(tmp_path / "state")]
    return run_cli(capsys, command, *CAP, *RESERVE, *args, "--cgroupfs", str(tree), *extra)


def test_dropping_enforcement_restores_the_original_values(tree, tmp_path, capsys):
    original = snapshot(tree / "system.slice")
    code, _, err = _run(capsys, tree, tmp_path, "setup", *_enforce("/system.slice"))
    assert code == 0, err
    assert (tree / "system.slice" / "memory.max").read_text() == "1073741824\n"
    # the same inputs without system-reserved enforcement: verify reports the leftovers
    code, out, _ = _run(capsys, tree, tmp_path, "verify", "-o", "json")
    assert code == 1
    # cpuset and hugetlb appeared when setup enabled them in the root's subtree_control: their
    # "before" is the kernel's default for a freshly enabled controller
    # (drift as objects: want is the value setup restores)
    assert json.loads(out)["drift"] == [
        {"cgroup": "system.slice", "file": f, "is": v, "want": w}
        for f, v, w in (
            ("cpu.weight", "20", "100"),
            ("cpuset.cpus", "0-3", ""),
            ("hugetlb.1GB.max", "0", "max"),
            ("hugetlb.2MB.max", "0", "max"),
            ("memory.max", "1073741824", "max"),
            # kubelet 1.37's MemoryQoS (beta, on) gives an enforced reservation memory.min
            ("memory.min", "1073741824", "0"),
        )
    ]
    code, out, err = _run(capsys, tree, tmp_path, "setup")
    assert code == 0, err
    assert out.splitlines()[-1] == "no changes: 0 writes; undid 6 changes no longer wanted"
    # the root keeps cpuset and hugetlb enabled for kubepods, so system.slice keeps those
    # controllers' files, at their defaults again; every file it had before is as it was
    now = snapshot(tree / "system.slice")
    assert {k: now[k] for k in original if k != "./cgroup.controllers"} == {
        k: v for k, v in original.items() if k != "./cgroup.controllers"
    }
    assert (now["./cpuset.cpus"], now["./hugetlb.2MB.max"]) == ("\n", "max\n")
    code, out, _ = _run(capsys, tree, tmp_path, "verify")
    assert (code, out) == (0, "in sync: the tree matches\n")


def test_moving_a_reservation_removes_the_cgroup_setup_made(tree, tmp_path, capsys):
    code, _, err = _run(capsys, tree, tmp_path, "setup", *_enforce("/old.slice"))
    assert code == 0, err
    assert (tree / "old.slice").is_dir()
    code, out, _ = _run(capsys, tree, tmp_path, "verify", *_enforce("/new.slice"))
    assert code == 1
    assert "  cgroup old.slice was made by cgalloc and is no longer wanted" in out.splitlines()
    code, out, err = _run(capsys, tree, tmp_path, "setup", *_enforce("/new.slice"))
    assert code == 0, err
    assert "  rmdir old.slice (no longer wanted)" in out.splitlines()
    assert not (tree / "old.slice").exists() and (tree / "new.slice").is_dir()
    code, out, _ = _run(capsys, tree, tmp_path, "verify", *_enforce("/new.slice"))
    assert (code, out) == (0, "in sync: the tree matches\n")
    # and teardown still removes everything cgalloc made
    code, _, err = run_cli(
        capsys, "teardown", "--cgroupfs", str(tree), "--state-dir", str(tmp_path / "state")
    )
    assert code == 0, err
    assert not (tree / "new.slice").exists() and not (tree / "kubepods").exists()


def test_a_no_longer_wanted_cgroup_with_processes_is_kept_and_reported(tree, tmp_path, capsys):
    code, _, err = _run(capsys, tree, tmp_path, "setup", *_enforce("/old.slice"))
    assert code == 0, err
    (tree / "old.slice" / "cgroup.procs").write_text("4242\n")  # a process lives there
    code, out, _ = _run(capsys, tree, tmp_path, "setup", *_enforce("/new.slice"))
    assert code == 1
    assert "  kept old.slice: kept, it still has processes" in out.splitlines()
    assert (tree / "old.slice").is_dir()
    # still in the record: once empty, the next run removes it
    (tree / "old.slice" / "cgroup.procs").write_text("")
    code, out, _ = _run(capsys, tree, tmp_path, "setup", *_enforce("/new.slice"))
    assert code == 0
    assert not (tree / "old.slice").exists()


def _pod(path, limits: dict) -> str:
    # a Burstable pod (requests below limits); podresources: ResourceConfigForPod
    container = {"name": "c", "resources": {"requests": {"cpu": "100m"}, "limits": limits}}
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "uid": "u-1"},
        "spec": {"containers": [container]},
    }
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_pod_limit_dropped_from_the_pods_file_is_reset_to_the_kernels_default(
    tree, tmp_path, capsys
):
    # pkg/kubelet/cm/helpers_linux.go ResourceConfigForPod: a Burstable pod without a CPU limit
    # gets no CpuQuota at all, so the kubelet never writes cpu.max; the quota an earlier
    # pods file gave must not stay behind.
    pod = tree / "kubepods" / "burstable" / "podu-1"
    manifest = tmp_path / "pod.json"
    code, _, err = _run(capsys, tree, tmp_path, "setup", "--pods", _pod(manifest, {"cpu": "500m"}))
    assert code == 0, err
    assert (pod / "cpu.max").read_text() == "50000 100000\n"
    _pod(manifest, {"memory": "1Gi"})
    code, out, _ = _run(capsys, tree, tmp_path, "verify", "--pods", str(manifest), "-o", "json")
    assert code == 1
    stale = {"cgroup": "kubepods/burstable/podu-1", "file": "cpu.max", "is": "50000 100000",
             "want": "max 100000"}  # fmt: skip
    assert stale in json.loads(out)["drift"]
    code, out, err = _run(capsys, tree, tmp_path, "setup", "--pods", str(manifest))
    assert code == 0, err
    expected = "  restore kubepods/burstable/podu-1/cpu.max: 50000 100000 -> max 100000"
    assert expected + " (no longer wanted)" in out.splitlines()
    assert (pod / "cpu.max").read_text() == "max 100000\n"
    assert (pod / "memory.max").read_text() == f"{1 << 30}\n"
    code, out, _ = _run(capsys, tree, tmp_path, "verify", "--pods", str(manifest))
    assert (code, out) == (0, "in sync: the tree matches\n")


def test_a_memory_limit_dropped_from_a_cgroup_setup_made_is_reset(tree, tmp_path, capsys):
    # pkg/kubelet/cm/node_container_manager_linux.go enforceNodeAllocatableCgroups:
    # kube-reserved-compressible enforces the CPU only (getCgroupConfigWithCompressible), so
    # the cgroup stays wanted but its memory limit does not.
    kube = ["--kube-reserved", "cpu=500m,memory=512Mi", "--kube-reserved-cgroup", "/kube.slice"]
    code, _, err = _run(capsys, tree, tmp_path, "setup", *kube, "--enforce", "pods,kube-reserved")
    assert code == 0, err
    assert (tree / "kube.slice" / "memory.max").read_text() == f"{512 << 20}\n"
    compressible = [*kube, "--enforce", "pods,kube-reserved-compressible"]
    code, out, _ = _run(capsys, tree, tmp_path, "verify", *compressible)
    assert code == 1
    assert (
        f"  kube.slice/memory.max: is {512 << 20}, no longer wanted; setup restores 'max'"
        in out.splitlines()
    )
    code, _, err = _run(capsys, tree, tmp_path, "setup", *compressible)
    assert code == 0, err
    assert (tree / "kube.slice" / "memory.max").read_text() == "max\n"
    assert (tree / "kube.slice" / "cpu.weight").read_text() == "20\n"  # still enforced
    code, out, _ = _run(capsys, tree, tmp_path, "verify", *compressible)
    assert (code, out) == (0, "in sync: the tree matches\n")


def test_dry_run_lists_the_undo_actions_in_table_and_json(tree, tmp_path, capsys):
    code, _, err = _run(capsys, tree, tmp_path, "setup", *_enforce("/old.slice"))
    assert code == 0, err
    before = snapshot(tree)
    code, out, err = _run(capsys, tree, tmp_path, "setup", "--dry-run", *_enforce("/system.slice"))
    assert code == 0, err
    lines = out.splitlines()
    assert "  rmdir old.slice (no longer wanted)" in lines
    assert "  write system.slice/memory.max: max -> 1073741824" in lines
    assert lines[-1].startswith("dry run: ") and "nothing written" in lines[-1]
    code, out, err = _run(
        capsys, tree, tmp_path, "setup", "--dry-run", "-o", "json", *_enforce("/system.slice")
    )
    assert code == 0, err
    undo = json.loads(out)["plan"]["undo"]
    assert undo == [{"action": "rmdir", "cgroup": "old.slice", "path": "old.slice"}]
    assert snapshot(tree) == before  # a dry run writes nothing


def test_dry_run_lists_the_values_it_would_restore(tree, tmp_path, capsys):
    code, _, err = _run(capsys, tree, tmp_path, "setup", *_enforce("/system.slice"))
    assert code == 0, err
    before = snapshot(tree)
    code, out, err = _run(capsys, tree, tmp_path, "setup", "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert "  restore system.slice/memory.max: 1073741824 -> max (no longer wanted)" in lines
    assert '  restore system.slice/cpuset.cpus: 0-3 -> "" (no longer wanted)' in lines
    assert "  restore system.slice/memory.min: 1073741824 -> 0 (no longer wanted)" in lines
    assert lines[-1] == "dry run: 6 changes planned, nothing written"
    code, out, err = _run(capsys, tree, tmp_path, "setup", "--dry-run", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)["plan"]
    assert doc["actions"] == []
    assert {
        "action": "restore",
        "cgroup": "system.slice",
        "path": "system.slice/memory.max",
        "old": "1073741824",
        "new": "max",
    } in doc["undo"]
    assert len(doc["undo"]) == 6
    assert snapshot(tree) == before


def test_a_v1_rerun_keeps_the_record_of_the_cpusets_it_seeded(tmp_path, monkeypatch, capsys):
    """A new v1 cpuset cgroup gets its parent's cpus and mems (plan._cpuset_seed). A re-run
    finds the cgroup and plans no value for them, yet they are still wanted: the re-run must
    neither call them stale nor rewrite the record (it dropped them, saving the record, on
    the first re-run after every cold setup)."""
    root, _ = fake_hierarchy(tmp_path, "v1")
    use_fake_tree(monkeypatch, tmp_path)
    state = tmp_path / "state"
    pods = tmp_path / "pods.json"
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "uid": "0f6e1d5c-0000-4000-8000-000000000001"}, "spec": {
        "containers": [{"name": "c"}]}}))  # fmt: skip
    args = ["--cgroupfs", str(root), "--state-dir", str(state), "--pods", str(pods)]
    code, _, err = run_cli(capsys, "setup", *CAP, *args)
    assert code == 0, err
    record = json.loads((state / "owned.json").read_text())
    seeded = [r for r in record["written"] if r[2] in ("cpuset.cpus", "cpuset.mems")]
    assert any("pod0f6e1d5c" in r[1] for r in seeded), seeded
    before = (state / "owned.json").stat().st_mtime_ns
    code, out, err = run_cli(capsys, "setup", *CAP, *args)
    assert (code, out.splitlines()[-1]) == (0, "no changes: 0 writes"), err
    assert (state / "owned.json").stat().st_mtime_ns == before
    assert json.loads((state / "owned.json").read_text()) == record


def test_a_cpuset_changed_in_a_cgroup_setup_did_not_make_is_restored(tmp_path, monkeypatch, capsys):
    """A value setup changed in the kubelet's own kubepods (strict-cpu-reservation narrowing
    its cpuset.cpus) goes back when the inputs no longer want it: only the cpusets setup gave
    cgroups it made itself stay wanted while those cgroups are (Plan.seeded)."""
    root, _ = fake_hierarchy(tmp_path, "v1")
    use_fake_tree(monkeypatch, tmp_path)
    for mount in (d for d in root.iterdir() if d.is_dir()):
        (mount / "kubepods").mkdir()
        KERNEL.after_mkdir(str(mount), "kubepods")
    cpuset = root / "cpuset" / "kubepods"
    (cpuset / "cpuset.cpus").write_text("0-3\n")
    (cpuset / "cpuset.mems").write_text("0\n")
    args = [*CAP, "--kube-reserved", "cpu=1,memory=1Gi", "--enforce", "pods",
            "--cpu-manager-policy", "static", "--reserved-cpus", "0",
            "--cgroupfs", str(root), "--state-dir", str(tmp_path / "state")]  # fmt: skip
    strict = ["--cpu-manager-policy-options", "strict-cpu-reservation=true"]
    code, _, err = run_cli(capsys, "setup", *args, *strict)
    assert code == 0, err
    assert (cpuset / "cpuset.cpus").read_text() == "1-3\n"
    code, out, err = run_cli(capsys, "setup", *args)
    assert code == 0, err
    assert "restore cpuset/kubepods/cpuset.cpus: 1-3 -> 0-3 (no longer wanted)" in out
    assert (cpuset / "cpuset.cpus").read_text() == "0-3\n"
