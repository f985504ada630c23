"""This node's capacity, read the way the kubelet (through cAdvisor) sees it.

cpu = CPUs both online and in this process's affinity; memory = MemTotal (BinarySI);
ephemeral-storage = size of the filesystem holding the kubelet root dir; pid =
min(pid_max, threads-max); hugepages-<size> = nr_hugepages × page size. The /proc and /sys
roots are parameters so tests can point them at a fake tree.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping

from cgalloc.errors import HostError
from cgalloc.model.quantity import BINARY_SI, Quantity
from cgalloc.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    HUGEPAGES_PREFIX,
    MEMORY,
    PID,
    ResourceList,
)

CPUSET_FORM = "a CPU list such as 0-3,8"
# The kernel's largest NR_CPUS (x86 MAXSMP); a bound keeps "0-99999999999" from building a huge set.
MAX_CPU_ID = 8191


def parse_cpuset(text: str) -> frozenset[int]:
    """The kernel/kubelet CPU list format: "0-2,5" -> {0, 1, 2, 5}; "" -> empty.

    Raises ValueError naming the accepted form.
    """
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for item in text.split(","):
        first, sep, last = item.partition("-")
        # isascii: str.isdigit() also accepts digits such as "¹" that int() refuses
        if not (first.isascii() and first.isdigit()) or (
            sep and not (last.isascii() and last.isdigit())
        ):
            raise ValueError(f"{text!r} is not {CPUSET_FORM}")
        start, end = int(first), int(last) if sep else int(first)
        if end < start:
            raise ValueError(f"{text!r} has a descending range {item!r}; expected {CPUSET_FORM}")
        if end > MAX_CPU_ID:
            raise ValueError(
                f"{text!r} names CPU {end}, above the kernel's limit of {MAX_CPU_ID}; "
                f"expected {CPUSET_FORM}"
            )
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


def _atoi(text: str) -> int:
    """Go's strconv.Atoi: an optional sign and ASCII digits, nothing else (no spaces)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"strconv.Atoi: parsing {text!r}: invalid syntax")
    return int(text)


def parse_cpu_list(text: str) -> frozenset[int]:
    """k8s.io/utils/cpuset Parse, as the kubelet reads reservedSystemCPUs: items split on ","
    then on the first "-", each number read by strconv.Atoi, so "+1" is CPU 1 and " 1" is
    refused. Raises ValueError."""
    if text == "":
        return frozenset()
    cpus: set[int] = set()
    for item in text.split(","):
        first, sep, last = item.partition("-")
        start = _atoi(first)
        end = _atoi(last) if sep else start
        if start > end:
            raise ValueError(f"invalid range {item!r} ({start} > {end})")
        if end > MAX_CPU_ID:  # start >= 0: Atoi's sign can only be "+" after the split on "-"
            raise ValueError(f"{item!r} names CPU {end}, above the kernel's limit of {MAX_CPU_ID}")
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


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


def node_cpus(
    overrides: Mapping[str, Quantity], online: Callable[[], frozenset[int]] = online_cpus
) -> frozenset[int]:
    """The planned node's CPUs: 0..N-1 for a ``--capacity cpu=N`` override, else this host's."""
    if CPU in overrides:
        return frozenset(range(overrides[CPU].value()))
    return online()


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


def max_pids(proc_root: str = "/proc") -> int:
    """The kubelet's MaxPID (pkg/kubelet/stats/pidlimit/pidlimit_linux.go): the smaller of
    kernel.pid_max and kernel.threads-max, or the one that can be read."""
    values = []
    paths = [os.path.join(proc_root, "sys/kernel", name) for name in ("pid_max", "threads-max")]
    for path in paths:
        try:
            text = _read(path).strip()
        except HostError:
            continue
        if text.isascii() and text.isdigit():
            values.append(int(text))
    if not values:
        raise HostError(f"cannot read a number from {paths[0]} or {paths[1]}.")
    return min(values)


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
) -> ResourceList:
    """cpu, memory, ephemeral-storage, pid and hugepages-* of this node."""
    capacity: ResourceList = {
        CPU: Quantity.from_milli(len(online_cpus(sys_root, affinity)) * 1000),
        MEMORY: Quantity.from_int(mem_total_bytes(proc_root), BINARY_SI),
        EPHEMERAL_STORAGE: Quantity.from_int(filesystem_bytes(root_dir), BINARY_SI),
        PID: Quantity.from_int(max_pids(proc_root)),
    }
    capacity.update(hugepages(sys_root))
    return capacity
