"""cffi API-mode build of the C core: compiles csrc/cgcore.c and csrc/apply_batch.c into
``cgalloc.host.core._cgcore``."""

import os
import re
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent

# Python sees exactly the declarations of cgcore.h: comments, the include guard and the
# includes are dropped (cffi's cdef takes plain declarations and integer #defines only).
_GUARD = re.compile(r"^#(ifndef|endif|include)\b|^#define (CGCORE|APPLY_BATCH)_H\b")


def header_cdef(header: Path) -> str:
    """The cdef text of a C header: its declarations without comments and preprocessor guards."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    return "\n".join(line for line in text.splitlines() if not _GUARD.match(line.strip()))


CDEF = header_cdef(HERE / "cgcore.h")
# the setup batch (apply_batch.c): its own header, its own cdef block
BATCH_CDEF = header_cdef(HERE / "apply_batch.h")

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.cdef(BATCH_CDEF)
ffibuilder.set_source(
    "cgalloc.host.core._cgcore",
    '#include "cgcore.h"\n#include "apply_batch.h"',
    sources=[os.path.relpath(HERE / "cgcore.c"), os.path.relpath(HERE / "apply_batch.c")],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-pthread"],
    extra_link_args=["-pthread"],
    # Stable ABI: one extension (_cgcore.abi3.so) for every CPython >= 3.10; the wheel is tagged
    # cp310-abi3 by the bdist_wheel option in pyproject.toml.
    py_limited_api=True,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
