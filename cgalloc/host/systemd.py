"""systemd as the owner of the cgroup tree: slices as transient units over D-Bus.

With ``--cgroup-driver systemd`` on a host where systemd is PID 1, the kubelet creates its
slices through systemd's Manager API (``StartTransientUnit``) and then writes the cgroupfs
files itself. A directory made behind systemd's back is no unit: ``systemctl`` does not know it
and systemd re-applies its own controller settings over it. cgalloc does the same as the
kubelet: apply's hook (:class:`cgalloc.ops.units.SystemdUnits`) starts each new slice as a
transient unit carrying its limits, sets the limits of existing units with
``SetUnitProperties`` (remembering the old values), and undoes both on rollback and teardown.
What it did is kept in
``<state dir>/systemd.json`` (written before each D-Bus call, like the journal).

The D-Bus client itself is :mod:`cgalloc.host.dbus`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath

from cgalloc.errors import HostError, InputError
from cgalloc.model.cpuset import parse_cpuset
from cgalloc.model.hierarchy import parse_limit_value
from cgalloc.model.naming import (
    KUBEPODS,
    SLICE_SUFFIX,
    CgroupNameError,
    Driver,
    driver,
    expand_slice,
)

RUN_DIR = "/run/systemd/system"  # exists iff systemd is PID 1 (sd_booted())
PRIVATE_SOCKET = "/run/systemd/private"
MODES = ("auto", "yes", "no")
UINT64_MAX = 2**64 - 1  # systemd's "infinity" for MemoryMax, TasksMax, CPUQuotaPerSecUSec
USEC_PER_SEC = 1_000_000
PING_TIMEOUT = 2.0  # seconds a fresh connection has to answer its Ping
PING_ATTEMPTS = 4

SYSTEMD1 = "org.freedesktop.systemd1"
MANAGER_PATH = "/org/freedesktop/systemd1"
MANAGER = "org.freedesktop.systemd1.Manager"
PROPERTIES = "org.freedesktop.DBus.Properties"
NO_SUCH_UNIT = "org.freedesktop.systemd1.NoSuchUnit"
UNIT = "org.freedesktop.systemd1.Unit"  # ActiveState, FragmentPath: every unit type's
UNIT_INTERFACES = {
    ".slice": "org.freedesktop.systemd1.Slice",
    ".service": "org.freedesktop.systemd1.Service",
    ".scope": "org.freedesktop.systemd1.Scope",
}
# Without these systemd turns the controllers off in its slices' parents on every realize
# (daemon-reload included), which would drop the limits cgalloc writes.
ACCOUNTING = ("CPUAccounting", "MemoryAccounting", "TasksAccounting")

# The v2 controllers systemd enables and disables in its units' parents (cgroup-util.h).
SYSTEMD_CONTROLLERS = frozenset({"cpu", "cpuset", "io", "memory", "pids"})

Property = tuple[str, tuple[str, object]]  # a(sv) element: (name, (signature, value))


def systemd_running(run_dir: str = RUN_DIR) -> bool:
    """True when systemd is PID 1 (what sd_booted() checks)."""
    return os.path.isdir(run_dir)


def use_dbus(mode: str, drv: Driver, running: bool) -> bool:
    """Whether ``setup --systemd MODE`` goes through D-Bus; InputError/HostError when it cannot."""
    if mode not in MODES:
        raise InputError(f"--systemd {mode!r} is not one of auto, yes, no.")
    if mode == "no" or (mode == "auto" and (not drv.slices or not running)):
        return False
    if not drv.slices:
        raise InputError(
            "--systemd yes needs the systemd cgroup driver: --cgroup-driver systemd "
            "(cgroupDriver: systemd)."
        )
    if not running:
        raise HostError(f"--systemd yes needs systemd as PID 1 ({RUN_DIR} does not exist).")
    return True


# ---------------------------------------------------------------- limits as unit properties


def cpuset_bitmask(text: str) -> bytes:
    """A cpuset ("0-2,9") as systemd's AllowedCPUs: a little-endian bitmask, byte 0 = CPUs 0-7."""
    cpus = parse_cpuset(text)
    mask = sum(1 << c for c in cpus)
    return mask.to_bytes((max(cpus) // 8 + 1) if cpus else 0, "little")


def _uint(value: int) -> int:
    return UINT64_MAX if value < 0 else value


def unit_properties(files: dict[str, str], v2: bool, cpuset: bool = True) -> list[Property]:
    """The unit properties for one cgroup's limit files ({file: value} as cgalloc writes them).

    Files systemd has no property for (hugetlb, v1 memory+swap, v1 cpuset) are left to
    cgroupfs; so is v2's cpuset without ``cpuset`` (see ``SystemdUnits``).
    """
    props: list[Property] = []

    def num(name: str, file: str) -> None:
        if file in files:
            props.append((name, ("t", _uint(int(parse_limit_value(file, files[file]))))))

    if v2:
        num("MemoryMax", "memory.max")
        num("MemoryMin", "memory.min")  # MemoryQoS (runc maps unified memory.min/low the same)
        num("MemoryLow", "memory.low")
        num("MemorySwapMax", "memory.swap.max")  # --reserved-swap none
        num("CPUWeight", "cpu.weight")
        if "cpu.max" in files:
            quota, period = parse_limit_value("cpu.max", files["cpu.max"])
            per_sec = UINT64_MAX if quota < 0 else quota * USEC_PER_SEC // (period or 100_000)
            props.append(("CPUQuotaPerSecUSec", ("t", per_sec)))
            if period:
                props.append(("CPUQuotaPeriodUSec", ("t", period)))
        for name, file in (("AllowedCPUs", "cpuset.cpus"), ("AllowedMemoryNodes", "cpuset.mems")):
            if cpuset and file in files:
                props.append((name, ("ay", cpuset_bitmask(files[file]))))
    else:
        if "memory.limit_in_bytes" in files:
            limit = int(files["memory.limit_in_bytes"])
            props.append(("MemoryLimit", ("t", _uint(limit))))
        num("CPUShares", "cpu.shares")
        if "cpu.cfs_quota_us" in files:
            quota = int(files["cpu.cfs_quota_us"])
            period = int(files.get("cpu.cfs_period_us", "100000"))
            per_sec = UINT64_MAX if quota < 0 else quota * USEC_PER_SEC // period
            props.append(("CPUQuotaPerSecUSec", ("t", per_sec)))
    num("TasksMax", "pids.max")
    return props


def slice_unit(path: str) -> str | None:
    """The slice unit whose cgroup is ``path`` (no leading '/'), or None when ``path`` is not
    where systemd would put the slice its base name names."""
    base = posixpath.basename(path)
    if not base.endswith(SLICE_SUFFIX):
        return None
    try:
        return base if expand_slice(base) == "/" + path else None
    except CgroupNameError:
        return None


def existing_unit(path: str) -> str | None:
    """The unit an existing cgroup belongs to: a slice at its place, or a service/scope
    (``system.slice/kubelet.service``) directly in its slice."""
    if path.endswith(SLICE_SUFFIX):
        return slice_unit(path)
    base, parent = posixpath.basename(path), posixpath.dirname(path)
    if base.endswith((".service", ".scope")) and (not parent or slice_unit(parent)):
        return base
    return None


def is_slice_name(name: object) -> bool:
    try:
        return isinstance(name, str) and bool(expand_slice(name))
    except CgroupNameError:
        return False


def cgroup_roles(cfg) -> dict[str, str]:
    """cgroup path (no leading '/') → role, for the unit descriptions ("cgalloc: kubepods")."""
    roles = {}
    drv = driver(cfg.cgroup_driver)
    with contextlib.suppress(CgroupNameError):
        roles[drv.path(drv.root(cfg.cgroup_root).child(KUBEPODS)).lstrip("/")] = "kubepods"
    for role, value in (
        ("kube-reserved", cfg.kube_reserved_cgroup),
        ("system-reserved", cfg.system_reserved_cgroup),
    ):
        with contextlib.suppress(CgroupNameError):
            roles[drv.reserved_cgroup_path(value).lstrip("/")] = role
    return roles


def role_of(path: str, roles: dict[str, str]) -> str:
    if path in roles:
        return roles[path]
    kubepods = next((p for p, r in roles.items() if r == "kubepods"), None)
    if kubepods and posixpath.dirname(path) == kubepods:
        qos = path.endswith(("-burstable.slice", "-besteffort.slice"))
        return "qos" if qos else "pod"
    return "pod" if kubepods and path.startswith(kubepods + "/") else "slice"


# ---------------------------------------------------------------- the D-Bus client


class SystemdError(HostError):
    """systemd refused or failed a request."""
