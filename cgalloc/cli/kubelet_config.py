"""``cgalloc kubelet-config``: the KubeletConfiguration (and flags) matching what setup makes."""

from __future__ import annotations

import typer

from cgalloc.cli.inputs import NodeInputs, NodeInputsCommand, node_inputs
from cgalloc.cli.render import OutputFormat, dumps, emit, output_option
from cgalloc.config import DEFAULT_CFS_PERIOD_US, NodeConfig, go_duration
from cgalloc.limits import format_cpuset
from cgalloc.tree import UNIT_SUFFIXES

HELP = (
    "Print the KubeletConfiguration fragment (YAML) and the equivalent kubelet flags for these "
    "inputs, so the kubelet enforces exactly the tree setup created."
)


def _resources(rl) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(rl.items())}


def _unit_path_kinds(cfg: NodeConfig) -> frozenset[str]:
    """Reserved kinds ("kube", "system") whose cgroup the kubelet's systemd driver cannot name.

    The kubelet keeps only the basename of a systemd cgroup and appends ".slice", so a unit path
    such as /system.slice/kubelet.service would become /kubelet.service.slice (kubernetes#110288).
    """
    if cfg.cgroup_driver != "systemd":
        return frozenset()
    return frozenset(
        kind
        for kind, value in (
            ("kube", cfg.kube_reserved_cgroup),
            ("system", cfg.system_reserved_cgroup),
        )
        if value and value.rstrip("/").endswith(UNIT_SUFFIXES)
    )


def fragment(cfg: NodeConfig) -> tuple[dict, list[str], list[str]]:
    """(KubeletConfiguration fields, kubelet flags, notes) for ``cfg``.

    A reserved cgroup given as a systemd unit path is left to cgalloc: the fragment names neither
    the cgroup nor its enforcement, so the kubelet starts and cgalloc keeps the limits.
    """
    unit_kinds = _unit_path_kinds(cfg)
    enforce = [
        e
        for e in cfg.enforce_node_allocatable
        if e.removesuffix("-compressible").removesuffix("-reserved") not in unit_kinds
    ] or ["none"]
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
    notes: list[str] = []
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
        if flag.split("-")[0] in unit_kinds:
            notes.append(
                f"{key} {value} is a systemd unit path, which the kubelet's systemd driver cannot "
                "take (it would look for /<unit>.slice); cgalloc enforces that cgroup, so this "
                f"fragment leaves {key} and {flag.removesuffix('-cgroup')} enforcement out."
            )
            continue
        doc[key] = value
        flags.append(f"--{flag}={value}")
    if cfg.reserved_cpus:
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
    if cfg.ignore_eviction:
        flags.append("--experimental-allocatable-ignore-eviction=true")
        notes.append(
            "--experimental-allocatable-ignore-eviction has no KubeletConfiguration field; "
            "pass the flag."
        )
    return doc, flags, notes


def _yaml(doc: dict, flags: list[str], notes: list[str]) -> str:
    head = ["# KubeletConfiguration matching the tree `cgalloc setup` creates for these inputs"]
    head += [f"# NOTE: {n}" for n in notes]
    tail = ["# equivalent kubelet flags:", *(f"#   {f}" for f in flags)]
    return "\n".join([*head, dumps(doc, OutputFormat.yaml), *tail])


def register(app: typer.Typer) -> None:
    """Add ``kubelet-config`` to the app."""

    @app.command("kubelet-config", help=HELP, cls=NodeInputsCommand)
    @node_inputs
    def kubelet_config(inputs: NodeInputs, output: OutputFormat = output_option()) -> None:
        cfg = inputs.load_config()
        doc, flags, notes = fragment(cfg)
        if output is OutputFormat.json:
            emit({"config": doc, "flags": flags, "notes": notes}, output, str)
        else:
            typer.echo(_yaml(doc, flags, notes))
