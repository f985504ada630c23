"""NodeConfig from flags, KubeletConfiguration files, drop-ins and node-config.yaml."""

import textwrap

import pytest

from cgalloc.errors import InputError
from cgalloc.inputs.config import load_node_config
from cgalloc.model.nodeconfig import NodeConfig
from cgalloc.model.quantity import Quantity

Q = Quantity.parse
HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


def kubelet_config(path, body):
    return write(path, HEAD + textwrap.dedent(body))


def load(flags=None, **kw):
    return load_node_config(flags or {}, online_cpus=lambda: frozenset(range(4)), **kw)


def evictions(cfg):
    return {s: t.value for s, t in cfg.eviction_hard.items()}


def test_defaults_are_the_kubelets():
    # pkg/kubelet/eviction/defaults_linux.go DefaultEvictionHard (five signals since #121834);
    # pkg/kubelet/apis/config/v1beta1/defaults.go SetDefaults_KubeletConfiguration (maxPods 110)
    cfg = load()
    assert evictions(cfg) == {
        "memory.available": "100Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
    }
    assert (cfg.max_pods, cfg.pods_per_core, cfg.cpu_manager_policy) == (110, 0, "none")
    assert cfg.kubelet_version == "1.37"
    assert cfg.enforce_node_allocatable == ("pods",)
    assert cfg.cgroups_per_qos is True
    assert cfg.cgroup_driver == "cgroupfs"
    assert cfg.cgroup_root == "/"
    assert cfg.pod_max_pids == -1
    assert cfg.root_dir == "/var/lib/kubelet"
    assert cfg == NodeConfig(eviction_hard=cfg.eviction_hard)


def test_flags_parse_like_the_kubelet():
    cfg = load(
        {
            "kube-reserved": ["cpu=100m, memory=1Gi", "pid=1000"],  # occurrences accumulate
            "eviction-hard": ["memory.available<500Mi", "nodefs.available < 5%"],
            "enforce-node-allocatable": ["pods,kube-reserved"],
            "kube-reserved-cgroup": ["/kube.slice"],
            "cgroup-driver": ["systemd"],
            "cgroups-per-qos": ["True"],
            "qos-reserved": ["memory=50%"],
            "pod-max-pids": ["4096"],
            "reserved-cpus": [""],
            "experimental-allocatable-ignore-eviction": ["t"],
        }
    )
    assert cfg.kube_reserved == {"cpu": Q("100m"), "memory": Q("1Gi"), "pid": Q("1000")}
    assert evictions(cfg) == {"memory.available": "500Mi", "nodefs.available": "5%"}
    assert cfg.enforce_node_allocatable == ("pods", "kube-reserved")
    assert cfg.cgroup_driver == "systemd"
    assert cfg.qos_reserved == {"memory": 50}
    assert cfg.pod_max_pids == 4096
    assert cfg.ignore_eviction is True


@pytest.mark.parametrize(
    ("occurrences", "enforced"),
    [
        # pflag's StringSlice reads each occurrence with encoding/csv (spf13/pflag
        # string_slice.go readAsCSV): a quoted item is the item, "" in it one quote
        (['"pods",kube-reserved'], ("pods", "kube-reserved")),
        (['pods,"kube-reserved"'], ("pods", "kube-reserved")),
        # one trailing line break (a YAML block scalar's, a file's) ends the record; a \r before
        # the end of the input is dropped (go/src/encoding/csv/reader.go readLine)
        (["pods,kube-reserved\n"], ("pods", "kube-reserved")),
        (["pods,kube-reserved\r\n\n"], ("pods", "kube-reserved")),
        (["pods,kube-reserved\r"], ("pods", "kube-reserved")),
        # StringSlice.Set appends every later occurrence; an empty one adds nothing
        (["", "pods", "", "kube-reserved"], ("pods", "kube-reserved")),
    ],
)
def test_enforcement_list_is_read_as_pflag_reads_it(occurrences, enforced):
    cfg = load({"enforce-node-allocatable": occurrences, "kube-reserved-cgroup": ["/kube.slice"]})
    assert cfg.enforce_node_allocatable == enforced


def test_empty_enforcement_list_and_none_enforce_nothing():
    assert load({"enforce-node-allocatable": [""]}).enforce_node_allocatable == ()
    cfg = load({"enforce-node-allocatable": ["none"], "cgroups-per-qos": ["false"]})
    assert cfg.enforce_node_allocatable == ()


def test_config_file_dropins_merge_in_name_order_and_flags_win(tmp_path):
    config = kubelet_config(
        tmp_path / "kubelet.yaml",
        """
        kubeReserved: {cpu: 100m, memory: 1Gi}
        systemReserved: {memory: 1Gi}
        enforceNodeAllocatable: [pods, kube-reserved]
        kubeReservedCgroup: /kube.slice
        cgroupDriver: systemd
        maxPods: 250
        authentication: {anonymous: {enabled: false}}
        """,
    )
    drop = tmp_path / "conf.d"
    drop.mkdir()
    write(drop / "20-late.conf", HEAD + "kubeReserved: {memory: 3Gi}\ncgroupDriver: cgroupfs\n")
    write(
        drop / "10-early.conf",
        HEAD + 'kubeReserved: {memory: 2Gi, pid: "100"}\nenforceNodeAllocatable: [pods]\n',
    )
    write(drop / "99-ignored.yaml", "kind: Nonsense\n")  # not *.conf: the kubelet skips it
    cfg = load({"system-reserved": ["cpu=1"]}, config=config, config_dir=str(drop))
    # maps merge key by key, later drop-ins win
    assert cfg.kube_reserved == {"cpu": Q("100m"), "memory": Q("3Gi"), "pid": Q("100")}
    assert cfg.enforce_node_allocatable == ("pods",)  # lists are replaced
    assert cfg.cgroup_driver == "cgroupfs"
    assert cfg.kube_reserved_cgroup == "/kube.slice"
    assert cfg.system_reserved == {"cpu": Q("1")}  # the flag replaces the whole map


def test_setting_one_signal_drops_the_other_defaults(tmp_path):
    config = write(tmp_path / "k.yaml", HEAD + "evictionHard: {memory.available: 200Mi}\n")
    assert evictions(load(config=config)) == {"memory.available": "200Mi"}


def test_merge_default_eviction_settings_keeps_the_defaults(tmp_path):
    config = write(
        tmp_path / "k.yaml",
        HEAD + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 200Mi}\n",
    )
    assert evictions(load(config=config)) == {
        "memory.available": "200Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
    }


def test_eviction_flag_replaces_file_and_defaults(tmp_path):
    config = write(
        tmp_path / "k.yaml",
        HEAD + "mergeDefaultEvictionSettings: true\nevictionHard: {memory.available: 200Mi}\n",
    )
    cfg = load({"eviction-hard": ["nodefs.available<20%"]}, config=config)
    assert evictions(cfg) == {"nodefs.available": "20%"}


def test_zero_percent_disables_a_threshold():
    cfg = load({"eviction-hard": ["memory.available<1Gi,nodefs.available<0%"]})
    assert evictions(cfg) == {"memory.available": "1Gi"}


def test_node_config_yaml(tmp_path):
    path = write(
        tmp_path / "node-config.yaml",
        """
        apiVersion: v1
        kind: NodeConfig
        nodeName: node1
        kubeletArguments:
          kube-reserved:
            - "cpu=200m,memory=512Mi"
          system-reserved:
            - "cpu=200m,memory=512Mi"
          cgroups-per-qos:
            - "true"
          cgroup-driver:
            - "systemd"
          enforce-node-allocatable:
            - "pods"
          eviction-hard:
            - memory.available<100Mi
            - nodefs.available<10%
          max-pods:
            - "250"
        """,
    )
    cfg = load(node_config=path)
    assert cfg.kube_reserved == {"cpu": Q("200m"), "memory": Q("512Mi")}
    assert cfg.system_reserved == {"cpu": Q("200m"), "memory": Q("512Mi")}
    assert cfg.cgroup_driver == "systemd"
    assert evictions(cfg) == {"memory.available": "100Mi", "nodefs.available": "10%"}
    # command-line flags beat node-config
    assert load({"cgroup-driver": ["cgroupfs"]}, node_config=path).cgroup_driver == "cgroupfs"


def test_wrong_api_version_and_kind_are_rejected(tmp_path):
    config = write(tmp_path / "k.yaml", "apiVersion: v1\nkind: NodeConfig\n")
    with pytest.raises(InputError) as exc:
        load(config=config)
    assert exc.value.problems == [
        f'--config: {config} has apiVersion "v1" and kind "NodeConfig"; expected'
        " apiVersion kubelet.config.k8s.io/v1beta1 and kind KubeletConfiguration."
    ]


def test_wrong_field_types_name_the_field(tmp_path):
    config = write(tmp_path / "k.yaml", HEAD + "kubeReserved: [cpu]\ncgroupsPerQOS: 'yes'\n")
    with pytest.raises(InputError) as exc:
        load(config=config)
    assert len(exc.value.problems) == 2
    assert exc.value.problems[0].startswith(f"kubeReserved (--kube-reserved) in {config}:")
    assert exc.value.problems[1].startswith(f"cgroupsPerQOS (--cgroups-per-qos) in {config}:")


def test_missing_and_unparseable_files(tmp_path):
    bad = write(tmp_path / "bad.yaml", "a: [\n")
    with pytest.raises(InputError) as exc:
        load(
            config=str(tmp_path / "missing.yaml"),
            config_dir=str(tmp_path / "nodir"),
            node_config=bad,
        )
    problems = exc.value.problems
    assert [p.split(":")[0] for p in problems] == ["--config", "--config-dir", "--node-config"]


def test_reserved_cpus_checked_against_planned_capacity():
    cfg = load({"reserved-cpus": ["0-1"], "capacity": ["cpu=2"]})
    assert cfg.reserved_cpus == {0, 1}
    with pytest.raises(InputError, match=r"0-3 is not a subset of online-cpus 0-1"):
        load({"reserved-cpus": ["0-3"], "capacity": ["cpu=2"]})


def test_capacity_overrides():
    cfg = load({"capacity": ["cpu=16,memory=64Gi", "hugepages-2Mi=1Gi"]})
    assert cfg.capacity_overrides == {
        "cpu": Q("16"),
        "memory": Q("64Gi"),
        "hugepages-2Mi": Q("1Gi"),
    }


# ---- pod-level inputs: feature gates, CFS quota, static pod path ----------------------------


def test_pod_inputs_defaults_and_flags(tmp_path):
    cfg = load()
    assert (cfg.feature_gates, cfg.cpu_cfs_quota, cfg.cpu_cfs_quota_period) == ({}, True, 100000)
    assert cfg.static_pod_path == ""
    cfg = load(
        {
            "feature-gates": ["MemoryQoS=true, QOSReserved=1", "MemoryQoS=false"],
            "cpu-cfs-quota": ["false"],
            "pod-manifest-path": ["/etc/kubernetes/manifests"],
        }
    )
    # MapStringBool.Set merges occurrences, later values win; values trimmed; strconv.ParseBool
    assert cfg.feature_gates == {"MemoryQoS": False, "QOSReserved": True}
    assert (cfg.cpu_cfs_quota, cfg.static_pod_path) == (False, "/etc/kubernetes/manifests")


def test_pod_inputs_from_config_file_and_dropins(tmp_path):
    main = kubelet_config(
        tmp_path / "k.yaml",
        """\
        featureGates: {MemoryQoS: true, CustomCPUCFSQuotaPeriod: true}
        cpuCFSQuota: false
        cpuCFSQuotaPeriod: 50ms
        staticPodPath: /etc/kubernetes/manifests
        """,
    )
    d = tmp_path / "d"
    d.mkdir()
    kubelet_config(d / "10.conf", "featureGates: {QOSReserved: true}\n")
    cfg = load(config=main, config_dir=str(d))
    # drop-ins merge maps key by key
    assert cfg.feature_gates == {
        "MemoryQoS": True, "CustomCPUCFSQuotaPeriod": True, "QOSReserved": True
    }  # fmt: skip
    assert (cfg.cpu_cfs_quota, cfg.cpu_cfs_quota_period) == (False, 50000)
    assert cfg.static_pod_path == "/etc/kubernetes/manifests"


def test_qos_reserved_trims_every_percent_sign_and_keeps_zero():
    # pkg/kubelet/cm/helpers.go parsePercentage (TrimRight) and ParseQOSReserved, whose
    # TestParseQOSReserved expects {"memory": "0%"} to give memory: 0
    assert load({"qos-reserved": ["memory=50%%"]}).qos_reserved == {"memory": 50}
    assert load({"qos-reserved": ["memory=0%"]}).qos_reserved == {"memory": 0}


def test_flag_gates_merge_over_the_config_files_gates(tmp_path):
    # cmd/kubelet/app/server.go kubeletConfigFlagPrecedence: "Add back feature gates that were
    # set in the original kc, but not in flags". --feature-gates replaced the file's whole map,
    # so a flag for another gate turned the file's QOSReserved and CustomCPUCFSQuotaPeriod off (and
    # then refused its cpuCFSQuotaPeriod); found by the kubelet-compat review.
    main = kubelet_config(
        tmp_path / "k.yaml",
        """\
        featureGates: {QOSReserved: true, CustomCPUCFSQuotaPeriod: true, MemoryQoS: true}
        cpuCFSQuotaPeriod: 50ms
        """,
    )
    cfg = load({"feature-gates": ["PodLevelResources=true,MemoryQoS=false"]}, config=main)
    assert cfg.feature_gates == {
        "QOSReserved": True, "CustomCPUCFSQuotaPeriod": True, "MemoryQoS": False,
        "PodLevelResources": True,
    }  # fmt: skip
    assert cfg.cpu_cfs_quota_period == 50000


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        # component-base cli/flag MapStringBool.Set (the --feature-gates flag) and
        # featuregate.SetFromMap error texts
        ({"feature-gates": ["MemoryQoS"]}, "malformed pair, expect string=bool"),
        (
            {"feature-gates": ["MemoryQoS=yes"]},
            'invalid value of MemoryQoS: yes, err: strconv.ParseBool: parsing "yes":'
            " invalid syntax",
        ),
        # TrimSpace keeps \x1c: "true\x1c" is no bool
        (
            {"feature-gates": ["MemoryQoS=true\x1c"]},
            'invalid value of MemoryQoS: true\x1c, err: strconv.ParseBool: parsing "true\x1c":'
            " invalid syntax",
        ),
        ({"feature-gates": ["MemoryQos=true"]}, "unrecognized feature gate: MemoryQos"),
        ({"feature-gates": ["not-a-gate=true"]}, "unrecognized feature gate: not-a-gate"),
    ],
)
def test_bad_feature_gates_use_the_kubelets_words(flags, problem):
    with pytest.raises(InputError) as err:
        load(flags)
    assert err.value.problems == [
        f"featureGates (--feature-gates): {problem}; expected gate=true|false pairs separated by"
        " commas, such as MemoryQoS=true,QOSReserved=true."
    ]


def test_a_gate_name_with_a_trailing_newline_is_unrecognized(tmp_path):
    # Python's "$" matched before a trailing newline, so "Foo\n" passed as a well-formed name
    path = tmp_path / "k.json"
    path.write_text(
        '{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",'
        ' "featureGates": {"Foo\\n": true}}'
    )
    with pytest.raises(InputError, match="unrecognized feature gate: Foo"):
        load(config=str(path))


def test_unmodelled_gates_are_accepted_and_all_alpha_turns_alpha_gates_on():
    from cgalloc.model import features

    cfg = load({"feature-gates": ["InPlacePodVerticalScaling=true,AllAlpha=true"]})
    assert features.enabled(cfg, "MemoryQoS") and features.enabled(cfg, "QOSReserved")
    # PodLevelResources is beta (default on) from 1.34, alpha (off) in 1.32–1.33
    assert features.enabled(NodeConfig(kubelet_version="1.34"), "PodLevelResources")
    assert not features.enabled(NodeConfig(kubelet_version="1.33"), "PodLevelResources")
    assert not features.enabled(NodeConfig(), "QOSReserved")


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        # pkg/kubelet/apis/config/validation/validation_test.go: CPUCFSQuotaPeriod cases; the
        # gate is the string of Go's features.CPUCFSQuotaPeriod, "CustomCPUCFSQuotaPeriod"
        (
            {"cpu-cfs-quota-period": ["200ms"]},
            "invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {200ms} requires"
            " feature gate CustomCPUCFSQuotaPeriod; enable CustomCPUCFSQuotaPeriod in"
            " featureGates or use 100ms.",
        ),
        (
            {"cpu-cfs-quota-period": ["2s"], "feature-gates": ["CustomCPUCFSQuotaPeriod=true"]},
            "invalid configuration: cpuCFSQuotaPeriod (--cpu-cfs-quota-period) {2s} must be"
            " between 1ms and 1sec, inclusive.",
        ),
        (
            {"cpu-cfs-quota-period": ["100"]},
            'cpuCFSQuotaPeriod (--cpu-cfs-quota-period): time: invalid duration "100"; use a'
            " duration such as 100ms, from 1ms to 1s.",
        ),
        # the Go constant's name is no gate: kube_features.go declares
        # CPUCFSQuotaPeriod featuregate.Feature = "CustomCPUCFSQuotaPeriod"
        (
            {"cpu-cfs-quota-period": ["100ms"], "feature-gates": ["CPUCFSQuotaPeriod=true"]},
            "featureGates (--feature-gates): unrecognized feature gate: CPUCFSQuotaPeriod (the"
            " gate is named CustomCPUCFSQuotaPeriod); expected gate=true|false pairs separated"
            " by commas, such as MemoryQoS=true,QOSReserved=true.",
        ),
    ],
)
def test_bad_cfs_period(flags, problem):
    with pytest.raises(InputError) as err:
        load(flags)
    assert err.value.problems == [problem]


def test_feature_gates_in_a_file_must_be_booleans(tmp_path):
    path = kubelet_config(tmp_path / "k.yaml", "featureGates: {MemoryQoS: 'true'}\n")
    with pytest.raises(InputError) as err:
        load(config=path)
    # encoding/json: a string where map[string]bool wants a bool
    assert err.value.problems == [
        f"featureGates (--feature-gates) in {path}: the kubelet refuses this file (failed to"
        " decode: json: cannot unmarshal string into Go struct field"
        " KubeletConfiguration.featureGates of type bool); write gate=true|false pairs separated"
        " by commas, such as MemoryQoS=true,QOSReserved=true."
    ]


# ---- issue 7, node level ---------------------------------------------------------------------


def test_dropin_partial_eviction_keeps_the_defaulted_signals(tmp_path):
    # cmd/kubelet/app/server.go: loadConfigFile defaults a missing evictionHard, then
    # mergeKubeletConfigurations JSON-merge-patches each drop-in over that defaulted config.
    drop = tmp_path / "conf.d"
    drop.mkdir()
    write(drop / "10-evict.conf", HEAD + "evictionHard: {memory.available: 500Mi}\n")
    main = kubelet_config(tmp_path / "k.yaml", "cgroupDriver: systemd\n")
    expected = {
        "memory.available": "500Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
    }
    assert evictions(load(config=main, config_dir=str(drop))) == expected
    assert evictions(load(config_dir=str(drop))) == expected  # no main file: defaults below


def test_main_file_partial_eviction_replaces_the_defaults_even_with_dropins(tmp_path):
    # loadConfigFile only defaults evictionHard when the main file has none
    drop = tmp_path / "conf.d"
    drop.mkdir()
    write(drop / "10-evict.conf", HEAD + "evictionHard: {nodefs.available: 5%}\n")
    main = kubelet_config(tmp_path / "k.yaml", "evictionHard: {memory.available: 200Mi}\n")
    assert evictions(load(config=main, config_dir=str(drop))) == {
        "memory.available": "200Mi",
        "nodefs.available": "5%",
    }


def test_a_null_list_item_is_the_empty_option_the_kubelet_refuses(tmp_path):
    # encoding/json decodes a null item of a []string as ""; then validateKubeletConfiguration
    # (pkg/kubelet/apis/config/validation) refuses option "" for enforceNodeAllocatable.
    # cgalloc passed None on: a TypeError traceback.
    config = kubelet_config(tmp_path / "k.yaml", "enforceNodeAllocatable: [pods, null]\n")
    with pytest.raises(InputError) as exc:
        load(config=config)
    (problem,) = exc.value.problems
    assert 'option "" specified for enforceNodeAllocatable' in problem


def test_a_null_feature_gate_is_false(tmp_path):
    # encoding/json decodes a null map[string]bool value as false (the zero value); cgalloc
    # kept None, which only happened to read as off
    config = kubelet_config(tmp_path / "k.yaml", "featureGates: {MemoryQoS: null}\n")
    assert load(config=config).feature_gates == {"MemoryQoS": False}


# cmd/kubelet/app/server.go mergeKubeletConfigurations: each drop-in is a JSON merge patch
# (RFC 7386, where null deletes) over the JSON of the loaded config, and the result is then
# json.Unmarshal'ed into that loaded config, which keeps every field and map entry the JSON
# lacks. So a drop-in's null brings back the main file's value, even over an earlier drop-in.
@pytest.mark.parametrize(
    ("main", "dropins", "expect"),
    [
        (  # a null entry: the main file's entry stays (cgalloc dropped it: no reservation)
            "kubeReserved: {cpu: 500m, memory: 1Gi}\n",
            ["kubeReserved: {memory: null}\n"],
            {"reserved": {"cpu": "500m", "memory": "1Gi"}},
        ),
        (  # a null field: the main file's value, not the default of 110
            "maxPods: 50\n",
            ["maxPods: null\n"],
            {"max_pods": 50},
        ),
        (  # a later null undoes an earlier drop-in back to the main file, not to the default
            "evictionHard: {memory.available: 300Mi}\n",
            ["evictionHard: {memory.available: 1Gi}\n", "evictionHard: null\n"],
            {"eviction": {"memory.available": "300Mi"}},
        ),
        (  # a null signal inside a map keeps the main file's threshold for that signal
            "evictionHard: {memory.available: 300Mi, nodefs.available: 7%}\n",
            ["evictionHard: {memory.available: null}\n"],
            {"eviction": {"memory.available": "300Mi", "nodefs.available": "7%"}},
        ),
        (  # no main file: what the null deletes comes back as loadConfigFile's default set
            None,
            ["evictionHard: {memory.available: 2Gi}\n", "evictionHard: {memory.available: null}\n"],
            {
                "eviction": {
                    "memory.available": "100Mi",
                    "nodefs.available": "10%",
                    "nodefs.inodesFree": "5%",
                    "imagefs.available": "15%",
                    "imagefs.inodesFree": "5%",
                }
            },
        ),
    ],
)
def test_dropin_null_keeps_the_loaded_value(tmp_path, main, dropins, expect):
    drop = tmp_path / "conf.d"
    drop.mkdir()
    for i, body in enumerate(dropins):
        write(drop / f"{i + 1}0-null.conf", HEAD + body)
    config = kubelet_config(tmp_path / "k.yaml", main) if main else None
    cfg = load(config=config, config_dir=str(drop))
    if "reserved" in expect:
        assert cfg.kube_reserved == {k: Q(v) for k, v in expect["reserved"].items()}
    if "max_pods" in expect:
        assert cfg.max_pods == expect["max_pods"]
    if "eviction" in expect:
        assert evictions(cfg) == expect["eviction"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # encoding/json UnmarshalTypeError text as DecodeKubeletConfiguration returns it
        # (pkg/kubelet/kubeletconfig/util/codec/codec.go: "failed to decode: %w")
        (
            "kubeReserved: {cpu: 1}",
            "failed to decode: json: cannot unmarshal number into Go struct field"
            " KubeletConfiguration.kubeReserved of type string",
        ),
        (
            "systemReserved: {memory: true}",
            "cannot unmarshal bool into Go struct field KubeletConfiguration.systemReserved of"
            " type string",
        ),
        (
            "evictionHard: [memory.available<1Gi]",
            "cannot unmarshal array into Go struct field KubeletConfiguration.evictionHard of"
            " type map[string]string",
        ),
        (
            "enforceNodeAllocatable: pods",
            "cannot unmarshal string into Go struct field"
            " KubeletConfiguration.enforceNodeAllocatable of type []string",
        ),
        (
            "cgroupsPerQOS: 'true'",
            "cannot unmarshal string into Go struct field KubeletConfiguration.cgroupsPerQOS of"
            " type bool",
        ),
        (
            "maxPods: 1.5",
            "cannot unmarshal number 1.5 into Go struct field KubeletConfiguration.maxPods of"
            " type int32",
        ),
        (
            "maxPods: 4294967296",
            "cannot unmarshal number 4294967296 into Go struct field"
            " KubeletConfiguration.maxPods of type int32",
        ),
        (
            "cpuManagerPolicyOptions: {strict-cpu-reservation: true}",
            "cannot unmarshal bool into Go struct field"
            " KubeletConfiguration.cpuManagerPolicyOptions of type string",
        ),
        # encoding/json leaves a null map value as "" in a map[string]string; then
        # server.go parseResourceList: ParseQuantity("") fails, and parseThresholdStatement
        # likewise. cgalloc dropped the entry: the reservation vanished without a word.
        ("kubeReserved: {cpu: null}", 'failed to parse quantity "" for "cpu" resource'),
        ("evictionHard: {memory.available: null}", 'memory.available has malformed value ""'),
    ],
)
def test_wrong_types_are_refused_with_the_kubelets_decode_error(tmp_path, body, message):
    config = kubelet_config(tmp_path / "k.yaml", body + "\n")
    with pytest.raises(InputError) as exc:
        load(config=config)
    (problem,) = exc.value.problems
    assert message in problem
    assert problem.startswith(body.split(":")[0])


def test_quoted_map_values_are_accepted(tmp_path):
    config = kubelet_config(tmp_path / "k.yaml", 'kubeReserved: {cpu: "1", pid: "100"}\n')
    assert load(config=config).kube_reserved == {"cpu": Q("1"), "pid": Q("100")}


def test_pods_settings_from_flags_and_file(tmp_path):
    # KubeletConfiguration maxPods / podsPerCore (flags --max-pods / --pods-per-core)
    config = kubelet_config(tmp_path / "k.yaml", "maxPods: 250\npodsPerCore: 10\n")
    cfg = load(config=config)
    assert (cfg.max_pods, cfg.pods_per_core) == (250, 10)
    cfg = load({"max-pods": ["30"]}, config=config)
    assert (cfg.max_pods, cfg.pods_per_core) == (30, 10)


@pytest.mark.parametrize("flag", ["max-pods", "pods-per-core"])
def test_negative_pod_counts_are_refused(flag):
    # ValidateKubeletConfiguration: "maxPods (--max-pods) %v must not be a negative number"
    with pytest.raises(InputError, match=rf"\(--{flag}\) -1 must not be a negative number"):
        load({flag: ["-1"]})


def test_cpu_manager_policy_validation():
    # pkg/kubelet/cm/cpumanager/cpu_manager.go NewManager / policy_none.go NewNonePolicy /
    # policy_options.go NewStaticPolicyOptions
    with pytest.raises(InputError, match=r'unknown policy: "dynamic"'):
        load({"cpu-manager-policy": ["dynamic"]})
    with pytest.raises(InputError, match=r"None policy: received unsupported options"):
        load({"cpu-manager-policy-options": ["strict-cpu-reservation=true"]})
    with pytest.raises(InputError, match=r"unable to determine reserved CPU resources"):
        load({"cpu-manager-policy": ["static"]})
    with pytest.raises(InputError, match=r'unsupported cpumanager option: "bogus" \(true\)'):
        load(
            {
                "cpu-manager-policy": ["static"],
                "kube-reserved": ["cpu=1"],
                "cpu-manager-policy-options": ["bogus=true"],
            }
        )
    cfg = load(
        {
            "cpu-manager-policy": ["static"],
            "reserved-cpus": ["0"],
            "cpu-manager-policy-options": ["strict-cpu-reservation=True"],
        }
    )
    assert cfg.strict_cpu_reservation


def test_cpu_manager_policy_options_take_one_pair_per_flag():
    # cmd/kubelet/app/options/options.go declares the flag with cliflag.NewMapStringStringNoSplit:
    # MapStringString.Set with NoSplit splits each occurrence once on "=", never on ",", so
    # "a=true,b=true" is option a with the value "true,b=true", which ParseBool refuses and the
    # kubelet does not start; cgalloc applied strict-cpu-reservation from it.
    static = {"cpu-manager-policy": ["static"], "reserved-cpus": ["0"]}
    with pytest.raises(
        InputError,
        match=r'bad value for option "full-pcpus-only": strconv.ParseBool: parsing'
        r' "true,strict-cpu-reservation=true"',
    ):
        load(
            {
                **static,
                "cpu-manager-policy-options": ["full-pcpus-only=true,strict-cpu-reservation=true"],
            }
        )
    # an empty occurrence is "malformed pair" with NoSplit (Split mode skips empty items)
    with pytest.raises(InputError, match=r'malformed pair ""'):
        load({**static, "cpu-manager-policy-options": [""]})
    cfg = load(
        {
            **static,
            "cpu-manager-policy-options": [
                "full-pcpus-only=true",
                " strict-cpu-reservation = true",
            ],
        }
    )
    assert cfg.cpu_manager_policy_options == {
        "full-pcpus-only": "true",
        "strict-cpu-reservation": "true",
    }


def test_kubelet_version():
    assert load({"kubelet-version": ["v1.35.2"]}).kubelet_version == "1.35"
    assert load({"kubelet-version": ["v1.20.2"]}).kubelet_version == "1.20"
    with pytest.raises(InputError, match=r'--kubelet-version: "1.19" is not a kubelet minor'):
        load({"kubelet-version": ["1.19"]})
    with pytest.raises(InputError, match=r'"1.38" is not a kubelet minor from 1.20 to 1.37'):
        load({"kubelet-version": ["1.38"]})


@pytest.mark.parametrize(
    ("text", "minor"),
    [
        # k8s.io/apimachinery/pkg/util/version ParseGeneric (version_test.go's generic cases:
        # two or more components, "v" and trailing text allowed, the first component without
        # a leading zero, later ones with it), then the supported minors
        ("1.36", "1.36"),
        ("v1.36.2", "1.36"),
        ("  v1.36.2", "1.36"),
        ("1.36.2.4", "1.36"),
        ("v1.36.2-eks-4f2a1b", "1.36"),  # kubelet --version on EKS: was refused
        ("v1.36.2+k3s1", "1.36"),  # and on k3s
        ("1.37-rc.1", "1.37"),
        ("1.036", "1.36"),
        ("1.36 ", "1.36"),
        ("01.36", None),  # illegal zero-prefixed version component
        ("1", None),  # illegal version string
        ("v", None),
        ("", None),
        ("1.36\n", None),  # RE2's "$" is the end of the text, "." no newline
        ("١.٣٦", None),  # [0-9] only
        ("v1.20.2", "1.20"),  # the real kubelet of the Vagrant lane
        ("1.19", None),  # a version, not a supported minor
        ("1.38", None),
    ],
)
def test_kubelet_version_reads_as_parse_generic(text, minor):
    from cgalloc.model.versions import normalise

    assert normalise(text) == minor


@pytest.mark.parametrize(
    ("field", "zero", "flag", "default"),
    [
        ("maxPods", "0", "max-pods", 110),
        ("cgroupDriver", "''", "cgroup-driver", "cgroupfs"),
        ("cpuManagerPolicy", "''", "cpu-manager-policy", "none"),
    ],
)
def test_a_files_zero_value_is_defaulted_but_a_flags_is_not(tmp_path, field, zero, flag, default):
    # pkg/kubelet/apis/config/v1beta1/defaults.go SetDefaults_KubeletConfiguration tests these
    # fields against their zero value ("if obj.MaxPods == 0"), so decoding a file gives the
    # default; a flag is applied after decoding and keeps what it says (--max-pods=0 is 0).
    config = kubelet_config(tmp_path / "k.yaml", f"{field}: {zero}\n")
    attr = flag.replace("-", "_")
    assert getattr(load(config=config), attr) == default
    if flag == "max-pods":
        assert load({"max-pods": ["0"]}, config=config).max_pods == 0


def test_a_dropins_zero_value_is_kept(tmp_path):
    # server.go mergeKubeletConfigurations merges drop-ins into the loaded (defaulted) config
    # and unmarshals without defaulting: a drop-in's maxPods 0 stays 0, its "" driver stays ""
    main = kubelet_config(tmp_path / "k.yaml", "maxPods: 50\n")
    drop = tmp_path / "conf.d"
    drop.mkdir()
    write(drop / "10.conf", HEAD + "maxPods: 0\n")
    assert load(config=main, config_dir=str(drop)).max_pods == 0
    write(drop / "10.conf", HEAD + "cgroupDriver: ''\n")
    with pytest.raises(InputError, match='"" is not a cgroup driver'):
        load(config=main, config_dir=str(drop))


@pytest.mark.parametrize(
    ("version", "body", "gates", "policy", "problem"),
    [
        # no such field before 1.36: the kubelet's lenient decode drops it, whatever its type
        ("1.35", "memoryReservationPolicy: TieredReservation\n", None, "None", None),
        ("1.35", "memoryReservationPolicy: 5\n", None, "None", None),
        # ValidateKubeletConfiguration (1.36+): the gate, then the two options
        ("1.36", "memoryReservationPolicy: TieredReservation\n", None, None,
         'memoryReservationPolicy "TieredReservation" requires MemoryQoS feature gate'),
        ("1.36", "memoryReservationPolicy: TieredReservation\n", ["AllAlpha=true"],
         "TieredReservation", None),
        ("1.36", "memoryReservationPolicy: ''\n", None, "None", None),  # SetDefaults: None
        ("1.36", "memoryReservationPolicy: Tiered\n", None, None,
         'option "Tiered" specified for memoryReservationPolicy; valid options are "None" or'),
        ("1.37", "memoryReservationPolicy: TieredReservation\n", None, "TieredReservation", None),
        ("1.37", "memoryReservationPolicy: TieredReservation\n", ["MemoryQoS=false"], None,
         "requires MemoryQoS feature gate to be enabled"),
    ],
)  # fmt: skip
def test_memory_reservation_policy(tmp_path, version, body, gates, policy, problem):
    config = kubelet_config(tmp_path / "k.yaml", body)
    flags = {"kubelet-version": [version], **({"feature-gates": gates} if gates else {})}
    if problem is None:
        assert load(flags, config=config).memory_reservation_policy == policy
        return
    with pytest.raises(InputError) as err:
        load(flags, config=config)
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_memory_reservation_policy_has_no_flag():
    # the kubelet declares no --memory-reservation-policy: a flag map naming it changes nothing
    cfg = load({"memory-reservation-policy": ["TieredReservation"]})
    assert cfg.memory_reservation_policy == "None"
