"""limits: the kubelet's CPU conversions, checked against the upstream reference table."""

from __future__ import annotations

import pytest

from cgalloc.model.limits import (
    Limits,
    convert_memory_swap_to_v2,
    format_cpuset,
    hugetlb_size_from_name,
    hugetlb_size_name,
    limits_from_resources,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    shares_to_weight,
    shares_to_weight_kubelet,
    shares_to_weight_runc,
)
from cgalloc.model.quantity import Quantity

# milliCPU → shares → kubelet (linear) weight / runc (new) weight, from the upstream table.
TABLE = [
    (0, 2, 1, 1),
    (10, 10, 1, 4),
    (100, 102, 4, 17),
    (250, 256, 10, 35),
    (500, 512, 20, 59),
    (1000, 1024, 39, 100),
    (2000, 2048, 79, 174),
    (4000, 4096, 157, 303),
    (8000, 8192, 313, 532),
    (32000, 32768, 1250, 1681),
    (64000, 65536, 2500, 3023),
]


@pytest.mark.parametrize(("milli", "shares", "old", "new"), TABLE)
def test_reference_table(milli, shares, old, new):
    assert milli_cpu_to_shares(milli) == shares
    assert shares_to_weight_kubelet(shares) == old
    assert shares_to_weight_runc(shares) == new
    assert shares_to_weight(shares, "kubelet") == old
    assert shares_to_weight(shares, "runc") == new


def test_shares_clamped():
    assert milli_cpu_to_shares(1) == 2  # 1*1024/1000 = 1 → MinShares
    assert milli_cpu_to_shares(1999) == 2046
    assert milli_cpu_to_shares(256000) == 262144
    assert milli_cpu_to_shares(1_000_000) == 262144


def test_weight_bounds():
    assert shares_to_weight_kubelet(262144) == 10000
    assert shares_to_weight_kubelet(262143) == 1 + (262141 * 9999) // 262142 == 9999
    assert shares_to_weight_kubelet(0) == 1  # Go truncation toward zero
    assert shares_to_weight_runc(0) == 0
    assert shares_to_weight_runc(1) == 1
    assert shares_to_weight_runc(262144) == 10000
    assert shares_to_weight_runc(10**6) == 10000
    with pytest.raises(ValueError, match="unknown weight formula 'linear'"):
        shares_to_weight(1024, "linear")


def test_quota():
    assert milli_cpu_to_quota(0, 100000) == 0
    assert milli_cpu_to_quota(1, 100000) == 1000  # 100µs raised to MinQuotaPeriod
    assert milli_cpu_to_quota(10, 100000) == 1000
    assert milli_cpu_to_quota(250, 100000) == 25000
    assert milli_cpu_to_quota(1500, 100000) == 150000
    assert milli_cpu_to_quota(500, 50000) == 25000
    assert milli_cpu_to_quota(100) == 10000


def test_memory_swap_rules():
    assert convert_memory_swap_to_v2(0, -1) == -1
    assert convert_memory_swap_to_v2(-1, 1024) == -1
    assert convert_memory_swap_to_v2(0, 1024) == 0
    assert convert_memory_swap_to_v2(4096, -1) == 4096
    assert convert_memory_swap_to_v2(3072, 1024) == 2048
    assert convert_memory_swap_to_v2(1024, 1024) == 0
    with pytest.raises(ValueError, match="unable to set swap limit without memory limit"):
        convert_memory_swap_to_v2(1024, 0)
    with pytest.raises(ValueError, match="memory\\+swap limit should be >= memory limit"):
        convert_memory_swap_to_v2(512, 1024)
    with pytest.raises(ValueError, match="invalid memory value"):
        convert_memory_swap_to_v2(512, -2)


def test_hugetlb_size_names():
    assert hugetlb_size_name(64 * 1024) == "64KB"
    assert hugetlb_size_name(2 * 1024 * 1024) == "2MB"
    assert hugetlb_size_name(32 * 1024 * 1024) == "32MB"
    assert hugetlb_size_name(1 << 30) == "1GB"
    assert hugetlb_size_name(16 << 30) == "16GB"
    assert hugetlb_size_from_name("2MB") == 2097152
    assert hugetlb_size_from_name("64KB") == 65536
    with pytest.raises(ValueError, match="<n>KB, <n>MB or <n>GB"):
        hugetlb_size_from_name("2Mi")


def test_format_cpuset():
    assert format_cpuset({0, 1, 2, 5}) == "0-2,5"
    assert format_cpuset([3]) == "3"
    assert format_cpuset(set()) == ""
    assert format_cpuset({1, 3, 4, 5, 7, 8}) == "1,3-5,7-8"


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def test_limits_from_resources_full():
    rl = {
        "cpu": q("3500m"),
        "memory": q("29Gi"),
        "pid": q("4194304"),
        "ephemeral-storage": q("90Gi"),
        "hugepages-2Mi": q("512Mi"),
        "hugepages-1Gi": q("2Gi"),
    }
    assert limits_from_resources(rl, compressible_only=False) == Limits(
        cpu_shares=3584,
        memory=29 * 1024**3,
        pids=4194304,
        hugetlb=((2 * 1024**2, 512 * 1024**2), (1024**3, 2 * 1024**3)),
    )


def test_limits_from_resources_rounding_and_compressible():
    # MilliValue and Value round up: 0.1m CPU is 1 milli → 1 share → clamped to 2.
    rl = {"cpu": q("0.1m"), "memory": q("1.5"), "pid": q("1000")}
    assert limits_from_resources(rl) == Limits(cpu_shares=2, memory=2, pids=1000)
    assert limits_from_resources(rl, compressible_only=True) == Limits(cpu_shares=2)
    assert limits_from_resources({"memory": q("500Mi")}) == Limits(memory=500 * 1024**2)
    assert limits_from_resources({}) == Limits()
