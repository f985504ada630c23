"""Shared pytest fixtures."""

from vm.plugin import configure as _configure_vm_lanes


def pytest_configure(config):
    # tests/kernel/* run inside qemu lanes; see tests/vm/README.md
    _configure_vm_lanes(config)
