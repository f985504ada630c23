"""apply() without per-change hooks hands the changes to the core in batches (core.apply_ops,
csrc/apply_batch.c) — with progress lines BATCH at a time, without them the whole plan in one
call on a second thread: the same all-or-nothing as one call per change, at every position of
a plan longer than one batch, with the C core and with the pure one (a CC=false install).

A plain directory tree stands in for cgroupfs here (no fake kernel: its hooks would take the
per-change path); the real kernel runs the same path in tests/kernel."""

from __future__ import annotations

import pytest
from fakecgroup import FakeHost, snapshot

import cgalloc.host.core
from cgalloc.errors import CgallocError, HostError
from cgalloc.host.core import native, pure
from cgalloc.ops.apply import BATCH, Roots, apply
from cgalloc.ops.plan import Action, Plan
from cgalloc.ops.state import StateDir

PODS = BATCH + 44  # more than one batch


@pytest.fixture(params=[native, pure], ids=["native", "pure"])
def impl(request, monkeypatch):
    monkeypatch.setattr(cgalloc.host.core, "apply_ops", request.param.apply_ops)
    monkeypatch.setattr(cgalloc.host.core, "pack_ops", request.param.pack_ops)
    return request.param


@pytest.fixture(params=["batches", "whole"])
def progress(request):
    """A progress printer (apply makes BATCH changes per core call) or none (the whole plan in
    one call, on a second thread)."""
    return [].append if request.param == "batches" else None


def _tree(tmp_path):
    root = tmp_path / "cg"
    (root / "kubepods").mkdir(parents=True)
    (root / "kubepods" / "memory.max").write_text(
        "max"
    )  # no newline: a plain file keeps the restore as written
    (root / "kubepods" / "cpu.weight").write_text("100")
    return root


def _plan(root) -> Plan:
    m = str(root)
    actions = [
        Action("mkdir", m, f"kubepods/pod{i}", cgroup=f"kubepods/pod{i}") for i in range(PODS)
    ]
    actions += [
        Action("write", m, "kubepods", "memory.max", "max", "104857600", "kubepods"),
        Action("write", m, "kubepods", "cpu.weight", "100", "50", "kubepods"),
    ]
    return Plan(root=m, version="v2", actions=actions)


def _apply(impl, root, state, p, on_done=None):
    roots = Roots(lambda m: impl.open_root(m, allow_any_fs=True))
    host = FakeHost()
    with state.locked():
        return apply(p, state, state.load(), roots=roots, host=host, on_done=on_done)


def test_every_change_made_in_order_and_recorded(impl, tmp_path):
    root, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p, seen = _plan(root), []
    result = _apply(impl, root, state, p, seen.append)
    assert result.done == p.actions and seen == p.actions
    assert all((root / "kubepods" / f"pod{i}").is_dir() for i in range(PODS))
    assert (root / "kubepods" / "memory.max").read_text() == "104857600"
    assert (root / "kubepods" / "cpu.weight").read_text() == "50"
    record = state.load()
    assert len(record.created) == PODS
    assert record.changed[(str(root), "kubepods", "memory.max")] == "max"
    assert not (tmp_path / "state" / "journal.jsonl").exists()


# mkdir failing (the directory is there) at the start, around the batch boundary and last;
# then each write failing (its file is gone)
POSITIONS = [0, 1, BATCH - 1, BATCH, BATCH + 1, PODS - 1, PODS, PODS + 1]


@pytest.mark.parametrize("n", POSITIONS)
def test_change_n_failing_undoes_every_earlier_one(impl, progress, tmp_path, n):
    root, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(root)
    failing = p.actions[n]
    if failing.kind == "mkdir":
        (root / failing.path).mkdir()
    else:
        (root / failing.path / failing.file).unlink()
    before = snapshot(root)
    with pytest.raises(CgallocError) as info:
        _apply(impl, root, state, p, progress)
    assert f"{failing.describe(str(root))} failed" in str(info.value)
    assert f"all {n} earlier changes were undone" in str(info.value)
    assert snapshot(root) == before
    assert not (tmp_path / "state" / "journal.jsonl").exists()
    assert state.load().is_empty()


@pytest.mark.parametrize("n", [0, BATCH, PODS - 1, PODS])
def test_a_path_no_kernel_call_takes_is_undone_like_a_failed_change(impl, progress, tmp_path, n):
    # A lone surrogate outside surrogateescape's range cannot be encoded for a syscall: the
    # encoding raised UnicodeEncodeError out of apply, leaving the earlier changes made and
    # unrecorded (the hostile-input review, with a non-UTF-8 --kube-reserved-cgroup).
    root, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    p = _plan(root)
    bad = p.actions[n]
    if bad.kind == "mkdir":
        bad = Action("mkdir", bad.mount, bad.path + "\ud800", cgroup=bad.cgroup)
    else:
        bad = Action(
            "write", bad.mount, bad.path, bad.file + "\ud800", bad.old, bad.new, bad.cgroup
        )
    p.actions[n] = bad
    before = snapshot(root)
    with pytest.raises(CgallocError) as info:
        _apply(impl, root, state, p, progress)
    assert f"all {n} earlier changes were undone" in str(info.value)
    assert "surrogates not allowed" in str(info.value)
    assert snapshot(root) == before
    assert not (tmp_path / "state" / "journal.jsonl").exists()
    assert state.load().is_empty()


def test_the_callers_record_object_holds_the_changes_after_the_whole_plan(impl, tmp_path):
    """Later steps (setup's converge, its memo) update and save the record object apply was
    given: after the whole-plan path it holds every change, as the saved file does."""
    root, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    roots = Roots(lambda m: impl.open_root(m, allow_any_fs=True))
    with state.locked():
        record = state.load()
        apply(_plan(root), state, record, roots=roots, host=FakeHost())
        assert record == state.load()
    assert len(record.created) == PODS and record.boot == state.boot


@pytest.mark.parametrize("n", [0, 5, PODS + 1])
def test_a_mount_whose_root_cannot_be_opened_fails_its_first_change(impl, progress, tmp_path, n):
    """open_root refuses a mount with HostError (not an OSError): the change there fails and
    every earlier one is undone, on either path (it escaped apply with nothing undone)."""
    root, state = _tree(tmp_path), StateDir(str(tmp_path / "state"))
    other = tmp_path / "other"
    other.mkdir()
    p = _plan(root)
    p.actions.insert(n, Action("mkdir", str(other), "x", cgroup="x"))

    def opener(mount, allow_any_fs=False):
        if mount == str(other):
            raise HostError(f"{mount} is not a cgroup filesystem")
        return impl.open_root(mount, allow_any_fs=allow_any_fs)

    before = snapshot(root)
    host = FakeHost()
    with state.locked(), pytest.raises(CgallocError) as info:
        roots = Roots(lambda m: opener(m, allow_any_fs=True))
        apply(p, state, state.load(), roots=roots, host=host, on_done=progress)
    assert f"all {n} earlier changes were undone" in str(info.value)
    assert "is not a cgroup filesystem" in str(info.value)
    assert snapshot(root) == before


