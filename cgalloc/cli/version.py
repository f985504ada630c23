"""``cgalloc --version``: the package, which core is loaded, the kubelet matched, the libraries."""

from __future__ import annotations

import platform
import re
from importlib import metadata

import cgalloc
from cgalloc.host import core
from cgalloc.model.versions import DEFAULT_KUBELET_VERSION, SUPPORTED_VERSIONS


def _libraries() -> list[str]:
    """``name version`` of each runtime dependency the installed metadata declares."""
    try:
        requires = metadata.requires("cgalloc") or []
    except metadata.PackageNotFoundError:  # run from a tree that was never installed
        return []
    out = []
    for req in requires:
        if "extra ==" in req:
            continue
        name = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} missing")
    return sorted(out, key=str.lower)


def version_lines() -> list[str]:
    """The lines ``cgalloc --version`` prints."""
    if core.PURE_REASON is None:
        loaded = "C (cgalloc.host.core._cgcore, stable ABI)"
    else:
        loaded = f"pure Python ({core.PURE_REASON})"
    return [
        f"cgalloc {cgalloc.__version__}",
        f"core: {loaded}",
        f"kubelet: {DEFAULT_KUBELET_VERSION} matched by default"
        f" (--kubelet-version: {SUPPORTED_VERSIONS[0]} to {SUPPORTED_VERSIONS[-1]})",
        f"python: {platform.python_implementation()} {platform.python_version()}",
        f"libraries: {', '.join(_libraries()) or 'unknown (not installed)'}",
    ]
