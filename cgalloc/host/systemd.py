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

The D-Bus client speaks to systemd's private socket (``/run/systemd/private``, root only, no
dbus-daemon needed) with ``jeepney``.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import time
from collections.abc import Iterable

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.io.blocking import DBusConnection, DBusConnectionBase, prep_socket
from jeepney.io.common import MessageFilters

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


def _no_answer(method: str, unit: str, exc: BaseException, timeout: float) -> str:
    """One sentence for a call systemd did not answer, naming the call and its unit."""
    call = f"{method} {unit}" if unit else method
    if isinstance(exc, TimeoutError):
        return f"systemd did not answer {call} within {timeout:g} s."
    return f"the connection to systemd failed during {call}: {exc.strerror or exc}."


_PEER = DBusAddress(MANAGER_PATH, SYSTEMD1, "org.freedesktop.DBus.Peer")


class _PeerConnection(DBusConnection):
    """A direct connection to systemd: no bus daemon in between, so no Hello."""

    def __init__(self, sock) -> None:
        DBusConnectionBase.__init__(self, sock)
        self._filters = MessageFilters()


class Systemd:
    """A minimal client of systemd's Manager API on its private socket."""

    def __init__(self, address: str = PRIVATE_SOCKET, timeout: float = 30.0) -> None:
        self.address = address
        self.timeout = timeout
        self._conn = None

    def _connection(self) -> _PeerConnection:
        """A connection that has answered a Ping.

        sd-bus leaves a message unprocessed when it arrives in the same read as the auth's
        BEGIN (bus_socket_auth_verify_server keeps it in its buffer, and epoll will not wake
        for bytes already read), until more bytes arrive. Under qemu PID 1 is slow enough to
        read both at once in most runs, so a reconnect meets the same stall; another Ping on
        the same connection is those bytes, and systemd then answers both.
        """
        if self._conn is not None:
            return self._conn
        try:
            conn = _PeerConnection(prep_socket(self.address, timeout=self.timeout))
        except OSError as exc:
            raise SystemdError(
                f"cannot reach systemd at {self.address}: {exc.strerror or exc}"
            ) from exc
        for attempt in range(PING_ATTEMPTS):
            # Doubling: a PID 1 busy with jobs under emulation took longer than 4 x 2 s.
            wait = min(PING_TIMEOUT * 2**attempt, self.timeout)
            try:
                conn.send_and_get_reply(new_method_call(_PEER, "Ping"), timeout=wait)
            except TimeoutError:
                continue
            except OSError as exc:
                conn.close()
                raise SystemdError(_no_answer("Ping", "", exc, wait)) from exc
            self._conn = conn
            return conn
        conn.close()
        raise SystemdError(
            f"systemd at {self.address} answered none of {PING_ATTEMPTS} Pings on a new "
            f"connection (the last waited {wait:g} s)."
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def call(
        self,
        method: str,
        signature: str = "",
        body: tuple = (),
        path: str = MANAGER_PATH,
        interface: str = MANAGER,
        unit: str = "",
    ) -> tuple:
        """Call ``method`` and return the reply's body; ``unit`` names the unit in errors
        (default: the first argument, which is the unit for the Manager's unit methods)."""
        msg = new_method_call(DBusAddress(path, SYSTEMD1, interface), method, signature, body)
        conn = self._connection()
        try:
            reply = conn.send_and_get_reply(msg, timeout=self.timeout)
        except (TimeoutError, OSError) as exc:
            # The connection's state is unknown after a lost reply: the next call starts afresh.
            self.close()
            unit = unit or (body[0] if body and isinstance(body[0], str) else "")
            raise SystemdError(_no_answer(method, unit, exc, self.timeout)) from exc
        if reply.header.message_type == MessageType.error:
            name = reply.header.fields.get(HeaderFields.error_name, "error")
            text = reply.body[0] if reply.body else ""
            raise SystemdError(f"systemd {method}: {name}: {text}")
        return reply.body

    def unit_path(self, name: str) -> str | None:
        """The unit's object path, or None when systemd has no such unit loaded."""
        try:
            return self.call("GetUnit", "s", (name,))[0]
        except SystemdError as err:
            if NO_SUCH_UNIT in str(err):
                return None
            raise

    def get(self, name: str, prop: str) -> tuple[str, object]:
        """A unit property as (signature, value)."""
        path = self.unit_path(name)
        if path is None:
            raise SystemdError(f"systemd has no unit {name}")
        iface = UNIT_INTERFACES.get(os.path.splitext(name)[1], "org.freedesktop.systemd1.Unit")
        return self.call("Get", "ss", (iface, prop), path=path, interface=PROPERTIES, unit=name)[0]

    def _job(self, method: str, signature: str, body: tuple) -> None:
        """Call a method that queues a job and wait until the job is done."""
        rule = MatchRule(type="signal", interface=MANAGER, member="JobRemoved")
        conn = self._connection()
        with conn.filter(rule, bufsize=64) as removed:
            job = self.call(method, signature, body)[0]
            deadline = time.monotonic() + self.timeout
            while (left := deadline - time.monotonic()) > 0:
                try:
                    msg = conn.recv_until_filtered(removed, timeout=left)
                except TimeoutError:
                    break
                except OSError as exc:
                    self.close()
                    raise SystemdError(_no_answer(method, body[0], exc, self.timeout)) from exc
                _, path, unit, result = msg.body
                if path == job:
                    if result != "done":
                        raise SystemdError(f"systemd {method} {unit}: job {result}")
                    return
        raise SystemdError(f"systemd {method} {body[0]}: the job did not end in {self.timeout} s")

    def start_slice(self, name: str, description: str, props: Iterable[Property]) -> None:
        """StartTransientUnit(name, "replace", Description + props, []) and wait for the job."""
        body = [("Description", ("s", description)), *props]
        self._job("StartTransientUnit", "ssa(sv)a(sa(sv))", (name, "replace", body, []))

    def stop_unit(self, name: str) -> None:
        """StopUnit(name, "replace") and wait; a unit systemd no longer has is already gone."""
        if self.unit_path(name) is None:
            return
        self._job("StopUnit", "ss", (name, "replace"))

    def set_properties(self, name: str, props: list[Property]) -> None:
        """SetUnitProperties(name, runtime=true, props): until reboot, like systemctl --runtime."""
        self.call("SetUnitProperties", "sba(sv)", (name, True, props))
