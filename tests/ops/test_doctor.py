"""``cgalloc doctor`` on a fake node: a directory standing for "/" (FakeHost.node_root) with the
kubelet's and the runtime's files, /proc and /etc, beside a fake cgroup tree. A healthy node
first (every check ok or skipped), then each fault introduced on it alone, with the verdict,
the evidence and the fix it must give."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clirun import run_cli
from exportertree import window
from fakecgroup import KERNEL, existing_system_slice, fake_tree, where

from cgalloc.model import preflight
from cgalloc.ops import history, recommend

CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: {driver}
"""
RESERVED = """\
systemReserved: {cpu: 500m, memory: 1Gi}
systemReservedCgroup: /system.slice
enforceNodeAllocatable: [pods, system-reserved]
"""
CONTAINERD = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = {value}
"""
SWAPS = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
KUBELET_UNIT = "[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/kubelet\n"


class Node:
    """A healthy node: cgroup v2, kernel 6.1, PSI, no swap, no runtime installed."""

    def __init__(self, base: Path, tree: Path, host, version: str) -> None:
        self.base, self.tree, self.host, self.version = base, tree, host, version
        self.root = Path(host.node_root)
        self.config_text = CONFIG.format(driver="cgroupfs")
        self.put("/proc/swaps", SWAPS)
        self.put("/proc/sys/kernel/osrelease", "6.1.0-56-amd64\n")
        self.put("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro quiet\n")
        for r in ("cpu", "memory", "io"):
            self.put(f"/proc/pressure/{r}", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")

    def put(self, path: str, text: str = "", mode: int = 0o644) -> Path:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, mode)
        return target

    def config(self, extra: str = "") -> str:
        return str(self.put("/var/lib/kubelet/config.yaml", self.config_text + extra))

    def doctor(self, capsys, *args: str, extra: str = "") -> tuple[int, dict, str]:
        argv = ["doctor", "--config", self.config(extra), "--cgroupfs", str(self.tree)]
        argv += ["--history", str(self.base / "history.jsonl"), *args, "-o", "json"]
        code, out, err = run_cli(capsys, *argv)
        assert code in (0, 1, 4), err
        return code, json.loads(out), err


@pytest.fixture(params=["v2", "v1"])
def node(request, tmp_path, monkeypatch):
    import clirun

    tree = fake_tree(tmp_path, monkeypatch, request.param)
    return Node(tmp_path, tree, clirun.HOST, request.param)


@pytest.fixture
def v2(tmp_path, monkeypatch):
    import clirun

    tree = fake_tree(tmp_path, monkeypatch, "v2")
    return Node(tmp_path, tree, clirun.HOST, "v2")


def by_name(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["checks"]}


def values(check: dict) -> dict[str, str]:
    return {e["source"]: e["value"] for e in check["evidence"]}


def test_a_healthy_v2_node_is_all_ok_or_skipped_and_exits_0(v2, capsys):
    code, doc, _ = v2.doctor(capsys, "--kubelet-version", "1.36")
    verdicts = {c["name"]: c["verdict"] for c in doc["checks"]}
    assert verdicts == {
        "cgroup-v1": "ok",
        "runtime-driver": "skip",  # containerd is not installed
        "systemd-driver": "skip",  # systemd is not PID 1 (the fake host)
        "reserved-cgroups": "skip",  # none enforced
        "boot-unit": "skip",
        "swap": "ok",
        "psi": "ok",
        "versions": "ok",
        "reservations": "skip",  # no history
    }
    assert code == 0
    assert doc["exitStatus"] == 0
    assert doc["summary"] == {"ok": 4, "warn": 0, "fail": 0, "skip": 5}


# ---- cgroup v1 -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minor", "extra", "verdict"),
    [
        ("1.35", "", "fail"),  # failCgroupV1 defaults to true from 1.35
        ("1.37", "", "fail"),
        ("1.36", "failCgroupV1: false\n", "warn"),  # opted out: starts, maintenance mode
    ],
)
def test_cgroup_v1_against_failcgroupv1(tmp_path, monkeypatch, capsys, minor, extra, verdict):
    import clirun

    tree = fake_tree(tmp_path, monkeypatch, "v1")
    node = Node(tmp_path, tree, clirun.HOST, "v1")
    code, doc, _ = node.doctor(capsys, "--kubelet-version", minor, extra=extra)
    check = by_name(doc)["cgroup-v1"]
    assert check["verdict"] == verdict
    assert values(check)["kubelet minor"] == f"{minor} (--kubelet-version)"
    assert "cgroup v1 at" in values(check)["/proc/self/mountinfo"]
    if verdict == "fail":
        assert values(check)["the kubelet's default"] == "failCgroupV1: true"
        assert "refuses to start" in check["finding"]
        assert (
            "failCgroupV1: false" in check["fix"] and "unified_cgroup_hierarchy=1" in check["fix"]
        )
        assert code == 4
    else:
        assert values(check)[node.config()] == "failCgroupV1: false"


def test_an_older_matched_kubelet_is_judged_by_its_own_minor(tmp_path, monkeypatch, capsys):
    """A 1.33 kubelet (planned as 1.35, the oldest cgalloc matches) starts on v1: its
    failCgroupV1 defaults to false."""
    import clirun

    if os.geteuid() != 0:  # `kubelet --version` runs only for a root-owned program
        pytest.skip("ownership by root needs root")
    tree = fake_tree(tmp_path, monkeypatch, "v1")
    node = Node(tmp_path, tree, clirun.HOST, "v1")
    node.config()
    unit = KUBELET_UNIT.replace("kubelet\n", "kubelet --config /var/lib/kubelet/config.yaml\n")
    node.put("/etc/systemd/system/kubelet.service", unit)
    node.put("/usr/bin/kubelet", "#!/bin/sh\n", 0o755)
    node.host.commands[("/usr/bin/kubelet", "--version")] = "Kubernetes v1.33.4\n"
    argv = ["doctor", "--match-kubelet", "--cgroupfs", str(tree), "-o", "json"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 1, err
    check = by_name(json.loads(out))["cgroup-v1"]
    assert values(check)["kubelet minor"] == "1.33 (`kubelet --version`: v1.33.4)"
    assert values(check)["the kubelet's default"] == "failCgroupV1: false"
    assert check["verdict"] == "warn"


# ---- cgroup drivers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kubelet", "systemd_cgroup", "verdict"),
    [("cgroupfs", "true", "fail"), ("systemd", "false", "fail"), ("systemd", "true", "ok")],
)
def test_runtime_driver(v2, capsys, kubelet, systemd_cgroup, verdict):
    v2.config_text = CONFIG.format(driver=kubelet)
    v2.put("/etc/containerd/config.toml", CONTAINERD.format(value=systemd_cgroup))
    code, doc, _ = v2.doctor(capsys)
    check = by_name(doc)["runtime-driver"]
    assert check["verdict"] == verdict
    shown = values(check)
    assert shown[
        f"SystemdCgroup = {systemd_cgroup} for runtime runc in /etc/containerd/config.toml"
    ]
    assert shown[f"cgroupDriver in {v2.config()}"] == f"cgroupDriver: {kubelet}"
    if verdict == "fail":
        assert "kubernetes#111776" in check["finding"]
        assert code == 4


def test_crio_default_is_systemd(v2, capsys):
    v2.put("/usr/bin/crio", "#!/bin/sh\n", 0o755)
    _, doc, _ = v2.doctor(
        capsys, extra="containerRuntimeEndpoint: unix:///var/run/crio/crio.sock\n"
    )
    check = by_name(doc)["runtime-driver"]
    assert check["verdict"] == "fail"
    assert values(check)["CRI-O's default cgroup_manager"] == "CRI-O: systemd"


def test_systemd_as_pid1_with_the_cgroupfs_driver_fails(v2, capsys):
    v2.host.systemd_manages_cgroups = lambda: True
    _, doc, _ = v2.doctor(capsys)
    check = by_name(doc)["systemd-driver"]
    assert check["verdict"] == "fail"
    assert values(check)["PID 1"] == "systemd"
    assert "cgroupDriver: systemd" in check["fix"]
    v2.config_text = CONFIG.format(driver="systemd")
    assert by_name(v2.doctor(capsys)[1])["systemd-driver"]["verdict"] == "ok"


# ---- the reserved cgroups the kubelet validates ---------------------------------------------


def test_missing_reserved_cgroup_fails_until_setup_makes_it(node, capsys):
    _, doc, _ = node.doctor(capsys, extra=RESERVED)
    check = by_name(doc)["reserved-cgroups"]
    assert check["verdict"] == "fail"
    missing = values(check)["system-reserved /system.slice"]
    if node.version == "v2":
        assert missing == f"missing: the cgroup itself ({node.tree}/system.slice)"
    else:  # every hierarchy the kubelet validates, hugetlb included as it is mounted
        for ctrl in ("cpu,cpuacct", "cpuset", "memory", "pids", "hugetlb", "systemd"):
            assert f"{node.tree}/{ctrl}/system.slice" in missing
    assert "cgalloc setup" in check["fix"]

    code, _, err = run_cli(
        capsys, "setup", "--config", node.config(RESERVED), *where(node.tree, node.base)
    )
    assert code == 0, err
    check = by_name(node.doctor(capsys, extra=RESERVED)[1])["reserved-cgroups"]
    assert check["verdict"] == "ok", check


def test_v2_system_slice_without_the_controllers_the_kubelet_validates(v2, capsys):
    """systemd's own system.slice, with only cpu, memory and pids enabled above it: the
    kubelet's Validate wants cpuset and hugetlb too ("has some missing controllers")."""
    existing_system_slice(v2.tree, "v2")
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["reserved-cgroups"]
    assert check["verdict"] == "fail"
    assert values(check)["system-reserved /system.slice"] == "missing: cpuset, hugetlb"
    assert "missing controllers" in check["finding"]


def test_v1_reserved_cgroup_missing_in_one_hierarchy(tmp_path, monkeypatch, capsys):
    import clirun

    tree = fake_tree(tmp_path, monkeypatch, "v1")
    node = Node(tmp_path, tree, clirun.HOST, "v1")
    existing_system_slice(tree, "v1")
    import shutil

    shutil.rmtree(tree / "hugetlb" / "system.slice")  # hugetlb mounted: the kubelet validates it
    check = by_name(node.doctor(capsys, extra=RESERVED)[1])["reserved-cgroups"]
    assert values(check)["system-reserved /system.slice"] == (
        f"missing: {tree}/hugetlb/system.slice"
    )
    assert check["verdict"] == "fail"


# ---- the boot unit -------------------------------------------------------------------------


def install_unit(node: Node, capsys, *daemons: str) -> None:
    node.put("/etc/systemd/system/kubelet.service", KUBELET_UNIT)
    args = ["install-unit", "--root", str(node.root)]
    args += ["--daemons", ",".join(daemons)] if daemons else []
    code, _, err = run_cli(capsys, *args, "--", "--config", node.config(RESERVED))
    assert code == 0, err


def test_boot_unit_missing_while_reserved_cgroups_are_enforced_warns(v2, capsys):
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["boot-unit"]
    assert check["verdict"] == "warn"
    assert "install-unit" in check["fix"]


def test_boot_unit_installed_enabled_and_ordered_is_ok(v2, capsys):
    install_unit(v2, capsys)
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["boot-unit"]
    assert check["verdict"] == "ok", check
    shown = values(check)
    assert shown["unit files"] == "cgalloc-setup.service: /etc/systemd/system/cgalloc-setup.service"
    assert "kubelet.service" in shown["cgalloc-setup.service Before="].split()
    assert shown["cgalloc-setup.service enabled"] == "yes"


def test_boot_unit_not_enabled_fails(v2, capsys):
    install_unit(v2, capsys)
    (v2.root / "etc/systemd/system/multi-user.target.wants/cgalloc-setup.service").unlink()
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["boot-unit"]
    assert check["verdict"] == "fail"
    assert "not enabled" in check["finding"]
    assert "systemctl enable" in check["fix"]


def test_boot_unit_not_ordered_before_the_kubelet_fails(v2, capsys):
    install_unit(v2, capsys)
    unit = v2.root / "etc/systemd/system/cgalloc-setup.service"
    unit.write_text(unit.read_text().replace("Before=kubelet.service ", "Before="))
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["boot-unit"]
    assert check["verdict"] == "fail"
    assert "not ordered before kubelet.service" in check["finding"]
    # After= in the kubelet's own drop-in orders them as well (what install-unit --daemons
    # writes)
    v2.put(
        "/etc/systemd/system/kubelet.service.d/50-cgalloc.conf",
        "[Unit]\nWants=cgalloc-setup.service\nAfter=cgalloc-setup.service\n",
    )
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["boot-unit"]
    assert check["verdict"] == "ok", check
    assert "cgalloc-setup.service" in values(check)["kubelet.service After="].split()


def test_boot_unit_whose_last_run_failed_as_systemctl_reports_it(v2, capsys):
    from cgalloc.ops.doctor import UNIT_PROPERTIES

    def show(unit: str, **props: str) -> None:
        argv = ["systemctl", "show", unit]
        for prop in UNIT_PROPERTIES:
            argv += ["-p", prop]
        v2.host.commands[tuple(argv)] = "".join(f"{k}={v}\n" for k, v in props.items())

    show(
        "cgalloc-setup.service",
        LoadState="loaded",
        UnitFileState="enabled",
        FragmentPath="/etc/systemd/system/cgalloc-setup.service",
        Before="kubelet.service containerd.service shutdown.target",
        ActiveState="failed",
    )
    show("kubelet.service", LoadState="loaded", After="cgalloc-setup.service network.target")
    show("containerd.service", LoadState="not-found")
    check = by_name(v2.doctor(capsys, extra=RESERVED)[1])["boot-unit"]
    assert check["verdict"] == "fail"
    assert check["finding"].endswith("its last run failed.")
    assert values(check)["cgalloc-setup.service ActiveState"] == "failed"
    assert "journalctl -u cgalloc-setup.service" in check["fix"]


# ---- swap, PSI, versions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "verdict", "shown"),
    [
        ("", "fail", ("the kubelet's default", "failSwapOn: true")),
        (
            "failSwapOn: false\n",
            "warn",
            ("the kubelet's default", "memorySwap.swapBehavior: NoSwap"),
        ),
        ("failSwapOn: false\nmemorySwap: {swapBehavior: LimitedSwap}\n", "ok", None),
    ],
)
def test_swap_on(node, capsys, extra, verdict, shown):
    node.put("/proc/swaps", SWAPS + "/dev/vda2\tpartition\t2097148\t0\t-2\n")
    check = by_name(node.doctor(capsys, extra=extra)[1])["swap"]
    if verdict == "ok" and node.version == "v1":
        verdict = "warn"  # LimitedSwap is cgroup v2 only
    assert check["verdict"] == verdict
    assert values(check)["/proc/swaps"] == "/dev/vda2 (partition, 2097148 KiB)"
    if shown:
        assert values(check)[shown[0]] == shown[1]


def test_psi_unavailable_warns(v2, capsys):
    for r in ("cpu", "memory", "io"):
        (v2.root / f"proc/pressure/{r}").unlink()
    v2.put("/proc/cmdline", "root=/dev/vda1 psi=0\n")
    code, doc, _ = v2.doctor(capsys)
    check = by_name(doc)["psi"]
    assert check["verdict"] == "warn"
    assert values(check)["/proc/pressure/memory"] == "absent"
    assert values(check)["/proc/cmdline"] == "psi=0"
    assert code == 1


def test_versions_kernel_too_old_for_cgroup_v2_and_memory_qos(v2, capsys):
    v2.put("/proc/sys/kernel/osrelease", "5.4.0-150-generic\n")
    check = by_name(v2.doctor(capsys, "--kubelet-version", "1.37")[1])["versions"]
    assert check["verdict"] == "warn"
    needs = [e["value"] for e in check["evidence"] if e["source"] == "needs"]
    assert needs[0].startswith("cgroup v2: kernel 5.8, have 5.4 [kubernetes.io/docs/")
    assert needs[1].startswith("MemoryQoS (memory.high, memory.min on cgroup v2): kernel 5.9")
    # 1.36: MemoryQoS is off by default, so only cgroup v2's requirement applies
    check = by_name(v2.doctor(capsys, "--kubelet-version", "1.36")[1])["versions"]
    assert len([e for e in check["evidence"] if e["source"] == "needs"]) == 1


def test_versions_systemd_too_old_for_the_systemd_driver_with_cpusets(v2, capsys):
    v2.host.systemd_manages_cgroups = lambda: True
    v2.host.commands[("systemctl", "--version")] = "systemd 239 (239-74.el8)\n+PAM\n"
    v2.config_text = CONFIG.format(driver="systemd")
    check = by_name(v2.doctor(capsys)[1])["versions"]
    assert check["verdict"] == "warn"
    assert values(check)["`systemctl --version`"] == "systemd 239 (239-74.el8)"
    assert any("systemd 244, have 239" in e["value"] for e in check["evidence"])


# ---- reservations against a recorded window -------------------------------------------------


def record(node: Node) -> None:
    samples = window()
    lines = [json.dumps(history.header({"kube-reserved": "/kube.slice"}, 10.0, "node"))]
    lines += [history.sample_line(s) for s in samples]
    (node.base / "history.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("reserved", "verdict", "says"),
    [
        ('cpu: "4", memory: 8Gi', "warn", "above what `cgalloc recommend` sizes"),
        ("cpu: 10m, memory: 10Mi", "warn", "hold less than the daemons used"),
    ],
)
def test_reservations_against_the_recorded_window(v2, capsys, reserved, verdict, says):
    record(v2)
    check = by_name(v2.doctor(capsys, extra=f"systemReserved: {{{reserved}}}\n")[1])["reservations"]
    assert check["verdict"] == verdict
    assert says in check["finding"]
    assert values(check)[str(v2.base / "history.jsonl")].startswith("181 samples over 30m0s")


def test_reservations_at_the_recommendation_are_ok(v2, capsys):
    from cgalloc.inputs.config import load_node_config

    record(v2)
    rec = recommend.recommend(window(), load_node_config({}))
    total = recommend.total(rec.kube, rec.system)
    extra = f"systemReserved: {{cpu: {total['cpu']}, memory: {total['memory']}}}\n"
    check = by_name(v2.doctor(capsys, extra=extra)[1])["reservations"]
    assert check["verdict"] == "ok", check


def test_a_history_that_is_no_history_is_bad_input(v2, capsys):
    (v2.base / "history.jsonl").write_text("not json\n")
    code, out, err = run_cli(
        capsys,
        "doctor",
        "--config",
        v2.config(),
        "--cgroupfs",
        str(v2.tree),
        "--history",
        str(v2.base / "history.jsonl"),
    )
    assert code == 2
    assert "is not a cgalloc history file" in err
    assert out == ""


# ---- the rules alone -----------------------------------------------------------------------


def test_exit_status_is_the_worst_verdict():
    c = preflight.Check
    assert preflight.exit_status([c("a", "ok", ""), c("b", "skip", "")]) == 0
    assert preflight.exit_status([c("a", "ok", ""), c("b", "warn", "")]) == 1
    assert preflight.exit_status([c("a", "warn", ""), c("b", "fail", "")]) == 4


def test_doctor_writes_nothing(v2, capsys):
    from fakecgroup import snapshot

    v2.config(RESERVED)
    before = snapshot(v2.base)
    v2.doctor(capsys, extra=RESERVED)
    assert snapshot(v2.base) == before
    assert KERNEL is not None
