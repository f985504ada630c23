"""``cgalloc kubelet-config``: the KubeletConfiguration (and flags) matching what setup makes."""

from __future__ import annotations

import enum

import typer

from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.optspec import Opt
from cgalloc.cli.render import OutputFormat, dumps, echo, printable, warn
from cgalloc.cli.signature import NodeInputsCommand, node_inputs, typer_option
from cgalloc.inputs.fields import BY_CONFIG
from cgalloc.inputs.validate import go_duration
from cgalloc.model import naming
from cgalloc.model.nodeconfig import (
    DEFAULT_CFS_PERIOD_US,
    DEFAULT_MAX_PODS,
    NodeConfig,
    enforcement_warnings,
)

HELP = (
    "Print the KubeletConfiguration fragment for these inputs, so the kubelet enforces exactly "
    "the tree setup created: YAML (with the equivalent flags as comments), the same document "
    "as JSON, or the kubelet flags one per line. Notes on fields without a flag (or flags "
    "without a field) go to stderr."
)


class Format(str, enum.Enum):
    """What kubelet-config prints."""

    yaml = "yaml"
    json = "json"
    flags = "flags"


OUTPUT = Opt(
    "output", ("--output", "-o"), Format, Format.yaml,
    "yaml (the fragment, with the equivalent flags as comments), json (the same document) or"
    " flags (the kubelet flags, one per line).",
)  # fmt: skip
EXAMPLES = (
    "cgalloc kubelet-config --kube-reserved cpu=500m,memory=1Gi --kube-reserved-cgroup /kube.slice",
    "cgalloc kubelet-config --config /var/lib/kubelet/config.yaml -o json",
    "cgalloc kubelet-config --kube-reserved cpu=500m,memory=1Gi -o flags >> kubelet.env",
)


def _resources(rl) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(rl.items())}


def daemon_cgroups(cfg: NodeConfig) -> dict[str, str]:
    """kubeletCgroups, runtimeCgroups and systemCgroups for the cgroups setup makes.

    The kubelet opens these as literal cgroupfs paths under either driver (newSystemCgroups in
    pkg/kubelet/cm), moves itself into kubeletCgroups and the root cgroup's processes (but
    pid 1 and kernel threads) into systemCgroups. Under cgroupfs the daemons are in the
    kube-reserved cgroup itself (``--kube-reserved-procs``); under systemd each unit is in the
    kube-reserved slice (``install-unit --daemons``), so its cgroup is ``<slice path>/<unit>``.
    Only the reserved cgroups setup makes (enforced ones) are used; values given in the inputs
    are kept.
    """
    out: dict[str, str] = {}
    if cfg.enforces("kube-reserved") and cfg.kube_reserved_cgroup:
        _, kube = naming.reserved_paths(cfg, "kube-reserved")
        if not naming.driver(cfg.cgroup_driver).slices:
            out["kubeletCgroups"] = out["runtimeCgroups"] = kube
        else:
            from cgalloc.ops.bootunit import DAEMON_UNITS  # imports D-Bus code: this driver only

            if kube.endswith(".slice"):
                out["kubeletCgroups"] = f"{kube}/{DAEMON_UNITS['kubelet']}"
                out["runtimeCgroups"] = f"{kube}/{DAEMON_UNITS['containerd']}"
            elif kube.endswith("/" + DAEMON_UNITS["kubelet"]):
                out["kubeletCgroups"] = kube  # the reservation is the kubelet's own unit
    if cfg.enforces("system-reserved") and cfg.system_reserved_cgroup:
        _, system = naming.reserved_paths(cfg, "system-reserved")
        if system != "/":
            out["systemCgroups"] = system
    for key, given in (
        ("kubeletCgroups", cfg.kubelet_cgroups),
        ("runtimeCgroups", cfg.runtime_cgroups),
        ("systemCgroups", cfg.system_cgroups),
    ):
        if given:
            out[key] = given
    return dict(sorted(out.items()))


def fragment(cfg: NodeConfig) -> tuple[dict, list[str], list[str]]:
    """(KubeletConfiguration fields, kubelet flags, notes) for ``cfg``.

    The reserved cgroups are written as given: setup creates the cgroup the kubelet maps each
    value to (for a systemd unit path, the /<unit>.slice of kubernetes#110288), so the kubelet
    starts with the same values; a note names each such mapping. evictionHard is written whole,
    because a partial map in a main config file replaces the kubelet's defaults.
    """
    enforce = list(cfg.enforce_node_allocatable) or ["none"]
    doc: dict = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": cfg.cgroup_driver,
        "cgroupRoot": cfg.cgroup_root,
        "cgroupsPerQOS": cfg.cgroups_per_qos,
        "enforceNodeAllocatable": enforce,
        "evictionHard": {s: t.value for s, t in sorted(cfg.eviction_hard.items())},
    }
    flags = [
        f"--cgroup-driver={cfg.cgroup_driver}",
        f"--cgroup-root={cfg.cgroup_root}",
        f"--cgroups-per-qos={str(cfg.cgroups_per_qos).lower()}",
        f"--enforce-node-allocatable={','.join(enforce)}",
        "--eviction-hard=" + ",".join(str(t) for _, t in sorted(cfg.eviction_hard.items())),
    ]
    notes: list[str] = list(naming.naming_notes(cfg))
    for key, flag, rl in (
        ("kubeReserved", "kube-reserved", cfg.kube_reserved),
        ("systemReserved", "system-reserved", cfg.system_reserved),
    ):
        if rl:
            doc[key] = _resources(rl)
            flags.append(f"--{flag}=" + ",".join(f"{k}={v}" for k, v in _resources(rl).items()))
    for key, flag, value in (
        ("kubeReservedCgroup", "kube-reserved-cgroup", cfg.kube_reserved_cgroup),
        ("systemReservedCgroup", "system-reserved-cgroup", cfg.system_reserved_cgroup),
    ):
        if not value:
            continue
        doc[key] = value
        flags.append(f"--{flag}={value}")
    daemons = daemon_cgroups(cfg)
    for key, value in daemons.items():
        doc[key] = value
        flags.append(f"--{BY_CONFIG[key].flag}={value}")
    slices = naming.driver(cfg.cgroup_driver).slices
    if "runtimeCgroups" in daemons and slices and not cfg.runtime_cgroups:
        notes.append(
            "runtimeCgroups names containerd's unit; with CRI-O use "
            f"{daemons['runtimeCgroups'].rsplit('/', 1)[0]}/crio.service."
        )
    if "systemCgroups" in daemons:
        notes.append(
            "with systemCgroups the kubelet moves every process of the root cgroup (but pid 1 "
            "and kernel threads) into it."
        )
    if cfg.reserved_cpus:
        from cgalloc.model.limits import (
            format_cpuset,  # most nodes reserve none: import when needed
        )

        doc["reservedSystemCPUs"] = format_cpuset(cfg.reserved_cpus)
        flags.append(f"--reserved-cpus={doc['reservedSystemCPUs']}")
    if cfg.qos_reserved:
        doc["qosReserved"] = {k: f"{v}%" for k, v in sorted(cfg.qos_reserved.items())}
        flags.append(
            "--qos-reserved=" + ",".join(f"{k}={v}" for k, v in doc["qosReserved"].items())
        )
    if cfg.feature_gates:
        doc["featureGates"] = dict(sorted(cfg.feature_gates.items()))
        gates = ",".join(f"{k}={str(v).lower()}" for k, v in doc["featureGates"].items())
        flags.append(f"--feature-gates={gates}")
    if not cfg.cpu_cfs_quota:
        doc["cpuCFSQuota"] = False
        flags.append("--cpu-cfs-quota=false")
    if cfg.cpu_cfs_quota_period != DEFAULT_CFS_PERIOD_US:
        doc["cpuCFSQuotaPeriod"] = go_duration(cfg.cpu_cfs_quota_period * 1000)
        flags.append(f"--cpu-cfs-quota-period={doc['cpuCFSQuotaPeriod']}")
    if cfg.static_pod_path:
        doc["staticPodPath"] = cfg.static_pod_path
        flags.append(f"--pod-manifest-path={cfg.static_pod_path}")
    if cfg.pod_max_pids != -1:
        doc["podPidsLimit"] = cfg.pod_max_pids
        flags.append(f"--pod-max-pids={cfg.pod_max_pids}")
    for key, flag, value, default in (
        ("maxPods", "max-pods", cfg.max_pods, DEFAULT_MAX_PODS),
        ("podsPerCore", "pods-per-core", cfg.pods_per_core, 0),
    ):
        if value != default:
            doc[key] = value
            flags.append(f"--{flag}={value}")
    if cfg.cpu_manager_policy != "none":
        doc["cpuManagerPolicy"] = cfg.cpu_manager_policy
        flags.append(f"--cpu-manager-policy={cfg.cpu_manager_policy}")
    if cfg.cpu_manager_policy_options:
        doc["cpuManagerPolicyOptions"] = dict(sorted(cfg.cpu_manager_policy_options.items()))
        # one flag per option: the kubelet's NoSplit map takes "a=x,b=y" as option a = "x,b=y"
        flags.extend(
            f"--cpu-manager-policy-options={k}={v}"
            for k, v in doc["cpuManagerPolicyOptions"].items()
        )
    if cfg.memory_reservation_policy != "None":
        doc["memoryReservationPolicy"] = cfg.memory_reservation_policy
        notes.append("memoryReservationPolicy has no kubelet flag; put it in the config file.")
    if cfg.ignore_eviction:
        flags.append("--experimental-allocatable-ignore-eviction=true")
        notes.append(
            "--experimental-allocatable-ignore-eviction has no KubeletConfiguration field; "
            "pass the flag."
        )
    return doc, flags, notes


def _yaml(doc: dict, flags: list[str]) -> str:
    head = ["# KubeletConfiguration matching the tree `cgalloc setup` creates for these inputs"]
    tail = ["# equivalent kubelet flags:", *(f"#   {f}" for f in flags)]
    return "\n".join([*head, dumps(doc, OutputFormat.yaml), *tail])


def register(app: typer.Typer) -> None:
    """Add ``kubelet-config`` to the app."""

    @app.command("kubelet-config", help=HELP, cls=NodeInputsCommand)
    @node_inputs
    def kubelet_config(inputs: NodeInputs, output: Format = typer_option(OUTPUT)) -> None:
        cfg = inputs.load_config()
        warn([*enforcement_warnings(cfg), *naming.setup_refusals(naming.role_paths(cfg))])
        doc, flags, notes = fragment(cfg)
        warn(notes, "note")
        if output is Format.json:
            echo(dumps(doc, OutputFormat.json))
        elif output is Format.flags:
            echo(printable("\n".join(flags)))
        else:
            echo(printable(_yaml(doc, flags)))  # the flags' comment quotes names
