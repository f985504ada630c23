"""The program's exit (cgalloc.entry): it skips the interpreter's teardown, and nothing else
changes. Its output arrives whole, and its exit status and stderr are those ``sys.exit`` gives
for the same code. Each case runs a whole process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_stats import make_v2

CAPACITY = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]


def _python(code: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], stdout=stdout, stderr=subprocess.PIPE, text=True,
        timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("code", ["None", "0", "3", "256", "-1", "True", "'no such node'"])
def test_the_exit_status_and_stderr_are_sys_exits(code):
    own = _python(f"import sys\nsys.exit({code})")
    ours = _python(f"from cgalloc.entry import leave\nleave({code})")
    assert (ours.returncode, ours.stderr) == (own.returncode, own.stderr)


def test_output_the_program_has_not_flushed_yet_still_arrives(tmp_path):
    # A file is block-buffered: without the flush before os._exit it would stay empty.
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    for n in range(300):
        make_v2(root, f"kubepods/pod{n:04}-0000", usage=4096)
    target = tmp_path / "stats.json"
    argv = [sys.executable, "-m", "cgalloc", "stats", *CAPACITY, "--cgroupfs", root,
            "-o", "json", "--interval", "0"]  # fmt: skip
    with open(target, "w") as fh:
        done = subprocess.run(argv, stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pods = json.loads(target.read_text())["pods"]
    assert len(pods) == 300


def test_a_stdout_that_fails_at_exit_is_status_120_as_the_interpreter_gives():
    # held in the buffer until the exit flushes it, which fails
    code = "import sys\nsys.stdout = open('/dev/full', 'w', buffering=8192)\nprint('x')\n"
    own = _python(code)
    ours = _python(code + "from cgalloc.entry import leave\nleave(0)")
    assert ours.returncode == own.returncode == 120


def test_the_program_skips_the_teardown():
    # an atexit handler is part of the teardown: the program leaves before it runs
    code = (
        "import atexit, runpy, sys\natexit.register(print, 'teardown ran')\n"
        "sys.argv = ['cgalloc', '--version']\nrunpy.run_module('cgalloc', run_name='__main__')\n"
    )
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("cgalloc ") and "teardown ran" not in out.stdout


def test_a_thread_still_running_gets_the_usual_exit_which_waits_for_it():
    code = (
        "import threading, time\nfrom cgalloc.entry import leave\n"
        "def late():\n    time.sleep(0.2)\n    print('thread ended', flush=True)\n"
        "threading.Thread(target=late).start()\nleave(4)\n"
    )
    out = _python(code)
    assert (out.returncode, out.stdout) == (4, "thread ended\n")


def test_a_failed_flush_is_120_whatever_the_code_as_the_interpreter_gives():
    code = "import sys\nsys.stdout = open('/dev/full', 'w', buffering=8192)\nprint('x')\n"
    own = _python(code + "sys.exit(3)")
    ours = _python(code + "from cgalloc.entry import leave\nleave(3)")
    assert ours.returncode == own.returncode == 120


def test_a_closed_stdout_is_skipped_as_the_interpreter_skips_it():
    code = "import sys\nsys.stdout.close()\n"
    own = _python(code + "sys.exit(4)")
    ours = _python(code + "from cgalloc.entry import leave\nleave(4)")
    assert (ours.returncode, ours.stderr) == (own.returncode, own.stderr) == (4, "")


def test_a_message_with_no_stderr_object_goes_to_fd_2_as_the_interpreter_writes_it():
    code = "import sys\nsys.stderr = None\n"
    own = _python(code + "sys.exit('no such node')")
    ours = _python(code + "from cgalloc.entry import leave\nleave('no such node')")
    assert (ours.returncode, ours.stdout, ours.stderr) == (own.returncode, own.stdout, own.stderr)
    assert ours.stderr == "no such node\n"
