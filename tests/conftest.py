"""Shared pytest fixtures."""

import signal

import pytest
from vm.plugin import configure as _configure_vm_lanes


def pytest_configure(config):
    # tests/kernel/* run inside qemu lanes; see tests/vm/README.md
    _configure_vm_lanes(config)


@pytest.fixture
def no_hang():
    """Fail a test that blocks (a regression to a wait or an endless loop) instead of hanging
    the suite: SIGALRM after 10 s raises an error that is not an OSError, which code under
    test may catch."""

    class Hung(BaseException):
        pass

    def stop(signo, frame):
        raise Hung("blocked for 10 s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
