"""``python -m bench.exporter_suite``: the exporter's CPU per scrape and memory against the C floor
of the same reads, at 110, 250 and 1000 pods, interleaved round by round (bench.rounds).

  python -m bench.exporter_suite [--pods 110,250,1000] [--scrapes S] [--markdown PATH]
                                 [--json PATH]

Per tree (a fake v2 kubepods tree of plain files, bench/faketree.py, with kube.slice,
system.slice, their PSI and memory.peak files, /proc/pressure and a pod log directory):

- "exporter, in process": one ``generate_latest`` of the exporter's registry, as a scrape
  makes it: pod discovery, the sampler's read (its fd policy), the PSI and peak files, the pod
  names, the families and their exposition; CPU from CLOCK_PROCESS_CPUTIME_ID (every thread of
  the process: the sampler's worker and the core's threads too), the least of S scrapes;
- "exporter over HTTP": ``cgalloc exporter --listen 127.0.0.1:0`` in its own process,
  scraped S times; its CPU from /proc/PID/stat (clock ticks) over the S scrapes, per scrape;
  its peak RSS (VmHWM) after them;
- "C floor": csrc/scrape_floor.c doing the same accesses in the same order (the directory
  listings, the sampler's kept fds / dir fds / opens, the PSI and peak files, /proc/pressure, the
  pod log directory), the least CPU of S iterations; its peak RSS.

The target (issue 38): the exporter's CPU per scrape at most 1.2x the floor's, judged on the
median of the per-round ratios (min–max shown). ``CGALLOC_BENCH_ROUNDS`` sets the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench import faketree, report, trees
from bench.read_suite import _policy_lines
from bench.rounds import ROUNDS, Contender, idle_cores, interleave

IN_PROCESS = "exporter, in process (collect + exposition)"
SAMPLE_ONLY = "  of which the sample: reads + records"
FAMILIES = "  of which sample + metric families (no exposition)"
OVER_HTTP = "exporter over HTTP, whole process"
FLOOR = "C floor, the same reads (scrape_floor.c)"
PSI = (
    "some avg10=0.00 avg60=0.00 avg300=0.00 total={}\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total={}\n"
)
RESERVED = ("kube.slice", "system.slice")
NODE_FLAGS = {
    "kube-reserved-cgroup": ["/kube.slice"],
    "system-reserved-cgroup": ["/system.slice"],
    "kube-reserved": ["cpu=200m,memory=1Gi"],
    "system-reserved": ["cpu=200m,memory=1Gi"],
    "enforce-node-allocatable": ["pods,kube-reserved"],
    "capacity": ["cpu=16,memory=64Gi,ephemeral-storage=100Gi,pid=4194304"],
    "max-pods": ["1100"],
}


def _write(path: str, files: dict[str, str]) -> None:
    os.makedirs(path, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)


def make_node(base: str, pods: int) -> dict:
    """The fake node under ``base``: its cgroup root, /proc, pod log directory."""
    import random

    rng = random.Random(pods)
    root = os.path.join(base, "cg")
    dirs = faketree.make_tree(root, "v2", pods=pods, containers=0)
    root_files = faketree.v2_files(rng)
    del root_files["memory.current"]  # the v2 root has none
    _write(root, root_files)
    for r in RESERVED:
        files = faketree.v2_files(rng)
        files |= {f"{res}.pressure": PSI.format(1000, 10) for res in ("cpu", "memory", "io")}
        files["memory.peak"] = "123456789\n"
        _write(os.path.join(root, r), files)
    proc = os.path.join(base, "proc")
    _write(
        os.path.join(proc, "pressure"), {r: PSI.format(5000, 0) for r in ("cpu", "memory", "io")}
    )
    _write(
        proc,
        {
            "meminfo": "MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n",
            "loadavg": "0.1 0.2 0.3 2/1500 99\n",
        },
    )
    logs = os.path.join(base, "logs")
    os.makedirs(logs)
    for d in dirs:
        name = d.rsplit("/", 1)[-1]
        if name.startswith("pod"):
            os.mkdir(os.path.join(logs, f"default_web-{name[3:11]}_{name[3:]}"))
    return {"root": root, "proc": proc, "logs": logs}


def _values(node: dict) -> dict:
    from cgalloc.cli import exporter as exporter_cli

    v = {o.name: o.default for o in exporter_cli.OPTIONS}
    v.update(cgroupfs=node["root"], pod_log_dir=node["logs"], state_dir="")
    return v


def _cli_args(node: dict) -> list[str]:
    args = ["--cgroupfs", node["root"], "--pod-log-dir", node["logs"], "--state-dir", ""]
    for flag, values in NODE_FLAGS.items():
        args += [f"--{flag}={v}" for v in values]
    return args


def in_process(node: dict, scrapes: int):
    """The exporter built as its command builds it, and a measure of one scrape's CPU."""
    from prometheus_client import generate_latest

    from cgalloc.cli import exporter as exporter_cli
    from cgalloc.cli.inputs import NodeInputs

    running = exporter_cli.Running(NodeInputs(flags=NODE_FLAGS), _values(node), node["proc"])
    reg = running.registry(process=False)
    for _ in range(3):  # the cold read, then the sampler's policy
        generate_latest(reg)

    def least(fn):
        def measure() -> float:
            best = None
            for _ in range(scrapes):
                t0 = time.process_time()
                fn()
                t = time.process_time() - t0
                best = t if best is None else min(best, t)
            return best

        return measure

    parts = {
        SAMPLE_ONLY: least(running.take),
        FAMILIES: least(lambda: list(running.collector.collect())),
    }
    return running, least(lambda: generate_latest(reg)), parts


def floor_lines(running, node: dict) -> list[str]:
    """The floor's accesses for one scrape of ``running``, in the exporter's order."""
    run = running.run
    targets, recs = run.sample()
    dirs = [t.path for t in targets]
    lines = [f"l {p}" for p in ("kubepods", "kubepods/burstable", "kubepods/besteffort")]
    policy = run.reader.policy
    for plan in run.reader.plans:
        lines += _policy_lines(policy, dirs)(plan)
    extra = [
        t.path for t, r in zip(targets, recs, strict=True) if r.found and t.path and t.role != "pod"
    ]
    for p in extra:
        lines += [
            f"c {p}/{f}" for f in ("memory.peak", "cpu.pressure", "memory.pressure", "io.pressure")
        ]
    lines += [f"c {node['proc']}/pressure/{r}" for r in ("cpu", "memory", "io")]
    lines.append(f"l {node['logs']}")
    return lines


def floor(binary: str, lines: list[str], cwd: str, scrapes: int, rss: list):
    def measure() -> float:
        out = subprocess.run(
            [binary, str(scrapes)],
            input="\n".join(lines),
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
        cpu_ns, _wall, maxrss = out.stdout.split()
        rss.append(int(maxrss))
        return int(cpu_ns) / 1e9

    return measure


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def _hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))


@contextlib.contextmanager
def http_exporter(node: dict):
    proc = subprocess.Popen(
        [sys.executable, "-m", "cgalloc", "exporter", *_cli_args(node), "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://(127\.0\.0\.1:\d+)/metrics", line)
        if not m:
            raise RuntimeError(f"the exporter did not start: {line}{proc.stderr.read()[-400:]}")
        yield proc, f"http://{m.group(1)}/metrics"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def over_http(proc, url: str, scrapes: int, rss: list):
    tick = os.sysconf("SC_CLK_TCK")
    for _ in range(3):
        urllib.request.urlopen(url, timeout=60).read()

    def measure() -> float:
        before = _cpu_ticks(proc.pid)
        for _ in range(scrapes):
            urllib.request.urlopen(url, timeout=60).read()
        rss.append(_hwm_kib(proc.pid))
        return (_cpu_ticks(proc.pid) - before) / tick / scrapes

    return measure


def suite(pods: int, scrapes: int, binary: str) -> report.Suite:
    with tempfile.TemporaryDirectory(prefix="cgalloc-bench-exporter-") as base:
        node = make_node(base, pods)
        running, inproc, parts = in_process(node, scrapes)
        lines = floor_lines(running, node)
        floor_rss: list[int] = []
        http_rss: list[int] = []
        sampled = sum(1 for line in lines if line[0] in "kdc")
        try:
            with http_exporter(node) as (proc, url):
                cs = [
                    Contender(IN_PROCESS, inproc, 1, note=f"least of {scrapes} scrapes"),
                    *(Contender(name, m, 1, note="the same, least") for name, m in parts.items()),
                    Contender(
                        FLOOR,
                        floor(binary, lines, node["root"], scrapes, floor_rss),
                        1,
                        note=f"{sampled} files, {len(lines) - sampled} listings",
                    ),
                    Contender(
                        OVER_HTTP,
                        over_http(proc, url, scrapes, http_rss),
                        1,
                        note=f"mean of {scrapes} scrapes (clock ticks)",
                    ),
                ]
                idle = idle_cores()
                result = report.Suite(f"exporter scrape, {pods} pods (fake v2 tree)", "scrape", cs)
                result.times = interleave(cs)
                body = urllib.request.urlopen(url, timeout=60).read()
        finally:
            running.close()
        series = sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))
        result.values["exporter peak RSS (VmHWM), whole process"] = (
            [v / 1024 for v in http_rss],
            "MiB",
        )
        result.values["C floor peak RSS"] = ([v / 1024 for v in floor_rss], "MiB")
        result.values["series per scrape"] = ([series], "series")
        result.values["exposition size"] = ([len(body) / 1024], "KiB")
        result.targets = [
            report.Target(
                "exporter CPU per scrape <= 1.2x the C floor", IN_PROCESS, FLOOR, "ratio", 1.2
            ),
            report.Target("over HTTP, whole process (reported)", OVER_HTTP, FLOOR, "ratio", 1.2),
            report.Target("the sample alone (reported)", SAMPLE_ONLY, FLOOR, "ratio", 1.2),
        ]
        result.notes.append(f"{idle:.1f} of {os.cpu_count()} CPUs idle just before the rounds")
        return result


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.exporter_suite", description=__doc__)
    ap.add_argument("--pods", default=os.environ.get("CGALLOC_BENCH_EXPORTER_PODS", "110,250,1000"))
    ap.add_argument("--scrapes", type=int, default=10, help="scrapes (iterations) per round")
    ap.add_argument("--markdown", metavar="PATH")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    trees.raise_nofile()
    suites = []
    with tempfile.TemporaryDirectory(prefix="cgalloc-bench-bin-") as bindir:
        binary = trees.build_c("scrape_floor", bindir)
        if binary is None:
            print("no C compiler: no floor to compare against", file=sys.stderr)
            return 1
        for pods in (int(p) for p in args.pods.split(",") if p):
            print(f"bench: exporter, {pods} pods ...", file=sys.stderr, flush=True)
            suites.append(suite(pods, args.scrapes, binary))
            print(report.text(suites[-1]), flush=True)
    env = f"env CGALLOC_BENCH_ROUNDS={ROUNDS} "
    command = env + ".venv/bin/python -m bench.exporter_suite " + shlex.join(argv)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(suites, command))
    if args.json:
        machine = {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "python": platform.python_version(),
            "rounds": ROUNDS,
            "command": command,
        }
        with open(args.json, "w") as f:
            json.dump(report.as_json(suites, machine), f, indent=1)
    failed = [c.note for s in suites for c in s.contenders if c.note.startswith("failed:")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
