"""A real Prometheus (Debian's ``prometheus`` package) scrapes `cgalloc exporter` on loopback:
``promtool check metrics`` passes on what it serves, and recording rules over the scraped series
give the values of the fake tree this test made. Both processes bind 127.0.0.1 only and are
ended by their pid. Skipped, with the reason, where the binaries are missing
(``.ci/install-test-deps`` installs them for CI)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time

import pytest
from exportertree import KUBE_ARGS, POD_UID, make_node
from promclient import get, query, stop

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    not (PROMETHEUS and PROMTOOL),
    reason="prometheus/promtool not installed (apt-get install prometheus; .ci/install-test-deps)",
)

MIB = 2**20
RATE = 'rate(container_pressure_memory_waiting_seconds_total{id="/kube.slice"}[1m])'
RULES = """groups:
- name: cgalloc-test
  rules:
  - record: cgalloc:reserved_working_set_bytes:sum
    expr: sum(container_memory_working_set_bytes{id=~"/kube.slice|/system.slice"})
  - record: cgalloc:reserved_cgroup_alerts:sum
    expr: sum(cgalloc_reserved_cgroup_alert)
  - record: cgalloc:allocatable_memory_bytes
    expr: cgalloc_node_allocatable{resource="memory"}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def exporter_url(tmp_path):
    node = make_node(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cgalloc", "exporter", "--cgroupfs", node["root"], *KUBE_ARGS,
         "--listen", "127.0.0.1:0", "--state-dir", "", "--pod-log-dir", node["logs"]],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        m = re.search(r"http://(127\.0\.0\.1:\d+)/metrics", line)
        assert m, line
        yield m.group(1)
    finally:
        stop(proc)


def test_promtool_checks_what_the_exporter_serves(exporter_url):
    body = get(f"http://{exporter_url}/metrics")
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


def test_prometheus_scrapes_and_records_the_trees_values(exporter_url, tmp_path):
    port = free_port()
    (tmp_path / "rules.yml").write_text(RULES)
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files: [rules.yml]\n"
        "scrape_configs:\n- job_name: cgalloc\n"
        f"  static_configs:\n  - targets: ['{exporter_url}']\n"
    )
    check = subprocess.run([PROMTOOL, "check", "config", str(tmp_path / "prometheus.yml")],
                           capture_output=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--log.level=warn"],
        stdout=log, stderr=log, cwd=tmp_path,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        recorded: list = []
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                recorded = query(base, "cgalloc:reserved_working_set_bytes:sum")
                rate = query(base, RATE)
            except OSError:
                recorded = rate = []
            if recorded and rate:  # a rate needs two scrapes
                break
            time.sleep(0.5)
        assert recorded, (tmp_path / "prometheus.log").read_text()[-2000:]
        # kube.slice 20 MiB − 3 MiB inactive_file, system.slice 8 MiB − 3 MiB
        assert float(recorded[0]["value"][1]) == (20 - 3 + 8 - 3) * MIB
        [up] = query(base, 'up{job="cgalloc"}')
        assert up["value"][1] == "1"
        # kube.slice: memory pressure, near its 16Mi memory.max and over its 16Mi reservation
        [alerts] = query(base, "cgalloc:reserved_cgroup_alerts:sum")
        assert alerts["value"][1] == "3"
        [alloc] = query(base, "cgalloc:allocatable_memory_bytes")
        assert float(alloc["value"][1]) == 8 * 2**30 - 2**30 - 16 * MIB - 100 * MIB
        [pod] = query(base, f'container_threads{{id="/kubepods/burstable/pod{POD_UID}"}}')
        assert pod["metric"]["pod"] == "web-0" and pod["metric"]["namespace"] == "default"
        assert pod["value"][1] == "4"
        [pressure] = query(base, RATE)
        assert float(pressure["value"][1]) == 0.0  # the fake tree's counter stands still
    finally:
        stop(proc)
        log.close()
