"""Validation of the merged settings into a ``NodeConfig``, with the kubelet's messages:
quantities, eviction thresholds, enforcement, reserved CPUs, QoS reserve, CPU manager policy,
CFS period, memory reservation policy. Every problem of a run is collected."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from cgalloc.inputs.fields import (
    BOOL_WORDS,
    BY_FLAG,
    SINCE,
    Field,
)
from cgalloc.inputs.thresholds import ThresholdError, parse_threshold, quote
from cgalloc.model import features
from cgalloc.model.cpuset import CPUSET_FORM, MAX_CPU_ID, node_cpus, parse_cpu_list
from cgalloc.model.eviction import Threshold
from cgalloc.model.naming import DRIVERS
from cgalloc.model.nodeconfig import (
    CPU_MANAGER_OPTIONS,
    CPU_MANAGER_POLICIES,
    DEFAULT_CFS_PERIOD_US,
    DEFAULT_ROOT_DIR,
    ENFORCE_OPTIONS,
    RESERVABLE,
    STRICT_CPU_RESERVATION,
    NodeConfig,
)
from cgalloc.model.quantity import MAX_BINARY_SI, Quantity, QuantityError
from cgalloc.model.resources import (
    CPU,
    MEMORY,
    ResourceList,
    hugepage_size_bytes,
    is_hugepages,
)
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, has, normalise, since

ENFORCE_LABEL = "enforceNodeAllocatable (--enforce-node-allocatable)"

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


def _enforcement(
    values: Mapping[str, object], version: str, problems: list[str]
) -> tuple[str, ...]:
    """``ValidateKubeletConfiguration``'s enforceNodeAllocatable rules, plus the cgroup rules,
    as the kubelet ``version`` has them: the -compressible options from 1.32, the per-option
    cgroupsPerQOS rule and the repeat check from 1.31 (before: one rule for any entry)."""
    enforce = list(values["enforce-node-allocatable"])  # type: ignore[call-overload]
    with_compressible = has(version, "enforce-compressible")
    options = [
        o for o in ENFORCE_OPTIONS if with_compressible or not o.endswith("-compressible")
    ]
    per_option = has(version, "enforce-validation-per-option")
    if not per_option and enforce and not values["cgroups-per-qos"]:
        # v1.20.2 validation.go: `!kc.CgroupsPerQOS && len(kc.EnforceNodeAllocatable) > 0`
        problems.append(
            f"invalid configuration: {ENFORCE_LABEL} is not supported unless cgroupsPerQOS"
            f" (--cgroups-per-qos) is set to true (the kubelet {version} refuses even"
            ' "none"); set it to true or give an empty list (--enforce-node-allocatable=).'
        )
    if with_compressible:
        valid = ", ".join(f'"{o}"' for o in options[:-1]) + ' or "none"'
    else:  # v1.20.2: "Valid options are %q, %q, %q, or %q"
        valid = ", ".join(f'"{o}"' for o in options[:-1]) + ', or "none"'
    seen: list[str] = []  # the valid options, once each
    listed: set[str] = set()
    for option in enforce:
        if option in listed and not per_option:
            continue  # before 1.31 a repeat passes: the kubelet holds the list as a set
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
        if option not in options:
            later = (
                f" (the -compressible options arrived in {since('enforce-compressible')})"
                if option in ENFORCE_OPTIONS
                else ""
            )
            problems.append(
                f"invalid configuration: option {quote(option)} specified for {ENFORCE_LABEL};"
                f" valid options are {valid}{later}."
            )
            continue
        if per_option and not values["cgroups-per-qos"]:
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
        named = (
            f'"{full}" or "{compressible}" included'
            if with_compressible
            else f"'{full}' contained"  # v1.20.2's wording
        )
        if (full in seen or compressible in seen) and not values[cgroup.flag]:
            problems.append(
                f"invalid configuration: {cgroup.label} must be specified when"
                f" {named} in {ENFORCE_LABEL}; give {cgroup.form} such as /{kind}.slice."
            )
    return tuple(seen) if "none" not in enforce else ()


def _reserved_cpus(
    values: Mapping[str, object],
    overrides: ResourceList,
    online_cpus: Callable[[], frozenset[int]] | None,
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
    if online_cpus is None and CPU not in overrides:
        return cpus  # no host to check against (a library caller gave none)
    online = node_cpus(overrides, online_cpus or frozenset)
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
    slices = driver in DRIVERS and DRIVERS[driver].slices
    reserved = ("kube-reserved-cgroup", "system-reserved-cgroup") if not slices else ()
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
    values: Mapping[str, object],
    kube: ResourceList,
    system: ResourceList,
    version: str,
    problems: list[str],
) -> tuple[str, dict[str, str]]:
    """The CPU manager policy and options, refused where the kubelet's cpumanager.NewManager
    refuses them (pkg/kubelet/cm/cpumanager/cpu_manager.go, policy_none.go, policy_options.go),
    with the options the kubelet ``version`` has."""
    policy = str(values["cpu-manager-policy"])
    options: dict[str, str] = values["cpu-manager-policy-options"]  # type: ignore[assignment]
    f = BY_FLAG["cpu-manager-policy"]
    if policy not in CPU_MANAGER_POLICIES:
        problems.append(f'{f.label}: unknown policy: "{policy}"; use {f.form}.')
        return policy, options
    opt = BY_FLAG["cpu-manager-policy-options"]
    if options and not has(version, SINCE[opt.flag]):
        # the config file's field was dropped when it was read: these came from a flag
        problems.append(
            f"--{opt.flag}: the kubelet {version} has no such flag (policy options arrived in"
            f" {since(SINCE[opt.flag])}); leave it out or match a newer kubelet."
        )
        return policy, {}
    if policy == "none":
        if options:
            shown = " ".join(f"{k}:{v}" for k, v in sorted(options.items()))
            problems.append(
                f"{opt.label}: None policy: received unsupported options=map[{shown}];"
                " give options only with the static policy."
            )
        return policy, options
    for name, value in options.items():
        if name == STRICT_CPU_RESERVATION and not has(version, "strict-cpu-reservation"):
            problems.append(
                f"{opt.label}: unsupported cpumanager option: {quote(name)} ({value}); the"
                f" kubelet {version} has no such option (it arrived in"
                f" {since('strict-cpu-reservation')})."
            )
        elif name not in CPU_MANAGER_OPTIONS:
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
    values: Mapping[str, object], gates: Mapping[str, bool], version: str, problems: list[str]
) -> int:
    """cpuCFSQuotaPeriod in µs, with ``ValidateKubeletConfiguration``'s two rules: with the
    gate, from 1ms to 1s (1.26 on), from 1µs to 1s before."""
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
    elif custom and has(version, "cfs-period-min-1ms") and not 10**6 <= nanos <= 10**9:
        problems.append(
            f"invalid configuration: {f.label} {shown} must be between 1ms and 1sec, inclusive."
        )
    elif custom and not has(version, "cfs-period-min-1ms") and not 10**3 <= nanos <= 10**9:
        # v1.20.2: IsInRange(period, int(1*time.Microsecond), int(time.Second))
        problems.append(
            f"invalid configuration: {f.label} {shown} must be between 1usec and 1sec,"
            " inclusive."
        )
    return nanos // 1000


def build(
    values: Mapping[str, object],
    online_cpus: Callable[[], frozenset[int]] | None,
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
    # an unsupported --kubelet-version is refused in _strings; the rest is checked at the default
    version = normalise(str(values["kubelet-version"])) or DEFAULT_KUBELET_VERSION
    enforce = _enforcement(values, version, problems)
    cpus = _reserved_cpus(values, overrides, online_cpus, problems)
    qos = _qos_reserved(mapping("qos-reserved"), problems)
    _strings(values, problems)
    gates: dict[str, bool] = values["feature-gates"]  # type: ignore[assignment]
    label = BY_FLAG["feature-gates"].label
    problems += [
        f"{label}: {p}; expected {features.FORM}." for p in features.check_gates(gates, version)
    ]
    period = _cfs_period(values, gates, version, problems)
    policy, options = _cpu_manager(values, kube, system, version, problems)
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
        kubelet_version=version,
        kubelet_cgroups=str(values["kubelet-cgroups"]),
        runtime_cgroups=str(values["runtime-cgroups"]),
        system_cgroups=str(values["system-cgroups"]),
        memory_reservation_policy=reservation,
        fail_cgroup_v1=_fail_cgroup_v1(values, version, problems),
    )


def _fail_cgroup_v1(
    values: Mapping[str, object], version: str, problems: list[str]
) -> bool | None:
    """failCgroupV1 (--fail-cgroupv1) as given; a file's field is dropped before 1.31, when
    it is read, so a value here before 1.31 came from a flag the kubelet does not have."""
    value = values["fail-cgroupv1"]
    if value is not None and not has(version, "fail-cgroup-v1"):
        problems.append(
            f"--fail-cgroupv1: the kubelet {version} has no such flag (failCgroupV1 arrived in"
            f" {since('fail-cgroup-v1')}); leave it out or match a newer kubelet."
        )
        return None
    return value  # type: ignore[return-value]


MEMORY_RESERVATION_POLICIES = ("None", "TieredReservation")


def _memory_reservation_policy(
    values: Mapping[str, object], gates: Mapping[str, bool], version: str, problems: list[str]
) -> str:
    """memoryReservationPolicy with ValidateKubeletConfiguration's two rules (1.36+); before
    1.36 the field does not exist and the kubelet's lenient decode drops it."""
    text = str(values["memory-reservation-policy"])
    if not has(version, "memory-reservation-policy"):
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
