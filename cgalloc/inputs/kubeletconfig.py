"""The KubeletConfiguration file (``--config``) and its drop-in directory (``--config-dir``):
each document decoded strictly, with the kubelet's type errors, then the drop-ins merged over the
defaulted main file as ``mergeKubeletConfigurations`` does (a JSON merge patch, then decoded
over it: a drop-in null deletes nothing)."""

from __future__ import annotations

from cgalloc.errors import InputError
from cgalloc.inputs.dropins import (
    dropin_files,
    within_total,
)
from cgalloc.inputs.fields import (
    BY_CONFIG,
    CONFIG_API_VERSION,
    CONFIG_KIND,
    CONFIG_ONLY,
    SINCE,
)
from cgalloc.inputs.loading import load_yaml_documents, read_bounded
from cgalloc.inputs.thresholds import quote
from cgalloc.model.eviction import default_eviction_hard
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, has

MERGE_DEFAULT_EVICTION = "mergeDefaultEvictionSettings"

# ---- files -------------------------------------------------------------------------------


def read_document(path: str, option: str, expected: str, problems: list[str]) -> dict | None:
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


def check_kind(
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


def scalar_text(value: object) -> str | None:
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
INT_RANGES = {"int64": 63, "int32": 31}


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
    if go_type in INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _json_kind(value), go_type
        if isinstance(value, float):
            # json.Marshal writes an integral float64 below 1e21 as an integer literal, which
            # decodes into an int (go-yaml makes "1e2" such a float); 1.5 or 1e+21 does not
            if not (value.is_integer() and abs(value) < 1e21):
                return f"number {value}", go_type
            value = int(value)
        bits = INT_RANGES[go_type]
        if not -(1 << bits) <= value < (1 << bits):
            return f"number {value}", go_type
        return None
    expected = bool if go_type == "bool" else str
    return None if isinstance(value, expected) else (_json_kind(value), go_type)


def _known(name: str, version: str) -> bool:
    """Whether KubeletConfiguration field ``name`` exists at kubelet ``version``."""
    if name == MERGE_DEFAULT_EVICTION:
        return has(version, "merge-default-eviction")
    f = BY_CONFIG.get(name)
    return f is None or f.flag not in SINCE or has(version, SINCE[f.flag])


def _check_config_fields(doc: dict, path: str, problems: list[str], version: str) -> None:
    """Refuse what the kubelet's decoder refuses in the fields cgalloc reads.

    The kubelet decodes its config (YAML turned into JSON) with encoding/json semantics, so an
    unquoted number where a string belongs fails the whole file with ``failed to decode: json:
    cannot unmarshal number into Go struct field KubeletConfiguration.<field> of type <type>``
    (pkg/kubelet/kubeletconfig/util/codec/codec.go DecodeKubeletConfiguration). Every other
    field is ignored, and so is a field the kubelet ``version`` does not have yet: its lenient
    decode drops it whatever its type.
    """
    for name, f in [*BY_CONFIG.items(), (MERGE_DEFAULT_EVICTION, None)]:
        value = doc.get(name)
        # memoryReservationPolicy: from 1.36 a value that is no option is refused when it is
        # validated
        if value is None or (f is not None and f.flag in CONFIG_ONLY) or not _known(name, version):
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


def _defaulted_eviction(doc: dict, version: str) -> dict:
    """``doc`` with evictionHard as the kubelet ``version``'s loadConfigFile leaves it.

    A main config file without evictionHard gets that minor's default set (cmd/kubelet/app/
    server.go loadConfigFile); from 1.33 one with ``mergeDefaultEvictionSettings: true`` keeps
    the default signals it does not set; otherwise its partial map replaces the defaults.
    """
    hard = doc.get("evictionHard")
    defaults = default_eviction_hard(version)
    if hard is None:
        return {**doc, "evictionHard": defaults}
    if doc.get(MERGE_DEFAULT_EVICTION) is True and has(version, "merge-default-eviction"):
        return {**doc, "evictionHard": {**defaults, **hard}}
    return doc


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
    config: str | None,
    config_dir: str | None,
    problems: list[str],
    version: str = DEFAULT_KUBELET_VERSION,
) -> dict[str, object]:
    """Flag-keyed values from a KubeletConfiguration file and its drop-ins, defaults resolved.

    As in cmd/kubelet/app/server.go: the main file is decoded and defaulted (loadConfigFile),
    then each drop-in is merged over that defaulted config as a JSON merge patch
    (mergeKubeletConfigurations), so a drop-in's partial evictionHard keeps the other signals,
    and the result is unmarshalled into the loaded config, so a drop-in's null never deletes.
    """
    expected = f"a {CONFIG_KIND} document (apiVersion {CONFIG_API_VERSION})"

    def read(path: str, option: str) -> dict | None:
        doc = read_document(path, option, expected, problems)
        if doc is None or not check_kind(
            doc, path, option, CONFIG_API_VERSION, CONFIG_KIND, problems
        ):
            return None
        before = len(problems)
        _check_config_fields(doc, path, problems, version)
        return doc if len(problems) == before else None

    merged: dict = {}
    if config:
        main = read(config, "--config") or {}
        # loadConfigFile defaults the main file; drop-ins are merged in undefaulted
        merged = {k: v for k, v in main.items() if not _defaulted_zero(k, v)}
    if config or config_dir:
        merged = _defaulted_eviction(merged, version)
    if config_dir:
        loaded = merged
        dropins = within_total(dropin_files(config_dir, problems), config_dir, problems)
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
        if value is None or not _known(name, version):
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
