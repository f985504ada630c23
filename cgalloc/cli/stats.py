"""``cgalloc stats``: usage of the node's tree against its limits and reservations, as a table or
in the shape of the kubelet's ``/stats/summary``."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import typer

from cgalloc import netstats, stats
from cgalloc.cgroupfs import V1_UNLIMITED_FLOOR, Hierarchy, controller_dirs
from cgalloc.cli.inputs import NodeInputs, NodeInputsCommand, node_inputs
from cgalloc.cli.render import OutputFormat, aligned, dumps, output_option, warn
from cgalloc.errors import InputError
from cgalloc.resources import MEMORY
from cgalloc.tree import kubepods_path as _kubepods_path
from cgalloc.tree import reserved_path as _reserved_path

STATS_HELP = (
    "Read the usage of this node's cgroup tree (root, kubepods, QoS tiers, pods, kube-reserved"
    " and system-reserved) and show it against each cgroup's limit or reservation, flagging"
    " daemons that use more than was reserved for them. --output json gives the kubelet's"
    " /stats/summary shape. Read-only; works unprivileged."
)


def _abs_dir(h: Hierarchy, path: str) -> str:
    dirs = controller_dirs(h, path)
    where = dirs.get("memory") or next(iter(dirs.values()), None)
    return where or os.path.join(h.root, path)


def _missing_lines(h: Hierarchy, targets: Sequence[stats.Target], recs) -> list[str]:
    """One line per missing cgroup, leaving out those below another missing one."""
    gone = [t.path for t, r in zip(targets, recs, strict=True) if not r.found]
    lines = []
    for t, r in zip(targets, recs, strict=True):
        if r.found or any(t.path.startswith(g + "/") for g in gone):
            continue
        lines.append(f"{t.role}: not found at {_abs_dir(h, t.path)}")
    return lines


def _mib(value: int | None) -> str:
    if value is None:
        return "-"
    if value >= V1_UNLIMITED_FLOOR:
        return "max"
    return f"{value / 2**20:.1f}Mi"


def _cores(nano: int | None) -> str:
    return "-" if nano is None else f"{nano / 1e9:.3f}"


def _cpu_limit(rec: stats.CgroupStats) -> str:
    q, p = rec.cpu_quota_us, rec.cpu_period_us
    if q is None or p is None:
        return "-"
    return "max" if q == stats.UNLIMITED else f"{q / p:.3f}"


def _table(rows: list[dict]) -> str:
    header = ("CGROUP", "ROLE", "CPU", "CPU LIMIT", "CPU RESERVED", "MEMORY WS", "MEMORY LIMIT",
              "MEMORY RESERVED", "PIDS", "THROTTLED", "FLAG")  # fmt: skip
    body = [
        (
            "/" + r["target"].path,
            r["target"].role,
            _cores(stats.usage_nano_cores(r["prev"], r["cur"])),
            _cpu_limit(r["cur"]),
            "-" if r["target"].reserved_milli_cpu is None else f"{r['target'].reserved_milli_cpu}m",
            _mib(r["cur"].working_set),
            _mib(r["cur"].memory_limit),
            _mib(r["target"].reserved_memory),
            "-" if r["cur"].pids_current is None else str(r["cur"].pids_current),
            "-"
            if r["cur"].nr_throttled is None
            else f"{r['cur'].nr_throttled}/{r['cur'].nr_periods}",
            "OVER RESERVATION" if r["over"] else "",
        )
        for r in rows
    ]
    lines = aligned([header, *body])
    for r in rows:
        lines += [f"{r['target'].role} /{r['target'].path}: {why}" for why in r["over"]]
    return "\n".join(line.rstrip() for line in lines)


class _Run:
    """One `cgalloc stats` invocation: the node's targets, a reader, the previous sample."""

    def __init__(self, inputs: NodeInputs, cgroupfs: str, daemons: dict[str, str]):
        self.cfg, self.capacity = inputs.load()
        self.kubepods = _kubepods_path(self.cfg)
        self.reserved = {}
        for role, value, label in (
            ("kube-reserved", self.cfg.kube_reserved_cgroup,
             "kubeReservedCgroup (--kube-reserved-cgroup)"),
            ("system-reserved", self.cfg.system_reserved_cgroup,
             "systemReservedCgroup (--system-reserved-cgroup)"),
        ):  # fmt: skip
            if value:
                self.reserved[role] = _reserved_path(value, label, self.cfg.cgroup_driver)
        self.daemons = daemons
        self.h, plain = stats.open_hierarchy(cgroupfs)
        self.reader = stats.TreeReader(self.h, allow_any_fs=plain)
        self.prev: dict[str, stats.CgroupStats] = {}

    def sample(self) -> tuple[list[stats.Target], list[stats.CgroupStats]]:
        # Pods come and go: list them again on every sample.
        targets = stats.node_targets(self.cfg, self.h, self.kubepods, self.reserved, self.daemons)
        recs = self.reader.sample([t.path for t in targets])
        warn(self.reader.pop_warnings())
        return targets, recs

    def document(self, targets, recs, node_name: str) -> dict:
        """The /stats/summary document of one sample."""
        now = time.time()
        when = stats.rfc3339(now)
        by_path = {t.path: (t, r) for t, r in zip(targets, recs, strict=True)}
        sys_paths = stats.system_container_paths(self.kubepods, self.reserved, self.daemons)
        pods_read = [(t, r) for t, r in zip(targets, recs, strict=True)
                     if t.role == "pod" and r.found]  # fmt: skip
        wanted = [*sys_paths.values(), *(t.path for t, _ in pods_read)]
        started = dict(zip(wanted, stats.start_times(self.h, wanted), strict=True))

        def start(path: str) -> str:
            created = started[path]
            return stats.rfc3339(created if created is not None else now)

        system = []
        for name, path in sys_paths.items():
            _, rec = by_path[path]
            if rec.found:
                summary = stats.container_summary(name, rec, self.prev.get(path), when, start(path))
                system.append(summary)
        _, root = by_path[""]
        node = {
            "nodeName": node_name,
            "systemContainers": system,
            "startTime": stats.rfc3339(_boot_time()),
            "cpu": stats.cpu_summary(root, self.prev.get(""), when),
            "memory": stats.memory_summary(root, when, limit=self.capacity[MEMORY].value()),
            "network": netstats.network_summary(netstats.interface_stats(), when),
            "rlimit": stats.rlimit_summary(when),
        }
        pods = []
        for t, rec in pods_read:
            pod: dict[str, object] = {
                "podRef": {"uid": t.pod_uid},
                "startTime": start(t.path),
                "cpu": stats.cpu_summary(rec, self.prev.get(t.path), when),
                "memory": stats.memory_summary(rec, when),
            }
            if rec.pids_current is not None:
                pod["process_stats"] = {"process_count": rec.pids_current}
            pods.append(pod)
        return {"node": node, "pods": pods}

    def rows(self, targets, recs) -> list[dict]:
        return [
            {
                "target": t,
                "cur": r,
                "prev": self.prev.get(t.path),
                "over": stats.overflow(t, r, self.prev.get(t.path)),
            }
            for t, r in zip(targets, recs, strict=True)
            if r.found
        ]

    def render(self, targets, recs, output: OutputFormat, node_name: str) -> None:
        missing = _missing_lines(self.h, targets, recs)
        if output is OutputFormat.table:
            for line in missing:
                typer.echo(line)
            typer.echo(_table(self.rows(targets, recs)))
        else:
            warn(missing)
            typer.echo(dumps(self.document(targets, recs, node_name), output, compact=True))
        self.prev = {r.path: r for r in recs if r.found}


def _boot_time() -> float:
    from cgalloc.stats import boot_time

    return boot_time()


MAX_SECONDS = 86400  # a day: time.sleep() overflows on 1e300, and nan/inf are no duration


def _positive(value: float | None, label: str) -> None:
    if value is not None and not 0 < value <= MAX_SECONDS:  # also false for nan
        raise InputError(
            f"{label} must be a number of seconds greater than 0 and at most {MAX_SECONDS}, "
            "such as 2 or 0.5."
        )


def register(app: typer.Typer) -> None:
    @app.command("stats", help=STATS_HELP, cls=NodeInputsCommand)
    @node_inputs
    def stats_command(
        inputs: NodeInputs,
        cgroupfs: str = typer.Option(
            "/sys/fs/cgroup", "--cgroupfs", metavar="PATH",
            help="Where the cgroup hierarchy is mounted (a v2 mount or the v1 controllers' parent)."
            " A plain directory with the same layout is read as a copy of a tree.",
        ),
        output: OutputFormat = output_option(),
        watch: float | None = typer.Option(
            None, "--watch", metavar="SECONDS",
            help="Refresh every SECONDS, keeping the files open between samples.",
        ),
        count: int = typer.Option(
            0, "--count", metavar="N", help="With --watch: stop after N refreshes (0 = never)."
        ),
        interval: float = typer.Option(
            1.0, "--interval", metavar="SECONDS",
            help="Without --watch: seconds between the two samples the CPU rate"
            " (usageNanoCores) is taken from; 0 reads once and leaves the rate out.",
        ),
        kubelet_cgroups: str = typer.Option(
            "", "--kubelet-cgroups", metavar="CGROUP",
            help="The kubelet's cgroup (kubeletCgroups); default: the kube-reserved cgroup.",
        ),
        runtime_cgroups: str = typer.Option(
            "", "--runtime-cgroups", metavar="CGROUP",
            help="The container runtime's cgroup (runtimeCgroups).",
        ),
        system_cgroups: str = typer.Option(
            "", "--system-cgroups", metavar="CGROUP",
            help="The OS daemons' cgroup (systemCgroups); default: the system-reserved cgroup.",
        ),
        node_name: str = typer.Option(
            "", "--node-name", metavar="NAME", help="nodeName in the JSON (default: hostname)."
        ),
    ) -> None:  # fmt: skip
        _positive(watch, "--watch")
        if count < 0:
            raise InputError("--count must be a whole number of refreshes, 0 or more.")
        if not 0 <= interval <= MAX_SECONDS:  # also false for nan
            raise InputError(
                f"--interval must be a number of seconds from 0 to {MAX_SECONDS}, such as 1."
            )
        daemons = {"kubelet": kubelet_cgroups, "runtime": runtime_cgroups, "misc": system_cgroups}
        for flag, value in zip(("--kubelet-cgroups", "--runtime-cgroups", "--system-cgroups"),
                               daemons.values(), strict=True):  # fmt: skip
            if value and not value.startswith("/"):
                raise InputError(f"{flag} must be an absolute cgroup path such as /kubelet.")
        run = _Run(inputs, cgroupfs, {k: v for k, v in daemons.items() if v})
        name = node_name or os.uname().nodename  # gethostname(2) is uname's nodename
        try:
            if watch is None:
                if interval > 0:
                    targets, recs = run.sample()
                    run.prev = {r.path: r for r in recs if r.found}
                    time.sleep(interval)
                targets, recs = run.sample()
                run.render(targets, recs, output, name)
                return
            done = 0
            while True:
                targets, recs = run.sample()
                if done:
                    typer.echo("")
                run.render(targets, recs, output, name)
                done += 1
                if count and done >= count:
                    return
                time.sleep(watch)
        finally:
            run.reader.close()
