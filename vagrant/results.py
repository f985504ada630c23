"""Turn each Vagrant machine's raw provisioning output into results/<machine>.json and one
markdown table for all machines (results/results.md).

    python3 results.py RAW_DIR OUT_DIR MACHINE...

RAW_DIR/<machine>/ holds what provision.sh wrote in the guest: provision.json (every step),
bench.json (pytest-benchmark's --benchmark-json), bench.txt (the bench's printed tables),
bench-read.md / bench-setup.md, bench-cut.txt (suites the CI bound cut or shrank),
bench-failed.txt (the rows and runs that failed), and the real kubelet's: kubelet-version,
kubelet-sha256, kubelet-cgalloc-flags and kubelet/<configuration>/ (each step's evidence, copied
to OUT_DIR/kubelet/<machine>/<configuration>/). role.json, when there, is the Ansible role's run
against the machine from the host (vagrant/role.py): its checks join the machine's steps.
Runs on the host with the standard library only.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

# Where the bench's own comparison tables start and where pytest's closing lines begin.
TABLES_START = re.compile(r"^=+ (cgroup read cost|setup of a tree)")
# The kubelet steps' names: "kubelet/<configuration> <id>: <title>" (vagrant/kubelet.sh).
KUBELET_STEP = re.compile(r"^kubelet/(\S+) (\S+): (.*)$")
# The step whose output holds the boot unit's and the daemons' start times.
ORDER_ID = "7a"
# The role's checks (vagrant/role.py) among a machine's steps.
ROLE_PREFIX = "ansible role: "
# Evidence files larger than this stay in raw/ only.
EVIDENCE_MAX = 256 * 1024
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
    doc["kubelet"] = {
        "version": _text(raw / "kubelet-version").strip(),
        "sha256": _text(raw / "kubelet-sha256").strip(),
        "cgalloc_flags": _text(raw / "kubelet-cgalloc-flags").split(),
    }
    add_role(doc, raw / "role.json")
    return doc


def add_role(doc: dict, path: Path) -> None:
    """The role's checks as the machine's steps (a failed one fails the machine), its runs kept."""
    try:
        role = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    doc["role"] = {"seconds": role.get("seconds"), "runs": role.get("runs", [])}
    for step in role.get("steps", []):
        doc["steps"].append(step)
        doc["passed" if step["ok"] else "failed"] += 1
        if not step["ok"]:
            doc["status"] = "failed"


def role_lines(results: dict[str, dict]) -> list[str]:
    """Each machine's role run: the ansible-playbook runs, then each check."""
    lines = []
    for m, r in results.items():
        role = r.get("role")
        if not role:
            continue
        lines += ["", f"The Ansible role (deploy/ansible) against {m}, over SSH from the host"
                  f" ({role['seconds']} s):", ""]  # fmt: skip
        lines += [
            "| run | seconds | exit | changed | tasks reported changed |",
            "|---|---|---|---|---|",
        ]
        for run in role["runs"]:
            changed = ", ".join(run["changedTasks"]) or "-"
            lines.append(f"| {run['name']} | {run['seconds']} | {run['rc']} | "
                         f"{run['recap'].get('changed', '-')} | {changed} |")  # fmt: skip
        lines += ["", "| check | verdict |", "|---|---|"]
        for s in r["steps"]:
            if s["step"].startswith(ROLE_PREFIX):
                verdict = "ok" if s["ok"] else "FAILED"
                lines.append(f"| {s['step'].removeprefix(ROLE_PREFIX)} | {verdict} |")
    return lines


def kubelet_steps(doc: dict) -> list[tuple[str, str, str, dict]]:
    """(configuration, id, title, step) of each kubelet step of a machine, in run order."""
    out = []
    for s in doc.get("steps", []):
        m = KUBELET_STEP.match(s["step"])
        if m:
            out.append((m.group(1), m.group(2), m.group(3), s))
    return out


def _order(step_id: str) -> tuple[int, str]:
    m = re.match(r"(\d+)(.*)", step_id)
    if step_id == "prep":
        return (-1, "")
    return (int(m.group(1)), m.group(2)) if m else (99, step_id)


def kubelet_lines(results: dict[str, dict]) -> list[str]:
    """The real kubelet's steps: one table, a column per guest and configuration, then each
    step's evidence per configuration."""
    cells: dict[str, dict[str, bool]] = {}
    titles: dict[str, str] = {}
    columns: list[str] = []
    evidence: dict[str, list[tuple[str, str, dict]]] = {}
    kubelet = {}
    for m, r in results.items():
        if r.get("kubelet", {}).get("version"):
            kubelet = r["kubelet"]
        for config, step_id, title, s in kubelet_steps(r):
            if step_id == "prep":
                config = f"{m} (guest)"
            if config not in columns:
                columns.append(config)
            titles.setdefault(step_id, title)
            cells.setdefault(step_id, {})[config] = s["ok"]
            evidence.setdefault(config, []).append((step_id, title, s))
    if not columns:
        return []
    flags = (
        " ".join(kubelet.get("cgalloc_flags") or [])
        or "none (cgalloc has no --kubelet-version 1.20)"
    )
    lines = [
        "",
        "## Proven against the real kubelet",
        "",
        f"Upstream kubelet `{kubelet.get('version') or '?'}`, "
        f"sha256 `{kubelet.get('sha256') or '?'}` (vagrant/kubelet/SHA256SUMS); "
        f"cgalloc's flag for its minor: {flags}.",
        "Columns: guest and the kubelet's cgroup driver. `-`: not run in that configuration.",
        "",
        "| step | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for step_id in sorted(cells, key=_order):
        per = cells[step_id]
        row = " | ".join({True: "ok", False: "FAILED", None: "-"}[per.get(c)] for c in columns)
        lines.append(f"| {step_id} {titles[step_id]} | {row} |")
    for config in columns:
        lines += ["", f"### {config}: evidence", ""]
        for step_id, title, s in evidence[config]:
            verdict = "ok" if s["ok"] else f"FAILED (exit {s['rc']})"
            lines += [
                "<details>",
                f"<summary>{step_id} {title}: {verdict}, {s['seconds']:.0f} s</summary>",
                "",
                "```",
                s["detail"].rstrip(),
                "```",
                "</details>",
            ]
    return lines


def copy_evidence(raw: Path, out: Path, machine: str) -> None:
    """raw/<machine>/kubelet/<configuration>/* -> out/kubelet/<machine>/<configuration>/."""
    src = raw / "kubelet"
    dest = out / "kubelet" / machine
    if dest.exists():
        shutil.rmtree(dest)
    if not src.is_dir():
        return
    for f in sorted(src.rglob("*")):
        if f.is_file() and f.stat().st_size <= EVIDENCE_MAX:
            target = dest / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, target)


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
    start times each machine reported (the ordering evidence, the kubelet's step 7a)."""
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
        for _, step_id, _, s in kubelet_steps(results[m]):
            if step_id == ORDER_ID and s["detail"]:
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
    failures = [
        (m, s)
        for m, r in results.items()
        for s in r["steps"]
        if not s["ok"] and not KUBELET_STEP.match(s["step"])
    ]
    for m, s in failures:
        head = f"**{m} failed at `{s['step']}`** (exit {s['rc']}):"
        lines += ["", head, "```", s["detail"], "```"]
    lines += reboot_lines(results)
    lines += kubelet_lines(results)
    lines += role_lines(results)
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
        copy_evidence(raw / m, out, m)
    (out / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0 if all(r["status"] == "passed" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
