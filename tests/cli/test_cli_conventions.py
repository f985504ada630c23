"""What operators expect of a command line (issue 37): help that ends with examples and puts
cgalloc's own options apart from the kubelet's inputs, one error prefix with exit 2 for bad
usage, bare ``cgalloc`` as help with exit 0, an output format a command cannot print refused,
and ``stats --watch | head`` ending quietly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
import yaml
from clirun import run_cli
from statstree import make_v2

from cgalloc.cli import COMMANDS, app

GROUP = typer.main.get_command(app)
CAPACITY = ["--capacity", "cpu=4,memory=8Gi,pid=1000,ephemeral-storage=10Gi"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_help_ends_with_examples_that_name_the_command(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    tail = out.split("\nExamples:\n", 1)
    assert len(tail) == 2, out
    commands = [line.strip() for line in tail[1].splitlines() if line.strip()[:1].isalpha()]
    assert any(f"cgalloc {command}" in c for c in commands), commands
    assert all(c.startswith(("cgalloc ", "sudo cgalloc ")) for c in commands), commands


@pytest.mark.parametrize("command", ["show", "setup", "verify", "stats", "kubelet-config"])
def test_the_kubelets_inputs_are_a_section_after_cgallocs_own_options(capsys, command):
    code, out, _ = run_cli(capsys, command, "--help")
    assert code == 0
    sections = [line for line in out.splitlines() if line and not line[0].isspace()]
    own, node = sections.index("Options:"), sections.index("Node inputs (kubelet flags and files):")
    assert own < node
    body = out.split("Node inputs (kubelet flags and files):", 1)[1].split("\nExamples:")[0]
    assert "--kube-reserved " in body and "--state-dir" not in body and "--output" not in body


def test_bare_cgalloc_prints_help_and_exits_0():
    out = subprocess.run([sys.executable, "-m", "cgalloc"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Commands:" in out.stdout and out.stderr == ""


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["setup", "--bogus"], "No such option: --bogus"),
        (["nonesuch"], "No such command 'nonesuch'"),
        (["stats", "-o", "xml"], "'xml' is not one of"),
        (["kubelet-config", "-o", "table"], "'table' is not one of 'yaml', 'json', 'flags'"),
    ],
)
def test_a_usage_error_is_one_cgalloc_line_and_exit_2(capsys, argv, said):
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith("cgalloc: ") and said in err
    assert f"`cgalloc {argv[0]} --help` lists its options." in err or argv == ["nonesuch"]


def test_kubelet_config_json_and_yaml_are_the_same_document(capsys):
    args = [*CAPACITY, "--kube-reserved", "cpu=500m,memory=1Gi", "--kube-reserved-cgroup",
            "/kube.slice", "--enforce", "pods,kube-reserved"]  # fmt: skip
    code, as_json, _ = run_cli(capsys, "kubelet-config", *args, "-o", "json")
    assert code == 0
    code, as_yaml, _ = run_cli(capsys, "kubelet-config", *args, "-o", "yaml")
    assert code == 0
    doc = json.loads(as_json)
    assert yaml.safe_load(as_yaml) == doc
    assert doc["kind"] == "KubeletConfiguration" and doc["kubeReservedCgroup"] == "/kube.slice"
    code, flags, _ = run_cli(capsys, "kubelet-config", *args, "-o", "flags")
    assert "--kube-reserved-cgroup=/kube.slice" in flags.splitlines()


def test_stats_watch_into_head_ends_quietly(tmp_path):
    for rel in ("", "kubepods", "kubepods/burstable", "kubepods/besteffort"):
        make_v2(str(tmp_path / "cg"), rel, usage=4096)
    cmd = [sys.executable, "-m", "cgalloc", "stats", "--cgroupfs", str(tmp_path / "cg"),
           *CAPACITY, "--watch", "0.05", "-o", "json"]  # fmt: skip
    stats = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = stats.stdout.readline()
    stats.stdout.close()  # what `head -n 1` does after its line
    _, err = stats.communicate(timeout=60)
    assert json.loads(first)["node"]["nodeName"]
    assert (stats.returncode, err) == (0, b"")
