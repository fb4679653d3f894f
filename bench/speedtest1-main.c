// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * speedtest1-main.c - runs SQLite's own benchmark program, speedtest1.c
 * (not part of this project: bench/speedtest1.sh compiles it from SQLite's
 * source with its main() renamed speedtest1_main), on SQLite's default
 * page cache or on libvrange-sqlite's.
 *
 *   speedtest1-vrange default|vrange [speedtest1 options] DATABASE
 *
 * "vrange" installs the cache (a ctx of its own, the default monitor)
 * before speedtest1 configures and initialises SQLite; every other
 * argument is speedtest1's.
 */
#include <stdio.h>
#include <string.h>

#include <vrange-sqlite.h>

int speedtest1_main(int argc, char **argv);

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "default") && strcmp(argv[1], "vrange"))) {
		fprintf(stderr, "usage: %s default|vrange [speedtest1 options] DATABASE\n",
			argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "vrange")) {
		int rc = vr_sqlite_pcache_install(NULL);
		if (rc < 0) {
			fprintf(stderr, "vr_sqlite_pcache_install: %s\n", strerror(-rc));
			return 1;
		}
	}
	argv[1] = argv[0];
	return speedtest1_main(argc - 1, argv + 1);
}
