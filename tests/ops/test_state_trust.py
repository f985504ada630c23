"""The state directory as a hostile local user would leave it (issue 35): a directory or parent
another user owns or may write, a planted symlink at any state file name, a regular file given
as --state-dir, a record naming cgroups setup does not manage, a record root alone may read.
Each is refused the same way by every command that reads the state directory, before anything
is written anywhere (tree, record, journal); an unreadable record is exit 3, never "nothing to
undo"."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import existing_system_slice, fake_hierarchy, snapshot, use_fake_tree
from nodeargs import NODE_SYSTEM_RESERVED

NODE = NODE_SYSTEM_RESERVED
NOBODY = 65534
STATE_NAMES = ("lock", "owned.json", "owned.json.tmp", "journal.jsonl", "systemd.json",
               "systemd.json.tmp")  # fmt: skip
# every command that reads the state directory, as a user runs it
COMMANDS = {
    "setup": ["setup", *NODE],
    "setup-dry-run": ["setup", *NODE, "--dry-run"],
    "verify": ["verify", *NODE],
    "teardown": ["teardown"],
    "teardown-dry-run": ["teardown", "--dry-run"],
}

# what every refusal of the directory asks for, and of a state file name
FORM = (
    "give a directory only root can change: owned by root and not writable by its group or "
    "others, as every directory above it up to / (a sticky one such as /tmp excepted), such "
    "as /var/lib/cgalloc."
)
PLANTED = (
    "cgalloc's state files are regular files only root can write, opened without following "
    "links, so it changed nothing: move it aside and run again."
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")
pytestmark = pytest.mark.usefixtures("no_hang")  # a planted FIFO must not block a run


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root, _ = fake_hierarchy(tmp_path, "v2")
    existing_system_slice(root, "v2")
    use_fake_tree(monkeypatch, tmp_path)
    return root


def _run(capsys, command: list[str], root: Path, state: Path) -> tuple[int, str, str]:
    return run_cli(capsys, *command, "--cgroupfs", str(root), "--state-dir", str(state))


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if not line.startswith("cgalloc: warning:")]


def _everything(*dirs: Path) -> dict:
    return {str(d): snapshot(d) if d.is_dir() else None for d in dirs}


# ---------------------------------------------------------------- whose directory


@needs_root
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
@pytest.mark.parametrize(
    ("where", "change", "problem"),
    [
        ("state", lambda p: os.chown(p, NOBODY, -1), "is owned by uid 65534, not by root"),
        ("parent", lambda p: os.chown(p, NOBODY, -1), "is owned by uid 65534, not by root"),
        ("state", lambda p: os.chmod(p, 0o770), "is writable by its group (mode 0770)"),
        ("parent", lambda p: os.chmod(p, 0o757), "is writable by others (mode 0757)"),
        # sticky is no excuse for the directory itself: anyone may add files to it
        ("state", lambda p: os.chmod(p, 0o1777), "is writable by its group and others (mode 1777)"),
    ],
    ids=["state-owner", "parent-owner", "state-group", "parent-others", "state-sticky"],
)
def test_a_state_dir_others_can_change_is_refused_by_every_command(
    tree, tmp_path, capsys, command, where, change, problem
):
    state = tmp_path / "parent" / "state"
    state.mkdir(parents=True, mode=0o700)
    change(state if where == "state" else state.parent)
    before = _everything(tree, tmp_path / "parent")
    code, out, err = _run(capsys, command, tree, state)
    bad = state if where == "state" else state.parent
    assert (code, out) == (2, ""), err
    assert _errors(err) == [f"cgalloc: --state-dir {state}: {bad} {problem}; {FORM}"]
    assert _everything(tree, tmp_path / "parent") == before  # not even the record or the lock


@needs_root
def test_a_missing_state_dir_below_a_foreign_parent_is_not_made(tree, tmp_path, capsys):
    parent = tmp_path / "theirs"
    parent.mkdir()
    os.chown(parent, NOBODY, -1)
    code, _, err = _run(capsys, COMMANDS["setup"], tree, parent / "state")
    assert code == 2 and f"{parent} is owned by uid 65534" in err, err
    assert list(parent.iterdir()) == []


def test_a_sticky_parent_such_as_tmp_is_trusted(tree, tmp_path, capsys):
    # /tmp itself is a sticky directory others may write: only an entry's owner may replace
    # it there, so a root-owned state directory below it is safe
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    code, _, err = _run(capsys, COMMANDS["setup"], tree, sticky / "state")
    assert code == 0, err
    assert (sticky / "state" / "owned.json").is_file()
    assert os.stat(sticky / "state").st_mode & 0o7777 == 0o700


@needs_root
def test_a_symlinked_state_dir_is_checked_where_it_leads(tree, tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, -1)
    (tmp_path / "link").symlink_to(theirs)
    code, _, err = _run(capsys, COMMANDS["setup"], tree, tmp_path / "link" / "state")
    assert code == 2 and f"{theirs} is owned by uid 65534" in err, err
    assert list(theirs.iterdir()) == []


def test_state_dirs_made_with_any_umask_are_root_only(tree, tmp_path, capsys):
    old = os.umask(0)
    try:
        code, _, err = _run(capsys, COMMANDS["setup"], tree, tmp_path / "a" / "b" / "state")
    finally:
        os.umask(old)
    assert code == 0, err
    modes = [os.stat(tmp_path / p).st_mode & 0o7777 for p in ("a", "a/b", "a/b/state")]
    assert modes == [0o755, 0o755, 0o700]
    files = {p.name: p.stat().st_mode & 0o7777 for p in (tmp_path / "a/b/state").iterdir()}
    assert files == {"lock": 0o600, "owned.json": 0o600}


# ---------------------------------------------------------------- planted names


@pytest.mark.parametrize("name", STATE_NAMES)
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_planted_symlink_at_a_state_name_is_refused_and_its_target_untouched(
    tree, tmp_path, capsys, name, command
):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (state / name).symlink_to(victim)
    before = _everything(tree, state)
    code, out, err = _run(capsys, command, tree, state)
    assert (code, out) == (2, ""), err
    assert _errors(err) == [
        f"cgalloc: --state-dir {state}: {name} cannot be used: it is a symbolic link; {PLANTED}"
    ]
    assert victim.read_text() == "precious\n"
    assert _everything(tree, state) == before


@pytest.mark.parametrize(
    ("plant", "what"),
    [
        (lambda p, victim: os.link(victim, p), "it has 2 hard links"),
        (lambda p, victim: os.mkfifo(p), "it is not a regular file"),
        (lambda p, victim: os.mkdir(p), "it is a directory"),
        (
            lambda p, victim: (p.write_text("{}"), os.chmod(p, 0o666)),
            "it is writable by its group and others",
        ),
    ],
    ids=["hard-link", "fifo", "directory", "world-writable"],
)
def test_other_planted_entries_are_refused_too(tree, tmp_path, capsys, plant, what):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    plant(state / "owned.json.tmp", victim)
    code, _, err = _run(capsys, COMMANDS["setup"], tree, state)
    assert code == 2 and f"owned.json.tmp cannot be used: {what}" in err, err
    assert victim.read_text() == "precious\n"


def test_a_temporary_a_killed_run_left_is_replaced(tree, tmp_path, capsys):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "owned.json.tmp").write_text("half a record")
    os.chmod(state / "owned.json.tmp", 0o600)
    code, _, err = _run(capsys, COMMANDS["setup"], tree, state)
    assert code == 0, err
    assert sorted(p.name for p in state.iterdir()) == ["lock", "owned.json"]


# ---------------------------------------------------------------- one check for every command


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_regular_file_as_state_dir_is_refused_by_every_command(tree, tmp_path, capsys, command):
    state = tmp_path / "state"
    state.write_text("not a directory\n")
    before = _everything(tree)
    code, out, err = _run(capsys, command, tree, state)
    assert (code, out) == (2, ""), err
    assert _errors(err) == [f"cgalloc: --state-dir {state}: {state} is not a directory; {FORM}"]
    assert state.read_text() == "not a directory\n" and _everything(tree) == before


# ---------------------------------------------------------------- what the record may name


def _tamper(state: Path, key: str, row: list) -> None:
    record = json.loads((state / "owned.json").read_text())
    record[key] = [*record.get(key, []), row]
    (state / "owned.json").write_text(json.dumps(record))


FOREIGN = {
    # a cgroup below a reserved one: setup manages system.slice alone, never what is in it
    "created-in-reserved": ("created", lambda root: [str(root), "system.slice/sshd.service"]),
    # a cgroup beside the tree
    "created-beside": ("created", lambda root: [str(root), "user.slice"]),
    # a value in a cgroup the inputs never named
    "changed-beside": ("changed", lambda root: [str(root), "user.slice", "memory.max", "1"]),
    # a value in the root cgroup's parent of a reserved cgroup: setup changes none there
    "changed-root": ("changed", lambda root: [str(root), "", "memory.max", "1"]),
}


@pytest.mark.parametrize("entry", FOREIGN.values(), ids=FOREIGN.keys())
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_record_entry_outside_the_managed_cgroups_is_refused_before_any_change(
    tree, tmp_path, capsys, entry, command
):
    state = tmp_path / "state"
    code, _, err = _run(capsys, COMMANDS["setup"], tree, state)
    assert code == 0, err
    for name in ("system.slice/sshd.service", "user.slice"):
        (tree / name).mkdir()
        (tree / name / "cgroup.procs").write_text("")
        (tree / name / "memory.max").write_text("max\n")
    key, row = entry
    _tamper(state, key, row(tree))
    before = _everything(tree, state)
    code, _, err = _run(capsys, command, tree, state)
    assert code == 2, err
    lines = _errors(err)
    assert lines[0].startswith("cgalloc: --state-dir: the record names cgroups outside the tree")
    assert "(kubepods /kubepods, reserved /system.slice)" in lines[0]
    assert len(lines) == 2 and lines[1].startswith(f"cgalloc:   {key} {tree}/")
    assert _everything(tree, state) == before


def test_the_record_names_the_cgroups_its_inputs_manage(tree, tmp_path, capsys):
    state = tmp_path / "state"
    assert _run(capsys, COMMANDS["setup"], tree, state)[0] == 0
    record = json.loads((state / "owned.json").read_text())
    assert record["version"] == 2
    assert record["managed"] == {"kubepods": ["kubepods"], "reserved": ["system.slice"]}


# ---------------------------------------------------------------- a refused run writes nothing


@pytest.mark.parametrize("pending", ["journal", "earlier-boot"])
def test_a_run_refused_after_loading_the_record_writes_nothing(
    tree, tmp_path, capsys, monkeypatch, pending
):
    # loading folded a killed run's journal into the record, and discarded an earlier boot's
    # record, on disk, before the refusal that followed
    state = tmp_path / "state"
    code, _, err = _run(capsys, COMMANDS["setup"], tree, state)
    assert code == 0, err
    if pending == "journal":
        entry = {"kind": "mkdir", "mount": str(tree), "path": "kubepods/guaranteed-x"}
        (state / "journal.jsonl").write_text(json.dumps(entry) + "\n")
    else:
        (tmp_path / "boot_id").write_text("another-boot\n")
    before = _everything(tree, state)
    bad = [*NODE, "--kube-reserved", "cpu=lots"]
    code, _, err = _run(capsys, ["setup", *bad], tree, state)
    assert code == 2 and "--kube-reserved" in err, err
    assert _everything(tree, state) == before
    # a refusal of the plan itself (the reserved cgroup placed in kubepods) writes nothing too
    code, _, err = _run(capsys, ["setup", *NODE[:-1], "/kubepods/system.slice"], tree, state)
    assert code == 2, err
    assert _everything(tree, state) == before


# ---------------------------------------------------------------- without privileges


@contextlib.contextmanager
def _unprivileged():
    """Run as nobody (real and effective ids) with root's saved id, to come back."""
    groups = os.getgroups()
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, 0)
    os.setresuid(NOBODY, NOBODY, 0)
    try:
        yield
    finally:
        os.setresuid(0, 0, 0)
        os.setresgid(0, 0, 0)
        os.setgroups(groups)


@pytest.fixture
def public_base(monkeypatch):
    """A base directory nobody may read (pytest's own is root's, mode 0700)."""
    base = Path(tempfile.mkdtemp(prefix="cgalloc-unpriv-"))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


def _set_up_readable_tree(base: Path, monkeypatch, capsys) -> tuple[Path, Path]:
    """A fake tree every user may read below ``base``, set up by root: (its root, state dir)."""
    root, _ = fake_hierarchy(base, "v2")
    use_fake_tree(monkeypatch, base)
    for dirpath, _dirs, _files in os.walk(base):
        os.chmod(dirpath, 0o755)
    state = base / "state"
    assert _run(capsys, COMMANDS["setup"], root, state)[0] == 0
    return root, state


UNPRIVILEGED = {
    "setup-dry-run": (["setup", *NODE, "--dry-run"], "plan"),
    "verify": (["verify", *NODE], "drift"),
    "teardown-dry-run": (["teardown", "--dry-run"], "undo"),
}


@needs_root
@pytest.mark.parametrize("mode", [0o700, 0o755], ids=["dir-root-only", "record-root-only"])
@pytest.mark.parametrize("command", UNPRIVILEGED.values(), ids=UNPRIVILEGED.keys())
def test_a_record_only_root_may_read_is_an_error_not_nothing_to_undo(
    public_base, monkeypatch, capsys, command, mode
):
    root, state = _set_up_readable_tree(public_base, monkeypatch, capsys)
    os.chmod(state, mode)  # the record itself is 0600, as setup writes it
    with _unprivileged():
        code, out, err = _run(capsys, command[0], root, state)
    assert (code, out) == (3, ""), out + err
    where = state if mode == 0o700 else state / "owned.json"
    assert _errors(err) == [
        f"cgalloc: cannot read {where} (--state-dir {state}): permission denied; what setup "
        "recorded there is readable by root only: run this command as root."
    ]


@needs_root
def test_verify_without_privileges_reads_a_readable_record(public_base, monkeypatch, capsys):
    root, state = _set_up_readable_tree(public_base, monkeypatch, capsys)
    os.chmod(state, 0o755)
    os.chmod(state / "owned.json", 0o644)
    with _unprivileged():
        code, out, err = _run(capsys, COMMANDS["verify"], root, state)
    assert (code, out) == (0, "in sync: the tree matches\n"), err


# ---------------------------------------------------------------- the systemd record


class _Recorder:
    """Stands in for systemd over D-Bus: records every call, changes nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def unit_path(self, name):
        return f"/org/freedesktop/systemd1/unit/{name}"

    def set_properties(self, name, props):
        self.calls.append(("set", name))

    def stop_unit(self, name):
        self.calls.append(("stop", name))


@pytest.mark.parametrize(
    "units",
    [
        {"started": ["user.slice"]},
        {"started": ["system-getty.slice"]},  # inside system.slice, which is managed alone
        {"changed": {"sshd.service": {"MemoryMax": ["t", 1]}}},
        {"changed": {"user.slice": {"CPUWeight": ["t", 100]}}},
    ],
    ids=["started-beside", "started-in-reserved", "changed-service", "changed-slice"],
)
def test_teardown_refuses_a_systemd_record_naming_a_foreign_unit_before_any_change(
    tree, tmp_path, capsys, monkeypatch, units
):
    import clirun

    from cgalloc.errors import InputError
    from cgalloc.ops.apply import teardown
    from cgalloc.ops.state import StateDir

    state_dir = tmp_path / "state"
    assert _run(capsys, COMMANDS["setup"], tree, state_dir)[0] == 0
    (state_dir / "systemd.json").write_text(json.dumps({"started": [], "changed": {}, **units}))
    os.chmod(state_dir / "systemd.json", 0o600)
    before = _everything(tree, state_dir)
    client = _Recorder()
    state = StateDir(str(state_dir), clirun.HOST.boot_id())
    refusal = "the record names cgroups outside the tree"
    with pytest.raises(InputError, match=refusal), state.locked(create=False):
        teardown(str(tree), state, state.load(), host=clirun.HOST, systemd=client)
    assert client.calls == []
    assert _everything(tree, state_dir) == before


@pytest.mark.parametrize("dry_run", [False, True], ids=["setup", "setup-dry-run"])
def test_setup_refuses_a_systemd_record_naming_a_foreign_unit_before_any_change(
    tree, tmp_path, capsys, monkeypatch, dry_run
):
    # setup under systemd as PID 1 loads the systemd record to converge it: refused like
    # teardown's, before a unit is started or a property set (issue 35)
    import cgalloc.host.dbus
    import cgalloc.ops.setup

    state_dir = tmp_path / "state"
    assert _run(capsys, COMMANDS["setup"], tree, state_dir)[0] == 0
    units = {"started": ["user.slice"], "changed": {}}
    (state_dir / "systemd.json").write_text(json.dumps(units))
    os.chmod(state_dir / "systemd.json", 0o600)
    client = _Recorder()
    monkeypatch.setattr(cgalloc.ops.setup.TreeOptions, "unit_properties", lambda *_a: True)
    monkeypatch.setattr(cgalloc.host.dbus, "Systemd", lambda: client)  # setup imports it late
    before = _everything(tree, state_dir)
    # other reservations than the first run's: there are changes to make, none is made
    changed = [a.replace("cpu=500m,memory=1Gi", "cpu=600m,memory=1Gi") for a in NODE]
    command = ["setup", *changed, *(["--dry-run"] if dry_run else [])]
    code, out, err = _run(capsys, command, tree, state_dir)
    assert code == 2, out + err
    lines = _errors(err)
    assert lines[0].startswith("cgalloc: --state-dir: the record names cgroups outside the tree")
    assert any("user.slice" in line for line in lines[1:]), lines
    assert client.calls == []
    assert _everything(tree, state_dir) == before
