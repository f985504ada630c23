"""The reader most scripts write: open each file, readlines, split. The baseline to beat."""

from __future__ import annotations

import os


def read_tree(mounts: dict[str, str], dirs: list[str], files: dict[str, tuple[str, ...]]):
    """Read ``files`` (controller -> file names) of every dir; keyed files become dicts.

    ``mounts`` maps a controller to the directory its files live under (the same directory for
    every controller on v2). Returns one {file: value} dict per dir.
    """
    out = []
    for rel in dirs:
        cg: dict[str, object] = {}
        for ctrl, names in files.items():
            base = os.path.join(mounts[ctrl], rel)
            for name in names:
                try:
                    with open(os.path.join(base, name)) as f:
                        lines = f.readlines()
                except OSError:
                    continue
                if len(lines) == 1 and len(lines[0].split()) == 1:
                    token = lines[0].strip()
                    cg[name] = None if token in ("max", "-1") else int(token)
                else:
                    parts = [line.split() for line in lines]
                    cg[name] = {p[0]: int(p[1]) for p in parts if len(p) == 2}
        out.append(cg)
    return out
