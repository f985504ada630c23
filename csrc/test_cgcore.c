/* C test driver for cgcore on a fake tree in a temp dir, run under ASan/UBSan by sanitize.sh:
 * parsers, bulk reads (1 and several threads), the sampler (change, vanish, update), writes,
 * mkdir/rmdir and read_text through openat2 and through the O_NOFOLLOW walk. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply_batch.h"
#include "cgcore.h"

static int failures;
static char base[] = "/tmp/cgcore-test-XXXXXX";

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", base, rel);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static void dir(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", base, rel);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        perror(path);
        exit(2);
    }
}

static void cleanup(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", base);
}

static const char *const KEYS[] = {"anon", "file", "swap"};
static const uint32_t KEYLENS[] = {4, 4, 4};
static const cg_spec SPECS[] = {
    {"memory.max", CG_SINGLE, 1, NULL, NULL},
    {"memory.stat", CG_KEYED, 3, KEYS, KEYLENS},
    {"cpu.max", CG_FIELDS, 2, NULL, NULL},
};
#define NSPECS 3
#define CPD 6 /* cells per dir */

static void test_read(int root)
{
    const char dirbuf[] = "kubepods\0kubepods/burstable\0\0gone";
    const size_t offs[] = {0, 9, 28, 29, 34};
    uint64_t v[4 * CPD];
    uint8_t st[4 * CPD];

    for (int threads = 1; threads <= 3; threads++) {
        memset(st, 0xff, sizeof st);
        CHECK(cg_read(root, dirbuf, offs, 4, SPECS, NSPECS, 65536, threads, v, st) == 0);
        CHECK(st[0] == CG_OK && v[0] == 104857600);
        CHECK(st[1] == CG_OK && v[1] == 4096 && st[2] == CG_OK && v[2] == 8192);
        CHECK(st[3] == CG_EMISSING_KEY);
        CHECK(st[4] == CG_MAX && st[5] == CG_OK && v[5] == 100000);
        CHECK(st[CPD] == CG_MAX);
        CHECK(st[2 * CPD] == CG_OK && v[2 * CPD] == 1); /* root memory.max */
        CHECK(st[2 * CPD + 1] == CG_ENOENT);
        for (int k = 0; k < CPD; k++)
            CHECK(st[3 * CPD + k] == CG_ENOENT);
    }
    /* a 16-byte buffer: memory.stat (22 bytes) does not fit */
    CHECK(cg_read(root, dirbuf, offs, 1, SPECS, NSPECS, 16, 1, v, st) == 0);
    CHECK(st[0] == CG_OK && st[1] == CG_ETOOLONG && st[3] == CG_ETOOLONG);
    CHECK(cg_read(root, dirbuf, offs, 1, SPECS, NSPECS, 0, 1, v, st) == -EINVAL);
    /* malformed dirs: "..", an absolute path, a NUL inside a dir (offsets disagree) */
    const char bad1[] = "kubepods\0..", bad2[] = "/kubepods", bad3[] = "kube\0pods";
    const size_t o2[] = {0, 9, 12}, o1[] = {0, 10};
    CHECK(cg_read(root, bad1, o2, 2, SPECS, NSPECS, 64, 1, v, st) == -EINVAL);
    CHECK(cg_read(root, bad2, o1, 1, SPECS, NSPECS, 64, 1, v, st) == -EINVAL);
    CHECK(cg_read(root, bad3, o1, 1, SPECS, NSPECS, 64, 1, v, st) == -EINVAL);
}

static void test_mtimes(int root)
{
    const char dirbuf[] = "kubepods\0gone\0\0linkdir";
    const size_t offs[] = {0, 9, 14, 15, 23};
    int64_t t[4];
    struct stat sb;
    char path[512];

    CHECK(cg_oldest_mtimes(&root, 1, "", dirbuf, offs, 4, 0, t) == 0);
    snprintf(path, sizeof path, "%s/kubepods", base);
    CHECK(stat(path, &sb) == 0);
    CHECK(t[0] == (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
    CHECK(t[1] == INT64_MIN);
    CHECK(t[2] > 0); /* "": the root's own fd, an O_PATH one */
    snprintf(path, sizeof path, "%s/linkdir", base);
    CHECK(lstat(path, &sb) == 0); /* the link's own mtime, not its target's */
    CHECK(t[3] == (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
    const char bad[] = "kubepods\0..";
    const size_t o2[] = {0, 9, 12};
    CHECK(cg_oldest_mtimes(&root, 1, "", bad, o2, 2, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(&root, 1, "", dirbuf, offs, -1, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(&root, 1, "", dirbuf, offs, 0, 0, t) == 0);
    CHECK(cg_oldest_mtimes(&root, 1, "a/b", dirbuf, offs, 4, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(&root, 1, "..", dirbuf, offs, 4, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(&root, 1, NULL, dirbuf, offs, 4, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(NULL, 1, "", dirbuf, offs, 4, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(&root, -1, "", dirbuf, offs, 4, 0, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(NULL, 0, "", dirbuf, offs, 4, 0, t) == 0);
    CHECK(t[0] == INT64_MIN && t[2] == INT64_MIN); /* no hierarchy holds anything */
}

/* A dated read: the reads as cg_read makes them, each dir's time as cg_oldest_mtimes gives
 * it for the one root fd (a file of the specs as the marker: older or not, as it falls). */
static void test_read_dated(int root)
{
    const char dirbuf[] = "kubepods\0gone\0\0linkdir";
    const size_t offs[] = {0, 9, 14, 15, 23};
    int64_t dated[4], want[4];
    uint64_t v[4 * CPD], pv[4 * CPD];
    uint8_t st[4 * CPD], pst[4 * CPD];

    CHECK(cg_oldest_mtimes(&root, 1, "memory.max", dirbuf, offs, 4, 1, want) == 0);
    CHECK(cg_read(root, dirbuf, offs, 4, SPECS, NSPECS, 65536, 1, pv, pst) == 0);
    for (int threads = 1; threads <= 3; threads++) {
        memset(dated, 0, sizeof dated);
        CHECK(cg_read_dated(root, dirbuf, offs, 4, SPECS, NSPECS, 65536, threads, v, st,
                            "memory.max", dated) == 0);
        CHECK(!memcmp(dated, want, sizeof want));
        CHECK(!memcmp(st, pst, sizeof st));
        for (int i = 0; i < 4 * CPD; i++)
            CHECK(st[i] != CG_OK || v[i] == pv[i]);
    }
    CHECK(dated[1] == INT64_MIN && dated[0] > 0 && dated[2] > 0);
    CHECK(cg_read_dated(root, dirbuf, offs, 4, SPECS, NSPECS, 64, 1, v, st, "a/b", dated) ==
          -EINVAL);
    CHECK(cg_read_dated(root, dirbuf, offs, 4, SPECS, NSPECS, 64, 1, v, st, NULL, dated) ==
          -EINVAL);
    CHECK(cg_read_dated(root, dirbuf, offs, 4, SPECS, 0, 64, 1, v, st, "", dated) == -EINVAL);
}

static void set_mtime(const char *rel, time_t sec)
{
    char path[512];
    struct timespec ts[2] = {{0, UTIME_OMIT}, {sec, 0}};

    snprintf(path, sizeof path, "%s/%s", base, rel);
    if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) < 0) {
        perror(path);
        failures++;
    }
}

/* Two hierarchies, a marker file: per hierarchy the lower of dir and marker, over them the
 * lowest; a hierarchy without the dir, or a dir without the marker, counts for nothing. */
static void test_oldest_over_hierarchies(void)
{
    const char dirbuf[] = "pa\0pb\0pc";
    const size_t offs[] = {0, 3, 6, 9};
    int64_t t[3];
    char path[512];

    dir("h1");
    dir("h2");
    dir("h1/pa");
    dir("h2/pa");
    dir("h2/pb");
    put("h1/pa/marker", "0\n");
    set_mtime("h1/pa/marker", 300);
    set_mtime("h1/pa", 400);
    set_mtime("h2/pa", 250);
    set_mtime("h2/pb", 777);
    snprintf(path, sizeof path, "%s/h1", base);
    int h1 = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    snprintf(path, sizeof path, "%s/h2", base);
    int h2 = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fds[] = {h1, h2};

    CHECK(h1 >= 0 && h2 >= 0);
    CHECK(cg_oldest_mtimes(fds, 2, "marker", dirbuf, offs, 3, 0, t) == 0);
    CHECK(t[0] == 250000000000LL && t[1] == 777000000000LL && t[2] == INT64_MIN);
    CHECK(cg_oldest_mtimes(fds, 1, "marker", dirbuf, offs, 3, 0, t) == 0);
    CHECK(t[0] == 300000000000LL && t[1] == INT64_MIN);
    CHECK(cg_oldest_mtimes(fds, 1, "", dirbuf, offs, 1, 0, t) == 0);
    CHECK(t[0] == 400000000000LL);
    close(h1);
    close(h2);
}

/* names packed as the core takes paths: NUL-separated in buf, offs[i] where each starts */
static void pack(int n, char names[][32], char *buf, size_t *offs)
{
    size_t pos = 0;

    for (int i = 0; i < n; i++) {
        offs[i] = pos;
        memcpy(buf + pos, names[i], strlen(names[i]) + 1);
        pos += strlen(names[i]) + 1;
    }
    offs[n] = pos;
}

/* Files below parents that change at every file and at thread cuts, a missing one, one
 * that fills its slot, and malformed arguments refused before any read. */
static void test_read_files(int root)
{
    enum { N = 61, SLOT = 16 };
    char *buf = calloc(N, 32);
    char *out = calloc(N, SLOT);
    long *lens = calloc(N, sizeof *lens);
    size_t offs[N + 1];
    char names[N][32];

    dir("rf");
    dir("rf/q0");
    dir("rf/q1");
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "rf/q%d/f%d", i % 3, i);
        if (i % 3 != 2 && i % 5)
            put(names[i], i % 11 == 1 ? "0123456789abcdef" : names[i]);
    }
    pack(N, names, buf, offs);
    for (int threads = 1; threads <= 3; threads++) {
        memset(lens, 0, N * sizeof *lens);
        CHECK(cg_read_files(root, buf, offs, N, threads, out, SLOT, lens, 0) == 0);
        for (int i = 0; i < N; i++) {
            if (i % 3 == 2 || i % 5 == 0)
                CHECK(lens[i] == -ENOENT); /* q2 does not exist; f0, f5, ... were not made */
            else if (i % 11 == 1)
                CHECK(lens[i] == -EFBIG);
            else
                CHECK(lens[i] == (long)strlen(names[i]) &&
                      !memcmp(out + (size_t)i * SLOT, names[i], (size_t)lens[i]));
        }
    }
    const char bad[] = "rf/q0/f1\0..";
    const size_t ob[] = {0, 9, 12};
    const char empty[] = "rf/q0/f1\0";
    const size_t oe[] = {0, 9, 10};
    CHECK(cg_read_files(root, bad, ob, 2, 1, out, SLOT, lens, 0) == -EINVAL);
    CHECK(cg_read_files(root, empty, oe, 2, 1, out, SLOT, lens, 0) == -EINVAL);
    CHECK(cg_read_files(root, buf, offs, N, 1, out, 0, lens, 0) == -EINVAL);
    CHECK(cg_read_files(root, buf, offs, -1, 1, out, SLOT, lens, 0) == -EINVAL);
    CHECK(cg_read_files(root, buf, offs, N, 1, NULL, SLOT, lens, 0) == -EINVAL);
    CHECK(cg_read_files(root, buf, offs, 0, 1, out, SLOT, lens, 0) == 0);
    free(buf);
    free(out);
    free(lens);
}

/* CG_NO_SYMLINKS (with openat2, and with the O_NOFOLLOW walk): a symlinked directory or
 * file is -ELOOP where plain reads follow it; a directory answers -EISDIR; the rest reads
 * as without the flag. (linkdir -> kubepods and kubepods/link.max -> memory.max are made by
 * main.) */
static void test_read_files_no_symlinks(int root)
{
    enum { N = 6, SLOT = 32 };
    char names[N][32] = {"kubepods/memory.max", "linkdir/memory.max", "kubepods/link.max",
                         "kubepods/burstable", "kubepods/gone", "linkdir"};
    char files[N * 32];
    size_t offs[N + 1];
    char out[N * SLOT];
    long lens[N];
    int modes[] = {CG_NO_SYMLINKS, CG_NO_SYMLINKS | CG_FORCE_WALK};

    pack(N, names, files, offs);
    CHECK(cg_read_files(root, files, offs, N, 1, out, SLOT, lens, 0) == 0);
    CHECK(lens[0] == 10 && lens[1] == 10 && lens[2] == 10 && lens[3] == -EISDIR);
    CHECK(lens[4] == -ENOENT && lens[5] == -EISDIR);
    for (int m = 0; m < 2; m++) {
        for (int threads = 1; threads <= 2; threads++) {
            memset(lens, 0, sizeof lens);
            CHECK(cg_read_files(root, files, offs, N, threads, out, SLOT, lens, modes[m]) == 0);
            CHECK(lens[0] == 10 && !memcmp(out, "104857600\n", 10));
            CHECK(lens[1] == -ELOOP && lens[2] == -ELOOP && lens[3] == -EISDIR);
            CHECK(lens[4] == -ENOENT && lens[5] == -ELOOP);
        }
    }
    CHECK(cg_read_files(root, files, offs, N, 1, out, SLOT, lens, 4) == -EINVAL);
}

/* With no fd to spare for a parent (a sampler may hold most of them), each path is resolved
 * whole below the hierarchy's fd, as before parents were kept: the same answers, not
 * "absent". Also the marker next to a missing dir is not taken. */
static void test_parents_without_fds(int root)
{
    const char dirbuf[] = "h1/pa\0h2/pa\0h2/gone";
    const size_t offs[] = {0, 6, 12, 20};
    const char files[] = "h1/pa/marker\0h2/pb/nofile";
    const size_t foffs[] = {0, 13, 26};
    int64_t t[3], dated[3];
    uint64_t v[3];
    uint8_t st[3];
    const cg_spec one[] = {{"marker", CG_SINGLE, 1, NULL, NULL}};
    long lens[2];
    char out[2 * 16];
    int fill[1024], nfill = 0;
    struct rlimit old, low;

    set_mtime("h2/pa", 250);
    CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
    low = old;
    low.rlim_cur = 256;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    while (nfill < 1024) {
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            break;
        fill[nfill++] = fd;
    }
    CHECK(errno == EMFILE);
    /* no fd free: the stats need none; a file read cannot be had */
    CHECK(cg_oldest_mtimes(&root, 1, "marker", dirbuf, offs, 3, 1, t) == 0);
    /* a dated read whose dirs will not open: each dated from the root, as above */
    CHECK(cg_read_dated(root, dirbuf, offs, 3, one, 1, 64, 1, v, st, "marker", dated) == 0);
    CHECK(cg_read_files(root, files, foffs, 2, 1, out, 16, lens, 0) == 0);
    CHECK(lens[0] == -EMFILE && lens[1] == -EMFILE);
    /* one fd free: the parent must not keep the one the file needs */
    close(fill[--nfill]);
    CHECK(cg_read_files(root, files, foffs, 2, 1, out, 16, lens, 0) == 0);
    while (nfill)
        close(fill[--nfill]);
    CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
    CHECK(t[0] == 300000000000LL && t[1] == 250000000000LL && t[2] == INT64_MIN);
    CHECK(!memcmp(dated, t, sizeof t));
    CHECK(lens[0] == 2 && !memcmp(out, "0\n", 2) && lens[1] == -ENOENT);
}

/* Many dirs over 1, 2 and 3 threads (shares cut at uneven places): every one the same mtime
 * as stat gives, and the missing ones INT64_MIN wherever the cut falls. The first half are
 * top-level; the rest below three parents in turn (and one parent that does not exist), so
 * the parent a worker holds open changes at every dir, and mid-run at a cut. */
static void test_mtimes_threads(int root)
{
    enum { N = 301 };
    char *dirbuf = calloc(N, 32);
    size_t offs[N + 1];
    int64_t *t = calloc(N, sizeof *t);
    struct stat sb;
    char path[512];
    char names[N][32];

    dir("mq0");
    dir("mq1");
    dir("mq2");
    for (int i = 0; i < N; i++) {
        if (i < N / 2)
            snprintf(names[i], sizeof names[i], "mt%d", i);
        else
            snprintf(names[i], sizeof names[i], "mq%d/mt%d", i % 4, i);
        if (i % 7 && i % 4 != 3)
            dir(names[i]);
    }
    pack(N, names, dirbuf, offs);
    for (int threads = 1; threads <= 3; threads++) {
        memset(t, 0, N * sizeof *t);
        CHECK(cg_oldest_mtimes(&root, 1, "", dirbuf, offs, N, threads, t) == 0);
        for (int i = 0; i < N; i++) {
            snprintf(path, sizeof path, "%s/%s", base, names[i]);
            if (i % 7 == 0 || i % 4 == 3) {
                CHECK(t[i] == INT64_MIN);
                continue;
            }
            CHECK(stat(path, &sb) == 0);
            CHECK(t[i] == (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec);
        }
    }
    int many[CG_MAX_MTIME_FDS + 1];
    for (int k = 0; k <= CG_MAX_MTIME_FDS; k++)
        many[k] = root;
    CHECK(cg_oldest_mtimes(many, CG_MAX_MTIME_FDS + 1, "", dirbuf, offs, N, 1, t) == -EINVAL);
    CHECK(cg_oldest_mtimes(many, CG_MAX_MTIME_FDS, "", dirbuf, offs, N, 1, t) == 0);
    CHECK(t[1] != INT64_MIN && t[0] == INT64_MIN);
    free(dirbuf);
    free(t);
}

static void test_many_dirs_threads(int root)
{
    enum { N = 200 };
    char names[N][32], *dirbuf = calloc(N, 32);
    size_t offs[N + 1];
    uint64_t *v = calloc(N * CPD, sizeof *v);
    uint8_t *st = calloc(N * CPD, 1);

    for (int i = 0; i < N; i++) {
        char rel[64], text[32];
        snprintf(names[i], sizeof names[i], "p%d", i);
        dir(names[i]);
        snprintf(rel, sizeof rel, "p%d/memory.max", i);
        snprintf(text, sizeof text, "%d\n", i * 3);
        put(rel, text);
    }
    pack(N, names, dirbuf, offs);
    CHECK(cg_read(root, dirbuf, offs, N, SPECS, NSPECS, 65536, 4, v, st) == 0);
    for (int i = 0; i < N; i++)
        CHECK(st[i * CPD] == CG_OK && v[i * CPD] == (uint64_t)i * 3);

    /* a policy sampler: dir fds for 150 dirs, memory.max kept for 50, cpu.max for 10 */
    cg_sampler *s = cg_sampler_new(root, SPECS, NSPECS, 65536, 1);
    int *carry = malloc(N * sizeof *carry);
    const long kept[NSPECS] = {50, 0, 10}, neg[NSPECS] = {1, -1, 0};
    uint64_t *w = calloc(N * CPD, sizeof *w);
    uint8_t *wst = calloc(N * CPD, 1);
    for (int i = 0; i < N; i++)
        carry[i] = -1;
    CHECK(s && carry && w && wst);
    CHECK(cg_sampler_set_dirs(s, dirbuf, offs, N, carry) == 0);
    CHECK(cg_sampler_set_policy(s, -1, NULL) == -EINVAL);
    CHECK(cg_sampler_set_policy(s, 1, neg) == -EINVAL);
    CHECK(cg_sampler_set_policy(s, 150, kept) == 0);
    for (int round = 0; round < 2; round++) {
        CHECK(cg_sampler_sample(s, 4, w, wst) == 0);
        CHECK(memcmp(w, v, N * CPD * sizeof *v) == 0 && memcmp(wst, st, N * CPD) == 0);
    }
    /* p5 (dir fd, kept memory.max) and p120 (dir fd only) removed and re-created */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/p5' '%s/p120'", base, base);
    CHECK(system(cmd) == 0);
    CHECK(cg_sampler_sample(s, 3, w, wst) == 0);
    CHECK(wst[5 * CPD] == CG_ENOENT && wst[120 * CPD] == CG_ENOENT && wst[6 * CPD] == CG_OK);
    dir("p5");
    put("p5/memory.max", "55\n");
    dir("p120");
    put("p120/memory.max", "1200\n");
    CHECK(cg_sampler_sample(s, 2, w, wst) == 0);
    CHECK(wst[5 * CPD] == CG_OK && w[5 * CPD] == 55);
    CHECK(wst[120 * CPD] == CG_OK && w[120 * CPD] == 1200);
    /* keep the last 100 dirs (old 100..199): dir fds and kept fds of the others close */
    for (int i = 0; i < 100; i++)
        carry[i] = 100 + i;
    size_t offs2[101];
    for (int i = 0; i <= 100; i++)
        offs2[i] = offs[100 + i] - offs[100];
    CHECK(cg_sampler_set_dirs(s, dirbuf + offs[100], offs2, 100, carry) == 0);
    CHECK(cg_sampler_sample(s, 2, w, wst) == 0);
    CHECK(wst[20 * CPD] == CG_OK && w[20 * CPD] == 1200);
    cg_sampler_free(s);
    free(carry);
    free(w);
    free(wst);
    free(dirbuf);
    free(v);
    free(st);
}

static void test_sampler(int root)
{
    const char dirbuf[] = "kubepods\0kubepods/burstable";
    const size_t offs[] = {0, 9, 28};
    const int carry0[] = {-1, -1};
    uint64_t v[2 * CPD];
    uint8_t st[2 * CPD];
    cg_sampler *s = cg_sampler_new(root, SPECS, NSPECS, 65536, 1);

    CHECK(s != NULL);
    CHECK(cg_sampler_set_dirs(s, dirbuf, offs, 2, carry0) == 0);
    CHECK(cg_sampler_sample(s, 1, v, st) == 0);
    CHECK(st[0] == CG_OK && v[0] == 104857600 && st[CPD] == CG_MAX);
    put("kubepods/burstable/memory.max", "4242\n");
    CHECK(cg_sampler_sample(s, 2, v, st) == 0);
    CHECK(st[CPD] == CG_OK && v[CPD] == 4242);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/kubepods/burstable'", base);
    CHECK(system(cmd) == 0);
    CHECK(cg_sampler_sample(s, 1, v, st) == 0);
    for (int k = 0; k < CPD; k++)
        CHECK(st[CPD + k] == CG_ENOENT);
    CHECK(st[0] == CG_OK);
    /* keep kubepods (old index 0), add the root */
    const char dirbuf2[] = "\0kubepods";
    const size_t offs2[] = {0, 1, 10};
    const int carry[] = {-1, 0};
    const int bad[] = {0, 0};
    CHECK(cg_sampler_set_dirs(s, dirbuf2, offs2, 2, bad) == -EINVAL);
    CHECK(cg_sampler_set_dirs(s, dirbuf2, offs2, 2, carry) == 0);
    CHECK(cg_sampler_sample(s, 1, v, st) == 0);
    CHECK(st[0] == CG_OK && v[0] == 1 && st[CPD] == CG_OK && v[CPD] == 104857600);
    cg_sampler_free(s);
}

static void test_writes(int root, int flags)
{
    char buf[64];
    long n;

    CHECK(cg_write(root, "kubepods/memory.max", "2048", 4, flags) == 0);
    n = cg_read_text(root, "kubepods/memory.max", buf, sizeof buf, flags);
    CHECK(n == 4 && memcmp(buf, "2048", 4) == 0);
    CHECK(cg_read_text(root, "kubepods/memory.stat", buf, 8, flags) == -EFBIG);
    CHECK(cg_write(root, "kubepods/memory.high", "1", 1, flags) == -ENOENT);
    CHECK(cg_write(root, "../x", "1", 1, flags) == -EINVAL);
    CHECK(cg_write(root, "/etc/passwd", "1", 1, flags) == -EINVAL);
    CHECK(cg_write(root, "kubepods//memory.max", "1", 1, flags) == -EINVAL);
    CHECK(cg_write(root, "", "1", 1, flags) == -EINVAL);
    CHECK(cg_write(root, "linkdir/memory.max", "1", 1, flags) == -ELOOP);
    CHECK(cg_write(root, "kubepods/link.max", "1", 1, flags) == -ELOOP);
    CHECK(cg_mkdir(root, "kubepods/new", 0755, flags) == 0);
    CHECK(cg_mkdir(root, "kubepods/new", 0755, flags) == -EEXIST);
    CHECK(cg_mkdir(root, "linkdir/new", 0755, flags) == -ELOOP);
    CHECK(cg_rmdir(root, "kubepods/new", flags) == 0);
    CHECK(cg_rmdir(root, "kubepods/new", flags) == -ENOENT);
    CHECK(cg_mkdir(root, "top", 0755, flags) == 0 && cg_rmdir(root, "top", flags) == 0);
    CHECK(cg_rmdir(root, "..", flags) == -EINVAL);
}

/* Parses text with one keyed spec; returns the status of cell k, its value in *val. */
static int keyed(const char *const *keys, int nkeys, const char *text, size_t n, int k,
                 uint64_t *val)
{
    uint32_t lens[80];
    uint64_t v[80];
    uint8_t st[80];
    for (int j = 0; j < nkeys; j++)
        lens[j] = (uint32_t)strlen(keys[j]);
    cg_spec spec = {"x.stat", CG_KEYED, nkeys, keys, lens};
    cg_parse(&spec, text, n, v, st);
    *val = v[k];
    return st[k];
}

#define KEYED(keys, text, k, v)                                                              \
    keyed(keys, (int)(sizeof keys / sizeof *keys), text, sizeof text - 1, k, v)

static void test_parsers(void)
{
    static const char *const AF[] = {"anon", "file"};
    static const char *const SPACED[] = {"a b"};
    static const char *const EMPTY[] = {""};
    static const char *const DUP[] = {"a", "a", "b"};
    static const char *const TWICE[] = {"a", "a"};
    uint64_t v;

    /* first occurrence wins; later duplicates and malformed lines change nothing */
    CHECK(KEYED(AF, "file 1\nanon 2\nanon 3\nfile x\n", 0, &v) == CG_OK && v == 2);
    CHECK(KEYED(AF, "file 1\nanon 2\nanon 3\nfile x\n", 1, &v) == CG_OK && v == 1);
    CHECK(KEYED(AF, "anon 5\nfile 6\ngarbage\n\xff\xff", 1, &v) == CG_OK && v == 6);
    CHECK(KEYED(AF, "anon x\nanon 4\n", 0, &v) == CG_EPARSE && v == 0);
    CHECK(KEYED(AF, "anon x\nanon 4\n", 1, &v) == CG_EMISSING_KEY);
    CHECK(KEYED(AF, "anon 5", 0, &v) == CG_OK && v == 5);
    CHECK(KEYED(AF, "anon 5\r\n", 0, &v) == CG_EPARSE);
    CHECK(KEYED(AF, "anon  5\n", 0, &v) == CG_EPARSE);
    CHECK(KEYED(AF, "\n\nanonx 1\nano 2\n anon 3\nanon\nfile 7\n", 0, &v) == CG_EMISSING_KEY);
    CHECK(KEYED(AF, "\n\nanonx 1\nano 2\n anon 3\nanon\nfile 7\n", 1, &v) == CG_OK && v == 7);
    CHECK(KEYED(AF, "", 0, &v) == CG_EMISSING_KEY);
    /* a line's key ends at its first space, so a key holding a space never matches */
    CHECK(KEYED(SPACED, "a b 5\n", 0, &v) == CG_EMISSING_KEY);
    CHECK(KEYED(EMPTY, "x 1\n 7\n", 0, &v) == CG_OK && v == 7);
    /* repeated keys take successive lines in key order from the last match */
    CHECK(KEYED(TWICE, "a 1\na 2\n", 0, &v) == CG_OK && v == 1);
    CHECK(KEYED(TWICE, "a 1\na 2\n", 1, &v) == CG_OK && v == 2);
    CHECK(KEYED(DUP, "a 1\nb 2\na 3\n", 0, &v) == CG_OK && v == 1);
    CHECK(KEYED(DUP, "a 1\nb 2\na 3\n", 1, &v) == CG_EMISSING_KEY);
    CHECK(KEYED(DUP, "a 1\nb 2\na 3\n", 2, &v) == CG_OK && v == 2);

    /* more keys than one 64-bit mask holds, listed in the reverse order */
    static char names[70][16];
    const char *many[70];
    char text[70 * 8], *t = text;
    for (int j = 0; j < 70; j++) {
        snprintf(names[j], sizeof names[j], "k%d", j);
        many[j] = names[j];
    }
    for (int j = 69; j >= 0; j--)
        t += sprintf(t, "k%d %d\n", j, j * 3);
    for (int j = 0; j < 70; j++)
        CHECK(keyed(many, 70, text, (size_t)(t - text), j, &v) == CG_OK && v == (uint64_t)j * 3);

    CHECK(cg_parse_token("18446744073709551615", 20, &v) == CG_OK && v == UINT64_MAX);
    CHECK(cg_parse_token("18446744073709551616", 20, &v) == CG_ERANGE && v == 0);
    CHECK(cg_parse_token("9999999999999999999", 19, &v) == CG_OK && v == 9999999999999999999ULL);
    CHECK(cg_parse_token("00000000000000000000001", 23, &v) == CG_OK && v == 1);
    CHECK(cg_parse_token("99999999999999999999999x", 24, &v) == CG_EPARSE && v == 0);
    CHECK(cg_parse_token("12x", 3, &v) == CG_EPARSE && v == 0);
    CHECK(cg_parse_token("-1", 2, &v) == CG_MAX && cg_parse_token("max", 3, &v) == CG_MAX);
    CHECK(cg_parse_token("", 0, &v) == CG_EPARSE);
}

/* apply_batch.c: ops in order until one fails; a stop flag set before an op ends the call
 * there with no error (setup's signal guard sets it from another thread). */
static void test_apply_ops(int root)
{
    /* op i: its path at offs[2i], its value at offs[2i + 1], the next op at offs[2i + 2] */
    const char buf[] = "ops/a\0\0ops/a/b\0\0kubepods/memory.max\0" "2048\0ops/c\0";
    const size_t offs[] = {0, 6, 7, 15, 16, 36, 41, 47, 48};
    const uint8_t kinds[] = {CG_OP_MKDIR, CG_OP_MKDIR, CG_OP_WRITE, CG_OP_MKDIR};
    const int fds[] = {root, root, root, root};
    int stop = 0;
    char text[64];
    int err = -1;

    dir("ops");
    CHECK(cg_apply_ops(fds, kinds, buf, offs, 3, &err, &stop) == 3 && err == 0);
    CHECK(cg_read_text(root, "kubepods/memory.max", text, sizeof text, 0) == 4);
    CHECK(memcmp(text, "2048", 4) == 0);
    stop = 1;
    CHECK(cg_apply_ops(fds + 3, kinds + 3, buf, offs + 6, 1, &err, &stop) == 0 && err == 0);
    CHECK(cg_rmdir(root, "ops/c", 0) == -ENOENT); /* never made */
    stop = 0;
    CHECK(cg_apply_ops(fds, kinds, buf, offs, 1, &err, NULL) == 0 && err == -EEXIST);
    CHECK(cg_rmdir(root, "ops/a/b", 0) == 0 && cg_rmdir(root, "ops/a", 0) == 0);
}

/* base/rel made a symlink to target */
static void symlink_at(const char *target, const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", base, rel);
    CHECK(symlink(target, path) == 0);
}

/* Ops of one call as apply_batch.c takes them: paths[i] with values[i] (NULL: a mkdir), each
 * with CG_OP_KEEP_PARENT, as for a root on cgroupfs. */
struct batch {
    char buf[8192];
    size_t offs[200];
    uint8_t kinds[100];
    int fds[100];
    size_t n, used;
};

static void add_op(struct batch *b, int fd, const char *path, const char *value)
{
    size_t lp = strlen(path) + 1, lv = value ? strlen(value) + 1 : 1;

    b->offs[2 * b->n] = b->used;
    memcpy(b->buf + b->used, path, lp);
    b->used += lp;
    b->offs[2 * b->n + 1] = b->used;
    memcpy(b->buf + b->used, value ? value : "", lv);
    b->used += lv;
    b->offs[2 * b->n + 2] = b->used;
    b->kinds[b->n] = (value ? CG_OP_WRITE : CG_OP_MKDIR) | CG_OP_KEEP_PARENT;
    b->fds[b->n++] = fd;
}

static size_t run_batch(const struct batch *b, int *err)
{
    return cg_apply_ops(b->fds, b->kinds, b->buf, b->offs, b->n, err, NULL);
}

/* The entries of a directory but . and .. (-1: it cannot be opened). */
static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;

    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

/* Holds a batch in its FIFO write until the parent "a" was removed and made again. */
static void *replace_parent(void *arg)
{
    char path[512];
    (void)arg;
    snprintf(path, sizeof path, "%s/s/a/x", base);
    for (int i = 0; i < 10000 && access(path, F_OK) != 0; i++)
        usleep(1000);
    usleep(50000); /* the batch is now blocked opening the FIFO */
    CHECK(rmdir(path) == 0);
    snprintf(path, sizeof path, "%s/s/a", base);
    CHECK(rmdir(path) == 0 && mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/s/fifo", base);
    int fd = open(path, O_RDONLY);
    char c;
    CHECK(fd >= 0 && read(fd, &c, 1) == 1);
    close(fd);
    return NULL;
}

/* apply_batch.c keeps the parents it opened: ops going round two roots below more parents
 * than it keeps (one a prefix of another) are all made with no fd left open; a kept parent's
 * symlinked file is -ELOOP as cg_write says; a kept parent removed and made again while the
 * call runs takes the next op as the op alone would (made, not ENOENT); and an op whose
 * parent cannot be opened for want of fds (the kept ones hold them) is made alone after they
 * are closed. */
static void test_apply_ops_parents(void)
{
    long magic;
    char path[512], name[64];
    int err = -1;
    struct batch b = {.n = 0};

    dir("h1");
    dir("h1/q");
    dir("h2");
    dir("h2/q");
    put("h1/q/memory.max", "1\n");
    symlink_at("memory.max", "h1/q/link.max");
    snprintf(path, sizeof path, "%s/h1", base);
    int r1 = cg_open_root(path, CG_ALLOW_ANY_FS, &magic);
    snprintf(path, sizeof path, "%s/h2", base);
    int r2 = cg_open_root(path, CG_ALLOW_ANY_FS, &magic);
    CHECK(r1 >= 0 && r2 >= 0);
    int before = open_fds();
    for (int i = 0; i < 20; i++) { /* 40 parents: kept ones are replaced */
        snprintf(name, sizeof name, "q/pod%d", i);
        add_op(&b, r1, name, NULL);
        add_op(&b, r2, name, NULL);
        snprintf(name, sizeof name, "q/pod%d/c", i); /* below q/podI: q is its prefix */
        add_op(&b, i % 2 ? r1 : r2, name, NULL);
    }
    add_op(&b, r1, "q/memory.max", "2");
    add_op(&b, r1, "q/link.max", "3");
    CHECK(run_batch(&b, &err) == b.n - 1 && err == -ELOOP);
    CHECK(cg_write(r1, "q/link.max", "3", 1, 0) == -ELOOP);
    for (int i = 0; i < 20; i++) { /* each where its path says, and nothing else made */
        snprintf(path, sizeof path, "%s/h%d/q/pod%d/c", base, i % 2 ? 1 : 2, i);
        CHECK(access(path, F_OK) == 0);
        snprintf(path, sizeof path, "%s/h%d/q/pod%d", base, i % 2 ? 2 : 1, i);
        CHECK(count_entries(path) == 0);
    }
    CHECK(cg_rmdir(r1, "q/pod19/c", 0) == 0 && cg_rmdir(r2, "q/pod18/c", 0) == 0);
    CHECK(cg_rmdir(r2, "q/pod19", 0) == 0);
    CHECK(open_fds() == before);

    /* a kept parent serves its own root and its own path only, not one it is a prefix of */
    dir("h1/q/p0");
    dir("h2/q/p0");
    b.n = b.used = 0;
    add_op(&b, r1, "q/p0/c", NULL);
    add_op(&b, r2, "q/p0/d", NULL);
    add_op(&b, r1, "q/p1", NULL);
    CHECK(run_batch(&b, &err) == 3 && err == 0);
    snprintf(path, sizeof path, "%s/h1/q/p0", base);
    CHECK(count_entries(path) == 1);
    snprintf(path, sizeof path, "%s/h2/q/p0/d", base);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/h1/q/p1", base);
    CHECK(access(path, F_OK) == 0);

    dir("s");
    dir("s/a");
    snprintf(path, sizeof path, "%s/s/fifo", base);
    CHECK(mkfifo(path, 0600) == 0);
    snprintf(path, sizeof path, "%s/s", base);
    int rs = cg_open_root(path, CG_ALLOW_ANY_FS, &magic);
    pthread_t other;
    CHECK(rs >= 0 && pthread_create(&other, NULL, replace_parent, NULL) == 0);
    b.n = b.used = 0;
    add_op(&b, rs, "a/x", NULL);
    add_op(&b, rs, "fifo", "1");
    add_op(&b, rs, "a/y", NULL);
    CHECK(run_batch(&b, &err) == 3 && err == 0);
    pthread_join(other, NULL);
    CHECK(cg_rmdir(rs, "a/y", 0) == 0);
    close(rs);

    /* fds up to the limit but two: the third parent's open fails while two are kept */
    struct rlimit saved, low;
    CHECK(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    low = saved;
    low.rlim_cur = 128;
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    int fillers[128], nfill = 0;
    for (int fd; nfill < 128 && (fd = dup(0)) >= 0;)
        fillers[nfill++] = fd;
    CHECK(nfill >= 2);
    close(fillers[--nfill]);
    close(fillers[--nfill]);
    b.n = b.used = 0;
    add_op(&b, r1, "q/pod0/a", NULL);
    add_op(&b, r1, "q/pod1/a", NULL);
    add_op(&b, r1, "q/pod2/a", NULL);
    CHECK(run_batch(&b, &err) == 3 && err == 0);
    while (nfill)
        close(fillers[--nfill]);
    CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0);
    CHECK(cg_rmdir(r1, "q/pod2/a", 0) == 0);
    close(r1);
    close(r2);
}

int main(void)
{
    long magic;
    char path[512];

    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 2;
    }
    dir("kubepods");
    dir("kubepods/burstable");
    put("memory.max", "1\n");
    put("kubepods/memory.max", "104857600\n");
    put("kubepods/memory.stat", "anon 4096\nfile 8192\n");
    put("kubepods/cpu.max", "max 100000\n");
    put("kubepods/burstable/memory.max", "max\n");
    snprintf(path, sizeof path, "%s/kubepods", base);
    symlink_at(path, "linkdir");
    symlink_at("memory.max", "kubepods/link.max");

    CHECK(cg_open_root(base, 0, &magic) == -EMEDIUMTYPE && magic != 0);
    int root = cg_open_root(base, CG_ALLOW_ANY_FS, &magic);
    CHECK(root >= 0);
    CHECK(cg_online_cpus() >= 1);
    test_parsers();
    test_read(root);
    test_mtimes(root);
    test_read_dated(root);
    test_mtimes_threads(root);
    test_oldest_over_hierarchies();
    test_parents_without_fds(root);
    test_read_files(root);
    test_read_files_no_symlinks(root);
    test_many_dirs_threads(root);
    test_sampler(root);
    test_writes(root, 0);
    test_writes(root, CG_FORCE_WALK);
    test_apply_ops(root);
    test_apply_ops_parents();
    close(root);
    cleanup();
    if (failures) {
        fprintf(stderr, "test_cgcore: %d failures\n", failures);
        return 1;
    }
    printf("test_cgcore: ok\n");
    return 0;
}
