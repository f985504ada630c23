"""What the commands print for a terminal: a cgroup name may hold any byte but '/' and NUL (a
flag or a kubelet config gives it), and none may act on the terminal. Every line of stdout and
stderr is printable, an ESC, NEL, line separator or file separator in a name written as its
escape (cli.render.printable). Found by the CLI fuzzer: --cgroup-root '/\\x1d5' gave setup's
"missing" lines with the name raw, and str.splitlines cut them at \\x1d and \\x85 into
"cgalloc: <rest of the name>" lines; show's table and kubelet-config's flag comment carried
the ESC sequence as it was."""

from __future__ import annotations

import pytest
from clirun import keep_escapes, run_cli
from fakecgroup import fake_tree, where

NAME = "/a\x1b[31mb\x85c\u2028d\x1de"
ESCAPED = "/a\\x1b[31mb\\x85c\\u2028d\\x1de"
CAPACITY = ["--capacity", "cpu=4,memory=8Gi,pid=4096"]
RESERVED = ["--kube-reserved", "cpu=1", "--enforce", "pods,kube-reserved"]


@pytest.fixture(autouse=True)
def _escapes_reach_capsys(monkeypatch):
    keep_escapes(monkeypatch)


def _printed(capsys, *argv: str) -> tuple[int, list[str]]:
    code, out, err = run_cli(capsys, *argv)
    lines = out.split("\n") + err.split("\n")
    assert all(line.isprintable() for line in lines), [x for x in lines if not x.isprintable()]
    return code, lines


@pytest.mark.parametrize("output", ["table", "yaml"])
def test_show_and_kubelet_config_escape_a_name(capsys, output):
    # show's table names the cgroups (YAML escapes them its own way); kubelet-config's YAML
    # comment lists the flags as given
    argv = ["--cgroup-root", NAME, "--kube-reserved-cgroup", f"/kubepods{NAME}", *RESERVED]
    code, lines = _printed(capsys, "show", *CAPACITY, *argv, "-o", output)
    assert code == 0
    assert any(f"{ESCAPED}/kubepods" in line for line in lines) == (output == "table"), lines
    code, lines = _printed(capsys, "kubelet-config", *argv)
    assert code == 0
    assert any(f"--cgroup-root={ESCAPED}" in line for line in lines), lines


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_an_error_naming_a_cgroup_is_one_line_per_cgroup(tmp_path, monkeypatch, capsys, version):
    # a cgroup root that does not exist: one "missing" line per mount, each whole
    tree = fake_tree(tmp_path, monkeypatch, version)
    argv = ["setup", *CAPACITY, "--cgroup-root", NAME, *where(tree, tmp_path)]
    code, lines = _printed(capsys, *argv)
    assert code == 3
    missing = [line for line in lines if line.startswith("cgalloc:   missing ")]
    assert missing and all(line.endswith(ESCAPED) for line in missing), lines
    assert all(line.startswith("cgalloc: ") for line in lines if line), lines


def test_setup_prints_its_plan_and_progress_escaped(tmp_path, monkeypatch, capsys):
    # a reserved cgroup setup makes (--create-reserved): the plan on stdout, progress on stderr
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    argv = ["setup", *CAPACITY, *RESERVED, "--kube-reserved-cgroup", NAME, "--create-reserved"]
    code, lines = _printed(capsys, *argv, *where(tree, tmp_path))
    assert code == 0, lines
    assert sum(f"mkdir {ESCAPED[1:]}" in line for line in lines) == 2, lines  # plan, progress


def test_stats_table_escapes_a_pod_directory(tmp_path, monkeypatch, capsys):
    # stats names what it finds below kubepods, made by whoever could: ESC [2J clears a screen
    tree = fake_tree(tmp_path, monkeypatch, "v2")
    (tree / "kubepods" / "burstable" / "pod\x1b[2J\x85x").mkdir(parents=True)
    code, lines = _printed(capsys, "stats", "--cgroupfs", str(tree), "--interval", "0")
    assert code == 0, lines
    assert any("/kubepods/burstable/pod\\x1b[2J\\x85x " in line for line in lines), lines


def test_install_unit_shows_its_setup_arguments_escaped(tmp_path, capsys):
    # setup.conf holds the arguments as given (whitespace refused, ESC not)
    args = ["--root", str(tmp_path), "--dry-run", "--", "--cgroup-root", "/a\x1b[31mb"]
    code, lines = _printed(capsys, "install-unit", *args)
    assert code == 0, lines
    assert any(line.endswith("--cgroup-root /a\\x1b[31mb") for line in lines), lines
