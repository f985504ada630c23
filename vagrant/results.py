"""Turn each Vagrant machine's raw provisioning output into results/<machine>.json and one
markdown table for all machines (results/results.md).

    python3 results.py RAW_DIR OUT_DIR MACHINE...

RAW_DIR/<machine>/ holds what provision.sh wrote in the guest: provision.json (every step),
bench.json (pytest-benchmark's --benchmark-json), bench.txt (the bench's printed tables),
bench-read.md / bench-setup.md, bench-cut.txt (suites the CI bound cut or shrank) and
bench-failed.txt (the rows and runs that failed).
Runs on the host with the standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# Where the bench's own comparison tables start and where pytest's closing lines begin.
TABLES_START = re.compile(r"^=+ (cgroup read cost|setup of a tree)")
# provision.sh's step whose output holds the boot unit's and the daemons' start times.
ORDER_STEP = "reboot: setup finished before the stand-in daemons started"
TABLES_END = re.compile(r"^(=+ )?(short test summary|\d+ (passed|failed|skipped|deselected))")


def bench_rows(doc: dict) -> list[dict]:
    """One row per benchmark: its full name and best/mean seconds over its rounds."""
    rows = []
    for b in doc.get("benchmarks", []):
        stats = b["stats"]
        name = b["fullname"].split("::")[-1]
        rows.append(
            {
                "name": name,
                "file": b["fullname"].split("::")[0],
                "min_s": stats["min"],
                "mean_s": stats["mean"],
                "rounds": stats["rounds"],
            }
        )
    return rows


def bench_tables(text: str) -> list[str]:
    """The bench's printed comparison tables (ns/file, ratios, targets), verbatim."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if TABLES_START.match(line):
            inside = True
        elif inside and TABLES_END.match(line):
            inside = False
        if inside:
            out.append(line)
    return out


def machine_result(raw: Path) -> dict:
    """provision.json with the benchmark rows and tables added; a stub when it is missing."""
    try:
        doc = json.loads((raw / "provision.json").read_text())
    except (OSError, ValueError) as err:
        doc = {"status": "missing", "passed": 0, "failed": 1, "steps": [], "error": str(err)}
    try:
        doc["bench"] = bench_rows(json.loads((raw / "bench.json").read_text()))
    except (OSError, ValueError):
        doc["bench"] = []
    try:
        doc["bench_tables"] = bench_tables((raw / "bench.txt").read_text())
    except OSError:
        doc["bench_tables"] = []
    doc["bench_read"] = _text(raw / "bench-read.md")
    doc["bench_setup"] = _text(raw / "bench-setup.md")
    doc["bench_cut"] = _text(raw / "bench-cut.txt").splitlines()
    doc["bench_failed"] = _text(raw / "bench-failed.txt").splitlines()
    return doc


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def reboot_lines(results: dict[str, dict]) -> list[str]:
    """The boot unit across the real reboot: each reboot check per machine, then the units'
    start times each machine reported (the ordering evidence)."""
    names = [m for m, r in results.items() if any(_is_reboot(s) for s in r["steps"])]
    if not names:
        return []
    checks: dict[str, dict[str, bool]] = {}
    for m in names:
        for s in filter(_is_reboot, results[m]["steps"]):
            checks.setdefault(s["step"], {})[m] = s["ok"]
    lines = ["", "The boot unit across a real reboot (`vagrant reload`):", ""]
    lines.append("| check | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for step, per in checks.items():
        cells = " | ".join({True: "ok", False: "FAILED", None: "-"}[per.get(m)] for m in names)
        lines.append(f"| {step.removeprefix('reboot: ')} | {cells} |")
    for m in names:
        for s in results[m]["steps"]:
            if s["step"] == ORDER_STEP and s["detail"]:
                lines += ["", f"{m}, monotonic clock after the boot:", "```", s["detail"], "```"]
    return lines


def _is_reboot(step: dict) -> bool:
    return step["step"].startswith("reboot: ")


def markdown(results: dict[str, dict]) -> str:
    """Steps per machine, then best times side by side, then each machine's bench tables."""
    names = list(results)
    lines = [
        "| machine | cgroup fs | kernel | systemd | steps passed | failed | status | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, r in results.items():
        lines.append(
            f"| {m} | {r.get('cgroupfs_type', '-')} | {r.get('kernel', '-')} | "
            f"{r.get('systemd', '-')} | {r['passed']} | {r['failed']} | {r['status']} | "
            f"{r.get('seconds', '-')} |"
        )
    failures = [(m, s) for m, r in results.items() for s in r["steps"] if not s["ok"]]
    for m, s in failures:
        head = f"**{m} failed at `{s['step']}`** (exit {s['rc']}):"
        lines += ["", head, "```", s["detail"], "```"]
    lines += reboot_lines(results)
    best: dict[str, dict[str, float]] = {}
    for m, r in results.items():
        for row in r["bench"]:
            best.setdefault(row["name"], {})[m] = row["min_s"]
    if best:
        lines += ["", "Benchmarks, best round (pytest-benchmark min):", ""]
        lines.append("| benchmark | " + " | ".join(names) + " |")
        lines.append("|---|" + "---|" * len(names))
        for name, per in best.items():
            cells = " | ".join(_seconds(per.get(m)) for m in names)
            lines.append(f"| `{name}` | {cells} |")
    for m, r in results.items():
        if r.get("bench_failed"):
            lines += ["", f"**Benchmarks FAILED on {m}:**", ""]
            lines += [f"- {f}" for f in r["bench_failed"]]
        if r.get("bench_cut"):
            lines += ["", f"Benchmarks cut on {m} (the CI bound):", ""]
            lines += [f"- {c}" for c in r["bench_cut"]]
        if r.get("bench_read"):
            lines += ["", f"Read and whole-command suites on {m} (`python -m bench --trees real`):"]
            lines += ["", r["bench_read"].strip()]
        if r.get("bench_setup"):
            lines += ["", f"Setup suite on {m} (`python -m bench --suites setup`):"]
            lines += ["", r["bench_setup"].strip()]
        if r["bench_tables"]:
            lines += ["", f"The bench's own tables on {m}:", "", "```", *r["bench_tables"], "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    raw, out, machines = Path(argv[0]), Path(argv[1]), argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    results = {m: machine_result(raw / m) for m in machines}
    for m, doc in results.items():
        (out / f"{m}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0 if all(r["status"] == "passed" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
