/* cgcore: bulk cgroup file reads, a persistent sampler and safe writes beneath a cgroupfs root.
 *
 * The core holds no policy: the caller says which directories and files to read and what to
 * write. Every value read lands in a caller-owned uint64 cell with a uint8 status beside it.
 */
#ifndef CGCORE_H
#define CGCORE_H

#include <stddef.h>
#include <stdint.h>

/* Per-cell status codes (mirrored in cgalloc/host/core/records.py). */
#define CG_OK 0           /* value holds the number */
#define CG_MAX 1          /* "max" or "-1": no limit; value is 0 */
#define CG_ENOENT 2       /* the cgroup or the file is gone */
#define CG_EPARSE 3       /* content is not a number, "max" or "-1" */
#define CG_ERANGE 4       /* a number beyond 2^64-1 */
#define CG_ETOOLONG 5     /* the file does not fit the read buffer */
#define CG_EMISSING_KEY 6 /* keyed file without the requested key */
#define CG_EIO 7          /* any other read error */

/* File kinds. */
#define CG_SINGLE 0 /* one value: "123\n", "max\n", "-1\n" */
#define CG_KEYED 1  /* "key value" lines; first occurrence of a key wins */
#define CG_FIELDS 2 /* space-separated values on one line, e.g. cpu.max "max 100000" */

/* cg_open_root flags */
#define CG_ALLOW_ANY_FS 1
/* cg_write / cg_mkdir / cg_rmdir / cg_read_text flags (and cg_read_files, with
 * CG_NO_SYMLINKS) */
#define CG_FORCE_WALK 1 /* skip openat2 and resolve component by component (tests) */
#define CG_NO_SYMLINKS 2 /* cg_read_files: no symlink in any component (-ELOOP), nor ".." */

#define CG_MAGIC_CGROUP 0x27e0eb
#define CG_MAGIC_CGROUP2 0x63677270

typedef struct cg_spec {
    const char *name;        /* file name, NUL-terminated */
    int kind;                /* CG_SINGLE, CG_KEYED, CG_FIELDS */
    int ncells;              /* 1 for single; number of keys or fields otherwise */
    const char *const *keys; /* CG_KEYED: ncells keys; otherwise unused */
    const uint32_t *keylens; /* CG_KEYED: their lengths (keys may hold no NUL) */
} cg_spec;

typedef struct cg_sampler cg_sampler;

/* Opens path as an O_PATH directory fd and checks its statfs magic. Returns the fd, or
 * -errno; -EMEDIUMTYPE when the filesystem is not cgroup/cgroup2 (its magic in *magic). */
int cg_open_root(const char *path, int flags, long *magic);

/* Token and file parsers: write status/value for each cell of one file's content. */
int cg_parse_token(const char *s, size_t n, uint64_t *out);
void cg_parse(const cg_spec *spec, const char *buf, size_t n, uint64_t *vals, uint8_t *st);

/* Bulk read. dirs are ndirs NUL-terminated relative paths packed back to back in dirbuf,
 * dir i from dir_offs[i] to dir_offs[i+1] (ndirs+1 offsets; "" = the root); -EINVAL before
 * any I/O if one is malformed.
 * Output cell for (dir d, spec f, cell k): d * cells_per_dir + (sum of ncells of specs < f) + k.
 * nthreads 0 = one per online CPU when there is enough work. Returns 0 or -errno. */
int cg_read(int rootfd, const char *dirbuf, const size_t *dir_offs, int ndirs,
            const cg_spec *specs, int nspecs, size_t bufsize, int nthreads, uint64_t *vals,
            uint8_t *st);

/* cg_read, and each dir's oldest mtime into mtime_ns[d] as cg_oldest_mtimes gives it for
 * the one fd rootfd (marker as there), taken through the dir's fd the reads open anyway.
 * -EINVAL before any I/O for a malformed marker, or for nspecs 0 (no fd would be opened). */
int cg_read_dated(int rootfd, const char *dirbuf, const size_t *dir_offs, int ndirs,
                  const cg_spec *specs, int nspecs, size_t bufsize, int nthreads,
                  uint64_t *vals, uint8_t *st, const char *marker, int64_t *mtime_ns);

#define CG_MAX_MTIME_FDS 32 /* hierarchies cg_oldest_mtimes takes at most */

/* For each dir (packed as for cg_read): the oldest mtime, in ns since the epoch, over the
 * nfds (<= CG_MAX_MTIME_FDS) dirfds that hold it, of the dir itself ("" = the fd's own) and,
 * when marker is not "", of its file marker (one name, no '/'); a symlink in the last
 * component is the link's own. INT64_MIN where no fd holds the dir. nthreads as for cg_read.
 * Returns 0, or -EINVAL before any I/O if a dir, the marker or nfds is malformed. */
int cg_oldest_mtimes(const int *dirfds, int nfds, const char *marker, const char *dirbuf,
                     const size_t *dir_offs, int ndirs, int nthreads, int64_t *mtime_ns);

/* Each file (relative paths packed as dirs are for cg_read, resolved below dirfd as openat
 * does, or with flags CG_NO_SYMLINKS as cg_write resolves them) read with one read() into its
 * slot of out (slot bytes each, file i at i * slot): lens[i] is its length, or -errno (-EFBIG
 * when it fills the slot; -EISDIR for a directory, which tells one exists). nthreads as for
 * cg_read. Returns 0, or -EINVAL before any I/O if a path is malformed or empty, slot is 0 or
 * a flag unknown. */
int cg_read_files(int dirfd, const char *pathbuf, const size_t *path_offs, int npaths,
                  int nthreads, char *out, size_t slot, long *lens, int flags);

/* Persistent sampler: by default keeps one fd per (dir, file) and re-reads with pread (see
 * cg_sampler_set_policy for keeping fewer). check_nlink:
 * also treat a file whose link count fell to 0 as vanished (for non-cgroupfs test trees,
 * where a removed file stays readable; cgroupfs answers ENODEV instead). */
cg_sampler *cg_sampler_new(int rootfd, const cg_spec *specs, int nspecs, size_t bufsize,
                           int check_nlink);
/* Replace the directory set (packed as for cg_read). carry[i] is the old index of new dir i, or -1 if new; fds of old
 * dirs nobody carries are closed. Returns 0 or -errno. */
int cg_sampler_set_dirs(cg_sampler *s, const char *dirbuf, const size_t *dir_offs, int ndirs,
                        const int *carry);
/* Which fds persist between samples. Dirs [0, ndirfds) keep an O_PATH fd (opened at first
 * use), through which their files not kept are opened with openat, read and closed; dir d
 * keeps file f open (one pread per sample) when d < kept[f]; kept NULL = every file of every
 * dir. Other files are opened beneath the root each sample. Defaults: ndirfds 0, kept NULL.
 * Fds the new policy does not keep are closed. Returns 0 or -EINVAL (a negative count). */
int cg_sampler_set_policy(cg_sampler *s, long ndirfds, const long *kept);
int cg_sampler_sample(cg_sampler *s, int nthreads, uint64_t *vals, uint8_t *st);
void cg_sampler_free(cg_sampler *s);

/* Safe path operations beneath rootfd: no absolute paths, no "." or ".." or empty
 * components, no symlinks. Return 0 (cg_read_text: bytes read) or -errno. */
int cg_check_relpath(const char *relpath);
int cg_write(int rootfd, const char *relpath, const char *value, size_t len, int flags);
int cg_mkdir(int rootfd, const char *relpath, unsigned int mode, int flags);
int cg_rmdir(int rootfd, const char *relpath, int flags);
long cg_read_text(int rootfd, const char *relpath, char *buf, size_t bufsize, int flags);
/* relpath opened beneath rootfd as cg_write resolves it (its parents without a symlink, or
 * "..", through openat2 or the O_NOFOLLOW walk), the last component with openat(oflags |
 * O_NOFOLLOW | O_CLOEXEC, mode): a symlink there is -ELOOP. For files outside cgroupfs that a
 * local user must not redirect (the boot unit's files below --root). The fd or -errno. */
int cg_open_beneath(int rootfd, const char *relpath, int oflags, unsigned int mode, int flags);

int cg_online_cpus(void);

#endif
