"""The lazy command group: --help lists every command without importing any of them."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer.main
from clirun import run_cli

from cgalloc.cli import COMMANDS, app


def test_listing_is_the_start_of_each_commands_help():
    group = typer.main.get_command(app)
    for name, (_module, short) in COMMANDS.items():
        assert group.commands[name].help.startswith(short), name


def test_help_imports_no_command_module():
    code = (
        "import sys\nfrom cgalloc.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('cgalloc.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.strip().splitlines()[-1]
    assert "Commands:" in out.stdout
    for name in COMMANDS:
        assert name in out.stdout
    # the typer app and the converters it gives typer's options
    assert loaded == (
        "['cgalloc.cli', 'cgalloc.cli.group', 'cgalloc.cli.optspec', 'cgalloc.errors',"
        " 'cgalloc.host', 'cgalloc.host.machine']"
    )


def test_unknown_command_is_a_usage_error():
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "nope"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2
    assert "No such command 'nope'" in out.stderr


def test_show_runs_without_pydantic_or_decimal():
    """typer's default coercion imports pydantic; cgalloc's plain options do without it. The
    eviction thresholds (the defaults' 10%, 15%, 5%) parse without decimal and fractions."""
    code = (
        "import sys\nfrom cgalloc.cli import main\n"
        "try:\n    main(['show', '--capacity', 'cpu=4,memory=8Gi,pid=100,ephemeral-storage=1Gi',"
        " '-o', 'json', '--kube-reserved', 'cpu=100m'])\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted({'pydantic', 'decimal', 'fractions'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert '"allocatable"' in out.stdout.lower()
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_options_keep_their_types_and_errors():
    """Enum, float and list options parse as typer would, and bad values are usage errors."""
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "stats", "--interval", "soon"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "--interval" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "cgalloc", "show", "-o", "xml"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 2
    assert "xml" in out.stderr


@pytest.mark.parametrize(
    ("option", "text"),
    [("--interval", "1_0"), ("--interval", " 5"), ("--interval", "\u0661"),
     ("--depth", "1_0"), ("--depth", "+\u0662")],
)  # fmt: skip
def test_number_options_take_ascii_decimal_only(capsys, option, text):
    # Python's int() and float() take "1_0" as 10, " 5" and Arabic-Indic digits: --interval
    # 1_0 slept 10 seconds (the hostile-input review)
    code, out, err = run_cli(capsys, "stats", option, text, "--cgroupfs", "/nonexistent")
    assert (code, out) == (2, ""), err
    assert f"Invalid value for '{option}'" in err


# What each command must not import: modules of other commands, or of parts of cgalloc the
# command does not use (issue 11: whole-command time). A new top-level import that pulls one of
# these back onto the path fails here.
NODE = ["--capacity", "cpu=4,memory=8Gi,pid=100,ephemeral-storage=1Gi", "--kube-reserved",
        "cpu=100m,memory=1Gi"]  # fmt: skip
OTHER_COMMANDS = ["cgalloc.cli.setup", "cgalloc.cli.verify", "cgalloc.cli.teardown",
                  "cgalloc.cli.install_unit", "cgalloc.cli.completion"]  # fmt: skip
PLANNING = ["cgalloc.ops.plan", "cgalloc.ops.apply", "cgalloc.ops.state", "cgalloc.host.systemd",
            "cgalloc.host.dbus",
            "cgalloc.ops.bootunit", "cgalloc.inputs.pods", "cgalloc.model.podresources",
            "cgalloc.model.allocatable"]  # fmt: skip
NOT_IMPORTED = {
    "stats": [*OTHER_COMMANDS, *PLANNING, "cgalloc.cli.show",
              "cgalloc.cli.kubelet_config", "cgalloc.host.sampler_policy", "pydantic"],
    "kubelet-config": [*OTHER_COMMANDS, *PLANNING, "cgalloc.model.limits", "cgalloc.ops.stats",
                       "cgalloc.host.core", "cgalloc.host.cgroupfs", "cgalloc.cli.stats",
                       "pydantic"],
    "show": [*OTHER_COMMANDS, "cgalloc.ops.plan", "cgalloc.ops.apply", "cgalloc.ops.state",
             "cgalloc.ops.stats", "cgalloc.host.core", "cgalloc.cli.stats", "pydantic",
             "cgalloc.inputs.pods", "cgalloc.model.podresources", "cgalloc.host.dbus", "jeepney"],
}  # fmt: skip


def _modules_after(args: list[str]) -> list[str]:
    """Run ``cgalloc *args`` in a fresh interpreter; the modules it imported (its exit must be
    0, so a failing run cannot pass for a lean one)."""
    code = (
        "import io, sys, contextlib\nfrom cgalloc.cli import main\n"
        "out = io.StringIO()\n"
        f"try:\n    with contextlib.redirect_stdout(out):\n        main({args!r})\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "assert out.getvalue(), 'no output'\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_stats_json_imports_only_what_it_reads_with(tmp_path):
    from statstree import make_v2

    root = str(tmp_path / "cg")
    for rel in ("", "kubepods", "kubepods/burstable", "kubepods/besteffort",
                "kubepods/burstable/pod1111-2222"):  # fmt: skip
        make_v2(root, rel, usage=4096)
    loaded = _modules_after(["stats", *NODE, "--cgroupfs", root, "-o", "json", "--interval", "0"])
    assert "cgalloc.ops.stats" in loaded  # the run did read the tree
    assert [m for m in NOT_IMPORTED["stats"] if m in loaded] == []


def test_kubelet_config_imports_neither_limits_nor_the_reader():
    loaded = _modules_after(["kubelet-config", *NODE])
    assert "yaml" in loaded
    assert [m for m in NOT_IMPORTED["kubelet-config"] if m in loaded] == []


def test_show_imports_neither_the_reader_nor_setup():
    loaded = _modules_after(["show", *NODE])
    assert "cgalloc.model.allocatable" in loaded
    assert [m for m in NOT_IMPORTED["show"] if m in loaded] == []


def test_command_paths_build_no_dataclass_of_the_cli():
    """Building a dataclass compiles its methods in every process (~1.5 ms each on 3.11): the
    records the commands' import paths define are NamedTuples (left as dataclasses: the few
    that validate in __post_init__, Quantity, CgroupName and FileSpec)."""
    import dataclasses

    import cgalloc.cli.inputs
    import cgalloc.cli.stats
    import cgalloc.cli.stats_table
    import cgalloc.host.cgroupfs
    import cgalloc.host.netstats
    import cgalloc.inputs.config
    import cgalloc.model.allocatable
    import cgalloc.model.eviction
    import cgalloc.model.features
    import cgalloc.model.limits
    import cgalloc.model.podresources
    import cgalloc.model.tree
    import cgalloc.model.versions
    import cgalloc.ops.stats

    records = [cgalloc.cli.inputs.NodeInputs, cgalloc.cli.inputs._Opt, cgalloc.cli.stats.View,
               cgalloc.cli.stats_table.Row, cgalloc.inputs.fields.Field,
               cgalloc.model.eviction.Threshold, cgalloc.model.versions.Behaviour,
               cgalloc.model.features.Spec, cgalloc.host.netstats.InterfaceStats,
               cgalloc.ops.stats.Field, cgalloc.ops.stats.Target,
               cgalloc.model.allocatable.Term, cgalloc.model.allocatable.Allocatable,
               cgalloc.model.allocatable.CpuSets, cgalloc.model.tree.DesiredCgroup,
               cgalloc.model.podresources.PodCgroup, cgalloc.model.nodeconfig.NodeConfig,
               cgalloc.model.limits.Limits, cgalloc.model.hierarchy.Hierarchy,
               cgalloc.ops.stats.CgroupStats]  # fmt: skip
    assert [r.__name__ for r in records if dataclasses.is_dataclass(r)] == []


# Prints, as typer is first imported, whether the collector is on then (a meta path hook
# that finds nothing itself, so the import goes on as before).
_AT_TYPER = """
import gc, sys
class _Probe:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "typer":
            print("at typer", gc.isenabled())
        return None
sys.meta_path.insert(0, _Probe)
"""


