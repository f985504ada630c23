"""The trees the benchmarks read: fake v1/v2 trees of plain files, and a real cgroup tree
``cgalloc-test-bench-<pid>`` under this host's cgroupfs (v1 controllers or the v2 mount) that
is always removed, children first, touching nothing else."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

from bench import faketree
from cgalloc.host import core
from cgalloc.model.hierarchy import Hierarchy
from cgalloc.ops import stats

PODS = int(os.environ.get("CGALLOC_BENCH_PODS", "1000"))
CONTAINERS = 3
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Controllers the real v1 tree is made in (cpu and cpuacct may be co-mounted).
REAL_CONTROLLERS = ("memory", "cpu", "cpuacct")


@dataclass
class Case:
    """One tree to read: where its mounts are and which files every reader reads."""

    name: str
    hierarchy: Hierarchy
    dirs: list[str]
    plain: bool  # a plain directory tree, not cgroupfs
    top: str  # the tree's top below the hierarchy root ("" for a fake tree)
    plans: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.plans = stats.mount_plans(self.hierarchy)

    @property
    def files_per_dir(self) -> int:
        return sum(len(p.specs) for p in self.plans)

    @property
    def nfiles(self) -> int:
        return len(self.dirs) * self.files_per_dir

    def roots(self):
        return [core.open_root(p.path, allow_any_fs=self.plain) for p in self.plans]

    def naive_layout(self) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        """Mount per plan and its file names, for bench.naive.read_tree."""
        mounts = {str(i): p.path for i, p in enumerate(self.plans)}
        files = {str(i): tuple(s.name for s in p.specs) for i, p in enumerate(self.plans)}
        return mounts, files


@contextlib.contextmanager
def fake(version: str, pods: int = PODS) -> Iterator[Case]:
    top = tempfile.mkdtemp(prefix=f"cgalloc-bench-{version}-")
    try:
        dirs = faketree.make_tree(top, version, pods, CONTAINERS)
        h = stats.plain_tree_hierarchy(top)
        assert h is not None and h.version == version
        yield Case(f"fake {version} tree (tmp files)", h, dirs, plain=True, top="")
    finally:
        shutil.rmtree(top, ignore_errors=True)


def real_unavailable() -> str:
    """Why no real tree can be made here, or "" when it can."""
    from cgalloc.errors import HostError
    from cgalloc.host.cgroupfs import detect

    try:
        h = detect()
    except HostError as err:
        return f"no cgroup hierarchy: {err}"
    for m in _real_mounts(h).values():
        if not os.access(m, os.W_OK):
            return f"needs write access to {m} (run as root)"
    if (h.version == "v2" and _v2_root_missing(h.unified or h.root)
            and os.environ.get("CGALLOC_BENCH_REAL") != "1"):  # fmt: skip
        return (
            "the root's cgroup.subtree_control lacks cpu/memory/pids (set CGALLOC_BENCH_REAL=1 "
            "in a VM lane to let the bench enable them)"
        )
    if h.version == "v1" and len(_real_mounts(h)) < len(REAL_CONTROLLERS):
        return f"needs the v1 controllers {', '.join(REAL_CONTROLLERS)} mounted"
    return ""


def _real_mounts(h: Hierarchy) -> dict[str, str]:
    if h.version == "v2":
        return {"": h.unified or h.root}
    return {c: h.v1_mounts[c] for c in REAL_CONTROLLERS if c in h.v1_mounts}


@contextlib.contextmanager
def real(pods: int = PODS, suffix: str = "") -> Iterator[Case]:
    """``cgalloc-test-bench-<pid><suffix>`` with the kubepods layout, removed afterwards (a
    suffix tells apart trees of other sizes that exist at the same time)."""
    from cgalloc.host.cgroupfs import detect

    h = detect()
    mounts = _real_mounts(h)
    unique = sorted({os.path.realpath(m) for m in mounts.values()})
    # The kubelet's cgroupfs driver makes a pod's cgroup in every v1 hierarchy, and stats looks
    # for it in cAdvisor's (its start times): the tree goes there too, or stats would stat less
    # than on a node. Nothing reads these copies.
    extra = [] if h.version == "v2" else [m for m in stats.cadvisor_mounts(h) if m not in unique]
    top = f"cgalloc-test-bench-{os.getpid()}{suffix}"
    dirs = [top] + [f"{top}/{d}" for d in faketree.tree_dirs(pods, CONTAINERS)]
    created: list[str] = []
    try:
        for m in unique + extra:
            for d in dirs:
                path = os.path.join(m, d)
                os.mkdir(path)
                created.append(path)
        if h.version == "v2":
            _enable_v2(unique[0], dirs)
            sub = Hierarchy("v2", h.root, {}, h.unified, h.controllers)
        else:
            sub = Hierarchy("v1", h.root, mounts, None, frozenset(mounts))
        yield Case(f"real {h.version} cgroupfs (this host)", sub, dirs[1:], plain=False, top=top)
    finally:
        # Only the directories created above, children before parents.
        for path in reversed(created):
            try:
                os.rmdir(path)
            except OSError as err:
                print(f"bench: could not remove {path}: {err}")


V2_CONTROLLERS = ("cpu", "memory", "pids")


def _v2_root_missing(mount: str) -> list[str]:
    with open(os.path.join(mount, "cgroup.subtree_control")) as f:
        return [c for c in V2_CONTROLLERS if c not in f.read().split()]


def _enable_v2(mount: str, dirs: list[str]) -> None:
    """Enable cpu, memory, pids for every cgroup of the bench tree that has children.

    The root's own cgroup.subtree_control is written only in a VM lane (CGALLOC_BENCH_REAL=1):
    on a real node it belongs to the machine, and real_unavailable() refuses instead.
    """
    if missing := _v2_root_missing(mount):
        with open(os.path.join(mount, "cgroup.subtree_control"), "w") as f:
            f.write(" ".join(f"+{c}" for c in missing))
    parents = {os.path.dirname(d) for d in dirs if "/" in d}
    for d in dirs:
        if d in parents:
            with open(os.path.join(mount, d, "cgroup.subtree_control"), "w") as f:
                f.write(" ".join(f"+{c}" for c in V2_CONTROLLERS))


def raise_nofile() -> int:
    """RLIMIT_NOFILE raised to its hard limit; the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    return soft


def build_c(name: str, out_dir: str) -> str | None:
    """Compile csrc/<name>.c into ``out_dir``; None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    binary = os.path.join(out_dir, name)
    src = os.path.join(REPO, "csrc", f"{name}.c")
    subprocess.run([cc, "-O2", "-pthread", "-o", binary, src], check=True)
    return binary
