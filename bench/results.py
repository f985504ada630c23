"""Collected timings of one benchmark run, the table comparing them and the verdict per target."""

from __future__ import annotations

from dataclasses import dataclass

WARM_FLOOR = "floor pread (C)"
COLD_FLOOR = "floor open/read/close (C)"
CORE_COLD = "core cold, 1 thread"
CORE_COLD2 = "core cold, 2 threads"
CORE_WARM = "core warm (sampler)"
NAIVE = "naive Python (open/readlines/split)"
CGGET = "cgget (libcgroup)"
CGGET_EACH = "cgget, one call per cgroup"


@dataclass
class Row:
    tree: str
    name: str
    ns_per_file: float | None  # None = did not run; ``note`` says why
    note: str = ""
    bytes_per_cgroup: float | None = None


ROWS: list[Row] = []
SECTIONS: list[tuple[str, list[str]]] = []  # other benches' tables: (title, lines)
SLOW = ("pure-Python core cold", NAIVE, CGGET, CGGET_EACH)
ORDER = (
    COLD_FLOOR,
    WARM_FLOOR,
    CORE_COLD,
    CORE_COLD2,
    CORE_WARM,
    "stats records cold (TreeReader)",
    "pure-Python core cold",
    NAIVE,
    CGGET,
    CGGET_EACH,
)

# The issues' read targets: (what, measured row, reference row, kind, bound). "ratio" targets
# hold measured/reference to at most ``bound``; "speedup" ones need reference/measured of at
# least ``bound``; "bytes" bounds the snapshot's bytes per cgroup.
TARGETS: tuple[tuple[str, str, str, str, float], ...] = (
    ("cold, 1 thread <= 1.15x open/read/close floor", CORE_COLD, COLD_FLOOR, "ratio", 1.15),
    ("cold, 2 threads <= 0.7x that 1-thread floor", CORE_COLD2, COLD_FLOOR, "ratio", 0.7),
    ("warm sampling <= 1.15x pread floor", CORE_WARM, WARM_FLOOR, "ratio", 1.15),
    (">= 5x faster than naive Python, cold", CORE_COLD, NAIVE, "speedup", 5),
    (">= 5x faster than naive Python, warm", CORE_WARM, NAIVE, "speedup", 5),
    (">= 100x faster than cgget (one process), cold", CORE_COLD, CGGET, "speedup", 100),
    (">= 100x faster than cgget (one process), warm", CORE_WARM, CGGET, "speedup", 100),
    (">= 100x faster than cgget per cgroup, cold", CORE_COLD, CGGET_EACH, "speedup", 100),
    (">= 100x faster than cgget per cgroup, warm", CORE_WARM, CGGET_EACH, "speedup", 100),
    ("<= 1 KiB per cgroup in a snapshot", CORE_COLD, CORE_COLD, "bytes", 1024),
)


def record(tree: str, name: str, ns_per_file: float | None, note: str = "", mem=None) -> None:
    ROWS.append(Row(tree, name, ns_per_file, note, mem))


def _floor_name(name: str) -> str:
    return WARM_FLOOR if "warm" in name or "pread" in name else COLD_FLOOR


def _floor(rows: dict[str, Row], name: str) -> float | None:
    row = rows.get(_floor_name(name))
    return row.ns_per_file if row else None


def verdict(
    kind: str, bound: float, measured: Row | None, reference: Row | None, floor: Row | None = None
) -> str:
    """``MET (value)``, ``GAP: value, needs ...`` or ``not measured`` for one target; a speed-up
    gap also says the most any reader at ``floor`` could get."""
    if kind == "bytes":
        value = measured.bytes_per_cgroup if measured else None
        if value is None:
            return "not measured"
        shown = f"{value:.0f} B/cgroup"
        return f"MET ({shown})" if value <= bound else f"GAP: {shown}, {value / bound:.2f}x over"
    if not (measured and measured.ns_per_file and reference and reference.ns_per_file):
        return "not measured"
    if kind == "ratio":
        value = measured.ns_per_file / reference.ns_per_file
        if value <= bound:
            return f"MET ({value:.2f}x)"
        return f"GAP: {value:.2f}x, needs {value / bound:.2f}x less time"
    value = reference.ns_per_file / measured.ns_per_file
    if value >= bound:
        return f"MET ({value:.1f}x)"
    gap = f"GAP: {value:.1f}x, needs {bound / value:.1f}x more"
    if floor and floor.ns_per_file and reference.ns_per_file / floor.ns_per_file < bound:
        # Even a reader at the syscall floor could not reach the bound.
        gap += f" (at most {reference.ns_per_file / floor.ns_per_file:.1f}x at the floor)"
    return gap


def _targets(rows: dict[str, Row]) -> list[str]:
    lines = ["  targets:"]
    for what, measured, reference, kind, bound in TARGETS:
        floor = rows.get(_floor_name(measured))
        shown = verdict(kind, bound, rows.get(measured), rows.get(reference), floor)
        lines.append(f"    {what:<48}{shown}")
    return lines


def table() -> str:
    """ns/file, ratio to the matching floor, speed-up of the core, then each target's verdict."""
    lines = []
    for tree in dict.fromkeys(r.tree for r in ROWS):
        rows = {r.name: r for r in ROWS if r.tree == tree}
        core = rows.get(CORE_COLD)
        warm = rows.get(CORE_WARM)
        lines.append(f"== {tree}")
        lines.append(
            f"  {'reader':<38}{'ns/file':>10}{'x floor':>9}{'cold core x faster':>20}"
            f"{'warm core x faster':>20}{'B/cgroup':>10}  note"
        )
        for name in sorted(rows, key=lambda n: ORDER.index(n) if n in ORDER else 99):
            r = rows[name]
            floor = _floor(rows, name)
            ns = "-" if r.ns_per_file is None else f"{r.ns_per_file:.0f}"
            ratio = "-" if r.ns_per_file is None or not floor else f"{r.ns_per_file / floor:.2f}"
            faster = ["-", "-"]
            for i, base in enumerate((core, warm)):
                if name in SLOW and r.ns_per_file and base and base.ns_per_file:
                    faster[i] = f"{r.ns_per_file / base.ns_per_file:.1f}"
            mem = "-" if r.bytes_per_cgroup is None else f"{r.bytes_per_cgroup:.0f}"
            lines.append(
                f"  {name:<38}{ns:>10}{ratio:>9}{faster[0]:>20}{faster[1]:>20}{mem:>10}  {r.note}"
            )
        if core is not None or warm is not None:
            lines += _targets(rows)
    return "\n".join(lines)
