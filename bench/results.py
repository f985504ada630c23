"""Collected timings of one benchmark run and the table comparing them."""

from __future__ import annotations

from dataclasses import dataclass

# Which floor each contender is held against: cold reads open every file, warm ones pread.
FLOOR_FOR = {"warm": "floor pread (C)"}
COLD_FLOOR = "floor open/read/close (C)"


@dataclass
class Row:
    tree: str
    name: str
    ns_per_file: float | None  # None = did not run; ``note`` says why
    note: str = ""
    bytes_per_cgroup: float | None = None


ROWS: list[Row] = []
SLOW = (
    "pure-Python core cold",
    "naive Python (open/readlines/split)",
    "cgget (libcgroup)",
    "cgget, one call per cgroup",
)
ORDER = (
    "floor open/read/close (C)",
    "floor pread (C)",
    "core cold, 1 thread",
    "core cold, 2 threads",
    "core warm (sampler)",
    "stats records cold (TreeReader)",
    "pure-Python core cold",
    "naive Python (open/readlines/split)",
    "cgget (libcgroup)",
    "cgget, one call per cgroup",
)


def record(tree: str, name: str, ns_per_file: float | None, note: str = "", mem=None) -> None:
    ROWS.append(Row(tree, name, ns_per_file, note, mem))


def _floor(rows: dict[str, Row], name: str) -> float | None:
    key = FLOOR_FOR.get("warm") if "warm" in name or "pread" in name else COLD_FLOOR
    row = rows.get(key)
    return row.ns_per_file if row else None


def table() -> str:
    """ns/file, ratio to the matching floor, and speed-up of the core over the slow readers."""
    lines = []
    for tree in dict.fromkeys(r.tree for r in ROWS):
        rows = {r.name: r for r in ROWS if r.tree == tree}
        core = rows.get("core cold, 1 thread")
        lines.append(f"== {tree}")
        lines.append(
            f"  {'reader':<38}{'ns/file':>10}{'x floor':>9}{'core is x faster':>18}"
            f"{'B/cgroup':>10}  note"
        )
        for name in sorted(rows, key=lambda n: ORDER.index(n) if n in ORDER else 99):
            r = rows[name]
            floor = _floor(rows, name)
            ns = "-" if r.ns_per_file is None else f"{r.ns_per_file:.0f}"
            ratio = "-" if r.ns_per_file is None or not floor else f"{r.ns_per_file / floor:.2f}"
            faster = "-"
            if name in SLOW and r.ns_per_file and core and core.ns_per_file:
                faster = f"{r.ns_per_file / core.ns_per_file:.1f}"
            mem = "-" if r.bytes_per_cgroup is None else f"{r.bytes_per_cgroup:.0f}"
            lines.append(f"  {name:<38}{ns:>10}{ratio:>9}{faster:>18}{mem:>10}  {r.note}")
    return "\n".join(lines)
