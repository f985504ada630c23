/* apply_batch: a setup's mkdirs and writes made in one call, for cgalloc.host.core.apply_ops.
 *
 * Its declarations are a cdef block of their own (csrc/build_core.py reads each header),
 * apart from cgcore.h's read core.
 */
#ifndef APPLY_BATCH_H
#define APPLY_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define CG_OP_MKDIR 0
#define CG_OP_WRITE 1
#define CG_OP_FORCE_WALK 2 /* or-ed into a kind: resolve that op with CG_FORCE_WALK (tests) */
/* or-ed into a kind: the op may be made below a parent directory kept open from an earlier op
 * of the call (for a root on cgroupfs, which has no symlinks and moves a cgroup only within
 * its parent) */
#define CG_OP_KEEP_PARENT 4

size_t cg_apply_ops(const int *fds, const uint8_t *kinds, const char *buf, const size_t *offs,
                    size_t n, int *err, const int *stop);

#endif
