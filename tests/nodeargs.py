"""Node inputs the tests share: planned 4-CPU nodes enforcing pods and system-reserved in
/system.slice (as CLI arguments), a small desired tree for apply(), a v1 hierarchy with hugetlb."""

from __future__ import annotations

from cgalloc.model.hierarchy import Hierarchy
from cgalloc.model.limits import Limits
from cgalloc.model.tree import DesiredCgroup

MI = 1 << 20
DESIRED = [
    DesiredCgroup("kubepods", "kubepods", Limits(cpu_shares=2048, memory=300 * MI, pids=1000)),
    DesiredCgroup("kubepods/burstable", "qos", Limits(cpu_shares=2)),
    DesiredCgroup("kubepods/besteffort", "qos", Limits(cpu_shares=2)),
    DesiredCgroup("kubepods/besteffort/podx", "pod", Limits(cpu_shares=2, pids=100)),
    DesiredCgroup("system.slice", "system-reserved", Limits(cpu_shares=512, memory=100 * MI)),
]

NODE_SYSTEM_RESERVED = [
    "--capacity",
    "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi",
    "--kube-reserved",
    "cpu=500m,memory=1Gi",
    "--system-reserved",
    "cpu=500m,memory=1Gi",
    "--enforce",
    "pods,system-reserved",
    "--system-reserved-cgroup",
    "/system.slice",
]


NODE = [
    "--capacity",
    "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi",
    "--kube-reserved",
    "cpu=500m,memory=1Gi",
    "--system-reserved",
    "cpu=500m,memory=1Gi,pid=100",
    "--enforce",
    "pods,system-reserved",
    "--system-reserved-cgroup",
    "/system.slice",
]


V1_HUGETLB = Hierarchy(
    "v1",
    "/sys/fs/cgroup",
    {c: f"/sys/fs/cgroup/{c}" for c in ("cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb")},
    None,
    frozenset({"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb"}),
)
