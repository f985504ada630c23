"""``cgalloc exporter``: the node's tree as Prometheus metrics, over HTTP or into a textfile."""

from __future__ import annotations

import gc
import os
import signal
import threading
from typing import TYPE_CHECKING

from cgalloc.cli import stats as stats_cli
from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.options import CGROUPFS
from cgalloc.cli.optspec import Opt
from cgalloc.cli.record import DAEMON_OPTS, HISTORY, MAX_SAMPLES, daemon_cgroups
from cgalloc.cli.render import warn
from cgalloc.errors import InputError
from cgalloc.model.allocatable import compute
from cgalloc.model.limits import WEIGHT_FORMULAS
from cgalloc.ops import exporter, history
from cgalloc.ops.state import DEFAULT_STATE_DIR

if TYPE_CHECKING:
    import typer

DEFAULT_LISTEN = "127.0.0.1:9847"

HELP = """Serve this node's cgroup tree as Prometheus metrics: the kubelet's cAdvisor names for the
usage of the root, kubepods, QoS tiers, pods, kube-reserved, system-reserved and the daemons'
cgroups (container_*{id="/system.slice"}), pressure (PSI) on cgroup v2, and cgalloc_* gauges
for capacity, reservations, eviction thresholds, Allocatable, the limits the inputs want
against those read (drift), usage against each reservation and setup's record. Every metric is
in docs/metrics.md. Reads only; runs unprivileged where cgroupfs is readable. Serves
http://ADDRESS/metrics (--listen, loopback by default) until SIGTERM or Ctrl-C, or with
--textfile writes node_exporter's textfile collector file, atomically, every --textfile-interval.
Exit status 2 for bad input.
"""
EXAMPLES = (
    'cgalloc exporter --kube-reserved-cgroup /kube.slice --system-reserved-cgroup /system.slice \\',
    '    --cgroup-driver systemd --kube-reserved cpu=200m,memory=1Gi',
    'cgalloc exporter --config /var/lib/kubelet/config.yaml --listen 0.0.0.0:9847',
    'cgalloc exporter --config /var/lib/kubelet/config.yaml \\',
    '    --textfile /var/lib/node_exporter/textfile/cgalloc.prom --once',
    'cgalloc exporter --config /var/lib/kubelet/config.yaml \\',
    '    --history /var/lib/cgalloc/history.jsonl',
)

# the same help as setup's, verify's and teardown's (one text per option name)
STATE_DIR_HELP = (
    "Where cgalloc keeps its lock and the record of what setup made and changed "
    "(read by verify and teardown)."
)
WEIGHT_FORMULA_HELP = (
    "cgroup v2 shares→weight conversion: kubelet (linear, what the kubelet writes) "
    "or runc (the runtimes' newer curve, 1024 shares → weight 100)."
)


OPTIONS: tuple[Opt, ...] = (
    CGROUPFS,
    Opt("listen", ("--listen",), str, DEFAULT_LISTEN,
        "HOST:PORT to serve /metrics on ([::1]:PORT for IPv6; port 0 picks a free one, printed"
        " on stderr).", "HOST:PORT"),
    Opt("textfile", ("--textfile",), str, "",
        "Instead of serving: write the metrics to PATH (a *.prom file in node_exporter's"
        " --collector.textfile.directory), atomically, every --textfile-interval.", "PATH"),
    Opt("interval", ("--textfile-interval",), float, 15.0,
        "With --textfile: seconds between writes.", "SECONDS"),
    Opt("once", ("--once",), bool, False,
        "With --textfile: write once and exit (for a cron job or a systemd timer)."),
    Opt("deadline", ("--deadline",), float, 5.0,
        "Longest a scrape waits for a fresh sample; past it the last one is served"
        " (cgalloc_exporter_sample_age_seconds tells its age).", "SECONDS"),
    *DAEMON_OPTS,
    Opt("pod_log_dir", ("--pod-log-dir",), str, "/var/log/pods",
        "The kubelet's pod log directory, whose <namespace>_<name>_<uid> entries give the pod"
        ' and namespace labels; "" leaves them out.', "DIR"),
    Opt("state_dir", ("--state-dir",), str, DEFAULT_STATE_DIR, STATE_DIR_HELP, "DIR"),
    Opt("weight_formula", ("--cpu-weight-formula",), str, "kubelet", WEIGHT_FORMULA_HELP,
        "kubelet|runc"),
    Opt("memory_pressure", ("--memory-pressure-threshold",), float, 10.0,
        'cgalloc_reserved_cgroup_alert{reason="memory_pressure"} turns 1 at this'
        " memory.pressure some avg10 (percent).", "PCT"),
    Opt("near_limit", ("--near-limit",), float, 0.9,
        'cgalloc_reserved_cgroup_alert{reason="near_memory_limit"} turns 1 when a reserved'
        " cgroup's working set reaches this share of its memory.max.", "RATIO"),
    HISTORY._replace(default=""),
    Opt("history_interval", ("--history-interval",), float, 10.0,
        "Seconds between two samples recorded with --history.", "SECONDS"),
    MAX_SAMPLES,
)  # fmt: skip


def register(app: typer.Typer) -> None:
    from cgalloc.cli.signature import NodeInputsCommand, node_inputs, options

    @app.command("exporter", help=HELP, cls=NodeInputsCommand)
    @node_inputs
    @options(OPTIONS)
    def exporter_command(inputs: NodeInputs, values: dict) -> None:
        run_exporter(inputs, **values)


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (or [V6]:PORT) -> (host, port); InputError naming --listen."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InputError(
            f"--listen {text!r} is not HOST:PORT; give an address and a port from 0 to 65535,"
            f" such as {DEFAULT_LISTEN} or [::1]:9847."
        )
    return host, int(port)


def _positive(value: float, flag: str, upper: float = 86400) -> None:
    if not 0 < value <= upper:  # also false for nan
        raise InputError(
            f"{flag} must be a number of seconds above 0 and at most {upper:g}, such as 15."
        )


def check_options(v: dict) -> None:
    """Bad input, each refused with one sentence (exit 2)."""
    for key, flag in (
        ("interval", "--textfile-interval"),
        ("deadline", "--deadline"),
        ("history_interval", "--history-interval"),
    ):
        _positive(v[key], flag)
    if v["once"] and not v["textfile"]:
        raise InputError("--once writes the --textfile once; give --textfile PATH with it.")
    if v["textfile"]:
        if not v["textfile"].endswith(".prom"):
            raise InputError(
                f"--textfile {v['textfile']!r} must end in .prom (node_exporter's textfile"
                " collector reads only those), such as"
                " /var/lib/node_exporter/textfile/cgalloc.prom."
            )
        parent = os.path.dirname(os.path.abspath(v["textfile"]))
        if not os.path.isdir(parent):
            raise InputError(
                f"--textfile: the directory {parent} does not exist; create it or"
                " give another path."
            )
    else:
        parse_listen(v["listen"])
    if v["weight_formula"] not in WEIGHT_FORMULAS:
        raise InputError(
            f"--cpu-weight-formula {v['weight_formula']!r} is not one of"
            f" {', '.join(WEIGHT_FORMULAS)}."
        )
    if not 0 <= v["memory_pressure"] <= 100:
        raise InputError(
            "--memory-pressure-threshold must be a percentage from 0 to 100, such as 10."
        )
    if not 0 < v["near_limit"] <= 1:
        raise InputError("--near-limit must be a ratio above 0 and at most 1, such as 0.9.")


class Running:
    """An exporter's parts, built from the command's values; :meth:`close` releases them."""

    def __init__(
        self, inputs: NodeInputs, v: dict, proc_root: str = "/proc", boot_id_file: str | None = None
    ):
        check_options(v)
        daemons = daemon_cgroups(v["kubelet_cgroups"], v["runtime_cgroups"], v["system_cgroups"])
        self.run = stats_cli._Run(inputs, v["cgroupfs"], daemons)
        run = self.run
        alloc = compute(run.cfg, run.capacity)
        problem = ""
        try:
            expected = exporter.expected_limits(run.cfg, alloc, run.h, v["weight_formula"])
        except InputError as exc:
            expected, problem = {}, str(exc)
            warn([f"no drift gauges: the limits cannot be planned: {problem}"])
        self.model = exporter.NodeModel(
            run.cfg, dict(run.capacity), alloc, run.h, expected, problem
        )
        self.extra = exporter.ExtraReader(run.h, proc_root)
        self.proc_root = proc_root
        self.pod_log_dir = v["pod_log_dir"] or None
        self.recorder = None
        if v["history_path"]:
            self.recorder = history.Recorder(
                v["history_path"],
                self._cgroup_paths(),
                v["history_interval"],
                v["max_samples"],
                proc_root,
            )
        self.engine = exporter.Engine(
            self.take, v["deadline"], self.recorder.maybe if self.recorder else None
        )
        th = exporter.Thresholds(v["memory_pressure"], v["near_limit"])
        self.collector = exporter.Collector(
            self.model,
            self.engine,
            (self.extra.node_reason, self.extra.cgroup_reason),
            v["state_dir"] or None,
            th,
            boot_id_file,
        )

    def _cgroup_paths(self) -> dict[str, str]:
        run = self.run
        named = {"node": "", "kubepods": run.kubepods, **run.reserved, **run.daemons}
        return {
            r: "/" + (p or "").strip("/")
            for r, p in named.items()
            if r in history.TRACKED_ROLES and p is not None
        }

    def take(self) -> exporter.Sample:
        return exporter.take_sample(self.run.sample, self.extra, self.pod_log_dir)

    def registry(self, process: bool):
        from prometheus_client import CollectorRegistry, ProcessCollector

        reg = CollectorRegistry(auto_describe=False)
        reg.register(self.collector)
        if process:  # the exporter's own CPU and memory (process_cpu_seconds_total, ...)
            ProcessCollector(registry=reg)
        return reg

    def close(self) -> None:
        self.engine.stop()
        self.run.reader.close()
        self.extra.close()
        if self.recorder:
            self.recorder.close()


def run_exporter(inputs: NodeInputs, **v) -> None:
    """``cgalloc exporter`` with its options' values (:data:`OPTIONS`)."""
    running = Running(inputs, v)
    gc.enable()  # cli.run turned it off for one-shot commands; an exporter lives on
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if v["textfile"]:
            _textfile_loop(running, v["textfile"], v["interval"], v["once"], stop)
        else:
            _serve(running, v["listen"], stop)
    finally:
        signal.signal(signal.SIGTERM, previous)
        running.close()


def _textfile_loop(
    running: Running, path: str, interval: float, once: bool, stop: threading.Event
) -> None:
    from prometheus_client import write_to_textfile

    reg = running.registry(process=False)
    while True:
        write_to_textfile(path, reg)  # a temporary file renamed over PATH: atomic
        if once or stop.wait(interval):
            return


def _serve(running: Running, listen: str, stop: threading.Event) -> None:
    from prometheus_client import start_http_server

    host, port = parse_listen(listen)
    try:
        server, thread = start_http_server(port, host, registry=running.registry(process=True))
    except OSError as exc:
        raise InputError(
            f"--listen {listen}: cannot listen there: {exc.strerror or exc}."
        ) from None
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    warn_line = f"cgalloc exporter: serving http://{shown}:{bound}/metrics"
    import sys

    print(warn_line, file=sys.stderr, flush=True)
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
