"""The kubelet releases cgalloc matches, and the behaviours that depend on the release.

``--kubelet-version`` accepts every minor from 1.20 to 1.37; 1.37, the newest stable, is the
default. Each behaviour that changed between 1.20 and 1.37 and touches what cgalloc computes,
writes or validates is a row of ``BEHAVIOURS`` with the first minor that has it and the upstream
code and evidence behind that minor. A behaviour applies when the matched minor is at or above
its ``since`` (``has``); the code that follows one names the row rather than a version number.

The oldest end is held by the real kubelet v1.20.2 (its source, Debian's orig tarball of the
v1.20.2 tag, and the binary run in the Vagrant guests); the newest by upstream's current tree.
Where a row's first minor comes from a pull request's dates or a release's changelog rather
than from the file at the release tag, ``source`` says so.
Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import NamedTuple

OLDEST_MINOR = 20
NEWEST_MINOR = 37
DEFAULT_KUBELET_VERSION = f"1.{NEWEST_MINOR}"
SUPPORTED_VERSIONS = tuple(f"1.{m}" for m in range(OLDEST_MINOR, NEWEST_MINOR + 1))
VERSION_FORM = f"a kubelet minor from 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR}"


class Behaviour(NamedTuple):
    """A kubelet behaviour cgalloc models that started in release ``since``."""

    name: str
    since: str
    what: str  # what the kubelet does from ``since`` on, and before it
    source: str  # upstream file and function, and how the first minor was established


# fmt: off
BEHAVIOURS = (
    Behaviour(
        "cadvisor-v2-root-stats", "1.21",
        "on cgroup v2 /stats/summary's node.cpu and node.memory are the root cgroup's figures;"
        " before 1.21 the kubelet's cAdvisor reads no file of the v2 root and reports zeros"
        " (usageCoreNanoSeconds, usageBytes, workingSetBytes 0; availableBytes the machine's"
        " memory), as the real 1.20.2 did in the v2 guest",
        "cAdvisor container/libcontainer/handler.go GetStats: v0.38.x skips the v2 root"
        " (readCgroupStats false, \"On cgroup v2 there are no stats at the root cgroup\");"
        " google/cadvisor PR #2801 reads it and ignores its missing files, first in v0.39.0,"
        " which kubernetes PR #99875 vendors for 1.21 (v1.20.2 vendors v0.38.6). The root's"
        " memory at 1.21-1.22 also depends on the vendored runc's fs2 statMemory: not"
        " established, cgalloc reports the root's figures from 1.21",
    ),
    Behaviour(
        "memory-qos-gate", "1.22",
        "the MemoryQoS gate exists (alpha, off by default until 1.37): on cgroup v2 it writes"
        " memory.min from memory requests on pods, the burstable tier and kubepods, and"
        " memory.min = the reservation on enforced reserved cgroups; before 1.22 the kubelet"
        " refuses the gate as unrecognized",
        "pkg/features/kube_features.go defaultVersionedKubernetesFeatureGates MemoryQoS"
        " {1.22 Alpha} (KEP-2570); qos_container_manager_linux.go setMemoryQoS,"
        " node_container_manager_linux.go enforceExistingCgroup; v1.20.2 kube_features.go has"
        " no MemoryQoS",
    ),
    Behaviour(
        "cpu-manager-policy-options", "1.22",
        "cpuManagerPolicyOptions (--cpu-manager-policy-options) exists; before 1.22 the config"
        " field is dropped by the kubelet's lenient decode and the flag is unknown",
        "k8s.io/kubelet config/v1beta1/types.go KubeletConfiguration.CPUManagerPolicyOptions:"
        " absent at tag kubernetes-1.21.0, present at kubernetes-1.22.0",
    ),
    Behaviour(
        "cadvisor-v2-unlimited-memory", "1.22",
        "on cgroup v2 a memory.max of \"max\" is no limit in /stats/summary (no availableBytes,"
        " as on v1); before 1.22 the kubelet's cAdvisor reads it as 0 and puts the machine's"
        " memory in its place, so an unlimited cgroup's availableBytes is MemTotal minus its"
        " working set",
        "cAdvisor container/common/helpers.go readUInt64 (google/cadvisor PR #2837, first in"
        " v0.39.2, tagged 2021-05-31) and manager.go getSpec (a 0 limit becomes"
        " MachineInfo.MemoryCapacity); v1.20.2 vendors v0.38.6 (go.mod). 1.22 is inferred:"
        " 1.21.0 (2021-04-08) predates v0.39.2",
    ),
    Behaviour(
        "pid-capacity-threads-max", "1.24",
        "pid capacity (kubepods pids.max = capacity - pid reservations) is the smaller of"
        " kernel.pid_max and kernel.threads-max; before 1.24 kernel.pid_max alone",
        "pkg/kubelet/stats/pidlimit/pidlimit_linux.go Stats (kubernetes#107111, PR #107112);"
        " v1.20.2 Stats reads /proc/sys/kernel/pid_max only. 1.24 is inferred: the PR was"
        " opened on 2021-12-17, after v1.23.0, and carries no release note",
    ),
    Behaviour(
        "cfs-period-min-1ms", "1.26",
        "with CustomCPUCFSQuotaPeriod, cpuCFSQuotaPeriod must be from 1ms to 1s; before 1.26"
        " from 1us to 1s",
        "pkg/kubelet/apis/config/validation/validation.go ValidateKubeletConfiguration"
        " (PR #112123, reviewed after v1.25.0; v1.20.2 says \"between 1usec and 1sec\")",
    ),
    Behaviour(
        "config-dir", "1.28",
        "the --config-dir drop-in directory exists; 1.28 and 1.29 start with it only when"
        " KUBELET_CONFIG_DROPIN_DIR_ALPHA is set in the kubelet's environment (gone in 1.30,"
        " PR #122907); before 1.28 the flag is unknown",
        "cmd/kubelet/app/server.go mergeKubeletConfigurations (KEP-3983)",
    ),
    Behaviour(
        "sidecar-containers", "1.28",
        "an init container with restartPolicy Always is a sidecar: its requests add to the"
        " pod's and it runs beside later init containers; gate SidecarContainers is alpha"
        " (off) in 1.28, where the kubelet rejects such a pod"
        " (InitContainerRestartPolicyForbidden), beta (on) from 1.29, locked on from 1.33;"
        " before 1.28 the field is unknown and the container is a plain init container",
        "kube_features.go SidecarContainers {1.28 Alpha, 1.29 Beta, 1.33 GA};"
        " pkg/kubelet/lifecycle/predicate.go; pkg/api/v1/resource/helpers.go PodRequests"
        " (v1.20.2: PodRequestsAndLimits takes the max of init containers, and"
        " core/v1 Container has no restartPolicy)",
    ),
    Behaviour(
        "summary-container-fs", "1.29",
        "/stats/summary's node.runtime has containerFs beside imageFs (the same figures while"
        " the runtime keeps containers' writable layers on the image filesystem); before 1.29"
        " imageFs alone",
        "k8s.io/kubelet pkg/apis/stats/v1alpha1/types.go RuntimeStats.ContainerFs: first at"
        " tag kubernetes-1.29.0 (KEP-4191); pkg/kubelet/stats/cri_stats_provider.go"
        " ImageFsStats returns imageFs as containerFs (\"we don't support separate disks yet\")",
    ),
    Behaviour(
        "eviction-imagefs-inodes", "1.30",
        "the default hard-eviction set includes imagefs.inodesFree<5%; before 1.30 it is"
        " memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,"
        " imagefs.available<15%",
        "pkg/kubelet/eviction/defaults_linux.go DefaultEvictionHard (PR #121834, listed in"
        " CHANGELOG-1.30.md under v1.30.0-alpha.1, changes since v1.29.0; v1.20.2"
        " pkg/kubelet/apis/config/v1beta1/defaults_linux.go has the four signals)",
    ),
    Behaviour(
        "enforce-validation-per-option", "1.31",
        "with cgroupsPerQOS false only an enforcing entry of enforceNodeAllocatable is refused"
        " (none alone passes) and a repeated entry is refused; before 1.31 any entry with"
        " cgroupsPerQOS false is refused, with \"is not supported unless cgroupsPerQOS ... is"
        " set to true\", and repeats pass",
        "validation.go ValidateKubeletConfiguration (PR #124268, opened 2024-04-11 after the"
        " 1.30 freeze; v1.20.2 has the old rule and no repeat check). That the repeat check"
        " arrived with this PR is inferred, not read at the v1.31.0 tag",
    ),
    Behaviour(
        "fail-cgroup-v1", "1.31",
        "failCgroupV1 exists: when true the kubelet refuses to start on a cgroup v1 host;"
        " its default is false until 1.34 and true from 1.35",
        "k8s.io/kubelet config/v1beta1/types.go FailCgroupV1: first at tag kubernetes-1.31.0"
        " (Default: false), Default: true at kubernetes-1.35.0",
    ),
    Behaviour(
        "enforce-compressible", "1.32",
        "enforceNodeAllocatable takes system-reserved-compressible and"
        " kube-reserved-compressible (cpu only on the reserved cgroup); before 1.32 they are"
        " invalid options",
        "validation.go ValidateKubeletConfiguration, node_container_manager_linux.go"
        " enforceNodeAllocatableCgroups (PR #125982, listed in CHANGELOG-1.32.md under"
        " v1.32.0-alpha.2)",
    ),
    Behaviour(
        "kubepods-cpuset", "1.32",
        "with the none CPU manager policy, kubepods and the enforced reserved cgroups get a"
        " cpuset of all CPUs; before 1.32 the kubelet writes no cpuset there",
        "node_container_manager_linux.go getCgroupConfig (PR #125923, listed in"
        " CHANGELOG-1.32.md under v1.32.0-alpha.2; v1.20.2 getCgroupConfig sets no CPUSet)",
    ),
    Behaviour(
        "strict-cpu-reservation", "1.32",
        "the static policy's strict-cpu-reservation option keeps pods off reservedSystemCPUs;"
        " before 1.32 the kubelet refuses it as an unsupported option",
        "pkg/kubelet/cm/cpumanager/policy_options.go (KEP-4540, PR #127483; alpha in 1.32)",
    ),
    Behaviour(
        "pod-level-resources", "1.32",
        "the PodLevelResources gate exists (alpha, off; beta and on from 1.34): spec.resources"
        " decide the QoS class and the pod cgroup; before 1.32 the kubelet refuses the gate",
        "kube_features.go PodLevelResources {1.32 Alpha, 1.34 Beta} (KEP-2837)",
    ),
    Behaviour(
        "merge-default-eviction", "1.33",
        "mergeDefaultEvictionSettings exists: true keeps the default signals a partial"
        " evictionHard leaves out; before 1.33 the field is dropped and a partial evictionHard"
        " replaces the defaults",
        "k8s.io/kubelet config/v1beta1/types.go MergeDefaultEvictionSettings: first at tag"
        " kubernetes-1.33.0",
    ),
    Behaviour(
        "memory-reservation-policy", "1.36",
        "memoryReservationPolicy exists (None or TieredReservation): with MemoryQoS,"
        " TieredReservation gives Burstable pods and the burstable tier memory.low instead of"
        " memory.min; before 1.36 the field is dropped",
        "k8s.io/kubelet config/v1beta1/types.go MemoryReservationPolicy: first at tag"
        " kubernetes-1.36.0; qos_container_manager_linux.go setMemoryQoS",
    ),
    Behaviour(
        "memory-qos-beta", "1.37",
        "MemoryQoS is beta and on by default: memory.min on enforced reserved cgroups and"
        " kubepods memory.low for the burstable tier's protection",
        "kube_features.go MemoryQoS {1.37 Beta} (KEP-2570, kubernetes#140007)",
    ),
)
# fmt: on
_BY_NAME = {b.name: b for b in BEHAVIOURS}


def minor_tuple(version: str) -> tuple[int, int]:
    """ "1.37" -> (1, 37); ValueError for anything else."""
    major, sep, minor = version.partition(".")
    if not sep or not major.isdigit() or not minor.isdigit() or not major.isascii():
        raise ValueError(f"{version!r} is not a MAJOR.MINOR version")
    return int(major), int(minor)


def since(name: str) -> str:
    """The first minor that has behaviour ``name``."""
    return _BY_NAME[name].since


def has(version: str, name: str) -> bool:
    """Whether the kubelet ``version`` has behaviour ``name``."""
    return minor_tuple(version) >= minor_tuple(_BY_NAME[name].since)


def pid_capacity(version: str, pid_max: int | None, threads_max: int | None) -> int | None:
    """The kubelet's pid capacity (pidlimit.Stats MaxPID) from the two sysctls the host read
    (None: unreadable): from 1.24 the smaller of the readable ones; before, pid_max alone.
    None when the kubelet would have none, and so no pid capacity and no kubepods pids.max."""
    if not has(version, "pid-capacity-threads-max"):
        return pid_max
    readable = [v for v in (pid_max, threads_max) if v is not None]
    return min(readable) if readable else None


def refuses_cgroup_v1(version: str, fail_cgroup_v1: bool | None) -> bool:
    """Whether the kubelet ``version`` refuses to start on a cgroup v1 host: failCgroupV1 as
    given (1.31+), else its default, true from 1.35."""
    if not has(version, "fail-cgroup-v1"):
        return False
    if fail_cgroup_v1 is not None:
        return fail_cgroup_v1
    return minor_tuple(version) >= (1, 35)


def hierarchy_notes(
    version: str, cgroup_version: str, driver: str, fail_cgroup_v1: bool | None = None
) -> list[str]:
    """What the kubelet ``version`` does on this host's cgroup hierarchy that cgalloc's tree
    cannot change: its refusal of cgroup v1 (failCgroupV1, default true from 1.35), and 1.20's
    systemd driver on cgroup v2, which writes to twins of the cgroups it checks."""
    notes = []
    if cgroup_version == "v1" and refuses_cgroup_v1(version, fail_cgroup_v1):
        notes.append(
            f"the kubelet {version} refuses to start on this cgroup v1 host unless its"
            " configuration sets failCgroupV1: false (--fail-cgroupv1=false; the default is"
            " true from 1.35)."
        )
    if cgroup_version == "v2" and driver == "systemd" and minor_tuple(version) < (1, 21):
        notes.append(
            f"the kubelet {version} with the systemd driver on cgroup v2 checks the .slice"
            " cgroups cgalloc makes but writes its limits to cgroupfs-named twins (/kubepods,"
            " /kubepods/burstable/pod<uid>) that nothing runs in (runc 1.0.0-rc92, seen with"
            " the real 1.20.2); run 1.20 on v2 with the cgroupfs driver."
        )
    return notes


# k8s.io/apimachinery/pkg/util/version ParseGeneric (versionMatchRE, RE2's \s): leading
# whitespace, an optional "v", two or more dot-separated decimal components, then anything but
# a newline, which is ignored; so `kubelet --version`'s "v1.37.2", EKS's "v1.37.2-eks-4f2a1b"
# and k3s's "v1.37.2+k3s1" read as 1.37.
# (the lookahead keeps the components maximal, as RE2's greedy match takes them: without it a
# failing match tried every split against [^\n]*, quadratic in the length)
_GENERIC = re.compile(r"[\t\n\f\r ]*v?([0-9]+(?:\.[0-9]+)+)(?!\.?[0-9])[^\n]*")


def normalise(text: str) -> str | None:
    """A --kubelet-version value as ParseGeneric reads it ("1.37", "v1.37.2-eks-1"), as its
    supported minor; None when it is no version or not a supported minor."""
    match = _GENERIC.fullmatch(text)
    if match is None:
        return None
    major, minor = match.group(1).split(".")[:2]
    if major.startswith("0") and major != "0":  # "illegal zero-prefixed version component"
        return None
    version = f"{int(major)}.{int(minor)}"  # later components may be zero-prefixed
    return version if version in SUPPORTED_VERSIONS else None


def help_text() -> str:
    """The --kubelet-version help: the accepted minors, the default, and each behaviour that
    depends on the minor with the first minor that has it, oldest first."""
    rows = " ".join(f"{b.since}: {b.what}." for b in BEHAVIOURS)
    return (
        f"Kubelet minor to match, 1.{OLDEST_MINOR} to 1.{NEWEST_MINOR} (default"
        f" {DEFAULT_KUBELET_VERSION}, the newest stable), given as `kubelet --version` prints"
        f" it or shorter (v1.37.2, v1.37.2-eks-..., 1.37). What follows the minor: {rows}"
    )
