"""Kubernetes resource names and ``ResourceList`` arithmetic (``dict[str, Quantity]``)."""

from __future__ import annotations

from collections.abc import Mapping

from cgalloc.model.quantity import NANO, Quantity, QuantityError

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PID = "pid"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
# the pod QoS classes (v1.PodQOSClass), which name the tiers below kubepods
GUARANTEED, BURSTABLE, BESTEFFORT = "Guaranteed", "Burstable", "BestEffort"

ResourceList = dict[str, Quantity]


def is_hugepages(name: str) -> bool:
    """``v1helper.IsHugePageResourceName``: the name starts with ``hugepages-``."""
    return name.startswith(HUGEPAGES_PREFIX)


def hugepage_size_bytes(name: str) -> int:
    """The page size of ``hugepages-<size>`` in bytes, e.g. ``hugepages-2Mi`` -> 2097152."""
    problem = ValueError(
        f"{name!r} is not a hugepages resource name; expected hugepages-<size> where <size> is"
        " a positive whole number of bytes written as a quantity, such as hugepages-2Mi or"
        " hugepages-1Gi"
    )
    if not is_hugepages(name):
        raise problem
    try:
        size = Quantity.parse(name[len(HUGEPAGES_PREFIX) :])
    except QuantityError:
        raise problem from None
    if size.nanos <= 0 or size.nanos % NANO:
        raise problem
    return size.value()


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """Every key of either list; keys in both are summed (quota ``Add``)."""
    result = dict(a)
    for name, quantity in b.items():
        result[name] = result[name] + quantity if name in result else quantity
    return result


def subtract_clamped(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """For each key of ``a``: ``max(0, a - b)`` in ``a``'s format (absent in ``b`` = 0)."""
    result: ResourceList = {}
    for name, quantity in a.items():
        other = b.get(name)
        nanos = quantity.nanos - other.nanos if other is not None else quantity.nanos
        result[name] = Quantity(max(0, nanos), quantity.fmt)
    return result


def sorted_items(rl: Mapping[str, Quantity]) -> list[tuple[str, Quantity]]:
    """Items in kubectl's order (``SortableResourceNames``: plain string order)."""
    return sorted(rl.items(), key=lambda item: item[0])


def format_list(rl: Mapping[str, Quantity]) -> dict[str, str]:
    """Canonical strings, in :func:`sorted_items` order."""
    return {name: str(quantity) for name, quantity in sorted_items(rl)}
