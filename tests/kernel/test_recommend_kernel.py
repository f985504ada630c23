"""`cgalloc record` then `cgalloc recommend` on a real kernel: setup makes kube-reserved on this
VM, a load this test starts there peaks at 96 MiB for part of a five-minute window (the shortest
recommend accepts), and the kube-reserved memory recommended covers the peak the kernel itself
recorded (memory.peak), beside the vendors' formulas for this node's size.

Five minutes of recording: a slow proof, run with CGALLOC_VM_SLOW=1 (docs/testing.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cgalloc.model.quantity import Quantity
from kernel.test_setup_kernel import NODE, PLANNED, cgalloc, listing
from kernel.util import CGROUP_ROOT, read

LANES = ("v2",)  # memory.peak (the kernel's own high-water mark) is cgroup v2's
MIB = 1 << 20
KUBE = "kube-reserved"
# enforced, so setup makes it (with its 150Mi cap: room for the load)
ARGS = [*NODE, "--kube-reserved-cgroup", f"/{KUBE}", "--enforce", "pods,kube-reserved"]
# Moved into kube-reserved first, then it grows to 96 MiB, holds it, and lets it go.
LOAD = (
    "import sys, time\n"
    "sys.stdin.readline()\n"
    "held = []\n"
    "for _ in range(96):\n"
    "    b = bytearray(1 << 20)\n"
    "    for i in range(0, len(b), 4096): b[i] = 1\n"
    "    held.append(b)\n"
    "    time.sleep(0.2)\n"
    "time.sleep(60)\n"
)


@pytest.mark.skipif(
    "not os.environ.get('CGALLOC_VM_SLOW')", reason="a slow proof: CGALLOC_VM_SLOW=1 runs it"
)
@pytest.mark.timeout(1800)  # five minutes of recording, then recommend, all under TCG
def test_recommend_covers_the_peak_a_load_made_in_kube_reserved(tmp_path):
    before = listing()
    state = ["--state-dir", str(tmp_path / "state")]
    history = str(tmp_path / "history.jsonl")
    done = cgalloc("setup", *ARGS, *state)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        record = subprocess.Popen(
            [*PLANNED, "record", *ARGS, "--for", "5m", "--every", "5s", "--history", history],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(60)  # a quiet start: the load comes in the window's middle
        load = subprocess.Popen([sys.executable, "-c", LOAD], stdin=subprocess.PIPE, text=True)
        (CGROUP_ROOT / KUBE / "cgroup.procs").write_text(str(load.pid))
        load.stdin.write("go\n")
        load.stdin.flush()
        assert load.wait(timeout=240) == 0
        out, err = record.communicate(timeout=400)
        assert record.returncode == 0, out + err
        peak = int(read(CGROUP_ROOT / KUBE / "memory.peak"))
        assert peak >= 96 * MIB

        rec = cgalloc("recommend", *ARGS, "--history", history, "--min-window", "5m", "-o", "json")
        assert rec.returncode == 0, rec.stdout + rec.stderr
        doc = json.loads(rec.stdout)
        assert doc["window"]["seconds"] >= 290 and doc["window"]["samples"] >= 30
        recommended = Quantity.parse(doc["recommendation"]["kubeReserved"]["memory"]).value()
        # The percentile plus headroom, never below the largest working set seen: the load's
        # 96 MiB of anonymous memory is working set while it lasts, and it was recorded.
        assert recommended >= doc["measured"]["kube"]["memoryWorkingSetPeak"] >= 96 * MIB
        names = {row["name"] for row in doc["compared"]}
        assert {"configured", "recommended"} <= names and len(names) >= 6
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    assert listing() == before
