"""``cgalloc completion SHELL``: print the shell completion script.

A command rather than typer's ``--install-completion``: the root options would import typer's
completion code on every run, this imports it only when a script is asked for or a shell
completes (``main`` sees COMPLETE_VAR).
"""

from __future__ import annotations

import enum

import typer

from cgalloc.cli import COMPLETE_VAR

HELP = (
    "Print the shell completion script for bash, zsh or fish. Load it in the current shell "
    "with `source <(cgalloc completion bash)` (zsh: the same with zsh), or install it where "
    "the shell reads completions: bash ~/.local/share/bash-completion/completions/cgalloc, "
    "zsh a directory on $fpath as _cgalloc, fish ~/.config/fish/completions/cgalloc.fish."
)
EXAMPLES = (
    "cgalloc completion bash > /etc/bash_completion.d/cgalloc",
    "cgalloc completion zsh > \"${fpath[1]}/_cgalloc\"",
)


class Shell(str, enum.Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def register(app: typer.Typer) -> None:
    """Add ``completion`` to the app."""

    @app.command("completion", help=HELP)
    def completion(
        shell: Shell = typer.Argument(..., metavar="bash|zsh|fish", help="The shell."),
    ) -> None:
        from typer._completion_shared import get_completion_script

        typer.echo(
            get_completion_script(prog_name="cgalloc", complete_var=COMPLETE_VAR, shell=shell)
        )
