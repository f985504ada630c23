"""vagrant/results.py: raw provisioning output from the VMs → results/<machine>.json + markdown."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from clirun import run_cli
from exportertree import MI, window, write_history

SCRIPT = Path(__file__).resolve().parent.parent / "vagrant" / "results.py"
spec = importlib.util.spec_from_file_location("vagrant_results", SCRIPT)
results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results)

BENCH_TXT = """\
bench/bench_setup.py ....s                                                [100%]
-------------------- benchmark: 4 tests --------------------
Name (time in s)        Min
test_cgalloc_cold     5.7000
========== cgroup read cost, 1000 pods x 3 containers ==========
== real v1 cgroupfs (this host)
  core cold, 1 thread   6825
========== setup of a tree with 1000 pod cgroups (real cgroupfs) ==========
contender      best
cgalloc cold   5700.0 ms
=========================== short test summary info ============================
SKIPPED [1] bench/bench_setup.py:307: cgcreate/cgset not installed
4 passed, 1 skipped in 99.00s
"""


def _raw(tmp_path: Path, machine: str, failed_step: bool) -> None:
    d = tmp_path / "raw" / machine
    d.mkdir(parents=True)
    steps = [{"step": "cgroupfs: setup", "ok": True, "rc": 0, "seconds": 1.5, "detail": ""}]
    if failed_step:
        steps.append(
            {
                "step": "systemd: verify",
                "ok": False,
                "rc": 1,
                "seconds": 2.0,
                "detail": "drift: 1 differences",
            }
        )
    doc = {
        "machine": machine,
        "cgroupfs_type": "tmpfs",
        "kernel": "6.1.0-28-amd64",
        "systemd": "systemd 252 (252.33-1~deb12u1)",
        "status": "failed" if failed_step else "passed",
        "passed": 1,
        "failed": int(failed_step),
        "seconds": 300,
        "steps": steps,
    }
    (d / "provision.json").write_text(json.dumps(doc))
    bench = {
        "benchmarks": [
            {
                "fullname": "bench/bench_setup.py::test_cgalloc_cold",
                "stats": {"min": 5.7, "mean": 6.0, "rounds": 1},
            },
            {
                "fullname": "bench/bench_read.py::test_core_cold[real v1-1]",
                "stats": {"min": 0.0123, "mean": 0.013, "rounds": 5},
            },
        ]
    }
    (d / "bench.json").write_text(json.dumps(bench))
    (d / "bench.txt").write_text(BENCH_TXT)


def test_machine_files_and_table(tmp_path):
    _raw(tmp_path, "v2", failed_step=False)
    _raw(tmp_path, "v1", failed_step=True)
    rc = results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v2", "v1"])
    assert rc == 1  # v1 failed
    v1 = json.loads((tmp_path / "out" / "v1.json").read_text())
    assert v1["status"] == "failed"
    assert v1["bench"][1] == {
        "name": "test_core_cold[real v1-1]",
        "file": "bench/bench_read.py",
        "min_s": 0.0123,
        "mean_s": 0.013,
        "rounds": 5,
    }
    assert v1["bench_tables"] == [
        "========== cgroup read cost, 1000 pods x 3 containers ==========",
        "== real v1 cgroupfs (this host)",
        "  core cold, 1 thread   6825",
        "========== setup of a tree with 1000 pod cgroups (real cgroupfs) ==========",
        "contender      best",
        "cgalloc cold   5700.0 ms",
    ]
    md = (tmp_path / "out" / "results.md").read_text()
    assert (
        "| v1 | tmpfs | 6.1.0-28-amd64 | systemd 252 (252.33-1~deb12u1) | 1 | 1 | failed | 300 |"
        in md
    )
    assert "**v1 failed at `systemd: verify`** (exit 1):" in md
    assert "| `test_cgalloc_cold` | 5.70 s | 5.70 s |" in md
    assert "| `test_core_cold[real v1-1]` | 12.3 ms | 12.3 ms |" in md


def test_missing_machine_counts_as_failed(tmp_path):
    (tmp_path / "raw").mkdir()
    rc = results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v1"])
    assert rc == 1
    v1 = json.loads((tmp_path / "out" / "v1.json").read_text())
    assert (v1["status"], v1["passed"], v1["failed"], v1["bench"]) == ("missing", 0, 1, [])


def test_reboot_checks_side_by_side(tmp_path):
    """The reboot checks per machine and the ordering evidence of the kubelet's step 7a."""
    order = "cgalloc-setup.service active at 9000000 us\nkubelet.service started at 9100000 us"
    for machine, ok in (("v2", True), ("v1", False)):
        d = tmp_path / "raw" / machine
        d.mkdir(parents=True)
        steps = [
            {"step": "systemd: verify in sync", "ok": True, "rc": 0, "seconds": 1.0,
             "detail": ""},
            {"step": "reboot: cgalloc-setup.service succeeded", "ok": True, "rc": 0,
             "seconds": 1.0, "detail": "Result=success"},
            {"step": "reboot: kubelet and containerd in /kube.slice after boot", "ok": ok,
             "rc": 0 if ok else 1, "seconds": 1.0, "detail": ""},
            {"step": f"kubelet/{machine}-cgroupfs 7a: the boot unit finished first", "ok": True,
             "rc": 0, "seconds": 1.0, "detail": order},
        ]  # fmt: skip
        doc = {"status": "passed" if ok else "failed", "passed": 3, "failed": int(not ok),
               "steps": steps}  # fmt: skip
        (d / "provision.json").write_text(json.dumps(doc))
    assert results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v2", "v1"]) == 1
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| cgalloc-setup.service succeeded | ok | ok |" in md
    assert "| kubelet and containerd in /kube.slice after boot | ok | FAILED |" in md
    assert "verify in sync" not in md.split("real reboot")[1]
    for machine in ("v2", "v1"):
        assert f"{machine}, monotonic clock after the boot:\n```\n{order}\n```" in md


def _kubelet_step(config: str, step_id: str, title: str, ok: bool, detail: str = "") -> dict:
    return {"step": f"kubelet/{config} {step_id}: {title}", "ok": ok, "rc": 0 if ok else 1,
            "seconds": 12.0, "detail": detail}  # fmt: skip


def test_kubelet_steps_table_and_evidence(tmp_path):
    """Each kubelet step is a row, each guest and driver a column; a failed step's evidence is
    under its configuration, not among the cgalloc-only failures; the evidence files, the
    kubelet's version and hash travel to the output."""
    d = tmp_path / "raw" / "v1"
    (d / "kubelet" / "v1-systemd").mkdir(parents=True)
    steps = [
        _kubelet_step("v1", "prep", "the kubelet binary", True),
        _kubelet_step("v1-cgroupfs", "1", "refuses to start", True, "log: Failed to start"),
        _kubelet_step("v1-cgroupfs", "3", "verify exits 0", True),
        _kubelet_step("v1-systemd", "1", "refuses to start", True),
        _kubelet_step("v1-systemd", "3", "verify exits 0", False, "kubepods pids.max differs"),
        _kubelet_step("v1-systemd", "10", "cost", True),
        _kubelet_step("v1-systemd", "6a", "OOM-killed", True),
    ]
    doc = {"status": "failed", "passed": 6, "failed": 1, "steps": steps}
    (d / "provision.json").write_text(json.dumps(doc))
    (d / "kubelet-version").write_text("Kubernetes v1.20.2\n")
    (d / "kubelet-sha256").write_text("c3c1\n")
    (d / "kubelet-cgalloc-flags").write_text("--kubelet-version\n1.20\n")
    (d / "kubelet" / "v1-systemd" / "show.json").write_text("{}")
    assert results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v1"]) == 1
    md = (tmp_path / "out" / "results.md").read_text()
    assert "Upstream kubelet `Kubernetes v1.20.2`, sha256 `c3c1`" in md
    assert "cgalloc's flag for its minor: --kubelet-version 1.20." in md
    assert "| step | v1 (guest) | v1-cgroupfs | v1-systemd |" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "|---" not in line]
    kubelet_rows = rows[rows.index("| step | v1 (guest) | v1-cgroupfs | v1-systemd |") + 1 :]
    assert kubelet_rows == [
        "| prep the kubelet binary | ok | - | - |",
        "| 1 refuses to start | - | ok | ok |",
        "| 3 verify exits 0 | - | ok | FAILED |",
        "| 6a OOM-killed | - | - | ok |",
        "| 10 cost | - | - | ok |",
    ]
    assert "failed at `kubelet/" not in md
    assert "<summary>3 verify exits 0: FAILED (exit 1), 12 s</summary>" in md
    assert "kubepods pids.max differs" in md
    v1 = json.loads((tmp_path / "out" / "v1.json").read_text())
    assert v1["kubelet"]["cgalloc_flags"] == ["--kubelet-version", "1.20"]
    assert (tmp_path / "out" / "kubelet" / "v1" / "v1-systemd" / "show.json").read_text() == "{}"


def test_failed_bench_rows_are_named(tmp_path):
    """provision.sh's bench-failed.txt (the rows python -m bench reported failed) is carried into
    the machine's JSON and shown in the table, apart from the suites the CI bound cut."""
    d = tmp_path / "raw" / "v2"
    d.mkdir(parents=True)
    doc = {"status": "failed", "passed": 3, "failed": 1, "steps": []}
    (d / "provision.json").write_text(json.dumps(doc))
    failed = (
        "python -m bench --suites setup: exit 1\n"
        "setup of 100 pods, real cgroupfs: cgalloc setup, cold: failed: AssertionError: 2\n"
    )
    (d / "bench-failed.txt").write_text(failed)
    cut = "python -m bench --trees real: stopped after 300 s (CI bound)"
    (d / "bench-cut.txt").write_text(cut + "\n")
    assert results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v2"]) == 1
    v2 = json.loads((tmp_path / "out" / "v2.json").read_text())
    assert v2["bench_failed"] == failed.splitlines()
    assert v2["bench_cut"] == [cut]
    md = (tmp_path / "out" / "results.md").read_text()
    assert (
        "**Benchmarks FAILED on v2:**\n\n- python -m bench --suites setup: exit 1\n"
        "- setup of 100 pods, real cgroupfs: cgalloc setup, cold: failed: AssertionError: 2\n"
    ) in md


STEPS_SCRIPT = SCRIPT.parent / "kubelet" / "steps.py"
steps_spec = importlib.util.spec_from_file_location("vagrant_kubelet_steps", STEPS_SCRIPT)
ksteps = importlib.util.module_from_spec(steps_spec)
steps_spec.loader.exec_module(ksteps)


def test_show_predictions_as_the_kernel_names_the_files():
    """vagrant/kubelet/steps.py: `show --pods -o json` entries -> the pod cgroup files."""
    guaranteed = {"cpuShares": "204", "cpuQuota": "20000/100000", "memory": "67108864",
                  "pid": "1024", "hugepages-2Mi": "4Mi"}  # fmt: skip
    assert ksteps.expected_files(guaranteed, "v2") == {
        "cpu.weight": "8",
        "cpu.max": "20000 100000",
        "memory.max": "67108864",
        "pids.max": "1024",
        "hugetlb.2MB.max": "4194304",
        "hugetlb.1GB.max": None,  # show predicts nothing for it
    }
    burstable = {"cpuShares": "102", "cpuQuota": "-", "memory": "100663296"}
    assert ksteps.expected_files(burstable, "v1") == {
        "cpu/cpu.shares": "102",
        "cpu/cpu.cfs_quota_us": "-1",
        "memory/memory.limit_in_bytes": "100663296",
        "pids/pids.max": None,
        "hugetlb/hugetlb.2MB.limit_in_bytes": None,
        "hugetlb/hugetlb.1GB.limit_in_bytes": None,
    }
    files = {"files": {"cpu.weight": 4, "pids.max": "1024"}}
    assert ksteps.expected_files(files, "v2") == {"cpu.weight": "4", "pids.max": "1024"}
    # runc rc92's conversion: 2 -> 1, 1024 -> 39, 262144 -> 10000
    assert [ksteps.shares_to_weight(s) for s in (2, 1024, 262144)] == [1, 39, 10000]


def test_compare_pods_reads_each_file(tmp_path):
    pod = tmp_path / "kubepods" / "podu1"
    pod.mkdir(parents=True)
    for name, value in (("cpu.weight", "8"), ("cpu.max", "20000 100000"),
                        ("memory.max", "67108864"), ("pids.max", "1024")):  # fmt: skip
        (pod / name).write_text(value + "\n")
    pod_entry = {"pod": "default/g", "qos": "Guaranteed", "cgroup": "/kubepods/podu1",
                 "cpuShares": "204", "cpuQuota": "20000/100000", "memory": "67108864"}  # fmt: skip
    show = {"pods": [pod_entry]}
    lines, bad = ksteps.compare_pods(show, "v2", str(tmp_path))
    assert bad == 1  # pids.max: show predicts nothing
    assert "default/g Guaranteed /kubepods/podu1 cpu.weight: show 8 kubelet 8: same" in lines
    assert any(
        "pids.max: show None kubelet 1024: DIFFERS: show predicts nothing" in x for x in lines
    )
    assert any("hugetlb.2MB.max: show None kubelet None: absent" in x for x in lines)
    show["pods"][0]["cgroup"] = "/kubepods/podu2"
    lines, bad = ksteps.compare_pods(show, "v2", str(tmp_path))
    assert bad == 1 and "no pod cgroup at /kubepods/podu2" in lines[0]


def _summary(ws: int, cpu_ns: int, when: str, **extra) -> dict:
    stat = {"cpu": {"time": when, "usageCoreNanoSeconds": cpu_ns},
            "memory": {"time": when, "workingSetBytes": ws}}  # fmt: skip
    pod = {"podRef": {"uid": "u1", **extra.get("ref", {})}, **stat,
           "containers": extra.get("containers", [])}  # fmt: skip
    node = {"nodeName": "n", **stat, "rlimit": {"maxpid": 4194304}, "network": {},
            "systemContainers": [{"name": "pods", **stat}], **extra.get("node", {})}  # fmt: skip
    return {"node": node, "pods": [pod]}


def test_summary_comparison_and_its_tolerances():
    container = {"name": "main", "cpu": {"usageCoreNanoSeconds": 5},
                 "memory": {"workingSetBytes": 4096}}  # fmt: skip
    fs = {"fs": {"capacityBytes": 1, "inodes": 2}, "runtime": {"imageFs": {}}}
    full = {"ref": {"name": "g-n", "namespace": "default"}, "containers": [container], "node": fs}
    kubelet = _summary(50 << 20, 10**9, "2026-11-28T10:00:00Z", **full)
    # 10 s later: +1.5 s of CPU fits 2 CPUs x (10 s + 2 s); the working set moved by 512 KiB
    same = _summary((50 << 20) + (512 << 10), 10**9 + 15 * 10**8, "2026-11-28T10:00:10Z", **full)
    lines, bad = ksteps.compare_summary(kubelet, same, cpus=2)
    assert bad == 0, lines
    # what cgalloc lacks today: names, containers, node.fs, imageFs
    lines, bad = ksteps.compare_summary(
        kubelet, _summary(50 << 20, 10**9, "2026-11-28T10:00:00Z"), cpus=2
    )
    assert "DIFFERS: pod default/g-n podRef.name: kubelet g-n cgalloc None" in lines
    assert "DIFFERS: pod default/g-n containers: kubelet ['main'] cgalloc []" in lines
    assert bad == 5  # name, namespace, containers, node.fs, imageFs
    assert "DIFFERS: node.fs present: kubelet True cgalloc False" in lines
    assert "DIFFERS: node.runtime.imageFs present: kubelet True cgalloc False" in lines
    # a counter behind the kubelet's sample taken earlier, or past what 2 CPUs can do
    behind = _summary(50 << 20, 10**9 - 5 * 10**9, "2026-11-28T10:00:10Z", **full)
    assert ksteps.compare_summary(kubelet, behind, cpus=2)[1] >= 1
    # the kubelet's sample is the newer one (taken at the request): cgalloc's may be behind it
    newer = _summary(50 << 20, 10**9 + 6 * 10**9, "2026-11-28T10:00:14Z", **full)
    assert ksteps.compare_summary(newer, same, cpus=2)[1] == 0
    ahead = _summary(50 << 20, 10**9 + 25 * 10**9, "2026-11-28T10:00:10Z", **full)
    assert ksteps.compare_summary(kubelet, ahead, cpus=2)[1] >= 1


def _role(ok: bool) -> dict:
    run = {"name": "apply", "seconds": 90, "rc": 0, "recap": {"changed": 4, "failed": 0},
           "changedTasks": ["Install cgalloc"]}  # fmt: skip
    steps = [
        {"step": "ansible role: run 'apply' succeeded", "ok": True, "rc": 0, "seconds": 0.0,
         "detail": ""},
        {"step": "ansible role: cgalloc verify exits 0", "ok": ok, "rc": 0 if ok else 1,
         "seconds": 0.0, "detail": "" if ok else "drift: kube.slice memory.max"},
    ]  # fmt: skip
    return {"host": "v2", "seconds": 240, "runs": [run], "steps": steps}


def test_the_roles_checks_join_the_machines_steps_and_a_failed_one_fails_it(tmp_path):
    _raw(tmp_path, "v2", failed_step=False)
    _raw(tmp_path, "v1", failed_step=False)
    (tmp_path / "raw/v2/role.json").write_text(json.dumps(_role(ok=False)))
    (tmp_path / "raw/v1/role.json").write_text(json.dumps(_role(ok=True)))
    rc = results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v2", "v1"])
    assert rc == 1
    v2 = json.loads((tmp_path / "out/v2.json").read_text())
    v1 = json.loads((tmp_path / "out/v1.json").read_text())
    assert (v2["status"], v2["passed"], v2["failed"]) == ("failed", 2, 1)
    assert (v1["status"], v1["passed"], v1["failed"]) == ("passed", 3, 0)
    md = (tmp_path / "out/results.md").read_text()
    assert "The Ansible role (deploy/ansible) against v2, over SSH from the host (240 s):" in md
    assert "| apply | 90 | 0 | 4 | Install cgalloc |" in md
    assert "| cgalloc verify exits 0 | FAILED |" in md
    assert "**v2 failed at `ansible role: cgalloc verify exits 0`** (exit 1):" in md


def test_a_machine_without_a_role_run_has_no_role_section(tmp_path):
    _raw(tmp_path, "v2", failed_step=False)
    assert results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v2"]) == 0
    assert "Ansible role" not in (tmp_path / "out/results.md").read_text()


def test_scrape_costs_are_ratios_of_the_median_cpu_per_scrape():
    """vagrant/kubelet/steps.py step 10: the exporter's CPU per scrape against each of the
    kubelet's endpoints is the ratio of the medians; the idle ratio, of the window's CPU."""
    scrapes = {
        "/metrics/cadvisor": [(0.5, 0.20, 900), (0.4, 0.10, 900), (0.6, 0.30, 901)],
        "/metrics/resource": [(0.1, 0.02, 40), (0.1, 0.05, 40), (0.1, 0.04, 40)],
        "exporter": [(0.2, 0.06, 300), (0.2, 0.02, 300), (0.2, 0.04, 300)],
    }
    doc: dict = {}
    lines = ksteps._scrape_costs(doc, scrapes, 3.0, 0.3, 30.0)
    assert doc["exporter_scrape_cpu_ratio /metrics/cadvisor"] == 0.2  # 0.04 / 0.20
    assert doc["exporter_scrape_cpu_ratio /metrics/resource"] == 1.0  # 0.04 / 0.04
    assert doc["exporter_idle_vs_kubelet_ratio"] == 0.1
    assert doc["scrape /metrics/cadvisor"]["series"] == 901
    assert "  /metrics/cadvisor: 500 ms wall, 200 ms of the kubelet's CPU, 901 series" in lines
    assert ksteps._scrape_costs({}, {}, 3.0, 0.3, 30.0) == []


def test_recommend_covers_checks_the_recommendation_against_the_window(tmp_path, capsys):
    """vagrant/kubelet/steps.py recommend-covers (the kubelet step 12) on what the real
    `cgalloc recommend -o json` gives for the worked example's window (docs/recommend.md): kube
    working set peak 200 MiB over 30 minutes."""
    path = tmp_path / "h.jsonl"
    write_history(path, window())
    code, out, err = run_cli(
        capsys, "recommend", "--history", str(path), "--capacity", "cpu=4,memory=16Gi", "-o", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    lines, bad = ksteps.recommend_covers(doc, 150 * MI, 160 * MI)
    assert bad == 0, lines
    assert "ok: kubeReserved memory 200Mi = 209715200 >= the largest working set seen" in lines[1]
    # a load bigger than the recorder saw, or than the kernel's high-water mark
    lines, bad = ksteps.recommend_covers(doc, 250 * MI, 300 * MI)
    assert bad == 1 and lines[-3].startswith("NOT: the recorder saw the load")
    _, bad = ksteps.recommend_covers(doc, 150 * MI, 100 * MI)
    assert bad == 1
    # a recommendation below the peak, a window shorter than asked
    low = json.loads(out)
    low["recommendation"]["kubeReserved"]["memory"] = "199Mi"
    low["recommendation"]["systemReserved"]["cpu"] = "40m"  # p99 is 0.05 core
    lines, bad = ksteps.recommend_covers(low, 150 * MI, 160 * MI, min_seconds=3600)
    assert bad == 3, lines
    assert [x.split(":")[0] for x in lines].count("NOT") == 3
    assert lines[6].startswith("NOT: systemReserved cpu 40m >= 0.050 cores"), lines
    assert ksteps.cores("360m") == 0.36 and ksteps.cores("2") == 2
    with pytest.raises(ValueError):
        ksteps.cores("1.5")
