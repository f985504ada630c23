"""A fake node for the exporter, record and recommend tests: a v2 tree with PSI files, /proc
files and a pod log directory, and the node inputs the tests share."""

from __future__ import annotations

import os

from statstree import make_v2

from cgalloc.cli import exporter as exporter_cli
from cgalloc.cli.inputs import node_inputs_from
from cgalloc.ops import history
from cgalloc.ops.history import HistorySample, Point

PSI = "some avg10={a:.2f} avg60=1.00 avg300=0.50 total={s}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total={f}\n"  # noqa: E501


POD_UID = "1111-2222"


KUBE_ARGS = (
    "--kube-reserved-cgroup",
    "/kube.slice",
    "--system-reserved-cgroup",
    "/system.slice",
    "--kube-reserved",
    "cpu=200m,memory=16Mi",
    "--system-reserved",
    "memory=1Gi,pid=1000",
    "--capacity",
    "cpu=4,memory=8Gi",
    "--enforce",
    "pods,kube-reserved",
)


def psi(path: str, avg10: float, some_us: int, full_us: int) -> None:
    for res in ("cpu", "memory", "io"):
        with open(os.path.join(path, f"{res}.pressure"), "w") as f:
            f.write(PSI.format(a=avg10, s=some_us, f=full_us))


def make_node(tmp_path) -> dict:
    """A v2 tree (kubepods, tiers, a pod, kube.slice, system.slice with PSI), /proc files and
    a pod log directory naming the pod."""
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    os.unlink(os.path.join(root, "memory.current"))
    make_v2(root, "kubepods", usage=8388608)
    make_v2(root, "kubepods/burstable", usage=4194304)
    make_v2(root, "kubepods/besteffort", usage=4194304)
    make_v2(root, f"kubepods/burstable/pod{POD_UID}", usage=4194304, memory_max="67108864")
    make_v2(root, "kube.slice", usage=20 * 2**20, memory_max="16777216")  # over its 16Mi
    make_v2(root, "system.slice", usage=8388608)
    psi(os.path.join(root, "kube.slice"), 12.5, 2_500_000, 1_000_000)
    psi(os.path.join(root, "system.slice"), 0.0, 500_000, 0)
    with open(os.path.join(root, "kube.slice", "memory.peak"), "w") as f:
        f.write("33554432\n")
    proc = tmp_path / "proc"
    (proc / "pressure").mkdir(parents=True)
    psi(str(proc / "pressure"), 0.0, 7_000_000, 3_000_000)
    os.rename(proc / "pressure" / "cpu.pressure", proc / "pressure" / "cpu")
    os.rename(proc / "pressure" / "memory.pressure", proc / "pressure" / "memory")
    os.rename(proc / "pressure" / "io.pressure", proc / "pressure" / "io")
    (proc / "meminfo").write_text("MemTotal:       8388608 kB\nMemAvailable:   6291456 kB\n")
    (proc / "loadavg").write_text("0.00 0.01 0.05 1/123 4567\n")
    logs = tmp_path / "logs"
    (logs / f"default_web-0_{POD_UID}").mkdir(parents=True)
    (logs / "not-a-pod").mkdir()
    return {"root": root, "proc": str(proc), "logs": str(logs), "tmp": tmp_path}


def values_for(extra: dict | None = None, **over) -> dict:
    v = {o.name: o.default for o in exporter_cli.OPTIONS}
    v.update(over)
    v.update(extra or {})
    return v


def inputs(*args: str):
    """NodeInputs of a command line of node-input options."""
    from cgalloc.cli.inputs import _OPTIONS

    vals: dict = {o.name: ([] if o.multiple else None) for o in _OPTIONS}
    by_decl = {d: o for o in _OPTIONS for d in o.decls}
    it = iter(args)
    for a in it:
        o = by_decl[a]
        value = next(it)
        if o.multiple:
            vals[o.name].append(value)
        else:
            vals[o.name] = value
    return node_inputs_from({k: (v or None) for k, v in vals.items()})


MI = 2**20


GI = 2**30


def window(n: int = 181, step: float = 10.0, **over) -> list[HistorySample]:
    """``n`` samples ``step`` s apart: kube-reserved uses 0.1 core (0.3 once, 0.9 once), 100 MiB
    (150 MiB once, 200 MiB once), 37 pids; system-reserved 0.05 core, 300 MiB, 120 pids;
    kubepods 1 GiB; MemTotal − MemAvailable 1.5 GiB (500 MiB outside kubepods)."""
    out = []
    kube_cpu = sys_cpu = 0
    for i in range(n):
        if i:
            rate = 0.9 if i == 50 else 0.3 if i == 60 else 0.1
            kube_cpu += int(rate * step * 1e9)
            sys_cpu += int(0.05 * step * 1e9)
        ws = 200 * MI if i == 70 else 150 * MI if i == 80 else 100 * MI
        cg = {
            "kube-reserved": Point(kube_cpu, ws, ws * 2, ws // 2, 37, 250 * MI),
            "system-reserved": Point(sys_cpu, 300 * MI, 400 * MI, 100 * MI, 120),
            "kubepods": Point(i * 10**10, GI, 2 * GI, GI, 500),
        }
        out.append(HistorySample(1_800_000_000 + i * step, cg, 8 * GI, 8 * GI - GI - 500 * MI,
                                 over.get("tasks")))  # fmt: skip
    return out


def write_history(path, samples, max_samples=history.DEFAULT_MAX_SAMPLES) -> None:
    """A history file as `cgalloc record` writes it: the header, then ``samples``."""
    head = history.header({"kube-reserved": "/kube.slice"}, 10, "node-a")
    w = history.Writer(str(path), head, max_samples)
    for s in samples:
        w.append(s)
    w.close()
