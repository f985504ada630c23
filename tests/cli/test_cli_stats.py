"""`cgalloc stats` on fake trees (table, summary JSON, watch, missing cgroups) and on this host."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from clirun import run_cli
from statstree import make_v1, make_v2, write_files

GIB8 = 8 * 2**30
# V2_MEMORY_STAT in test_stats: anon 2 MiB, file 5 MiB, inactive_file 3 MiB.
ROOT_USAGE = 2097152 + 5242880
ROOT_WS = ROOT_USAGE - 3145728


def run(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "stats", *args)


@pytest.fixture
def v2_tree(tmp_path):
    """A v2 root with kubepods, both QoS tiers, two pods and a kube-reserved cgroup."""
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    os.unlink(os.path.join(root, "memory.current"))  # the v2 root has none
    make_v2(root, "kubepods", usage=8388608)
    make_v2(root, "kubepods/burstable", usage=4194304)
    make_v2(root, "kubepods/besteffort", usage=4194304)
    make_v2(root, "kubepods/burstable/pod1111-2222", usage=4194304, memory_max="67108864")
    make_v2(root, "kubepods/podaaaa-bbbb", usage=4194304)
    os.makedirs(os.path.join(root, "kubepods/burstable/not-a-pod"))
    make_v2(root, "kube-reserved", usage=8388608, memory_max="16777216")
    return root


def test_json_has_the_summary_api_shape(capsys, v2_tree):
    code, out, err = run(
        capsys, "--cgroupfs", v2_tree, "-o", "json", "--interval", "0.01",
        "--capacity", "memory=8Gi", "--kube-reserved-cgroup", "/kube-reserved",
        "--kube-reserved", "memory=1Gi", "--node-name", "node-a",
        "--kubelet-cgroups", "/kube-reserved",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"node", "pods"}
    node = doc["node"]
    assert set(node) == {
        "nodeName", "systemContainers", "startTime", "cpu", "memory", "network", "rlimit",
    }  # fmt: skip
    assert node["nodeName"] == "node-a"
    assert [c["name"] for c in node["systemContainers"]] == ["kubelet", "pods"]
    for c in node["systemContainers"]:
        assert set(c) == {"name", "startTime", "cpu", "memory"}
        assert set(c["cpu"]) == {"time", "usageNanoCores", "usageCoreNanoSeconds"}
        assert c["cpu"]["usageCoreNanoSeconds"] == 5000001000
        assert c["cpu"]["usageNanoCores"] == 0  # the files did not change between samples
    kubelet, pods = node["systemContainers"]
    assert kubelet["memory"] == {
        "time": kubelet["memory"]["time"],
        "availableBytes": 16777216 - (8388608 - 3145728),
        "usageBytes": 8388608,
        "workingSetBytes": 8388608 - 3145728,
        "rssBytes": 2097152,
        "pageFaults": 1234,
        "majorPageFaults": 56,
    }
    assert "availableBytes" not in pods["memory"]  # memory.max is "max"
    # node memory: v2 root usage is anon + file; available against MemTotal (--capacity)
    assert node["memory"]["usageBytes"] == ROOT_USAGE
    assert node["memory"]["workingSetBytes"] == ROOT_WS
    assert node["memory"]["availableBytes"] == GIB8 - ROOT_WS
    assert set(node["network"]) >= {"time", "name"}  # "name" "" without an eth0
    assert set(node["rlimit"]) == {"time", "maxpid", "curproc"}
    assert sorted(p["podRef"]["uid"] for p in doc["pods"]) == ["1111-2222", "aaaa-bbbb"]
    for p in doc["pods"]:
        assert set(p) == {"podRef", "startTime", "cpu", "memory", "process_stats"}
        assert p["process_stats"] == {"process_count": 4}
    burstable = next(p for p in doc["pods"] if p["podRef"]["uid"] == "1111-2222")
    assert burstable["memory"]["availableBytes"] == 67108864 - (4194304 - 3145728)
    assert node["startTime"].endswith("Z") and len(node["startTime"]) == 20


def test_table_flags_daemons_over_their_reservation(capsys, v2_tree):
    code, out, _ = run(
        capsys, "--cgroupfs", v2_tree, "--interval", "0",
        "--kube-reserved-cgroup", "/kube-reserved", "--kube-reserved", "cpu=100m,memory=1Mi",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["CGROUP", "ROLE", "CPU"]
    row = next(line for line in lines if line.startswith("/kube-reserved "))
    assert row.split()[1] == "kube-reserved"
    assert "OVER-RESERVATION" in row
    assert (
        "kube-reserved /kube-reserved: memory working set 5242880 bytes > reserved 1048576 bytes"
        in lines
    )
    pods = [line.split()[0] for line in lines if line.split()[1:2] == ["pod"]]
    # Guaranteed pods (directly under kubepods) first, then the tiers' pods
    assert pods == ["/kubepods/podaaaa-bbbb", "/kubepods/burstable/pod1111-2222"]
    kp = next(line for line in lines if line.startswith("/kubepods "))
    assert "OVER" not in kp


def test_reservation_not_exceeded_is_not_flagged(capsys, v2_tree):
    code, out, _ = run(
        capsys, "--cgroupfs", v2_tree, "--interval", "0",
        "--kube-reserved-cgroup", "/kube-reserved", "--kube-reserved", "memory=1Gi",
    )  # fmt: skip
    assert code == 0
    assert "OVER" not in out


def test_missing_kubepods_is_reported_with_exit_0(capsys, tmp_path):
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    code, out, err = run(capsys, "--cgroupfs", root, "--interval", "0")
    assert code == 0
    # a warning: on stderr in the table format too, so stdout stays the table
    assert err.splitlines()[0] == f"cgalloc: warning: kubepods: not found at {root}/kubepods"
    assert "not found" not in out
    assert "burstable" not in err  # tiers below a missing kubepods are not listed again
    code, out, err = run(capsys, "--cgroupfs", root, "--interval", "0", "-o", "json")
    assert code == 0
    assert json.loads(out)["pods"] == []
    assert f"kubepods: not found at {root}/kubepods" in err


def test_v1_tree_with_systemd_names(capsys, tmp_path):
    root = str(tmp_path)
    make_v1(root, "", usage=10485760)
    make_v1(root, "kubepods.slice", usage=6291456)
    make_v1(root, "kubepods.slice/kubepods-burstable.slice", usage=4194304)
    make_v1(
        root, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice", 4194304
    )
    code, out, err = run(
        capsys, "--cgroupfs", root, "--cgroup-driver", "systemd", "-o", "json",
        "--interval", "0", "--capacity", "memory=8Gi",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert [p["podRef"]["uid"] for p in doc["pods"]] == ["12-34"]
    [pods] = doc["node"]["systemContainers"]
    assert pods["name"] == "pods"
    assert pods["memory"]["usageBytes"] == 6291456
    assert pods["memory"]["workingSetBytes"] == 6291456 - 3145728  # total_inactive_file
    assert pods["cpu"] == {"time": pods["cpu"]["time"], "usageCoreNanoSeconds": 987654321000}
    assert doc["node"]["memory"]["availableBytes"] == GIB8 - (10485760 - 3145728)
    assert "kubepods.slice: not found" not in err
    assert f"qos: not found at {root}/memory/kubepods.slice/kubepods-besteffort.slice" in err


def test_watch_refreshes_count_times_and_rates_from_the_previous_sample(capsys, v2_tree):
    code, out, _ = run(capsys, "--cgroupfs", v2_tree, "--watch", "0.05", "--count", "2")
    assert code == 0
    tables = out.split("\n\n")
    assert len(tables) == 2
    first = next(line for line in tables[0].splitlines() if line.startswith("/kubepods "))
    second = next(line for line in tables[1].splitlines() if line.startswith("/kubepods "))
    assert first.split()[2] == "-"  # one sample: no rate yet
    assert second.split()[2] == "0.000"


def test_watch_follows_pods_that_appear(capsys, v2_tree, monkeypatch):
    """The sampler's directory set is refreshed from a new listing on every refresh."""
    import time as _time

    calls = {"n": 0}
    real_sleep = _time.sleep

    def sleep_and_add_pod(seconds: float) -> None:
        calls["n"] += 1
        make_v2(v2_tree, "kubepods/besteffort/podcccc", usage=4096)
        real_sleep(seconds)

    monkeypatch.setattr("cgalloc.cli.stats.time.sleep", sleep_and_add_pod)
    code, out, _ = run(capsys, "--cgroupfs", v2_tree, "--watch", "0.01", "--count", "2")
    assert code == 0
    first, second = out.split("\n\n")
    assert "/kubepods/besteffort/podcccc" not in first
    assert "/kubepods/besteffort/podcccc" in second
    shutil.rmtree(os.path.join(v2_tree, "kubepods/besteffort/podcccc"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--watch", "0"], "--watch must be a number of seconds greater than 0"),
        (["--count", "-1"], "--count must be a whole number of refreshes, 0 or more."),
        # one mode's option given in the other was ignored without a word
        (["--count", "2"], "--count counts --watch refreshes; give --watch SECONDS with it."),
        (["--watch", "1", "--interval", "0"], "--interval is the one-shot read's sampling gap"),
        (["--kubelet-cgroups", "kubelet"], "--kubelet-cgroups must be an absolute cgroup path"),
    ],
)
def test_bad_input_exits_2_naming_the_option(capsys, v2_tree, args, message):
    code, out, err = run(capsys, "--cgroupfs", v2_tree, *args)
    assert code == 2
    assert out == ""
    assert err.startswith(f"cgalloc: {message}")


def test_runtime_and_misc_containers_come_from_their_flags(capsys, v2_tree):
    write_files(os.path.join(v2_tree, "runtime"), {"memory.current": "4096\n"})
    code, out, err = run(
        capsys, "--cgroupfs", v2_tree, "-o", "json", "--interval", "0",
        "--runtime-cgroups", "/runtime", "--system-cgroups", "/nowhere",
    )  # fmt: skip
    assert code == 0, err
    names = [c["name"] for c in json.loads(out)["node"]["systemContainers"]]
    assert names == ["runtime", "pods"]  # misc's cgroup does not exist: skipped, reported
    assert f"misc: not found at {v2_tree}/nowhere" in err


def test_daemon_cgroups_default_to_the_kubelet_configs(capsys, v2_tree, tmp_path):
    # kubeletCgroups and systemCgroups are KubeletConfiguration fields (a flag still wins);
    # runtimeCgroups is none (--runtime-cgroups is a ContainerRuntimeOptions flag in every
    # minor): the table shows the file's runtime cgroup, the kubelet's summary has no runtime.
    write_files(os.path.join(v2_tree, "runtime"), {"memory.current": "4096\n"})
    write_files(os.path.join(v2_tree, "kubelet"), {"memory.current": "8192\n"})
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "runtimeCgroups: /runtime\nkubeletCgroups: /nowhere\n"
    )
    args = ("--cgroupfs", v2_tree, "--interval", "0", "--config", str(config),
            "--kubelet-cgroups", "/kubelet")  # fmt: skip
    code, out, err = run(capsys, *args, "-o", "json")
    assert code == 0, err
    names = [c["name"] for c in json.loads(out)["node"]["systemContainers"]]
    assert sorted(names) == ["kubelet", "pods"]
    assert "nowhere" not in err
    code, out, err = run(capsys, *args, "-o", "json", "--runtime-cgroups", "/runtime")
    names = [c["name"] for c in json.loads(out)["node"]["systemContainers"]]
    assert sorted(names) == ["kubelet", "pods", "runtime"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    roles = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if line.strip()}
    assert roles["/runtime"] == "runtime" and roles["/kubelet"] == "kubelet"
    # a kubelet flag among the inputs (an OpenShift node-config's kubeletArguments) counts
    node_config = tmp_path / "node-config.yaml"
    node_config.write_text(
        "apiVersion: v1\nkind: NodeConfig\nkubeletArguments:\n  runtime-cgroups: [/runtime]\n"
    )
    code, out, err = run(capsys, "--cgroupfs", v2_tree, "--interval", "0", "-o", "json",
                         "--node-config", str(node_config))  # fmt: skip
    assert code == 0, err
    names = [c["name"] for c in json.loads(out)["node"]["systemContainers"]]
    assert sorted(names) == ["pods", "runtime"]


def test_real_host_hierarchy_read_only(capsys):
    if not os.path.isdir("/sys/fs/cgroup"):
        pytest.skip("no /sys/fs/cgroup on this host")
    code, out, err = run(capsys, "-o", "json", "--interval", "0.05")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["node"]["cpu"]["usageCoreNanoSeconds"] > 0
    assert doc["node"]["memory"]["workingSetBytes"] > 0
    assert doc["node"]["cpu"]["usageNanoCores"] >= 0


# ---- the table: units, columns, filters, order ------------------------------------------------

KUBE_RESERVED = ("--kube-reserved-cgroup", "/kube-reserved", "--kube-reserved")


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("/")}


def test_table_shows_cores_and_mib_gib_under_one_token_headers(capsys, v2_tree):
    code, out, err = run(
        capsys, "--cgroupfs", v2_tree, "--interval", "0", *KUBE_RESERVED, "cpu=100m,memory=2Gi"
    )
    assert code == 0, err
    header, *_ = out.splitlines()
    assert header.split() == [
        "CGROUP", "ROLE", "CPU", "CPU-LIMIT", "CPU-RESERVED", "MEMORY", "MEMORY-LIMIT",
        "MEMORY-RESERVED", "PIDS", "THROTTLED", "FLAG",
    ]  # fmt: skip
    kr = _rows(out)["/kube-reserved"]
    # cpu.max "150000 100000" = 1.5 cores; 100m reserved; working set 8 MiB - 3 MiB inactive_file;
    # memory.max 16 MiB; 2Gi reserved; 2 of 10 periods throttled
    assert kr[2:10] == ["-", "1.500", "0.100", "5.0MiB", "16.0MiB", "2.00GiB", "4", "2/10"]
    assert _rows(out)["/kubepods"][3:7] == ["1.500", "-", "5.0MiB", "max"]


def test_help_explains_every_column(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    text = " ".join(out.split())
    explained = [line.split()[0] for line in out.splitlines() if line.startswith("    ")]
    for column in ("CGROUP", "ROLE", "CPU", "CPU-LIMIT", "CPU-RESERVED", "MEMORY", "MEMORY-LIMIT",
                   "MEMORY-RESERVED", "PIDS", "THROTTLED", "FLAG"):  # fmt: skip
        assert column in explained, column
    assert "MEMORY working set in MiB/GiB: usage - inactive_file, as the kubelet counts it" in text
    for option in ("--role", "--depth", "--sort-by", "--no-headers"):
        assert option in text


def test_no_headers_prints_rows_only_and_reasons_to_stderr(capsys, v2_tree):
    code, out, err = run(
        capsys, "--cgroupfs", v2_tree, "--interval", "0", "--no-headers",
        *KUBE_RESERVED, "memory=1Mi",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines and all(line.startswith("/") for line in lines)
    assert len(lines) == 7  # root, kubepods, 2 tiers, 2 pods, kube-reserved
    assert "kube-reserved /kube-reserved: memory working set" in err


@pytest.mark.parametrize(
    ("args", "paths"),
    [
        (["--role", "pod"], ["/kubepods/podaaaa-bbbb", "/kubepods/burstable/pod1111-2222"]),
        (["--role", "node,kube-reserved"], ["/", "/kube-reserved"]),
        (["--role", "qos"], ["/kubepods/burstable", "/kubepods/besteffort"]),
        (["--depth", "0"], ["/"]),
        (["--depth", "1"], ["/", "/kubepods", "/kube-reserved"]),
        (["--depth", "2", "--role", "pod"], ["/kubepods/podaaaa-bbbb"]),
    ],
)
def test_role_and_depth_filter_rows(capsys, v2_tree, args, paths):
    code, out, err = run(capsys, "--cgroupfs", v2_tree, "--interval", "0", *args,
                         "--kube-reserved-cgroup", "/kube-reserved")  # fmt: skip
    assert code == 0, err
    assert list(_rows(out)) == paths


def test_sort_by_memory_pids_name_role(capsys, v2_tree):
    pod = os.path.join(v2_tree, "kubepods/burstable/pod1111-2222")
    write_files(pod, {"memory.current": f"{10 * 2**20}\n", "pids.current": "99\n"})
    base = ("--cgroupfs", v2_tree, "--interval", "0", "--kube-reserved-cgroup", "/kube-reserved")
    order = {}
    for key in ("tree", "memory", "pids", "name", "role"):
        code, out, err = run(capsys, *base, "--sort-by", key)
        assert code == 0, err
        order[key] = list(_rows(out))
    assert order["tree"][:2] == ["/", "/kubepods"]
    # working sets: burstable pod 7 MiB; kubepods and kube-reserved tie at 5 MiB (path decides)
    # working sets: pod1111 7 MiB; kube-reserved and kubepods tie at 5 MiB, the root has 4 MiB,
    # the tiers and the other pod 1 MiB: ties are ordered by path
    assert order["memory"] == [
        "/kubepods/burstable/pod1111-2222", "/kube-reserved", "/kubepods", "/",
        "/kubepods/besteffort", "/kubepods/burstable", "/kubepods/podaaaa-bbbb",
    ]  # fmt: skip
    assert order["pids"][0] == "/kubepods/burstable/pod1111-2222"
    assert order["name"] == sorted(order["tree"])
    assert order["role"] == [
        "/", "/kubepods", "/kubepods/besteffort", "/kubepods/burstable",
        "/kubepods/burstable/pod1111-2222", "/kubepods/podaaaa-bbbb", "/kube-reserved",
    ]  # fmt: skip


def test_sort_by_cpu_puts_the_busiest_first(capsys, v2_tree, monkeypatch):
    """The burstable pod burns CPU between the two samples; it leads despite the tree order."""
    import time as _time

    real_sleep = _time.sleep

    def busy_pod(seconds: float) -> None:
        real_sleep(seconds)
        pod = os.path.join(v2_tree, "kubepods/burstable/pod1111-2222")
        write_files(pod, {"cpu.stat": "usage_usec 9000001\nnr_periods 10\nnr_throttled 2\n"})

    monkeypatch.setattr("cgalloc.cli.stats.time.sleep", busy_pod)
    code, out, err = run(capsys, "--cgroupfs", v2_tree, "--interval", "0.05", "--role", "pod",
                         "--sort-by", "cpu")  # fmt: skip
    assert code == 0, err
    assert list(_rows(out)) == ["/kubepods/burstable/pod1111-2222", "/kubepods/podaaaa-bbbb"]
    assert float(_rows(out)["/kubepods/burstable/pod1111-2222"][2]) > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--role", "pods"], "--role must be a comma-separated list of node, kubepods, qos, pod"),
        (["--depth", "-1"], "--depth must be a whole number of levels below the root"),
        (["-o", "json", "--role", "pod"], "--role shapes the table only; with -o json"),
        (["-o", "yaml", "--sort-by", "cpu"], "--sort-by shapes the table only; with -o yaml"),
        (["-o", "json", "--no-headers"], "--no-headers shapes the table only"),
    ],
)
def test_table_options_bad_input_exit_2(capsys, v2_tree, args, message):
    code, out, err = run(capsys, "--cgroupfs", v2_tree, "--interval", "0", *args)
    assert code == 2
    assert out == ""
    assert err.startswith(f"cgalloc: {message}")


# ---- --watch: timestamps, NDJSON, YAML stream, redraw on a terminal ---------------------------

RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_watch_table_titles_each_sample_with_an_rfc3339_time(capsys, v2_tree):
    import re

    code, out, _ = run(capsys, "--cgroupfs", v2_tree, "--watch", "0.05", "--count", "2")
    assert code == 0
    titles = [line for line in out.splitlines() if line.startswith("Every ")]
    assert len(titles) == 2
    for title in titles:
        assert re.fullmatch(rf"Every 0\.05s: cgalloc stats on \S+  {RFC3339}", title), title
    assert "\x1b[" not in out  # not a terminal: no redraw codes


def test_watch_json_is_one_compact_document_per_line(capsys, v2_tree):
    code, out, _ = run(
        capsys, "--cgroupfs", v2_tree, "--watch", "0.02", "--count", "3", "-o", "json"
    )
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 3  # NDJSON: no blank or separator lines
    docs = [json.loads(line) for line in lines]
    for doc in docs:
        assert set(doc) == {"node", "pods"}
        assert re.fullmatch(RFC3339, doc["node"]["cpu"]["time"])
    assert "usageNanoCores" not in docs[0]["node"]["cpu"]
    assert "usageNanoCores" in docs[1]["node"]["cpu"]


def test_watch_yaml_documents_are_separated_by_three_dashes(capsys, v2_tree):
    import yaml

    code, out, _ = run(
        capsys, "--cgroupfs", v2_tree, "--watch", "0.02", "--count", "2", "-o", "yaml"
    )
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert len(docs) == 2
    assert all(set(d) == {"node", "pods"} for d in docs)


def test_watch_on_a_terminal_redraws_in_place(v2_tree):
    """stdout is a pseudo-terminal: each frame starts with cursor-home + erase, nothing scrolls."""
    import pty
    import subprocess
    import sys

    primary, replica = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cgalloc", "stats", "--cgroupfs", v2_tree, "--watch", "0.05",
         "--count", "3"],
        stdin=subprocess.DEVNULL, stdout=replica, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(replica)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    screen = b"".join(chunks).decode().replace("\r\n", "\n")
    frames = screen.split("\x1b[H\x1b[2J")
    assert frames[0] == ""  # the first frame clears too
    assert len(frames) == 4
    for frame in frames[1:]:
        assert frame.startswith("Every 0.05s: cgalloc stats on ")
        assert frame.splitlines()[1].split()[:2] == ["CGROUP", "ROLE"]
        assert "\n\n" not in frame  # no blank separators when redrawing


def test_watch_json_reaches_a_pipe_sample_by_sample(v2_tree):
    """Each NDJSON line is flushed when its sample is taken: a reader of the pipe gets the first
    two documents while the watch (no --count) is still running."""
    import select
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "cgalloc", "stats", "--cgroupfs", v2_tree, "--watch", "0.1",
         "-o", "json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        docs = []
        for _ in range(2):
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, "no sample within 60 s"
            docs.append(json.loads(proc.stdout.readline()))
        assert proc.poll() is None  # still watching
        assert all(set(d) == {"node", "pods"} for d in docs)
    finally:
        proc.kill()
        proc.wait()


def test_watch_off_a_terminal_says_a_warning_once_while_it_holds(capsys, tmp_path):
    root = str(tmp_path)
    make_v2(root, "", usage=0)
    code, _, err = run(capsys, "--cgroupfs", root, "--watch", "0.01", "--count", "4", "-o", "json")
    assert code == 0
    assert err.splitlines() == [f"cgalloc: warning: kubepods: not found at {root}/kubepods"]


def test_without_cgroups_per_qos_no_qos_tiers_are_named(capsys, v2_tree):
    # pkg/kubelet/cm: with cgroupsPerQOS false the kubelet makes no QoS tiers, and their
    # systemd names (root + "-besteffort.slice") may be longer than systemd allows: stats raised
    # CgroupNameError (a traceback) for a 239-character root
    root = "/" + "a" * 239
    code, out, err = run(capsys, "--cgroupfs", v2_tree, "--cgroup-driver", "systemd",
                         "--cgroups-per-qos=false", "--enforce", "none", "--cgroup-root", root,
                         "--interval", "0", "-o", "json")  # fmt: skip
    assert code == 0, err
    assert "Traceback" not in err and "besteffort" not in err + out


@pytest.mark.parametrize(
    ("flag", "label"),
    [("--cgroup-root", "cgroupRoot (--cgroup-root)"), ("--kubelet-cgroups", "--kubelet-cgroups")],
)
def test_a_cgroup_past_path_max_is_bad_input(capsys, v2_tree, flag, label):
    # setup refuses it with the same sentence (kernel_ranges.name_problem); stats raised
    # OSError from the bulk read
    deep = "/" + "/".join(["a"] * 2100)
    code, out, err = run(capsys, "--cgroupfs", v2_tree, flag, deep, "--interval", "0")
    assert (code, out) == (2, ""), err
    assert err.startswith(f"cgalloc: {label}: the cgroup /a/a/a")
    assert "a path is at most 4095 (PATH_MAX)." in err and len(err.splitlines()) == 1


def test_a_one_shot_reads_cold_and_dates_only_the_read_it_shows(capsys, v2_tree, monkeypatch):
    # A one-shot (no --watch) never re-reads a kept fd: both reads of --interval N are cold.
    # Only the read whose document is printed takes the start times' dates; the table needs none.
    from cgalloc.ops import stats

    reads: list[bool] = []
    dates: list[object] = []
    read, start_times = stats.TreeReader.read, stats.start_times

    def spy_read(self, dirs, dated=False):
        reads.append(dated)
        return read(self, dirs, dated)

    def spy_start_times(h, paths, boot, got=None):
        dates.append(got)
        return start_times(h, paths, boot, got)

    monkeypatch.setattr(stats.TreeReader, "read", spy_read)
    monkeypatch.setattr(stats.TreeReader, "sample", lambda *a, **k: pytest.fail("sampler"))
    monkeypatch.setattr(stats, "start_times", spy_start_times)
    for output, interval, want in (("json", "0", [True]), ("yaml", "0.01", [False, True]),
                                   ("table", "0.01", [False, False])):  # fmt: skip
        reads.clear()
        dates.clear()
        code, _, err = run(capsys, "--cgroupfs", v2_tree, "-o", output, "--interval", interval)
        assert code == 0, err
        assert reads == want
        if output == "table":
            assert dates == []
        else:
            assert len(dates) == 1 and dates[0] is not None
            assert dates[0].by_mount.keys() == {v2_tree}


@pytest.mark.skipif(os.geteuid() != 0, reason="ownership by root needs root")
def test_json_finds_the_running_kubelets_cgroup(capsys, v2_tree, tmp_path, monkeypatch):
    # no kubeletCgroups: the kubelet reports its own cgroup (container_manager_linux.go
    # getContainer), found here in the node's /proc; no kube-reserved fallback
    import clirun
    from fakecgroup import FakeHost

    host = FakeHost(tmp_path)
    monkeypatch.setattr(clirun, "HOST", host)
    write_files(os.path.join(v2_tree, "system.slice/kubelet.service"), {"memory.current": "8\n"})
    args = ("--cgroupfs", v2_tree, "-o", "json", "--interval", "0",
            "--kube-reserved-cgroup", "/kube-reserved")  # fmt: skip
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert [c["name"] for c in json.loads(out)["node"]["systemContainers"]] == ["pods"]
    write_files(os.path.join(host.node_root, "proc/4242"),
                {"comm": "kubelet\n", "cgroup": "0::/system.slice/kubelet.service\n"})  # fmt: skip
    code, out, err = run(capsys, *args)
    assert code == 0, err
    [kubelet, _] = json.loads(out)["node"]["systemContainers"]
    assert kubelet["name"] == "kubelet" and kubelet["memory"]["usageBytes"] == 8


def test_the_table_loads_none_of_the_summary():
    # the document's modules (cli/stats_summary.py and what it reads with) load for -o json only
    wanted = "('summary', 'fsstats', 'podlogs')"
    code = ("import sys; import cgalloc.cli.stats; "
            f"print(sorted(m for m in sys.modules if m.endswith({wanted})))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
