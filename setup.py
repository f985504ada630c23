"""Build hook: compiles the C core (csrc/) with cffi at install time, as an abi3 extension.

The build is optional: without a working compiler (or Python headers) the install still
succeeds and cgalloc runs on its pure-Python core, which ``cgalloc --version`` reports.
"""

import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

try:  # setuptools vendors distutils; its error classes are what a failed compile raises
    from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError
except ImportError:  # setuptools < 59
    from distutils.errors import CCompilerError, CompileError, LinkError
    from distutils.errors import DistutilsExecError as ExecError
    from distutils.errors import DistutilsPlatformError as PlatformError

BUILD_ERRORS = (CCompilerError, CompileError, LinkError, ExecError, PlatformError, OSError)
FALLBACK = "cgalloc: C core not built ({}); installing with the pure-Python core"


class OptionalBuildExt(build_ext):
    """build_ext that turns a missing compiler into one line instead of a failed install."""

    def run(self) -> None:
        try:
            super().run()
        except BUILD_ERRORS as exc:
            self._fallback(exc)

    def build_extension(self, ext) -> None:
        try:
            super().build_extension(ext)
        except BUILD_ERRORS as exc:
            self._fallback(exc)

    @staticmethod
    def _fallback(exc: BaseException) -> None:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        print(FALLBACK.format(reason), file=sys.stderr)


setup(
    cffi_modules=["csrc/build_core.py:ffibuilder"],
    cmdclass={"build_ext": OptionalBuildExt},
    # The extension uses the stable ABI (csrc/build_core.py): one wheel for every CPython >= 3.10.
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
