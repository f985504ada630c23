"""Capacity read from a fake /proc and /sys tree, and CPU list parsing."""

import os

import pytest

from cgalloc.host.capacity import existing_parent, online_cpus, read_capacity
from cgalloc.model.cpuset import parse_cpuset
from cgalloc.model.quantity import Quantity


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_host(tmp_path):
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    _write(proc / "meminfo", "MemTotal:        4025836 kB\nMemFree:  1000 kB\n")
    _write(proc / "sys/kernel/pid_max", "4194304\n")
    _write(proc / "sys/kernel/threads-max", "31189\n")
    _write(sys / "devices/system/cpu/online", "0-3,6\n")
    _write(sys / "kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n")
    _write(sys / "kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
    return str(proc), str(sys)


def test_read_capacity_from_fake_tree(fake_host, tmp_path):
    proc, sys = fake_host
    root_dir = tmp_path / "var/lib/kubelet"  # does not exist: its nearest parent is measured
    cap = read_capacity(str(root_dir), proc, sys, affinity={0, 1, 2, 6, 7})
    st = os.statvfs(tmp_path)
    assert {k: str(v) for k, v in cap.items()} == {
        "cpu": "4",  # online {0,1,2,3,6} ∩ affinity {0,1,2,6,7}
        "memory": "4025836Ki",  # as kubectl shows an AKS node
        "ephemeral-storage": str(Quantity.from_int(st.f_blocks * st.f_frsize, "BinarySI")),
        "pid": "31189",  # min(pid_max, threads-max)
        "hugepages-2Mi": "1Gi",  # 512 × 2Mi
        "hugepages-1Gi": "0",
    }


def test_online_cpus_intersects_affinity(fake_host):
    assert online_cpus(fake_host[1], affinity=range(3)) == {0, 1, 2}


def test_existing_parent(tmp_path):
    assert existing_parent(str(tmp_path / "a/b/c")) == str(tmp_path)


def test_parse_cpuset():
    assert parse_cpuset("0-2,5\n") == {0, 1, 2, 5}
    assert parse_cpuset("") == frozenset()
    for bad in ("3-1", "a", "1,,2", "-1", "0-", "¹", "0-²"):
        with pytest.raises(ValueError):
            parse_cpuset(bad)


def test_real_host_capacity_is_sane():
    cap = read_capacity("/")
    assert cap["cpu"].value() == len(os.sched_getaffinity(0) & online_cpus())
    assert cap["memory"].value() > 0 and cap["pid"].value() > 0


def test_parse_cpuset_rejects_cpu_numbers_beyond_the_kernel_limit():
    assert parse_cpuset("8190-8191") == {8190, 8191}
    with pytest.raises(ValueError, match="above the kernel's limit"):
        parse_cpuset("0-99999999999")


@pytest.mark.parametrize("missing", ["pid_max", "threads-max"])
def test_max_pids_falls_back_to_the_readable_one(fake_host, missing):
    # pkg/kubelet/stats/pidlimit/pidlimit_linux.go: each of pid_max and threads-max is used
    # when it reads as a number; the smaller wins
    from cgalloc.host.capacity import max_pids

    proc, _ = fake_host
    os.remove(os.path.join(proc, "sys/kernel", missing))
    assert max_pids(proc) == (31189 if missing == "pid_max" else 4194304)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        # k8s.io/utils/cpuset Parse (strconv.Atoi per number) and its TestParse table
        ("", set()),
        ("0", {0}),
        ("0,1", {0, 1}),
        ("0-3", {0, 1, 2, 3}),
        ("0,1-3,5", {0, 1, 2, 3, 5}),
        ("1-1", {1}),
        ("+1", {1}),
        ("+1-+2", {1, 2}),
    ],
)
def test_parse_cpu_list_like_the_kubelet(text, cpus):
    from cgalloc.model.cpuset import parse_cpu_list

    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", [" 1", "1 ", "1,", "-1", "3-1", "0-", "a", "1-2-3", "1,,2"])
def test_parse_cpu_list_refuses_what_the_kubelet_refuses(text):
    from cgalloc.model.cpuset import parse_cpu_list

    with pytest.raises(ValueError):
        parse_cpu_list(text)


@pytest.mark.parametrize(("version", "pid"), [("1.20", "4194304"), ("1.23", "4194304"),
                                              ("1.24", "31189"), ("1.37", "31189")])
def test_pid_capacity_follows_the_kubelet_minor(fake_host, tmp_path, version, pid):
    # the host reads both sysctls; versions.pid_capacity decides: pid_max alone before 1.24
    # (v1.20.2 pidlimit_linux.go Stats), the smaller of the two from 1.24 (kubernetes#107111)
    proc, sys = fake_host
    cap = read_capacity(str(tmp_path), proc, sys, affinity={0}, kubelet_version=version)
    assert str(cap["pid"]) == pid


def test_no_pid_capacity_before_1_24_without_pid_max(fake_host, tmp_path):
    # v1.20.2 Stats leaves MaxPID nil when pid_max cannot be read: no pid capacity at all
    proc, sys = fake_host
    os.remove(os.path.join(proc, "sys/kernel/pid_max"))
    assert "pid" not in read_capacity(str(tmp_path), proc, sys, {0}, kubelet_version="1.23")
    assert str(read_capacity(str(tmp_path), proc, sys, {0})["pid"]) == "31189"
