"""`cgalloc exporter` on fake trees: the series and their values, pressure, drift, the state
record, pod names, a vanished cgroup, a slow sample, bad input, HTTP and textfile modes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from clirun import run_cli
from exportertree import KUBE_ARGS, POD_UID, PSI, inputs, make_node, values_for
from prometheus_client.parser import text_string_to_metric_families
from statstree import make_v1

from cgalloc.cli import exporter as exporter_cli
from cgalloc.host.machine import read_boot_id
from cgalloc.ops import exporter, stats


@pytest.fixture
def node(tmp_path):
    return make_node(tmp_path)


def scrape(running: exporter_cli.Running) -> dict[tuple[str, tuple], float]:
    """Every sample of one scrape, by (name, sorted labels)."""
    from prometheus_client import generate_latest

    text = generate_latest(running.registry(process=False)).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


@pytest.fixture
def running(node):
    r = exporter_cli.Running(
        inputs(*KUBE_ARGS),
        values_for(
            cgroupfs=node["root"], pod_log_dir=node["logs"], state_dir=str(node["tmp"] / "state")
        ),
        proc_root=node["proc"],
    )
    yield r
    r.close()


def test_usage_series_have_cadvisor_names_ids_and_pod_labels(running):
    got = scrape(running)
    ws = {
        dict(k[1])["id"]: v for k, v in got.items() if k[0] == "container_memory_working_set_bytes"
    }
    # V2_MEMORY_STAT: inactive_file 3 MiB; the root's usage is anon + file (7 MiB)
    assert ws == {
        "/": 7340032 - 3145728,
        "/kubepods": 8388608 - 3145728,
        "/kubepods/burstable": 4194304 - 3145728,
        "/kubepods/besteffort": 4194304 - 3145728,
        f"/kubepods/burstable/pod{POD_UID}": 4194304 - 3145728,
        "/kube.slice": 20 * 2**20 - 3145728,
        "/system.slice": 8388608 - 3145728,
    }
    pod = (("id", f"/kubepods/burstable/pod{POD_UID}"), ("namespace", "default"), ("pod", "web-0"))
    assert got["container_cpu_usage_seconds_total", pod] == 5.000001
    assert got["container_spec_memory_limit_bytes", pod] == 67108864
    assert got["container_memory_rss", pod] == 2097152
    assert got["container_threads", pod] == 4
    assert got["container_threads_max", pod] == 1024
    assert got["container_cpu_cfs_throttled_periods_total", pod] == 2
    assert got["container_spec_cpu_quota", pod] == 150000
    sys_ = (("id", "/system.slice"),)
    assert got["container_spec_memory_limit_bytes", sys_] == 0  # "max": cAdvisor's 0
    assert got["container_memory_max_usage_bytes", (("id", "/kube.slice"),)] == 33554432


def test_pressure_of_reserved_cgroups_and_the_node(running):
    got = scrape(running)
    kube = (("id", "/kube.slice"),)
    assert got["container_pressure_memory_waiting_seconds_total", kube] == 2.5
    assert got["container_pressure_memory_stalled_seconds_total", kube] == 1.0
    assert got["container_pressure_io_waiting_seconds_total", (("id", "/system.slice"),)] == 0.5
    assert got["container_pressure_cpu_waiting_seconds_total", (("id", "/"),)] == 7.0
    assert got["container_pressure_cpu_stalled_seconds_total", (("id", "/"),)] == 3.0
    assert got["cgalloc_pressure_available", (("reason", ""), ("scope", "cgroup"))] == 1
    assert got["cgalloc_pressure_available", (("reason", ""), ("scope", "node"))] == 1
    # pods are not read for pressure
    assert not [k for k in got if k[0].startswith("container_pressure") and "pod" in str(k)]


def test_alerts_usage_against_reservation_and_headroom(running):
    got = scrape(running)

    def alert(cg: str, role: str, reason: str) -> float:
        return got[
            "cgalloc_reserved_cgroup_alert", (("id", cg), ("reason", reason), ("role", role))
        ]

    # kube.slice: avg10 12.5 >= 10; ws 17 MiB of 16 MiB memory.max (>= 0.9) and reservation
    assert alert("/kube.slice", "kube-reserved", "memory_pressure") == 1
    assert alert("/kube.slice", "kube-reserved", "near_memory_limit") == 1
    assert alert("/kube.slice", "kube-reserved", "over_reservation") == 1
    assert alert("/system.slice", "system-reserved", "memory_pressure") == 0
    assert alert("/system.slice", "system-reserved", "near_memory_limit") == 0  # no limit
    assert alert("/system.slice", "system-reserved", "over_reservation") == 0
    ws = 20 * 2**20 - 3145728
    assert (
        got[
            "cgalloc_reservation_headroom_bytes", (("id", "/kube.slice"), ("role", "kube-reserved"))
        ]
        == 16 * 2**20 - ws
    )
    assert got[
        "cgalloc_reservation_usage_ratio",
        (("id", "/system.slice"), ("resource", "pid"), ("role", "system-reserved")),
    ] == (4 / 1000)
    assert got["cgalloc_cgroup_found", (("id", "/kubepods"), ("role", "kubepods"))] == 1


def test_node_figures_reservations_and_eviction(running):
    got = scrape(running)
    assert got["cgalloc_node_capacity", (("resource", "memory"), ("unit", "byte"))] == 8 * 2**30
    # 8Gi − 1Gi (system) − 16Mi (kube) − 100Mi (eviction)
    alloc = 8 * 2**30 - 2**30 - 16 * 2**20 - 100 * 2**20
    assert got["cgalloc_node_allocatable", (("resource", "memory"), ("unit", "byte"))] == alloc
    assert got["cgalloc_node_allocatable", (("resource", "cpu"), ("unit", "core"))] == 3.8
    key = (("reservation", "eviction_hard"), ("resource", "memory"), ("unit", "byte"))
    assert got["cgalloc_reserved", key] == 100 * 2**20
    assert (
        got[
            "cgalloc_reserved",
            (("reservation", "system"), ("resource", "pid"), ("unit", "integer")),
        ]
        == 1000
    )
    assert (
        got["cgalloc_eviction_hard_threshold", (("signal", "nodefs.available"), ("unit", "ratio"))]
        == 0.1
    )
    assert got["cgalloc_kubepods_limit", (("resource", "memory"), ("unit", "byte"))] == (
        8 * 2**30 - 2**30 - 16 * 2**20
    )


def test_drift_compares_the_limits_read_with_those_the_inputs_want(node):
    # kubepods gets what setup writes for these inputs; kube.slice keeps its 16Mi memory.max
    want = 8 * 2**30 - 2**30 - 16 * 2**20
    root = node["root"]
    for name, value in (("memory.max", want), ("cpu.weight", 149), ("pids.max", 32768 - 1000)):
        with open(os.path.join(root, "kubepods", name), "w") as f:
            f.write(f"{value}\n")
    r = exporter_cli.Running(
        inputs(*KUBE_ARGS, "--capacity", "pid=32768"),
        values_for(cgroupfs=root, pod_log_dir="", state_dir=""),
        proc_root=node["proc"],
    )
    try:
        got = scrape(r)
    finally:
        r.close()

    def drift(cg, role, file):
        return got["cgalloc_cgroup_limit_drift", (("file", file), ("id", cg), ("role", role))]

    assert drift("/kubepods", "kubepods", "memory.max") == 0
    assert drift("/kubepods", "kubepods", "cpu.weight") == 0
    assert drift("/kubepods", "kubepods", "pids.max") == 0
    assert drift("/kube.slice", "kube-reserved", "memory.max") == 0  # 16Mi wanted, 16Mi read
    assert drift("/kube.slice", "kube-reserved", "cpu.weight") == 1  # 39 read, 8 wanted
    key = (("file", "cpu.weight"), ("id", "/kube.slice"), ("role", "kube-reserved"))
    assert got["cgalloc_cgroup_limit", key] == 39
    assert got["cgalloc_cgroup_expected_limit", key] == 8
    # no state dir: no setup series; no pod log dir: no pod labels
    assert not [k for k in got if k[0] == "cgalloc_setup_state"]
    assert ("container_threads", (("id", f"/kubepods/burstable/pod{POD_UID}"),)) in got


def test_a_cgroup_gone_mid_scrape_is_a_missing_series(running, node, monkeypatch):
    real = stats.discover_pods

    def with_a_ghost(h, kubepods, driver):
        # listed, then removed before its files are read
        return [
            *real(h, kubepods, driver),
            stats.Target("pod", "kubepods/podgone-1", pod_uid="gone-1"),
        ]

    monkeypatch.setattr(stats, "discover_pods", with_a_ghost)
    for _ in range(3):  # the cold read, then the sampler's kept fds
        got = scrape(running)
        assert not [k for k in got if "podgone" in str(k)]
        assert got["cgalloc_exporter_sample_errors_total", ()] == 0
    # a pod removed between two samples disappears too
    import shutil

    shutil.rmtree(os.path.join(node["root"], f"kubepods/burstable/pod{POD_UID}"))
    got = scrape(running)
    assert not [k for k in got if POD_UID in str(k)]
    assert got["cgalloc_exporter_cgroups", ()] == 6


def test_a_slow_sample_does_not_block_the_scrape(no_hang):
    release = threading.Event()
    calls = []

    def take():
        calls.append(1)
        if len(calls) == 2:
            release.wait(5)  # a cgroup read stuck in the kernel
        return exporter.Sample(
            time.time(), time.monotonic(), 0.0, [], [], exporter.Extras({}, {}, {}), {}
        )

    engine = exporter.Engine(take, deadline=0.2)
    first = engine.get()
    assert first is not None
    start = time.monotonic()
    second = engine.get()
    took = time.monotonic() - start
    assert second is first  # the last sample, not a wait for the stuck one
    assert 0.2 <= took < 1.0
    assert engine.timeouts == 1
    release.set()
    for _ in range(50):
        if engine.generation >= 2:
            break
        time.sleep(0.02)
    third = engine.get()
    assert third is not first
    engine.stop()


def test_a_failing_sample_is_counted_not_fatal():
    def take():
        raise OSError(5, "Input/output error")

    engine = exporter.Engine(take, deadline=2)
    assert engine.get() is None
    assert engine.errors == 1 and "Input/output error" in engine.last_error
    engine.stop()


def _write_record(state_dir, boot: str, journal: bool = False) -> None:
    os.makedirs(state_dir, exist_ok=True)
    rec = {
        "version": 2,
        "created": [["/sys/fs/cgroup", "kube.slice"]],
        "changed": [],
        "enabled": [],
        "written": [],
        "boot": boot,
        "managed": {"kubepods": [], "reserved": ["kube.slice"]},
    }
    with open(os.path.join(state_dir, "owned.json"), "w") as f:
        json.dump(rec, f)
    os.utime(os.path.join(state_dir, "owned.json"), (1_700_000_000, 1_700_000_000))
    if journal:
        with open(os.path.join(state_dir, "journal.jsonl"), "w") as f:
            f.write('{"kind": "mkdir"}\n')


@pytest.mark.parametrize(
    ("boot", "journal", "state"),
    [
        ("this", False, "recorded"),
        ("an-earlier-boot", False, "earlier_boot"),
        ("this", True, "interrupted"),
    ],
)
def test_setup_state_from_the_record(tmp_path, boot, journal, state):
    boot_file = tmp_path / "boot_id"
    boot_file.write_text("this\n")
    _write_record(tmp_path / "state", boot, journal)
    got = exporter.setup_state(str(tmp_path / "state"), str(boot_file))
    assert got.state == state
    if not journal:
        assert got.timestamp == 1_700_000_000
    assert read_boot_id(str(boot_file)) == "this"


def test_setup_state_absent_or_broken(tmp_path):
    assert exporter.setup_state(str(tmp_path / "none")).state == "none"
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "owned.json").write_text("{not json")
    got = exporter.setup_state(str(tmp_path / "s"))
    assert got.state == "unreadable" and "owned.json" in got.reason


def test_setup_state_series_in_a_scrape(node):
    boot = node["tmp"] / "boot_id"
    boot.write_text("b1\n")
    _write_record(node["tmp"] / "state", "b1")
    r = exporter_cli.Running(
        inputs(*KUBE_ARGS),
        values_for(cgroupfs=node["root"], state_dir=str(node["tmp"] / "state")),
        proc_root=node["proc"],
        boot_id_file=str(boot),
    )
    try:
        got = scrape(r)
    finally:
        r.close()
    assert got["cgalloc_setup_state", (("reason", ""), ("state", "recorded"))] == 1
    assert got["cgalloc_setup_state", (("reason", ""), ("state", "interrupted"))] == 0
    assert got["cgalloc_setup_record_timestamp_seconds", ()] == 1_700_000_000


def test_v1_tree_has_no_cgroup_pressure_and_says_why(tmp_path):
    root = str(tmp_path)
    for rel in ("", "kubepods", "kubepods/burstable", "kubepods/besteffort", "system.slice"):
        make_v1(root, rel, usage=4194304)
    with open(os.path.join(root, "memory", "system.slice", "memory.max_usage_in_bytes"), "w") as f:
        f.write("12345678\n")
    r = exporter_cli.Running(
        inputs("--system-reserved-cgroup", "/system.slice", "--system-reserved", "memory=1Gi"),
        values_for(cgroupfs=root, pod_log_dir="", state_dir=""),
        proc_root=str(tmp_path / "noproc"),
    )
    try:
        got = scrape(r)
    finally:
        r.close()
    reasons = {
        dict(k[1])["scope"]: (dict(k[1])["reason"], v)
        for k, v in got.items()
        if k[0] == "cgalloc_pressure_available"
    }
    assert reasons["cgroup"][1] == 0 and "cgroup v1" in reasons["cgroup"][0]
    assert reasons["node"][1] == 0 and "PSI" in reasons["node"][0]
    assert not [k for k in got if k[0].startswith("container_pressure")]
    assert not [
        k
        for k in got
        if k[1]
        and k[0] == "cgalloc_reserved_cgroup_alert"
        and dict(k[1])["reason"] == "memory_pressure"
    ]
    assert got["container_memory_max_usage_bytes", (("id", "/system.slice"),)] == 12345678
    assert got["container_cpu_usage_seconds_total", (("id", "/system.slice"),)] == 987.654321


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (b"some avg10=1.50 avg60=0.00 avg300=0.00 total=42\n", exporter.Pressure(1.5, 42)),
        (PSI.format(a=2.0, s=5, f=7).encode(), exporter.Pressure(2.0, 5, 0.0, 7)),
        (b"", None),
        (b"some total=1\n", None),
        (b"full avg10=0 total=1\n", None),
        (b"\xff", None),
    ],
)
def test_parse_pressure(text, want):
    assert exporter.parse_pressure(text) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
        (["--listen", "127.0.0.1:70000"], "from 0 to 65535"),
        (["--textfile", "/tmp/x.txt"], "must end in .prom"),
        (["--textfile", "/nonexistent-dir/x.prom"], "does not exist"),
        (["--once"], "--once writes the --textfile once"),
        (["--deadline", "0"], "--deadline must be"),
        (["--textfile-interval", "nan"], "--textfile-interval must be"),
        (["--near-limit", "1.5"], "--near-limit must be"),
        (["--memory-pressure-threshold", "101"], "percentage from 0 to 100"),
        (["--cpu-weight-formula", "cubic"], "--cpu-weight-formula 'cubic' is not one of"),
        (["--system-cgroups", "system.slice"], "--system-cgroups must be an absolute"),
    ],
)
def test_bad_input_exits_2_with_one_sentence(capsys, node, args, message):
    code, out, err = run_cli(capsys, "exporter", "--cgroupfs", node["root"], *args)
    assert code == 2, err
    assert message in err
    assert out == ""
    assert len(err.strip().splitlines()) == 1


def test_help_has_examples(capsys):
    code, out, _ = run_cli(capsys, "exporter", "-h")
    assert code == 0
    assert "Examples:" in out
    assert "cgalloc exporter --config /var/lib/kubelet/config.yaml --listen 0.0.0.0:9847" in out


def test_textfile_is_written_atomically_once(capsys, node, monkeypatch):
    target = node["tmp"] / "out" / "cgalloc.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    seen = []
    real_rename = os.rename

    def rename(src, dst):
        seen.append((os.path.dirname(src), os.path.basename(dst)))
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    code, _, err = run_cli(
        capsys,
        "exporter",
        "--cgroupfs",
        node["root"],
        *KUBE_ARGS,
        "--textfile",
        str(target),
        "--once",
        "--state-dir",
        "",
    )
    assert code == 0, err
    assert seen == [(str(target.parent), "cgalloc.prom")]  # a temporary file renamed over it
    assert os.listdir(target.parent) == ["cgalloc.prom"]
    families = {f.name for f in text_string_to_metric_families(target.read_text())}
    assert {"container_memory_working_set_bytes", "cgalloc_node_allocatable"} <= families


def test_http_serves_metrics_on_loopback_until_sigterm(node):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cgalloc",
            "exporter",
            "--cgroupfs",
            node["root"],
            *KUBE_ARGS,
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            "",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert m, line
        with urllib.request.urlopen(f"http://127.0.0.1:{m.group(1)}/metrics", timeout=10) as resp:
            body = resp.read().decode()
        assert 'container_memory_working_set_bytes{id="/kube.slice"}' in body
        assert "process_cpu_seconds_total" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_real_host_hierarchy_read_only(capsys, tmp_path):
    if not os.path.isdir("/sys/fs/cgroup"):
        pytest.skip("no /sys/fs/cgroup on this host")
    target = tmp_path / "host.prom"
    code, _, err = run_cli(
        capsys,
        "exporter",
        "--textfile",
        str(target),
        "--once",
        "--state-dir",
        "",
        "--pod-log-dir",
        "",
    )
    assert code == 0, err
    got = {
        (s.name, s.labels.get("id"))
        for f in text_string_to_metric_families(target.read_text())
        for s in f.samples
    }
    assert ("container_cpu_usage_seconds_total", "/") in got


def test_every_family_is_documented_and_the_dashboard_uses_served_metrics(running):
    from prometheus_client import generate_latest

    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs")
    text = generate_latest(running.registry(process=False)).decode()
    served = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    served |= {"process_cpu_seconds_total"}  # over HTTP only
    with open(os.path.join(docs, "metrics.md")) as f:
        reference = f.read()
    for fam in text_string_to_metric_families(text):
        name = fam.name + ("_total" if fam.type == "counter" else "")
        assert f"`{name}`" in reference, name
    with open(os.path.join(docs, "grafana-dashboard.json")) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = {m for e in exprs for m in re.findall(r"\b((?:container|cgalloc|process)_\w+)", e)}
    assert named and named <= served, named - served
