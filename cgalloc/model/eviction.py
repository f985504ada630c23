"""Hard-eviction thresholds: the kubelet's defaults and what they reserve.

Follows the kubelet's ``pkg/kubelet/eviction/api/types.go`` (``GetThresholdQuantity``),
including its float32 percentages. Reading a threshold's text is
:mod:`cgalloc.inputs.thresholds`' job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cgalloc.model.quantity import BINARY_SI, Quantity
from cgalloc.model.resources import EPHEMERAL_STORAGE, MEMORY, ResourceList
from cgalloc.model.versions import has

KNOWN_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
    "allocatableMemory.available",
)

# The kubelet's Linux default of the newest minor (pkg/kubelet/eviction/defaults_linux.go
# DefaultEvictionHard); imagefs.inodesFree is there from 1.30 (kubernetes#121834):
# default_eviction_hard gives each minor's.
DEFAULT_EVICTION_HARD: dict[str, str] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}


def default_eviction_hard(version: str) -> dict[str, str]:
    """DefaultEvictionHard of kubelet ``version``: before 1.30 without imagefs.inodesFree
    (v1.20.2 pkg/kubelet/apis/config/v1beta1/defaults_linux.go)."""
    if has(version, "eviction-imagefs-inodes"):
        return dict(DEFAULT_EVICTION_HARD)
    return {k: v for k, v in DEFAULT_EVICTION_HARD.items() if k != "imagefs.inodesFree"}


# hardEvictionReservation: only these signals lower Allocatable, each from one resource.
RESERVING_SIGNALS: dict[str, str] = {
    "memory.available": MEMORY,
    "nodefs.available": EPHEMERAL_STORAGE,
}


class Threshold(NamedTuple):  # a NamedTuple: a dataclass costs ~1.5 ms per process to build
    """One hard-eviction threshold ``signal<value``: an absolute quantity or a percentage."""

    signal: str
    value: str  # as written, e.g. "100Mi" or "10%"
    quantity: Quantity | None = None
    percentage: float | None = None  # float32 fraction (10% -> 0.1f), as the kubelet holds it

    def __str__(self) -> str:
        return f"{self.signal}<{self.value}"

    def reserve(self, capacity: Quantity) -> Quantity:
        """``GetThresholdQuantity``: the absolute value, or the percentage of ``capacity``."""
        if self.quantity is not None:
            return self.quantity
        # The kubelet multiplies in float64 with a float32 fraction and truncates to int64, so
        # 10% of 8Gi is 858993472, not 858993459; reproduce it to the byte.
        return Quantity.from_int(int(float(capacity.value()) * float(self.percentage)), BINARY_SI)


def reservation(thresholds: Mapping[str, Threshold], capacity: ResourceList) -> ResourceList:
    """``hardEvictionReservation``: what the thresholds take from each resource in capacity."""
    reserved: ResourceList = {}
    for signal, resource in RESERVING_SIGNALS.items():
        threshold = thresholds.get(signal)
        if threshold is not None and resource in capacity:
            reserved[resource] = threshold.reserve(capacity[resource])
    return reserved
