"""stdout as the installed program owns it (cli.run): a result that cannot be written is one
sentence and exit 3, a closed stdout is an error, and a cgroup name the kernel holds as bytes
that are not UTF-8 is written back as those bytes. Each case runs a whole process; these were
tracebacks (or a silent exit 0) before, found by the hostile-input review."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakecgroup import make_tree

TESTS = Path(__file__).resolve().parents[1]
CAPACITY = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]
LOST = (
    "cgalloc: cannot write the result to stdout ({}); the command stopped there and what it had"
    " done stands"
)


def _cgalloc(*args: str, stdout=subprocess.PIPE, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cgalloc", *args], stdout=stdout, stderr=subprocess.PIPE,
        env=env, check=False, timeout=120,
    )  # fmt: skip


COMMANDS = {
    "show": ["show", *CAPACITY],
    "show json": ["show", *CAPACITY, "-o", "json"],
    "version": ["--version"],
    "help": ["--help"],
    "kubelet-config": ["kubelet-config", *CAPACITY],
    "completion": ["completion", "zsh"],
}


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_full_disk_is_one_sentence_and_exit_3(args):
    with open("/dev/full", "w") as full:
        out = _cgalloc(*args, stdout=full)
    err = out.stderr.decode()
    assert out.returncode == 3, err
    assert err.startswith(LOST.format("No space left on device")) and err.count("\n") == 1


def test_a_closed_stdout_is_an_error_not_a_silent_exit_0():
    out = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" -m cgalloc show "$@" >&-', "sh", *CAPACITY],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert out.returncode == 3, out.stderr
    assert out.stderr.startswith(LOST.format("stdout is closed"))


@pytest.mark.parametrize("sink", ["full disk", "closed pipe"])
def test_setup_whose_report_is_lost_keeps_its_changes(tmp_path, sink):
    # setup applied and recorded every change, then the report hit the full disk: exit 1 said
    # "rolled back", and verify said in sync; a closed pipe (EPIPE, which click answers with a
    # silent exit 1) was the same (the review of the change)
    root = make_tree(tmp_path, "v2")
    node = [*CAPACITY, "--cgroupfs", str(root), "--state-dir", str(tmp_path / "state")]
    fake = [sys.executable, str(TESTS / "fakecli.py"), str(tmp_path), "--"]
    if sink == "full disk":
        stdout, reason = os.open("/dev/full", os.O_WRONLY), "No space left on device"
    else:
        read_end, stdout = os.pipe()
        os.close(read_end)
        reason = "Broken pipe"
    try:
        out = subprocess.run(
            [*fake, "setup", *node, "-o", "json"], stdout=stdout, stderr=subprocess.PIPE,
            text=True, check=False, timeout=120,
        )  # fmt: skip
    finally:
        os.close(stdout)
    assert out.returncode == 3, out.stderr
    assert out.stderr.splitlines()[-1].startswith(LOST.format(reason))
    assert "Traceback" not in out.stderr
    verify = subprocess.run([*fake, "verify", *node, "-o", "json"], capture_output=True,
                            text=True, check=False, timeout=120)  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["inSync"] is True
    assert (tmp_path / "state" / "owned.json").exists()


def test_a_pod_directory_named_in_bytes_that_are_not_utf8_is_read_and_shown(tmp_path):
    # The kernel takes any bytes but '/' and NUL in a name. The core's path encoding raised
    # UnicodeEncodeError on such a directory, and a UTF-8 locale's strict stdout would have
    # raised on printing it (PYTHONIOENCODING=utf-8:strict stands for such a locale here).
    root = make_tree(tmp_path, "v2")
    pod = os.path.join(os.fsencode(root), b"kubepods", b"burstable", b"pod\xff")
    os.makedirs(pod)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    table = _cgalloc("stats", "--cgroupfs", str(root), "--interval", "0", env=env)
    assert table.returncode == 0, table.stderr
    assert b"/kubepods/burstable/pod\xff " in table.stdout
    doc = _cgalloc("stats", "--cgroupfs", str(root), "--interval", "0", "-o", "json", env=env)
    assert doc.returncode == 0, doc.stderr
    uids = [p["podRef"]["uid"] for p in json.loads(doc.stdout)["pods"]]
    assert uids == [os.fsdecode(b"\xff")]


def test_setup_whose_plan_cannot_be_printed_changes_nothing(tmp_path):
    # in the table form the plan is printed before any change: the run stops there, and the
    # sentence no longer says its changes were made (the review of the change)
    root = make_tree(tmp_path, "v2")
    node = [*CAPACITY, "--cgroupfs", str(root), "--state-dir", str(tmp_path / "state")]
    fake = [sys.executable, str(TESTS / "fakecli.py"), str(tmp_path), "--"]
    with open("/dev/full", "w") as full:
        out = subprocess.run([*fake, "setup", *node], stdout=full, stderr=subprocess.PIPE,
                             text=True, check=False, timeout=120)  # fmt: skip
    assert out.returncode == 3, out.stderr
    assert out.stderr.startswith(LOST.format("No space left on device"))
    assert not (tmp_path / "state" / "owned.json").exists()
    assert (root / "cgroup.subtree_control").read_text().strip() == ""
