/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-scaling.c - scenario 2: two threads on two regions.
 *
 * Each thread runs mark+unmark pairs on random intact 64 KiB ranges of its
 * own region (1000 ranges) for a fixed time.  Throughput with two threads
 * (sum) over throughput with one thread, measured back to back, repeated.
 * Variants: both regions in one ctx (the ctx gauges and age counter are
 * shared), one ctx per region, the same through the pointer calls
 * (vr_unmark_ptr / vr_mark_ptr: the process-wide address registry), and
 * two floors: a private mutex per thread
 * (what the machine can scale at all) and madvfree-canary (one mm: every
 * MADV_FREE flushes the other CPU's TLB).  Thread i is pinned to CPU i;
 * the kinds are interleaved within each repetition.
 *
 * Besides the wall-clock ratio (the measure, bounded by how much
 * of the second CPU the shared machine gives us; the mutex floor shows
 * that bound in the same run), "cpu-eff" is the pairs per CPU-second of
 * two threads over that of one: 1.0 means running side by side costs the
 * threads nothing (no shared lock or cache line), whatever the load.
 */
#include "bench.h"
#include "baselines.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vrange.h>

#define SCEN "scaling"
#define OBJ (64 * KiB)
#define NRANGES 1000
#define CANARY_OBJS 16

enum kind { K_VR, K_VR_PTR, K_MUTEX, K_CANARY };

struct worker {
	pthread_t th;
	enum kind kind;
	struct vr_region *r;
	pthread_mutex_t *m;
	char *arena;
	uint64_t *saved;
	pthread_barrier_t *bar;
	_Atomic bool *stop;
	uint64_t ops, ns, cpu_ns;
	uint64_t seed;
	int cpu;
	char pad[64];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t stride = OBJ + page_size;
	uint64_t rng = w->seed, ops = 0;
	struct timespec c0, c1;
	/* one CPU per thread, so that two threads really run side by side
	 * whenever they run (the machine is shared) */
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	pthread_barrier_wait(w->bar);
	uint64_t t0 = now_ns();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		for (int j = 0; j < 64; j++) {
			switch (w->kind) {
			case K_VR: {
				size_t off = rng_below(&rng, NRANGES) * stride;
				if (vr_unmark(w->r, off, OBJ) != VR_INTACT ||
				    vr_mark(w->r, off, OBJ) != VR_INTACT)
					die("scaling: pair not intact");
				break;
			}
			case K_VR_PTR: {
				char *p = (char *)vr_region_base(w->r) +
					  rng_below(&rng, NRANGES) * stride;
				if (vr_unmark_ptr(p, OBJ) != VR_INTACT ||
				    vr_mark_ptr(p, OBJ) != VR_INTACT)
					die("scaling: pointer pair not intact");
				break;
			}
			case K_MUTEX:
				pthread_mutex_lock(w->m);
				__asm__ volatile("" ::: "memory");
				pthread_mutex_unlock(w->m);
				pthread_mutex_lock(w->m);
				__asm__ volatile("" ::: "memory");
				pthread_mutex_unlock(w->m);
				break;
			case K_CANARY: {
				size_t o = rng_below(&rng, CANARY_OBJS);
				uint64_t *sv = w->saved + o * (OBJ / page_size);
				canary_lock(w->arena + o * OBJ, OBJ, sv);
				canary_unlock(w->arena + o * OBJ, OBJ, sv);
				break;
			}
			}
		}
		ops += 64;
	}
	w->ns = now_ns() - t0;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	w->cpu_ns = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000ull + (uint64_t)c1.tv_nsec -
		    (uint64_t)c0.tv_nsec;
	w->ops = ops;
	return NULL;
}

/* ops/s of nthreads workers running for dur_ns; *per_cpu: ops per CPU
 * second of the workers (what the threads achieved while they ran) */
static double run_threads(struct worker *ws, int nthreads, uint64_t dur_ns, double *per_cpu)
{
	pthread_barrier_t bar;
	_Atomic bool stop = false;
	pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		ws[i].bar = &bar;
		ws[i].stop = &stop;
		CHECK(pthread_create(&ws[i].th, NULL, worker_main, &ws[i]) == 0);
	}
	pthread_barrier_wait(&bar);
	struct timespec ts = { .tv_sec = (time_t)(dur_ns / 1000000000ull),
			       .tv_nsec = (long)(dur_ns % 1000000000ull) };
	nanosleep(&ts, NULL);
	atomic_store(&stop, true);
	double tput = 0, ops = 0, cpu = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(ws[i].th, NULL);
		tput += (double)ws[i].ops / ((double)ws[i].ns / 1e9);
		ops += (double)ws[i].ops;
		cpu += (double)ws[i].cpu_ns / 1e9;
	}
	pthread_barrier_destroy(&bar);
	*per_cpu = ops / cpu;
	return tput;
}

struct kind_run {
	const char *name;
	struct worker *ws;
	struct samples t1, t2, ratio, eff;
};

static void measure(struct kind_run *k)
{
	uint64_t dur = BY_MODE(50, 100, 300) * 1000000ull;
	double c1, c2;
	double t1 = run_threads(k->ws, 1, dur, &c1);
	double t2 = run_threads(k->ws, 2, dur, &c2);
	samples_add(&k->t1, t1 / 1e6);
	samples_add(&k->t2, t2 / 1e6);
	samples_add(&k->ratio, t2 / t1);
	samples_add(&k->eff, c2 / c1);
}

static void report(struct kind_run *k)
{
	char nm[48];
	snprintf(nm, sizeof(nm), "%s-1t", k->name);
	emit_samples(SCEN, nm, &k->t1, "Mpairs/s");
	snprintf(nm, sizeof(nm), "%s-2t", k->name);
	emit_samples(SCEN, nm, &k->t2, "Mpairs/s");
	/* for a ratio the tail is the low end: the p99 column holds the 1st
	 * percentile */
	snprintf(nm, sizeof(nm), "%s-ratio", k->name);
	emit_row(SCEN, nm, samples_pct(&k->ratio, 50), samples_pct(&k->ratio, 1), "x",
		 (long)k->ratio.n);
	snprintf(nm, sizeof(nm), "%s-cpu-eff", k->name);
	emit_row(SCEN, nm, samples_pct(&k->eff, 50), samples_pct(&k->eff, 1), "x", (long)k->eff.n);
	samples_free(&k->t1);
	samples_free(&k->t2);
	samples_free(&k->ratio);
	samples_free(&k->eff);
}

static struct vr_region *make_region(struct vr_ctx *ctx)
{
	struct vr_region *r;
	VRCHECK(vr_region_new(ctx, "vrbench-scaling", NRANGES * (OBJ + page_size), 0, &r));
	for (size_t i = 0; i < NRANGES; i++)
		VRCHECK(vr_mark(r, i * (OBJ + page_size), OBJ));
	return r;
}

int run_scaling(void)
{
	struct worker vr1[2], vr2[2], vp[2], mx[2], cn[2];
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 2)
		emit_note("scaling: only %d CPU online, two threads share it", ncpu);
	if (ncpu < 1)
		ncpu = 1;
	memset(vr1, 0, sizeof(vr1));
	memset(vr2, 0, sizeof(vr2));
	memset(vp, 0, sizeof(vp));
	memset(mx, 0, sizeof(mx));
	memset(cn, 0, sizeof(cn));

	/* one ctx with two regions; two ctxs with one region each */
	struct vr_ctx *ctx, *ctx_a, *ctx_b;
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx_a));
	VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx_b));
	vr1[0].r = make_region(ctx);
	vr1[1].r = make_region(ctx);
	vr2[0].r = make_region(ctx_a);
	vr2[1].r = make_region(ctx_b);
	vp[0].r = vr2[0].r; /* the same regions, through the pointer calls */
	vp[1].r = vr2[1].r;

	/* floor: a private mutex per thread, each on its own cache line */
	char *ms = aligned_alloc(64, 2 * 128);
	CHECK(ms);
	mx[0].m = (pthread_mutex_t *)ms;
	mx[1].m = (pthread_mutex_t *)(ms + 128);
	pthread_mutex_init(mx[0].m, NULL);
	pthread_mutex_init(mx[1].m, NULL);

	/* madvfree-canary: each thread its own objects, one address space */
	for (int i = 0; i < 2; i++) {
		cn[i].arena = map_anon(CANARY_OBJS * OBJ);
		populate(cn[i].arena, CANARY_OBJS * OBJ);
		cn[i].saved = calloc(CANARY_OBJS * (OBJ / page_size), sizeof(uint64_t));
		CHECK(cn[i].saved);
		for (size_t o = 0; o < CANARY_OBJS; o++)
			canary_unlock(cn[i].arena + o * OBJ, OBJ,
				      cn[i].saved + o * (OBJ / page_size));
	}
	for (int i = 0; i < 2; i++) {
		vr1[i].kind = vr2[i].kind = K_VR;
		vp[i].kind = K_VR_PTR;
		vp[i].seed = 11 + 86 * (uint64_t)i;
		vp[i].cpu = i % ncpu;
		mx[i].kind = K_MUTEX;
		cn[i].kind = K_CANARY;
		vr1[i].seed = vr2[i].seed = mx[i].seed = cn[i].seed = 11 + 86 * (uint64_t)i;
		vr1[i].cpu = vr2[i].cpu = mx[i].cpu = cn[i].cpu = i % ncpu;
	}

	struct kind_run kinds[] = {
		{ .name = "vr-1ctx", .ws = vr1 },    { .name = "vr-2ctx", .ws = vr2 },
		{ .name = "vr-ptr-2ctx", .ws = vp }, { .name = "mutex", .ws = mx },
		{ .name = "canary", .ws = cn },
	};
	size_t nk = sizeof(kinds) / sizeof(kinds[0]), reps = BY_MODE(1, 5, 15);
	/* interleaved, so that load from elsewhere hits every kind alike */
	for (size_t rep = 0; rep < reps; rep++)
		for (size_t k = 0; k < nk; k++)
			measure(&kinds[k]);
	for (size_t k = 0; k < nk; k++)
		report(&kinds[k]);

	vr_ctx_destroy(ctx);
	vr_ctx_destroy(ctx_a);
	vr_ctx_destroy(ctx_b);
	free(ms);
	for (int i = 0; i < 2; i++) {
		munmap(cn[i].arena, CANARY_OBJS * OBJ);
		free(cn[i].saved);
	}
	return 0;
}
