"""Fixtures for the core tests: both implementations, and fake cgroup trees in tmp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from cgalloc.host.core import native, pure


@pytest.fixture(params=[native, pure], ids=["native", "pure"])
def impl(request):
    return request.param


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small kubepods tree of plain files."""
    files = {
        "memory.max": "max\n",
        "kubepods/memory.max": "104857600\n",
        "kubepods/memory.stat": "anon 4096\nfile 8192\nkernel 0\n",
        "kubepods/cpu.max": "max 100000\n",
        "kubepods/cpu.stat": "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
        "kubepods/burstable/memory.max": "max\n",
        "kubepods/burstable/memory.stat": "anon 1\nfile 2\n",
        "kubepods/burstable/cpu.max": "50000 100000\n",
        "kubepods/burstable/cpu.stat": "usage_usec 7\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path
