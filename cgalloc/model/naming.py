"""Cgroup names and the two drivers that turn them into paths, and where the node's cgroups are.

Naming follows the kubelet's ``CgroupName`` (``pkg/kubelet/cm/cgroup_manager_linux.go``) and
``ExpandSlice`` (opencontainers/cgroups); the driver is chosen once (:func:`driver`). A reserved
cgroup is the cgroup the kubelet will look for (``Driver.kubelet_reserved_path``): with the
systemd driver it keeps only the last component, so ``/kube-reserved.slice`` is
``/kube.slice/kube-reserved.slice`` and ``/system.slice/kubelet.service`` is
``/kubelet.service.slice`` (kubernetes#110288). cgalloc creates and limits that cgroup, and for a
unit path also limits the unit's real cgroup (``Driver.reserved_cgroup_path``), which is where
the daemons run. Pure: no I/O.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cgalloc.errors import InputError
from cgalloc.model.kernel_ranges import name_refusal
from cgalloc.model.resources import GUARANTEED

if TYPE_CHECKING:
    from cgalloc.model.nodeconfig import NodeConfig
    from cgalloc.model.podresources import PodCgroup

SLICE_SUFFIX = ".slice"
# systemd unit types that own a cgroup; a reserved cgroup may name one of these directly.
UNIT_SUFFIXES = (".service", ".scope", ".socket", ".mount", ".swap")
KUBEPODS = "kubepods"
POD_PREFIX = "pod"
QOS_CLASSES = ("guaranteed", "burstable", "besteffort")
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


class Driver:
    """A cgroup driver (the kubelet's ``cgroupDriver``), chosen once per node: how a
    ``CgroupName`` becomes a path and back (``cgroupManager.Name``/``CgroupName``), and what the
    kubelet makes of a reserved-cgroup setting."""

    name = ""
    # Its cgroups are systemd slices: systemd owns them (units over D-Bus, daemons kept in a
    # slice), and a reserved-cgroup setting may be a bare slice name.
    slices = False
    # what a reserved-cgroup setting may be, for the refusal's accepted form
    reserved_form = "an absolute cgroup path"

    def path(self, name: CgroupName) -> str:
        """The absolute cgroup path of ``name`` (the kubelet's ``Name()``)."""
        raise NotImplementedError

    def parse(self, path: str) -> CgroupName:
        """The name of a path this driver makes; CgroupNameError for one it would not."""
        raise NotImplementedError

    def root(self, cgroup_root: str) -> CgroupName:
        """``ParseCgroupfsToCgroupName(cgroupRoot)``, checked for this driver."""
        raise NotImplementedError

    def kubelet_reserved_path(self, value: str) -> str:
        """The cgroup the kubelet enforces for a --kube-reserved-cgroup /
        --system-reserved-cgroup value: ``cgroupManager.CgroupName(value)``, as a path."""
        if not value:
            raise CgroupNameError("the value is empty")
        path = self._reserved(value)
        if path == "/":
            raise CgroupNameError("the root cgroup cannot hold a reservation")
        return path

    def _reserved(self, value: str) -> str:
        raise NotImplementedError

    def reserved_cgroup_path(self, value: str) -> str:
        """The cgroup the reserved daemons run in: the kubelet's path
        (:meth:`kubelet_reserved_path`), but for a systemd unit path."""
        return self.kubelet_reserved_path(value)

    def pod_uid(self, entry: str) -> str | None:
        """The pod UID a directory name under a QoS parent carries, or None."""
        if entry.startswith(POD_PREFIX) and len(entry) > len(POD_PREFIX):
            return entry[len(POD_PREFIX) :]
        return None

    def __repr__(self) -> str:
        return f"<{self.name} driver>"


class CgroupfsDriver(Driver):
    """The cgroupfs driver: names are plain paths."""

    name = "cgroupfs"

    def path(self, name: CgroupName) -> str:
        return to_cgroupfs(name)

    def parse(self, path: str) -> CgroupName:
        return parse_cgroupfs(path)

    def root(self, cgroup_root: str) -> CgroupName:
        # path.Join: "kubelet" and "/a/" are "/kubelet" and "/a"
        return parse_cgroupfs(kubelet_cgroupfs_path(cgroup_root or "/"))

    def _reserved(self, value: str) -> str:
        return kubelet_cgroupfs_path(value)


class SystemdDriver(Driver):
    """The systemd driver: names are slices (``a-b.slice`` nested as ``/a.slice/a-b.slice``)."""

    name = "systemd"
    slices = True
    reserved_form = "an absolute cgroup path, a slice name or a unit's cgroup path"

    def path(self, name: CgroupName) -> str:
        return to_systemd(name)

    def parse(self, path: str) -> CgroupName:
        return parse_systemd(path)

    def root(self, cgroup_root: str) -> CgroupName:
        # an empty part would be an empty slice component, which ExpandSlice refuses
        root = parse_cgroupfs(cgroup_root or "/")
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

    def _reserved(self, value: str) -> str:
        return to_systemd(kubelet_systemd_name(value))

    def reserved_cgroup_path(self, value: str) -> str:
        """A unit path such as ``/system.slice/kubelet.service`` is that unit's real cgroup
        (the kubelet looks elsewhere: kubernetes#110288)."""
        if "/" in value.rstrip("/"):
            try:
                unit = _unit_path(value)
            except CgroupNameError:
                unit = None
            if unit is not None:
                return unit
        return self.kubelet_reserved_path(value)

    def pod_uid(self, entry: str) -> str | None:
        """``kubepods-burstable-pod<uid>.slice``: the uid, its '_' back to '-'."""
        if not entry.endswith(SLICE_SUFFIX):
            return None
        last = entry.removesuffix(SLICE_SUFFIX).rsplit("-", 1)[-1]
        return super().pod_uid(last.replace("_", "-"))


CGROUPFS = CgroupfsDriver()
SYSTEMD = SystemdDriver()
DRIVERS: dict[str, Driver] = {d.name: d for d in (CGROUPFS, SYSTEMD)}


def driver(name: str) -> Driver:
    """The driver ``cgroupDriver`` names (validated: cgroupfs or systemd)."""
    return DRIVERS[name]


def reserved_mapping_note(field: str, value: str, drv: Driver) -> str | None:
    """One warning line when the kubelet's cgroup for ``value`` is not the path written."""
    try:
        kubelet = drv.kubelet_reserved_path(value)
        real = drv.reserved_cgroup_path(value)
    except CgroupNameError:
        return None
    if value.rstrip("/") in (kubelet, kubelet.lstrip("/")):
        return None
    note = (
        f"{field} {value}: the kubelet's {drv.name} driver looks for {kubelet} (it keeps only"
        " the last path component and nests a slice by the dashes in its name, kubernetes#110288);"
        f" cgalloc creates and limits {kubelet}"
    )
    if real != kubelet:
        note += f" and also limits the unit's real cgroup {real}, where its processes run"
    return note + "."


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
    field, drv = CGROUP_FIELDS[role], driver(cfg.cgroup_driver)
    return reserved_path(value, field, drv, kubelets=True), reserved_path(value, field, drv)


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


def kubepods_cgroup(cfg: NodeConfig) -> CgroupName:
    """kubepods' name below ``cfg.cgroup_root``; InputError naming cgroupRoot if the driver
    cannot represent it."""
    try:
        drv = driver(cfg.cgroup_driver)
        name = drv.root(cfg.cgroup_root).child(KUBEPODS)
        # systemd expands every name derived from the root, and its length is bounded: the
        # longest one without a pod (the besteffort tier's) is refused here, as the root's fault
        drv.path(name.child("besteffort"))
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
    return None if name is None else driver(cfg.cgroup_driver).path(name)


def node_allocatable_cgroup(cfg: NodeConfig) -> CgroupName | None:
    """The cgroup the kubelet keeps Node Allocatable limits on (containerManagerImpl.cgroupRoot).

    With cgroupsPerQOS false it is the cgroup root itself, which enforceNodeAllocatableCgroups
    still updates with the full capacity when it is not the root cgroup.
    """
    if cfg.cgroups_per_qos:
        return kubepods_cgroup(cfg)
    try:
        root = driver(cfg.cgroup_driver).root(cfg.cgroup_root)
    except CgroupNameError as err:
        raise InputError(
            f"{ROOT_FIELD} {cfg.cgroup_root!r}: {err}; accepted: an absolute"
            " cgroupfs-style name such as / or /kubelet."
        ) from None
    return root if root.parts else None


def reserved_path(value: str, field: str, drv: Driver, kubelets: bool = False) -> str:
    """``drv.reserved_cgroup_path`` (or with ``kubelets`` the kubelet's path) of a
    reserved-cgroup setting; InputError naming ``field``."""
    try:
        return drv.kubelet_reserved_path(value) if kubelets else drv.reserved_cgroup_path(value)
    except CgroupNameError as err:
        raise InputError(f"{field} {value!r}: {err}; accepted: {drv.reserved_form}.") from None


def naming_notes(cfg: NodeConfig) -> list[str]:
    """Warnings for reserved cgroups whose kubelet name differs from the value given."""
    notes = []
    for role, value in (
        ("system-reserved", cfg.system_reserved_cgroup),
        ("kube-reserved", cfg.kube_reserved_cgroup),
    ):
        enforced = cfg.enforces(role)
        note = reserved_mapping_note(CGROUP_FIELDS[role], value, driver(cfg.cgroup_driver))
        if enforced and note:
            notes.append(note)
    return notes


def pod_name(kubepods: CgroupName, pod: PodCgroup) -> CgroupName:
    """pod_container_manager: NewCgroupName(QoS parent, "pod"+UID); Guaranteed → kubepods."""
    parent = kubepods if pod.qos == GUARANTEED else kubepods.child(pod.qos.lower())
    return parent.child(POD_PREFIX + pod.uid)


def pod_path(kubepods: CgroupName, pod: PodCgroup, drv: Driver) -> str:
    """The pod cgroup's absolute path under ``drv``; InputError naming the pod when the
    driver cannot name it (a '_' in its uid, a systemd slice name too long)."""
    try:
        return drv.path(pod_name(kubepods, pod))
    except CgroupNameError as err:
        raise InputError(f"--pods: pod {pod.name} uid {pod.uid!r}: {err}.") from None
