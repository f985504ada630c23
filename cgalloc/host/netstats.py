"""Node network counters per interface, for the summary API's ``node.network``.

Read from ``/sys/class/net/<if>/statistics`` (the same 64-bit counters netlink's
``IFLA_STATS64`` carries, for a listdir and four small reads per interface); only where sysfs
has no network directory (some sandboxes) from netlink (``RTM_GETLINK``) through pyroute2,
whose import alone costs more than a whole ``cgalloc stats`` read of 1000 pods.
Like cAdvisor, virtual interfaces are left out (:data:`IGNORED_PREFIXES`), and like the kubelet
the interface named ``eth0`` is the one whose counters are copied to the top level.
"""

from __future__ import annotations

import os
from typing import NamedTuple

DEFAULT_INTERFACE = "eth0"  # the kubelet's network.DefaultInterfaceName
SYSFS_NET = "/sys/class/net"
_COUNTERS = ("rx_bytes", "rx_errors", "tx_bytes", "tx_errors")


class InterfaceStats(NamedTuple):
    """Cumulative counters of one interface."""

    name: str
    rx_bytes: int
    rx_errors: int
    tx_bytes: int
    tx_errors: int

    def summary(self) -> dict[str, object]:
        """The summary API's ``InterfaceStats`` object."""
        return {
            "name": self.name,
            "rxBytes": self.rx_bytes,
            "rxErrors": self.rx_errors,
            "txBytes": self.tx_bytes,
            "txErrors": self.tx_errors,
        }


# The node's figures are cAdvisor's root container's: google/cadvisor container/raw/handler.go
# newRawContainerHandler gives the root cgroup pid 1, and container/libcontainer/handler.go
# scanInterfaceStats drops every interface isIgnoredDevice matches: a name that, lower-cased,
# starts with one of ignoredDevicePrefixes. Bridges such as cni0, flannel.1 or cali* are kept
# there, so they are kept here too: the figures must be the ones the kubelet reports.
IGNORED_PREFIXES = ("lo", "veth", "docker", "nerdctl")


def ignored(name: str) -> bool:
    """Whether cAdvisor leaves the interface out of the node's network figures."""
    return name.lower().startswith(IGNORED_PREFIXES)


def from_netlink() -> list[InterfaceStats]:
    """Counters from rtnetlink; raises ``OSError`` or ``ImportError`` when it is unavailable."""
    from pyroute2 import IPRoute

    out = []
    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            stats = link.get_attr("IFLA_STATS64") or link.get_attr("IFLA_STATS")
            if not name or stats is None or ignored(name):
                continue
            out.append(InterfaceStats(name, *(int(stats[c]) for c in _COUNTERS)))
    return sorted(out, key=lambda s: s.name)


def from_sysfs(sysfs_net: str = SYSFS_NET) -> list[InterfaceStats]:
    """Counters from ``<sysfs_net>/<if>/statistics/*``; interfaces that vanish are skipped."""
    out = []
    for name in sorted(os.listdir(sysfs_net)):
        if ignored(name):
            continue
        try:
            values = []
            for counter in _COUNTERS:
                with open(os.path.join(sysfs_net, name, "statistics", counter), "rb") as f:
                    values.append(int(f.read()))
        except (OSError, ValueError):
            continue
        out.append(InterfaceStats(name, *values))
    return out


def interface_stats() -> list[InterfaceStats]:
    """Per-interface counters from sysfs, falling back to netlink where sysfs has none."""
    if os.path.isdir(SYSFS_NET):
        return from_sysfs()
    try:
        return from_netlink()
    except (ImportError, OSError):
        return []


def network_summary(interfaces: list[InterfaceStats], time: str) -> dict[str, object]:
    """The summary API's ``NetworkStats``: the default interface inline (its ``name`` always
    there, "" without one: a field without omitempty), all in ``interfaces`` (left out when
    there is none, as its omitempty does)."""
    out: dict[str, object] = {"time": time, "name": ""}
    for iface in interfaces:
        if iface.name == DEFAULT_INTERFACE:
            out.update(iface.summary())
    if interfaces:
        out["interfaces"] = [i.summary() for i in interfaces]
    return out
