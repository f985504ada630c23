"""Fake cgroup directories with the files stats reads (v1 and v2), and fake sysfs network
counters, for the stats, exporter and CLI tests."""

from __future__ import annotations

import os

V1_MEMORY_STAT = (
    "cache 4096\nrss 8192\ninactive_file 4096\npgfault 5\npgmajfault 1\n"
    "hierarchical_memory_limit 9223372036854771712\n"
    "total_cache 1048576\ntotal_rss 2097152\ntotal_inactive_file 3145728\n"
    "total_pgfault 777\ntotal_pgmajfault 9\n"
)


V2_MEMORY_STAT = (
    "anon 2097152\nfile 5242880\nkernel 65536\ninactive_anon 0\nactive_anon 2097152\n"
    "inactive_file 3145728\nactive_file 2097152\npgfault 1234\npgmajfault 56\n"
)


def write_files(base: str, files: dict[str, str]) -> None:
    os.makedirs(base, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(base, name), "w") as f:
            f.write(text)


def make_v1(root: str, rel: str, usage: int, stat: str = V1_MEMORY_STAT) -> None:
    write_files(
        os.path.join(root, "memory", rel),
        {
            "memory.usage_in_bytes": f"{usage}\n",
            "memory.limit_in_bytes": "9223372036854771712\n",
            "memory.stat": stat,
        },
    )
    write_files(
        os.path.join(root, "cpu", rel),
        {
            "cpu.stat": "nr_periods 40\nnr_throttled 3\nthrottled_time 123456789\n"
            "nr_bursts 0\nburst_time 0\n",
            "cpu.shares": "1024\n",
            "cpu.cfs_quota_us": "-1\n",
            "cpu.cfs_period_us": "100000\n",
        },
    )
    write_files(os.path.join(root, "cpuacct", rel), {"cpuacct.usage": "987654321000\n"})
    write_files(os.path.join(root, "pids", rel), {"pids.current": "17\n", "pids.max": "max\n"})


def make_v2(root: str, rel: str, usage: int, memory_max: str = "max") -> None:
    write_files(
        os.path.join(root, rel),
        {
            "cgroup.controllers": "cpu memory pids\n",
            "memory.current": f"{usage}\n",
            "memory.max": f"{memory_max}\n",
            "memory.stat": V2_MEMORY_STAT,
            "cpu.stat": "usage_usec 5000001\nuser_usec 4000000\nsystem_usec 1000001\n"
            "nr_periods 10\nnr_throttled 2\nthrottled_usec 7\n",
            "cpu.weight": "39\n",
            "cpu.max": "150000 100000\n",
            "pids.current": "4\n",
            "pids.max": "1024\n",
        },
    )


def fake_sysfs_net(root, counters: dict[str, dict[str, int]]) -> str:
    for iface, values in counters.items():
        write_files(
            os.path.join(root, iface, "statistics"), {k: f"{v}\n" for k, v in values.items()}
        )
    return str(root)
