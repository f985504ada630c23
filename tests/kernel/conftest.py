"""In-VM tests only make sense inside a lane; anywhere else they skip with the reason."""

import pytest

from kernel.util import lane


@pytest.fixture(autouse=True)
def _inside_vm_lane() -> None:
    # On the host the VM plugin replaces these tests with lane items, which take no fixtures,
    # so this only fires when that plugin is not active.
    if not lane():
        pytest.skip("runs inside a qemu VM lane (CGALLOC_VM_LANE unset): `pytest tests/kernel`")
