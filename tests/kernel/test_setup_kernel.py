"""`cgalloc setup` on a real kernel (v2 and v1 lanes): the kernel honours what it wrote.

Each test runs setup as a subprocess on a small planned node (CAPACITY), puts a process into a
pod cgroup setup created (via --pods, from Pod manifests), checks the kernel's reaction, and
tears the tree down again.
The VM is throw-away, so the tree lives at the usual /kubepods and /system.slice.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.util import CGROUP_ROOT, is_v2, read, read_keyed

V1_DIRS = ("cpu,cpuacct", "cpuset", "memory", "pids", "hugetlb", "systemd")
# The VM stands for this node (tests/kernel/planned.py): setup refuses --capacity for real writes.
# Its CPUs are the VM's own, since a cpuset may name only CPUs it has: two in the v2 and v1
# lanes, one in the systemd lane (tests/vm/qemu.py: LANE_CPUS).
CPUS = os.cpu_count() or 1
CAPACITY = f"cpu={CPUS},memory=600Mi,pid=4096,ephemeral-storage=10Gi"
PLANNED = [sys.executable, str(Path(__file__).with_name("planned.py")), CAPACITY, "--"]
NODE = [
    "--kube-reserved",
    "memory=150Mi",
    "--system-reserved",
    "memory=150Mi",
    "--eviction-hard",
    "memory.available<1Mi",
]


def manifest(uid: str, *containers: dict, inits: tuple[dict, ...] = ()) -> dict:
    """A v1 Pod manifest; each container is a ``resources`` mapping."""
    spec: dict = {
        "containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(containers)]
    }
    if inits:
        spec["initContainers"] = [{"name": f"i{i}", **r} for i, r in enumerate(inits)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": uid, "uid": uid}, "spec": spec}


def cgalloc(*args: str, capacity: str = CAPACITY) -> subprocess.CompletedProcess:
    """cgalloc ARGS on a node of ``capacity``."""
    planned = [*PLANNED[:2], capacity, *PLANNED[3:]]
    return subprocess.run([*planned, *args], capture_output=True, text=True, timeout=120)


def dirs_of(path: str) -> list[Path]:
    """The directories of cgroup `path` (relative): one on v2, one per hierarchy on v1."""
    if is_v2():
        return [CGROUP_ROOT / path]
    return [CGROUP_ROOT / d / path for d in V1_DIRS if (CGROUP_ROOT / d).is_dir()]


def ctrl_dir(controller: str, path: str) -> Path:
    if is_v2():
        return CGROUP_ROOT / path
    return CGROUP_ROOT / ("cpu,cpuacct" if controller == "cpu" else controller) / path


def listing() -> tuple[list[str], str]:
    """Every cgroup directory and the root's subtree_control: the state teardown must restore."""
    found = sorted(str(Path(d).relative_to(CGROUP_ROOT)) for d, _, _ in os.walk(CGROUP_ROOT))
    control = CGROUP_ROOT / "cgroup.subtree_control"
    return found, read(control) if control.exists() else ""


@contextlib.contextmanager
def node(
    tmp_path: Path,
    *extra: str,
    pods: list[dict] | None = None,
    capacity: str = CAPACITY,
    base: tuple[str, ...] | list[str] = tuple(NODE),
) -> Iterator[list[str]]:
    """setup with ``base`` + extra (and pods) on a node of ``capacity``; yields the args;
    always tears down."""
    args = [*base, *extra]
    if pods is not None:
        pods_file = tmp_path / "pods.json"
        pods_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
        args += ["--pods", str(pods_file)]
    state = ["--state-dir", str(tmp_path / "state")]
    done = cgalloc("setup", *args, *state, capacity=capacity)
    try:
        assert done.returncode == 0, done.stderr
        yield args
    finally:
        down = cgalloc("teardown", *state, capacity=capacity)
        assert down.returncode == 0, down.stdout + down.stderr


def run_in(path: str, code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run Python `code` in cgroup `path` (every hierarchy), joined once the interpreter has
    started: under a pod's CPU quota, starting Python took the TCG guest 20-70 s, which no
    test here is about. What `code` does is all inside the cgroup."""
    go = "import sys\nprint('started', flush=True)\nsys.stdin.readline()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", go + code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        for d in dict.fromkeys(dirs_of(path)):
            (d / "cgroup.procs").write_text(str(proc.pid))
        out, err = proc.communicate("go\n", timeout=timeout)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_memory_over_kubepods_limit_is_oom_killed(tmp_path):
    pod = "kubepods/besteffort/podoom"
    with node(tmp_path, pods=[manifest("oom", {})]):
        limit = read(
            ctrl_dir("memory", "kubepods") / ("memory.max" if is_v2() else "memory.limit_in_bytes")
        )
        assert limit == str(300 << 20)  # 600Mi − 150Mi − 150Mi
        hog = "b = []\nfor _ in range(60): b.append(bytearray(10 << 20))\nprint('survived')"
        done = run_in(pod, hog)
        assert done.returncode == -9, done.stdout + done.stderr
        assert "survived" not in done.stdout


def test_pod_cpu_limit_throttles(tmp_path):
    pod = "kubepods/burstable/podcpu"
    spec = manifest("cpu", {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}})
    with node(tmp_path, pods=[spec]):
        if is_v2():
            assert read(CGROUP_ROOT / pod / "cpu.max") == "10000 100000"
        else:
            assert read(ctrl_dir("cpu", pod) / "cpu.cfs_quota_us") == "10000"
        spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"
        assert run_in(pod, spin).returncode == 0
        stat = read_keyed(ctrl_dir("cpu", pod) / "cpu.stat")
        assert stat["nr_throttled"] > 0


def limit_file(kind: str) -> str:
    v2 = is_v2()
    return {
        "memory": "memory.max" if v2 else "memory.limit_in_bytes",
        "shares": "cpu.weight" if v2 else "cpu.shares",
    }[kind]


def test_guaranteed_pod_from_a_manifest_gets_its_limits_and_they_bite(tmp_path):
    # helpers_linux.go ResourceConfigForPod: Guaranteed → shares, quota, period and memory;
    # the pod cgroup sits directly under kubepods.
    path = "kubepods/podgua"
    res = {
        "requests": {"cpu": "200m", "memory": "64Mi"},
        "limits": {"cpu": "200m", "memory": "64Mi"},
    }
    with node(tmp_path, pods=[manifest("gua", res)]):
        assert read(ctrl_dir("memory", path) / limit_file("memory")) == str(64 << 20)
        # MilliCPUToShares(200) = 204 → kubelet weight 1 + 202·9999/262142 = 8
        assert read(ctrl_dir("cpu", path) / limit_file("shares")) == ("8" if is_v2() else "204")
        if is_v2():
            assert read(CGROUP_ROOT / path / "cpu.max") == "20000 100000"
        else:
            assert read(ctrl_dir("cpu", path) / "cpu.cfs_quota_us") == "20000"
        hog = "b = []\nfor _ in range(20): b.append(bytearray(10 << 20))\nprint('survived')"
        done = run_in(path, hog)
        assert done.returncode == -9, done.stdout + done.stderr


def test_burstable_pod_with_init_and_sidecar_from_a_manifest(tmp_path):
    # component-helpers PodRequests/PodLimits: regular 100m/200m + sidecar 50m/100m, the init
    # container's 300m request wins the requests max; memory limits 100Mi + 50Mi.
    path = "kubepods/burstable/podbur"
    app = {
        "requests": {"cpu": "100m", "memory": "50Mi"},
        "limits": {"cpu": "200m", "memory": "100Mi"},
    }
    sidecar = {
        "restartPolicy": "Always",
        "resources": {
            "requests": {"cpu": "50m", "memory": "50Mi"},
            "limits": {"cpu": "100m", "memory": "50Mi"},
        },
    }
    init = {"resources": {"requests": {"cpu": "300m"}, "limits": {"cpu": "300m"}}}
    with node(tmp_path, pods=[manifest("bur", app, inits=(sidecar, init))]):
        assert read(ctrl_dir("memory", path) / limit_file("memory")) == str(150 << 20)
        # requests max(150m, 300m + 50m) = 350m → 358 shares → weight 14
        assert read(ctrl_dir("cpu", path) / limit_file("shares")) == ("14" if is_v2() else "358")
        # limits max(300m, 300m + 100m) = 400m
        if is_v2():
            assert read(CGROUP_ROOT / path / "cpu.max") == "40000 100000"
            assert read(CGROUP_ROOT / "kubepods/burstable/cpu.weight") == "14"
        else:
            assert read(ctrl_dir("cpu", path) / "cpu.cfs_quota_us") == "40000"
        spin = "import time\nt = time.time()\nwhile time.time() - t < 1.5: pass"
        assert run_in(path, spin).returncode == 0
        assert read_keyed(ctrl_dir("cpu", path) / "cpu.stat")["nr_throttled"] > 0


def test_pod_pids_limit_stops_forks(tmp_path):
    pod = "kubepods/besteffort/podpids"
    with node(tmp_path, "--pod-max-pids", "5", pods=[manifest("pids", {})]):
        assert read(ctrl_dir("pids", pod) / "pids.max") == "5"
        forker = (
            "import os, time\nn = 0\ntry:\n    for _ in range(20):\n"
            "        if os.fork() == 0:\n            time.sleep(2); os._exit(0)\n"
            "        n += 1\nexcept BlockingIOError:\n    print('refused', n)\n"
        )
        done = run_in(pod, forker)
        assert done.stdout.startswith("refused"), done.stdout + done.stderr
        assert int(done.stdout.split()[1]) <= 4  # the forker itself is one of the five
        time.sleep(2.5)  # let the children exit so teardown finds the pod empty


def test_strict_cpu_reservation_confines_pods(tmp_path):
    # cpumanager/policy_static.go strict-cpu-reservation: pods stay off the reserved CPUs
    pod = "kubepods/besteffort/podcpus"
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs in the VM")
    strict = [
        "--reserved-cpus",
        "0",
        "--cpu-manager-policy",
        "static",
        "--cpu-manager-policy-options",
        "strict-cpu-reservation=true",
    ]
    with node(tmp_path, *strict, pods=[manifest("cpus", {})]):
        assert read(ctrl_dir("cpuset", "kubepods") / "cpuset.cpus") == "1"
        done = run_in(pod, "import os; print(sorted(os.sched_getaffinity(0)))")
        assert done.stdout.strip() == "[1]"


def test_none_policy_gives_kubepods_and_reserved_cgroups_every_cpu(tmp_path):
    # node_container_manager_linux.go getCgroupConfig: CPUSet = GetAllCPUs() with the none
    # policy (kubernetes#125923), even with reservedSystemCPUs set
    pod = "kubepods/besteffort/podall"
    online = read("/sys/devices/system/cpu/online")
    extra = ["--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/system.slice"]
    with node(tmp_path, *extra, pods=[manifest("all", {})]):
        assert read(ctrl_dir("cpuset", "kubepods") / "cpuset.cpus") == online
        assert read(ctrl_dir("cpuset", "system.slice") / "cpuset.cpus") == online
        done = run_in(pod, "import os; print(len(os.sched_getaffinity(0)))")
        assert int(done.stdout) == os.cpu_count()


def _hugepage_sizes() -> list[str]:
    base = Path("/sys/kernel/mm/hugepages")
    if not base.is_dir():
        return []
    names = []
    for entry in sorted(base.iterdir()):
        kb = int(entry.name.removeprefix("hugepages-").removesuffix("kB"))
        names.append(f"{kb >> 20}GB" if kb >= 1 << 20 else f"{kb >> 10}MB")
    return names


def test_enforced_reserved_cgroup_gets_hugetlb_zero(tmp_path):
    # cgroup_manager_linux.go maybeSetHugetlb: every page size without a limit gets 0, so a
    # process in an enforced reserved cgroup cannot fault in a huge page
    sizes = _hugepage_sizes()
    if is_v2():
        present = "hugetlb" in read(CGROUP_ROOT / "cgroup.controllers").split()
    else:
        present = (CGROUP_ROOT / "hugetlb").is_dir()
    if not sizes or not present:
        pytest.skip("no hugetlb controller in this lane")
    Path("/proc/sys/vm/nr_hugepages").write_text("4")  # throw-away VM: a few 2MB pages
    extra = ["--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/system.slice"]
    suffix = "max" if is_v2() else "limit_in_bytes"
    with node(tmp_path, *extra):
        for size in sizes:
            assert read(ctrl_dir("hugetlb", "system.slice") / f"hugetlb.{size}.{suffix}") == "0"
        touch = (
            "import mmap\n"
            "m = mmap.mmap(-1, 2 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)\n"
            "m[0] = 1\nprint('faulted')"
        )
        done = run_in("system.slice", touch)
        assert "faulted" not in done.stdout
        assert done.returncode != 0, done.stdout + done.stderr
        # the same page faults in fine outside the reserved cgroup
        outside = subprocess.run(
            [sys.executable, "-c", touch], capture_output=True, text=True, timeout=60
        )
        assert outside.stdout.strip() == "faulted", outside.stderr


def test_setup_verify_teardown_restores_the_hierarchy(tmp_path):
    before = listing()
    extra = ["--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/system.slice"]
    with node(tmp_path, *extra) as args:
        assert cgalloc("verify", *args).returncode == 0
        again = cgalloc("setup", *args, "--state-dir", str(tmp_path / "state"))
        assert again.stdout.strip() == "no changes: 0 writes"
        assert (CGROUP_ROOT / "kubepods").is_dir() or (CGROUP_ROOT / "memory/kubepods").is_dir()
    assert listing() == before


def _cgroup_of(pid: int) -> dict[str, str]:
    """The process's cgroup per hierarchy, from /proc/<pid>/cgroup ("" for v2's "0::")."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    return {ctrl: path for _, ctrl, path in (line.split(":", 2) for line in lines)}


def test_reserved_procs_are_moved_into_the_kube_reserved_cgroup(tmp_path):
    # A daemon named "kubelet": a symlink to sleep carries that name as its comm.
    os.symlink("/bin/sleep", tmp_path / "kubelet")
    daemon = subprocess.Popen([str(tmp_path / "kubelet"), "120"])
    state = ["--state-dir", str(tmp_path / "state")]
    args = [*NODE, "--enforce", "pods,kube-reserved", "--kube-reserved-cgroup", "/kube.slice"]
    try:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{daemon.pid}/comm").read_text().strip() != "kubelet":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        before = _cgroup_of(daemon.pid)
        done = cgalloc("setup", *args, "--kube-reserved-procs", "kubelet", *state)
        assert done.returncode == 0, done.stdout + done.stderr
        after = _cgroup_of(daemon.pid)
        if is_v2():
            assert after[""] == "/kube.slice"
        else:
            # every hierarchy the kubelet validates, as a v1 kubelet would expect
            assert {after[c] for c in ("cpu,cpuacct", "memory", "pids", "name=systemd")} == {
                "/kube.slice"
            }
        assert before != after
        assert str(daemon.pid) in read(ctrl_dir("memory", "kube.slice") / "cgroup.procs").split()
    finally:
        daemon.kill()
        daemon.wait()
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr


def test_json_setup_makes_the_tree_as_verify_wants_it(tmp_path):
    # -o json (no progress lines): the plan in batched core calls. Every change is made:
    # verify finds nothing to do, teardown restores the tree.
    before = listing()
    pods = [manifest(f"lane{i}", {"limits": {"cpu": "100m", "memory": "64Mi"}}) for i in range(40)]
    pods_file = tmp_path / "pods.json"
    pods_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    state = ["--state-dir", str(tmp_path / "state")]
    args = [*NODE, "--enforce", "pods", "--pods", str(pods_file)]
    try:
        done = cgalloc("setup", *args, *state, "-o", "json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["done"] == report["plan"]["actions"] and len(report["done"]) > 64
        checked = cgalloc("verify", *args, *state)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        pod = ctrl_dir("memory", "kubepods/burstable/podlane7")
        if not pod.is_dir():  # guaranteed: requests default to the limits
            pod = ctrl_dir("memory", "kubepods/podlane7")
        limit = "memory.max" if is_v2() else "memory.limit_in_bytes"
        assert int(read(pod / limit)) == 64 * 1024 * 1024
    finally:
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    assert listing() == before


@pytest.mark.parametrize("output", ["progress", "json"])
def test_sigterm_midway_undoes_every_change(tmp_path, output):
    # SIGTERM once the journal is there and changes are being made: setup undoes every change
    # it made (the batches it finished; with -o json, what each lane made) and exits 143 with
    # one sentence, the tree as before.
    # system.slice is the node's own here, so its limits are values to restore, not mkdirs.
    control = CGROUP_ROOT / "cgroup.subtree_control"
    enabled = []
    if is_v2():  # the controllers' files in system.slice, so setup changes their values
        enabled = [c for c in ("cpu", "memory", "pids") if c not in read(control).split()]
        control.write_text(" ".join(f"+{c}" for c in enabled))
    made = [d for d in dirs_of("system.slice") if not d.exists()]
    for d in made:
        d.mkdir()
        if d.parent.name == "cpuset":  # v1 cpusets start empty
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text(read(d.parent / f))
    try:
        pods = [manifest(f"sig{i}", {"limits": {"cpu": "100m"}}) for i in range(600)]
        pods_file = tmp_path / "pods.json"
        pods_file.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
        extra = ["--enforce", "pods,system-reserved", "--system-reserved-cgroup", "/system.slice"]
        extra += ["--max-pods", "600"]  # the node admits them all
        state = tmp_path / "state"
        args = [*NODE, *extra, "--pods", str(pods_file), "--state-dir", str(state)]
        planned = json.loads(cgalloc("setup", *args, "--dry-run", "-o", "json").stdout)["plan"]
        writes = [a for a in planned["actions"] if a["action"] == "write"]
        assert any("system.slice/" in a["path"] and a["old"] is not None for a in writes)
        before = listing()
        more = ["-o", "json"] if output == "json" else []
        proc = subprocess.Popen(
            [*PLANNED, "setup", *args, *more],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            # the journal is written before the first change; the progress lines follow the
            # batches made: signal once the first one is made (-o json: once the plan's first
            # mkdir is there, its lane's first change)
            if output == "json":
                first = (
                    CGROUP_ROOT
                    / next(a for a in planned["actions"] if a["action"] == "mkdir")["path"]
                )
                deadline = time.monotonic() + 60
                while not first.is_dir():
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.001)
            else:
                for line in proc.stderr:
                    if line.startswith("["):
                        break
            assert (state / "journal.jsonl").exists()
            sent = time.monotonic()
            proc.send_signal(15)
            _out, err = proc.communicate(timeout=300)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        print(f"{len(planned['actions'])} changes planned; exit {took:.2f} s after SIGTERM")
        last = err.splitlines()[-1]
        assert proc.returncode == 143, err[-2000:]
        assert last.startswith("cgalloc: setup interrupted by SIGTERM; all "), last
        assert last.endswith(" earlier changes were undone, the node is as it was."), last
        assert int(last.split("all ")[1].split()[0]) > 0
        assert listing() == before
        for a in writes:  # every value setup changed on a cgroup that was there is back
            path = CGROUP_ROOT / a["path"]
            if a["old"] is not None and path.exists():
                assert read(path) == a["old"], a
        assert not state.exists() or sorted(os.listdir(state)) == ["lock"]  # no journal, record
    finally:
        if (tmp_path / "state").exists():  # a failed test: its journal or record
            down = cgalloc("teardown", "--state-dir", str(tmp_path / "state"))
            assert down.returncode == 0, down.stdout + down.stderr
        for d in made:
            d.rmdir()
        if enabled:
            control.write_text(" ".join(f"-{c}" for c in enabled))
