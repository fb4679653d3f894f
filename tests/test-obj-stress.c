/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-obj-stress.c - threads pinning, unpinning, freeing and lazily
 * reading their objects while a purger and the monitor run (suite stress)
 *
 * Each worker owns objects of random sizes (16 bytes to 256 KiB, so small
 * objects of different workers share pages) and a model of each: pinned
 * with data generation g, or unpinned.  It checks
 *   - S9: a pinned object never changes (checked before every unpin);
 *   - S20: VR_INTACT only with every byte as left, VR_PURGED with every
 *     byte 0;
 *   - S24: a lazy read of an unpinned object returns its data, or, when
 *     the page was discarded, runs the object fault handler (which pins
 *     the object and returns VR_FAULT_RETRY) and then reads 0;
 *   - S36: every other object has side-car bytes (its own address and a
 *     tag), which never change, whatever is purged, freed or made (a
 *     free racing a new object of another thread once took or freed the
 *     new object's side-car: TSan and ASan see it here);
 * while a purger calls vr_ctx_purge, notify_pressure and set_limit and
 * the monitor thread runs.  At the end the gauges equal what the workers
 * believe.  A plain program (no cmocka: the fault path needs the
 * library's own SIGSEGV handler); VT_STRESS_SECONDS (default 3) and
 * VT_SEED.
 */
#include "tests.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define NWORKERS 4
#define NOBJ 256

struct mobj {
	struct vr_obj *o;
	size_t size;
	uint64_t gen; /* data generation while pinned; 0 = all zero */
	uint64_t tag; /* in the side-car with the handle, or 0: none */
	bool pinned;
};

struct worker {
	pthread_t tid;
	int id;
	uint64_t seed;
	struct mobj m[NOBJ];
	_Atomic uint64_t ops;
	uint64_t intact, purged, lazy_faults;
};

static struct vr_ctx *ctx;
static _Atomic bool stop;
static _Atomic uint64_t handler_calls;

static int handler(struct vr_obj *o, void *addr, void *arg)
{
	(void)addr;
	CK(arg == &handler_calls);
	atomic_fetch_add(&handler_calls, 1);
	int rc = vr_obj_pin(o);
	CK(rc == VR_PURGED, "pin in handler: %d", rc);
	return VR_FAULT_RETRY;
}

static size_t rand_size(struct vt_rng *r)
{
	unsigned k = 4 + (unsigned)vt_below(r, 15); /* 16 B .. 256 KiB */
	size_t s = ((size_t)1 << k) + vt_below(r, (uint64_t)1 << k);
	return s > 256 * 1024 ? 256 * 1024 : s;
}

/* the sampled bytes: the first and last 64 and every 512th: enough to
 * see a loss, cheap enough for 256 KiB objects */
static bool sampled(size_t i, size_t size)
{
	return i < 64 || i + 64 >= size || i % 512 == 0;
}

static size_t next_sample(size_t i, size_t size)
{
	i++;
	if (sampled(i, size))
		return i;
	size_t n = (i | 511) + 1;
	return n + 64 >= size ? (size > 64 ? size - 64 : i) : n;
}

static void fill(struct mobj *m, uint64_t gen)
{
	uint8_t *p = vr_obj_ptr(m->o);
	m->gen = gen;
	for (size_t i = 0; i < m->size; i = next_sample(i, m->size))
		p[i] = vt_pat(gen, i);
}

static bool intact(const struct mobj *m)
{
	const uint8_t *p = vr_obj_ptr(m->o);
	for (size_t i = 0; i < m->size; i = next_sample(i, m->size))
		if (p[i] != (m->gen ? vt_pat(m->gen, i) : 0))
			return false;
	return true;
}

/* the side-car holds the handle and the tag it was given */
static void check_extra(const struct mobj *m)
{
	if (!m->tag)
		return;
	const uint64_t *x = vr_obj_extra(m->o);
	CK(x && x[0] == (uint64_t)(uintptr_t)m->o && x[1] == m->tag,
	   "side-car lost or changed: size %zu x %p x0 %llx o %p x1 %llx tag %llx", m->size,
	   (void *)x, x ? (unsigned long long)x[0] : 0ull, (void *)m->o,
	   x ? (unsigned long long)x[1] : 0ull, (unsigned long long)m->tag);
}

static void new_obj(struct worker *w, struct mobj *m, struct vt_rng *r)
{
	m->size = rand_size(r);
	m->tag = vt_below(r, 2) ? vt_next(r) | 1 : 0;
	CK_EQ(vr_obj_new_in(vr_ctx_group(ctx), m->size, m->tag ? 16 : 0, 0, &m->o), 0);
	if (m->tag) {
		uint64_t *x = vr_obj_extra(m->o);
		CK(x && x[0] == 0 && x[1] == 0, "new side-car not zero: size %zu x %p %llx %llx",
		   m->size, (void *)x, x ? (unsigned long long)x[0] : 0ull,
		   x ? (unsigned long long)x[1] : 0ull);
		x[0] = (uint64_t)(uintptr_t)m->o;
		x[1] = m->tag;
	}
	m->pinned = true;
	m->gen = 0;
	CK(vt_all_zero(vr_obj_ptr(m->o), m->size), "new object not zero");
	fill(m, vt_next(r) | 1);
	(void)w;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct vt_rng r;
	vt_seed(&r, w->seed);
	for (int i = 0; i < NOBJ; i++)
		new_obj(w, &w->m[i], &r);
	while (!atomic_load(&stop)) {
		struct mobj *m = &w->m[vt_below(&r, NOBJ)];
		unsigned op = (unsigned)vt_below(&r, 100);
		if (op < 40) {
			if (m->pinned) { /* S9: untouched while pinned */
				CK(intact(m), "pinned object changed (worker %d)", w->id);
				CK_EQ(vr_obj_unpin(m->o), 0);
				m->pinned = false;
			} else {
				int rc = vr_obj_pin(m->o);
				CK(rc == VR_INTACT || rc == VR_PURGED, "pin: %d", rc);
				if (rc == VR_INTACT) {
					CK(intact(m), "VR_INTACT with lost bytes (worker %d)",
					   w->id);
					w->intact++;
				} else {
					m->gen = 0;
					CK(intact(m), "VR_PURGED but not zero (worker %d)", w->id);
					w->purged++;
				}
				m->pinned = true;
				fill(m, vt_next(&r) | 1);
			}
		} else if (op < 70) {
			/* lazy read of one byte, pinned or not */
			size_t i = vt_below(&r, m->size);
			uint8_t v = ((volatile uint8_t *)vr_obj_ptr(m->o))[i];
			uint8_t want = m->gen ? vt_pat(m->gen, i) : 0;
			if (!m->pinned && vr_obj_status(m->o) == 0) {
				/* the handler ran: pinned, every byte 0 */
				CK_EQ(v, 0);
				m->pinned = true;
				m->gen = 0;
				w->lazy_faults++;
				CK(intact(m), "lazy refault left data");
				fill(m, vt_next(&r) | 1);
			} else if (sampled(i, m->size) && v != want) {
				/* a purged object on a page another object's pin
				 * restored reads 0 without a fault (doc/design.md) */
				CK(!m->pinned && v == 0 && (vr_obj_status(m->o) & VR_STATE_PURGED),
				   "lazy read: %u != %u (worker %d) pinned %d status %d size %zu i "
				   "%zu",
				   v, want, w->id, m->pinned, vr_obj_status(m->o), m->size, i);
			}
		} else if (op < 80) {
			check_extra(m);
			int s = vr_obj_status(m->o);
			CK(m->pinned ? s == 0 : (s & VR_STATE_VOLATILE), "status %d", s);
		} else if (op < 90) {
			if (m->pinned)
				CK(intact(m), "pinned object changed before free");
			check_extra(m);
			vr_obj_free(m->o);
			new_obj(w, m, &r);
		} else {
			CK(vr_obj_of((uint8_t *)vr_obj_ptr(m->o) + vt_below(&r, m->size)) == m->o,
			   "vr_obj_of");
		}
		atomic_fetch_add_explicit(&w->ops, 1, memory_order_relaxed);
	}
	return NULL;
}

static void *purger_main(void *arg)
{
	struct vt_rng r;
	vt_seed(&r, *(uint64_t *)arg);
	while (!atomic_load(&stop)) {
		unsigned op = (unsigned)vt_below(&r, 100);
		if (op < 60)
			CK(vr_ctx_purge(ctx, vt_below(&r, 1 << 20)) >= 0);
		else if (op < 70)
			CK(vr_ctx_notify_pressure(ctx, VR_PRESSURE_MODERATE) >= 0);
		else if (op < 75)
			CK(vr_ctx_notify_pressure(ctx, VR_PRESSURE_CRITICAL) >= 0);
		else if (op < 90)
			CK_EQ(vr_ctx_set_limit(ctx, vt_below(&r, 4) ? 0 : vt_below(&r, 8 << 20)),
			      0);
		else
			(void)vr_ctx_stat(ctx, VR_STAT_FOOTPRINT);
		usleep((useconds_t)vt_below(&r, 300));
	}
	return NULL;
}

int main(void)
{
	const char *e = getenv("VT_STRESS_SECONDS");
	unsigned secs = e ? (unsigned)atoi(e) : 3;
	uint64_t seed = vt_get_seed("obj_stress");
	alarm(secs + 60);
	CK_EQ(vr_ctx_new(0, &ctx), 0); /* with the monitor */
	CK_EQ(vr_ctx_set_obj_fault_handler(ctx, handler, &handler_calls), 0);
	struct worker *w = calloc(NWORKERS, sizeof(*w));
	for (int i = 0; i < NWORKERS; i++) {
		w[i].id = i;
		w[i].seed = seed + (uint64_t)i + 1;
		CK_EQ(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
	}
	pthread_t pt;
	CK_EQ(pthread_create(&pt, NULL, purger_main, &seed), 0);
	/* watchdog: no worker may go 10 s without progress (sanitizers are
	 * slow; a hang is what this is for) */
	uint64_t last[NWORKERS] = { 0 };
	unsigned idle[NWORKERS] = { 0 };
	for (unsigned t = 0; t < secs; t++) {
		sleep(1);
		for (int i = 0; i < NWORKERS; i++) {
			uint64_t n = atomic_load(&w[i].ops);
			idle[i] = n > last[i] ? 0 : idle[i] + 1;
			CK(idle[i] < 10, "worker %d made no progress for 10 s", i);
			last[i] = n;
		}
	}
	atomic_store(&stop, true);
	pthread_join(pt, NULL);
	uint64_t vol = 0, total = 0, intact_n = 0, purged_n = 0, lazy = 0;
	for (int i = 0; i < NWORKERS; i++) {
		pthread_join(w[i].tid, NULL);
		total += atomic_load(&w[i].ops);
		intact_n += w[i].intact;
		purged_n += w[i].purged;
		lazy += w[i].lazy_faults;
		for (int k = 0; k < NOBJ; k++)
			if (!w[i].m[k].pinned)
				vol += w[i].m[k].size;
	}
	/* gauges: every unpinned object's bytes are volatile or purged */
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) + vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES),
	      vol);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_OBJECTS), NWORKERS * NOBJ);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_RANGES), 0);
	fprintf(stderr,
		"obj-stress: %" PRIu64 " ops, pins %" PRIu64 " intact / %" PRIu64
		" purged, %" PRIu64 " lazy faults, %" PRIu64 " handler calls\n",
		total, intact_n, purged_n, lazy, atomic_load(&handler_calls));
	/* pin everything: then nothing may be purged any more */
	for (int i = 0; i < NWORKERS; i++)
		for (int k = 0; k < NOBJ; k++) {
			struct mobj *m = &w[i].m[k];
			if (!m->pinned) {
				int rc = vr_obj_pin(m->o);
				if (rc == VR_PURGED)
					m->gen = 0;
				CK(intact(m), "final pin");
			}
		}
	CK_EQ(vr_ctx_purge(ctx, SIZE_MAX), 0);
	CK_EQ(vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES) + vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES), 0);
	vr_ctx_destroy(ctx);
	free(w);
	return 0;
}
