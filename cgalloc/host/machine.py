"""The machine cgalloc acts on, as one object every operation is handed (:class:`Host`).

The commands make the real one. The test suite hands in its own subclass to drive a cgroup tree
in a temporary directory: nothing in the installed tool (no option, no environment variable)
makes a host other than this one.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cgalloc.host.core import Root

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def read_boot_id(path: str = BOOT_ID_FILE) -> str:
    """The kernel's id of this boot, or "" when it cannot be read (then every record counts as
    this boot's)."""
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read(64).strip()
    except (OSError, ValueError):
        return ""


class KernelHooks(Protocol):
    """What a kernel does around a change to cgroupfs: the real one needs no hooks."""

    def after_mkdir(self, mount: str, path: str) -> None: ...
    def before_rmdir(self, mount: str, path: str) -> None: ...
    def on_write(self, mount: str, relpath: str, value: str) -> str: ...
    def after_write(self, mount: str, relpath: str) -> None: ...


class Host:
    """This node: its mounts, its boot, its cgroup filesystems, its systemd and privileges."""

    mountinfo = "/proc/self/mountinfo"
    # Changes are made one by one through these when set (a kernel stood in for); the real
    # kernel needs none, so changes go to the C core in batches.
    kernel: KernelHooks | None = None
    # Whether a cgroup tree here is this node's: planned capacity (--capacity) must not be
    # written to it.
    is_this_node = True
    # Where the node's own files are read (--match-kubelet: unit files, /proc, the kubelet's
    # and the container runtime's configuration).
    node_root = "/"

    def boot_id(self) -> str:
        return read_boot_id()

    def open_root(self, mount: str) -> Root:
        """A core root for a hierarchy mount; HostError unless it is a cgroup filesystem."""
        from cgalloc.host import core

        return core.open_root(mount)

    def systemd_manages_cgroups(self) -> bool:
        """Whether systemd is PID 1 here (it then owns the cgroup tree's slices)."""
        from cgalloc.host.systemd import systemd_running

        return systemd_running()

    def privileged(self) -> bool:
        """Whether this process may change cgroups (root)."""
        return os.geteuid() == 0

    def run_command(self, argv: list[str], timeout: float = 10.0) -> str | None:
        """The standard output of ``argv`` (a program of the node: ``systemctl show``,
        ``kubelet --version``), None when it cannot run, fails or takes longer than
        ``timeout`` seconds."""
        import subprocess

        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                stdin=subprocess.DEVNULL, env=env, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None
