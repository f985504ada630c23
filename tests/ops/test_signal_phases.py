"""A signal at each phase of setup never ends it with exit 0 (issue 35, "A signal is never
lost"): Ctrl-C, SIGTERM or SIGHUP while the pod files are read, the hierarchy is detected, the
state directory is locked, the record loaded, the journal written, the cgroups changed or the
record saved. Each run ends 128 + signo; where changes were made before the last one, every
one is undone and nothing is left recorded; a signal after the last change keeps the complete,
recorded setup (verify finds it whole), as tests/ops/test_apply_signals.py says of apply.

Each case runs ``cgalloc setup`` in a child process with the default signal dispositions the
CLI takes over (cgalloc.cli.main installs its handlers only over the defaults; this suite's
tripwires would hide them), on a fake cgroup tree (tests/fakecgroup.py). The child sends the
signal to itself from inside the phase, so it arrives exactly there, in process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import fake_hierarchy, snapshot, use_fake_tree
from nodeargs import NODE_SYSTEM_RESERVED

TESTS = Path(__file__).resolve().parents[1]
RECORDED = {"owned.json", "journal.jsonl", "systemd.json"}

CHILD = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
import fakecgroup
import cgalloc.inputs.pods, cgalloc.ops.setup, cgalloc.ops.state
from cgalloc.cli import main

SIGNO, PHASE = {signo}, {phase!r}
fired = []


def fire():
    if not fired:
        fired.append(PHASE)
        print("cgalloc-test: fired", file=sys.stderr, flush=True)
        os.kill(os.getpid(), SIGNO)


def at(owner, name):
    real = getattr(owner, name)

    def wrapped(*args, **kwargs):
        fire()
        return real(*args, **kwargs)

    setattr(owner, name, wrapped)


class Kernel(fakecgroup.FakeKernel):
    changes = 0

    def after_mkdir(self, mount, path):
        super().after_mkdir(mount, path)
        self.changed()

    def after_write(self, mount, relpath):
        super().after_write(mount, relpath)
        self.changed()

    def changed(self):
        self.changes += 1
        if PHASE == "change" and self.changes == 3:
            fire()


if PHASE == "pods":
    at(cgalloc.inputs.pods, "read_bounded")
elif PHASE == "hierarchy":
    at(cgalloc.ops.setup, "detect")
elif PHASE == "lock":
    at(cgalloc.ops.state.StateDir, "locked")
elif PHASE == "load":
    at(cgalloc.ops.state.StateDir, "load")
elif PHASE == "journal":
    at(cgalloc.ops.state.StateDir, "journal")
elif PHASE == "save":
    at(cgalloc.ops.state.StateDir, "save")
main(sys.argv[1:], fakecgroup.fake_host(Path({base!r}), Kernel()))
"""

# phase -> the signal sent there (every signal at least twice)
PHASES = {
    "pods": signal.SIGINT,
    "hierarchy": signal.SIGTERM,
    "lock": signal.SIGHUP,
    "load": signal.SIGINT,
    "journal": signal.SIGTERM,
    "change": signal.SIGHUP,
    "save": signal.SIGINT,
}


def _pods(base: Path) -> str:
    items = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": u, "uid": u},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}
        for u in ("a", "b")
    ]  # fmt: skip
    path = base / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def _args(base: Path) -> list[str]:
    return [
        *NODE_SYSTEM_RESERVED, "--pods", str(base / "pods.json"),
        "--cgroupfs", str(base / "cgroup"), "--state-dir", str(base / "state"),
    ]  # fmt: skip


def _setup_child(base: Path, phase: str, signo: int) -> subprocess.CompletedProcess:
    code = CHILD.format(tests=str(TESTS), signo=int(signo), phase=phase, base=str(base))
    return subprocess.run(
        [sys.executable, "-c", code, "setup", *_args(base)],
        capture_output=True, text=True, timeout=120,
        # the defaults a shell gives a foreground command (pytest may ignore some)
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in PHASES.values()],
    )  # fmt: skip


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_signal_at_each_phase_of_setup_is_never_exit_0(tmp_path, monkeypatch, capsys, phase):
    signo = PHASES[phase]
    root, _ = fake_hierarchy(tmp_path, "v2")
    _pods(tmp_path)
    before = snapshot(root)
    done = _setup_child(tmp_path, phase, signo)
    assert "cgalloc-test: fired" in done.stderr, done.stderr  # the phase was reached
    assert done.returncode == 128 + signo, done.stderr
    name = signal.Signals(signo).name
    last = done.stderr.splitlines()[-1]
    assert last.startswith("cgalloc: ") and f"interrupted by {name}" in last, done.stderr
    state = tmp_path / "state"
    left = set(os.listdir(state)) if state.exists() else set()
    if phase == "save":
        # after the last change: the complete setup stays, recorded, and says so
        assert "all" in last and "made and recorded" in last, last
        use_fake_tree(monkeypatch, tmp_path)
        code, out, err = run_cli(capsys, "verify", *_args(tmp_path))
        assert code == 0, out + err
        assert "owned.json" in left and "journal.jsonl" not in left
    else:
        assert snapshot(root) == before, phase
        assert not left & RECORDED, left
