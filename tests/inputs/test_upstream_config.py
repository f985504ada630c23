"""Upstream's own test tables for kubelet configuration and pod resources, ported row by row.

Every expected value and error sentence below is copied from the upstream test named at each
table (kubernetes/kubernetes); none was produced by running cgalloc. A row that cannot apply to
cgalloc (it sets only fields cgalloc does not read, or needs inputs cgalloc never sees, such as
pod status) is left out with a comment saying why.

Tables ported here:

- pkg/kubelet/apis/config/validation/validation_test.go TestValidateKubeletConfiguration: the
  rows that touch fields cgalloc reads, each as a KubeletConfiguration file built from the
  table's ``successConfig`` (validation_others_test.go supplies its cgroupsPerQOS and
  enforceNodeAllocatable) and loaded as cgalloc loads a node's inputs; the refused rows also
  through ``cgalloc show``: exit 2 and the kubelet's sentence.
  Already ported elsewhere, so not repeated: "invalid MaxPods" and "invalid PodsPerCore"
  (tests/inputs/test_config.py test_negative_pod_counts_are_refused).
  tests/cli/test_cli_validation.py holds the flag forms of the enforcement rules; the config-file
  rows here are a separate path. tests/inputs/test_config.py test_bad_cfs_period cites this table
  too, but enables the gate under the Go constant's name (CPUCFSQuotaPeriod) instead of the
  gate's name (CustomCPUCFSQuotaPeriod), so both CPUCFSQuotaPeriod rows are ported again here
  as upstream wrote them.
- pkg/kubelet/apis/config/v1beta1/defaults_test.go TestSetDefaultsKubeletConfiguration: the
  defaulted values of the fields cgalloc reads, through a config file.
- staging/src/k8s.io/component-helpers/resource/helpers_test.go: TestPodRequestsAndLimits,
  TestPodRequestsAndLimitsWithoutOverhead, the rows of TestPodResourceRequests and
  TestPodResourceLimits that tests/model/test_podresources.py lacks, TestIsPodLevelResourcesSet,
  TestPodLevelResourceRequests, TestIsSupportedPodLevelResource and
  TestAggregateContainerRequestsAndLimits.
- cmd/kubelet/app/server_test.go TestValueOfAllocatableResources and the kubeReserved and
  systemReserved rows of TestMergeKubeletConfigurations. cmd/kubelet/app/options/options_test.go
  has no table about a flag cgalloc accepts (TestRoundTrip covers every flag's own default
  only; TestValidateKubeletFlags covers --node-labels).
"""

from __future__ import annotations

import json
import re

import pytest
from clirun import run_cli

from cgalloc.errors import InputError
from cgalloc.inputs.config import load_node_config
from cgalloc.inputs.validate import parse_duration
from cgalloc.model.cpuset import parse_cpu_list
from cgalloc.model.podresources import (
    Container,
    Pod,
    pod_level_set,
    pod_limits,
    pod_requests,
    supported_pod_level,
)
from cgalloc.model.quantity import Quantity

API = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}


def config_file(tmp_path, fields: dict, name: str = "kubelet.json") -> str:
    """A KubeletConfiguration file holding ``fields``; JSON, which the kubelet reads as YAML."""
    path = tmp_path / name
    path.write_text(json.dumps({**API, **fields}))
    return str(path)


def load(**kw):
    return load_node_config({}, online_cpus=lambda: frozenset(range(4)), **kw)


# ============================================================================================
# pkg/kubelet/apis/config/validation/validation_test.go TestValidateKubeletConfiguration
# ============================================================================================

# successConfig, as far as cgalloc reads it. The table's other fields (ports, image GC, QPS,
# shutdown periods, topology manager, logging, podLogsDir, containerRuntimeEndpoint, ...) are
# not read by cgalloc. Its gate "EnableKubeletCrashLoopBackoffMax" is left out of featureGates:
# later trees name that gate KubeletCrashLoopBackOffMax, and it only guards crashLoopBackOff.
SUCCESS_GATES = {"CustomCPUCFSQuotaPeriod": True, "GracefulNodeShutdown": True, "MemoryQoS": True}
SUCCESS_CONFIG = {
    "cgroupsPerQOS": True,  # validation_others_test.go: cgroupsPerQOS = true
    # validation_others_test.go: enforceNodeAllocatable = {"pods", "system-reserved",
    # "kube-reserved"}
    "enforceNodeAllocatable": ["pods", "system-reserved", "kube-reserved"],
    "systemReservedCgroup": "/system.slice",
    "kubeReservedCgroup": "/kubelet.service",
    "systemCgroups": "",
    "cgroupRoot": "",
    "maxPods": 110,
    "podsPerCore": 100,
    "cpuCFSQuotaPeriod": "25ms",
    "featureGates": SUCCESS_GATES,
}

# (name, fields that row's configure() sets over successConfig, errMsg; "" for success)
# fmt: off
VALIDATION_ROWS = [
    ("Success", {}, ""),
    ("specify EnforceNodeAllocatable without enabling CgroupsPerQOS",
     {"cgroupsPerQOS": False, "enforceNodeAllocatable": ["pods"]},
     "invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\""
     " contained in enforceNodeAllocatable (--enforce-node-allocatable)"),
    ("specify SystemCgroups without CgroupRoot",
     {"systemCgroups": "/", "cgroupRoot": ""},
     "invalid configuration: systemCgroups (--system-cgroups) was specified and cgroupRoot"
     " (--cgroup-root) was not specified"),
    ("specify CPUCFSQuotaPeriod without enabling CPUCFSQuotaPeriod",
     {"featureGates": {"CustomCPUCFSQuotaPeriod": False}, "cpuCFSQuotaPeriod": "200ms"},
     "invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {200ms} requires feature"
     " gate CustomCPUCFSQuotaPeriod"),
    ("invalid CPUCFSQuotaPeriod",
     {"featureGates": {"CustomCPUCFSQuotaPeriod": True}, "cpuCFSQuotaPeriod": "2s"},
     "invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {2s} must be between 1ms"
     " and 1sec, inclusive"),
    ("specify SystemReservedEnforcementKey without specifying SystemReservedCgroup",
     {"enforceNodeAllocatable": ["system-reserved"], "systemReservedCgroup": ""},
     "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified"
     " when \"system-reserved\" or \"system-reserved-compressible\" included in"
     " enforceNodeAllocatable (--enforce-node-allocatable)"),
    ("specify SystemReservedCompressibleEnforcementKey without specifying SystemReservedCgroup",
     {"enforceNodeAllocatable": ["system-reserved-compressible"], "systemReservedCgroup": ""},
     "invalid configuration: systemReservedCgroup (--system-reserved-cgroup) must be specified"
     " when \"system-reserved\" or \"system-reserved-compressible\" included in"
     " enforceNodeAllocatable (--enforce-node-allocatable)"),
    ("specify SystemReservedCompressibleEnforcementKey with SystemReservedEnforcementKey",
     {"enforceNodeAllocatable": ["system-reserved-compressible", "system-reserved"]},
     "invalid configuration: both \"system-reserved\" and \"system-reserved-compressible\" cannot"
     " be specified together in enforceNodeAllocatable (--enforce-node-allocatable)"),
    ("specify KubeReservedCompressibleEnforcementKey without specifying KubeReservedCgroup",
     {"enforceNodeAllocatable": ["kube-reserved-compressible"], "kubeReservedCgroup": ""},
     "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when"
     " \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable"
     " (--enforce-node-allocatable)"),
    ("specify KubeReservedEnforcementKey without specifying KubeReservedCgroup",
     {"enforceNodeAllocatable": ["kube-reserved"], "kubeReservedCgroup": ""},
     "invalid configuration: kubeReservedCgroup (--kube-reserved-cgroup) must be specified when"
     " \"kube-reserved\" or \"kube-reserved-compressible\" included in enforceNodeAllocatable"
     " (--enforce-node-allocatable)"),
    ("specify KubeReservedCompressibleEnforcementKey with KubeReservedEnforcementKey",
     {"enforceNodeAllocatable": ["kube-reserved-compressible", "kube-reserved"]},
     "invalid configuration: both \"kube-reserved\" and \"kube-reserved-compressible\" cannot be"
     " specified together in enforceNodeAllocatable (--enforce-node-allocatable)"),
    ("specify NodeAllocatableNoneKey with additional enforcements",
     {"enforceNodeAllocatable": ["none", "kube-reserved"]},
     "invalid configuration: enforceNodeAllocatable (--enforce-node-allocatable) may not contain"
     " additional enforcements when \"none\" is specified"),
    ("duplicated EnforceNodeAllocatable",
     {"enforceNodeAllocatable": ["none", "none"]},
     "invalid configuration: duplicated enforcements \"none\" in enforceNodeAllocatable"
     " (--enforce-node-allocatable)"),
    ("invalid EnforceNodeAllocatable",
     {"enforceNodeAllocatable": ["invalid-enforce-node-allocatable"]},
     "invalid configuration: option \"invalid-enforce-node-allocatable\" specified for"
     " enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \"pods\","
     " \"system-reserved\", \"system-reserved-compressible\", \"kube-reserved\","
     " \"kube-reserved-compressible\" or \"none\""),
    ("specify ReservedSystemCPUs with SystemReservedCgroup",
     {"reservedSystemCPUs": "0-3", "systemReservedCgroup": "/system.slice"},
     "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with"
     " systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup"
     " (--kube-reserved-cgroup)"),
    ("specify ReservedSystemCPUs with KubeReservedCgroup",
     {"reservedSystemCPUs": "0-3", "kubeReservedCgroup": "/system.slice"},
     "invalid configuration: can't use reservedSystemCPUs (--reserved-cpus) with"
     " systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup"
     " (--kube-reserved-cgroup)"),
    ("invalid ReservedSystemCPUs",
     {"reservedSystemCPUs": "invalid-reserved-system-cpus"},
     "invalid configuration: unable to parse reservedSystemCPUs (--reserved-cpus)"
     " invalid-reserved-system-cpus, error:"),
    ("invalid FeatureGate",
     {"featureGates": {**SUCCESS_GATES, "invalid": True}},
     "unrecognized feature gate: invalid"),
]
# fmt: on
# Left out of TestValidateKubeletConfiguration, each setting only fields cgalloc does not read:
# nodeLeaseDurationSeconds, eventBurst, eventRecordQPS, healthzPort, the imageGC thresholds,
# iptables bits, kubeAPIBurst/QPS, nodeStatusMaxImages, maxOpenFiles, oomScoreAdj, port,
# readOnlyPort, registryBurst/PullQPS, maxParallelImagePulls (both rows and the valid one),
# serverTLSBootstrap, topologyManagerPolicy/Scope, the shutdownGracePeriod rows, crashLoopBackOff,
# registerWithTaints, tracing, shutdownGracePeriodByPodPriority, enableSystemLogQuery,
# imageMaximumGCAge, containerLogMaxWorkers, containerLogMonitorInterval, podLogsDir,
# containerRuntimeEndpoint, logging. Also the memory QoS and swap rows: "invalid
# MemorySwap.SwapBehavior" and "specify MemorySwap.SwapBehavior without enabling NodeSwap" set
# memorySwap, "enable MemoryQoS without specifying MemoryThrottlingFactor" and "invalid
# MemoryThrottlingFactor" set memoryThrottlingFactor; cgalloc reads neither field (the first
# MemoryQoS row cannot come from a file anyway: v1beta1 defaulting sets the factor to 0.9).


def as_cgalloc_writes(kubelet: str) -> str:
    """The kubelet's sentence as cgalloc prints it: one sentence (". Valid options are" becomes
    "; valid options are") and the user's value quoted, as cgalloc quotes every value it
    echoes ("(--reserved-cpus) X, error:" becomes '(--reserved-cpus) "X":')."""
    text = kubelet.replace(". Valid options are", "; valid options are")
    return re.sub(r"\(--reserved-cpus\) (\S+), error:", r'(--reserved-cpus) "\1":', text)


@pytest.mark.parametrize(
    ("configured", "err_msg"),
    [row[1:] for row in VALIDATION_ROWS],
    ids=[row[0] for row in VALIDATION_ROWS],
)
def test_validate_kubelet_configuration(tmp_path, configured, err_msg):
    # validation_test.go TestValidateKubeletConfiguration: configure(successConfig.DeepCopy()),
    # then no error for an empty errMsg, else errs.Error() contains errMsg. cgalloc's port of
    # ValidateKubeletConfiguration runs while load_node_config merges the inputs.
    path = config_file(tmp_path, {**SUCCESS_CONFIG, **configured})
    if not err_msg:
        load(config=path)
        return
    with pytest.raises(InputError) as refused:
        load(config=path)
    problems = refused.value.problems
    assert any(as_cgalloc_writes(err_msg) in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("configured", "err_msg"),
    [row[1:] for row in VALIDATION_ROWS if row[2]],
    ids=[row[0] for row in VALIDATION_ROWS if row[2]],
)
def test_validate_kubelet_configuration_through_the_cli(capsys, tmp_path, configured, err_msg):
    # The same refused rows through `cgalloc show`: exit 2, the kubelet's sentence on stderr.
    # (The "Success" row is not run here: show goes on to the kubelet's ContainerManager checks,
    # and successConfig enforces kube-reserved and system-reserved with nothing reserved, which
    # enforceNodeAllocatableCgroups refuses at run time; ValidateKubeletConfiguration does not.)
    path = config_file(tmp_path, {**SUCCESS_CONFIG, **configured})
    code, out, err = run_cli(capsys, "show", "--capacity", "cpu=4,memory=8Gi", "--config", path)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert any(as_cgalloc_writes(err_msg) in line for line in lines), lines


# ============================================================================================
# pkg/kubelet/apis/config/v1beta1/defaults_test.go TestSetDefaultsKubeletConfiguration
# ============================================================================================


def _quantities(value):
    return {k: Quantity.parse(v) for k, v in (value or {}).items()}


# KubeletConfiguration field -> (NodeConfig attribute, the field's value as NodeConfig holds it)
AS_NODE_CONFIG = {
    "cgroupsPerQOS": ("cgroups_per_qos", bool),
    "cgroupDriver": ("cgroup_driver", str),
    "cgroupRoot": ("cgroup_root", str),
    "kubeletCgroups": ("kubelet_cgroups", str),
    "systemCgroups": ("system_cgroups", str),
    "cpuManagerPolicy": ("cpu_manager_policy", str),
    "cpuManagerPolicyOptions": ("cpu_manager_policy_options", lambda v: dict(v or {})),
    "qosReserved": ("qos_reserved", lambda v: {k: int(p.rstrip("%")) for k, p in (v or {}).items()}),  # noqa: E501
    "maxPods": ("max_pods", int),
    "podPidsLimit": ("pod_max_pids", int),
    "cpuCFSQuota": ("cpu_cfs_quota", bool),
    "cpuCFSQuotaPeriod": ("cpu_cfs_quota_period", lambda v: parse_duration(v) // 1000),
    "evictionHard": ("eviction_hard", lambda v: dict(v or {})),
    "podsPerCore": ("pods_per_core", int),
    "featureGates": ("feature_gates", lambda v: dict(v or {})),
    "systemReserved": ("system_reserved", _quantities),
    "kubeReserved": ("kube_reserved", _quantities),
    "reservedSystemCPUs": ("reserved_cpus", parse_cpu_list),
    "systemReservedCgroup": ("system_reserved_cgroup", str),
    "kubeReservedCgroup": ("kube_reserved_cgroup", str),
    "enforceNodeAllocatable": ("enforce_node_allocatable", lambda v: tuple(v or ())),
    "staticPodPath": ("static_pod_path", str),
}  # fmt: skip


def node_config_view(cfg, fields):
    """The NodeConfig values of ``fields``, as comparable values."""
    out = {}
    for name in fields:
        attr, _ = AS_NODE_CONFIG[name]
        value = getattr(cfg, attr)
        if name == "evictionHard":
            value = {s: t.value for s, t in value.items()}
        out[name] = dict(value) if isinstance(value, dict) else value
    return out


def expected_view(expected):
    return {name: AS_NODE_CONFIG[name][1](v) for name, v in expected.items()}


# The Go zero value of every field above that SetDefaults leaves alone when it is unset, as the
# "empty config" row's cmp.Diff asserts them (absent from its expected struct).
UNSET = {
    "kubeletCgroups": "", "systemCgroups": "", "cpuManagerPolicyOptions": None,
    "qosReserved": None, "podsPerCore": 0, "featureGates": None, "systemReserved": None,
    "kubeReserved": None, "reservedSystemCPUs": "", "systemReservedCgroup": "",
    "kubeReservedCgroup": "", "staticPodPath": "",
}  # fmt: skip
# Left out of every row: cgroupRoot when "" (cgalloc's NodeConfig holds the root the kubelet
# runs with, which server.go's run() defaults to "/" after validation when cgroupsPerQOS is on),
# evictionHard when the input has none and mergeDefaultEvictionSettings (cgalloc's NodeConfig
# holds evictionHard after cmd/kubelet/app/server.go loadConfigFile's defaulting and merge, which
# tests/inputs/test_config.py covers; SetDefaults leaves a nil evictionHard nil).
EMPTY_CONFIG_DEFAULTS = {
    "cgroupsPerQOS": True,
    "cgroupDriver": "cgroupfs",
    "cpuManagerPolicy": "none",
    "maxPods": 110,
    "podPidsLimit": -1,
    "cpuCFSQuota": True,
    "cpuCFSQuotaPeriod": "100ms",
    "enforceNodeAllocatable": ["pods"],  # DefaultNodeAllocatableEnforcement
    **UNSET,
}

# defaults_test.go "all positive": the fields cgalloc reads; SetDefaults changes none of them.
ALL_POSITIVE = {
    "featureGates": {"KubeletCrashLoopBackOffMax": True},
    "staticPodPath": "static/pod/path",
    "cgroupRoot": "root-cgroup",
    "cgroupsPerQOS": True,
    "cgroupDriver": "systemd",
    "qosReserved": {"memory": "10%"},
    "maxPods": 1,
    "podPidsLimit": 1,
    "cpuCFSQuota": True,
    "podsPerCore": 1,
    "systemReserved": {"memory": "1Gi"},
    "kubeReserved": {"memory": "1Gi"},
    "systemReservedCgroup": "system-reserved-cgroup",
    "kubeReservedCgroup": "kube-reserved-cgroup",
    "enforceNodeAllocatable": ["system-reserved"],
}

# (id, input fields, expected fields)
# "all negative" is split into one row per field (with the field it needs to validate, for
# cgroupsPerQOS): SetDefaults defaults each field on its own, and cgalloc validates while it
# loads, so one refused field would otherwise hide every other field's result.
# fmt: off
DEFAULTS_ROWS = [
    ("empty config", {}, EMPTY_CONFIG_DEFAULTS),
    ("all negative/cgroupsPerQOS", {"cgroupsPerQOS": False, "enforceNodeAllocatable": []},
     {"cgroupsPerQOS": False, "enforceNodeAllocatable": []}),
    ("all negative/cgroupDriver", {"cgroupDriver": ""}, {"cgroupDriver": "cgroupfs"}),
    ("all negative/cpuManagerPolicy", {"cpuManagerPolicy": ""}, {"cpuManagerPolicy": "none"}),
    ("all negative/cpuManagerPolicyOptions", {"cpuManagerPolicyOptions": {}},
     {"cpuManagerPolicyOptions": {}}),
    ("all negative/qosReserved", {"qosReserved": {}}, {"qosReserved": {}}),
    ("all negative/maxPods", {"maxPods": 0}, {"maxPods": 110}),
    ("all negative/podPidsLimit", {"podPidsLimit": 0}, {"podPidsLimit": 0}),
    ("all negative/cpuCFSQuota", {"cpuCFSQuota": False}, {"cpuCFSQuota": False}),
    ("all negative/evictionHard", {"evictionHard": {}}, {"evictionHard": {}}),
    ("all negative/podsPerCore", {"podsPerCore": 0}, {"podsPerCore": 0}),
    ("all negative/featureGates", {"featureGates": {}}, {"featureGates": {}}),
    ("all negative/systemReserved", {"systemReserved": {}}, {"systemReserved": {}}),
    ("all negative/kubeReserved", {"kubeReserved": {}}, {"kubeReserved": {}}),
    ("all negative/reservedSystemCPUs", {"reservedSystemCPUs": ""}, {"reservedSystemCPUs": ""}),
    ("all negative/systemReservedCgroup", {"systemReservedCgroup": ""},
     {"systemReservedCgroup": ""}),
    ("all negative/kubeReservedCgroup", {"kubeReservedCgroup": ""}, {"kubeReservedCgroup": ""}),
    ("all negative/enforceNodeAllocatable", {"enforceNodeAllocatable": []},
     {"enforceNodeAllocatable": []}),
    ("all negative/kubeletCgroups", {"kubeletCgroups": ""}, {"kubeletCgroups": ""}),
    ("all negative/systemCgroups", {"systemCgroups": ""}, {"systemCgroups": ""}),
    ("all negative/staticPodPath", {"staticPodPath": ""}, {"staticPodPath": ""}),
    # "all negative" also sets cpuCFSQuotaPeriod 0, which ValidateKubeletConfiguration refuses
    # (it needs the CustomCPUCFSQuotaPeriod gate, and with the gate it is below 1ms): cgalloc
    # validates while loading, so that field is left out.
    ("all positive", ALL_POSITIVE, ALL_POSITIVE),
    # Left out of "all positive", each refused before defaulting matters: cpuManagerPolicy
    # "cpu-manager-policy" and cpuManagerPolicyOptions {key: value} (cpumanager.NewManager: unknown
    # policy), cpuCFSQuotaPeriod 60s (ValidateKubeletConfiguration: needs the gate, then above
    # 1s), reservedSystemCPUs "0,1" (ValidateKubeletConfiguration: not with the reserved cgroups
    # this row sets), kubeletCgroups "kubelet-cgroup" and systemCgroups "system-cgroup" (relative
    # daemon cgroups, which cgalloc refuses by its own rule), and evictionHard with
    # mergeDefaultEvictionSettings (see above).
    ("CrashLoopBackOff defaults empty when feature gate disabled",
     {"featureGates": {"KubeletCrashLoopBackOffMax": False}},
     {**EMPTY_CONFIG_DEFAULTS, "featureGates": {"KubeletCrashLoopBackOffMax": False}}),
    # Left out: "NodeStatusUpdateFrequency is not zero" and both "SerializeImagePull defaults
    # ..." rows set only fields cgalloc does not read; for cgalloc's fields they are "empty
    # config" again.
]
# fmt: on


@pytest.mark.parametrize(
    ("given", "expected"),
    [row[1:] for row in DEFAULTS_ROWS],
    ids=[row[0] for row in DEFAULTS_ROWS],
)
def test_set_defaults_kubelet_configuration(tmp_path, given, expected):
    # defaults_test.go TestSetDefaultsKubeletConfiguration: SetDefaults_KubeletConfiguration,
    # then cmp.Diff(expected, config) is empty.
    cfg = load(config=config_file(tmp_path, given))
    assert node_config_view(cfg, expected) == expected_view(expected)


# ============================================================================================
# cmd/kubelet/app/server_test.go
# ============================================================================================


# TestValueOfAllocatableResources is ported in tests/model/test_upstream_allocatable.py.


# server_test.go TestMergeKubeletConfigurations: the test merges the two drop-ins into an empty
# KubeletConfiguration (its kubelet.conf is written but never loaded: mergeKubeletConfigurations
# gets only the directory), so the rows are ported as --config-dir alone. Left out: "kubelet.conf.d
# overrides kubelet.conf", "cli args override kubelet.conf.d" and "cli args override
# kubelet.conf" check only port, readOnlyPort and clusterDNS, which cgalloc does not read.
@pytest.mark.parametrize(
    ("dropin1", "dropin2", "field", "expected"),
    [
        pytest.param(
            "readOnlyPort: 10255\nkubeReserved:\n  memory: 150Mi\n  cpu: 200m\n",
            "readOnlyPort: 10257\nkubeReserved:\n  memory: 100Mi\n",
            "kube_reserved",
            {"cpu": "200m", "memory": "100Mi"},
            id="kubelet.conf.d overrides kubelet.conf with subfield override",
        ),
        pytest.param(
            "port: 9090\nsystemReserved:\n  memory: 1Gi\n",
            "port: 8080\nreadOnlyPort: 10255\nsystemReserved:\n  memory: 2Gi\nclusterDNS:\n"
            "  - 192.168.1.1\n  - 192.168.1.5\n  - 192.168.1.8\n",
            "system_reserved",
            {"memory": "2Gi"},
            id="kubelet.conf.d overrides kubelet.conf with slices/lists",
        ),
    ],
)
def test_merge_kubelet_configurations(tmp_path, dropin1, dropin2, field, expected):
    head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    conf_d = tmp_path / "kubelet.conf.d"
    conf_d.mkdir()
    (conf_d / "10-kubelet.conf").write_text(head + dropin1)
    (conf_d / "20-kubelet.conf").write_text(head + dropin2)
    cfg = load(config_dir=str(conf_d))
    assert getattr(cfg, field) == _quantities(expected)


# ============================================================================================
# staging/src/k8s.io/component-helpers/resource/helpers_test.go
# ============================================================================================


def rl(**quantities: str) -> dict[str, Quantity]:
    """A v1.ResourceList; hugepages_2Mi is hugepages-2Mi."""
    return {k.replace("_", "-"): Quantity.parse(v) for k, v in quantities.items()}


def ctr(requests=None, limits=None, sidecar: bool = False) -> Container:
    """A container; ``sidecar`` is RestartPolicy: Always on an init container."""
    return Container("c", requests or {}, limits or {}, sidecar)


def mkpod(containers=(), inits=(), overhead=None, pod_req=None, pod_lim=None) -> Pod:
    return Pod("uid", "ns/p", tuple(containers), tuple(inits), overhead or {}, pod_req, pod_lim)


def get_pod(cpu_req="", cpu_lim="", mem_req="", mem_lim="", cpu_ovh="", mem_ovh="") -> Pod:
    """helpers_test.go getPod: one container and one init container with the same resources."""

    def some(**kv):
        return rl(**{k: v for k, v in kv.items() if v})

    c = ctr(some(cpu=cpu_req, memory=mem_req), some(cpu=cpu_lim, memory=mem_lim))
    return mkpod([c], [c], overhead=some(cpu=cpu_ovh, memory=mem_ovh))


@pytest.mark.parametrize(
    ("pod", "requests", "limits"),
    [
        pytest.param(get_pod(cpu_lim="9"), {}, rl(cpu="9"), id="just-limit-no-overhead"),
        pytest.param(
            get_pod(cpu_ovh="5", mem_ovh="5"), rl(cpu="5", memory="5"), {}, id="just-overhead"
        ),
        pytest.param(
            get_pod(cpu_req="1", mem_req="10", cpu_ovh="5", mem_ovh="5"),
            rl(cpu="6", memory="15"),
            {},
            id="req-and-overhead",
        ),
        pytest.param(
            get_pod("1", "2", "10", "12", "5", "5"),
            rl(cpu="6", memory="15"),
            rl(cpu="7", memory="17"),
            id="all-req-lim-and-overhead",
        ),
        pytest.param(
            get_pod(cpu_req="1", cpu_lim="2", mem_req="10", cpu_ovh="5", mem_ovh="5"),
            rl(cpu="6", memory="15"),
            rl(cpu="7"),
            id="req-some-lim-and-overhead",
        ),
    ],
)
def test_pod_requests_and_limits(pod, requests, limits):
    # helpers_test.go TestPodRequestsAndLimits: PodRequests/PodLimits with empty options.
    assert pod_requests(pod) == requests
    assert pod_limits(pod) == limits


TWO = [ctr(rl(cpu="1", memory="5"), rl(cpu="2", memory="10")),
       ctr(rl(cpu="4", memory="12"), rl(cpu="8", memory="24"))]  # fmt: skip
OVERHEAD = rl(cpu="3", memory="8")
INITS = [ctr(rl(cpu="1", memory="5"), rl(cpu="1", memory="5")),
         ctr(rl(cpu="40", memory="120"), rl(cpu="80", memory="240"))]  # fmt: skip


@pytest.mark.parametrize(
    ("pod", "requests", "limits"),
    [
        pytest.param(
            mkpod(TWO),
            rl(cpu="5", memory="17"),
            rl(cpu="10", memory="34"),
            id="two container no overhead - should just be sum of containers",
        ),
        # The other two rows' limits are left out: cgalloc's pod_limits has no ExcludeOverhead
        # (the kubelet's ResourceConfigForPod never excludes the overhead from limits).
        pytest.param(
            mkpod(TWO, overhead=OVERHEAD),
            rl(cpu="5", memory="17"),
            None,
            id="two container with overhead - shouldn't consider overhead",
        ),
        pytest.param(
            mkpod(TWO, INITS, overhead=OVERHEAD),
            rl(cpu="40", memory="120"),
            None,
            id="two container with overhead, massive init - should just be the largest init",
        ),
    ],
)
def test_pod_requests_and_limits_without_overhead(pod, requests, limits):
    # helpers_test.go TestPodRequestsAndLimitsWithoutOverhead: ExcludeOverhead: true.
    assert pod_requests(pod, overhead=False) == requests
    if limits is not None:
        assert pod_limits(pod) == limits


# helpers_test.go TestPodResourceRequests, the rows tests/model/test_podresources.py does not hold.
# Left out: every "resized, ..." row and "aggregate request resolves max of sums instead of sum of
# maxes" (UseStatusResources: they read container statuses and the PodResizePending condition;
# cgalloc sizes a pod from its spec and warns of a pending resize, pods.py resize_warnings).
def test_pod_resource_requests_overhead_excluded():
    pod = mkpod([ctr(rl(cpu="2")), ctr(rl(cpu="3"))], [ctr(rl(cpu="2"))], overhead=rl(cpu="1"))
    assert pod_requests(pod, overhead=False) == rl(cpu="5")  # "pod overhead excluded"


# helpers_test.go TestPodResourceLimits, the rows tests/model/test_podresources.py does not hold.
# Left out: "pod overhead excluded" (no ExcludeOverhead for limits, as above) and the "pod
# scaled ..." and "aggregate limit resolves max of sums ..." rows (UseStatusResources).
def lim(cpu: str, sidecar: bool = False) -> Container:
    return ctr(limits=rl(cpu=cpu), sidecar=sidecar)


@pytest.mark.parametrize(
    ("inits", "containers", "expected"),
    [
        pytest.param([lim("1", True)], [lim("1")], rl(cpu="2"), id="restartable init container"),
        pytest.param(
            [lim("5"), lim("1", True), lim("2", True), lim("3", True)],
            [lim("1")],
            rl(cpu="7"),
            id="multiple restartable init containers",
        ),
        pytest.param(
            [lim("5"), lim("1", True), lim("2", True), lim("5"), lim("3", True)],
            [lim("1")],
            rl(cpu="8"),
            id="multiple restartable and regular init containers",
        ),
        pytest.param(
            [lim("10", True), lim("200")],
            [lim("100")],
            rl(cpu="210"),
            id="restartable-init, init and regular",
        ),
    ],
)
def test_pod_resource_limits(inits, containers, expected):
    assert pod_limits(mkpod(containers, inits)) == expected


@pytest.mark.parametrize(
    ("pod_req", "pod_lim", "expected"),
    [
        pytest.param(None, None, False, id="nil resources struct"),
        pytest.param({}, {}, False, id="empty resources struct"),
        pytest.param(
            rl(ephemeral_storage="1Mi"), {}, False, id="only unsupported resource requests set"
        ),
        pytest.param(
            {}, rl(ephemeral_storage="1Mi"), False, id="only unsupported resource limits set"
        ),
        pytest.param(
            rl(ephemeral_storage="1Mi", cpu="1m"),
            {},
            True,
            id="unsupported and suported resources requests set",
        ),
        pytest.param(
            {},
            rl(ephemeral_storage="1Mi", cpu="1m"),
            True,
            id="unsupported and suported resources limits set",
        ),
    ],
)
def test_is_pod_level_resources_set(pod_req, pod_lim, expected):
    # helpers_test.go TestIsPodLevelResourcesSet
    assert pod_level_set(mkpod(pod_req=pod_req, pod_lim=pod_lim)) is expected


# Left out: TestIsPodLevelLimitsSet (cgalloc has no IsPodLevelLimitsSet; PodLimits decides with
# IsPodLevelResourcesSet), TestPodResourceRequestsReuse (the Reuse map is a Go allocation detail),
# TestPodRequestsAndLimitsWithDRA, TestPodResourceLimitsWithSharedDRAClaims,
# TestPodResourceRequestsWithSharedDRAClaims, TestGetContainerDRAAllocations and
# TestPodRequestsAndLimitsVerticalScalingWrappers (resource claims and pod status, which cgalloc
# does not read).


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cpu", True),
        ("memory", True),
        ("ephemeral-storage", False),
        ("hugepages-2Mi", True),
        ("hugepages-1Gi", True),
    ],
)
def test_is_supported_pod_level_resource(name, expected):
    # helpers_test.go TestIsSupportedPodLevelResource
    assert supported_pod_level(name) is expected


def req(**q: str) -> Container:
    return ctr(rl(**q))


def sidecar_req(**q: str) -> Container:
    return ctr(rl(**q), sidecar=True)


# helpers_test.go TestPodLevelResourceRequests: getPodLevelResourcesPod(podResources, overhead,
# containers, initContainers), PodRequests(pod, opts); (id, pod requests, pod limits,
# containers, init containers, SkipPodLevelResources, expected). "storage" is
# v1.ResourceStorage. Left out: the five "status resources ..." / "allocated resources ..." rows
# (UseStatusResources with pod status, which cgalloc does not read).
M3C2, I5C4 = req(memory="3Mi", cpu="2m"), req(memory="5Mi", cpu="4m")
# fmt: off
POD_LEVEL_REQUEST_ROWS = [
    ("nil", {}, {}, [], [], False, {}),
    ("pod level memory resource with SkipPodLevelResources true",
     rl(memory="2Mi"), {}, [], [], True, {}),
    ("pod level memory resource with SkipPodLevelResources false",
     rl(memory="2Mi"), {}, [], [], False, rl(memory="2Mi")),
    ("pod level memory and container level cpu resources with SkipPodLevelResources false",
     rl(memory="2Mi"), {}, [req(cpu="2m")], [], False, rl(memory="2Mi", cpu="2m")),
    ("pod level unsupported resources set at both pod-level and container-level with"
     " SkipPodLevelResources false",
     rl(storage="2Mi"), {}, [req(storage="3Mi")], [], False, rl(storage="3Mi")),
    ("pod level unsupported resources set at pod-level with SkipPodLevelResources false",
     rl(storage="2Mi"), {}, [req(memory="3Mi")], [], False, rl(memory="3Mi")),
    ("only container level resources set with SkipPodLevelResources false",
     {}, {}, [M3C2], [], False, rl(memory="3Mi", cpu="2m")),
    ("both container-level and pod-level resources set with SkipPodLevelResources false",
     rl(memory="6Mi", cpu="8m"), {}, [M3C2], [], False, rl(memory="6Mi", cpu="8m")),
    ("container-level resources and init container set with SkipPodLevelResources false",
     {}, {}, [M3C2], [I5C4], False, rl(memory="5Mi", cpu="4m")),
    # upstream repeats the name above for this row, whose option is SkipPodLevelResources: true
    ("container-level resources and init container set with SkipPodLevelResources false#2",
     {}, {}, [M3C2], [I5C4], True, rl(memory="5Mi", cpu="4m")),
    ("container-level resources and sidecar container set with SkipPodLevelResources false",
     {}, {}, [M3C2], [sidecar_req(memory="5Mi", cpu="4m")], False, rl(memory="8Mi", cpu="6m")),
    ("container-level resources, init and sidecar container set with SkipPodLevelResources"
     " false",
     {}, {}, [M3C2], [sidecar_req(memory="5Mi", cpu="4m"), req(memory="6Mi", cpu="8m")], False,
     rl(memory="11Mi", cpu="12m")),
    ("pod-level resources, container-level resources, init and sidecar container set with"
     " SkipPodLevelResources false",
     rl(memory="15Mi", cpu="18m"), {}, [M3C2],
     [sidecar_req(memory="5Mi", cpu="4m"), req(memory="6Mi", cpu="8m")], False,
     rl(memory="15Mi", cpu="18m")),
    ("pod-level resources, hugepage request/limit single page size",
     rl(memory="10Mi", hugepages_2Mi="2Mi"), rl(hugepages_2Mi="2Mi"), [], [], False,
     rl(memory="10Mi", hugepages_2Mi="2Mi")),
    ("pod-level resources, hugepage request/limit multiple page sizes",
     rl(cpu="1", hugepages_2Mi="2Mi", hugepages_1Gi="1Gi"),
     rl(hugepages_2Mi="2Mi", hugepages_1Gi="1Gi"), [], [], False,
     rl(cpu="1", hugepages_2Mi="2Mi", hugepages_1Gi="1Gi")),
    ("pod-level resources, container-level resources, hugepage request/limit single page size",
     rl(cpu="1", hugepages_2Mi="10Mi"), rl(hugepages_2Mi="10Mi"),
     [ctr(rl(hugepages_2Mi="6Mi"), rl(hugepages_2Mi="6Mi"))], [], False,
     rl(cpu="1", hugepages_2Mi="10Mi")),
    ("pod-level resources, container-level resources, hugepage request/limit multiple page"
     " sizes",
     rl(cpu="1", hugepages_2Mi="10Mi", hugepages_1Gi="2Gi"),
     rl(hugepages_2Mi="10Mi", hugepages_1Gi="2Gi"),
     [ctr(rl(cpu="1", hugepages_1Gi="2Gi"), rl(hugepages_1Gi="2Gi"))], [], False,
     rl(cpu="1", hugepages_2Mi="10Mi", hugepages_1Gi="2Gi")),
    ("pod-level resources, container-level resources, hugepage request/limit multiple page"
     " sizes between pod-level and container-level",
     rl(cpu="1", hugepages_2Mi="10Mi"), rl(hugepages_2Mi="10Mi"),
     [ctr(rl(memory="4Mi", hugepages_1Gi="1Gi"), rl(hugepages_1Gi="1Gi"))], [], False,
     rl(cpu="1", memory="4Mi", hugepages_2Mi="10Mi", hugepages_1Gi="1Gi")),
]
# fmt: on


@pytest.mark.parametrize(
    ("pod_req", "pod_lim", "containers", "inits", "skip", "expected"),
    [row[1:] for row in POD_LEVEL_REQUEST_ROWS],
    ids=[row[0] for row in POD_LEVEL_REQUEST_ROWS],
)
def test_pod_level_resource_requests(pod_req, pod_lim, containers, inits, skip, expected):
    pod = mkpod(containers, inits, pod_req=pod_req, pod_lim=pod_lim)
    assert pod_requests(pod, pod_level=not skip) == expected


# helpers_test.go TestAggregateContainerRequestsAndLimits: AggregateContainerRequests/Limits
# are PodRequests/PodLimits without the pod level and the overhead. Left out: the five
# UseStatusResources rows (container and pod status).
@pytest.mark.parametrize(
    ("containers", "inits", "requests", "limits"),
    [
        pytest.param([lim("9")], [], {}, rl(cpu="9"), id="one container with limits"),
        pytest.param([lim("9"), lim("9")], [], {}, rl(cpu="18"), id="two containers with limits"),
        pytest.param([req(cpu="9")], [], rl(cpu="9"), {}, id="one container with requests"),
        pytest.param(
            [req(cpu="9"), req(cpu="9")], [], rl(cpu="18"), {}, id="two containers with requests"
        ),
        pytest.param(
            [req(cpu="9")],
            [req(cpu="9")],
            rl(cpu="9"),
            {},
            id="regular and init containers with requests",
        ),
        pytest.param(
            [req(cpu="9")],
            [sidecar_req(cpu="8"), req(cpu="6")],
            rl(cpu="17"),
            {},
            id="regular, init and sidecar containers with requests",
        ),
        pytest.param(
            [lim("9")], [lim("9")], {}, rl(cpu="9"), id="regular and init containers with limits"
        ),
        pytest.param(
            [lim("9")],
            [lim("8", True), lim("6")],
            {},
            rl(cpu="17"),
            id="regular, init and sidecar containers with limits",
        ),
    ],
)
def test_aggregate_container_requests_and_limits(containers, inits, requests, limits):
    pod = mkpod(containers, inits)
    assert pod_requests(pod, pod_level=False, overhead=False) == requests
    assert pod_limits(pod, pod_level=False) == limits
