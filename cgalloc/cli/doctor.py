"""``cgalloc doctor``: the node preflight, each check with a verdict, its evidence and the fix.
Exit 0 when every check is ok (or skipped), 1 when one warns, 4 when one fails; 2 for bad input."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.options import CGROUPFS
from cgalloc.cli.record import HISTORY
from cgalloc.cli.render import OUTPUT, OutputFormat, dumps, echo, printable, warn

if TYPE_CHECKING:
    from cgalloc.host.machine import Host

HELP = """Check this node for what makes the kubelet refuse to start or restart every pod:
cgroup v1 under a kubelet whose failCgroupV1 is true (the default from 1.35); the kubelet's
cgroup driver against containerd's SystemdCgroup or CRI-O's cgroup_manager; systemd as PID 1
with the cgroupfs driver; the reserved cgroups the kubelet validates at start, in every
controller it validates; cgalloc-setup.service installed, enabled and ordered before the
kubelet and the runtime; swap on without a swap policy; PSI unavailable; the kernel and
systemd versions the chosen features need; and, when --history holds a recorded window,
reservations above what `cgalloc recommend` sizes from it. Each check prints a verdict (ok,
warn, fail, skip with the reason), its evidence (file, value, command output) and the fix.
Reads only: it changes nothing. Exit status: 0 all ok, 1 a check warns, 4 a check fails,
2 bad input. The checks are in docs/doctor.md.
"""
EXAMPLES = (
    "cgalloc doctor --match-kubelet              # this node's kubelet, as it will start",
    "cgalloc doctor --match-kubelet -o json | jq '.checks[] | select(.verdict != \"ok\")'",
    "cgalloc doctor --config /var/lib/kubelet/config.yaml --history /var/lib/cgalloc/h.jsonl",
)
OPTIONS = (CGROUPFS, HISTORY, OUTPUT)
MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def register(app: typer.Typer) -> None:
    from cgalloc.cli.signature import NodeInputsCommand, node_inputs, options

    @app.command("doctor", help=HELP, cls=NodeInputsCommand)
    @node_inputs
    @options(OPTIONS)
    def doctor_command(ctx: typer.Context, inputs: NodeInputs, values: dict) -> None:
        run_doctor(ctx.obj, inputs, **values)


def table(doc: dict) -> str:
    """One line per check; evidence and fix under each that is not ok."""
    lines = []
    width = max(len(c["name"]) for c in doc["checks"])
    for c in doc["checks"]:
        lines.append(f"{MARK[c['verdict']]:<4}  {c['name']:<{width}}  {c['finding']}")
        if c["verdict"] in ("ok", "skip"):
            continue
        lines += [f"{'':6}{'':{width}}  - {e['source']}: {e['value']}" for e in c["evidence"]]
        if c["fix"]:
            lines.append(f"{'':6}{'':{width}}  fix: {c['fix']}")
    n = doc["summary"]
    lines.append(
        f"doctor: {n['ok']} ok, {n['warn']} warn, {n['fail']} fail, {n['skip']} skipped"
        f" (exit {doc['exitStatus']})"
    )
    return "\n".join(lines)


def run_doctor(
    host: Host, inputs: NodeInputs, cgroupfs: str, history_path: str, output: OutputFormat
) -> None:
    from cgalloc.model import preflight
    from cgalloc.ops.doctor import Subject, doctor

    cfg = inputs.load_config()
    subject = Subject(
        cfg=cfg,
        config=inputs.config,
        config_dir=inputs.config_dir,
        endpoint=inputs.endpoint,
        driver_flag=inputs.driver_flag,
        matched=inputs.matched,
        version_given="kubelet-version" in inputs.flags and inputs.matched is None,
        cgroupfs=cgroupfs,
        history=history_path,
    )
    checks = doctor(host, subject)
    status = preflight.exit_status(checks)
    doc = {
        "checks": [c.to_json() for c in checks],
        "summary": preflight.counts(checks),
        "exitStatus": status,
        **inputs.document(),
    }
    if output is OutputFormat.table:
        echo(printable(table(doc)))
    else:
        echo(dumps(doc, output))
    if status == preflight.EXIT_FAIL:
        warn(["a check failed: the kubelet (or cgalloc setup) would refuse this node as it is."])
    if status:
        raise typer.Exit(status)
