"""In-VM pytest plugin: run only the host's selection and write each test's outcome as JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return report.longreprtext


class Reporter:
    """Registered inside the VM when CGALLOC_VM_REPORT names the JSON file to write."""

    def __init__(self, path: Path, select: set[str] | None) -> None:
        self.path = path
        self.select = select
        self.records: dict[str, dict] = {}
        self.collect_errors: list[dict] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list) -> None:
        if self.select is None:
            return
        keep = [i for i in items if i.nodeid in self.select]
        dropped = [i for i in items if i.nodeid not in self.select]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append({"nodeid": report.nodeid, "longrepr": report.longreprtext})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rec = self.records.setdefault(
            report.nodeid, {"outcome": "passed", "longrepr": "", "reason": "", "duration": 0.0}
        )
        rec["duration"] += report.duration
        xfail = getattr(report, "wasxfail", None)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if xfail is not None:
                rec["outcome"] = "xfailed" if report.skipped else "xpassed"
                rec["reason"] = xfail
            elif report.skipped:
                rec["outcome"], rec["reason"] = "skipped", _skip_reason(report)
            elif report.failed:
                rec["outcome"] = "failed" if report.when == "call" else "error"
                rec["longrepr"] = report.longreprtext
        elif report.when == "teardown" and report.failed:
            if rec["outcome"] in ("passed", "xpassed"):
                rec["outcome"] = "error"
            rec["longrepr"] += "\n--- teardown ---\n" + report.longreprtext

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        data = {"records": self.records, "collect_errors": self.collect_errors}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self.path)


def reporter_from_env() -> Reporter | None:
    """The reporter the VM's stage 2 asked for through the environment, if any."""
    path = os.environ.get("CGALLOC_VM_REPORT")
    if not path:
        return None
    select_file = os.environ.get("CGALLOC_VM_SELECT")
    select = None
    if select_file and os.path.exists(select_file):
        select = set(json.loads(Path(select_file).read_text()))
    return Reporter(Path(path), select)
