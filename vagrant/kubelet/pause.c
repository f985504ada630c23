/* The pods' tiny binaries, built static in the guest (gcc -static -O2 pause.c -o pause):
 *   pause         the sandbox's process: waits for a signal, reaps children (the pause image)
 *   pause hog MIB allocates MIB MiB, touches every page, then waits (memory enforcement steps)
 * Prints what it allocated, so the container log shows how far it got before the OOM kill. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

static void bye(int sig) {
	(void)sig;
	_exit(0);
}

int main(int argc, char **argv) {
	signal(SIGINT, bye);
	signal(SIGTERM, bye);
	signal(SIGCHLD, reap);
	if (argc == 3 && strcmp(argv[1], "hog") == 0) {
		long mib = atol(argv[2]);
		for (long i = 0; i < mib; i++) {
			char *p = malloc(1 << 20);
			if (p == NULL) {
				return 1;
			}
			memset(p, 1, 1 << 20);
			if ((i + 1) % 16 == 0 || i + 1 == mib) {
				printf("hog: %ld MiB touched\n", i + 1);
				fflush(stdout);
			}
		}
	}
	for (;;) {
		pause();
	}
}
