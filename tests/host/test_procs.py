"""Process discovery on this host's real /proc, with processes the test starts; psutil (which
reads the same /proc through its own code) is the independent oracle for names."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import psutil
import pytest

from cgalloc.host import procs

LONG = "cgalloc-probe-exe-name"  # longer than comm's 15 characters


@pytest.fixture
def sleeper(tmp_path):
    """A copy of sleep under a long name, running: (pid, path of its executable)."""
    exe = tmp_path / LONG
    shutil.copy(shutil.which("sleep"), exe)
    proc = subprocess.Popen([str(exe), "60"])
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).name() != LONG and time.monotonic() < deadline:
        time.sleep(0.01)  # until the exec has happened
    yield proc.pid, exe
    proc.kill()
    proc.wait()


def _own_cgroups() -> dict[str, str]:
    # The child inherits this process's cgroups; read them with a parser of our own.
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    out = {}
    for _, ctrls, path in lines:
        for c in ctrls.split(",") if ctrls else [""]:
            out[c.removeprefix("name=")] = path
    return out


def test_found_by_executable_basename_when_comm_is_truncated(sleeper):
    pid, _ = sleeper
    comm = LONG[:15]
    assert psutil.Process(pid).cmdline()[0].endswith(LONG)
    [found] = [p for p in procs.find([LONG]) if p.pid == pid]
    assert found.name == LONG
    assert found.cgroups == _own_cgroups()
    [by_comm] = [p for p in procs.find([comm]) if p.pid == pid]
    assert by_comm.name == comm


def test_a_replaced_binary_is_still_found_by_name(sleeper):
    pid, exe = sleeper
    os.unlink(exe)  # /proc/<pid>/exe now reads "<path> (deleted)"
    assert os.readlink(f"/proc/{pid}/exe").endswith(" (deleted)")
    assert pid in [p.pid for p in procs.find([LONG])]


def test_same_pids_as_psutil_for_this_hosts_names(sleeper):
    # names whose processes do not come and go while the test runs (no shells, no pythons)
    names = [LONG, LONG[:15], "systemd", "init"]
    wanted = set(names)
    oracle = sorted(
        p.pid
        for p in psutil.process_iter(["name", "exe"])
        if p.pid != os.getpid()
        and p.info["exe"]  # kernel threads have none
        and (p.info["name"] in wanted or os.path.basename(p.info["exe"]) in wanted)
    )
    assert [p.pid for p in procs.find(names)] == oracle


def test_kernel_threads_are_never_matched():
    kthreads = [p for p in psutil.process_iter(["name", "exe"]) if p.pid > 0 and not p.info["exe"]]
    if not kthreads or os.geteuid() != 0:
        pytest.skip("no kernel threads visible (or no right to tell them from hidden processes)")
    name, pid = kthreads[0].info["name"], kthreads[0].pid
    assert pid not in [p.pid for p in procs.find([name])]


def test_in_cgroups_lists_the_processes_below_a_cgroup_with_their_oom_score_adj(sleeper):
    # this process's own cgroup (v2 line, or the memory controller's on v1) holds the sleeper
    cgroups = _own_cgroups()
    key = "" if "" in cgroups and "memory" not in cgroups else "memory"
    here = cgroups[key]
    pid, _ = sleeper
    with open(f"/proc/{pid}/oom_score_adj", "w") as f:
        f.write("500")  # raising needs no privilege
    found = {p[0]: p for p in procs.in_cgroups({here}, key)}
    assert found[pid] == (pid, LONG[:15], here, 500)
    parent = here.rpartition("/")[0] or "/"
    if parent != "/":
        assert pid in {p[0] for p in procs.in_cgroups({parent}, key)}
    assert pid not in {p[0] for p in procs.in_cgroups({here + "-not"}, key)}
