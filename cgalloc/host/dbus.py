"""systemd's D-Bus API over its private socket (``/run/systemd/private``, root only, no
dbus-daemon needed), with ``jeepney``: the client setup and teardown use to start slices and
set unit properties. Kept apart from :mod:`cgalloc.host.systemd` so the commands that never
call systemd (show, stats, verify of a cgroupfs tree) do not load jeepney."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.io.blocking import DBusConnection, DBusConnectionBase, prep_socket
from jeepney.io.common import MessageFilters

from cgalloc.host.systemd import (
    MANAGER,
    MANAGER_PATH,
    NO_SUCH_UNIT,
    PING_ATTEMPTS,
    PING_TIMEOUT,
    PRIVATE_SOCKET,
    PROPERTIES,
    SYSTEMD1,
    UNIT,
    UNIT_INTERFACES,
    Property,
    SystemdError,
)


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

    def get(self, name: str, prop: str, interface: str | None = None) -> tuple[str, object]:
        """A unit property as (signature, value), from the unit type's interface (Slice,
        Service...) unless ``interface`` names another (``UNIT``: ActiveState, FragmentPath)."""
        path = self.unit_path(name)
        if path is None:
            raise SystemdError(f"systemd has no unit {name}")
        iface = interface or UNIT_INTERFACES.get(os.path.splitext(name)[1], UNIT)
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
