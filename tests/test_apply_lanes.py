"""apply() without per-change hooks makes a plan spanning several mounts (the v1 hierarchies)
as lanes (cgalloc/lanes.py): one core call per lane, each on a thread of its own, a mount's
changes all in one lane and in plan order. The all-or-nothing holds across lanes: a change
failing in one stops the other before its next change, and every change made in either is
undone; a signal stops both.

Two plain directories stand in for two hierarchies here; the real v1 kernel runs the same path
in tests/kernel (the qemu lanes have two vCPUs)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from fakecgroup import snapshot

import cgalloc.core
from cgalloc import lanes
from cgalloc.apply import Interrupted, Roots, SignalGuard, TestSwitches, apply
from cgalloc.core import native, pure
from cgalloc.errors import CgallocError
from cgalloc.ownership import StateDir
from cgalloc.plan import Action, Plan

PODS = 60  # per mount: with the two writes, more than lanes.MIN_CHANGES in all


@pytest.fixture(params=[native, pure], ids=["native", "pure"])
def impl(request, monkeypatch):
    monkeypatch.setattr(cgalloc.core, "apply_ops", request.param.apply_ops)
    monkeypatch.setattr(cgalloc.core, "pack_ops", request.param.pack_ops)
    return request.param


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch):
    """Lanes are dealt only on a process allowed two CPUs: say so, whatever runs the tests."""
    monkeypatch.setattr(lanes, "cpus_allowed", lambda: 2)


def _tree(tmp_path):
    """Two hierarchies, "memory" and "cpu", each with a kubepods cgroup and one of its files."""
    base = tmp_path / "cg"
    for mount, file, value in (
        ("memory", "memory.limit_in_bytes", "max"),
        ("cpu", "cpu.shares", "2"),
    ):
        (base / mount / "kubepods").mkdir(parents=True)
        (base / mount / "kubepods" / file).write_text(value)  # no newline: restored as written
    return base


def _plan(base) -> Plan:
    """Each pod made in memory then cpu (as a v1 plan interleaves hierarchies), then a write in
    each."""
    mem, cpu = str(base / "memory"), str(base / "cpu")
    actions = []
    for i in range(PODS):
        actions += [
            Action("mkdir", m, f"kubepods/pod{i}", cgroup=f"kubepods/pod{i}") for m in (mem, cpu)
        ]
    actions += [
        Action("write", mem, "kubepods", "memory.limit_in_bytes", "max", "104857600", "kubepods"),
        Action("write", cpu, "kubepods", "cpu.shares", "2", "1024", "kubepods"),
    ]
    return Plan(root=str(base), version="v1", actions=actions)


def _apply(impl, p, state, **kw):
    roots = Roots(opener=impl.open_root, allow_any_fs=True)
    with state.locked():
        return apply(
            p, state, state.load(), roots=roots, switches=TestSwitches(allow_any_fs=True), **kw
        )


def _calls(
    monkeypatch, impl
) -> list[tuple[threading.Thread, list[str], int, BaseException | None]]:
    """Each core call as it returns: (its thread, the mount of each op, how many made, error).
    The thread objects, not their idents: an ident is reused once a thread has ended."""
    calls = []

    def apply_ops(packed, stop=None):
        n, err = impl.apply_ops(packed, stop)
        mounts = [root.path for root, _p, _v in packed.ops]
        calls.append((threading.current_thread(), mounts, n, err))
        return n, err

    monkeypatch.setattr(cgalloc.core, "apply_ops", apply_ops)
    return calls


# ------------------------------------------------------------------------- the split


def _changes(
    counts: dict[str, int], kind: str = "mkdir", file: str = ""
) -> list[tuple[str, str, str]]:
    return [(kind, m, file) for m, n in counts.items() for _ in range(n)]


def test_one_mount_a_small_plan_or_one_cpu_is_one_lane():
    every = list(range(100))
    assert lanes.split(_changes({"/v2": 100}), cpus=2) == [every]
    assert lanes.split(_changes({"/a": 30, "/b": 30}), cpus=2) == [list(range(60))]
    assert lanes.split(_changes({"/a": 50, "/b": 50}), cpus=1) == [every]


def test_each_mount_whole_in_one_lane_in_plan_order():
    changes = [("mkdir", m, "") for _ in range(40) for m in ("/a", "/b", "/c")]
    split = lanes.split(changes, cpus=2)
    assert len(split) == 2 and sorted(i for lane in split for i in lane) == list(range(120))
    for lane in split:
        assert lane == sorted(lane)
        mounts = {changes[i][1] for i in lane}
        assert all(
            {changes[i][1] for i in other} & mounts == set() for other in split if other is not lane
        )


def test_mounts_dealt_largest_first_to_the_lighter_lane():
    # costs: /cpuset 40 mkdirs + 40 cpuset.cpus writes = 40*30 + 40*100 = 5200; /memory 60
    # mkdirs = 1800; /cpu 50 mkdirs = 1500; /pids 40 mkdirs = 1200. Largest first to the
    # lighter lane: cpuset | memory, cpu (3300), pids (4500)
    changes = _changes({"/cpuset": 40}) + _changes({"/cpuset": 40}, "write", "cpuset.cpus")
    changes += _changes({"/memory": 60, "/cpu": 50, "/pids": 40})
    split = lanes.split(changes, cpus=4)
    assert [sorted({changes[i][1] for i in lane}) for lane in split] == [
        ["/cpuset"],
        ["/cpu", "/memory", "/pids"],
    ]


def test_equal_costs_split_the_same_way_every_time():
    changes = _changes({"/b": 40, "/a": 40})
    assert lanes.split(changes, cpus=2) == [list(range(40, 80)), list(range(40))]  # "/a" first


# ------------------------------------------------------------------------- apply in lanes


def test_each_lane_is_one_core_call_on_a_thread_of_its_own(impl, tmp_path, monkeypatch):
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p, calls = _plan(base), _calls(monkeypatch, impl)
    result = _apply(impl, p, state)
    assert result.done == p.actions  # in plan order, whichever lane made them
    assert len(calls) == 2
    assert all(c[0] is not threading.current_thread() for c in calls)
    assert calls[0][0] is not calls[1][0]
    lanes_seen = sorted((sorted(set(mounts)), len(mounts), n) for _t, mounts, n, _e in calls)
    assert lanes_seen == [
        ([str(base / "cpu")], PODS + 1, PODS + 1),
        ([str(base / "memory")], PODS + 1, PODS + 1),
    ]
    for mount in ("memory", "cpu"):
        assert all((base / mount / "kubepods" / f"pod{i}").is_dir() for i in range(PODS))
    assert (base / "memory" / "kubepods" / "memory.limit_in_bytes").read_text() == "104857600"
    assert (base / "cpu" / "kubepods" / "cpu.shares").read_text() == "1024"
    record = state.load()
    assert len(record.created) == 2 * PODS
    assert record.changed[(str(base / "cpu"), "kubepods", "cpu.shares")] == "2"
    assert not (tmp_path / "state" / "journal.jsonl").exists()


# a mkdir failing (it is there) first, midway and last in its lane, in either mount; then the
# last write
POSITIONS = [0, 1, 2 * PODS // 2, 2 * PODS // 2 + 1, 2 * PODS - 2, 2 * PODS - 1, 2 * PODS + 1]


@pytest.mark.parametrize("n", POSITIONS)
def test_a_change_failing_in_one_lane_undoes_both(impl, tmp_path, n):
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(base)
    failing = p.actions[n]
    if failing.kind == "mkdir":
        os.mkdir(os.path.join(failing.mount, failing.path))
    else:
        os.unlink(os.path.join(failing.mount, failing.path, failing.file))
    before = snapshot(base)
    with pytest.raises(CgallocError) as info:
        _apply(impl, p, state)
    assert f"{failing.describe(str(base))} failed" in str(info.value)
    assert "earlier changes were undone, the node is as it was" in str(info.value)
    assert snapshot(base) == before
    assert not (tmp_path / "state" / "journal.jsonl").exists()
    assert state.load().is_empty()


def test_two_lanes_failing_name_the_first_change_in_plan_order(tmp_path):
    # Two lanes failing at once is a race a run cannot stage (the first to fail stops the
    # other): the outcome of two calls is folded as apply folds them.
    from cgalloc.apply import _Lane, _lanes_made

    p = _plan(_tree(tmp_path))
    memory = [i for i, a in enumerate(p.actions) if "memory" in a.mount]
    cpu = [i for i, a in enumerate(p.actions) if "memory" not in a.mount]
    jobs = [_Lane(memory, None), _Lane(cpu, None)]
    done: list = []
    stopped = _lanes_made(p, jobs, [(5, OSError("memory")), (3, OSError("cpu"))], done.extend)
    assert stopped.what == p.actions[cpu[3]].describe(
        p.root
    )  # cpu's 4th change: index 7 of the plan
    assert str(stopped.exc) == "cpu"
    assert done == [p.actions[i] for i in sorted(memory[:5] + cpu[:3])]
    assert _lanes_made(p, jobs, [(5, None), (len(cpu), None)], done.extend).exc is None  # a signal
    assert _lanes_made(p, jobs, [(len(memory), None), (len(cpu), None)], done.extend) is None


class _HeldLane:
    """A lane's first change (the cpu lane's, or ``mount``'s) is a write into a FIFO, which
    holds that lane's core call until the reading end is opened (after 10 s at the latest, so
    a broken test fails)."""

    def __init__(self, base, p: Plan, mount: str = "cpu") -> None:
        where = str(base / mount)
        self.path = base / mount / "kubepods" / "fifo"
        os.mkfifo(self.path)
        at = next(i for i, a in enumerate(p.actions) if a.mount == where)
        p.actions.insert(at, Action("write", where, "kubepods", "fifo", "", "1", "kubepods"))
        self.fd: int | None = None
        self.timer = threading.Timer(10, self.open_reader)
        self.timer.start()

    def open_reader(self) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)

    def close(self) -> None:
        self.timer.cancel()
        self.open_reader()
        os.close(self.fd)


def _wait(condition) -> None:
    deadline = time.monotonic() + 10
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_failure_stops_the_other_lane_before_its_next_change(impl, tmp_path, monkeypatch):
    # memory's second mkdir fails while cpu's lane is held at its first change (the FIFO) or
    # has not reached it yet: once that write is let through, the cpu lane makes nothing more
    # (without the stop it would make all its 61 changes)
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(base)
    held = _HeldLane(base, p)
    os.mkdir(base / "memory" / "kubepods" / "pod1")
    calls, guard = _calls(monkeypatch, impl), SignalGuard()

    def meanwhile():
        _wait(lambda: bool(guard.stop))  # the memory lane has failed
        held.open_reader()

    try:
        with pytest.raises(CgallocError) as info:
            _apply(impl, p, state, signals=guard, meanwhile=meanwhile)
    finally:
        held.close()
    assert "mkdir" in str(info.value) and "pod1" in str(info.value)
    made = {mounts[0]: n for _t, mounts, n, _e in calls}
    assert made[str(base / "memory")] == 1  # pod0
    assert made[str(base / "cpu")] in (0, 1)  # the FIFO's write, if the lane had got to it
    assert sorted(os.listdir(base / "cpu" / "kubepods")) == ["cpu.shares", "fifo"]
    assert not guard.received  # a failure, not a signal


def test_a_signal_stops_both_lanes_and_undoes_them(tmp_path, monkeypatch):
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p, before = _plan(base), snapshot(base)
    held = _HeldLane(base, p)

    def meanwhile():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the guard's handler runs here, the main thread
        finally:
            held.open_reader()

    try:
        with pytest.raises(Interrupted) as info:
            _apply(native, p, state, meanwhile=meanwhile)
    finally:
        held.close()
    held.path.unlink()
    assert str(info.value).startswith("setup interrupted by SIGTERM; all ")
    assert str(info.value).endswith(" earlier changes were undone, the node is as it was.")
    assert snapshot(base) == before
    assert not (tmp_path / "state" / "journal.jsonl").exists()


def test_no_thread_to_start_makes_both_lanes_on_this_one(impl, tmp_path, monkeypatch):
    def refuse(self):
        raise RuntimeError("can't start new thread")

    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p, calls = _plan(base), _calls(monkeypatch, impl)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert _apply(impl, p, state).done == p.actions
    assert all(t is threading.current_thread() for t, _m, _n, _e in calls)
    assert len(calls) == 2
    assert len(state.load().created) == 2 * PODS


def test_the_stop_flag_a_failed_lane_set_is_clear_after_it(impl, tmp_path):
    # The guard's flag stops the other lanes; once apply has failed it is clear again, so a
    # library caller using the guard for another apply is not stopped by an old failure.
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(base)
    os.mkdir(base / "memory" / "kubepods" / "pod5")
    guard = SignalGuard()
    with pytest.raises(CgallocError):
        _apply(impl, p, state, signals=guard)
    assert not guard.stop and not guard.received
    os.rmdir(base / "memory" / "kubepods" / "pod5")
    assert _apply(impl, _plan(base), state, signals=guard).done == p.actions


class Broken(Exception):
    """What a lane's core call raised (not an error it returned)."""


def test_a_lane_that_raises_stops_the_other_before_its_next_change(tmp_path, monkeypatch):
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(base)
    held = _HeldLane(base, p)
    guard, made = SignalGuard(), []

    def apply_ops(packed, stop=None):
        if packed.ops[0][0].path.endswith("memory"):
            raise Broken
        n, err = native.apply_ops(packed, stop)
        made.append(n)
        return n, err

    monkeypatch.setattr(cgalloc.core, "apply_ops", apply_ops)

    def meanwhile():
        _wait(lambda: bool(guard.stop))  # the memory lane has raised
        held.open_reader()

    try:
        with pytest.raises(Broken):
            _apply(native, p, state, signals=guard, meanwhile=meanwhile)
    finally:
        held.close()
    assert made in ([0], [1])  # the FIFO's write at most, of the cpu lane's 62
    assert not guard.stop


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.parametrize("renice", [True, False])
def test_this_thread_prepares_at_the_lowest_priority_while_the_lanes_run(
    tmp_path, monkeypatch, renice
):
    # Beside two lanes the preparing would take a share of the CPUs their kernel work waits
    # for: this thread lowers its priority while they run; the last lane to end puts it back
    # (the preparing is not left at the lowest once they have ended), only where it may be put
    # back — else it is left alone. The lanes' own threads keep theirs.
    if renice and not lanes.may_renice(_nice()):
        pytest.skip("this process may not come back from nice 19 (no CAP_SYS_NICE here)")
    monkeypatch.setattr(lanes, "may_renice", lambda old: renice)
    base, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(base)
    held = [_HeldLane(base, p, m) for m in ("cpu", "memory")]  # running until this one looks
    before, seen, in_lanes = _nice(), [], []
    if before == lanes.LOWEST:
        pytest.skip("the tests already run at the lowest priority")

    def apply_ops(packed, stop=None):
        in_lanes.append(_nice())
        return native.apply_ops(packed, stop)

    monkeypatch.setattr(cgalloc.core, "apply_ops", apply_ops)

    def meanwhile():
        seen.append(_nice())
        for h in held:
            h.open_reader()
        _wait(lambda: _nice() == before)  # the last lane's thread puts it back
        seen.append(_nice())

    try:
        _apply(native, p, state, meanwhile=meanwhile)
    finally:
        for h in held:
            h.close()
    assert seen == [lanes.LOWEST if renice else before, before]
    assert in_lanes == [before, before]
    assert _nice() == before


def test_beside_one_lane_this_thread_keeps_its_priority(tmp_path, monkeypatch):
    monkeypatch.setattr(lanes, "may_renice", lambda old: True)
    base, state, seen = _tree(tmp_path), StateDir(str(tmp_path / "state")), []
    mem = str(base / "memory")
    p = Plan(root=str(base), version="v1", actions=[
        Action("mkdir", mem, f"kubepods/pod{i}", cgroup=f"kubepods/pod{i}") for i in range(2 * PODS)
    ])  # fmt: skip
    assert len(p.actions) >= lanes.MIN_CHANGES  # one lane for its one mount, not its size
    before = _nice()
    _apply(native, p, state, meanwhile=lambda: seen.append(_nice()))
    assert seen == [before] and _nice() == before


@pytest.mark.parametrize(
    ("old", "limit", "caps", "uid_map", "expect"),
    [
        (0, 0, 1 << 23, "         0          0 4294967295\n", True),  # root, initial namespace
        (0, 0, 1 << 23, "         0     100000      65536\n", False),  # a user namespace's
        (0, 0, 0, "         0          0 4294967295\n", False),  # no CAP_SYS_NICE
        (0, -1, 0, "0 1000 1\n", True),  # RLIMIT_NICE unlimited
        (0, 20, 0, "0 1000 1\n", True),  # RLIMIT_NICE 20 allows nice 0
        (5, 15, 0, "0 1000 1\n", True),
        (0, 19, 0, "0 1000 1\n", False),  # only down to nice 1
        (-5, 20, 1 << 23, "0 1000 1\n", False),
    ],
)
def test_a_lowered_priority_is_taken_only_where_it_can_be_put_back(
    old, limit, caps, uid_map, expect
):
    # setpriority(2): lowering a nice value needs CAP_SYS_NICE in the initial user namespace
    # or an RLIMIT_NICE of at least 20 - nice (getrlimit(2)).
    assert lanes.restorable(old, limit, caps, uid_map) is expect
