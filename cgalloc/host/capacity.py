"""This node's capacity, read the way the kubelet (through cAdvisor) sees it.

cpu = CPUs both online and in this process's affinity; memory = MemTotal (BinarySI);
ephemeral-storage = size of the filesystem holding the kubelet root dir; pid = what the kubelet
minor takes from kernel.pid_max and kernel.threads-max (both are read here; which counts is
``versions.pid_capacity``'s decision); hugepages-<size> = nr_hugepages × page size. The /proc
and /sys roots are parameters so tests can point them at a fake tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from cgalloc.errors import HostError
from cgalloc.model.cpuset import parse_cpuset
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.quantity import BINARY_SI, Quantity
from cgalloc.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    HUGEPAGES_PREFIX,
    MEMORY,
    PID,
    ResourceList,
)
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, pid_capacity


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError as err:
        raise HostError(f"cannot read {path}: {err.strerror or err}.") from None


def online_cpus(sys_root: str = "/sys", affinity: Iterable[int] | None = None) -> frozenset[int]:
    """CPUs online (``<sys>/devices/system/cpu/online``) and usable here (sched_getaffinity)."""
    online = parse_cpuset(_read(os.path.join(sys_root, "devices/system/cpu/online")))
    usable = os.sched_getaffinity(0) if affinity is None else affinity
    return online & frozenset(usable)


def mem_total_bytes(proc_root: str = "/proc") -> int:
    """MemTotal from ``<proc>/meminfo``, in bytes."""
    path = os.path.join(proc_root, "meminfo")
    for line in _read(path).splitlines():
        name, _, rest = line.partition(":")
        if name == "MemTotal":
            fields = rest.split()
            if fields and fields[0].isdigit():
                return int(fields[0]) * 1024  # the kernel's "kB" is KiB
    raise HostError(f"{path} has no MemTotal line.")


def existing_parent(path: str) -> str:
    """``path`` itself or its nearest existing parent directory."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def filesystem_bytes(path: str) -> int:
    """Size of the filesystem holding ``path`` (or its nearest existing parent)."""
    st = os.statvfs(existing_parent(path))
    return st.f_blocks * st.f_frsize


def pid_sysctls(proc_root: str = "/proc") -> tuple[int | None, int | None]:
    """kernel.pid_max and kernel.threads-max, each None when it cannot be read as a number."""
    values: list[int | None] = []
    for name in ("pid_max", "threads-max"):
        try:
            text = _read(os.path.join(proc_root, "sys/kernel", name)).strip()
        except HostError:
            text = ""
        values.append(int(text) if text.isascii() and text.isdigit() else None)
    return values[0], values[1]


def max_pids(proc_root: str = "/proc", kubelet_version: str = DEFAULT_KUBELET_VERSION) -> int:
    """The kubelet's MaxPID (pkg/kubelet/stats/pidlimit/pidlimit_linux.go) at
    ``kubelet_version``: from 1.24 the smaller of kernel.pid_max and kernel.threads-max, or the
    one that can be read; before, kernel.pid_max. HostError when the kubelet would have none."""
    pid = pid_capacity(kubelet_version, *pid_sysctls(proc_root))
    if pid is None:
        paths = [os.path.join(proc_root, "sys/kernel", n) for n in ("pid_max", "threads-max")]
        raise HostError(f"cannot read a number from {paths[0]} or {paths[1]}.")
    return pid


def hugepages(sys_root: str = "/sys") -> ResourceList:
    """``hugepages-<size>`` -> nr_hugepages × size, for every page size the kernel offers."""
    base = os.path.join(sys_root, "kernel/mm/hugepages")
    out: ResourceList = {}
    try:
        entries = sorted(os.listdir(base))
    except FileNotFoundError:
        return out  # no hugetlb support in this kernel
    for entry in entries:
        # directory names are "hugepages-<n>kB"
        size_kb = entry.removeprefix("hugepages-").removesuffix("kB")
        if not size_kb.isdigit():
            continue
        size = int(size_kb) * 1024
        count = _read(os.path.join(base, entry, "nr_hugepages")).strip()
        if not count.isdigit():
            raise HostError(f"{base}/{entry}/nr_hugepages holds {count!r}, not a number.")
        name = HUGEPAGES_PREFIX + str(Quantity.from_int(size, BINARY_SI))
        out[name] = Quantity.from_int(int(count) * size, BINARY_SI)
    return out


def read_capacity(
    root_dir: str = "/var/lib/kubelet",
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    affinity: Iterable[int] | None = None,
    kubelet_version: str = DEFAULT_KUBELET_VERSION,
) -> ResourceList:
    """cpu, memory, ephemeral-storage, pid and hugepages-* of this node, as kubelet
    ``kubelet_version`` counts them."""
    capacity: ResourceList = {
        CPU: Quantity.from_milli(len(online_cpus(sys_root, affinity)) * 1000),
        MEMORY: Quantity.from_int(mem_total_bytes(proc_root), BINARY_SI),
        EPHEMERAL_STORAGE: Quantity.from_int(filesystem_bytes(root_dir), BINARY_SI),
    }
    sysctls = pid_sysctls(proc_root)
    pid = pid_capacity(kubelet_version, *sysctls)
    if pid is not None:
        capacity[PID] = Quantity.from_int(pid)
    elif sysctls == (None, None):
        max_pids(proc_root, kubelet_version)  # raises: neither can be read
    # else: a kubelet before 1.24 with pid_max unreadable has no pid capacity (MaxPID nil)
    capacity.update(hugepages(sys_root))
    return capacity


def node_capacity(cfg: NodeConfig) -> ResourceList:
    """This host's capacity (read below ``cfg.root_dir``) with ``--capacity`` applied."""
    capacity = read_capacity(cfg.root_dir, kubelet_version=cfg.kubelet_version)
    capacity.update(cfg.capacity_overrides)
    return capacity
