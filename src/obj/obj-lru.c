/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj-lru.c - the objects' share of the ctx LRU: logs of lazy entries, the
 * requeue heap, and purging one unit, as purge sources for purge.c
 *
 * obj.h ("LRU") has the scheme; the rules that keep it exact:
 *   - a unit that is unpinned, unpurged (and, for a page, not held) has at
 *     least one entry, in a log or in the requeue heap, whose age is at
 *     most the unit's age;
 *   - QUEUED is set whenever such an entry may exist; an entry is dropped
 *     only by clearing QUEUED in a compare-and-swap that also sees the
 *     unit pinned, purged or gone (so an unpin that comes later appends);
 *     a QUEUED set without an entry never happens, a second entry for a
 *     unit sometimes does (harmless: it is dropped when it comes up);
 *   - the purger takes an entry only when no source holds an older one,
 *     and purges the unit only when the entry's age is the unit's age.
 * Logs and the heap are only touched by unpins that append (QUEUED was
 * clear), frees that requeue a page, and the purger.
 *
 * Locks: log locks and rq_lock are leaves; the purger (ctx->purge_lock)
 * pops under them and works on the unit without them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/heap.h"
#include "base/inject.h"
#include "obj/obj.h"
#include "base/lock.h"
#include "base/log.h"

static inline bool unit_large(uintptr_t u)
{
	return u & 1;
}
static inline struct vr_obj *unit_obj(uintptr_t u)
{
	return (struct vr_obj *)(u & ~(uintptr_t)1);
}

/* Does the unit still need an entry?  If not, clear QUEUED (in the same
 * compare-and-swap that saw it needs none) and say so. */
static bool entry_needed(uintptr_t u)
{
	if (unit_large(u)) {
		struct vr_obj *o = unit_obj(u);
		uint64_t s = atomic_load(&o->state);
		for (;;) {
			if ((s & OS_LIVE) && !(s & (OS_PINNED | OS_PURGED | OS_PURGING)))
				return true;
			if (s & OS_PURGING)
				return true; /* being freed or restored: decide later */
			if (atomic_compare_exchange_weak(&o->state, &s, s & ~(uint64_t)OS_QUEUED))
				return false;
		}
	}
	struct vr_opage *p = (struct vr_opage *)u;
	uint32_t w = atomic_load(&p->pw);
	for (;;) {
		if (!(w & (PG_COUNT | PG_DISCARDED)))
			return true;
		if (atomic_compare_exchange_weak(&p->pw, &w, w & ~PG_QUEUED))
			return false;
	}
}

/* ---- logs: rings of (unit, age); lg->lock held ---- */
static inline struct lentry *log_at(struct vr_olog *lg, size_t k)
{
	return &lg->buf[(lg->head + k) & (lg->cap - 1)];
}

static void log_publish(struct vr_olog *lg)
{
	atomic_store_explicit(&lg->oldest, lg->len ? log_at(lg, 0)->age : UINT64_MAX,
			      memory_order_relaxed);
}

/* room for one more entry: drop entries no unit needs, grow if still half
 * full (a log holds about one entry per unit, so this is rare) */
static int log_reserve(struct vr_olog *lg)
{
	if (lg->len < lg->cap)
		return 0;
	size_t w = 0;
	for (size_t k = 0; k < lg->len; k++) {
		struct lentry e = *log_at(lg, k);
		if (entry_needed(e.unit))
			*log_at(lg, w++) = e;
	}
	lg->len = w;
	log_publish(lg);
	if (lg->len < lg->cap / 2)
		return 0;
	size_t cap = lg->cap ? 2 * lg->cap : 64;
	struct lentry *b = vr_malloc(cap * sizeof(*b));
	if (!b)
		return lg->len < lg->cap ? 0 : -ENOMEM;
	for (size_t k = 0; k < lg->len; k++)
		b[k] = *log_at(lg, k);
	free(lg->buf);
	lg->buf = b;
	lg->cap = cap;
	lg->head = 0;
	return 0;
}

int vr_obj_lru_append(struct vr_objs *os, uintptr_t unit, uint64_t age)
{
	struct vr_olog *lg = &os->logs[vr_obj_log_index()];
	vr_lock(&lg->lock, VR_RANK_OBJ_LRU);
	int err = log_reserve(lg);
	if (err == 0) {
		*log_at(lg, lg->len++) = (struct lentry){ unit, age };
		if (lg->len == 1)
			log_publish(lg);
	}
	vr_unlock(&lg->lock);
	return err;
}

/* ---- the requeue heap, ordered by age; rq_lock held ---- */
VR_AGE_HEAP(rq, struct lentry)

static void rq_publish(struct vr_objs *os)
{
	atomic_store(&os->rq_oldest, os->rq_len ? os->rq[0].age : UINT64_MAX);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct lentry *x = a, *y = b;
	if (x->unit != y->unit)
		return x->unit < y->unit ? -1 : 1;
	return x->age < y->age ? -1 : x->age > y->age;
}

/* full heap: keep one entry (the oldest) per unit that needs one */
static void rq_compact(struct vr_objs *os)
{
	if (!os->rq_len)
		return;
	qsort(os->rq, os->rq_len, sizeof(*os->rq), cmp_entry);
	size_t w = 0;
	for (size_t k = 0; k < os->rq_len; k++) {
		struct lentry e = os->rq[k];
		if (w > 0 && os->rq[w - 1].unit == e.unit)
			continue; /* a younger duplicate */
		if (entry_needed(e.unit))
			os->rq[w++] = e;
	}
	os->rq_len = w;
	for (size_t i = w / 2; i-- > 0;)
		rq_sift_down(os->rq, w, i);
}

/* room for n entries, outside the purge path (vr_obj_new): a purge never
 * allocates, and the heap never needs more than one entry per unit */
int vr_obj_rq_reserve(struct vr_objs *os, size_t n)
{
	vr_lock(&os->rq_lock, VR_RANK_OBJ_LRU);
	size_t cap = os->rq_cap;
	vr_unlock(&os->rq_lock);
	if (cap >= n)
		return 0;
	cap = cap ? cap : 64;
	while (cap < n)
		cap *= 2;
	struct lentry *b = vr_malloc(cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	vr_lock(&os->rq_lock, VR_RANK_OBJ_LRU);
	if (os->rq_cap < cap) {
		if (os->rq_len)
			memcpy(b, os->rq, os->rq_len * sizeof(*b));
		struct lentry *old = os->rq;
		os->rq = b;
		os->rq_cap = cap;
		b = old;
	}
	vr_unlock(&os->rq_lock);
	free(b);
	return 0;
}

/* allocates nothing: a full heap is compacted (one entry per unit that
 * needs one, and there is room for one per object) */
void vr_obj_rq_push(struct vr_objs *os, uintptr_t unit, uint64_t age)
{
	vr_lock(&os->rq_lock, VR_RANK_OBJ_LRU);
	if (os->rq_len == os->rq_cap)
		rq_compact(os);
	if (os->rq_len < os->rq_cap) {
		size_t i = os->rq_len++;
		os->rq[i] = (struct lentry){ unit, age };
		while (i > 0 && os->rq[(i - 1) / 2].age > os->rq[i].age) {
			struct lentry t = os->rq[i];
			os->rq[i] = os->rq[(i - 1) / 2];
			os->rq[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	} else {
		/* cannot happen with the reserve; if it did: drop QUEUED, so
		 * that the unit's next unpin appends */
		if (unit_large(unit))
			atomic_fetch_and(&unit_obj(unit)->state, ~(uint64_t)OS_QUEUED);
		else
			atomic_fetch_and(&((struct vr_opage *)unit)->pw, ~PG_QUEUED);
	}
	rq_publish(os);
	vr_unlock(&os->rq_lock);
}

/* S21/S22 after a free (class lock held, the caller holds one pin on p):
 * if the page is a unit now, its age is its youngest unpinned object's */
void vr_obj_page_requeue(struct vr_objs *os, struct vr_opage *p)
{
	if ((atomic_load(&p->pw) & PG_COUNT) != 1)
		return; /* another object is pinned: its unpin gives the age */
	struct vr_slab *s = p->slab;
	uint32_t lo, hi;
	vr_slab_page_slots(s, (size_t)(p - s->pages), &lo, &hi);
	uint64_t age = 0;
	bool unpurged = false;
	for (uint32_t i = lo; i <= hi; i++) {
		uint64_t st = atomic_load(&s->objs[i].state);
		if (!(st & OS_LIVE))
			continue;
		if (os_age(st) > age)
			age = os_age(st);
		unpurged |= !(st & OS_PURGED);
	}
	if (!unpurged)
		return; /* no unit */
	age += os->age_base;
	/* something is purgeable again: the limit check may not skip */
	if (atomic_load_explicit(&os->ctx->limit_stuck, memory_order_relaxed))
		atomic_store_explicit(&os->ctx->limit_stuck, false, memory_order_relaxed);
	atomic_store(&p->youngest, age);
	atomic_fetch_or(&p->pw, PG_QUEUED);
	vr_obj_rq_push(os, (uintptr_t)p, age);
}

/* ---- purging one unit (purge_lock held) ---- */
static void gauge_purged(struct vr_objs *os, size_t size)
{
	unsigned log = vr_obj_log_index();
	obj_gauge(os, log, false, -(int64_t)size);
	obj_gauge(os, log, true, (int64_t)size);
	atomic_fetch_add_explicit(&os->ctx->purges, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&os->purges, 1, memory_order_relaxed);
}

/* An entry comes up.  Returns the bytes reclaimed (> 0), 0 (dropped or
 * moved to the requeue heap), or -errno (skipped: keeps its place). */
static int64_t take_large(struct vr_objs *os, struct vr_obj *o, uint64_t age, uint64_t notify)
{
	uint64_t s;
	for (;;) {
		s = atomic_load(&o->state);
		if (!(s & OS_LIVE) || (s & (OS_PINNED | OS_PURGED))) {
			/* no unit: drop the entry, and QUEUED with it */
			if (atomic_compare_exchange_weak(&o->state, &s, s & ~(uint64_t)OS_QUEUED))
				return 0;
			continue;
		}
		if (s & OS_PURGING)
			return 0; /* a free in progress */
		if (s & OS_NOTIFY)
			return -EAGAIN; /* its last purge is not reported yet */
		uint64_t a = os_age(s) + os->age_base;
		if (a > age) { /* unpinned again since: its place is later */
			vr_obj_rq_push(os, (uintptr_t)o | 1, a);
			return 0;
		}
		if (atomic_compare_exchange_weak(&o->state, &s, s | OS_PURGING))
			break;
	}
	/* claimed: the object cannot be freed until the claim is released */
	size_t size = obj_size(o), len = ((size - 1) | (vr_page_size() - 1)) + 1;
	int err = vr_objs_discard(os, o->home, o->ptr, len);
	if (err < 0) {
		atomic_store(&o->state, s);
		return err;
	}
	gauge_purged(os, size);
	atomic_store(&o->state, (s | OS_PURGED | notify) & ~(uint64_t)OS_QUEUED);
	return (int64_t)len;
}

static int64_t take_page(struct vr_objs *os, struct vr_opage *p, uint64_t age, uint64_t notify)
{
	for (;;) {
		/* pw before youngest: an unpin sets youngest before it drops its
		 * pin, so a change between the two loads fails the CAS below */
		uint32_t w = atomic_load(&p->pw);
		if (w & (PG_COUNT | PG_DISCARDED)) { /* pinned or purged: no unit */
			if (atomic_compare_exchange_weak(&p->pw, &w, w & ~PG_QUEUED))
				return 0;
			continue;
		}
		uint64_t y = atomic_load(&p->youngest);
		if (y > age) { /* an object on it was unpinned since */
			vr_obj_rq_push(os, (uintptr_t)p, y);
			return 0;
		}
		if (y < age) { /* emptied, or a free requeued it with an older age */
			if (atomic_compare_exchange_weak(&p->pw, &w, w & ~PG_QUEUED))
				return 0;
			continue;
		}
		if (atomic_compare_exchange_weak(&p->pw, &w, w | PG_PURGING))
			break;
	}
	/* claimed: no object on the page is pinned, allocated or freed now,
	 * so no unpin can change its age either */
	struct vr_slab *s = p->slab;
	size_t pi = (size_t)(p - s->pages);
	uint32_t lo, hi;
	vr_slab_page_slots(s, pi, &lo, &hi);
	bool any = false, unreported = false;
	for (uint32_t i = lo; i <= hi; i++) {
		uint64_t st = atomic_load(&s->objs[i].state);
		bool purgeable = (st & OS_LIVE) && !(st & OS_PURGED);
		any |= purgeable;
		unreported |= purgeable && (st & OS_NOTIFY);
	}
	if (!any) { /* no unit */
		atomic_fetch_and(&p->pw, ~(PG_PURGING | PG_QUEUED));
		return 0;
	}
	if (unreported) { /* an object's last purge is not reported yet */
		atomic_fetch_and(&p->pw, ~PG_PURGING);
		return -EAGAIN;
	}
	int err = vr_objs_discard(os, s->chunk, s->base + (pi << vr_page_shift()), vr_page_size());
	if (err < 0) {
		atomic_fetch_and(&p->pw, ~PG_PURGING);
		return err;
	}
	for (uint32_t i = lo; i <= hi; i++) {
		struct vr_obj *o = &s->objs[i];
		uint64_t st = atomic_load(&o->state);
		if ((st & OS_LIVE) && !(st & OS_PURGED)) {
			atomic_fetch_or(&o->state, OS_PURGED | notify);
			gauge_purged(os, obj_size(o));
		}
	}
	atomic_fetch_or(&p->pw, PG_DISCARDED);
	atomic_fetch_and(&p->pw, ~(PG_PURGING | PG_QUEUED));
	return (int64_t)vr_page_size();
}

/* S37: the objects a purge marks OS_NOTIFY are reported by the purging
 * thread once purge_lock is released (vr_obj_notify); the batch entry
 * holds a reference on the group until then */
static int64_t take(struct vr_objs *os, const struct lentry *e, struct vr_notify_batch *b)
{
	uint64_t notify = atomic_load(&os->purge_fn) && b->n < VR_NOTIFY_BATCH ? OS_NOTIFY : 0;
	int64_t got = unit_large(e->unit)
			      ? take_large(os, unit_obj(e->unit), e->age, notify)
			      : take_page(os, (struct vr_opage *)e->unit, e->age, notify);
	if (got > 0) {
		if (notify) {
			atomic_fetch_add(&os->refs, 1);
			b->e[b->n].unit = e->unit;
			b->e[b->n++].os = os;
		}
		atomic_fetch_add_explicit(&os->reclaimed, (uint64_t)got, memory_order_relaxed);
		atomic_fetch_add_explicit(&os->ctx->reclaimed_bytes, (uint64_t)got,
					  memory_order_relaxed);
		vr_dbg("purged object unit %p: %lld bytes reclaimed", (void *)e->unit,
		       (long long)got);
	} else if (got < 0) {
		/* -EAGAIN: the unit is purged after that report, not twice
		 * before it (exactly once per purge, S37): not counted */
		if (got != -EAGAIN)
			atomic_fetch_add_explicit(&os->ctx->skipped, 1, memory_order_relaxed);
		vr_dbg("object purge skipped: unit %p: %s", (void *)e->unit, strerror((int)-got));
		if (os->nskipped < OBJ_NSKIPPED) {
			os->skipped[os->nskipped++] = *e; /* keeps its place (S8) */
		} else if (unit_large(e->unit)) {         /* waits for its next unpin */
			atomic_fetch_and(&unit_obj(e->unit)->state, ~(uint64_t)OS_QUEUED);
		} else {
			atomic_fetch_and(&((struct vr_opage *)e->unit)->pw, ~PG_QUEUED);
		}
		return 0;
	}
	return got;
}

/* ---- purge sources for purge.c (ctx->purge_lock held) ---- */
uint64_t vr_obj_src_oldest(struct vr_objs *os, size_t i)
{
	return i < OBJ_NLOG ? atomic_load_explicit(&os->logs[i].oldest, memory_order_relaxed)
			    : atomic_load(&os->rq_oldest);
}

uint32_t *vr_obj_src_mask(struct vr_objs *os)
{
	return &os->src_mask;
}

int64_t vr_obj_src_purge(struct vr_objs *os, size_t i, struct vr_notify_batch *b)
{
	struct lentry e;
	if (i < OBJ_NLOG) {
		struct vr_olog *lg = &os->logs[i];
		vr_lock(&lg->lock, VR_RANK_OBJ_LRU);
		if (!lg->len) {
			vr_unlock(&lg->lock);
			return 0;
		}
		e = *log_at(lg, 0);
		lg->head = (lg->head + 1) & (lg->cap - 1);
		lg->len--;
		log_publish(lg);
		vr_unlock(&lg->lock);
	} else {
		vr_lock(&os->rq_lock, VR_RANK_OBJ_LRU);
		if (!os->rq_len) {
			vr_unlock(&os->rq_lock);
			return 0;
		}
		e = os->rq[0];
		os->rq[0] = os->rq[--os->rq_len];
		rq_sift_down(os->rq, os->rq_len, 0);
		rq_publish(os);
		vr_unlock(&os->rq_lock);
	}
	return take(os, &e, b);
}

/* the units skipped by this purge keep their place for the next one */
void vr_obj_purge_done(struct vr_objs *os)
{
	for (size_t k = 0; k < os->nskipped; k++)
		vr_obj_rq_push(os, os->skipped[k].unit, os->skipped[k].age);
	os->nskipped = 0;
}

void vr_obj_lru_fini(struct vr_objs *os, bool inherited)
{
	for (int i = 0; i < OBJ_NLOG; i++) {
		free(os->logs[i].buf);
		if (!inherited)
			pthread_mutex_destroy(&os->logs[i].lock);
	}
	free(os->rq);
	if (!inherited)
		pthread_mutex_destroy(&os->rq_lock);
}
