"""The record and the journal read back exactly what was written, for any string a cgroup or
file name can hold."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from cgalloc.ops.state import Record, StateDir, _record_text

# every kind of text a name may hold: quotes, backslashes, controls, separators, surrogates
TEXT = st.text(st.characters(exclude_categories=[]), max_size=12)


def _record(created, changed, enabled, written, boot) -> Record:
    rec = Record(boot=boot)
    rec.created = set(created)
    rec.changed = dict(changed)
    rec.enabled = {k: set(v) for k, v in enabled}
    rec.written = set(written)
    return rec


def test_record_rows_are_sorted_and_read_back():
    rec = _record(
        [("/m", "b"), ("/m", "a")],
        [(("/m", "x", "cpu.shares"), "2"), (("/m", "a", "cpu.shares"), "")],
        [(("/m", ""), ["pids", "cpu"])],
        [("/n", "a", "f"), ("/m", "a", "f")],
        "boot-1",
    )
    data = rec.to_json()
    assert data["created"] == [["/m", "a"], ["/m", "b"]]
    assert data["changed"] == [["/m", "a", "cpu.shares", ""], ["/m", "x", "cpu.shares", "2"]]
    assert data["enabled"] == [["/m", "", ["cpu", "pids"]]]
    assert data["written"] == [["/m", "a", "f"], ["/n", "a", "f"]]
    back = Record.from_json(json.loads(_record_text(data)))
    assert (back.created, back.changed, back.enabled, back.written, back.boot) == (
        rec.created, rec.changed, rec.enabled, rec.written, rec.boot
    )  # fmt: skip


CHANGE = st.one_of(
    st.tuples(st.just("mkdir"), TEXT, TEXT, st.just(""), st.none(), st.just(())),
    st.tuples(st.just("write"), TEXT, TEXT, TEXT, st.none() | TEXT, st.just(())),
    st.tuples(st.just("enable"), TEXT, TEXT, st.just(""), st.none(), st.lists(TEXT, max_size=3)),
)


def _entry(kind, mount, path, file, old, controllers) -> dict:
    entry: dict = {"kind": kind, "mount": mount, "path": path}
    if kind == "write":
        entry.update(file=file, old=old)
    if kind == "enable":
        entry["controllers"] = sorted(controllers)
    return entry


def test_a_journal_is_read_back_entry_for_entry(tmp_path):
    state = StateDir(str(tmp_path / "state"), boot="")
    changes = [
        ("mkdir", "/m", "kubepods/pod\u2028a", "", None, ()),
        ("write", "/m", "kubepods", "cpu.shares", "1024", ()),
        ("write", "/m", "kubepods/pod\u2028a", "cpu.shares", None, ()),
        ("enable", "/m", "", "", None, ["pids", "cpu"]),
    ]
    with state.locked():
        state.journal(changes)
        assert state._read_journal() == [{**_entry(*c), "boot": ""} for c in changes]
        rec = state.load()  # folds the journal in, as after a killed run
    assert rec.created == {("/m", "kubepods/pod\u2028a")}
    assert rec.changed == {("/m", "kubepods", "cpu.shares"): "1024"}
    assert rec.written == {("/m", "kubepods/pod\u2028a", "cpu.shares")}
    assert rec.enabled == {("/m", ""): {"cpu", "pids"}}
