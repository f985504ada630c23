"""The ``cgalloc`` command line: parses, calls one operation, renders. No logic of its own.

The commands are a typer app (``cgalloc/cli/group.py``). This module holds the program's entry
(:func:`run`), its stdout, its SIGINT handling, and the error lines and exit statuses of
:func:`main`.
"""

from __future__ import annotations

import errno
import io
import signal
import sys
import threading
from typing import NoReturn

from cgalloc.errors import SIGNALS, CgallocError, Interrupted
from cgalloc.host.machine import Host

# Command name -> (module in cgalloc.cli, what --help lists for it), in --help order. The listing
# is the start of each command's own help (tests/cli/test_cli_lazy.py), so it needs no import.
COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("show", "Show this node's Capacity and Allocatable"),
    "stats": ("stats", "Read the usage of this node's cgroup tree"),
    "setup": ("setup", "Create and enforce the node's cgroup tree"),
    "verify": ("verify", "Check the live cgroup tree against the one setup makes"),
    "teardown": ("teardown", "Undo what setup recorded in the state directory"),
    "kubelet-config": ("kubelet_config", "Print the KubeletConfiguration fragment"),
    "install-unit": (
        "install_unit",
        "Install cgalloc-setup.service, which runs `cgalloc setup` at boot",
    ),
    "exporter": ("exporter", "Serve this node's cgroup tree as Prometheus metrics"),
    "record": ("record", "Record the usage of this node's reserved cgroups"),
    "recommend": ("recommend", "Recommend kube-reserved, system-reserved"),
    "install-exporter-unit": (
        "install_exporter_unit",
        "Install cgalloc-exporter.service, which serves `cgalloc exporter`",
    ),
    "completion": ("completion", "Print the shell completion script for bash, zsh or fish"),
}
# What the completion scripts set when a shell asks cgalloc for completions (typer's
# _{PROG}_COMPLETE, for both --install-completion and `cgalloc completion`).
COMPLETE_VAR = "_CGALLOC_COMPLETE"


def run(argv: list[str] | None = None, host: Host | None = None) -> None:
    """The ``cgalloc`` program (console script, ``python -m cgalloc``): :func:`main` with the
    program's own stdout."""
    _own_stdout()
    main(argv, host)


class StdoutError(Exception):
    """A write to stdout failed. Not an OSError: click would answer EPIPE with a silent exit 1,
    which for setup says "rolled back" after its changes were made."""

    def __init__(self, errno_: int | None, strerror: str | None) -> None:
        super().__init__(strerror)
        self.errno, self.strerror = errno_, strerror


class _Stdout(io.FileIO):
    def write(self, data: object) -> int | None:
        try:
            return super().write(data)  # type: ignore[arg-type]
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from None


class _ClosedFd(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, _data: object) -> int:
        raise StdoutError(errno.EBADF, "stdout is closed")


def _own_stdout() -> None:
    """stdout on fd 1 with errors that name themselves (:class:`StdoutError`): a full disk is
    one sentence, not a traceback; a closed stdout (``>&-``) fails the first write with EBADF,
    as in C, where Python drops the output and exits 0. A name the kernel holds as
    undecodable bytes (a cgroup directory, read with surrogateescape) is written back as those
    bytes, as ``ls`` does, where a UTF-8 locale's strict stdout raised UnicodeEncodeError."""
    try:
        raw: io.RawIOBase = _Stdout(1, "w", closefd=False)
    except OSError:
        raw = _ClosedFd()
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    tty = raw.isatty()
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw), encoding=encoding, errors="surrogateescape", line_buffering=tty
    )


class OutputLost(CgallocError):
    """stdout could not take the result; what the command did stands."""

    exit_code = 3


def main(argv: list[str] | None = None, host: Host | None = None) -> None:
    """Entry point: run the app on ``host`` (this machine by default), turning cgalloc errors
    into one message and an exit status."""
    previous = _signals_as_errors()
    try:
        try:
            _invoke(argv, host or Host())
        except StdoutError as exc:
            raise _output_lost(exc) from None
        except SystemExit as exc:
            if not exc.code:  # what stdout still holds must reach it before exit 0
                try:
                    if sys.stdout is not None:
                        sys.stdout.flush()
                except StdoutError as failed:
                    raise _output_lost(failed) from None
            raise
    except (CgallocError, Interrupted) as exc:
        from cgalloc.cli.render import printable  # only on an error: --help loads no more

        _say(printable(str(exc)).split("\n"))
        sys.exit(exc.exit_code)
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)


def _invoke(argv: list[str] | None, host: Host) -> NoReturn:
    """Run the command line; it ends in SystemExit with the command's status. The commands
    find ``host`` as their context's object. A usage error is one ``cgalloc:`` sentence and
    exit 2, as every refusal is; bare ``cgalloc`` prints the help and exits 0."""
    import typer

    from cgalloc.cli.group import app

    # click's base of usage errors, wherever this typer has it (newer ones vendor click)
    click_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        status = app(args=args or ["--help"], prog_name="cgalloc", standalone_mode=False,
                     obj=host)  # fmt: skip
    except click_error as exc:
        ctx = getattr(exc, "ctx", None)
        where = f"; `{ctx.command_path} --help` lists its options" if ctx is not None else ""
        _say([f"{exc.format_message().rstrip('.')}{where}."])
        sys.exit(exc.exit_code)
    except typer.Abort:  # end of input at a prompt
        sys.exit(1)
    sys.exit(status if isinstance(status, int) else 0)


def __getattr__(name: str) -> object:
    # the typer app, for the callers that take it from here (install-unit, the tests)
    if name == "app":
        from cgalloc.cli.group import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _output_lost(exc: StdoutError) -> OutputLost:
    # What stdout still holds would fail again at the interpreter's exit: a traceback and 120.
    sys.stdout = None
    return OutputLost(
        f"cannot write the result to stdout ({exc.strerror or exc}); the command stopped there"
        " and what it had done stands (setup's plan is printed before its changes, its report"
        " after them: `cgalloc verify` tells which)."
    )


# What each is by default, before main() takes it over (Python's own for SIGINT).
_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
             signal.SIGHUP: signal.SIG_DFL}  # fmt: skip


def _on_signal(signo: int, _frame: object) -> None:
    # A signal outside the changes (setup and teardown guard those themselves: they undo or
    # record what they made), where nothing is half-done: one sentence and 128 + signo, as a
    # shell reports a process the signal ended, not click's "Aborted!" and 1
    name = signal.Signals(signo).name
    raise Interrupted(signo, f"interrupted by {name}; nothing was left half-done.")


def _signals_as_errors() -> dict[int, object]:
    """Install :func:`_on_signal` for SIGINT, SIGTERM and SIGHUP where each still has its
    default handler (a program calling main() keeps its own; an ignored one stays ignored);
    the handlers to put back."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for signo in SIGNALS:
        if signal.getsignal(signo) is _DEFAULTS[signo]:
            previous[signo] = signal.signal(signo, _on_signal)
    return previous


def _say(lines: list[str]) -> None:
    """One ``cgalloc:`` line each on stderr; a terminal that hung up (EIO) hears nothing and
    the exit status still tells."""
    try:
        for line in lines:
            print(f"cgalloc: {line}", file=sys.stderr, flush=True)
    except OSError:
        pass
