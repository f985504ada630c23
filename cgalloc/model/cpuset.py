"""CPU sets: the kernel's CPU list format, the kubelet's parse of reservedSystemCPUs, and the
planned node's CPUs."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import CPU

CPUSET_FORM = "a CPU list such as 0-3,8"
# The kernel's largest NR_CPUS (x86 MAXSMP); a bound keeps "0-99999999999" from building a huge set.
MAX_CPU_ID = 8191


def parse_cpuset(text: str) -> frozenset[int]:
    """The kernel/kubelet CPU list format: "0-2,5" -> {0, 1, 2, 5}; "" -> empty.

    Raises ValueError naming the accepted form.
    """
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for item in text.split(","):
        first, sep, last = item.partition("-")
        # isascii: str.isdigit() also accepts digits such as "¹" that int() refuses
        if not (first.isascii() and first.isdigit()) or (
            sep and not (last.isascii() and last.isdigit())
        ):
            raise ValueError(f"{text!r} is not {CPUSET_FORM}")
        start, end = int(first), int(last) if sep else int(first)
        if end < start:
            raise ValueError(f"{text!r} has a descending range {item!r}; expected {CPUSET_FORM}")
        if end > MAX_CPU_ID:
            raise ValueError(
                f"{text!r} names CPU {end}, above the kernel's limit of {MAX_CPU_ID}; "
                f"expected {CPUSET_FORM}"
            )
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


def _atoi(text: str) -> int:
    """Go's strconv.Atoi: an optional sign and ASCII digits, nothing else (no spaces)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"strconv.Atoi: parsing {text!r}: invalid syntax")
    return int(text)


def parse_cpu_list(text: str) -> frozenset[int]:
    """k8s.io/utils/cpuset Parse, as the kubelet reads reservedSystemCPUs: items split on ","
    then on the first "-", each number read by strconv.Atoi, so "+1" is CPU 1 and " 1" is
    refused. Raises ValueError."""
    if text == "":
        return frozenset()
    cpus: set[int] = set()
    for item in text.split(","):
        first, sep, last = item.partition("-")
        start = _atoi(first)
        end = _atoi(last) if sep else start
        if start > end:
            raise ValueError(f"invalid range {item!r} ({start} > {end})")
        if end > MAX_CPU_ID:  # start >= 0: Atoi's sign can only be "+" after the split on "-"
            raise ValueError(f"{item!r} names CPU {end}, above the kernel's limit of {MAX_CPU_ID}")
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


def node_cpus(
    overrides: Mapping[str, Quantity], online: Callable[[], frozenset[int]]
) -> frozenset[int]:
    """The planned node's CPUs: 0..N-1 for a ``--capacity cpu=N`` override, else ``online()``
    (this host's: :func:`cgalloc.host.capacity.online_cpus`)."""
    if CPU in overrides:
        return frozenset(range(overrides[CPU].value()))
    return online()
