"""cffi API-mode build of the C core: compiles csrc/cgcore.c into ``cgalloc.core._cgcore``."""

import os
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent

# What Python sees of cgcore.h; API mode compiles it against the header, so drift fails the build.
CDEF = """
#define CG_OK 0
#define CG_MAX 1
#define CG_ENOENT 2
#define CG_EPARSE 3
#define CG_ERANGE 4
#define CG_ETOOLONG 5
#define CG_EMISSING_KEY 6
#define CG_EIO 7
#define CG_SINGLE 0
#define CG_KEYED 1
#define CG_FIELDS 2
#define CG_ALLOW_ANY_FS 1
#define CG_FORCE_WALK 1

typedef struct cg_spec {
    const char *name;
    int kind;
    int ncells;
    const char *const *keys;
    const uint32_t *keylens;
} cg_spec;
typedef struct cg_sampler cg_sampler;

int cg_open_root(const char *path, int flags, long *magic);
int cg_parse_token(const char *s, size_t n, uint64_t *out);
void cg_parse(const cg_spec *spec, const char *buf, size_t n, uint64_t *vals, uint8_t *st);
int cg_read(int rootfd, const char *dirbuf, const size_t *dir_offs, int ndirs,
            const cg_spec *specs, int nspecs, size_t bufsize, int nthreads, uint64_t *vals,
            uint8_t *st);
cg_sampler *cg_sampler_new(int rootfd, const cg_spec *specs, int nspecs, size_t bufsize,
                           int check_nlink);
int cg_sampler_set_dirs(cg_sampler *s, const char *dirbuf, const size_t *dir_offs, int ndirs,
                        const int *carry);
int cg_sampler_sample(cg_sampler *s, int nthreads, uint64_t *vals, uint8_t *st);
void cg_sampler_free(cg_sampler *s);
int cg_check_relpath(const char *relpath);
int cg_write(int rootfd, const char *relpath, const char *value, size_t len, int flags);
int cg_mkdir(int rootfd, const char *relpath, unsigned int mode, int flags);
int cg_rmdir(int rootfd, const char *relpath, int flags);
long cg_read_text(int rootfd, const char *relpath, char *buf, size_t bufsize, int flags);
int cg_online_cpus(void);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "cgalloc.core._cgcore",
    '#include "cgcore.h"',
    sources=[os.path.relpath(HERE / "cgcore.c")],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-pthread"],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
