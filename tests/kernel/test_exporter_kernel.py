"""`cgalloc exporter` on a real tree, scraped by a real Prometheus (Debian's package, the host's
binary seen through the lane's read-only root), both on the VM's loopback: the tree is the one
setup made on this kernel, with a process holding 32 MiB in the BestEffort tier. Prometheus'
view equals the kernel's: Allocatable as computed, the tier's working set as its memory files
give it, and its memory pressure series (PSI) present. The host test
(tests/ops/test_exporter_prometheus.py) covers the same path on a fake tree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from promclient import query, stop

from kernel.test_setup_kernel import NODE, PLANNED, cgalloc, listing
from kernel.util import CGROUP_ROOT, read, read_keyed

LANES = ("v2",)  # PSI and the unified tree; the cgroup v1 reads are covered by test_stats_kernel

PROMETHEUS = shutil.which("prometheus")
MIB = 1 << 20
TIER = "kubepods/besteffort"
# Moved into the tier first, then it allocates: memory is charged where it is touched.
HOLDER = (
    "import sys\n"
    "sys.stdin.readline()\n"
    "held = bytearray(32 * 1024 * 1024)\n"
    "for i in range(0, len(held), 4096): held[i] = 1\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
)


def working_set(path: Path) -> int:
    inactive = read_keyed(path / "memory.stat")["inactive_file"]
    return max(0, int(read(path / "memory.current")) - inactive)


@pytest.mark.skipif(
    not PROMETHEUS, reason="prometheus not installed on the host (.ci/install-test-deps)"
)
def test_prometheus_scrapes_the_real_tree_as_the_kernel_has_it(tmp_path):
    # the lane's VM has no network device: loopback only, brought up here
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=60)
    before = listing()
    state = ["--state-dir", str(tmp_path / "state")]
    done = cgalloc("setup", *NODE, "--enforce", "pods", *state)
    assert done.returncode == 0, done.stdout + done.stderr
    procs: list[subprocess.Popen] = []
    try:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        procs.append(holder)
        (CGROUP_ROOT / TIER / "cgroup.procs").write_text(str(holder.pid))
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "ready"

        exporter = subprocess.Popen(
            [*PLANNED, "exporter", *NODE, "--listen", "127.0.0.1:0", *state],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(exporter)
        line = exporter.stderr.readline()
        m = re.search(r"http://(127\.0\.0\.1:\d+)/metrics", line)
        assert m, line
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n"
            "scrape_configs:\n- job_name: cgalloc\n"
            f"  static_configs:\n  - targets: ['{m.group(1)}']\n"
        )
        log = tmp_path / "prometheus.log"
        with log.open("wb") as out:
            prom = subprocess.Popen(
                [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'data'}",
                 "--web.listen-address=127.0.0.1:9090", "--log.level=warn"],
                stdout=out, stderr=out, cwd=tmp_path,
            )  # fmt: skip
        procs.append(prom)
        base = "http://127.0.0.1:9090"
        deadline = time.monotonic() + 300  # a Go TSDB starting under TCG
        alloc: list = []
        while time.monotonic() < deadline and not alloc:
            assert prom.poll() is None, log.read_text()[-2000:]
            try:
                alloc = query(base, 'cgalloc_node_allocatable{resource="memory"}')
            except OSError:
                time.sleep(1)
        assert alloc, log.read_text()[-2000:]
        # 600Mi capacity (tests/kernel/planned.py) − 150Mi − 150Mi − the 1Mi hard eviction
        assert float(alloc[0]["value"][1]) == (600 - 150 - 150 - 1) * MIB

        [seen] = query(base, f'container_memory_working_set_bytes{{id="/{TIER}"}}')
        kernel = working_set(CGROUP_ROOT / TIER)
        assert float(seen["value"][1]) >= 32 * MIB
        # the holder is idle: only the kernel's own bookkeeping moves between the two reads
        assert abs(float(seen["value"][1]) - kernel) <= 2 * MIB, (seen, kernel)
        assert query(base, f'container_pressure_memory_waiting_seconds_total{{id="/{TIER}"}}')
    finally:
        for proc in reversed(procs):
            if proc is procs[0] and proc.poll() is None:
                proc.stdin.write("done\n")
                proc.stdin.flush()
            stop(proc, timeout=30)
        down = cgalloc("teardown", *state)
        assert down.returncode == 0, down.stdout + down.stderr
    assert listing() == before
