"""Protect, don't cap (docs/protect.md) from the command line, on fake trees: each --reserved-*
option in the dry-run plan and show, undone by teardown, refused where cgroup v1 cannot, and off
by default (the kubelet's tree)."""

from __future__ import annotations

import json

import pytest
from clirun import run_cli
from fakecgroup import existing_system_slice, fake_tree, snapshot, where
from nodeargs import NODE

GI = 1 << 30
PROTECT = ["--reserved-protection", "protect"]
ALL = [*PROTECT, "--reserved-swap", "none", "--reserved-cpu-weight", "proportional"]
# NODE without system-reserved enforced: the kubelet leaves /system.slice alone
PODS_ONLY = [a if a != "pods,system-reserved" else "pods" for a in NODE]


@pytest.fixture
def v2(tmp_path, monkeypatch):
    return fake_tree(tmp_path, monkeypatch, "v2")


@pytest.fixture
def v1(tmp_path, monkeypatch):
    return fake_tree(tmp_path, monkeypatch, "v1")


def dry_run(capsys, tree, tmp_path, *args: str) -> tuple[int, list[str], str]:
    code, out, err = run_cli(capsys, "setup", "--dry-run", *args, *where(tree, tmp_path))
    return code, out.splitlines(), err


def test_default_is_the_kubelets_plan(v2, tmp_path, capsys):
    _, default, _ = dry_run(capsys, v2, tmp_path, *NODE)
    _, named, _ = dry_run(
        capsys, v2, tmp_path, *NODE, "--reserved-protection", "cap", "--reserved-swap", "allow",
        "--reserved-cpu-weight", "kubelet",
    )  # fmt: skip
    assert default == named
    assert "  write system.slice/memory.max: (new) -> 1073741824" in default
    assert not any("memory.swap.max" in line for line in default)


def test_dry_run_shows_each_option(v2, tmp_path, capsys):
    code, lines, err = dry_run(capsys, v2, tmp_path, *NODE, *ALL)
    assert code == 0, err
    # kubepods 3000m → 3072 shares → weight 118; × 500m ÷ 3000m → 20 (the kubelet's 512 → 20 too)
    for expected in (
        "  write system.slice/memory.min: (new) -> 1073741824",
        "  write system.slice/memory.max: (new) -> max",
        "  write system.slice/memory.swap.max: (new) -> 0",
        "  write system.slice/cpu.weight: (new) -> 20",
    ):
        assert expected in lines, lines
    # the kubelet enforces system-reserved in full: it writes the cap back at its start
    assert "writes /system.slice's memory.max back" in err


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--reserved-protection", "protect-low"], "memory.low: (new) -> 1073741824"),
        (["--reserved-protection", "both"], "memory.max: (new) -> 1073741824"),
        (["--reserved-swap", "none"], "memory.swap.max: (new) -> 0"),
    ],
)
def test_each_option_alone(v2, tmp_path, capsys, options, expected):
    code, lines, err = dry_run(capsys, v2, tmp_path, *NODE, *options)
    assert code == 0, err
    assert f"  write system.slice/{expected}" in lines


def test_setup_verify_teardown_restores_an_existing_reserved_cgroup(v2, tmp_path, capsys):
    existing_system_slice(v2, "v2", memory=str(2 * GI))
    before = snapshot(v2)
    code, out, err = run_cli(capsys, "setup", *PODS_ONLY, *ALL, *where(v2, tmp_path))
    assert code == 0, err
    slice_ = v2 / "system.slice"
    assert slice_.joinpath("memory.min").read_text() == f"{GI}\n"
    assert slice_.joinpath("memory.max").read_text() == "max\n"
    assert slice_.joinpath("memory.swap.max").read_text() == "0\n"
    code, out, _ = run_cli(capsys, "verify", *PODS_ONLY, *ALL, "--cgroupfs", str(v2))
    assert (code, out) == (0, "in sync: the tree matches\n")
    # verify without the options: the kubelet's tree, which protects nothing
    code, out, _ = run_cli(capsys, "verify", *PODS_ONLY, "--cgroupfs", str(v2))
    assert code == 0
    code, out, err = run_cli(capsys, "teardown", *where(v2, tmp_path))
    assert code == 0, err
    assert snapshot(v2) == before


def test_v1_refuses_memory_protection_and_writes_nothing(v1, tmp_path, capsys):
    before = snapshot(v1)
    code, _, err = dry_run(capsys, v1, tmp_path, *NODE, *PROTECT)
    assert code == 2
    assert "needs cgroup v2: cgroup v1 has no memory protection" in err
    assert snapshot(v1) == before


def test_v1_refuses_swap_without_a_cap(v1, tmp_path, capsys):
    code, _, err = dry_run(capsys, v1, tmp_path, *PODS_ONLY, "--reserved-swap", "none")
    assert code == 2
    assert "needs a memory cap on /system.slice" in err


def test_v1_swap_none_is_memsw_at_the_cap_and_teardown_undoes_it(v1, tmp_path, capsys):
    existing_system_slice(v1, "v1")
    before = snapshot(v1)
    args = [*NODE, "--reserved-swap", "none", "--reserved-cpu-weight", "proportional"]
    code, out, err = run_cli(capsys, "setup", *args, *where(v1, tmp_path))
    assert code == 0, err
    memory = v1 / "memory" / "system.slice"
    assert memory.joinpath("memory.limit_in_bytes").read_text() == f"{GI}\n"
    assert memory.joinpath("memory.memsw.limit_in_bytes").read_text() == f"{GI}\n"
    # kubepods 3072 shares × 500m ÷ 3000m
    assert (v1 / "cpu,cpuacct" / "system.slice" / "cpu.shares").read_text() == "512\n"
    code, out, err = run_cli(capsys, "teardown", *where(v1, tmp_path))
    assert code == 0, out + err
    assert snapshot(v1) == before


def test_unknown_mode_exits_2(v2, tmp_path, capsys):
    code, _, err = dry_run(capsys, v2, tmp_path, *NODE, "--reserved-protection", "soft")
    assert code == 2
    assert "--reserved-protection 'soft' is not one of cap, protect, protect-low, both" in err


def test_show_warns_about_cpu_weight_on_a_many_core_node(v2, capsys):
    args = [
        "--cgroupfs", str(v2),
        "--capacity", "cpu=64,memory=64Gi,pid=4096", "--system-reserved", "cpu=32,memory=1Gi",
        "--system-reserved-cgroup", "/system.slice", "-o", "json",
    ]  # fmt: skip
    code, out, _ = run_cli(capsys, "show", *args)
    assert code == 0
    (warning,) = [w for w in json.loads(out)["warnings"] if w.startswith("CPU weight")]
    assert "/kubepods weighs 1250 against 100" in warning
    assert "32 CPUs (50%) are reserved" in warning
    assert "--reserved-cpu-weight proportional" in warning


def test_help_shows_the_options_with_examples(capsys):
    code, out, _ = run_cli(capsys, "setup", "--help")
    assert code == 0
    for flag in ("--reserved-protection", "--reserved-swap", "--reserved-cpu-weight"):
        assert flag in out
    assert "--reserved-protection protect --dry-run" in out
