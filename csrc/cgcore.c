/* cgcore: see cgcore.h. Linux only. */
#define _GNU_SOURCE
#include "cgcore.h"
#include "cgcore_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* same number on every architecture */
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#endif

/* Defined locally: <linux/openat2.h> is missing from older libc headers. */
struct cg_open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};

#define CG_MIN_ITEMS_PER_THREAD 32
#define CG_MAX_THREADS 64

static volatile int openat2_missing; /* set once the kernel answers ENOSYS */

/* ---------------------------------------------------------------- parsers */

int cg_parse_token(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    int over = 0;
    size_t i;

    *out = 0;
    if (n == 3 && s[0] == 'm' && s[1] == 'a' && s[2] == 'x')
        return CG_MAX;
    /* v1 spells "no limit" as -1 (cpu.cfs_quota_us) */
    if (n == 2 && s[0] == '-' && s[1] == '1')
        return CG_MAX;
    if (n == 0)
        return CG_EPARSE;
    if (n < 20) { /* 19 digits stay below 2^64: no overflow check per digit */
        for (i = 0; i < n; i++) {
            unsigned d = (unsigned char)s[i] - (unsigned)'0';
            if (d > 9)
                return CG_EPARSE;
            v = v * 10 + d;
        }
        *out = v;
        return CG_OK;
    }
    for (i = 0; i < n; i++) {
        unsigned d = (unsigned char)s[i] - (unsigned)'0';
        if (d > 9)
            return CG_EPARSE;
        if (v > (UINT64_MAX - d) / 10)
            over = 1;
        else if (!over)
            v = v * 10 + d;
    }
    if (over)
        return CG_ERANGE;
    *out = v;
    return CG_OK;
}

static void fill(int ncells, uint64_t *vals, uint8_t *st, int status)
{
    for (int k = 0; k < ncells; k++) {
        vals[k] = 0;
        st[k] = (uint8_t)status;
    }
}

static size_t strip_newline(const char *buf, size_t n)
{
    return (n > 0 && buf[n - 1] == '\n') ? n - 1 : n;
}

static void parse_fields(int ncells, const char *buf, size_t n, uint64_t *vals, uint8_t *st)
{
    const char *p = buf, *end;
    int k = 0;

    n = strip_newline(buf, n);
    end = buf + n;
    /* count first so a wrong field count poisons every cell, not just the tail */
    int count = 1;
    for (size_t i = 0; i < n; i++)
        count += buf[i] == ' ';
    if (count != ncells) {
        fill(ncells, vals, st, CG_EPARSE);
        return;
    }
    for (;;) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *te = sp ? sp : end;
        st[k] = (uint8_t)cg_parse_token(p, (size_t)(te - p), &vals[k]);
        k++;
        if (!sp)
            break;
        p = sp + 1;
    }
}

/* What parsing a keyed file needs beyond its spec, computed once per spec: the bitmap of the
 * keys' first bytes (an empty key starts with the space after it) and whether the keys are
 * distinct and few enough to track in one 64-bit mask. */
struct keytab {
    uint32_t first[8];
    int distinct;
};

static void make_keytab(const cg_spec *spec, struct keytab *t)
{
    memset(t, 0, sizeof *t);
    if (spec->kind != CG_KEYED)
        return;
    t->distinct = spec->ncells <= 64;
    for (int j = 0; j < spec->ncells; j++) {
        uint32_t len = spec->keylens[j];
        unsigned char c = len ? (unsigned char)spec->keys[j][0] : ' ';
        t->first[c >> 5] |= 1u << (c & 31);
        for (int k = 0; k < j && t->distinct; k++)
            if (spec->keylens[k] == len && memcmp(spec->keys[k], spec->keys[j], len) == 0)
                t->distinct = 0;
    }
}

/* Key j names the line at p (linelen bytes) when the line's first space follows exactly key j.
 * The space test comes first: it rejects almost every other line without touching the key. */
static inline int key_matches(const cg_spec *spec, int j, const char *p, size_t linelen)
{
    size_t klen = spec->keylens[j];

    /* a key holding a space never ends at the line's first space */
    return klen < linelen && p[klen] == ' ' && memcmp(spec->keys[j], p, klen) == 0 &&
           !memchr(spec->keys[j], ' ', klen);
}

/* The key naming a line, or -1. Distinct keys: at most one can match, so only the keys still
 * missing are tried. Otherwise every key in the order the first-match rule always used. */
static inline int find_key(const cg_spec *spec, const struct keytab *t, uint64_t missing,
                           const char *p, size_t linelen, int hint)
{
    if (t->distinct) {
        for (; missing; missing &= missing - 1) {
            int j = __builtin_ctzll(missing);
            if (key_matches(spec, j, p, linelen))
                return j;
        }
        return -1;
    }
    /* files list keys in a stable order, so the next expected key usually matches */
    for (int j = hint; j < spec->ncells; j++)
        if (key_matches(spec, j, p, linelen))
            return j;
    for (int j = 0; j < hint && j < spec->ncells; j++)
        if (key_matches(spec, j, p, linelen))
            return j;
    return -1;
}

/* One memchr per line finds its end; a line whose first byte starts no requested key is
 * skipped without looking at the keys. Parsing stops once every key is found. */
static void parse_keyed(const cg_spec *spec, const struct keytab *t, const char *buf, size_t n,
                        uint64_t *vals, uint8_t *st)
{
    const char *p = buf, *end = buf + n;
    int left = spec->ncells, hint = 0;
    /* used only when t->distinct, which implies ncells <= 64 */
    uint64_t missing = left <= 0 ? 0 : left >= 64 ? ~0ULL : (1ULL << left) - 1;

    fill(spec->ncells, vals, st, CG_EMISSING_KEY);
    while (p < end && left > 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        unsigned char c = (unsigned char)*p;
        if (t->first[c >> 5] & (1u << (c & 31))) {
            int j = find_key(spec, t, missing, p, (size_t)(le - p), hint);
            if (j >= 0 && st[j] == CG_EMISSING_KEY) { /* first occurrence wins */
                const char *val = p + spec->keylens[j] + 1;
                st[j] = (uint8_t)cg_parse_token(val, (size_t)(le - val), &vals[j]);
                left--;
                hint = j + 1;
                missing &= ~(1ULL << (j & 63));
            }
        }
        p = nl ? nl + 1 : end;
    }
}

static void parse_spec(const cg_spec *spec, const struct keytab *t, const char *buf, size_t n,
                       uint64_t *vals, uint8_t *st)
{
    switch (spec->kind) {
    case CG_SINGLE:
        st[0] = (uint8_t)cg_parse_token(buf, strip_newline(buf, n), &vals[0]);
        break;
    case CG_KEYED:
        parse_keyed(spec, t, buf, n, vals, st);
        break;
    case CG_FIELDS:
        parse_fields(spec->ncells, buf, n, vals, st);
        break;
    default:
        fill(spec->ncells, vals, st, CG_EPARSE);
    }
}

void cg_parse(const cg_spec *spec, const char *buf, size_t n, uint64_t *vals, uint8_t *st)
{
    struct keytab t;

    make_keytab(spec, &t);
    parse_spec(spec, &t, buf, n, vals, st);
}

/* ------------------------------------------------------ path resolution */

int cg_check_relpath(const char *relpath)
{
    const char *p = relpath;

    if (!relpath || !*relpath || *relpath == '/' || strlen(relpath) >= PATH_MAX)
        return -EINVAL;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return -EINVAL;
        if (!slash)
            return 0;
        p = slash + 1;
    }
}

/* Every open for reading: a FIFO in a plain directory tree (stats reads one) must not block
 * the open or the read; kernfs and regular files ignore O_NONBLOCK. */
#define READ_FLAGS (O_RDONLY | O_NONBLOCK)

static int open_component_mode(int dirfd, const char *name, int oflags, mode_t mode)
{
    int fd;

    do
        fd = openat(dirfd, name, oflags | O_NOFOLLOW | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0)
        return fd;
    fd = -errno;
    if (fd == -ENOTDIR) {
        /* O_NOFOLLOW|O_DIRECTORY reports a symlink as ENOTDIR; openat2 says ELOOP */
        struct stat sb;
        if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
            return -ELOOP;
    }
    return fd;
}

static int open_component(int dirfd, const char *name, int oflags)
{
    return open_component_mode(dirfd, name, oflags, 0);
}

/* The O_NOFOLLOW walk for kernels without openat2; relpath is already checked. */
static int open_walk(int rootfd, const char *relpath, int oflags)
{
    char comp[PATH_MAX];
    const char *p = relpath;
    int cur = rootfd;

    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash) {
            int fd = open_component(cur, p, oflags);
            if (cur != rootfd)
                close(cur);
            return fd;
        }
        size_t len = (size_t)(slash - p);
        memcpy(comp, p, len);
        comp[len] = '\0';
        int next = open_component(cur, comp, O_PATH | O_DIRECTORY);
        if (cur != rootfd)
            close(cur);
        if (next < 0)
            return next;
        cur = next;
        p = slash + 1;
    }
}

static int open_beneath(int rootfd, const char *relpath, int oflags, int flags)
{
    int rc = cg_check_relpath(relpath);

    if (rc < 0)
        return rc;
    if (!(flags & CG_FORCE_WALK) && !openat2_missing) {
        struct cg_open_how how = {
            .flags = (uint64_t)(oflags | O_CLOEXEC),
            .mode = 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        for (int tries = 0;; tries++) {
            long fd = syscall(SYS_openat2, rootfd, relpath, &how, sizeof how);
            if (fd >= 0)
                return (int)fd;
            /* EAGAIN: a concurrent rename raced the BENEATH check */
            if (errno == EINTR || (errno == EAGAIN && tries < 8))
                continue;
            if (errno != ENOSYS)
                return -errno;
            openat2_missing = 1;
            break;
        }
    }
    return open_walk(rootfd, relpath, oflags);
}

/* Opens the parent of relpath's last component; *last points into relpath. */
static int open_parent(int rootfd, const char *relpath, const char **last, int flags)
{
    int rc = cg_check_relpath(relpath);
    const char *slash;
    char parent[PATH_MAX];

    if (rc < 0)
        return rc;
    slash = strrchr(relpath, '/');
    if (!slash) {
        int fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
        *last = relpath;
        return fd < 0 ? -errno : fd;
    }
    memcpy(parent, relpath, (size_t)(slash - relpath));
    parent[slash - relpath] = '\0';
    *last = slash + 1;
    return open_beneath(rootfd, parent, O_PATH | O_DIRECTORY, flags);
}

/* ------------------------------------------------------------------- root */

int cg_open_root(const char *path, int flags, long *magic)
{
    struct statfs sf;
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);

    *magic = 0;
    if (fd < 0)
        return -errno;
    if (fstatfs(fd, &sf) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    *magic = (long)sf.f_type;
    if (sf.f_type != CG_MAGIC_CGROUP && sf.f_type != CG_MAGIC_CGROUP2 &&
        !(flags & CG_ALLOW_ANY_FS)) {
        close(fd);
        return -EMEDIUMTYPE;
    }
    return fd;
}

int cg_online_cpus(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ------------------------------------------------------------ bulk reads */

static int errno_status(int err)
{
    return (err == ENOENT || err == ENODEV || err == ENOTDIR) ? CG_ENOENT : CG_EIO;
}

static ssize_t pread_retry(int fd, char *buf, size_t n)
{
    ssize_t r;

    do
        r = pread(fd, buf, n, 0);
    while (r < 0 && errno == EINTR);
    return r;
}

/* A short read is the whole file: kernfs emits a seq_file in one read and regular files
 * only read short at EOF. A full buffer means the content may not have fit. */
static void parse_read(const cg_spec *spec, const struct keytab *t, ssize_t n, const char *buf,
                       size_t bufsize, uint64_t *vals, uint8_t *st)
{
    if (n < 0)
        fill(spec->ncells, vals, st, errno_status(errno));
    else if ((size_t)n >= bufsize)
        fill(spec->ncells, vals, st, CG_ETOOLONG);
    else
        parse_spec(spec, t, buf, (size_t)n, vals, st);
}

static int join_path(char *out, const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);

    if (dl + nl + 2 > PATH_MAX)
        return -ENAMETOOLONG;
    if (dl) {
        memcpy(out, dir, dl);
        out[dl++] = '/';
    }
    memcpy(out + dl, name, nl + 1);
    return 0;
}

static int open_cell(int rootfd, const char *dir, const cg_spec *spec)
{
    char path[PATH_MAX];
    int rc = join_path(path, dir, spec->name);

    return rc < 0 ? rc : open_beneath(rootfd, path, READ_FLAGS, 0);
}

struct layout {
    const cg_spec *specs;
    int nspecs;
    int cells_per_dir;
    struct keytab *tabs; /* one per spec, in the same allocation */
    int *nested;         /* per spec: its name holds a '/' */
    int celloff[];       /* first cell of each spec within a dir */
};

static struct layout *make_layout(const cg_spec *specs, int nspecs)
{
    size_t n = (size_t)(nspecs > 0 ? nspecs : 1);
    struct layout *l = malloc(sizeof *l + sizeof(int) * (2 * n + 1) + sizeof(struct keytab) * n);

    if (!l)
        return NULL;
    l->specs = specs;
    l->nspecs = nspecs;
    l->cells_per_dir = 0;
    l->nested = l->celloff + n + 1;
    l->tabs = (struct keytab *)(l->nested + n); /* ints keep keytab's 4-byte alignment */
    for (int f = 0; f < nspecs; f++) {
        l->nested[f] = strchr(specs[f].name, '/') != NULL;
        l->celloff[f] = l->cells_per_dir;
        l->cells_per_dir += specs[f].ncells;
        make_keytab(&specs[f], &l->tabs[f]);
    }
    return l;
}

struct job {
    /* shared */
    const struct layout *lay;
    int rootfd;
    const char *const *dirs;
    int *fds;          /* sampler only */
    int *dirfds;       /* sampler only: per dir, its kept O_PATH fd or -1 */
    long ndirfds;      /* sampler only: dirs [0, ndirfds) may keep a dir fd */
    const long *kept;  /* sampler only: per spec, dirs [0, kept[f]) keep that file open */
    long row;          /* split threads on multiples of this many items (1 = anywhere) */
    const char *marker; /* read only: with mtimes, the file whose mtime counts with its dir's */
    int64_t *mtimes;   /* read only: per dir, its oldest mtime as cg_oldest_mtimes gives it */
    int check_nlink;
    size_t bufsize;
    uint64_t *vals;
    uint8_t *st;
    /* this thread's items: item i is (dir i / nspecs, spec i % nspecs) */
    long lo, hi;
    char *buf;
    int err;
};

/* Item i is (dir d, spec f). Workers step d and f along with i rather than divide per item. */
struct item {
    long d;
    int f;
    const cg_spec *spec;
    const struct keytab *tab;
    uint64_t *v;
    uint8_t *s;
};

static void item_at(const struct job *j, struct item *it, long i)
{
    it->d = i / j->lay->nspecs;
    it->f = (int)(i % j->lay->nspecs);
}

static void item_cells(const struct job *j, struct item *it)
{
    long cell = it->d * j->lay->cells_per_dir + j->lay->celloff[it->f];

    it->spec = &j->lay->specs[it->f];
    it->tab = &j->lay->tabs[it->f];
    it->v = j->vals + cell;
    it->s = j->st + cell;
}

static void item_next(const struct job *j, struct item *it)
{
    if (++it->f == j->lay->nspecs) {
        it->f = 0;
        it->d++;
    }
}

/* The file of one cell, opened through its directory's fd (so a dir's path is resolved once,
 * not once per file). A name with a '/' is resolved beneath the root like any path. */
static int open_in_dir(const struct job *j, int dirfd, const char *dir, const struct item *it)
{
    if (j->lay->nested[it->f])
        return open_cell(j->rootfd, dir, it->spec);
    return open_component(dirfd, it->spec->name, READ_FLAGS);
}

/* One read() into buf, then close(fd); errno is read()'s. */
static ssize_t read_close(int fd, char *buf, size_t n)
{
    ssize_t r;

    do
        r = read(fd, buf, n);
    while (r < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

static void fail_item(const struct item *it, int neg_errno)
{
    fill(it->spec->ncells, it->v, it->s, errno_status(-neg_errno));
}

/* Cell ``it`` from a file just opened (or its -errno), read once and closed: no fd and no
 * seq_file page kept. Both the bulk read and the sampler's files without a kept fd do this. */
static void read_once(const struct job *j, const struct item *it, int fd)
{
    if (fd < 0) {
        fail_item(it, fd);
        return;
    }
    ssize_t n = read_close(fd, j->buf, j->bufsize);
    parse_read(it->spec, it->tab, n, j->buf, j->bufsize, it->v, it->s);
}

/* path's mtime in ns below dirfd, not following a last-component symlink, or INT64_MIN */
static int64_t mtime_at(int dirfd, const char *path)
{
    struct stat sb;
    int flags = AT_SYMLINK_NOFOLLOW | (*path ? 0 : AT_EMPTY_PATH);

    if (fstatat(dirfd, path, &sb, flags) < 0)
        return INT64_MIN;
    return (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
}

/* The older of the mtimes of path (below dirfd) and of its file marker ("" for none), or
 * INT64_MIN when path is not there: what cg_oldest_mtimes takes per fd. */
static int64_t dir_mtime(int dirfd, const char *path, const char *marker)
{
    char joined[PATH_MAX];
    int64_t t = mtime_at(dirfd, path);

    if (t == INT64_MIN || !*marker || join_path(joined, path, marker) < 0)
        return t;
    int64_t m = mtime_at(dirfd, joined);
    return m != INT64_MIN && m < t ? m : t;
}

/* Dir d's mtime for a dated read, taken through the dir's fd just opened for its files (a
 * stat of an open fd resolves nothing). A dir the read found missing is missing for
 * cg_oldest_mtimes too (ENOENT: the walk refuses a symlink, ELOOP, before any component
 * beyond it); one it could not open otherwise (a symlink on its path, no fd to spare) is
 * resolved from the root as cg_oldest_mtimes resolves it. */
static void date_dir(const struct job *j, long d, int dirfd)
{
    if (dirfd >= 0)
        j->mtimes[d] = dir_mtime(dirfd, "", j->marker);
    else if (dirfd == -ENOENT)
        j->mtimes[d] = INT64_MIN;
    else
        j->mtimes[d] = dir_mtime(j->rootfd, j->dirs[d], j->marker);
}

static void *read_worker(void *arg)
{
    struct job *j = arg;
    long cur = -1;
    int dirfd = -1;

    struct item it;

    item_at(j, &it, j->lo);
    for (long i = j->lo; i < j->hi; i++, item_next(j, &it)) {
        const char *dir = j->dirs[it.d];

        item_cells(j, &it);
        if (it.d != cur) {
            if (dirfd >= 0 && dirfd != j->rootfd)
                close(dirfd);
            cur = it.d;
            dirfd = *dir ? open_beneath(j->rootfd, dir, O_PATH | O_DIRECTORY, 0) : j->rootfd;
            if (j->mtimes)
                date_dir(j, it.d, dirfd);
        }
        read_once(j, &it, dirfd < 0 ? dirfd : open_in_dir(j, dirfd, dir, &it));
    }
    if (dirfd >= 0 && dirfd != j->rootfd)
        close(dirfd);
    return NULL;
}

/* Dir d's kept O_PATH fd, opened on first use (the root's own fd for ""), or -errno. */
static int dir_fd(struct job *j, long d)
{
    const char *dir = j->dirs[d];

    if (!*dir)
        return j->rootfd;
    if (j->dirfds[d] < 0) {
        int fd = open_beneath(j->rootfd, dir, O_PATH | O_DIRECTORY, 0);
        if (fd < 0)
            return fd;
        j->dirfds[d] = fd;
    }
    return j->dirfds[d];
}

static void drop_dir_fd(struct job *j, long d)
{
    if (j->dirfds[d] >= 0) {
        close(j->dirfds[d]);
        j->dirfds[d] = -1;
    }
}

/* Opens cell (d, f): an openat through the dir's kept fd when the policy gives it one (the
 * path is resolved once, not per file per sample), else beneath the root. A removed cgroup's
 * dir fd answers ENOENT: the dir is reopened once, so a re-created cgroup comes back. */
static int open_item(struct job *j, const struct item *it)
{
    const char *dir = j->dirs[it->d];

    if (it->d >= j->ndirfds || j->lay->nested[it->f])
        return open_cell(j->rootfd, dir, it->spec);
    int dfd = dir_fd(j, it->d);
    int fd = dfd < 0 ? dfd : open_in_dir(j, dfd, dir, it);

    if ((fd == -ENOENT || fd == -ENODEV) && dfd >= 0 && dfd != j->rootfd) {
        drop_dir_fd(j, it->d);
        dfd = dir_fd(j, it->d);
        fd = dfd < 0 ? dfd : open_in_dir(j, dfd, dir, it);
    }
    return fd;
}

static int reopen_if_gone(struct job *j, long i, const struct item *it, ssize_t *n)
{
    int gone = *n < 0 && (errno == ENODEV || errno == ENOENT);
    int fd;

    if (!gone && j->check_nlink && *n >= 0) {
        struct stat sb;
        gone = fstat(j->fds[i], &sb) == 0 && sb.st_nlink == 0;
    }
    if (!gone)
        return 0;
    close(j->fds[i]);
    j->fds[i] = -1;
    fd = open_item(j, it);
    if (fd < 0)
        return fd;
    j->fds[i] = fd;
    *n = pread_retry(fd, j->buf, j->bufsize);
    return 0;
}

static void *sample_worker(void *arg)
{
    struct job *j = arg;
    struct item it;

    item_at(j, &it, j->lo);
    for (long i = j->lo; i < j->hi; i++, item_next(j, &it)) {
        ssize_t n;

        item_cells(j, &it);
        if (it.d >= j->kept[it.f]) {
            read_once(j, &it, open_item(j, &it));
            continue;
        }
        if (j->fds[i] < 0) {
            int fd = open_item(j, &it);
            if (fd < 0) {
                fail_item(&it, fd);
                continue;
            }
            j->fds[i] = fd;
        }
        n = pread_retry(j->fds[i], j->buf, j->bufsize);
        int rc = reopen_if_gone(j, i, &it, &n);
        if (rc < 0) {
            fail_item(&it, rc);
            continue;
        }
        parse_read(it.spec, it.tab, n, j->buf, j->bufsize, it.v, it.s);
    }
    return NULL;
}

static int pick_threads(int nthreads, long items)
{
    long n = nthreads > 0 ? nthreads : cg_online_cpus();
    long by_work = items / CG_MIN_ITEMS_PER_THREAD;

    if (nthreads <= 0 && n > by_work)
        n = by_work;
    if (n > CG_MAX_THREADS)
        n = CG_MAX_THREADS;
    if (n > items)
        n = items;
    return n < 1 ? 1 : (int)n;
}

/* Where thread t's share starts: a multiple of row, so no row is shared by two threads. */
static long cut(long total, int t, int n, long row)
{
    if (t == n)
        return total;
    long c = total * t / n;
    return c - c % row;
}

/* Runs fn on each of n jobs (an array of elements `size` bytes long): jobs 1..n-1 on threads
 * of their own, job 0 on the calling thread; a job whose thread cannot start runs here after. */
static void spawn_join(void *jobs, size_t size, int n, void *(*fn)(void *))
{
    pthread_t tids[CG_MAX_THREADS];
    int started[CG_MAX_THREADS] = {0};
    char *at = jobs;

    for (int t = 1; t < n; t++)
        started[t] = pthread_create(&tids[t], NULL, fn, at + (size_t)t * size) == 0;
    fn(at);
    for (int t = 1; t < n; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            fn(at + (size_t)t * size);
    }
}

/* Splits items [0, total) over threads; the calling thread takes the first share. */
static int run_jobs(const struct job *proto, long total, int nthreads, void *(*fn)(void *))
{
    struct job jobs[CG_MAX_THREADS];
    int n = pick_threads(nthreads, total), rc = 0;

    if (n > total / proto->row) /* no thread without a whole row */
        n = total / proto->row > 0 ? (int)(total / proto->row) : 1;
    for (int t = 0; t < n; t++) {
        jobs[t] = *proto;
        jobs[t].lo = cut(total, t, n, proto->row);
        jobs[t].hi = cut(total, t + 1, n, proto->row);
        jobs[t].buf = malloc(proto->bufsize);
        if (!jobs[t].buf) {
            for (int u = 0; u < t; u++)
                free(jobs[u].buf);
            return -ENOMEM;
        }
    }
    spawn_join(jobs, sizeof jobs[0], n, fn);
    for (int t = 0; t < n; t++) {
        free(jobs[t].buf);
        if (jobs[t].err && !rc)
            rc = jobs[t].err;
    }
    return rc;
}

/* dir d is dirbuf[offs[d] .. offs[d+1]-1), NUL-terminated: a NUL inside a dir, an escaping
 * path or a symlink-free rule break makes the whole call -EINVAL before any I/O. */
static int check_dirs(const char *dirbuf, const size_t *offs, int ndirs)
{
    for (int d = 0; d < ndirs; d++) {
        const char *p = dirbuf + offs[d];
        if (offs[d + 1] <= offs[d])
            return -EINVAL;
        size_t len = offs[d + 1] - offs[d] - 1;
        if (strnlen(p, len + 1) != len || (len && cg_check_relpath(p) < 0))
            return -EINVAL;
    }
    return 0;
}

static const char **unpack_dirs(const char *dirbuf, const size_t *offs, int ndirs)
{
    const char **dirs = malloc(sizeof *dirs * (size_t)(ndirs > 0 ? ndirs : 1));

    if (dirs)
        for (int d = 0; d < ndirs; d++)
            dirs[d] = dirbuf + offs[d];
    return dirs;
}

static int check_marker(const char *marker);

int cg_read(int rootfd, const char *dirbuf, const size_t *dir_offs, int ndirs,
            const cg_spec *specs, int nspecs, size_t bufsize, int nthreads, uint64_t *vals,
            uint8_t *st)
{
    return cg_read_dated(rootfd, dirbuf, dir_offs, ndirs, specs, nspecs, bufsize, nthreads,
                         vals, st, "", NULL);
}

int cg_read_dated(int rootfd, const char *dirbuf, const size_t *dir_offs, int ndirs,
                  const cg_spec *specs, int nspecs, size_t bufsize, int nthreads,
                  uint64_t *vals, uint8_t *st, const char *marker, int64_t *mtime_ns)
{
    struct layout *lay;
    const char **dirs;
    int rc;

    if (ndirs < 0 || nspecs < 0 || bufsize < 1 || (mtime_ns && nspecs == 0))
        return -EINVAL;
    if (mtime_ns && check_marker(marker) < 0)
        return -EINVAL;
    if (ndirs == 0 || nspecs == 0)
        return 0;
    if (check_dirs(dirbuf, dir_offs, ndirs) < 0)
        return -EINVAL;
    lay = make_layout(specs, nspecs);
    dirs = unpack_dirs(dirbuf, dir_offs, ndirs);
    if (!lay || !dirs) {
        free(lay);
        free(dirs);
        return -ENOMEM;
    }
    /* a dated read keeps each dir on one thread, so one thread dates it */
    struct job proto = {
        .lay = lay, .rootfd = rootfd, .dirs = dirs, .row = mtime_ns ? nspecs : 1,
        .marker = marker, .mtimes = mtime_ns, .bufsize = bufsize, .vals = vals, .st = st,
    };
    rc = run_jobs(&proto, (long)ndirs * nspecs, nthreads, read_worker);
    free(lay);
    free(dirs);
    return rc;
}

struct mtime_job {
    const int *dirfds;
    int nfds;
    const char *marker;
    const char *dirbuf;
    const size_t *offs;
    long lo, hi;
    int64_t *out;
};

/* A dir's parent, opened once per hierarchy for the run of dirs below it (a QoS tier's pods
 * come together): each stat then resolves one name, not the whole path again, and a kernfs
 * lookup per component costs about as much as the stat itself. */
struct parents {
    char path[PATH_MAX]; /* the parent the fds are for; "" = the hierarchies' own fds */
    size_t len;
    int valid;
    int fds[CG_MAX_MTIME_FDS];   /* per hierarchy: the fd to resolve below */
    int errs[CG_MAX_MTIME_FDS];  /* per hierarchy: 0, or why the parent is not there */
    int whole[CG_MAX_MTIME_FDS]; /* per hierarchy: no fd to spare, fds[k] is the hierarchy's
                                  * own and the whole path is resolved below it */
};

static void close_parents(struct parents *p, int nfds)
{
    for (int k = 0; p->valid && p->len && k < nfds; k++)
        if (!p->errs[k] && !p->whole[k])
            close(p->fds[k]);
    p->valid = 0;
}

/* Fills p for dir's parent (kept from the dir before when it is the same) and returns dir's
 * last component: the path to resolve below p->fds[k], or, where p->whole[k], dir itself. */
static const char *parents_of(struct parents *p, const int *dirfds, int nfds, const char *dir,
                              int flags)
{
    const char *slash = strrchr(dir, '/');
    size_t len = slash ? (size_t)(slash - dir) : 0;
    const char *name = slash ? slash + 1 : dir;

    if (p->valid && p->len == len && !memcmp(p->path, dir, len))
        return name;
    close_parents(p, nfds);
    int too_long = len >= sizeof p->path;
    p->len = too_long ? 0 : len;
    memcpy(p->path, dir, p->len);
    p->path[p->len] = '\0';
    for (int k = 0; k < nfds; k++) {
        p->fds[k] = dirfds[k];
        p->errs[k] = too_long ? ENAMETOOLONG : 0;
        p->whole[k] = 0;
        if (too_long || !p->len)
            continue;
        int fd = flags & CG_NO_SYMLINKS
                     ? open_beneath(dirfds[k], p->path, O_PATH | O_DIRECTORY,
                                    flags & CG_FORCE_WALK)
                     : openat(dirfds[k], p->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int err = fd >= 0 ? 0 : flags & CG_NO_SYMLINKS ? -fd : errno;
        if (fd >= 0)
            p->fds[k] = fd;
        else if (err == EMFILE || err == ENFILE || err == ENOMEM)
            p->whole[k] = 1; /* out of fds (a sampler may hold most): resolve as before */
        else
            p->errs[k] = err;
    }
    p->valid = !too_long; /* a path the kernel refuses anyway: asked again, answered again */
    return name;
}

static void *mtime_worker(void *arg)
{
    const struct mtime_job *j = arg;
    struct parents p = {.valid = 0};

    for (long d = j->lo; d < j->hi; d++) {
        const char *dir = j->dirbuf + j->offs[d];
        const char *name = parents_of(&p, j->dirfds, j->nfds, dir, 0);
        int64_t oldest = INT64_MIN;

        for (int k = 0; k < j->nfds; k++) {
            if (p.errs[k])
                continue; /* its parent is not in this hierarchy: neither is it */
            int64_t t = dir_mtime(p.fds[k], p.whole[k] ? dir : name, j->marker);
            if (t == INT64_MIN)
                continue; /* not in this hierarchy */
            if (oldest == INT64_MIN || t < oldest)
                oldest = t;
        }
        j->out[d] = oldest;
    }
    close_parents(&p, j->nfds);
    return NULL;
}

static int check_marker(const char *marker)
{
    if (!marker)
        return -EINVAL;
    if (!*marker)
        return 0;
    if (strchr(marker, '/') || !strcmp(marker, ".") || !strcmp(marker, "..") ||
        strlen(marker) > NAME_MAX)
        return -EINVAL;
    return 0;
}

int cg_oldest_mtimes(const int *dirfds, int nfds, const char *marker, const char *dirbuf,
                     const size_t *dir_offs, int ndirs, int nthreads, int64_t *mtime_ns)
{
    struct mtime_job jobs[CG_MAX_THREADS];

    if (ndirs < 0 || nfds < 0 || nfds > CG_MAX_MTIME_FDS || (nfds > 0 && !dirfds))
        return -EINVAL;
    if (check_marker(marker) < 0 || check_dirs(dirbuf, dir_offs, ndirs) < 0)
        return -EINVAL;
    if (ndirs == 0)
        return 0;
    /* all kernel time (kernfs getattr), per pod per hierarchy twice: threads share it out
     * as they do the reads */
    int n = pick_threads(nthreads, ndirs);
    for (int t = 0; t < n; t++)
        jobs[t] = (struct mtime_job){dirfds, nfds, marker, dirbuf, dir_offs,
                                     cut(ndirs, t, n, 1), cut(ndirs, t + 1, n, 1), mtime_ns};
    spawn_join(jobs, sizeof jobs[0], n, mtime_worker);
    return 0;
}

struct files_job {
    int dirfd;
    const char *pathbuf;
    const size_t *offs;
    long lo, hi;
    char *out;
    size_t slot;
    long *lens;
    int flags;
};

/* A file read whole by path below dirfd: as openat resolves it, or with CG_NO_SYMLINKS as
 * open_beneath does. Returns the fd or -errno. */
static int open_file(int dirfd, const char *path, int flags)
{
    if (flags & CG_NO_SYMLINKS)
        return open_beneath(dirfd, path, READ_FLAGS, flags & CG_FORCE_WALK);
    int fd = openat(dirfd, path, READ_FLAGS | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Whether paths a and b are in the same directory. */
static int same_parent(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;

    return la == lb && !memcmp(a, b, la);
}

static void *files_worker(void *arg)
{
    const struct files_job *j = arg;
    struct parents p = {.valid = 0};

    for (long i = j->lo; i < j->hi; i++) {
        /* a cgroup's files come together: its directory is resolved once for them; a file
         * alone in its directory is resolved whole (an open of its parent would be one more
         * syscall for nothing) */
        const char *file = j->pathbuf + j->offs[i];
        const char *slash = strrchr(file, '/');
        size_t len = slash ? (size_t)(slash - file) : 0;
        int cached = p.valid && p.len == len && !memcmp(p.path, file, len);
        int shared = cached || (i + 1 < j->hi && same_parent(file, j->pathbuf + j->offs[i + 1]));
        int fd;
        if (!shared) {
            fd = open_file(j->dirfd, file, j->flags);
        } else {
            const char *name = parents_of(&p, &j->dirfd, 1, file, j->flags);
            if (p.errs[0]) {
                j->lens[i] = -p.errs[0];
                continue;
            }
            if (p.whole[0]) {
                fd = open_file(j->dirfd, file, j->flags);
            } else {
                /* the last component: no symlink followed there either (ELOOP) */
                int nofollow = j->flags & CG_NO_SYMLINKS ? O_NOFOLLOW : 0;
                fd = openat(p.fds[0], name, READ_FLAGS | O_CLOEXEC | nofollow);
                fd = fd < 0 ? -errno : fd;
            }
            if ((fd == -EMFILE || fd == -ENFILE) && p.len && !p.whole[0]) {
                close_parents(&p, 1); /* the parent holds the fd the file needs: resolve whole */
                fd = open_file(j->dirfd, file, j->flags);
            }
        }
        if (fd < 0) {
            j->lens[i] = fd;
            continue;
        }
        /* one read, as a cgroup file comes whole: a short one is all of it */
        ssize_t n = read_close(fd, j->out + (size_t)i * j->slot, j->slot);
        j->lens[i] = n < 0 ? -errno : (size_t)n == j->slot ? -EFBIG : (long)n;
    }
    close_parents(&p, 1);
    return NULL;
}

int cg_read_files(int dirfd, const char *pathbuf, const size_t *path_offs, int npaths,
                  int nthreads, char *out, size_t slot, long *lens, int flags)
{
    struct files_job jobs[CG_MAX_THREADS];

    if (npaths < 0 || slot < 1 || (npaths > 0 && (!out || !lens)) ||
        (flags & ~(CG_NO_SYMLINKS | CG_FORCE_WALK)))
        return -EINVAL;
    if (check_dirs(pathbuf, path_offs, npaths) < 0)
        return -EINVAL;
    for (int i = 0; i < npaths; i++)
        if (!pathbuf[path_offs[i]])
            return -EINVAL; /* "" names the directory itself, not a file */
    if (npaths == 0)
        return 0;
    int n = pick_threads(nthreads, npaths);
    for (int t = 0; t < n; t++)
        jobs[t] = (struct files_job){dirfd, pathbuf, path_offs, cut(npaths, t, n, 1),
                                     cut(npaths, t + 1, n, 1), out, slot, lens, flags};
    spawn_join(jobs, sizeof jobs[0], n, files_worker);
    return 0;
}

/* ---------------------------------------------------------------- sampler */

struct cg_sampler {
    int rootfd;
    int nspecs;
    int ndirs;
    int check_nlink;
    size_t bufsize;
    cg_spec *specs; /* deep copies */
    struct layout *lay;
    char **dirs;
    int *fds;    /* ndirs * nspecs, -1 = not open */
    int *dirfds; /* ndirs, -1 = not open */
    long ndirfds; /* policy: dirs [0, ndirfds) may keep an O_PATH fd */
    long *kept;   /* policy, per spec: dirs [0, kept[f]) keep that file open */
};

static void free_specs(cg_spec *specs, int nspecs)
{
    if (!specs)
        return;
    for (int f = 0; f < nspecs; f++) {
        free((void *)specs[f].name);
        if (specs[f].keys)
            for (int k = 0; k < specs[f].ncells; k++)
                free((void *)specs[f].keys[k]);
        free((void *)specs[f].keys);
        free((void *)specs[f].keylens);
    }
    free(specs);
}

static cg_spec *copy_specs(const cg_spec *src, int nspecs)
{
    cg_spec *specs = calloc((size_t)(nspecs > 0 ? nspecs : 1), sizeof *specs);

    if (!specs)
        return NULL;
    for (int f = 0; f < nspecs; f++) {
        specs[f].kind = src[f].kind;
        specs[f].ncells = src[f].ncells;
        specs[f].name = strdup(src[f].name);
        if (!specs[f].name)
            goto fail;
        if (src[f].kind != CG_KEYED)
            continue;
        char **keys = calloc((size_t)src[f].ncells + 1, sizeof *keys);
        uint32_t *lens = calloc((size_t)src[f].ncells + 1, sizeof *lens);
        specs[f].keys = (const char *const *)keys;
        specs[f].keylens = lens;
        if (!keys || !lens)
            goto fail;
        for (int k = 0; k < src[f].ncells; k++) {
            lens[k] = src[f].keylens[k];
            keys[k] = malloc(lens[k] + 1);
            if (!keys[k])
                goto fail;
            memcpy(keys[k], src[f].keys[k], lens[k]);
            keys[k][lens[k]] = '\0';
        }
    }
    return specs;
fail:
    free_specs(specs, nspecs);
    return NULL;
}

cg_sampler *cg_sampler_new(int rootfd, const cg_spec *specs, int nspecs, size_t bufsize,
                           int check_nlink)
{
    cg_sampler *s;

    if (nspecs < 0 || bufsize < 1)
        return NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->rootfd = rootfd;
    s->nspecs = nspecs;
    s->bufsize = bufsize;
    s->check_nlink = check_nlink;
    s->specs = copy_specs(specs, nspecs);
    s->lay = s->specs ? make_layout(s->specs, nspecs) : NULL;
    s->kept = malloc(sizeof *s->kept * (size_t)(nspecs > 0 ? nspecs : 1));
    if (!s->lay || !s->kept) {
        cg_sampler_free(s);
        return NULL;
    }
    for (int f = 0; f < nspecs; f++)
        s->kept[f] = LONG_MAX;
    return s;
}

static void close_row(int *row, int nspecs)
{
    for (int f = 0; f < nspecs; f++)
        if (row[f] >= 0)
            close(row[f]);
}

/* Closes the fds the policy no longer keeps. */
static void trim_to_policy(cg_sampler *s)
{
    for (long d = 0; d < s->ndirs; d++) {
        int *row = &s->fds[(size_t)d * s->nspecs];
        for (int f = 0; f < s->nspecs; f++)
            if (d >= s->kept[f] && row[f] >= 0) {
                close(row[f]);
                row[f] = -1;
            }
        if (d >= s->ndirfds && s->dirfds[d] >= 0) {
            close(s->dirfds[d]);
            s->dirfds[d] = -1;
        }
    }
}

int cg_sampler_set_dirs(cg_sampler *s, const char *dirbuf, const size_t *dir_offs, int ndirs,
                        const int *carry)
{
    size_t cells = (size_t)(ndirs > 0 ? ndirs : 1) * (size_t)(s->nspecs > 0 ? s->nspecs : 1);
    char *taken = calloc((size_t)(s->ndirs > 0 ? s->ndirs : 1), 1);
    char **dirs = calloc((size_t)(ndirs > 0 ? ndirs : 1), sizeof *dirs);
    int *fds = malloc(cells * sizeof *fds);
    int *dirfds = malloc(sizeof *dirfds * (size_t)(ndirs > 0 ? ndirs : 1));
    int rc = -ENOMEM;

    if (ndirs < 0 || check_dirs(dirbuf, dir_offs, ndirs) < 0) {
        rc = -EINVAL;
        goto fail;
    }
    if (!taken || !dirs || !fds || !dirfds)
        goto fail;
    for (int d = 0; d < ndirs; d++) {
        int c = carry[d];
        if (c >= s->ndirs || (c >= 0 && taken[c])) {
            rc = -EINVAL;
            goto fail;
        }
        if (c >= 0)
            taken[c] = 1;
        dirs[d] = strdup(dirbuf + dir_offs[d]);
        if (!dirs[d])
            goto fail;
    }
    /* validated: from here on nothing fails */
    for (int d = 0; d < ndirs; d++) {
        int c = carry[d];
        for (int f = 0; f < s->nspecs; f++)
            fds[(size_t)d * s->nspecs + f] = c >= 0 ? s->fds[(size_t)c * s->nspecs + f] : -1;
        dirfds[d] = c >= 0 ? s->dirfds[c] : -1;
    }
    for (int d = 0; d < s->ndirs; d++) {
        if (!taken[d]) {
            close_row(&s->fds[(size_t)d * s->nspecs], s->nspecs);
            close_row(&s->dirfds[d], 1);
        }
        free(s->dirs[d]);
    }
    free(s->dirs);
    free(s->fds);
    free(s->dirfds);
    free(taken);
    s->dirs = dirs;
    s->fds = fds;
    s->dirfds = dirfds;
    s->ndirs = ndirs;
    trim_to_policy(s);
    return 0;
fail:
    if (dirs)
        for (int d = 0; d < ndirs; d++)
            free(dirs[d]);
    free(dirs);
    free(fds);
    free(dirfds);
    free(taken);
    return rc;
}

int cg_sampler_set_policy(cg_sampler *s, long ndirfds, const long *kept)
{
    if (ndirfds < 0)
        return -EINVAL;
    for (int f = 0; kept && f < s->nspecs; f++)
        if (kept[f] < 0)
            return -EINVAL;
    s->ndirfds = ndirfds;
    for (int f = 0; f < s->nspecs; f++)
        s->kept[f] = kept ? kept[f] : LONG_MAX;
    trim_to_policy(s);
    return 0;
}

int cg_sampler_sample(cg_sampler *s, int nthreads, uint64_t *vals, uint8_t *st)
{
    if (s->ndirs == 0 || s->nspecs == 0)
        return 0;
    struct job proto = {
        .lay = s->lay,
        .rootfd = s->rootfd,
        .dirs = (const char *const *)s->dirs,
        .fds = s->fds,
        .dirfds = s->dirfds,
        .ndirfds = s->ndirfds,
        .kept = s->kept,
        .row = s->nspecs,
        .check_nlink = s->check_nlink,
        .bufsize = s->bufsize,
        .vals = vals,
        .st = st,
    };
    return run_jobs(&proto, (long)s->ndirs * s->nspecs, nthreads, sample_worker);
}

void cg_sampler_free(cg_sampler *s)
{
    if (!s)
        return;
    for (int d = 0; d < s->ndirs; d++) {
        close_row(&s->fds[(size_t)d * s->nspecs], s->nspecs);
        close_row(&s->dirfds[d], 1);
        free(s->dirs[d]);
    }
    free(s->dirs);
    free(s->fds);
    free(s->dirfds);
    free(s->kept);
    free(s->lay);
    free_specs(s->specs, s->nspecs);
    free(s);
}

/* ------------------------------------------------------------------ writes */

int cg_write_close(int fd, const char *value, size_t len)
{
    ssize_t n;

    if (fd < 0)
        return fd;
    /* one write(): cgroupfs parses each write as a whole value */
    do
        n = write(fd, value, len);
    while (n < 0 && errno == EINTR);
    int e = n < 0 ? errno : ((size_t)n != len ? EIO : 0);
    close(fd);
    return -e;
}

int cg_write(int rootfd, const char *relpath, const char *value, size_t len, int flags)
{
    return cg_write_close(open_beneath(rootfd, relpath, O_WRONLY | O_TRUNC, flags), value, len);
}

int cg_open_parent(int rootfd, const char *relpath, const char **last, int flags)
{
    return open_parent(rootfd, relpath, last, flags);
}

int cg_open_in(int dirfd, const char *name, int oflags)
{
    return open_component(dirfd, name, oflags);
}

int cg_open_beneath(int rootfd, const char *relpath, int oflags, unsigned int mode, int flags)
{
    const char *last;
    int pfd = open_parent(rootfd, relpath, &last, flags);

    if (pfd < 0)
        return pfd;
    int fd = open_component_mode(pfd, last, oflags, (mode_t)mode);
    close(pfd);
    return fd;
}

int cg_mkdir(int rootfd, const char *relpath, unsigned int mode, int flags)
{
    const char *last;
    int pfd = open_parent(rootfd, relpath, &last, flags);

    if (pfd < 0)
        return pfd;
    int rc = mkdirat(pfd, last, (mode_t)mode) < 0 ? -errno : 0;
    close(pfd);
    return rc;
}

int cg_rmdir(int rootfd, const char *relpath, int flags)
{
    const char *last;
    int pfd = open_parent(rootfd, relpath, &last, flags);

    if (pfd < 0)
        return pfd;
    int rc = unlinkat(pfd, last, AT_REMOVEDIR) < 0 ? -errno : 0;
    close(pfd);
    return rc;
}

long cg_read_text(int rootfd, const char *relpath, char *buf, size_t bufsize, int flags)
{
    size_t got = 0;
    int fd = open_beneath(rootfd, relpath, READ_FLAGS, flags);

    if (fd < 0)
        return fd;
    while (got < bufsize) {
        ssize_t n = read(fd, buf + got, bufsize - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return got >= bufsize ? -EFBIG : (long)got;
}
