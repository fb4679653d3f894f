/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.c - regions (a memfd mapping, or anonymous memory: mem-kind.h;
 * created and closed in region-life.c)
 * and the volatility calls on them; ctx.c registers and links them and
 * enforces the limit after vr_region_mark
 *
 * vr_mark / vr_unmark / vr_status run under the region lock and make no
 * system call unless a purged range is involved (S16).  Whatever touches
 * a region's protections or punches its holes goes through mem-pages.c
 * (vr_discard_pages / vr_restore_pages).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vrange.h"
#include "base/lock.h"
#include "base/sys.h"
#include "base/age.h"
#include "base/log.h"
#include "base/callback.h"
#include "base/registry.h"
#include "region/region.h"
#include "ctx.h"
#include "mem/mem-shared.h"

/* the region lock doubles as the writer side of the fault path's seqlock
 * (see SEQLOCK in mem/mem.h): seq is odd from lock to unlock */
void vr_region_lock(struct vr_region *r)
{
	if (r->shm) {
		vr_shared_lock(r, false);
		return;
	}
	vr_lock(&r->lock, VR_RANK_REGION);
	atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

void vr_region_unlock(struct vr_region *r)
{
	if (r->shm) {
		vr_shared_unlock(r, false);
		return;
	}
	atomic_store_explicit(&r->seq, atomic_load_explicit(&r->seq, memory_order_relaxed) + 1,
			      memory_order_release);
	vr_unlock(&r->lock);
}

/* the lock without the seqlock's writer side: for readers (the fault
 * path's fallback) */
void vr_region_lock_raw(struct vr_region *r)
{
	if (r->shm)
		vr_shared_lock(r, true);
	else
		vr_lock(&r->lock, VR_RANK_REGION);
}

void vr_region_unlock_raw(struct vr_region *r)
{
	if (r->shm)
		vr_shared_unlock(r, true);
	else
		vr_unlock(&r->lock);
}

void vr_region_publish_oldest(struct vr_region *r)
{
	uint64_t age = vr_lru_oldest_age(r->map);
	if (r->shm)
		atomic_store_explicit(&r->shm->oldest_age, age, memory_order_relaxed);
	else
		atomic_store_explicit(&r->oldest_age, age, memory_order_relaxed);
}

uint64_t vr_region_oldest(const struct vr_region *r)
{
	return atomic_load_explicit(r->shm ? &r->shm->oldest_age : &r->oldest_age,
				    memory_order_relaxed);
}

/* ---- gauges ----
 * A region's share (nranges, volatile_bytes, purged_bytes) is added to
 * its ctx's shard as it changes.  A shared region changes the file's
 * gauges in its state instead; vr_shared_sync() moves the difference to
 * the ctx at every unlock (and vr_ctx_stat syncs first), so a ctx counts
 * what other processes did to the file too (S29). */
/* a range's LRU age: above every stamp of this region (or, for a shared
 * file, of the file: in its state, under its lock; always the clock so
 * ages of different processes compare, S29).  Region lock held. */
static inline uint64_t region_age(struct vr_region *r)
{
	if (r->shm)
		return vr_age_after_clock(&r->shm->last_age);
	return vr_age_after(&r->last_age);
}

static void gauge_add(struct vr_region *r, const struct vr_range *rg, int sign)
{
	struct vr_shard *sh = r->shard;
	uint64_t len = rg->end - rg->start;
	bool purged = vr_range_purged(rg);
	/* unsigned wrap-around: adding -len subtracts len */
	uint64_t d = sign > 0 ? len : -len, one = sign > 0 ? 1 : (uint64_t)-1;
	if (r->shm) {
		struct vr_shm *m = r->shm;
		atomic_fetch_add_explicit(purged ? &m->purged_bytes : &m->volatile_bytes, d,
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&m->nranges, one, memory_order_relaxed);
		return;
	}
	*(purged ? &r->purged_bytes : &r->volatile_bytes) += d;
	r->nranges += one;
	atomic_fetch_add_explicit(purged ? &sh->purged_bytes : &sh->volatile_bytes, d,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&sh->ranges, one, memory_order_relaxed);
}

void vr_region_account_purge(struct vr_region *r, uint64_t len)
{
	if (r->shm) {
		atomic_fetch_sub_explicit(&r->shm->volatile_bytes, len, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->shm->purged_bytes, len, memory_order_relaxed);
		return;
	}
	r->volatile_bytes -= len;
	r->purged_bytes += len;
	atomic_fetch_sub_explicit(&r->shard->volatile_bytes, len, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->shard->purged_bytes, len, memory_order_relaxed);
}

/* a new, youngest range enters the tree (and the LRU if it can be purged) */
static void range_link(struct vr_region *r, struct vr_range *rg)
{
	vr_map_insert(r->map, rg);
	rg->age_flags &= ~(uint64_t)VR_RANGE_PENDING;
	gauge_add(r, rg, +1);
	if (!vr_range_purged(rg) &&
	    vr_whole_pages(rg->start, rg->end, r->map->page_shift, NULL, NULL)) {
		vr_lru_append(r->map, rg);
		r->lru_added = true;
	}
}

/* a range leaves the tree, the LRU and the gauges and is freed; link is
 * where it hangs in the tree if the caller knows (saves a descent) */
static void range_drop(struct vr_region *r, struct vr_range *rg, vr_ref *link)
{
	if (vr_range_on_lru(rg))
		vr_lru_remove(r->map, rg);
	if (link)
		vr_map_erase_at(r->map, link);
	else
		vr_map_erase(r->map, rg);
	gauge_add(r, rg, -1);
	vr_map_free(r->map, rg);
}

/* S31: would the map hold more than its capacity after adding add ranges
 * and dropping drop?  (Only a shared state has one.) */
static bool over_cap(const struct vr_map *m, uint64_t add, uint64_t drop)
{
	uint64_t cap = vr_map_capacity(m);
	return cap && m->nranges + add > cap + drop;
}

/* what a failed vr_map_alloc means: a shared state's storage is fixed */
static int alloc_err(const struct vr_region *r)
{
	return r->shm ? -ENOSPC : -ENOMEM;
}

/* ---- argument checks ---- */
static int check_live(const struct vr_region *r)
{
	if (!r || vr_inherited_region(r))
		return -EINVAL;
	return 0;
}

static int check_span(const struct vr_region *r, size_t off, size_t len)
{
	if (check_live(r) < 0 || len == 0 || off > r->size || len > r->size - off)
		return -EINVAL;
	return 0;
}

/* ---- mark ---- */

/* S4: discard the whole pages of [s, e) that are not whole pages of a
 * purged range already in the map (those are discarded).  Called with the
 * lock held, before the map changes.  Best effort: a gap whose trap cannot
 * be armed keeps its data (untrapped) and is counted as skipped; the range
 * becomes purged all the same, so nothing is ever reported intact. */
static uint64_t purge_at_once(struct vr_region *r, uint64_t s, uint64_t e)
{
	unsigned sh = r->map->page_shift;
	uint64_t w0, w1, cur, reclaimed = 0;
	if (!vr_whole_pages(s, e, sh, &w0, &w1))
		return 0;
	cur = w0;
	for (struct vr_range *c = vr_map_first_end_after(r->map, s);; c = vr_map_next(r->map, c)) {
		uint64_t c0 = w1, c1 = w1;
		if (c && c->start < e) {
			if (!vr_range_purged(c) || !vr_whole_pages(c->start, c->end, sh, &c0, &c1))
				continue;
		}
		if (cur < c0) {
			if (vr_discard_pages(r, cur, c0) == 0)
				reclaimed += c0 - cur;
			else
				atomic_fetch_add_explicit(&r->ctx->skipped, 1,
							  memory_order_relaxed);
		}
		cur = c1;
		if (!c || c->start >= e)
			break;
	}
	return reclaimed;
}

/* the common cases in one descent of the tree (plus the insert):
 * a mark wholly inside a range, and a mark touching no range at all.
 * Returns -1 when the general path must decide. */
static int mark_fast(struct vr_region *r, uint64_t a, uint64_t b)
{
	struct vr_map *m = r->map;
	struct vr_range *pred, *succ;
	vr_map_neighbours(m, a, &pred, &succ);
	if (pred && pred->end >= b)
		return vr_range_purged(pred) ? VR_PURGED : VR_INTACT;
	if (succ && succ->start == a && succ->end >= b)
		return vr_range_purged(succ) ? VR_PURGED : VR_INTACT;
	if ((pred && pred->end >= a) || (succ && succ->start <= b))
		return -1; /* overlap or adjacency: merging rules apply */
	if (over_cap(m, 1, 0))
		return -ENOSPC;
	struct vr_range *nr = vr_map_alloc(m);
	if (!nr)
		return alloc_err(r);
	nr->start = a;
	nr->end = b;
	nr->age_flags = 0;
	vr_range_set_age(nr, region_age(r));
	range_link(r, nr);
	vr_region_publish_oldest(r);
	return VR_INTACT;
}

static int mark_locked(struct vr_region *r, uint64_t a, uint64_t b)
{
	struct vr_map *m = r->map;
	struct vr_ctx *c = r->ctx;
	int fast = mark_fast(r, a, b);
	if (fast != -1)
		return fast;
	struct vr_range *first = vr_map_first_end_after(m, a);

	/* wholly inside one range: nothing changes (S3, S8) */
	if (first && first->start <= a && first->end >= b)
		return vr_range_purged(first) ? VR_PURGED : VR_INTACT;

	/* step 1: join every overlapping range */
	uint64_t s = a, e = b, joined = 0;
	bool purged = false;
	for (struct vr_range *x = first; x && x->start < b; x = vr_map_next(m, x)) {
		if (x->start < s)
			s = x->start;
		if (x->end > e)
			e = x->end;
		purged |= vr_range_purged(x);
		joined++;
	}
	/* step 2: absorb adjacent ranges of the same state, repeatedly */
	for (struct vr_range *p = vr_map_last_start_before(m, s);
	     p && p->end == s && vr_range_purged(p) == purged; p = vr_map_prev(m, p)) {
		s = p->start;
		joined++;
	}
	for (struct vr_range *n = vr_map_first_end_after(m, e);
	     n && n->start == e && vr_range_purged(n) == purged; n = vr_map_next(m, n)) {
		e = n->end;
		joined++;
	}

	if (over_cap(m, 1, joined))
		return -ENOSPC;
	struct vr_range *nr = vr_map_alloc(m);
	if (!nr)
		return alloc_err(r);
	/* the merged range is written first, PENDING (shared.h, TRAPPED
	 * HOLES): a process killed from here on leaves it to repair, which
	 * joins it with what it replaces, purged if it is */
	nr->start = s;
	nr->end = e;
	/* bounds before the flag, also in the machine code: a process
	 * killed between two stores must not leave a PENDING record with a
	 * free record's bounds for repair to grow over other bytes */
	atomic_signal_fence(memory_order_seq_cst);
	nr->age_flags = (purged ? VR_RANGE_PURGED : 0) | VR_RANGE_PENDING;
	vr_range_set_age(nr, region_age(r));
	uint64_t reclaimed = purged ? purge_at_once(r, s, e) : 0;
	/* commit: every range inside [s, e) is a constituent */
	struct vr_range *x = vr_map_first_end_after(m, s);
	while (x && x->start < e) {
		struct vr_range *next = vr_map_next(m, x);
		range_drop(r, x, NULL);
		x = next;
	}
	range_link(r, nr);
	if (purged) {
		atomic_fetch_add_explicit(&c->purges, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->reclaimed_bytes, reclaimed, memory_order_relaxed);
		vr_dbg("mark over purged: range [%llu, %llu) purged at once, %llu bytes reclaimed",
		       (unsigned long long)s, (unsigned long long)e, (unsigned long long)reclaimed);
	}
	vr_region_publish_oldest(r);
	return purged ? VR_PURGED : VR_INTACT;
}

static int status_locked(struct vr_region *r, uint64_t a, uint64_t b)
{
	int st = 0;
	for (struct vr_range *x = vr_map_first_end_after(r->map, a); x && x->start < b;
	     x = vr_map_next(r->map, x)) {
		st |= VR_STATE_VOLATILE;
		if (vr_range_purged(x))
			return VR_STATE_VOLATILE | VR_STATE_PURGED;
	}
	return st;
}

/* check the span, then run fn on [off, off + len) under the region lock */
static inline int locked_span(struct vr_region *r, size_t off, size_t len,
			      int (*fn)(struct vr_region *, uint64_t, uint64_t))
{
	int rc = check_span(r, off, len);
	if (rc < 0)
		return rc;
	if (vr_held(r->lockp))
		return -EDEADLK; /* a signal handler interrupted this thread's call on r */
	vr_region_lock(r);
	rc = fn(r, off, off + len);
	vr_region_unlock(r);
	return rc;
}

int vr_region_mark(struct vr_region *r, size_t off, size_t len, bool *added)
{
	int rc = check_span(r, off, len);
	if (rc < 0)
		return rc;
	if (vr_held(r->lockp))
		return -EDEADLK; /* a signal handler interrupted this thread's call on r */
	vr_region_lock(r);
	r->lru_added = false;
	rc = mark_locked(r, off, off + len);
	*added = r->lru_added;
	vr_region_unlock(r);
	return rc;
}

bool vr_region_purged_in(struct vr_region *r, size_t off, size_t len)
{
	vr_region_lock(r);
	bool purged = status_locked(r, off, off + len) & VR_STATE_PURGED;
	vr_region_unlock(r);
	return purged;
}

/* ---- filling discarded pages before access is restored ---- */
/* pwrite all of [off, off + len) through the region's file; 0 or -errno */
static int fill_file(struct vr_region *r, size_t off, const void *src, size_t len)
{
	const uint8_t *p = src;
	while (len > 0) {
		ssize_t n = pwrite(r->fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		off += (size_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- unmark ---- */

/* what [a, b) covers: any purged range, a range that extends past both
 * ends (the cut needs a spare record), and the trapped pages to restore:
 * the whole pages of purged ranges that share a byte with [a, b),
 * as [*lo, *hi) (empty when *lo >= *hi) */
struct unmark_scan {
	bool purged, split;
	uint64_t lo, hi;
};

static struct unmark_scan unmark_scan(struct vr_region *r, struct vr_range *first, uint64_t a,
				      uint64_t b)
{
	struct vr_map *m = r->map;
	struct unmark_scan u = { .lo = UINT64_MAX };
	uint64_t q0 = a & ~vr_page_mask(), q1 = (b + vr_page_mask()) & ~vr_page_mask();
	for (struct vr_range *x = first; x && x->start < b; x = vr_map_next(m, x)) {
		uint64_t p0, p1;
		if (x->start < a && x->end > b)
			u.split = true;
		if (!vr_range_purged(x))
			continue;
		u.purged = true;
		if (!vr_whole_pages(x->start, x->end, m->page_shift, &p0, &p1))
			continue;
		uint64_t t0 = q0 < p0 ? p0 : q0, t1 = q1 > p1 ? p1 : q1;
		if (t0 < t1) {
			if (t0 < u.lo)
				u.lo = t0;
			if (t1 > u.hi)
				u.hi = t1;
		}
	}
	return u;
}

/* cut [a, b) out of the ranges from first on; pieces keep their age,
 * state and LRU place.  Changing a kept piece's bounds in place keeps
 * the tree ordered: no other range lies in the part that was cut.
 * spare: the record for the right piece of a range split in two (NULL
 * when none is); freed when unused. */
static void unmark_cut(struct vr_region *r, struct vr_range *x, uint64_t a, uint64_t b,
		       struct vr_range *spare)
{
	struct vr_map *m = r->map;
	unsigned sh = m->page_shift;
	while (x && x->start < b) {
		struct vr_range *next = vr_map_next(m, x);
		uint64_t s = x->start, e = x->end;
		if (s >= a && e <= b) {
			range_drop(r, x, NULL);
			x = next;
			continue;
		}
		bool on = vr_range_on_lru(x);
		gauge_add(r, x, -1);
		if (s < a && e > b) {
			spare->start = b;
			spare->end = e;
			/* bounds before the flags (INTREE, from x), also in the
			 * machine code: see mark_locked */
			atomic_signal_fence(memory_order_seq_cst);
			spare->age_flags = x->age_flags & ~(uint64_t)VR_RANGE_ONLRU;
			vr_map_insert(m, spare);
			gauge_add(r, spare, +1);
			if (on && vr_whole_pages(b, e, sh, NULL, NULL))
				vr_lru_insert_after(m, x, spare);
			spare = NULL;
			x->end = a;
		} else if (s < a) {
			x->end = a;
		} else {
			vr_map_set_start(m, x, b);
		}
		gauge_add(r, x, +1);
		if (on && !vr_whole_pages(x->start, x->end, sh, NULL, NULL))
			vr_lru_remove(m, x);
		x = next;
	}
	if (spare)
		vr_map_free(m, spare);
}

/* a shared file's record of the unmark in progress: [a, b), or none
 * (a == b == 0); stored before the system calls that follow it */
static void unmark_intent(struct vr_region *r, uint64_t a, uint64_t b)
{
	atomic_store_explicit(&r->shm->unmark_hi, 0, memory_order_relaxed);
	atomic_store_explicit(&r->shm->unmark_lo, a, memory_order_relaxed);
	atomic_store_explicit(&r->shm->unmark_hi, b, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

/* S5: scan, then take what can fail (the spare record, the restore of
 * trapped pages) before anything changes, then cut.  src (vr_unmark_fill):
 * the interval's data, written through the file once nothing but the
 * write and the restore can fail any more: a write into a hole is a fill
 * (under userfaultfd it takes the trap away in every mapping), so it
 * must not come before a refusal that leaves the bytes purged. */
static int unmark_locked(struct vr_region *r, uint64_t a, uint64_t b, const void *src)
{
	struct vr_map *m = r->map;

	/* fast path: exactly one unpurged range, one descent */
	vr_ref *link = vr_map_find_link(m, a);
	struct vr_range *hit = link ? vr_map_link_rec(m, link) : NULL;
	if (hit && hit->start == a && hit->end == b && !vr_range_purged(hit)) {
		int err = src ? fill_file(r, a, src, b - a) : 0;
		if (err < 0)
			return err;
		range_drop(r, hit, link);
		vr_region_publish_oldest(r);
		return VR_INTACT;
	}

	struct vr_range *first = vr_map_first_end_after(m, a);
	if (!first || first->start >= b) { /* nothing volatile in the interval */
		int err = src ? fill_file(r, a, src, b - a) : 0;
		return err < 0 ? err : VR_INTACT;
	}

	struct unmark_scan u = unmark_scan(r, first, a, b);
	struct vr_range *spare = NULL;
	if (u.split) {
		if (over_cap(m, 1, 0))
			return -ENOSPC; /* S31: nothing changed */
		spare = vr_map_alloc(m);
		if (!spare)
			return alloc_err(r);
	}
	/* a shared file: from the first fill on, other mappings may read the
	 * filled pages (zeros, or src) without a trap, so a holder killed
	 * from here on is completed by the repair, never undone (shared.h,
	 * DEATH) */
	bool intent = r->shm && (u.lo < u.hi || src);
	if (intent)
		unmark_intent(r, a, b);
	int err = src ? fill_file(r, a, src, b - a) : 0;
	if (err == 0 && u.lo < u.hi)
		err = vr_restore_pages(r, u.lo, u.hi);
	if (err < 0) {
		if (intent)
			unmark_intent(r, 0, 0);
		if (spare)
			vr_map_free(m, spare);
		return err;
	}
	unmark_cut(r, first, a, b, spare);
	if (intent)
		unmark_intent(r, 0, 0);
	vr_region_publish_oldest(r);
	return u.purged ? VR_PURGED : VR_INTACT;
}

/* vr_unmark under the lock; also the repair's completion of an unmark
 * cut short (shared.h, DEATH) */
int vr_region_unmark_locked(struct vr_region *r, uint64_t a, uint64_t b)
{
	return unmark_locked(r, a, b, NULL);
}

_export_ int vr_unmark(struct vr_region *r, size_t off, size_t len)
{
	VR_API_ENTRY;
	return locked_span(r, off, len, vr_region_unmark_locked);
}

_export_ int vr_status(struct vr_region *r, size_t off, size_t len)
{
	VR_API_ENTRY;
	return locked_span(r, off, len, status_locked);
}

_export_ int vr_region_fill(struct vr_region *r, size_t off, const void *src, size_t len)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* pwrite without the region lock */
	int rc = check_span(r, off, len);
	if (rc < 0)
		return rc;
	if (!src)
		return -EINVAL;
	if (r->fd < 0)
		return -EBADF; /* anonymous memory: no file to write through */
	/* through the file, not the mapping: the pages may be trapped */
	return fill_file(r, off, src, len);
}

/* Fill and unmark under one hold of the region lock: no purge can come
 * between the write and the restore of access.  (A fault handler that
 * calls vr_region_fill() and then vr_unmark() can lose that race when
 * its range was regenerated, marked and purged again by others in
 * between: the restore would then uncover the new hole.) */
_export_ int vr_unmark_fill(struct vr_region *r, size_t off, size_t len, const void *src)
{
	VR_API_ENTRY;
	int rc = check_span(r, off, len);
	if (rc < 0)
		return rc;
	if (!src)
		return -EINVAL;
	if (r->fd < 0)
		return -EBADF;
	if (vr_held(r->lockp))
		return -EDEADLK;
	vr_region_lock(r);
	rc = unmark_locked(r, off, off + len, src);
	vr_region_unlock(r);
	return rc;
}

/* ---- pointer style ---- */
int vr_region_span_of(void *addr, size_t len, struct vr_region **rp, size_t *off)
{
	struct vr_region *r = vr_registry_lookup(addr);
	if (!r || len == 0)
		return -EINVAL;
	*off = (size_t)((uint8_t *)addr - r->base);
	if (len > r->size - *off)
		return -EINVAL;
	*rp = r;
	return 0;
}

_export_ int vr_unmark_ptr(void *addr, size_t len)
{
	VR_API_ENTRY;
	struct vr_region *r;
	size_t off;
	int rc = vr_region_span_of(addr, len, &r, &off);
	return rc < 0 ? rc : vr_unmark(r, off, len);
}

_export_ void *vr_region_base(const struct vr_region *r)
{
	return check_live(r) < 0 ? NULL : r->base;
}

_export_ size_t vr_region_size(const struct vr_region *r)
{
	return check_live(r) < 0 ? 0 : r->size;
}

_export_ int vr_region_fd(const struct vr_region *r)
{
	if (check_live(r) < 0)
		return -EINVAL;
	if (r->fd < 0)
		return -EBADF; /* anonymous memory has no fd */
	/* the file may be mapped elsewhere from now on: purges trap with
	 * mprotect (mem-pages.c); the flag is the region's, not the
	 * caller's view of it, hence the cast */
	atomic_store_explicit(&((struct vr_region *)r)->fd_out, true, memory_order_relaxed);
	return r->fd;
}

_export_ struct vr_region *vr_region_of(const void *addr)
{
	return vr_registry_lookup(addr);
}

_export_ int vr_region_set_fault_handler(struct vr_region *r, vr_fault_fn fn, void *arg)
{
	VR_API_ENTRY;
	if (check_live(r) < 0)
		return -EINVAL;
	if (vr_held(r->lockp))
		return -EDEADLK;
	vr_region_lock(r);
	r->fault_fn = fn;
	r->fault_arg = fn ? arg : NULL;
	vr_region_unlock(r);
	/* no call of the replaced handler is in flight when this returns
	 * (unless called from a fault handler: callback.c) */
	vr_cb_synchronize();
	return 0;
}
