/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vt-sqlite.h - the SQLite workload of tests/test-sqlite.c and
 * bench/sqlite-bench.c (S38): the same statements whatever page cache
 * SQLite runs on, every query's rows hashed, so that two runs (SQLite's
 * default cache, libvrange-sqlite's) can be compared query by query.
 *
 * For each page size 512 .. 65536 a file database larger than its cache:
 * inserts (text, blobs with overflow pages), two index builds, updates,
 * deletes, a second connection writing, a rollback, VACUUM, PRAGMA
 * integrity_check before and after; an in-memory database and a temporary
 * one (SQLite's "" file name); a WAL database with a writer and a reader
 * thread on two connections, the reader checking an invariant (the sum of
 * the balances) on every snapshot.  Everything is deterministic: fixed
 * seeds, no random() or time in SQL.  Any failure exits the process with
 * status 3 after a message (VS_CK).
 */
#ifndef VT_SQLITE_H
#define VT_SQLITE_H

#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define VS_CK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK FAILED: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			_exit(3);                                                                  \
		}                                                                                  \
	} while (0)

/* the hashes of every query, in order */
struct vs_run {
	uint64_t *h;
	size_t n, cap;
	char dir[PATH_MAX]; /* where the database files go */
	unsigned scale;     /* rows multiplier: 1 for the tests */
	bool light;         /* page sizes 512, 4096, 65536 only, fewer transfers */
};

static inline void vs_add(struct vs_run *r, uint64_t h)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->h = realloc(r->h, r->cap * sizeof(*r->h));
		VS_CK(r->h, "out of memory");
	}
	r->h[r->n++] = h;
}

static inline uint64_t vs_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static inline uint64_t vs_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* VT_SQLITE_TRACE=1: each statement of vs_exec on stderr, with the
 * process's RSS and the seconds since the first one, as it starts (where
 * a run under a limit goes wrong, and where its time goes) */
static inline void vs_trace(const char *sql)
{
	if (!getenv("VT_SQLITE_TRACE"))
		return;
	char line[128];
	long rss = -1;
	FILE *f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			rss = atol(line + 6);
	if (f)
		fclose(f);
	static double t0;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (!t0)
		t0 = t;
	fprintf(stderr, "trace: %7.3f s rss %ld MiB: %.70s\n", t - t0, rss / 1024, sql);
}

static inline void vs_exec(sqlite3 *db, const char *sql)
{
	vs_trace(sql);
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	VS_CK(rc == SQLITE_OK, "%s: %s", sql, err ? err : sqlite3_errstr(rc));
}

static inline sqlite3 *vs_open(const char *path)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open(path, &db);
	VS_CK(rc == SQLITE_OK, "open %s: %s", path, sqlite3_errstr(rc));
	sqlite3_busy_timeout(db, 60000);
	/* no fsync: the page cache is under test, not the disk */
	vs_exec(db, "PRAGMA synchronous = OFF");
	return db;
}

/* runs @sql to its end; the hash of every row's every value (type and
 * bytes), or of the error when @may_fail */
static inline uint64_t vs_hash_query(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	VS_CK(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
	uint64_t h = 0xcbf29ce484222325ull;
	int cols = sqlite3_column_count(st);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (int i = 0; i < cols; i++) {
			int t = sqlite3_column_type(st, i);
			h = vs_fnv(h, &t, sizeof(t));
			if (t == SQLITE_INTEGER) {
				sqlite3_int64 v = sqlite3_column_int64(st, i);
				h = vs_fnv(h, &v, sizeof(v));
			} else if (t == SQLITE_FLOAT) {
				double v = sqlite3_column_double(st, i);
				h = vs_fnv(h, &v, sizeof(v));
			} else if (t != SQLITE_NULL) {
				const void *p = sqlite3_column_blob(st, i);
				int n = sqlite3_column_bytes(st, i);
				h = vs_fnv(h, &n, sizeof(n));
				h = vs_fnv(h, p, (size_t)n);
			}
		}
		h = vs_fnv(h, "\n", 1);
	}
	VS_CK(rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return h;
}

static inline void vs_query(struct vs_run *r, sqlite3 *db, const char *sql)
{
	vs_trace(sql);
	vs_add(r, vs_hash_query(db, sql));
}

/* PRAGMA integrity_check answers one row, "ok" */
static inline void vs_integrity(struct vs_run *r, sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	VS_CK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK, "%s",
	      sqlite3_errmsg(db));
	VS_CK(sqlite3_step(st) == SQLITE_ROW, "integrity_check: %s", sqlite3_errmsg(db));
	const char *ok = (const char *)sqlite3_column_text(st, 0);
	VS_CK(ok && strcmp(ok, "ok") == 0, "integrity_check: %s", ok ? ok : "(null)");
	VS_CK(sqlite3_step(st) == SQLITE_DONE, "integrity_check: more than one row");
	sqlite3_finalize(st);
	vs_add(r, 0x6f6b);
}

/* @n rows of text (5..300 bytes) and blobs (mostly short, one in eight
 * up to 3 pages of 1 KiB: overflow pages) from seed @seed */
static inline void vs_insert(sqlite3 *db, unsigned n, uint64_t seed)
{
	static char buf[3 << 10];
	sqlite3_stmt *st = NULL;
	VS_CK(sqlite3_prepare_v2(db, "INSERT INTO t(a, b, c) VALUES (?, ?, ?)", -1, &st, NULL) ==
		      SQLITE_OK,
	      "%s", sqlite3_errmsg(db));
	uint64_t s = seed | 1;
	vs_exec(db, "BEGIN");
	for (unsigned i = 0; i < n; i++) {
		size_t tl = 5 + vs_rand(&s) % 296,
		       bl = vs_rand(&s) % 8 ? vs_rand(&s) % 50 : vs_rand(&s) % sizeof(buf);
		for (size_t k = 0; k < tl || k < bl; k++)
			buf[k] = (char)('a' + vs_rand(&s) % 26);
		sqlite3_bind_int64(st, 1, (sqlite3_int64)(vs_rand(&s) % 100000));
		sqlite3_bind_text(st, 2, buf, (int)tl, SQLITE_TRANSIENT);
		sqlite3_bind_blob(st, 3, buf, (int)bl, SQLITE_TRANSIENT);
		VS_CK(sqlite3_step(st) == SQLITE_DONE, "insert: %s", sqlite3_errmsg(db));
		sqlite3_reset(st);
	}
	vs_exec(db, "COMMIT");
	sqlite3_finalize(st);
}

static inline void vs_queries(struct vs_run *r, sqlite3 *db)
{
	vs_query(r, db, "SELECT count(*), sum(a), sum(length(b)), sum(length(c)) FROM t");
	vs_query(r, db, "SELECT id, a, b, c FROM t ORDER BY id");
	vs_query(r, db, "SELECT a % 97, count(*), sum(length(b)) FROM t GROUP BY 1 ORDER BY 1");
	vs_query(r, db, "SELECT id, a FROM t WHERE a BETWEEN 1000 AND 30000 ORDER BY a, id");
	vs_query(r, db, "SELECT b FROM t WHERE b >= 'm' ORDER BY b, id LIMIT 700");
	vs_query(r, db, "SELECT id FROM t ORDER BY length(c), b, id");
}

/* one file database of page size @ps, its cache smaller than it */
static inline void vs_file_db(struct vs_run *r, unsigned ps, bool wal)
{
	char path[PATH_MAX + 32], sql[128];
	snprintf(path, sizeof(path), "%s/db-%u.sqlite", r->dir, ps);
	unlink(path);
	sqlite3 *db = vs_open(path);
	/* 256 KiB of cache (at least 10 pages); the database is about 1 MiB */
	snprintf(sql, sizeof(sql), "PRAGMA page_size = %u; PRAGMA cache_size = %u", ps,
		 ps * 10 > (256u << 10) ? 10 : (256u << 10) / ps);
	vs_exec(db, sql);
	vs_exec(db, wal ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode = DELETE");
	vs_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c BLOB)");
	vs_insert(db, 2000 * r->scale, ps);
	vs_exec(db, "CREATE INDEX ta ON t(a)");
	vs_exec(db, "CREATE INDEX tb ON t(b)");
	vs_queries(r, db);
	vs_exec(db, "BEGIN; UPDATE t SET a = a * 7 % 100003, b = b || 'x' WHERE id % 3 = 0;"
		    "DELETE FROM t WHERE id % 11 = 0; UPDATE t SET c = c || c WHERE id % 13 = 1;"
		    "COMMIT");
	vs_queries(r, db);
	/* a second connection writes; the first sees it */
	sqlite3 *db2 = vs_open(path);
	vs_exec(db2, "BEGIN; INSERT INTO t(a, b, c) SELECT a + 1, b, c FROM t WHERE id % 5 = 0;"
		     "COMMIT");
	vs_query(r, db2, "SELECT count(*), sum(a) FROM t");
	vs_queries(r, db);
	vs_integrity(r, db2);
	sqlite3_close(db2);
	vs_exec(db, "BEGIN; DELETE FROM t; UPDATE t SET a = 0; ROLLBACK");
	vs_query(r, db, "SELECT count(*), sum(a) FROM t");
	vs_exec(db, "DELETE FROM t WHERE id % 4 = 0");
	vs_exec(db, "VACUUM");
	vs_integrity(r, db);
	vs_queries(r, db);
	vs_query(r, db, "PRAGMA page_count");
	sqlite3_close(db);
	unlink(path);
	snprintf(path + strlen(path), 8, "-wal");
	unlink(path);
	snprintf(path + strlen(path) - 4, 8, "-shm");
	unlink(path);
}

/* an in-memory database (never purgeable) and a temporary one */
static inline void vs_memory_dbs(struct vs_run *r)
{
	const char *names[] = { ":memory:", "" };
	for (int i = 0; i < 2; i++) {
		sqlite3 *db = vs_open(names[i]);
		vs_exec(db, "PRAGMA cache_size = 50");
		vs_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c BLOB)");
		vs_insert(db, 1500 * r->scale, 77 + (uint64_t)i);
		vs_exec(db, "CREATE INDEX tb ON t(b)");
		vs_queries(r, db);
		vs_exec(db,
			"UPDATE t SET b = upper(b) WHERE id % 2 = 0; DELETE FROM t WHERE a < 5000");
		vs_queries(r, db);
		vs_exec(db, "VACUUM");
		vs_integrity(r, db);
		vs_queries(r, db);
		sqlite3_close(db);
	}
}

/* ---- two connections, two threads, WAL: transfers and an invariant ---- */

#define VS_ACCTS 2000
#define VS_TOTAL (VS_ACCTS * 1000ll)

struct vs_bank {
	const char *path;
	unsigned transfers;
	volatile int done;
	unsigned reads;
};

static void *vs_reader(void *arg)
{
	struct vs_bank *b = arg;
	sqlite3 *db = vs_open(b->path);
	vs_exec(db, "PRAGMA cache_size = 20");
	do {
		sqlite3_stmt *st = NULL;
		VS_CK(sqlite3_prepare_v2(db, "SELECT count(*), sum(bal) FROM acct", -1, &st,
					 NULL) == SQLITE_OK,
		      "%s", sqlite3_errmsg(db));
		VS_CK(sqlite3_step(st) == SQLITE_ROW, "reader: %s", sqlite3_errmsg(db));
		VS_CK(sqlite3_column_int64(st, 0) == VS_ACCTS &&
			      sqlite3_column_int64(st, 1) == VS_TOTAL,
		      "reader saw %lld accounts, %lld in total", sqlite3_column_int64(st, 0),
		      sqlite3_column_int64(st, 1));
		sqlite3_finalize(st);
		b->reads++;
	} while (!__atomic_load_n(&b->done, __ATOMIC_ACQUIRE));
	sqlite3_close(db);
	return NULL;
}

static inline void vs_bank_db(struct vs_run *r)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/bank.sqlite", r->dir);
	unlink(path);
	sqlite3 *db = vs_open(path);
	vs_exec(db, "PRAGMA page_size = 1024; PRAGMA cache_size = 20; PRAGMA journal_mode = WAL");
	vs_exec(db, "CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER, note TEXT)");
	vs_exec(db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)"
		    " INSERT INTO acct SELECT i, 1000, printf('%0100d', i) FROM n");
	struct vs_bank b = { .path = path, .transfers = (r->light ? 600 : 1500) * r->scale };
	pthread_t th;
	VS_CK(pthread_create(&th, NULL, vs_reader, &b) == 0, "pthread_create");
	sqlite3_stmt *st = NULL;
	VS_CK(sqlite3_prepare_v2(db,
				 "UPDATE acct SET bal = bal + CASE id WHEN ?1 THEN -?3 ELSE ?3 END"
				 " WHERE id IN (?1, ?2)",
				 -1, &st, NULL) == SQLITE_OK,
	      "%s", sqlite3_errmsg(db));
	uint64_t s = 12345;
	for (unsigned i = 0; i < b.transfers; i++) {
		if (i % 10 == 0)
			vs_exec(db, "BEGIN IMMEDIATE");
		sqlite3_int64 from = 1 + (sqlite3_int64)(vs_rand(&s) % VS_ACCTS);
		sqlite3_int64 to = 1 + (sqlite3_int64)(vs_rand(&s) % VS_ACCTS);
		if (to == from)
			to = to % VS_ACCTS + 1;
		sqlite3_bind_int64(st, 1, from);
		sqlite3_bind_int64(st, 2, to);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)(vs_rand(&s) % 100));
		VS_CK(sqlite3_step(st) == SQLITE_DONE, "transfer: %s", sqlite3_errmsg(db));
		sqlite3_reset(st);
		if (i % 10 == 9)
			vs_exec(db, "COMMIT");
	}
	if (b.transfers % 10)
		vs_exec(db, "COMMIT");
	sqlite3_finalize(st);
	__atomic_store_n(&b.done, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	VS_CK(b.reads > 0, "the reader read nothing");
	vs_query(r, db, "SELECT id, bal FROM acct ORDER BY id");
	vs_integrity(r, db);
	sqlite3_close(db);
	unlink(path);
	snprintf(path + strlen(path), 8, "-wal");
	unlink(path);
	snprintf(path + strlen(path) - 4, 8, "-shm");
	unlink(path);
}

/* a database of about @mib MiB with a cache larger than it (256 MiB): one
 * transaction writes all of it, then an index, an update, VACUUM */
static inline void vs_big_db(struct vs_run *r, unsigned mib)
{
	char path[PATH_MAX + 32], sql[512];
	snprintf(path, sizeof(path), "%s/big.sqlite", r->dir);
	unlink(path);
	sqlite3 *db = vs_open(path);
	/* VT_BIG_CACHE_KIB: the cache_size (KiB) instead of 256 MiB (a
	 * default cache tuned by hand to fit a memory limit) */
	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%lu",
		 getenv("VT_BIG_CACHE_KIB") ? strtoul(getenv("VT_BIG_CACHE_KIB"), NULL, 10)
					    : 262144ul);
	vs_exec(db, sql);
	vs_exec(db, "CREATE TABLE big(id INTEGER PRIMARY KEY, k INTEGER, tag TEXT, body BLOB)");
	snprintf(sql, sizeof(sql),
		 "BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n"
		 " WHERE i < %u) INSERT INTO big SELECT i, i * 7919 %% 100003,"
		 " printf('%%08d-%%08d', i, i * 31 %% 1009), zeroblob(3000 + i %% 500) FROM n;"
		 "COMMIT",
		 mib * 320);
	vs_exec(db, sql);
	vs_exec(db, "CREATE INDEX big_k ON big(k)");
	vs_exec(db, "UPDATE big SET k = k + 1, tag = tag || 'u' WHERE id % 3 = 0");
	vs_query(r, db, "SELECT count(*), sum(k), sum(length(body)), sum(length(tag)) FROM big");
	vs_query(r, db, "SELECT id, k, tag FROM big ORDER BY k, id");
	vs_exec(db, "DELETE FROM big WHERE id % 5 = 0");
	vs_exec(db, "VACUUM");
	vs_integrity(r, db);
	vs_query(r, db, "SELECT id, k, tag, length(body) FROM big ORDER BY id");
	sqlite3_close(db);
	unlink(path);
}

/* the whole workload */
static inline void vs_workload(struct vs_run *r)
{
	for (unsigned ps = 512; ps <= 65536; ps *= r->light ? 8 : 2)
		vs_file_db(r, ps, ps == 4096);
	vs_memory_dbs(r);
	vs_bank_db(r);
}

#endif
