"""The commands suite's C floor reads every file ``cgalloc stats`` reads (issue 11: "the C floor
for the same files"). On a real v1 host the bench tree is built for memory, cpu and cpuacct
and copied into cAdvisor's other hierarchies; the floor once read only the first three, so
stats' pids.current and pids.max were held against a floor that skipped them."""

from __future__ import annotations

import os
import shutil

from bench import command_suite, faketree, trees
from cgalloc.model.hierarchy import Hierarchy
from cgalloc.ops import stats

TOP = "cgalloc-test-bench-1"


def _v1_case(root: str) -> trees.Case:
    """A v1 tree under ``root/<controller>/TOP`` whose Case names only the controllers
    trees.real builds it for, as a real hybrid host's Case does."""
    dirs = faketree.make_tree(os.path.join(root, "made"), "v1", pods=3, containers=1)
    for ctrl in os.listdir(os.path.join(root, "made")):
        os.makedirs(os.path.join(root, ctrl))
        top = os.path.join(root, ctrl, TOP)
        os.rename(os.path.join(root, "made", ctrl), top)
        for name in os.listdir(os.path.join(top, "kubepods")):
            # A real v1 root cgroup has its controller's files, except the pids root: no pids.*
            if name.startswith(f"{ctrl}.") and ctrl != "pids":
                shutil.copy(os.path.join(top, "kubepods", name), os.path.join(root, ctrl))
    os.rmdir(os.path.join(root, "made"))
    mounts = {c: os.path.join(root, c) for c in trees.REAL_CONTROLLERS}
    h = Hierarchy("v1", root, mounts, None, frozenset(mounts))
    return trees.Case("fake", h, [f"{TOP}/{d}" for d in dirs], plain=False, top=TOP)


def test_floor_reads_pids_files_stats_reads(tmp_path):
    case = _v1_case(str(tmp_path))
    inputs = dict(command_suite.floor_inputs(case))
    assert "pids" not in case.hierarchy.v1_mounts  # the Case itself does not name pids
    pids = inputs[str(tmp_path / "pids")]
    pod = f"{TOP}/kubepods/burstable/pod00000001-0000-4000-8000-000000000001"
    assert f"{pod}/pids.current" in pids and f"{pod}/pids.max" in pids
    # stats' root cgroup is the mount's own (--cgroup-root moves kubepods), not the tree's
    # top: its files where the root has them.
    assert "memory.stat" in inputs[str(tmp_path / "memory")]
    assert not any(f.startswith("pids.") for f in pids)
    assert not any(os.path.dirname(f) == TOP for fs in inputs.values() for f in fs)
    # Every file the floor reads exists, and no container's (stats reads pod cgroups only).
    for mount, files in inputs.items():
        assert all(os.path.isfile(os.path.join(mount, f)) for f in files)
        assert not any(len(os.path.basename(os.path.dirname(f))) == 64 for f in files)
    # Each file of stats' v1 table, read in its controller's mount.
    read = {
        (os.path.basename(m), os.path.basename(f)) for m, files in inputs.items() for f in files
    }
    assert read == {(f.controller, f.file) for f in stats.V1_FIELDS}


def test_the_dated_floor_stats_what_the_start_times_stat(tmp_path):
    """The second floor's lstats are the start times' (cAdvisor getSpecInternal, as
    stats.start_times takes it): kubepods' and each pod's directory and marker, in each
    hierarchy cAdvisor reads that holds it; not the root, a QoS tier or a container."""
    case = _v1_case(str(tmp_path))
    h, _ = stats.open_hierarchy(case.hierarchy.root)
    for mount in stats.cadvisor_mounts(h):
        for d in (f"{TOP}/kubepods", f"{TOP}/kubepods/burstable"):
            with open(os.path.join(mount, d, "cgroup.clone_children"), "w") as f:
                f.write("0\n")
    inputs = dict(command_suite.start_inputs(case))
    assert sorted(inputs) == sorted(stats.cadvisor_mounts(h))
    pods = [d for d in command_suite._stats_dirs(case) if os.path.basename(d).startswith("pod")]
    assert len(pods) == 3
    for mount, paths in inputs.items():
        assert all(os.path.lexists(os.path.join(mount, p)) for p in paths)
        marker = f"{TOP}/kubepods/cgroup.clone_children"
        assert paths[:2] == [f"{TOP}/kubepods", marker]  # a marker only where there is one
        assert sorted(paths[2:]) == sorted(pods)
