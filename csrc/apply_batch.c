/* apply_batch: make n changes in order through cgcore's safe mkdir/write, stopping at the
 * first that fails. One call for a whole plan instead of one Python-to-C crossing per change.
 *
 * Op i is made beneath fds[i]; its kind is kinds[i] (CG_OP_MKDIR or CG_OP_WRITE, maybe with
 * CG_OP_FORCE_WALK); its relative path is the NUL-terminated string at buf + offs[2i], its
 * value the offs[2i+2] - offs[2i+1] - 1 bytes at buf + offs[2i+1] (unused for a mkdir).
 * Returns how many ops were made; *err is the failing op's negative errno, 0 when all were
 * or when *stop (NULL: never) was found set before an op: a signal handler sets it from
 * another thread, so one call can make a whole plan and still stop within one change.
 */
#include "apply_batch.h"
#include "cgcore.h"

size_t cg_apply_ops(const int *fds, const uint8_t *kinds, const char *buf, const size_t *offs,
                    size_t n, int *err, const int *stop)
{
    for (size_t i = 0; i < n; i++) {
        /* atomic: another thread sets it while this one runs */
        if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) {
            *err = 0;
            return i;
        }
        const char *path = buf + offs[2 * i];
        int flags = kinds[i] & CG_OP_FORCE_WALK ? CG_FORCE_WALK : 0;
        int rc;

        if ((kinds[i] & ~CG_OP_FORCE_WALK) == CG_OP_WRITE) {
            const char *value = buf + offs[2 * i + 1];
            rc = cg_write(fds[i], path, value, offs[2 * i + 2] - offs[2 * i + 1] - 1, flags);
        } else {
            rc = cg_mkdir(fds[i], path, 0755, flags);
        }
        if (rc < 0) {
            *err = rc;
            return i;
        }
    }
    *err = 0;
    return n;
}
