/* scrape_floor: the C floor of one exporter scrape's reads, for bench/exporter_suite.py.
 *
 *   scrape_floor ITERATIONS < LINES
 *
 * Each line of stdin is one access, in the exporter's order: "k PATH" (a file kept open, one
 * pread per iteration), "d PATH" (opened through its directory's kept O_PATH fd, read,
 * closed), "c PATH" (opened by path, read, closed) or "l DIR" (a directory listed with
 * opendir/readdir, as pod discovery and the pod-name lookup list theirs). Prints
 * "cpu_ns wall_ns maxrss_kib": the least CPU time (CLOCK_PROCESS_CPUTIME_ID) and wall time of
 * one iteration over all lines, since on a shared machine other load only ever adds, and the
 * process's peak RSS. Single-threaded; a failed access is skipped (a file the kernel lacks
 * costs its failed open, as it does the exporter).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

struct access {
    char mode;
    char *path;
    const char *name;
    int fd;
};

static double ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int dir_fd(struct access *a, struct access *prev)
{
    size_t len = a->name > a->path ? (size_t)(a->name - a->path - 1) : 0;
    if (prev && prev->mode == 'd' && prev->name - prev->path == a->name - a->path &&
        !strncmp(prev->path, a->path, len + (len ? 1 : 0)))
        return prev->fd;
    char dir[4096];
    memcpy(dir, a->path, len);
    dir[len] = '\0';
    return open(len ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static void run(struct access *a)
{
    int fd;

    switch (a->mode) {
    case 'k':
        if (a->fd >= 0 && pread(a->fd, buf, sizeof buf, 0) < 0)
            return;
        return;
    case 'd':
        fd = a->fd >= 0 ? openat(a->fd, a->name, O_RDONLY | O_CLOEXEC) : -1;
        break;
    case 'c':
        fd = open(a->path, O_RDONLY | O_CLOEXEC);
        break;
    case 'l': {
        DIR *d = opendir(a->path);
        if (d) {
            while (readdir(d))
                ;
            closedir(d);
        }
        return;
    }
    default:
        return;
    }
    if (fd >= 0) {
        if (read(fd, buf, sizeof buf) < 0) {
            /* a failed read costs what it costs */
        }
        close(fd);
    }
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 0;
    struct access *list = NULL;
    size_t n = 0, cap = 0;
    char line[4096];

    if (iters < 1) {
        fprintf(stderr, "usage: %s ITERATIONS < 'k|d|c|l PATH' lines\n", argv[0]);
        return 2;
    }
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        if (!*line)
            continue;
        if (strlen(line) < 3 || !strchr("kdcl", line[0]) || line[1] != ' ') {
            fprintf(stderr, "scrape_floor: a line must be 'k|d|c|l PATH': %s\n", line);
            return 2;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            list = realloc(list, cap * sizeof *list);
            if (!list)
                return 1;
        }
        struct access *a = &list[n++];
        a->mode = line[0];
        a->path = strdup(line + 2);
        const char *slash = strrchr(a->path, '/');
        a->name = slash ? slash + 1 : a->path;
        a->fd = -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (list[i].mode == 'k')
            list[i].fd = open(list[i].path, O_RDONLY | O_CLOEXEC);
        else if (list[i].mode == 'd')
            list[i].fd = dir_fd(&list[i], i ? &list[i - 1] : NULL);
    }
    double best_cpu = 0, best_wall = 0;
    for (long it = 0; it < iters; it++) {
        double c0 = ns(CLOCK_PROCESS_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < n; i++)
            run(&list[i]);
        double c = ns(CLOCK_PROCESS_CPUTIME_ID) - c0, w = ns(CLOCK_MONOTONIC) - w0;
        if (it == 0 || c < best_cpu)
            best_cpu = c;
        if (it == 0 || w < best_wall)
            best_wall = w;
    }
    /* VmHWM, not getrusage's ru_maxrss: that one keeps the forking parent's peak across
     * execve */
    long hwm = -1;
    FILE *status = fopen("/proc/self/status", "r");
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "VmHWM: %ld", &hwm) == 1)
            break;
    if (status)
        fclose(status);
    printf("%.0f %.0f %ld\n", best_cpu, best_wall, hwm);
    return 0;
}
