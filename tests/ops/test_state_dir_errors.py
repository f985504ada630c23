"""A --state-dir that cannot be made is an error at once, not a wait: the lock's retry is for
a refused run removing the directory between our makedirs and open, and only that."""

from __future__ import annotations

import os

import pytest

from cgalloc.errors import CgallocError, HostError, InputError
from cgalloc.ops.state import StateDir

pytestmark = pytest.mark.usefixtures("no_hang")


@pytest.mark.parametrize("path", ["", "a\x00b"])
def test_an_empty_or_nul_path_is_refused_as_input(path):
    with pytest.raises(InputError, match=r"--state-dir .* names no directory"):
        StateDir(path)


def test_a_path_below_a_dangling_symlink_is_a_host_error(tmp_path):
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    state = StateDir(str(tmp_path / "dangling" / "state"))
    with (
        pytest.raises(HostError, match=r"cannot create the state directory .*--state-dir"),
        state.locked(),
    ):
        pass
    assert not (tmp_path / "gone").exists()


def test_a_directory_the_kernel_will_not_make_is_a_host_error():
    if not os.path.isdir("/proc/sys"):
        pytest.skip("no /proc/sys here")
    state = StateDir("/proc/sys/cgalloc-no-such-dir/state")
    with pytest.raises(HostError, match="--state-dir"), state.locked():
        pass


def test_the_lock_is_still_taken_in_a_new_directory(tmp_path):
    path = tmp_path / "a" / "b"
    with StateDir(str(path)).locked():
        assert (path / "lock").exists()


@pytest.mark.parametrize("name", ["owned.json", "journal.jsonl", "systemd.json"])
def test_a_fifo_in_place_of_a_state_file_is_refused_not_waited_on(tmp_path, name):
    from cgalloc.ops.units import UnitRecord

    os.mkfifo(tmp_path / name)
    state = StateDir(str(tmp_path))
    with pytest.raises(InputError, match=rf"--state-dir {tmp_path}: {name} cannot be used"):
        if name == "systemd.json":
            UnitRecord.load(state)
        else:
            state.peek()


def test_a_record_larger_than_the_bound_is_refused(tmp_path, monkeypatch):
    import cgalloc.ops.state

    monkeypatch.setattr(cgalloc.ops.state, "STATE_FILE_LIMIT", 100)
    (tmp_path / "owned.json").write_text("{" + " " * 200 + "}")
    with pytest.raises(InputError, match="it is larger than"):
        StateDir(str(tmp_path)).peek()


@pytest.mark.parametrize("error", [InputError, HostError, CgallocError])
def test_a_directory_this_run_made_goes_again_when_the_run_fails(tmp_path, error):
    path = tmp_path / "state"
    with pytest.raises(error), StateDir(str(path)).locked():
        raise error("refused")
    assert not path.exists()


def test_a_directory_that_holds_a_record_stays_when_the_run_fails(tmp_path):
    path = tmp_path / "state"
    with pytest.raises(HostError), StateDir(str(path)).locked():
        (path / "owned.json").write_text("{}")
        raise HostError("the host cannot")
    assert (path / "owned.json").exists()
