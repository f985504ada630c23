"""A CLI scripts can trust (issue 10 §3): the --capacity guard, plan and progress, --quiet,
warnings on stderr in every format, teardown --dry-run, camelCase JSON. Fake trees."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from fakecgroup import existing_system_slice, fake_tree, snapshot, where
from nodeargs import NODE

from cgalloc.cli.inputs import CAPACITY_IS_PLANNED
from cgalloc.model.nodeconfig import SYSTEM_RESERVED_RISK

WARNING = f"cgalloc: warning: {SYSTEM_RESERVED_RISK}"
PROGRESS = re.compile(r"\[(\d+)/(\d+)\] (.*)")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    return fake_tree(tmp_path, monkeypatch, "v2")


def test_setup_with_capacity_is_refused_without_dry_run(tmp_path, capsys):
    # no fake-tree switches: the tool as installed, on a directory standing for /sys/fs/cgroup
    target = tmp_path / "cgroup"
    target.mkdir()
    code, out, err = run_cli(capsys, "setup", *NODE, *where(target, tmp_path))
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "--capacity" in err and "--dry-run" in err
    assert list(target.iterdir()) == [] and not (tmp_path / "state").exists()


def test_verify_with_capacity_warns(tree, tmp_path, capsys):
    code, _, err = run_cli(capsys, "verify", *NODE, *where(tree, tmp_path))
    assert code == 1  # nothing set up: drift
    assert f"cgalloc: warning: {CAPACITY_IS_PLANNED}" in err.splitlines()


def test_setup_prints_the_plan_first_then_one_progress_line_per_change(tree, tmp_path, capsys):
    code, dry, _ = run_cli(capsys, "setup", "--dry-run", *NODE, *where(tree, tmp_path))
    planned = dry.splitlines()[:-1]
    code, out, err = run_cli(capsys, "setup", *NODE, *where(tree, tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[: len(planned)] == planned and lines[-1] == f"applied {len(planned)} changes"
    assert err.splitlines()[0] == WARNING
    progress = [PROGRESS.fullmatch(line).groups() for line in err.splitlines()[1:]]
    total = str(len(planned))
    assert progress == [(str(i), total, p.strip()) for i, p in enumerate(planned, 1)]


def test_quiet_prints_nothing_on_success_and_keeps_exit_codes(tree, tmp_path, capsys):
    before = snapshot(tree)
    for command, warning in (
        ("setup", SYSTEM_RESERVED_RISK),
        ("verify", CAPACITY_IS_PLANNED),
        ("setup", SYSTEM_RESERVED_RISK),
    ):
        code, out, err = run_cli(capsys, command, *NODE, *where(tree, tmp_path), "--quiet")
        assert (code, out, err) == (0, "", f"cgalloc: warning: {warning}\n")
    (tree / "kubepods" / "memory.max").write_text("max\n")
    code, out, _ = run_cli(capsys, "verify", *NODE, *where(tree, tmp_path), "-q")
    assert code == 1 and "kubepods/memory.max: is max" in out  # drift is not success
    code, out, err = run_cli(capsys, "teardown", *where(tree, tmp_path), "--quiet")
    assert (code, out, err) == (0, "", "")
    assert snapshot(tree) == before


def test_install_unit_quiet(tmp_path, capsys):
    args = ["--", "--kube-reserved", "cpu=100m"]
    code, out, err = run_cli(capsys, "install-unit", "--root", str(tmp_path), "--quiet", *args)
    assert (code, out, err) == (0, "", "")
    assert any(tmp_path.rglob("cgalloc-setup.service"))
    code, out, _ = run_cli(capsys, "install-unit", "--root", str(tmp_path), *args)
    assert (code, out) == (0, "nothing to change\n")  # the quiet run did install


def test_teardown_dry_run_lists_and_writes_nothing(tree, tmp_path, capsys):
    run_cli(capsys, "setup", *NODE, *where(tree, tmp_path))
    (tree / "system.slice" / "memory.max").write_text("1073741824\n")
    set_up = snapshot(tree)
    record = (tmp_path / "state" / "owned.json").read_bytes()
    code, out, err = run_cli(capsys, "teardown", *where(tree, tmp_path), "--dry-run")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "  rmdir kubepods/burstable" in lines and "  rmdir system.slice" in lines
    # the kubepods children go before kubepods itself, as teardown removes them
    assert lines.index("  rmdir kubepods/burstable") < lines.index("  rmdir kubepods")
    assert lines[-1] == f"dry run: {len(lines) - 1} changes to undo, nothing written"
    assert snapshot(tree) == set_up
    assert (tmp_path / "state" / "owned.json").read_bytes() == record
    code, out, _ = run_cli(capsys, "teardown", *where(tree, tmp_path), "-o", "json")
    done = json.loads(out)
    assert code == 0 and done["writes"] == len(lines) - 1
    assert done["systemd"] == {"unitsStopped": [], "propertiesRestored": []}


def test_teardown_dry_run_agrees_with_teardown_on_a_changed_tree(tree, tmp_path, capsys):
    # each departure from the recorded tree, and what the real run does with it, which the
    # dry run must list the same way (apply.teardown: _restore_values, _remove_created)
    existing_system_slice(tree, "v2", "max")  # the node's own: setup changes, not creates
    run_cli(capsys, "setup", *NODE, *where(tree, tmp_path))
    (tree / "kubepods" / "besteffort" / "cgroup.procs").write_text("4242\n")  # kept: busy
    (tree / "system.slice" / "memory.max").unlink()  # gone with its controller: forgotten
    gone = tree / "kubepods" / "burstable"
    for f in gone.iterdir():
        f.unlink()
    gone.rmdir()  # a created cgroup already gone: nothing to do
    code, out, _ = run_cli(capsys, "teardown", *where(tree, tmp_path), "--dry-run")
    lines = [line.strip() for line in out.splitlines()[:-1]]
    assert code == 0
    assert "keep kubepods/besteffort: it still has processes" in lines
    assert "keep kubepods: a cgroup below it is kept" in lines
    assert not any(line.startswith("rmdir kubepods") for line in lines)
    assert "restore system.slice/pids.max: 100 -> max" in lines
    assert not any("memory.max" in line for line in lines)
    assert not any("kubepods/burstable" in line for line in lines)
    undo = [line for line in lines if not line.startswith("keep ")]
    assert out.splitlines()[-1] == f"dry run: {len(undo)} changes to undo, nothing written"
    code, out, _ = run_cli(capsys, "teardown", *where(tree, tmp_path), "-o", "json")
    done = json.loads(out)
    assert code == 1  # the busy cgroup and its parent were kept
    assert done["writes"] == len(undo)
    assert (tree / "system.slice" / "pids.max").read_text() == "max\n"


def _keys(doc: object) -> set[str]:
    """Every key of a JSON document, data maps (resource names, limits) left out."""
    data = {"capacity", "allocatable", "limits", "evictionHard", "kubeReserved", "systemReserved"}
    if isinstance(doc, list):
        return {k for item in doc for k in _keys(item)}
    if not isinstance(doc, dict):
        return set()
    out = set()
    for key, value in doc.items():
        out.add(key)
        if key not in data or (isinstance(value, dict) and "cgroup" in value):
            out |= _keys(value)
    return out


CAMEL = re.compile(r"[a-z]+([A-Z][a-z0-9]*)*")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_every_command_uses_camel_case_keys_and_lists(tree, tmp_path, capsys, fmt):
    """Kubernetes API conventions (community/contributors/devel/sig-architecture/
    api-conventions.md: field names are camelCase)."""
    load = json.loads if fmt == "json" else yaml.safe_load
    docs = {}
    for name, argv in (
        ("show", ["show", *NODE]),
        ("dry", ["setup", "--dry-run", *NODE, *where(tree, tmp_path)]),
        ("setup", ["setup", *NODE, *where(tree, tmp_path)]),
        ("verify", ["verify", *NODE, *where(tree, tmp_path)]),
        ("teardown", ["teardown", *where(tree, tmp_path)]),
    ):
        code, out, err = run_cli(capsys, *argv, "-o", fmt)
        assert code == 0, err
        docs[name] = load(out)
    for name, doc in docs.items():
        bad = sorted(k for k in _keys(doc) if not CAMEL.fullmatch(k))
        assert bad == [], name
    assert docs["dry"]["dryRun"] is True and docs["setup"]["noLongerWanted"]["writes"] == 0
    assert docs["verify"]["inSync"] is True
    lowers = {tuple(t["lowers"]) for t in docs["show"]["breakdown"]}
    assert ("allocatable", "system-reserved") in lowers or ("allocatable",) in lowers
    assert all(isinstance(t["lowers"], list) for t in docs["show"]["breakdown"])


@pytest.mark.parametrize(
    ("command", "fmt"),
    [(c, f) for c in ("show", "setup") for f in ("table", "json", "yaml")]
    + [("kubelet-config", f) for f in ("yaml", "json", "flags")],
)
def test_system_reserved_warning_goes_to_stderr_in_every_format(
    tree, tmp_path, capsys, fmt, command
):
    """The Kubernetes docs' warning (reserve-compute-resources: enforcing system-reserved
    "can lead to critical system services being CPU starved or OOM killed")."""
    extra = ["--dry-run", *where(tree, tmp_path)] if command == "setup" else []
    code, out, err = run_cli(capsys, command, *NODE, *extra, "-o", fmt)
    assert code == 0
    assert WARNING in err.splitlines()
    if fmt in ("table", "flags"):
        assert SYSTEM_RESERVED_RISK not in out
    without = [a if a != "pods,system-reserved" else "pods" for a in NODE]
    code, _, err = run_cli(capsys, command, *without, *extra, "-o", fmt)
    assert code == 0 and SYSTEM_RESERVED_RISK not in err


def test_show_json_keeps_warnings_off_stdout_text(capsys):
    code, out, err = run_cli(capsys, "show", *NODE, "--cgroup-driver", "systemd", "-o", "json")
    doc = json.loads(out)
    assert code == 0 and doc["warnings"]
    assert all(f"cgalloc: warning: {w}" in err.splitlines() for w in doc["warnings"])


def test_drift_objects_name_the_cgroup_below_cgroupfs(tree: Path, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "verify", *NODE, *where(tree, tmp_path), "-o", "json")
    drift = json.loads(out)["drift"]
    assert code == 1
    assert {"cgroup": "kubepods", "file": None, "is": None, "want": "cgroup"} in drift
    assert {"cgroup": "system.slice", "file": "pids.max", "is": None, "want": "100"} in drift
