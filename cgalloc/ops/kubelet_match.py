"""``--match-kubelet``: the kubelet's own inputs, taken from the node, and the cgroup-driver
sanity check.

Where the kubelet's command line comes from, first found first:

1. its unit, ``kubelet.service``: the files ``systemctl show`` says systemd loaded (or, where
   systemctl does not answer, those systemd's search path holds), the ExecStart= they leave,
   expanded with their Environment= and EnvironmentFile= as systemd expands it at start. This
   covers kubeadm (``10-kubeadm.conf`` with ``$KUBELET_KUBEADM_ARGS`` from
   ``/var/lib/kubelet/kubeadm-flags.env`` and ``$KUBELET_EXTRA_ARGS`` from
   ``/etc/default/kubelet`` or ``/etc/sysconfig/kubelet``), EKS (``$NODEADM_KUBELET_ARGS``
   from ``/etc/eks/kubelet/environment``; the AL2 AMI's ``$KUBELET_ARGS`` drop-ins), OpenShift
   and GKE, which all run the kubelet from ``kubelet.service``;
2. a running kubelet's command line (``/proc/<pid>/cmdline`` of a root process named
   kubelet): RKE2 starts the kubelet as a process of its own without a unit.

K3s and MicroK8s run the kubelet inside their own process: its flags are nowhere to read.

The kubelet's ``--config`` and ``--config-dir`` are then loaded as the kubelet loads them
(``cgalloc.inputs.config.load_node_config``), and ``kubelet --version`` picks the minor to
match when it is one cgalloc knows; for one outside them the nearest known minor is matched,
with a warning (the behaviours cgalloc models change little between neighbours).
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.errors import InputError
from cgalloc.host.kubelet import (
    NodeFiles,
    Process,
    kubelet_processes,
    run_version,
    systemctl_show,
    unit_files_on_disk,
)
from cgalloc.inputs import kubeletunit as ku
from cgalloc.model import versions

if TYPE_CHECKING:
    from cgalloc.host.machine import Host
    from cgalloc.model.nodeconfig import NodeConfig

DEFAULT_CONFIG = "/var/lib/kubelet/config.yaml"  # where kubeadm writes the kubelet's config
OPTION = "--match-kubelet"
UNIT = ku.UNIT_NAME
# where systemd looks up an ExecStart= program given by name (DEFAULT_PATH, split /usr)
SYSTEMD_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
EMBEDDED = ("k3s.service", "k3s-agent.service", "snap.microk8s.daemon-kubelite.service")


class Match(NamedTuple):
    """The node's kubelet inputs, as cgalloc's node inputs."""

    flags: dict[str, list[str]]  # modelled kubelet flag -> occurrences
    config: str | None  # the kubelet's --config, as a path on this machine
    config_dir: str | None
    endpoint: str | None  # --container-runtime-endpoint
    version: str | None  # the supported minor to match, None when not read
    notes: list[str]  # what was read, one line each
    warnings: list[str]
    doc: dict  # the same for -o json


class _Command(NamedTuple):
    """A kubelet command line and where it came from."""

    source: str  # one line for the notes
    doc: dict
    executable: str | None  # the kubelet program, a node path
    args: list[str]  # the kubelet's arguments
    cwd: str


def _read(files: NodeFiles, path: str, what: str) -> str:
    try:
        return files.read(path)
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise InputError(f"{OPTION}: cannot read {what} {path} ({reason}).") from None


class _Files(NamedTuple):
    """The files that make a unit, and what systemd says of them."""

    fragment: str | None
    dropins: list[str]
    reported_by: str  # "systemctl" or "search path"
    stale: bool  # changed on disk since systemd loaded them
    working_directory: str


def _unit_files(host: Host, files: NodeFiles) -> _Files | None:
    """Which files make kubelet.service, from systemctl or the search path."""
    shown = systemctl_show(host, UNIT)
    props = ku.parse_systemctl_show(shown) if shown else {}
    state = props.get("LoadState")
    if state in ("loaded", "masked", "not-found"):
        if state != "loaded":
            return None
        fragment = props.get("FragmentPath") or None
        return _Files(fragment, props.get("DropInPaths", "").split(), "systemctl",
                      props.get("NeedDaemonReload") == "yes",
                      props.get("WorkingDirectory", ""))  # fmt: skip
    found = unit_files_on_disk(files, UNIT)
    if found.fragment is None or found.masked:
        return None
    return _Files(found.fragment, found.dropins, "search path", False, "")


def _from_unit(host: Host, files: NodeFiles, warnings: list[str]) -> _Command | str | None:
    """The command kubelet.service runs; None without the unit, a reason when it runs no
    kubelet cgalloc can read. InputError where systemd would not start it."""
    unit = _unit_files(host, files)
    if unit is None:
        return None
    paths = ([unit.fragment] if unit.fragment else []) + unit.dropins
    settings = ku.unit_settings(_read(files, p, "the unit file") for p in paths)
    if unit.stale:
        warnings.append(
            f"{UNIT} changed on disk since systemd loaded it (NeedDaemonReload): cgalloc read"
            " the files as they are now, which the kubelet gets after `systemctl daemon-reload`"
            " and a restart."
        )
    try:
        commands = [c for value in settings.exec_start for c in ku.exec_commands(value)]
        env_files, texts = _environment_files(files, settings)
    except ku.UnitSyntaxError as err:
        raise InputError(
            f"{OPTION}: {UNIT} ({', '.join(paths)}): {err}; systemd would not start the"
            " kubelet with it."
        ) from None
    if len(commands) != 1:
        raise InputError(
            f"{OPTION}: {UNIT} ({', '.join(paths)}) has {len(commands)} ExecStart= commands;"
            " systemd starts a service of the kubelet's type only with exactly one."
        )
    command = commands[0]
    env = ku.unit_environment(settings, texts)
    argv = ku.expand_argv(command.argv, env) if command.expand_env else list(command.argv)
    if posixpath.basename(command.path) == "kubelet":
        start, executable = 1, command.path
    else:
        start = ku.kubelet_argv_start(argv)
        if start is None:
            return f"{UNIT} runs {command.path}, not the kubelet"
        executable = argv[start - 1]
    if "/" not in executable:  # a bare name: systemd looks it up in its default PATH
        found = [f"{d}/{executable}" for d in SYSTEMD_PATH if files.is_file(f"{d}/{executable}")]
        executable = found[0] if found else executable
    working = (settings.working_directory or unit.working_directory).lstrip("-")
    working = "/root" if working == "~" else working  # the service user's home: root's
    doc = {
        "source": UNIT,
        "unitFiles": paths,
        "reportedBy": unit.reported_by,
        "environmentFiles": env_files,
        "command": argv,
    }
    shown = "; ".join(
        f"{e['path']} ({'read' if e['read'] else 'absent, optional'})" for e in env_files
    )
    source = f"{UNIT} ({unit.reported_by}): {', '.join(paths)}" + (
        f"; environment files {shown}" if env_files else ""
    )
    return _Command(source, doc, executable, argv[start:], working or "/")


def _environment_files(
    files: NodeFiles, settings: ku.UnitSettings
) -> tuple[list[dict], dict[str, str]]:
    """Each EnvironmentFile= (doc entries) and the texts read, in order; InputError for a
    required one that is missing, as systemd then fails the start."""
    entries: list[dict] = []
    texts: dict[str, str] = {}
    for value in settings.environment_files:
        value = ku.expand_specifiers(value)
        optional = value.startswith("-")
        pattern = value[1:] if optional else value
        if not pattern.startswith("/"):
            if optional:
                continue
            raise ku.UnitSyntaxError(f"EnvironmentFile={value} is not an absolute path")
        paths = files.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]
        paths = [p for p in paths if files.exists(p)]
        if not paths:
            if not optional:
                raise InputError(
                    f"{OPTION}: {UNIT}'s EnvironmentFile={value} does not exist, so systemd"
                    " would not start the kubelet; create it or mark it optional with '-'."
                )
            entries.append({"path": pattern, "optional": True, "read": False})
            continue
        for path in paths:
            texts[path] = _read(files, path, "the environment file")
            entries.append({"path": path, "optional": optional, "read": True})
    return entries, texts


def _from_process(proc: Process) -> _Command:
    start = ku.kubelet_argv_start(proc.argv) or 1
    executable = proc.exe or (proc.argv[start - 1] if proc.argv else None)
    doc = {"source": "process", "pid": proc.pid, "command": proc.argv}
    return _Command(
        f"the running kubelet, pid {proc.pid} (/proc/{proc.pid}/cmdline)",
        doc, executable, proc.argv[start:], proc.cwd,
    )  # fmt: skip


def _no_kubelet(files: NodeFiles, reason: str | None) -> InputError:
    embedded = [u for u in EMBEDDED if unit_files_on_disk(files, u).fragment]
    why = f"{reason} and no kubelet process runs" if reason else (
        f"this node has no {UNIT} unit and no running kubelet"
    )
    hint = (
        f" ({', '.join(embedded)} runs the kubelet inside its own process, whose flags cannot be"
        " read)" if embedded else ""
    )
    return InputError(
        f"{OPTION}: {why}{hint}; give the kubelet's inputs instead (--config FILE,"
        " --config-dir DIR, kubelet flags)."
    )


def match_kubelet(host: Host, read_version: bool = True) -> Match:
    """The node's kubelet inputs; InputError when there is no kubelet to match, or one that
    systemd would not start."""
    files = NodeFiles(host.node_root)
    warnings: list[str] = []
    found = _from_unit(host, files, warnings)
    procs = kubelet_processes(files)
    if not isinstance(found, _Command):
        if len(procs) > 1:
            raise InputError(
                f"{OPTION}: {len(procs)} kubelet processes run (pids"
                f" {', '.join(str(p.pid) for p in procs)}) and no {UNIT} tells which is the"
                " node's; give the kubelet's inputs instead."
            )
        if not procs:
            raise _no_kubelet(files, found)
        command = _from_process(procs[0])
    else:
        command = found
        if len(procs) == 1 and _essentials(procs[0]) != _essentials(command.args):
            warnings.append(
                f"the running kubelet (pid {procs[0].pid}) was started with other flags or files"
                f" than {UNIT} now gives; cgalloc follows the unit, which the kubelet takes at"
                " its next restart."
            )
    args = ku.kubelet_args(command.args)
    notes = [f"{OPTION} read {command.source}."]
    doc = dict(command.doc)
    if args.stray:
        warnings.append(
            f"the kubelet's command line has arguments that are no flags ({' '.join(args.stray)});"
            " the kubelet refuses to start with them (unknown command)."
        )
    own = (("config", args.config), ("config-dir", args.config_dir),
           ("container-runtime-endpoint", args.endpoint))  # fmt: skip
    taken = [f"--{name}={value}" for name, value in own if value is not None]
    taken += [f"--{name}={v}" for name, values in args.flags.items() for v in values]
    ignored = ", ".join("--" + n for n in args.ignored)
    notes.append(
        f"{OPTION} took {' '.join(taken) or 'no flag cgalloc reads'}"
        + (f"; not modelled, ignored: {ignored}." if ignored else ".")
    )
    config = ku.resolve_path(args.config, command.cwd) if args.config else None
    config_dir = ku.resolve_path(args.config_dir, command.cwd) if args.config_dir else None
    if config is None and config_dir is None:
        notes.append(f"{OPTION}: the kubelet is given no --config: its built-in defaults apply.")
    doc.update(
        flags=args.flags, ignoredFlags=args.ignored, config=config, configDir=config_dir,
        containerRuntimeEndpoint=args.endpoint,
    )  # fmt: skip
    version = None
    if read_version:
        version = _version(host, files, command.executable, notes, warnings, doc)
    return Match(
        args.flags,
        files.path(config) if config else None,
        files.path(config_dir) if config_dir else None,
        args.endpoint,
        version,
        notes,
        warnings,
        doc,
    )


def _essentials(of: Process | list[str]) -> tuple:
    """What cgalloc takes from a kubelet's arguments (of a process, or the arguments)."""
    if isinstance(of, Process):
        of = of.argv[(ku.kubelet_argv_start(of.argv) or 1) :]
    args = ku.kubelet_args(of)
    return args.flags, args.config, args.config_dir


def _version(
    host: Host, files: NodeFiles, executable: str | None, notes: list[str],
    warnings: list[str], doc: dict,
) -> str | None:  # fmt: skip
    """The supported minor to match for the node's kubelet program, None when unknown."""
    default = versions.DEFAULT_KUBELET_VERSION
    output, why = run_version(host, files, executable) if executable else (None, "no program")
    parsed = ku.kubelet_version(output) if output else None
    doc["kubeletVersion"] = parsed[0] if parsed else None
    if parsed is None:
        warnings.append(
            f"could not read the kubelet's version ({why or 'no version in its answer'}):"
            f" matching {default}, cgalloc's default; give --kubelet-version to choose."
        )
        doc["versionMatched"] = default
        return None
    printed, (major, minor) = parsed
    known = [versions.minor_tuple(v) for v in versions.SUPPORTED_VERSIONS]
    chosen = f"{major}.{minor}"
    if (major, minor) not in known:
        nearest = known[0] if (major, minor) < known[0] else known[-1]
        chosen = f"{nearest[0]}.{nearest[1]}"
        older = "older" if (major, minor) < known[0] else "newer"
        warnings.append(
            f"the node's kubelet is {printed}, {older} than the minors cgalloc matches"
            f" ({versions.SUPPORTED_VERSIONS[0]} to {versions.SUPPORTED_VERSIONS[-1]}):"
            f" planning as {chosen}, the nearest;"
            " what changed between the two is not modelled (give --kubelet-version to"
            " choose another)."
        )
    notes.append(f"{OPTION}: kubelet {printed} (`{executable} --version`): matching {chosen}.")
    doc["versionMatched"] = chosen
    return chosen


def unused_config_note(host: Host) -> str | None:
    """The warning for a node whose kubelet config file no input names: the plan would be
    the kubelet's built-in defaults, not this node's."""
    files = NodeFiles(host.node_root)
    if not files.is_file(DEFAULT_CONFIG):
        return None
    return (
        f"{DEFAULT_CONFIG} exists but no kubelet input was given, so this is the kubelet's"
        " built-in defaults (cgroupfs driver, nothing reserved), not this node's kubelet:"
        f" give {OPTION} to take the node's kubelet inputs, or --config {DEFAULT_CONFIG}."
    )


# ---- cgroup drivers ------------------------------------------------------------------------


def driver_problems(
    host: Host, cfg: NodeConfig, *, config: str | None, config_dir: str | None,
    endpoint: str | None, driver_flag: str | None,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """(problems, warnings) of the kubelet's cgroup driver on this node: against systemd as
    PID 1 and against the container runtime's (see ``cgalloc.inputs.runtime``).
    ``driver_flag`` says where a ``--cgroup-driver`` flag came from, None without one."""
    from cgalloc.host import runtime as rt
    from cgalloc.inputs import runtime as parse

    files = NodeFiles(host.node_root)
    source = driver_flag or "the kubelet's default"
    if driver_flag is None:
        setting = parse.kubelet_config_setting(config, config_dir, "cgroupDriver")
        if setting is not None:
            source = f"cgroupDriver in {setting[1]}"
    if endpoint is None:
        setting = parse.kubelet_config_setting(config, config_dir, "containerRuntimeEndpoint")
        endpoint = str(setting[0]) if setting else parse.DEFAULT_ENDPOINT
    warnings: list[str] = []
    runtime = None
    kind = parse.runtime_of(endpoint)
    try:
        if kind == "containerd":
            runtime = _containerd(files, endpoint)
        elif kind == "CRI-O":
            texts = [(p, files.read(p)) for p in rt.crio_configs(files)]
            if texts or rt.installed(files, "CRI-O"):
                runtime = parse.crio_driver(texts)
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        warnings.append(f"cannot tell {kind}'s cgroup driver: {reason}.")
    problems = parse.driver_problems(
        cfg.cgroup_driver, source, host.systemd_manages_cgroups(), runtime
    )
    return problems, warnings


def _containerd(files: NodeFiles, endpoint: str):
    from cgalloc.host import runtime as rt
    from cgalloc.inputs import runtime as parse

    main = rt.containerd_config(files, endpoint)
    if not files.exists(main):
        return parse.containerd_driver([]) if rt.installed(files, "containerd") else None
    texts = [(main, files.read(main))]
    for pattern in parse.containerd_imports(texts[0][1], main):
        paths = files.glob(pattern) if "*" in pattern else [pattern]
        texts += [(p, files.read(p)) for p in paths]
    return parse.containerd_driver(texts)
