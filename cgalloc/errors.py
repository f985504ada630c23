"""Exceptions that carry the exit status a script can rely on.

Exit statuses: 0 success; 1 a check found drift or an operation failed and was rolled back;
2 bad input (nothing was written); 3 the host cannot do what was asked (missing cgroup
controller, no privileges), nothing was written, or stdout could not take the result (the
command stopped there; what it had done stands); 128 + signo stopped by a signal
(:class:`Interrupted`).
"""

from __future__ import annotations

import signal


class CgallocError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with."""

    exit_code = 1


class InputError(CgallocError):
    """Bad input. Holds every problem found in one run, one sentence each."""

    exit_code = 2

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class HostError(CgallocError):
    """The host cannot do what was asked; nothing was written."""

    exit_code = 3


# The signals that stop a command: Ctrl-C, a service manager's stop, a closed terminal.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """Stopped on a signal; the command exits 128 + its number, as a shell reports a process
    a signal ended. Not an Exception (as KeyboardInterrupt is not): no ``except`` of cgalloc's
    errors, or of any Exception, can swallow it."""

    def __init__(self, signo: int, message: str):
        super().__init__(message)
        self.signo = signo
        self.exit_code = 128 + signo
