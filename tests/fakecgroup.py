"""Fake cgroup v1 and v2 trees in a temporary directory, with a small kernel emulation.

A real cgroupfs creates interface files on mkdir, removes them on rmdir and turns
``+cpu -memory`` written to ``cgroup.subtree_control`` into the resulting set. A directory
on tmpfs does none of that, so ``KERNEL`` does it for cgalloc's apply engine (installed
in-process by :func:`use_fake_tree`, never through the environment). Values read back end
in a newline, as from the kernel. The tree's own ``mountinfo`` describes its mounts for
``cgroupfs.detect``.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from cgalloc.host.machine import Host, read_boot_id

MARKER = ".fake-cgroup.json"
BOOT_ID = "boot_id"  # the fake kernel's /proc/sys/kernel/random/boot_id, beside the tree
NODE_ROOT = "node"  # the node's own files (unit files, /proc, /etc), beside the tree
V2_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc"
V1_MOUNTS = {  # mount dir -> controllers, the classic co-mounted layout
    "cpu,cpuacct": ["cpu", "cpuacct"],
    "cpuset": ["cpuset"],
    "memory": ["memory"],
    "pids": ["pids"],
    "hugetlb": ["hugetlb"],
    "systemd": ["name=systemd"],
}
V1_UNLIMITED = "9223372036854771712"
HUGE_SIZES = ("2MB", "1GB")


def _v2_files(controllers: set[str]) -> dict[str, str]:
    files = {"cgroup.procs": "", "cgroup.subtree_control": "", "cgroup.events": "populated 0"}
    if "cpu" in controllers:
        files |= {"cpu.weight": "100", "cpu.max": "max 100000", "cpu.stat": "usage_usec 0"}
    if "memory" in controllers:
        files |= {"memory.max": "max", "memory.current": "0", "memory.min": "0", "memory.low": "0"}
        files |= {"memory.swap.max": "max", "memory.swap.current": "0"}
    if "pids" in controllers:
        files |= {"pids.max": "max", "pids.current": "0"}
    if "cpuset" in controllers:
        files |= {"cpuset.cpus": "", "cpuset.mems": ""}
    if "hugetlb" in controllers:
        files |= {f"hugetlb.{s}.max": "max" for s in HUGE_SIZES}
    return files


def _v1_files(controllers: list[str], root: bool = False) -> dict[str, str]:
    files = {"cgroup.procs": "", "tasks": "", "cgroup.clone_children": "0"}
    for c in controllers:
        if c == "cpu":
            files |= {"cpu.shares": "1024", "cpu.cfs_period_us": "100000"}
            files |= {"cpu.cfs_quota_us": "-1"}
        elif c == "cpuacct":
            files |= {"cpuacct.usage": "0"}
        elif c == "cpuset":
            # A new v1 cpuset cgroup starts empty: nothing can join until cpus/mems are set.
            files |= {"cpuset.cpus": "0-3" if root else "", "cpuset.mems": "0" if root else ""}
        elif c == "memory":
            files |= {"memory.limit_in_bytes": V1_UNLIMITED, "memory.usage_in_bytes": "0"}
            files |= {"memory.memsw.limit_in_bytes": V1_UNLIMITED}
        elif c == "pids" and not root:
            files |= {"pids.max": "max", "pids.current": "0"}
        elif c == "hugetlb":
            files |= {f"hugetlb.{s}.limit_in_bytes": V1_UNLIMITED for s in HUGE_SIZES}
    return files


def _populate(directory: Path, files: dict[str, str]) -> None:
    for name, value in files.items():
        (directory / name).write_text(value + "\n")


def make_tree(base: Path, version: str) -> Path:
    """Build a fake hierarchy under ``base/cgroup`` and its ``base/mountinfo``; return the root."""
    root = base / "cgroup"
    root.mkdir(parents=True)
    lines = []
    if version == "v2":
        _populate(root, {"cgroup.controllers": V2_CONTROLLERS, "cgroup.subtree_control": ""})
        _populate(root, {"cgroup.procs": "", "memory.stat": "anon 0"})
        (root / MARKER).write_text(json.dumps({"version": "v2"}))
        lines.append(f"30 25 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate")
    else:
        for i, (mount, ctrls) in enumerate(V1_MOUNTS.items()):
            d = root / mount
            d.mkdir()
            _populate(d, _v1_files(ctrls, root=True))
            (d / MARKER).write_text(json.dumps({"version": "v1", "controllers": ctrls}))
            opts = ",".join(["rw", *ctrls])
            lines.append(f"{40 + i} 25 0:{40 + i} / {d} rw,nosuid - cgroup cgroup {opts}")
    (base / "mountinfo").write_text("\n".join(lines) + "\n")
    reboot(base)
    return root


def _mount_info(mount: str) -> dict:
    return json.loads((Path(mount) / MARKER).read_text())


class FakeKernel:
    """The part of the kernel's cgroupfs behaviour cgalloc relies on."""

    def after_mkdir(self, mount: str, path: str) -> None:
        info = _mount_info(mount)
        d = Path(mount, path)
        if info["version"] == "v2":
            enabled = (d.parent / "cgroup.subtree_control").read_text().split()
            _populate(d, {"cgroup.controllers": " ".join(enabled)})
            _populate(d, _v2_files(set(enabled)))
        else:
            _populate(d, _v1_files(info["controllers"]))

    def before_rmdir(self, mount: str, path: str) -> None:
        d = Path(mount, path)
        if any(p.is_dir() for p in d.iterdir()):
            return  # rmdir fails with ENOTEMPTY, as on the kernel
        if (d / "cgroup.procs").read_text().strip():
            raise OSError(16, "Device or resource busy")
        for f in d.iterdir():
            f.unlink()

    def on_write(self, mount: str, relpath: str, value: str) -> str:
        """What the file reads after ``value`` is written (delta syntax resolved)."""
        target = Path(mount, relpath)
        if target.name in ("cpuset.cpus", "cpuset.mems") and not value.strip():
            # kernel/cgroup/cpuset.c validate_change (6.1): a populated cpuset cannot go from
            # some CPUs or nodes to none.
            procs = (target.parent / "cgroup.procs").read_text().strip()
            if procs and target.read_text().strip():
                raise OSError(28, "No space left on device")
        if target.name in _MEMSW_PAIR:
            _memsw_invariant(target, value)
        if target.name != "cgroup.subtree_control":
            return value.rstrip("\n") + "\n"
        current = target.read_text().split()
        offered = (target.parent / "cgroup.controllers").read_text().split()
        for token in value.split():
            name = token[1:]
            if name not in offered:
                raise OSError(2, "No such file or directory")  # what the kernel says
            if token.startswith("+") and name not in current:
                current.append(name)
            elif token.startswith("-") and name in current:
                current.remove(name)
        order = V2_CONTROLLERS.split()
        return " ".join(sorted(current, key=order.index)) + "\n"

    def after_write(self, mount: str, relpath: str) -> None:
        target = Path(mount, relpath)
        if target.name == "cgroup.subtree_control":
            _offer_to_children(target.parent, set(target.read_text().split()))


_MEMSW_PAIR = {"memory.limit_in_bytes": "memory.memsw.limit_in_bytes"}
_MEMSW_PAIR |= {v: k for k, v in _MEMSW_PAIR.items()}


def _v1_bytes(text: str) -> int:
    value = int(text.strip())
    return int(V1_UNLIMITED) if value < 0 else value


def _memsw_invariant(target: Path, value: str) -> None:
    """mm/memcontrol.c mem_cgroup_resize_max (v1): the memory+swap limit is never below the
    memory limit; a write that would break that fails with EINVAL."""
    other = target.with_name(_MEMSW_PAIR[target.name])
    if not other.exists():
        return
    new, current = _v1_bytes(value), _v1_bytes(other.read_text())
    memsw = target.name == "memory.memsw.limit_in_bytes"
    if (memsw and new < current) or (not memsw and new > current):
        raise OSError(22, "Invalid argument")


def _offer_to_children(parent: Path, enabled: set[str]) -> None:
    """As the kernel does when subtree_control changes: existing children gain the interface
    files of newly enabled controllers and lose those of disabled ones."""
    order = V2_CONTROLLERS.split()
    base = set(_v2_files(set()))
    for child in parent.iterdir():
        listed = child / "cgroup.controllers"
        if not (child.is_dir() and listed.exists()):
            continue
        had = set(listed.read_text().split())
        for c in enabled - had:
            _populate(child, {f: v for f, v in _v2_files({c}).items() if f not in base})
        for c in had - enabled:
            for f in set(_v2_files({c})) - base:
                (child / f).unlink(missing_ok=True)
        listed.write_text(" ".join(sorted(enabled, key=order.index)) + "\n")


KERNEL = FakeKernel()


def existing_system_slice(root: Path, version: str, memory: str | None = None) -> None:
    """The node's own system.slice (not cgalloc's), with ``memory`` as its limit when given."""
    if version == "v2":
        (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
        mounts = [root]
    else:
        mounts = [d for d in root.iterdir() if d.is_dir()]
    for mount in mounts:
        (mount / "system.slice").mkdir()
        KERNEL.after_mkdir(str(mount), "system.slice")
    if memory is not None:
        memdir = root if version == "v2" else root / "memory"
        name = "memory.max" if version == "v2" else "memory.limit_in_bytes"
        (memdir / "system.slice" / name).write_text(memory + "\n")


def snapshot(root: Path) -> dict[str, str | None]:
    """Every directory (None) and file (content) under ``root``, for exact comparisons."""
    out: dict[str, str | None] = {}
    for dirpath, _dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        out[rel] = None
        for f in files:
            out[os.path.join(rel, f)] = Path(dirpath, f).read_text()
    return out


def fake_hierarchy(base: Path, version: str):
    """A fake tree of ``version`` under ``base`` and the Hierarchy cgroupfs.detect sees in it."""
    from cgalloc.host.cgroupfs import detect

    root = make_tree(base, version)
    return root, detect(str(root), str(base / "mountinfo"))


class FakeHost(Host):
    """This suite's machine: a cgroup tree in a directory (:func:`make_tree`) standing for this
    node's, with ``kernel`` standing in for the kernel's part (None: changes go to the C core
    as on a real kernel). Not this node, not systemd's, and every change is allowed."""

    __test__ = False
    is_this_node = False
    # the node's files (--match-kubelet): a directory a test fills, standing for "/"
    node_root = "/nonexistent-cgalloc-test-node"

    def __init__(self, base: Path | None = None, kernel=None) -> None:
        self.kernel = kernel
        self._boot_id_file = str(Path(base) / BOOT_ID) if base is not None else None
        # what the node's programs answer, by argv ("systemctl show ...", "kubelet --version");
        # a command not listed cannot run, as on a node without it
        self.commands: dict[tuple[str, ...], str] = {}
        if base is not None:
            self.mountinfo = str(Path(base) / "mountinfo")
            self.node_root = str(Path(base) / NODE_ROOT)

    def boot_id(self) -> str:
        return read_boot_id(self._boot_id_file) if self._boot_id_file else super().boot_id()

    def open_root(self, mount: str):
        from cgalloc.host import core

        return core.open_root(mount, allow_any_fs=True)

    def systemd_manages_cgroups(self) -> bool:
        return False

    def privileged(self) -> bool:
        return True

    def run_command(self, argv: list[str], timeout: float = 10.0) -> str | None:
        return self.commands.get(tuple(argv))


def fake_host(base: Path, kernel=None) -> FakeHost:
    """The host of the fake tree under ``base`` (see :func:`make_tree`), with the fake kernel."""
    return FakeHost(base, kernel or KERNEL)


def reboot(base: Path) -> None:
    """A new boot id for the fake tree under ``base`` (the tree itself is the test's to wipe)."""
    (Path(base) / BOOT_ID).write_text(str(uuid.uuid4()) + "\n")


def use_fake_tree(monkeypatch, base: Path, kernel=None) -> FakeHost:
    """Make the CLI commands this test runs through :func:`clirun.run_cli` act on the fake tree
    under ``base``; the host they are handed."""
    import clirun

    host = fake_host(base, kernel)
    monkeypatch.setattr(clirun, "HOST", host)
    return host


def fake_tree(tmp_path: Path, monkeypatch, version: str) -> Path:
    root, _ = fake_hierarchy(tmp_path, version)
    use_fake_tree(monkeypatch, tmp_path)
    return root


def where(root: Path, tmp: Path) -> list[str]:
    return ["--cgroupfs", str(root), "--state-dir", str(tmp / "state")]
