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

/* name, one component below dirfd, opened with oflags as the last step of a safe walk
 * (O_NOFOLLOW: a symlink is -ELOOP): the fd or -errno. */
int cg_open_in(int dirfd, const char *name, int oflags);

/* cg_write's tail: one write() of value to fd (a negative fd is returned as is), then close;
 * 0 or -errno. */
int cg_write_close(int fd, const char *value, size_t len);

#endif
