"""The node-input options every command shares, and the decorator that adds them.

``@node_inputs`` appends the kubelet flags, ``--config``, ``--config-dir``, ``--node-config`` and
``--capacity`` to a typer command's signature and hands the command one ``inputs: NodeInputs``;
``inputs.load()`` returns ``(NodeConfig, capacity)`` or raises InputError with every problem.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass

import typer

from cgalloc.capacity import read_capacity
from cgalloc.config import NodeConfig, load_node_config
from cgalloc.resources import ResourceList

_PANEL = "Node inputs (kubelet flags and files)"


@dataclass(frozen=True)
class _Opt:
    name: str  # python parameter name
    decls: tuple[str, ...]
    help: str
    metavar: str
    multiple: bool = False
    flag: str | None = None  # the kubelet flag it feeds; None for file options


_OPTIONS = (
    _Opt(
        "config",
        ("--config",),
        "KubeletConfiguration file (apiVersion kubelet.config.k8s.io/v1beta1); unrelated fields"
        " are ignored.",
        "FILE",
    ),
    _Opt(
        "config_dir",
        ("--config-dir",),
        "Drop-in directory: its *.conf KubeletConfiguration files are merged over --config in"
        " name order, field by field (maps merge, lists are replaced).",
        "DIR",
    ),
    _Opt(
        "node_config",
        ("--node-config",),
        "OpenShift 3.x node-config.yaml; its kubeletArguments act as kubelet flags, above the"
        " config files and below the flags given here.",
        "FILE",
    ),
    _Opt(
        "kube_reserved",
        ("--kube-reserved",),
        "Resources reserved for Kubernetes daemons (kubeReserved): cpu, memory,"
        " ephemeral-storage, pid, e.g. cpu=100m,memory=1Gi. Repeatable.",
        "NAME=QTY,...",
        True,
        "kube-reserved",
    ),
    _Opt(
        "system_reserved",
        ("--system-reserved",),
        "Resources reserved for OS daemons (systemReserved), same form as --kube-reserved."
        " Repeatable.",
        "NAME=QTY,...",
        True,
        "system-reserved",
    ),
    _Opt(
        "eviction_hard",
        ("--eviction-hard",),
        "Hard-eviction thresholds (evictionHard), e.g. memory.available<100Mi,"
        "nodefs.available<10%; 0% or 100% disables one. The first use replaces the kubelet"
        " defaults (memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,"
        " imagefs.available<15%). Repeatable.",
        "SIGNAL<VALUE,...",
        True,
        "eviction-hard",
    ),
    _Opt(
        "enforce_node_allocatable",
        ("--enforce-node-allocatable", "--enforce"),
        "What to enforce (enforceNodeAllocatable): pods, system-reserved,"
        " system-reserved-compressible, kube-reserved, kube-reserved-compressible, or none;"
        " comma-separated, default pods. Repeatable.",
        "LIST",
        True,
        "enforce-node-allocatable",
    ),
    _Opt(
        "kube_reserved_cgroup",
        ("--kube-reserved-cgroup",),
        "Absolute name of the cgroup for Kubernetes daemons (kubeReservedCgroup), needed to"
        " enforce kube-reserved.",
        "CGROUP",
        False,
        "kube-reserved-cgroup",
    ),
    _Opt(
        "system_reserved_cgroup",
        ("--system-reserved-cgroup",),
        "Absolute name of the cgroup for OS daemons (systemReservedCgroup), needed to enforce"
        " system-reserved.",
        "CGROUP",
        False,
        "system-reserved-cgroup",
    ),
    _Opt(
        "cgroups_per_qos",
        ("--cgroups-per-qos",),
        "true or false (cgroupsPerQOS, default true): create the kubepods/QoS hierarchy.",
        "BOOL",
        False,
        "cgroups-per-qos",
    ),
    _Opt(
        "cgroup_driver",
        ("--cgroup-driver",),
        "cgroupfs or systemd (cgroupDriver, default cgroupfs): how cgroups are named.",
        "DRIVER",
        False,
        "cgroup-driver",
    ),
    _Opt(
        "cgroup_root",
        ("--cgroup-root",),
        "Parent of kubepods (cgroupRoot, default /), a cgroupfs-style name.",
        "CGROUP",
        False,
        "cgroup-root",
    ),
    _Opt(
        "reserved_cpus",
        ("--reserved-cpus",),
        "CPUs kept for system and Kubernetes daemons (reservedSystemCPUs), e.g. 0-1; replaces"
        " the cpu reservations with the set's size. Not allowed with reserved cgroups.",
        "CPULIST",
        False,
        "reserved-cpus",
    ),
    _Opt(
        "ignore_eviction",
        ("--experimental-allocatable-ignore-eviction",),
        "true or false (default false): leave hard-eviction thresholds out of Allocatable.",
        "BOOL",
        False,
        "experimental-allocatable-ignore-eviction",
    ),
    _Opt(
        "qos_reserved",
        ("--qos-reserved",),
        "Share of requests reserved from lower QoS tiers (qosReserved), memory=N% with an"
        " integer N from 0 to 100.",
        "memory=N%",
        True,
        "qos-reserved",
    ),
    _Opt(
        "pod_max_pids",
        ("--pod-max-pids",),
        "Pids limit of each pod cgroup (podPidsLimit), -1 = unlimited (default).",
        "N",
        False,
        "pod-max-pids",
    ),
    _Opt(
        "root_dir",
        ("--root-dir",),
        "Kubelet root directory (default /var/lib/kubelet); its filesystem's size is the"
        " ephemeral-storage capacity.",
        "DIR",
        False,
        "root-dir",
    ),
    _Opt(
        "capacity",
        ("--capacity",),
        "Override this node's capacity to plan another node type: cpu, memory,"
        " ephemeral-storage, pid or hugepages-<size>, e.g. cpu=16,memory=64Gi. Resources not"
        " given are read from this host. Repeatable.",
        "NAME=QTY,...",
        True,
        "capacity",
    ),
)


@dataclass(frozen=True)
class NodeInputs:
    """The raw shared options of one command invocation."""

    flags: dict[str, list[str]]  # kubelet flag name -> occurrences, as given
    config: str | None = None
    config_dir: str | None = None
    node_config: str | None = None

    def load_config(self) -> NodeConfig:
        """The merged, validated NodeConfig; raises InputError with every problem."""
        return load_node_config(
            self.flags,
            config=self.config,
            config_dir=self.config_dir,
            node_config=self.node_config,
        )

    def load(self) -> tuple[NodeConfig, ResourceList]:
        """``(NodeConfig, capacity)``: this host's capacity with ``--capacity`` applied."""
        cfg = self.load_config()
        capacity = read_capacity(cfg.root_dir)
        capacity.update(cfg.capacity_overrides)
        return cfg, capacity


def _parameter(opt: _Opt) -> inspect.Parameter:
    annotation = list[str] | None if opt.multiple else str | None
    option = typer.Option(
        None,
        *opt.decls,
        help=opt.help,
        metavar=opt.metavar,
        rich_help_panel=_PANEL,
        show_default=False,
    )
    return inspect.Parameter(
        opt.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


def node_inputs(command: Callable[..., object]) -> Callable[..., object]:
    """Give a typer command the shared node-input options as one ``inputs: NodeInputs``."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command)
    kept = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name != "inputs"
    ]
    params = kept + [_parameter(opt) for opt in _OPTIONS]

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> object:
        flags: dict[str, list[str]] = {}
        files: dict[str, str | None] = {}
        for opt in _OPTIONS:
            value = kwargs.pop(opt.name, None)
            if opt.flag is None:
                files[opt.name] = value  # type: ignore[assignment]
            elif value is not None:
                flags[opt.flag] = list(value) if opt.multiple else [value]  # type: ignore[call-overload]
        return command(*args, inputs=NodeInputs(flags=flags, **files), **kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper
