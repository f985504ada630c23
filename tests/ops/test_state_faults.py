"""The state directory failing mid-run (full disk, I/O error, read-only): every change undone,
the tree byte-identical, one sentence and exit 1; and the record/journal/lock rules."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import (
    existing_system_slice,
    fake_hierarchy,
    make_tree,
    snapshot,
    use_fake_tree,
)
from nodeargs import NODE_SYSTEM_RESERVED

import cgalloc.host.safefs
import cgalloc.ops.state
from cgalloc.model.nodeconfig import SYSTEM_RESERVED_RISK

NODE = NODE_SYSTEM_RESERVED
FAULTS = (errno.ENOSPC, errno.EIO, errno.EROFS)
COUNTED = ("open", "write", "fsync", "replace")  # every state-dir operation that can fail


class FaultyOs:
    """``os`` for cgalloc.ops.state, failing its Nth counted call (0 = none) with ``code``."""

    def __init__(self, fail_at: int, code: int):
        self.fail_at, self.code, self.calls = fail_at, code, 0

    def __getattr__(self, name: str):
        real = getattr(os, name)
        if name not in COUNTED:
            return real

        def counted(*args, **kwargs):
            self.calls += 1
            if self.calls == self.fail_at:
                raise OSError(self.code, os.strerror(self.code))
            return real(*args, **kwargs)

        return counted


def _setup(capsys, root: Path, base: Path, monkeypatch, fake: FaultyOs):
    # Count only from the first change on: the lock and the record load came before.
    import cgalloc.ops.apply

    journal = cgalloc.ops.state.StateDir.journal

    def faulty_journal(self, *args):
        # the state directory's files are written through cgalloc.host.safefs
        monkeypatch.setattr(cgalloc.host.safefs, "os", fake)
        return journal(self, *args)

    monkeypatch.setattr(cgalloc.ops.state.StateDir, "journal", faulty_journal)
    try:
        args = ["--cgroupfs", str(root), "--state-dir", str(base / "state")]
        return run_cli(capsys, "setup", *NODE, *args)
    finally:
        monkeypatch.setattr(cgalloc.host.safefs, "os", os)
        monkeypatch.setattr(cgalloc.ops.state.StateDir, "journal", journal)


def _without_v1_note(err: str) -> str:
    """stderr without the note a v1 tree gets: the default kubelet (1.37) refuses cgroup v1."""
    return "".join(line for line in err.splitlines(True) if "failCgroupV1" not in line)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_state_dir_failing_at_every_position_restores_the_tree(
    tmp_path, monkeypatch, capsys, version
):
    clean = tmp_path / "clean"
    root, _ = fake_hierarchy(clean, version)
    use_fake_tree(monkeypatch, clean)
    counter = FaultyOs(0, 0)
    code, _, err = _setup(capsys, root, clean, monkeypatch, counter)
    err = _without_v1_note(err)
    # stderr: the system-reserved warning, then one progress line per change
    assert code == 0 and err.startswith(f"cgalloc: warning: {SYSTEM_RESERVED_RISK}\n"), err
    progress = err.splitlines()[1:]
    assert progress and all(re.match(r"\[\d+/\d+\] ", line) for line in progress), err
    positions = counter.calls
    assert positions >= 8  # journal open/write/fsync + dir fsync, record tmp/replace + dir fsync
    with capsys.disabled():
        print(f"\nstate-dir faults ({version}): {positions} positions, each restored the tree")
    for n in range(1, positions + 1):
        base = tmp_path / f"fail{n}"
        root, _ = fake_hierarchy(base, version)
        use_fake_tree(monkeypatch, base)
        before = snapshot(root)
        code, _, err = _setup(capsys, root, base, monkeypatch, FaultyOs(n, FAULTS[n % 3]))
        err = _without_v1_note(err)
        reason = os.strerror(FAULTS[n % 3])
        assert code == 1, (n, err)
        # one error sentence after the warning and the progress lines of the changes undone
        errors = [x for x in err.splitlines()[1:] if not re.match(r"\[\d+/\d+\] ", x)]
        assert len(errors) == 1 and "Traceback" not in err, err
        assert reason in err
        assert err.rstrip().endswith(("nothing was changed.", "the node is as it was.")), err
        assert snapshot(root) == before, f"tree differs after state-dir fault {n}"
        # the next run, with a working state dir, converges
        code, _, err = run_cli(
            capsys, "setup", *NODE, "--cgroupfs", str(root), "--state-dir", str(base / "state")
        )
        assert code == 0, err


def _state(tmp_path: Path) -> list[str]:
    return ["--state-dir", str(tmp_path / "state")]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root, _ = fake_hierarchy(tmp_path, "v2")
    use_fake_tree(monkeypatch, tmp_path)
    return root


@pytest.mark.parametrize(
    ("name", "content", "what"),
    [
        ("owned.json", b'{"version": 2, "created": [["/x"', "it is not valid JSON"),
        ("owned.json", b"\xff\xfe\x00binary", "it is not UTF-8 text"),
        ("owned.json", b'{"version": 2, "managed": {}, "created": [[1, 2, 3]]}', "'created'"),
        ("owned.json", b'{"version": 2, "managed": {}, "created": [["/x"]]}', "'created' "),
        ("owned.json", b'{"version": 2, "managed": {}, "created": {"/x": "a"}}', "'created'"),
        ("owned.json", b'{"version": 2, "managed": {}, "written": [{"/x": "a"}]}', "'written'"),
        ("owned.json", b'{"version": 2, "managed": {}, "changed": [["/x", "a", "f", 1]]}',
         "'changed' entries"),
        ("owned.json", b'{"version": 2, "managed": {}, "enabled": [["/x", "a", "cpu"]]}',
         "'enabled' entries"),
        ("owned.json", b"[1, 2]", "it is not a cgalloc record of version 2"),
        ("owned.json", b'{"version": 7}', "it is not a cgalloc record of version 2"),
        # JSON's true and 2.0 equal 1 and 2 in Python; cgalloc writes the integer 2
        ("owned.json", b'{"version": true}', "it is not a cgalloc record of version 2"),
        ("owned.json", b'{"version": 2.0}', "it is not a cgalloc record of version 2"),
        # a record that does not say what it manages cannot be checked
        ("owned.json", b'{"version": 1}', "earlier cgalloc (record version 1)"),
        ("owned.json", b'{"version": 2}', "it does not name the cgroups it manages"),
        ("owned.json", b'{"version": 2, "managed": {"kubepods": [""]}}', "not cgroup paths"),
        ("owned.json", b'{"version": 2, "managed": {"kubepods": ["../x"]}}', "not cgroup paths"),
        ("owned.json", b'{"version": 2, "managed": {"pods": []}}', "managed cgroups are not"),
        ("journal.jsonl", b"\x00\x01\x02\n\xff\n{}\n", "line 1 is not a cgalloc journal entry"),
        ("journal.jsonl", b'{"kind": "rm -rf", "mount": "/", "path": ""}\n', "line 1 is"),
    ],
)
@pytest.mark.parametrize("command", ["setup", "teardown"])
def test_corrupt_record_is_one_sentence_and_nothing_changes(
    tree, tmp_path, capsys, name, content, what, command
):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / name).write_bytes(content)
    before = snapshot(tree)
    extra = NODE if command == "setup" else []
    code, out, err = run_cli(capsys, command, *extra, "--cgroupfs", str(tree), *_state(tmp_path))
    assert code == 2
    assert out == ""
    assert err.startswith(f"cgalloc: --state-dir {tmp_path / 'state'}: {name} cannot be used: ")
    assert what in err
    assert "move it aside" in err and len(err.splitlines()) == 1
    assert snapshot(tree) == before
    assert (tmp_path / "state" / name).read_bytes() == content


def test_torn_last_journal_line_is_what_a_kill_leaves_and_is_accepted(tree, tmp_path, capsys):
    (tmp_path / "state").mkdir()
    managed = {"kind": "managed", "kubepods": ["kubepods"], "reserved": []}
    whole = {"kind": "mkdir", "mount": str(tree), "path": "kubepods"}
    lines = [json.dumps(managed), json.dumps(whole), '{"kind": "wr']
    (tmp_path / "state" / "journal.jsonl").write_text("\n".join(lines))
    code, _, err = run_cli(capsys, "setup", *NODE, "--cgroupfs", str(tree), *_state(tmp_path))
    assert code == 0, err
    record = json.loads((tmp_path / "state" / "owned.json").read_text())
    assert [str(tree), "kubepods"] in record["created"]


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry run"])
@pytest.mark.parametrize("kind", ["missing", "file"])
def test_teardown_of_a_missing_state_dir_is_bad_input_and_creates_nothing(
    tree, tmp_path, capsys, dry_run, kind
):
    # the dry run said "0 changes to undo" with exit 0 where the run refuses; a regular file was
    # said not to exist (the hostile-input review)
    if kind == "file":
        (tmp_path / "state").write_text("")
    argv = ["teardown", *dry_run, "--cgroupfs", str(tree), *_state(tmp_path)]
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    state = tmp_path / "state"
    if kind == "missing":
        assert err == (
            f"cgalloc: --state-dir {state} does not exist; give the directory setup "
            "used (default /var/lib/cgalloc).\n"
        )
    else:  # as every command says it (tests/ops/test_state_trust.py)
        assert err.startswith(f"cgalloc: --state-dir {state}: {state} is not a directory; give")
    assert (tmp_path / "state").exists() == (kind == "file")


def test_setup_refused_on_bad_input_leaves_no_state_dir(tree, tmp_path, capsys):
    code, _, _ = run_cli(
        capsys, "setup", *NODE, "--kube-reserved", "cpu=lots", "--cgroupfs", str(tree),
        *_state(tmp_path),
    )  # fmt: skip
    assert code == 2
    assert not (tmp_path / "state").exists()


def test_default_state_dir_survives_reboot():
    # /run is a tmpfs emptied at boot; the record must outlive it (issue 8, node lifecycle)
    assert cgalloc.ops.state.DEFAULT_STATE_DIR == "/var/lib/cgalloc"


def _refusal(err: str) -> list[str]:
    """stderr without the warnings the node flags give (verify and setup warn first)."""
    return [line for line in err.splitlines() if not line.startswith("cgalloc: warning:")]


# Every command that reads the record's stale entries: teardown and its dry run, and (through
# apply.plan_undo) verify and setup's dry run, which must not read a file through one either.
READERS = {
    "teardown": ["teardown"],
    "teardown-dry-run": ["teardown", "--dry-run"],
    "verify": ["verify", *NODE],
    "setup-dry-run": ["setup", *NODE, "--dry-run"],
}


@pytest.mark.parametrize(
    "entry",
    [
        lambda outside, tree: {"created": [[str(outside), "victim"]]},
        lambda outside, tree: {"created": [[str(tree), "../../outside/victim"]]},
        lambda outside, tree: {"changed": [[str(tree), "../outside/victim", "memory.max", "1"]]},
        lambda outside, tree: {"changed": [[str(tree), "kubepods", "../../outside/f", "1"]]},
        lambda outside, tree: {"created": [[str(tree), ""]]},
        lambda outside, tree: {"enabled": [[str(tree) + "/../outside", "victim", ["cpu"]]]},
        # a mount one level below the tree, as v1's are, but a name no syscall can take
        lambda outside, tree: {"created": [[str(tree) + "/\x00", "victim"]]},
        lambda outside, tree: {"written": [[str(tree) + "/a\nb", "kubepods", "memory.max"]]},
        # a file name setup never writes: a newline (a NUL is the same refusal)
        lambda outside, tree: {"changed": [[str(tree), "kubepods", "memory.max\nx", "1"]]},
        # a plain path, but through a symlink in the tree that leads outside it
        lambda outside, tree: (
            os.symlink(outside, tree / "escape"),
            {"created": [[str(tree), "escape/victim"]]},
        )[1],
    ],
)
@pytest.mark.parametrize("command", READERS.values(), ids=READERS.keys())
def test_teardown_refuses_a_record_naming_cgroups_outside_the_tree(
    tree, tmp_path, capsys, entry, command
):
    outside = tmp_path / "outside"
    (outside / "victim").mkdir(parents=True)
    (outside / "victim" / "memory.max").write_text("12345\n")
    (tmp_path / "state").mkdir()
    record = {"version": 2, "managed": {"kubepods": ["kubepods"]}, **entry(outside, tree)}
    (tmp_path / "state" / "owned.json").write_text(json.dumps(record))
    before, victim = snapshot(tree), snapshot(outside)
    code, _out, err = run_cli(capsys, *command, "--cgroupfs", str(tree), *_state(tmp_path))
    assert code == 2, err
    lines = _refusal(err)
    assert lines[0].startswith("cgalloc: --state-dir: the record names cgroups outside the tree")
    assert len(lines) == 2 and lines[1].startswith("cgalloc:   ")
    assert snapshot(tree) == before and snapshot(outside) == victim


@pytest.mark.parametrize("kind", ["changed", "written"])
def test_a_bad_file_name_in_the_record_is_named_by_its_kind(tree, tmp_path, capsys, kind):
    # a written file was reported as a "changed file"
    entry = [str(tree), "kubepods", "memory.max\nx"] + (["1"] if kind == "changed" else [])
    (tmp_path / "state").mkdir()
    record = {"version": 2, "managed": {"kubepods": ["kubepods"]}, kind: [entry]}
    (tmp_path / "state" / "owned.json").write_text(json.dumps(record))
    code, _out, err = run_cli(capsys, "teardown", "--cgroupfs", str(tree), *_state(tmp_path))
    assert code == 2, err
    assert _refusal(err)[1] == f"cgalloc:   {kind} file 'memory.max\\nx' of {tree}/kubepods"


@pytest.mark.parametrize("command", READERS.values(), ids=READERS.keys())
@pytest.mark.parametrize("mount", ["\x00", "relative", "/"])
def test_a_journal_entry_outside_the_tree_is_refused_before_it_is_read(
    tree, tmp_path, capsys, command, mount
):
    # found by tests/cli/test_fuzz_cli.py::test_fuzz_state_records: verify read a journal entry's
    # file with a NUL in its mount and died with ValueError (a traceback) instead of exit 2
    (tmp_path / "state").mkdir()
    entry = {"kind": "write", "mount": mount, "path": "", "file": "memory.max", "old": "1"}
    (tmp_path / "state" / "journal.jsonl").write_text(json.dumps(entry) + "\n")
    before = snapshot(tree)
    code, _out, err = run_cli(capsys, *command, "--cgroupfs", str(tree), *_state(tmp_path))
    assert code == 2, err
    assert _refusal(err)[0].startswith("cgalloc: --state-dir: the record names cgroups outside")
    assert "Traceback" not in err and snapshot(tree) == before


# ---------------------------------------------------------------- boot reconciliation


def _wipe(base: Path, version: str) -> Path:
    """A reboot: the cgroup filesystem comes back empty, with a new boot id; this boot the
    node's own system.slice has a memory limit of its own."""
    shutil.rmtree(base / "cgroup")
    root = make_tree(base, version)  # a new boot id too
    existing_system_slice(root, version, memory=str(5 << 30))
    return root


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_setup_after_a_reboot_starts_a_new_record(tmp_path, monkeypatch, capsys, version):
    root, _ = fake_hierarchy(tmp_path, version)
    existing_system_slice(root, version)
    use_fake_tree(monkeypatch, tmp_path)
    args = [*NODE, "--cgroupfs", str(root), *_state(tmp_path)]
    code, _, err = run_cli(capsys, "setup", *args)
    assert code == 0, err
    root = _wipe(tmp_path, version)
    wiped = snapshot(root)
    code, out, err = run_cli(capsys, "verify", *args)
    assert code == 1  # the tree is gone, and verify says so (not "no longer wanted")
    assert "no longer wanted" not in out
    code, _, err = run_cli(capsys, "setup", *args)
    assert code == 0, err
    assert "is of an earlier boot" in err and "is discarded" in err
    assert (root / "kubepods").is_dir() or (root / "memory" / "kubepods").is_dir()
    code, out, _ = run_cli(capsys, "verify", *args)
    assert (code, out) == (0, "in sync: the tree matches\n")
    code, out, err = run_cli(capsys, "teardown", "--cgroupfs", str(root), *_state(tmp_path))
    assert code == 0, out + err
    # the node's 5 GiB limit of this boot is back, not the "max" recorded in the earlier boot
    assert snapshot(root) == wiped


def _setup_killed_at_change(monkeypatch, capsys, args: list[str], n: int) -> None:
    """Run setup and cut it off as change ``n`` starts: nothing after runs (no rollback, no
    record), as when the power goes or the process is killed."""
    import cgalloc.ops.apply

    perform, calls = cgalloc.ops.apply._perform, []

    def cut(*a, **kw):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return perform(*a, **kw)

    monkeypatch.setattr(cgalloc.ops.apply, "_perform", cut)
    code, _, _ = run_cli(capsys, "setup", *args)  # click turns the interrupt into "Aborted!"
    assert code == 130 and len(calls) == n
    monkeypatch.setattr(cgalloc.ops.apply, "_perform", perform)


def test_a_journal_left_by_a_run_the_reboot_interrupted_is_discarded(tmp_path, monkeypatch, capsys):

    root, _ = fake_hierarchy(tmp_path, "v2")
    existing_system_slice(root, "v2")
    use_fake_tree(monkeypatch, tmp_path)
    args = [*NODE, "--cgroupfs", str(root), *_state(tmp_path)]
    _setup_killed_at_change(monkeypatch, capsys, args, 6)
    journal = (tmp_path / "state" / "journal.jsonl").read_text().splitlines()
    assert any('"system.slice"' in line and '"old": "max"' in line for line in journal)
    root = _wipe(tmp_path, "v2")
    wiped = snapshot(root)
    code, _, err = run_cli(capsys, "setup", *args)
    assert code == 0, err
    assert not (tmp_path / "state" / "journal.jsonl").exists()
    code, out, err = run_cli(capsys, "teardown", "--cgroupfs", str(root), *_state(tmp_path))
    assert code == 0, out + err
    assert snapshot(root) == wiped


def test_a_journal_of_the_same_boot_is_a_crash_and_folded_in(tmp_path, monkeypatch, capsys):

    root, _ = fake_hierarchy(tmp_path, "v2")
    existing_system_slice(root, "v2")
    before = snapshot(root)
    use_fake_tree(monkeypatch, tmp_path)
    args = [*NODE, "--cgroupfs", str(root), *_state(tmp_path)]
    _setup_killed_at_change(monkeypatch, capsys, args, 6)
    code, out, err = run_cli(capsys, "teardown", "--cgroupfs", str(root), *_state(tmp_path))
    assert code == 0, out + err
    assert "earlier boot" not in err
    assert snapshot(root) == before  # what the killed run did was undone from its journal
