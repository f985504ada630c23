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
#include "cgcore_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The parent directories opened last (a plan's ops go round the v1 hierarchies, one pod after
 * another; a v1 cpuset mkdir is followed by its seed writes one level down): an op below a
 * parent kept here resolves its last component only, where cg_mkdir/cg_write resolve the whole
 * path (and a mkdir opens and closes the parent) each time. The fd was opened as they open it,
 * beneath the root with no symlink, and the last component is taken as they take it (mkdirat;
 * openat with O_NOFOLLOW), so each op's outcome and errno are theirs. */
#define PARENTS 16

struct parent {
    int rootfd, flags, fd; /* fd -1: unused */
    unsigned long used;    /* when last used: the least recent is replaced */
    size_t len;
    char path[PATH_MAX];
};

/* The fd of relpath's parent (the root's own for a path without '/'; *last its last
 * component), kept in ps when it fits; or -errno. relpath is already checked. */
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
            slot = p;
    }
    int fd = cg_open_parent(rootfd, relpath, last, flags);
    if (fd < 0 || len >= sizeof slot->path)
        return fd; /* not kept: the caller closes it */
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

static int kept(const struct parent *ps, int fd)
{
    for (int k = 0; k < PARENTS; k++)
        if (ps[k].fd == fd)
            return 1;
    return 0;
}

static void forget_parents(struct parent *ps)
{
    for (int k = 0; k < PARENTS; k++) {
        if (ps[k].fd >= 0)
            close(ps[k].fd);
        ps[k].fd = -1;
    }
}

/* The op alone, as cg_mkdir/cg_write make it. */
static int op_alone(int rootfd, uint8_t kind, const char *path, const char *value, size_t len)
{
    int flags = kind & CG_OP_FORCE_WALK ? CG_FORCE_WALK : 0;

    if ((kind & ~CG_OP_FORCE_WALK) == CG_OP_WRITE)
        return cg_write(rootfd, path, value, len, flags);
    return cg_mkdir(rootfd, path, 0755, flags);
}

static int make_op(struct parent *ps, unsigned long now, int rootfd, uint8_t kind,
                   const char *path, const char *value, size_t len)
{
    int flags = kind & CG_OP_FORCE_WALK ? CG_FORCE_WALK : 0;
    const char *last;
    int rc = cg_check_relpath(path);

    if (rc < 0)
        return rc;
    int pfd = parent_fd(ps, now, rootfd, path, flags, &last);
    if (pfd >= 0) {
        if ((kind & ~CG_OP_FORCE_WALK) == CG_OP_WRITE)
            rc = cg_write_in(pfd, last, value, len);
        else
            rc = mkdirat(pfd, last, 0755) < 0 ? -errno : 0;
        if (pfd != rootfd && !kept(ps, pfd))
            close(pfd);
    } else {
        rc = pfd;
    }
    if (rc == -EMFILE || rc == -ENFILE) {
        /* an open failed, so nothing was made: the kept fds may be what the process lacks */
        forget_parents(ps);
        rc = op_alone(rootfd, kind, path, value, len);
    }
    return rc;
}

size_t cg_apply_ops(const int *fds, const uint8_t *kinds, const char *buf, const size_t *offs,
                    size_t n, int *err, const int *stop)
{
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
        int rc;

        /* without memory for the parents, each op is resolved whole */
        rc = ps ? make_op(ps, i + 1, fds[i], kinds[i], path, value, len)
                : op_alone(fds[i], kinds[i], path, value, len);
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
