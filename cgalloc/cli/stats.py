"""``cgalloc stats``: usage of the node's tree against its limits and reservations, as a table or
in the shape of the kubelet's ``/stats/summary``."""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.cli import StdoutError, stats_table
from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.options import CGROUPFS
from cgalloc.cli.optspec import Opt
from cgalloc.cli.render import OUTPUT, OutputFormat, dumps, echo, printable, warn
from cgalloc.errors import InputError
from cgalloc.model.hierarchy import Hierarchy, controller_dirs
from cgalloc.model.kernel_ranges import name_refusal
from cgalloc.model.naming import CGROUP_FIELDS, driver
from cgalloc.model.naming import clean_cgroupfs_path as _daemon_path
from cgalloc.model.naming import kubepods_path as _kubepods_path
from cgalloc.model.naming import reserved_path as _reserved_path
from cgalloc.ops import stats

if TYPE_CHECKING:
    import typer

    from cgalloc.cli import stats_summary

STATS_HELP = (
    "Read the usage of this node's cgroup tree (root, kubepods, QoS tiers, pods, kube-reserved"
    " and system-reserved) and show it against each cgroup's limit or reservation, flagging"
    " daemons that use more than was reserved for them. --output json gives the kubelet's"
    " /stats/summary shape (with --watch: one JSON document per line; YAML documents separated"
    " by ---). --cgroupfs may also name a plain directory with the same layout (a copy of a"
    " tree). Read-only; works unprivileged.\n\n" + stats_table.COLUMNS_HELP
)
EXAMPLES = (
    "cgalloc stats --config /var/lib/kubelet/config.yaml          # the tree against its limits",
    "cgalloc stats --watch 5 --role kube-reserved,system-reserved",
    "cgalloc stats -o json --interval 1           # in the shape of the kubelet's /stats/summary",
    "cgalloc stats --watch 10 -o json | head -n 3   # one document per line",
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


class View(NamedTuple):  # not a dataclass: those cost ~1.5 ms per process to build
    """How samples are shown: format, table order and headers, the watch title and redraw."""

    output: OutputFormat
    sort_by: stats_table.SortBy = stats_table.SortBy.tree
    headers: bool = True
    title: Callable[[float], str] | None = None  # the line above each watch frame
    redraw: bool = False  # clear the terminal before each frame


# the option each cgroup stats names comes from, for its refusals
_FLAGS = {
    **CGROUP_FIELDS,
    "kubelet": "--kubelet-cgroups",
    "runtime": "--runtime-cgroups",
    "misc": "--system-cgroups",
}


class _Run:
    """One `cgalloc stats` invocation: the node's targets, a reader, the previous sample."""

    def __init__(
        self, inputs: NodeInputs, cgroupfs: str, daemons: dict[str, str], document: bool = False
    ):
        self.inputs = inputs
        self.cfg, self.capacity = inputs.load()
        self.kubepods = _kubepods_path(self.cfg)
        self.reserved = {}
        drv = driver(self.cfg.cgroup_driver)
        for role, value in (("kube-reserved", self.cfg.kube_reserved_cgroup),
                            ("system-reserved", self.cfg.system_reserved_cgroup)):  # fmt: skip
            if value:
                self.reserved[role] = _reserved_path(value, _FLAGS[role], drv)
        # a flag wins; else the kubelet config's kubeletCgroups/runtimeCgroups/systemCgroups
        configured = {"kubelet": self.cfg.kubelet_cgroups, "runtime": self.cfg.runtime_cgroups,
                      "misc": self.cfg.system_cgroups}  # fmt: skip
        chosen = {k: v for k, v in configured.items() if v} | daemons
        self.daemons = {k: _daemon_path(v) for k, v in chosen.items()}
        self.h, plain = stats.open_hierarchy(cgroupfs)
        self._check_lengths()
        self.reader = stats.TreeReader(self.h, allow_any_fs=plain)
        self.prev: dict[str, stats.CgroupStats] = {}
        self.keep: Callable[[stats.Target], bool] = lambda _t: True
        self.one_shot = False  # every read cold: no later sample would re-read a kept fd
        self.dated = False  # the document's start times are wanted: take them with the reads
        self.summary: stats_summary.Summary | None = None
        if document:  # the document's module is loaded for a document only
            from cgalloc.cli import stats_summary

            self.summary = stats_summary.Summary(self, daemons)

    def _check_lengths(self) -> None:
        """A cgroup the kernel cannot name (past NAME_MAX or PATH_MAX below the longest
        controller directory) is bad input, as setup says, not a read error."""
        named = {"kubepods": self.kubepods, **self.reserved, **self.daemons}
        longest = max(controller_dirs(self.h, "").values(), key=len, default=self.h.root)
        for role, path in named.items():
            problem = name_refusal(_FLAGS[role], path.strip("/"), longest) if path else None
            if problem:  # setup's sentence (plan.check_targets)
                raise InputError(problem)

    def sample(self, shown: bool = True) -> tuple[list[stats.Target], list[stats.CgroupStats]]:
        """The targets and their records; ``shown`` False for a read only a rate is taken
        from (its start times are not wanted)."""
        # Pods come and go: list them again on every sample.
        daemons = self.daemons if self.summary is None else self.summary.daemons()
        targets = stats.node_targets(self.cfg, self.h, self.kubepods, self.reserved, daemons)
        if self.summary is not None:
            targets += self.summary.containers(targets)
        # The table's --role / --depth: cgroups not shown are not read either.
        targets = [t for t in targets if self.keep(t)]
        paths = [t.path for t in targets]
        read = self.reader.read if self.one_shot else self.reader.sample
        recs = read(paths, dated=self.dated and shown)
        warn(self.reader.pop_warnings())
        return targets, recs

    def document(self, targets, recs, node_name: str) -> dict:
        """The /stats/summary document of one sample."""
        assert self.summary is not None
        return self.summary.document(targets, recs, node_name)

    def rows(self, targets, recs) -> list[stats_table.Row]:
        """The table's rows of one sample: the cgroups found, with their rate and overflow."""
        out = []
        for t, r in zip(targets, recs, strict=True):
            if r.found:
                prev = self.prev.get(t.path)
                rate = stats.usage_nano_cores(prev, r)
                out.append(stats_table.Row(t, r, rate, stats.overflow(t, r, prev)))
        return out

    def frame(self, targets, recs, view: View, node_name: str) -> tuple[str, list[str]]:
        """One sample as text, and the warnings that go with it (for stderr)."""
        warnings = _missing_lines(self.h, targets, recs)
        if view.output is OutputFormat.table:
            rows = stats_table.ordered(self.rows(targets, recs), view.sort_by)
            lines = [stats_table.table(rows, headers=view.headers)]
            notes = stats_table.reasons(rows)
            if view.headers:
                lines += notes
            else:
                warnings += notes  # stdout keeps rows only, for scripts
            if view.title:
                lines.insert(0, view.title(time.time()))
            text = printable("\n".join(lines))  # before --watch's CLEAR, which must act
        else:
            text = dumps(self.document(targets, recs, node_name), view.output, compact=True)
        self.prev = {r.path: r for r in recs if r.found}
        return text, warnings


DEFAULT_INTERVAL = 1.0  # None on the option: given with --watch it is refused, not ignored
MAX_SECONDS = 86400  # a day: time.sleep() overflows on 1e300, and nan/inf are no duration


# What goes between two --watch samples off a terminal: a blank line between tables, nothing
# between NDJSON lines, the YAML document separator.
_SEPARATORS = {OutputFormat.table: "", OutputFormat.json: None, OutputFormat.yaml: "---"}


def _show(text: str, warnings: list[str]) -> None:
    echo(text)
    warn(warnings)


def _view(
    output: OutputFormat,
    watch: float | None,
    sort_by: stats_table.SortBy,
    headers: bool,
    role: str,
    depth: int | None,
) -> View:
    """The view the options ask for; table-only options with -o json/yaml are refused."""
    if depth is not None and depth < 0:
        raise InputError("--depth must be a whole number of levels below the root, 0 or more.")
    if output is not OutputFormat.table:
        given = [flag for flag, on in (("--role", bool(role)), ("--depth", depth is not None),
                 ("--sort-by", sort_by is not stats_table.SortBy.tree),
                 ("--no-headers", not headers)) if on]  # fmt: skip
        if given:
            raise InputError(
                f"{given[0]} shapes the table only; with -o {output.value} the document keeps"
                " the kubelet's /stats/summary shape (drop it, or use -o table)."
            )
        return View(output)
    title = None
    if watch is not None and headers:
        host = os.uname().nodename

        def title(now: float) -> str:
            return f"Every {watch:g}s: cgalloc stats on {host}  {stats.rfc3339(now)}"

    redraw = watch is not None and sys.stdout.isatty()
    return View(output, sort_by, headers, title, redraw)


def _positive(value: float | None, label: str) -> None:
    if value is not None and not 0 < value <= MAX_SECONDS:  # also false for nan
        raise InputError(
            f"{label} must be a number of seconds greater than 0 and at most {MAX_SECONDS}, "
            "such as 2 or 0.5."
        )


# stats' options in --help order (--cgroupfs, --output, then its own); the node inputs follow
OPTIONS: tuple[Opt, ...] = (
    CGROUPFS,
    OUTPUT,
    Opt("watch", ("--watch",), float | None, None,
        "Refresh every SECONDS, keeping the files open between samples.", "SECONDS"),
    Opt("count", ("--count",), int, 0,
        "With --watch: stop after N refreshes (0 = never).", "N"),
    Opt("interval", ("--interval",), float | None, None,
        "Without --watch: seconds between the two samples the CPU rate (usageNanoCores) is"
        " taken from; 0 reads once and leaves the rate out."
        f"  [default: {DEFAULT_INTERVAL:g}]", "SECONDS"),
    Opt("kubelet_cgroups", ("--kubelet-cgroups",), str, "",
        "The kubelet's cgroup; default: kubeletCgroups from --config (stats -o json: else the"
        " running kubelet's own, as the kubelet finds it).", "CGROUP"),
    Opt("runtime_cgroups", ("--runtime-cgroups",), str, "",
        "The container runtime's cgroup; default: runtimeCgroups from --config (a field the"
        " kubelet does not read: stats -o json lists runtime only for this option or the"
        " kubelet's own --runtime-cgroups flag).", "CGROUP"),
    Opt("system_cgroups", ("--system-cgroups",), str, "",
        "The OS daemons' cgroup; default: systemCgroups from --config.", "CGROUP"),
    Opt("node_name", ("--node-name",), str, "", "nodeName in the JSON (default: hostname).",
        "NAME"),
    Opt("role", ("--role",), str, "",
        "Table: show only cgroups of these roles (" + ", ".join(stats_table.ROLES) + ").",
        "ROLE[,ROLE...]"),
    Opt("depth", ("--depth",), int | None, None,
        "Table: show only cgroups at most N levels below the root (0: the root, 1: kubepods,"
        " 2: QoS tiers and Guaranteed pods, 3: other pods).", "N"),
    Opt("sort_by", ("--sort-by",), stats_table.SortBy, stats_table.SortBy.tree,
        "Table row order: tree (as the tree nests), name (path), role, or the largest first:"
        " cpu, memory (working set), pids. Ties are ordered by path."),
    Opt("no_headers", ("--no-headers",), bool, False,
        "Table: rows only (no column header, no watch title); the reasons for"
        " OVER-RESERVATION go to stderr."),
)  # fmt: skip


def register(app: typer.Typer) -> None:
    from cgalloc.cli.signature import NodeInputsCommand, node_inputs, options

    @app.command("stats", help=STATS_HELP, cls=NodeInputsCommand)
    @node_inputs
    @options(OPTIONS)
    def stats_command(inputs: NodeInputs, values: dict) -> None:
        run_stats(inputs, **values)


def run_stats(
    inputs: NodeInputs,
    cgroupfs: str,
    output: OutputFormat,
    watch: float | None,
    count: int,
    interval: float | None,
    kubelet_cgroups: str,
    runtime_cgroups: str,
    system_cgroups: str,
    node_name: str,
    role: str,
    depth: int | None,
    sort_by: stats_table.SortBy,
    no_headers: bool,
) -> None:
    """``cgalloc stats`` with its options' values (:data:`OPTIONS`)."""
    _positive(watch, "--watch")
    if count < 0:
        raise InputError("--count must be a whole number of refreshes, 0 or more.")
    # each belongs to one mode: given in the other it would be ignored without a word
    if count and watch is None:
        raise InputError("--count counts --watch refreshes; give --watch SECONDS with it.")
    if interval is not None and watch is not None:
        raise InputError(
            "--interval is the one-shot read's sampling gap; with --watch the rate is taken"
            " over the --watch period (drop --interval)."
        )
    interval = DEFAULT_INTERVAL if interval is None else interval
    if not 0 <= interval <= MAX_SECONDS:  # also false for nan
        raise InputError(
            f"--interval must be a number of seconds from 0 to {MAX_SECONDS}, such as 1."
        )
    daemons = {"kubelet": kubelet_cgroups, "runtime": runtime_cgroups, "misc": system_cgroups}
    for flag, value in zip(("--kubelet-cgroups", "--runtime-cgroups", "--system-cgroups"),
                           daemons.values(), strict=True):  # fmt: skip
        if value and not value.startswith("/"):
            raise InputError(f"{flag} must be an absolute cgroup path such as /kubelet.")
    view = _view(output, watch, sort_by, not no_headers, role, depth)
    document = output is not OutputFormat.table
    run = _Run(inputs, cgroupfs, {k: v for k, v in daemons.items() if v}, document)
    run.keep = stats_table.keeper(stats_table.parse_roles(role), depth)
    run.one_shot = watch is None
    run.dated = document
    name = node_name or os.uname().nodename  # gethostname(2) is uname's nodename
    try:
        if watch is None:
            if interval > 0:
                _, recs = run.sample(shown=False)
                run.prev = {r.path: r for r in recs if r.found}
                time.sleep(interval)
            _show(*run.frame(*run.sample(), view, name))
            return
        separator = _SEPARATORS[output]
        done = 0
        shown: list[str] = []
        while True:
            text, warnings = run.frame(*run.sample(), view, name)
            if view.redraw:
                text = stats_table.CLEAR + text  # one write: no flicker
            elif done and separator is not None:
                echo(separator)
            # A redraw wipes the last warnings: repeat them. Scrolling output says each once
            # while it holds, and again if it comes back after it stopped.
            fresh = warnings if view.redraw else [w for w in warnings if w not in shown]
            shown = warnings
            try:
                _show(text, fresh)  # warnings after the frame, so a redraw cannot wipe them
            except StdoutError as exc:
                if exc.errno != errno.EPIPE:
                    raise
                # the reader went away (`| head`): a watch ends there, as Unix tools do
                sys.stdout = None
                return
            done += 1
            if count and done >= count:
                return
            time.sleep(watch)
    finally:
        run.reader.close()
