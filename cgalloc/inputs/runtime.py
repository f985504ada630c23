"""The container runtime's cgroup driver from its configuration text, and what a driver that
differs from the kubelet's (or from systemd's) does to a node.

Why it matters (kubernetes#111776, containerd#7276: "Why are all pods on this node
restarted?"): a kubelet and a runtime on different drivers name every pod's cgroup two ways.
Since 1.31 the kubelet asks the runtime for its driver over CRI (KubeletCgroupDriverFromCRI,
KEP-4033; containerd 2.0+, CRI-O 1.28+ answer) and then ignores ``cgroupDriver``: the tree
the kubelet builds is then named for the runtime's driver, not for the one cgalloc was given.
With an older runtime the kubelet keeps its own, and the pods restart. Either way a plan made
for the kubelet's configured driver is not the node's tree. And with systemd as PID 1 the
kubelet's docs ask for the systemd driver: systemd expects to be the only cgroup manager
(kubernetes.io/docs/setup/production-environment/container-runtimes, "cgroup drivers").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cgalloc.inputs.dropins import dropin_files
from cgalloc.inputs.kubeletconfig import read_document

DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"  # the kubelet's default (1.27+)
# containerd's CRI plugin section per config version (version 1 is the one without "version")
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
DRIVER_OPTION = "--allow-driver-mismatch"


class RuntimeDriver(NamedTuple):
    """A container runtime's cgroup driver and where it comes from."""

    runtime: str  # "containerd" | "CRI-O"
    driver: str  # "systemd" | "cgroupfs"
    source: str  # "SystemdCgroup = true in /etc/containerd/config.toml"


def runtime_of(endpoint: str) -> str | None:
    """The runtime behind a CRI endpoint, None for one cgalloc does not know."""
    if "crio" in endpoint:
        return "CRI-O"
    if "containerd" in endpoint:
        return "containerd"
    return None


def _toml(text: str, path: str) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10: tomli where installed, else the check is left out
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise ValueError(f"reading {path} (TOML) needs Python 3.11 or tomli") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path} is not valid TOML ({err})") from None


def containerd_imports(text: str, path: str) -> list[str]:
    """The patterns a containerd config imports, as absolute paths (relative ones are taken
    from the file's directory, as containerd's resolveImports does)."""
    imports = _toml(text, path).get("imports") or []
    if not isinstance(imports, list):
        return []
    base = path.rpartition("/")[0] or "/"
    return [i if i.startswith("/") else f"{base}/{i}" for i in imports if isinstance(i, str)]


def _key(table: object, name: str) -> object:
    """``table[name]``, the key matched without case as containerd's TOML decoding does
    ("systemdCgroup = true" works)."""
    if not isinstance(table, dict):
        return None
    for key, value in table.items():
        if key.lower() == name.lower():
            return value
    return None


def containerd_driver(texts: Sequence[tuple[str, str]]) -> RuntimeDriver:
    """containerd's driver from its config files (path, text), main file first then imports:
    ``SystemdCgroup`` of the default runtime (``default_runtime_name``, runc when unset) in the
    CRI plugin's section for the file's ``version``; false (cgroupfs) when unset, as
    containerd's default. An import's CRI section replaces the one before it (containerd 1.x
    mergeConfig replaces whole plugin sections; 2.x merges them key by key: version 3 files
    are merged that way). ValueError for a file containerd could not read either."""
    section: dict = {}
    where = "containerd's default (no config file)"
    for path, text in texts:
        doc = _toml(text, path)
        version = doc.get("version", 1)
        if version not in CRI_PLUGIN:
            raise ValueError(f"{path}: config version {version!r} is not 1, 2 or 3")
        plugin = _key(doc.get("plugins"), CRI_PLUGIN[version])
        if not isinstance(plugin, dict):
            if not section:
                where = f"{path} (no {CRI_PLUGIN[version]!r} section for config version {version})"
            continue
        section = _deep_merge(section, plugin) if version >= 3 else plugin
        where = path
    engine = _key(section, "containerd")
    name = _key(engine, "default_runtime_name") or "runc"
    options = _key(_key(_key(engine, "runtimes"), str(name)), "options")
    value = _key(options, "SystemdCgroup")
    if value is None:
        source = f"SystemdCgroup unset for runtime {name} in {where}" if section else where
        return RuntimeDriver("containerd", "cgroupfs", source + ", so cgroupfs")
    if not isinstance(value, bool):
        raise ValueError(f"{where}: SystemdCgroup = {value!r} is not a boolean")
    return RuntimeDriver(
        "containerd",
        "systemd" if value else "cgroupfs",
        f"SystemdCgroup = {str(value).lower()} for runtime {name} in {where}",
    )


def _deep_merge(below: dict, above: dict) -> dict:
    out = dict(below)
    for key, value in above.items():
        out[key] = (
            _deep_merge(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def crio_driver(texts: Sequence[tuple[str, str]]) -> RuntimeDriver:
    """CRI-O's driver: ``cgroup_manager`` of ``[crio.runtime]``, the last file that sets it
    winning (main file, then drop-ins by name); systemd, CRI-O's default, when none does."""
    driver, source = "systemd", "CRI-O's default cgroup_manager"
    for path, text in texts:
        value = _key(_key(_key(_toml(text, path), "crio"), "runtime"), "cgroup_manager")
        if value is not None:
            driver, source = str(value), f'cgroup_manager = "{value}" in {path}'
    return RuntimeDriver("CRI-O", driver, source)


def kubelet_config_setting(
    config: str | None, config_dir: str | None, name: str
) -> tuple[object, str] | None:
    """(value, file) of one KubeletConfiguration field as the files set it, the last drop-in
    that sets it winning; None when none does. Problems are the config loader's to report."""
    found = None
    paths = [config] if config else []
    if config_dir:
        paths += dropin_files(config_dir, [])
    for path in paths:
        doc = read_document(path, "--config", "", [])
        if doc and doc.get(name) is not None:
            found = (doc[name], path)
    return found


def driver_problems(
    kubelet_driver: str, kubelet_source: str, systemd_pid1: bool, runtime: RuntimeDriver | None
) -> list[str]:
    """One sentence for each way the kubelet's driver is wrong for this node."""
    problems = []
    if systemd_pid1 and kubelet_driver != "systemd":
        problems.append(
            f"the kubelet's cgroup driver is {kubelet_driver} ({kubelet_source}) but systemd is"
            " PID 1 here: systemd expects to be the only manager of the cgroup tree and sets"
            " its slices again over what another wrote, so the kubelet's docs ask for the"
            " systemd driver on a systemd host; set cgroupDriver: systemd (and the container"
            f" runtime's driver to match), or give {DRIVER_OPTION} to go on."
        )
    if runtime is not None and runtime.driver != kubelet_driver:
        problems.append(
            f"the kubelet's cgroup driver is {kubelet_driver} ({kubelet_source}) but"
            f" {runtime.runtime}'s is {runtime.driver} ({runtime.source}): a runtime that"
            " reports its driver over CRI (containerd 2.0+, CRI-O 1.28+) makes the kubelet use"
            f" {runtime.driver} and ignore cgroupDriver, so this tree would not be the"
            " kubelet's, and with an older one every pod is restarted (kubernetes#111776);"
            f" make the two agree, or give {DRIVER_OPTION} to go on."
        )
    return problems
