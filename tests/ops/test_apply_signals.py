"""SIGINT, SIGTERM and SIGHUP during setup's apply: the same rollback as a failed write, one
sentence on stderr and exit 128 + signo; a signal during the rollback waits for it to finish;
a signal after the last change keeps the complete, recorded setup.

The signals are real: a fake-kernel hook (the test suite's, never the tool's) sends one to this
process, or a parent sends one to a setup child. While a test runs, a tripwire stands in for the
default handlers, so a signal the tool fails to handle fails the test instead of ending pytest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import KERNEL, FakeHost, FakeKernel, fake_hierarchy, snapshot, use_fake_tree
from nodeargs import DESIRED, NODE_SYSTEM_RESERVED

import cgalloc.host.core
from cgalloc.errors import CgallocError
from cgalloc.host.core import native
from cgalloc.ops import plan
from cgalloc.ops.apply import BATCH, SIGNALS, Interrupted, Roots, SignalGuard, apply
from cgalloc.ops.state import StateDir

TESTS = Path(__file__).resolve().parents[1]
NODE = NODE_SYSTEM_RESERVED
NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


def _left(state: Path) -> list[str]:
    """What the state directory holds: no journal and no record after a complete rollback (the
    directory itself may go too when this run made it)."""
    return sorted(os.listdir(state)) if state.exists() else []


class Escaped(BaseException):
    """A signal reached the handler that was in place before setup (the tool missed it)."""


@pytest.fixture(autouse=True)
def tripwire():
    """Handlers for SIGNALS that raise Escaped, restored afterwards; yields the handler."""

    def escaped(signo, _frame):
        raise Escaped(signo)

    previous = {s: signal.signal(s, escaped) for s in SIGNALS}
    try:
        yield escaped
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class SignallingKernel(FakeKernel):
    """The fake kernel, sending ``signo`` to this process once change ``at`` is made (a mkdir
    or a write), then ``later`` one by one at each kernel call after it (the rollback's)."""

    def __init__(self, signo: int, at: int, later: tuple[int, ...] = (), on_rmdir: bool = False):
        self.signo, self.at, self.later, self.on_rmdir = signo, at, list(later), on_rmdir
        self.changes = 0
        self.after_fired: list[str] = []  # the kernel calls made after the signal

    def _changed(self) -> None:
        self.changes += 1
        if self.changes == self.at:
            os.kill(os.getpid(), self.signo)
            self.after_fired.append("fired")

    def _after(self, what: str) -> None:
        if self.after_fired:
            self.after_fired.append(what)
            if self.later:
                os.kill(os.getpid(), self.later.pop(0))

    def after_mkdir(self, mount, path):
        super().after_mkdir(mount, path)
        self._changed()

    def on_write(self, mount, relpath, value):
        self._after(f"write {relpath}")
        return super().on_write(mount, relpath, value)

    def after_write(self, mount, relpath):
        super().after_write(mount, relpath)
        if self.after_fired and self.changes >= self.at:
            return  # a rollback write: not a change of the plan
        self._changed()

    def before_rmdir(self, mount, path):
        if self.on_rmdir and not self.after_fired:
            os.kill(os.getpid(), self.signo)
            self.after_fired.append("fired")
        else:
            self._after(f"rmdir {path}")
        super().before_rmdir(mount, path)


def _prepared(base: Path, version: str):
    """A fake tree with a pre-existing system.slice, so rollback restores values too."""
    root, h = fake_hierarchy(base, version)
    if version == "v2":
        (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    mounts = [root] if version == "v2" else [d for d in root.iterdir() if d.is_dir()]
    for mount in mounts:
        (mount / "system.slice").mkdir()
        KERNEL.after_mkdir(str(mount), "system.slice")
    return root, h


def _apply(base: Path, h, kernel, **kw):
    state = StateDir(str(base / "state"))
    with state.locked():
        p = plan.build(h, DESIRED)
        return apply(p, state, state.load(), host=FakeHost(kernel=kernel), **kw)


def _total(base: Path, version: str) -> int:
    return len(plan.build(_prepared(base, version)[1], DESIRED).actions)


# ------------------------------------------------------------------ apply, in this process


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("signo", list(NAMES))
def test_signal_midway_undoes_every_change(tmp_path, tripwire, version, signo):
    total = _total(tmp_path / "count", version)
    assert total > 10
    for at in (1, total // 2, total - 1):
        base = tmp_path / f"at{at}"
        root, h = _prepared(base, version)
        before = snapshot(root)
        with pytest.raises(Interrupted) as info:
            _apply(base, h, SignallingKernel(signo, at))
        assert str(info.value) == (
            f"setup interrupted by {NAMES[signo]}; all {at} earlier changes were undone, "
            "the node is as it was."
        )
        assert info.value.exit_code == 128 + signo
        assert snapshot(root) == before, f"tree differs after {NAMES[signo]} at change {at}"
        assert _left(base / "state") in ([], ["lock"])  # journal gone, no record
        assert all(signal.getsignal(s) is tripwire for s in SIGNALS)  # handlers put back


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_signals_during_the_rollback_wait_for_it(tmp_path, version):
    total = _total(tmp_path / "count", version)
    root, h = _prepared(tmp_path, version)
    before = snapshot(root)
    at = total - 2
    kernel = SignallingKernel(signal.SIGTERM, at, later=(signal.SIGINT, signal.SIGHUP))
    with pytest.raises(Interrupted) as info:  # Escaped when a later signal cut the rollback
        _apply(tmp_path, h, kernel)
    assert kernel.later == [] and len(kernel.after_fired) > 3  # both came during the rollback
    assert info.value.exit_code == 143  # the first signal is the one answered
    assert str(info.value).endswith(f"all {at} earlier changes were undone, the node is as it was.")
    assert snapshot(root) == before
    assert _left(tmp_path / "state") in ([], ["lock"])


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_signal_after_the_last_change_keeps_the_setup(tmp_path, version):
    total = _total(tmp_path / "count", version)
    root, h = _prepared(tmp_path, version)
    before = snapshot(root)
    kernel = SignallingKernel(signal.SIGTERM, total)
    # apply without a caller's guard: the setup completes and is recorded, then the signal
    # goes to the handler that was there before (the tripwire), as if it came just after
    with pytest.raises(Escaped) as info:
        _apply(tmp_path, h, kernel)
    assert info.value.args == (signal.SIGTERM,)
    assert kernel.after_fired == ["fired"]  # nothing undone
    assert snapshot(root) != before
    assert sorted(os.listdir(tmp_path / "state")) == ["lock", "owned.json"]
    again = _apply(tmp_path, h, KERNEL)
    assert again.writes == 0  # the tree is the complete setup


def test_a_failed_rollback_keeps_the_record_and_says_so(tmp_path):
    root, h = _prepared(tmp_path, "v2")

    class Stuck(SignallingKernel):
        def before_rmdir(self, mount, path):
            super().before_rmdir(mount, path)
            if path == "kubepods":
                raise OSError(16, "Device or resource busy")

    with pytest.raises(Interrupted) as info:
        _apply(tmp_path, h, Stuck(signal.SIGHUP, 6))
    lines = str(info.value).splitlines()
    assert lines[:2] == ["setup interrupted by SIGHUP", "rollback was incomplete; still changed:"]
    assert lines[-1] == "the record of what cgalloc changed keeps these for teardown."
    assert info.value.exit_code == 129
    assert (root / "kubepods").is_dir()
    assert (tmp_path / "state" / "owned.json").exists()


def test_batched_apply_acts_on_a_signal_after_the_batch(tmp_path, monkeypatch):
    # progress lines: the changes go to the core BATCH at a time; a signal arriving just as a
    # batch's call returns is acted on before the next, and what it made is undone too
    root = tmp_path / "cg"
    (root / "kubepods").mkdir(parents=True)
    pods = BATCH + 44
    actions = [
        plan.Action("mkdir", str(root), f"kubepods/pod{i}", cgroup=f"kubepods/pod{i}")
        for i in range(pods)
    ]
    p = plan.Plan(root=str(root), version="v2", actions=actions)
    calls = []

    def apply_ops(ops, stop=None):
        calls.append(len(ops))
        made = native.apply_ops(ops, stop)
        os.kill(os.getpid(), signal.SIGTERM)  # as if it came while the C call ran
        return made

    monkeypatch.setattr(cgalloc.host.core, "apply_ops", apply_ops)
    before = snapshot(root)
    state = StateDir(str(tmp_path / "state"))
    with state.locked(), pytest.raises(Interrupted) as info:
        apply(
            p, state, state.load(), host=FakeHost(),
            roots=Roots(lambda m: native.open_root(m, allow_any_fs=True)), on_done=[].append,
        )  # fmt: skip
    assert calls == [BATCH]  # the second batch was never started
    assert str(info.value).endswith(
        f"all {BATCH} earlier changes were undone, the node is as it was."
    )
    assert snapshot(root) == before
    assert _left(tmp_path / "state") in ([], ["lock"])


class Raised(BaseException):
    """What a library caller's own signal handler might raise in apply's thread."""


def test_guard_only_in_the_main_thread_and_not_over_an_ignored_signal(tripwire):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    with SignalGuard() as guard:
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == guard._record
        os.kill(os.getpid(), signal.SIGHUP)  # ignored: not recorded
        os.kill(os.getpid(), signal.SIGTERM)
    assert guard.received == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is tripwire
    seen = []

    def in_thread():
        with SignalGuard():  # signal.signal would raise ValueError here
            seen.append(signal.getsignal(signal.SIGTERM))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert seen == [tripwire]


def test_a_failed_write_still_exits_1(tmp_path):
    root, h = _prepared(tmp_path, "v2")
    (root / "system.slice" / "memory.max").unlink()
    with pytest.raises(CgallocError) as info:
        _apply(tmp_path, h, KERNEL)
    assert type(info.value) is CgallocError and info.value.exit_code == 1


# ------------------------------------------------------------------ the command line


def _cli_args(base: Path, *more: str) -> list[str]:
    return [*more, "--cgroupfs", str(base / "cgroup"), "--state-dir", str(base / "state")]


def _planned(capsys, base: Path, *more: str) -> dict:
    code, out, err = run_cli(
        capsys, "setup", *_cli_args(base, *NODE, *more, "--dry-run", "-o", "json")
    )
    assert code == 0, err
    return json.loads(out)["plan"]


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("signo", list(NAMES))
def test_setup_command_exits_128_plus_signo(tmp_path, monkeypatch, capsys, version, signo):
    root, _ = fake_hierarchy(tmp_path, version)
    use_fake_tree(monkeypatch, tmp_path)
    total = len(_planned(capsys, tmp_path)["actions"])
    before = snapshot(root)
    use_fake_tree(monkeypatch, tmp_path, SignallingKernel(signo, total // 2))
    code, _out, err = run_cli(capsys, "setup", *_cli_args(tmp_path, *NODE))
    assert code == 128 + signo
    assert err.splitlines()[-1] == (
        f"cgalloc: setup interrupted by {NAMES[signo]}; all {total // 2} earlier changes were "
        "undone, the node is as it was."
    )
    assert snapshot(root) == before
    assert _left(tmp_path / "state") in ([], ["lock"])


def test_setup_command_signal_after_the_last_change(tmp_path, monkeypatch, capsys):
    fake_hierarchy(tmp_path, "v2")
    use_fake_tree(monkeypatch, tmp_path)
    total = len(_planned(capsys, tmp_path)["actions"])
    use_fake_tree(monkeypatch, tmp_path, SignallingKernel(signal.SIGINT, total))
    code, out, err = run_cli(capsys, "setup", *_cli_args(tmp_path, *NODE))
    assert code == 130
    assert out.strip().endswith(f"applied {total} changes")
    assert err.splitlines()[-1] == (
        f"cgalloc: setup interrupted by SIGINT after its last change; all {total} changes are "
        "made and recorded, the tree is as planned."
    )
    use_fake_tree(monkeypatch, tmp_path)
    code, out, err = run_cli(capsys, "verify", *_cli_args(tmp_path, *NODE)[:-2])
    assert code == 0, out + err


def _pods_file(base: Path, *uids: str) -> str:
    items = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": u, "uid": u},
         "spec": {"containers": [{"name": "c", "resources": {}}]}}
        for u in uids
    ]  # fmt: skip
    path = base / f"pods-{'-'.join(uids)}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_signal_during_converge_leaves_the_rest_recorded(tmp_path, monkeypatch, capsys, version):
    fake_hierarchy(tmp_path, version)
    use_fake_tree(monkeypatch, tmp_path)
    first = _cli_args(tmp_path, *NODE, "--pods", _pods_file(tmp_path, "a", "b", "c"))
    code, _out, err = run_cli(capsys, "setup", *first)
    assert code == 0, err
    fewer = ["--pods", _pods_file(tmp_path, "a")]
    undo = len(_planned(capsys, tmp_path, *fewer)["undo"])
    assert undo >= 2
    use_fake_tree(monkeypatch, tmp_path, SignallingKernel(signal.SIGTERM, 0, on_rmdir=True))
    code, _out, err = run_cli(capsys, "setup", *_cli_args(tmp_path, *NODE, *fewer))
    assert code == 143, err
    assert err.splitlines()[-1] == (
        "cgalloc: setup interrupted by SIGTERM; it had no change to make; undoing what is no "
        f"longer wanted stopped with {undo - 1} changes left, which the next setup makes "
        "(verify lists them)."
    )
    use_fake_tree(monkeypatch, tmp_path)
    verify = _cli_args(tmp_path, *NODE, *fewer)
    assert run_cli(capsys, "verify", *verify)[0] == 1
    code, _out, err = run_cli(capsys, "setup", *verify)
    assert code == 0, err
    assert run_cli(capsys, "verify", *verify)[0] == 0


DRIVER = """
import os, signal, sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
import fakecgroup
import cgalloc.ops.apply
from cgalloc.cli import main

class Waiting(fakecgroup.FakeKernel):
    changes = 0
    def _changed(self):
        self.changes += 1
        if self.changes == {at}:
            # the guard setup installed; wait (up to 60 s) until its handler recorded a signal
            guard = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
            print("cgalloc-test: waiting", file=sys.stderr, flush=True)
            deadline = time.monotonic() + 60
            while guard is not None and not guard.received and time.monotonic() < deadline:
                time.sleep(0.01)
    def after_mkdir(self, mount, path):
        super().after_mkdir(mount, path)
        self._changed()
    def after_write(self, mount, relpath):
        super().after_write(mount, relpath)
        self._changed()

main(sys.argv[1:], fakecgroup.fake_host(Path({base!r}), Waiting()))
"""


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_signal_from_another_process(tmp_path, signo):
    root, _ = fake_hierarchy(tmp_path, "v1")
    before = snapshot(root)
    code = DRIVER.format(tests=str(TESTS), at=3, base=str(tmp_path))
    args = [sys.executable, "-c", code, "setup", *_cli_args(tmp_path, *NODE)]
    # a shell starts a background job with SIGINT ignored: the child gets the default back
    proc = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        for line in proc.stderr:
            if line.startswith("cgalloc-test: waiting"):
                break
        proc.send_signal(signo)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signo, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert err.splitlines()[-1] == (
        f"cgalloc: setup interrupted by {NAMES[signo]}; all 3 earlier changes were undone, "
        "the node is as it was."
    )
    assert snapshot(root) == before
    assert _left(tmp_path / "state") in ([], ["lock"])


def test_progress_to_a_hung_up_terminal_does_not_stop_the_rollback(tmp_path):
    # after SIGHUP the terminal is gone: a progress line fails with EIO, which must not end
    # apply between a change and its rollback
    root, h = _prepared(tmp_path, "v2")
    before = snapshot(root)
    lines = []

    def progress(a):
        if lines:
            raise OSError(5, "Input/output error")
        lines.append(a)

    with pytest.raises(Interrupted) as info:
        _apply(tmp_path, h, SignallingKernel(signal.SIGHUP, 4), on_done=progress)
    assert info.value.exit_code == 129 and len(lines) == 1
    assert snapshot(root) == before
