"""Failures mid-setup: every change undone; a killed run converges; runs serialise; bad input
writes nothing."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakecgroup import KERNEL, FakeHost, fake_hierarchy, snapshot
from nodeargs import DESIRED, NODE_SYSTEM_RESERVED

from cgalloc.errors import CgallocError
from cgalloc.host import core
from cgalloc.model.nodeconfig import SYSTEM_RESERVED_RISK
from cgalloc.ops import plan
from cgalloc.ops.apply import Roots, apply
from cgalloc.ops.state import StateDir

REPO = Path(__file__).resolve().parents[2]


class FailingRoot:
    """The real core root, except that the Nth change (write or mkdir) fails with EIO."""

    def __init__(self, real, counter: list[int], fail_at: int):
        self._real, self._counter, self._fail_at = real, counter, fail_at

    def _tick(self) -> None:
        self._counter[0] += 1
        if self._counter[0] == self._fail_at:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    def write(self, rel, value):
        self._tick()
        self._real.write(rel, value)

    def mkdir(self, rel):
        self._tick()
        self._real.mkdir(rel)

    def rmdir(self, rel):
        self._real.rmdir(rel)


def _prepared(base: Path, version: str):
    root, h = fake_hierarchy(base, version)
    if version == "v2":
        # a pre-existing reserved cgroup, so rollback also restores values it did not create
        (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
        (root / "system.slice").mkdir()
        KERNEL.after_mkdir(str(root), "system.slice")
    return root, h


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_nth_change_failing_restores_the_tree_exactly(tmp_path, version):
    total = len(plan.build(_prepared(tmp_path / "count", version)[1], DESIRED).actions)
    assert total > 10
    for n in range(1, total + 1):
        base = tmp_path / f"run{n}"
        root, h = _prepared(base, version)
        before = snapshot(root)
        state = StateDir(str(base / "state"))
        counter = [0]

        def opener(mount, allow_any_fs=False, counter=counter, n=n):
            return FailingRoot(core.open_root(mount, allow_any_fs=allow_any_fs), counter, n)

        host = FakeHost(kernel=KERNEL)
        with state.locked(), pytest.raises(CgallocError) as exc:
            p = plan.build(h, DESIRED)
            assert len(p.actions) == total
            roots = Roots(lambda m: opener(m, allow_any_fs=True))
            apply(p, state, state.load(), roots=roots, host=host)
        assert "Input/output error (errno 5)" in str(exc.value)
        assert str(exc.value).endswith(
            f"all {n - 1} earlier changes were undone, the node is as it was."
        )
        assert snapshot(root) == before, f"tree differs after failing change {n}"
        assert sorted(os.listdir(base / "state")) == ["lock"]


def _env(base: Path) -> dict[str, str]:
    return dict(os.environ)


def _args(base: Path, *more: str, pause_after: int | None = None) -> list[str]:
    pause = ["--pause-after", str(pause_after)] if pause_after is not None else []
    return [
        sys.executable,
        str(REPO / "tests" / "fakecli.py"),
        str(base),
        *pause,
        "--",
        *more,
        "--cgroupfs",
        str(base / "cgroup"),
        "--state-dir",
        str(base / "state"),
    ]


NODE = NODE_SYSTEM_RESERVED


def _start_paused(base: Path, after: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        _args(base, "setup", *NODE, pause_after=after),
        env=_env(base),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # before the pause: the system-reserved warning, then one progress line per change made
    lines = [proc.stderr.readline().rstrip("\n") for _ in range(after + 2)]
    if "failCgroupV1" in lines[0]:  # a v1 tree: the default kubelet (1.37) refuses cgroup v1
        lines = [*lines[1:], proc.stderr.readline().rstrip("\n")]
    assert lines[0] == f"cgalloc: warning: {SYSTEM_RESERVED_RISK}", lines
    assert [line.split("]")[0] for line in lines[1:-1]] == [
        f"[{i}/{lines[1].split('/')[1].split(']')[0]}" for i in range(1, after + 1)
    ], lines
    assert lines[-1] == f"cgalloc: test pause after {after} changes", lines
    return proc


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_killed_setup_converges_and_tears_down(tmp_path, version):
    root, _ = fake_hierarchy(tmp_path, version)
    before = snapshot(root)
    proc = _start_paused(tmp_path, 5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "state" / "journal.jsonl").exists()
    rerun = subprocess.run(
        _args(tmp_path, "setup", *NODE), env=_env(tmp_path), capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    verify = subprocess.run(
        [*_args(tmp_path, "verify", *NODE)[:-2]], env=_env(tmp_path), capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout
    assert verify.stdout.strip() == "in sync: the tree matches"
    # the killed run's mkdirs were journaled, so teardown removes them too
    down = subprocess.run(_args(tmp_path, "teardown"), env=_env(tmp_path), capture_output=True)
    assert down.returncode == 0, down.stdout
    assert snapshot(root) == before


def test_two_setups_serialise_on_the_lock(tmp_path):
    fake_hierarchy(tmp_path, "v2")
    first = _start_paused(tmp_path, 3)
    second = subprocess.Popen(
        _args(tmp_path, "setup", *NODE),
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            second.wait(timeout=1.5)  # blocked on the lock the paused run holds
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    # it planned after the first run's 3 changes: those are not repeated
    assert "enable +cpu +cpuset +memory +hugetlb +pids in cgroup.subtree_control" not in out
    assert out.strip().endswith("changes")


def test_reserved_cgroup_inside_kubepods_is_bad_input_and_writes_nothing(tmp_path):
    root, _ = fake_hierarchy(tmp_path, "v1")
    before = snapshot(root)
    args = [*NODE[:-1], "/kubepods/system"]
    run = subprocess.run(
        _args(tmp_path, "setup", *args), env=_env(tmp_path), capture_output=True, text=True
    )
    assert run.returncode == 2
    assert run.stderr == (
        "cgalloc: systemReservedCgroup (--system-reserved-cgroup) /kubepods/system must not be "
        "kubepods (/kubepods) or inside it; give a cgroup outside the pods' tree, "
        "e.g. /system.slice.\n"
    )
    assert snapshot(root) == before
