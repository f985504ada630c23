"""The human table of ``cgalloc stats``: units, columns, filters by role and depth, sorting,
and the frames ``--watch`` draws."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import NamedTuple

from cgalloc.cli.render import aligned
from cgalloc.errors import InputError
from cgalloc.model.cgroup_v1 import UNLIMITED_FLOOR
from cgalloc.ops import stats

# Every role a row can have, in the order the tree lists them (stats.node_targets).
ROLES = ("node", "kubepods", "qos", "pod", "kube-reserved", "system-reserved",
         "kubelet", "runtime", "misc")  # fmt: skip

HEADER = ("CGROUP", "ROLE", "CPU", "CPU-LIMIT", "CPU-RESERVED", "MEMORY", "MEMORY-LIMIT",
          "MEMORY-RESERVED", "PIDS", "THROTTLED", "FLAG")  # fmt: skip
OVER = "OVER-RESERVATION"

# "\b" keeps click from re-wrapping the paragraph: one column per line.
COLUMNS_HELP = "\n".join((
    "\b",
    "Table columns (- means not available):",
    "  CGROUP           path below the hierarchy root",
    "  ROLE             node (the root cgroup), " + ", ".join(ROLES[1:5]) + ",",
    "                   " + ", ".join(ROLES[5:]),
    "  CPU              usage in cores since the previous sample (- on the first)",
    "  CPU-LIMIT        quota in cores (max: none)",
    "  CPU-RESERVED     reservation in cores",
    "  MEMORY           working set in MiB/GiB: usage - inactive_file, as the",
    "                   kubelet counts it",
    "  MEMORY-LIMIT     limit (max: none)",
    "  MEMORY-RESERVED  reservation",
    "  PIDS             tasks now",
    "  THROTTLED        throttled periods/periods",
    "  FLAG             OVER-RESERVATION: a reserved cgroup uses more than its",
    "                   reservation (the reasons follow the table)",
))  # fmt: skip

# ANSI: cursor home, then erase the screen, so each frame replaces the last in place.
CLEAR = "\x1b[H\x1b[2J"


class SortBy(str, enum.Enum):
    """Row orders of the table; the numeric ones put the largest first."""

    tree = "tree"
    name = "name"
    role = "role"
    cpu = "cpu"
    memory = "memory"
    pids = "pids"


class Row(NamedTuple):  # not a dataclass: those cost ~1.5 ms per process to build
    """One cgroup of a sample with the figures the table shows."""

    target: stats.Target
    cur: stats.CgroupStats
    nano_cores: int | None  # CPU rate since the previous sample
    over: list[str]  # why usage exceeds the reservation; empty when it does not


def parse_roles(text: str) -> frozenset[str] | None:
    """``--role`` ("pod,qos") as a set; None for no filter. Raises InputError for other names."""
    if not text:
        return None
    names = [n.strip() for n in text.split(",")]
    bad = [n for n in names if n not in ROLES]
    if bad:
        raise InputError(
            f"--role must be a comma-separated list of {', '.join(ROLES)}; got {bad[0]!r}."
        )
    return frozenset(names)


def depth(path: str) -> int:
    """Levels below the hierarchy root: 0 for the root cgroup, 1 for ``kubepods``."""
    return path.count("/") + 1 if path else 0


def keeper(roles: frozenset[str] | None, max_depth: int | None) -> Callable[[stats.Target], bool]:
    """Whether a target passes ``--role`` and ``--depth``."""

    def keep(t: stats.Target) -> bool:
        shown_role = roles is None or t.role in roles
        return shown_role and (max_depth is None or depth(t.path) <= max_depth)

    return keep


def _descending(value: int | None) -> tuple[int, int]:
    # Rows without the figure sort after every row that has one.
    return (1, 0) if value is None else (0, -value)


_SORT_KEYS: dict[SortBy, Callable[[Row], tuple]] = {
    SortBy.name: lambda r: (r.target.path,),
    SortBy.role: lambda r: (ROLES.index(r.target.role), r.target.path),
    SortBy.cpu: lambda r: (*_descending(r.nano_cores), r.target.path),
    SortBy.memory: lambda r: (*_descending(r.cur.working_set), r.target.path),
    SortBy.pids: lambda r: (*_descending(r.cur.pids_current), r.target.path),
}


def ordered(rows: Sequence[Row], by: SortBy) -> list[Row]:
    """Rows in the ``--sort-by`` order; ties fall back to the path, so the order is stable."""
    return list(rows) if by is SortBy.tree else sorted(rows, key=_SORT_KEYS[by])


def memory(value: int | None) -> str:
    """Bytes in MiB below 1 GiB, GiB above; ``max`` for no limit."""
    if value is None:
        return "-"
    if value >= UNLIMITED_FLOOR:
        return "max"
    if value >= 2**30:
        return f"{value / 2**30:.2f}GiB"
    return f"{value / 2**20:.1f}MiB"


def cores(value: float | None) -> str:
    """Cores to the millicore, the resolution the kubelet's quantities have."""
    return "-" if value is None else f"{value:.3f}"


def _cpu_limit(rec: stats.CgroupStats) -> str:
    q, p = rec.cpu_quota_us, rec.cpu_period_us
    if q is None or not p:
        return "-"
    return "max" if q == stats.UNLIMITED else cores(q / p)


def _cells(r: Row) -> tuple[str, ...]:
    t, cur = r.target, r.cur
    return (
        "/" + t.path,
        t.role,
        cores(None if r.nano_cores is None else r.nano_cores / 1e9),
        _cpu_limit(cur),
        cores(None if t.reserved_milli_cpu is None else t.reserved_milli_cpu / 1000),
        memory(cur.working_set),
        memory(cur.memory_limit),
        memory(t.reserved_memory),
        "-" if cur.pids_current is None else str(cur.pids_current),
        "-" if cur.nr_throttled is None else f"{cur.nr_throttled}/{cur.nr_periods}",
        OVER if r.over else "",
    )


def reasons(rows: Sequence[Row]) -> list[str]:
    """One line per reservation exceeded: ``<role> /<path>: <why>``."""
    return [f"{r.target.role} /{r.target.path}: {why}" for r in rows for why in r.over]


def table(rows: Sequence[Row], headers: bool = True) -> str:
    """The rows aligned under the column header (or without it); no trailing spaces."""
    lines = aligned([*([HEADER] if headers else []), *map(_cells, rows)])
    return "\n".join(line.rstrip() for line in lines)
