"""cgalloc.model.resources: names, hugepage sizes, and ResourceList arithmetic.

Expected values follow upstream: v1helper.IsHugePageResourceName / HugePageSizeFromResourceName
(pkg/apis/core/v1/helper), quota.Add (k8s.io/apiserver/pkg/quota/v1), and kubectl's
SortableResourceNames (plain string order).
"""

from __future__ import annotations

import pytest

from cgalloc.model import resources
from cgalloc.model.quantity import Quantity
from cgalloc.model.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PID,
    add,
    format_list,
    hugepage_size_bytes,
    is_hugepages,
    sorted_items,
    subtract_clamped,
)

q = Quantity.parse


def test_names() -> None:
    assert (CPU, MEMORY, EPHEMERAL_STORAGE, PID) == ("cpu", "memory", "ephemeral-storage", "pid")
    assert resources.HUGEPAGES_PREFIX == "hugepages-"


@pytest.mark.parametrize(
    ("name", "expected"),
    [("hugepages-2Mi", True), ("hugepages-1Gi", True), ("hugepages-", True), ("memory", False)],
)
def test_is_hugepages(name: str, expected: bool) -> None:
    assert is_hugepages(name) is expected


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("hugepages-2Mi", 2 * 1024 * 1024),
        ("hugepages-1Gi", 1024 * 1024 * 1024),
        ("hugepages-64Ki", 64 * 1024),
        ("hugepages-16Gi", 16 * 1024**3),
        ("hugepages-2097152", 2097152),
    ],
)
def test_hugepage_size_bytes(name: str, size: int) -> None:
    assert hugepage_size_bytes(name) == size


@pytest.mark.parametrize(
    "name",
    ["memory", "hugepages-", "hugepages-2MB", "hugepages-0", "hugepages--2Mi", "hugepages-1.5"],
)
def test_hugepage_size_bytes_rejects(name: str) -> None:
    with pytest.raises(ValueError) as caught:
        hugepage_size_bytes(name)
    assert str(caught.value) == (
        f"{name!r} is not a hugepages resource name; expected hugepages-<size> where <size> is a"
        " positive whole number of bytes written as a quantity, such as hugepages-2Mi or"
        " hugepages-1Gi"
    )


def test_add_is_quota_add() -> None:
    a = {CPU: q("100m"), MEMORY: q("1Gi")}
    b = {MEMORY: q("512Mi"), PID: q("1000")}
    result = add(a, b)
    assert format_list(result) == {CPU: "100m", MEMORY: "1536Mi", PID: "1k"}
    assert result[MEMORY].fmt == "BinarySI"
    assert a == {CPU: q("100m"), MEMORY: q("1Gi")}  # inputs are left alone


def test_subtract_clamped() -> None:
    capacity = {CPU: q("4"), MEMORY: q("8Gi"), PID: q("100"), "hugepages-2Mi": q("0")}
    reserved = {CPU: q("4500m"), MEMORY: q("1Gi"), EPHEMERAL_STORAGE: q("1Gi")}
    result = subtract_clamped(capacity, reserved)
    assert format_list(result) == {
        CPU: "0",
        "hugepages-2Mi": "0",
        MEMORY: "7Gi",
        PID: "100",
    }
    assert EPHEMERAL_STORAGE not in result  # only a's keys
    assert [result[k].fmt for k in (CPU, MEMORY)] == ["DecimalSI", "BinarySI"]
    # a's format is kept even when a is zero (upstream Sub would take b's)
    assert subtract_clamped({MEMORY: q("0")}, {MEMORY: q("1Gi")})[MEMORY].fmt == "DecimalSI"


def test_sorted_items_and_format_list_use_string_order() -> None:
    rl = {
        MEMORY: q("1Gi"),
        CPU: q("1.5"),
        "hugepages-2Mi": q("0"),
        PID: q("4096"),
        EPHEMERAL_STORAGE: q("10Gi"),
        "hugepages-1Gi": q("2Gi"),
    }
    order = ["cpu", "ephemeral-storage", "hugepages-1Gi", "hugepages-2Mi", "memory", "pid"]
    assert [name for name, _ in sorted_items(rl)] == order
    formatted = format_list(rl)
    assert list(formatted) == order
    assert formatted == {
        "cpu": "1500m",
        "ephemeral-storage": "10Gi",
        "hugepages-1Gi": "2Gi",
        "hugepages-2Mi": "0",
        "memory": "1Gi",
        "pid": "4096",
    }
