"""``cgalloc record``: sample the reserved cgroups' usage into a history for ``recommend``."""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from cgalloc.cli import stats as stats_cli
from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.options import CGROUPFS
from cgalloc.cli.optspec import Opt
from cgalloc.errors import InputError
from cgalloc.inputs.validate import parse_duration
from cgalloc.ops import exporter, history

if TYPE_CHECKING:
    import typer

DEFAULT_HISTORY = "/var/lib/cgalloc/history.jsonl"
MAX_FOR_S = 366 * 86400

HELP = """Record the usage of this node's reserved cgroups, the daemons' cgroups, kubepods and
the node (cpu, memory working set, pids, /proc/meminfo) every --every for --for, into the
history file `cgalloc recommend` sizes reservations from. The file stays bounded
(--max-samples, the oldest go first) and a later run appends to it. Reads only the cgroups;
runs unprivileged where cgroupfs is readable and --history is writable. Exit status 2 for bad
input.
"""
EXAMPLES = (
    'cgalloc record --for 1h --config /var/lib/kubelet/config.yaml',
    'cgalloc record --for 24h --every 30s --history /tmp/node-a.jsonl \\',
    '    --kube-reserved-cgroup /kube.slice --system-reserved-cgroup /system.slice',
)

# stats' --kubelet-cgroups, --runtime-cgroups, --system-cgroups (the exporter's too)
DAEMON_OPTS = tuple(
    o
    for o in stats_cli.OPTIONS
    if o.name in ("kubelet_cgroups", "runtime_cgroups", "system_cgroups")
)


def daemon_cgroups(kubelet: str, runtime: str, system: str) -> dict[str, str]:
    """The daemons' cgroups given (stats' roles kubelet, runtime, misc), each checked."""
    given = {"kubelet": kubelet, "runtime": runtime, "misc": system}
    for opt, value in zip(DAEMON_OPTS, given.values(), strict=True):
        if value and not value.startswith("/"):
            raise InputError(f"{opt.decls[0]} must be an absolute cgroup path such as /kubelet.")
    return {k: v for k, v in given.items() if v}


HISTORY_HELP = (
    "The history file recommend reads, which record (and the exporter, when given) appends"
    " samples to: JSON lines, bounded by --max-samples."
)
HISTORY = Opt("history_path", ("--history",), str, DEFAULT_HISTORY, HISTORY_HELP, "PATH")
MAX_SAMPLES = Opt(
    "max_samples",
    ("--max-samples",),
    int,
    history.DEFAULT_MAX_SAMPLES,
    "Samples the history file keeps (the oldest go first).",
    "N",
)

OPTIONS: tuple[Opt, ...] = (
    CGROUPFS,
    Opt(
        "duration",
        ("--for",),
        str,
        "",
        "How long to record, as a Go duration: 1h, 90m, 24h.",
        "DURATION",
    ),
    Opt(
        "interval",
        ("--every",),
        str,
        "10s",
        "Time between two samples, as a Go duration.",
        "DURATION",
    ),
    HISTORY,
    MAX_SAMPLES,
    *DAEMON_OPTS,
)


def register(app: typer.Typer) -> None:
    from cgalloc.cli.signature import NodeInputsCommand, node_inputs, options

    @app.command("record", help=HELP, cls=NodeInputsCommand)
    @node_inputs
    @options(OPTIONS)
    def record_command(inputs: NodeInputs, values: dict) -> None:
        run_record(inputs, **values)


def seconds(text: str, flag: str, upper: float = MAX_FOR_S) -> float:
    """A Go duration in seconds, above 0 and at most ``upper``; InputError naming ``flag``."""
    try:
        value = parse_duration(text) / 1e9
    except ValueError:
        value = -1.0
    if not 0 < value <= upper:
        raise InputError(
            f"{flag} {text!r} is not a duration above 0 and at most {upper / 86400:g} days;"
            " give a Go duration such as 1h, 90m or 10s."
        )
    return value


def run_record(
    inputs: NodeInputs,
    cgroupfs: str,
    duration: str,
    interval: str,
    history_path: str,
    max_samples: int,
    kubelet_cgroups: str,
    runtime_cgroups: str,
    system_cgroups: str,
    proc_root: str = "/proc",
    sleep=None,
) -> None:
    if not duration:
        raise InputError("--for is required: how long to record, such as --for 1h.")
    total = seconds(duration, "--for")
    step = seconds(interval, "--every", 3600)
    if step > total:
        raise InputError(f"--every {interval} is longer than --for {duration}; give a shorter one.")
    if max_samples < 1:
        raise InputError("--max-samples must be a whole number of samples, 1 or more.")
    daemons = daemon_cgroups(kubelet_cgroups, runtime_cgroups, system_cgroups)
    run = stats_cli._Run(inputs, cgroupfs, daemons)
    extra = exporter.ExtraReader(run.h, proc_root)
    named = {"node": "", "kubepods": run.kubepods, **run.reserved, **run.daemons}
    cgroups = {
        r: "/" + (p or "").strip("/")
        for r, p in named.items()
        if r in history.TRACKED_ROLES and p is not None
    }
    recorder = history.Recorder(history_path, cgroups, step, max_samples, proc_root)
    gc.enable()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    wait = sleep or stop.wait
    taken = 0
    start = time.monotonic()
    try:
        while True:
            sample = exporter.take_sample(run.sample, extra, None)
            recorder.last = None  # every sample of a record run is kept
            recorder.maybe(sample)
            taken += 1
            elapsed = time.monotonic() - start
            if elapsed + 1e-9 >= total or stop.is_set():
                break
            # the next sample on the interval's grid, not after this one's own time
            if wait(min(step - (elapsed % step), total - elapsed)):
                break
    finally:
        signal.signal(signal.SIGTERM, previous)
        recorder.close()
        extra.close()
        run.reader.close()
    print(
        f"cgalloc record: {taken} samples over {time.monotonic() - start:.0f}s appended to"
        f" {history_path}",
        file=sys.stderr,
    )
