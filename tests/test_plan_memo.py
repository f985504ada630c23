"""setup's plan memo (cgalloc/plan_memo.py): a re-run with the same inputs confirms the tree
from the memo instead of planning again, says exactly what the full run says, and plans in
full whenever anything the memo stands for is different."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import KERNEL, fake_hierarchy, reboot, use_fake_tree

import cgalloc.cli.setup as cli_setup
from cgalloc import plan_memo

UID = "0f6e1d5c-0000-4000-8000-00000000000{}"
NODE = [
    "--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi",
    "--kube-reserved", "cpu=500m,memory=1Gi", "--system-reserved", "cpu=500m,memory=1Gi",
    "--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/system.slice",
]  # fmt: skip


def _pod(i: int, resources: dict, conditions: list | None = None) -> dict:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"p{i}", "namespace": "ns", "uid": UID.format(i)},
           "spec": {"containers": [{"name": "c", "resources": resources}]}}  # fmt: skip
    if conditions:
        pod["status"] = {"conditions": conditions}
    return pod


RESIZE_PENDING = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]
PODS = [
    _pod(1, {"limits": {"cpu": "200m", "memory": "128Mi"}}),  # Guaranteed
    _pod(2, {"requests": {"cpu": "100m"}}),  # Burstable
    _pod(3, {}),  # BestEffort
    # a resize the kubelet has not allocated: a warning in every run
    _pod(4, {"requests": {"cpu": "100m"}}, RESIZE_PENDING),
]


class Node:
    """A fake tree, its pods file and state directory, and setup's calls of the full plan."""

    def __init__(self, tmp_path, monkeypatch, capsys, version: str):
        self.base = tmp_path
        self.version = version
        self.root, _ = fake_hierarchy(tmp_path, version)
        use_fake_tree(monkeypatch, tmp_path)
        self.capsys = capsys
        self.state = tmp_path / "state"
        self.pods = tmp_path / "pods.json"
        self.pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": PODS}))
        self.full_runs = 0
        full = cli_setup._plan_and_apply

        def counted(*args, **kwargs):
            self.full_runs += 1
            return full(*args, **kwargs)

        monkeypatch.setattr(cli_setup, "_plan_and_apply", counted)

    @property
    def memo(self):
        return self.state / plan_memo.MEMO_NAME

    def setup(self, *extra: str) -> tuple[int, str, str]:
        where = ["--cgroupfs", str(self.root), "--state-dir", str(self.state)]
        return run_cli(self.capsys, "setup", *NODE, *where, "--pods", str(self.pods), *extra)

    def rerun_is_full(self, *extra: str) -> bool:
        """Run setup; True when it planned in full, False when the memo confirmed the tree."""
        before = self.full_runs
        code, _, err = self.setup(*extra)
        assert code == 0, err
        return self.full_runs > before


@pytest.fixture(params=["v1", "v2"])
def node(request, tmp_path, monkeypatch, capsys):
    return Node(tmp_path, monkeypatch, capsys, request.param)


@pytest.mark.parametrize("form", [[], ["-o", "json"], ["-o", "yaml"], ["--quiet"]])
def test_a_rerun_from_the_memo_says_what_the_full_plan_says(node, form):
    code, _, err = node.setup()
    assert code == 0, err
    assert node.full_runs == 1 and node.memo.is_file()
    from_memo = node.setup(*form)
    assert node.full_runs == 1  # confirmed without planning
    node.memo.unlink()
    full = node.setup(*form)
    assert node.full_runs == 2
    assert from_memo == full
    code, out, err = from_memo
    assert code == 0
    assert "PodResizePending, Deferred" in err  # the plan's warnings, as the full run says them
    assert "enforcing system-reserved can CPU-starve" in err
    if not form:
        assert out.splitlines()[-1] == "no changes: 0 writes"


def _a_file_of_pod(node: Node, i: int) -> str:
    memo = json.loads(node.memo.read_text())
    for mount, entry in sorted(memo["mounts"].items()):
        for path in entry["files"]:
            if os.path.dirname(path).endswith(UID.format(i)):
                return os.path.join(mount, path)
    raise AssertionError("no file of the pod in the memo")


def _drift_a_value(node: Node) -> None:
    path = _a_file_of_pod(node, 1)
    with open(path, "w") as fh:
        fh.write("7\n")


def _remove_a_pod_cgroup(node: Node) -> None:
    shutil.rmtree(os.path.dirname(_a_file_of_pod(node, 2)))


def _change_the_pods_file(node: Node) -> None:
    node.pods.write_text(node.pods.read_text() + "\n")  # the same pods, other bytes


def _touch_the_record(node: Node) -> None:
    record = node.state / "owned.json"
    record.write_text(json.dumps(json.loads(record.read_text())))  # same entries, other text


def _leave_an_empty_journal(node: Node) -> None:
    (node.state / "journal.jsonl").write_text("")  # a run killed before its first line


def _leave_a_journal(node: Node) -> None:
    """A killed run's journal: a change of a cgroup setup made (folded in, nothing new)."""
    record = json.loads((node.state / "owned.json").read_text())
    mount, path = record["created"][0]
    entry = {"boot": record["boot"], "kind": "mkdir", "mount": mount, "path": path}
    (node.state / "journal.jsonl").write_text(json.dumps(entry) + "\n")


def _reboot(node: Node) -> None:
    reboot(node.base)


def _corrupt_the_memo(text: str):
    def corrupt(node: Node) -> None:
        node.memo.write_text(text)

    return corrupt


def _edit_memo(node: Node, edit) -> None:
    memo = json.loads(node.memo.read_text())
    edit(memo)
    node.memo.write_text(json.dumps(memo))


def _another_mount(node: Node) -> None:
    """A mount beside those of this hierarchy (a `..` one reads outside it), listing nothing
    to read there: only the check of the memo's mounts against the hierarchy's refuses it."""

    def edit(memo: dict) -> None:
        mount = next(iter(memo["mounts"]))
        nothing = {"files": [], "values": [], "dirs": [], "enabled": []}
        memo["mounts"][os.path.join(mount, "..")] = nothing

    _edit_memo(node, edit)


def _no_mount(node: Node) -> None:
    _edit_memo(node, lambda memo: memo.update(mounts={}))


def _another_installation(monkeypatch):
    stamp = plan_memo.code_stamp()
    monkeypatch.setattr(plan_memo, "code_stamp", lambda: [*stamp, ["new.py", 1, 1]])


CHANGES = {
    "a file off its value": _drift_a_value,
    "a pod cgroup gone": _remove_a_pod_cgroup,
    "the pods file's bytes": _change_the_pods_file,
    "the record's text": _touch_the_record,
    "a killed run's journal": _leave_a_journal,
    "an empty journal": _leave_an_empty_journal,
    "a reboot": _reboot,
    "a memo that is not JSON": _corrupt_the_memo("{not json"),
    "a memo cut short": _corrupt_the_memo('{"version": 1, "key": "'),
    "a memo of another shape": _corrupt_the_memo('{"version": 1, "key": 5}'),
    "a memo listing no mount": _corrupt_the_memo("[]"),
    "a memo of another hierarchy": _another_mount,
    "a memo with no mount": _no_mount,
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_anything_the_memo_stands_for_changed_plans_in_full(node, change):
    assert node.rerun_is_full()
    CHANGES[change](node)
    assert node.rerun_is_full()
    # and the full run leaves the tree as planned and a memo of it again
    assert not node.rerun_is_full()


def test_other_inputs_or_another_installation_plan_in_full(node, monkeypatch):
    assert node.rerun_is_full()
    assert node.rerun_is_full("--pod-max-pids", "100")  # another flag: another tree
    assert not node.rerun_is_full("--pod-max-pids", "100")
    assert node.rerun_is_full()  # back to the first inputs: its memo is gone
    _another_installation(monkeypatch)
    assert node.rerun_is_full()


def test_a_value_the_memo_wants_that_drifted_is_written_back(node):
    node.setup()
    path = _a_file_of_pod(node, 1)
    want = Path(path).read_text()
    _drift_a_value(node)
    code, out, err = node.setup()
    assert code == 0, err
    assert "applied 1 changes" in out
    assert Path(path).read_text() == want


def test_a_cgroup_behind_a_symlink_is_refused_not_confirmed(node):
    """A re-run must find each cgroup where a write would: not through a link the memo
    check followed (the full plan refuses it, naming the symlink)."""
    node.setup()
    pod = os.path.dirname(_a_file_of_pod(node, 2))
    moved = pod + "-moved"
    os.rename(pod, moved)
    os.symlink(moved, pod)
    code, _, err = node.setup()
    assert code == 2
    assert "goes through the symlink" in err
    assert node.full_runs == 2


def test_a_disabled_controller_plans_in_full(tmp_path, monkeypatch, capsys):
    node = Node(tmp_path, monkeypatch, capsys, "v2")
    assert node.rerun_is_full()
    control = node.root / "kubepods" / "cgroup.subtree_control"
    control.write_text(" ".join(c for c in control.read_text().split() if c != "pids") + "\n")
    assert node.rerun_is_full()


@pytest.mark.parametrize("how", ["procs", "static pods directory"])
def test_no_memo_where_setup_acts_on_live_processes_or_a_directory(node, how):
    if how == "procs":
        extra = ["--system-reserved-procs", "no-such-process-name"]
    else:
        manifests = node.base / "manifests"
        manifests.mkdir()
        node.pods = manifests
        extra = []
    assert node.rerun_is_full(*extra)
    assert not node.memo.exists()
    assert node.rerun_is_full(*extra)


def test_teardown_forgets_the_memo(node):
    node.setup()
    assert node.memo.is_file()
    code, _, err = run_cli(node.capsys, "teardown", "--cgroupfs", str(node.root),
                           "--state-dir", str(node.state))  # fmt: skip
    assert code == 0, err
    assert not node.memo.exists()


def test_the_digest_is_the_same_in_every_process():
    """Sets and mappings are written in order: with another hash seed (another order of a
    frozenset's items), the same configuration has the same digest."""
    program = (
        "from cgalloc.config import NodeConfig\n"
        "from cgalloc.plan_memo import inputs_digest\n"
        "cfg = NodeConfig(reserved_cpus=frozenset(range(40)),"
        " enforce_node_allocatable=('pods', 'kube-reserved'),"
        " feature_gates={'B': True, 'A': False})\n"
        "print(inputs_digest([cfg, {'x', 'y', 'z', 'w'}]))\n"
    )
    env = os.environ.copy()
    digests = set()
    for seed in ("1", "2", "3"):
        env["PYTHONHASHSEED"] = seed
        run = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        digests.add(run.stdout)
    assert len(digests) == 1 and len(digests.pop().strip()) == 64


def test_a_value_with_no_stable_text_gives_no_digest():
    assert plan_memo.inputs_digest([object()]) is None


def test_a_pods_file_given_twice_is_refused_as_the_full_plan_refuses_it(node):
    """The digest follows --pods path by path: the same file twice is the same pods twice,
    which the full plan refuses (exit 2), memo or not."""
    node.setup()
    code, _, err = node.setup("--pods", str(node.pods))
    assert code == 2
    assert "have the same UID" in err


def test_a_pods_read_error_keeps_its_place_after_an_earlier_files_problem(node):
    """The pods files are read ahead for the digest; one that cannot be read leaves them to
    the full run, which refuses an earlier file's problem first, as it always has."""
    bad = node.base / "bad.yaml"
    bad.write_text("items: [unclosed\n")  # not YAML: refused as soon as it is read
    node.pods = bad
    code, _, err = node.setup("--pods", str(node.base / "missing.json"))
    assert code == 2
    problems = [line for line in err.splitlines() if line.startswith("cgalloc: ")]
    assert "bad.yaml" in problems[0] and "missing.json" not in problems[0], problems


def test_no_memo_while_the_record_holds_controllers_of_a_cgroup_no_longer_wanted(
    tmp_path, monkeypatch, capsys
):
    """setup enabled controllers in a cgroup it did not make (a reservation's parent); when
    the reservation moves, that entry stays recorded (it is never undone) and the full run
    checks where it points: setup keeps no memo then, and plans in full."""
    node = Node(tmp_path, monkeypatch, capsys, "v2")
    (node.root / "outer").mkdir()
    KERNEL.after_mkdir(str(node.root), "outer")
    assert node.rerun_is_full("--system-reserved-cgroup", "/outer/system.slice")
    record = json.loads((node.state / "owned.json").read_text())
    assert [str(node.root), "outer", ["cpu", "memory", "pids"]] in [
        [m, p, [c for c in cs if c in ("cpu", "memory", "pids")]] for m, p, cs in
        record["enabled"]
    ]  # fmt: skip
    assert node.memo.is_file()
    assert node.rerun_is_full()  # NODE's /system.slice
    assert not node.memo.exists()
    assert node.rerun_is_full()


def test_a_cgroup_with_no_file_to_compare_gone_plans_in_full(tmp_path, monkeypatch, capsys):
    """A cgroup the memo lists in a hierarchy where it has no file to compare (v1's cpuacct
    and name=systemd; on v2 every cgroup below the root has one) is found in its parent's
    listing: removed, the re-run plans in full and makes it again."""
    node = Node(tmp_path, monkeypatch, capsys, "v1")
    assert node.rerun_is_full()
    memo = json.loads(node.memo.read_text())
    bare = [(m, p) for m, entry in memo["mounts"].items() for p in entry["dirs"]]
    mount, path = max(bare, key=lambda mp: mp[1].count("/"))
    shutil.rmtree(os.path.join(mount, path))
    assert node.rerun_is_full()
    assert os.path.isdir(os.path.join(mount, path))
    assert not node.rerun_is_full()


def test_a_record_that_cannot_be_read_leaves_no_memo_and_no_error(tmp_path):
    """save() after a run: a record it cannot read for its digest (here a FIFO in its place)
    means no memo, not a failed setup whose changes are made."""
    from cgalloc.ownership import Record, StateDir
    from cgalloc.plan import Plan

    state = StateDir(str(tmp_path), str(tmp_path / "no-boot-id"))
    (tmp_path / plan_memo.MEMO_NAME).write_text("{}")
    os.mkfifo(tmp_path / "owned.json")
    plan_memo.save(state, "key", Plan(root=str(tmp_path)), Record())
    assert not (tmp_path / plan_memo.MEMO_NAME).exists()
