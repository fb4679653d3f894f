/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-lock.c - the held-lock stack and the lock-order check (src/base/lock.h)
 *
 * The order check is compiled in builds without NDEBUG (all of CI's);
 * violations abort, so they run as scenarios in a child process.
 */
#include "tests.h"

#include "base/lock.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;

static void sc_wrong_order(void)
{
	vr_lock(&a, VR_RANK_REGION);
	vr_lock(&b, VR_RANK_CTX); /* ctx after region: aborts */
	_exit(0);
}

static void sc_wrong_release(void)
{
	vr_lock(&a, VR_RANK_CTX);
	vr_lock(&b, VR_RANK_REGION);
	vr_unlock(&a); /* not the innermost: aborts */
	_exit(0);
}

static void sc_signal_level(void)
{
	/* a handler's calls start a new level: region, then (in a "signal")
	 * ctx and region again are fine */
	vr_lock(&a, VR_RANK_REGION);
	vr_held_enter_signal();
	vr_lock(&b, VR_RANK_CTX);
	vr_unlock(&b);
	vr_held_leave_signal();
	vr_unlock(&a);
	_exit(0);
}

/* every rank named in the message: the last two ranks, out of order,
 * with stderr in the file the test reads (VT_LOCK_ERR) */
static void sc_named_ranks(void)
{
	CK(dup2(atoi(getenv("VT_LOCK_ERR")), 2) == 2);
	vr_lock(&a, VR_RANK_LOG);
	vr_lock(&b, VR_RANK_OBJ_LRU); /* aborts */
	_exit(0);
}

/* ---- pthread_cancel: a deferred cancel pending in a thread that calls
 * the library acts at a cancellation point inside it (the punch's
 * fallocate, vr_unmark_fill's pwrite) only after its locks are released:
 * it used to unwind the thread with the region lock held, and the next
 * call on the region hung. ---- */
static struct {
	struct vr_ctx *c;
	struct vr_region *r;
	int mode;
	int rc;
} CN;

static void *cancel_worker(void *arg)
{
	(void)arg;
	static uint8_t buf[1 << 16];
	size_t P = vt_pg();
	pthread_cancel(pthread_self()); /* pending, deferred */
	if (CN.mode == 0)
		CN.rc = vr_unmark_fill(CN.r, P, 2 * P, buf);
	else if (CN.mode == 1)
		CN.rc = (int)vr_ctx_purge(CN.c, SIZE_MAX);
	else
		CN.rc = vr_mark(CN.r, 4 * P, 2 * P); /* over the limit: purges */
	pthread_testcancel();
	return NULL;
}

static void *cancel_after(void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	CN.rc = vr_unmark(CN.r, 0, 8 * P);
	return NULL;
}

static void sc_cancel_in_call(void)
{
	size_t P = vt_pg();
	for (CN.mode = 0; CN.mode < 3; CN.mode++) {
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &CN.c), 0);
		CK_EQ(vr_region_new(CN.c, "vt-cancel", 8 * P, 0, &CN.r), 0);
		CK_EQ(vr_mark(CN.r, P, 2 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(CN.c, SIZE_MAX), 2 * P);
		if (CN.mode == 1) { /* something to punch */
			CK_EQ(vr_unmark(CN.r, P, 2 * P), VR_PURGED);
			CK_EQ(vr_mark(CN.r, P, 2 * P), VR_INTACT);
		} else if (CN.mode == 2) {
			CK_EQ(vr_unmark(CN.r, P, 2 * P), VR_PURGED);
			CK_EQ(vr_ctx_set_limit(CN.c, 1), 0);
		}
		pthread_t t;
		void *ret = NULL;
		CK_EQ(pthread_create(&t, NULL, cancel_worker, NULL), 0);
		CK_EQ(pthread_join(t, &ret), 0);
		CK(ret == PTHREAD_CANCELED);
		CK(CN.rc >= 0, "(mode %d: %d)", CN.mode, CN.rc);
		/* the region's lock must be free again */
		CN.rc = -1;
		CK_EQ(pthread_create(&t, NULL, cancel_after, NULL), 0);
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += 5;
		CK(pthread_timedjoin_np(t, NULL, &dl) == 0,
		   "(mode %d: vr_unmark hangs after the cancelled call)", CN.mode);
		CK(CN.rc == VR_INTACT || CN.rc == VR_PURGED, "(mode %d: %d)", CN.mode, CN.rc);
		vr_ctx_destroy(CN.c);
	}
	/* the thread's own state is back after the lock: cancellation
	 * enabled, or still disabled when it was */
	int old;
	vr_lock(&a, VR_RANK_REGION);
	CK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old), 0);
	CK_EQ(old, PTHREAD_CANCEL_DISABLE);
	CK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL), 0);
	vr_unlock(&a);
	CK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old), 0);
	CK_EQ(old, PTHREAD_CANCEL_ENABLE);
	CK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL), 0);
	vr_lock(&a, VR_RANK_REGION);
	vr_unlock(&a);
	CK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old), 0);
	CK_EQ(old, PTHREAD_CANCEL_DISABLE);
	_exit(0);
}

/* ---- the same in a fault handler: a cancel pending when the handler
 * runs a cancellation point of its own (here nanosleep) used to unwind
 * the thread out of the signal handler with its callback section open,
 * and replacing the handler then waited for ever.  Now the cancel acts
 * after the access, at the thread's next cancellation point. ---- */
static int cf_calls;

static int cancel_fault_fn(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	(void)addr;
	(void)arg;
	cf_calls++;
	struct timespec ts = { 0, 1000 };
	nanosleep(&ts, NULL); /* a cancellation point */
	return vr_unmark(r, off, len) >= 0 ? VR_FAULT_RETRY : VR_FAULT_SIGBUS;
}

static void *cancel_fault_worker(void *arg)
{
	volatile uint8_t *p = arg;
	pthread_cancel(pthread_self()); /* pending, deferred */
	CN.rc = p[0];                   /* faults: the handler runs, then the read */
	CN.mode = 1;                    /* got here: the cancel did not act in the handler */
	pthread_testcancel();
	return NULL;
}

static void *cancel_fault_clear(void *arg)
{
	(void)arg;
	CN.rc = vr_region_set_fault_handler(CN.r, NULL, NULL);
	return NULL;
}

static void sc_cancel_in_handler(void)
{
	size_t P = vt_pg();
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &CN.c), 0);
	CK_EQ(vr_region_new(CN.c, "vt-cancel-fault", 4 * P, 0, &CN.r), 0);
	uint8_t *base = vr_region_base(CN.r);
	memset(base, 7, 4 * P);
	CK_EQ(vr_region_set_fault_handler(CN.r, cancel_fault_fn, NULL), 0);
	CK_EQ(vr_mark(CN.r, P, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(CN.c, SIZE_MAX), P);
	pthread_t t;
	void *ret = NULL;
	CN.mode = 0;
	CN.rc = -1;
	CK_EQ(pthread_create(&t, NULL, cancel_fault_worker, base + P), 0);
	CK_EQ(pthread_join(t, &ret), 0);
	CK(ret == PTHREAD_CANCELED);
	CK_EQ(cf_calls, 1);
	CK(CN.mode == 1, "(the cancel acted inside the fault handler)");
	CK_EQ(CN.rc, 0); /* the refilled page reads zero */
	/* no callback section left open: replacing the handler returns */
	CN.rc = -1;
	CK_EQ(pthread_create(&t, NULL, cancel_fault_clear, NULL), 0);
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 5;
	CK(pthread_timedjoin_np(t, NULL, &dl) == 0, "(replacing the fault handler hangs)");
	CK_EQ(CN.rc, 0);
	vr_ctx_destroy(CN.c);
	_exit(0);
}

/* ---- review: "no vr_* call is a cancellation point" held only while a
 * lock or a callback section was held.  Calls that make cancellation
 * points outside every lock (vr_ctx_new's monitor files, vr_ctx_destroy's
 * join of the monitor, a shared file's tail pread/pwrite, adopt's
 * /proc/self/smaps, vr_region_fill's pwrite, a chunk's close, a
 * VRANGE_DEBUG line's write) and a faulting thread waiting for another's
 * regeneration (nanosleep in the SIGSEGV handler) were unwound there: a
 * vr_ctx_destroy cancelled in its join left the ctx out of the live list,
 * never freed.  Each case: a thread with a deferred cancel pending makes
 * the call; it must return, and the cancel act at the next cancellation
 * point after it. ---- */
enum { NSLOW = 10 };
static struct {
	struct vr_ctx *c;
	struct vr_region *r, *sh;
	struct vr_obj *o;
	struct vr_group *g;
	void *span;
	int which, returned;
	atomic_int in_handler;
} SL;

static int slow_fault_fn(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	(void)addr, (void)arg;
	atomic_store(&SL.in_handler, 1);
	struct timespec ts = { 0, 100 * 1000 * 1000 }; /* the other thread waits */
	nanosleep(&ts, NULL);
	return vr_unmark(r, off, len) >= 0 ? VR_FAULT_RETRY : VR_FAULT_SIGBUS;
}

static void *slow_toucher(void *arg)
{
	(void)arg;
	(void)*(volatile uint8_t *)vr_region_base(SL.r);
	return NULL;
}

static void *slow_worker(void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	/* nothing of the frame's address taken (static): ASan's stack
	 * redzones are not cleared by the cancel's unwind (as cancel_worker) */
	static struct vr_region *r;
	static uint8_t buf[64] = { 1 };
	pthread_cancel(pthread_self()); /* pending, deferred */
	switch (SL.which) {
	case 0:
		CK_EQ(vr_ctx_new(0, &SL.c), 0);
		break;
	case 1:
		vr_ctx_destroy(SL.c);
		break;
	case 2:
		CK_EQ(vr_region_new(SL.c, "vt-slow", P, VR_REGION_SHARED, &SL.sh), 0);
		break;
	case 3:
		CK_EQ(vr_region_from_fd(SL.c, vr_region_fd(SL.sh), 0, &r), 0);
		vr_region_destroy(r);
		break;
	case 4:
		CK_EQ(vr_region_adopt(SL.c, SL.span, 4 * P, 0, &r), 0);
		vr_region_destroy(r);
		break;
	case 5:
		CK_EQ(vr_region_fill(SL.r, 0, buf, sizeof(buf)), 0);
		break;
	case 6:
		vr_obj_free(SL.o); /* its chunk's last object */
		break;
	case 7:
		vr_group_destroy(SL.g);
		break;
	case 8:
		CK(vr_ctx_notify_pressure(SL.c, VR_PRESSURE_MODERATE) >= 0);
		break;
	case 9: /* waits in the fault path for slow_toucher's handler call */
		while (!atomic_load(&SL.in_handler))
			sched_yield();
		CK_EQ(*(volatile uint8_t *)vr_region_base(SL.r), 0);
		break;
	}
	SL.returned = 1;
	pthread_testcancel();
	return NULL;
}

static void sc_cancel_slow_calls(void)
{
	size_t P = vt_pg();
	SL.span = mmap(NULL, 4 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(SL.span != MAP_FAILED);
	pthread_t t2 = 0;
	for (SL.which = 0; SL.which < NSLOW; SL.which++) {
		switch (SL.which) {
		case 1: /* one of its own, with its monitor thread */
			if (SL.c)
				vr_ctx_destroy(SL.c);
			CK_EQ(vr_ctx_new(0, &SL.c), 0);
			break;
		case 2: /* case 1 destroyed it */
			CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &SL.c), 0);
			break;
		case 3:
		case 4:
		case 5:
			CK_EQ(vr_region_new(SL.c, "vt-slow", P, 0, &SL.r), 0);
			break;
		case 6:
			CK_EQ(vr_obj_new(SL.c, 3 * P, 0, &SL.o), 0);
			break;
		case 7:
			CK_EQ(vr_group_new(SL.c, 1, &SL.g), 0);
			CK_EQ(vr_obj_new_in(SL.g, 3 * P, 0, 0, &SL.o), 0);
			break;
		case 8:
			CK_EQ(vr_region_new(SL.c, "vt-slow", 2 * P, 0, &SL.r), 0);
			CK_EQ(vr_mark(SL.r, 0, 2 * P), VR_INTACT);
			break;
		case 9:
			CK_EQ(vr_region_new(SL.c, "vt-slow", P, 0, &SL.r), 0);
			CK_EQ(vr_region_set_fault_handler(SL.r, slow_fault_fn, NULL), 0);
			CK_EQ(vr_mark(SL.r, 0, P), VR_INTACT);
			CK_EQ(vr_ctx_purge(SL.c, SIZE_MAX), P);
			CK_EQ(pthread_create(&t2, NULL, slow_toucher, NULL), 0);
			break;
		}
		SL.returned = 0;
		pthread_t t;
		void *ret = NULL;
		CK_EQ(pthread_create(&t, NULL, slow_worker, NULL), 0);
		CK_EQ(pthread_join(t, &ret), 0);
		CK(ret == PTHREAD_CANCELED);
		CK(SL.returned, "(case %d: the cancel acted inside the call)", SL.which);
		if (SL.which == 9)
			CK_EQ(pthread_join(t2, NULL), 0);
	}
	vr_ctx_destroy(SL.c);
	_exit(0);
}

/* ---- asynchronous signal handlers that call the library (vrange.h:
 * "every function may be called from any thread at any time"; only a
 * call on the region the interrupted code uses is -EDEADLK).  A sender
 * thread floods the main thread with SIGUSR1 while it loops on region
 * A; the handler calls the library on something else. ---- */
static struct vr_region *sig_a, *sig_b;
static volatile sig_atomic_t sig_n, sig_bad;
static pthread_t sig_main;
static atomic_int sig_stop;

static void *sig_sender(void *x)
{
	(void)x;
	while (!atomic_load(&sig_stop)) {
		pthread_kill(sig_main, SIGUSR1);
		for (volatile int k = 0; k < 200; k++)
			;
	}
	return NULL;
}

static void sig_flood(void (*handler)(int), void (*loop)(void), int signals)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	sig_main = pthread_self();
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, sig_sender, NULL), 0);
	/* signals handled, or 8 s on a loaded machine (the scenario's
	 * alarm is 20 s), with at least a thousand handled */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		loop();
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while (sig_n < signals && (sig_n < 1000 || t1.tv_sec - t0.tv_sec < 8));
	atomic_store(&sig_stop, 1);
	pthread_join(t, NULL);
	signal(SIGUSR1, SIG_IGN);
}

/* the handler marks a region of another ctx while the main thread is in
 * vr_mark/vr_unmark: the handler's region lock came after the
 * interrupted code's at one level, a "lock order violation" abort */
static void other_handler(int sig)
{
	(void)sig;
	if (vr_mark(sig_b, 0, 100) < 0 || vr_unmark(sig_b, 0, 100) < 0)
		sig_bad++;
	sig_n++;
}

static void other_loop(void)
{
	vr_mark(sig_a, 0, 100);
	vr_unmark(sig_a, 0, 100);
}

static void sc_async_other_region(void)
{
	struct vr_ctx *c1, *c2;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c1), 0);
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	CK_EQ(vr_region_new(c1, "a", 1 << 20, 0, &sig_a), 0);
	CK_EQ(vr_region_new(c2, "b", 1 << 20, 0, &sig_b), 0);
	sig_flood(other_handler, other_loop, 20000);
	CK_EQ(sig_bad, 0);
	vr_ctx_destroy(c1);
	vr_ctx_destroy(c2);
	_exit(0);
}

/* the handler takes log_lock (the last rank: never an order issue) while
 * the main thread loops vr_status(A).  A signal between vr_held_push's
 * slot write and its n++ overwrote A's slot: vr_held(A) false while A
 * was held (and the order check aborted at A's release) */
static void slot_handler(int sig)
{
	(void)sig;
	vr_set_log_fn(NULL, NULL);
	sig_n++;
}

static void slot_loop(void)
{
	vr_status(sig_a, 0, 100);
	if (vr_tls_held.n != 0)
		sig_bad++;
}

static void sc_async_slot(void)
{
	struct vr_ctx *c;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	CK_EQ(vr_region_new(c, "a", 1 << 20, 0, &sig_a), 0);
	sig_flood(slot_handler, slot_loop, 200000);
	CK_EQ(sig_bad, 0);
	vr_ctx_destroy(c);
	_exit(0);
}

/* the handler pins (then unpins) an object that the interrupted code of
 * the same thread is purging (vr_ctx_purge) or restoring (vr_obj_pin):
 * -EDEADLK or a pin, never a wait for itself (it spun on the claim the
 * interrupted purge holds until the handler returns, for ever) */
static struct vr_obj *sig_o;
static volatile sig_atomic_t sig_dead;

static void pin_handler(int sig)
{
	(void)sig;
	int r = vr_obj_pin(sig_o);
	if (r == -EDEADLK)
		sig_dead++;
	else if (r < 0)
		sig_bad++;
	else
		vr_obj_unpin(sig_o);
	sig_n++;
}

static struct vr_ctx *sig_c;

static void pin_loop(void)
{
	vr_obj_unpin(sig_o);
	vr_ctx_purge(sig_c, SIZE_MAX);
	vr_obj_pin(sig_o);
}

static void async_pin(size_t size)
{
	alarm(20); /* the hang: killed by SIGALRM */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sig_c), 0);
	CK_EQ(vr_obj_new(sig_c, size, 0, &sig_o), 0);
	sig_flood(pin_handler, pin_loop, 1000);
	CK_EQ(sig_bad, 0);
	CK(sig_dead > 0, "no signal landed in a purge");
	vr_ctx_destroy(sig_c);
	_exit(0);
}

static void sc_async_pin_large(void)
{
	async_pin(1 << 20);
}

static void sc_async_pin_small(void)
{
	async_pin(2000);
}

/* the handler reads VR_STAT_FOOTPRINT, which walks the region list and
 * the arenas' chunks, while the main thread creates and destroys
 * regions and objects of the same ctx: it waited for ever for the list
 * or span lock its own thread held (vrange.h: no call waits for a lock
 * its own thread holds); now it returns 0 then */
static void footprint_handler(int sig)
{
	(void)sig;
	(void)vr_ctx_stat(sig_c, VR_STAT_FOOTPRINT);
	sig_n++;
}

static void footprint_loop(void)
{
	struct vr_region *r;
	struct vr_obj *o;
	if (vr_region_new(sig_c, "fp", 1 << 16, 0, &r) == 0)
		vr_region_destroy(r);
	if (vr_obj_new(sig_c, 1 << 16, 0, &o) == 0)
		vr_obj_free(o);
}

static void sc_async_footprint(void)
{
	alarm(20); /* the hang: killed by SIGALRM */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sig_c), 0);
	sig_flood(footprint_handler, footprint_loop, 20000);
	vr_ctx_destroy(sig_c);
	_exit(0);
}

/* the handler purges (vr_ctx_purge, vr_mark over the limit) while the
 * main thread is in vr_mark/vr_unmark on region A of the same ctx and
 * another thread purges: that purge holds the purge lock and waits for
 * A's lock, which the interrupted call holds, while the handler waited
 * for the purge lock, for ever.  Now -EDEADLK (or a purge) */
static struct vr_region *cross_b;

static void cross_handler(int sig)
{
	(void)sig;
	ssize_t n = vr_ctx_purge(sig_c, 4096);
	int m = vr_mark(cross_b, 0, 2 * 4096);
	/* (the main thread's own marks purge too, over B's lock) */
	int u = vr_unmark(cross_b, 0, 2 * 4096);
	if ((n < 0 && n != -EDEADLK) || (m < 0 && m != -EDEADLK) || (u < 0 && u != -EDEADLK))
		sig_bad++;
	sig_n++;
}

static void cross_loop(void)
{
	for (size_t k = 0; k < 16; k++)
		vr_mark(sig_a, k * 2 * 4096, 4096);
	for (size_t k = 0; k < 16; k++)
		vr_unmark(sig_a, k * 2 * 4096, 4096);
}

static void *cross_purger(void *x)
{
	(void)x;
	while (!atomic_load(&sig_stop)) {
		vr_mark(cross_b, 4 * 4096, 4 * 4096);
		vr_ctx_purge(sig_c, SIZE_MAX);
		vr_unmark(cross_b, 4 * 4096, 4 * 4096);
	}
	return NULL;
}

static void sc_async_purge_cross(void)
{
	alarm(20); /* the hang: killed by SIGALRM */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sig_c), 0);
	CK_EQ(vr_region_new(sig_c, "a", 64 * 4096, 0, &sig_a), 0);
	CK_EQ(vr_region_new(sig_c, "b", 64 * 4096, 0, &cross_b), 0);
	CK_EQ(vr_ctx_set_limit(sig_c, 4096), 0);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, cross_purger, NULL), 0);
	sig_flood(cross_handler, cross_loop, 20000);
	pthread_join(t, NULL);
	CK_EQ(sig_bad, 0);
	vr_ctx_destroy(sig_c);
	_exit(0);
}

/* the handler reads a gauge, which syncs the shared files' state under
 * the region list's lock, while the main thread allocates objects (an
 * arena's span lock) and another thread reads the footprint (the list's
 * lock, then that span lock): the handler waited for the list held by
 * the reader, the reader for the span lock held by the interrupted call */
static void *gauge_reader(void *x)
{
	(void)x;
	while (!atomic_load(&sig_stop))
		(void)vr_ctx_stat(sig_c, VR_STAT_FOOTPRINT);
	return NULL;
}

static void gauge_handler(int sig)
{
	(void)sig;
	(void)vr_ctx_stat(sig_c, VR_STAT_VOLATILE_BYTES);
	sig_n++;
}

static void gauge_loop(void)
{
	struct vr_obj *o;
	if (vr_obj_new(sig_c, 1 << 16, 0, &o) == 0)
		vr_obj_free(o);
}

static void sc_async_gauge_cross(void)
{
	alarm(20); /* the hang: killed by SIGALRM */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sig_c), 0);
	CK_EQ(vr_region_new(sig_c, "s", 1 << 16, VR_REGION_SHARED, &sig_a), 0);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, gauge_reader, NULL), 0);
	sig_flood(gauge_handler, gauge_loop, 20000);
	pthread_join(t, NULL);
	vr_ctx_destroy(sig_c);
	_exit(0);
}

/* the handler allocates an object while the main thread purges the same
 * group, whose objects it requeues under the group's object queue lock:
 * the allocation's reserve of that queue waited for the lock its own
 * thread held, for ever.  Now -EDEADLK (or an object) */
static struct vr_obj *rq_objs[64];
static size_t rq_n;

static void rq_handler(int sig)
{
	(void)sig;
	struct vr_obj *o;
	int r = rq_n < sizeof(rq_objs) / sizeof(rq_objs[0]) ? vr_obj_new(sig_c, 16, 0, &o)
							    : -EDEADLK;
	if (r == 0)
		rq_objs[rq_n++] = o; /* (not freed here: vrange.h, vr_obj_free) */
	else if (r != -EDEADLK)
		sig_bad++;
	sig_n++;
}

static void rq_loop(void)
{
	vr_obj_unpin(sig_o);
	vr_ctx_purge(sig_c, SIZE_MAX);
	vr_obj_pin(sig_o);
	/* the handler's objects, freed outside it (signal blocked) */
	sigset_t m, old;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &m, &old);
	for (size_t i = 0; i < rq_n; i++)
		vr_obj_free(rq_objs[i]);
	rq_n = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void sc_async_obj_queue(void)
{
	alarm(20); /* the hang: killed by SIGALRM */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sig_c), 0);
	CK_EQ(vr_obj_new(sig_c, 2000, 0, &sig_o), 0);
	sig_flood(rq_handler, rq_loop, 200000);
	CK_EQ(sig_bad, 0);
	for (size_t i = 0; i < rq_n; i++)
		vr_obj_free(rq_objs[i]);
	vr_ctx_destroy(sig_c);
	_exit(0);
}

/* the handler allocates in the size class whose page the interrupted
 * purge has claimed: a log function raises SIGUSR1 when the purge's first
 * page is discarded, while the second page of its batch (which holds the
 * class's only free slot) is still claimed.  The allocation waited for
 * that claim, which is released only after the handler returns: for ever.
 * Now -EDEADLK */
static volatile sig_atomic_t claim_armed, claim_r = 1;

static void claim_handler(int sig)
{
	(void)sig;
	struct vr_obj *o;
	claim_r = vr_obj_new(sig_c, 2000, 0, &o);
	if (claim_r == 0)
		vr_obj_free(o);
}

static void claim_log(int prio, const char *line, void *arg)
{
	(void)prio;
	(void)arg;
	if (claim_armed && strstr(line, "purged object unit")) {
		claim_armed = 0;
		raise(SIGUSR1);
	}
}

static void sc_async_obj_claimed(void)
{
	alarm(20); /* the hang: killed by SIGALRM */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sig_c), 0);
	struct vr_obj *o[4];
	for (int i = 0; i < 4; i++)
		CK_EQ(vr_obj_new(sig_c, 2000, 0, &o[i]), 0);
	/* the premise: two objects on each of two pages that follow */
	uintptr_t pg[4];
	for (int i = 0; i < 4; i++)
		pg[i] = (uintptr_t)vr_obj_ptr(o[i]) / (uintptr_t)sysconf(_SC_PAGESIZE);
	CK(pg[0] == pg[1] && pg[2] == pg[3] && pg[2] == pg[0] + 1, "layout: %lx %lx %lx %lx",
	   (unsigned long)pg[0], (unsigned long)pg[1], (unsigned long)pg[2], (unsigned long)pg[3]);
	vr_obj_free(o[2]); /* the class's first free slot: on the second page */
	CK_EQ(vr_obj_unpin(o[0]), 0);
	CK_EQ(vr_obj_unpin(o[1]), 0);
	CK_EQ(vr_obj_unpin(o[3]), 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = claim_handler;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	vr_set_log_fn(claim_log, NULL);
	claim_armed = 1;
	CK(vr_ctx_purge(sig_c, SIZE_MAX) >= 2 * 4096, "purge");
	vr_set_log_fn(NULL, NULL);
	CK(claim_armed == 0, "no page was purged");
	CK_EQ(claim_r, -EDEADLK);
	CK_EQ(vr_obj_pin(o[3]), VR_PURGED);
	vr_ctx_destroy(sig_c);
	_exit(0);
}

static const struct vt_scenario scenarios[] = {
	{ "async_footprint", sc_async_footprint },
	{ "async_gauge_cross", sc_async_gauge_cross },
	{ "async_obj_queue", sc_async_obj_queue },
	{ "async_obj_claimed", sc_async_obj_claimed },
	{ "async_purge_cross", sc_async_purge_cross },
	{ "async_pin_large", sc_async_pin_large },
	{ "async_pin_small", sc_async_pin_small },
	{ "async_other_region", sc_async_other_region },
	{ "async_slot", sc_async_slot },
	{ "named_ranks", sc_named_ranks },
	{ "wrong_order", sc_wrong_order },
	{ "wrong_release", sc_wrong_release },
	{ "signal_level", sc_signal_level },
	{ "cancel_in_call", sc_cancel_in_call },
	{ "cancel_in_handler", sc_cancel_in_handler },
	{ "cancel_slow_calls", sc_cancel_slow_calls },
};

static void test_held_stack(void **state)
{
	(void)state;
	assert_false(vr_held(&a));
	vr_lock(&a, VR_RANK_CTX);
	assert_true(vr_held(&a));
	assert_false(vr_held(&b));
	vr_lock(&b, VR_RANK_REGION);
	assert_true(vr_held(&a));
	assert_true(vr_held(&b));
	vr_unlock(&b);
	/* the inner unlock restores, it does not clear */
	assert_true(vr_held(&a));
	assert_false(vr_held(&b));
	vr_unlock(&a);
	assert_false(vr_held(&a));
	assert_int_equal(vr_tls_held.n, 0);
}

static void test_overflow_is_held(void **state)
{
	(void)state;
	pthread_mutex_t m[VR_HELD_MAX + 2];
	for (int i = 0; i < VR_HELD_MAX + 2; i++) {
		pthread_mutex_init(&m[i], NULL);
		vr_held_enter_signal(); /* each at its own level: no order issue */
		vr_lock(&m[i], VR_RANK_REGION);
	}
	/* deeper than the stack: "held" for anything, never a false "free" */
	assert_true(vr_held(&a));
	for (int i = VR_HELD_MAX + 1; i >= 0; i--) {
		vr_unlock(&m[i]);
		vr_held_leave_signal();
	}
	assert_false(vr_held(&a));
}

static void test_order_checked(void **state)
{
	(void)state;
#ifdef NDEBUG
	skip();
#endif
	vt_assert_killed_by(vt_run_scenario("wrong_order"), SIGABRT);
	vt_assert_killed_by(vt_run_scenario("wrong_release"), SIGABRT);
	vt_assert_exit_ok(vt_run_scenario("signal_level"));
}

static void test_violation_names_ranks(void **state)
{
	(void)state;
#ifdef NDEBUG
	skip();
#endif
	int fd = memfd_create("vt-lock-err", 0);
	assert_true(fd >= 0);
	char buf[512];
	snprintf(buf, sizeof(buf), "%d", fd);
	setenv("VT_LOCK_ERR", buf, 1);
	vt_assert_killed_by(vt_run_scenario("named_ranks"), SIGABRT);
	unsetenv("VT_LOCK_ERR");
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	assert_true(n > 0);
	buf[n] = 0;
	if (!strstr(buf, "taking obj lru lock") || !strstr(buf, "holding log lock"))
		fail_msg("the message names a rank wrongly: %s", buf);
}

static void test_async_handler_calls(void **state)
{
	(void)state;
	vt_assert_exit_ok(vt_run_scenario("async_other_region"));
	vt_assert_exit_ok(vt_run_scenario("async_slot"));
	vt_assert_exit_ok(vt_run_scenario("async_pin_large"));
	vt_assert_exit_ok(vt_run_scenario("async_pin_small"));
	vt_assert_exit_ok(vt_run_scenario("async_footprint"));
	vt_assert_exit_ok(vt_run_scenario("async_purge_cross"));
	vt_assert_exit_ok(vt_run_scenario("async_gauge_cross"));
	vt_assert_exit_ok(vt_run_scenario("async_obj_queue"));
	vt_assert_exit_ok(vt_run_scenario("async_obj_claimed"));
}

static void test_cancel_in_call(void **state)
{
	(void)state;
	vt_assert_exit_ok(vt_run_scenario("cancel_in_call"));
	vt_assert_exit_ok(vt_run_scenario("cancel_in_handler"));
	vt_assert_exit_ok(vt_run_scenario("cancel_slow_calls"));
	/* the log lines' write */
	vt_assert_exit_ok(vt_run_scenario_trap("cancel_slow_calls", "mprotect", "VRANGE_DEBUG"));
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 20);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_held_stack),
		cmocka_unit_test(test_overflow_is_held),
		cmocka_unit_test(test_order_checked),
		cmocka_unit_test(test_violation_names_ranks),
		cmocka_unit_test(test_async_handler_calls),
		cmocka_unit_test(test_cancel_in_call),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
