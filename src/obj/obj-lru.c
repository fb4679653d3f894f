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
/* the slab of page p and the slots overlapping it: [*lo, *hi] */
static inline struct vr_slab *page_slots(const struct vr_opage *p, uint32_t *lo, uint32_t *hi)
{
	struct vr_slab *s = p->slab;
	vr_slab_page_slots(s, (size_t)(p - s->pages), lo, hi);
	return s;
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
	/* a signal handler's vr_obj_new that interrupted this thread while it
	 * held the heap (a purge, an unpin's requeue, another vr_obj_new)
	 * would wait for itself for ever */
	if (vr_held(&os->rq_lock))
		return -EDEADLK;
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

void vr_obj_pages_requeue(struct vr_objs *os, struct vr_opage *p, unsigned n)
{
	struct vr_class *cl = p->slab->cls;
	vr_lock(&cl->lock, VR_RANK_OBJ_CLASS);
	for (unsigned i = 0; i < n; i++)
		vr_obj_page_requeue(os, &p[i]);
	vr_unlock(&cl->lock);
	for (unsigned i = 0; i < n; i++)
		vr_opage_drop_requeued(os, &p[i]);
}

/* S21/S22 after a free (class lock held, the caller holds one pin on p):
 * if the page is a unit now, its age is its youngest unpinned object's */
void vr_obj_page_requeue(struct vr_objs *os, struct vr_opage *p)
{
	if ((atomic_load(&p->pw) & PG_COUNT) != 1)
		return; /* another object is pinned: its unpin gives the age */
	uint32_t lo, hi;
	struct vr_slab *s = page_slots(p, &lo, &hi);
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
	vr_ctx_unstick(os->ctx); /* something is purgeable again */
	atomic_store(&p->youngest, age);
	atomic_fetch_or(&p->pw, PG_QUEUED);
	vr_obj_rq_push(os, (uintptr_t)p, age);
}

/* The pin held across a requeue goes as an unpin's does: in one step
 * with QUEUED.  A purge that popped the requeued entry while the pin was
 * held dropped it and cleared QUEUED (take_page: "pinned, no unit"),
 * which is right for a pin whose unpin appends again, not for this one:
 * the page then kept unpinned objects and no entry, and no purge took
 * it again.  So the last pin's drop gives a page whose QUEUED is clear an
 * entry again (at worst a stale one, which a purge drops) */
void vr_opage_drop_requeued(struct vr_objs *os, struct vr_opage *p)
{
	uint32_t w = atomic_load(&p->pw);
	bool last;
	do
		last = (w & PG_COUNT) == 1;
	while (!atomic_compare_exchange_weak(&p->pw, &w, (w - 1) | (last ? PG_QUEUED : 0)));
	if (last && !(w & PG_QUEUED)) {
		vr_ctx_unstick(os->ctx); /* that purge may have found nothing */
		vr_obj_rq_push(os, (uintptr_t)p, atomic_load(&p->youngest));
	}
}

/* ---- purging units (purge_lock held) ----
 * BATCHED DISCARD.  A unit the purger takes is claimed (OS_PURGING on a
 * large object, PG_PURGING on a page) and joins os->pend; the batch's
 * pages are discarded with ONE vr_objs_discard (trap armed over the whole
 * span, then one punch: purge.c's order) while the units claimed follow
 * each other in one chunk: N adjacent objects cost one trap call and one
 * fallocate instead of N of each.  The rules:
 *   - the span is exactly the pages of the claimed units: a unit that does
 *     not extend it (another chunk, a gap, OBJ_BATCH units or
 *     OBJ_BATCH_BYTES bytes reached) discards the batch before it joins a
 *     new one, so no byte of an unclaimed object is trapped or punched;
 *   - a claimed unit cannot be pinned, freed or allocated on (those wait
 *     for the claim), so what the take read at the claim still holds when
 *     the batch is discarded;
 *   - the gauges move to purged at the claim, so purge.c's goal checks see
 *     a batched unit as purged and a purge takes no more units than it
 *     needs (S8, S10); PURGED (with OS_NOTIFY), the cumulative counters and
 *     the claim's release follow the discard.  If the discard fails, every
 *     unit of the batch is given back unpurged (gauges and notification
 *     entries undone) and skipped (S8: it keeps its data and place);
 *   - purge.c discards every batch of a level before the run stops, before
 *     it steps a region (no claim is held while a region lock is taken)
 *     and at the end of the level (vr_obj_src_flush): no claim outlives
 *     the purge run. */
static void gauge_move(struct vr_objs *os, size_t size, bool to_purged)
{
	unsigned log = vr_obj_log_index();
	int64_t d = to_purged ? (int64_t)size : -(int64_t)size;
	obj_gauge(os, log, false, -d);
	obj_gauge(os, log, true, d);
}

static void count_purge(struct vr_objs *os)
{
	atomic_fetch_add_explicit(&os->ctx->purges, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&os->purges, 1, memory_order_relaxed);
}

/* the objects of a claimed page that its purge takes: live, unpurged,
 * not taken by another page of the batch (OS_PURGING on a small object:
 * an object that straddles two pages is taken by the first) */
static inline bool page_takes(uint64_t st)
{
	return (st & (OS_LIVE | OS_PURGED | OS_PURGING)) == OS_LIVE;
}

/* a claimed unit's gauges move to purged; a page's objects are marked
 * taken (OS_PURGING) */
static void unit_take(struct vr_objs *os, uintptr_t u)
{
	if (unit_large(u)) {
		gauge_move(os, obj_size(unit_obj(u)), true);
		return;
	}
	struct vr_opage *p = (struct vr_opage *)u;
	uint32_t lo, hi;
	struct vr_slab *s = page_slots(p, &lo, &hi);
	for (uint32_t i = lo; i <= hi; i++) {
		if (page_takes(atomic_load(&s->objs[i].state))) {
			atomic_fetch_or(&s->objs[i].state, OS_PURGING);
			gauge_move(os, obj_size(&s->objs[i]), true);
		}
	}
}

/* a unit that cannot be purged now keeps its place (S8) */
static void skip(struct vr_objs *os, const struct lentry *e, int err)
{
	/* -EAGAIN: the unit is purged after that report, not twice before
	 * it (exactly once per purge, S37): not counted; the reporter gives
	 * it an entry back when the handler call returns (obj-group.c), so
	 * it is not lost when it does not fit in skipped[] */
	if (err != -EAGAIN)
		atomic_fetch_add_explicit(&os->ctx->skipped, 1, memory_order_relaxed);
	vr_dbg("object purge skipped: unit %p: %s", (void *)e->unit, strerror(-err));
	if (os->nskipped < OBJ_NSKIPPED) {
		os->skipped[os->nskipped++] = *e;
	} else if (unit_large(e->unit)) { /* waits for its next unpin */
		atomic_fetch_and(&unit_obj(e->unit)->state, ~(uint64_t)OS_QUEUED);
	} else {
		atomic_fetch_and(&((struct vr_opage *)e->unit)->pw, ~PG_QUEUED);
	}
}

/* unit k of the batch was discarded: purged, claim released */
static void unit_purged(struct vr_objs *os, size_t k, bool stuck)
{
	struct vr_opend *pd = &os->pend;
	uintptr_t u = pd->u[k].e.unit;
	uint64_t notify = pd->u[k].notify;
	size_t len = vr_page_size();
	if (unit_large(u)) {
		struct vr_obj *o = unit_obj(u);
		len = ((obj_size(o) - 1) | (vr_page_size() - 1)) + 1;
		count_purge(os);
		atomic_store(&o->state, (pd->u[k].s | OS_PURGED | notify) & ~(uint64_t)OS_QUEUED);
	} else {
		struct vr_opage *p = (struct vr_opage *)u;
		uint32_t lo, hi;
		struct vr_slab *s = page_slots(p, &lo, &hi);
		for (uint32_t i = lo; i <= hi; i++) {
			if (atomic_load(&s->objs[i].state) & OS_PURGING) { /* taken by this page */
				atomic_fetch_or(&s->objs[i].state, OS_PURGED | notify);
				atomic_fetch_and(&s->objs[i].state, ~(uint64_t)OS_PURGING);
				count_purge(os);
			}
		}
		atomic_fetch_or(&p->pw, PG_DISCARDED);
		atomic_fetch_and(&p->pw, ~(PG_PURGING | PG_QUEUED));
	}
	if (stuck) /* trapped with its data: purged, nothing reclaimed */
		len = 0;
	atomic_fetch_add_explicit(&os->reclaimed, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&os->ctx->reclaimed_bytes, len, memory_order_relaxed);
	vr_dbg("purged object unit %p: %zu bytes reclaimed", (void *)u, len);
}

/* unit k of the batch was not discarded: gauges and its notification
 * entry undone, claim released, skipped */
static void unit_giveback(struct vr_objs *os, size_t k, struct vr_notify_batch *b, int err)
{
	struct vr_opend *pd = &os->pend;
	uintptr_t u = pd->u[k].e.unit;
	if (unit_large(u)) {
		gauge_move(os, obj_size(unit_obj(u)), false);
		atomic_store(&unit_obj(u)->state, pd->u[k].s);
	} else {
		struct vr_opage *p = (struct vr_opage *)u;
		uint32_t lo, hi;
		struct vr_slab *s = page_slots(p, &lo, &hi);
		for (uint32_t i = lo; i <= hi; i++) {
			if (atomic_load(&s->objs[i].state) & OS_PURGING) {
				gauge_move(os, obj_size(&s->objs[i]), false);
				atomic_fetch_and(&s->objs[i].state, ~(uint64_t)OS_PURGING);
			}
		}
		atomic_fetch_and(&p->pw, ~PG_PURGING);
	}
	for (size_t j = 0; pd->u[k].notify && j < b->n; j++) {
		if (b->e[j].unit == u && b->e[j].os == os) {
			memmove(&b->e[j], &b->e[j + 1], (b->n - j - 1) * sizeof(b->e[0]));
			b->n--;
			atomic_fetch_sub(&os->refs, 1); /* c->groups holds another */
			break;
		}
	}
	skip(os, &pd->u[k].e, err);
}

/* discard the batch (one trap call, one punch); the bytes given back
 * when that failed (its takes counted them reclaimed), else 0 */
static int64_t pend_flush(struct vr_objs *os, struct vr_notify_batch *b)
{
	struct vr_opend *pd = &os->pend;
	if (!pd->n)
		return 0;
	int err = vr_objs_discard(os, pd->ch, pd->p, pd->len);
	if (err == OBJ_DISCARD_STUCK) {
		atomic_fetch_add_explicit(&os->ctx->skipped, 1, memory_order_relaxed);
		vr_dbg("object purge left trapped, not punched: %zu bytes", pd->len);
	}
	for (size_t k = 0; k < pd->n; k++) {
		if (err >= 0)
			unit_purged(os, k, err == OBJ_DISCARD_STUCK);
		else
			unit_giveback(os, k, b, err);
	}
	int64_t undone = err != 0 ? (int64_t)pd->len : 0;
	pd->n = 0;
	pd->len = 0;
	return undone;
}

/* does [p, p + len) of chunk ch extend the batch? */
static bool pend_fits(const struct vr_objs *os, const struct vr_chunk *ch, const uint8_t *p,
		      size_t len)
{
	const struct vr_opend *pd = &os->pend;
	return !pd->n || (pd->ch == ch && pd->p + pd->len == p && pd->n < OBJ_BATCH &&
			  pd->len + len <= OBJ_BATCH_BYTES);
}

/* a unit just claimed joins the batch, which it extends (pend_fits); s:
 * a large object's state before its claim */
static void pend_push(struct vr_objs *os, const struct lentry *e, struct vr_chunk *ch, uint8_t *p,
		      size_t len, uint64_t s, uint64_t notify)
{
	struct vr_opend *pd = &os->pend;
	if (!pd->n) {
		pd->ch = ch;
		pd->p = p;
	}
	pd->len += len;
	pd->u[pd->n].e = *e;
	pd->u[pd->n].s = s;
	pd->u[pd->n++].notify = notify;
	unit_take(os, e->unit);
}

/* An entry comes up.  1: the unit is claimed (*ch, *p, *len: its pages;
 * *s: its state before the claim), 0: dropped or moved to the requeue
 * heap, -errno: skipped (keeps its place). */
static int take_large(struct vr_objs *os, struct vr_obj *o, uint64_t age, uint64_t *s)
{
	for (;;) {
		*s = atomic_load(&o->state);
		if (!(*s & OS_LIVE) || (*s & (OS_PINNED | OS_PURGED))) {
			/* no unit: drop the entry, and QUEUED with it */
			if (atomic_compare_exchange_weak(&o->state, s, *s & ~(uint64_t)OS_QUEUED))
				return 0;
			continue;
		}
		if (*s & OS_PURGING)
			return 0; /* a free in progress */
		if (*s & (OS_NOTIFY | OS_REPORTING))
			return -EAGAIN; /* its last purge is not reported yet */
		uint64_t a = os_age(*s) + os->age_base;
		if (a > age) { /* unpinned again since: its place is later */
			vr_obj_rq_push(os, (uintptr_t)o | 1, a);
			return 0;
		}
		if (atomic_compare_exchange_weak(&o->state, s, *s | OS_PURGING))
			return 1; /* claimed: it cannot be freed until released */
	}
}

static int take_page(struct vr_objs *os, struct vr_opage *p, uint64_t age)
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
			return 1;
	}
}

/* a page take_page claimed, the batch discarded if the page does not
 * extend it (an object straddling from a page of that batch is PURGED
 * or taken now, not counted twice): 1 if it is a unit, 0 if not (claim
 * released), -EAGAIN (claim released) */
static int page_scan(struct vr_opage *p)
{
	/* claimed: no object on the page is pinned, allocated or freed now,
	 * so no unpin can change its age either */
	uint32_t lo, hi;
	struct vr_slab *s = page_slots(p, &lo, &hi);
	bool any = false, unreported = false;
	for (uint32_t i = lo; i <= hi; i++) {
		uint64_t st = atomic_load(&s->objs[i].state);
		any |= page_takes(st);
		unreported |= page_takes(st) && (st & (OS_NOTIFY | OS_REPORTING));
		/* also a slot freed before its report (obj-alloc.c
		 * handle_freed): its batch, not this run, reports the page */
		unreported |= (st & (OS_LIVE | OS_NOTIFY)) == OS_NOTIFY;
	}
	if (!any) { /* no unit */
		atomic_fetch_and(&p->pw, ~(PG_PURGING | PG_QUEUED));
		return 0;
	}
	if (unreported) { /* an object's last purge is not reported yet */
		atomic_fetch_and(&p->pw, ~PG_PURGING);
		return -EAGAIN;
	}
	return 1;
}

/* S37: the objects a purge marks OS_NOTIFY are reported by the purging
 * thread once purge_lock is released (vr_obj_notify); the batch entry
 * holds a reference on the group until then.  The change of the bytes
 * reclaimed: the unit's pages, less what a discarded batch gave back. */
static int64_t take(struct vr_objs *os, const struct lentry *e, struct vr_notify_batch *b)
{
	uint64_t notify = vr_cb_slot_any(&os->purge) && b->n < VR_NOTIFY_BATCH ? OS_NOTIFY : 0;
	uint64_t s = 0;
	int64_t undone = 0;
	size_t len = vr_page_size();
	struct vr_chunk *ch = NULL;
	uint8_t *p = NULL;
	int r;
	if (unit_large(e->unit)) {
		struct vr_obj *o = unit_obj(e->unit);
		r = take_large(os, o, e->age, &s);
		/* the handle's fields only once this purge owns the object: a
		 * stale entry's handle may be under reallocation (vr_objs_alloc
		 * writes home and ptr under span_lock, not purge_lock) */
		if (r > 0) {
			ch = o->home;
			p = o->ptr;
			len = ((obj_size(o) - 1) | (vr_page_size() - 1)) + 1;
		}
	} else {
		struct vr_opage *pg = (struct vr_opage *)e->unit;
		r = take_page(os, pg, e->age);
		ch = pg->slab->chunk;
		p = pg->slab->base + ((size_t)(pg - pg->slab->pages) << vr_page_shift());
	}
	if (r > 0 && !pend_fits(os, ch, p, len))
		undone = pend_flush(os, b);
	if (r > 0 && !unit_large(e->unit))
		r = page_scan((struct vr_opage *)e->unit);
	if (r < 0)
		skip(os, e, r);
	if (r <= 0)
		return -undone;
	pend_push(os, e, ch, p, len, s, notify);
	if (notify) {
		atomic_fetch_add(&os->refs, 1);
		b->e[b->n].unit = e->unit;
		b->e[b->n++].os = os;
	}
	return (int64_t)len - undone;
}

/* ---- purge sources for purge.c (ctx->purge_lock held) ---- */
uint64_t vr_obj_src_oldest(struct vr_objs *os, size_t i)
{
	return i < OBJ_NLOG ? atomic_load_explicit(&os->logs[i].oldest, memory_order_relaxed)
			    : atomic_load(&os->rq_oldest);
}

/* any entry in a log or the requeue heap, read under their locks: an
 * unpin that appends after this returned takes a lock this released */
bool vr_obj_src_pending(struct vr_objs *os)
{
	bool any = false;
	for (size_t i = 0; i < OBJ_NLOG && !any; i++) {
		struct vr_olog *lg = &os->logs[i];
		vr_lock(&lg->lock, VR_RANK_OBJ_LRU);
		any = lg->len != 0;
		vr_unlock(&lg->lock);
	}
	if (!any) {
		vr_lock(&os->rq_lock, VR_RANK_OBJ_LRU);
		any = os->rq_len != 0;
		vr_unlock(&os->rq_lock);
	}
	return any;
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

void vr_objs_trap_calls(struct vr_objs *os, uint64_t *discards, uint64_t *restores)
{
	*discards = atomic_load_explicit(&os->ndiscard, memory_order_relaxed);
	*restores = atomic_load_explicit(&os->nrestore, memory_order_relaxed);
}

int64_t vr_obj_src_flush(struct vr_objs *os, struct vr_notify_batch *b)
{
	return pend_flush(os, b);
}

/* the units skipped by this purge keep their place for the next one
 * (purge.c discarded the batch before: vr_obj_src_flush) */
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
