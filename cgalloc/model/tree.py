"""Cgroup names for the cgroupfs and systemd drivers, and the desired node tree.

Naming follows the kubelet's ``CgroupName`` (``pkg/kubelet/cm/cgroup_manager_linux.go``) and
``ExpandSlice`` (opencontainers/cgroups). A reserved cgroup is the cgroup the kubelet will look
for (``kubelet_reserved_path``): with the systemd driver it keeps only the last component, so
``/kube-reserved.slice`` is ``/kube.slice/kube-reserved.slice`` and
``/system.slice/kubelet.service`` is ``/kubelet.service.slice`` (kubernetes#110288). cgalloc
creates and limits that cgroup, and for a unit path also limits the unit's real cgroup
(``reserved_cgroup_path``), which is where the daemons run. Pure: no I/O.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.errors import InputError
from cgalloc.model import features
from cgalloc.model.kernel_ranges import name_refusal, value_refusal
from cgalloc.model.resources import BESTEFFORT, BURSTABLE, GUARANTEED, MEMORY, add, subtract_clamped
from cgalloc.model.versions import minor_tuple

# The planning functions below import limits themselves: stats and
# kubelet-config use only the naming half of this module and should not pay for those.
if TYPE_CHECKING:
    from cgalloc.model.allocatable import Allocatable
    from cgalloc.model.hierarchy import Hierarchy
    from cgalloc.model.limits import Limits
    from cgalloc.model.nodeconfig import NodeConfig
    from cgalloc.model.podresources import PodCgroup

SLICE_SUFFIX = ".slice"
# systemd unit types that own a cgroup; a reserved cgroup may name one of these directly.
UNIT_SUFFIXES = (".service", ".scope", ".socket", ".mount", ".swap")
KUBEPODS = "kubepods"
POD_PREFIX = "pod"
QOS_CLASSES = ("guaranteed", "burstable", "besteffort")
DRIVERS = ("cgroupfs", "systemd")
# systemd's slice_name_is_valid (src/basic/unit-name.c): a plain unit name, so VALID_CHARS
# (no '@') and shorter than UNIT_NAME_MAX. The systemd driver asks systemd for every slice it
# names, so a name outside these fails there, midway, instead of here.
_UNIT_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:-_.\\")
UNIT_NAME_MAX = 256


class CgroupNameError(ValueError):
    """A cgroup name or path that a driver cannot represent; the message is the reason."""


@dataclass(frozen=True)
class CgroupName:
    """A driver-neutral cgroup name: its parts from the root, e.g. ("kubepods", "burstable")."""

    parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for part in self.parts:
            if part in ("", ".", ".."):
                raise CgroupNameError(f"path component {part!r} is empty or relative")
            if "/" in part:
                raise CgroupNameError(f"path component {part!r} contains '/'")

    def child(self, *parts: str) -> CgroupName:
        """NewCgroupName: the name extended by ``parts``, which may not hold '/' or '_'."""
        for part in parts:
            if "_" in part:
                raise CgroupNameError(
                    f"component {part!r} contains '_', which the systemd driver reserves "
                    "as the escape for '-'"
                )
        return CgroupName(self.parts + tuple(parts))


ROOT = CgroupName()


def to_cgroupfs(name: CgroupName) -> str:
    """ToCgroupfs: "/" + the parts joined with "/"."""
    return "/" + "/".join(name.parts)


def to_systemd(name: CgroupName) -> str:
    """ToSystemd: parts escaped ('-' → '_'), joined with '-', '.slice' appended, expanded."""
    if not name.parts:
        return "/"
    for part in name.parts:
        if "_" in part:
            raise CgroupNameError(
                f"component {part!r} contains '_', which the systemd driver cannot represent "
                "('_' is its escape for '-')"
            )
    return expand_slice("-".join(p.replace("-", "_") for p in name.parts) + SLICE_SUFFIX)


def unit_name_problem(name: str) -> str | None:
    """Why systemd refuses ``name`` as a slice (a plain unit name: no '@'), or None."""
    bad = next((c for c in name if c not in _UNIT_CHARS), None)
    if bad is not None:
        return (
            f"holds {bad!r}, which systemd refuses in a unit name (it takes letters, digits"
            " and : - _ . \\)"
        )
    if len(name) >= UNIT_NAME_MAX:
        return f"has {len(name)} characters; a systemd unit name has at most {UNIT_NAME_MAX - 1}"
    return None


def expand_slice(slice_name: str) -> str:
    """ExpandSlice: "a-b-c.slice" → "/a.slice/a-b.slice/a-b-c.slice"; "-.slice" → "/"."""
    if not slice_name.endswith(SLICE_SUFFIX):
        raise CgroupNameError(f"invalid slice name {slice_name!r}: it must end in '.slice'")
    if slice_name == SLICE_SUFFIX:
        raise CgroupNameError("invalid slice name '.slice': it has no name before '.slice'")
    if "/" in slice_name:
        raise CgroupNameError(f"invalid slice name {slice_name!r}: it must not contain '/'")
    problem = unit_name_problem(slice_name)
    if problem:
        raise CgroupNameError(f"invalid slice name {slice_name!r}: it {problem}")
    stem = slice_name[: -len(SLICE_SUFFIX)]
    if stem == "-":
        return "/"
    path, prefix = "", ""
    for component in stem.split("-"):
        if not component:
            raise CgroupNameError(
                f"invalid slice name {slice_name!r}: empty component between '-' separators"
            )
        path += "/" + prefix + component + SLICE_SUFFIX
        prefix += component + "-"
    return path


def parse_cgroupfs(path: str) -> CgroupName:
    """ParseCgroupfsToCgroupName: "/kubepods/burstable" → ("kubepods", "burstable")."""
    stripped = path[1:] if path.startswith("/") else path
    if not stripped:
        return ROOT
    return CgroupName(tuple(stripped.split("/")))


def parse_systemd(name: str) -> CgroupName:
    """ParseSystemdToCgroupName, but only for names the systemd driver would map back to.

    The kubelet keeps only the base name, so a path whose parents do not match its slice name
    (``/a.slice/b.slice``) or a unit (``kubelet.service``) would silently name another cgroup;
    both are rejected here with the path the driver would really use.
    """
    if name in ("/", "-.slice"):
        return ROOT
    base = posixpath.basename(name.rstrip("/")) if "/" in name else name
    stem = base.removesuffix(SLICE_SUFFIX)
    if not stem:
        raise CgroupNameError(f"{name!r} has an empty slice name")
    parts = []
    for component in stem.split("-"):
        if not component:
            raise CgroupNameError(
                f"{name!r}: slice name {base!r} has an empty component between '-' separators"
            )
        parts.append(component.replace("_", "-"))
    result = CgroupName(tuple(parts))
    if "/" in name:
        expanded = to_systemd(result)
        if name.rstrip("/") != expanded:
            raise CgroupNameError(
                f"{name!r} is not a systemd slice path: the systemd driver would use {expanded}"
            )
    return result


def _unit_path(value: str) -> str | None:
    """The cgroup path of a systemd unit path such as /system.slice/kubelet.service, else None."""
    parent, unit = posixpath.split(value.rstrip("/"))
    if not unit.endswith(UNIT_SUFFIXES):
        return None
    if not parent.startswith("/") or parent == "/":
        raise CgroupNameError(
            f"{value!r} names a unit without its slice; give its cgroup path, "
            f"e.g. /system.slice/{unit}"
        )
    slice_name = posixpath.basename(parent)
    try:
        expanded = expand_slice(slice_name)
    except CgroupNameError as err:
        raise CgroupNameError(f"{value!r}: the unit's parent is not a slice ({err})") from None
    if parent != expanded:
        raise CgroupNameError(
            f"{value!r}: the unit's parent {parent} is not where systemd puts {slice_name} "
            f"({expanded})"
        )
    return f"{parent}/{unit}"


def kubelet_systemd_name(value: str) -> CgroupName:
    """ParseSystemdToCgroupName as the kubelet does it: only ``path.Base`` of the value counts,
    ".slice" is trimmed, "-" splits the parts and "_" is unescaped to "-"."""
    trimmed = value.rstrip("/")
    if not trimmed:
        return ROOT
    base = posixpath.basename(trimmed)
    stem = base.removesuffix(SLICE_SUFFIX)
    parts = tuple(p.replace("_", "-") for p in stem.split("-"))
    if parts == ("", ""):  # "-.slice"
        return ROOT
    if not stem:
        raise CgroupNameError(
            "slice name '.slice' has no name before '.slice', which ExpandSlice refuses"
        )
    if "" in parts:
        raise CgroupNameError(
            f"slice name {stem + SLICE_SUFFIX!r} has an empty component between '-' separators,"
            " which ExpandSlice refuses"
        )
    return CgroupName(parts)


def kubelet_cgroupfs_path(value: str) -> str:
    """ToCgroupfs(ParseCgroupfsToCgroupName(value)): "/" + path.Join of the parts, so a
    relative name or a trailing "/" names the same cgroup as its absolute, clean form."""
    parts = [p for p in value.split("/") if p and p != "."]
    if ".." in parts:
        raise CgroupNameError(f"{value!r} has a '..' component")
    return "/" + "/".join(parts)


def clean_cgroupfs_path(value: str) -> str:
    """An absolute cgroup path as the kubelet's system containers (--kubelet-cgroups,
    --runtime-cgroups, --system-cgroups) reach the kernel: opencontainers/cgroups
    ``internal/path.Inner`` cleans the name with ``filepath.Clean``, so "/a//b/", "/a/./b"
    and "/../a/b" all name /a/b."""
    return "/" + posixpath.normpath("/" + value).lstrip("/")


def kubelet_reserved_path(value: str, driver: str) -> str:
    """The cgroup the kubelet enforces for a --kube-reserved-cgroup / --system-reserved-cgroup
    value: ``cgroupManager.CgroupName(value)`` under ``driver``, as an absolute path."""
    if not value:
        raise CgroupNameError("the value is empty")
    if driver == "systemd":
        path = to_systemd(kubelet_systemd_name(value))
    else:
        path = kubelet_cgroupfs_path(value)
    if path == "/":
        raise CgroupNameError("the root cgroup cannot hold a reservation")
    return path


def reserved_cgroup_path(value: str, driver: str) -> str:
    """The cgroup the reserved daemons run in: a systemd unit path such as
    ``/system.slice/kubelet.service`` is that unit's real cgroup; anything else is the
    kubelet's path (:func:`kubelet_reserved_path`)."""
    if driver == "systemd" and "/" in value.rstrip("/"):
        try:
            unit = _unit_path(value)
        except CgroupNameError:
            unit = None
        if unit is not None:
            return unit
    return kubelet_reserved_path(value, driver)


def reserved_mapping_note(field: str, value: str, driver: str) -> str | None:
    """One warning line when the kubelet's cgroup for ``value`` is not the path written."""
    try:
        kubelet = kubelet_reserved_path(value, driver)
        real = reserved_cgroup_path(value, driver)
    except CgroupNameError:
        return None
    if value.rstrip("/") in (kubelet, kubelet.lstrip("/")):
        return None
    note = (
        f"{field} {value}: the kubelet's {driver} driver looks for {kubelet} (it keeps only the"
        " last path component and nests a slice by the dashes in its name, kubernetes#110288);"
        f" cgalloc creates and limits {kubelet}"
    )
    if real != kubelet:
        note += f" and also limits the unit's real cgroup {real}, where its processes run"
    return note + "."


def kubepods_name(cgroup_root: str, driver: str) -> CgroupName:
    """NewCgroupName(ParseCgroupfsToCgroupName(cgroupRoot), "kubepods")."""
    return root_name(cgroup_root, driver).child(KUBEPODS)


def root_name(cgroup_root: str, driver: str) -> CgroupName:
    """ParseCgroupfsToCgroupName(cgroupRoot), checked for ``driver``.

    cgroupfs joins the parts with path.Join, so "kubelet" and "/a/" are "/kubelet" and "/a";
    systemd turns an empty part into an empty slice component, which ExpandSlice refuses.
    """
    if driver != "systemd":
        return parse_cgroupfs(kubelet_cgroupfs_path(cgroup_root or "/"))
    root = parse_cgroupfs(cgroup_root or "/")
    if driver == "systemd":
        for part in root.parts:
            if part.endswith(SLICE_SUFFIX):
                bare = "/" + "/".join(p.removesuffix(SLICE_SUFFIX) for p in root.parts)
                raise CgroupNameError(
                    f"with the systemd driver the cgroup root is a cgroupfs-style name: "
                    f"{bare} means {to_systemd(parse_cgroupfs(bare))}, while "
                    f"{cgroup_root} would mean {to_systemd(root)}"
                )
        to_systemd(root)  # rejects '_' early, before any child is named
    return root


def driver_path(name: CgroupName, driver: str) -> str:
    """The absolute cgroup path of ``name`` under ``driver`` (the kubelet's ``Name()``)."""
    return to_systemd(name) if driver == "systemd" else to_cgroupfs(name)


RESERVED_ROLES = ("kube-reserved", "system-reserved")
ROOT_FIELD = "cgroupRoot (--cgroup-root)"
# The config field (and flag) each role's cgroup comes from, as every refusal names it.
CGROUP_FIELDS = {
    "kubepods": ROOT_FIELD,
    "qos": ROOT_FIELD,
    "kube-reserved": "kubeReservedCgroup (--kube-reserved-cgroup)",
    "system-reserved": "systemReservedCgroup (--system-reserved-cgroup)",
    "pod": "--pods",
}


def _within(path: str, ancestor: str) -> bool:
    """Whether ``path`` is below ``ancestor`` (not equal)."""
    return path.startswith(ancestor + "/")


def placement_problem(role: str, path: str, kubepods: str | None) -> str | None:
    """Why setup refuses the reserved cgroup ``path`` (no leading '/') where it is against
    kubepods: at or inside it its limits would be a pod's, above it they would cap every pod
    as well as the daemons. None for other roles and places."""
    if role not in RESERVED_ROLES or kubepods is None:
        return None
    fld = CGROUP_FIELDS[role]
    if path == kubepods or _within(path, kubepods):
        return (
            f"{fld} /{path} must not be kubepods (/{kubepods}) or inside it; "
            "give a cgroup outside the pods' tree, e.g. /system.slice."
        )
    if _within(kubepods, path):
        return (
            f"{fld} /{path} must not be an ancestor of kubepods (/{kubepods}); "
            "give a cgroup beside the pods' tree, e.g. /system.slice."
        )
    return None


def overlapping_reserved(paths: Mapping[str, str]) -> list[str]:
    """kube-reserved and system-reserved (role → path) must be two separate subtrees: the same
    cgroup would get two sets of limits (flip-flopping on every run), one inside the other
    would cap it."""
    kube, system = paths.get("kube-reserved"), paths.get("system-reserved")
    if kube is None or system is None:
        return []
    k, s = CGROUP_FIELDS["kube-reserved"], CGROUP_FIELDS["system-reserved"]
    if kube == system:
        relation = "the same cgroup as"
    elif _within(kube, system):
        relation = "inside"
    elif _within(system, kube):
        relation = "an ancestor of"
    else:
        return []
    return [
        f"{k} /{kube} must not be {relation} {s} /{system}; give each reservation its own "
        "cgroup, e.g. /kube.slice and /system.slice."
    ]


def placement_problems(cgroups: Iterable[tuple[str, str]]) -> list[str]:
    """setup's placement refusals for (role, path) pairs, paths without a leading '/'."""
    pairs = list(cgroups)
    kubepods = next((p for r, p in pairs if r == "kubepods"), None)
    out = [p for r, path in pairs if (p := placement_problem(r, path, kubepods))]
    return out + overlapping_reserved({r: p for r, p in pairs if r in RESERVED_ROLES})


def reserved_paths(cfg: NodeConfig, role: str) -> tuple[str, str]:
    """(the kubelet's path, the cgroup the daemons run in) of ``role``'s reserved-cgroup
    setting; they differ for a systemd unit path (kubernetes#110288). InputError naming it."""
    value = cfg.kube_reserved_cgroup if role == "kube-reserved" else cfg.system_reserved_cgroup
    field, driver = CGROUP_FIELDS[role], cfg.cgroup_driver
    return reserved_path(value, field, driver, kubelets=True), reserved_path(value, field, driver)


def role_paths(cfg: NodeConfig) -> list[tuple[str, str]]:
    """(role, path without the leading '/') of kubepods and each enforced reserved cgroup (the
    kubelet's path and, for a systemd unit path, the unit's real cgroup too)."""
    kubepods = kubepods_path(cfg)
    pairs = [("kubepods", kubepods.lstrip("/"))] if kubepods else []
    for role, value in (("kube-reserved", cfg.kube_reserved_cgroup),
                        ("system-reserved", cfg.system_reserved_cgroup)):  # fmt: skip
        if value and cfg.enforces(role):
            pairs += [(role, p.lstrip("/")) for p in dict.fromkeys(reserved_paths(cfg, role))]
    return pairs


def setup_refusals(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """setup's refusals of these (role, path) cgroups that the kubelet's checks pass, as the
    warnings of the commands that write nothing: where the reserved cgroups are (in, above or
    overlapping kubepods or each other), and names the kernel cannot hold (once per field, as
    setup says them; with no mount known, a path is measured from '/', so only what setup
    surely refuses is named)."""
    pairs = list(pairs)
    out = [f"setup refuses this placement: {p}" for p in placement_problems(pairs)]
    named = set()
    for role, path in pairs:
        field = CGROUP_FIELDS[role]
        refusal = name_refusal(field, path)
        if refusal and field not in named:
            out.append(f"setup refuses this cgroup: {refusal}")
            named.add(field)
    return out


# The cgroup v1 controllers whose files show's figures are (cpu.shares, quota and period,
# memory in bytes).
_V1 = ("cpu", "cpuset", "memory", "pids", "hugetlb")


def value_refusals(
    cfg: NodeConfig, alloc: Allocatable, pods: Sequence[PodCgroup], cpus: frozenset[int]
) -> list[str]:
    """setup's refusals of the values this node's tree would hold (kubepods, QoS tiers, pods,
    reserved cgroups) that the kernel would refuse or change, as the warnings of show: measured
    as cgroup v1 files, since show reads no cgroup (the ranges behind v2's files are the same).
    """
    from cgalloc.model.hierarchy import Hierarchy, limit_files

    v1 = Hierarchy("v1", "/", {c: f"/{c}" for c in _V1}, None, frozenset(_V1))
    found = (
        value_refusal(d.role, d.path, file, value)
        for d in desired_tree(cfg, alloc, v1, pods, cpus)
        for _c, file, value in limit_files(v1, d.limits)
    )
    # in setup's order (plan.build sorts its refusals), so the two lists read alike
    return [f"setup refuses this value: {r}" for r in sorted(set(filter(None, found)))]


def kubepods_cgroup(cfg: NodeConfig) -> CgroupName:
    """kubepods' name below ``cfg.cgroup_root``; InputError naming cgroupRoot if the driver
    cannot represent it."""
    try:
        name = kubepods_name(cfg.cgroup_root, cfg.cgroup_driver)
        # systemd expands every name derived from the root, and its length is bounded: the
        # longest one without a pod (the besteffort tier's) is refused here, as the root's fault
        driver_path(name.child("besteffort"), cfg.cgroup_driver)
        return name
    except CgroupNameError as err:
        raise InputError(
            f"{ROOT_FIELD} {cfg.cgroup_root!r}: {err}; accepted: an absolute"
            " cgroupfs-style name such as / or /kubelet."
        ) from None


def kubepods_path(cfg: NodeConfig) -> str | None:
    """The absolute path of the cgroup holding the pods under ``cfg``'s driver: kubepods, or
    with cgroupsPerQOS false the cgroup root itself; None when that is the root cgroup."""
    name = node_allocatable_cgroup(cfg)
    return None if name is None else driver_path(name, cfg.cgroup_driver)


def node_allocatable_cgroup(cfg: NodeConfig) -> CgroupName | None:
    """The cgroup the kubelet keeps Node Allocatable limits on (containerManagerImpl.cgroupRoot).

    With cgroupsPerQOS false it is the cgroup root itself, which enforceNodeAllocatableCgroups
    still updates with the full capacity when it is not the root cgroup.
    """
    if cfg.cgroups_per_qos:
        return kubepods_cgroup(cfg)
    try:
        root = root_name(cfg.cgroup_root, cfg.cgroup_driver)
    except CgroupNameError as err:
        raise InputError(
            f"{ROOT_FIELD} {cfg.cgroup_root!r}: {err}; accepted: an absolute"
            " cgroupfs-style name such as / or /kubelet."
        ) from None
    return root if root.parts else None


def reserved_path(value: str, field: str, driver: str, kubelets: bool = False) -> str:
    """``reserved_cgroup_path`` (or with ``kubelets`` the kubelet's path) of a reserved-cgroup
    setting; InputError naming ``field``."""
    try:
        return (kubelet_reserved_path if kubelets else reserved_cgroup_path)(value, driver)
    except CgroupNameError as err:
        raise InputError(
            f"{field} {value!r}: {err}; accepted: an absolute cgroup path"
            + (", a slice name or a unit's cgroup path." if driver == "systemd" else ".")
        ) from None


def naming_notes(cfg: NodeConfig) -> list[str]:
    """Warnings for reserved cgroups whose kubelet name differs from the value given."""
    notes = []
    for role, value in (
        ("system-reserved", cfg.system_reserved_cgroup),
        ("kube-reserved", cfg.kube_reserved_cgroup),
    ):
        enforced = cfg.enforces(role)
        note = reserved_mapping_note(CGROUP_FIELDS[role], value, cfg.cgroup_driver)
        if enforced and note:
            notes.append(note)
    return notes


class DesiredCgroup(NamedTuple):
    """One cgroup cgalloc wants: path below the cgroupfs root (no leading '/'), role, limits."""

    path: str
    role: str  # "kubepods" | "qos" | "pod" | "kube-reserved" | "system-reserved"
    limits: Limits


def pod_limits(pod: PodCgroup, supported_sizes: Iterable[int]) -> Limits:
    """The pod cgroup's limits with ``maybeSetHugetlb``'s rule: every supported page size gets a
    limit, 0 for the sizes the pod did not request; requested sizes the host lacks are skipped."""
    sizes = sorted(set(supported_sizes))
    requested = dict(pod.limits.hugetlb)
    return pod.limits._replace(hugetlb=tuple((size, requested.get(size, 0)) for size in sizes))


def _tier_memory(pods: Sequence[PodCgroup], qos: str) -> int:
    """getQoSMemoryRequests: Σ the memory requests of one class's pods."""
    return sum(p.memory_request for p in pods if p.qos == qos)


def qos_memory_limits(
    cfg: NodeConfig, alloc: Allocatable, pods: Sequence[PodCgroup]
) -> tuple[int, int] | None:
    """The QoS-reserved memory limits (burstable, besteffort), or None when not configured.

    Only with the QOSReserved gate, as UpdateCgroups applies them. Base is
    GetNodeAllocatableAbsolute()[memory]: capacity − system − kube, no eviction term.
    """
    if not features.enabled(cfg, "QOSReserved"):
        return None
    percent = cfg.qos_reserved.get(MEMORY)
    reserved = add(cfg.system_reserved, cfg.kube_reserved)
    absolute = subtract_clamped(alloc.capacity, reserved).get(MEMORY)
    if percent is None or not absolute:  # 0% still sets both tiers' limit: allocatable
        return None
    base = absolute.value()
    guaranteed = _tier_memory(pods, GUARANTEED)
    burstable_req = _tier_memory(pods, BURSTABLE)
    burstable = base - guaranteed * percent // 100
    return burstable, burstable - burstable_req * percent // 100


def _supported(limits: Limits, controllers: frozenset[str]) -> Limits:
    # Like the kubelet, hugetlb and cpuset limits are skipped when the controller is not there.
    if "hugetlb" not in controllers:
        limits = limits._replace(hugetlb=())
    if "cpuset" not in controllers:
        limits = limits._replace(cpuset_cpus=None, cpuset_mems=None)
    return limits


def with_unrequested_hugetlb(limits: Limits, page_sizes: Iterable[int]) -> Limits:
    """maybeSetHugetlb (cgroup_manager_linux.go): every page size without a limit gets 0."""
    given = dict(limits.hugetlb)
    return limits._replace(hugetlb=tuple(sorted((s, given.get(s, 0)) for s in page_sizes)))


def _reserved_entries(cfg: NodeConfig, alloc: Allocatable) -> Iterable[tuple]:
    """(role, cgroup value, resources), in the kubelet's enforcement order."""
    yield "system-reserved", cfg.system_reserved_cgroup, alloc.system_reserved
    yield "kube-reserved", cfg.kube_reserved_cgroup, alloc.kube_reserved


def desired_tree(
    cfg: NodeConfig,
    alloc: Allocatable,
    hierarchy: Hierarchy,
    pods: Sequence[PodCgroup] = (),
    online_cpus: frozenset[int] | None = None,
) -> list[DesiredCgroup]:
    """The cgroups cgalloc manages for this node, parents first.

    ``online_cpus`` are the node's CPUs (the kubelet's GetAllCPUs); without them no cpuset is
    planned. The CPU manager policy decides the cpusets (``allocatable.cpu_sets``).
    """
    from cgalloc.model.allocatable import cpu_sets  # allocatable imports config, which is fine here
    from cgalloc.model.limits import format_cpuset, hugepage_limits, limits_from_resources

    driver = cfg.cgroup_driver
    problems: list[str] = []
    out: list[DesiredCgroup] = []
    sets = cpu_sets(cfg, online_cpus) if online_cpus is not None else None
    page_sizes = [size for size, _ in hugepage_limits(alloc.capacity)]

    def add(name: CgroupName | str, role: str, limits: Limits) -> None:
        path = name if isinstance(name, str) else driver_path(name, driver)
        out.append(DesiredCgroup(path.lstrip("/"), role, _supported(limits, hierarchy.controllers)))

    def cpuset(limits: Limits, cpus: frozenset[int] | None) -> Limits:
        return limits if cpus is None else limits._replace(cpuset_cpus=format_cpuset(cpus))

    v2 = hierarchy.version == "v2"
    try:
        node_cgroup = node_allocatable_cgroup(cfg)
    except InputError as err:
        problems += err.problems
        node_cgroup = None
    if node_cgroup is not None:
        kube_limits = limits_from_resources(alloc.kubepods, compressible_only=False)
        kube_limits = cpuset(kube_limits, sets.kubepods if sets else None)
        if cfg.cgroups_per_qos:
            _pod_tree(cfg, alloc, node_cgroup, pods, kube_limits, v2, add)
        else:
            add(node_cgroup, "kubepods", kube_limits)

    for role, value, resources in _reserved_entries(cfg, alloc):
        if role in cfg.enforce_node_allocatable:
            compressible = False
        elif f"{role}-compressible" in cfg.enforce_node_allocatable:
            compressible = True
        else:
            continue
        if resources is None:
            continue
        try:
            paths = [reserved_path(value, CGROUP_FIELDS[role], driver, kubelets=True)]
            paths.append(reserved_path(value, CGROUP_FIELDS[role], driver))
        except InputError as err:
            problems += err.problems
            continue
        limits = limits_from_resources(resources, compressible)
        if v2 and features.enabled(cfg, "MemoryQoS") and limits.memory is not None:
            # enforceExistingCgroup: memory.min = the reservation (Unified, so v2 only),
            # whatever the memoryReservationPolicy; on by default from 1.37
            limits = limits._replace(memory_min=limits.memory)
        limits = with_unrequested_hugetlb(limits, page_sizes)
        limits = cpuset(limits, sets.reserved_cgroups if sets else None)
        for path in dict.fromkeys(paths):
            add(path, role, limits)
    if problems:
        raise InputError(problems)
    return out


def _pod_tree(
    cfg: NodeConfig,
    alloc: Allocatable,
    kubepods: CgroupName,
    pods: Sequence[PodCgroup],
    kube_limits: Limits,
    v2: bool,
    add: Callable[[CgroupName, str, Limits], None],
) -> None:
    from cgalloc.model.limits import HUGETLB_UNBOUNDED, MIN_SHARES, Limits, milli_cpu_to_shares

    kube_protect, burstable_protect = _tier_protection(cfg, pods, v2)
    add(kubepods, "kubepods", kube_limits._replace(**kube_protect))

    sizes = [size for size, _ in kube_limits.hugetlb]
    unbounded = tuple((size, HUGETLB_UNBOUNDED) for size in sizes)
    burstable_milli = sum(p.cpu_request_milli for p in pods if p.qos == BURSTABLE)
    burstable = Limits(
        cpu_shares=milli_cpu_to_shares(burstable_milli), hugetlb=unbounded, **burstable_protect
    )
    besteffort = Limits(cpu_shares=MIN_SHARES, hugetlb=unbounded)
    reserve = qos_memory_limits(cfg, alloc, pods)
    if reserve is not None:
        burstable = burstable._replace(memory=reserve[0])
        besteffort = besteffort._replace(memory=reserve[1])
    tiers = {BURSTABLE: kubepods.child("burstable"), BESTEFFORT: kubepods.child("besteffort")}
    add(tiers[BURSTABLE], "qos", burstable)
    add(tiers[BESTEFFORT], "qos", besteffort)

    for pod in pods:
        add(pod_path(kubepods, pod, cfg.cgroup_driver), "pod", pod_limits(pod, sizes))


def _tier_protection(
    cfg: NodeConfig, pods: Sequence[PodCgroup], v2: bool
) -> tuple[dict[str, int], dict[str, int]]:
    """MemoryQoS's Unified values (cgroup v2 only) for kubepods, the Guaranteed tier, and the
    burstable tier, per kubelet minor (qos_container_manager_linux.go setMemoryQoS and Start,
    node_container_manager_linux.go enforceNodeAllocatableCgroups; G and B are the Guaranteed
    and Burstable pods' memory requests):

    - before 1.36, with the gate: kubepods memory.min = G+B and burstable memory.min = B, each
      only when above 0; without it nothing.
    - 1.36 TieredReservation: kubepods memory.min = G+B, burstable memory.low = B, 0 written
      too; policy None: both 0; gate off: nothing.
    - 1.37 and later, TieredReservation: as 1.36 and kubepods memory.low = B (the burstable
      tier's parent must cover its protection); anything else (gate off, its new default on
      with policy None): kubepods memory.min and memory.low 0, burstable memory.low 0.
    """
    if not v2:
        return {}, {}
    mode = features.memory_qos_mode(cfg)
    burstable = _tier_memory(pods, BURSTABLE)
    guaranteed = _tier_memory(pods, GUARANTEED) + burstable
    if mode == "min":
        return (
            {"memory_min": guaranteed} if guaranteed > 0 else {},
            {"memory_min": burstable} if burstable > 0 else {},
        )
    since_137 = minor_tuple(cfg.kubelet_version) >= (1, 37)
    if mode == "tiered":
        kube = {"memory_min": guaranteed, **({"memory_low": burstable} if since_137 else {})}
        return kube, {"memory_low": burstable}
    if since_137:
        return {"memory_min": 0, "memory_low": 0}, {"memory_low": 0}
    return ({"memory_min": 0}, {"memory_low": 0}) if mode == "none" else ({}, {})


def pod_name(kubepods: CgroupName, pod: PodCgroup) -> CgroupName:
    """pod_container_manager: NewCgroupName(QoS parent, "pod"+UID); Guaranteed → kubepods."""
    parent = kubepods if pod.qos == GUARANTEED else kubepods.child(pod.qos.lower())
    return parent.child(POD_PREFIX + pod.uid)


def pod_path(kubepods: CgroupName, pod: PodCgroup, driver: str) -> str:
    """The pod cgroup's absolute path under ``driver``; InputError naming the pod when the
    driver cannot name it (a '_' in its uid, a systemd slice name too long)."""
    try:
        return driver_path(pod_name(kubepods, pod), driver)
    except CgroupNameError as err:
        raise InputError(f"--pods: pod {pod.name} uid {pod.uid!r}: {err}.") from None
