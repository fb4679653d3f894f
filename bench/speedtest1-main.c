// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * speedtest1-main.c - runs SQLite's own benchmark program, speedtest1.c
 * (not part of this project: bench/speedtest1.sh compiles it from SQLite's
 * source with its main() renamed speedtest1_main), on SQLite's default
 * page cache or on libvrange-sqlite's.
 *
 *   speedtest1-vrange CACHE [speedtest1 options] DATABASE
 *
 * CACHE:
 *   default       SQLite's own page cache
 *   vrange        libvrange-sqlite installed before speedtest1 configures
 *                 and initialises SQLite (a ctx of its own, the default
 *                 monitor: the process has a second thread)
 * and two that take the cost apart (bench/speedtest1.sh -d):
 *   default-mt    SQLite's own cache in a process with one more thread,
 *                 idle, as libvrange's monitor makes it: a process with
 *                 two threads pays in every system call (the kernel
 *                 counts references to the shared file table) and in
 *                 glibc (locked atomics, cancellation points) what a
 *                 single-threaded one does not
 *   vrange-nomon  libvrange-sqlite on a ctx without a monitor
 *                 (VR_CTX_NO_MONITOR): the page cache's own cost, one
 *                 thread; nothing is purged under pressure
 * Every other argument is speedtest1's.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <vrange-sqlite.h>

int speedtest1_main(int argc, char **argv);

static void *idle(void *arg)
{
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	(void)arg;
	pthread_mutex_lock(&m);
	for (;;)
		pthread_cond_wait(&cv, &m);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *c = argc >= 2 ? argv[1] : "";
	int rc = 0;
	if (!strcmp(c, "vrange")) {
		rc = vr_sqlite_pcache_install(NULL);
	} else if (!strcmp(c, "vrange-nomon")) {
		struct vr_ctx *ctx;
		rc = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
		if (rc == 0)
			rc = vr_sqlite_pcache_install(ctx); /* the ctx lives until exit */
	} else if (!strcmp(c, "default-mt")) {
		pthread_t t;
		rc = -pthread_create(&t, NULL, idle, NULL);
	} else if (strcmp(c, "default")) {
		fprintf(stderr,
			"usage: %s default|vrange|default-mt|vrange-nomon [speedtest1 options] "
			"DATABASE\n",
			argv[0]);
		return 2;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", c, strerror(-rc));
		return 1;
	}
	argv[1] = argv[0];
	return speedtest1_main(argc - 1, argv + 1);
}
