"""`cgalloc record` and `cgalloc recommend` end to end: the history file (bounded, torn
lines, refusals), a recorded window of a fake tree, every output of recommend, the drop-in
read back through cgalloc's own --config-dir loader, and the refusals (exit 2)."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from clirun import run_cli
from exportertree import GI, KUBE_ARGS, MI, inputs, make_node, values_for, window, write_history

from cgalloc.cli import exporter as exporter_cli
from cgalloc.cli import record as record_cli
from cgalloc.inputs.config import load_node_config
from cgalloc.ops import history

CAPACITY = ("--capacity", "cpu=4,memory=16Gi,ephemeral-storage=100Gi")


@pytest.fixture
def node(tmp_path):
    return make_node(tmp_path)


# ---- the history file -----------------------------------------------------------------------


def test_history_round_trips_and_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "h.jsonl"
    samples = window(5)
    write_history(path, samples)
    with open(path, "a") as f:
        f.write('{"t": 18000')  # a writer killed mid-line
    got = history.load(str(path))
    assert got.samples == samples
    assert got.skipped == 1
    assert got.headers[0]["cgroups"] == {"kube-reserved": "/kube.slice"}


def test_history_stays_bounded(tmp_path):
    path = tmp_path / "h.jsonl"
    write_history(path, window(40), max_samples=20)
    got = history.load(str(path))
    # rewritten at 23 (20 + a tenth, at least 1) back to 20, then appended up to 40 − 20
    assert len(got.samples) <= 22
    assert got.samples[-1] == window(40)[-1]
    assert len(got.headers) == 1


def test_appending_to_a_history_keeps_one_header_while_the_cgroups_stay(tmp_path):
    path = tmp_path / "h.jsonl"
    write_history(path, window(3))
    write_history(path, window(3))
    assert len(history.load(str(path)).headers) == 1


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json\n", "is not a cgalloc history file"),
        ('{"t": 1}\n', "no header line"),
        ('{"cgalloc-history": 1}\n{"t": "x"}\n{"t": 1, "c": {}}\n', "line 2 is not"),
    ],
)
def test_a_file_that_is_no_history_is_refused(tmp_path, content, says):
    path = tmp_path / "h.jsonl"
    path.write_text(content)
    with pytest.raises(history.InputError) as err:
        history.load(str(path))
    assert says in str(err.value)


def test_a_history_path_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    # the exporter and `cgalloc record` append as root (issue 35: never through a link)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "h.jsonl").symlink_to(victim)
    with pytest.raises(history.InputError) as err:
        write_history(tmp_path / "h.jsonl", window(2))
    assert "is a symbolic link" in str(err.value)
    assert victim.read_text() == "precious\n"


def test_compacting_refuses_a_planted_temporary(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    path = tmp_path / "h.jsonl"
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    (tmp_path / "h.jsonl.4242.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        write_history(path, window(40), max_samples=20)
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "h.jsonl.4242.tmp").is_symlink()


def test_meminfo_and_tasks(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemFree: 1 kB\nMemAvailable: 40 kB\n")
    (tmp_path / "loadavg").write_text("0.1 0.2 0.3 2/345 99\n")
    assert history.meminfo(str(tmp_path)) == (102400, 40960)
    assert history.tasks(str(tmp_path)) == 345
    assert history.meminfo(str(tmp_path / "none")) == (None, None)


# ---- record ---------------------------------------------------------------------------------


def test_record_writes_a_window_of_the_tree(node):
    path = node["tmp"] / "h.jsonl"
    record_cli.run_record(
        inputs(*KUBE_ARGS), cgroupfs=node["root"], duration="1s", interval="250ms",
        history_path=str(path), max_samples=100, kubelet_cgroups="", runtime_cgroups="",
        system_cgroups="", proc_root=node["proc"],
    )  # fmt: skip
    got = history.load(str(path))
    assert 4 <= len(got.samples) <= 6
    assert got.headers[0]["cgroups"] == {
        "kube-reserved": "/kube.slice", "kubepods": "/kubepods", "node": "/",
        "system-reserved": "/system.slice",
    }  # fmt: skip
    s = got.samples[0]
    assert s.cgroups["kube-reserved"] == history.Point(
        5000001000, 20 * MI - 3 * MI, 20 * MI, 2 * MI, 4, 32 * MI
    )
    assert (s.mem_total, s.mem_available, s.tasks) == (8 * GI, 6 * GI, 123)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "--for is required"),
        (["--for", "soon"], "--for 'soon' is not a duration"),
        (["--for", "-1h"], "is not a duration above 0"),
        (["--for", "1m", "--every", "2m"], "--every 2m is longer than --for 1m"),
        (["--for", "1m", "--max-samples", "0"], "--max-samples must be"),
    ],
)
def test_record_bad_input_exits_2(capsys, node, args, says):
    code, _out, err = run_cli(capsys, "record", "--cgroupfs", node["root"], *args)
    assert code == 2, err
    assert says in err and len(err.strip().splitlines()) == 1


def test_the_exporter_records_history_at_most_once_per_interval(node):
    path = node["tmp"] / "h.jsonl"
    r = exporter_cli.Running(
        inputs(*KUBE_ARGS),
        values_for(cgroupfs=node["root"], state_dir="", history_path=str(path),
                   history_interval=3600.0),
        proc_root=node["proc"],
    )  # fmt: skip
    try:
        for _ in range(3):
            r.engine.get()
    finally:
        r.close()
    assert len(history.load(str(path)).samples) == 1


# ---- recommend ------------------------------------------------------------------------------


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "h.jsonl"
    write_history(path, window())
    return str(path)


def rec(capsys, recorded, *args):
    return run_cli(capsys, "recommend", "--history", recorded, *CAPACITY, *args)


def test_recommend_json(capsys, recorded):
    code, out, err = rec(capsys, recorded, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["recommendation"] == {
        "kubeReserved": {"cpu": "360m", "memory": "200Mi", "pid": "100"},
        "systemReserved": {"cpu": "60m", "memory": "420Mi", "pid": "200"},
        "evictionHard": {"imagefs.available": "15%", "imagefs.inodesFree": "5%",
                         "memory.available": "100Mi", "nodefs.available": "10%",
                         "nodefs.inodesFree": "5%"},
    }  # fmt: skip
    assert doc["window"]["seconds"] == 1800 and doc["window"]["samples"] == 181
    assert doc["measured"]["kube"]["memoryWorkingSetPeak"] == 200 * MI
    assert doc["measured"]["kube"]["cpuCoresPeak"] == pytest.approx(0.9)
    rows = {r["name"]: r for r in doc["compared"]}
    assert list(rows)[:2] == ["configured", "recommended"]
    assert rows["recommended"]["coversMeasured"] == {"cpu": True, "memory": True}
    assert rows["configured"]["coversMeasured"] == {"cpu": False, "memory": False}
    # 16Gi − 200Mi − 420Mi − 100Mi
    assert rows["recommended"]["allocatable"] == {"cpu": "3580m", "memory": "15664Mi"}
    assert rows["gke"]["kubeReserved"]["memory"] == "2662Mi"
    assert rows["eks"]["kubeReserved"]["memory"] == "1465Mi"
    assert rows["kubespray"]["kubeReserved"]["pid"] == "1000"


def test_recommend_says_when_it_leaves_nothing_allocatable(capsys, recorded):
    """The worked example's window on a node of 400m: kube 360m + system 60m leave no
    Allocatable cpu (the kubelet floors it at 0), which a note says; memory is left."""
    small = "cpu=400m,memory=16Gi,ephemeral-storage=100Gi"
    code, out, err = run_cli(
        capsys, "recommend", "--history", recorded, "--capacity", small, "-o", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["compared"][1]["allocatable"]["cpu"] == "0"
    left = [n for n in doc["notes"] if "leaves no Allocatable" in n]
    assert left == [
        "cpu: the recommendation leaves no Allocatable cpu on this node (capacity 400m): its"
        " daemons used that much in this window; record a longer or quieter window, or give"
        " the node more."
    ]
    _, out, _ = rec(capsys, recorded, "-o", "json")  # 4 cpus: room left, no such note
    assert not [n for n in json.loads(out)["notes"] if "leaves no Allocatable" in n]


def test_recommend_flags(capsys, recorded):
    code, out, _ = rec(capsys, recorded, "--emit", "flags")
    assert code == 0
    assert out.splitlines() == [
        "--kube-reserved=cpu=360m,memory=200Mi,pid=100",
        "--system-reserved=cpu=60m,memory=420Mi,pid=200",
        "--eviction-hard=imagefs.available<15%,imagefs.inodesFree<5%,memory.available<100Mi,"
        "nodefs.available<10%,nodefs.inodesFree<5%",
    ]


def test_recommend_table_shows_evidence_and_every_profile(capsys, recorded):
    code, out, _ = rec(capsys, recorded)
    assert code == 0
    assert out.startswith("Window: 30m0s (181 samples, every 10s)")
    for name in ("configured", "recommended", "gke", "eks", "aks", "aks-legacy", "openshift",
                 "talos", "k3s", "kubespray"):  # fmt: skip
        assert f"\n  {name} " in out
    assert "900m" in out  # the cpu peak seen
    assert "200Mi" in out  # the memory peak seen


def test_write_dropin_refuses_a_planted_temporary(capsys, recorded, tmp_path, monkeypatch):
    # the kubelet reads the drop-in as root: a link at the temporary is not followed (issue 35)
    confdir = tmp_path / "kubelet.conf.d"
    confdir.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    monkeypatch.setattr(os, "getpid", lambda: 4242)
    planted = confdir / "50-cgalloc-reservations.conf.4242.tmp"
    planted.symlink_to(victim)
    code, _, err = rec(capsys, recorded, "--emit", "config", "--write-dropin", str(confdir))
    assert code == 2 and "cannot write 50-cgalloc-reservations.conf" in err, err
    assert victim.read_text() == "precious\n" and planted.is_symlink()
    assert not (confdir / "50-cgalloc-reservations.conf").exists()


def test_the_dropin_is_what_the_kubelets_config_dir_takes(capsys, recorded, tmp_path):
    confdir = tmp_path / "kubelet.conf.d"
    confdir.mkdir()
    code, out, err = rec(capsys, recorded, "--emit", "config", "--write-dropin", str(confdir))
    assert code == 0, err
    assert "wrote" in err and "50-cgalloc-reservations.conf" in err
    written = (confdir / "50-cgalloc-reservations.conf").read_text()
    assert written.startswith("# 50-cgalloc-reservations.conf: written by `cgalloc recommend`")
    assert yaml.safe_load(written) == yaml.safe_load(out)
    cfg = load_node_config({}, config_dir=str(confdir))
    assert str(cfg.kube_reserved["memory"]) == "200Mi"
    assert cfg.system_reserved["pid"].value() == 200
    assert cfg.eviction_hard["memory.available"].value == "100Mi"
    assert os.listdir(confdir) == ["50-cgalloc-reservations.conf"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--min-window", "1h"], "30m0s of usage in 181 samples, too short"),
        (["--min-window", "1m"], "--min-window '1m' is below 5m"),
        (["--percentile", "10"], "--percentile must be a number from 50 to 100"),
        (["--headroom", "-5"], "--headroom must be a percentage"),
        (["--write-dropin", "/nonexistent"], "--write-dropin /nonexistent is not a directory"),
        (["--emit", "flags", "-o", "json"], "--emit flags prints the recommendation alone"),
    ],
)
def test_recommend_refusals_exit_2(capsys, recorded, args, says):
    code, _out, err = rec(capsys, recorded, *args)
    assert code == 2, err
    assert says in err and len(err.strip().splitlines()) == 1


def test_recommend_without_a_history(capsys, tmp_path):
    code, _, err = run_cli(capsys, "recommend", "--history", str(tmp_path / "none.jsonl"))
    assert code == 2
    assert "does not exist; record a window first" in err


def test_help_has_examples(capsys):
    for command in ("record", "recommend"):
        code, out, _ = run_cli(capsys, command, "-h")
        assert code == 0 and "Examples:" in out
