"""setup's report of an applied plan from what it prepared while the core made the changes
(cli/setup.py prepare_ready, report_doc): the same document, and the same -o json/yaml text,
as one built after the changes; the prepared done list only for a run that made exactly the
plan's actions (a process gone before its move is not in ``result.done``)."""

from __future__ import annotations

import json

import pytest

from cgalloc import plan_memo
from cgalloc.apply import Result
from cgalloc.cli.render import OutputFormat, dumps
from cgalloc.cli.setup import prepare_ready, report_doc
from cgalloc.plan import Action, Plan


def _plan() -> Plan:
    m = "/sys/fs/cgroup/memory"
    actions = [Action("mkdir", m, f"kubepods/pod{i}", cgroup=f"kubepods/pod{i}") for i in range(3)]
    actions.append(Action("write", m, "kubepods", "memory.limit_in_bytes", "max", "5", "kubepods"))
    actions.append(Action("move", m, "kube.slice", "cgroup.procs", "/", "4242", "kube.slice",
                          note="kubelet"))  # fmt: skip
    return Plan(root="/sys/fs/cgroup", version="v1", actions=actions, warnings=["w"])


def _plain(plan: Plan, result: Result) -> dict:
    """The report as setup built it before it prepared anything."""
    return {"dryRun": False, "plan": plan.to_json(), **result.to_json()}


@pytest.mark.parametrize("output", [OutputFormat.json, OutputFormat.yaml])
@pytest.mark.parametrize("made", [5, 4, 0], ids=["all", "move-skipped", "none"])
def test_the_report_from_what_was_prepared_is_the_plain_one(output, made):
    p = _plan()
    ready: dict = {}
    prepare_ready(ready, True, output, False, p)
    result = Result(p.root, done=p.actions[:made])
    assert dumps(report_doc(p, result, ready), output) == dumps(_plain(p, result), output)
    if output is OutputFormat.json:
        doc = json.loads(dumps(report_doc(p, result, ready), output))
        assert [a["path"] for a in doc["done"]] == [a.where(p.root) for a in p.actions[:made]]
    assert ready["mounts"] == plan_memo.mounts_text(p)  # the memo's part


def test_quiet_and_table_prepare_only_the_memo_part():
    p = _plan()
    for output, quiet in [(OutputFormat.json, True), (OutputFormat.table, False)]:
        ready: dict = {}
        prepare_ready(ready, True, output, quiet, p)
        assert set(ready) == {"mounts"}
    ready = {}
    prepare_ready(ready, False, OutputFormat.table, False, p)
    assert ready == {}
