"""The node's own texts ``cgalloc doctor`` reads, decoded: /proc/swaps, the kernel release,
``systemctl --version``, the kernel command line, a kubelet boolean flag on its command line,
and the ordering settings of unit files. Pure: text in, values out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from cgalloc.inputs.kubeletunit import unit_assignments

# Go's strconv.ParseBool, as pflag reads a boolean flag's value
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def swap_devices(text: str) -> list[str]:
    """The swap areas in use, from /proc/swaps ("Filename Type Size Used Priority" header, one
    line per area), each as "name (type, size KiB)": what the kubelet reads to tell swap is on
    (pkg/kubelet/cm/container_manager_linux.go isSwapOnAccordingToProcSwaps)."""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            out.append(f"{fields[0]} ({fields[1]}, {fields[2]} KiB)")
    return out


_RELEASE = re.compile(r"([0-9]+)\.([0-9]+)")


def kernel_release(text: str) -> tuple[int, int] | None:
    """(major, minor) of /proc/sys/kernel/osrelease ("6.1.0-56-amd64"); None for none."""
    match = _RELEASE.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


_SYSTEMD = re.compile(r"systemd ([0-9]+)\b")


def systemd_version(text: str) -> int | None:
    """The version in ``systemctl --version``'s first line ("systemd 252 (252.39-1~deb12u2)")."""
    match = _SYSTEMD.match(text.strip())
    return int(match.group(1)) if match else None


def cmdline_value(text: str, key: str) -> str | None:
    """The value of ``key=...`` on the kernel command line (the last one wins), "" for a bare
    ``key``, None when absent."""
    found = None
    for word in text.split():
        name, eq, value = word.partition("=")
        if name == key:
            found = value if eq else ""
    return found


def bool_flag(argv: Sequence[str], name: str) -> bool | None:
    """A kubelet boolean flag's value on its command line as pflag reads it (bare ``--name``
    is true, ``--name=false``; the last use wins; ``_`` reads as ``-``); None when not given
    or not a boolean."""
    value = None
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        flag, eq, given = arg[2:].partition("=")
        if flag.replace("_", "-") != name:
            continue
        if not eq or given in _TRUE:
            value = True
        elif given in _FALSE:
            value = False
    return value


ORDERING = ("Before", "After", "Wants", "Requires")


def unit_dependencies(texts: Iterable[str]) -> dict[str, list[str]]:
    """The ordering and dependency settings of a unit (its fragment and drop-ins, in systemd's
    order): [Unit] Before=, After=, Wants=, Requires= and [Install] WantedBy=, each a list of
    unit names (space-separated values add up; an empty assignment empties the list)."""
    out: dict[str, list[str]] = {k: [] for k in (*ORDERING, "WantedBy")}
    for text in texts:
        for section, key, value in unit_assignments(text):
            if (section, key) in (("Install", "WantedBy"), *(("Unit", k) for k in ORDERING)):
                if value:
                    out[key] += value.split()
                else:
                    out[key].clear()
    return out
