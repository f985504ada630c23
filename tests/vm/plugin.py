"""pytest glue for the VM lanes.

On the host each test in tests/kernel/ becomes one item per lane it runs in (`test_y[vm-v2]`;
a module picks its lanes with a module-level ``LANES`` tuple, default v2 and v1); the first
item of a lane boots that lane's VM once, which runs every selected in-VM test, and each item
then reports its in-VM outcome. Inside the VM (CGALLOC_VM_LANE set) the tests run as usual and
`report.Reporter` writes their outcomes for the host.
"""

from __future__ import annotations

import compileall
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from . import initramfs, qemu
from .prereqs import MissingPrerequisite, Prereqs, find_prereqs
from .report import reporter_from_env

KERNEL_TESTS = Path(__file__).resolve().parent.parent / "kernel"
# Evaluated on the host these would describe the host, not the VM: the VM applies them.
# pytest-timeout's "timeout" bounds the in-VM test; on the host item it would bound the lane.
_VM_SIDE_MARKS = {
    "skip", "skipif", "xfail", "usefixtures", "parametrize", "filterwarnings", "timeout",
}  # fmt: skip


def configure(config: pytest.Config) -> None:
    """Called from tests/conftest.py's pytest_configure."""
    if os.environ.get("CGALLOC_VM_LANE"):
        reporter = reporter_from_env()
        if reporter is not None:
            config.pluginmanager.register(reporter, "cgalloc-vm-report")
    else:
        config.pluginmanager.register(HostLanes(config), "cgalloc-vm-lanes")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def lane_item_name(name: str, lane: str) -> str:
    """`test_y` -> `test_y[vm-v2]`; `test_y[a]` -> `test_y[a-vm-v2]`."""
    if name.endswith("]"):
        return f"{name[:-1]}-vm-{lane}]"
    return f"{name}[vm-{lane}]"


def _headline(longrepr: str) -> str:
    """The first `E   ` line of a pytest failure report (its last line if none)."""
    lines = longrepr.strip().splitlines() or [""]
    return next((ln[1:].strip() for ln in lines if ln.startswith("E ")), lines[-1])


def item_lanes(item: pytest.Item) -> tuple[str, ...]:
    """The lanes a tests/kernel test runs in: its module's ``LANES`` tuple, else the default
    ones (every lane but the systemd one)."""
    module = getattr(item, "module", None)
    lanes = tuple(getattr(module, "LANES", qemu.DEFAULT_LANES))
    unknown = [lane for lane in lanes if lane not in qemu.LANES]
    if unknown:
        raise pytest.UsageError(
            f"{item.path}: LANES names unknown lane(s) {unknown}; known: {list(qemu.LANES)}"
        )
    return lanes


class VMTestFailed(Exception):
    """The in-VM test failed; the message is its in-VM report."""


class VMLaneItem(pytest.Item):
    """The host stand-in for one in-VM test in one lane."""

    def __init__(self, *, lane: str, inner_nodeid: str, lanes: HostLanes, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lane = lane
        self.inner_nodeid = inner_nodeid
        self.lanes = lanes

    def runtest(self) -> None:
        run = self.lanes.run(self.lane, self.session)
        if run.error:
            if run.lane in self.lanes.reported_errors:
                pytest.fail(f"vm-{run.lane}: {run.error} (see its first item)", pytrace=False)
            self.lanes.reported_errors.add(run.lane)
            pytest.fail(
                f"vm-{run.lane}: {run.error}\n--- serial log tail ({run.serial_log}) ---\n"
                f"{run.serial_tail()}",
                pytrace=False,
            )
        rec = run.records.get(self.inner_nodeid)
        if rec is None:
            errors = "\n".join(e["longrepr"] for e in run.collect_errors)
            pytest.fail(
                f"vm-{run.lane} did not report {self.inner_nodeid}\n{errors}", pytrace=False
            )
        outcome = rec["outcome"]
        if outcome == "skipped":
            pytest.skip(f"in vm-{run.lane}: {rec['reason']}")
        if outcome == "xfailed":
            pytest.xfail(rec["reason"])
        if outcome in ("failed", "error"):
            raise VMTestFailed(
                f"in vm-{run.lane} ({outcome}): {_headline(rec['longrepr'])}\n{rec['longrepr']}"
            )

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, VMTestFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        # a line number: a module-level skipif (inherited from the module) is evaluated on the
        # host too, and pytest reports such a skip at the item's location
        return self.path, 0, self.nodeid


class HostLanes:
    """Host-side plugin: lane items at collection, one VM boot per lane per session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.runs: dict[str, qemu.LaneRun] = {}
        self.reported_errors: set[str] = set()
        self._prereqs: Prereqs | MissingPrerequisite | None = None
        self._workdir: Path | None = None
        self._pending: dict[str, Future[qemu.LaneRun]] = {}
        self._pool: ThreadPoolExecutor | None = None

    @pytest.hookimpl(tryfirst=True)  # before -k/-m deselection, so they see the lane items
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        lane_items: dict[str, list[pytest.Item]] = {lane: [] for lane in qemu.LANES}
        rest = []
        for item in items:
            if isinstance(item, VMLaneItem) or KERNEL_TESTS not in item.path.parents:
                rest.append(item)
                continue
            for lane in item_lanes(item):
                lane_items[lane].append(self._lane_item(item, lane))
        # Last: the first item of a lane waits for its whole VM run, and every host test runs
        # meanwhile on the core the VMs leave (in place, the host tests after tests/kernel/
        # ran only once the last lane had ended: about a minute more).
        items[:] = rest + [i for lane in qemu.LANES for i in lane_items[lane]]

    def _lane_item(self, item: pytest.Item, lane: str) -> VMLaneItem:
        new = VMLaneItem.from_parent(
            item.parent,
            name=lane_item_name(item.name, lane),
            lane=lane,
            inner_nodeid=item.nodeid,
            lanes=self,
        )
        new.add_marker("vm")
        for mark in item.own_markers:
            if mark.name not in _VM_SIDE_MARKS:
                new.add_marker(mark)
        return new

    def prereqs(self) -> Prereqs:
        if isinstance(self._prereqs_or_missing(), MissingPrerequisite):
            reason = f"VM lanes need: {self._prereqs}"
            if _in_ci():
                pytest.fail(f"{reason} (CI=true: a missing prerequisite fails)", pytrace=False)
            pytest.skip(reason)
        return self._prereqs

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Boot the selected lanes before the first test, side by side and beside the host
        tests, CGALLOC_VM_JOBS at a time (default one per host core): each VM keeps about one
        host core busy (the in-VM pytest is one process). More VMs than cores cost more CPU
        in all (three lanes on two cores: each used 1.5-2x its CPU time alone)."""
        if session.config.option.collectonly or isinstance(self._prereqs_or_missing(), Exception):
            return
        lanes = [
            lane
            for lane in qemu.START_ORDER
            if any(isinstance(i, VMLaneItem) and i.lane == lane for i in session.items)
        ]
        if not lanes:
            return
        # The VMs import this checkout over 9p: compiled here (a second natively) rather than
        # again in each VM under emulation on its first imports (PYTHONDONTWRITEBYTECODE on
        # the host leaves a fresh clone without any bytecode).
        for tree in ("cgalloc", "tests"):
            compileall.compile_dir(str(self.config.rootpath / tree), quiet=2)
        jobs = int(os.environ.get("CGALLOC_VM_JOBS") or os.cpu_count() or 1)
        self._lane_dir(lanes[0])  # makes the run directory now: the threads would race for it
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(jobs, len(lanes))))
        for lane in lanes:
            self._pending[lane] = self._pool.submit(self._boot, lane, session)

    def _prereqs_or_missing(self) -> Prereqs | MissingPrerequisite:
        if self._prereqs is None:
            try:
                self._prereqs = find_prereqs()
            except MissingPrerequisite as missing:
                self._prereqs = missing
        return self._prereqs

    def _boot(self, lane: str, session: pytest.Session) -> qemu.LaneRun:
        p = self._prereqs_or_missing()
        assert isinstance(p, Prereqs)
        selection = [
            i.inner_nodeid for i in session.items if isinstance(i, VMLaneItem) and i.lane == lane
        ]
        timeout = float(os.environ.get("CGALLOC_VM_TIMEOUT", qemu.DEFAULT_TIMEOUT))
        return qemu.run_lane(
            lane,
            p,
            initramfs.cached_initramfs(p),
            self._lane_dir(lane),
            self.config.rootpath,
            selection,
            timeout,
        )

    def _lane_dir(self, lane: str) -> Path:
        if self._workdir is None:
            cache = initramfs.cache_dir()
            cache.mkdir(parents=True, exist_ok=True)
            self._workdir = Path(tempfile.mkdtemp(prefix="run-", dir=cache))
        return self._workdir / lane

    def run(self, lane: str, session: pytest.Session) -> qemu.LaneRun:
        """The lane's run: the one started with the session, or booted now (its VM runs every
        selected item of the lane once)."""
        if lane not in self.runs:
            self.prereqs()
            pending = self._pending.get(lane)
            self.runs[lane] = pending.result() if pending else self._boot(lane, session)
        return self.runs[lane]

    def _keep_workdir(self) -> bool:
        failed = any(r.error or r.exit_code not in (0, 5) for r in self.runs.values())
        return failed or bool(os.environ.get("CGALLOC_VM_KEEP"))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        keep = self._keep_workdir()
        for run in self.runs.values():
            status = run.error or f"in-VM pytest exit status {run.exit_code}"
            log = f"; serial log {run.serial_log}" if keep else ""
            terminalreporter.write_line(
                f"vm-{run.lane}: {len(run.records)} tests, {run.seconds:.1f} s wall "
                f"(boot + run); {status}{log}"
            )

    def pytest_unconfigure(self) -> None:
        if self._pool is not None:  # an interrupted session leaves no VM behind
            qemu.kill_running()
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._workdir and not self._keep_workdir():
            shutil.rmtree(self._workdir, ignore_errors=True)
