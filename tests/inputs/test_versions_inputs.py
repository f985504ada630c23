"""Inputs and validation by kubelet minor: each row of the version table that changes what a
kubelet accepts, at the minor before the one that introduced it and at that minor.

The newest side of each pair is a row of upstream's pkg/kubelet/apis/config/validation/
validation_test.go TestValidateKubeletConfiguration (as tests/inputs/test_upstream_config.py
ports it); the oldest side is v1.20.2's validation.go (ValidateKubeletConfiguration), whose
test table counts errors instead of naming them.
"""

from __future__ import annotations

import json

import pytest

from cgalloc.errors import InputError
from cgalloc.inputs.config import load_node_config

API = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}


def config_file(tmp_path, fields: dict, name: str = "kubelet.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({**API, **fields}))
    return str(path)


def load(version: str, flags: dict | None = None, **kw):
    flags = {"kubelet-version": [version], **(flags or {})}
    return load_node_config(flags, online_cpus=lambda: frozenset(range(4)), **kw)


def problems(version: str, flags: dict | None = None, **kw) -> list[str]:
    with pytest.raises(InputError) as err:
        load(version, flags, **kw)
    return err.value.problems


def has_problem(found: list[str], text: str) -> bool:
    return any(text in p for p in found)


# ---------------------------------------------------------------- enforceNodeAllocatable


def test_compressible_options_arrive_in_1_32(tmp_path):
    # TestValidateKubeletConfiguration "specify SystemReservedCompressibleEnforcementKey without
    # specifying SystemReservedCgroup": from 1.32 the option is known and needs the cgroup
    fields = {"enforceNodeAllocatable": ["system-reserved-compressible"]}
    found = problems("1.32", config=config_file(tmp_path, fields))
    assert has_problem(
        found,
        'systemReservedCgroup (--system-reserved-cgroup) must be specified when'
        ' "system-reserved" or "system-reserved-compressible" included in enforceNodeAllocatable',
    )
    # 1.31 has no such option: "Valid options are ..." without the -compressible ones
    found = problems("1.31", config=config_file(tmp_path, fields))
    assert has_problem(
        found,
        'option "system-reserved-compressible" specified for enforceNodeAllocatable'
        ' (--enforce-node-allocatable); valid options are "pods", "system-reserved",'
        ' "kube-reserved", or "none" (the -compressible options arrived in 1.32)',
    )
    ok = {**fields, "systemReservedCgroup": "/system.slice", "systemReserved": {"cpu": "1"}}
    cfg = load("1.32", config=config_file(tmp_path, ok))
    assert cfg.enforce_node_allocatable == ("system-reserved-compressible",)


def test_v1_20_wording_of_a_missing_reserved_cgroup(tmp_path):
    # v1.20.2 validation.go: "systemReservedCgroup (--system-reserved-cgroup) must be specified
    # when 'system-reserved' contained in enforceNodeAllocatable (--enforce-node-allocatable)"
    found = problems("1.20", {"enforce-node-allocatable": ["pods,system-reserved"]})
    assert has_problem(
        found,
        "systemReservedCgroup (--system-reserved-cgroup) must be specified when"
        " 'system-reserved' contained in enforceNodeAllocatable (--enforce-node-allocatable)",
    )


def test_cgroups_per_qos_rule_and_repeats_change_in_1_31():
    # TestValidateKubeletConfiguration "specify EnforceNodeAllocatable without enabling
    # CgroupsPerQOS" (per option) and "duplicated EnforceNodeAllocatable", from 1.31
    off = {"cgroups-per-qos": ["false"]}
    found = problems("1.31", {**off, "enforce-node-allocatable": ["pods"]})
    assert has_problem(
        found,
        'cgroupsPerQOS (--cgroups-per-qos) must be set to true when "pods" contained in'
        " enforceNodeAllocatable (--enforce-node-allocatable)",
    )
    none_only = load("1.31", {**off, "enforce-node-allocatable": ["none"]})
    assert none_only.enforce_node_allocatable == ()
    found = problems("1.31", {"enforce-node-allocatable": ["pods,pods"]})
    assert has_problem(found, 'duplicated enforcements "pods" in enforceNodeAllocatable')
    # v1.20.2 validation.go: `!kc.CgroupsPerQOS && len(kc.EnforceNodeAllocatable) > 0`, with
    # "none" too; and a repeat passes (the kubelet holds a set)
    for listed in ("pods", "none"):
        found = problems("1.30", {**off, "enforce-node-allocatable": [listed]})
        assert has_problem(
            found,
            "enforceNodeAllocatable (--enforce-node-allocatable) is not supported unless"
            " cgroupsPerQOS (--cgroups-per-qos) is set to true",
        )
    assert load("1.30", {**off, "enforce-node-allocatable": [""]}).enforce_node_allocatable == ()
    cfg = load("1.30", {"enforce-node-allocatable": ["pods,pods"]})
    assert cfg.enforce_node_allocatable == ("pods",)


# ---------------------------------------------------------------- cpuCFSQuotaPeriod


@pytest.mark.parametrize(
    ("version", "period", "problem"),
    [
        # TestValidateKubeletConfiguration "invalid CPUCFSQuotaPeriod" (2s), from 1.26
        ("1.26", "2s", "{2s} must be between 1ms and 1sec, inclusive"),
        ("1.26", "500us", "{500µs} must be between 1ms and 1sec, inclusive"),
        # v1.20.2: IsInRange(period, 1µs, 1s), "must be between 1usec and 1sec, inclusive"
        ("1.25", "2s", "{2s} must be between 1usec and 1sec, inclusive"),
        ("1.25", "500us", None),
        ("1.20", "500ns", "{500ns} must be between 1usec and 1sec, inclusive"),
    ],
)
def test_cfs_period_range_by_minor(version, period, problem):
    flags = {
        "feature-gates": ["CustomCPUCFSQuotaPeriod=true"],
        "cpu-cfs-quota-period": [period],
    }
    if problem is None:
        assert load(version, flags).cpu_cfs_quota_period == 500
        return
    assert has_problem(problems(version, flags), problem)


# ---------------------------------------------------------------- drop-ins and fields


def test_config_dir_arrives_in_1_28(tmp_path):
    drop = tmp_path / "conf.d"
    drop.mkdir()
    (drop / "10.conf").write_text(json.dumps({**API, "maxPods": 50}))
    assert load("1.28", config_dir=str(drop)).max_pods == 50
    found = problems("1.27", config_dir=str(drop))
    assert has_problem(found, "--config-dir: the kubelet 1.27 has no drop-in directory")


def test_default_eviction_set_of_a_config_file_by_minor(tmp_path):
    # pkg/kubelet/apis/config/v1beta1/defaults_test.go TestSetDefaultsKubeletConfiguration
    # "empty config": EvictionHard is DefaultEvictionHard, four signals before 1.30
    empty = config_file(tmp_path, {})
    assert "imagefs.inodesFree" not in load("1.29", config=empty).eviction_hard
    assert "imagefs.inodesFree" in load("1.30", config=empty).eviction_hard
    assert set(load("1.20").eviction_hard) == {
        "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available",
    }  # fmt: skip


def test_merge_default_eviction_settings_arrives_in_1_33(tmp_path):
    # k8s.io/kubelet config/v1beta1 MergeDefaultEvictionSettings, first at kubernetes-1.33.0:
    # before, the lenient decode drops it and the partial map replaces the defaults
    fields = {"evictionHard": {"memory.available": "1Gi"}, "mergeDefaultEvictionSettings": True}
    config = config_file(tmp_path, fields)
    assert set(load("1.32", config=config).eviction_hard) == {"memory.available"}
    merged = load("1.33", config=config).eviction_hard
    assert merged["memory.available"].value == "1Gi" and "nodefs.available" in merged
    # dropped whatever its type before 1.33; refused as a bool's type error from 1.33
    config = config_file(tmp_path, {"mergeDefaultEvictionSettings": "yes"})
    assert load("1.32", config=config)
    assert has_problem(problems("1.33", config=config), "mergeDefaultEvictionSettings")


def test_cpu_manager_policy_options_arrive_in_1_22(tmp_path):
    # k8s.io/kubelet config/v1beta1 CPUManagerPolicyOptions, first at kubernetes-1.22.0
    fields = {
        "cpuManagerPolicy": "static",
        "systemReserved": {"cpu": "1"},
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
    }
    config = config_file(tmp_path, fields)
    assert load("1.21", config=config).cpu_manager_policy_options == {}
    assert load("1.22", config=config).cpu_manager_policy_options == {"full-pcpus-only": "true"}
    flags = {"cpu-manager-policy-options": ["full-pcpus-only=true"]}
    found = problems("1.21", flags, config=config_file(tmp_path, fields, "k2.json"))
    assert has_problem(found, "--cpu-manager-policy-options: the kubelet 1.21 has no such flag")


def test_strict_cpu_reservation_arrives_in_1_32():
    # pkg/kubelet/cm/cpumanager/policy_options.go (KEP-4540): before 1.32 an unknown option
    flags = {
        "cpu-manager-policy": ["static"],
        "reserved-cpus": ["0"],
        "cpu-manager-policy-options": ["strict-cpu-reservation=true"],
    }
    assert load("1.32", flags).strict_cpu_reservation
    found = problems("1.31", flags)
    assert has_problem(found, 'unsupported cpumanager option: "strict-cpu-reservation" (true)')


# ---------------------------------------------------------------- feature gates


@pytest.mark.parametrize(
    ("gate", "old", "new"),
    [("MemoryQoS", "1.21", "1.22"), ("PodLevelResources", "1.31", "1.32"),
     ("SidecarContainers", "1.27", "1.28")],
)  # fmt: skip
def test_gates_unknown_before_their_minor_are_refused(gate, old, new):
    # TestValidateKubeletConfiguration "invalid FeatureGate": "unrecognized feature gate: ..."
    flags = {"feature-gates": [f"{gate}=true"]}
    assert has_problem(problems(old, flags), f"unrecognized feature gate: {gate}")
    assert load(new, flags).feature_gates == {gate: True}


def test_fail_cgroup_v1_is_read_from_1_31(tmp_path):
    # k8s.io/kubelet config/v1beta1 FailCgroupV1, first at kubernetes-1.31.0
    config = config_file(tmp_path, {"failCgroupV1": False})
    assert load("1.31", config=config).fail_cgroup_v1 is False
    assert load("1.30", config=config).fail_cgroup_v1 is None  # dropped
    assert load("1.37").fail_cgroup_v1 is None  # unset: the minor's default
    bad = config_file(tmp_path, {"failCgroupV1": "no"}, "bad.json")
    assert has_problem(problems("1.35", config=bad), "KubeletConfiguration.failCgroupV1")
    assert load("1.30", config=bad).fail_cgroup_v1 is None  # dropped whatever its type
