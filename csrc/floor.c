/* floor: the cost of reading cgroup files with nothing on top, for bench/ to compare against.
 *
 *   floor cold|warm ITERATIONS [FILE...]   (files from stdin, one per line, when none given)
 *
 * cold: open/read/close per file per iteration. warm: open once, then one pread per file per
 * iteration. Prints "<mode> <files> <ns per file>" on stdout: the fastest iteration, since on a
 * shared machine other load only ever adds time (the bench takes the best round everywhere).
 * Single-threaded.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    char **files = NULL, line[4096];
    size_t nfiles = 0, cap = 0;
    long iters;
    int warm;

    if (argc < 3 || (strcmp(argv[1], "cold") && strcmp(argv[1], "warm"))) {
        fprintf(stderr, "usage: %s cold|warm ITERATIONS [FILE...]\n", argv[0]);
        return 2;
    }
    warm = strcmp(argv[1], "warm") == 0;
    iters = atol(argv[2]);
    if (argc > 3) {
        files = argv + 3;
        nfiles = (size_t)(argc - 3);
    } else {
        while (fgets(line, sizeof line, stdin)) {
            line[strcspn(line, "\n")] = '\0';
            if (!*line)
                continue;
            if (nfiles == cap) {
                cap = cap ? cap * 2 : 64;
                files = realloc(files, cap * sizeof *files);
                if (!files)
                    return 1;
            }
            files[nfiles++] = strdup(line);
        }
    }
    if (nfiles == 0 || iters < 1) {
        fprintf(stderr, "floor: no files or no iterations\n");
        return 2;
    }
    int *fds = malloc(nfiles * sizeof *fds);
    if (!fds)
        return 1;
    if (warm)
        for (size_t i = 0; i < nfiles; i++)
            if ((fds[i] = open(files[i], O_RDONLY | O_CLOEXEC)) < 0) {
                perror(files[i]);
                return 1;
            }
    double best = 0;
    for (long it = 0; it < iters; it++) {
        double t0 = now_ns();
        for (size_t i = 0; i < nfiles; i++) {
            if (warm) {
                if (pread(fds[i], buf, sizeof buf, 0) < 0)
                    return 1;
                continue;
            }
            int fd = open(files[i], O_RDONLY | O_CLOEXEC);
            if (fd < 0 || read(fd, buf, sizeof buf) < 0)
                return 1;
            close(fd);
        }
        double t = now_ns() - t0;
        if (it == 0 || t < best)
            best = t;
    }
    printf("%s %zu %.1f\n", argv[1], nfiles, best / (double)nfiles);
    return 0;
}
