"""``--pods``: Pod objects from manifests, lists and static-pod directories, and their cgroups.

Accepted, as JSON or YAML: one Pod manifest; a multi-document stream of Pods and lists; a
``kind: List`` or ``PodList`` (``kubectl get pods -A -o json``); a directory read as the kubelet
reads ``staticPodPath`` (``pkg/kubelet/config/file.go``: regular files whose names do not start
with '.', in name order, one Pod each, subdirectories skipped). Pods in phase Succeeded or Failed
are skipped: the kubelet keeps no cgroup for them.

Symlinks in a static-pod directory are followed, as the kubelet follows them: ``listConfig``
and ``extractFromDir`` take ``os.Stat`` of the path and of each entry (a link to a regular file
is read with ``os.Open``, one to a directory is not recursed into, a dangling one or a FIFO is
skipped). A walk that followed none would plan no cgroup for a pod the kubelet runs; anyone who
can put a link there can put a manifest there, and run a pod as root. What is read is bounded
and must be a regular file when opened (:func:`cgalloc.inputs.loading.read_bounded`), so a link
to a FIFO or a device cannot block or exhaust the run.

The pod cgroup is named from the UID the kubelet uses: ``metadata.uid``, or for a mirror pod
(annotation ``kubernetes.io/config.mirror``) the static pod's UID in ``kubernetes.io/config.hash``.
A static manifest without ``metadata.uid`` is refused: the kubelet hashes the Go object dump with
the node name and file path (``config/common.go`` ``applyDefaults``), which cannot be reproduced
outside the kubelet; its mirror pod's ``kubernetes.io/config.hash`` annotation holds the result.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cgalloc.errors import InputError
from cgalloc.inputs.loading import load_yaml_documents, read_bounded
from cgalloc.model import features
from cgalloc.model.podresources import (
    QOS_CLASSES,
    Container,
    Pod,
    PodCgroup,
    as_read_by,
    resource_config,
    sidecar_refusal,
)
from cgalloc.model.podresources import with_defaults as pod_defaults
from cgalloc.model.quantity import Quantity, QuantityError
from cgalloc.model.resources import ResourceList, hugepage_size_bytes, is_hugepages

if TYPE_CHECKING:
    from cgalloc.model.nodeconfig import NodeConfig

FIELD = "--pods"
LIMIT = 64 << 20  # a whole cluster's `kubectl get pods -A -o json` can be tens of MB
MIRROR = "kubernetes.io/config.mirror"
CONFIG_HASH = "kubernetes.io/config.hash"
TERMINAL = ("Succeeded", "Failed")
LIST_KINDS = ("List", "PodList")
FORM = (
    "a Pod manifest, a multi-document YAML of Pods, a List or PodList (kubectl get pods -o json),"
    " or a static-pod directory"
)
# fullmatch, not match with "$": Python's "$" also matches before a trailing newline
_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
# Resource names a pod may hold (others, e.g. extended resources, do not touch the cgroup).
_NAME = re.compile(r"([A-Za-z0-9.-]+/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?")


# Manifests repeat the same few quantities; Quantity is immutable, so parse each text once.
_parse_quantity = functools.lru_cache(maxsize=4096)(Quantity.parse)


def _json_or_yaml(text: str, field: str) -> list[object]:
    # json.loads is far faster for kubectl's JSON output; anything else goes through YAML.
    if text.lstrip()[:1] in ("{", "["):
        try:
            return [json.loads(text)]
        except (ValueError, RecursionError):
            pass  # the YAML path below says what is wrong, with its depth and size bounds
    return load_yaml_documents(text, field)


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, text: str) -> None:
        self.items.append(f"{FIELD} {where}: {text}")


def _mapping(value: object, where: str, key: str, problems: _Problems) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(where, f"{key} is not a mapping; expected {FORM}.")
        return {}
    return value


def _resource_list(value: object, where: str, key: str, problems: _Problems) -> ResourceList:
    out: ResourceList = {}
    for name, raw in _mapping(value, where, key, problems).items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.add(where, f"{key} has an invalid resource name {name!r}.")
            continue
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            problems.add(where, f"{key}.{name} {raw!r} is not a quantity such as 500m or 1Gi.")
            continue
        try:
            q = _parse_quantity(str(raw))
        except QuantityError:
            problems.add(where, f"{key}.{name} {raw!r} is not a quantity such as 500m or 1Gi.")
            continue
        if q.sign() < 0:
            problems.add(where, f"{key}.{name} {raw!r} must be 0 or more.")
            continue
        if is_hugepages(name):
            try:
                hugepage_size_bytes(name)
            except ValueError as err:
                problems.add(where, f"{key}: {err}.")
                continue
        out[name] = q
    return out


def _overcommit_allowed(name: str) -> bool:
    """v1helper.IsOvercommitAllowed: a native resource (no domain, or kubernetes.io/) that is
    not hugepages; the others (hugepages, extended resources) must request their limit."""
    return ("/" not in name or "kubernetes.io/" in name) and not is_hugepages(name)


def _check_requests(
    requests: ResourceList, limits: ResourceList, at: str, where: str, problems: _Problems
) -> None:
    """ValidateResourceRequirements (pkg/apis/core/validation/validation.go), which the API
    server runs on every pod and the kubelet on every static pod (config/common.go
    tryDecodeSinglePod, ValidatePodCreate: it skips the manifest): a request above its limit,
    or a request of a resource that cannot be overcommitted that is not its limit."""
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is None:
            if not _overcommit_allowed(name):
                problems.add(
                    where,
                    f"{at}.limits: Required value: Limit must be set for non overcommitable"
                    f" resources ({name}).",
                )
        elif request != limit and not _overcommit_allowed(name):
            problems.add(
                where,
                f'{at}.requests: Invalid value: "{request}": must be equal to {name} limit'
                f" of {limit}.",
            )
        elif request > limit:
            problems.add(
                where,
                f'{at}.requests: Invalid value: "{request}": must be less than or equal to'
                f" {name} limit of {limit}.",
            )


def _containers(spec: dict, key: str, where: str, problems: _Problems) -> tuple[Container, ...]:
    items = spec.get(key) or []
    if not isinstance(items, list):
        problems.add(where, f"spec.{key} is not a list; expected {FORM}.")
        return ()
    out = []
    for i, item in enumerate(items):
        at = f"spec.{key}[{i}]"
        if not isinstance(item, dict):
            problems.add(where, f"{at} is not a mapping; expected {FORM}.")
            continue
        resources = _mapping(item.get("resources"), where, f"{at}.resources", problems)
        policy = item.get("restartPolicy")
        if policy is not None and (key != "initContainers" or policy != "Always"):
            # API validation: only init containers take restartPolicy, and only Always.
            problems.add(
                where,
                f"{at}.restartPolicy {policy!r} is not allowed; use Always on an init"
                " container or leave it out.",
            )
        requests = _resource_list(
            resources.get("requests"), where, f"{at}.resources.requests", problems
        )
        limits = _resource_list(resources.get("limits"), where, f"{at}.resources.limits", problems)
        _check_requests(requests, limits, f"{at}.resources", where, problems)
        out.append(
            Container(str(item.get("name", "")), requests, limits, restartable=policy == "Always")
        )
    return tuple(out)


def _uid(meta: dict, where: str, static_file: bool, problems: _Problems) -> str:
    annotations = meta.get("annotations") or {}
    uid = meta.get("uid")
    if isinstance(annotations, dict) and MIRROR in annotations:
        uid = annotations.get(CONFIG_HASH) or annotations.get(MIRROR)
    if uid is None or uid == "":
        hint = (
            "a static pod's UID is the hash the kubelet computes from its object, node name and"
            f" file path; copy it from the mirror pod's {CONFIG_HASH} annotation into"
            " metadata.uid"
            if static_file
            else "give the pod's metadata.uid (kubectl get pod -o json shows it)"
        )
        problems.add(where, f"metadata.uid is missing; {hint}.")
        return ""
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        problems.add(where, f"metadata.uid {uid!r} is not a UID such as 0f6e1d5c-...-7b2a.")
        return ""
    return uid


def parse_pod(doc: dict, where: str, problems: _Problems, static_file: bool = False) -> Pod | None:
    """One Pod object (already known to be kind Pod), or None when it has a problem or ended."""
    before = len(problems.items)
    meta = _mapping(doc.get("metadata"), where, "metadata", problems)
    spec = _mapping(doc.get("spec"), where, "spec", problems)
    status = _mapping(doc.get("status"), where, "status", problems)
    if status.get("phase") in TERMINAL:
        return None
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name') or '(unnamed)'}"
    where = f"{where} pod {name}"
    uid = _uid(meta, where, static_file, problems)
    containers = _containers(spec, "containers", where, problems)
    inits = _containers(spec, "initContainers", where, problems)
    if not containers and len(problems.items) == before:
        problems.add(where, "spec.containers is empty; a pod needs at least one container.")
    overhead = _resource_list(spec.get("overhead"), where, "spec.overhead", problems)
    pod_req = pod_lim = None
    if spec.get("resources") is not None:
        res = _mapping(spec.get("resources"), where, "spec.resources", problems)
        pod_req = _resource_list(res.get("requests"), where, "spec.resources.requests", problems)
        pod_lim = _resource_list(res.get("limits"), where, "spec.resources.limits", problems)
        _check_requests(pod_req, pod_lim, "spec.resources", where, problems)
    qos = status.get("qosClass") or ""
    if qos and qos not in QOS_CLASSES:
        problems.add(where, f"status.qosClass {qos!r} is not one of {', '.join(QOS_CLASSES)}.")
    pending = _resize_pending(status.get("conditions"), where, problems)
    if len(problems.items) != before:
        return None
    return Pod(uid, name, containers, inits, overhead, pod_req, pod_lim, str(qos), pending)


def _resize_pending(conditions: object, where: str, problems: _Problems) -> str:
    """The reason of a true ``PodResizePending`` condition ("pending" when it gives none), ""
    without one. The kubelet sets it while a resize is in spec but not in its allocation
    (k8s.io/api core/v1 PodResizePending; KEP-1287): it sizes the pod's cgroup from the
    allocation (allocation manager ``UpdatePodFromAllocation``), which no file shows. Once
    allocated (``PodResizeInProgress``) the kubelet applies spec's values, as cgalloc does."""
    if conditions is None:
        return ""
    if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
        problems.add(where, "status.conditions is not a list of mappings, as a Pod's status holds.")
        return ""
    for c in conditions:
        if c.get("type") == "PodResizePending" and c.get("status") == "True":
            reason = c.get("reason")
            return reason if isinstance(reason, str) and reason else "pending"
    return ""


def resize_warnings(pods: Sequence[Pod]) -> list[str]:
    """One warning per pod whose resize the kubelet has not allocated: cgalloc plans spec's
    values, the kubelet keeps the allocated ones until it can grant the resize."""
    return [
        f"pod {p.name}: its in-place resize is not allocated (PodResizePending, "
        f"{p.resize_pending}): the kubelet keeps the pod's cgroup at the resources it allocated "
        "before it, where cgalloc plans spec's; leave the pod out of --pods until it is."
        for p in pods
        if p.resize_pending
    ]


def _kind(doc: object) -> tuple[str, str]:
    if not isinstance(doc, dict):
        return "", ""
    return str(doc.get("apiVersion", "")), str(doc.get("kind", ""))


class _Admitted(list):
    """The pods so far; past the node's pod capacity, the refusal, at once (a list of 700,000
    pods would take minutes and gigabytes to model)."""

    def __init__(self, admits: int | None) -> None:
        super().__init__()
        self.admits = admits
        self.uids: set[str] = set()  # a pod given twice (a mirror pod and its manifest) is one

    def add(self, pod: Pod) -> None:
        self.append(pod)
        self.uids.add(pod.uid)
        if self.admits is not None and len(self.uids) > self.admits:
            raise InputError(
                f"{FIELD}: more than {self.admits} pods, and this node admits at most"
                f" {self.admits} (maxPods (--max-pods), podsPerCore): past that the kubelet"
                " admits a pod only in another's place (OutOfpods); give this node's pods"
                " only, e.g. kubectl get pods -A -o json --field-selector spec.nodeName=NODE."
            )


def _objects(doc: object, where: str, problems: _Problems, out: _Admitted) -> None:
    api, kind = _kind(doc)
    if (api, kind) == ("v1", "Pod"):
        pod = parse_pod(doc, where, problems)  # type: ignore[arg-type]
        if pod is not None:
            out.add(pod)
    elif api == "v1" and kind in LIST_KINDS:
        items = doc.get("items") or []  # type: ignore[union-attr]
        if not isinstance(items, list):
            problems.add(where, f"items of the {kind} is not a list; expected {FORM}.")
            return
        for i, item in enumerate(items):
            _objects(item, f"{where} items[{i}]", problems, out)
    else:
        shown = f"apiVersion {api or '(none)'} kind {kind or '(none)'}"
        problems.add(where, f"holds {shown}; expected {FORM}.")


def _static_dir(path: str, problems: _Problems, out: _Admitted) -> None:
    """``extractFromDir``: each regular, non-hidden file holds exactly one v1 Pod."""
    try:
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
    except OSError as err:
        raise InputError(f"{FIELD}: cannot list {path} ({err.strerror or err}).") from None
    for name in names:
        file = os.path.join(path, name)
        if not os.path.isfile(file):  # os.Stat, as the kubelet's: a symlink is followed
            continue  # the kubelet skips subdirectories and other non-regular entries
        docs = _json_or_yaml(read_bounded(file, FIELD, LIMIT), f"{FIELD} {file}")
        if len(docs) != 1 or _kind(docs[0]) != ("v1", "Pod"):
            problems.add(
                file, "a static pod file must hold exactly one v1 Pod, as the kubelet reads it."
            )
            continue
        pod = parse_pod(docs[0], file, problems, static_file=True)  # type: ignore[arg-type]
        if pod is not None:
            out.add(pod)


def load_pods(paths: Sequence[str], admits: int | None = None) -> list[Pod]:
    """The Pods of every ``--pods`` path; InputError listing every problem, nothing written.
    More than ``admits`` pods (the node's pod capacity) is refused as soon as it is seen."""
    problems = _Problems()
    pods = _Admitted(admits)
    for path in paths:
        if os.path.isdir(path):
            _static_dir(path, problems, pods)
            continue
        else:
            text = read_bounded(path, FIELD, LIMIT)
        for doc in _json_or_yaml(text, f"{FIELD} {path}"):
            _objects(doc, path, problems, pods)
    seen: dict[str, str] = {}
    for pod in pods:
        if pod.uid in seen:
            problems.items.append(
                f"{FIELD}: pods {seen[pod.uid]} and {pod.name} have the same UID {pod.uid};"
                " each pod cgroup is named by its UID, give each pod once."
            )
        seen[pod.uid] = pod.name
    if problems.items:
        raise InputError(problems.items)
    return list(pods)


def pod_cgroups(pods: Sequence[Pod], cfg: NodeConfig, cgroup_v2: bool) -> list[PodCgroup]:
    """Each pod's cgroup values under ``cfg``'s feature gates and CFS settings."""
    pod_level = features.enabled(cfg, "PodLevelResources")
    memory_qos = features.memory_qos_mode(cfg) if cgroup_v2 else "off"
    custom_period = features.enabled(cfg, "CustomCPUCFSQuotaPeriod")
    sidecars = features.sidecar_mode(cfg)
    refused = [r for r in (sidecar_refusal(pod, sidecars) for pod in pods) if r]
    if refused:
        raise InputError(refused)
    return [
        resource_config(
            pod_defaults(as_read_by(pod, sidecars), pod_level),
            pod_level_resources=pod_level,
            enforce_cpu_limits=cfg.cpu_cfs_quota,
            cpu_period=cfg.cpu_cfs_quota_period,
            custom_period=custom_period,
            memory_qos=memory_qos,
            pod_pids_limit=cfg.pod_max_pids,
        )
        for pod in pods
    ]
