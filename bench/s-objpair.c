/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-objpair.c - scenario objpair: the cost of using an intact object.
 *
 * N live objects, all unpinned at rest (a cache between uses); one "pair"
 * is vr_obj_pin of a random object (must return VR_INTACT) then
 * vr_obj_unpin of it.  N = 10^3, 10^6 and 10^7 objects of 256 bytes, and
 * 10^3 and 10^6 of 64 KiB (10^7 x 64 KiB would be 640 GiB of address
 * space and 10^7 page-map entries per GiB: left out).  Object memory is
 * never written (the memfd stays sparse), so the pair pays for the
 * object's metadata only, as it should.  "hot" repeats one object;
 * "hot-many" pins 16 objects and unpins them with one vr_obj_unpin_many
 * (per object: what a cache that releases in batches pays).  In
 * the same run: two uncontended mutex lock+unlock (the floor) and the
 * MADV_FREE canary pair (Chromium's discardable memory on Linux).
 *
 * "handle-read-floor" is what any handle-based API pays at that size:
 * load a random handle pointer from the caller's array and read a word of
 * the handle (two dependent misses); the pair's cost beyond it is the
 * library's.  The caller's array is on 2 MiB pages (map_huge), so neither
 * pays the benchmark's own TLB misses.
 *
 * Also measured: metadata bytes per object (anonymous RSS growth over N,
 * at 10^6 live 256-byte objects, unpinned: handles, slabs, page maps and
 * the LRU logs; "obj-huge-mib": how much of it is on 2 MiB pages), the
 * waste of a mix of small objects (VR_STAT_FOOTPRINT
 * against the bytes asked for, every object written), and two threads
 * pairing on their own 10^5 objects against one thread.  Rows tagged
 * "-grp": the same pairs with the objects spread over 4 groups (S35), at
 * 10^6 and 10^7 (10^4 in smoke mode), next to the default group's.
 */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vrange.h>

#define SCEN "objpair"
#define BATCH 64

/* the handle array is the caller's: on huge pages, so that a random pick
 * pays a cache miss but no TLB miss of the benchmark's own (free_objs) */
static struct vr_obj **alloc_objs(size_t n)
{
	return map_huge(n * sizeof(struct vr_obj *), true);
}

/* objects round-robin in the ngroups groups g, or in the ctx's default
 * group when ngroups is 0 */
static struct vr_obj **fill_objs_in(struct vr_obj **o, struct vr_ctx *ctx, struct vr_group **g,
				    int ngroups, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		if (ngroups)
			VRCHECK(vr_obj_new_in(g[i % (size_t)ngroups], size, 0, 0, &o[i]));
		else
			VRCHECK(vr_obj_new(ctx, size, 0, &o[i]));
		VRCHECK(vr_obj_unpin(o[i]));
	}
	return o;
}

static struct vr_obj **fill_objs(struct vr_obj **o, struct vr_ctx *ctx, size_t n, size_t size)
{
	return fill_objs_in(o, ctx, NULL, 0, n, size);
}

static void free_objs(struct vr_obj **o, size_t n)
{
	unmap_huge(o, n * sizeof(*o));
}

static void pair_batch(struct vr_obj **o, size_t n, uint64_t *rng, bool hot)
{
	for (size_t j = 0; j < BATCH; j++) {
		struct vr_obj *x = o[hot ? n / 2 : rng_below(rng, n)];
		int a = vr_obj_pin(x), b = vr_obj_unpin(x);
		if (a != VR_INTACT || b != 0)
			die("object pair: pin %d unpin %d (expected intact)", a, b);
	}
}

/* "hot-many": HOT_MANY objects pinned one by one, then unpinned by one
 * vr_obj_unpin_many() (one age, gauges and limit settled once), as a
 * cache releasing a batch; BATCH pins and unpins per call */
#define HOT_MANY 16
static void pair_batch_many(struct vr_obj **o, size_t n)
{
	struct vr_obj **x = &o[n / 2 - HOT_MANY / 2];
	for (size_t j = 0; j < BATCH; j += HOT_MANY) {
		for (size_t k = 0; k < HOT_MANY; k++)
			if (vr_obj_pin(x[k]) != VR_INTACT)
				die("object pair: pin not intact");
		int rc = vr_obj_unpin_many(x, HOT_MANY);
		if (rc != 0)
			die("object pair: vr_obj_unpin_many %d", rc);
	}
}

#define MAX_GROUPS 8

/* also used by s-wall.c, which reports under its own scenario name;
 * ngroups > 0: the objects are spread round-robin over that many groups
 * of priorities 0, 1, ... (S35) instead of the default group */
void bench_obj_pairs_in(const char *scen, size_t n, size_t size, const char *tag, int ngroups)
{
	struct vr_ctx *ctx;
	struct vr_group *g[MAX_GROUPS];
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	CHECK(ngroups >= 0 && ngroups <= MAX_GROUPS);
	for (int i = 0; i < ngroups; i++)
		VRCHECK(vr_group_new(ctx, i, &g[i]));
	struct vr_obj **o = alloc_objs(n);
	populate(o, n * sizeof(*o));
	uint64_t anon0 = proc_status_kib("RssAnon");
	uint64_t hp0 = smaps_rollup_kib("AnonHugePages");
	uint64_t t0 = now_ns();
	fill_objs_in(o, ctx, g, ngroups, n, size);
	char name[48];
	snprintf(name, sizeof(name), "obj-new-unpin-%s", tag);
	emit_row(scen, name, (double)(now_ns() - t0) / (double)n, NAN, "ns/obj", (long)n);
	if (size == 256 && n >= 1000000) {
		/* the handle array (the benchmark's) was populated before anon0 */
		double meta = (double)(proc_status_kib("RssAnon") - anon0) * 1024.0 / (double)n;
		snprintf(name, sizeof(name), "obj-meta-bytes-%s", tag);
		emit_row(scen, name, meta, NAN, "B/obj", (long)n);
		/* how much of it the kernel gave on 2 MiB pages */
		double hp = (double)(smaps_rollup_kib("AnonHugePages") - hp0) / 1024.0;
		snprintf(name, sizeof(name), "obj-huge-mib-%s", tag);
		emit_row(scen, name, hp, NAN, "MiB", (long)n);
	}
	uint64_t rng = 0x9e3779b9 + n;
	size_t nsamp = BY_MODE(100, 800, 3000);
	if (n >= 1000000) {
		/* the floor of any handle API at this size: fetch a random
		 * handle pointer from the caller's array and read one word of
		 * the handle (two dependent cache misses), one at a time */
		struct samples f = { 0 };
		uint64_t sink = 0;
		for (size_t i = 0; i < nsamp; i++) {
			uint64_t t = now_ns();
			for (size_t j = 0; j < BATCH; j++) {
				/* each load depends on the last one, as the
				 * pairs' atomics serialize theirs: no overlap */
				uint64_t v = *(volatile const uint64_t *)(const void *)
						     o[rng_below(&rng, n)];
				sink += v;
				rng += v & 1;
			}
			samples_add(&f, (double)(now_ns() - t) / BATCH);
		}
		snprintf(name, sizeof(name), "handle-read-floor-%s", tag);
		emit_samples(scen, name, &f, "ns");
		samples_free(&f);
		CHECK(sink != 1); /* keeps the loads */
	}
	for (int hot = 0; hot <= 2; hot++) {
		struct samples s = { 0 };
		for (size_t i = 0; i <= nsamp; i++) { /* the first: warm-up */
			uint64_t t = now_ns();
			if (hot == 2)
				pair_batch_many(o, n);
			else
				pair_batch(o, n, &rng, hot);
			if (i)
				samples_add(&s, (double)(now_ns() - t) / BATCH);
		}
		snprintf(name, sizeof(name), "obj-pair-%s%s", tag,
			 hot == 2 ? "-hot-many"
			 : hot    ? "-hot"
				  : "");
		emit_samples(scen, name, &s, "ns");
		samples_free(&s);
	}
	CHECK(vr_ctx_stat(ctx, VR_STAT_PURGES) == 0);
	CHECK(vr_ctx_stat(ctx, VR_STAT_OBJECTS) == n);
	CHECK(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) == n * size);
	vr_ctx_destroy(ctx); /* frees the objects and groups */
	free_objs(o, n);
}

void bench_obj_pairs(const char *scen, size_t n, size_t size, const char *tag)
{
	bench_obj_pairs_in(scen, n, size, tag, 0);
}

/* small objects of a size-class mix, every byte written */
static void bench_waste(void)
{
	struct vr_ctx *ctx;
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	size_t n = BY_MODE(20000, 200000, 1000000);
	uint64_t rng = 77, asked = 0;
	for (size_t i = 0; i < n; i++) {
		/* an octave 16-31 ... 2048-4095 chosen uniformly, then a size
		 * uniform within it */
		unsigned k = 4 + (unsigned)rng_below(&rng, 8);
		size_t size = ((size_t)1 << k) + rng_below(&rng, (uint64_t)1 << k);
		struct vr_obj *o;
		VRCHECK(vr_obj_new(ctx, size, 0, &o));
		memset(vr_obj_ptr(o), 1, size);
		asked += size;
	}
	uint64_t fp = vr_ctx_stat(ctx, VR_STAT_FOOTPRINT);
	emit_row(SCEN, "obj-waste-small-mix", 100.0 * (double)(fp - asked) / (double)fp, NAN,
		 "%pages", (long)n);
	vr_ctx_destroy(ctx);
}

/* ---- two threads on their own objects against one ---- */
struct worker {
	pthread_t th;
	bool floor; /* a private mutex pair instead: what the machine scales */
	pthread_mutex_t m;
	struct vr_obj **o;
	size_t n;
	int cpu;
	_Atomic bool *stop;
	pthread_barrier_t *bar;
	uint64_t ops, ns;
	char pad[64];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t rng = 1234 + (uint64_t)w->cpu, ops = 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(w->bar);
	uint64_t t0 = now_ns();
	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		if (w->floor) {
			for (int j = 0; j < BATCH; j++) {
				pthread_mutex_lock(&w->m);
				__asm__ volatile("" ::: "memory");
				pthread_mutex_unlock(&w->m);
				pthread_mutex_lock(&w->m);
				__asm__ volatile("" ::: "memory");
				pthread_mutex_unlock(&w->m);
			}
		} else {
			pair_batch(w->o, w->n, &rng, false);
		}
		ops += BATCH;
	}
	w->ns = now_ns() - t0;
	w->ops = ops;
	return NULL;
}

static double run_threads(struct worker *ws, int nt, uint64_t dur_ns)
{
	pthread_barrier_t bar;
	_Atomic bool stop = false;
	pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
	for (int i = 0; i < nt; i++) {
		ws[i].bar = &bar;
		ws[i].stop = &stop;
		CHECK(pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) == 0);
	}
	pthread_barrier_wait(&bar);
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)dur_ns };
	nanosleep(&ts, NULL);
	atomic_store(&stop, true);
	double tput = 0;
	for (int i = 0; i < nt; i++) {
		pthread_join(ws[i].th, NULL);
		tput += (double)ws[i].ops / ((double)ws[i].ns / 1e9);
	}
	pthread_barrier_destroy(&bar);
	return tput;
}

static void bench_threads(void)
{
	struct vr_ctx *ctx;
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	size_t n = BY_MODE(10000, 100000, 100000);
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	struct worker ws[2];
	memset(ws, 0, sizeof(ws));
	for (int i = 0; i < 2; i++) {
		ws[i].o = fill_objs(alloc_objs(n), ctx, n, 256);
		ws[i].n = n;
		ws[i].cpu = ncpu > 1 ? i : 0;
	}
	struct samples r = { 0 }, t1s = { 0 }, fr = { 0 };
	uint64_t dur = BY_MODE(50, 100, 300) * 1000000ull;
	for (int i = 0; i < 2; i++)
		pthread_mutex_init(&ws[i].m, NULL);
	/* interleaved: objects, then the mutex floor, in each repetition */
	for (int rep = 0; rep < BY_MODE(3, 10, 20); rep++) {
		ws[0].floor = ws[1].floor = false;
		double t1 = run_threads(ws, 1, dur);
		double t2 = run_threads(ws, 2, dur);
		samples_add(&r, t2 / t1);
		samples_add(&t1s, t1 / 1e6);
		ws[0].floor = ws[1].floor = true;
		double m1 = run_threads(ws, 1, dur);
		double m2 = run_threads(ws, 2, dur);
		samples_add(&fr, m2 / m1);
	}
	emit_samples(SCEN, "obj-1t-1e5", &t1s, "Mpairs/s");
	emit_row(SCEN, "obj-2t-ratio", samples_pct(&r, 50), samples_pct(&r, 1), "x", (long)r.n);
	emit_row(SCEN, "mutex-2t-ratio", samples_pct(&fr, 50), samples_pct(&fr, 1), "x",
		 (long)fr.n);
	samples_free(&r);
	samples_free(&t1s);
	samples_free(&fr);
	vr_ctx_destroy(ctx);
	free_objs(ws[0].o, n);
	free_objs(ws[1].o, n);
}

int run_objpair(void)
{
	bench_mutex_pair(SCEN);
	bench_canary_pair(SCEN);
	bench_obj_pairs(SCEN, 1000, 256, "1e3");
	bench_obj_pairs(SCEN, 1000, 64 * KiB, "1e3-64k");
	/* "-grp": the same objects spread over 4 groups (S35) */
	if (bopt.mode == MODE_SMOKE) {
		bench_obj_pairs(SCEN, 10000, 256, "1e4");
		bench_obj_pairs_in(SCEN, 10000, 256, "1e4-grp", 4);
	} else {
		bench_obj_pairs(SCEN, 10000, 256, "1e4");
		bench_obj_pairs(SCEN, 100000, 256, "1e5");
		bench_obj_pairs(SCEN, 1000000, 256, "1e6");
		bench_obj_pairs_in(SCEN, 1000000, 256, "1e6-grp", 4);
		bench_obj_pairs(SCEN, 1000000, 64 * KiB, "1e6-64k");
		bench_obj_pairs(SCEN, 10000000, 256, "1e7");
		bench_obj_pairs_in(SCEN, 10000000, 256, "1e7-grp", 4);
	}
	bench_waste();
	bench_threads();
	return 0;
}
