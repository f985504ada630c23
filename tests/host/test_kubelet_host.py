"""Finding the kubelet on a node (cgalloc/host/kubelet.py), on a directory standing for "/":
the unit's files where systemd would load them, root's kubelet processes, which programs
cgalloc may run, and the Host's command runner."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cgalloc.host.kubelet import (
    NodeFiles,
    kubelet_processes,
    unit_files_on_disk,
    untrusted_executable,
)
from cgalloc.host.machine import Host

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="ownership by root needs root")


def put(root: Path, path: str, text: str = "") -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def test_unit_files_follow_systemds_search_path(tmp_path):
    files = NodeFiles(str(tmp_path))
    assert unit_files_on_disk(files, "kubelet.service") == (None, [], False)
    put(tmp_path, "/usr/lib/systemd/system/kubelet.service")
    put(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf")
    put(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/20-x.conf")
    put(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/README")  # not a .conf
    # /etc's copy of a drop-in hides /usr/lib's; drop-ins of all directories sort by name
    put(tmp_path, "/etc/systemd/system/kubelet.service.d/20-x.conf")
    put(tmp_path, "/run/systemd/system/kubelet.service.d/15-run.conf")
    # service.d/ drop-ins apply to every service (systemd 246+)
    put(tmp_path, "/etc/systemd/system/service.d/05-all.conf")
    got = unit_files_on_disk(files, "kubelet.service")
    assert got.fragment == "/usr/lib/systemd/system/kubelet.service"
    assert got.dropins == [
        "/etc/systemd/system/service.d/05-all.conf",
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        "/run/systemd/system/kubelet.service.d/15-run.conf",
        "/etc/systemd/system/kubelet.service.d/20-x.conf",
    ]
    # a unit file in /etc replaces the package's; a drop-in linked to /dev/null is masked
    put(tmp_path, "/etc/systemd/system/kubelet.service")
    os.symlink("/dev/null", tmp_path / "etc/systemd/system/kubelet.service.d/10-kubeadm.conf")
    got = unit_files_on_disk(files, "kubelet.service")
    assert got.fragment == "/etc/systemd/system/kubelet.service"
    assert "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf" not in got.dropins


def test_a_unit_linked_to_dev_null_is_masked(tmp_path):
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    os.symlink("/dev/null", tmp_path / "etc/systemd/system/kubelet.service")
    assert unit_files_on_disk(NodeFiles(str(tmp_path)), "kubelet.service").masked


def test_node_files_read_only_bounded_regular_text(tmp_path):
    files = NodeFiles(str(tmp_path))
    put(tmp_path, "/a", "text")
    assert files.read("/a") == "text"
    with pytest.raises(FileNotFoundError):
        files.read("/missing")
    os.mkfifo(tmp_path / "fifo")  # opened without blocking, refused as no regular file
    with pytest.raises(ValueError, match="not a regular file"):
        files.read("/fifo")
    (tmp_path / "big").write_bytes(b"x" * 2048)
    with pytest.raises(ValueError, match="larger than"):
        files.read("/big", limit=1024)
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    with pytest.raises(ValueError, match="not UTF-8"):
        files.read("/bin")
    assert files.glob("/[ab]*") == ["/a", "/big", "/bin"]


def proc(root: Path, pid: int, argv: list[str], comm: str = "kubelet") -> Path:
    put(root, f"/proc/{pid}/comm", comm + "\n")
    put(root, f"/proc/{pid}/cmdline", "\0".join(argv) + "\0")
    os.symlink("/etc/kubernetes", root / f"proc/{pid}/cwd")
    return root / f"proc/{pid}"


@ROOT_ONLY
def test_kubelet_processes_are_roots_processes_named_kubelet(tmp_path):
    proc(tmp_path, 40, ["/usr/bin/kubelet", "--config=/c"])
    proc(tmp_path, 7, ["/var/lib/rancher/rke2/bin/kubelet", "--max-pods=5"], comm="kubelet")
    proc(tmp_path, 8, ["/usr/bin/containerd"], comm="containerd")
    # a user's process under the kubelet's name is not the node's kubelet
    os.chown(proc(tmp_path, 9, ["/tmp/kubelet", "--kube-reserved=cpu=64"]), 1000, 1000)
    put(tmp_path, "/proc/self/comm", "kubelet")  # not a pid
    got = kubelet_processes(NodeFiles(str(tmp_path)))
    assert [(p.pid, p.argv, p.cwd) for p in got] == [
        (7, ["/var/lib/rancher/rke2/bin/kubelet", "--max-pods=5"], "/etc/kubernetes"),
        (40, ["/usr/bin/kubelet", "--config=/c"], "/etc/kubernetes"),
    ]


@ROOT_ONLY
def test_only_programs_only_root_can_change_are_run(tmp_path):
    files = NodeFiles(str(tmp_path))
    os.chmod(tmp_path, 0o755)
    program = put(tmp_path, "/usr/bin/kubelet", "#!/bin/sh\n")
    for d in (tmp_path / "usr", tmp_path / "usr/bin"):
        os.chmod(d, 0o755)
    os.chmod(program, 0o755)
    assert untrusted_executable(files, "/usr/bin/kubelet") is None
    assert untrusted_executable(files, "kubelet") == "kubelet is not an absolute path"
    assert "No such file" in untrusted_executable(files, "/usr/bin/nope")
    os.chmod(program, 0o757)
    assert untrusted_executable(files, "/usr/bin/kubelet") == (
        "/usr/bin/kubelet is writable by others than root"
    )
    os.chmod(program, 0o755)
    os.chmod(tmp_path / "usr/bin", 0o777)
    assert untrusted_executable(files, "/usr/bin/kubelet") == (
        "/usr/bin is writable by others than root"
    )
    os.chmod(tmp_path / "usr/bin", 0o755)
    os.chown(program, 1000, 0)
    assert untrusted_executable(files, "/usr/bin/kubelet") == (
        "/usr/bin/kubelet is writable by others than root"
    )


def test_host_runs_a_command_and_answers_none_when_it_fails():
    host = Host()
    assert host.run_command([sys.executable, "-c", "print('v1.36.2')"]) == "v1.36.2\n"
    assert host.run_command([sys.executable, "-c", "raise SystemExit(3)"]) is None
    assert host.run_command(["/nonexistent/kubelet", "--version"]) is None
    assert host.run_command([sys.executable, "-c", "import time; time.sleep(5)"], 0.2) is None
