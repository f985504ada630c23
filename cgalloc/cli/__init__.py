"""The ``cgalloc`` command line: parses, calls one operation, renders. No logic of its own.

Each sub-command lives in its own module and registers itself with ``register(app)``. Modules are
imported only when their command runs (a lazy command group): ``cgalloc show`` pays for what
``show`` uses, and ``cgalloc --help`` for typer alone.
"""

from __future__ import annotations

import enum
import errno
import functools
import gc
import importlib
import io
import re
import signal
import sys
import threading
import typing
from collections.abc import Callable

import typer
import typer.main
from typer.core import TyperGroup

from cgalloc.errors import CgallocError, Interrupted

# Command name -> (module in cgalloc.cli, what --help lists for it), in --help order. The listing
# is the start of each command's own help (tests/test_cli_lazy.py checks), so it needs no import.
COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("show", "Show this node's Capacity and Allocatable"),
    "stats": ("stats", "Read the usage of this node's cgroup tree"),
    "setup": ("setup", "Create and enforce the node's cgroup tree"),
    "verify": ("verify", "Check the live cgroup tree against the one setup makes"),
    "teardown": ("teardown", "Undo what setup recorded in the state directory"),
    "kubelet-config": ("kubelet_config", "Print the KubeletConfiguration fragment (YAML)"),
    "install-unit": (
        "install_unit",
        "Install cgalloc-setup.service, which runs `cgalloc setup` at boot",
    ),
    "completion": ("completion", "Print the shell completion script for bash, zsh or fish"),
}
# What the completion scripts set when a shell asks cgalloc for completions (typer's
# _{PROG}_COMPLETE, for both --install-completion and `cgalloc completion`).
COMPLETE_VAR = "_CGALLOC_COMPLETE"


class _Commands(dict):
    """The group's commands, each built from its module on first use."""

    def __missing__(self, name: str) -> typer.core.TyperCommand:
        if name not in COMMANDS:
            raise KeyError(name)
        module = importlib.import_module(f"cgalloc.cli.{COMMANDS[name][0]}")
        sub = typer.Typer()
        module.register(sub)
        (info,) = sub.registered_commands
        cmd = typer.main.get_command_from_info(
            info, pretty_exceptions_short=True, rich_markup_mode=None
        )
        _plain_coercion(cmd)
        self[name] = cmd
        return cmd


@functools.cache
def _number_text(kind: type) -> re.Pattern[str]:
    """The text an int or float option takes: ASCII decimal only, where Python's int() and
    float() also take "1_0", " 5 " and other scripts' digits."""
    if kind is int:
        return re.compile(r"[+-]?[0-9]+")
    # plain decimal, narrower than Go's ParseFloat (no hex, no "_"); inf and nan pass, for the
    # option's own range check to name them in one sentence
    return re.compile(
        r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|nan)", re.I
    )


def _number(kind: type, what: str) -> Callable[[object], object]:
    def convert(value: object) -> object:
        try:
            if isinstance(value, str) and not _number_text(kind).fullmatch(value):
                raise ValueError(value)
            return kind(value)
        except (TypeError, ValueError):
            raise typer.BadParameter(
                f"Input should be a valid {what}, unable to parse string as an {what}"
                if kind is int
                else f"Input should be a valid {what}, unable to parse string as a {what}"
            ) from None

    return convert


def _choice(kind: type[enum.Enum]) -> Callable[[object], object]:
    def convert(value: object) -> object:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in kind)
            raise typer.BadParameter(f"{value!r} is not one of {allowed}.") from None

    return convert


def _converter(annotation: object) -> Callable[[object], object] | None:
    """A plain converter, with typer's messages, for the annotations cgalloc's options use;
    None for any other annotation."""
    if annotation in (str, bool):
        return annotation
    if annotation is int:
        return _number(int, "integer")
    if annotation is float:
        return _number(float, "number")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _choice(annotation)
    if typing.get_origin(annotation) is list and typing.get_args(annotation) == (str,):
        return lambda v: [str(x) for x in v]
    return None


@functools.cache
def _plain_param_class() -> type | None:
    """typer's RuntimeParam with a plain converter; None for a typer without that layer.

    A plain subclass, not a dataclass: building a dataclass compiles its methods, about 1.5 ms
    per class in every process.
    """
    try:
        from typer._coercion import RuntimeParam
    except ImportError:
        return None

    class Plain(RuntimeParam):
        def __init__(self, parameter_info, annotation, convert: Callable[[object], object]):
            super().__init__(parameter_info, annotation)
            object.__setattr__(self, "convert", convert)  # RuntimeParam is frozen

        def _coerce_value(self, value, param, ctx):
            return self.convert(value)

    return Plain


def _plain_coercion(cmd) -> None:
    """Give each simple option of ``cmd`` (and its help option) a plain converter.

    typer coerces every parameter value through a pydantic TypeAdapter it builds on first use,
    which imports pydantic: about 0.15 s per process, more than ``show`` computes. Parameters
    with any other annotation, or a typer without this layer, keep typer's own coercion.
    """
    plain_param = _plain_param_class()
    if plain_param is None:
        return

    def plain(param) -> None:
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", False) is not None:
            return
        convert = None if desc.file_annotation is not None else _converter(desc.annotation)
        if convert is not None:
            param._runtime_param = plain_param(desc.parameter_info, desc.annotation, convert)

    for param in cmd.params:
        plain(param)
    help_option = cmd.get_help_option  # built on first use, per command

    def get_help_option(ctx):
        option = help_option(ctx)
        if option is not None:
            plain(option)
        return option

    cmd.get_help_option = get_help_option


class LazyGroup(TyperGroup):
    """A typer group whose sub-commands are imported when they are invoked or asked for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)
        self._coerced = False

    def make_context(self, *args, **kwargs):
        # typer adds the completion options after __init__: convert them too, once
        if not self._coerced:
            self._coerced = True
            _plain_coercion(self)
        return super().make_context(*args, **kwargs)

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name: str):
        try:
            return self.commands[cmd_name]
        except KeyError:
            return None

    def format_commands(self, ctx, formatter) -> None:
        # The listing uses the short help kept here, so --help imports no command module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in COMMANDS.items()])


app = typer.Typer(
    name="cgalloc",
    cls=LazyGroup,
    help=(
        "Kubernetes Node Allocatable on this node: compute it exactly as the kubelet does, "
        "create and enforce the kubepods / QoS / reserved cgroup tree, and read its usage."
    ),
    no_args_is_help=True,
    add_completion=True,  # typer imports its completion code anyway: the options cost nothing
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich truncates the long kubelet flag names at 80 columns
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from cgalloc.cli.version import version_lines

        typer.echo("\n".join(version_lines()))
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version, which I/O core is loaded (C or pure Python), the kubelet "
        "version matched and the library versions, then exit.",
    ),
) -> None:
    """Keep ``cgalloc <command>`` a command group even while only one command is registered."""


def run(argv: list[str] | None = None) -> None:
    """The ``cgalloc`` program, as :func:`cgalloc.entry.run` (console script, ``python -m
    cgalloc``) calls it once it has imported this module with the collector already off:
    :func:`main` without the cyclic garbage collector. A one-shot command's objects die with
    its process, so its scans would be wasted work. ``stats --watch``, the one command that
    lives on, turns it back on. :func:`main` itself leaves the caller's setting alone."""
    gc.disable()
    _own_stdout()
    main(argv)


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


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning cgalloc errors into one message and an exit status."""
    previous = _sigint_as_error()
    try:
        try:
            app(args=argv, prog_name="cgalloc", standalone_mode=True)
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
    except CgallocError as exc:
        from cgalloc.cli.render import printable  # only on an error: --help loads no more

        _say(printable(str(exc)).split("\n"))
        sys.exit(exc.exit_code)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _output_lost(exc: StdoutError) -> OutputLost:
    # What stdout still holds would fail again at the interpreter's exit: a traceback and 120.
    sys.stdout = None
    return OutputLost(
        f"cannot write the result to stdout ({exc.strerror or exc}); the command stopped there"
        " and what it had done stands (setup's plan is printed before its changes, its report"
        " after them: `cgalloc verify` tells which)."
    )


def _on_sigint(signo: int, _frame: object) -> None:
    # Ctrl-C outside setup's changes (planning, a lock wait, a report, a read), where nothing
    # is half-done: one sentence and 130 as a shell reports SIGINT, not click's "Aborted!" and 1
    raise Interrupted(signo, "interrupted by SIGINT; nothing was left half-done.")


def _sigint_as_error():
    """Install :func:`_on_sigint` over Python's default SIGINT handler (only that one: a
    program calling main() keeps its own); the handler to put back, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    return signal.signal(signal.SIGINT, _on_sigint)


def _say(lines: list[str]) -> None:
    """One ``cgalloc:`` line each on stderr; a terminal that hung up (EIO) hears nothing and
    the exit status still tells."""
    try:
        for line in lines:
            print(f"cgalloc: {line}", file=sys.stderr, flush=True)
    except OSError:
        pass
