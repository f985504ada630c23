"""The ``cgalloc`` program's entry point: the console script and ``python -m cgalloc``.

The cyclic garbage collector goes off before the command line is imported, not after:
importing typer and a command runs some 30 collections (5-7 ms of CPU here; ``stats``, which
runs without typer, still imports enough to run some) that free nothing a one-shot process
would keep. :func:`cgalloc.cli.run` keeps it off; ``stats --watch``, the
one command that lives on, turns it back on.

The program also leaves without the interpreter's teardown once the command has ended and its
output is flushed: that teardown frees every object and module one by one and runs a full
collection (about 10 ms of CPU per run here, a twentieth of a 1000-pod ``stats -o json``), for
memory and descriptors the kernel takes back at exit anyway. Nothing cgalloc writes waits for
it: every file is written through ``with`` or raw descriptors, and setup joins its lanes before
it returns.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from typing import NoReturn

# What the interpreter exits with when flushing stdout at exit fails.
_FLUSH_FAILED = 120


def run() -> NoReturn:
    """Run the ``cgalloc`` command line (``sys.argv``) and exit with its status."""
    gc.disable()
    from cgalloc.cli import run as cli_run  # imported with the collector off (see above)

    try:
        cli_run()
    except SystemExit as exc:
        leave(exc.code)
    leave(0)


def leave(code: object) -> NoReturn:
    """Exit as ``sys.exit(code)`` would, without the interpreter's teardown: the same status
    (120 when flushing stdout or stderr fails, whatever the code), and a message code on
    stderr; the interpreter's "Exception ignored" note on a failed flush is not printed.

    A thread still running gets the usual exit, which waits for it."""
    if threading.active_count() > 1:
        raise SystemExit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # as the interpreter treats sys.exit("message")
        if sys.stderr is not None:
            print(code, file=sys.stderr)
        else:  # the interpreter writes it to the C stderr then
            os.write(2, f"{code}\n".encode(errors="backslashreplace"))
        status = 1
    for stream in (sys.stdout, sys.stderr):
        if stream is None or getattr(stream, "closed", False):
            continue  # the interpreter's exit skips these too
        try:
            stream.flush()
        except Exception:  # any failure: the interpreter's exit gives 120 for it too
            status = _FLUSH_FAILED
    os._exit(status & 0xFF)
