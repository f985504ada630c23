"""Benchmark fixtures: fake v1/v2 trees, a real cgroup tree on this host, the floor program.

Run: ``pytest bench/ --benchmark-only`` or ``python -m bench``; the comparison table is printed
at the end of the run. ``bench_*.py`` are collected through ``python_files`` in pyproject.toml.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from bench import faketree, results
from cgalloc import core, stats
from cgalloc.cgroupfs import Hierarchy

PODS = int(os.environ.get("CGALLOC_BENCH_PODS", "1000"))
CONTAINERS = 3
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The real tree lives under these v1 mounts of this host (cpu and cpuacct may be co-mounted).
REAL_CONTROLLERS = ("memory", "cpu", "cpuacct")


def pytest_terminal_summary(terminalreporter):
    if results.ROWS:
        terminalreporter.write_sep("=", f"cgroup read cost, {PODS} pods x {CONTAINERS} containers")
        terminalreporter.write_line(results.table())
    for title, lines in results.SECTIONS:
        terminalreporter.write_sep("=", title)
        terminalreporter.write_line("\n".join(lines))


FD_MARGIN = 256  # fds left for Python, pytest and the roots


def pytest_sessionstart(session):
    # The sampler and the pread floor keep every file open: ~10 fds per cgroup.
    want = 16 * (PODS * (CONTAINERS + 1) + 3) + FD_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


@dataclass
class Case:
    """One tree to read: where its mounts are and which files every reader reads."""

    name: str
    hierarchy: Hierarchy
    dirs: list[str]
    plain: bool  # a plain directory tree, not cgroupfs
    plans: list = field(default_factory=list)
    cgget_note: str = ""

    def __post_init__(self) -> None:
        self.plans = stats.mount_plans(self.hierarchy)

    @property
    def nfiles(self) -> int:
        return len(self.dirs) * sum(len(p.specs) for p in self.plans)

    def warm_dirs(self) -> list[str]:
        """The dirs whose files all fit in RLIMIT_NOFILE at once, for the kept-open readers."""
        per_dir = sum(len(p.specs) for p in self.plans)
        room = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - FD_MARGIN
        return self.dirs[: max(room // per_dir, 1)]

    def naive_layout(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        """Mount per plan and its file names, for bench.naive.read_tree."""
        mounts = {str(i): p.path for i, p in enumerate(self.plans)}
        files = {str(i): tuple(s.name for s in p.specs) for i, p in enumerate(self.plans)}
        return mounts, files

    def roots(self, impl=core):
        return [impl.open_root(p.path, allow_any_fs=self.plain) for p in self.plans]


def _fake(version: str) -> Iterator[Case]:
    top = tempfile.mkdtemp(prefix=f"cgalloc-bench-{version}-")
    try:
        dirs = faketree.make_tree(top, version, PODS, CONTAINERS)
        h = stats.plain_tree_hierarchy(top)
        assert h is not None and h.version == version
        note = "cgget reads only mounted cgroupfs; not run on a plain tree"
        yield Case(f"fake {version} tree (tmp files)", h, dirs, plain=True, cgget_note=note)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _real() -> Iterator[Case | str]:
    """A ``cgalloc-test-bench-<pid>`` tree under this host's v1 mounts, always removed."""
    from cgalloc.cgroupfs import detect
    from cgalloc.errors import HostError

    try:
        h = detect()
    except HostError as err:
        yield f"no cgroup hierarchy: {err}"
        return
    if h.version == "v2":
        yield "this host is cgroup v2; the real-tree bench is written for v1 mounts"
        return
    mounts = {c: h.v1_mounts[c] for c in REAL_CONTROLLERS if c in h.v1_mounts}
    unique = sorted({os.path.realpath(m) for m in mounts.values()})
    if len(mounts) < len(REAL_CONTROLLERS) or not all(os.access(m, os.W_OK) for m in unique):
        yield f"needs write access to the v1 mounts of {', '.join(REAL_CONTROLLERS)} (run as root)"
        return
    top = f"cgalloc-test-bench-{os.getpid()}"
    dirs = [top] + [f"{top}/{d}" for d in faketree.tree_dirs(PODS, CONTAINERS)]
    created: list[str] = []
    try:
        for m in unique:
            for d in dirs:
                path = os.path.join(m, d)
                os.mkdir(path)
                created.append(path)
        sub = Hierarchy("v1", h.root, mounts, None, frozenset(mounts))
        yield Case("real v1 cgroupfs (this host)", sub, dirs[1:], plain=False)
    except OSError as err:
        yield f"cannot create the bench cgroups: {err}"
    finally:
        # Only the directories created above, children before parents.
        for path in reversed(created):
            try:
                os.rmdir(path)
            except OSError as err:
                print(f"bench: could not remove {path}: {err}")


@pytest.fixture(scope="session", params=["fake v1", "fake v2", "real v1"])
def case(request) -> Iterator[Case]:
    gen = _real() if request.param == "real v1" else _fake(request.param.split()[1])
    try:
        value = next(gen)
        if isinstance(value, str):
            results.record(request.param, "(whole tree)", None, value)
            pytest.skip(value)
        yield value
    finally:
        gen.close()


@pytest.fixture(scope="session")
def floor_bin() -> Iterator[str]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build csrc/floor.c")
    out = tempfile.mkdtemp(prefix="cgalloc-floor-")
    binary = os.path.join(out, "floor")
    subprocess.run([cc, "-O2", "-o", binary, os.path.join(REPO, "csrc", "floor.c")], check=True)
    yield binary
    shutil.rmtree(out, ignore_errors=True)
