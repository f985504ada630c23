"""The source distribution carries what building the C core needs, and --version reports the
core, the kubelet version matched and the libraries. The full story (sdist and wheel installed
in fresh venvs, abi3 tag, no-compiler fallback) is `.ci/packaging`."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import typer

from cgalloc.cli.version import version_lines

REPO = Path(__file__).resolve().parent.parent


def test_sdist_holds_the_c_build_files_and_the_boot_unit(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (sdist,) = tmp_path.glob("cgalloc-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    needed = {"setup.py", "pyproject.toml", "csrc/build_core.py"}
    needed |= {f"csrc/{p.name}" for p in (REPO / "csrc").iterdir() if p.suffix in (".c", ".h")}
    needed |= {"cgalloc/data/cgalloc-setup.service", "cgalloc/data/setup.conf"}
    assert needed <= names, sorted(needed - names)


def test_version_names_package_core_and_libraries():
    lines = version_lines()
    assert lines[0] == f"cgalloc {metadata.version('cgalloc')}"
    assert f"typer {typer.__version__}" in lines[-1]
    assert f"PyYAML {metadata.version('PyYAML')}" in lines[-1]
    assert lines[2].startswith("kubelet: ")


def test_version_says_which_core_is_loaded():
    def core_line(prefix: str) -> str:
        # prefix may block the extension's import the way a missing build does (test-side hook)
        code = prefix + "import sys, runpy; sys.argv = ['cgalloc', '--version']; "
        code += "runpy.run_module('cgalloc', run_name='__main__')"
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        ).stdout
        return out.splitlines()[1]

    blocked = core_line("import sys; sys.modules['cgalloc.host.core._cgcore'] = None; ")
    assert blocked.startswith("core: pure Python (C extension not importable: ")
    assert "cgalloc.host.core._cgcore" in blocked
    built = list((REPO / "cgalloc/host/core").glob("_cgcore*.so"))
    expected = "core: C (cgalloc.host.core._cgcore, stable ABI)" if built else "core: pure Python"
    assert core_line("").startswith(expected)
