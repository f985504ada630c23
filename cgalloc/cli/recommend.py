"""``cgalloc recommend``: kube-reserved, system-reserved and eviction sized from a recorded
window, beside the vendors' formulas and what is configured now."""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.optspec import Opt
from cgalloc.cli.record import HISTORY, seconds
from cgalloc.cli.render import OUTPUT, OutputFormat, aligned, echo, printable, warn
from cgalloc.errors import InputError
from cgalloc.model.allocatable import pods_capacity
from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PID
from cgalloc.ops import history, recommend

if TYPE_CHECKING:
    import typer

DROPIN_NAME = "50-cgalloc-reservations.conf"
MIN_WINDOW_FLOOR_S = 300.0

HELP = """Recommend kube-reserved, system-reserved (cpu, memory, pid) and the hard-eviction
memory.available threshold from the usage `cgalloc record` (or `cgalloc exporter --history`)
recorded: a high percentile (--percentile) of what the reserved cgroups and the node outside
kubepods used, plus --headroom, memory never below the largest working set seen. Shown beside
what is configured now and the vendors' formulas for this node's size and maxPods (GKE, EKS,
AKS 1.29+ and older, OpenShift auto-sizing, Talos, k3s, Kubespray), with the Allocatable each
gives. Output as a table, JSON or YAML (-o), or only the recommendation as the kubelet flags, a
KubeletConfiguration fragment or a drop-in file for the kubelet's --config-dir (--emit;
--write-dropin DIR writes the drop-in). The method is in
docs/recommend.md. Refuses (exit 2) a window shorter than --min-window.
"""
EXAMPLES = (
    'cgalloc record --for 24h --config /var/lib/kubelet/config.yaml',
    'cgalloc recommend --config /var/lib/kubelet/config.yaml',
    'cgalloc recommend --config /var/lib/kubelet/config.yaml --emit flags',
    'cgalloc recommend --config /var/lib/kubelet/config.yaml \\',
    '    --write-dropin /etc/kubernetes/kubelet.conf.d',
)


class Emit(str, enum.Enum):
    """What --emit prints instead of the document."""

    none = ""
    flags = "flags"
    config = "config"
    dropin = "dropin"


OPTIONS: tuple[Opt, ...] = (
    HISTORY,
    OUTPUT,
    Opt(
        "emit",
        ("--emit",),
        Emit,
        Emit.none,
        "Print only the recommendation, ready to apply: flags (the kubelet's command line),"
        " config (a KubeletConfiguration fragment) or dropin (that fragment as a file for the"
        " kubelet's --config-dir).",
    ),
    Opt(
        "percentile", ("--percentile",), float, 99.0, "The percentile of each measured series.", "P"
    ),
    Opt("headroom", ("--headroom",), float, 20.0, "Percent added to the percentile.", "PCT"),
    Opt(
        "min_window",
        ("--min-window",),
        str,
        "30m",
        "Refuse a window shorter than this Go duration (at least 5m).",
        "DURATION",
    ),
    Opt(
        "write_dropin",
        ("--write-dropin",),
        str,
        "",
        f"Write the drop-in as DIR/{DROPIN_NAME} (atomically) and say so.",
        "DIR",
    ),
    Opt(
        "control_plane",
        ("--control-plane",),
        bool,
        False,
        "Size the vendor profiles for a control-plane node (Talos reserves more there).",
    ),
)


def register(app: typer.Typer) -> None:
    from cgalloc.cli.signature import NodeInputsCommand, node_inputs, options

    @app.command("recommend", help=HELP, cls=NodeInputsCommand)
    @node_inputs
    @options(OPTIONS)
    def recommend_command(inputs: NodeInputs, values: dict) -> None:
        run_recommend(inputs, **values)


def policy_of(percentile: float, headroom: float, min_window: str) -> recommend.Policy:
    if not 50 <= percentile <= 100:  # also false for nan
        raise InputError("--percentile must be a number from 50 to 100, such as 99.")
    if not 0 <= headroom <= 1000:
        raise InputError("--headroom must be a percentage from 0 to 1000, such as 20.")
    window = seconds(min_window, "--min-window")
    if window < MIN_WINDOW_FLOOR_S:
        raise InputError(
            f"--min-window {min_window!r} is below 5m: a shorter window means nothing; give a"
            " Go duration of at least 5m, such as 30m."
        )
    return recommend.Policy(percentile, headroom / 100, window, recommend.Policy().min_samples)


def _strs(rl: Mapping[str, Quantity]) -> dict[str, str]:
    order = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}
    ordered = sorted(rl.items(), key=lambda kv: (order.get(kv[0], 9), kv[0]))
    # a pid count as a plain number ("1000"), where the canonical quantity says "1k"
    return {k: str(v.value()) if k == PID else str(v) for k, v in ordered}


def _eviction_text(ev: Mapping[str, str]) -> str:
    return ",".join(f"{s}<{v}" for s, v in sorted(ev.items()))


def document(
    inputs: NodeInputs, history_path: str, policy: recommend.Policy, control_plane: bool
) -> dict:
    """The recommendation as a JSON-ready document (every other output is made from it)."""
    hist = history.load(history_path)
    cfg, capacity = inputs.load()
    try:
        rec = recommend.recommend(hist.samples, cfg, policy)
    except recommend.TooShort as exc:
        raise InputError(str(exc)) from None
    cpus = capacity[CPU].value()
    memory = capacity[MEMORY].value()
    max_pods = pods_capacity(cfg, capacity).value()
    disk = capacity[EPHEMERAL_STORAGE].value() if EPHEMERAL_STORAGE in capacity else None
    need = recommend.measured_need(rec)
    configured_ev = {s: t.value for s, t in sorted(cfg.eviction_hard.items())}

    def row(name: str, kube, system, eviction, source: str, notes=()) -> dict:
        alloc = recommend.allocatable_with(cfg, capacity, kube, system, eviction)
        return {
            "name": name,
            "kubeReserved": _strs(kube),
            "systemReserved": _strs(system),
            "evictionHard": dict(sorted(eviction.items())),
            "allocatable": {k: str(alloc[k]) for k in (CPU, MEMORY) if k in alloc},
            "coversMeasured": {
                r: recommend.covers(kube, system, need, r) for r in (CPU, MEMORY) if r in need
            },
            "source": source,
            "notes": list(notes),
        }

    rows = [
        row("configured", cfg.kube_reserved, cfg.system_reserved, configured_ev, "these inputs"),
        row("recommended", rec.kube, rec.system, rec.eviction, "this window"),
    ]
    rows += [
        row(p.name, p.kube, p.system, p.eviction, p.source, p.notes)
        for p in recommend.profiles(cpus, memory, max_pods, disk, control_plane)
    ]
    w = rec.window

    def measured(m: recommend.Measured) -> dict:
        return {
            "sources": list(m.sources),
            "cpuCoresAtPercentile": m.cpu_p,
            "cpuCoresPeak": m.cpu_max,
            "memoryWorkingSetAtPercentile": m.memory_p,
            "memoryWorkingSetPeak": m.memory_max,
            "memoryPeakFile": m.peak,
            "pidsPeak": m.pids_max,
        }

    return {
        "window": {
            "start": _rfc3339(w.start),
            "end": _rfc3339(w.end),
            "seconds": round(w.seconds, 3),
            "samples": w.samples,
            "intervalSeconds": w.interval_s,
            "history": history_path,
        },
        "method": {
            "percentile": policy.percentile,
            "headroomPercent": round(policy.headroom * 100, 6),
            "rules": "docs/recommend.md",
        },
        "node": {"cpu": cpus, "memory": memory, "maxPods": max_pods, "ephemeralStorage": disk},
        "measured": {k: measured(m) for k, m in rec.measured.items()},
        "memoryGrowthPer10sAtPercentile": rec.memory_growth_p,
        "recommendation": {
            "kubeReserved": _strs(rec.kube),
            "systemReserved": _strs(rec.system),
            "evictionHard": dict(sorted(rec.eviction.items())),
        },
        "compared": rows,
        "notes": [*rec.notes, *_nothing_left(rows[1]["allocatable"], capacity)],
    }


def _nothing_left(allocatable: Mapping[str, str], capacity: Mapping[str, Quantity]) -> list[str]:
    """A note for each resource the recommendation leaves no Allocatable of: the kubelet would
    admit no pod asking for it, which an operator must hear before applying it."""
    return [
        f"{r}: the recommendation leaves no Allocatable {r} on this node (capacity"
        f" {capacity[r]}): its daemons used that much in this window; record a longer or"
        " quieter window, or give the node more."
        for r in (CPU, MEMORY)
        if r in allocatable and Quantity.parse(allocatable[r]).sign() <= 0
    ]


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


def flags(doc: dict) -> str:
    r = doc["recommendation"]
    lines = []
    for flag, key in (("--kube-reserved", "kubeReserved"), ("--system-reserved", "systemReserved")):
        if r[key]:
            lines.append(f"{flag}=" + ",".join(f"{k}={v}" for k, v in r[key].items()))
    lines.append(f"--eviction-hard={_eviction_text(r['evictionHard'])}")
    return "\n".join(lines)


def fragment(doc: dict) -> dict:
    r = doc["recommendation"]
    out: dict = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
    if r["kubeReserved"]:
        out["kubeReserved"] = r["kubeReserved"]
    if r["systemReserved"]:
        out["systemReserved"] = r["systemReserved"]
    out["evictionHard"] = r["evictionHard"]
    return out


def config_text(doc: dict) -> str:
    import yaml

    return yaml.safe_dump(fragment(doc), sort_keys=False, default_flow_style=False).rstrip("\n")


def dropin_text(doc: dict) -> str:
    w = doc["window"]
    head = [
        f"# {DROPIN_NAME}: written by `cgalloc recommend` from {w['samples']} samples over"
        f" {recommend.human_seconds(w['seconds'])}",
        f"# ({w['start']} to {w['end']}), p{doc['method']['percentile']:g} +"
        f" {doc['method']['headroomPercent']:g}% headroom. Put it in the kubelet's --config-dir;",
        "# files there merge in name order over --config (maps key by key); then restart the"
        " kubelet.",
    ]
    return "\n".join(head) + "\n" + config_text(doc)


def _cores(v: float | None) -> str:
    return "-" if v is None else f"{round(v * 1000)}m"


def _mi(v: int | None) -> str:
    return "-" if v is None else f"{v / 2**20:.0f}Mi"


def table(doc: dict) -> str:
    w, m = doc["window"], doc["method"]
    p = f"p{m['percentile']:g}"
    every = f", every {w['intervalSeconds']:g}s" if w["intervalSeconds"] else ""
    lines = [
        f"Window: {recommend.human_seconds(w['seconds'])} ({w['samples']} samples{every}),"
        f" {w['start']} to {w['end']}, from {w['history']}",
        "Measured:",
    ]
    rows = [("  SOURCE", f"CPU {p}", "CPU PEAK", f"MEMORY {p}", "MEMORY PEAK", "PIDS PEAK")]
    names = {"kube": "kube-reserved", "system": "system-reserved", "outside": "outside kubepods"}
    for key, d in doc["measured"].items():
        label = names[key] + ("" if key == "outside" else f" ({'+'.join(d['sources'])})")
        rows.append(
            (
                f"  {label}",
                _cores(d["cpuCoresAtPercentile"]),
                _cores(d["cpuCoresPeak"]),
                _mi(d["memoryWorkingSetAtPercentile"]),
                _mi(d["memoryWorkingSetPeak"]),
                "-" if d["pidsPeak"] is None else str(d["pidsPeak"]),
            )
        )
    lines += aligned(rows) if len(rows) > 1 else ["  (nothing measured)"]
    n = doc["node"]
    lines.append(
        f"Recommended ({p} + {m['headroomPercent']:g}% headroom; node: {n['cpu']} cpu,"
        f" {_mi(n['memory'])} memory, maxPods {n['maxPods']}):"
    )
    lines += ["  " + line for line in flags(doc).split("\n")]
    lines.append(
        "Compared (Allocatable on this node; covers = kube + system hold the measured " + p + "):"
    )
    rows = [
        (
            "  PROFILE",
            "KUBE-RESERVED",
            "SYSTEM-RESERVED",
            "memory.available",
            "ALLOC CPU",
            "ALLOC MEMORY",
            "COVERS CPU/MEM",
        )
    ]
    for r in doc["compared"]:
        cov = "/".join(
            {True: "yes", False: "NO", None: "-"}[r["coversMeasured"].get(k)] for k in (CPU, MEMORY)
        )
        rows.append(
            (
                f"  {r['name']}",
                ",".join(f"{k}={v}" for k, v in r["kubeReserved"].items()) or "-",
                ",".join(f"{k}={v}" for k, v in r["systemReserved"].items()) or "-",
                r["evictionHard"].get("memory.available", "none"),
                r["allocatable"].get(CPU, "-"),
                r["allocatable"].get(MEMORY, "-"),
                cov,
            )
        )
    lines += aligned(rows)
    if doc["notes"]:
        lines.append("Notes:")
        lines += [f"  - {note}" for note in doc["notes"]]
    return "\n".join(lines)


def save_dropin(directory: str, text: str) -> str:
    if not os.path.isdir(directory):
        raise InputError(
            f"--write-dropin {directory} is not a directory; give the kubelet's --config-dir."
        )
    path = os.path.join(directory, DROPIN_NAME)
    tmp = f"{path}.{os.getpid()}.tmp"
    made = False
    try:
        # the kubelet reads the drop-in as root: a name planted at the temporary is refused,
        # never followed or removed (exclusive, no-follow)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644)
        made = True
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
        made = False
    except OSError as exc:
        raise InputError(
            f"--write-dropin {directory}: cannot write {DROPIN_NAME}: {exc.strerror or exc}."
        ) from None
    finally:
        if made:
            os.unlink(tmp)
    return path


def run_recommend(
    inputs: NodeInputs,
    history_path: str,
    output: OutputFormat,
    emit: Emit,
    percentile: float,
    headroom: float,
    min_window: str,
    write_dropin: str,
    control_plane: bool,
) -> None:
    policy = policy_of(percentile, headroom, min_window)
    if emit is not Emit.none and output is not OutputFormat.table:
        raise InputError(
            f"--emit {emit.value} prints the recommendation alone; -o {output.value} prints the"
            " whole document: give one of them."
        )
    doc = document(inputs, history_path, policy, control_plane)
    if emit is Emit.flags:
        echo(flags(doc))
    elif emit is Emit.config:
        echo(config_text(doc))
    elif emit is Emit.dropin:
        echo(dropin_text(doc))
    elif output is OutputFormat.json:
        import json

        echo(json.dumps(doc, indent=1, sort_keys=True))
    elif output is OutputFormat.yaml:
        import yaml

        echo(yaml.safe_dump(doc, sort_keys=True, default_flow_style=False).rstrip("\n"))
    else:
        echo(printable(table(doc)))
    if write_dropin:
        path = save_dropin(write_dropin, dropin_text(doc))
        warn([f"wrote {path}; restart the kubelet to apply it"])
