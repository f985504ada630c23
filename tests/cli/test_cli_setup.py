"""setup / verify / teardown / kubelet-config from the command line, on fake trees."""

from __future__ import annotations

import json

import pytest
import yaml
from clirun import run_cli
from fakecgroup import fake_tree, snapshot, where
from nodeargs import NODE


@pytest.fixture
def tree(tmp_path, monkeypatch):
    return fake_tree(tmp_path, monkeypatch, "v2")


run = run_cli


def test_dry_run_lists_every_action_and_writes_nothing(tree, tmp_path, capsys):
    before = snapshot(tree)
    code, out, _ = run(capsys, "setup", "--dry-run", *NODE, *where(tree, tmp_path))
    assert code == 0
    lines = out.splitlines()
    # kubepods = capacity − system − kube: 8Gi − 2Gi; cpu 3000m → shares 3072 → weight 118;
    # pids 4096 − 100; system.slice: 1Gi, 500m → 512 shares → weight 20, pids 100
    for expected in (
        "  mkdir kubepods",
        "  mkdir kubepods/burstable",
        "  mkdir kubepods/besteffort",
        "  mkdir system.slice",
        "  write kubepods/memory.max: (new) -> 6442450944",
        "  write kubepods/cpu.weight: (new) -> 118",
        "  write kubepods/pids.max: (new) -> 3996",
        "  write kubepods/besteffort/cpu.weight: (new) -> 1",
        "  write system.slice/memory.max: (new) -> 1073741824",
        "  write system.slice/cpu.weight: (new) -> 20",
        "  write system.slice/pids.max: (new) -> 100",
    ):
        assert expected in lines
    assert lines[-1] == f"dry run: {len(lines) - 1} changes planned, nothing written"
    assert snapshot(tree) == before
    assert not (tmp_path / "state").exists()


def test_setup_then_rerun_is_zero_writes_and_verify_passes(tree, tmp_path, capsys):
    code, out, _ = run(capsys, "setup", *NODE, *where(tree, tmp_path), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["writes"] == len(doc["plan"]["actions"]) > 0
    code, out, _ = run(capsys, "setup", *NODE, *where(tree, tmp_path))
    assert (code, out) == (0, "no changes: 0 writes\n")
    code, out, _ = run(capsys, "verify", *NODE, "--cgroupfs", str(tree))
    assert (code, out) == (0, "in sync: the tree matches\n")


def test_verify_reports_drift_with_exit_1(tree, tmp_path, capsys):
    run(capsys, "setup", *NODE, *where(tree, tmp_path))
    (tree / "kubepods" / "memory.max").write_text("max\n")
    code, out, _ = run(capsys, "verify", *NODE, "--cgroupfs", str(tree), "-o", "json")
    assert code == 1
    assert json.loads(out) == {
        "inSync": False,
        "drift": [{"cgroup": "kubepods", "file": "memory.max", "is": "max", "want": "6442450944"}],
        "summary": "drift: 1 differences",
    }


def test_teardown_after_setup_restores_the_tree(tree, tmp_path, capsys):
    before = snapshot(tree)
    run(capsys, "setup", *NODE, *where(tree, tmp_path))
    code, out, _ = run(capsys, "teardown", *where(tree, tmp_path))
    assert code == 0
    assert out.splitlines()[-1] == "undid 5 changes; nothing cgalloc made is left"
    assert snapshot(tree) == before


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_symlink_to_the_mount_names_the_mount(tmp_path, monkeypatch, capsys, version):
    # --cgroupfs is matched against mountinfo, which names real paths: a symlink to the mount
    # was "no cgroup filesystem is mounted at or under <link>", exit 3
    tree = fake_tree(tmp_path, monkeypatch, version)
    before = snapshot(tree)
    (tmp_path / "link").symlink_to(tree)
    via_link = ["--cgroupfs", str(tmp_path / "link"), "--state-dir", str(tmp_path / "state")]
    code, out, err = run(capsys, "setup", *NODE, *via_link)
    assert code == 0, err
    record = (tmp_path / "state" / "owned.json").read_text()
    assert str(tree) in record and str(tmp_path / "link") not in record  # the mount's own path
    code, _, err = run(capsys, "verify", *NODE, *where(tree, tmp_path))
    assert code == 0, err
    code, out, err = run(capsys, "teardown", *via_link)
    assert code == 0, err
    assert out.splitlines()[-1].endswith("; nothing cgalloc made is left")
    assert snapshot(tree) == before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--cpu-weight-formula", "cubic"],
            "cgalloc: --cpu-weight-formula 'cubic' is not one of kubelet, runc.\n",
        ),
        (
            ["--kube-reserved-procs", "kubelet"],
            "cgalloc: --kube-reserved-procs needs the kube-reserved cgroup: set "
            "kubeReservedCgroup (--kube-reserved-cgroup).\n",
        ),
    ],
)
def test_bad_tree_options_exit_2_and_write_nothing(tree, tmp_path, capsys, extra, message):
    before = snapshot(tree)
    code, _, err = run(capsys, "setup", *NODE, *where(tree, tmp_path), *extra)
    assert (code, err) == (2, message)
    assert snapshot(tree) == before


def test_memory_limit_below_usage_refused_exit_1(tree, tmp_path, capsys):
    run(capsys, "setup", *NODE, *where(tree, tmp_path))
    (tree / "kubepods" / "memory.current").write_text(f"{7 << 30}\n")
    before = snapshot(tree)
    lower = [a if a != "cpu=500m,memory=1Gi" else "cpu=500m,memory=2Gi" for a in NODE]
    code, _, err = run(capsys, "setup", *lower, *where(tree, tmp_path))
    assert code == 1
    assert err.splitlines() == [
        "cgalloc: refusing to lower the memory limit of /kubepods to 5368709120 bytes: it uses "
        "7516192768 bytes now (give --force to lower it anyway and let the kernel reclaim or "
        "OOM-kill).",
        "cgalloc: nothing was written.",
    ]
    assert snapshot(tree) == before
    code, _, _ = run(capsys, "setup", *lower, *where(tree, tmp_path), "--force")
    assert code == 0
    assert (tree / "kubepods" / "memory.max").read_text() == "5368709120\n"


def test_kubelet_config_matches_the_inputs(capsys):
    code, out, _ = run(capsys, "kubelet-config", *NODE, "--eviction-hard", "memory.available<100Mi")
    assert code == 0
    assert yaml.safe_load(out) == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": "/",
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods", "system-reserved"],
        "evictionHard": {"memory.available": "100Mi"},
        "kubeReserved": {"cpu": "500m", "memory": "1Gi"},
        "systemReserved": {"cpu": "500m", "memory": "1Gi", "pid": "100"},
        "systemReservedCgroup": "/system.slice",
        "systemCgroups": "/system.slice",  # the enforced system-reserved cgroup setup makes
    }
    assert "#   --system-reserved=cpu=500m,memory=1Gi,pid=100" in out.splitlines()


def test_kubelet_config_notes_unit_paths_under_systemd(capsys):
    code, out, err = run(
        capsys,
        "kubelet-config",
        "--cgroup-driver",
        "systemd",
        "--kube-reserved",
        "cpu=100m",
        "--enforce",
        "pods,kube-reserved",
        "--kube-reserved-cgroup",
        "/system.slice/kubelet.service",
    )
    assert code == 0
    # setup creates /kubelet.service.slice, the cgroup the kubelet's systemd driver maps the
    # value to (cgroup_manager_linux.go ParseSystemdToCgroupName, kubernetes#110288), so the
    # kubelet starts with the value as given; a note names both paths
    note = next(line for line in err.splitlines() if "note:" in line)
    assert note.startswith(
        "cgalloc: note: kubeReservedCgroup (--kube-reserved-cgroup) /system.slice/"
    )
    assert "/kubelet.service.slice" in note
    doc = yaml.safe_load(out)
    assert doc["kubeReservedCgroup"] == "/system.slice/kubelet.service"
    assert doc["enforceNodeAllocatable"] == ["pods", "kube-reserved"]
    assert doc["kubeReserved"] == {"cpu": "100m"}


def test_kubelet_config_writes_the_whole_default_eviction_set(capsys):
    # a main config file's partial evictionHard replaces the kubelet's defaults
    # (cmd/kubelet/app/server.go loadConfigFile), so all five default signals are written
    code, out, _ = run(capsys, "kubelet-config", "--max-pods", "250", "--pods-per-core", "8")
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc["evictionHard"] == {
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
        "memory.available": "100Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
    }
    assert (doc["maxPods"], doc["podsPerCore"]) == (250, 8)


def test_kubelet_config_fed_back_gives_the_same_numbers(capsys, tmp_path):
    inputs = [*NODE, "--eviction-hard", "memory.available<250Mi,nodefs.available<7%"]
    code, fragment, _ = run(capsys, "kubelet-config", *inputs)
    assert code == 0
    config = tmp_path / "kubelet.yaml"
    config.write_text(fragment)
    capacity = ["--capacity", NODE[1]]
    code, direct, _ = run(capsys, "show", *inputs, "-o", "json")
    assert code == 0
    code, fed_back, _ = run(capsys, "show", "--config", str(config), *capacity, "-o", "json")
    assert code == 0
    assert json.loads(fed_back) == json.loads(direct)


@pytest.fixture
def v1_tree(tmp_path, monkeypatch):
    return fake_tree(tmp_path, monkeypatch, "v1")


V1_DIRS = ("cpu,cpuacct", "cpuset", "hugetlb", "memory", "pids", "systemd")


@pytest.mark.parametrize("dry_run", [["--dry-run"], []])
def test_missing_cgroup_root_fails_before_any_write(v1_tree, tmp_path, capsys, dry_run):
    (v1_tree / "memory" / "mycg").mkdir()
    (v1_tree / "pids" / "mycg").mkdir()
    before = snapshot(v1_tree)
    code, out, err = run(
        capsys, "setup", *dry_run, *NODE, "--cgroup-root", "/mycg", *where(v1_tree, tmp_path)
    )
    assert (code, out) == (3, "")
    missing = [d for d in V1_DIRS if d not in ("memory", "pids")]
    assert err.splitlines() == [
        "cgalloc: cgroupRoot (--cgroup-root) /mycg must exist, as the kubelet requires; cgalloc"
        " creates only the cgroups below it, so create it in every hierarchy first:",
        *[f"cgalloc:   missing {v1_tree}/{d}/mycg" for d in missing],
    ]
    assert snapshot(v1_tree) == before


def test_existing_cgroup_root_is_used_with_the_systemd_driver(tree, tmp_path, capsys):
    (tree / "mycg.slice").mkdir()
    args = [*NODE[:-1], "system.slice", "--cgroup-driver", "systemd", "--cgroup-root", "/mycg"]
    code, out, err = run(capsys, "setup", "--dry-run", *args, *where(tree, tmp_path))
    assert code == 0, err
    assert "  mkdir mycg.slice/mycg-kubepods.slice" in out.splitlines()
    code, _, err = run(capsys, "setup", "--dry-run", *args[:-1], "/other", *where(tree, tmp_path))
    assert code == 3
    assert err.splitlines()[1:] == [f"cgalloc:   missing {tree}/other.slice"]


def test_no_create_reserved_names_missing_paths_per_controller(v1_tree, tmp_path, capsys):
    (v1_tree / "memory" / "system.slice").mkdir()
    (v1_tree / "cpu,cpuacct" / "system.slice").mkdir()
    before = snapshot(v1_tree)
    code, out, err = run(capsys, "setup", *NODE, "--no-create-reserved", *where(v1_tree, tmp_path))
    assert (code, out) == (3, "")
    missing = [d for d in V1_DIRS if d not in ("memory", "cpu,cpuacct")]
    assert err.splitlines() == [
        "cgalloc: reserved cgroups are missing and --no-create-reserved was given:",
        *[
            f"cgalloc:   missing system-reserved /system.slice: {v1_tree}/{d}/system.slice"
            for d in missing
        ],
    ]
    assert snapshot(v1_tree) == before


def test_dry_run_writes_cpuset_and_reserved_hugetlb_zero(tree, tmp_path, capsys):
    # node_container_manager_linux.go getCgroupConfig (none policy: CPUSet = all CPUs) and
    # cgroup_manager_linux.go maybeSetHugetlb (unrequested page sizes limited to 0)
    code, out, _ = run(
        capsys, "setup", "--dry-run", *NODE, "--capacity", "hugepages-2Mi=0",
        *where(tree, tmp_path),
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert "  write kubepods/cpuset.cpus: (new) -> 0-3" in lines
    assert "  write system.slice/cpuset.cpus: (new) -> 0-3" in lines
    assert "  write system.slice/hugetlb.2MB.max: (new) -> 0" in lines


def test_cgroups_per_qos_false_limits_the_cgroup_root(tree, tmp_path, capsys):
    # enforceNodeAllocatableCgroups updates cm.cgroupRoot (not root "/") with the capacity
    (tree / "mycg").mkdir()
    code, out, _ = run(
        capsys, "setup", "--dry-run", "--capacity", "cpu=4,memory=8Gi,pid=4096",
        "--cgroups-per-qos=false", "--enforce", "none", "--cgroup-root", "mycg/",
        *where(tree, tmp_path),
    )  # fmt: skip
    assert code == 0, out
    lines = out.splitlines()
    # mycg exists; enabling memory in the root makes its memory.max appear at "max"
    assert "  write mycg/memory.max: max -> 8589934592" in lines
    assert not any("kubepods" in line for line in lines)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_a_nested_reserved_cgroup_gets_its_missing_parents(tmp_path, monkeypatch, capsys, version):
    # The kubelet maps --kube-reserved-cgroup /kube-reserved.slice to
    # /kube.slice/kube-reserved.slice under the systemd driver, and a cgroupfs path may be nested
    # too: setup makes the missing parent first (mkdir -p), and teardown removes both.
    tree = fake_tree(tmp_path, monkeypatch, version)
    before = snapshot(tree)
    args = [*NODE[:-1], "/outer/system"]
    code, out, err = run(capsys, "setup", *args, *where(tree, tmp_path))
    assert code == 0, err
    mkdirs = [line.split()[-1] for line in out.splitlines() if line.startswith("  mkdir")]
    if version == "v1":  # "mkdir cpu,cpuacct/outer": one line per hierarchy
        mkdirs = [m.split("/", 1)[1] for m in mkdirs if m.startswith("cpu,cpuacct/")]
    assert mkdirs.index("outer") < mkdirs.index("outer/system")
    code, out, _ = run(capsys, "verify", *args, *where(tree, tmp_path))
    assert code == 0, out
    code, _, err = run(capsys, "teardown", *where(tree, tmp_path))
    assert code == 0, err
    assert snapshot(tree) == before


@pytest.mark.parametrize(
    "command", [["setup", "--dry-run"], ["setup"], ["verify"]], ids=["dry-run", "setup", "verify"]
)
def test_the_node_config_is_read_once_per_command(tree, tmp_path, capsys, monkeypatch, command):
    # the plan takes the command's NodeConfig: a config or drop-in rewritten mid-run cannot give
    # the warnings of one file and the tree of another (and it is parsed once, not twice)
    import cgalloc.cli.inputs

    calls = []
    real = cgalloc.cli.inputs.load_node_config

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(cgalloc.cli.inputs, "load_node_config", counted)
    node = [a for a in NODE if a != "--capacity" and "ephemeral" not in a]
    code, _out, err = run(capsys, *command, *node, *where(tree, tmp_path))
    assert code in (0, 1), err
    assert len(calls) == 1
