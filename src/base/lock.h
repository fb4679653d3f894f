/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lock.h - every library mutex is taken through vr_lock()/vr_unlock()
 *
 * Each thread keeps a small stack of the locks it holds or is about to
 * take (vr_tls_held).  Two uses:
 *
 *  1. Self-deadlock avoidance in signal context.  A fault handler (S13)
 *     may call vr_* functions, and an asynchronous signal handler may
 *     touch discarded memory, while the interrupted code of the same
 *     thread holds a library lock.  Before blocking on a lock, code that
 *     can run in signal context asks vr_held(lock): the fault path then
 *     delivers SIGBUS instead of waiting for ever, and the public calls
 *     return -EDEADLK.  The entry is pushed BEFORE pthread_mutex_lock and
 *     popped AFTER pthread_mutex_unlock, so a signal in either window sees
 *     the lock as held (conservative), and popping restores the previous
 *     state exactly, whatever was nested in between (a stack, not a
 *     single marker that an inner unlock would clear).
 *
 *  2. Lock-order checking (builds without NDEBUG, as jemalloc's witness):
 *     locks are taken in increasing rank; a lock taken in a signal handler
 *     that interrupted library code starts a new level (the handler's
 *     calls are ordered among themselves, not against the interrupted
 *     code, which cannot run until the handler returns), and locks are
 *     released in the reverse order.  A violation prints both locks and
 *     aborts.
 *
 * LOCKING (the rules every file must respect)
 *
 *   vr_global_lock    one-time setup; inherited lists in a fork child.
 *   ctx->purge_lock   one purge engine run per ctx at a time (vr_ctx_purge,
 *                     limit, pressure, monitor); also held by region
 *                     creation (it reserves room in the purge heap) and
 *                     by vr_region_destroy / vr_ctx_destroy, so that a
 *                     purge never sees a region being freed.
 *   ctx->lock         the ctx's region list (regions, nregions).
 *   region->lock      the region's range map, fault handler, purge cursor.
 *   obj class, span   an object size class; the arena's chunks (obj.h).
 *   shm list          this process's shared-state mappings (mem-shared.c).
 *   registry wlock    registry writers (registry.c).
 *   obj lru           an object LRU log, the requeue heap (obj.h), leaves.
 *   log_lock          the log function (log.c), a leaf.
 *
 *   Order: the ten ranks of VR_LOCK_RANKS below (global -> purge_lock
 *   -> ctx->lock -> region->lock -> obj class -> obj span -> shm list ->
 *   registry -> obj lru -> log; the obj ranks: obj/obj.h), checked in
 *   builds without NDEBUG.  Every lock is taken with vr_lock()/vr_unlock(),
 *   never pthread_mutex_lock() directly (the atfork handlers are the
 *   exception: they run outside any call).  At most ONE region lock per
 *   signal level (S16's "one region at a time").  vr_mark (ctx.c)
 *   enforces the ctx limit after vr_region_mark dropped the region lock.
 *   Code that may run in a signal handler checks vr_held() before
 *   blocking on a lock.  The purge path
 *   allocates nothing.  Gauges and counters are atomics in the ctx (no
 *   lock).
 *
 * Async-signal safety: push/pop are plain TLS stores separated by signal
 * fences; vr_held() only reads the calling thread's stack.
 */
#ifndef VR_LOCK_H
#define VR_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>

/* The ranks, in order, with the name a violation prints: one list, so
 * a rank cannot be added without its name (lock.c builds its table from
 * it and checks the count). */
#define VR_LOCK_RANKS(X)                                                                           \
	X(GLOBAL, "global")       /* vr_global_lock: one-time setup, fork.c */                     \
	X(PURGE, "purge")         /* ctx->purge_lock */                                            \
	X(CTX, "ctx")             /* ctx->lock */                                                  \
	X(REGION, "region")       /* region->lock, a shared file's shm->lock */                    \
	X(OBJ_CLASS, "obj class") /* obj.h: a size class's lock */                                 \
	X(OBJ_SPAN, "obj span")   /* obj.h: objs->span_lock */                                     \
	X(SHM, "shm list")        /* shared.c: the list of shared-state mappings */                \
	X(REGISTRY, "registry")   /* registry.c wlock */                                           \
	X(OBJ_LRU, "obj lru")     /* obj.h: a log's lock, objs->rq_lock (leaves) */                \
	X(LOG, "log")             /* log.c: log_lock (leaf) */

#define VR_RANK_ENUM_(id, name) VR_RANK_##id,
enum vr_lock_rank {
	VR_RANK_NONE_ = 0, /* "no lock" in messages */
	VR_LOCK_RANKS(VR_RANK_ENUM_) VR_RANK_NR
};
#undef VR_RANK_ENUM_

/* Kept small: initial-exec TLS of a library that may be dlopen()ed comes
 * out of glibc's static TLS surplus (96 bytes here).  Deeper nesting than
 * VR_HELD_MAX (signal handlers within handlers) is answered "held". */
#define VR_HELD_MAX 8
struct vr_held {
	unsigned n;     /* may exceed VR_HELD_MAX: then vr_held() says yes */
	unsigned level; /* signal handlers of the library active in this thread */
	const pthread_mutex_t *lock[VR_HELD_MAX];
	unsigned char rank[VR_HELD_MAX];
	unsigned char lvl[VR_HELD_MAX]; /* signal nesting level when pushed */
	unsigned nocancel;              /* vr_nocancel_enter depth */
	int cancel_state;               /* the thread's own, while nocancel > 0 */
};
extern __thread struct vr_held vr_tls_held __attribute__((tls_model("initial-exec")));

/*
 * NO CANCELLATION inside the library.  While a thread holds a library
 * lock, and while it runs an application callback for the library (a
 * fault or purge handler, a log function: callback.c), its cancellation
 * is disabled; a deferred pthread_cancel acts at the caller's next
 * cancellation point after the call returns.  Glibc's pwrite, fallocate,
 * close, nanosleep are cancellation points: one acting inside the library
 * unwound the thread with a region lock held (every later call on that
 * region hung), and one acting in a handler's own code left the callback
 * section open for ever (the handler's setter waited for it for ever).
 * One depth for both, so that a lock and a section that do not nest
 * cannot restore each other's state.  The depth is raised before the
 * state is switched and lowered after it is switched back: a signal
 * handler running in between sees a depth above 0 and leaves the state
 * alone.
 */
static inline void vr_nocancel_enter(void)
{
	unsigned d = vr_tls_held.nocancel;
	vr_tls_held.nocancel = d + 1;
	atomic_signal_fence(memory_order_seq_cst);
	if (d == 0)
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &vr_tls_held.cancel_state);
}

static inline void vr_nocancel_leave(void)
{
	if (vr_tls_held.nocancel == 1)
		pthread_setcancelstate(vr_tls_held.cancel_state, NULL);
	atomic_signal_fence(memory_order_seq_cst);
	vr_tls_held.nocancel--;
}

/* does this thread hold (or is it taking) lock m? */
static inline bool vr_held(const pthread_mutex_t *m)
{
	unsigned n = vr_tls_held.n;
	if (n > VR_HELD_MAX)
		return true; /* overflowed: cannot tell, assume the worst */
	for (unsigned i = 0; i < n; i++)
		if (vr_tls_held.lock[i] == m)
			return true;
	return false;
}

/* does this thread hold (or is it taking) any library lock?  Only in a
 * signal handler that interrupted library code: public calls take none
 * at entry, and fault and purge handlers run with none held */
static inline bool vr_held_any(void)
{
	return vr_tls_held.n != 0;
}

/* does this thread hold (or is it taking) a lock of code that a signal
 * handler interrupted (pushed below the current level, or a slot still
 * being filled)?  Unlike vr_held_any(), the calling code's own locks do
 * not count */
static inline bool vr_held_interrupted(void)
{
	unsigned n = vr_tls_held.n;
	if (n > VR_HELD_MAX)
		return true;
	for (unsigned i = 0; i < n; i++)
		if (!vr_tls_held.lock[i] || vr_tls_held.lvl[i] < vr_tls_held.level)
			return true;
	return false;
}

#ifndef NDEBUG
/* top: index of the innermost held lock, or -1 */
void vr_lock_order_violation(const pthread_mutex_t *m, unsigned rank, int top);
#endif

static inline void vr_held_push(const pthread_mutex_t *m, enum vr_lock_rank rank)
{
	unsigned n = vr_tls_held.n;
#ifndef NDEBUG
	/* (a slot whose lock is NULL is being filled by the code this signal
	 * handler interrupted: nothing to compare with) */
	if (n > 0 && n <= VR_HELD_MAX && vr_tls_held.lock[n - 1] &&
	    vr_tls_held.lvl[n - 1] == (unsigned char)vr_tls_held.level &&
	    vr_tls_held.rank[n - 1] >= (unsigned)rank)
		vr_lock_order_violation(m, rank, (int)n - 1);
#endif
	/* claim the slot first, then fill it: a signal handler interrupting
	 * in between pushes above it instead of overwriting it (which lost
	 * this entry: vr_held(m) false while m is held), and sees its lock
	 * NULL (pop leaves slots NULL), i.e. not yet taken, which is true */
	vr_tls_held.n = n + 1;
	atomic_signal_fence(memory_order_seq_cst);
	if (n == 0) /* see NO CANCELLATION */
		vr_nocancel_enter();
	if (n < VR_HELD_MAX) {
		vr_tls_held.rank[n] = (unsigned char)rank;
		vr_tls_held.lvl[n] = (unsigned char)vr_tls_held.level;
		atomic_signal_fence(memory_order_seq_cst);
		vr_tls_held.lock[n] = m;
	}
	atomic_signal_fence(memory_order_seq_cst);
}

/* locks are released in the reverse order of taking them (checked) */
static inline void vr_held_pop(const pthread_mutex_t *m)
{
#ifndef NDEBUG
	unsigned n = vr_tls_held.n;
	if (n == 0 || (n <= VR_HELD_MAX && vr_tls_held.lock[n - 1] != m))
		vr_lock_order_violation(m, 0, (int)n - 1);
#else
	(void)m;
#endif
	unsigned top = vr_tls_held.n - 1;
	atomic_signal_fence(memory_order_seq_cst);
	if (top < VR_HELD_MAX)
		vr_tls_held.lock[top] = NULL; /* free slots stay NULL (push) */
	if (top == 0)
		vr_nocancel_leave();
	atomic_signal_fence(memory_order_seq_cst);
	vr_tls_held.n = top;
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void vr_lock(pthread_mutex_t *m, enum vr_lock_rank rank)
{
	vr_held_push(m, rank);
	pthread_mutex_lock(m);
}

static inline void vr_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	vr_held_pop(m);
}

/* the fault path brackets handler calls with these (order levels) */
static inline void vr_held_enter_signal(void)
{
	vr_tls_held.level++;
	atomic_signal_fence(memory_order_seq_cst);
}
static inline void vr_held_leave_signal(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	vr_tls_held.level--;
}

/* A public call that finds locks held by its own thread at entry runs in
 * an asynchronous signal handler that interrupted library code (the
 * library never calls a public function with a lock held; a fault
 * handler's calls already run at the level the fault path opened): its
 * locks start a new level, like a fault handler's, so that the order
 * check compares them among themselves, not with the interrupted code's
 * (a handler's vr_mark on another ctx's region while its thread was in
 * vr_mark aborted with "lock order violation" in builds without NDEBUG).
 * VR_API_ENTRY at the top of every public call that may take a lock. */
static inline unsigned vr_api_enter(void)
{
	if (!vr_tls_held.n)
		return 0;
	vr_held_enter_signal();
	return 1;
}
static inline void vr_api_leave(unsigned *nested)
{
	if (*nested)
		vr_held_leave_signal();
}
#define VR_API_ENTRY                                                                               \
	unsigned vr_api_nested_ __attribute__((cleanup(vr_api_leave), unused)) = vr_api_enter()

/* The header promises that no vr_* call is a cancellation point.  A call
 * that makes system calls which are (open, read, pread, pwrite, write,
 * close, pthread_join) outside every library lock keeps cancellation off
 * for its whole run (NO CANCELLATION): a pthread_cancel pending at
 * vr_ctx_destroy's join of the monitor unwound it with the ctx taken out
 * of the live list and never freed.  VR_API_NOCANCEL after VR_API_ENTRY
 * in those calls (the slow ones: the hot paths make no such call). */
static inline unsigned vr_api_nocancel_enter(void)
{
	vr_nocancel_enter();
	return 1;
}
static inline void vr_api_nocancel_leave(unsigned *on)
{
	(void)on;
	vr_nocancel_leave();
}
#define VR_API_NOCANCEL                                                                            \
	unsigned vr_api_nocancel_ __attribute__((cleanup(vr_api_nocancel_leave), unused)) =        \
		vr_api_nocancel_enter()

#endif
