"""What the kernel accepts in each cgroup file cgalloc writes, and in cgroup names.

Checked on the whole desired tree before the first write, so a value the kernel would refuse
(an error after hundreds of writes and their undo) or silently change (a wrap modulo 2^64, a
clamp that verify then reports as drift forever) is bad input: exit 2, nothing written.

Kernel facts (torvalds/linux, 64-bit, 4 KiB pages):

- memory (v1 ``memory.limit_in_bytes``, v2 ``memory.max``) and hugetlb limits go through
  ``page_counter_memparse`` (mm/page_counter.c): ``memparse`` reads an unsigned 64-bit number
  without an overflow check (so 2^64 + n is stored as n), then the page count is capped at
  ``PAGE_COUNTER_MAX = LONG_MAX / PAGE_SIZE`` (include/linux/page_counter.h): the largest limit
  is 9223372036854771712 bytes. hugetlb then rounds down to whole huge pages
  (mm/hugetlb_cgroup.c ``hugetlb_cgroup_write``).
- ``pids.max``: ``pids_max_write`` (kernel/cgroup/pids.c) refuses a limit ``>= PIDS_MAX``,
  ``PIDS_MAX = PID_MAX_LIMIT + 1`` and ``PID_MAX_LIMIT = 4 * 1024 * 1024`` on 64-bit
  (include/linux/threads.h).
- cpu bandwidth (v1 ``cpu.cfs_period_us``/``cpu.cfs_quota_us``, v2 ``cpu.max``):
  ``tg_set_cfs_bandwidth`` (kernel/sched/core.c) refuses a period outside
  1 ms..1 s (``min_cfs_quota_period``, ``max_cfs_quota_period``) and a quota below 1 ms or
  above ``max_cfs_runtime`` (``MAX_BW = 2^44 - 1`` µs); -1/``max`` means no limit.
- ``cpu.shares``: ``sched_group_set_shares`` clamps to ``MIN_SHARES`` 2 .. ``MAX_SHARES``
  2^18 (kernel/sched/sched.h), so anything outside reads back different.
- ``cpu.weight``: ``cpu_weight_write_u64`` refuses outside ``CGROUP_WEIGHT_MIN`` 1 ..
  ``CGROUP_WEIGHT_MAX`` 10000 (include/linux/cgroup.h).
- cpusets: ``cpulist_parse`` refuses CPU ids at or above ``nr_cpumask_bits``; ``NR_CPUS`` is at
  most 8192 (arch/x86/Kconfig), so CPU ids stop at 8191; memory nodes at ``MAX_NUMNODES`` 1024.
- names: a component longer than ``NAME_MAX`` (255) fails mkdir with ENAMETOOLONG, a path longer
  than ``PATH_MAX`` (4096, with its NUL) cannot be opened, ``cgroup_mkdir``
  (kernel/cgroup/cgroup.c) refuses a name holding a newline, and no path can hold a NUL.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from cgalloc.model.cpuset import MAX_CPU_ID, parse_cpuset

PAGE_SIZE = 4096
PAGE_COUNTER_MAX = (2**63 - 1) // PAGE_SIZE
MEMORY_MAX = PAGE_COUNTER_MAX * PAGE_SIZE  # 9223372036854771712
PID_MAX_LIMIT = 4 * 1024 * 1024
PERIOD_RANGE = (1000, 1_000_000)  # µs
QUOTA_MIN = 1000  # µs
QUOTA_MAX = 2**44 - 1  # µs, MAX_BW
SHARES_RANGE = (2, 262144)
WEIGHT_RANGE = (1, 10000)
MAX_NODE_ID = 1023
NAME_MAX = 255
PATH_MAX = 4095  # bytes, without the terminating NUL


def _int(text: str) -> int | None:
    text = text.strip()
    if text in ("max", "-1"):
        return -1
    return int(text) if text.isascii() and text.isdigit() else None


def _in(value: int | None, low: int, high: int, unlimited: bool = True) -> bool:
    return value is not None and ((unlimited and value == -1) or low <= value <= high)


def _bytes(text: str) -> str | None:
    if _in(_int(text), 0, MEMORY_MAX):
        return None
    return f"bytes between 0 and {MEMORY_MAX} (PAGE_COUNTER_MAX pages), or max"


def _pids(text: str) -> str | None:
    if _in(_int(text), 0, PID_MAX_LIMIT):
        return None
    return f"a count between 0 and {PID_MAX_LIMIT} (PID_MAX_LIMIT), or max"


def _period(text: str) -> str | None:
    if _in(_int(text), *PERIOD_RANGE, unlimited=False):
        return None
    return f"a period between {PERIOD_RANGE[0]} and {PERIOD_RANGE[1]} µs"


def _quota(text: str) -> str | None:
    if _in(_int(text), QUOTA_MIN, QUOTA_MAX):
        return None
    return f"a quota between {QUOTA_MIN} and {QUOTA_MAX} µs, or -1 (no limit)"


def _cpu_max(text: str) -> str | None:
    quota, _, period = text.strip().partition(" ")
    return _quota(quota) or (_period(period) if period else None)


def _ranged(low: int, high: int, what: str) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        ok = _in(_int(text), low, high, unlimited=False)
        return None if ok else f"{what} between {low} and {high}"

    return check


def _ids(high: int, what: str) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        try:
            ids = parse_cpuset(text)
        except ValueError:
            return f"a list of {what} such as 0-3,8"
        if ids and max(ids) > high:
            return f"{what} between 0 and {high}"
        return None

    return check


CHECKS: dict[str, Callable[[str], str | None]] = {
    "memory.max": _bytes,
    "memory.min": _bytes,  # MemoryQoS: the tiers' sums can pass PAGE_COUNTER_MAX
    "memory.low": _bytes,
    "memory.swap.max": _bytes,  # --reserved-swap: page_counter_memparse too
    "memory.limit_in_bytes": _bytes,
    "memory.memsw.limit_in_bytes": _bytes,
    "pids.max": _pids,
    "cpu.cfs_period_us": _period,
    "cpu.cfs_quota_us": _quota,
    "cpu.max": _cpu_max,
    "cpu.shares": _ranged(*SHARES_RANGE, "shares"),
    "cpu.weight": _ranged(*WEIGHT_RANGE, "a weight"),
    "cpuset.cpus": _ids(MAX_CPU_ID, "CPU ids"),
    "cpuset.mems": _ids(MAX_NODE_ID, "memory node ids"),
}


@lru_cache(maxsize=1024)  # a plan checks the same few values for each of thousands of pods
def value_problem(file: str, value: str) -> str | None:
    """What the kernel accepts in ``file`` when it would refuse or change ``value``; else None."""
    check = CHECKS.get(file)
    if check is None and file.startswith("hugetlb."):
        check = _bytes
    return check(value) if check is not None else None


# The input a cgroup's values come from, by its role: the field a refusal tells the user to fix.
VALUE_FIELDS = {
    "kubepods": "the kubepods limits (--capacity minus the reservations)",
    "qos": "the QoS limits (--capacity minus the reservations)",
    "pod": "--pods",
    "kube-reserved": "--kube-reserved",
    "system-reserved": "--system-reserved",
}
# a file whose value comes from another field than its cgroup's role says
FILE_FIELDS = {("pod", "pids.max"): "podPidsLimit (--pod-max-pids)"}


def value_refusal(role: str, path: str, file: str, value: str) -> str | None:
    """setup's sentence refusing ``value`` in ``file`` of the ``role`` cgroup ``path`` (no
    leading '/') when the kernel would refuse or change it; None when it takes it."""
    accepted = value_problem(file, value)
    if accepted is None:
        return None
    field = FILE_FIELDS.get((role, file)) or VALUE_FIELDS.get(role, role)
    # the path whole (up to PATH_MAX): a pod's UID is at its end, and one sentence per pod
    return (
        f"{field}: {file} {_cut(value, len(value))} for {shown_path(path, PATH_MAX)} is outside"
        f" the kernel's range; accepted: {accepted}."
    )


def _cut(text: str, length: int, limit: int = 80) -> str:
    # a message shows at most ``limit`` characters of a value: a 100 KB name is not echoed whole
    return text if len(text) <= limit else f"{text[: limit - 20]}...({length} characters)"


def shown_path(path: str, limit: int = 80) -> str:
    """A cgroup path (no leading '/') for a message: quoted when it holds control characters,
    cut past ``limit`` characters."""
    return _cut("/" + path if path.isprintable() else repr("/" + path), len(path), limit)


def name_refusal(field: str, path: str, mount: str = "") -> str | None:
    """setup's sentence refusing the cgroup ``path`` (no leading '/') that ``field`` names, when
    the kernel cannot hold it below ``mount``; None when it can."""
    problem = name_problem(path, mount)
    return None if problem is None else f"{field}: the cgroup {shown_path(path)} {problem}."


def name_problem(path: str, mount: str = "") -> str | None:
    """Why the kernel cannot hold the cgroup ``path`` (below ``mount``); None when it can."""
    if "\x00" in path or "\n" in path:
        return "holds a NUL or newline, which a cgroup name cannot"
    ascii_only = path.isascii()
    if not ascii_only:
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:  # an argument's undecodable bytes (surrogateescape)
            return "holds bytes that are not UTF-8; cgalloc takes cgroup names in UTF-8"
    if ascii_only and len(path) <= NAME_MAX:  # no component can be longer: a pod's path
        longest = 0
    else:
        longest = max((len(p.encode()) for p in path.split("/")), default=0)  # UTF-8: above
    if longest > NAME_MAX:
        return f"has a component of {longest} bytes; a cgroup name is at most {NAME_MAX} (NAME_MAX)"
    size = len(f"{mount.rstrip('/')}/{path}/memory.limit_in_bytes".encode())
    if size > PATH_MAX:
        return f"makes paths of {size} bytes; a path is at most {PATH_MAX} (PATH_MAX)"
    return None
