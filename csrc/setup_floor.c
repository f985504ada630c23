/* setup_floor: the syscalls of a tree setup (or teardown) with nothing on top, for
 * bench/setup_suite.py.
 *
 *   setup_floor < OPS
 *
 * OPS, one a line, paths absolute:
 *   mkdir PATH          mkdir(PATH, 0755)
 *   rmdir PATH          rmdir(PATH)
 *   write PATH VALUE    open(PATH, O_WRONLY) + one write of VALUE + close
 *   read PATH           open(PATH, O_RDONLY) + one read + close (what a re-run must read)
 * Every line is parsed before the first syscall, so the timing holds the syscalls only, made
 * one after another.
 * Prints "<ops> <ns total>"; exits 1 at the first failing call (naming it on stderr).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct op {
    char kind; /* 'm' mkdir, 'd' rmdir, 'w' write, 'r' read */
    char *path;
    char *value;
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Make the ops in order; exits 1 at the first failing call. */
static void run(struct op *ops, size_t n)
{
    char buf[65536];
    for (size_t i = 0; i < n; i++) {
        struct op *o = &ops[i];
        if (o->kind == 'm' || o->kind == 'd') {
            if ((o->kind == 'm' ? mkdir(o->path, 0755) : rmdir(o->path)) < 0) {
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
}

int main(void)
{
    struct op *ops = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t len;

    while ((len = getline(&line, &linecap, stdin)) > 0) {
        if (line[len - 1] == '\n')
            line[--len] = '\0';
        if (len == 0)
            continue;
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
        o->kind = strcmp(line, "rmdir") == 0 ? 'd' : line[0];
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
        } else if (o->kind != 'm' && o->kind != 'r' && o->kind != 'd') {
            fprintf(stderr, "setup_floor: unknown op %s\n", line);
            return 2;
        }
    }
    double t0 = now_ns();
    run(ops, n);
    printf("%zu %.0f\n", n, now_ns() - t0);
    return 0;
}
