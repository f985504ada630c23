"""Options several commands take: one definition each, so the same option means the same thing
(and has the same help) on every command that has it. tests/cli/test_cli_options.py checks."""

from __future__ import annotations

import os

import typer

from cgalloc.cli.optspec import Opt
from cgalloc.cli.render import OUTPUT
from cgalloc.cli.signature import typer_option
from cgalloc.errors import InputError

TREE_PANEL = "Tree options"


def _mount_path(value: str) -> str:
    # "" named the working directory: a plan of relative paths, and writes below the cwd
    if not value or "\x00" in value:
        raise InputError(
            f"--cgroupfs {value!r} names no directory; give where the cgroup hierarchy is "
            "mounted, such as /sys/fs/cgroup."
        )
    # the real path: mounts are found by it in mountinfo, which names no symlink, and the
    # state record keeps it, so a run through a link and one naming the mount agree
    return os.path.realpath(value)


CGROUPFS = Opt(
    "cgroupfs",
    ("--cgroupfs",),
    str,
    "/sys/fs/cgroup",
    "Where the cgroup hierarchy is mounted (a v2 mount or the v1 controllers' parent;"
    " a symlink to it is followed).",
    metavar="PATH",
    callback=_mount_path,
    panel=TREE_PANEL,
)


def cgroupfs_option() -> typer.models.OptionInfo:
    return typer_option(CGROUPFS)


def state_dir_option() -> typer.models.OptionInfo:
    from cgalloc.ops.state import DEFAULT_STATE_DIR  # show and stats have no state directory

    return typer.Option(
        DEFAULT_STATE_DIR,
        "--state-dir",
        metavar="DIR",
        help="Where cgalloc keeps its lock and the record of what setup made and changed "
        "(read by verify and teardown).",
        rich_help_panel=TREE_PANEL,
    )


def quiet_option() -> typer.models.OptionInfo:
    return typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print nothing on success (for scripts: the exit status tells); warnings and "
        "errors still go to stderr.",
    )


def dry_run_option() -> typer.models.OptionInfo:
    return typer.Option(
        False,
        "--dry-run",
        help="Print what would change, then stop: writes nothing, works unprivileged.",
    )


def pods_option() -> typer.models.OptionInfo:
    return typer.Option(
        [],
        "--pods",
        metavar="PATH",
        help="Pods on this node: a Pod manifest, a multi-document YAML, a List/PodList (kubectl"
        " get pods -o json, filtered to this node), or a static-pod directory; JSON or YAML. Their"
        " pod cgroups belong to the tree, with the QoS class, shares, quota, memory and hugetlb"
        " values the kubelet gives them (and the burstable tier's shares). Repeatable.",
        rich_help_panel=TREE_PANEL,
    )


def output_option() -> typer.models.OptionInfo:
    """The shared ``--output/-o`` option (:data:`cgalloc.cli.render.OUTPUT`) as typer's."""
    return typer_option(OUTPUT)
