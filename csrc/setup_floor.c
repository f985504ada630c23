/* setup_floor: the syscalls of a tree setup with nothing on top, for bench/setup_suite.py.
 *
 *   setup_floor < OPS
 *
 * OPS, one a line, paths absolute:
 *   mkdir PATH          mkdir(PATH, 0755)
 *   write PATH VALUE    open(PATH, O_WRONLY) + one write of VALUE + close
 *   read PATH           open(PATH, O_RDONLY) + one read + close (what a re-run must read)
 *   lane                the ops after it are a lane of their own (the first lane needs none)
 * Each lane's ops are made in order on a thread of its own (the first lane on the main
 * thread), all lanes side by side: what cgalloc's lanes (cgalloc/lanes.py) cost with nothing
 * on top. Without "lane" lines: one thread, one op after another.
 * Every line is parsed before the first syscall, so the timing holds the syscalls only (and,
 * with lanes, starting and joining their threads).
 * Prints "<ops> <ns total>"; exits 1 at the first failing call (naming it on stderr).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct op {
    char kind; /* 'm', 'w', 'r' */
    char *path;
    char *value;
};

struct lane {
    struct op *ops;
    size_t n;
    pthread_t thread;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Make a lane's ops in order; exits 1 at the first failing call. */
static void *run_lane(void *arg)
{
    struct lane *lane = arg;
    char buf[65536];
    for (size_t i = 0; i < lane->n; i++) {
        struct op *o = &lane->ops[i];
        if (o->kind == 'm') {
            if (mkdir(o->path, 0755) < 0) {
                perror(o->path);
                exit(1);
            }
            continue;
        }
        int fd = open(o->path, (o->kind == 'w' ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
        if (fd < 0) {
            perror(o->path);
            exit(1);
        }
        ssize_t rc = o->kind == 'w' ? write(fd, o->value, strlen(o->value))
                                    : read(fd, buf, sizeof buf);
        if (rc < 0) {
            perror(o->path);
            exit(1);
        }
        close(fd);
    }
    return NULL;
}

int main(void)
{
    struct op *ops = NULL;
    size_t n = 0, cap = 0;
    size_t starts[64]; /* the index of each lane's first op */
    size_t nlanes = 1;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t len;

    starts[0] = 0;
    while ((len = getline(&line, &linecap, stdin)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (strcmp(line, "lane") == 0) {
            if (nlanes == sizeof starts / sizeof starts[0]) {
                fprintf(stderr, "setup_floor: too many lanes\n");
                return 2;
            }
            starts[nlanes++] = n;
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            ops = realloc(ops, cap * sizeof *ops);
            if (!ops)
                return 1;
        }
        char *sp = strchr(line, ' ');
        if (!sp) {
            fprintf(stderr, "setup_floor: bad line: %s\n", line);
            return 2;
        }
        *sp = '\0';
        struct op *o = &ops[n++];
        o->kind = line[0];
        o->path = strdup(sp + 1);
        o->value = NULL;
        if (o->kind == 'w') {
            char *v = strchr(o->path, ' ');
            if (!v) {
                fprintf(stderr, "setup_floor: write needs a value: %s\n", o->path);
                return 2;
            }
            *v = '\0';
            o->value = v + 1;
        } else if (o->kind != 'm' && o->kind != 'r') {
            fprintf(stderr, "setup_floor: unknown op %s\n", line);
            return 2;
        }
    }
    struct lane lanes[64];
    for (size_t k = 0; k < nlanes; k++) {
        lanes[k].ops = ops + starts[k];
        lanes[k].n = (k + 1 < nlanes ? starts[k + 1] : n) - starts[k];
    }
    double t0 = now_ns();
    for (size_t k = 1; k < nlanes; k++) {
        if (pthread_create(&lanes[k].thread, NULL, run_lane, &lanes[k]) != 0) {
            fprintf(stderr, "setup_floor: cannot start a thread\n");
            return 1;
        }
    }
    run_lane(&lanes[0]);
    for (size_t k = 1; k < nlanes; k++)
        pthread_join(lanes[k].thread, NULL);
    printf("%zu %.0f\n", n, now_ns() - t0);
    return 0;
}
