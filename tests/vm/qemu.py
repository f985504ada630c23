"""Boot one lane under qemu, run the in-VM pytest selection once, collect its JSON report."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .prereqs import Prereqs

LANES = ("v2", "v1", "v2-systemd")
# Where a tests/kernel module runs unless it sets a module-level LANES tuple (the systemd lane
# boots a whole userland, so tests opt in to it).
DEFAULT_LANES = ("v2", "v1")
# The order the lanes start in, one per host core: the longest first, so the shorter ones
# follow each other on the other core meanwhile.
START_ORDER = ("v2-systemd", "v2", "v1")
# vCPUs per lane (CGALLOC_VM_SMP overrides every lane). Two where the kernel tests confine to
# one CPU of two; the systemd lane needs none of that and one costs less under TCG on this
# busy 2-core host (its boot-unit and image tests: 349 s against 453 s beside a busy core). The
# tests plan a node of the VM's own CPU count (tests/kernel/test_setup_kernel.py: CPUS).
LANE_CPUS = {"v2": 2, "v1": 2, "v2-systemd": 1}
DEFAULT_TIMEOUT = 2400.0  # seconds per lane, a hang guard: under CI's load v2-systemd took >1200
# Seconds one in-VM test may take before pytest-timeout fails it (SIGALRM, so the lane goes on
# with the next test): a test that blocks must not cost the lane's whole budget. The longest
# test took 259 s under CI's load; the slow opt-in ones mark their own.
TEST_TIMEOUT = 600
KERNEL_CMDLINE = "console=ttyS0 panic=-1 quiet"
LANE_CMDLINE = {
    # systemd as PID 1 on cgroup v2, booting only the test unit (stage2.sh writes both units).
    # No timers: systemd-tmpfiles-clean.service, 15 min after boot, made and removed its
    # cgroup between a test's two listings of the tree in a CI run.
    "v2-systemd": "systemd.unified_cgroup_hierarchy=1 systemd.unit=cgalloc-vm.target "
    "systemd.show_status=0 systemd.mask=timers.target",
}
_TERMINAL_CONTROL = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|.)")  # SeaBIOS clears the screen


_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def kill_running() -> None:
    """Kill every VM still booted by this process (an interrupted session)."""
    with _running_lock:
        for proc in _running:
            proc.kill()


@dataclass
class LaneRun:
    lane: str
    rundir: Path
    seconds: float = 0.0
    exit_code: int | None = None
    records: dict[str, dict] = field(default_factory=dict)
    collect_errors: list[dict] = field(default_factory=list)
    error: str | None = None  # set when the VM timed out, crashed, or wrote no report

    @property
    def serial_log(self) -> Path:
        return self.rundir / "serial.log"

    def serial_tail(self, lines: int = 40) -> str:
        try:
            text = self.serial_log.read_text(errors="replace")
        except OSError:
            return "(no serial log)"
        text = _TERMINAL_CONTROL.sub("", text.replace("\r", ""))
        return "\n".join(text.splitlines()[-lines:])


def tmp_keep_paths(paths: list[str]) -> list[str]:
    """The top-level /tmp entries among `paths` (e.g. a virtualenv), which the guest's fresh
    /tmp must keep visible."""
    keep = set()
    for p in paths:
        parts = Path(os.path.abspath(p)).parts
        if len(parts) > 2 and parts[1] == "tmp":
            keep.add(os.path.join("/tmp", parts[2]))
    return sorted(keep)


def job_env(lane: str, checkout: Path, pytest_args: list[str], mode: str = "pytest") -> str:
    """The shell fragment stage2.sh sources: lane, interpreter, checkout and pytest arguments
    (mode "pytest"), or the command to run (mode "command")."""
    python = sys.executable
    host_paths = [python, os.path.realpath(python), sys.prefix, sys.base_prefix, str(checkout)]
    host_paths += [p for p in sys.path if p]
    guest_path = ":".join(
        [os.path.dirname(python), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    )
    values = {
        "LANE": lane,
        "RUN_MODE": mode,
        "PYTHON": python,
        "CHECKOUT": str(checkout),
        "GUEST_PATH": guest_path,
        "KEEP_TMP": " ".join(tmp_keep_paths(host_paths)),
        # Loading every installed pytest plugin (hypothesis, benchmark...) costs ~5 s under TCG.
        "NO_PLUGIN_AUTOLOAD": "" if os.environ.get("CGALLOC_VM_PLUGIN_AUTOLOAD") else "1",
        # The slow kernel proofs (minutes each under TCG) run only when asked: CI's budget.
        "SLOW": "1" if os.environ.get("CGALLOC_VM_SLOW") else "",
    }
    lines = [f"{k}={shlex.quote(v)}" for k, v in values.items()]
    lines.append("set -- " + " ".join(shlex.quote(a) for a in pytest_args))
    return "\n".join(lines) + "\n"


def qemu_command(p: Prereqs, initramfs: Path, rundir: Path, lane: str = "v2") -> list[str]:
    accel = os.environ.get("CGALLOC_VM_ACCEL", "tcg")  # nested KVM hangs on the CI hosts
    cmdline = " ".join(filter(None, (KERNEL_CMDLINE, LANE_CMDLINE.get(lane))))
    return [
        p.qemu,
        "-accel", accel,
        "-m", "1024",
        "-smp", os.environ.get("CGALLOC_VM_SMP") or str(LANE_CPUS.get(lane, 2)),
        "-nographic",
        "-no-reboot",
        "-nic", "none",
        "-kernel", str(p.kernel),
        "-initrd", str(initramfs),
        "-append", cmdline,
        "-virtfs",
        "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={rundir},mount_tag=results,security_model=none",
    ]  # fmt: skip


def boot(
    lane: str,
    p: Prereqs,
    initramfs: Path,
    rundir: Path,
    timeout: float = DEFAULT_TIMEOUT,
    on_output: Callable[[bytes], None] | None = None,
) -> str | None:
    """Boot `lane` with the job.env already in `rundir`; the serial console goes to
    serial.log (and to `on_output` as it comes). Returns what went wrong, or None."""
    with (rundir / "serial.log").open("wb") as log:
        proc = subprocess.Popen(
            qemu_command(p, initramfs, rundir, lane),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        with _running_lock:
            _running.add(proc)
        timed_out = threading.Event()

        def expire() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            assert proc.stdout is not None
            while chunk := proc.stdout.read1(65536):
                log.write(chunk)
                if on_output is not None:
                    on_output(chunk)
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            with _running_lock:
                _running.discard(proc)
    if timed_out.is_set():
        return f"the VM did not finish within {timeout:.0f} s (CGALLOC_VM_TIMEOUT)"
    if code != 0:
        return f"qemu exited with status {code}"
    return None


def run_lane(
    lane: str,
    p: Prereqs,
    initramfs: Path,
    rundir: Path,
    checkout: Path,
    selection: list[str],
    timeout: float = DEFAULT_TIMEOUT,
) -> LaneRun:
    """Boot `lane` once and run the in-VM tests named in `selection` (pytest node ids)."""
    rundir.mkdir(parents=True, exist_ok=True)
    files = sorted({nodeid.split("::")[0] for nodeid in selection})
    test_timeout = os.environ.get("CGALLOC_VM_TEST_TIMEOUT", str(TEST_TIMEOUT))
    args = [*files, "-v", "-p", "no:cacheprovider", "-p", "pytest_timeout"]
    args += [f"--timeout={test_timeout}", "--timeout-method=signal"]
    (rundir / "job.env").write_text(job_env(lane, checkout, args))
    (rundir / f"{lane}.select").write_text(json.dumps(selection))
    run = LaneRun(lane, rundir)
    start = time.monotonic()
    run.error = boot(lane, p, initramfs, rundir, timeout)
    run.seconds = time.monotonic() - start
    rc_file, report = rundir / f"{lane}.rc", rundir / f"{lane}.json"
    if rc_file.is_file():
        run.exit_code = int(rc_file.read_text().strip() or -1)
    if report.is_file():
        data = json.loads(report.read_text())
        run.records, run.collect_errors = data["records"], data["collect_errors"]
    elif run.error is None:
        run.error = "the VM powered off without writing a test report (crash or early failure)"
    return run
