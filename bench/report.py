"""One suite's timings, its targets judged on per-round ratios, and the text / Markdown / JSON
that ``python -m bench`` prints and writes."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.rounds import Contender, Spread, per_round, spread

NOT_MEASURABLE = "not measurable here"


@dataclass
class Target:
    """A claim. kind "ratio": measured/reference per round ≤ bound; "speedup":
    reference/measured ≥ bound; "value": the measured row's values (not times) ≤ bound."""

    what: str
    measured: str
    reference: str
    kind: str
    bound: float
    unmeasurable: str = ""  # why this machine cannot show the claim, when it cannot


@dataclass
class Suite:
    title: str
    unit: str  # what Contender.units counts ("file", "process")
    contenders: list[Contender]
    times: dict[str, list] = field(default_factory=dict)
    values: dict[str, tuple[list, str]] = field(default_factory=dict)  # name -> (values, unit)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def judged(self) -> list[dict]:
        return [judge(t, self) for t in self.targets]

    def rows(self) -> list[dict]:
        out = []
        for c in self.contenders:
            s = spread(self.times.get(c.name, []))
            per_unit = s.median / c.units * 1e9 if s else None
            out.append({
                "contender": c.name,
                "median_s": s.median if s else None,
                "min_s": s.lo if s else None,
                "max_s": s.hi if s else None,
                "rounds": s.n if s else 0,
                "units": c.units,
                f"ns_per_{self.unit}": per_unit,
                "note": c.note,
            })  # fmt: skip
        return out


def judge(t: Target, suite: Suite) -> dict:
    out = {"target": t.what, "kind": t.kind, "bound": t.bound, "median": None, "min": None,
           "max": None, "rounds": 0}  # fmt: skip
    if t.kind == "value":
        vals, _unit = suite.values.get(t.measured, ([], ""))
        s = spread(vals)
    else:
        m, ref = _per_unit(suite, t.measured), _per_unit(suite, t.reference)
        ratios = []
        if m and ref:
            ratios = per_round(m, ref) if t.kind == "ratio" else per_round(ref, m)
        s = spread(ratios)
    if s is not None:
        out.update(median=s.median, min=s.lo, max=s.hi, rounds=s.n)
    out["verdict"] = _verdict(t, s)
    return out


def _per_unit(suite: Suite, name: str) -> list | None:
    """A contender's times per unit, so readers timed over different file counts compare."""
    units = next((c.units for c in suite.contenders if c.name == name), None)
    times = suite.times.get(name)
    if units is None or times is None:
        return None
    return [None if t is None else t / units for t in times]


def _verdict(t: Target, s: Spread | None) -> str:
    if t.unmeasurable:
        return f"{NOT_MEASURABLE}: {t.unmeasurable}"
    if s is None:
        return "not measured"
    if t.kind == "speedup":
        shown = f"{s.median:.1f}x ({s.lo:.1f}–{s.hi:.1f})"
        if s.median >= t.bound:
            return f"MET {shown}"
        return f"GAP {shown}, needs {t.bound / s.median:.2f}x more"
    shown = s.shown("{:.3g}") if t.kind == "value" else s.shown() + "x"
    if s.median <= t.bound:
        return f"MET {shown}"
    return f"GAP {shown}, {s.median / t.bound:.2f}x over the bound"


def _secs(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.1f} ms" if v < 10 else f"{v:.1f} s"


def text(suite: Suite) -> str:
    lines = [f"== {suite.title}"]
    head = ("contender", "median", "min–max", f"ns/{suite.unit}", "rounds", "note")
    rows = [head]
    for r in suite.rows():
        per = r[f"ns_per_{suite.unit}"]
        rows.append((
            r["contender"], _secs(r["median_s"]), f"{_secs(r['min_s'])}–{_secs(r['max_s'])}",
            "-" if per is None else f"{per:,.0f}", str(r["rounds"]), r["note"],
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  "
              + row[5] for row in rows]  # fmt: skip
    for name, (vals, unit) in suite.values.items():
        s = spread(vals)
        if s:
            lines.append(f"  {name}: {s.shown('{:.3g}')} {unit}")
    lines += [f"  note: {n}" for n in suite.notes]
    lines.append("  targets (median of per-round ratios, min–max):")
    for j in suite.judged():
        lines.append(f"    {j['target']:<58}{j['verdict']}")
    return "\n".join(line.rstrip() for line in lines)


def markdown(suites: list[Suite], command: str) -> str:
    out = [f"Reproduce: `{command}`", ""]
    for suite in suites:
        head = f"| contender | median | min–max | ns/{suite.unit} | note |"
        out += [f"**{suite.title}**", "", head, "|---|---:|---:|---:|---|"]
        for r in suite.rows():
            per = r[f"ns_per_{suite.unit}"]
            out.append(
                f"| {r['contender']} | {_secs(r['median_s'])} | "
                f"{_secs(r['min_s'])}–{_secs(r['max_s'])} | "
                f"{'-' if per is None else f'{per:,.0f}'} | {r['note']} |"
            )
        if suite.values:
            out += ["", "| measured | median (min–max) |", "|---|---:|"]
            for name, (vals, unit) in suite.values.items():
                s = spread(vals)
                if s:
                    out.append(f"| {name.strip()} | {s.shown('{:.3g}')} {unit} |")
        out += ["", "| target | verdict (median, min–max of per-round ratios) |", "|---|---|"]
        out += [f"| {j['target']} | {j['verdict']} |" for j in suite.judged()]
        out += [f"\n_{n}_" for n in suite.notes]
        out.append("")
    return "\n".join(out)


def as_json(suites: list[Suite], machine: dict) -> dict:
    return {
        "machine": machine,
        "suites": [
            {
                "title": s.title,
                "unit": s.unit,
                "rows": s.rows(),
                "values": {k: {"values": v, "unit": u} for k, (v, u) in s.values.items()},
                "targets": s.judged(),
                "notes": s.notes,
            }
            for s in suites
        ],
    }
