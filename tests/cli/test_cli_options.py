"""Same options mean the same on every command (issue 10 §3): one help text per option name,
--state-dir / --dry-run / --quiet where the issue asks, and each command's help about itself."""

from __future__ import annotations

import re

import typer.main

from cgalloc.cli import COMMANDS, app

GROUP = typer.main.get_command(app)
# (command, option) allowed to differ: kubelet-config prints a document, not a table
PENDING: set[tuple[str, str]] = {("kubelet-config", "--output"), ("kubelet-config", "-o")}


def _helps() -> dict[str, dict[str, list[str]]]:
    """option name -> help text -> the commands that have it with that text."""
    seen: dict[str, dict[str, list[str]]] = {}
    for name in COMMANDS:
        for param in GROUP.commands[name].params:
            for opt in param.opts:
                if (name, opt) not in PENDING:
                    seen.setdefault(opt, {}).setdefault(param.help or "", []).append(name)
    return seen


def test_a_shared_option_has_one_help_text():
    differing = {opt: helps for opt, helps in _helps().items() if len(helps) > 1}
    assert differing == {}


def test_scripts_find_the_same_options_on_setup_verify_teardown():
    helps = _helps()
    for opt, commands in (
        ("--state-dir", {"setup", "verify", "teardown"}),
        ("--cgroupfs", {"setup", "verify", "teardown"}),
        ("--dry-run", {"setup", "teardown", "install-unit"}),
        ("--quiet", {"setup", "verify", "teardown", "install-unit"}),
        ("--output", {"show", "stats", "setup", "verify", "teardown"}),
    ):
        have = {c for names in helps[opt].values() for c in names}
        assert commands <= have, opt


def test_verify_help_says_it_changes_nothing():
    cmd = GROUP.commands["verify"]
    texts = [cmd.help, *(p.help or "" for p in cmd.params)]
    claims = [t for t in texts if re.search(r"\b(move[sd]?|moving|create[sd]?|creating)\b", t)]
    assert claims == []
    assert "changes nothing" in cmd.help
