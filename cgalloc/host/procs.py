"""Running processes by name, and the cgroups they are in (from ``/proc``)."""

from __future__ import annotations

import os
from dataclasses import dataclass

PROC = "/proc"


@dataclass(frozen=True)
class Proc:
    pid: int
    name: str  # the name it matched (comm or executable basename)
    cgroups: dict[str, str]  # v1 controller (or "" for the v2 line) -> cgroup path ("/a/b")


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` → {controller: path}; the v2 line ``0::/x`` gives key ``""``.

    Named v1 hierarchies (``name=systemd``) are keyed by the name without ``name=``.
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if not ctrls:
            out[""] = path
            continue
        for ctrl in ctrls.split(","):
            out[ctrl.removeprefix("name=")] = path
    return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:  # the process exited, or is not ours to read
        return None


def find(names: list[str], proc: str = PROC) -> list[Proc]:
    """Processes whose ``comm`` or executable basename is one of ``names``, sorted by pid.

    Kernel threads (no executable) are never matched: they cannot change cgroup.
    """
    wanted = set(names)
    found: list[Proc] = []
    me = os.getpid()
    for entry in os.listdir(proc):
        if not entry.isdigit() or int(entry) == me:
            continue
        base = os.path.join(proc, entry)
        try:
            exe = os.path.basename(os.readlink(os.path.join(base, "exe")))
        except OSError:
            continue  # kernel thread, exited, or not permitted
        comm = (_read(os.path.join(base, "comm")) or "").rstrip("\n")
        # A replaced binary reads "<path> (deleted)"; the name is still the basename.
        exe = exe.removesuffix(" (deleted)")
        match = comm if comm in wanted else exe if exe in wanted else None
        if match is None:
            continue
        text = _read(os.path.join(base, "cgroup"))
        if text is None:
            continue
        found.append(Proc(int(entry), match, parse_proc_cgroup(text)))
    return sorted(found, key=lambda p: p.pid)


def in_cgroups(paths: set[str], key: str, proc: str = PROC) -> list[tuple[int, str, str, int]]:
    """(pid, comm, cgroup, oom_score_adj) of the processes whose cgroup under ``key`` (a v1
    controller, or "" for the v2 line) is one of ``paths`` ("/a/b") or below one, sorted by pid
    (the kernel's threads stay in the root cgroup, so none is among them)."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        base = os.path.join(proc, entry)
        cgroup = parse_proc_cgroup(_read(os.path.join(base, "cgroup")) or "").get(key)
        if cgroup is None or not any(cgroup == p or cgroup.startswith(p + "/") for p in paths):
            continue
        adj = (_read(os.path.join(base, "oom_score_adj")) or "").strip()
        if not adj.lstrip("-").isdigit():
            continue  # exited meanwhile
        comm = (_read(os.path.join(base, "comm")) or "").rstrip("\n")
        found.append((int(entry), comm, cgroup, int(adj)))
    return sorted(found)
