/* floor: the cost of reading cgroup files with nothing on top, for bench/ to compare against.
 *
 *   floor cold|warm|dirfd|stat|mixed ITERATIONS [FILE...]   (files from stdin, one per line)
 *   floor hold [FILE...]                                (see below)
 *
 * cold: open/read/close by path per file per iteration. warm: open once, then one pread per
 * file per iteration. dirfd: an O_PATH fd per directory kept, then openat+read+close per file
 * per iteration. stat: an lstat by path per file per iteration (what a start time takes of a
 * cgroup's directory and its marker file). mixed: each line is "k PATH" (warm), "d PATH"
 * (dirfd), "s PATH" (stat) or "c PATH" (cold): the
 * access pattern of a sampler keeping some files and dir fds. Prints "<mode> <files> <ns per
 * file>" on stdout: the fastest iteration, since on a shared machine other load only ever adds
 * time. Single-threaded.
 *
 * hold: reads the "k|d PATH" lines, waits for a line "go" on stdin, opens them as mixed would
 * keep them (k: open + one read, so the seq_file page is allocated; d: the O_PATH dir fd),
 * prints "held <fds>", and exits at end of input: the bench measures what the kept fds cost
 * the cgroup it runs in.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

struct file {
    char mode;  /* 'k', 'd', 's' or 'c' */
    char *path;
    const char *name; /* basename, for openat */
    int fd;     /* k: the file; d: its directory (shared with files of the same dir) */
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int add(struct file **files, size_t *n, size_t *cap, char mode, const char *path)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *files = realloc(*files, *cap * sizeof **files);
        if (!*files)
            return -1;
    }
    struct file *f = &(*files)[(*n)++];
    f->mode = mode;
    f->path = strdup(path);
    const char *slash = strrchr(f->path, '/');
    f->name = slash ? slash + 1 : f->path;
    f->fd = -1;
    return f->path ? 0 : -1;
}

/* Opens what the mode keeps: a k file (read once), a d file's directory (once per dir). */
static int keep_open(struct file *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct file *f = &files[i];
        if (f->mode == 'k') {
            f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
            if (f->fd < 0 || pread(f->fd, buf, sizeof buf, 0) < 0)
                return perror(f->path), -1;
        } else if (f->mode == 'd') {
            if (i && files[i - 1].mode == 'd' && files[i - 1].name - files[i - 1].path ==
                f->name - f->path && !strncmp(files[i - 1].path, f->path,
                (size_t)(f->name - f->path))) {
                f->fd = files[i - 1].fd;
                continue;
            }
            char dir[4096];
            size_t len = f->name > f->path ? (size_t)(f->name - f->path - 1) : 0;
            memcpy(dir, f->path, len);
            dir[len] = '\0';
            f->fd = open(len ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (f->fd < 0)
                return perror(dir), -1;
        }
    }
    return 0;
}

static int read_one(const struct file *f)
{
    struct stat sb;

    if (f->mode == 's')
        return fstatat(AT_FDCWD, f->path, &sb, AT_SYMLINK_NOFOLLOW);
    if (f->mode == 'k')
        return pread(f->fd, buf, sizeof buf, 0) < 0 ? -1 : 0;
    int fd = f->mode == 'd' ? openat(f->fd, f->name, O_RDONLY | O_CLOEXEC)
                            : open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, buf, sizeof buf) < 0)
        return -1;
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    struct file *files = NULL;
    char line[4096];
    size_t nfiles = 0, cap = 0;
    const char *mode = argc > 1 ? argv[1] : "";
    int hold = strcmp(mode, "hold") == 0, mixed = hold || strcmp(mode, "mixed") == 0;
    char fixed = !strcmp(mode, "cold") ? 'c' : !strcmp(mode, "warm") ? 'k'
               : !strcmp(mode, "dirfd") ? 'd' : !strcmp(mode, "stat") ? 's' : 0;

    if ((!fixed && !mixed) || argc < (hold ? 2 : 3)) {
        fprintf(stderr, "usage: %s cold|warm|dirfd|stat|mixed ITERATIONS [FILE...] | hold\n",
                argv[0]);
        return 2;
    }
    long iters = hold ? 0 : atol(argv[2]);
    int first = hold ? 2 : 3;
    for (int a = first; a < argc; a++)
        if (add(&files, &nfiles, &cap, fixed, argv[a]) < 0)
            return 1;
    while (argc <= first && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (hold && !strcmp(line, "go"))
            break;
        if (!*line)
            continue;
        int ok = mixed ? strlen(line) > 2 && strchr("kdsc", line[0]) && line[1] == ' ' : 1;
        if (!ok) {
            fprintf(stderr, "floor: a line must be 'k|d|s|c PATH': %s\n", line);
            return 2;
        }
        if (add(&files, &nfiles, &cap, mixed ? line[0] : fixed, mixed ? line + 2 : line) < 0)
            return 1;
    }
    if (nfiles == 0 || (!hold && iters < 1)) {
        fprintf(stderr, "floor: no files or no iterations\n");
        return 2;
    }
    if (keep_open(files, nfiles) < 0)
        return 1;
    if (hold) {
        printf("held %zu\n", nfiles);
        fflush(stdout);
        while (fgets(line, sizeof line, stdin))
            ;
        return 0;
    }
    double best = 0;
    for (long it = 0; it < iters; it++) {
        double t0 = now_ns();
        for (size_t i = 0; i < nfiles; i++)
            if (read_one(&files[i]) < 0)
                return perror(files[i].path), 1;
        double t = now_ns() - t0;
        if (it == 0 || t < best)
            best = t;
    }
    printf("%s %zu %.1f\n", mode, nfiles, best / (double)nfiles);
    return 0;
}
