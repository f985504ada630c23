"""Ctrl-C anywhere outside setup's changes (a read, planning, a lock wait, a report) is one
sentence and exit 130, as a shell reports SIGINT; click's own answer was "Aborted!" and exit 1,
the status docs/reference.md keeps for a failed, rolled-back operation."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from fakecgroup import fake_hierarchy

from cgalloc.errors import Interrupted
from cgalloc.ops.apply import Result
from cgalloc.ops.plan import Plan
from cgalloc.ops.setup import Setup, late_signal

CAP = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]


def test_ctrl_c_during_stats_watch_is_130_and_one_sentence(tmp_path):
    root, _ = fake_hierarchy(tmp_path, "v2")
    argv = ["stats", *CAP, "--cgroupfs", str(root), "--watch", "0.2", "-o", "json"]
    code = f"from cgalloc.cli import main; main({argv!r})"
    # as from a terminal: a shell script's background job (CI's, say) would pass SIGINT ignored
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # the first sample is out: the command is in its loop
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.endswith("\ncgalloc: interrupted by SIGINT; nothing was left half-done.\n")
    assert "Traceback" not in err and "Aborted" not in err


def test_main_leaves_a_callers_own_handlers_and_ignored_signals_alone():
    from cgalloc.cli import _signals_as_errors

    def mine(signo, frame):
        raise AssertionError("not called")

    old = signal.signal(signal.SIGINT, mine)
    hup = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    try:
        previous = _signals_as_errors()  # installed over SIGTERM's default only
        assert set(previous) == {signal.SIGTERM}
        assert signal.getsignal(signal.SIGINT) is mine
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)
        signal.signal(signal.SIGHUP, hup)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_main_answers_ctrl_c_sigterm_and_sighup_over_their_defaults():
    from cgalloc.cli import _on_signal, _signals_as_errors

    # Python's own handlers as a terminal's process has them; this pytest may have been started
    # with some ignored (a shell script's background job ignores SIGINT)
    defaults = {signal.SIGINT: signal.default_int_handler,
                signal.SIGTERM: signal.SIG_DFL, signal.SIGHUP: signal.SIG_DFL}  # fmt: skip
    before = {signo: signal.signal(signo, handler) for signo, handler in defaults.items()}
    try:
        previous = _signals_as_errors()
        assert previous == defaults
        assert all(signal.getsignal(s) is _on_signal for s in previous)
    finally:
        for signo, handler in before.items():
            signal.signal(signo, handler)


def test_a_late_signal_with_undo_kept_does_not_say_the_tree_is_as_planned():
    kept = Result("/sys/fs/cgroup", kept=["rmdir /x: failed: Device or resource busy"])
    run = Setup(Plan("/sys/fs/cgroup"), Result("/sys/fs/cgroup"), kept, None, set(), signal.SIGTERM)
    said = late_signal(run)
    assert "as planned" not in said
    assert "could not be undone" in said


def test_interrupted_exits_128_plus_the_signal():
    assert Interrupted(signal.SIGINT, "x").exit_code == 130
    assert Interrupted(signal.SIGHUP, "x").exit_code == 129
