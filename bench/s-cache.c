/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-cache.c - scenario 6: a cache workload, one style per child process.
 *
 * NOBJ objects of 4 KiB - 1 MiB (log-uniform, page multiples), Zipf(0.9)
 * popularity over a random permutation of the objects.  One op = get an
 * object: if it is not there, regenerate it (write all of it), then read
 * one tagged word per page and check it, then release it.  The budget is
 * about a quarter of all the object bytes; a CRITICAL pressure event
 * arrives every OPS/5 ops.
 *
 * styles
 *   vr-explicit  libvrange, unmark / access / mark, limit = budget
 *   vr-lazy      libvrange, objects stay volatile; reads of purged pages
 *                fault into a vr_fault_fn that unmarks, regenerates and
 *                marks the object again; limit = budget
 *   heap-lru     budgeted LRU of malloc'd buffers, purge = free()
 *   canary       madvfree-canary (no budget: only the kernel reclaims;
 *                a pressure event is simulated with MADV_PAGEOUT on the
 *                arena, which drops the MADV_FREE'd pages as reclaim would)
 *
 * Op latency covers everything an op does, pressure events included; the
 * hit and miss latencies leave the pressure events out.
 *
 * Resident bytes (/proc/self/statm, minus the value before the first op)
 * are sampled over time and sent to the parent with pressure events
 * marked, for doc/cache-workload.svg.  Data that comes back wrong from an
 * object reported intact ends the run with an error.
 */
#include "bench.h"
#include "baselines.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vrange.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

#define SCEN "cache"

enum style { S_VR_EXPLICIT, S_VR_LAZY, S_HEAP_LRU, S_CANARY };

static struct {
	enum style style;
	const char *name;
	size_t nobj, total, budget;
	size_t *off, *len;
	bool *valid;
	/* vr */
	struct vr_ctx *ctx;
	struct vr_region *r;
	/* canary */
	char *arena;
	uint64_t **saved;
	/* heap-lru */
	struct hlru h;
	/* counters; handler_calls is written by the fault handler */
	uint64_t hits, regens, cold;
	volatile uint64_t handler_calls;
} W;

static inline uint64_t tag(size_t id, size_t pg)
{
	return ((uint64_t)id << 32 | pg) ^ 0x5bd1e9955bd1e995ull;
}

static void regenerate(size_t id, char *p)
{
	memset(p, (int)(id & 0xff), W.len[id]);
	for (size_t pg = 0; pg < W.len[id] / page_size; pg++)
		*(uint64_t *)(p + pg * page_size) = tag(id, pg);
}

static void verify(size_t id, const char *p)
{
	for (size_t pg = 0; pg < W.len[id] / page_size; pg++) {
		uint64_t v = *(const volatile uint64_t *)(p + pg * page_size);
		if (v != tag(id, pg))
			die("%s: object %zu page %zu holds %#llx, expected %#llx", W.name, id, pg,
			    (unsigned long long)v, (unsigned long long)tag(id, pg));
	}
}

static size_t id_of_off(size_t off)
{
	size_t lo = 0, hi = W.nobj - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;
		if (W.off[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* vr-lazy: runs in signal context in the faulting thread */
static int lazy_fault(struct vr_region *r, size_t off, size_t len, void *fault_addr, void *arg)
{
	(void)fault_addr;
	(void)arg;
	size_t id = id_of_off(off);
	if (W.off[id] != off || W.len[id] != len)
		return VR_FAULT_SIGBUS; /* not one of our objects: a library bug */
	if (vr_unmark(r, off, len) != VR_PURGED)
		return VR_FAULT_SIGBUS;
	regenerate(id, (char *)vr_region_base(r) + off);
	if (vr_mark(r, off, len) < 0)
		return VR_FAULT_SIGBUS;
	W.handler_calls++;
	return VR_FAULT_RETRY;
}

static void op(size_t id)
{
	switch (W.style) {
	case S_VR_EXPLICIT: {
		char *p = (char *)vr_region_base(W.r) + W.off[id];
		if (!W.valid[id]) {
			regenerate(id, p);
			W.valid[id] = true;
			W.cold++;
		} else if (VRCHECK(vr_unmark(W.r, W.off[id], W.len[id])) == VR_PURGED) {
			regenerate(id, p);
			W.regens++;
		} else {
			W.hits++;
		}
		verify(id, p);
		VRCHECK(vr_mark(W.r, W.off[id], W.len[id]));
		break;
	}
	case S_VR_LAZY: {
		char *p = (char *)vr_region_base(W.r) + W.off[id];
		if (!W.valid[id]) {
			regenerate(id, p);
			W.valid[id] = true;
			W.cold++;
			verify(id, p);
			VRCHECK(vr_mark(W.r, W.off[id], W.len[id]));
			break;
		}
		uint64_t before = W.handler_calls;
		verify(id, p); /* may fault: the handler regenerates */
		if (W.handler_calls != before)
			W.regens++;
		else
			W.hits++;
		break;
	}
	case S_HEAP_LRU: {
		bool purged;
		char *p = hlru_lock(&W.h, id, &purged);
		if (purged) {
			regenerate(id, p);
			if (W.valid[id])
				W.regens++;
			else
				W.cold++;
			W.valid[id] = true;
		} else {
			W.hits++;
		}
		verify(id, p);
		hlru_unlock(&W.h, id);
		break;
	}
	case S_CANARY: {
		char *p = W.arena + W.off[id];
		if (!W.valid[id]) {
			regenerate(id, p);
			W.valid[id] = true;
			W.cold++;
		} else if (!canary_lock(p, W.len[id], W.saved[id])) {
			regenerate(id, p);
			W.regens++;
		} else {
			W.hits++;
		}
		verify(id, p);
		canary_unlock(p, W.len[id], W.saved[id]);
		break;
	}
	}
}

static void pressure(void)
{
	switch (W.style) {
	case S_VR_EXPLICIT:
	case S_VR_LAZY:
		VRCHECK(vr_ctx_notify_pressure(W.ctx, VR_PRESSURE_CRITICAL));
		break;
	case S_HEAP_LRU:
		hlru_purge_all(&W.h);
		break;
	case S_CANARY:
		/* kernels before 5.4 lack MADV_PAGEOUT: dropping every page
		 * (nothing is locked between ops) is what reclaim would do */
		if (madvise(W.arena, W.total, MADV_PAGEOUT) < 0 &&
		    (errno != EINVAL || madvise(W.arena, W.total, MADV_DONTNEED) < 0))
			die("madvise(MADV_PAGEOUT): %s", strerror(errno));
		break;
	}
}

static void setup(void)
{
	uint64_t rng = 0xcafe;
	W.off = calloc(W.nobj, sizeof(size_t));
	W.len = calloc(W.nobj, sizeof(size_t));
	W.valid = calloc(W.nobj, sizeof(bool));
	CHECK(W.off && W.len && W.valid);
	size_t pos = 0, bytes = 0;
	double lo = log(4.0 * KiB), hi = log(1.0 * MiB);
	for (size_t i = 0; i < W.nobj; i++) {
		size_t sz = (size_t)exp(lo + (hi - lo) * rng_unit(&rng));
		sz = (sz + page_size - 1) / page_size * page_size;
		W.off[i] = pos;
		W.len[i] = sz;
		pos += sz + page_size; /* a gap keeps objects separate ranges */
		bytes += sz;
	}
	W.total = pos;
	W.budget = bytes / 4 / page_size * page_size;
	emit_row(SCEN, "objects-MiB", (double)bytes / MiB, NAN, "MiB", (long)W.nobj);
	emit_row(SCEN, "budget-MiB", (double)W.budget / MiB, NAN, "MiB", 0);

	switch (W.style) {
	case S_VR_EXPLICIT:
	case S_VR_LAZY:
		VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &W.ctx));
		VRCHECK(vr_region_new(W.ctx, "vrbench-cache", W.total, 0, &W.r));
		VRCHECK(vr_ctx_set_limit(W.ctx, W.budget));
		if (W.style == S_VR_LAZY)
			VRCHECK(vr_region_set_fault_handler(W.r, lazy_fault, NULL));
		break;
	case S_HEAP_LRU:
		CHECK(hlru_init(&W.h, W.nobj, W.len, W.budget) == 0);
		break;
	case S_CANARY:
		canary_init();
		W.arena = map_anon(W.total);
		W.saved = calloc(W.nobj, sizeof(uint64_t *));
		CHECK(W.saved);
		for (size_t i = 0; i < W.nobj; i++) {
			W.saved[i] = calloc(W.len[i] / page_size, sizeof(uint64_t));
			CHECK(W.saved[i]);
		}
		break;
	}
}

int run_cache(const char *style)
{
	if (!style)
		style = "vr-explicit";
	W.name = style;
	if (strcmp(style, "vr-explicit") == 0)
		W.style = S_VR_EXPLICIT;
	else if (strcmp(style, "vr-lazy") == 0)
		W.style = S_VR_LAZY;
	else if (strcmp(style, "heap-lru") == 0)
		W.style = S_HEAP_LRU;
	else if (strcmp(style, "canary") == 0)
		W.style = S_CANARY;
	else
		die("unknown cache style %s", style);

	W.nobj = BY_MODE(100, 500, 2000);
	size_t nops = BY_MODE(2000, 20000, 200000);
	/* resident samples: every nops/250 ops, and every nops/5000 ops for
	 * nops/50 ops after each pressure event (the recovery, for the zoom) */
	size_t every = nops / 5, sample_every = nops / 250, dense_every = nops / 5000;
	size_t dense_len = nops / 50;
	if (dense_every == 0)
		dense_every = 1;
	setup();

	struct zipf z;
	CHECK(zipf_init(&z, W.nobj, 0.9) == 0);
	size_t *perm = malloc(W.nobj * sizeof(size_t));
	CHECK(perm);
	uint64_t rng = 0xbeef;
	for (size_t i = 0; i < W.nobj; i++)
		perm[i] = i;
	for (size_t i = W.nobj - 1; i > 0; i--) {
		size_t j = rng_below(&rng, i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}

	struct samples lat = { 0 }, hit_lat = { 0 }, miss_lat = { 0 }, res = { 0 };
	uint64_t base = statm_resident_bytes(), peak = 0, busy = 0;
	uint64_t t_start = now_ns();
	for (size_t i = 0; i < nops; i++) {
		bool dense = i > every && i % every <= dense_len && i % dense_every == 0;
		if (i % sample_every == 0 || dense) {
			uint64_t rb = statm_resident_bytes();
			rb = rb > base ? rb - base : 0;
			samples_add(&res, (double)rb / MiB);
			if (rb > peak)
				peak = rb;
			emit_series(W.name, i, (double)(now_ns() - t_start) / 1e9, rb, 0);
		}
		size_t id = perm[zipf_next(&z, &rng)];
		uint64_t hits0 = W.hits;
		uint64_t t0 = now_ns();
		op(id);
		uint64_t t_op = now_ns() - t0;
		if (i > 0 && i % every == 0) {
			pressure();
			uint64_t rb = statm_resident_bytes();
			emit_series(W.name, i, (double)(now_ns() - t_start) / 1e9,
				    rb > base ? rb - base : 0, 1);
		}
		uint64_t dt = now_ns() - t0;
		busy += dt;
		samples_add(&lat, (double)dt / 1000.0);
		samples_add(W.hits != hits0 ? &hit_lat : &miss_lat, (double)t_op / 1000.0);
	}
	uint64_t rb = statm_resident_bytes();
	emit_series(W.name, nops, (double)(now_ns() - t_start) / 1e9, rb > base ? rb - base : 0, 0);

	char nm[48];
#define ROW(suffix, v, unit)                                                                       \
	do {                                                                                       \
		snprintf(nm, sizeof(nm), "%s-%s", W.name, suffix);                                 \
		emit_row(SCEN, nm, v, NAN, unit, (long)nops);                                      \
	} while (0)
	ROW("hit-rate", 100.0 * (double)W.hits / (double)nops, "%");
	ROW("regens", (double)W.regens, "count");
	ROW("cold", (double)W.cold, "count");
	ROW("ops", (double)nops / ((double)busy / 1e9) / 1000.0, "kops/s");
	snprintf(nm, sizeof(nm), "%s-op-latency", W.name);
	emit_samples(SCEN, nm, &lat, "us");
	snprintf(nm, sizeof(nm), "%s-hit-latency", W.name);
	emit_samples(SCEN, nm, &hit_lat, "us");
	snprintf(nm, sizeof(nm), "%s-miss-latency", W.name);
	emit_samples(SCEN, nm, &miss_lat, "us");
	ROW("resident-mean", samples_sum(&res) / (double)res.n, "MiB");
	ROW("resident-peak", (double)peak / MiB, "MiB");
#undef ROW
	CHECK(W.hits + W.regens + W.cold == nops);
	if (W.style == S_VR_EXPLICIT || W.style == S_VR_LAZY) {
		emit_note("%s: %llu purges, %llu faults, %llu pressure events, %llu skipped",
			  W.name, (unsigned long long)vr_ctx_stat(W.ctx, VR_STAT_PURGES),
			  (unsigned long long)vr_ctx_stat(W.ctx, VR_STAT_FAULTS),
			  (unsigned long long)vr_ctx_stat(W.ctx, VR_STAT_PRESSURE_EVENTS),
			  (unsigned long long)vr_ctx_stat(W.ctx, VR_STAT_SKIPPED));
		vr_ctx_destroy(W.ctx);
	}
	samples_free(&lat);
	samples_free(&hit_lat);
	samples_free(&miss_lat);
	samples_free(&res);
	zipf_fini(&z);
	free(perm);
	return 0;
}
