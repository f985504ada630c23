"""``stats`` without typer (cgalloc/cli/fast.py) against typer's own parse of the same line.

Every line the fast parser accepts must reach ``run_stats`` with exactly the values typer's
command hands it (its NodeInputs and each option's converted value); a line it gives up on
goes to typer, which runs or refuses it as before. Checked on a table of common lines, which
the fast parser must accept, and on generated ones, valid and hostile alike. A whole process
then shows that such a line runs without importing typer and prints what typer's path prints.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_stats import make_v2

from cgalloc.cli import fast, inputs
from cgalloc.cli import stats as stats_cli
from cgalloc.cli.group import app

EXAMPLES = int(os.environ.get("CGALLOC_FUZZ_EXAMPLES", "60")) * 5
NODE = ["--capacity", "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi",
        "--kube-reserved", "cpu=100m,memory=1Gi"]  # fmt: skip


@pytest.fixture
def recorded(monkeypatch):
    """What each parser hands ``run_stats``; ``run_stats`` itself does nothing."""
    calls: list[tuple] = []
    monkeypatch.setattr(stats_cli, "run_stats", lambda node, **values: calls.append((node, values)))
    return calls


def _typer(args: list[str], calls: list) -> tuple | None:
    """typer's values for ``cgalloc stats *args``; None when typer refuses the line."""
    calls.clear()
    try:
        app(args=["stats", *args], prog_name="cgalloc", standalone_mode=False)
    except Exception:  # a usage error, or a callback's InputError
        return None
    return calls[0] if calls else None


def _same(a: tuple | None, b: tuple | None) -> bool:
    # by repr: a value may be nan (--interval nan reaches run_stats, which refuses it)
    return repr(a) == repr(b)


def _fast(args: list[str], calls: list) -> tuple | None:
    calls.clear()
    call = fast.stats_command(args)
    if call is None:
        return None
    call()
    return calls[0]


# Lines users and scripts write, each in a form the fast parser reads: every option of both
# tables in at least one of them, repeats, `=` forms, the short -o and the boolean flags.
COMMON = [
    [],
    [*NODE, "--cgroupfs", "/sys/fs/cgroup", "-o", "json", "--interval", "0"],
    ["-o", "yaml", "--watch", "2", "--count", "3", "--cgroups-per-qos",
     "--feature-gates=MemoryQoS=true", "--feature-gates", "QOSReserved=false"],
    ["--no-headers", "--depth", "2", "--sort-by", "cpu", "--role", "pod,kubepods",
     "--cgroupfs=/tmp", "--interval=0.5", "--cgroup-root", "/x", "--cgroup-root", "/y"],
    ["--experimental-allocatable-ignore-eviction=false", "--max-pods", "12",
     "--config", "/nonexistent", "--config-dir", "/d", "--node-config", "/n"],
    ["--kubelet-cgroups", "/kubelet", "--runtime-cgroups=/runtime", "--system-cgroups",
     "/system", "--node-name", "node-a", "--output=table", "--enforce", "pods",
     "--enforce-node-allocatable", "kube-reserved", "--eviction-hard", "memory.available<1Gi"],
    ["--system-reserved", "cpu=1", "--kube-reserved-cgroup", "/kube.slice",
     "--system-reserved-cgroup=/system.slice", "--cgroup-driver", "systemd",
     "--reserved-cpus", "0-1", "--qos-reserved", "memory=50%", "--pod-max-pids", "-1"],
    ["--cpu-cfs-quota", "--cpu-cfs-quota-period", "50ms", "--pod-manifest-path", "/m",
     "--pods-per-core", "4", "--cpu-manager-policy", "static", "--cpu-manager-policy-options",
     "full-pcpus-only=true", "--kubelet-version", "1.36", "--root-dir", "/var/lib/kubelet",
     "--cgroups-per-qos=false", "--count=0", "--depth=0"],
    ["--watch", "1e-3", "--interval", "nan", "--count", "-1", "--depth", "-4"],  # run_stats
    # words click takes as a value whatever they look like: a boolean flag, which pflag_bools
    # has made --flag=true first, and "--", after which pflag_bools rewrites nothing
    ["--node-name", "--cpu-cfs-quota", "--cgroup-root", "--", "--cgroups-per-qos", "x"],
]  # fmt: skip


@pytest.mark.parametrize("args", COMMON, ids=range(len(COMMON)))
def test_common_lines_run_without_typer_with_typers_values(recorded, args):
    got = _fast(args, recorded)
    assert got is not None, "the fast parser gave this line up"
    assert _same(got, _typer(args, recorded))


def test_the_lines_cover_every_option():
    decls = {d for o in (*stats_cli.OPTIONS, *inputs._OPTIONS) for d in o.decls}
    used = {a.partition("=")[0] for line in COMMON for a in line if a.startswith("-")}
    assert decls - used == set()


# Given up on, each for a reason the module names; typer runs or refuses each as before.
GIVEN_UP = [
    ["--help"], ["-h"], ["extra"], ["--"], ["--unknown", "1"], ["--no-headers=true"],
    ["--cgroups-per-qos", "false"], ["-ojson"], ["-o=json"],
    ["--interval", "1_0"], ["--depth", "x"], ["-o", "JSON"], ["--cgroupfs", ""],
    ["--sort-by", "size"], ["--watch"], ["--version"],
]  # fmt: skip


@pytest.mark.parametrize("args", GIVEN_UP, ids=range(len(GIVEN_UP)))
def test_other_lines_go_to_typer(recorded, args):
    assert fast.stats_command(args) is None


def test_completion_goes_to_typer(monkeypatch):
    monkeypatch.setenv("_CGALLOC_COMPLETE", "bash_complete")
    assert fast.stats_command([]) is None


_DECLS = sorted({d for o in (*stats_cli.OPTIONS, *inputs._OPTIONS) for d in o.decls})
_VALUES = st.one_of(
    st.sampled_from(["", "0", "1", "-1", "2.5", "1_0", " 5", "nan", "inf", "1e400", "json",
                     "yaml", "table", "JSON", "tree", "cpu", "pids", "true", "false", "t",
                     "/x", "x", "-", "--", "-o", "=", "a=b", "cpu=1", "\x00", "\u0661"]),
    st.text(max_size=6),
)  # fmt: skip
_WORD = st.one_of(
    st.sampled_from(_DECLS),
    st.tuples(st.sampled_from(_DECLS), _VALUES).map(lambda t: f"{t[0]}={t[1]}"),
    _VALUES,
)
# well-formed option/value pairs (most of which the fast parser takes), and loose words
_PAIR = st.tuples(st.sampled_from(_DECLS), _VALUES, st.booleans()).map(
    lambda t: [f"{t[0]}={t[1]}"] if t[2] else [t[0], t[1]]
)
LINES = st.one_of(
    st.lists(_PAIR, max_size=8).map(lambda pairs: [w for p in pairs for w in p]),
    st.lists(_WORD, max_size=10),
)


@settings(
    deadline=None, max_examples=EXAMPLES, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(args=LINES)
def test_every_line_the_fast_parser_takes_typer_takes_alike(recorded, args):
    got = _fast(args, recorded)
    if got is not None:
        assert _same(got, _typer(args, recorded))


def test_the_program_runs_stats_without_typer_and_prints_what_typer_prints(tmp_path):
    root = str(tmp_path / "cg")
    for rel in ("", "kubepods", "kubepods/burstable", "kubepods/besteffort",
                "kubepods/burstable/pod1111-2222", "kubepods/pod3333-4444"):  # fmt: skip
        make_v2(root, rel, usage=4096)
    line = ["stats", *NODE, "--cgroupfs", root, "-o", "json", "--interval", "0",
            "--node-name", "n"]  # fmt: skip
    # the program's exit (os._exit) reports whether typer was imported
    probe = (
        "import os, sys\n_exit = os._exit\n"
        "def leaving(status):\n"
        "    print('typer' in sys.modules, file=sys.stderr, flush=True)\n"
        "    _exit(status)\n"
        "os._exit = leaving\n"
        f"sys.argv = ['cgalloc', *{line!r}]\n"
        "import runpy\nrunpy.run_module('cgalloc', run_name='__main__')\n"
    )
    docs = []
    # `-ojson` is a form only typer reads: the same command through typer's path
    for form, typer_used in ((["-o", "json"], "False"), (["-ojson"], "True")):
        code = probe.replace("'-o', 'json'", ", ".join(map(repr, form)))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stderr.splitlines()[-1] == typer_used
        docs.append(json.loads(out.stdout))
    for doc in docs:  # the clock and the host's own counters differ between the two runs
        node = doc["node"]
        for key in ("cpu", "memory", "network", "rlimit"):
            node.pop(key)
        for item in (*node["systemContainers"], *doc["pods"]):
            for section in ("cpu", "memory"):
                item[section].pop("time")
    assert docs[0] == docs[1]
    assert sorted(p["podRef"]["uid"] for p in docs[0]["pods"]) == ["1111-2222", "3333-4444"]


@pytest.mark.parametrize(
    ("error", "status"),
    [(KeyboardInterrupt(), 130), (EOFError(), 1), (OSError(errno.EPIPE, "Broken pipe"), 1)],
)
def test_a_command_ending_in_an_exception_exits_as_on_typers_path(
    monkeypatch, capsys, error, status
):
    # Ctrl-C under a caller's own SIGINT handler, end of input, a closed pipe: typer's
    # standalone mode gives 130, "Aborted!" and 1, a quiet 1; `--` sends the line to typer
    import sys

    from cgalloc.cli import main

    def fail(_node, **_values):
        raise error

    monkeypatch.setattr(stats_cli, "run_stats", fail)
    seen = []
    for line in (["stats"], ["stats", "--"]):
        stdout, stderr = sys.stdout, sys.stderr
        try:
            with pytest.raises(SystemExit) as done:
                main(line)
        finally:
            sys.stdout, sys.stderr = stdout, stderr  # a closed pipe pacifies both
        seen.append((done.value.code, capsys.readouterr()))
    assert seen[0] == seen[1]
    assert seen[0][0] == status


def test_an_ascii_stdout_gets_utf8_names_as_click_wrote_them(tmp_path):
    root = str(tmp_path / "cg")
    for rel in ("", "kubepods", "kubepods/burstable", "kubepods/besteffort",
                "kubepods/burstable/pod\u00e9-0000"):  # fmt: skip
        make_v2(root, rel, usage=4096)
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    outs = []
    for form in (["-o", "table"], ["-otable"]):  # the fast path, then typer's
        line = [sys.executable, "-m", "cgalloc", "stats", *NODE, "--cgroupfs", root,
                "--interval", "0", "--role", "pod", *form]  # fmt: skip
        out = subprocess.run(line, capture_output=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        outs.append(out.stdout)
    assert outs[0] == outs[1]
    assert "pod\u00e9-0000".encode() in outs[0]
