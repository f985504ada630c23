"""Interleaved rounds and the statistics the verdicts come from.

Every contender runs once per round, the order rotating from round to round (A B C, B C A,
C A B, ...), so load that comes and goes on a shared machine falls on all of them alike. A
claim "X is at most k times Y" is judged on the per-round ratios X_i / Y_i: their median, with
min and max shown, never on times taken at different moments.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Measure = Callable[[], float]  # one run; returns the seconds it took (its own clock or ours)

ROUNDS = int(os.environ.get("CGALLOC_BENCH_ROUNDS", "5"))
# Slow contenders (cgget, systemd-cgtop, the Python libraries) run in the first N rounds only;
# 0 leaves them out. The VM lanes set it low: under TCG they take minutes.
SLOW_ROUNDS = int(os.environ.get("CGALLOC_BENCH_SLOW_ROUNDS", "3"))


def timed(fn: Callable[[], object]) -> Measure:
    """A measure taking our own wall clock around ``fn``."""

    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


def process(argv: list[str], stdin: str | None = None, cwd: str | None = None,
            cpu: list | None = None, check: bool = True) -> Measure:  # fmt: skip
    """A measure: wall seconds of one process, its output thrown away; its CPU seconds (user +
    system, from wait4) appended to ``cpu`` when given. A non-zero exit raises (with the end
    of its stderr) unless ``check`` is false."""

    def run() -> float:
        start = time.perf_counter()
        with open(os.devnull, "wb") as out:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.PIPE, cwd=cwd
            )
            if stdin:
                proc.stdin.write(stdin.encode())
            proc.stdin.close()
            err = proc.stderr.read()
            proc.stderr.close()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - start
        if proc.returncode and check:
            tail = err.decode(errors="replace")[-400:]
            raise RuntimeError(f"{' '.join(argv[:3])} ... exited {proc.returncode}: {tail}")
        if cpu is not None:
            cpu.append(usage.ru_utime + usage.ru_stime)
        return elapsed

    return run


@dataclass
class Contender:
    name: str
    measure: Measure
    units: int  # files (or processes) one run covers, for the per-unit column
    slow: bool = False
    note: str = ""


def interleave(contenders: Sequence[Contender], rounds: int = ROUNDS) -> dict[str, list]:
    """Seconds per round of each contender (None where a slow one sat a round out).

    One warm-up round first (not kept) so no contender pays for cold caches alone.
    """
    times: dict[str, list] = {c.name: [] for c in contenders}
    order = list(contenders)
    failed: set[str] = set()
    for r in range(-1, rounds):
        for c in order:
            if c.slow and (r < 0 or r >= SLOW_ROUNDS):
                if r >= 0:
                    times[c.name].append(None)
                continue
            if c.name in failed:
                t = None
            else:
                try:
                    t = c.measure()
                except Exception as exc:  # a contender that breaks here is shown, not fatal
                    failed.add(c.name)
                    c.note = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
                    t = None
            if r >= 0:
                times[c.name].append(t)
        order = order[1:] + order[:1]
    return times


@dataclass(frozen=True)
class Spread:
    median: float
    lo: float
    hi: float
    n: int

    def shown(self, fmt: str = "{:.2f}") -> str:
        return f"{fmt.format(self.median)} ({fmt.format(self.lo)}–{fmt.format(self.hi)})"


def spread(values: Sequence[float | None]) -> Spread | None:
    kept = [v for v in values if v is not None]
    if not kept:
        return None
    return Spread(statistics.median(kept), min(kept), max(kept), len(kept))


def per_round(top: Sequence[float | None], bottom: Sequence[float | None]) -> list[float | None]:
    """top_i / bottom_i for each round where both ran."""
    return [a / b if a is not None and b else None for a, b in zip(top, bottom, strict=True)]


def idle_cores(seconds: float = 1.0) -> float:
    """CPUs idle over ``seconds`` (from /proc/stat), to tell whether a parallel claim can show."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields[:8])  # idle + iowait, all but guest time

    idle0, total0 = sample()
    time.sleep(seconds)
    idle1, total1 = sample()
    if total1 == total0:
        return float(os.cpu_count() or 1)
    return (idle1 - idle0) / (total1 - total0) * (os.cpu_count() or 1)
