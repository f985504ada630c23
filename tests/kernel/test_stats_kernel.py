"""`cgalloc stats` on a real kernel: a small kubepods tree below a scratch cgroup, one busy pod.

The tree is made with raw mkdir / control-file writes (it is the reader under test, not setup):
<scratch>/kubepods/burstable/pod<uid>, with a child that burns CPU and holds 32 MiB inside it.
"""

from __future__ import annotations

import calendar
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from clirun import run_cli

from kernel.util import is_v2, scratch_cgroup

MiB = 1 << 20
UID = "0c4f2d9e-1b7a-4e55-9a63-2f1d8c7b6a50"
BUSY = (
    "import sys\n"
    "held = bytearray(32 * 1024 * 1024)\n"
    "for i in range(0, len(held), 4096): held[i] = 1\n"
    "print('ready', flush=True)\n"
    "while True: pass\n"
)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "stats", *args)


def test_stats_reports_a_busy_pod(capsys) -> None:
    controllers = ("cpu", "memory", "pids")
    with scratch_cgroup(*controllers) as cg:
        levels = ["kubepods", "kubepods/burstable", f"kubepods/burstable/pod{UID}"]
        bases = list(dict.fromkeys(cg.dirs.values()))
        made: list[Path] = []
        child = None
        try:
            for rel in levels:
                for base in bases:
                    if is_v2():  # let the level below use the controllers
                        parent = base / rel.rpartition("/")[0] if "/" in rel else base
                        (parent / "cgroup.subtree_control").write_text(
                            " ".join(f"+{c}" for c in controllers)
                        )
                    (base / rel).mkdir()
                    made.append(base / rel)
            pod_dirs = [base / levels[-1] for base in bases]

            def join() -> None:
                for d in pod_dirs:
                    (d / "cgroup.procs").write_text(str(os.getpid()))

            child = subprocess.Popen(
                [sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True, preexec_fn=join
            )
            assert child.stdout.readline().strip() == "ready"
            time.sleep(0.5)

            code, out, err = _run(
                capsys, "--cgroup-root", f"/{cg.name}", "-o", "json", "--interval", "1"
            )
            assert code == 0, err
            doc = json.loads(out)
            [pod] = doc["pods"]
            assert pod["podRef"] == {"uid": UID}
            mem = pod["memory"]
            assert mem["usageBytes"] >= 32 * MiB
            assert 32 * MiB <= mem["workingSetBytes"] <= mem["usageBytes"]
            assert mem["rssBytes"] >= 32 * MiB
            assert mem["pageFaults"] > 0  # not one per 4 KiB: THP may back the buffer
            # one busy thread on a 2-CPU VM: about a core, never more than two
            assert 200_000_000 < pod["cpu"]["usageNanoCores"] < 2_100_000_000
            assert pod["cpu"]["usageCoreNanoSeconds"] > 200_000_000
            assert pod["process_stats"]["process_count"] >= 1
            [pods] = [c for c in doc["node"]["systemContainers"] if c["name"] == "pods"]
            # kubepods holds the pod's time, but the two cpu.stat reads are not one atomic
            # snapshot (the core reads cgroups in parallel): the busy pod may run on between
            # them, so allow 0.1 s of CPU time of skew
            skew = 100_000_000
            assert pods["cpu"]["usageCoreNanoSeconds"] >= pod["cpu"]["usageCoreNanoSeconds"] - skew
            assert pods["memory"]["usageBytes"] >= mem["usageBytes"]
            node = doc["node"]
            assert node["memory"]["workingSetBytes"] >= mem["workingSetBytes"]
            assert node["cpu"]["usageNanoCores"] >= 200_000_000
            assert set(node) >= {"nodeName", "systemContainers", "startTime", "cpu", "memory"}

            code, out, err = _run(capsys, "--cgroup-root", f"/{cg.name}", "--watch", "0.3",
                                  "--count", "2", "--role", "pod,kubepods", "--sort-by", "cpu",
                                  "--no-headers")  # fmt: skip
            assert code == 0, err
            first, second = out.split("\n\n")
            pod_path = f"/{cg.name}/{levels[-1]}"
            # rows only: kubepods and the pod, busiest first (the two are near equal: which
            # leads depends on the skew of two non-atomic reads, so the order is checked by value)
            rows = [line.split() for line in second.splitlines()]
            kubepods = [f"/{cg.name}/kubepods", "kubepods"]
            assert sorted(r[:2] for r in rows) == sorted([kubepods, [pod_path, "pod"]])
            assert float(rows[0][2]) >= float(rows[1][2])
            assert [r[2] for r in (line.split() for line in first.splitlines())] == ["-", "-"]
            [pod_row] = [r for r in rows if r[0] == pod_path]
            assert float(pod_row[2]) > 0.2  # cores, from the sampler's two reads
        finally:
            if child is not None:
                child.send_signal(signal.SIGKILL)
                child.wait()
            for path in reversed(made):
                for _ in range(100):
                    try:
                        path.rmdir()
                        break
                    except OSError:
                        time.sleep(0.05)


def test_stats_without_kubepods_reports_it(capsys) -> None:
    code, out, err = _run(capsys, "--cgroup-root", "/cgalloc-test-absent", "--interval", "0")
    assert code == 0
    first = err.splitlines()[0]  # a warning: stderr, so stdout stays the table
    assert first.startswith("cgalloc: warning: kubepods: not found at /sys/fs/cgroup/")
    assert "not found" not in out
    if not is_v2():
        assert "/memory/cgalloc-test-absent/kubepods" in first


def test_a_pods_start_time_is_when_it_was_made_not_when_its_container_was(capsys) -> None:
    # cAdvisor container/common/helpers.go getSpecInternal: the lowest mtime of the cgroup's
    # directory and of its cgroup.clone_children (cgroup.events on v2) over the hierarchies.
    controllers = ("cpu", "memory", "pids")
    with scratch_cgroup(*controllers) as cg:
        bases = list(dict.fromkeys(cg.dirs.values()))
        levels = ["kubepods", "kubepods/besteffort", f"kubepods/besteffort/pod{UID}"]
        made: list[Path] = []
        try:
            made_at = []
            for rel in levels:
                for base in bases:
                    if is_v2():
                        parent = base / rel.rpartition("/")[0] if "/" in rel else base
                        (parent / "cgroup.subtree_control").write_text(
                            " ".join(f"+{c}" for c in controllers)
                        )
                    made_at.append(time.time())
                    (base / rel).mkdir()
                    made.append(base / rel)
                    # the kubelet writes a new cgroup's limits at once: kernfs gives an inode
                    # its times when it is first looked up, not at mkdir
                    (base / rel / "cgroup.procs").read_text()
            # kernfs stamps with the coarse clock, up to a tick behind time.time()
            pod_made = (int(made_at[-len(bases)]) - 1, time.time())
            time.sleep(1.5)  # the container comes a second later, as the kubelet's do
            for base in bases:
                (base / levels[-1] / "ctr").mkdir()
                made.append(base / levels[-1] / "ctr")
            code, out, err = _run(
                capsys, "--cgroup-root", f"/{cg.name}", "-o", "json", "--interval", "0"
            )
            assert code == 0, err
            [pod] = json.loads(out)["pods"]
            started = calendar.timegm(time.strptime(pod["startTime"], "%Y-%m-%dT%H:%M:%SZ"))
            assert pod_made[0] <= started <= pod_made[1], (pod_made, pod["startTime"])
        finally:
            for path in reversed(made):
                path.rmdir()


def test_kernfs_stamps_a_cgroup_when_it_is_first_looked_up() -> None:
    # Why the start-time test above looks each new cgroup up at once, and what
    # docs/performance.md says of startTime: a cgroup's directory and files get their times
    # from the first lookup.
    with scratch_cgroup("memory") as cg:
        probe = cg.dirs["memory"] / "probe"
        made = time.time()
        os.mkdir(probe)
        try:
            time.sleep(1.5)
            looked_up = time.time()
            dir_stamp = os.stat(probe).st_mtime
            time.sleep(1.5)
            file_stamp = os.stat(probe / "cgroup.procs").st_mtime
        finally:
            os.rmdir(probe)
    assert dir_stamp >= int(made) + 1, (made, dir_stamp)
    assert file_stamp >= int(looked_up) + 1, (looked_up, file_stamp)
