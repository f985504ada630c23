"""--kubelet-cgroups, --runtime-cgroups, --system-cgroups (and kubeletCgroups, ... in --config)
name cgroups as libcontainer cleans them: opencontainers/cgroups ``internal/path.Inner`` passes
the kubelet's Name through ``cleanPath`` (filepath.Clean). "/../x" raised a ValueError from the
core's path check before (found by a hostile-user probe)."""

from __future__ import annotations

import json

import pytest
from clirun import run_cli
from fakecgroup import fake_hierarchy

from cgalloc.model.naming import clean_cgroupfs_path

CAP = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi"]


@pytest.mark.parametrize(
    ("value", "clean"),
    [
        # filepath.Clean's own table (go/src/path/filepath/path_test.go cleantests), rooted
        ("/a//b", "/a/b"),
        ("/a/b/", "/a/b"),
        ("/a/./b", "/a/b"),
        ("/../a/b", "/a/b"),
        ("/a/b/../../..", "/"),
        ("//x/../../y", "/y"),
        ("/", "/"),
        ("/kubelet", "/kubelet"),
    ],
)
def test_clean_cgroupfs_path_is_filepath_clean_of_a_rooted_path(value, clean):
    assert clean_cgroupfs_path(value) == clean


@pytest.mark.parametrize("flag", ["--kubelet-cgroups", "--runtime-cgroups", "--system-cgroups"])
@pytest.mark.parametrize("value", ["/../a/b", "/a/./b", "/a//b/"])
def test_a_daemon_cgroup_with_dot_components_is_read_at_its_clean_path(
    tmp_path, capsys, flag, value
):
    root, _ = fake_hierarchy(tmp_path, "v2")
    (root / "a" / "b").mkdir(parents=True)
    extra = ["--cgroup-root", "/"] if flag == "--system-cgroups" else []
    code, out, err = run_cli(
        capsys, "stats", *CAP, *extra, "--cgroupfs", str(root), "--interval", "0",
        "-o", "json", flag, value,
    )  # fmt: skip
    assert code == 0, err
    assert "Traceback" not in err
    assert "not found at" not in err or "/a/b" not in err
    name = {"--kubelet-cgroups": "kubelet", "--runtime-cgroups": "runtime"}.get(flag, "misc")
    containers = {c["name"]: c for c in json.loads(out)["node"]["systemContainers"]}
    assert name in containers, containers


def test_a_config_files_daemon_cgroup_is_cleaned_too(tmp_path, capsys):
    root, _ = fake_hierarchy(tmp_path, "v2")
    (root / "a" / "b").mkdir(parents=True)
    config = tmp_path / "k.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "kubeletCgroups: /../a/b\n"
    )
    code, out, err = run_cli(
        capsys, "stats", *CAP, "--config", str(config), "--cgroupfs", str(root),
        "--interval", "0", "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    assert "kubelet" in {c["name"] for c in json.loads(out)["node"]["systemContainers"]}
