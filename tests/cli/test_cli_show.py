"""`cgalloc show` end to end through cgalloc.cli.main."""

import json

import pytest
import yaml
from clirun import run_cli
from fakecgroup import fake_tree

# Host hugepages would change Allocatable memory; pin the x86 page sizes to 0.
PLAN = "hugepages-2Mi=0,hugepages-1Gi=0"


run = run_cli


def show_json(capsys, *args):
    code, out, err = run(capsys, "show", "-o", "json", *args)
    assert code == 0, err
    return json.loads(out), err


def test_openshift_example(capsys):
    doc, _ = show_json(
        capsys,
        "--capacity", f"cpu=4,memory=32Gi,{PLAN}",
        "--kube-reserved", "memory=2Gi",
        "--system-reserved", "memory=1Gi",
        "--eviction-hard", "memory.available<100Mi",
    )  # fmt: skip
    assert doc["allocatable"]["memory"] == "29596Mi"  # 29Gi - 100Mi
    assert doc["kubepods"]["limits"]["memory"] == "29Gi"
    assert doc["kubepods"]["cgroup"] == "/kubepods"


SIXTEEN = (
    "--capacity", f"cpu=16,memory=32Gi,ephemeral-storage=100Gi,pid=4194304,{PLAN}",
    "--kube-reserved", "cpu=1000m,memory=2Gi,ephemeral-storage=1Gi",
    "--system-reserved", "cpu=500m,memory=1Gi,ephemeral-storage=1Gi",
    "--eviction-hard", "memory.available<500Mi,nodefs.available<10%",
)  # fmt: skip


def test_sixteen_cpu_node_json(capsys):
    doc, err = show_json(capsys, *SIXTEEN)
    assert err == ""
    assert doc["capacity"] == {
        "cpu": "16",
        "ephemeral-storage": "100Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "32Gi",
        "pods": "110",
    }
    assert doc["allocatable"] == {
        "cpu": "14500m",
        "ephemeral-storage": "94489280352",  # 100Gi - 2Gi - float32 10% (10737418400)
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "29196Mi",  # 32Gi - 3Gi - 500Mi
        "pods": "110",
    }
    assert doc["kubepods"]["limits"] == {
        "cpu": "14500m",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "29Gi",
        "pid": "4194304",
        # getCgroupConfig, none CPU manager policy: all CPUs (kubernetes#125923)
        "cpuset": "0-15",
    }
    assert (doc["kubeletVersion"], doc["cpuManagerPolicy"]) == ("1.37", "none")
    assert {"resource": "ephemeral-storage", "source": "eviction-hard nodefs.available<10%",
            "quantity": "10737418400", "lowers": ["allocatable"]} in doc["breakdown"]  # fmt: skip
    assert doc["warnings"] == []
    assert "kubeReserved" not in doc and "systemReserved" not in doc


def test_sixteen_cpu_node_table_is_kubectl_layout(capsys):
    code, out, _ = run(capsys, "show", *SIXTEEN)
    assert code == 0
    lines = out.splitlines()
    assert lines[:14] == [
        "Capacity:",
        "  cpu:                16",
        "  ephemeral-storage:  100Gi",
        "  hugepages-1Gi:      0",
        "  hugepages-2Mi:      0",
        "  memory:             32Gi",
        "  pods:               110",
        "Allocatable:",
        "  cpu:                14500m",
        "  ephemeral-storage:  94489280352",
        "  hugepages-1Gi:      0",
        "  hugepages-2Mi:      0",
        "  memory:             29196Mi",
        "  pods:               110",
    ]
    assert "  kubepods /kubepods (enforced):" in lines
    assert "    memory:         29Gi" in lines
    assert "Breakdown:" in lines


def test_yaml_output_and_systemd_names(capsys):
    code, out, _ = run(
        capsys, "show", "-o", "yaml", "--capacity", f"cpu=8,memory=16Gi,{PLAN}",
        "--cgroup-driver", "systemd", "--enforce", "pods,system-reserved",
        "--system-reserved", "cpu=1,memory=1Gi,ephemeral-storage=1Gi",
        "--system-reserved-cgroup", "/system.slice",
    )  # fmt: skip
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc["kubepods"]["cgroup"] == "/kubepods.slice"
    assert doc["systemReserved"] == {
        "cgroup": "/system.slice",
        "enforced": "full",
        "limits": {"cpu": "1", "memory": "1Gi", "cpuset": "0-7"},
    }
    assert out.index("allocatable:") < out.index("breakdown:") < out.index("capacity:")


def test_reservation_above_capacity_shows_zero_and_exits_2(capsys):
    # the kubelet refuses to start: validateNodeAllocatable (pkg/kubelet/cm/
    # node_container_manager_linux.go) "Expected capacity >= reservation."
    code, out, err = run(
        capsys, "show", "-o", "json", "--capacity", f"cpu=2,memory=4Gi,{PLAN}",
        "--kube-reserved", "cpu=3,memory=1Gi",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 2
    assert doc["allocatable"]["cpu"] == "0"
    assert doc["kubepods"]["limits"]["cpu"] == "0"
    assert len(doc["warnings"]) == 1 and doc["warnings"][0].startswith("cpu: the reservation of 3")
    assert err.splitlines() == [
        f"cgalloc: warning: {doc['warnings'][0]}",
        'cgalloc: invalid Node Allocatable configuration: Resource "cpu" has a reservation of 3'
        " but capacity of 2. Expected capacity >= reservation.",
    ]


def test_enforced_empty_reservation_exits_2(capsys):
    # enforceNodeAllocatableCgroups (pkg/kubelet/cm/node_container_manager_linux.go): an
    # enforced kube-reserved with a nil kubeReserved fails the kubelet's start
    code, _, err = run(
        capsys, "show", "--capacity", f"cpu=2,memory=4Gi,{PLAN}",
        "--enforce", "pods,kube-reserved", "--kube-reserved-cgroup", "/kube.slice",
    )  # fmt: skip
    assert code == 2
    assert "Failed to enforce Kube Reserved Cgroup Limits on '/kube.slice'" in err


def test_config_file_through_cli(capsys, tmp_path):
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "kubeReserved: {memory: 1Gi}\nevictionHard: {memory.available: 1Gi}\n"
    )
    doc, _ = show_json(capsys, "--config", str(config), "--capacity", f"memory=8Gi,{PLAN}")
    assert doc["allocatable"]["memory"] == "6Gi"


@pytest.mark.parametrize(
    "option",
    ["--kube-reserved", "--eviction-hard", "--enforce-node-allocatable", "--enforce",
     "--reserved-cpus", "--config", "--config-dir", "--node-config", "--capacity", "--output",
     "--experimental-allocatable-ignore-eviction", "--qos-reserved", "--pod-max-pids",
     "--root-dir", "--cgroup-root", "--cgroup-driver", "--cgroups-per-qos"],
)  # fmt: skip
def test_help_explains_every_option(capsys, option):
    code, out, _ = run(capsys, "show", "--help")
    assert code == 0
    assert option in out


def test_runs_on_the_real_host_unprivileged(capsys):
    doc, _ = show_json(capsys)
    assert set(doc) >= {"capacity", "allocatable", "kubepods", "breakdown", "warnings"}
    assert "memory" in doc["allocatable"] and "pid" not in doc["capacity"]


def test_ignore_eviction_and_node_config_through_cli(capsys, tmp_path):
    node_config = tmp_path / "node-config.yaml"
    node_config.write_text(
        "apiVersion: v1\nkind: NodeConfig\nkubeletArguments:\n"
        "  system-reserved: ['memory=1Gi']\n"
        "  eviction-hard: ['memory.available<100Mi', 'nodefs.available<10%']\n"
    )
    args = ("--node-config", str(node_config), "--capacity", f"memory=8Gi,{PLAN}")
    doc, _ = show_json(capsys, *args)
    assert doc["allocatable"]["memory"] == "7068Mi"  # 8Gi - 1Gi - 100Mi
    doc, _ = show_json(capsys, *args, "--experimental-allocatable-ignore-eviction=true")
    assert doc["allocatable"]["memory"] == "7Gi"


def test_show_prints_the_kubelet_version_and_cpu_policy(capsys):
    code, out, _ = run(capsys, "show", "--capacity", f"cpu=4,memory=8Gi,{PLAN}")
    assert code == 0
    assert "Kubelet matched: 1.37" in out.splitlines()
    assert "CPU manager policy: none" in out.splitlines()
    args = (
        "--capacity", f"cpu=4,memory=8Gi,{PLAN}", "--kubelet-version", "1.35",
        "--cpu-manager-policy", "static", "--kube-reserved", "cpu=1500m",
        "--cpu-manager-policy-options", "strict-cpu-reservation=true",
    )  # fmt: skip
    doc, err = show_json(capsys, *args)
    assert doc["kubeletVersion"] == "1.35"
    assert doc["cpuManagerPolicy"] == "static (strict-cpu-reservation)"
    # the static policy reserves ceil(1.5) = 2 CPUs; pods keep the other two
    assert doc["kubepods"]["limits"]["cpuset"] == "2-3"
    assert "takeByTopology" in err


def test_show_pods_per_core(capsys):
    # nodestatus.MachineInfo: min(podsPerCore × cores, maxPods)
    doc, _ = show_json(capsys, "--capacity", f"cpu=4,memory=8Gi,{PLAN}", "--pods-per-core", "10")
    assert doc["capacity"]["pods"] == doc["allocatable"]["pods"] == "40"


def test_show_systemd_reserved_names_as_the_kubelet_maps_them(capsys):
    doc, err = show_json(
        capsys, "--capacity", f"cpu=4,memory=8Gi,{PLAN}", "--cgroup-driver", "systemd",
        "--enforce", "pods,kube-reserved", "--kube-reserved", "memory=1Gi",
        "--kube-reserved-cgroup", "/kube-reserved.slice",
    )  # fmt: skip
    assert doc["kubeReserved"]["cgroup"] == "/kube.slice/kube-reserved.slice"
    assert "alsoLimits" not in doc["kubeReserved"]
    assert err.count("\n") == 1 and "/kube.slice/kube-reserved.slice" in err


def test_show_without_cgroups_per_qos_names_the_cgroup_root(capsys):
    doc, _ = show_json(
        capsys, "--capacity", f"cpu=4,memory=8Gi,{PLAN}", "--cgroups-per-qos=false",
        "--enforce", "none", "--cgroup-root", "kubelet",
    )  # fmt: skip
    assert doc["kubepods"]["cgroup"] == "/kubelet"
    assert doc["kubepods"]["limits"]["memory"] == "8Gi"


# Where setup refuses a reserved cgroup (tree.placement_problem, overlapping_reserved): the
# kubelet accepts these, so show keeps exit 0 but warns with setup's own sentences.
PLACEMENTS = {
    "inside kubepods": ["--kube-reserved-cgroup", "/kubepods/kr"],
    "kubepods itself": ["--kube-reserved-cgroup", "/kubepods"],
    "above kubepods": ["--cgroup-root", "/top", "--kube-reserved-cgroup", "/top"],
    "same as system-reserved": ["--kube-reserved-cgroup", "/r", "--system-reserved-cgroup", "/r"],
    "system-reserved inside": ["--kube-reserved-cgroup", "/r", "--system-reserved-cgroup", "/r/s"],
    "apart": ["--kube-reserved-cgroup", "/kube", "--system-reserved-cgroup", "/system"],
}


@pytest.mark.parametrize("placement", PLACEMENTS.values(), ids=PLACEMENTS.keys())
def test_show_warns_with_the_placement_refusals_of_setup(capsys, tmp_path, monkeypatch, placement):
    from fakecgroup import fake_hierarchy, use_fake_tree

    node = ["--capacity", f"cpu=4,memory=8Gi,pid=4096,{PLAN}", "--kube-reserved", "cpu=1",
            "--system-reserved", "cpu=1", "--enforce", "pods,kube-reserved,system-reserved",
            *placement]  # fmt: skip
    if "--system-reserved-cgroup" not in placement:
        node += ["--system-reserved-cgroup", "/system"]
    doc, _ = show_json(capsys, *node)
    prefix = "setup refuses this placement: "
    warned = [w.removeprefix(prefix) for w in doc["warnings"] if w.startswith(prefix)]
    root, _ = fake_hierarchy(tmp_path, "v2")
    (root / "top").mkdir()
    use_fake_tree(monkeypatch, tmp_path)
    code, _, err = run(capsys, "setup", *node, "--cgroupfs", str(root), "--dry-run")
    lines = [line.removeprefix("cgalloc: ") for line in err.splitlines()]
    refused = [line for line in lines if not line.startswith("warning: ")]
    assert warned == refused, err
    assert code == (0 if placement is PLACEMENTS["apart"] else 2), err
    assert bool(warned) == (code == 2)


def test_systemd_names_derived_from_the_root_are_held_to_systemd_length(capsys, tmp_path):
    # src/basic/unit-name.c: a unit name is shorter than UNIT_NAME_MAX (256). The longest name
    # the kubelet's ToSystemd derives from --cgroup-root /R without a pod is the besteffort
    # tier's, "R-kubepods-besteffort.slice": R + 26 characters. It raised a traceback in show
    # and stats, and setup blamed --pods for it.
    def root(n: int) -> list[str]:
        return ["--capacity", f"cpu=4,memory=8Gi,{PLAN}", "--cgroup-driver", "systemd",
                "--cgroup-root", "/" + "a" * n]  # fmt: skip

    assert run(capsys, "show", *root(229))[0] == 0  # 255 characters
    for command in (["show"], ["stats", "--cgroupfs", str(tmp_path), "--interval", "0"]):
        code, out, err = run(capsys, *command, *root(230))
        assert (code, out) == (2, ""), err
        assert err.startswith("cgalloc: cgroupRoot (--cgroup-root) '/aaa")
        assert "-kubepods-besteffort.slice': it has 256 characters; a systemd unit" in err
    # a pod's slice adds "-pod" + its uid: the pod is named, not the root
    uid = "0f6e1d5c-0000-4000-8000-000000000001"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "x", "namespace": "ns", "uid": uid},
           "spec": {"containers": [{"name": "c"}]}}  # fmt: skip
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    code, out, err = run(capsys, "show", *root(200), "--pods", str(tmp_path / "pod.json"))
    assert (code, out) == (2, ""), err
    assert err.startswith(f"cgalloc: --pods: pod ns/x uid '{uid}': ")
    assert "it has 266 characters" in err and "Traceback" not in err


# A cgroup name past NAME_MAX (255 bytes a component): the kubelet's own checks pass it, setup
# refuses it (plan.check_targets, kernel_ranges.name_refusal). show keeps exit 0 and warns with
# setup's sentence, once per field as setup says it; it printed the paths without a word.
LONG = "a" * 256
NAMES = {
    "cgroup root": ["--cgroup-root", f"/{LONG}"],
    "kube-reserved": ["--kube-reserved-cgroup", f"/{LONG}"],
    "two pods": ["--pods", "long-uid"],
    "255 bytes": ["--kube-reserved-cgroup", "/" + "b" * 255],
}


def _show_warned_and_setup_refused(capsys, tmp_path, monkeypatch, node, kind, version):
    """show's warnings of ``kind`` ("cgroup", "value") for ``node``, and setup's refusals and
    exit status for the same node on a fake ``version`` tree (a dry run)."""
    from fakecgroup import fake_hierarchy, use_fake_tree

    code, out, err = run(capsys, "show", *node, "-o", "json")
    assert code == 0, err
    prefix = f"setup refuses this {kind}: "
    warned = [w.removeprefix(prefix) for w in json.loads(out)["warnings"] if w.startswith(prefix)]
    root, _ = fake_hierarchy(tmp_path, version)
    use_fake_tree(monkeypatch, tmp_path)
    code, _, err = run(capsys, "setup", *node, "--cgroupfs", str(root), "--dry-run")
    lines = [line.removeprefix("cgalloc: ") for line in err.splitlines()]
    return warned, [line for line in lines if not line.startswith("warning: ")], code


@pytest.mark.parametrize("names", NAMES.values(), ids=NAMES.keys())
def test_show_warns_with_the_name_refusals_of_setup(capsys, tmp_path, monkeypatch, names):
    pods = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"{i}{LONG}"},
         "spec": {"containers": [{"name": "c"}]}} for i in (1, 2)]}  # fmt: skip
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    fine = names is NAMES["255 bytes"]
    names = [str(tmp_path / "pods.json") if n == "long-uid" else n for n in names]
    node = ["--capacity", f"cpu=4,memory=8Gi,pid=4096,{PLAN}", "--kube-reserved", "cpu=1",
            "--enforce", "pods,kube-reserved", *names]  # fmt: skip
    if "--kube-reserved-cgroup" not in names:
        node += ["--kube-reserved-cgroup", "/kube"]
    warned, refused, code = _show_warned_and_setup_refused(
        capsys, tmp_path, monkeypatch, node, "cgroup", "v2"
    )
    assert warned == refused
    assert code == (0 if fine else 2), refused
    assert len(warned) == (code == 2)


# A value the kernel would refuse or change (kernel_ranges: tg_set_cfs_bandwidth's max_cfs_runtime,
# pids_max_write's PID_MAX_LIMIT, page_counter_memparse's wrap): setup refuses it with exit 2
# before any write (plan.build), the kubelet's checks pass it. show keeps exit 0 and warns with
# setup's sentences, measured as the v1 files it prints; it printed a 10^20 µs quota silently.
VALUES = {
    "pod cpu quota": ({"cpu": "1e15"}, "cpu=4,memory=8Gi,pid=4096"),
    "pod memory wrap": ({"memory": str(2**64 + 4096)}, "cpu=4,memory=8Gi,pid=4096"),
    "kubepods pids": ({}, "cpu=4,memory=8Gi,pid=4194305"),
    "in range": ({"cpu": "17592186", "memory": "1Gi"}, "cpu=4,memory=8Gi,pid=4194304"),
}


@pytest.mark.parametrize(("limits", "capacity"), VALUES.values(), ids=VALUES.keys())
def test_show_warns_with_the_value_refusals_of_setup(
    capsys, tmp_path, monkeypatch, limits, capacity
):
    uid = "0f6e1d5c-0000-4000-8000-0000000000a1"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ns", "uid": uid},
           "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}  # fmt: skip
    (tmp_path / "pods.json").write_text(json.dumps(pod))
    node = ["--capacity", f"{capacity},{PLAN}", "--pods", str(tmp_path / "pods.json")]
    warned, refused, code = _show_warned_and_setup_refused(
        capsys, tmp_path, monkeypatch, node, "value", "v1"
    )
    assert warned == refused  # in setup's order
    assert code == (2 if warned else 0), refused
    assert bool(warned) == (limits != VALUES["in range"][0])


def test_value_refusals_name_each_pod_under_the_systemd_driver(capsys, tmp_path, monkeypatch):
    # a burstable pod's systemd path is ~104 characters, its UID at the end: a refusal cut at
    # 80 lost it, and the pods' sentences, then alike, folded into one. The pods are out of
    # order in the file: both commands list the refusals sorted (show's were in file order).
    uids = [f"0f6e1d5c-0000-4000-8000-00000000000{i}" for i in (2, 0, 1)]
    pods = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "uid": uid},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"},
                                                             "limits": {"cpu": "1e15"}}}]}}
        for i, uid in enumerate(uids)]}  # fmt: skip
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    node = ["--cgroup-driver", "systemd", "--capacity", f"cpu=4,memory=8Gi,pid=4096,{PLAN}",
            "--pods", str(tmp_path / "pods.json")]  # fmt: skip
    warned, refused, code = _show_warned_and_setup_refused(
        capsys, tmp_path, monkeypatch, node, "value", "v2"
    )
    assert code == 2, refused
    assert len(refused) == 3, refused
    for uid, line in zip(sorted(uids), refused, strict=True):
        assert f"kubepods-burstable-pod{uid.replace('-', '_')}.slice is outside" in line
    assert len(warned) == 3, warned  # show: the same pods, as the v1 files it prints
    for uid, line in zip(sorted(uids), warned, strict=True):
        assert f"kubepods-burstable-pod{uid.replace('-', '_')}.slice is outside" in line


@pytest.mark.parametrize(
    ("percentage", "memory"),
    [
        # pkg/kubelet/eviction/helpers.go parsePercentage reads the number with
        # strconv.ParseFloat(s, 32): Go's float syntax, "_" between digits and hex floats
        # included. 10% of 8Gi is 858993472 (float32 0.1), 0.125% is 10737418.
        ("1_0%", str(8 * 2**30 - 858993472)),
        ("0x1p-3%", str(8 * 2**30 - 10737418)),
    ],
)
def test_eviction_percentage_in_go_float_syntax(capsys, percentage, memory):
    doc, _ = show_json(
        capsys,
        "--capacity", f"cpu=4,memory=8Gi,{PLAN}",
        "--eviction-hard", f"memory.available<{percentage}",
    )  # fmt: skip
    assert doc["allocatable"]["memory"] == memory


def test_eviction_percentage_nan_is_refused(capsys):
    # The kubelet takes NaN% (it passes both range checks) and reserves an undefined amount:
    # cgalloc refuses it, as docs/kubelet-compatibility.md says.
    code, out, err = run(
        capsys, "show", "--capacity", f"cpu=4,memory=8Gi,{PLAN}",
        "--eviction-hard", "memory.available<NaN%",
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert (
        "evictionHard (--eviction-hard): eviction threshold memory.available has percentage"
        ' "NaN%", which is not a number' in err
    )


# Every file the kubelet writes to a pod cgroup, as show --pods predicts it (issue 36 step 4:
# the real kubelet v1.20.2 wrote pids.max = podPidsLimit on every pod and a hugetlb limit for
# every page size, 0 for those the pod did not ask for): pkg/kubelet/cm/helpers_linux.go
# ResourceConfigForPod (PidsLimit from podPidsLimit, HugePageLimit from the hugepages-* limits)
# and cgroup_manager_linux.go maybeSetHugetlb (every supported size, 0 when not given).
HUGE_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "huge", "namespace": "default", "uid": "aaaa-bbbb"},
    "spec": {"containers": [{"name": "main", "resources": {"limits": {
        "cpu": "200m", "memory": "64Mi", "hugepages-2Mi": "4Mi"}}}]},
}  # fmt: skip
HUGE_CAPACITY = (
    "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=10Gi,hugepages-2Mi=64Mi,hugepages-1Gi=0"
)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("v2", {"cpu.weight": "8", "cpu.max": "20000 100000", "memory.max": "67108864",
                "pids.max": "1024", "hugetlb.2MB.max": "4194304", "hugetlb.1GB.max": "0"}),
        ("v1", {"cpu/cpu.shares": "204", "cpu/cpu.cfs_period_us": "100000",
                "cpu/cpu.cfs_quota_us": "20000", "memory/memory.limit_in_bytes": "67108864",
                "pids/pids.max": "1024", "hugetlb/hugetlb.2MB.limit_in_bytes": "4194304",
                "hugetlb/hugetlb.1GB.limit_in_bytes": "0"}),
    ],
)  # fmt: skip
def test_show_pods_names_every_file_the_kubelet_writes(tmp_path, monkeypatch, capsys, version,
                                                        expected):  # fmt: skip
    root = fake_tree(tmp_path, monkeypatch, version)
    pods = tmp_path / "pod.json"
    pods.write_text(json.dumps(HUGE_POD))
    code, out, err = run_cli(
        capsys, "show", "--capacity", HUGE_CAPACITY, "--pod-max-pids", "1024",
        "--cgroupfs", str(root), "--pods", str(pods), "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    (pod,) = json.loads(out)["pods"]
    assert pod["files"] == expected


def test_show_takes_the_static_pods_as_setup_does(tmp_path, capsys):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "huge.json").write_text(json.dumps(HUGE_POD))
    args = ["--capacity", HUGE_CAPACITY, "--pod-manifest-path", str(manifests), "-o", "json"]
    code, out, err = run_cli(capsys, "show", *args, "--static-pods")
    assert code == 0, err
    assert [p["pod"] for p in json.loads(out)["pods"]] == ["default/huge"]
    code, _, err = run_cli(capsys, "show", "--capacity", HUGE_CAPACITY, "--static-pods")
    assert code == 2 and "--static-pods needs staticPodPath" in err
