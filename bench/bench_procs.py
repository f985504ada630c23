"""``python -m bench.bench_procs``: the hand-written /proc readers against psutil, interleaved.

cgalloc finds daemons by name (``procs.find``: comm or executable basename, then each match's
``/proc/<pid>/cgroup``) and reads MemTotal (``capacity.mem_total_bytes``) without psutil. This
measures what psutil would cost for the same answers, round by round (bench.rounds), in this
process (psutil already imported) and as the import a command would add (a process importing
the readers, with and without psutil):

  python -m bench.bench_procs [--rounds N] [--markdown]

Both sides must give the same answer (same pids, same bytes); the run stops if they do not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench.rounds import Contender, interleave, per_round, spread, timed
from cgalloc.host import procs
from cgalloc.host.capacity import mem_total_bytes

# Daemons `setup --move-daemons` looks for, plus init, which every host has.
NAMES = ["kubelet", "containerd", "crio", "dockerd", "systemd", "init"]


def psutil_find(names: list[str]) -> list[procs.Proc]:
    """``procs.find`` through psutil: names from psutil, cgroups from /proc (psutil has none)."""
    import psutil

    wanted, me, found = set(names), os.getpid(), []
    for p in psutil.process_iter(["name", "exe"]):
        exe = os.path.basename(p.info["exe"] or "")
        if p.pid == me or not exe:
            continue  # like procs.find: kernel threads (no exe) cannot change cgroup
        match = p.info["name"] if p.info["name"] in wanted else exe if exe in wanted else None
        if match is None:
            continue
        try:
            with open(f"/proc/{p.pid}/cgroup") as f:
                found.append(procs.Proc(p.pid, match, procs.parse_proc_cgroup(f.read())))
        except OSError:
            continue
    return sorted(found, key=lambda p: p.pid)


def psutil_mem_total() -> int:
    import psutil

    return psutil.virtual_memory().total


READERS = "import cgalloc.host.procs, cgalloc.host.capacity"


def _process(code: str) -> float:
    """Whole-process wall time of ``python -c code``, measured by the child's parent."""
    import time

    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_procs", description=__doc__)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--markdown", action="store_true", help="print the table for docs/performance.md"
    )
    args = ap.parse_args(argv)
    hand_pids = [p.pid for p in procs.find(NAMES)]
    if hand_pids != [p.pid for p in psutil_find(NAMES)] or mem_total_bytes() != psutil_mem_total():
        print("psutil and the /proc readers disagree here: no comparison", file=sys.stderr)
        return 1
    nproc = sum(e.isdigit() for e in os.listdir("/proc"))
    pairs = [
        ("find daemons by name + their cgroups", lambda: procs.find(NAMES),
         lambda: psutil_find(NAMES), nproc),
        ("MemTotal", mem_total_bytes, psutil_mem_total, 1),
        ("a process importing the readers", lambda: _process(READERS),
         lambda: _process(READERS + ", psutil"), 1),
    ]  # fmt: skip
    contenders = []
    for what, hand, other, units in pairs:
        m = (lambda f=hand: f()) if what.startswith("a process") else timed(hand)
        o = (lambda f=other: f()) if what.startswith("a process") else timed(other)
        contenders += [Contender(f"{what}: /proc by hand", m, units),
                       Contender(f"{what}: psutil", o, units)]  # fmt: skip
    times = interleave(contenders, rounds=args.rounds)
    rows = [("what", "by hand (median, min–max)", "psutil", "psutil / by hand per round")]
    for what, *_ in pairs:
        hand_t, ps_t = times[f"{what}: /proc by hand"], times[f"{what}: psutil"]
        h, p = spread(hand_t), spread(ps_t)
        ratio = spread(per_round(ps_t, hand_t))
        rows.append((what, h.shown("{:.5f}") + " s", p.shown("{:.5f}") + " s",
                     ratio.shown() + "x"))  # fmt: skip
    note = f"{nproc} processes in /proc, {args.rounds} interleaved rounds"
    if args.markdown:
        print("| " + " | ".join(rows[0]) + " |")
        print("|" + "---|" * len(rows[0]))
        for r in rows[1:]:
            print("| " + " | ".join(r) + " |")
        print(f"\n{note}")
    else:
        width = max(len(r[0]) for r in rows)
        for r in rows:
            print(f"{r[0]:<{width}}  " + "  ".join(r[1:]))
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
