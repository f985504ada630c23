"""Setup of a node tree with 1000 pod cgroups: cgalloc against what provisioning scripts do.

Contenders, on a fake cgroup v2 tree in a temporary directory (the host's cgroups are not ours
to write; real-kernel writes belong in the VM lanes):

- cgalloc setup (in-process CLI: plan, journal, apply, record), cold and as a re-run;
- a shell script doing the same mkdir / echo work, cold and re-run (it cannot tell what is
  already right, so a re-run writes everything again);
- libcgroup's cgcreate/cgset: skipped on the host, the reason is recorded in the table.

Targets (recorded, not asserted): the re-run makes zero writes; cold setup no slower than the
shell script. Note cgalloc's cold time includes the fake-kernel emulation that fills each new
directory with interface files (a real cgroupfs does that for free).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fakecgroup

from cgalloc.cli import main

PODS = int(os.environ.get("CGALLOC_BENCH_PODS", "1000"))
ROUNDS = 3
NODE = [
    "--capacity",
    "cpu=32,memory=128Gi,pid=4194304,ephemeral-storage=500Gi",
    "--kube-reserved",
    "cpu=500m,memory=2Gi",
    "--system-reserved",
    "cpu=500m,memory=1Gi",
    "--enforce",
    "pods,system-reserved",
    "--system-reserved-cgroup",
    "/system.slice",
]
QOS = ("burstable", "besteffort", "guaranteed")
RESULTS: dict[str, tuple[float | None, str]] = {}  # contender -> (median seconds, note)


def _pods_file(directory: Path) -> Path:
    pods = []
    for i in range(PODS):
        qos = QOS[i % 3]
        pod = {"uid": f"{i:08d}-0000-4000-8000-{i:012d}", "qos": qos}
        if qos != "besteffort":
            pod |= {"cpuRequest": "100m", "cpuLimit": "200m", "memoryLimit": "128Mi"}
        if qos == "guaranteed":
            pod |= {"cpuRequest": "200m", "memoryRequest": "128Mi"}
        pods.append(pod)
    path = directory / "pods.json"
    path.write_text(json.dumps(pods))
    return path


class Node:
    """A fresh fake tree plus the arguments to set it up."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="cgalloc-bench-setup-"))
        self.root = fakecgroup.make_tree(self.base, "v2")
        self.args = [
            *NODE,
            "--pods",
            str(_pods_file(self.base)),
            "--cgroupfs",
            str(self.root),
            "--state-dir",
            str(self.base / "state"),
        ]

    def cgalloc(self, *extra: str) -> dict:
        out = self.base / "out.json"
        stdout = sys.stdout
        with open(out, "w") as fh:
            sys.stdout = fh
            try:
                main(["setup", *self.args, "-o", "json", *extra])
            except SystemExit as exc:
                assert not exc.code, exc.code
            finally:
                sys.stdout = stdout
        return json.loads(out.read_text())

    def script(self) -> Path:
        """The shell script a provisioner would write for the same tree (mkdir + echo)."""
        plan = self.cgalloc("--dry-run")["plan"]
        lines = ["set -e"]
        for a in plan["actions"]:
            target = self.root / a["path"]
            if a["action"] == "mkdir":
                lines.append(f"mkdir -p '{target}'")
            else:
                lines.append(f"echo '{a['new']}' > '{target}'")
        path = self.base / "setup.sh"
        path.write_text("\n".join(lines) + "\n")
        return path

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _env():
    saved = {k: os.environ.get(k) for k in ("CGALLOC_TEST_ALLOW_ANY_FS", "CGALLOC_TEST_KERNEL")}
    os.environ["CGALLOC_TEST_ALLOW_ANY_FS"] = "1"
    os.environ["CGALLOC_TEST_KERNEL"] = "fakecgroup:KERNEL"
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    if RESULTS:
        # written past pytest's capture so the table shows in every run mode
        print(
            f"\n== setup of a tree with {PODS} pod cgroups (fake v2 tree) ==", file=sys.__stderr__
        )
        print("\n".join(table()), file=sys.__stderr__)


def _mountinfo(node: Node) -> None:
    os.environ["CGALLOC_TEST_MOUNTINFO"] = str(node.base / "mountinfo")


def _median(benchmark) -> float:
    return benchmark.stats.stats.median


def test_cgalloc_cold(benchmark):
    nodes: list[Node] = []

    def fresh():
        nodes.append(Node())
        _mountinfo(nodes[-1])
        return (), {}

    result = benchmark.pedantic(lambda: nodes[-1].cgalloc(), setup=fresh, rounds=ROUNDS)
    RESULTS["cgalloc cold"] = (_median(benchmark), f"{result['writes']} changes (mkdir + write)")
    for n in nodes:
        n.remove()


def test_cgalloc_rerun(benchmark):
    node = Node()
    _mountinfo(node)
    node.cgalloc()
    result = benchmark.pedantic(node.cgalloc, rounds=ROUNDS)
    RESULTS["cgalloc re-run"] = (_median(benchmark), f"{result['writes']} changes (mkdir + write)")
    node.remove()


def _shell(benchmark, name: str, rerun: bool) -> None:
    nodes: list[Node] = []
    writes: list[int] = []

    def fresh():
        node = Node()
        _mountinfo(node)
        script = node.script()
        writes.append(len(script.read_text().splitlines()) - 1)  # mkdirs + echos
        if rerun:
            subprocess.run(["bash", str(script)], check=True)
        nodes.append(node)
        return (script,), {}

    benchmark.pedantic(
        lambda s: subprocess.run(["bash", str(s)], check=True), setup=fresh, rounds=ROUNDS
    )
    RESULTS[name] = (_median(benchmark), f"{writes[0]} changes (mkdir + write)")
    for n in nodes:
        n.remove()


def test_shell_cold(benchmark):
    _shell(benchmark, "shell mkdir/echo cold", rerun=False)


def test_shell_rerun(benchmark):
    _shell(benchmark, "shell mkdir/echo re-run", rerun=True)


def test_libcgroup():
    reason = (
        "not installed"
        if shutil.which("cgcreate") is None
        else "cgcreate/cgset only act on mounted cgroupfs (they read /proc/mounts); the host's "
        "cgroups are not ours to write, so this column runs only inside the VM"
    )
    RESULTS["libcgroup cgcreate/cgset"] = (None, reason)
    pytest.skip(reason)


def table() -> list[str]:
    rows = [("contender", "median", "vs shell", "note")]
    for name, (secs, note) in RESULTS.items():
        kind = "re-run" if "re-run" in name else "cold"
        shell = RESULTS.get(f"shell mkdir/echo {kind}", (None, ""))[0]
        ratio = f"{secs / shell:.2f}x" if secs is not None and shell else "-"
        shown = f"{secs * 1000:.1f} ms" if secs is not None else "skipped"
        rows.append((name, shown, ratio, note))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
