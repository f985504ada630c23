/* cgcore.c's safe resolution for the extension's other sources (apply_batch.c). Not part of
 * the cffi interface: csrc/build_core.py makes its cdef of cgcore.h and apply_batch.h only.
 */
#ifndef CGCORE_INTERNAL_H
#define CGCORE_INTERNAL_H

#include <stddef.h>

/* relpath's parent beneath rootfd as cg_mkdir resolves it (relpath checked first): an O_PATH
 * fd of the parent (a duplicate of rootfd when relpath has no '/'), *last pointing at the
 * last component within relpath; or -errno. */
int cg_open_parent(int rootfd, const char *relpath, const char **last, int flags);

/* cg_write of name, one component below dirfd (not followed if it is a symlink): one
 * write() of value; 0 or -errno, as cg_write. */
int cg_write_in(int dirfd, const char *name, const char *value, size_t len);

#endif
