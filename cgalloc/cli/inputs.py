"""The node-input options every command shares, and the decorator that adds them.

The options are data here: ``cgalloc/cli/signature.py``'s ``@node_inputs`` adds them to a typer
command, which gets one ``inputs: NodeInputs``; ``inputs.load()`` returns ``(NodeConfig,
capacity)`` or raises InputError with every problem. The kubelet's boolean flags parse as the
kubelet (pflag) parses them: bare ``--flag`` is true, ``--flag=false`` sets a value, and a
separate ``--flag false`` is refused.

``--match-kubelet`` is resolved when the options are (:func:`node_inputs_from`): the
command gets the effective inputs, the node kubelet's with the ones given here over them, and
what was read is said on stderr once. ``check_drivers`` is the cgroup-driver sanity check:
setup refuses a driver that differs from systemd's (as PID 1) or the container runtime's,
unless ``--allow-driver-mismatch``; show and verify warn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from cgalloc.cli.render import echo, printable, warn
from cgalloc.errors import InputError
from cgalloc.host.capacity import node_capacity, online_cpus
from cgalloc.inputs.config import load_node_config
from cgalloc.inputs.dropins import dropin_root_note
from cgalloc.inputs.fields import BOOL_WORDS, BY_FLAG
from cgalloc.model import versions
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.resources import ResourceList

if TYPE_CHECKING:
    from cgalloc.host.machine import Host

_PANEL = "Node inputs (kubelet flags and files)"


# Plain NamedTuples, not dataclasses: every command imports this module, and building a
# dataclass compiles its methods (about 1.5 ms per class per process).
class _Opt(NamedTuple):
    name: str  # python parameter name
    decls: tuple[str, ...]
    help: str
    metavar: str
    multiple: bool = False
    flag: str | None = None  # the kubelet flag it feeds; None for file options
    switch: bool = False  # an on/off option of cgalloc's own (no value)


MATCH_HELP = (
    "Take the kubelet's inputs from this node: the command line kubelet.service runs, as"
    " systemd builds it from ExecStart= with the unit's drop-ins, Environment= and"
    " EnvironmentFile= (kubeadm's 10-kubeadm.conf with kubeadm-flags.env and"
    " /etc/default/kubelet, EKS's /etc/eks/kubelet/environment), or else a running kubelet's;"
    " then its --config file and --config-dir drop-ins, merged as the kubelet merges them;"
    " `kubelet --version` gives --kubelet-version (a minor cgalloc does not know: the nearest,"
    " with a warning). Flags it does not model are ignored. Options given here win: each"
    " replaces what the kubelet's command line gave for it. What was read goes to stderr (and"
    " to -o json as kubeletInputs). Examples: `cgalloc setup --dry-run --match-kubelet` (what"
    " setup would change for this node's kubelet); `cgalloc show --match-kubelet --capacity"
    " cpu=32,memory=128Gi` (the same kubelet on a larger node)."
)
DRIVER_HELP = (
    "Go on when the kubelet's cgroup driver is not systemd while systemd is PID 1, or differs"
    " from the container runtime's (containerd's SystemdCgroup, CRI-O's cgroup_manager): setup"
    " refuses both (exit 2), since a runtime that reports its driver makes the kubelet build"
    " its tree under the runtime's names, and an older one restarts every pod"
    " (kubernetes#111776); show and verify only warn."
)

_OPTIONS = (
    _Opt("match_kubelet", ("--match-kubelet",), MATCH_HELP, "", switch=True),
    _Opt("allow_driver_mismatch", ("--allow-driver-mismatch",), DRIVER_HELP, "", switch=True),
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
        "Drop-in directory: every *.conf KubeletConfiguration file in it and its"
        " subdirectories is merged over --config in the kubelet's walk order (names sorted,"
        " symlinks not followed), field by field (maps merge, lists are replaced).",
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
        " imagefs.available<15%, imagefs.inodesFree<5%). Repeatable.",
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
        "cgroupsPerQOS, default true: pods go in the kubepods/QoS hierarchy. As with the kubelet, a"
        " bare --cgroups-per-qos means true; turn it off with --cgroups-per-qos=false.",
        "[=BOOL]",
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
        "Leave hard-eviction thresholds out of Allocatable (default false). As with the"
        " kubelet, the bare flag means true; =true or =false give the value.",
        "[=BOOL]",
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
        "feature_gates",
        ("--feature-gates",),
        "Kubelet feature gates (featureGates), e.g. MemoryQoS=true,QOSReserved=true. Honoured:"
        " QOSReserved (qosReserved tier limits), MemoryQoS (memory.min/low; on by default from"
        " 1.37; memoryReservationPolicy comes from --config), PodLevelResources,"
        " CustomCPUCFSQuotaPeriod; AllAlpha/AllBeta too; other well-formed gates are ignored."
        " Repeatable.",
        "GATE=BOOL,...",
        True,
        "feature-gates",
    ),
    _Opt(
        "cpu_cfs_quota",
        ("--cpu-cfs-quota",),
        "Enforce CPU limits with CFS quota (cpuCFSQuota, default true); =false gives pods"
        " unlimited quota.",
        "[=BOOL]",
        False,
        "cpu-cfs-quota",
    ),
    _Opt(
        "cpu_cfs_quota_period",
        ("--cpu-cfs-quota-period",),
        "CFS period of pod cgroups (cpuCFSQuotaPeriod, default 100ms); another value needs the"
        " CustomCPUCFSQuotaPeriod gate.",
        "DURATION",
        False,
        "cpu-cfs-quota-period",
    ),
    _Opt(
        "pod_manifest_path",
        ("--pod-manifest-path",),
        "Static pod directory or file (staticPodPath); setup --static-pods reads it.",
        "PATH",
        False,
        "pod-manifest-path",
    ),
    _Opt(
        "max_pods",
        ("--max-pods",),
        "Pods this node takes (maxPods, default 110); shown as pods in Capacity and Allocatable.",
        "N",
        False,
        "max-pods",
    ),
    _Opt(
        "pods_per_core",
        ("--pods-per-core",),
        "Pods per core (podsPerCore, default 0 = no cap); above 0, pods = min(N × cores, maxPods).",
        "N",
        False,
        "pods-per-core",
    ),
    _Opt(
        "cpu_manager_policy",
        ("--cpu-manager-policy",),
        "CPU manager policy (cpuManagerPolicy): none (default; kubepods and enforced reserved"
        " cgroups get a cpuset of all CPUs) or static (needs a CPU reservation).",
        "none|static",
        False,
        "cpu-manager-policy",
    ),
    _Opt(
        "cpu_manager_policy_options",
        ("--cpu-manager-policy-options",),
        "Static policy options (cpuManagerPolicyOptions), e.g. strict-cpu-reservation=true,"
        " which keeps pods (kubepods' cpuset) off the reserved CPUs. Repeatable.",
        "NAME=VALUE,...",
        True,
        "cpu-manager-policy-options",
    ),
    _Opt(
        "kubelet_version",
        ("--kubelet-version",),
        versions.help_text(),
        "MINOR",
        False,
        "kubelet-version",
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
        " ephemeral-storage, pid or hugepages-<size> (a power of two from 64Ki to 16Gi),"
        " e.g. cpu=16,memory=64Gi. Resources not"
        " given are read from this host. Repeatable.",
        "NAME=QTY,...",
        True,
        "capacity",
    ),
)


class NodeInputs(NamedTuple):
    """The shared options of one command invocation, --match-kubelet already resolved."""

    flags: dict[str, list[str]]  # kubelet flag name -> occurrences, as given
    config: str | None = None
    config_dir: str | None = None
    node_config: str | None = None
    allow_driver_mismatch: bool = False
    host: Host | None = None  # the machine matched and checked; None: this one
    matched: dict | None = None  # --match-kubelet's document (what it read), None without it
    driver_flag: str | None = None  # where a --cgroup-driver flag came from
    endpoint: str | None = None  # the kubelet's --container-runtime-endpoint, when matched

    def load_config(self) -> NodeConfig:
        """The merged, validated NodeConfig; raises InputError with every problem."""
        cfg = load_node_config(
            self.flags,
            config=self.config,
            config_dir=self.config_dir,
            node_config=self.node_config,
            online_cpus=online_cpus,
        )
        note = dropin_root_note(self.config_dir) if self.config_dir else None
        warn([note] if note else [])
        return cfg

    def load(self) -> tuple[NodeConfig, ResourceList]:
        """``(NodeConfig, capacity)``: this host's capacity with ``--capacity`` applied."""
        cfg = self.load_config()
        return cfg, node_capacity(cfg)

    def document(self) -> dict:
        """What --match-kubelet read, for a command's -o json document."""
        return {} if self.matched is None else {"kubeletInputs": self.matched}

    def check_drivers(self, cfg: NodeConfig, refuse: bool = False) -> list[str]:
        """The cgroup-driver problems of ``cfg`` on this node, as warnings; with ``refuse``
        (setup) an InputError instead, unless --allow-driver-mismatch."""
        from cgalloc.host.machine import Host
        from cgalloc.ops.kubelet_match import driver_problems

        problems, warnings = driver_problems(
            self.host or Host(),
            cfg,
            config=self.config,
            config_dir=self.config_dir,
            endpoint=self.endpoint,
            driver_flag=self.driver_flag,
        )
        if problems and refuse and not self.allow_driver_mismatch:
            raise InputError(problems)
        return problems + warnings


# The kubelet's boolean flags (pflag NoOptDefVal "true"): their value only ever follows '='.
BOOL_OPTIONS = {
    f"--{o.flag}": BY_FLAG[o.flag] for o in _OPTIONS if o.flag and BY_FLAG[o.flag].kind == "bool"
}


def pflag_bools(args: list[str]) -> list[str]:
    """``args`` with each bare boolean flag made ``--flag=true``, as pflag reads it.

    pflag never takes a boolean's value from the next argument; the kubelet would treat it as
    a stray positional argument, so a true/false word there is refused with the form to use.
    """
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":  # end of options: the rest is positional
            return out + args[i:]
        field = BOOL_OPTIONS.get(arg)
        if field is None:
            out.append(arg)
            continue
        following = args[i + 1] if i + 1 < len(args) else None
        if following in BOOL_WORDS:
            raise InputError(
                f"{field.label}: a boolean flag takes its value after '=', as in"
                f" {arg}={following}; a bare {arg} means true."
            )
        out.append(f"{arg}=true")
    return out


def node_inputs_from(
    values: dict[str, Any], host: Host | None = None, match: bool = True
) -> NodeInputs:
    """The ``NodeInputs`` of a command's parsed option values (by parameter name), with
    --match-kubelet resolved on ``host`` (this machine when None; ``match`` False leaves it
    out, for a caller that only checks the other options)."""
    flags: dict[str, list[str]] = {}
    files: dict[str, str | None] = {}
    for opt in _OPTIONS:
        value = values.get(opt.name)
        if opt.switch:
            continue
        if opt.flag is None:
            files[opt.name] = value
        elif value is not None:
            flags[opt.flag] = list(value) if opt.multiple else [value]
    given = NodeInputs(
        flags=flags,
        allow_driver_mismatch=bool(values.get("allow_driver_mismatch")),
        host=host,
        driver_flag="--cgroup-driver given here" if "cgroup-driver" in flags else None,
        **files,
    )
    if match and values.get("match_kubelet"):
        return _matched(given)
    if not any(files.values()) and not set(flags) - {"capacity", "kubelet-version"}:
        from cgalloc.host.machine import Host
        from cgalloc.ops.kubelet_match import unused_config_note

        note = unused_config_note(host or Host())
        warn([note] if note else [])
    return given


def _matched(given: NodeInputs) -> NodeInputs:
    """``given`` over the node kubelet's inputs; what was read said on stderr."""
    from cgalloc.host.machine import Host
    from cgalloc.ops.kubelet_match import match_kubelet

    m = match_kubelet(given.host or Host(), read_version="kubelet-version" not in given.flags)
    flags = {**m.flags, **given.flags}
    if m.version is not None and "kubelet-version" not in given.flags:
        flags["kubelet-version"] = [m.version]
    won = [f"--{f}" for f in given.flags if f in m.flags or f == "kubelet-version"]
    won += [f"--{o.replace('_', '-')}" for o in ("config", "config_dir") if getattr(given, o)]
    notes = list(m.notes)
    if won:
        used = ", ".join(won)
        notes.append(f"--match-kubelet: given here, so the kubelet's are not used: {used}.")
    for line in notes:
        echo(f"cgalloc: {printable(line)}", err=True)
    warn(m.warnings)
    driver_flag = given.driver_flag
    if driver_flag is None and "cgroup-driver" in m.flags:
        driver_flag = "--cgroup-driver on the kubelet's command line"
    return given._replace(
        flags=flags,
        config=given.config or m.config,
        config_dir=given.config_dir or m.config_dir,
        matched={**m.doc, "givenHere": won},
        driver_flag=driver_flag,
        endpoint=m.endpoint,
    )


CAPACITY_IS_PLANNED = (
    "--capacity plans another node type: this compares the live tree with that node's limits, "
    "not with this node's."
)


