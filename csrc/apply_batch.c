/* apply_batch: make n changes in order through cgcore's safe mkdir/write, stopping at the
 * first that fails. One call for a whole plan instead of one Python-to-C crossing per change.
 *
 * Op i is made beneath fds[i]; its kind is kinds[i] (CG_OP_MKDIR or CG_OP_WRITE, maybe with
 * CG_OP_FORCE_WALK and CG_OP_KEEP_PARENT); its relative path is the NUL-terminated string at
 * buf + offs[2i], its value the offs[2i+2] - offs[2i+1] - 1 bytes at buf + offs[2i+1] (unused
 * for a mkdir). Returns how many ops were made; *err is the failing op's negative errno, 0
 * when all were or when *stop (NULL: never) was found set before an op: a signal handler sets
 * it from another thread, so one call can make a whole plan and still stop within one change.
 */
#include "apply_batch.h"
#include "cgcore.h"
#include "cgcore_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The parent directories opened last, for ops with CG_OP_KEEP_PARENT (a plan's ops go round
 * the v1 hierarchies pod by pod; a v1 cpuset mkdir is followed by its seed writes one level
 * down): an op below a kept parent resolves its last component only (mkdirat; openat with
 * O_NOFOLLOW), where the op alone resolves its whole path and a mkdir opens and closes the
 * parent. A parent is opened as the op alone opens it, beneath the root with no symlink.
 *
 * Every failure is the op alone's: an op that fails below a kept parent made nothing, and is
 * made again alone (the parent may have been removed and made again since it was opened).
 * What a kept parent can change is where a success lands when the parent was moved while the
 * call ran: on cgroupfs only within its own parent (a v1 rename; v2 has none, and no cgroupfs
 * has symlinks), so the flag is for roots on cgroupfs. */
#define PARENTS 16

struct parent {
    int rootfd, flags, fd; /* fd -1: unused */
    unsigned long used;    /* when last used: the least recent is replaced */
    size_t len;
    char path[PATH_MAX]; /* cg_check_relpath bounds a path below PATH_MAX */
};

static void forget_parents(struct parent *ps)
{
    for (int k = 0; k < PARENTS; k++) {
        if (ps[k].fd >= 0)
            close(ps[k].fd);
        ps[k].fd = -1;
    }
}

/* The kept fd of relpath's parent (the root's own for a path without '/'; *last its last
 * component), opened and kept on first use; or -errno. relpath is already checked. */
static int parent_fd(struct parent *ps, unsigned long now, int rootfd, const char *relpath,
                     int flags, const char **last)
{
    const char *slash = strrchr(relpath, '/');

    if (!slash) {
        *last = relpath;
        return rootfd;
    }
    size_t len = (size_t)(slash - relpath);
    struct parent *slot = &ps[0];

    for (int k = 0; k < PARENTS; k++) {
        struct parent *p = &ps[k];
        if (p->fd >= 0 && p->rootfd == rootfd && p->flags == flags && p->len == len &&
            !memcmp(p->path, relpath, len)) {
            p->used = now;
            *last = slash + 1;
            return p->fd;
        }
        if (p->fd < 0 ? slot->fd >= 0 : slot->fd >= 0 && p->used < slot->used)
            slot = p; /* the first free slot, else the least recently used */
    }
    int fd = cg_open_parent(rootfd, relpath, last, flags);
    if (fd < 0)
        return fd;
    if (slot->fd >= 0)
        close(slot->fd);
    slot->rootfd = rootfd;
    slot->flags = flags;
    slot->fd = fd;
    slot->used = now;
    slot->len = len;
    memcpy(slot->path, relpath, len);
    return fd;
}

/* The op alone, as cg_mkdir/cg_write make it. */
static int op_alone(int rootfd, uint8_t kind, const char *path, const char *value, size_t len)
{
    int flags = kind & CG_OP_FORCE_WALK ? CG_FORCE_WALK : 0;

    if ((kind & ~(CG_OP_FORCE_WALK | CG_OP_KEEP_PARENT)) == CG_OP_WRITE)
        return cg_write(rootfd, path, value, len, flags);
    return cg_mkdir(rootfd, path, 0755, flags);
}

static int make_op(struct parent *ps, unsigned long now, int rootfd, uint8_t kind,
                   const char *path, const char *value, size_t len)
{
    int flags = kind & CG_OP_FORCE_WALK ? CG_FORCE_WALK : 0;
    int write = (kind & ~(CG_OP_FORCE_WALK | CG_OP_KEEP_PARENT)) == CG_OP_WRITE;
    const char *last;

    if (!ps || !(kind & CG_OP_KEEP_PARENT) || cg_check_relpath(path) < 0)
        return op_alone(rootfd, kind, path, value, len);
    int pfd = parent_fd(ps, now, rootfd, path, flags, &last);
    if (pfd >= 0) {
        int rc = write ? cg_open_in(pfd, last, O_WRONLY | O_TRUNC)
                       : (mkdirat(pfd, last, 0755) < 0 ? -errno : 0);
        if (rc >= 0)
            return write ? cg_write_close(rc, value, len) : 0;
    } else if (pfd != -EMFILE && pfd != -ENFILE) {
        return pfd; /* the parent resolved as the op alone resolves it */
    }
    /* Nothing was made: the op alone answers (the kept fds closed, as they may be what the
     * process lacks, or a kept parent may be gone) */
    forget_parents(ps);
    return op_alone(rootfd, kind, path, value, len);
}

size_t cg_apply_ops(const int *fds, const uint8_t *kinds, const char *buf, const size_t *offs,
                    size_t n, int *err, const int *stop)
{
    /* without memory for the parents, each op is made alone */
    struct parent *ps = malloc(PARENTS * sizeof *ps);
    size_t i;

    *err = 0;
    for (int k = 0; ps && k < PARENTS; k++)
        ps[k].fd = -1;
    for (i = 0; i < n; i++) {
        /* atomic: another thread sets it while this one runs */
        if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
            break;
        const char *path = buf + offs[2 * i];
        const char *value = buf + offs[2 * i + 1];
        size_t len = offs[2 * i + 2] - offs[2 * i + 1] - 1;
        int rc = make_op(ps, i + 1, fds[i], kinds[i], path, value, len);

        if (rc < 0) {
            *err = rc;
            break;
        }
    }
    if (ps)
        forget_parents(ps);
    free(ps);
    return i;
}
