"""The ``cgalloc`` program's entry point: the console script and ``python -m cgalloc``.

The cyclic garbage collector goes off before the command line is imported, not after:
importing typer and a command runs some 30 collections (5-7 ms of CPU here) that free nothing
a one-shot process would keep. :func:`cgalloc.cli.run` keeps it off; ``stats --watch``, the
one command that lives on, turns it back on.
"""

from __future__ import annotations

import gc


def run() -> None:
    """Run the ``cgalloc`` command line (``sys.argv``)."""
    gc.disable()
    from cgalloc.cli import run as cli_run  # imported with the collector off (see above)

    cli_run()
