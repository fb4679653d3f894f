/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj.c - purgeable objects (API S19-S25): the public calls, the per-object
 * state machine, the object LRU (logs + requeue heap) as purge sources for
 * purge.c, and the fault hook called by fault.c.  See obj.h for the rules.
 *
 * Pin and unpin of an intact object touch the handle, its page
 * descriptor(s) (small objects) and the calling thread's log and gauge
 * shard; no search by address, no system call, no lock but the thread's
 * own log lock (shared only with threads hashed onto the same log, and
 * with the purger popping it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <ucontext.h>

#include "base/inject.h"
#include "base/refault.h"
#include "mem/mem-kind.h"
#include "obj/obj.h"
#include "base/lock.h"
#include "base/age.h"
#include "base/log.h"
#include "base/callback.h"
#include "base/registry.h"
#include "mem/mem.h"

/* Per-thread state, initial-exec TLS (the library may be dlopen()ed:
 * static TLS is scarce): the thread's log index (1-based, 0 = not
 * assigned).  The fault path's re-fault record is base/refault.h's. */
static __thread struct {
	unsigned log;
	/* the object whose restore (a large one, OS_PURGING) or zeroing (a
	 * small one, ZEROING) this thread's pin is in: a signal handler that
	 * interrupted it and pins or unpins that object would wait for
	 * itself (-EDEADLK instead) */
	const struct vr_obj *busy;
} otls __attribute__((tls_model("initial-exec")));
static _Atomic unsigned next_log;

/* otls.busy = o, ordered against the state changes around it for a
 * signal handler of this thread (compiler barriers only) */
static inline void busy_set(const struct vr_obj *o)
{
	atomic_signal_fence(memory_order_seq_cst);
	otls.busy = o;
	atomic_signal_fence(memory_order_seq_cst);
}

unsigned vr_obj_log_index(void)
{
	unsigned l = otls.log;
	if (!l) {
		l = atomic_fetch_add(&next_log, 1) % OBJ_NLOG + 1;
		otls.log = l;
	}
	return l - 1;
}

/* ---- public calls ---- */
static void obj_count(struct vr_objs *os, int64_t d)
{
	unsigned i = vr_obj_log_index();
	atomic_fetch_add_explicit(&os->logs[i].objects, d, memory_order_relaxed);
	atomic_fetch_add_explicit(&os->ctx->shards[i % VR_NSHARDS].objects, d,
				  memory_order_relaxed);
}

static inline int check_obj(const struct vr_obj *o, uint64_t *s)
{
	if (!o || obj_inherited(o))
		return -EINVAL;
	*s = atomic_load_explicit(&o->state, memory_order_acquire);
	return (*s & OS_LIVE) ? 0 : -EINVAL;
}

int vr_objs_new_obj(struct vr_objs *os, size_t size, size_t extra, struct vr_obj **out)
{
	/* the requeue heap has room for an entry per object (see obj-lru.c) */
	int err = vr_obj_rq_reserve(os, vr_objs_stat(os, VR_STAT_OBJECTS) + 64);
	if (err < 0)
		return err;
	err = vr_objs_alloc(os, size, extra, out);
	if (err < 0)
		return err;
	obj_count(os, 1);
	return 0;
}

_export_ void vr_obj_free(struct vr_obj *o)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* an emptied chunk's fd closed */
	uint64_t s;
	if (check_obj(o, &s) < 0)
		return; /* NULL, or inherited: the child's copy goes with its ctx */
	struct vr_objs *os = obj_objs(o, s);
	struct vr_opage *p = NULL;
	unsigned n = 0;
	if (s & OS_LARGE) {
		/* OS_PURGING keeps the purger away while the span is released */
		while ((s & OS_PURGING) ||
		       !atomic_compare_exchange_weak(&o->state, &s, s | OS_PURGING)) {
			if (s & OS_PURGING) {
				sched_yield();
				s = atomic_load(&o->state);
			}
		}
	} else {
		obj_pages(o, &p, &n);
		for (unsigned i = 0; i < n; i++)
			vr_opage_hold(&p[i]);
		s = atomic_load(&o->state);
	}
	if (!(s & OS_PINNED))
		obj_gauge(os, vr_obj_log_index(), s & OS_PURGED, -(int64_t)obj_size(o));
	vr_objs_release(os, o);
	for (unsigned i = 0; i < n; i++) /* it requeued the pages */
		vr_opage_drop_requeued(os, &p[i]);
	obj_count(os, -1);
}

_export_ void *vr_obj_ptr(const struct vr_obj *o)
{
	return !o || obj_inherited(o) ? NULL : o->ptr;
}

_export_ size_t vr_obj_size(const struct vr_obj *o)
{
	return !o || obj_inherited(o) ? 0 : obj_size(o);
}

_export_ struct vr_obj *vr_obj_of(const void *addr)
{
	struct vr_chunk *ch = vr_registry_find(addr, VR_REG_OBJ);
	return ch ? vr_objs_at(ch, (uintptr_t)addr) : NULL;
}

_export_ void *vr_obj_extra(const struct vr_obj *o)
{
	uint64_t s;
	return check_obj(o, &s) < 0 ? NULL : vr_objs_extra(o, s);
}

_export_ int vr_obj_status(const struct vr_obj *o)
{
	VR_API_ENTRY;
	uint64_t s;
	int err = check_obj(o, &s);
	if (err < 0)
		return err;
	if (s & OS_PINNED)
		return 0;
	return VR_STATE_VOLATILE | ((s & OS_PURGED) ? VR_STATE_PURGED : 0);
}

/*
 * THE HANDLE'S STATE MACHINE (o->state; obj.h has the bits)
 *
 *   free -(new)-> PINNED -(unpin)-> volatile -(purge)-> PURGED
 *   volatile -(pin)-> PINNED          PURGED -(pin)-> ZEROING -> PINNED
 *
 *   PINNED    LIVE|PINNED.  A small object's pin holds one count of pw on
 *             each of its pages, so the purger cannot claim them.
 *   volatile  LIVE (+ QUEUED for a large object): its pages may be claimed.
 *   PURGED    LIVE|PURGED: discarded, unpinned.
 *   ZEROING   LIVE|PINNED|PURGED, small objects only: the pin that won the
 *             object clears its bytes (a straddling object keeps the bytes
 *             of a page that was not discarded) while its page counts
 *             still hold the pages, then clears PURGED.
 *   Large objects have no ZEROING: their pages were punched whole and
 *   read 0; a pin or purge in progress sets OS_PURGING instead, and the
 *   other calls wait for it to clear.
 *
 * Rules (every call but vr_obj_free may race with any other on one
 * handle, S20):
 *   - A pin that sets PINNED hands its page counts to the object: the
 *     next unpin, from any thread, drops them.  So once its compare-and-
 *     swap succeeded, a pin may touch the object's memory only while
 *     ZEROING keeps unpins away (a pin that zeroed a purged object
 *     after the swap to PINNED failed so: a concurrent pin + unpin dropped
 *     the counts, a purge trapped the page again, and the memset raised
 *     SIGBUS inside the library).
 *   - Pin and unpin wait while another thread's pin is ZEROING (it ends
 *     without a lock or a system call): a pin returns only once the
 *     object is as S20 says, an unpin never takes the counts of a pin
 *     still zeroing.  The intact pair pays one more bit test.
 *   - Only the CAS that clears PINNED drops page counts, only the CAS
 *     that sets it keeps them, so each pin's counts are dropped once.
 */
/* false: this thread's own pin is zeroing o (a signal handler
 * interrupted it): it would wait for ever */
static bool wait_zeroed(struct vr_obj *o, uint64_t *s)
{
	while ((*s & (OS_PINNED | OS_PURGED)) == (OS_PINNED | OS_PURGED)) {
		if (_unlikely_(otls.busy == o))
			return false;
		sched_yield();
		*s = atomic_load(&o->state);
	}
	return true;
}

/* does this thread purge o's ctx?  (a signal handler interrupted it: a
 * page or object it claimed is not released before the handler returns) */
static bool purging_self(struct vr_objs *os)
{
	return _unlikely_(vr_tls_held.n) && vr_held(&os->ctx->purge_lock);
}

int vr_obj_unpin_at(struct vr_obj *o, uint64_t t, struct vr_objs **owner, size_t *bytes)
{
	uint64_t s;
	if (o)
		obj_prefetch_pages(o); /* obj.h, PAGE HINTS */
	int err = check_obj(o, &s);
	if (err < 0 || !(s & OS_PINNED))
		return err;
	struct vr_objs *os = obj_objs(o, s);
	if (_unlikely_(vr_tls_held.n) && vr_held(&os->logs[vr_obj_log_index()].lock))
		return -EDEADLK; /* a signal handler interrupted this thread's append */
	/* a single unpin (t 0): its own stamp, only when it unpins */
	if (!t) {
		uint64_t last = 0;
		t = vr_age_after(&last);
	}
	uint64_t rel = (t - os->age_base) << OS_AGE_SHIFT;
	uint64_t flags = (1u << OS_AGE_SHIFT) - 1;
	bool large = s & OS_LARGE;
	do {
		/* another thread's pin is zeroing it */
		if (_unlikely_(s & OS_PURGED) && !wait_zeroed(o, &s))
			return -EDEADLK;
		if (!(s & OS_PINNED))
			return 0; /* another thread unpinned it */
	} while (!atomic_compare_exchange_weak(
		&o->state, &s, (s & flags & ~(uint64_t)OS_PINNED) | rel | (large ? OS_QUEUED : 0)));
	/* an entry is appended only when the unit has none (QUEUED was
	 * clear): the intact pin+unpin pair touches no log and takes no lock */
	if (large) {
		if (!(s & OS_QUEUED) && vr_obj_lru_append(os, (uintptr_t)o | 1, t) < 0)
			atomic_fetch_and(&o->state,
					 ~(uint64_t)OS_QUEUED); /* next unpin tries again */
	} else {
		struct vr_opage *p;
		unsigned n;
		obj_pages(o, &p, &n);
		for (unsigned i = 0; i < n; i++) {
			/* age first, pin dropped second: the purger claims the page
			 * only with no pin left, and then sees this age */
			uint64_t y = atomic_load(&p[i].youngest);
			while (y < t && !atomic_compare_exchange_weak(&p[i].youngest, &y, t))
				;
			uint32_t w = atomic_load(&p[i].pw);
			while (!atomic_compare_exchange_weak(&p[i].pw, &w, (w - 1) | PG_QUEUED))
				;
			if (!(w & PG_QUEUED) && vr_obj_lru_append(os, (uintptr_t)&p[i], t) < 0)
				atomic_fetch_and(&p[i].pw, ~PG_QUEUED);
		}
	}
	*owner = os;
	*bytes = obj_size(o);
	return 0;
}

void vr_obj_unpinned(struct vr_objs *os, size_t bytes, size_t *glimit)
{
	obj_gauge(os, vr_obj_log_index(), false, (int64_t)bytes);
	*glimit = atomic_load_explicit(&os->limit, memory_order_relaxed);
}

int vr_obj_unpin_unit(struct vr_obj *o, struct vr_objs **owner, size_t *glimit)
{
	size_t bytes = 0;
	int err = vr_obj_unpin_at(o, 0, owner, &bytes);
	if (err == 0 && *owner)
		vr_obj_unpinned(*owner, bytes, glimit);
	return err;
}

static int pin_large(struct vr_objs *os, struct vr_obj *o, uint64_t s)
{
	for (;;) {
		if (s & OS_PINNED)
			return VR_INTACT;
		if (s & OS_PURGING) { /* a purge of this object is under way */
			if (otls.busy == o || purging_self(os))
				return -EDEADLK; /* by this thread's interrupted code */
			sched_yield();
			s = atomic_load(&o->state);
			continue;
		}
		if (!(s & OS_PURGED)) {
			if (atomic_compare_exchange_weak(&o->state, &s, s | OS_PINNED)) {
				obj_gauge(os, vr_obj_log_index(), false, -(int64_t)obj_size(o));
				return VR_INTACT;
			}
			continue;
		}
		const struct vr_obj *busy = otls.busy;
		busy_set(o); /* before OS_PURGING is ours: see otls */
		if (!atomic_compare_exchange_weak(&o->state, &s, s | OS_PURGING)) {
			busy_set(busy);
			continue;
		}
		size_t len = ((obj_size(o) - 1) | (vr_page_size() - 1)) + 1;
		int err = vr_objs_restore(os, o->ptr, len);
		/* read-modify-write, never a store of s: while OS_PURGING is
		 * held the purge's reporter may clear OS_NOTIFY (obj-group.c
		 * report) and a purge may drop OS_QUEUED; a stale OS_NOTIFY
		 * put back would make every later purge skip the object */
		if (err < 0) {
			/* nothing changed (S20, S5) */
			atomic_fetch_and(&o->state, ~(uint64_t)OS_PURGING);
			busy_set(busy);
			return err;
		}
		/* the pages were punched: they read 0 (a discard left trapped
		 * but not punched: cleared here, the object is ours now) */
		if (!vr_objs_zeroed(os, o->home, o->ptr, len))
			memset(o->ptr, 0, len);
		s = atomic_load(&o->state);
		while (!atomic_compare_exchange_weak(
			&o->state, &s, (s | OS_PINNED) & ~(uint64_t)(OS_PURGED | OS_PURGING)))
			;
		busy_set(busy);
		obj_gauge(os, vr_obj_log_index(), true, -(int64_t)obj_size(o));
		return VR_PURGED;
	}
}

/* a small object: hold its pages, restore them if it was purged, then
 * PINNED (or ZEROING, then PINNED): see the state machine above */
static int pin_small(struct vr_objs *os, struct vr_obj *o)
{
	struct vr_opage *p;
	unsigned n;
	int err;
	obj_pages(o, &p, &n);
	/* a page this thread's interrupted purge claimed is not released
	 * before this signal handler returns: no wait for it */
	bool self = purging_self(os);
	for (unsigned i = 0; i < n; i++)
		if (!vr_opage_hold_unless(&p[i], self)) {
			for (unsigned j = 0; j <= i; j++)
				vr_opage_drop(&p[j]);
			return -EDEADLK;
		}
	/* with the pins held no purge can change PURGED under us */
	uint64_t s = atomic_load(&o->state);
	if ((s & (OS_PURGED | OS_PINNED)) == OS_PURGED) {
		err = vr_objs_restore_small(os, o);
		if (err < 0)
			goto undo;
	}
	const struct vr_obj *busy = otls.busy;
	for (;;) {
		if (s & OS_PINNED) { /* another thread pinned it */
			err = VR_INTACT;
			goto undo;
		}
		bool zeroing = s & OS_PURGED;
		if (zeroing)
			busy_set(o); /* before ZEROING is ours: see otls */
		if (atomic_compare_exchange_weak(&o->state, &s, s | OS_PINNED))
			break;
		if (zeroing)
			busy_set(busy);
	}
	if (s & OS_PURGED) {
		/* ZEROING: bytes on a page that was not discarded (a straddling
		 * object) kept their data: every byte of a purged object reads 0 */
		memset(o->ptr, 0, obj_size(o));
		atomic_fetch_and(&o->state, ~(uint64_t)OS_PURGED);
		busy_set(busy);
		obj_gauge(os, vr_obj_log_index(), true, -(int64_t)obj_size(o));
		return VR_PURGED;
	}
	obj_gauge(os, vr_obj_log_index(), false, -(int64_t)obj_size(o));
	return VR_INTACT;
undo:
	if (err < 0 && err != -EDEADLK) {       /* nothing changed, but a purge may
					   * have dropped the entry of a page
					   * while we held it */
		vr_obj_pages_requeue(os, p, n); /* (and drops our pins) */
	} else {
		for (unsigned i = 0; i < n; i++)
			vr_opage_drop(&p[i]);
	}
	if (err == VR_INTACT && !wait_zeroed(o, &s))
		return -EDEADLK;
	return err;
}

_export_ int vr_obj_pin(struct vr_obj *o)
{
	VR_API_ENTRY;
	uint64_t s;
	if (o)
		obj_prefetch_pages(o); /* obj.h, PAGE HINTS */
	int err = check_obj(o, &s);
	if (err < 0)
		return err;
	if (s & OS_PINNED)
		return wait_zeroed(o, &s) ? VR_INTACT : -EDEADLK;
	struct vr_objs *os = obj_objs(o, s);
	return (s & OS_LARGE) ? pin_large(os, o, s) : pin_small(os, o);
}

void vr_obj_set_fault_handler(struct vr_ctx *c, vr_obj_fault_fn fn, void *arg)
{
	vr_cb_slot_set(&c->obj_fault, (vr_cb_any)fn, arg);
	/* the replaced handler is not running when this returns, and is not
	 * called again (callback.c), unless called from a handler */
	vr_cb_synchronize();
}

/* ---- statistics ---- */
uint64_t vr_obj_count(struct vr_ctx *c)
{
	int64_t n = 0;
	for (int i = 0; i < VR_NSHARDS; i++)
		n += atomic_load_explicit(&c->shards[i].objects, memory_order_relaxed);
	return n > 0 ? (uint64_t)n : 0;
}

/* 0 from a signal handler that interrupted library code in its own
 * thread: the region list or an arena's chunks may be half changed, and
 * the locks would wait for that thread -- directly (it holds the list
 * in vr_region_new/destroy, a span lock in vr_obj_new), or through
 * another thread that holds the list here and waits for a span lock the
 * interrupted code holds (vrange.h: no call waits for a lock its own
 * thread holds; a stat has no -EDEADLK) */
uint64_t vr_obj_footprint(struct vr_ctx *c)
{
	uint64_t sum = 0;
	if (vr_held_any())
		return 0;
	vr_lock(&c->lock, VR_RANK_CTX);
	for (struct vr_region *r = c->regions; r; r = r->next)
		sum += r->kind->footprint(r); /* memfd blocks, or resident anonymous pages */
	for (size_t g = 0; g < c->ngroups; g++) {
		struct vr_objs *os = c->groups[g];
		vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
		for (size_t i = 0; i < os->nchunks; i++)
			sum += vr_fd_bytes(os->chunks[i]->fd);
		vr_unlock(&os->span_lock);
	}
	vr_unlock(&c->lock);
	return sum;
}

/* ---- the fault path (called from fault.c's SIGSEGV handler) ----
 * Async-signal-safe: registry lookup, atomics, sched_yield, the user's
 * handler (in a callback section: vr_ctx_set_obj_fault_handler waits for
 * it), and the SIGBUS delivery fault.c passes in. */
/* is addr on a discarded page of ch?  *o: the object there, if any.
 * A purge of the page in progress is waited for (it holds no lock the
 * faulting thread could need), unless this thread is that purge: a signal
 * handler interrupted it and touched the page, and gets SIGBUS. */
static bool classify(struct vr_chunk *ch, uintptr_t a, struct vr_obj **o)
{
	size_t pi = (a - (uintptr_t)ch->base) >> vr_page_shift();
	bool self = vr_held(&ch->objs->ctx->purge_lock);
	for (;;) {
		uintptr_t v = atomic_load(&ch->map[pi]);
		*o = NULL;
		if (PM_TAG(v) == PM_LARGE) {
			struct vr_obj *h = PM_PTR(v);
			uint64_t s = atomic_load(&h->state);
			if (s & OS_PURGING) { /* a purge or restore under way */
				if (self)
					return true; /* no object: SIGBUS */
				sched_yield();
				continue;
			}
			/* the tail of the last page is discarded too; it has no object */
			*o = vr_objs_at(ch, a);
			return (s & (OS_LIVE | OS_PURGED | OS_PINNED)) == (OS_LIVE | OS_PURGED);
		}
		if (PM_TAG(v) != PM_SLAB)
			return false;
		struct vr_slab *s = PM_PTR(v);
		struct vr_opage *p =
			&s->pages[((a & ~(uintptr_t)(vr_page_size() - 1)) - (uintptr_t)s->base) >>
				  vr_page_shift()];
		uint32_t w = atomic_load(&p->pw);
		if ((w & PG_PURGING) && !self) {
			sched_yield();
			continue;
		}
		*o = self ? NULL : vr_objs_at(ch, a);
		return self || (w & PG_DISCARDED);
	}
}

int vr_obj_fault(siginfo_t *si, void *ucv, void (*deliver)(void *addr, ucontext_t *uc))
{
	if (si->si_code <= 0)
		return 0;
	void *addr = si->si_addr;
	struct vr_chunk *ch = vr_registry_find(addr, VR_REG_OBJ);
	if (!ch)
		return 0;
	struct vr_objs *os = ch->objs;
	uint64_t gen = atomic_load(&os->trap_gen);
	struct vr_obj *o;
	bool claimed = classify(ch, (uintptr_t)addr, &o);
	if (!claimed) /* re-run the access once: a restore may have raced;
		       * faulted again with nothing changed: not ours */
		return vr_refault_rerun(addr, gen) == VR_REFAULT_RERUN ? 1 : 0;
	atomic_fetch_add_explicit(&os->ctx->faults, 1, memory_order_relaxed);
	bool allowed = vr_refault_handler_allowed(addr, gen);
	vr_held_enter_signal();
	unsigned long cb = vr_cb_enter();
	void *arg;
	vr_obj_fault_fn fn = (vr_obj_fault_fn)vr_cb_slot_get(&os->ctx->obj_fault, &arg);
	bool fixed = o && fn && allowed && fn(o, addr, arg) == VR_FAULT_RETRY;
	vr_cb_leave(cb);
	vr_held_leave_signal();
	if (fixed)
		return 1;
	vr_refault_forget();
	if (vr_debug_stderr())
		vr_log_raw("vrange: SIGBUS on a discarded object page\n");
	deliver(addr, ucv);
	return 1;
}
