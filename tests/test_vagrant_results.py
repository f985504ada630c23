"""vagrant/results.py: raw provisioning output from the VMs → results/<machine>.json + markdown."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

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
    """The reboot checks per machine and the ordering evidence of provision.sh's step."""
    order = "cgalloc-setup.service active at 9000000 us\nkubelet.service started at 9100000 us"
    for machine, ok in (("v2", True), ("v1", False)):
        d = tmp_path / "raw" / machine
        d.mkdir(parents=True)
        steps = [
            {"step": "boot: verify before the reboot", "ok": True, "rc": 0, "seconds": 1.0,
             "detail": ""},
            {"step": "reboot: cgalloc-setup.service succeeded", "ok": True, "rc": 0,
             "seconds": 1.0, "detail": "Result=success"},
            {"step": results.ORDER_STEP, "ok": ok, "rc": 0 if ok else 1, "seconds": 1.0,
             "detail": order},
        ]  # fmt: skip
        doc = {"status": "passed" if ok else "failed", "passed": 2, "failed": int(not ok),
               "steps": steps}  # fmt: skip
        (d / "provision.json").write_text(json.dumps(doc))
    assert results.main([str(tmp_path / "raw"), str(tmp_path / "out"), "v2", "v1"]) == 1
    md = (tmp_path / "out" / "results.md").read_text()
    assert "| cgalloc-setup.service succeeded | ok | ok |" in md
    assert "| setup finished before the stand-in daemons started | ok | FAILED |" in md
    assert "verify before the reboot" not in md.split("real reboot")[1]
    for machine in ("v2", "v1"):
        assert f"{machine}, monotonic clock after the boot:\n```\n{order}\n```" in md


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
