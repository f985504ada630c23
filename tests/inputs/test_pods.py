"""--pods: Pod manifests, lists and static-pod directories, and the pod cgroups they give."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from fakecgroup import fake_tree, snapshot, where
from nodeargs import NODE

from cgalloc.errors import InputError
from cgalloc.inputs.pods import load_pods
from cgalloc.model.nodeconfig import SYSTEM_RESERVED_RISK

SHAPES = Path(__file__).parents[1] / "data" / "pods-every-shape.yaml"
UID = "11111111-0000-4000-8000-00000000000{}".format
MI = 1 << 20


def pod_doc(name: str, uid: str | None = "u-1", **spec) -> dict:
    meta = {"name": name, "namespace": "ns"}
    if uid is not None:
        meta["uid"] = uid
    spec.setdefault("containers", [{"name": "c"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def write(path: Path, docs: list) -> Path:
    path.write_text(yaml.safe_dump_all(docs))
    return path


# ------------------------------------------------------------------ input forms


def test_multi_document_yaml_keeps_every_pod_in_order():
    pods = load_pods([str(SHAPES)])
    assert [p.uid for p in pods] == [UID(i) for i in range(1, 9)]
    assert pods[2].init_containers[0].restartable  # restartPolicy: Always → sidecar
    assert pods[3].overhead and pods[5].pod_limits


def test_pod_list_from_kubectl_json_skips_finished_pods(tmp_path):
    # kubectl get pods -A -o json: a v1 List; Succeeded/Failed pods hold no cgroup.
    done = pod_doc("done", "u-2") | {"status": {"phase": "Succeeded"}}
    running = pod_doc("web", "u-1") | {"status": {"phase": "Running", "qosClass": "Burstable"}}
    doc = {"apiVersion": "v1", "kind": "List", "items": [running, done]}
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(doc))
    pods = load_pods([str(path)])
    assert [(p.uid, p.status_qos) for p in pods] == [("u-1", "Burstable")]
    doc["kind"] = "PodList"
    path.write_text(json.dumps(doc))
    assert [p.uid for p in load_pods([str(path)])] == ["u-1"]


def test_mirror_pod_uses_the_static_pods_config_hash(tmp_path):
    # A mirror pod's metadata.uid is the API server's; the kubelet's cgroup uses the static
    # pod's UID, kept in kubernetes.io/config.hash (pkg/kubelet/types ConfigHashAnnotationKey).
    doc = pod_doc("etcd-node1", "api-uid")
    doc["metadata"]["annotations"] = {
        "kubernetes.io/config.hash": "5d2c1b0e9a8f7e6d5c4b3a2918070605",
        "kubernetes.io/config.mirror": "5d2c1b0e9a8f7e6d5c4b3a2918070605",
    }
    pods = load_pods([str(write(tmp_path / "m.yaml", [doc]))])
    assert pods[0].uid == "5d2c1b0e9a8f7e6d5c4b3a2918070605"


def test_static_pod_directory_reads_like_the_kubelet(tmp_path):
    # pkg/kubelet/config/file.go extractFromDir: hidden files and subdirectories are skipped,
    # files are read in name order, each holds one Pod.
    d = tmp_path / "manifests"
    (d / "sub").mkdir(parents=True)
    write(d / "b.yaml", [pod_doc("b", "u-b")])
    (d / "a.json").write_text(json.dumps(pod_doc("a", "u-a")))
    write(d / ".hidden.yaml", [pod_doc("h", "u-h")])
    write(d / "sub" / "c.yaml", [pod_doc("c", "u-c")])
    assert [p.uid for p in load_pods([str(d)])] == ["u-a", "u-b"]


def test_static_pod_directory_follows_symlinks_as_the_kubelet_does(tmp_path, no_hang):
    # pkg/kubelet/config/file.go extractFromDir: os.Stat(path) on each entry follows a
    # symlink; a link to a regular file is read (extractFromFile: os.Open), one to a directory
    # is "not recursing", a dangling one "could not get metadata", a FIFO "not a directory or
    # file": all skipped. Issue 35 asked for a walk that follows none, "as the kubelet walks
    # them"; the kubelet does follow, and a pod it runs from a linked manifest has a cgroup.
    d = tmp_path / "manifests"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dir").mkdir(parents=True)
    d.mkdir()
    write(elsewhere / "etcd.yaml", [pod_doc("etcd", "u-etcd")])
    write(elsewhere / "dir" / "x.yaml", [pod_doc("x", "u-x")])
    os.mkfifo(elsewhere / "fifo")
    (d / "etcd.yaml").symlink_to(elsewhere / "etcd.yaml")
    (d / "dir").symlink_to(elsewhere / "dir")
    (d / "fifo").symlink_to(elsewhere / "fifo")
    (d / "dangling.yaml").symlink_to(elsewhere / "gone.yaml")
    assert [p.uid for p in load_pods([str(d)])] == ["u-etcd"]
    # the directory itself through a link: os.Stat(s.path) follows it too
    (tmp_path / "link").symlink_to(d)
    assert [p.uid for p in load_pods([str(tmp_path / "link")])] == ["u-etcd"]


def test_static_pod_without_uid_is_refused_with_the_way_to_find_it(tmp_path):
    d = tmp_path / "manifests"
    d.mkdir()
    write(d / "etcd.yaml", [pod_doc("etcd", uid=None)])
    with pytest.raises(InputError) as err:
        load_pods([str(d)])
    assert err.value.problems == [
        f"--pods {d / 'etcd.yaml'} pod ns/etcd: metadata.uid is missing; a static pod's UID is"
        " the hash the kubelet computes from its object, node name and file path; copy it from"
        " the mirror pod's kubernetes.io/config.hash annotation into metadata.uid."
    ]


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (
            pod_doc("p", containers=[{"name": "c", "resources": {"limits": {"cpu": "lots"}}}]),
            "pod ns/p: spec.containers[0].resources.limits.cpu 'lots' is not a quantity such as"
            " 500m or 1Gi.",
        ),
        (
            pod_doc("p", containers=[{"name": "c", "resources": {"requests": {"memory": "-1"}}}]),
            "pod ns/p: spec.containers[0].resources.requests.memory '-1' must be 0 or more.",
        ),
        (
            pod_doc("p", containers=[{"name": "c", "restartPolicy": "Always"}]),
            "pod ns/p: spec.containers[0].restartPolicy 'Always' is not allowed; use Always on"
            " an init container or leave it out.",
        ),
        (
            pod_doc("p", uid="a/b"),
            "pod ns/p: metadata.uid 'a/b' is not a UID such as 0f6e1d5c-...-7b2a.",
        ),
        # Python's "$" matched before a trailing newline: both passed
        (
            pod_doc("p", uid="abc\n"),
            "pod ns/p: metadata.uid 'abc\\n' is not a UID such as 0f6e1d5c-...-7b2a.",
        ),
        (
            pod_doc("p", containers=[{"name": "c", "resources": {"limits": {"cpu\n": "1"}}}]),
            "pod ns/p: spec.containers[0].resources.limits has an invalid resource name 'cpu\\n'.",
        ),
        (
            pod_doc("p", containers=[]),
            "pod ns/p: spec.containers is empty; a pod needs at least one container.",
        ),
        (
            {"apiVersion": "apps/v1", "kind": "Deployment"},
            "holds apiVersion apps/v1 kind Deployment; expected a Pod manifest, a multi-document"
            " YAML of Pods, a List or PodList (kubectl get pods -o json), or a static-pod"
            " directory.",
        ),
    ],
)
def test_bad_pod_is_refused_naming_the_field(tmp_path, doc, problem):
    path = write(tmp_path / "p.yaml", [doc])
    with pytest.raises(InputError) as err:
        load_pods([str(path)])
    assert (
        err.value.problems == [f"--pods {path}: {problem}"]
        if "holds" in problem
        else [f"--pods {path} {problem}"]
    )


def _res(requests: dict | None = None, limits: dict | None = None) -> dict:
    out = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


# pkg/apis/core/validation/validation_test.go TestValidateResourceRequirements: its success
# cases ("Resources with Requests equal to Limits", "... with only Limits" (my.org/resource),
# "... with only Requests", "... with Requests Less Than Limits") and error cases ("Resources
# with Requests Larger Than Limits", a hugepages request not equal to its limit, an extended
# resource requested without a limit), which ValidatePodCreate applies to a static pod
# (pkg/kubelet/config/common.go tryDecodeSinglePod) and the API server to every pod.
@pytest.mark.parametrize(
    ("resources", "problem"),
    [
        (_res({"cpu": "10", "memory": "10G"}, {"cpu": "10", "memory": "10G"}), None),
        (_res(None, {"cpu": "10", "memory": "10G", "my.org/resource": "10"}), None),
        (_res({"cpu": "10", "memory": "10G"}), None),
        (_res({"cpu": "9", "memory": "9G"}, {"cpu": "10", "memory": "10G"}), None),
        (_res({"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": "4Mi", "memory": "1Gi"}), None),
        (_res({"kubernetes.io/x": "1"}), None),
        (
            _res({"cpu": "2000m"}, {"cpu": "1"}),
            'spec.containers[0].resources.requests: Invalid value: "2": must be less than or'
            " equal to cpu limit of 1.",
        ),
        (
            _res({"memory": "10G"}, {"memory": "5G"}),
            'spec.containers[0].resources.requests: Invalid value: "10G": must be less than or'
            " equal to memory limit of 5G.",
        ),
        (
            _res({"hugepages-2Mi": "2Mi"}, {"hugepages-2Mi": "4Mi", "memory": "1Gi"}),
            'spec.containers[0].resources.requests: Invalid value: "2Mi": must be equal to'
            " hugepages-2Mi limit of 4Mi.",
        ),
        (
            _res({"my.org/resource": "1"}),
            "spec.containers[0].resources.limits: Required value: Limit must be set for non"
            " overcommitable resources (my.org/resource).",
        ),
    ],
)
def test_requests_against_limits_as_validate_resource_requirements(tmp_path, resources, problem):
    doc = pod_doc("p", uid=UID(1), containers=[{"name": "c", "resources": resources}])
    path = write(tmp_path / "p.yaml", [doc])
    if problem is None:
        assert len(load_pods([str(path)])) == 1
        return
    with pytest.raises(InputError) as err:
        load_pods([str(path)])
    assert err.value.problems == [f"--pods {path} pod ns/p: {problem}"]


def test_pod_level_requests_above_limits_are_refused(tmp_path):
    doc = pod_doc("p", uid=UID(1), resources=_res({"cpu": "2"}, {"cpu": "1"}))
    path = write(tmp_path / "p.yaml", [doc])
    with pytest.raises(InputError) as err:
        load_pods([str(path)])
    assert err.value.problems == [
        f'--pods {path} pod ns/p: spec.resources.requests: Invalid value: "2": must be less'
        " than or equal to cpu limit of 1."
    ]


def test_duplicate_uid_and_unreadable_input(tmp_path):
    path = write(tmp_path / "p.yaml", [pod_doc("a", "same"), pod_doc("b", "same")])
    with pytest.raises(InputError, match="pods ns/a and ns/b have the same UID same"):
        load_pods([str(path)])
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(InputError, match="is not UTF-8 text"):
        load_pods([str(bad)])
    (tmp_path / "broken.yaml").write_text("a: [1,\n")
    with pytest.raises(InputError, match="not valid YAML or JSON at line 2"):
        load_pods([str(tmp_path / "broken.yaml")])


# ------------------------------------------------------------------ pod cgroups through setup


def dry_run(capsys, tree, tmp_path, *extra) -> list[str]:
    code, out, err = run_cli(
        capsys, "setup", *NODE, *where(tree, tmp_path), "--dry-run", "--pods", str(SHAPES), *extra
    )
    # on a v1 tree the default kubelet (1.37) also refuses cgroup v1 (failCgroupV1)
    err = "".join(line for line in err.splitlines(True) if "failCgroupV1" not in line)
    assert (code, err) == (0, f"cgalloc: warning: {SYSTEM_RESERVED_RISK}\n")
    return out.splitlines()


def pod_writes(lines: list[str], uid: str) -> dict[str, str]:
    """file → value written in the pod's cgroup (relative to the pod directory)."""
    out = {}
    for line in lines:
        if line.startswith("  write ") and f"pod{uid}/" in line:
            where, value = line.removeprefix("  write ").split(": (new) -> ")
            out[where.split(f"pod{uid}/")[1]] = value
    return out


def test_every_shape_on_cgroup_v2(tmp_path, monkeypatch, capsys):
    # Expected values worked by hand from helpers_linux.go ResourceConfigForPod,
    # component-helpers PodRequests/PodLimits and the kubelet's linear shares→weight.
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    lines = dry_run(capsys, tree, tmp_path)
    gp = "  write kubepods/pod" + UID(1)
    assert f"{gp}/cpu.max: (new) -> 50000 100000" in lines  # Guaranteed: under kubepods
    hp = {"hugetlb.2MB.max": "0", "hugetlb.1GB.max": "0"}
    assert pod_writes(lines, UID(1)) == {
        "memory.max": str(256 * MI), "cpu.weight": "20", "cpu.max": "50000 100000", **hp,
    }  # fmt: skip
    # init containers: requests max(100m, 300m) = 300m → 307 shares; limits max(200m, 500m)
    assert pod_writes(lines, UID(2)) == {
        "memory.max": str(128 * MI), "cpu.weight": "12", "cpu.max": "50000 100000", **hp,
    }  # fmt: skip
    # sidecar: 100m + 50m requested, 200m + 100m limited, 100Mi + 50Mi
    assert pod_writes(lines, UID(3)) == {
        "memory.max": str(150 * MI), "cpu.weight": "6", "cpu.max": "30000 100000", **hp,
    }  # fmt: skip
    # RuntimeClass overhead 250m / 160Mi on a 1 CPU / 1Gi Guaranteed pod
    assert pod_writes(lines, UID(4)) == {
        "memory.max": str(1184 * MI), "cpu.weight": "49", "cpu.max": "125000 100000", **hp,
    }  # fmt: skip
    assert pod_writes(lines, UID(5)) == {
        "memory.max": str(1024 * MI), "cpu.weight": "39", "cpu.max": "100000 100000",
        "hugetlb.2MB.max": str(64 * MI), "hugetlb.1GB.max": "0",
    }  # fmt: skip
    # pod-level resources (PodLevelResources is on by default since 1.34): Guaranteed
    assert pod_writes(lines, UID(6)) == {
        "memory.max": str(2048 * MI), "cpu.weight": "79", "cpu.max": "200000 100000", **hp,
    }  # fmt: skip
    assert pod_writes(lines, UID(7)) == {"cpu.weight": "10", **hp}  # no limits: shares only
    assert pod_writes(lines, UID(8)) == {"cpu.weight": "1", **hp}
    # Burstable tier: MilliCPUToShares(300 + 150 + 250) = 716 → weight 28
    assert "  write kubepods/burstable/cpu.weight: (new) -> 28" in lines
    assert any(f"kubepods/burstable/pod{UID(7)}/" in x for x in lines)
    assert any(f"kubepods/besteffort/pod{UID(8)}/" in x for x in lines)


def test_every_shape_on_cgroup_v1_and_with_options(tmp_path, monkeypatch, capsys):
    tree = fake_tree(tmp_path, monkeypatch, "v1")
    lines = dry_run(capsys, tree, tmp_path, "--cpu-cfs-quota=false", "--pod-max-pids", "512")
    g = pod_writes(lines, UID(1))
    assert g["memory.limit_in_bytes"] == str(256 * MI)
    assert g["cpu.shares"] == "512"
    # cpuCFSQuota=false: the kubelet writes quota -1 (no limit) with the period
    assert (g["cpu.cfs_period_us"], g["cpu.cfs_quota_us"]) == ("100000", "-1")
    assert g["pids.max"] == "512"
    assert g["hugetlb.2MB.limit_in_bytes"] == "0"
    assert pod_writes(lines, UID(7))["cpu.shares"] == "256"
    assert "memory.limit_in_bytes" not in pod_writes(lines, UID(7))


@pytest.mark.parametrize(
    ("extra", "admits"),
    [(["--max-pods", "7"], 7), (["--pods-per-core", "1"], 4), (["--max-pods", "8"], None)],
)
def test_more_pods_than_the_node_admits_is_refused(tmp_path, monkeypatch, capsys, extra, admits):
    # The kubelet admits at most the node's pod capacity (nodestatus.MachineInfo: maxPods, or
    # podsPerCore x cores when lower; the predicate admit handler refuses more, OutOfpods,
    # unless a critical pod preempts one).
    # Unbounded, a 64 MiB list of 740,000 pods took setup --dry-run 98 s and 4.1 GB.
    # setup runs for real (the suite's fake tree takes --capacity): refused, it writes nothing
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    before = snapshot(tree)
    for command in (["show", *NODE], ["setup", *NODE, *where(tree, tmp_path)]):
        code, out, err = run_cli(capsys, *command, "--pods", str(SHAPES), *extra)
        if admits is None:  # the 8 pods fit
            assert code == 0, err
            continue
        assert (code, out) == (2, ""), err
        assert f"cgalloc: --pods: more than {admits} pods, and this node admits at most" in err
        assert snapshot(tree) == before
        assert not (tmp_path / "state").exists()
    assert (snapshot(tree) == before) == (admits is not None)


def test_a_pod_given_twice_counts_once_against_the_capacity(tmp_path, capsys):
    # the duplicate is the problem to name, not the count (a kubectl list holds the mirror pod
    # of a static pod that --static-pods gives again)
    code, out, err = run_cli(capsys, "show", *NODE, "--max-pods", "8",
                             "--pods", str(SHAPES), "--pods", str(SHAPES))  # fmt: skip
    assert (code, out) == (2, ""), err
    assert "have the same UID" in err and "more than 8 pods" not in err


@pytest.mark.parametrize("limit", ["0", "-2", "-9223372036854775808"])
def test_a_pod_pids_limit_below_one_is_unlimited(tmp_path, monkeypatch, capsys, limit):
    # pod_container_manager_linux.go EnsureExists: PidsLimit only "if m.podPidsLimit > 0", and
    # ValidateKubeletConfiguration has no rule for it; cgalloc refused anything below -1
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    lines = dry_run(capsys, tree, tmp_path, "--pod-max-pids", limit)
    assert "pids.max" not in pod_writes(lines, UID(1))


def test_pod_level_resources_off_on_an_older_kubelet_minor(tmp_path, monkeypatch, capsys):
    # PodLevelResources=false: spec.resources is ignored, so the pod is BestEffort.
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    lines = dry_run(capsys, tree, tmp_path, "--feature-gates", "PodLevelResources=false")
    assert any(f"kubepods/besteffort/pod{UID(6)}/cpu.weight: (new) -> 1" in x for x in lines)


def test_systemd_driver_names_pods_by_uid(tmp_path, monkeypatch, capsys):
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    lines = dry_run(capsys, tree, tmp_path, "--cgroup-driver", "systemd", "--systemd", "no")
    uid = UID(2).replace("-", "_")
    assert (
        f"  mkdir kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice"
        in lines
    )
    assert f"  mkdir kubepods.slice/kubepods-pod{UID(1).replace('-', '_')}.slice" in lines


def test_static_pods_flag_reads_pod_manifest_path(tmp_path, monkeypatch, capsys):
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    d = tmp_path / "manifests"
    d.mkdir()
    write(d / "a.yaml", [pod_doc("a", "static-a")])
    code, out, _ = run_cli(
        capsys, "setup", *NODE, *where(tree, tmp_path), "--dry-run", "--static-pods",
        "--pod-manifest-path", str(d),
    )  # fmt: skip
    assert code == 0
    assert "  mkdir kubepods/besteffort/podstatic-a" in out.splitlines()
    code, _, err = run_cli(capsys, "setup", *NODE, *where(tree, tmp_path), "--static-pods")
    assert code == 2
    assert err == (
        "cgalloc: --static-pods needs staticPodPath (--pod-manifest-path): the directory or"
        " file the kubelet reads static pods from.\n"
    )


def test_bad_pods_file_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    before = snapshot(tree)
    bad = write(tmp_path / "p.yaml", [pod_doc("p", containers="nope")])
    code, _, err = run_cli(capsys, "setup", *NODE, *where(tree, tmp_path), "--pods", str(bad))
    assert code == 2
    assert err == (
        f"cgalloc: --pods {bad} pod ns/p: spec.containers is not a list; expected a Pod"
        " manifest, a multi-document YAML of Pods, a List or PodList (kubectl get pods -o"
        " json), or a static-pod directory.\n"
    )
    assert snapshot(tree) == before


def test_kubelet_config_carries_the_pod_inputs_and_loads_back(capsys, tmp_path):
    from cgalloc.inputs.config import load_node_config

    inputs = [
        "--feature-gates", "CustomCPUCFSQuotaPeriod=true,MemoryQoS=true",
        "--cpu-cfs-quota=false", "--cpu-cfs-quota-period", "50ms",
        "--pod-manifest-path", "/etc/kubernetes/manifests", "--qos-reserved", "memory=50%",
    ]  # fmt: skip
    code, out, _ = run_cli(capsys, "kubelet-config", *inputs, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["featureGates"] == {"CustomCPUCFSQuotaPeriod": True, "MemoryQoS": True}
    assert (doc["cpuCFSQuota"], doc["cpuCFSQuotaPeriod"]) == (False, "50ms")
    assert doc["staticPodPath"] == "/etc/kubernetes/manifests"
    path = tmp_path / "k.yaml"
    path.write_text(yaml.safe_dump(doc))
    cfg = load_node_config({}, config=str(path))
    assert cfg.feature_gates == {"CustomCPUCFSQuotaPeriod": True, "MemoryQoS": True}
    assert (cfg.cpu_cfs_quota, cfg.cpu_cfs_quota_period) == (False, 50000)
    assert cfg.static_pod_path == "/etc/kubernetes/manifests"
    assert cfg.qos_reserved == {"memory": 50}


def test_show_lists_each_pods_class_cgroup_and_values(capsys):
    # The same values as setup writes (ResourceConfigForPod), shown without touching cgroups.
    cap = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=10Gi"]
    code, out, _ = run_cli(
        capsys, "show", *cap, "--cgroup-driver", "systemd", "--pods", str(SHAPES), "-o", "json"
    )
    assert code == 0
    pods = {p["pod"]: p for p in json.loads(out)["pods"]}
    pods["shapes/sidecar"].pop("files", None)  # this host's hierarchy: tests/cli/test_cli_show.py
    assert pods["shapes/sidecar"] == {
        "pod": "shapes/sidecar",
        "qos": "Burstable",
        "cgroup": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        + UID(3).replace("-", "_")
        + ".slice",
        "cpuShares": "153",
        "cpuQuota": "30000/100000",
        "memory": str(150 * MI),
    }
    assert pods["shapes/besteffort"]["cpuQuota"] == "-"
    code, out, _ = run_cli(capsys, "show", *cap, "--pods", str(SHAPES))
    assert "  shapes/missing-limits   Burstable   /kubepods/burstable/pod" in out


# An in-place resize the kubelet has not allocated: it sizes the pod's cgroup from its
# allocation (pkg/kubelet/allocation/allocation_manager.go UpdatePodFromAllocation), which
# differs from spec while the pod has a true PodResizePending condition (k8s.io/api core/v1
# types.go: "the pod has been resized, but kubelet has not yet allocated the resources").
# PodResizeInProgress alone means allocated: the kubelet applies spec's values, as cgalloc.
GUARANTEED = {"cpu": "1", "memory": "1Gi"}


def _resizing(conditions) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "ns", "uid": UID(1)},
            "spec": {"containers": [{"name": "c", "resources": {"requests": GUARANTEED,
                                                                "limits": GUARANTEED}}]},
            "status": {"qosClass": "Guaranteed", "conditions": conditions}}  # fmt: skip


RESIZE_CONDITIONS = {
    "deferred": ([{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
                 "Deferred"),
    "infeasible": ([{"type": "Ready", "status": "True"},
                    {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
                   "Infeasible"),
    "no reason": ([{"type": "PodResizePending", "status": "True"}], "pending"),
    "in progress": ([{"type": "PodResizeInProgress", "status": "True"}], None),
    "not true": ([{"type": "PodResizePending", "status": "False", "reason": "Deferred"}], None),
    "none": ([], None),
}  # fmt: skip


@pytest.mark.parametrize(("conditions", "reason"), RESIZE_CONDITIONS.values(),
                         ids=RESIZE_CONDITIONS.keys())  # fmt: skip
def test_a_resize_the_kubelet_has_not_allocated_is_warned(
    tmp_path, monkeypatch, capsys, conditions, reason
):
    (tmp_path / "pod.json").write_text(json.dumps(_resizing(conditions)))
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    pods = ["--pods", str(tmp_path / "pod.json")]
    code, out, err = run_cli(capsys, "show", *NODE, *pods, "-o", "json")
    assert code == 0, err
    warned = [w for w in json.loads(out)["warnings"] if w.startswith("pod ns/web:")]
    want = [] if reason is None else [
        f"pod ns/web: its in-place resize is not allocated (PodResizePending, {reason}): the "
        "kubelet keeps the pod's cgroup at the resources it allocated before it, where cgalloc "
        "plans spec's; leave the pod out of --pods until it is."]  # fmt: skip
    assert warned == want
    code, out, err = run_cli(capsys, "setup", *NODE, *pods, *where(tree, tmp_path), "--dry-run")
    assert code == 0, err
    assert [x for x in err.splitlines() if "pod ns/web:" in x] == [
        f"cgalloc: warning: {w}" for w in want
    ]
    # spec's values are still what is planned
    assert f"  write kubepods/pod{UID(1)}/memory.max: (new) -> {1 << 30}" in out.splitlines()
    code, _, err = run_cli(capsys, "verify", *NODE, *pods, *where(tree, tmp_path))
    assert code == 1  # nothing set up yet
    assert [x for x in err.splitlines() if "pod ns/web:" in x] == [
        f"cgalloc: warning: {w}" for w in want
    ]


@pytest.mark.parametrize("conditions", ["Deferred", [["PodResizePending"]], {"type": "x"}])
def test_conditions_that_are_not_a_list_of_mappings_are_refused(tmp_path, capsys, conditions):
    (tmp_path / "pod.json").write_text(json.dumps(_resizing(conditions)))
    code, out, err = run_cli(capsys, "show", *NODE, "--pods", str(tmp_path / "pod.json"))
    assert (code, out) == (2, ""), err
    assert err == (
        f"cgalloc: --pods {tmp_path / 'pod.json'} pod ns/web: status.conditions is not a list "
        "of mappings, as a Pod's status holds.\n"
    )
