"""Setup of a node tree with 1000 pod cgroups: cgalloc against what provisioning scripts do.

Contenders, cold (a fresh tree each round) and as a re-run over the finished tree:

- cgalloc setup (in-process CLI: plan, journal, apply, record);
- a shell script doing the same mkdir / echo work (it cannot tell what is already right, so a
  re-run writes everything again);
- libcgroup: ``cgcreate`` per new cgroup and one ``cgset`` per cgroup for its values
  (controller enabling, which cgset cannot do, is echoed as in the shell script).

Two modes:

- default, on this host: a fake cgroup v2 tree in a temporary directory (the host's cgroups are
  not ours to write). A fake tree's new directories are filled with interface files by the
  test-only fake kernel; that emulation, which a real cgroupfs does for free, is timed and
  shown apart. libcgroup does not run there (it acts on mounted cgroupfs only).
- the real cgroupfs at /sys/fs/cgroup, under a fresh ``cgalloc-test-bench-<pid>-<n>`` cgroup
  root per round, all removed afterwards: as root on a cgroup v1 (or hybrid) host, where setup
  writes only below that root (each hierarchy is its own mount), or with
  ``CGALLOC_BENCH_REAL=1`` inside a VM lane. On a v2 host setup enables controllers in the
  root's cgroup.subtree_control, so there it runs only in a VM:
  ``python -m tests.vm.run --lane v2 -- python -m pytest bench/bench_setup.py --benchmark-only``.

Targets (recorded, not asserted): the re-run makes zero writes; cold setup no slower than the
shell script.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fakecgroup

from bench import results
from bench.trees import build_c
from cgalloc.cli import main
from cgalloc.host.cgroupfs import detect
from cgalloc.host.machine import Host
from cgalloc.ops.plan import hierarchy_mounts

# The setup suite's node has a knob of its own, so that one run can read a tree of 1000 pods
# and set up a node of 110 (the kubelet's default maxPods).
PODS = int(
    os.environ.get("CGALLOC_BENCH_SETUP_PODS") or os.environ.get("CGALLOC_BENCH_PODS", "1000")
)


def _real() -> bool:
    """Whether setup is measured on the real cgroupfs: asked for (a VM lane), or as root on a
    v1/hybrid host, where setup writes nothing outside the bench's own cgroups."""
    if os.environ.get("CGALLOC_BENCH_REAL") == "1":
        return True
    if os.geteuid() != 0:
        return False
    from cgalloc.errors import HostError

    try:
        h = detect()
    except HostError:
        return False
    return h.version in ("v1", "hybrid") and {"cpu", "memory", "pids"} <= set(h.v1_mounts)


REAL = _real()
ROUNDS = int(os.environ.get("CGALLOC_BENCH_ROUNDS", "3"))
NODE = [
    "--capacity",
    # on a real cgroupfs the reserved cpusets must name CPUs the machine has (a VM has 2)
    f"cpu={os.cpu_count() if REAL else 32},memory=128Gi,pid=4194304,ephemeral-storage=500Gi",
    # a real node is a VM of about 1 GiB: reservations it can hold (the eviction threshold adds
    # 100Mi), or setup refuses the node as the kubelet would
    "--kube-reserved",
    "cpu=100m,memory=128Mi" if REAL else "cpu=500m,memory=2Gi",
    "--system-reserved",
    "cpu=100m,memory=128Mi" if REAL else "cpu=500m,memory=1Gi",
    "--enforce",
    "pods,system-reserved",
    # the node must admit the bench's pods: the kubelet (and setup) refuse more than maxPods
    "--max-pods",
    str(max(PODS, 110)),
    # the cgroupfs driver under a VM's systemd, in the bench's own cgroup root: setup refuses
    # that pairing on a real node unless told to go on
    "--allow-driver-mismatch",
]
QOS = ("burstable", "besteffort", "guaranteed")
# contender -> (best seconds, changes made, note)
RESULTS: dict[str, tuple[float | None, int | None, str]] = {}
_serial = itertools.count()


class TimedKernel:
    """The fake kernel, with the time it spends filling and clearing fake cgroup directories."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __getattr__(self, name: str):
        hook = getattr(fakecgroup.KERNEL, name)

        def timed(*args):
            start = time.perf_counter()
            try:
                return hook(*args)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


KERNEL = TimedKernel()


def _pods_file(directory: Path) -> Path:
    """A PodList as ``kubectl get pods -o json`` gives it, cycling through the QoS classes."""
    resources = {
        "burstable": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
        "besteffort": {},
        "guaranteed": {"limits": {"cpu": "200m", "memory": "128Mi"}},
    }
    items = []
    for i in range(PODS):
        uid = f"{i:08d}-0000-4000-8000-{i:012d}"
        items.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": "bench", "uid": uid},
            "spec": {"containers": [{"name": "app", "resources": resources[QOS[i % 3]]}]},
        })  # fmt: skip
    pods = {"apiVersion": "v1", "kind": "List", "items": items}
    path = directory / "pods.json"
    path.write_text(json.dumps(pods))
    return path


def _seed_v1_cpuset(mount: str, name: str) -> None:
    """A new v1 cpuset cgroup has no cpus or mems, so nothing below it could get any: give the
    bench's own root its parent's, as an operator's kubepods parent has them."""
    for f in ("cpuset.mems", "cpuset.cpus"):
        parent = os.path.join(mount, f)
        if os.path.exists(parent):
            with open(parent) as src, open(os.path.join(mount, name, f), "w") as dst:
                dst.write(src.read().strip() or "\n")


class Node:
    """A fresh tree (fake, or a new cgroup root on the real cgroupfs) and its setup arguments."""

    def __init__(self) -> None:
        # tmpfs when there is one: a disk filesystem's file creation would dominate a fake tree
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.base = Path(tempfile.mkdtemp(prefix="cgalloc-bench-setup-", dir=shm))
        self.created: list[Path] = []
        if REAL:
            self.root = Path("/sys/fs/cgroup")
            self.name = f"cgalloc-test-bench-{os.getpid()}-{next(_serial)}"
            mounts = sorted(set(hierarchy_mounts(detect(str(self.root))).values()))
            for m in mounts:
                os.mkdir(os.path.join(m, self.name))
                self.created.append(Path(m, self.name))
                _seed_v1_cpuset(m, self.name)
            tree = ["--cgroup-root", f"/{self.name}"]
            tree += ["--system-reserved-cgroup", f"/{self.name}/system.slice"]
        else:
            self.root = fakecgroup.make_tree(self.base, "v2")
            tree = ["--cgroupfs", str(self.root), "--system-reserved-cgroup", "/system.slice"]
        # setup refuses --capacity on the real cgroupfs: it plans the VM's own there
        node = NODE[2:] if REAL else NODE
        # the fake tree's host is the test suite's, with the timed fake kernel
        self.host = Host() if REAL else fakecgroup.FakeHost(self.base, KERNEL)
        self.args = [*node, *tree, "--pods", str(_pods_file(self.base))]
        self.args += ["--state-dir", str(self.base / "state")]

    def cgalloc(self, *extra: str) -> dict:
        return self.timed_json(*extra)[1]

    def timed_json(self, *extra: str) -> tuple[float, dict]:
        """``setup -o json``: the seconds of the command alone (its report written to a file),
        and the report, read back after the clock stops."""
        out = self.base / "out.json"
        stdout = sys.stdout
        with open(out, "w") as fh:
            sys.stdout = fh
            start = time.perf_counter()
            try:
                main(["setup", *self.args, "-o", "json", *extra], self.host)
            except SystemExit as exc:
                assert not exc.code, exc.code
            finally:
                seconds = time.perf_counter() - start
                sys.stdout = stdout
        return seconds, json.loads(out.read_text())

    def quiet(self) -> None:
        """``setup --quiet``: the run without rendering its report (a provisioning script's)."""
        try:
            main(["setup", *self.args, "--quiet"], self.host)
        except SystemExit as exc:
            assert not exc.code, exc.code

    def teardown(self) -> None:
        """``teardown --quiet``: undo what setup recorded."""
        args = ["--cgroupfs", str(self.root), "--state-dir", str(self.base / "state")]
        try:
            main(["teardown", *args, "--quiet"], self.host)
        except SystemExit as exc:
            assert not exc.code, exc.code

    def record(self) -> dict:
        """What setup recorded (the state dir's owned.json)."""
        return json.loads((self.base / "state" / "owned.json").read_text())

    def actions(self) -> list[dict]:
        return self.cgalloc("--dry-run")["plan"]["actions"]

    def shell_script(self) -> tuple[Path, int]:
        """The script a provisioner would write for the same tree (mkdir + echo)."""
        lines = ["set -e"]
        acts = self.actions()
        for a in acts:
            target = self.root / a["path"]
            if a["action"] == "mkdir":
                lines.append(f"mkdir -p '{target}'")
            else:
                lines.append(f"echo '{a['new']}' > '{target}'")
        return self._script("setup.sh", lines), len(acts)

    def libcgroup_script(self) -> tuple[Path, int]:
        """The same tree through cgcreate (per cgroup) and cgset (per cgroup, all its values)."""
        acts = self.actions()
        ctrls = sorted(
            {c.lstrip("+") for a in acts if a["action"] == "enable" for c in a["new"].split()}
        )
        lines, made, pending = ["set -e"], set(), {}

        def flush() -> None:
            for cgroup, values in pending.items():
                flags = " ".join(f"-r '{f}={v}'" for f, v in values)
                lines.append(f"cgset {flags} '/{cgroup}'")
            pending.clear()

        for a in acts:
            if a["action"] == "mkdir":
                flush()
                if a["cgroup"] not in made:
                    made.add(a["cgroup"])
                    lines.append(
                        f"cgcreate -g {','.join(ctrls) or 'cpu,memory,pids'}:/{a['cgroup']}"
                    )
            elif a["action"] == "enable":
                flush()
                lines.append(f"echo '{a['new']}' > '{self.root / a['path']}'")
            else:
                pending.setdefault(a["cgroup"], []).append((os.path.basename(a["path"]), a["new"]))
        flush()
        return self._script("libcgroup.sh", lines), len(acts)

    def _script(self, name: str, lines: list[str]) -> Path:
        path = self.base / name
        path.write_text("\n".join(lines) + "\n")
        return path

    def remove(self) -> None:
        # Only what this node created: every cgroup below its own root, children first.
        for top in self.created:
            for d, _subdirs, _files in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
                os.rmdir(d)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _env():
    yield
    if RESULTS:
        where = "real cgroupfs" if REAL else "fake v2 tree"
        results.SECTIONS.append((f"setup of a tree with {PODS} pod cgroups ({where})", table()))


def _fresh() -> Node:
    return Node()


def test_cgalloc_cold(benchmark):
    nodes: list[Node] = []
    emulation: list[float] = []

    def fresh():
        nodes.append(_fresh())
        KERNEL.seconds = 0.0
        return (), {}

    def run():
        result = nodes[-1].cgalloc()
        emulation.append(KERNEL.seconds)
        return result

    result = benchmark.pedantic(run, setup=fresh, rounds=ROUNDS)
    best = benchmark.stats.stats.min
    RESULTS["cgalloc cold"] = (best, result["writes"], "")
    if not REAL:
        fake = min(emulation)
        note = "the fake kernel filling new dirs with files (cgroupfs does it in mkdir)"
        RESULTS["  of which fake-kernel emulation"] = (fake, None, note)
        RESULTS["cgalloc cold without the emulation"] = (best - fake, result["writes"], "")
    for n in nodes:
        n.remove()


def test_cgalloc_rerun(benchmark):
    node = _fresh()
    try:
        node.cgalloc()
        result = benchmark.pedantic(node.cgalloc, rounds=ROUNDS)
        RESULTS["cgalloc re-run"] = (benchmark.stats.stats.min, result["writes"], "")
    finally:
        node.remove()


def _script(benchmark, name: str, kind: str, rerun: bool) -> None:
    nodes: list[Node] = []
    changes: list[int] = []

    def fresh():
        node = _fresh()
        nodes.append(node)
        script, count = node.shell_script() if kind == "shell" else node.libcgroup_script()
        changes.append(count)
        if rerun:
            subprocess.run(["bash", str(script)], check=True, capture_output=True)
        return (script,), {}

    try:
        benchmark.pedantic(
            lambda s: subprocess.run(["bash", str(s)], check=True, capture_output=True),
            setup=fresh,
            rounds=ROUNDS,
        )
    finally:
        for n in nodes:
            n.remove()
    note = "writes everything again" if rerun else ""
    RESULTS[name] = (benchmark.stats.stats.min, changes[0], note)


def test_shell_cold(benchmark):
    _script(benchmark, "shell mkdir/echo cold", "shell", rerun=False)


def test_shell_rerun(benchmark):
    _script(benchmark, "shell mkdir/echo re-run", "shell", rerun=True)


def _floor_ops(node: Node, rerun: bool) -> str:
    """The setup's syscalls for csrc/setup_floor.c: its mkdirs and writes, or for a re-run the
    reads of every file it writes."""
    acts = node.actions()
    lines = []
    for a in acts:
        target = node.root / a["path"]
        if a["action"] == "mkdir":
            lines.append(None if rerun else f"mkdir {target}")
        else:
            lines.append(f"read {target}" if rerun else f"write {target} {a['new']}")
    return "\n".join(x for x in lines if x is not None) + "\n"


def _floor(benchmark, name: str, rerun: bool) -> None:
    if not REAL:
        reason = "the floor needs a real cgroupfs (mkdir makes the interface files)"
        RESULTS.setdefault(name, (None, None, reason))
        pytest.skip(reason)
    out_dir = tempfile.mkdtemp(prefix="cgalloc-setup-floor-")
    binary = build_c("setup_floor", out_dir)
    if binary is None:
        pytest.skip("no C compiler")
    nodes: list[Node] = []
    seconds: list[float] = []
    count: list[int] = []

    def fresh():
        node = _fresh()
        nodes.append(node)
        ops = _floor_ops(node, rerun)
        if rerun:
            node.cgalloc()
        return (ops,), {}

    def run(ops: str) -> None:
        out = subprocess.run([binary], input=ops, capture_output=True, text=True, check=True)
        n, ns = out.stdout.split()
        count.append(int(n))
        seconds.append(float(ns) / 1e9)

    try:
        benchmark.pedantic(run, setup=fresh, rounds=ROUNDS)
    finally:
        for n in nodes:
            n.remove()
        shutil.rmtree(out_dir, ignore_errors=True)
    RESULTS[name] = (min(seconds), None if rerun else count[0], "syscalls only (its own clock)")


def test_floor_cold(benchmark):
    _floor(benchmark, "C floor cold (csrc/setup_floor.c)", rerun=False)


def test_floor_rerun(benchmark):
    _floor(benchmark, "C floor re-run (reads)", rerun=True)


def _libcgroup_skip() -> None:
    if shutil.which("cgcreate") is None or shutil.which("cgset") is None:
        reason = "cgcreate/cgset not installed (Debian cgroup-tools)"
    elif not REAL:
        reason = (
            "cgcreate/cgset act on mounted cgroupfs only; run with CGALLOC_BENCH_REAL=1 in a VM"
        )
    else:
        return
    RESULTS.setdefault("libcgroup cgcreate/cgset cold", (None, None, reason))
    pytest.skip(reason)


def test_libcgroup_cold(benchmark):
    _libcgroup_skip()
    _script(benchmark, "libcgroup cgcreate/cgset cold", "libcgroup", rerun=False)


def test_libcgroup_rerun(benchmark):
    _libcgroup_skip()
    _script(benchmark, "libcgroup cgcreate/cgset re-run", "libcgroup", rerun=True)


def table() -> list[str]:
    """Best time of each contender, its ratio to the shell script of the same kind, changes."""
    rows = [("contender", "best", "vs shell", "changes", "note")]
    for name, (secs, changes, note) in RESULTS.items():
        kind = "re-run" if "re-run" in name else "cold"
        shell = RESULTS.get(f"shell mkdir/echo {kind}", (None, None, ""))[0]
        ratio = f"{secs / shell:.2f}x" if secs is not None and shell else "-"
        shown = f"{secs * 1000:.1f} ms" if secs is not None else "skipped"
        rows.append((name, shown, ratio, "-" if changes is None else str(changes), note))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    lines += ["targets:", *_verdicts()]
    return lines


def _verdicts() -> list[str]:
    out = []
    rerun = RESULTS.get("cgalloc re-run")
    if rerun and rerun[1] is not None:
        ok = "MET" if rerun[1] == 0 else f"GAP: {rerun[1]} changes"
        out.append(f"  re-run makes zero writes: {ok}")
    cold = RESULTS.get("cgalloc cold without the emulation") or RESULTS.get("cgalloc cold")
    for kind, mine in (("cold", cold), ("re-run", RESULTS.get("cgalloc re-run"))):
        floor = RESULTS.get(f"C floor {kind} (csrc/setup_floor.c)" if kind == "cold"
                            else "C floor re-run (reads)")  # fmt: skip
        if mine and floor and mine[0] and floor[0]:
            ratio = mine[0] / floor[0]
            ok = f"MET ({ratio:.2f}x)" if ratio <= 1.2 else f"GAP: {ratio:.2f}x the floor"
            out.append(f"  {kind} setup <= 1.2x the C floor: {ok}")
    shell = RESULTS.get("shell mkdir/echo cold")
    if cold and shell and cold[0] and shell[0]:
        ratio = cold[0] / shell[0]
        ok = f"MET ({ratio:.2f}x)" if ratio <= 1 else f"GAP: {ratio:.2f}x the shell script"
        out.append(f"  cold setup no slower than the shell script: {ok}")
    return out
