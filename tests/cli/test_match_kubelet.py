"""--match-kubelet end to end on a fake node: a directory standing for "/" (FakeHost.node_root)
holding the kubelet's unit, drop-ins, environment files, config and /proc, beside a fake cgroup
tree; and the cgroup-driver check (setup refuses, show and verify warn), and the warning for a
kubelet config no input names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import clirun
import pytest
from clirun import run_cli
from fakecgroup import fake_tree, snapshot, where

from cgalloc.ops.bootunit import DEFAULT_SETUP_ARGS

CAPACITY = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="ownership by root needs root")

PACKAGE_UNIT = """\
[Unit]
Description=kubelet: The Kubernetes Node Agent

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
"""
# kubeadm's drop-in (kubernetes build/debs/10-kubeadm.conf; the rpm has /etc/sysconfig/kubelet)
KUBEADM_DROPIN = """\
# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS \
$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
KUBEADM_FLAGS = (
    'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock'
    ' --pod-infra-container-image=registry.k8s.io/pause:3.10"\n'
)
EXTRA_ARGS = "KUBELET_EXTRA_ARGS=--kube-reserved=cpu=500m,memory=1Gi --max-pods 60\n"
CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
systemReserved: {cpu: 500m, memory: 1Gi, pid: "100"}
systemReservedCgroup: /system.slice
enforceNodeAllocatable: [pods, system-reserved]
"""
# the same inputs given by hand
BY_HAND = ["--kube-reserved", "cpu=500m,memory=1Gi", "--max-pods", "60"]
CONTAINERD_SYSTEMD = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
"""


class Node:
    """The fake node: ``root`` stands for "/", ``tree`` is its cgroup tree."""

    def __init__(self, base: Path, tree: Path) -> None:
        self.base, self.tree, self.host = base, tree, clirun.HOST
        self.root = Path(self.host.node_root)
        self.root.mkdir(mode=0o755)

    def put(self, path: str, text: str = "", mode: int = 0o644) -> Path:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, mode)
        return target

    def path(self, path: str) -> str:
        return str(self.root / path.lstrip("/"))

    def kubelet_program(self, answer: str = "Kubernetes v1.36.2\n") -> None:
        self.put("/usr/bin/kubelet", "#!/bin/sh\n", 0o755)
        self.host.commands[("/usr/bin/kubelet", "--version")] = answer

    def kubeadm(self) -> None:
        """A node kubeadm joined, as the kubeadm package and `kubeadm join` leave it."""
        self.put("/usr/lib/systemd/system/kubelet.service", PACKAGE_UNIT)
        self.put("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", KUBEADM_DROPIN)
        self.put("/var/lib/kubelet/kubeadm-flags.env", KUBEADM_FLAGS)
        self.put("/etc/default/kubelet", EXTRA_ARGS)
        self.put("/var/lib/kubelet/config.yaml", CONFIG)
        self.kubelet_program()


@pytest.fixture
def node(tmp_path, monkeypatch):
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    return Node(tmp_path, tree)


def plan(capsys, *args: str) -> tuple[list, str]:
    code, out, err = run_cli(capsys, "setup", "--dry-run", *args, "-o", "json")
    assert code == 0, err
    return json.loads(out)["plan"], err


@ROOT_ONLY
def test_dry_run_matching_the_kubeadm_kubelet_plans_what_its_inputs_by_hand_plan(node, capsys):
    node.kubeadm()
    on = ["--cgroupfs", str(node.tree), *CAPACITY]
    matched, err = plan(capsys, "--match-kubelet", *on)
    by_hand, _ = plan(
        capsys, "--config", node.path("/var/lib/kubelet/config.yaml"), *BY_HAND,
        "--kubelet-version", "1.36", *on,
    )  # fmt: skip
    assert matched == by_hand
    # not the kubelet's defaults, nor cgalloc's default minor (MemoryQoS differs from 1.37)
    assert matched != plan(capsys, *on)[0]
    assert matched != plan(capsys, "--config", node.path("/var/lib/kubelet/config.yaml"),
                           *BY_HAND, *on)[0]  # fmt: skip
    lines = err.splitlines()
    assert lines[:3] == [
        "cgalloc: --match-kubelet read kubelet.service (search path):"
        " /usr/lib/systemd/system/kubelet.service,"
        " /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf; environment files"
        " /var/lib/kubelet/kubeadm-flags.env (read); /etc/default/kubelet (read).",
        "cgalloc: --match-kubelet took --config=/var/lib/kubelet/config.yaml"
        " --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock"
        " --kube-reserved=cpu=500m,memory=1Gi --max-pods=60; not modelled, ignored:"
        " --bootstrap-kubeconfig, --kubeconfig, --pod-infra-container-image.",
        "cgalloc: --match-kubelet: kubelet v1.36.2 (`/usr/bin/kubelet --version`): matching 1.36.",
    ]


def test_the_same_plan_without_the_version_read(node, capsys):
    """The rpm layout (/etc/sysconfig/kubelet); --kubelet-version given: no program is run."""
    node.kubeadm()
    node.put(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        KUBEADM_DROPIN.replace("/etc/default/kubelet", "/etc/sysconfig/kubelet"),
    )
    node.put("/etc/sysconfig/kubelet", EXTRA_ARGS)
    os.unlink(node.path("/etc/default/kubelet"))
    node.host.commands.clear()
    on = ["--cgroupfs", str(node.tree), *CAPACITY, "--kubelet-version", "1.36"]
    matched, err = plan(capsys, "--match-kubelet", *on)
    config = node.path("/var/lib/kubelet/config.yaml")
    assert matched == plan(capsys, "--config", config, *BY_HAND, *on)[0]
    assert "version" not in err.replace("--kubelet-version", "")
    assert "given here, so the kubelet's are not used: --kubelet-version" in err


def test_flags_given_here_win_over_the_kubelets(node, capsys):
    node.kubeadm()
    on = ["--cgroupfs", str(node.tree), *CAPACITY, "--kubelet-version", "1.36"]
    matched, err = plan(capsys, "--match-kubelet", "--kube-reserved", "cpu=1", *on)
    config = node.path("/var/lib/kubelet/config.yaml")
    by_hand = plan(capsys, "--config", config, "--kube-reserved", "cpu=1", "--max-pods", "60", *on)
    assert matched == by_hand[0]
    assert (
        "cgalloc: --match-kubelet: given here, so the kubelet's are not used: --kube-reserved,"
        " --kubelet-version.\n"
    ) in err


def test_json_says_what_was_read(node, capsys):
    node.kubeadm()
    os.unlink(node.path("/etc/default/kubelet"))  # optional: '-' in front
    code, out, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kubeletVersion"] == ("1.36" if os.geteuid() == 0 else "1.37")
    assert doc["capacity"]["pods"] == "110"  # its --max-pods was in /etc/default/kubelet
    read = doc["kubeletInputs"]
    assert read["source"] == "kubelet.service"
    assert read["reportedBy"] == "search path"
    assert read["environmentFiles"] == [
        {"path": "/var/lib/kubelet/kubeadm-flags.env", "optional": True, "read": True},
        {"path": "/etc/default/kubelet", "optional": True, "read": False},
    ]
    assert read["command"][:3] == [
        "/usr/bin/kubelet",
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
        "--kubeconfig=/etc/kubernetes/kubelet.conf",
    ]
    assert read["config"] == "/var/lib/kubelet/config.yaml"
    assert read["flags"] == {}
    assert read["givenHere"] == []
    assert "/etc/default/kubelet (absent, optional)" in err


# EKS AL2023 (awslabs/amazon-eks-ami templates/al2023/.../kubelet.service, nodeadm's
# internal/kubelet: NODEADM_KUBELET_ARGS in /etc/eks/kubelet/environment, config.json and the
# drop-in directory config.json.d)
EKS_UNIT = """\
[Unit]
Description=Kubernetes Kubelet
[Service]
Slice=runtime.slice
EnvironmentFile=/etc/eks/kubelet/environment
ExecStartPre=/sbin/iptables -P FORWARD ACCEPT -w 5
ExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS
"""
EKS_ENV = (
    "NODEADM_KUBELET_ARGS=--node-ip=10.0.0.7 --cloud-provider=external"
    " --config=/etc/kubernetes/kubelet/config.json"
    " --config-dir=/etc/kubernetes/kubelet/config.json.d\n"
)
EKS_CONFIG = json.dumps(
    {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "cgroupRoot": "/",
        "kubeReserved": {"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "442Mi"},
        "kubeReservedCgroup": "/runtime",
        "systemReservedCgroup": "/system",
        "maxPods": 17,
    }
)
EKS_DROPIN = json.dumps(
    {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "kubeReserved": {"memory": "1Gi"},
    }
)


def test_eks_nodeadm_layout(node, capsys):
    node.put("/etc/systemd/system/kubelet.service", EKS_UNIT)
    args = ["show", "--match-kubelet", *CAPACITY, "--kubelet-version", "1.37", "-o", "json"]
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert err == (
        "cgalloc: --match-kubelet: kubelet.service's EnvironmentFile=/etc/eks/kubelet/environment"
        " does not exist, so systemd would not start the kubelet; create it or mark it optional"
        " with '-'.\n"
    )
    node.put("/etc/eks/kubelet/environment", EKS_ENV)
    node.put("/etc/kubernetes/kubelet/config.json", EKS_CONFIG)
    node.put("/etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf", EKS_DROPIN)
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cgroupDriver"] == "systemd"
    assert doc["capacity"]["pods"] == "17"
    # the drop-in's memory over the main file's, key by key
    assert {t["source"]: t["quantity"] for t in doc["breakdown"] if t["resource"] == "memory"}[
        "kube-reserved"
    ] == "1Gi"
    assert doc["kubeletInputs"]["configDir"] == "/etc/kubernetes/kubelet/config.json.d"
    assert doc["kubeletInputs"]["ignoredFlags"] == ["node-ip", "cloud-provider"]


@ROOT_ONLY
def test_a_running_kubelet_without_a_unit(node, capsys):
    """RKE2 starts the kubelet as a process of its own: its command line is read."""
    config = node.put("/var/lib/rancher/rke2/agent/etc/kubelet.yaml", CONFIG)
    pid = node.root / "proc/4242"
    argv = ["/var/lib/rancher/rke2/data/v1/bin/kubelet", "--config=agent/etc/kubelet.yaml",
            "--kube-reserved=cpu=500m,memory=1Gi", "--max-pods=60"]  # fmt: skip
    node.put("/proc/4242/comm", "kubelet\n")
    node.put("/proc/4242/cmdline", "\0".join(argv) + "\0")
    os.symlink("/var/lib/rancher/rke2", pid / "cwd")  # the relative --config starts here
    on = ["--cgroupfs", str(node.tree), *CAPACITY, "--kubelet-version", "1.36"]
    matched, err = plan(capsys, "--match-kubelet", *on)
    assert matched == plan(capsys, "--config", str(config), *BY_HAND, *on)[0]
    assert "--match-kubelet read the running kubelet, pid 4242 (/proc/4242/cmdline)." in err
    # a second one: which is the node's?
    node.put("/proc/4243/comm", "kubelet\n")
    node.put("/proc/4243/cmdline", "kubelet\0")
    code, _, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY)
    assert code == 2
    assert "2 kubelet processes run (pids 4242, 4243)" in err


def test_no_kubelet_to_match(node, capsys):
    code, out, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY)
    assert (code, out) == (2, "")
    assert err == (
        "cgalloc: --match-kubelet: this node has no kubelet.service unit and no running kubelet;"
        " give the kubelet's inputs instead (--config FILE, --config-dir DIR, kubelet flags).\n"
    )
    node.put("/etc/systemd/system/k3s.service", "[Service]\nExecStart=/usr/local/bin/k3s server\n")
    _, _, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY)
    assert "(k3s.service runs the kubelet inside its own process" in err
    node.put("/etc/systemd/system/kubelet.service", "[Service]\nExecStart=/bin/sleep infinity\n")
    _, _, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY)
    assert "kubelet.service runs /bin/sleep, not the kubelet and no kubelet process runs" in err


def test_systemd_says_which_files_it_loaded(node, capsys):
    node.kubeadm()
    # what systemctl reports wins over the search path: here an /etc copy of the unit
    node.put("/etc/kubelet-copy.service", PACKAGE_UNIT.replace(
        "/usr/bin/kubelet", "/usr/bin/kubelet --max-pods=33"))  # fmt: skip
    argv = ("systemctl", "show", "kubelet.service", "-p", "LoadState", "-p", "FragmentPath",
            "-p", "DropInPaths", "-p", "NeedDaemonReload", "-p", "WorkingDirectory")  # fmt: skip
    node.host.commands[argv] = (
        "LoadState=loaded\nFragmentPath=/etc/kubelet-copy.service\nDropInPaths=\n"
        "NeedDaemonReload=yes\nWorkingDirectory=\n"
    )
    code, out, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["capacity"]["pods"] == "33"
    assert doc["kubeletInputs"]["reportedBy"] == "systemctl"
    assert "changed on disk since systemd loaded it (NeedDaemonReload)" in err
    node.host.commands[argv] = "LoadState=masked\n"
    code, _, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY)
    assert code == 2
    assert "no kubelet.service unit and no running kubelet" in err


@ROOT_ONLY
@pytest.mark.parametrize(
    ("answer", "matched", "warning"),
    [
        ("Kubernetes v1.19.4\n", "1.20", "the node's kubelet is v1.19.4, older than the minors"
         " cgalloc matches (1.20 to 1.37): planning as 1.20, the nearest"),
        ("Kubernetes v1.40.0-alpha.1\n", "1.37", "the node's kubelet is v1.40.0-alpha.1, newer"),
        ("garbage\n", "1.37", "could not read the kubelet's version (no version in its answer):"
         " matching 1.37, cgalloc's default; give --kubelet-version to choose."),
    ],
)  # fmt: skip
def test_a_kubelet_minor_cgalloc_does_not_know(node, capsys, answer, matched, warning):
    node.kubeadm()
    node.kubelet_program(answer)
    code, out, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["kubeletVersion"] == matched
    assert f"cgalloc: warning: {warning}" in err


@ROOT_ONLY
def test_a_program_named_without_a_path_is_looked_up_as_systemd_does(node, capsys):
    node.kubeadm()
    node.put("/etc/systemd/system/kubelet.service", PACKAGE_UNIT.replace("/usr/bin/", ""))
    node.put("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
             KUBEADM_DROPIN.replace("/usr/bin/", ""))  # fmt: skip
    code, out, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["kubeletVersion"] == "1.36"


def test_a_program_others_may_change_is_not_run(node, capsys):
    node.kubeadm()
    os.chmod(node.path("/usr/bin"), 0o777)
    _, _, err = run_cli(capsys, "show", "--match-kubelet", *CAPACITY)
    assert "could not read the kubelet's version (/usr/bin is writable by others than root)" in err


def test_driver_mismatch_refused_by_setup_warned_by_show_and_verify(node, capsys):
    node.put("/var/lib/kubelet/config.yaml", CONFIG.replace("systemd", "cgroupfs", 1))
    node.put("/etc/containerd/config.toml", CONTAINERD_SYSTEMD)
    config = ["--config", node.path("/var/lib/kubelet/config.yaml"), *CAPACITY]
    before = snapshot(node.tree)
    code, out, err = run_cli(capsys, "setup", *config, *where(node.tree, node.base))
    assert (code, out) == (2, "")
    assert err == (
        f"cgalloc: the kubelet's cgroup driver is cgroupfs (cgroupDriver in {config[1]}) but"
        " containerd's is systemd (SystemdCgroup = true for runtime runc in"
        " /etc/containerd/config.toml): a runtime that reports its driver over CRI (containerd"
        " 2.0+, CRI-O 1.28+) makes the kubelet use systemd and ignore cgroupDriver, so this tree"
        " would not be the kubelet's, and with an older one every pod is restarted"
        " (kubernetes#111776); make the two agree, or give --allow-driver-mismatch to go on.\n"
    )
    assert snapshot(node.tree) == before
    assert not (node.base / "state").exists()
    code, _, err = run_cli(capsys, "setup", "--dry-run", *config, "--cgroupfs", str(node.tree))
    assert code == 2
    code, out, err = run_cli(
        capsys, "setup", "--allow-driver-mismatch", *config, *where(node.tree, node.base)
    )
    assert code == 0, err
    assert err.startswith("cgalloc: warning: the kubelet's cgroup driver is cgroupfs")
    code, out, err = run_cli(capsys, "verify", *config, "--cgroupfs", str(node.tree))
    assert code == 0
    assert "cgalloc: warning: the kubelet's cgroup driver is cgroupfs" in err
    code, out, err = run_cli(capsys, "show", *config, "-o", "json")
    assert code == 0
    assert any("containerd's is systemd" in w for w in json.loads(out)["warnings"])
    # the runtime's driver named by the kubelet's: no warning when they agree
    node.put("/var/lib/kubelet/config.yaml", CONFIG)
    code, _, err = run_cli(capsys, "show", *config)
    assert code == 0
    assert "driver" not in err


def test_cgroupfs_under_systemd_is_refused(node, capsys, monkeypatch):
    monkeypatch.setattr(type(node.host), "systemd_manages_cgroups", lambda self: True)
    args = ["setup", "--dry-run", *CAPACITY, "--cgroupfs", str(node.tree), "--systemd", "no"]
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert err.startswith(
        "cgalloc: the kubelet's cgroup driver is cgroupfs (the kubelet's default) but systemd is"
        " PID 1 here"
    )
    code, _, err = run_cli(capsys, *args, "--cgroup-driver", "cgroupfs")
    assert "(--cgroup-driver given here)" in err
    assert run_cli(capsys, *args, "--cgroup-driver", "systemd")[0] == 0
    assert run_cli(capsys, *args, "--allow-driver-mismatch")[0] == 0


def test_crio_default_driver_is_systemd(node, capsys):
    node.put("/usr/bin/crio", "", 0o755)  # installed, no config: CRI-O's defaults
    node.put("/var/lib/kubelet/config.yaml",
             CONFIG.replace("cgroupDriver: systemd", "containerRuntimeEndpoint:"
                            " unix:///var/run/crio/crio.sock"))  # fmt: skip
    code, _, err = run_cli(capsys, "show", "--config", node.path("/var/lib/kubelet/config.yaml"))
    assert code == 0
    assert "but CRI-O's is systemd (CRI-O's default cgroup_manager)" in err


def test_a_kubelet_config_no_input_names_is_pointed_out(node, capsys):
    code, _, err = run_cli(capsys, "show", *CAPACITY)
    assert (code, err) == (0, "")
    node.put("/var/lib/kubelet/config.yaml", CONFIG)
    for command in (["show"], ["verify", "--cgroupfs", str(node.tree)]):
        _, _, err = run_cli(capsys, *command, *CAPACITY)
        assert (
            "cgalloc: warning: /var/lib/kubelet/config.yaml exists but no kubelet input was"
            " given, so this is the kubelet's built-in defaults (cgroupfs driver, nothing"
            " reserved), not this node's kubelet: give --match-kubelet to take the node's kubelet"
            " inputs, or --config /var/lib/kubelet/config.yaml.\n"
        ) in err
    _, _, err = run_cli(capsys, "setup", "--dry-run", *CAPACITY, "--cgroupfs", str(node.tree))
    assert "/var/lib/kubelet/config.yaml exists but no kubelet input" in err
    # any kubelet input given: no warning
    code, _, err = run_cli(capsys, "show", *CAPACITY, "--max-pods", "10")
    assert (code, err) == (0, "")


def test_help_and_the_boot_units_default():
    assert DEFAULT_SETUP_ARGS == ("--match-kubelet",)


@pytest.mark.parametrize("command", ["setup", "show", "verify", "stats", "kubelet-config"])
def test_every_node_command_takes_the_option(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "--match-kubelet" in flat
    assert "--allow-driver-mismatch" in flat
    if command == "setup":
        assert "cgalloc setup --dry-run --match-kubelet" in flat
        assert "Options given here win" in flat
