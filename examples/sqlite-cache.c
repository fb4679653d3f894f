/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sqlite-cache.c - SQLite with its page cache in purgeable memory
 * (libvrange-sqlite, S38)
 *
 * One call before SQLite starts, vr_sqlite_pcache_install(), and SQLite
 * keeps its pages in libvrange objects: the pages it is not using are
 * volatile, so under memory pressure or a container's memory limit the
 * library takes them back (SQLite reads them again from the file when it
 * needs them) instead of the kernel killing the process.  Here a database
 * of about 24 MiB is opened with a cache_size (256 MiB) larger than it,
 * filled, updated and read back; the application's SQL is unchanged.
 *
 * Run it under a limit to watch the policy work, for example
 *   VRANGE_MEMORY_LIMIT=16m ./sqlite-cache      (this process's memory)
 *   systemd-run --user --scope -p MemoryMax=64M ./sqlite-cache
 * Pages are purged as the limit nears, and when the budget for volatile
 * bytes is nearly spent the cache answers SQLite "no page" so that it
 * writes dirty pages out (spills) instead of growing: the same results,
 * a bounded footprint.
 *
 * Build (installed library):
 *   cc -o sqlite-cache sqlite-cache.c $(pkg-config --cflags --libs libvrange-sqlite)
 * Run:
 *   ./sqlite-cache [DIRECTORY]      (default $TMPDIR or /tmp)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>
#include <vrange-sqlite.h>

#define ROWS 6000
#define ROW_BYTES 4000

static int fail(sqlite3 *db, const char *what)
{
	fprintf(stderr, "sqlite-cache: %s: %s\n", what, db ? sqlite3_errmsg(db) : "failed");
	return 1;
}

static int run(sqlite3 *db, struct vr_ctx *ctx)
{
	if (sqlite3_exec(db,
			 "PRAGMA cache_size = -262144;" /* 256 MiB, more than the database */
			 "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
			 "CREATE TABLE doc(id INTEGER PRIMARY KEY, body BLOB, tag INTEGER);",
			 NULL, NULL, NULL) != SQLITE_OK)
		return fail(db, "create");
	/* about 24 MiB: zeroblob() bodies, tags 0..99 */
	if (sqlite3_exec(
		    db,
		    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)"
		    " INSERT INTO doc SELECT i, zeroblob(4000), i % 100 FROM n;"
		    "CREATE INDEX doc_tag ON doc(tag);"
		    "UPDATE doc SET tag = tag + 100 WHERE id % 2 = 0;",
		    NULL, NULL, NULL) != SQLITE_OK)
		return fail(db, "fill");
	uint64_t pages = vr_ctx_stat(ctx, VR_STAT_OBJECTS);

	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, "SELECT count(*), sum(tag), sum(length(body)) FROM doc", -1, &st,
			       NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW)
		return fail(db, "query");
	int64_t n = sqlite3_column_int64(st, 0), tags = sqlite3_column_int64(st, 1);
	int64_t bytes = sqlite3_column_int64(st, 2);
	sqlite3_finalize(st);
	/* tags: 60 of each 0..99, then +100 on the 3000 even ids */
	int64_t want_tags = 60 * (99 * 100 / 2) + 100 * (ROWS / 2);
	if (n != ROWS || tags != want_tags || bytes != (int64_t)ROWS * ROW_BYTES) {
		fprintf(stderr,
			"sqlite-cache: wrong results: %" PRId64 " rows, tags %" PRId64
			" (want %" PRId64 "), %" PRId64 " bytes\n",
			n, tags, want_tags, bytes);
		return 1;
	}
	if (pages == 0) {
		fprintf(stderr, "sqlite-cache: no page of SQLite's in libvrange objects\n");
		return 1;
	}
	printf("pages held in objects while the database was open: %" PRIu64 "\n", pages);
	printf("memory limit seen: %" PRIu64 " bytes (0: none), purges: %" PRIu64 "\n",
	       vr_ctx_memory_limit(ctx), vr_ctx_stat(ctx, VR_STAT_PURGES));
	printf("summary: %" PRId64 " rows, %" PRId64 " MiB read back intact, %" PRIu64
	       " pages cached in purgeable objects\n",
	       n, bytes >> 20, pages);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sqlite-cache-%d.db", dir, (int)getpid());

	/* a ctx of our own to read its statistics; NULL would make one */
	struct vr_ctx *ctx;
	int rc = vr_ctx_new(0, &ctx);
	if (rc < 0) {
		fprintf(stderr, "sqlite-cache: vr_ctx_new: %s\n", strerror(-rc));
		return 1;
	}
	/* before SQLite starts (sqlite3_open starts it) */
	rc = vr_sqlite_pcache_install(ctx);
	if (rc < 0) {
		fprintf(stderr, "sqlite-cache: vr_sqlite_pcache_install: %s\n", strerror(-rc));
		vr_ctx_destroy(ctx);
		return 1;
	}
	sqlite3 *db = NULL;
	int ret = sqlite3_open(path, &db) == SQLITE_OK ? run(db, ctx) : fail(db, "open");
	sqlite3_close(db);
	/* the ctx outlives SQLite's use of it */
	sqlite3_shutdown();
	vr_ctx_destroy(ctx);
	const char *files[] = { "", "-wal", "-shm" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[PATH_MAX + 8];
		snprintf(p, sizeof(p), "%s%s", path, files[i]);
		unlink(p);
	}
	return ret;
}
