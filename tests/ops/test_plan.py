"""The plan: what setup would change, in the safe order, on fake v1 and v2 trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakecgroup import fake_hierarchy

from cgalloc.errors import CgallocError, HostError, InputError
from cgalloc.model.hierarchy import limit_files
from cgalloc.model.limits import Limits
from cgalloc.model.tree import DesiredCgroup
from cgalloc.ops import plan

MI = 1 << 20


def _desired():
    return [
        DesiredCgroup("kubepods", "kubepods", Limits(cpu_shares=2048, memory=300 * MI, pids=1000)),
        DesiredCgroup("kubepods/besteffort", "qos", Limits(cpu_shares=2)),
        DesiredCgroup("system.slice", "system-reserved", Limits(cpu_shares=512, memory=100 * MI)),
    ]


def test_v2_fresh_tree_plans_everything_in_safe_order(tmp_path):
    _, h = fake_hierarchy(tmp_path, "v2")
    p = plan.build(h, _desired(), limit_files)
    controllers = "+cpu +cpuset +memory +hugetlb +pids"
    assert p.describe() == [
        f"enable {controllers} in cgroup.subtree_control",
        "mkdir kubepods",
        f"enable {controllers} in kubepods/cgroup.subtree_control",
        "mkdir kubepods/besteffort",
        "mkdir system.slice",
        # limits on new cgroups tighten the defaults: children first, parents last
        "write system.slice/memory.max: (new) -> 104857600",
        # shares 512 → weight 1 + 510*9999/262142 = 20 (kubelet linear); 2 → 1; 2048 → 79
        "write system.slice/cpu.weight: (new) -> 20",
        "write kubepods/besteffort/cpu.weight: (new) -> 1",
        "write kubepods/pids.max: (new) -> 1000",
        "write kubepods/memory.max: (new) -> 314572800",
        "write kubepods/cpu.weight: (new) -> 79",
    ]
    assert not p.refusals


def test_controllers_delegated_to_systemd_are_neither_enabled_nor_required(tmp_path):
    _, h = fake_hierarchy(tmp_path, "v2")
    systemd = frozenset({"cpu", "cpuset", "io", "memory", "pids"})
    p = plan.build(h, _desired(), limit_files, delegated=systemd)
    # systemd enables what the units' properties need and turns the rest off again on every
    # reload; only hugetlb, which systemd does not manage, is left to cgalloc.
    assert [a.describe(p.root) for a in p.actions if a.kind == "enable"] == [
        "enable +hugetlb in cgroup.subtree_control",
        "enable +hugetlb in kubepods/cgroup.subtree_control",
    ]


def test_runc_weight_formula_changes_only_weights(tmp_path):
    _, h = fake_hierarchy(tmp_path, "v2")
    p = plan.build(h, _desired(), limit_files, weight_formula="runc")
    weights = {a.path: a.new for a in p.actions if a.file == "cpu.weight"}
    # runc curve: 512 → 59, 2 → 1, 2048 → 174 (opencontainers/cgroups table)
    assert weights == {"system.slice": "59", "kubepods/besteffort": "1", "kubepods": "174"}


def test_v1_creates_every_validated_hierarchy_and_seeds_cpuset(tmp_path):
    _, h = fake_hierarchy(tmp_path, "v1")
    p = plan.build(h, _desired()[:1], limit_files)
    assert p.describe() == [
        "mkdir cpu,cpuacct/kubepods",
        "mkdir cpuset/kubepods",
        # a new v1 cpuset cgroup is empty; it gets the parent's so processes can join
        "write cpuset/kubepods/cpuset.mems: (new) -> 0",
        "write cpuset/kubepods/cpuset.cpus: (new) -> 0-3",
        "mkdir hugetlb/kubepods",
        "mkdir memory/kubepods",
        "mkdir pids/kubepods",
        "mkdir systemd/kubepods",
        "write pids/kubepods/pids.max: (new) -> 1000",
        "write memory/kubepods/memory.limit_in_bytes: (new) -> 314572800",
        "write cpu,cpuacct/kubepods/cpu.shares: (new) -> 2048",
    ]


def test_v1_new_cpuset_child_gets_the_parents_planned_cpus(tmp_path):
    _, h = fake_hierarchy(tmp_path, "v1")
    desired = [
        DesiredCgroup("kubepods", "kubepods", Limits(cpu_shares=1024, cpuset_cpus="1-3")),
        DesiredCgroup("kubepods/besteffort", "qos", Limits(cpu_shares=2)),
    ]
    p = plan.build(h, desired, limit_files)
    seeds = [(a.path, a.new) for a in p.actions if a.file == "cpuset.cpus"]
    assert seeds == [("kubepods", "1-3"), ("kubepods/besteffort", "1-3")]


def _write(path: Path, value: str) -> None:
    path.write_text(value + "\n")


def _existing_v2(tmp_path, kube_mem: int, be_mem: int):
    root, _ = fake_hierarchy(tmp_path, "v2")
    _write(root / "cgroup.subtree_control", "cpu memory pids")
    for rel, mem in (("kubepods", kube_mem), ("kubepods/besteffort", be_mem)):
        d = root / rel
        d.mkdir()
        _write(d / "cgroup.controllers", "cpu memory pids")
        _write(d / "cgroup.subtree_control", "cpu memory pids")
        _write(d / "memory.max", str(mem))
        _write(d / "memory.current", str(10 * MI))
    # cpuset/hugetlb are not offered by this root, so they are neither enabled nor written
    _write(root / "cgroup.controllers", "cpu memory pids")
    return root, fake_h(root, tmp_path)


def fake_h(root, tmp_path):
    from cgalloc.host.cgroupfs import detect

    return detect(str(root), str(tmp_path / "mountinfo"))


@pytest.mark.parametrize(
    ("kube", "be", "expected"),
    [
        # shrinking: children first
        (200, 100, ["kubepods/besteffort/memory.max", "kubepods/memory.max"]),
        # growing: parents first
        (1024, 500, ["kubepods/memory.max", "kubepods/besteffort/memory.max"]),
    ],
)
def test_grow_parents_first_shrink_children_first(tmp_path, kube, be, expected):
    root, h = _existing_v2(tmp_path, 400 * MI, 300 * MI)
    desired = [
        DesiredCgroup("kubepods", "kubepods", Limits(memory=kube * MI)),
        DesiredCgroup("kubepods/besteffort", "qos", Limits(memory=be * MI)),
    ]
    p = plan.build(h, desired, limit_files)
    assert [a.where(str(root)) for a in p.actions] == expected


def test_memory_limit_below_usage_is_refused(tmp_path):
    root, h = _existing_v2(tmp_path, 400 * MI, 300 * MI)
    _write(root / "kubepods" / "memory.current", str(350 * MI))
    desired = [DesiredCgroup("kubepods", "kubepods", Limits(memory=300 * MI))]
    p = plan.build(h, desired, limit_files)
    assert p.refusals == [
        "refusing to lower the memory limit of /kubepods to 314572800 bytes: it uses "
        "367001600 bytes now (give --force to lower it anyway and let the kernel reclaim "
        "or OOM-kill)."
    ]
    with pytest.raises(CgallocError) as exc:
        plan.require_no_refusals(p, force=False)
    assert exc.value.exit_code == 1
    plan.require_no_refusals(p, force=True)


def test_kernel_spellings_and_page_rounding_compare_equal(tmp_path):
    root, h = _existing_v2(tmp_path, 400 * MI, 300 * MI)
    # 1000 bytes more than 300Mi: the kernel keeps whole pages and reads back 300Mi
    desired = [DesiredCgroup("kubepods", "kubepods", Limits(memory=300 * MI + 1000))]
    _write(root / "kubepods" / "memory.max", str(300 * MI))
    assert plan.build(h, desired, limit_files).actions == []
    assert plan.same_value("cpuset.cpus", "0,1,2,3", "0-3")
    assert plan.same_value("memory.limit_in_bytes", "9223372036854771712", "-1")
    assert not plan.same_value("cpu.max", "max 100000", "50000 100000")


def test_large_limits_compare_exactly_without_overflow():
    # Floats merged limits 1 apart above 2**53 and overflowed on a fuzzed `--capacity pid=1e400`
    # (tests/cli/test_fuzz_cli.py found it); the comparison is on ints.
    assert not plan.same_value("pids.max", str(2**60), str(2**60 + 1))
    assert not plan.same_value("pids.max", "max", "1" + "0" * 400)
    assert plan.same_value("pids.max", "1" + "0" * 400, "1" + "0" * 400)


@pytest.mark.parametrize(
    ("path", "role", "message"),
    [
        (
            "kubepods/kube",
            "kube-reserved",
            "kubeReservedCgroup (--kube-reserved-cgroup) /kubepods/kube must not be kubepods "
            "(/kubepods) or inside it; give a cgroup outside the pods' tree, e.g. /system.slice.",
        ),
        (
            "kubepods",
            "system-reserved",
            "systemReservedCgroup (--system-reserved-cgroup) /kubepods must not be kubepods "
            "(/kubepods) or inside it; give a cgroup outside the pods' tree, e.g. /system.slice.",
        ),
        (
            "",
            "system-reserved",
            "systemReservedCgroup (--system-reserved-cgroup) must name a cgroup below the "
            "root, not the root cgroup itself.",
        ),
        (
            "a/../../etc",
            "kube-reserved",
            "kubeReservedCgroup (--kube-reserved-cgroup) path 'a/../../etc' must stay inside "
            "the cgroupfs mount (no '..', '.' or empty components).",
        ),
    ],
)
def test_unsafe_targets_are_input_errors(tmp_path, path, role, message):
    _, h = fake_hierarchy(tmp_path, "v2")
    desired = [DesiredCgroup("kubepods", "kubepods", Limits()), DesiredCgroup(path, role, Limits())]
    with pytest.raises(InputError) as exc:
        plan.build(h, desired, limit_files)
    assert exc.value.problems == [message]
    assert exc.value.exit_code == 2


def test_symlinked_cgroup_is_refused(tmp_path):
    root, h = fake_hierarchy(tmp_path, "v2")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "kube.slice")
    desired = [DesiredCgroup("kube.slice", "kube-reserved", Limits(cpu_shares=512))]
    with pytest.raises(InputError) as exc:
        plan.build(h, desired, limit_files)
    assert exc.value.problems == [
        f"kubeReservedCgroup (--kube-reserved-cgroup) /kube.slice goes through the symlink "
        f"{root}/kube.slice; give the real cgroup path."
    ]


def test_no_create_reserved_lists_missing_paths_per_controller(tmp_path):
    root, h = fake_hierarchy(tmp_path, "v1")
    (root / "memory" / "system.slice").mkdir()
    desired = [DesiredCgroup("system.slice", "system-reserved", Limits(memory=MI))]
    with pytest.raises(HostError) as exc:
        plan.build(h, desired, limit_files, create_reserved=False)
    missing = ("cpu,cpuacct", "cpuset", "hugetlb", "pids", "systemd")
    assert str(exc.value).splitlines() == [
        "reserved cgroups are missing and --no-create-reserved was given:",
        *[f"  missing system-reserved /system.slice: {root}/{m}/system.slice" for m in missing],
    ]
    assert exc.value.exit_code == 3


def test_dry_run_on_absent_controllers_is_a_host_error(tmp_path):
    root, _ = fake_hierarchy(tmp_path, "v2")
    _write(root / "cgroup.controllers", "cpu io")
    h = fake_h(root, tmp_path)
    with pytest.raises(HostError, match=r"controller\(s\) memory, pids not available"):
        plan.build(h, _desired(), limit_files)


def test_read_many_answers_as_read_file_does_and_leaves_the_rest_to_it(tmp_path):
    """One core call per mount: a file's text without its newline, None where it or its
    cgroup is missing; what the call cannot answer as read_file would (a value longer than
    its slot, bytes that are not UTF-8) is left out, for read_file to read or refuse."""
    root, _ = fake_hierarchy(tmp_path, "v2")
    (root / "kubepods").mkdir()
    _write(root / "kubepods" / "memory.max", "max")
    _write(root / "kubepods" / "cpuset.cpus", ",".join(str(c) for c in range(0, 400, 2)))
    (root / "kubepods" / "cpu.max").write_bytes(b"\xff\xfe\n")
    (root / "kubepods" / "pids.max").write_text("")
    keys = [(str(root), "kubepods", f) for f in
            ("memory.max", "cpuset.cpus", "cpu.max", "pids.max", "gone")]  # fmt: skip
    keys.append((str(root), "kubepods/gone", "memory.max"))
    keys.append((str(tmp_path / "no-such-mount"), "kubepods", "memory.max"))
    got = plan.read_many(keys)
    assert got == {keys[0]: "max", keys[3]: "", keys[4]: None, keys[5]: None}
    assert plan.read_file(*keys[1]) == (root / "kubepods" / "cpuset.cpus").read_text().rstrip()
    with pytest.raises(UnicodeDecodeError):
        plan.read_file(*keys[2])


def test_a_value_longer_than_the_bulk_read_is_planned_from_all_of_it(tmp_path):
    """build reads the live files in bulk; one longer than the bulk slot is read whole by
    read_file, so the plan's old value (what undo restores) is the file's, not a cut one."""
    root, h = _existing_v2(tmp_path, 400 * MI, 300 * MI)
    long = "0" * (plan.READ_SLOT + 100) + str(500 * MI)  # leading zeros: the same number
    _write(root / "kubepods" / "memory.max", long)
    desired = [DesiredCgroup("kubepods", "kubepods", Limits(memory=600 * MI))]
    [write] = [a for a in plan.build(h, desired, limit_files).actions if a.kind == "write"]
    assert (write.file, write.old, write.new) == ("memory.max", long, str(600 * MI))
