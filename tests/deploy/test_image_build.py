"""A node image build and first boot with deploy/cloud-init/user-data.yaml: its setup arguments
are setup's, `install-unit --root` on a directory standing for the image root writes the unit
systemd accepts (`systemd-analyze verify`), and the kubelet drop-in that `cgalloc kubelet-config`
prints from the same arguments loads back through `--config-dir` to the same tree.

The drop-in is `cgalloc kubelet-config ARGS > DIR/50-cgalloc.conf`: its YAML is already a whole
KubeletConfiguration document (apiVersion and kind, which the kubelet requires of each
drop-in), so a redirect is the file; no output format of its own is needed.

Booting such an image is tests/kernel/test_image_build_kernel.py's (the v2-systemd lane)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from clirun import run_cli
from fakecgroup import fake_tree

from cgalloc.ops.bootunit import config_args

ROOT = Path(__file__).resolve().parents[2]
USER_DATA = ROOT / "deploy/cloud-init/user-data.yaml"
CAPACITY = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]


def user_data() -> dict:
    text = USER_DATA.read_text()
    assert text.startswith("#cloud-config\n")  # cloud-init reads the file only with it
    return yaml.safe_load(text)


def setup_args() -> list[str]:
    files = {f["path"]: f for f in user_data()["write_files"]}
    args = config_args(files["/etc/cgalloc/setup.conf"]["content"])
    assert args is not None
    return args


def test_user_data_runs_cgalloc_commands_that_exist():
    from cgalloc.cli import COMMANDS

    commands = " ".join(c if isinstance(c, str) else shlex.join(c) for c in user_data()["runcmd"])
    used = re.findall(r"/opt/cgalloc/bin/cgalloc ([a-z-]+)", commands)
    assert used == ["kubelet-config", "install-unit", "doctor"]
    assert set(used) <= set(COMMANDS)
    extra = {f["path"]: f for f in user_data()["write_files"]}["/etc/default/kubelet"]
    assert extra["append"] is True
    assert "--config-dir=/etc/kubernetes/kubelet.conf.d" in extra["content"]


def test_the_setup_arguments_are_accepted_by_setup(tmp_path, monkeypatch, capsys):
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    code, out, err = run_cli(
        capsys, "setup", "--dry-run", *setup_args(), "--allow-driver-mismatch", *CAPACITY,
        "--cgroupfs", str(tree), "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    assert code == 0, err
    assert "changes planned" in out


def test_install_unit_into_an_image_root(tmp_path, capsys):
    image = tmp_path / "image"
    conf = image / "etc/cgalloc/setup.conf"
    conf.parent.mkdir(parents=True)
    files = {f["path"]: f for f in user_data()["write_files"]}
    conf.write_text(files["/etc/cgalloc/setup.conf"]["content"])
    code, _, err = run_cli(capsys, "install-unit", "--root", str(image), "--daemons",
                             "kubelet,containerd")  # fmt: skip
    assert code == 0, err
    unit = image / "etc/systemd/system/cgalloc-setup.service"
    assert "Before=kubelet.service containerd.service crio.service" in unit.read_text()
    link = image / "etc/systemd/system/multi-user.target.wants/cgalloc-setup.service"
    assert link.readlink() == Path("/etc/systemd/system/cgalloc-setup.service")
    for daemon in ("kubelet", "containerd"):
        dropin = image / f"etc/systemd/system/{daemon}.service.d/50-cgalloc.conf"
        assert "Slice=kube.slice" in dropin.read_text()
    assert conf.read_text() == files["/etc/cgalloc/setup.conf"]["content"]  # kept as given
    again = run_cli(capsys, "install-unit", "--root", str(image), "--daemons",
                    "kubelet,containerd")  # fmt: skip
    assert again[1].strip() == "nothing to change"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    # the unit as written (its ExecStart is this interpreter, present here); --root would
    # look for sysinit.target and the interpreter inside the directory, which is no OS
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_kubelet_dropin_loads_back_to_the_same_tree(tmp_path, monkeypatch, capsys):
    """`kubelet-config ARGS` redirected into a --config-dir: the kubelet's inputs from that
    directory plan the tree that ARGS plan (cgalloc's --config-dir reader is the kubelet's
    merge, tests/inputs/test_config_dropin_walk.py)."""
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    args = setup_args()
    code, fragment, err = run_cli(capsys, "kubelet-config", *args)
    assert code == 0, err
    dropins = tmp_path / "kubelet.conf.d"
    dropins.mkdir()
    (dropins / "50-cgalloc.conf").write_text(fragment)
    where = ["--cgroupfs", str(tree), "--state-dir", str(tmp_path / "state"), *CAPACITY]

    def plan(*inputs: str) -> dict:
        code, out, err = run_cli(capsys, "setup", "--dry-run", *inputs, "--allow-driver-mismatch",
                                 *where, "-o", "json")  # fmt: skip
        assert code == 0, err
        return json.loads(out)["plan"]

    assert plan("--config-dir", str(dropins)) == plan(*args)
    code, shown, _ = run_cli(capsys, "show", "--config-dir", str(dropins), *CAPACITY, "-o", "json")
    doc = json.loads(shown)
    assert doc["cgroupDriver"] == "systemd"
    assert doc["kubeReserved"]["cgroup"] == "/kube.slice"
