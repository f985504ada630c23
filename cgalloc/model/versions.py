"""The kubelet releases cgalloc matches, and the behaviours that depend on the release.

cgalloc matches the newest stable kubelet minor by default. Upstream's CHANGELOG-1.38.md opens
with "Changelog since v1.37.0", so 1.37 is released; Kubernetes maintains the three newest
minors, so 1.35, 1.36 and 1.37 are in support. ``--kubelet-version`` picks one of them.

Each behaviour below records the first minor that has it (from the upstream pull request that
introduced it); a behaviour applies when the matched minor is at or above that release. Within
the supported minors the node-level numbers cgalloc computes are the same but for the feature
gates' defaults (MemoryQoS, on from 1.37, writes memory.min on enforced reserved cgroups), which
read ``NodeConfig.kubelet_version``; the table keeps the boundaries so a check (``has``) names
the behaviour rather than a version number.
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_KUBELET_VERSION = "1.37"
SUPPORTED_VERSIONS = ("1.35", "1.36", "1.37")
VERSION_FORM = "a supported kubelet minor: " + ", ".join(SUPPORTED_VERSIONS)


class Behaviour(NamedTuple):
    """A kubelet behaviour cgalloc models that started in release ``since``."""

    name: str
    since: str
    what: str


BEHAVIOURS = (
    Behaviour(
        "kubepods-cpuset",
        "1.31",
        "with the none CPU manager policy, kubepods and the enforced reserved cgroups get a"
        " cpuset of all CPUs (kubernetes#125923, getCgroupConfig)",
    ),
    Behaviour(
        "eviction-imagefs-inodes",
        "1.29",
        "the default hard-eviction set includes imagefs.inodesFree<5% (kubernetes#121834)",
    ),
)


def minor_tuple(version: str) -> tuple[int, int]:
    """ "1.37" -> (1, 37); ValueError for anything else."""
    major, sep, minor = version.partition(".")
    if not sep or not major.isdigit() or not minor.isdigit() or not major.isascii():
        raise ValueError(f"{version!r} is not a MAJOR.MINOR version")
    return int(major), int(minor)


# k8s.io/apimachinery/pkg/util/version ParseGeneric (versionMatchRE, RE2's \s): leading
# whitespace, an optional "v", two or more dot-separated decimal components, then anything but
# a newline, which is ignored; so `kubelet --version`'s "v1.37.2", EKS's "v1.37.2-eks-4f2a1b"
# and k3s's "v1.37.2+k3s1" read as 1.37.
# (the lookahead keeps the components maximal, as RE2's greedy match takes them: without it a
# failing match tried every split against [^\n]*, quadratic in the length)
_GENERIC = re.compile(r"[\t\n\f\r ]*v?([0-9]+(?:\.[0-9]+)+)(?!\.?[0-9])[^\n]*")


def normalise(text: str) -> str | None:
    """A --kubelet-version value as ParseGeneric reads it ("1.37", "v1.37.2-eks-1"), as its
    supported minor; None when it is no version or not a supported minor."""
    match = _GENERIC.fullmatch(text)
    if match is None:
        return None
    major, minor = match.group(1).split(".")[:2]
    if major.startswith("0") and major != "0":  # "illegal zero-prefixed version component"
        return None
    version = f"{int(major)}.{int(minor)}"  # later components may be zero-prefixed
    return version if version in SUPPORTED_VERSIONS else None


def help_text() -> str:
    """One paragraph for --help: the default and the behaviours that depend on the version."""
    items = "; ".join(f"{b.what} (since {b.since})" for b in BEHAVIOURS)
    return (
        f"Kubelet minor to match: {', '.join(SUPPORTED_VERSIONS)} (default"
        f" {DEFAULT_KUBELET_VERSION}, the newest stable), given as `kubelet --version`"
        " prints it or shorter (v1.37.2, v1.37.2-eks-..., 1.37). Behaviours that changed in earlier"
        f" releases and hold for every supported minor: {items}. The feature-gate defaults"
        " follow the minor given (MemoryQoS is on from 1.37: memory.min on enforced reserved"
        " cgroups, zeros on kubepods, on cgroup v2)."
    )
