"""``cgalloc doctor``: the node preflight. Reads the node (through the ``Host`` it is handed:
its files below ``Host.node_root``, its programs through ``Host.run_command``, its cgroup
hierarchy) and judges each fact with the rules of ``cgalloc/model/preflight.py``. Reads only.

The checks, in the order they are reported:

- ``cgroup-v1``: the hierarchy against the kubelet's ``failCgroupV1`` at its minor;
- ``runtime-driver``: the kubelet's cgroup driver against containerd's ``SystemdCgroup`` or
  CRI-O's ``cgroup_manager`` (``ops/kubelet_match.py`` finds the runtime);
- ``systemd-driver``: systemd as PID 1 with the kubelet on the cgroupfs driver;
- ``reserved-cgroups``: the cgroups the kubelet validates at start, in every controller it
  validates;
- ``boot-unit``: cgalloc-setup.service installed, enabled, ordered before the kubelet and the
  runtime, its last run not failed;
- ``swap``: swap against ``failSwapOn`` and ``memorySwap.swapBehavior``;
- ``psi``: /proc/pressure readable;
- ``versions``: the kernel and systemd versions the chosen features need;
- ``reservations``: kube + system reservations against what ``recommend`` makes of a recorded
  history (when one exists).
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, NamedTuple

from cgalloc.errors import CgallocError
from cgalloc.host.kubelet import UNIT_PATH, NodeFiles, systemctl_show, unit_files_on_disk
from cgalloc.inputs import kubeletunit as ku
from cgalloc.inputs import preflight as text
from cgalloc.inputs import runtime as parse
from cgalloc.model import features, naming
from cgalloc.model import preflight as rules
from cgalloc.model.hierarchy import controller_dirs
from cgalloc.model.preflight import SKIP, Check, Evidence
from cgalloc.model.versions import minor_tuple
from cgalloc.ops import kubelet_match

if TYPE_CHECKING:
    from cgalloc.host.machine import Host
    from cgalloc.model.hierarchy import Hierarchy
    from cgalloc.model.nodeconfig import NodeConfig

SETUP_UNIT = "cgalloc-setup.service"
RUNTIME_UNITS = {"containerd": "containerd.service", "CRI-O": "crio.service"}
UNIT_PROPERTIES = ("LoadState", "FragmentPath", "UnitFileState", "Before", "After", "ActiveState")
# systemctl's UnitFileState: whether the unit is enabled (None: it cannot say, e.g. static)
UNIT_FILE_STATES = {
    "enabled": True,
    "enabled-runtime": True,
    "linked": True,
    "disabled": False,
    "masked": False,
}


class Subject(NamedTuple):
    """The node inputs doctor judges the node against."""

    cfg: NodeConfig
    config: str | None  # the kubelet's --config, as a path on this machine
    config_dir: str | None
    endpoint: str | None  # --container-runtime-endpoint, when matched
    driver_flag: str | None  # where a --cgroup-driver flag came from
    matched: dict | None  # --match-kubelet's document, None without it
    version_given: bool  # --kubelet-version was given
    cgroupfs: str
    history: str  # the recorded window recommend reads ("" for none)


def doctor(host: Host, s: Subject) -> list[Check]:
    """Every check, in order; a check that cannot be made is a skip with the reason. Raises
    InputError only for a history file that exists but cannot be used."""
    files = NodeFiles(host.node_root)
    try:
        from cgalloc.host.cgroupfs import detect

        hierarchy: Hierarchy | None = detect(s.cgroupfs, host.mountinfo)
        why = ""
    except CgallocError as err:
        hierarchy, why = None, str(err)
    runtime = kubelet_match.runtime_driver(
        host, config=s.config, config_dir=s.config_dir, endpoint=s.endpoint
    )
    checks = [
        _cgroup_v1(s, hierarchy, why),
        *_drivers(host, s, runtime),
        _reserved(s, hierarchy, why),
        _boot_unit(host, files, s, runtime.kind),
        _swap(files, s, hierarchy),
        _psi(files),
        _versions(host, files, s, hierarchy),
        _reservations(s),
    ]
    return checks


# ---- what the kubelet is -------------------------------------------------------------------


def _minor(s: Subject) -> tuple[tuple[int, int], str]:
    """The kubelet's minor and where it comes from: its own `--version` when matched (before
    cgalloc picks the nearest minor it plans for), else the one cgalloc plans for."""
    printed = (s.matched or {}).get("kubeletVersion")
    parsed = ku.kubelet_version(printed) if printed else None
    if parsed is not None:
        return parsed[1], f"`kubelet --version`: {parsed[0]}"
    given = (
        "--kubelet-version"
        if s.version_given
        else "cgalloc's default minor; no kubelet version was read: give --match-kubelet"
    )
    return minor_tuple(s.cfg.kubelet_version), given


def _setting(s: Subject, field: str) -> tuple[object, str] | None:
    """(value, file) of a KubeletConfiguration field as the config files set it."""
    try:
        return parse.kubelet_config_setting(s.config, s.config_dir, field)
    except CgallocError:
        return None  # the config loader has reported it already


def _argv(s: Subject) -> list[str]:
    return list((s.matched or {}).get("command") or [])


def _mount(hierarchy: Hierarchy | None, why: str, cgroupfs: str) -> Evidence:
    if hierarchy is None:
        return Evidence(cgroupfs, why)
    if hierarchy.version == "v2":
        return Evidence("/proc/self/mountinfo", f"cgroup2 at {hierarchy.root}")
    mounts = ", ".join(sorted(set(hierarchy.v1_mounts.values())))
    extra = f", cgroup2 at {hierarchy.unified}" if hierarchy.unified else ""
    return Evidence("/proc/self/mountinfo", f"cgroup v1 at {mounts}{extra}")


# ---- the checks ----------------------------------------------------------------------------


def _cgroup_v1(s: Subject, hierarchy: Hierarchy | None, why: str) -> Check:
    if hierarchy is None:
        return Check("cgroup-v1", SKIP, f"cannot tell the cgroup hierarchy: {why}")
    minor, source = _minor(s)
    found = _setting(s, "failCgroupV1")
    setting = (found[0], found[1]) if found and isinstance(found[0], bool) else None
    return rules.cgroup_v1(
        hierarchy.version, _mount(hierarchy, why, s.cgroupfs), minor, source, setting
    )


def _drivers(host: Host, s: Subject, found: kubelet_match.RuntimeFinding) -> list[Check]:
    """The runtime-driver and systemd-driver checks (the sentences are setup's own)."""
    cfg = s.cfg
    source = kubelet_match.kubelet_driver_source(
        cfg, config=s.config, config_dir=s.config_dir, driver_flag=s.driver_flag
    )
    kubelet = Evidence(source, f"cgroupDriver: {cfg.cgroup_driver}")
    where = Evidence("containerRuntimeEndpoint", found.endpoint)
    if found.kind is None:
        runtime = Check(
            "runtime-driver",
            SKIP,
            f"the runtime behind {found.endpoint} is neither"
            " containerd nor CRI-O: its driver is not read.",
            (kubelet, where),
        )
    elif found.warnings:
        runtime = Check(
            "runtime-driver",
            rules.WARN,
            found.warnings[0],
            (kubelet, where),
            f"make {found.kind}'s configuration readable.",
        )
    elif found.driver is None:
        runtime = Check(
            "runtime-driver",
            SKIP,
            f"{found.kind} is not installed here: there is no driver to compare.",
            (kubelet, where),
        )
    else:
        ev = (kubelet, where, Evidence(found.driver.source, f"{found.kind}: {found.driver.driver}"))
        problems = parse.driver_problems(cfg.cgroup_driver, source, False, found.driver)
        runtime = (
            Check(
                "runtime-driver",
                rules.FAIL,
                problems[0],
                ev,
                f"set the same driver in both: cgroupDriver: {found.driver.driver} for the"
                " kubelet, or the runtime's to the kubelet's, then restart both.",
            )
            if problems
            else Check(
                "runtime-driver",
                rules.OK,
                f"the kubelet and {found.kind} both use the {cfg.cgroup_driver} driver.",
                ev,
            )
        )
    pid1 = host.systemd_manages_cgroups()
    ev = (kubelet, Evidence("PID 1", "systemd" if pid1 else "not systemd"))
    problems = parse.driver_problems(cfg.cgroup_driver, source, pid1, None)
    if not pid1:
        systemd = Check("systemd-driver", SKIP, "systemd is not PID 1 here.", ev)
    elif problems:
        systemd = Check(
            "systemd-driver",
            rules.FAIL,
            problems[0],
            ev,
            "set cgroupDriver: systemd in the kubelet's config and the runtime's"
            " driver to systemd (containerd SystemdCgroup = true, CRI-O"
            ' cgroup_manager = "systemd"), then restart both.',
        )
    else:
        systemd = Check(
            "systemd-driver",
            rules.OK,
            "systemd is PID 1 and the kubelet uses the systemd driver.",
            ev,
        )
    return [runtime, systemd]


def _validated(cfg: NodeConfig) -> list[tuple[str, str]]:
    """(role, the kubelet's path) of each cgroup it validates at start: cgroupRoot (with
    cgroupsPerQOS) and the enforced reserved cgroups."""
    out = []
    kubepods = naming.kubepods_path(cfg)
    if kubepods and cfg.cgroups_per_qos:
        out.append(("cgroupRoot", os.path.dirname(kubepods)))
    for role in naming.RESERVED_ROLES:
        value = cfg.kube_reserved_cgroup if role == "kube-reserved" else cfg.system_reserved_cgroup
        if value and cfg.enforces(role):
            out.append((role, naming.reserved_paths(cfg, role)[0]))
    return out


def _reserved(s: Subject, hierarchy: Hierarchy | None, why: str) -> Check:
    if hierarchy is None:
        return Check("reserved-cgroups", SKIP, f"cannot tell the cgroup hierarchy: {why}")
    try:
        wanted = _validated(s.cfg)
    except CgallocError as err:
        return Check("reserved-cgroups", SKIP, str(err))
    enforced = [r for r, _ in wanted if r != "cgroupRoot"]
    found = []
    for role, path in wanted:
        dirs = controller_dirs(hierarchy, path)
        if hierarchy.version == "v2":
            base = next(iter(dirs.values()), hierarchy.root)
            try:
                with open(os.path.join(base, "cgroup.controllers"), encoding="utf-8") as fh:
                    have = set(fh.read().split())
                missing = tuple(c for c in dirs if c not in have)
            except OSError:
                missing = (f"the cgroup itself ({base})",)
        else:
            missing = tuple(sorted({d for d in dirs.values() if not os.path.isdir(d)}))
        found.append(rules.Validated(role, path or "/", missing))
    return rules.reserved_cgroups(hierarchy.version, found, enforced)


def _unit(host: Host, files: NodeFiles, unit: str) -> dict | None:
    """What systemctl says of ``unit`` (properties), or, where it does not answer, what its
    files on the search path say; None when the unit does not exist."""
    shown = systemctl_show(host, unit, UNIT_PROPERTIES)
    props = ku.parse_systemctl_show(shown) if shown else {}
    if props.get("LoadState"):
        if props["LoadState"] != "loaded":
            return None
        return {
            "by": "systemctl",
            "fragment": props.get("FragmentPath") or unit,
            "enabled": UNIT_FILE_STATES.get(props.get("UnitFileState", "")),
            "before": props.get("Before", "").split(),
            "after": props.get("After", "").split(),
            "state": props.get("ActiveState") or None,
        }
    on_disk = unit_files_on_disk(files, unit)
    if on_disk.fragment is None or on_disk.masked:
        return None
    texts = []
    for path in [on_disk.fragment, *on_disk.dropins]:
        try:
            texts.append(files.read(path))
        except (OSError, ValueError):
            continue
    deps = text.unit_dependencies(texts)
    wants = deps["WantedBy"]
    enabled = (
        any(files.exists(f"{d}/{target}.wants/{unit}") for d in UNIT_PATH for target in wants)
        if wants
        else None
    )
    return {
        "by": "unit files",
        "fragment": on_disk.fragment,
        "enabled": enabled,
        "before": deps["Before"],
        "after": deps["After"],
        "state": None,
    }


def _boot_unit(host: Host, files: NodeFiles, s: Subject, kind: str | None) -> Check:
    setup = _unit(host, files, SETUP_UNIT)
    daemons = ["kubelet.service"] + ([RUNTIME_UNITS[kind]] if kind in RUNTIME_UNITS else [])
    needed = any(s.cfg.enforces(r) for r in naming.RESERVED_ROLES)
    if setup is None:
        unit = rules.BootUnit(None, None, {}, None, "")
        where = "systemctl show" if host.run_command(["systemctl", "--version"]) else "unit files"
        return rules.boot_unit(unit, needed, [Evidence(where, f"{SETUP_UNIT}: not found")])
    evidence = [
        Evidence(setup["by"], f"{SETUP_UNIT}: {setup['fragment']}"),
        Evidence(f"{SETUP_UNIT} Before=", " ".join(setup["before"]) or "(none)"),
        Evidence(
            f"{SETUP_UNIT} enabled", {True: "yes", False: "no", None: "unknown"}[setup["enabled"]]
        ),
    ]
    if setup["state"]:
        evidence.append(Evidence(f"{SETUP_UNIT} ActiveState", setup["state"]))
    ordered = {}
    for daemon in daemons:
        info = _unit(host, files, daemon)
        if info is None:
            continue
        ordered[daemon] = rules.unit_ordered_before(setup["before"], info["after"], daemon)
        evidence.append(Evidence(f"{daemon} After=", " ".join(info["after"]) or "(none)"))
    unit = rules.BootUnit(setup["fragment"], setup["enabled"], ordered, setup["state"], setup["by"])
    return rules.boot_unit(unit, needed, evidence)


def _swap(files: NodeFiles, s: Subject, hierarchy: Hierarchy | None) -> Check:
    try:
        devices = text.swap_devices(files.read("/proc/swaps"))
    except (OSError, ValueError) as err:
        return Check("swap", SKIP, f"cannot read /proc/swaps: {getattr(err, 'strerror', err)}.")
    flag = text.bool_flag(_argv(s), "fail-swap-on")
    if flag is not None:
        fail_swap_on = (flag, "--fail-swap-on on the kubelet's command line")
    else:
        found = _setting(s, "failSwapOn")
        fail_swap_on = (
            (found[0], found[1])
            if found and isinstance(found[0], bool)
            else (True, "the kubelet's default")
        )
    found = _setting(s, "memorySwap")
    behaviour = None
    if found and isinstance(found[0], dict) and isinstance(found[0].get("swapBehavior"), str):
        behaviour = (found[0]["swapBehavior"], found[1])
    version = hierarchy.version if hierarchy is not None else "v2"
    return rules.swap(devices, fail_swap_on, behaviour, version)


def _psi(files: NodeFiles) -> Check:
    readable: dict[str, str | None] = {}
    for resource in ("cpu", "memory", "io"):
        try:
            files.read(f"/proc/pressure/{resource}")
            readable[resource] = None
        except OSError as err:
            gone = err.errno == errno.ENOENT
            readable[resource] = "absent" if gone else (err.strerror or str(err))
        except ValueError as err:
            readable[resource] = str(err)
    try:
        cmdline = text.cmdline_value(files.read("/proc/cmdline"), "psi")
    except (OSError, ValueError):
        cmdline = None
    return rules.psi(readable, cmdline)


def _versions(host: Host, files: NodeFiles, s: Subject, hierarchy: Hierarchy | None) -> Check:
    try:
        release = files.read("/proc/sys/kernel/osrelease").strip()
        kernel = (text.kernel_release(release), Evidence("/proc/sys/kernel/osrelease", release))
    except (OSError, ValueError) as err:
        kernel = (None, Evidence("/proc/sys/kernel/osrelease", str(err)))
    systemd = None
    pid1 = host.systemd_manages_cgroups()
    if pid1:
        out = host.run_command(["systemctl", "--version"]) or ""
        line = out.strip().splitlines()[0] if out.strip() else "no answer"
        systemd = (text.systemd_version(out), Evidence("`systemctl --version`", line))
    v2 = hierarchy is not None and hierarchy.version == "v2"
    facts = rules.Facts(
        cgroup_v2=v2,
        memory_qos=v2 and features.enabled(s.cfg, "MemoryQoS"),
        systemd_driver_v2=v2 and s.cfg.cgroup_driver == "systemd" and pid1,
        v1_systemd=hierarchy is not None and not v2 and pid1,
    )
    return rules.versions(facts, kernel, systemd)


def _reservations(s: Subject) -> Check:
    from cgalloc.ops import history, recommend

    name = "reservations"
    if not s.history or not os.path.exists(s.history):
        return Check(
            name,
            SKIP,
            f"no recorded usage at {s.history or '(none given)'}: record a"
            " window with `cgalloc record --for 24h` to compare the reservations"
            " with it.",
        )
    hist = history.load(s.history)  # InputError for a file that is no history
    try:
        rec = recommend.recommend(hist.samples, s.cfg)
    except recommend.TooShort as short:
        return Check(name, SKIP, str(short))

    def nanos(rl) -> dict[str, tuple[int, str]]:
        return {k: (v.nanos, str(v)) for k, v in rl.items() if k in ("cpu", "memory")}

    configured = recommend.total(s.cfg.kube_reserved, s.cfg.system_reserved)
    suggested = recommend.total(rec.kube, rec.system)
    w = rec.window
    window = Evidence(
        s.history,
        f"{w.samples} samples over {recommend.human_seconds(w.seconds)},"
        f" p{rec.policy.percentile:g} + {rec.policy.headroom * 100:g}% headroom",
    )
    return rules.reservations(
        nanos(configured), nanos(suggested), nanos(recommend.measured_need(rec)), window
    )
