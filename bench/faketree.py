"""A kubepods tree of plain files that looks like cgroupfs, for benchmarks.

The layout is the cgroupfs driver's: ``kubepods/{burstable,besteffort}/pod<uid>/<container>``
and Guaranteed pods directly under ``kubepods``. File contents have the keys, order and size of
a 6.x kernel's (v1 ``memory.stat`` with its ``total_*`` half, v2 ``memory.stat`` with ~45 keys),
so parsing costs what it costs on a real node.
"""

from __future__ import annotations

import os
import random

_V1_KEYS = (
    "cache rss rss_huge shmem mapped_file dirty writeback workingset_refault_anon "
    "workingset_refault_file swap swapcached pgpgin pgpgout pgfault pgmajfault inactive_anon "
    "active_anon inactive_file active_file unevictable"
)
_V2_KEYS = (
    "anon file kernel kernel_stack pagetables sec_pagetables percpu sock vmalloc shmem zswap "
    "zswapped file_mapped file_dirty file_writeback swapcached anon_thp file_thp shmem_thp "
    "inactive_anon active_anon inactive_file active_file unevictable slab_reclaimable "
    "slab_unreclaimable slab workingset_refault_anon workingset_refault_file "
    "workingset_activate_anon workingset_activate_file workingset_restore_anon "
    "workingset_restore_file workingset_nodereclaim pgscan pgsteal pgscan_kswapd pgscan_direct "
    "pgsteal_kswapd pgsteal_direct pgfault pgmajfault pgrefill pgactivate pgdeactivate "
    "pglazyfree pglazyfreed thp_fault_alloc thp_collapse_alloc"
)
V1_MEMORY_STAT_KEYS = tuple(_V1_KEYS.split())
V2_MEMORY_STAT_KEYS = tuple(_V2_KEYS.split())
NO_LIMIT_V1 = 9223372036854771712  # PAGE_COUNTER_MAX on 4 KiB pages, what v1 prints for "none"

# Controller mount directories of a v1 layout, and the files each gets.
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")


def _kv(pairs: list[tuple[str, int]]) -> str:
    return "".join(f"{k} {v}\n" for k, v in pairs)


def v1_memory_stat(rng: random.Random) -> str:
    """A v1 memory.stat: local keys, two hierarchical limits, then every key again as total_*."""
    local = [(k, rng.randrange(0, 1 << 28) & ~4095) for k in V1_MEMORY_STAT_KEYS]
    limits = [("hierarchical_memory_limit", NO_LIMIT_V1), ("hierarchical_memsw_limit", NO_LIMIT_V1)]
    total = [(f"total_{k}", v * 3) for k, v in local]
    return _kv(local + limits + total)


def v2_memory_stat(rng: random.Random) -> str:
    return _kv([(k, rng.randrange(0, 1 << 28) & ~4095) for k in V2_MEMORY_STAT_KEYS])


def v1_cpu_stat(rng: random.Random) -> str:
    n = rng.randrange(0, 100000)
    return _kv(
        [
            ("nr_periods", n),
            ("nr_throttled", n // 7),
            ("throttled_time", n * 13171),
            ("nr_bursts", 0),
            ("burst_time", 0),
        ]
    )


def v2_cpu_stat(rng: random.Random) -> str:
    usage = rng.randrange(0, 1 << 40)
    n = rng.randrange(0, 100000)
    return _kv(
        [
            ("usage_usec", usage),
            ("user_usec", usage * 2 // 3),
            ("system_usec", usage - usage * 2 // 3),
            ("nice_usec", 0),
            ("nr_periods", n),
            ("nr_throttled", n // 7),
            ("throttled_usec", n * 13),
            ("nr_bursts", 0),
            ("burst_usec", 0),
        ]
    )


def v1_files(rng: random.Random) -> dict[str, dict[str, str]]:
    """Per-controller files of one v1 cgroup."""
    return {
        "memory": {
            "memory.stat": v1_memory_stat(rng),
            "memory.usage_in_bytes": f"{rng.randrange(1 << 20, 1 << 32)}\n",
            "memory.limit_in_bytes": f"{NO_LIMIT_V1}\n",
        },
        "cpu": {
            "cpu.stat": v1_cpu_stat(rng),
            "cpu.shares": "1024\n",
            "cpu.cfs_quota_us": "-1\n",
            "cpu.cfs_period_us": "100000\n",
        },
        "cpuacct": {"cpuacct.usage": f"{rng.randrange(0, 1 << 44)}\n"},
        "pids": {"pids.current": f"{rng.randrange(1, 200)}\n", "pids.max": "max\n"},
    }


def v2_files(rng: random.Random) -> dict[str, str]:
    """Files of one v2 cgroup."""
    return {
        "memory.stat": v2_memory_stat(rng),
        "memory.current": f"{rng.randrange(1 << 20, 1 << 32)}\n",
        "memory.max": "max\n",
        "cpu.stat": v2_cpu_stat(rng),
        "cpu.weight": "100\n",
        "cpu.max": "max 100000\n",
        "pids.current": f"{rng.randrange(1, 200)}\n",
        "pids.max": "max\n",
    }


def tree_dirs(pods: int, containers: int) -> list[str]:
    """Relative cgroup paths of the tree, parents first: kubepods, tiers, pods, containers."""
    dirs = ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
    tiers = ("kubepods", "kubepods/burstable", "kubepods/besteffort")
    for i in range(pods):
        pod = f"{tiers[i % 3]}/pod{i:08x}-0000-4000-8000-{i:012x}"
        dirs.append(pod)
        dirs.extend(f"{pod}/{(i * containers + c):064x}" for c in range(containers))
    return dirs


def _write(path: str, files: dict[str, str]) -> None:
    os.makedirs(path, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)


def make_tree(root: str, version: str, pods: int = 1000, containers: int = 3, seed: int = 1):
    """Write the tree under ``root`` and return its relative cgroup dirs.

    ``version`` "v2" puts every file in one directory per cgroup; "v1" writes one
    sub-tree per controller (``root/memory/...``, ``root/cpu/...``), like a v1 mount layout.
    """
    rng = random.Random(seed)
    dirs = tree_dirs(pods, containers)
    if version == "v2":
        _write(root, {"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"})
    for rel in dirs:
        if version == "v2":
            _write(os.path.join(root, rel), v2_files(rng))
        else:
            for ctrl, files in v1_files(rng).items():
                _write(os.path.join(root, ctrl, rel), files)
    return dirs
