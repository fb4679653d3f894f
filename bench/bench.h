/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench.h - shared pieces of vrbench, the libvrange benchmark driver
 *
 * vrbench runs every scenario in a child process (the binary re-executed
 * with --child NAME), so that each one starts with a clean heap and RSS,
 * no SIGSEGV handler of libvrange's unless it wants one, and the trap
 * backend it asks for (VRANGE_TRAP is read at the first vr_ctx_new of a
 * process).  A child reports result rows through a pipe; the parent prints
 * them, derives the ratios (all measured in the same run), writes JSON and
 * the SUMMARY line.  Nothing here ever asserts a timing: a scenario fails
 * only when a call fails or data comes back wrong.
 */
#ifndef VRBENCH_H
#define VRBENCH_H

#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <time.h>

/* guard markers (Linux 6.13) for older headers */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

enum bench_mode { MODE_SMOKE = 0, MODE_QUICK = 1, MODE_FULL = 2 };

/* per-child options, from the command line of the child */
struct bench_opts {
	enum bench_mode mode;
	const char *backend; /* "guard", "mprotect", "uffd" or NULL (library default) */
	const char *variant; /* the rows' variant column if not the backend's */
	int rows_fd;         /* -1: print rows to stdout */
};

extern struct bench_opts bopt;
extern size_t page_size;

/* pick a value by mode: smoke, quick, full */
#define BY_MODE(s, q, f) (bopt.mode == MODE_SMOKE ? (s) : bopt.mode == MODE_QUICK ? (q) : (f))

/* ---- time ---- */
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- random numbers (xorshift64*, deterministic seeds) ---- */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}
static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}
static inline double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* Zipf sampler over ranks 0..n-1 (rank 0 most popular), exponent s */
struct zipf {
	double *cdf;
	size_t n;
};
int zipf_init(struct zipf *z, size_t n, double s);
size_t zipf_next(const struct zipf *z, uint64_t *rng);
void zipf_fini(struct zipf *z);

/* ---- samples: median and p99 ---- */
struct samples {
	double *v;
	size_t n, cap;
};
void samples_add(struct samples *s, double v);
double samples_pct(struct samples *s, double pct); /* sorts; pct in [0,100] */
double samples_sum(const struct samples *s);
void samples_free(struct samples *s);

/* ---- result rows (children -> parent) ----
 * scen:    scenario key ("markpair", "purge", ...)
 * name:    what was measured ("vr-pair-1e6", "canary-pair", ...)
 * variant: trap backend or "-"
 * median, p99 in unit; n = number of samples behind them */
struct row {
	char scen[24];
	char name[48];
	char variant[16];
	double median, p99;
	char unit[16];
	long n;
};
void emit_row(const char *scen, const char *name, double median, double p99, const char *unit,
	      long n);
void emit_samples(const char *scen, const char *name, struct samples *s, const char *unit);
/* a time-series point for the cache workload plot */
void emit_series(const char *style, uint64_t op, double seconds, uint64_t resident, int event);
/* a free-form note (printed by the parent under the table) */
void emit_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- failure: every scenario error ends the child with status 1 ---- */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define CHECK(expr)                                                                                \
	do {                                                                                       \
		if (!(expr))                                                                       \
			die("%s:%d: check failed: %s", __FILE__, __LINE__, #expr);                 \
	} while (0)
/* libvrange calls return 0/VR_* or a negative errno */
#define VRCHECK(call)                                                                              \
	({                                                                                         \
		long _rc = (long)(call);                                                           \
		if (_rc < 0)                                                                       \
			die("%s:%d: %s = %ld (%s)", __FILE__, __LINE__, #call, _rc,                \
			    strerror((int)-_rc));                                                  \
		_rc;                                                                               \
	})

/* ---- memory facts ---- */
uint64_t proc_status_kib(const char *field);  /* "VmRSS", "RssShmem", ... */
uint64_t statm_resident_bytes(void);          /* /proc/self/statm resident */
uint64_t smaps_rollup_kib(const char *field); /* "AnonHugePages", ... */
size_t heap_in_use(void);                     /* mallinfo2 uordblks + hblkhd */
/* populate [p, p+len) for writing (MADV_POPULATE_WRITE, or touch) */
void populate(void *p, size_t len);
void *map_anon(size_t len);
/* len bytes (rounded up to 2 MiB), 2 MiB-aligned, MADV_HUGEPAGE if huge,
 * else MADV_NOHUGEPAGE; free with unmap_huge */
void *map_huge(size_t len, bool huge);
void unmap_huge(void *p, size_t len);
int uffd_register(void *p, size_t len); /* userfaultfd fd, or -1 */

/* ---- scenarios (one child each) ---- */
int run_floors(void);
int run_markpair(void);
int run_scaling(void);
int run_purge(const char *style); /* NULL, or "anon" */
int run_fault(const char *style); /* NULL, or "anon" */
int run_memory(void);
int run_cache(const char *style);
int run_limit(const char *style);
int run_objpair(void);
int run_shared(const char *style); /* NULL, or "no-uffd" */
int run_wall(const char *style);   /* "hp-on" or "hp-off" */
/* floors and rows shared by scenarios, reported under scen */
void bench_canary_pair(const char *scen); /* s-markpair.c */
void bench_mutex_pair(const char *scen);  /* s-markpair.c */
void bench_floor_mutex(const char *scen); /* s-floors.c */
void bench_floor_cas(const char *scen);   /* s-floors.c */
void bench_floor_stamp(const char *scen); /* s-floors.c */
struct vr_ctx;
/* s-objpair.c: n objects of size bytes, random and hot pin+unpin pairs */
void bench_obj_pairs(const char *scen, size_t n, size_t size, const char *tag);
/* the same, the objects spread over ngroups groups (0: the default group) */
void bench_obj_pairs_in(const char *scen, size_t n, size_t size, const char *tag, int ngroups);
/* s-objpurge.c: purge throughput of many small adjacent objects */
void bench_obj_purge(const char *scen, bool guard);
/* s-markpair.c: n ranges in one region, random/hot/ptr unmark+mark pairs */
void bench_range_pairs(const char *scen, struct vr_ctx *ctx, size_t n, const char *tag);

#endif
