"""``cgalloc show``: Capacity and Allocatable as ``kubectl describe node`` prints them, the cgroup
limits that enforcing them would write, and what each reservation and threshold took."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

import typer

from cgalloc.cli.inputs import NodeInputs
from cgalloc.cli.options import cgroupfs_option, output_option, pods_option
from cgalloc.cli.render import OutputFormat, aligned, emit, warn
from cgalloc.cli.signature import NodeInputsCommand, node_inputs
from cgalloc.errors import HostError, InputError
from cgalloc.host.capacity import online_cpus
from cgalloc.host.cgroupfs import detect
from cgalloc.model import naming, tree
from cgalloc.model.allocatable import (
    Allocatable,
    CpuSets,
    check_enforceable,
    compute,
    cpu_sets,
    pods_capacity,
)
from cgalloc.model.cpuset import node_cpus
from cgalloc.model.limits import format_cpuset
from cgalloc.model.nodeconfig import NodeConfig, enforcement_warnings
from cgalloc.model.resources import format_list

if TYPE_CHECKING:
    from cgalloc.model.hierarchy import Hierarchy
    from cgalloc.model.podresources import PodCgroup

SHOW_HELP = (
    "Show this node's Capacity and Allocatable (as `kubectl describe node` prints them, pods"
    " included), the kubelet version matched, the CPU manager policy in effect, the kubepods"
    " and reserved-cgroup limits enforcing them would write (cpuset included), and what every"
    " reservation and eviction threshold took. Reads no cgroup and needs no privileges. Exit "
    "status 2 when the kubelet would refuse the configuration, by its validation or its "
    "start-up checks (a reservation above capacity, an enforced reservation left empty): "
    "the figures are still printed, the reason goes to stderr."
)
EXAMPLES = (
    "cgalloc show --match-kubelet                     # this node, as its kubelet is set up",
    "cgalloc show --config /var/lib/kubelet/config.yaml",
    "cgalloc show --capacity cpu=16,memory=64Gi,pid=4194304,ephemeral-storage=500Gi \\",
    "    --kube-reserved cpu=500m,memory=1Gi -o json    # another node type",
    "cgalloc show --config /var/lib/kubelet/config.yaml --pods pods.yaml   # each pod's cgroup",
)


def _with_cpuset(limits: dict[str, str], cpus: frozenset[int] | None) -> dict[str, str]:
    return limits if cpus is None else {**limits, "cpuset": format_cpuset(cpus)}


def _cgroups(cfg: NodeConfig, alloc: Allocatable, sets: CpuSets) -> dict[str, dict]:
    """The kubepods and enforced reserved cgroups: name, mode and limits."""
    out: dict[str, dict] = {
        "kubepods": {
            "cgroup": naming.kubepods_path(cfg),
            "enforced": cfg.cgroups_per_qos and "pods" in cfg.enforce_node_allocatable,
            "limits": _with_cpuset(format_list(alloc.kubepods), sets.kubepods),
        }
    }
    for kind, key, limits in (
        ("kube-reserved", "kubeReserved", alloc.kube_reserved),
        ("system-reserved", "systemReserved", alloc.system_reserved),
    ):
        if limits is None:
            continue
        compressible = f"{kind}-compressible" in cfg.enforce_node_allocatable
        kubelets, real = naming.reserved_paths(cfg, kind)
        out[key] = {
            "cgroup": kubelets,
            "enforced": "compressible" if compressible else "full",
            "limits": _with_cpuset(format_list(limits), sets.reserved_cgroups),
        }
        if real != kubelets:
            out[key]["alsoLimits"] = real
    return out


def result(cfg: NodeConfig, alloc: Allocatable, cpus: frozenset[int]) -> dict:
    """The JSON/YAML document of ``show``; ``cpus`` are the node's CPUs."""
    sets = cpu_sets(cfg, cpus)
    cgroups = _cgroups(cfg, alloc, sets)
    return {
        "capacity": format_list(alloc.capacity),
        "allocatable": format_list(alloc.allocatable),
        **cgroups,
        "cgroupDriver": cfg.cgroup_driver,
        "kubeletVersion": cfg.kubelet_version,
        "cpuManagerPolicy": sets.policy,
        "breakdown": [
            {
                "resource": t.resource,
                "source": t.source,
                "quantity": str(t.quantity),
                "lowers": list(t.lowers),
            }
            for t in alloc.breakdown
        ],
        "warnings": [
            *alloc.warnings,
            *naming.naming_notes(cfg),
            *sets.notes,
            *enforcement_warnings(cfg),
            *naming.setup_refusals(naming.role_paths(cfg)),
        ],
    }


def pods_doc(
    cfg: NodeConfig,
    pods: list[PodCgroup],
    files: Mapping[str, dict[str, str]] | None = None,
) -> list[dict]:
    """Each pod's QoS class, cgroup and the values the kubelet gives it (show --pods); with
    ``files`` (pod uid → file → value), every file the kubelet writes, as this host's hierarchy
    names it."""
    if not cfg.cgroups_per_qos:
        return []
    kubepods = naming.kubepods_cgroup(cfg)
    out = []
    for pod in pods:
        lim = pod.limits
        quota = "-" if lim.cpu_quota is None else "max" if lim.cpu_quota < 0 else str(lim.cpu_quota)
        entry = {
            "pod": pod.name,
            "qos": pod.qos,
            "cgroup": naming.pod_path(kubepods, pod, naming.driver(cfg.cgroup_driver)),
            "cpuShares": str(lim.cpu_shares),
            "cpuQuota": quota if lim.cpu_period is None else f"{quota}/{lim.cpu_period}",
            "memory": "-" if lim.memory is None else str(lim.memory),
        }
        if files is not None:
            entry["files"] = files[pod.uid]
        out.append(entry)
    return out


def pod_files(
    cfg: NodeConfig, alloc: Allocatable, pods: list[PodCgroup], h: Hierarchy
) -> dict[str, dict[str, str]]:
    """pod uid → every file the kubelet writes to its cgroup in ``h`` and the value: v2 names
    the file alone, v1 ``controller/file`` (pids.max, hugetlb for every page size included,
    0 where the pod asked for none)."""
    from cgalloc.model.hierarchy import limit_files
    from cgalloc.model.limits import hugepage_limits

    sizes = [size for size, _ in hugepage_limits(alloc.capacity)]
    v2 = h.version == "v2"
    out = {}
    for pod in pods:
        limits = tree.pod_limits(pod, sizes)
        out[pod.uid] = {
            file if v2 else f"{controller}/{file}": value
            for controller, file, value in limit_files(h, limits)
            if controller in h.controllers
        }
    return out


def _section(title: str, values: Mapping[str, str], indent: str = "  ") -> list[str]:
    return [title, *aligned([(f"{indent}{k}:", v) for k, v in values.items()])]


def table(doc: dict) -> str:
    """``doc`` in the kubectl-describe layout."""
    lines = _section("Capacity:", doc["capacity"]) + _section("Allocatable:", doc["allocatable"])
    lines.append(f"Kubelet matched: {doc['kubeletVersion']}")
    lines.append(f"CPU manager policy: {doc['cpuManagerPolicy']}")
    lines.append(f"Cgroup limits ({doc['cgroupDriver']} driver):")
    for kind, key in (
        ("kubepods", "kubepods"),
        ("kube-reserved", "kubeReserved"),
        ("system-reserved", "systemReserved"),
    ):
        entry = doc.get(key)
        if entry is None:
            continue
        name = entry["cgroup"] or "(none: cgroupsPerQOS is false)"
        mode = entry["enforced"]
        note = {True: "enforced", False: "not enforced: full capacity"}.get(mode, mode)
        lines += _section(f"  {kind} {name} ({note}):", entry["limits"], indent="    ")
        if "alsoLimits" in entry:
            lines.append(f"    (the same limits also on {entry['alsoLimits']})")
    lines.append("Breakdown:")
    rows = [("  RESOURCE", "SOURCE", "QUANTITY", "LOWERS")]
    rows += [
        (f"  {t['resource']}", t["source"], t["quantity"], ", ".join(t["lowers"]) or "nothing")
        for t in doc["breakdown"]
    ]
    lines += aligned(rows) if doc["breakdown"] else ["  (nothing reserved)"]
    if doc.get("pods"):
        lines.append("Pods:")
        rows = [("  POD", "QOS", "CGROUP", "CPU SHARES", "CPU QUOTA/PERIOD", "MEMORY")]
        rows += [
            (f"  {p['pod']}", p["qos"], p["cgroup"], p["cpuShares"], p["cpuQuota"], p["memory"])
            for p in doc["pods"]
        ]
        lines += aligned(rows)
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add ``show`` to the app."""

    @app.command("show", help=SHOW_HELP, cls=NodeInputsCommand)
    @node_inputs
    def show(
        ctx: typer.Context,
        inputs: NodeInputs,
        output: OutputFormat = output_option(),
        pods: list[str] = pods_option(),
        cgroupfs: str = cgroupfs_option(),
        static_pods: bool = typer.Option(
            False, "--static-pods", help="Also the static pods in staticPodPath"
            " (--pod-manifest-path).",
        ),
    ) -> None:
        cfg, capacity = inputs.load()
        alloc = compute(cfg, capacity)
        cpus = node_cpus(cfg.capacity_overrides, online_cpus)
        doc = result(cfg, alloc, cpus)
        doc.update(inputs.document())
        doc["warnings"] += inputs.check_drivers(cfg)
        cgroups: list[PodCgroup] = []
        paths = list(pods)
        if static_pods:
            if not cfg.static_pod_path:
                raise InputError(
                    "--static-pods needs staticPodPath (--pod-manifest-path): the directory or"
                    " file the kubelet reads static pods from."
                )
            paths.append(cfg.static_pod_path)
        if paths:
            # Imported only when pods are given: YAML, the pod model and their records.
            from cgalloc.inputs.pods import load_pods, pod_cgroups, resize_warnings

            # show reads no cgroup: the values are cgroup v1's (v2's adds memory.min/low with
            # MemoryQoS), and "files" names what the host's hierarchy, when there is one, has
            loaded = load_pods(paths, pods_capacity(cfg, capacity).value())
            doc["warnings"] += resize_warnings(loaded)
            cgroups = pod_cgroups(loaded, cfg, cgroup_v2=False)
            files = None
            with contextlib.suppress(HostError):  # no cgroup hierarchy here: no files
                h = detect(cgroupfs, ctx.obj.mountinfo)
                on_host = pod_cgroups(loaded, cfg, cgroup_v2=h.version == "v2")
                files = pod_files(cfg, alloc, on_host, h)
            doc["pods"] = pods_doc(cfg, cgroups, files)
            pod_paths = (("pod", p["cgroup"].lstrip("/")) for p in doc["pods"])
            doc["warnings"] += naming.setup_refusals(pod_paths)
        doc["warnings"] += tree.value_refusals(cfg, alloc, cgroups, cpus)
        version = "v2"  # no hierarchy here: the weights of v2, where nodes are going
        with contextlib.suppress(HostError):
            version = detect(cgroupfs, ctx.obj.mountinfo).version
        doc["warnings"] += tree.assumed_contention(cfg, alloc, version)
        warn(doc["warnings"])
        emit(doc, output, lambda: table(doc))
        # validateNodeAllocatable / enforceNodeAllocatableCgroups (pkg/kubelet/cm): the kubelet
        # would not start with it
        check_enforceable(alloc)
