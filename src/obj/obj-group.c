/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj-group.c - groups of objects (API S35-S37): a group is one arena
 * (struct vr_objs: its own chunks, slabs, LRU logs and requeue heap), so
 * small objects of different groups never share a page and a group's
 * purge reads only its own LRU.  Here: making and freeing arenas, the
 * group's limit, statistics and purge handler, and reporting purges.
 *
 * Lifetime.  A group is referenced by its ctx's c->groups and by every
 * notification batch entry that names it (taken under purge_lock by the
 * purge that filled the batch).  vr_group_destroy unlinks it and drops
 * the ctx's reference; the last reference frees it, so a purging thread
 * that reports after a destroy still reads valid memory (and finds no
 * handler).  Handles, slabs and page descriptors are type-stable until
 * then (obj.h).
 *
 * PURGE NOTIFICATION (S37), exactly once per purge of an object:
 *   - the purge sets OS_NOTIFY together with OS_PURGED (obj-lru.c take_*)
 *     if the group has a handler at that moment, and puts the unit in the
 *     batch;
 *   - the reporter swaps OS_NOTIFY for OS_REPORTING with a compare-and-
 *     swap and calls the handler only if it did, so two threads
 *     reporting the same page (purged, partly restored, purged again)
 *     never report one purge twice; an object freed before its report
 *     or during its call keeps its handle out of reuse until its batch's
 *     reporter reached it (obj-alloc.c handle_freed), so a new object in
 *     the handle, purged by another thread, is reported by that thread;
 *   - a purge skips an object with either bit (-EAGAIN), so it is not
 *     purged again before the call returned (it may have been pinned
 *     and unpinned since the purge); when the call returns the reporter
 *     clears OS_REPORTING and gives such an object's unit an LRU entry
 *     back (a purge that skipped it may have dropped its entry);
 *   - the handler runs in a callback section (callback.c), with no
 *     library lock held, so vr_group_set_purge_handler can wait for it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "base/inject.h"
#include "obj/obj.h"
#include "base/lock.h"
#include "base/age.h"
#include "base/callback.h"
#include "base/fork.h"
#include "base/log.h"

struct vr_objs *vr_objs_create(struct vr_ctx *c, int priority, bool is_default)
{
	struct vr_group *g = vr_calloc_aligned(sizeof(*g));
	if (!g)
		return NULL;
	struct vr_objs *os = &g->objs;
	if (vr_objs_alloc_init(os) < 0) {
		free(g);
		return NULL;
	}
	uint64_t last = 0;
	os->ctx = c;
	os->age_base = vr_age_after(&last) - 1; /* ages in states are relative */
	os->priority = priority;
	os->is_default = is_default;
	atomic_init(&os->refs, 1);
	pthread_mutex_init(&os->span_lock, NULL);
	pthread_mutex_init(&os->rq_lock, NULL);
	atomic_init(&os->rq_oldest, UINT64_MAX);
	for (int i = 0; i < OBJ_NLOG; i++) {
		pthread_mutex_init(&os->logs[i].lock, NULL);
		atomic_init(&os->logs[i].oldest, UINT64_MAX);
	}
	return os;
}

/* a fork child: were all of an inherited group's locks free at the fork?
 * Otherwise its arrays and lists may be half-changed (fork.h) */
static bool objs_whole(struct vr_objs *os)
{
	if (!vr_fork_was_unlocked(&os->span_lock) || !vr_fork_was_unlocked(&os->rq_lock))
		return false;
	for (int i = 0; i < OBJ_NLOG; i++)
		if (!vr_fork_was_unlocked(&os->logs[i].lock))
			return false;
	for (unsigned i = 0; i < os->nclasses; i++)
		if (!vr_fork_was_unlocked(&os->classes[i].lock))
			return false;
	for (unsigned k = 0; k < OBJ_EXTRA_MAX / 16; k++) {
		struct vr_class *x = atomic_load(&os->xclasses[k]);
		for (unsigned i = 0; x && i < os->nclasses; i++)
			if (!vr_fork_was_unlocked(&x[i].lock))
				return false;
	}
	return true;
}

static void objs_free(struct vr_objs *os, bool inherited)
{
	if (inherited && !objs_whole(os)) {
		vr_dbg("fork child: a group was being changed at the fork: left");
		return;
	}
	vr_objs_alloc_fini(os, inherited);
	vr_obj_lru_fini(os, inherited);
	if (!inherited)
		pthread_mutex_destroy(&os->span_lock);
	free(os);
}

void vr_objs_put(struct vr_objs *os)
{
	if (atomic_fetch_sub(&os->refs, 1) == 1)
		objs_free(os, false);
}

void vr_objs_free_inherited(struct vr_objs *os)
{
	objs_free(os, true);
}

void vr_obj_ctx_destroy(struct vr_ctx *c, bool inherited)
{
	/* no purge runs now (the ctx is going): every reference is the ctx's */
	for (size_t i = 0; i < c->ngroups; i++)
		objs_free(c->groups[i], inherited);
	free(c->groups);
	c->groups = NULL;
	c->ngroups = 0;
	c->objs = NULL;
}

void vr_objs_retire(struct vr_objs *os)
{
	struct vr_shard *sh = &os->ctx->shards[0];
	atomic_fetch_sub(&sh->volatile_bytes, vr_objs_stat(os, VR_STAT_VOLATILE_BYTES));
	atomic_fetch_sub(&sh->purged_bytes, vr_objs_stat(os, VR_STAT_PURGED_BYTES));
	atomic_fetch_sub(&sh->objects, (int64_t)vr_objs_stat(os, VR_STAT_OBJECTS));
}

struct vr_group *vr_objs_group(struct vr_objs *os)
{
	return (struct vr_group *)((char *)os - offsetof(struct vr_group, objs));
}

struct vr_objs *vr_group_objs(struct vr_group *g)
{
	return &g->objs;
}

struct vr_ctx *vr_objs_ctx(const struct vr_objs *os)
{
	return os->ctx;
}

int vr_objs_priority(const struct vr_objs *os)
{
	return os->priority;
}

static void free_obj(struct vr_obj *o)
{
	vr_obj_free(o);
}

void vr_objs_free_all(struct vr_objs *os)
{
	vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
	struct vr_slab *first = os->slabs; /* slabs are only ever added */
	vr_unlock(&os->span_lock);
	for (struct vr_slab *s = first; s; s = s->all)
		for (uint32_t i = 0; i < s->nslots; i++)
			if (atomic_load(&s->objs[i].state) & OS_LIVE)
				vr_obj_free(&s->objs[i]);
	vr_objs_each_large(os, free_obj);
}

/* ---- limit and statistics ---- */
static int64_t log_sum(struct vr_objs *os, size_t field)
{
	int64_t n = 0;
	for (int i = 0; i < OBJ_NLOG; i++)
		n += atomic_load_explicit((_Atomic int64_t *)((char *)&os->logs[i] + field),
					  memory_order_relaxed);
	return n > 0 ? n : 0;
}

uint64_t vr_objs_stat(struct vr_objs *os, enum vr_stat which)
{
	switch (which) {
	case VR_STAT_OBJECTS:
		return (uint64_t)log_sum(os, offsetof(struct vr_olog, objects));
	case VR_STAT_VOLATILE_BYTES:
		return (uint64_t)log_sum(os, offsetof(struct vr_olog, volatile_bytes));
	case VR_STAT_PURGED_BYTES:
		return (uint64_t)log_sum(os, offsetof(struct vr_olog, purged_bytes));
	case VR_STAT_PURGES:
		return atomic_load(&os->purges);
	case VR_STAT_RECLAIMED_BYTES:
		return atomic_load(&os->reclaimed);
	default:
		return 0;
	}
}

void vr_objs_set_limit(struct vr_objs *os, size_t bytes)
{
	atomic_store(&os->limit, bytes);
}

size_t vr_objs_over_limit(struct vr_objs *os)
{
	size_t limit = atomic_load_explicit(&os->limit, memory_order_relaxed);
	if (!limit ||
	    (uint64_t)log_sum(os, offsetof(struct vr_olog, volatile_bytes)) <= (uint64_t)limit)
		return 0;
	return limit;
}

/* ---- purge notification ---- */
int vr_objs_set_purge_handler(struct vr_objs *os, vr_purge_fn fn, void *arg)
{
	vr_cb_slot_set(&os->purge, (vr_cb_any)fn, arg);
	/* the replaced handler is not running when this returns (but in this
	 * thread, if it is one) and is not called again */
	vr_cb_synchronize();
	return 0;
}

/* small object o's pages get an entry again, held meanwhile (and with
 * @release its handle goes back to its free list while they are held, so
 * that the slot's reuse cannot free them) */
static void requeue_pages(struct vr_objs *os, struct vr_obj *o, bool release)
{
	struct vr_opage *p;
	unsigned n;
	obj_pages(o, &p, &n);
	for (unsigned i = 0; i < n; i++)
		vr_opage_hold(&p[i]);
	if (release)
		vr_objs_release_handle(os, o);
	vr_obj_pages_requeue(os, p, n); /* (and drops the holds) */
}

/* a reported object that is unpinned and unpurged again (pinned and
 * unpinned since its purge) gets an entry for its unit: the purges that
 * skipped it meanwhile may have dropped the one it had (obj-lru.c skip) */
static void requeue_reported(struct vr_objs *os, struct vr_obj *o)
{
	uint64_t s = atomic_load(&o->state);
	if ((s & (OS_LIVE | OS_PINNED | OS_PURGED | OS_PURGING | OS_NOTIFY | OS_REPORTING)) !=
	    OS_LIVE)
		return;
	if (s & OS_LARGE) {
		/* purgeable again: a limit purge that skipped it while its call
		 * ran may have found nothing else and set the "nothing
		 * purgeable" hint, which would let vr_mark skip the limit (a
		 * page of small objects clears it in vr_obj_page_requeue) */
		vr_ctx_unstick(os->ctx);
		atomic_fetch_or(&o->state, OS_QUEUED);
		vr_obj_rq_push(os, (uintptr_t)o | 1, os_age(s) + os->age_base);
		return;
	}
	requeue_pages(os, o, false);
}

/* a handle freed unreported goes back to its free list; its page (a
 * small object's) may have lost its entry to purges that skipped it
 * meanwhile (obj-lru.c page_scan), so the page is requeued, held so
 * that the slot's reuse cannot free it meanwhile */
static void release_unreported(struct vr_objs *os, struct vr_obj *o)
{
	if (atomic_load(&o->state) & OS_LARGE)
		vr_objs_release_handle(os, o);
	else
		requeue_pages(os, o, true);
}

/* FORK IN A HANDLER.  A purge handler may fork (S37: no call is
 * forbidden to it) and return in the child too, where the call that
 * purged then goes on: but there the group is inherited (S18), and the
 * locks that reporting takes after a call (the requeue heap, the LRU
 * logs, a free list) may be held by parent threads the child does not
 * have.  So in a child the batch is dropped where the fork left it: the
 * parent reports its own purges, and the child's copies of the groups
 * are only freed (its puts are skipped: a copy is leaked at worst).
 * The test is vr_inherited_ctx() of the group's ctx. */

static void report(struct vr_objs *os, struct vr_obj *o)
{
	if (vr_inherited_ctx(os->ctx))
		return; /* FORK IN A HANDLER: the child */
	uint64_t s = atomic_load(&o->state);
	/* (a for loop: a failed weak compare-and-swap, which may fail
	 * spuriously, must come back here, not to a loop condition that
	 * sets OS_REPORTING on a freed handle: a review) */
	for (;;) {
		if (!(s & OS_NOTIFY))
			return; /* reported by another thread, or freed */
		if (!(s & OS_LIVE)) {
			/* freed before its report: the handle was kept for this
			 * batch (obj-alloc.c handle_freed); no call, it goes back */
			if (atomic_compare_exchange_weak(&o->state, &s, s & ~(uint64_t)OS_NOTIFY)) {
				release_unreported(os, o);
				return;
			}
			continue;
		}
		if (atomic_compare_exchange_weak(&o->state, &s,
						 (s & ~(uint64_t)OS_NOTIFY) | OS_REPORTING))
			break;
	}
	void *arg;
	vr_purge_fn fn = (vr_purge_fn)vr_cb_slot_get(&os->purge, &arg);
	if (fn) /* NULL: removed since the purge, which goes unreported */
		fn(o, arg);
	if (vr_inherited_ctx(os->ctx))
		return; /* the handler forked: this is the child (FORK IN A HANDLER) */
	/* the call returned.  o may have been freed during it (by the
	 * handler or another thread): then its handle was kept out of reuse
	 * until now (obj-alloc.c handle_freed), so this clear cannot land
	 * on a new object's OS_REPORTING; it is handed back here */
	s = atomic_fetch_and(&o->state, ~(uint64_t)OS_REPORTING);
	if (!(s & OS_LIVE)) {
		vr_objs_release_handle(os, o);
		return;
	}
	requeue_reported(os, o);
}

static void report_unit(struct vr_objs *os, uintptr_t unit)
{
	if (unit & 1) {
		report(os, (struct vr_obj *)(unit & ~(uintptr_t)1));
		return;
	}
	struct vr_opage *p = (struct vr_opage *)unit;
	struct vr_slab *s = p->slab;
	uint32_t lo, hi;
	vr_slab_page_slots(s, (size_t)(p - s->pages), &lo, &hi);
	/* only up to the last slot this purge marked: no other purge takes
	 * the page while a mark of ours is pending (obj-lru.c page_scan;
	 * a freed one is kept, obj-alloc.c handle_freed), but once the last
	 * is cleared one may, and its marks on later slots are its own to
	 * report (S37: by the thread that purged) */
	uint32_t end = hi + 1;
	while (end > lo && !(atomic_load(&s->objs[end - 1].state) & OS_NOTIFY))
		end--;
	for (uint32_t i = lo; i < end; i++)
		report(os, &s->objs[i]);
}

/*
 * NESTED REPORTS.  A purge handler may purge (S37: any call), and that
 * purge reports its batch before it returns, from inside the handler: a
 * handler that purges on every call nested one level per batch of 64
 * units, about 1.3 KiB of stack each, and overflowed an 8 MiB stack after
 * about a million objects.  So below NOTIFY_DEPTH levels a batch is
 * reported where it was purged, as always; deeper, it is kept on this
 * thread's list and reported by the outermost call, after its own batch,
 * still from the thread that purged and before that call returns.  The
 * list's blocks are mmap'ed (a purge may run in a fault handler, where
 * malloc is not safe); without memory the batch is reported in place.
 */
#define NOTIFY_DEPTH 8
struct deferred {
	struct deferred *next;
	struct vr_notify_batch b;
};
static __thread unsigned notify_depth;
static __thread struct deferred *notify_later;

static void notify_now(struct vr_notify_batch *b)
{
	notify_depth++;
	unsigned long cb = vr_cb_enter();
	for (size_t k = 0; k < b->n; k++)
		report_unit(b->e[k].os, b->e[k].unit);
	vr_cb_leave(cb);
	for (size_t k = 0; k < b->n; k++)
		if (!vr_inherited_ctx(b->e[k].os->ctx))
			vr_objs_put(b->e[k].os);
	b->n = 0;
	notify_depth--;
}

void vr_obj_notify(struct vr_notify_batch *b)
{
	if (notify_depth >= NOTIFY_DEPTH) {
		struct deferred *d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (d != MAP_FAILED) {
			d->b = *b; /* the group references move with it */
			d->next = notify_later;
			notify_later = d;
			b->n = 0;
			return;
		}
	}
	notify_now(b);
	while (notify_depth == 0 && notify_later) {
		/* taken at depth 1: a signal handler's purge in between (a
		 * fault handler's unpin over the limit) reports its own batch
		 * and leaves the list to this loop */
		notify_depth++;
		atomic_signal_fence(memory_order_seq_cst);
		struct deferred *d = notify_later;
		notify_later = d->next;
		atomic_signal_fence(memory_order_seq_cst);
		notify_depth--;
		notify_now(&d->b);
		munmap(d, sizeof(*d));
	}
}
