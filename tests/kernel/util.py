"""Helpers for in-VM tests: the lane, scratch cgroups, children started inside a cgroup."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def lane() -> str | None:
    """ "v2", "v1" or "v2-systemd" inside a VM lane, None elsewhere."""
    return os.environ.get("CGALLOC_VM_LANE") or None


def is_v2() -> bool:
    return lane() in ("v2", "v2-systemd")


def read(path: str | os.PathLike) -> str:
    """A control file's content without the trailing newline."""
    return Path(path).read_text().strip()


def read_keyed(path: str | os.PathLike) -> dict[str, int]:
    """A flat-keyed file ("key value" lines: cpu.stat, memory.events, pids.events...)."""
    pairs = (line.split() for line in read(path).splitlines())
    return {kv[0]: int(kv[1]) for kv in pairs if len(kv) == 2}


@dataclass
class ScratchCgroup:
    """A `cgalloc-test-<unique>` cgroup directly under the root, one directory per controller
    on v1 and a single directory on v2."""

    name: str
    dirs: dict[str, Path]  # controller -> its directory for this cgroup
    enabled: list[str] = field(default_factory=list)  # v2 root controllers we switched on

    def file(self, controller: str, name: str) -> Path:
        return self.dirs[controller] / name

    def read(self, controller: str, name: str) -> str:
        return read(self.file(controller, name))

    def write(self, controller: str, name: str, value: str) -> None:
        self.file(controller, name).write_text(value)

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in dict.fromkeys(self.dirs.values())]

    def pids(self) -> set[int]:
        return {int(p) for f in self.procs_files for p in read(f).split()}

    def join(self) -> None:
        """Move the calling process into this cgroup (in every controller's hierarchy)."""
        for f in self.procs_files:
            f.write_text(str(os.getpid()))


def _kill_all(cg: ScratchCgroup, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (pids := cg.pids()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _rmdir(path: Path, timeout: float = 10.0) -> None:
    # An exiting task can keep the cgroup busy for a moment after it was killed.
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextlib.contextmanager
def scratch_cgroup(*controllers: str) -> Iterator[ScratchCgroup]:
    """Create a scratch cgroup with `controllers` available in it; kill its processes and
    remove it afterwards (and on v2 switch off the root controllers it had to switch on)."""
    name = f"cgalloc-test-{uuid.uuid4().hex[:12]}"
    if is_v2():
        control = CGROUP_ROOT / "cgroup.subtree_control"
        missing = [c for c in controllers if c not in read(control).split()]
        for c in missing:
            control.write_text(f"+{c}")
        path = CGROUP_ROOT / name
        path.mkdir()
        cg = ScratchCgroup(name, dict.fromkeys(controllers, path), missing)
    else:
        cg = ScratchCgroup(name, {c: CGROUP_ROOT / c / name for c in controllers})
        for c, path in cg.dirs.items():
            path.mkdir()
            if c == "cpuset":  # v1 cpusets start empty and accept no task until filled
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (path / f).write_text(read(path.parent / f))
    try:
        yield cg
    finally:
        _kill_all(cg)
        for path in dict.fromkeys(cg.dirs.values()):
            _rmdir(path)
        for c in cg.enabled:
            (CGROUP_ROOT / "cgroup.subtree_control").write_text(f"-{c}")


def spawn_in(cg: ScratchCgroup, argv: Sequence[str], **popen: object) -> subprocess.Popen:
    """Start `argv` already inside `cg`: the child joins before exec, so all it does counts."""
    return subprocess.Popen(argv, preexec_fn=cg.join, **popen)


def run_in(
    cg: ScratchCgroup, argv: Sequence[str], timeout: float = 120.0
) -> subprocess.CompletedProcess:
    """Run `argv` inside `cg` to completion, capturing its output as text."""
    proc = spawn_in(cg, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
