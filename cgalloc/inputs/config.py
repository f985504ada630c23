"""``NodeConfig``: node-allocatable settings merged from every input as the kubelet merges them.

Layers, lowest first: the kubelet's defaults; a KubeletConfiguration file (``--config``); its
drop-in directory (``--config-dir``, every ``*.conf`` under it in the kubelet's walk order,
merged field by field with JSON-merge-patch semantics: maps merge key by key, lists are
replaced); the ``kubeletArguments`` of an OpenShift 3.x ``node-config.yaml``; and the
command-line flags. Each flag layer replaces a field as a whole. Every problem of one run is
collected and raised together as one :class:`InputError`, one sentence per problem naming the
field and the accepted form.

Pure apart from reading the named files.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from types import MappingProxyType
from typing import NamedTuple

from cgalloc.errors import InputError
from cgalloc.host.capacity import CPUSET_FORM, MAX_CPU_ID, node_cpus, parse_cpu_list
from cgalloc.host.capacity import online_cpus as host_online_cpus
from cgalloc.inputs import gocsv
from cgalloc.inputs.gostrconv import parse_go_int, trim_space
from cgalloc.inputs.loading import FILE_LIMIT, load_yaml_documents, read_bounded
from cgalloc.model import features
from cgalloc.model.eviction import (
    DEFAULT_EVICTION_HARD,
    Threshold,
    ThresholdError,
    parse_threshold,
    quote,
)
from cgalloc.model.eviction import split_pair as split_eviction_pair
from cgalloc.model.quantity import MAX_BINARY_SI, Quantity, QuantityError
from cgalloc.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PID,
    ResourceList,
    hugepage_size_bytes,
    is_hugepages,
)
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, VERSION_FORM, minor_tuple, normalise

CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"
CONFIG_KIND = "KubeletConfiguration"
NODE_CONFIG_API_VERSION = "v1"
NODE_CONFIG_KIND = "NodeConfig"
DROPIN_SUFFIX = ".conf"  # the kubelet reads only these from --config-dir
# Bounds on the --config-dir walk (the kubelet has none): real drop-in directories hold a few
# files, each may be 4 MiB (loading.FILE_LIMIT), all of them together as much, and cgalloc runs
# as root on hostile input.
DROPIN_MAX_ENTRIES = 256  # files and directories in the whole tree
DROPIN_MAX_DEPTH = 16  # subdirectory levels below --config-dir

ENFORCE_OPTIONS = (
    "pods",
    "system-reserved",
    "system-reserved-compressible",
    "kube-reserved",
    "kube-reserved-compressible",
    "none",
)
RESERVABLE = (CPU, MEMORY, EPHEMERAL_STORAGE, PID)
DRIVERS = ("cgroupfs", "systemd")
DEFAULT_ROOT_DIR = "/var/lib/kubelet"
MERGE_DEFAULT_EVICTION = "mergeDefaultEvictionSettings"
ENFORCE_LABEL = "enforceNodeAllocatable (--enforce-node-allocatable)"
DEFAULT_CFS_PERIOD_US = 100000  # cpuCFSQuotaPeriod's default, 100ms
DEFAULT_MAX_PODS = 110
CPU_MANAGER_POLICIES = ("none", "static")
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
# The static policy's options (pkg/kubelet/cm/cpumanager/policy_options.go); only
# strict-cpu-reservation changes a cgroup, the others are accepted and have no cgroup effect.
CPU_MANAGER_OPTIONS = (
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    STRICT_CPU_RESERVATION,
    "prefer-align-cpus-by-uncorecache",
)


_NO_ENTRIES: Mapping = MappingProxyType({})


class NodeConfig(NamedTuple):
    """The validated node-allocatable settings.

    A NamedTuple, not a dataclass: building one costs every process ~1.5 ms. The empty
    mappings the defaults share are read-only, so no instance can change another's.
    """

    kube_reserved: ResourceList = _NO_ENTRIES  # type: ignore[assignment]
    system_reserved: ResourceList = _NO_ENTRIES  # type: ignore[assignment]
    eviction_hard: dict[str, Threshold] = _NO_ENTRIES  # type: ignore[assignment]
    enforce_node_allocatable: tuple[str, ...] = ("pods",)
    kube_reserved_cgroup: str = ""
    system_reserved_cgroup: str = ""
    cgroups_per_qos: bool = True
    cgroup_driver: str = "cgroupfs"
    cgroup_root: str = "/"
    reserved_cpus: frozenset[int] = frozenset()
    ignore_eviction: bool = False
    qos_reserved: dict[str, int] = _NO_ENTRIES  # type: ignore[assignment]
    pod_max_pids: int = -1
    root_dir: str = DEFAULT_ROOT_DIR
    capacity_overrides: ResourceList = _NO_ENTRIES  # type: ignore[assignment]
    # pod-level inputs (issue 7): feature gates, CFS quota, the static pod directory
    feature_gates: dict[str, bool] = _NO_ENTRIES  # type: ignore[assignment]
    cpu_cfs_quota: bool = True
    cpu_cfs_quota_period: int = DEFAULT_CFS_PERIOD_US  # µs
    static_pod_path: str = ""
    max_pods: int = DEFAULT_MAX_PODS
    pods_per_core: int = 0
    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: dict[str, str] = _NO_ENTRIES  # type: ignore[assignment]
    kubelet_version: str = DEFAULT_KUBELET_VERSION
    # MemoryQoS's memoryReservationPolicy (1.36+, config file only): None or TieredReservation
    memory_reservation_policy: str = "None"
    # where the kubelet, the runtime and the other system daemons run (kubeletCgroups, ...)
    kubelet_cgroups: str = ""
    runtime_cgroups: str = ""
    system_cgroups: str = ""

    def enforces(self, role: str) -> bool:
        """Whether ``role``'s cgroup is enforced: in full, or its compressible resources only."""
        wanted = self.enforce_node_allocatable
        return role in wanted or f"{role}-compressible" in wanted

    @property
    def strict_cpu_reservation(self) -> bool:
        """The static policy's strict-cpu-reservation option: pods stay off the reserved CPUs."""
        return (
            self.cpu_manager_policy == "static"
            and self.cpu_manager_policy_options.get(STRICT_CPU_RESERVATION) == "true"
        )


class Field(NamedTuple):  # a NamedTuple: a dataclass costs ~1.5 ms per process to build
    """One setting: its KubeletConfiguration name (None if flag-only), flag, kind, accepted form."""

    config: str | None
    flag: str
    kind: str  # "map" | "pairs" | "gates" | "list" | "str" | "bool" | "int"
    form: str

    @property
    def label(self) -> str:
        if self.flag in CONFIG_ONLY:
            return str(self.config)
        return f"{self.config} (--{self.flag})" if self.config else f"--{self.flag}"


DAEMON_CGROUP_FORM = "an absolute cgroupfs path such as /kube.slice/kubelet.service"
_RESERVED_FORM = "name=quantity pairs separated by commas, such as cpu=500m,memory=1Gi,pid=1000"
FIELDS = (
    Field("kubeReserved", "kube-reserved", "map", _RESERVED_FORM),
    Field("systemReserved", "system-reserved", "map", _RESERVED_FORM),
    Field(
        "evictionHard",
        "eviction-hard",
        "pairs",
        "signal<value pairs separated by commas, such as"
        " memory.available<100Mi,nodefs.available<10%",
    ),
    Field(
        "enforceNodeAllocatable",
        "enforce-node-allocatable",
        "list",
        "a comma-separated list of pods, system-reserved, system-reserved-compressible,"
        " kube-reserved, kube-reserved-compressible, or none",
    ),
    Field("kubeReservedCgroup", "kube-reserved-cgroup", "str", "an absolute cgroup name"),
    # The daemons' own cgroups (cmd/kubelet/app/options): literal cgroupfs paths whatever the
    # driver, as the kubelet's newSystemCgroups (pkg/kubelet/cm) opens them.
    Field("kubeletCgroups", "kubelet-cgroups", "str", DAEMON_CGROUP_FORM),
    Field("runtimeCgroups", "runtime-cgroups", "str", DAEMON_CGROUP_FORM),
    Field("systemCgroups", "system-cgroups", "str", DAEMON_CGROUP_FORM + ", not /"),
    Field("systemReservedCgroup", "system-reserved-cgroup", "str", "an absolute cgroup name"),
    Field("cgroupsPerQOS", "cgroups-per-qos", "bool", "true or false"),
    Field("cgroupDriver", "cgroup-driver", "str", "cgroupfs or systemd"),
    Field("cgroupRoot", "cgroup-root", "str", "an absolute cgroup name such as /"),
    Field("reservedSystemCPUs", "reserved-cpus", "str", CPUSET_FORM),
    Field("qosReserved", "qos-reserved", "map", "memory=N% with an integer N from 0 to 100"),
    Field(
        "podPidsLimit",
        "pod-max-pids",
        "int",
        "an integer, -1 (or any number below 1) for unlimited",
    ),
    Field("featureGates", "feature-gates", "gates", features.FORM),
    Field("cpuCFSQuota", "cpu-cfs-quota", "bool", "true or false"),
    Field(
        "cpuCFSQuotaPeriod",
        "cpu-cfs-quota-period",
        "str",
        "a duration such as 100ms, from 1ms to 1s",
    ),
    Field("staticPodPath", "pod-manifest-path", "str", "a directory or file path"),
    Field("maxPods", "max-pods", "int", "a whole number of pods such as 110"),
    Field("podsPerCore", "pods-per-core", "int", "a whole number, 0 for no per-core cap"),
    Field("cpuManagerPolicy", "cpu-manager-policy", "str", "none or static"),
    Field(
        "cpuManagerPolicyOptions",
        "cpu-manager-policy-options",
        "map",
        "one name=value pair per flag, such as strict-cpu-reservation=true",
    ),
    Field(
        "memoryReservationPolicy",
        "memory-reservation-policy",  # no kubelet flag: the config file's field only
        "str",
        "None or TieredReservation",
    ),
    Field(None, "experimental-allocatable-ignore-eviction", "bool", "true or false"),
    Field(None, "root-dir", "str", "an absolute directory path such as /var/lib/kubelet"),
    Field(
        None,
        "capacity",
        "map",
        "name=quantity pairs separated by commas, such as cpu=16,memory=64Gi;"
        " names are cpu, memory, ephemeral-storage, pid or hugepages-<size>",
    ),
    Field(None, "kubelet-version", "str", VERSION_FORM),
)
BY_FLAG = {f.flag: f for f in FIELDS}
BY_CONFIG = {f.config: f for f in FIELDS if f.config}
# Flags a node-config.yaml may carry; cgalloc's own options are command-line only.
# Config-file fields the kubelet has no flag for (their "flag" is an internal key)
CONFIG_ONLY = frozenset({"memory-reservation-policy"})
KUBELET_FLAGS = frozenset(BY_FLAG) - {"capacity", "kubelet-version"} - CONFIG_ONLY

DEFAULTS: dict[str, object] = {
    "kube-reserved": {},
    "system-reserved": {},
    "eviction-hard": dict(DEFAULT_EVICTION_HARD),
    "enforce-node-allocatable": ["pods"],
    "kube-reserved-cgroup": "",
    "kubelet-cgroups": "",
    "runtime-cgroups": "",
    "system-cgroups": "",
    "system-reserved-cgroup": "",
    "cgroups-per-qos": True,
    "cgroup-driver": "cgroupfs",
    "cgroup-root": "",  # no default in the config types: run() makes "" "/" after validation
    "reserved-cpus": "",
    "qos-reserved": {},
    "pod-max-pids": -1,
    "experimental-allocatable-ignore-eviction": False,
    "root-dir": DEFAULT_ROOT_DIR,
    "capacity": {},
    "feature-gates": {},
    "cpu-cfs-quota": True,
    "cpu-cfs-quota-period": "100ms",
    "pod-manifest-path": "",
    "max-pods": DEFAULT_MAX_PODS,
    "pods-per-core": 0,
    "cpu-manager-policy": "none",
    "cpu-manager-policy-options": {},
    "memory-reservation-policy": "None",
    "kubelet-version": DEFAULT_KUBELET_VERSION,
}

# strconv.ParseBool's spellings
BOOL_WORDS = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``; raises ValueError."""
    try:
        return BOOL_WORDS[text]
    except KeyError:
        raise ValueError(text) from None


def _dedup(problems: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(problems))


# ---- flag layers -------------------------------------------------------------------------


# Map flags the kubelet declares with cliflag.NewMapStringStringNoSplit (cmd/kubelet/app/options/
# options.go): "a=true,b=true" is the one option "a" with the value "true,b=true".
NO_SPLIT_MAPS = frozenset({"cpu-manager-policy-options"})


def _split_map(f: Field, occurrences: Sequence[str], problems: list[str]) -> dict[str, str]:
    """``MapStringString.Set`` over every occurrence: "k=v,k2=v2", trimmed, later keys win."""
    out: dict[str, str] = {}
    no_split = f.flag in NO_SPLIT_MAPS
    for text in occurrences:
        # NoSplit maps take one pair per occurrence, commas and all, and no empty one
        for item in [text] if no_split else [i for i in text.split(",") if i]:
            key, sep, value = item.partition("=")
            if not sep:
                problems.append(f"{f.label}: malformed pair {quote(item)}; expected {f.form}.")
                continue
            out[trim_space(key)] = trim_space(value)
    return out


def _fold_flag(f: Field, occurrences: Sequence[str], problems: list[str]) -> object:
    """One flag's value from its occurrences, in the kubelet's flag semantics."""
    if f.kind == "map":
        return _split_map(f, occurrences, problems)
    if f.kind == "pairs":
        pairs: dict[str, str] = {}
        for item in (i for text in occurrences for i in text.split(",") if i):
            try:
                signal, value = split_eviction_pair(item)
            except ThresholdError as err:
                problems.append(f"{f.label}: {err}.")
                continue
            pairs[signal] = value
        return pairs
    if f.kind == "gates":
        gates: dict[str, bool] = {}
        for text in occurrences:
            problem = _parse_gates(text, gates)
            if problem:
                problems.append(f"{f.label}: {problem}; expected {f.form}.")
        return gates
    if f.kind == "list":
        return [i for text in occurrences if text for i in _csv_items(f, text, problems)]
    last = occurrences[-1]
    if f.kind == "bool":
        try:
            return parse_bool(last)  # pflag's boolValue.Set: ParseBool(s), untrimmed
        except ValueError:
            problems.append(f"{f.label}: {quote(last)} is not a boolean; use {f.form}.")
            return None
    if f.kind == "int":
        go_type = GO_INT_TYPES.get(f.config or "", "int64")
        number = parse_go_int(last, _INT_RANGES[go_type])
        if isinstance(number, int):
            return number
        problem = "is not an integer" if number is None else f"is out of range for an {go_type}"
        problems.append(f"{f.label}: {quote(last)} {problem}; use {f.form}.")
        return None
    return last


def _csv_items(f: Field, text: str, problems: list[str]) -> list[str]:
    """pflag's StringSlice ``readAsCSV``: one occurrence as one CSV record, so items keep their
    spaces, an empty item stays ("pods, kube-reserved" and "pods," are refused later as the
    kubelet refuses them) and a quoted item may hold a comma."""
    reader = gocsv.Reader(text)
    try:
        items = reader.read()
    except gocsv.CsvError as err:
        problems.append(f"{f.label}: invalid argument {quote(text)}: {err}; expected {f.form}.")
        return []
    if items is None:
        problems.append(f"{f.label}: {quote(text)} holds only line breaks; expected {f.form}.")
        return []
    try:
        more = reader.read() is not None
    except gocsv.CsvError:
        more = True
    if more:  # the kubelet drops every record after the first: what they name goes unenforced
        problems.append(
            f"{f.label}: {quote(text)} holds more than one CSV record (a line break outside"
            " quotes) and the kubelet reads only the first; give the list on one line."
        )
        return []
    return items


def _parse_gates(text: str, into: dict[str, bool]) -> str | None:
    """``cliflag.MapStringBool.Set`` (the kubelet's --feature-gates, component-base/cli/flag/
    map_string_bool.go): "A=true,B=false" into ``into``; the kubelet's error."""
    for item in text.split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = trim_space(key)
        if not sep:
            return "malformed pair, expect string=bool"
        value = trim_space(value)
        if value not in BOOL_WORDS:
            return (
                f"invalid value of {key}: {value}, err: strconv.ParseBool:"
                f' parsing "{value}": invalid syntax'
            )
        into[key] = BOOL_WORDS[value]
    return None


def flag_layer(
    args: Mapping[str, Sequence[str]], problems: list[str], allowed: frozenset[str] | None = None
) -> dict[str, object]:
    """Flag values from ``{flag name: [occurrences]}``; flags outside ``allowed`` are ignored."""
    out: dict[str, object] = {}
    for flag, occurrences in args.items():
        f = BY_FLAG.get(flag)
        if f is None or not occurrences or flag in CONFIG_ONLY:
            continue
        if allowed is not None and flag not in allowed:
            continue
        value = _fold_flag(f, occurrences, problems)
        if value is not None:
            out[flag] = value
    return out


# ---- files -------------------------------------------------------------------------------


def _read_document(path: str, option: str, expected: str, problems: list[str]) -> dict | None:
    try:
        docs = load_yaml_documents(read_bounded(path, option), f"{option}: {path}")
    except InputError as err:
        problems.extend(f"{p[:-1]}; expected {expected}." for p in err.problems)
        return None
    if len(docs) > 1:
        problems.append(f"{option}: {path} holds {len(docs)} YAML documents; expected {expected}.")
        return None
    doc = docs[0] if docs else None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        problems.append(f"{option}: {path} does not hold a mapping; expected {expected}.")
        return None
    return doc


def _check_kind(
    doc: dict, path: str, option: str, api_version: str, kind: str, problems: list[str]
) -> bool:
    got = (doc.get("apiVersion"), doc.get("kind"))
    if got == (api_version, kind):
        return True
    shown = [quote(v) if isinstance(v, str) else "(none)" if v is None else repr(v) for v in got]
    problems.append(
        f"{option}: {path} has apiVersion {shown[0]} and kind {shown[1]};"
        f" expected apiVersion {api_version} and kind {kind}."
    )
    return False


def _scalar_text(value: object) -> str | None:
    """A YAML scalar as the string a kubelet flag would carry; None for anything else."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


# The Go type of each KubeletConfiguration field cgalloc reads (k8s.io/kubelet/config/v1beta1).
GO_TYPES = {
    "map": "map[string]string",
    "pairs": "map[string]string",
    "list": "[]string",
    "str": "string",
    "bool": "bool",
    "gates": "map[string]bool",
}
GO_INT_TYPES = {"podPidsLimit": "int64", "maxPods": "int32", "podsPerCore": "int32"}
_INT_RANGES = {"int64": 63, "int32": 31}


def _json_kind(value: object) -> str:
    """How encoding/json names a decoded YAML value in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_error(value: object, go_type: str) -> tuple[str, str] | None:
    """(value text, Go type) of the UnmarshalTypeError when ``value`` cannot decode into
    ``go_type``; an element of a map or list that is not a string fails as type string."""
    if go_type.startswith("map[") or go_type == "[]string":
        container = dict if go_type.startswith("map[") else list
        if not isinstance(value, container):
            return _json_kind(value), go_type
        items = value.values() if isinstance(value, dict) else value
        element = bool if go_type == "map[string]bool" else str
        bad = next((v for v in items if v is not None and not isinstance(v, element)), None)
        return None if bad is None else (_json_kind(bad), "bool" if element is bool else "string")
    if go_type in _INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _json_kind(value), go_type
        if isinstance(value, float):
            # json.Marshal writes an integral float64 below 1e21 as an integer literal, which
            # decodes into an int (go-yaml makes "1e2" such a float); 1.5 or 1e+21 does not
            if not (value.is_integer() and abs(value) < 1e21):
                return f"number {value}", go_type
            value = int(value)
        bits = _INT_RANGES[go_type]
        if not -(1 << bits) <= value < (1 << bits):
            return f"number {value}", go_type
        return None
    expected = bool if go_type == "bool" else str
    return None if isinstance(value, expected) else (_json_kind(value), go_type)


def _check_config_fields(doc: dict, path: str, problems: list[str]) -> None:
    """Refuse what the kubelet's decoder refuses in the fields cgalloc reads.

    The kubelet decodes its config (YAML turned into JSON) with encoding/json semantics, so an
    unquoted number where a string belongs fails the whole file with ``failed to decode: json:
    cannot unmarshal number into Go struct field KubeletConfiguration.<field> of type <type>``
    (pkg/kubelet/kubeletconfig/util/codec/codec.go DecodeKubeletConfiguration). Every other
    field is ignored.
    """
    for name, f in [*BY_CONFIG.items(), (MERGE_DEFAULT_EVICTION, None)]:
        value = doc.get(name)
        # memoryReservationPolicy does not exist before 1.36 (dropped there, whatever its
        # type); from 1.36 a value that is no option is refused when it is validated
        if value is None or (f is not None and f.flag in CONFIG_ONLY):
            continue
        kind = f.kind if f else "bool"
        go_type = GO_INT_TYPES.get(name, GO_TYPES.get(kind, "string"))
        error = _type_error(value, go_type)
        if error is None:
            continue
        got, failed_type = error
        form, label = (f.form, f.label) if f else ("true or false", name)
        problems.append(
            f"{label} in {path}: the kubelet refuses this file (failed to decode: json: cannot"
            f" unmarshal {got} into Go struct field KubeletConfiguration.{name} of type"
            f" {failed_type}); write {form}"
            + (
                ', quoting each value as a string such as cpu: "1".'
                if go_type == "map[string]string"
                else "."
            )
        )


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386 JSON merge patch: maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def unmarshal_into(current: object, decoded: object) -> object:
    """What encoding/json's Unmarshal of ``decoded`` leaves in a Go value holding ``current``:
    a struct or map keeps the fields and entries ``decoded`` lacks; anything else is replaced."""
    if not (isinstance(current, dict) and isinstance(decoded, dict)):
        return decoded
    out = dict(current)
    for key, value in decoded.items():
        out[key] = unmarshal_into(current.get(key), value)
    return out


def dropin_files(directory: str, problems: list[str]) -> list[str]:
    """The drop-ins the kubelet loads from ``directory``, in its order; walk problems appended.

    As cmd/kubelet/app/server.go mergeKubeletConfigurations, which walks the directory with
    filepath.WalkDir: the root is lstat'ed, each directory's entries go in byte order of their
    names, a subdirectory is descended where its name sorts, a symlink is never followed (one
    to a directory is a non-directory entry, so is a symlinked root), and every non-directory
    whose name ends in ``.conf`` (filepath.Ext, so ``.a.conf`` too) is loaded; a symlink to a
    directory or a dangling one among them then fails to load, as in the kubelet.
    """
    try:
        root_is_dir = stat.S_ISDIR(os.lstat(directory).st_mode)
    except OSError as err:
        problems.append(_cannot_list(directory, err))
        return []
    if not root_is_dir:  # WalkDir hands a non-directory root to the callback like any entry
        return [directory] if os.path.basename(directory).endswith(DROPIN_SUFFIX) else []
    found: list[str] = []
    budget = DROPIN_MAX_ENTRIES  # entries left to visit in the whole tree

    def walk(path: str, depth: int) -> bool:  # False once a bound is exceeded: stop the walk
        nonlocal budget
        try:
            with os.scandir(path) as it:
                # a hostile directory may hold millions of entries: read one past the budget
                entries = list(islice(it, budget + 1))
            entries.sort(key=lambda e: os.fsencode(e.name))  # Go's os.ReadDir: byte order
            is_dir = [e.is_dir(follow_symlinks=False) for e in entries]  # lstat, as d_type
        except OSError as err:  # the kubelet fails when it cannot list a subdirectory
            problems.append(_cannot_list(path, err))
            return True
        if len(entries) > budget:
            problems.append(
                f"--config-dir: {directory} holds more than {DROPIN_MAX_ENTRIES} files and"
                f" directories; give a drop-in directory of at most {DROPIN_MAX_ENTRIES}."
            )
            return False
        budget -= len(entries)
        for entry, entry_is_dir in zip(entries, is_dir, strict=True):
            if not entry_is_dir:
                if entry.name.endswith(DROPIN_SUFFIX):
                    found.append(entry.path)
            elif depth == DROPIN_MAX_DEPTH:
                problems.append(
                    f"--config-dir: {entry.path} is nested more than {DROPIN_MAX_DEPTH}"
                    f" directories deep in {directory}; give a flatter drop-in directory."
                )
                return False
            elif not walk(entry.path, depth + 1):
                return False
        return True

    # past a bound, load nothing: the walk's one problem is the answer
    return found if walk(directory, 0) else []


def _cannot_list(path: str, err: OSError) -> str:
    return (
        f"--config-dir: cannot list {path} ({err.strerror or err}); expected a"
        f" directory of *{DROPIN_SUFFIX} {CONFIG_KIND} drop-ins."
    )


def _defaulted_eviction(doc: dict) -> dict:
    """``doc`` with evictionHard as the kubelet's loadConfigFile leaves it.

    A main config file without evictionHard gets the default set (cmd/kubelet/app/server.go
    loadConfigFile); one with ``mergeDefaultEvictionSettings: true`` keeps the default signals
    it does not set; otherwise its partial map replaces the defaults.
    """
    hard = doc.get("evictionHard")
    if hard is None:
        return {**doc, "evictionHard": dict(DEFAULT_EVICTION_HARD)}
    if doc.get(MERGE_DEFAULT_EVICTION) is True:
        return {**doc, "evictionHard": {**DEFAULT_EVICTION_HARD, **hard}}
    return doc


def dropin_root_note(directory: str) -> str | None:
    """A warning when ``directory`` is a symlink: WalkDir does not follow the root either, so
    the kubelet loads none of the drop-ins behind it, without a word."""
    try:
        is_link = stat.S_ISLNK(os.lstat(directory).st_mode)
    except OSError:
        return None  # the walk reports it
    if not is_link or os.path.basename(directory).endswith(DROPIN_SUFFIX):
        return None  # a "*.conf" root is loaded as a file, and fails there if it is none
    return (
        f"--config-dir {directory} is a symlink, which the kubelet's walk (filepath.WalkDir)"
        " does not follow: none of the drop-ins in it is loaded; give the directory it points"
        " to, or end the path with '/'."
    )


def _within_total(paths: list[str], directory: str, problems: list[str]) -> list[str]:
    """``paths`` when the drop-ins hold at most FILE_LIMIT bytes together; else none, and the
    problem: each file's own bound still lets 256 of them take minutes and gigabytes to load."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):  # reading it says what is wrong
            total += os.stat(path).st_size
    if total <= FILE_LIMIT:
        return paths
    problems.append(
        f"--config-dir: the drop-ins in {directory} hold {total} bytes together, more than"
        f" {FILE_LIMIT >> 20} MiB; a {CONFIG_KIND} drop-in is a few KiB."
    )
    return []


# Fields SetDefaults_KubeletConfiguration (pkg/kubelet/apis/config/v1beta1/defaults.go) sets
# when they hold their Go zero value, not only when absent: decoding the main file defaults
# them, so its "maxPods: 0" is 110, while a drop-in's (merged into the loaded config, never
# defaulted; server.go mergeKubeletConfigurations) and the flag --max-pods=0 stay 0.
ZERO_DEFAULTED = {
    "cgroupDriver": "",
    "cpuManagerPolicy": "",
    "maxPods": 0,
    "memoryReservationPolicy": "",
}


def _defaulted_zero(name: str, value: object) -> bool:
    zero = ZERO_DEFAULTED.get(name)
    return zero is not None and type(value) is type(zero) and value == zero


def config_file_layer(
    config: str | None, config_dir: str | None, problems: list[str]
) -> dict[str, object]:
    """Flag-keyed values from a KubeletConfiguration file and its drop-ins, defaults resolved.

    As in cmd/kubelet/app/server.go: the main file is decoded and defaulted (loadConfigFile),
    then each drop-in is merged over that defaulted config as a JSON merge patch
    (mergeKubeletConfigurations), so a drop-in's partial evictionHard keeps the other signals,
    and the result is unmarshalled into the loaded config, so a drop-in's null never deletes.
    """
    expected = f"a {CONFIG_KIND} document (apiVersion {CONFIG_API_VERSION})"

    def read(path: str, option: str) -> dict | None:
        doc = _read_document(path, option, expected, problems)
        if doc is None or not _check_kind(
            doc, path, option, CONFIG_API_VERSION, CONFIG_KIND, problems
        ):
            return None
        before = len(problems)
        _check_config_fields(doc, path, problems)
        return doc if len(problems) == before else None

    merged: dict = {}
    if config:
        main = read(config, "--config") or {}
        # loadConfigFile defaults the main file; drop-ins are merged in undefaulted
        merged = {k: v for k, v in main.items() if not _defaulted_zero(k, v)}
    if config or config_dir:
        merged = _defaulted_eviction(merged)
    if config_dir:
        loaded = merged
        dropins = _within_total(dropin_files(config_dir, problems), config_dir, problems)
        for path in dropins:
            doc = read(path, "--config-dir")
            if doc is not None:
                merged = merge_patch(merged, doc)  # type: ignore[assignment]
        # the merged JSON is unmarshalled into the config already loaded, so what a drop-in's
        # null deleted is the main file's value again, not the default
        merged = unmarshal_into(loaded, merged)  # type: ignore[assignment]
    out: dict[str, object] = {}
    for name, f in BY_CONFIG.items():
        value = merged.get(name)
        if value is None:
            continue
        # A null item decodes as its Go type's zero value (such a null is the main file's: the
        # merge patch removed every drop-in's): "" in a map[string]string or a []string, which
        # the kubelet then refuses as a quantity, threshold or option; false in featureGates.
        zero = False if f.kind == "gates" else ""
        if isinstance(value, dict):
            value = {str(k): zero if v is None else v for k, v in value.items()}
        elif isinstance(value, list):
            value = [zero if v is None else v for v in value]
        out[f.flag] = value
    return out


def node_config_layer(path: str, problems: list[str]) -> dict[str, object]:
    """Flag values from the ``kubeletArguments`` of an OpenShift 3.x node-config.yaml."""
    expected = f"an OpenShift {NODE_CONFIG_KIND} document (apiVersion {NODE_CONFIG_API_VERSION})"
    doc = _read_document(path, "--node-config", expected, problems)
    if doc is None or not _check_kind(
        doc, path, "--node-config", NODE_CONFIG_API_VERSION, NODE_CONFIG_KIND, problems
    ):
        return {}
    arguments = doc.get("kubeletArguments") or {}
    if not isinstance(arguments, dict):
        problems.append(
            f"--node-config: kubeletArguments in {path} is not a mapping; expected flag names"
            " mapped to lists of strings."
        )
        return {}
    args: dict[str, list[str]] = {}
    for flag, values in arguments.items():
        items = values if isinstance(values, list) else [values]
        texts = [_scalar_text(v) for v in items]
        if any(t is None for t in texts):
            problems.append(
                f"--node-config: kubeletArguments.{flag} in {path} is not a list of strings;"
                ' expected a list such as ["cpu=200m,memory=512Mi"].'
            )
            continue
        args[str(flag)] = [t for t in texts if t is not None]
    return flag_layer(args, problems, allowed=KUBELET_FLAGS)


# ---- validation --------------------------------------------------------------------------


def _quantities(
    f: Field,
    values: Mapping[str, str],
    allowed: Callable[[str], bool],
    problems: list[str],
    verb: str = "cannot reserve",
) -> ResourceList:
    """``parseResourceList``: known names, parseable and non-negative quantities."""
    out: ResourceList = {}
    for name, text in values.items():
        if not allowed(name):
            problems.append(f"{f.label}: {verb} {quote(name)} resource; expected {f.form}.")
            continue
        try:
            quantity = Quantity.parse(text)
        except QuantityError:
            problems.append(
                f"{f.label}: failed to parse quantity {quote(text)} for {quote(name)} resource;"
                " expected a quantity such as 500m, 1.5Gi or 100M."
            )
            continue
        if quantity.sign() < 0:
            problems.append(
                f"{f.label}: resource quantity for {quote(name)} cannot be negative: {text};"
                " expected a quantity of 0 or more."
            )
            continue
        out[name] = quantity
    return out


# Huge page sizes of the Linux architectures (arm64 64Ki .. ppc64 16Gi)
MIN_HUGEPAGE, MAX_HUGEPAGE = 64 << 10, 16 << 30


def _is_capacity_name(name: str) -> bool:
    if name in RESERVABLE:
        return True
    if not is_hugepages(name):
        return False
    try:
        hugepage_size_bytes(name)
    except ValueError:
        return False
    return True


def _thresholds(values: Mapping[str, str], problems: list[str]) -> dict[str, Threshold]:
    label = BY_FLAG["eviction-hard"].label
    out: dict[str, Threshold] = {}
    for signal, text in sorted(values.items()):
        try:
            threshold = parse_threshold(signal, text)
        except ThresholdError as err:
            problems.append(f"{label}: {err}.")
            continue
        if threshold is not None:
            out[signal] = threshold
    return out


def _enforcement(values: Mapping[str, object], problems: list[str]) -> tuple[str, ...]:
    """``ValidateKubeletConfiguration``'s enforceNodeAllocatable rules, plus the cgroup rules."""
    enforce = list(values["enforce-node-allocatable"])  # type: ignore[call-overload]
    seen: list[str] = []  # the valid options, once each
    listed: set[str] = set()
    valid = ", ".join(f'"{o}"' for o in ENFORCE_OPTIONS[:-1]) + ' or "none"'
    for option in enforce:
        # a repeat is reported before anything else and checked no further, as upstream's loop
        # does, so "none,none" and "bogus,bogus" are named duplicates too
        if option in listed:
            problems.append(
                f"invalid configuration: duplicated enforcements {quote(option)} in"
                f" {ENFORCE_LABEL}; list each option once."
            )
            continue
        listed.add(option)
        if option == "none":
            if len(enforce) > 1:
                problems.append(
                    f"invalid configuration: {ENFORCE_LABEL} may not contain additional"
                    ' enforcements when "none" is specified; use "none" alone.'
                )
            continue
        if option not in ENFORCE_OPTIONS:
            problems.append(
                f"invalid configuration: option {quote(option)} specified for {ENFORCE_LABEL};"
                f" valid options are {valid}."
            )
            continue
        if not values["cgroups-per-qos"]:
            problems.append(
                "invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true"
                f' when "{option}" contained in {ENFORCE_LABEL}; set it to true or enforce "none".'
            )
        seen.append(option)
    for kind in ("system", "kube"):
        full, compressible = f"{kind}-reserved", f"{kind}-reserved-compressible"
        if full in seen and compressible in seen:
            problems.append(
                f'invalid configuration: both "{full}" and "{compressible}" cannot be specified'
                f" together in {ENFORCE_LABEL}; choose one of them."
            )
        cgroup = BY_FLAG[f"{kind}-reserved-cgroup"]
        if (full in seen or compressible in seen) and not values[cgroup.flag]:
            problems.append(
                f"invalid configuration: {cgroup.label} must be specified when"
                f' "{full}" or "{compressible}" included in {ENFORCE_LABEL};'
                f" give {cgroup.form} such as /{kind}.slice."
            )
    return tuple(seen) if "none" not in enforce else ()


def _reserved_cpus(
    values: Mapping[str, object],
    overrides: ResourceList,
    online_cpus: Callable[[], frozenset[int]],
    problems: list[str],
) -> frozenset[int]:
    text = str(values["reserved-cpus"])
    label = BY_FLAG["reserved-cpus"].label
    if not text:
        return frozenset()
    try:
        cpus = parse_cpu_list(text)
    except ValueError as err:  # keeps the specific reason, e.g. a CPU above the kernel's limit
        problems.append(
            f"invalid configuration: unable to parse {label} {quote(text)}: {err};"
            f" expected {CPUSET_FORM}."
        )
        return frozenset()
    if values["system-reserved-cgroup"] or values["kube-reserved-cgroup"]:
        problems.append(
            f"invalid configuration: can't use {label} with systemReservedCgroup"
            " (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup);"
            " unset either the CPU list or both reserved cgroups."
        )
    # A planned node (--capacity cpu=N) has CPUs 0..N-1 online; otherwise ask this host.
    if CPU in overrides and overrides[CPU].value() > MAX_CPU_ID + 1:
        return cpus  # refused in build(): more CPUs than the kernel supports
    online = node_cpus(overrides, online_cpus)
    if not cpus <= online:
        from cgalloc.model.limits import (
            format_cpuset,  # only for this message: keep limits off the path
        )

        problems.append(
            f"{label}: {format_cpuset(cpus)} is not a subset of online-cpus"
            f" {format_cpuset(online) or '(none)'}; choose CPUs from the online set."
        )
    return cpus


_PERCENT_DIGITS = re.compile(r"[+-]?[0-9]{1,19}")


def _qos_reserved(values: Mapping[str, str], problems: list[str]) -> dict[str, int]:
    """``ParseQOSReserved``: memory only, an integer percentage from 0 to 100."""
    f = BY_FLAG["qos-reserved"]
    out: dict[str, int] = {}
    for name, text in values.items():
        if name != MEMORY:
            problems.append(f"{f.label}: cannot reserve {quote(name)} resource; expected {f.form}.")
            continue
        if not text.endswith("%"):
            problems.append(
                f"{f.label}: percentage expected, got {quote(text)}; expected {f.form}."
            )
            continue
        # strconv.ParseInt(strings.TrimRight(v, "%"), 10, 0): every trailing '%' goes, and a
        # number past int64 is no number (19 digits at most, so int() never meets its limit)
        digits = text.rstrip("%")
        percent = int(digits) if _PERCENT_DIGITS.fullmatch(digits) else None
        if percent is None or not -(1 << 63) <= percent < 1 << 63:
            problems.append(
                f"{f.label}: invalid number in percentage {quote(text)}; expected {f.form}."
            )
            continue
        if not 0 <= percent <= 100:
            problems.append(
                f"{f.label}: percentage must be between 0 and 100, got {quote(text)};"
                f" expected {f.form}."
            )
            continue
        out[name] = percent
    return out


def _strings(values: Mapping[str, object], problems: list[str]) -> None:
    """Checks of the plain string and integer settings."""
    driver = values["cgroup-driver"]
    if driver not in DRIVERS:
        f = BY_FLAG["cgroup-driver"]
        problems.append(f"{f.label}: {quote(driver)} is not a cgroup driver; use {f.form}.")
    # The kubelet parses cgroupRoot with ParseCgroupfsToCgroupName, which takes a relative name
    # such as "kubelet" as "/kubelet"; root-dir must be absolute, and so must a reserved cgroup
    # under the cgroupfs driver (with systemd it may be a bare slice name such as system.slice).
    reserved = ("kube-reserved-cgroup", "system-reserved-cgroup") if driver != "systemd" else ()
    daemons = ("kubelet-cgroups", "runtime-cgroups", "system-cgroups")
    for flag in ("root-dir", *reserved, *daemons):
        f = BY_FLAG[flag]
        text = str(values[flag])
        if text and not text.startswith("/"):
            problems.append(f"{f.label}: {quote(text)} is not absolute; use {f.form}.")
    system = BY_FLAG["system-cgroups"]
    if values["system-cgroups"] and not values["cgroup-root"]:
        # ValidateKubeletConfiguration, before server.go's run() defaults cgroupRoot to "/":
        # the kubelet stops here, so setupNode's check below is never reached
        problems.append(
            f"invalid configuration: {system.label} was specified and"
            f" {BY_FLAG['cgroup-root'].label} was not specified; set it, such as to /."
        )
    elif values["system-cgroups"] == "/":
        # pkg/kubelet/cm setupNode: "system container cannot be root ("/")"
        problems.append(
            f"{system.label}: the system container cannot be the root; use {system.form}."
        )
    # ValidateKubeletConfiguration (pkg/kubelet/apis/config/validation/validation.go)
    for flag in ("max-pods", "pods-per-core"):
        f = BY_FLAG[flag]
        number = values[flag]
        if isinstance(number, int) and number < 0:
            problems.append(
                f"invalid configuration: {f.label} {number} must not be a negative number;"
                f" use {f.form}."
            )
    if normalise(str(values["kubelet-version"])) is None:
        f = BY_FLAG["kubelet-version"]
        problems.append(f"{f.label}: {quote(str(values['kubelet-version']))} is not {f.form}.")


def _cpu_manager(
    values: Mapping[str, object], kube: ResourceList, system: ResourceList, problems: list[str]
) -> tuple[str, dict[str, str]]:
    """The CPU manager policy and options, refused where the kubelet's cpumanager.NewManager
    refuses them (pkg/kubelet/cm/cpumanager/cpu_manager.go, policy_none.go, policy_options.go)."""
    policy = str(values["cpu-manager-policy"])
    options: dict[str, str] = values["cpu-manager-policy-options"]  # type: ignore[assignment]
    f = BY_FLAG["cpu-manager-policy"]
    if policy not in CPU_MANAGER_POLICIES:
        problems.append(f'{f.label}: unknown policy: "{policy}"; use {f.form}.')
        return policy, options
    opt = BY_FLAG["cpu-manager-policy-options"]
    if policy == "none":
        if options:
            shown = " ".join(f"{k}:{v}" for k, v in sorted(options.items()))
            problems.append(
                f"{opt.label}: None policy: received unsupported options=map[{shown}];"
                " give options only with the static policy."
            )
        return policy, options
    for name, value in options.items():
        if name not in CPU_MANAGER_OPTIONS:
            problems.append(
                f"{opt.label}: unsupported cpumanager option: {quote(name)} ({value}); use"
                f" one of {', '.join(CPU_MANAGER_OPTIONS)}."
            )
        elif value not in BOOL_WORDS:
            problems.append(
                f"{opt.label}: bad value for option {quote(name)}: strconv.ParseBool: parsing"
                f" {quote(value)}: invalid syntax; use true or false."
            )
    options = {
        k: ("true" if BOOL_WORDS[v] else "false") if v in BOOL_WORDS else v
        for k, v in options.items()
    }
    reserved = sum(rl[CPU].milli_value() for rl in (kube, system) if CPU in rl)
    if not reserved and not values["reserved-cpus"]:
        problems.append(
            f"{f.label}: [cpumanager] unable to determine reserved CPU resources for static"
            " policy; reserve CPU with kubeReserved/systemReserved cpu or reservedSystemCPUs."
        )
    return policy, options


_DURATION_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9,
                   "m": 60 * 10**9, "h": 3600 * 10**9}  # fmt: skip
# ASCII digits, and digits after the point only after a point: "\d+\.?\d*" split a run of
# digits every way on a failing match, quadratic in its length (25 s for 50,000)
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds ("100ms", "1.5s", "1m30s"); ValueError."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0
    pos, total = 0, 0
    while pos < len(body):
        m = _DURATION.match(body, pos)
        if not m:
            raise ValueError(text)
        number, unit = m.groups()
        whole, _, frac = number.partition(".")
        scale = _DURATION_UNITS[unit]
        total += int(whole or 0) * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        pos = m.end()
    if not body:
        raise ValueError(text)
    return -total if text.startswith("-") else total


def go_duration(nanos: int) -> str:
    """``time.Duration.String`` for non-negative values below an hour ("50ms", "1.5s", "2m0s")."""
    if nanos == 0:
        return "0s"

    def fixed(value: int, scale: int, unit: str) -> str:
        whole, rest = divmod(value, scale)
        frac = f"{rest:0{len(str(scale)) - 1}d}".rstrip("0") if rest else ""
        return f"{whole}{'.' + frac if frac else ''}{unit}"

    for unit, scale in (("ns", 1), ("µs", 10**3), ("ms", 10**6)):
        if nanos < scale * 1000:
            return fixed(nanos, scale, unit)
    minutes, rest = divmod(nanos, 60 * 10**9)
    seconds = fixed(rest, 10**9, "s")
    return f"{minutes}m{seconds}" if minutes else seconds


def _cfs_period(
    values: Mapping[str, object], gates: Mapping[str, bool], problems: list[str]
) -> int:
    """cpuCFSQuotaPeriod in µs, with ``ValidateKubeletConfiguration``'s two rules."""
    f = BY_FLAG["cpu-cfs-quota-period"]
    text = str(values["cpu-cfs-quota-period"])
    try:
        nanos = parse_duration(text)
    except ValueError:
        problems.append(f"{f.label}: time: invalid duration {quote(text)}; use {f.form}.")
        return DEFAULT_CFS_PERIOD_US
    custom = gates.get("CustomCPUCFSQuotaPeriod", gates.get("AllAlpha", False))
    shown = "{" + go_duration(nanos) + "}"  # %v of a metav1.Duration
    if not custom and nanos != DEFAULT_CFS_PERIOD_US * 1000:
        problems.append(
            f"invalid configuration: {f.label} {shown} requires feature gate"
            " CustomCPUCFSQuotaPeriod; enable CustomCPUCFSQuotaPeriod in featureGates or use"
            " 100ms."
        )
    elif custom and not 10**6 <= nanos <= 10**9:
        problems.append(
            f"invalid configuration: {f.label} {shown} must be between 1ms and 1sec, inclusive."
        )
    return nanos // 1000


def build(
    values: Mapping[str, object],
    online_cpus: Callable[[], frozenset[int]],
    problems: list[str],
) -> NodeConfig | None:
    """Validate merged flag-keyed values into a NodeConfig, or None with ``problems`` filled."""

    def mapping(flag: str) -> dict[str, str]:
        return values[flag]  # type: ignore[return-value]

    reservable = RESERVABLE.__contains__
    kube = _quantities(BY_FLAG["kube-reserved"], mapping("kube-reserved"), reservable, problems)
    system = _quantities(
        BY_FLAG["system-reserved"], mapping("system-reserved"), reservable, problems
    )
    overrides = _quantities(
        BY_FLAG["capacity"], mapping("capacity"), _is_capacity_name, problems, "unknown"
    )
    if CPU in overrides and overrides[CPU].value() > MAX_CPU_ID + 1:
        # a planned node's CPUs are listed (cpusets); the kernel supports at most this many
        problems.append(
            f"{BY_FLAG['capacity'].label}: cpu={overrides[CPU]} is more CPUs than the kernel"
            f" supports ({MAX_CPU_ID + 1}); give the node's real CPU count."
        )
    for name, q in overrides.items():
        # the kubelet holds a capacity in an int64 (cAdvisor's sizes are uint64): beyond it,
        # Quantity.Value() has no meaning and a percentage threshold no float to take
        if name != CPU and q.value() > MAX_BINARY_SI:
            problems.append(
                f"{BY_FLAG['capacity'].label}: {name}={q} is more than a 64-bit count holds"
                f" (at most {MAX_BINARY_SI}); give the node's real capacity."
            )
        elif is_hugepages(name):
            size = hugepage_size_bytes(name)
            if size & (size - 1) or not MIN_HUGEPAGE <= size <= MAX_HUGEPAGE:
                # the kubelet's capacity comes from the kernel's page sizes; a size no kernel
                # has names a hugetlb file no cgroup has (setup would fail at its write)
                problems.append(
                    f"{BY_FLAG['capacity'].label}: {name} is no huge page size; a page size"
                    " is a power of two from 64Ki to 16Gi, such as hugepages-2Mi or"
                    " hugepages-1Gi."
                )
    thresholds = _thresholds(mapping("eviction-hard"), problems)
    enforce = _enforcement(values, problems)
    cpus = _reserved_cpus(values, overrides, online_cpus, problems)
    qos = _qos_reserved(mapping("qos-reserved"), problems)
    _strings(values, problems)
    gates: dict[str, bool] = values["feature-gates"]  # type: ignore[assignment]
    label = BY_FLAG["feature-gates"].label
    # an unsupported --kubelet-version is refused in _strings; gates are checked at the default
    version = normalise(str(values["kubelet-version"])) or DEFAULT_KUBELET_VERSION
    problems += [
        f"{label}: {p}; expected {features.FORM}." for p in features.check_gates(gates, version)
    ]
    period = _cfs_period(values, gates, problems)
    policy, options = _cpu_manager(values, kube, system, problems)
    reservation = _memory_reservation_policy(values, gates, version, problems)
    if problems:
        return None
    return NodeConfig(
        kube_reserved=kube,
        system_reserved=system,
        eviction_hard=thresholds,
        enforce_node_allocatable=enforce,
        kube_reserved_cgroup=str(values["kube-reserved-cgroup"]),
        system_reserved_cgroup=str(values["system-reserved-cgroup"]),
        cgroups_per_qos=bool(values["cgroups-per-qos"]),
        cgroup_driver=str(values["cgroup-driver"]),
        cgroup_root=str(values["cgroup-root"]) or "/",
        reserved_cpus=cpus,
        ignore_eviction=bool(values["experimental-allocatable-ignore-eviction"]),
        qos_reserved=qos,
        pod_max_pids=int(values["pod-max-pids"]),  # type: ignore[call-overload]
        root_dir=str(values["root-dir"]) or DEFAULT_ROOT_DIR,
        capacity_overrides=overrides,
        feature_gates=dict(gates),
        cpu_cfs_quota=bool(values["cpu-cfs-quota"]),
        cpu_cfs_quota_period=period,
        static_pod_path=str(values["pod-manifest-path"]),
        max_pods=int(values["max-pods"]),  # type: ignore[call-overload]
        pods_per_core=int(values["pods-per-core"]),  # type: ignore[call-overload]
        cpu_manager_policy=policy,
        cpu_manager_policy_options=options,
        kubelet_version=normalise(str(values["kubelet-version"])) or DEFAULT_KUBELET_VERSION,
        kubelet_cgroups=str(values["kubelet-cgroups"]),
        runtime_cgroups=str(values["runtime-cgroups"]),
        system_cgroups=str(values["system-cgroups"]),
        memory_reservation_policy=reservation,
    )


MEMORY_RESERVATION_POLICIES = ("None", "TieredReservation")


def _memory_reservation_policy(
    values: Mapping[str, object], gates: Mapping[str, bool], version: str, problems: list[str]
) -> str:
    """memoryReservationPolicy with ValidateKubeletConfiguration's two rules (1.36+); before
    1.36 the field does not exist and the kubelet's lenient decode drops it."""
    text = str(values["memory-reservation-policy"])
    if minor_tuple(version) < (1, 36):
        return "None"
    f = BY_FLAG["memory-reservation-policy"]
    if text not in MEMORY_RESERVATION_POLICIES:
        problems.append(
            f"invalid configuration: option {quote(text)} specified for {f.label}; valid"
            ' options are "None" or "TieredReservation".'
        )
        return "None"
    gate = NodeConfig(feature_gates=dict(gates), kubelet_version=version)
    if text == "TieredReservation" and not features.enabled(gate, "MemoryQoS"):
        problems.append(
            f'invalid configuration: {f.label} "TieredReservation" requires MemoryQoS feature'
            " gate to be enabled; enable MemoryQoS in featureGates or use None."
        )
    return text


GATES = "feature-gates"


def _over(values: dict[str, object], layer: Mapping[str, object]) -> None:
    """``layer``'s values over ``values``. Feature gates merge key by key, the layer's winning:
    cmd/kubelet/app/server.go kubeletConfigFlagPrecedence adds back the config file's gates
    that the flags do not set, and MapStringBool.Set adds each occurrence's."""
    below, gates = values.get(GATES), layer.get(GATES)
    values.update(layer)
    if isinstance(below, dict) and isinstance(gates, dict):
        values[GATES] = {**below, **gates}


def load_node_config(
    flags: Mapping[str, Sequence[str]] | None = None,
    *,
    config: str | None = None,
    config_dir: str | None = None,
    node_config: str | None = None,
    online_cpus: Callable[[], frozenset[int]] | None = None,
) -> NodeConfig:
    """Merge every input into a NodeConfig; raise InputError with every problem found.

    ``flags`` maps a kubelet flag name (without ``--``) to its occurrences in order.
    ``online_cpus`` is asked only to check ``--reserved-cpus`` against this host.
    """
    problems: list[str] = []
    values: dict[str, object] = dict(DEFAULTS)
    _over(values, config_file_layer(config, config_dir, problems))
    if node_config:
        _over(values, node_config_layer(node_config, problems))
    _over(values, flag_layer(flags or {}, problems))
    cfg = build(values, online_cpus or host_online_cpus, problems)
    if cfg is None:
        raise InputError(_dedup(problems))
    return cfg
