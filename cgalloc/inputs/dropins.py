"""The ``--config-dir`` walk: every ``*.conf`` below it in ``filepath.WalkDir``'s order, bounded
in entries, depth and total size; a symlinked root is noted, as the kubelet loads it."""

from __future__ import annotations

import contextlib
import os
import stat
from itertools import islice

from cgalloc.inputs.fields import CONFIG_KIND
from cgalloc.inputs.loading import FILE_LIMIT

DROPIN_SUFFIX = ".conf"  # the kubelet reads only these from --config-dir
# Bounds on the --config-dir walk (the kubelet has none): real drop-in directories hold a few
# files, each may be 4 MiB (loading.FILE_LIMIT), all of them together as much, and cgalloc runs
# as root on hostile input.
DROPIN_MAX_ENTRIES = 256  # files and directories in the whole tree
DROPIN_MAX_DEPTH = 16  # subdirectory levels below --config-dir

def dropin_files(directory: str, problems: list[str]) -> list[str]:
    """The drop-ins the kubelet loads from ``directory``, in its order; walk problems appended.

    As cmd/kubelet/app/server.go mergeKubeletConfigurations, which walks the directory with
    filepath.WalkDir: the root is lstat'ed, each directory's entries go in byte order of their
    names, a subdirectory is descended where its name sorts, a symlink is never followed (one
    to a directory is a non-directory entry, so is a symlinked root), and every non-directory
    whose name ends in ``.conf`` (filepath.Ext, so ``.a.conf`` too) is loaded; a symlink to a
    directory or a dangling one among them then fails to load, as in the kubelet.
    """
    try:
        root_is_dir = stat.S_ISDIR(os.lstat(directory).st_mode)
    except OSError as err:
        problems.append(_cannot_list(directory, err))
        return []
    if not root_is_dir:  # WalkDir hands a non-directory root to the callback like any entry
        return [directory] if os.path.basename(directory).endswith(DROPIN_SUFFIX) else []
    found: list[str] = []
    budget = DROPIN_MAX_ENTRIES  # entries left to visit in the whole tree

    def walk(path: str, depth: int) -> bool:  # False once a bound is exceeded: stop the walk
        nonlocal budget
        try:
            with os.scandir(path) as it:
                # a hostile directory may hold millions of entries: read one past the budget
                entries = list(islice(it, budget + 1))
            entries.sort(key=lambda e: os.fsencode(e.name))  # Go's os.ReadDir: byte order
            is_dir = [e.is_dir(follow_symlinks=False) for e in entries]  # lstat, as d_type
        except OSError as err:  # the kubelet fails when it cannot list a subdirectory
            problems.append(_cannot_list(path, err))
            return True
        if len(entries) > budget:
            problems.append(
                f"--config-dir: {directory} holds more than {DROPIN_MAX_ENTRIES} files and"
                f" directories; give a drop-in directory of at most {DROPIN_MAX_ENTRIES}."
            )
            return False
        budget -= len(entries)
        for entry, entry_is_dir in zip(entries, is_dir, strict=True):
            if not entry_is_dir:
                if entry.name.endswith(DROPIN_SUFFIX):
                    found.append(entry.path)
            elif depth == DROPIN_MAX_DEPTH:
                problems.append(
                    f"--config-dir: {entry.path} is nested more than {DROPIN_MAX_DEPTH}"
                    f" directories deep in {directory}; give a flatter drop-in directory."
                )
                return False
            elif not walk(entry.path, depth + 1):
                return False
        return True

    # past a bound, load nothing: the walk's one problem is the answer
    return found if walk(directory, 0) else []


def _cannot_list(path: str, err: OSError) -> str:
    return (
        f"--config-dir: cannot list {path} ({err.strerror or err}); expected a"
        f" directory of *{DROPIN_SUFFIX} {CONFIG_KIND} drop-ins."
    )


def dropin_root_note(directory: str) -> str | None:
    """A warning when ``directory`` is a symlink: WalkDir does not follow the root either, so
    the kubelet loads none of the drop-ins behind it, without a word."""
    try:
        is_link = stat.S_ISLNK(os.lstat(directory).st_mode)
    except OSError:
        return None  # the walk reports it
    if not is_link or os.path.basename(directory).endswith(DROPIN_SUFFIX):
        return None  # a "*.conf" root is loaded as a file, and fails there if it is none
    return (
        f"--config-dir {directory} is a symlink, which the kubelet's walk (filepath.WalkDir)"
        " does not follow: none of the drop-ins in it is loaded; give the directory it points"
        " to, or end the path with '/'."
    )


def within_total(paths: list[str], directory: str, problems: list[str]) -> list[str]:
    """``paths`` when the drop-ins hold at most FILE_LIMIT bytes together; else none, and the
    problem: each file's own bound still lets 256 of them take minutes and gigabytes to load."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):  # reading it says what is wrong
            total += os.stat(path).st_size
    if total <= FILE_LIMIT:
        return paths
    problems.append(
        f"--config-dir: the drop-ins in {directory} hold {total} bytes together, more than"
        f" {FILE_LIMIT >> 20} MiB; a {CONFIG_KIND} drop-in is a few KiB."
    )
    return []


# Fields SetDefaults_KubeletConfiguration (pkg/kubelet/apis/config/v1beta1/defaults.go) sets
# when they hold their Go zero value, not only when absent: decoding the main file defaults
# them, so its "maxPods: 0" is 110, while a drop-in's (merged into the loaded config, never
# defaulted; server.go mergeKubeletConfigurations) and the flag --max-pods=0 stay 0.
