/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-notify.c - purge notification (API S37)
 *
 * once: every purged object of a group with a handler is reported once,
 * by the purging thread, already VOLATILE|PURGED; others are not, nor are
 * purges made while the group had no handler.
 * frees: a handler that frees its object, across more purged units than
 * one report batch holds.
 * replace: replacing the handler waits for a call in flight in another
 * thread.
 * destroy_default: vr_group_destroy of the default group (its objects
 * freed, its handler kept) waits for a call of the handler in flight in
 * another thread (it did not wait).
 * concurrent: three threads pin (counting VR_PURGED), write and unpin
 * objects of two groups under a memory limit the monitor's limit watcher
 * enforces (VRANGE_MEMORY_LIMIT), while a fourth purges groups and the
 * ctx: at the end each object was reported exactly as often as it was
 * purged (the VR_PURGED pins, plus one if it is purged now).
 * repin: another thread pins a purged large object while the purging
 * thread reports it; the object must stay purgeable afterwards (a pin
 * that stored its pre-restore state back put a cleared OS_NOTIFY back,
 * and every later purge skipped the object as "not reported yet").
 * again: an object pinned and unpinned between its purge and its report
 * is not purged again, by another thread, while its handler call runs
 * (it was: the reporter cleared OS_NOTIFY before the call).
 * requeue: more objects than a purge run can keep skipped (96) are
 * skipped because their reports are pending; once reported they are
 * purgeable again (they lost their LRU entry for good).
 * logfn: vr_set_log_fn called from a purge handler waits for another
 * thread's call of the log function it replaced (it did not: the
 * callback sections of every kind shared one epoch, and a setter inside
 * any section did not wait).
 * logfn_removed: a debug line whose caller saw a log function set, logged
 * after vr_set_log_fn(NULL) removed it, must go nowhere without
 * VRANGE_DEBUG=1 (it went to stderr).
 * stuck: a limit purge that found only a large object whose report was
 * running (skipped) set the "nothing purgeable" hint; once reported the
 * object is purgeable again, and the next vr_mark must enforce the limit
 * (it skipped it: the reporter's requeue of a large object, unlike a
 * page's, left the hint set).
 * reuse: a handler frees its object; another thread gets the freed
 * handle for a new object, which is purged and reported there (its call
 * held); pinned and unpinned meanwhile, the new object must not be purged
 * again while its call runs (it was: the first reporter's clear of
 * OS_REPORTING, after its handler freed the object, landed on the new
 * object in the same handle).  Small and large objects; the freed handle
 * is reused once the first call returned.
 * destroyed: a handler destroys another group whose purged objects are
 * in the same report batch (the batch keeps that group's memory): after
 * vr_group_destroy its objects are freed, and vr_obj_of of their bytes
 * must return NULL (it returned them, still live).
 * unreported: an object purged by one thread is freed before that
 * thread reports it (its report held by another object's call); a new
 * object, which took its handle, is purged by this thread, whose own
 * report is held until the first thread's report ran: the first thread
 * must not report the new object, whose purge is not its own (it did:
 * the batch named the handle, and the free had cleared OS_NOTIFY, so the
 * handle was reused at once).  Small and large objects; and a small
 * object freed during its call in the first thread, whose page gets a
 * new object purged by this thread (the first thread's report of the
 * page went on to the new object's slot and reported it).
 */
#include "tests.h"

#include <pthread.h>
#include <sys/mman.h>
#include <stdatomic.h>

static size_t P;

/* ---- once ---- */
struct once {
	_Atomic int calls, bad_state, bad_thread;
	pthread_t purger;
	struct vr_obj **objs;
	int n;
	int *seen;
};

static void on_purge(struct vr_obj *o, void *arg)
{
	struct once *w = arg;
	atomic_fetch_add(&w->calls, 1);
	if (vr_obj_status(o) != (VR_STATE_VOLATILE | VR_STATE_PURGED))
		atomic_fetch_add(&w->bad_state, 1);
	if (!pthread_equal(pthread_self(), w->purger))
		atomic_fetch_add(&w->bad_thread, 1);
	for (int i = 0; i < w->n; i++)
		if (w->objs[i] == o)
			w->seen[i]++;
}

static void test_once(void **state)
{
	(void)state;
	enum { N = 200 };
	struct vr_ctx *c;
	struct vr_group *g, *quiet;
	struct vr_obj *o[N], *q[8];
	int seen[N] = { 0 };
	struct once w = { .purger = pthread_self(), .objs = o, .n = N, .seen = seen };
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &g), 0);
	assert_int_equal(vr_group_new(c, 3, &quiet), 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vr_obj_new_in(g, i % 4 ? 40 + (size_t)i : 2 * P, 0, 0, &o[i]), 0);
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		assert_int_equal(vr_obj_new_in(quiet, P, 0, 0, &q[i]), 0);
		assert_int_equal(vr_obj_unpin(q[i]), 0);
	}
	/* purged without a handler: never reported */
	assert_true(vr_group_purge(g, 3 * P) > 0);
	int before = 0;
	bool was[N];
	for (int i = 0; i < N; i++) {
		was[i] = vr_obj_status(o[i]) == (VR_STATE_VOLATILE | VR_STATE_PURGED);
		before += was[i];
	}
	assert_true(before > 0);
	assert_int_equal(vr_group_set_purge_handler(g, on_purge, &w), 0);
	assert_true(vr_ctx_purge(c, SIZE_MAX) > 0);
	assert_int_equal(w.calls, N - before);
	assert_int_equal(w.bad_state, 0);
	assert_int_equal(w.bad_thread, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], was[i] ? 0 : 1);
	for (int i = 0; i < 8; i++) /* purged, in a group without a handler */
		assert_int_equal(vr_obj_status(q[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	vr_ctx_destroy(c);
}

/* ---- frees ---- */
static _Atomic int freed;
static void free_it(struct vr_obj *o, void *arg)
{
	(void)arg;
	vr_obj_free(o);
	atomic_fetch_add(&freed, 1);
}

static void test_frees(void **state)
{
	(void)state;
	enum { NS = 6000, NL = 150 }; /* > 64 pages and > 64 large objects */
	struct vr_ctx *c;
	struct vr_group *g;
	struct vr_obj *o;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 0, &g), 0);
	assert_int_equal(vr_group_set_purge_handler(g, free_it, NULL), 0);
	for (int i = 0; i < NS + NL; i++) {
		assert_int_equal(vr_obj_new_in(g, i < NS ? 64 : P, 16, 0, &o), 0);
		assert_int_equal(vr_obj_unpin(o), 0);
	}
	atomic_store(&freed, 0);
	assert_true(vr_ctx_purge(c, SIZE_MAX) > 0);
	assert_int_equal(freed, NS + NL);
	assert_int_equal(vr_group_stat(g, VR_STAT_OBJECTS), 0);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 0);
	vr_ctx_destroy(c);
}

/* ---- replace ---- */
struct slow {
	_Atomic int entered, left;
};
static void slow_fn(struct vr_obj *o, void *arg)
{
	(void)o;
	struct slow *s = arg;
	atomic_store(&s->entered, 1);
	usleep(200 * 1000);
	atomic_store(&s->left, 1);
}

static void *purge_thread(void *arg)
{
	vr_group_purge(arg, SIZE_MAX);
	return NULL;
}

/* slow_fn becomes g's handler, and a thread's purge of g is inside it */
static pthread_t slow_purge(struct vr_group *g, struct slow *s)
{
	assert_int_equal(vr_group_set_purge_handler(g, slow_fn, s), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, purge_thread, g), 0);
	while (!atomic_load(&s->entered))
		usleep(1000);
	return t;
}

static void test_replace(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *g;
	struct vr_obj *o;
	struct slow s = { 0 };
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 5, &g), 0);
	assert_int_equal(vr_obj_new_in(g, P, 0, 0, &o), 0);
	assert_int_equal(vr_obj_unpin(o), 0);
	pthread_t t = slow_purge(g, &s);
	assert_int_equal(vr_group_set_purge_handler(g, NULL, NULL), 0);
	assert_int_equal(atomic_load(&s.left), 1); /* waited for the call */
	pthread_join(t, NULL);
	vr_ctx_destroy(c);
}

/* vr_group_destroy of the default group frees its objects and keeps its
 * handler, and waits as for any group for a call in flight */
static void test_destroy_default(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_obj *o;
	struct slow s = { 0 };
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	struct vr_group *g = vr_ctx_group(c);
	assert_int_equal(vr_obj_new(c, P, 0, &o), 0);
	assert_int_equal(vr_obj_unpin(o), 0);
	pthread_t t = slow_purge(g, &s);
	vr_group_destroy(g);
	assert_int_equal(atomic_load(&s.left), 1); /* waited for the call */
	pthread_join(t, NULL);
	assert_int_equal(vr_group_stat(g, VR_STAT_OBJECTS), 0);
	vr_ctx_destroy(c);
}

/* ---- concurrent ---- */
#define CN 3000
struct conc {
	struct vr_ctx *c;
	struct vr_group *g[2];
	struct vr_obj *o[CN];
	_Atomic int lock[CN]; /* one worker at a time per object */
	_Atomic uint64_t purged[CN], notified[CN];
	_Atomic bool stop;
	_Atomic bool quiet; /* the purger thread pauses: the limit watcher's turn */
	_Atomic uint64_t seed;
};

static void count_fn(struct vr_obj *o, void *arg)
{
	struct conc *k = arg;
	uint32_t i = *(uint32_t *)vr_obj_extra(o);
	atomic_fetch_add(&k->notified[i], 1);
}

static void *worker(void *arg)
{
	struct conc *k = arg;
	struct vt_rng g;
	vt_seed(&g, atomic_fetch_add(&k->seed, 1));
	while (!atomic_load(&k->stop)) {
		uint32_t i = (uint32_t)vt_below(&g, CN);
		int z = 0;
		if (!atomic_compare_exchange_strong(&k->lock[i], &z, 1))
			continue;
		int rc = vr_obj_pin(k->o[i]);
		if (rc == VR_PURGED)
			atomic_fetch_add(&k->purged[i], 1);
		if (rc >= 0) {
			memset(vr_obj_ptr(k->o[i]), (int)i, vr_obj_size(k->o[i]));
			vr_obj_unpin(k->o[i]);
		}
		atomic_store(&k->lock[i], 0);
	}
	return NULL;
}

static void *purger(void *arg)
{
	struct conc *k = arg;
	for (int n = 0; !atomic_load(&k->stop); n++) {
		if (atomic_load(&k->quiet))
			; /* the workers' re-pins grow usage past the limit */
		else if (n % 3 == 2)
			vr_ctx_purge(k->c, 64 * P);
		else
			vr_group_purge(k->g[n % 3], 32 * P);
		usleep(2000);
	}
	return NULL;
}

static long rss_bytes(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (long)P;
}

static void test_concurrent(void **state)
{
	(void)state;
	struct conc *k = calloc(1, sizeof(*k));
	assert_non_null(k);
	k->seed = 11;
	char lim[32];
	snprintf(lim, sizeof(lim), "%ld", rss_bytes() + (48l << 20));
	setenv("VRANGE_MEMORY_LIMIT", lim, 1);
	setenv("VRANGE_MONITOR", "limit", 1);
	assert_int_equal(vr_ctx_new(0, &k->c), 0);
	unsetenv("VRANGE_MEMORY_LIMIT");
	unsetenv("VRANGE_MONITOR");
	for (int j = 0; j < 2; j++) {
		assert_int_equal(vr_group_new(k->c, 2 + 3 * j, &k->g[j]), 0);
		assert_int_equal(vr_group_set_purge_handler(k->g[j], count_fn, k), 0);
	}
	for (uint32_t i = 0; i < CN; i++) { /* 64 MiB at most written */
		size_t size = i % 2 ? 1000 + i : 8 * P + i;
		assert_int_equal(vr_obj_new_in(k->g[i % 2], size, 4, 0, &k->o[i]), 0);
		*(uint32_t *)vr_obj_extra(k->o[i]) = i;
		assert_int_equal(vr_obj_unpin(k->o[i]), 0);
	}
	pthread_t t[4];
	for (int j = 0; j < 3; j++)
		assert_int_equal(pthread_create(&t[j], NULL, worker, k), 0);
	assert_int_equal(pthread_create(&t[3], NULL, purger, k), 0);
	/* run until the monitor purged too (the limit watcher polls), 3 s
	 * at least, 30 s at most.  After 3 s without a limit purge the
	 * purger thread pauses and this thread commits 64 MiB of its own
	 * memory: the usage counted crosses the limit, which only purging
	 * volatile bytes can answer (the purger, and the budget enforced at
	 * each unpin, kept the usage under the limit alone under load: seen
	 * in two CI legs) */
	char *hog = NULL;
	for (int ms = 0; ms < 30000; ms += 100) {
		usleep(100 * 1000);
		if (ms >= 3000 && vr_ctx_stat(k->c, VR_STAT_LIMIT_PURGES) > 0)
			break;
		if (ms >= 3000 && !hog) {
			atomic_store(&k->quiet, true);
			hog = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			assert_true(hog != MAP_FAILED);
			memset(hog, 1, 64 << 20);
		}
	}
	atomic_store(&k->stop, true);
	for (int j = 0; j < 4; j++)
		pthread_join(t[j], NULL);
	if (hog)
		munmap(hog, 64 << 20);
	assert_true(vr_ctx_stat(k->c, VR_STAT_LIMIT_PURGES) > 0);
	/* calls in flight (the monitor's) are over when these return */
	for (int j = 0; j < 2; j++)
		assert_int_equal(vr_group_set_purge_handler(k->g[j], NULL, NULL), 0);
	uint64_t total = 0;
	for (int i = 0; i < CN; i++) {
		uint64_t want = k->purged[i] +
				(vr_obj_status(k->o[i]) == (VR_STATE_VOLATILE | VR_STATE_PURGED));
		if (k->notified[i] != want)
			fail_msg("object %d: reported %" PRIu64 " times, purged %" PRIu64, i,
				 k->notified[i], want);
		total += want;
	}
	assert_true(total > 0);
	assert_int_equal(vr_group_stat(k->g[0], VR_STAT_PURGES) +
				 vr_group_stat(k->g[1], VR_STAT_PURGES),
			 total);
	vr_ctx_destroy(k->c);
	free(k);
}

/* ---- repin ---- */
struct repin {
	struct vr_obj *o;
	_Atomic int go, done, stop, bad;
};

static void nop_fn(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
}

static void *repinner(void *arg)
{
	struct repin *k = arg;
	while (!atomic_load(&k->stop)) {
		if (!atomic_load(&k->go))
			continue;
		/* pin as soon as the purge shows, while its report may run */
		while (vr_obj_status(k->o) != (VR_STATE_VOLATILE | VR_STATE_PURGED))
			if (atomic_load(&k->stop))
				return NULL;
		if (vr_obj_pin(k->o) != VR_PURGED)
			atomic_store(&k->bad, 1);
		atomic_store(&k->go, 0);
		atomic_store(&k->done, 1);
	}
	return NULL;
}

static void test_repin(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_group *g;
	struct repin k = { 0 };
	pthread_t t;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &g), 0);
	assert_int_equal(vr_group_set_purge_handler(g, nop_fn, NULL), 0);
	assert_int_equal(vr_obj_new_in(g, P, 0, 0, &k.o), 0);
	assert_int_equal(pthread_create(&t, NULL, repinner, &k), 0);
	ssize_t got = (ssize_t)P;
	for (int i = 0; i < 3000 && got == (ssize_t)P; i++) {
		assert_int_equal(vr_obj_unpin(k.o), 0);
		atomic_store(&k.done, 0);
		atomic_store(&k.go, 1);
		got = vr_group_purge(g, SIZE_MAX);
		while (got == (ssize_t)P && !atomic_load(&k.done))
			;
	}
	atomic_store(&k.stop, 1);
	pthread_join(t, NULL);
	if (got != (ssize_t)P) /* one more chance, nothing racing now */
		got = vr_group_purge(g, SIZE_MAX);
	assert_int_equal(got, (ssize_t)P);
	assert_int_equal(atomic_load(&k.bad), 0);
	vr_ctx_destroy(c);
}

/* ---- again ---- */
static struct {
	struct vr_group *g;
	struct vr_obj *o1, *o2;
	_Atomic int go, purged, again;
} A;

static void again_fn(struct vr_obj *o, void *arg)
{
	(void)arg;
	if (o == A.o1) { /* o2's report is pending: pin (refill) and unpin it */
		assert_int_equal(vr_obj_pin(A.o2), VR_PURGED);
		assert_int_equal(vr_obj_unpin(A.o2), 0);
		return;
	}
	atomic_store(&A.go, 1); /* another thread purges the group now */
	for (int i = 0; i < 2000 && !atomic_load(&A.purged); i++)
		usleep(1000);
	if (vr_obj_status(o) & VR_STATE_PURGED)
		atomic_store(&A.again, 1);
}

static void *again_purger(void *arg)
{
	(void)arg;
	while (!atomic_load(&A.go))
		usleep(100);
	vr_group_purge(A.g, SIZE_MAX);
	atomic_store(&A.purged, 1);
	return NULL;
}

static void test_again(void **state)
{
	(void)state;
	struct vr_ctx *c;
	pthread_t t;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &A.g), 0);
	assert_int_equal(vr_group_set_purge_handler(A.g, again_fn, NULL), 0);
	assert_int_equal(vr_obj_new_in(A.g, P, 0, 0, &A.o1), 0);
	assert_int_equal(vr_obj_new_in(A.g, P, 0, 0, &A.o2), 0);
	assert_int_equal(vr_obj_unpin(A.o1), 0); /* older: reported first */
	assert_int_equal(vr_obj_unpin(A.o2), 0);
	assert_int_equal(pthread_create(&t, NULL, again_purger, NULL), 0);
	assert_int_equal(vr_group_purge(A.g, SIZE_MAX), (ssize_t)(2 * P));
	pthread_join(t, NULL);
	assert_true(atomic_load(&A.purged));
	assert_int_equal(atomic_load(&A.again), 0);
	/* the call returned: o2 is purgeable again */
	assert_int_equal(vr_group_set_purge_handler(A.g, NULL, NULL), 0);
	assert_int_equal(vr_group_purge(A.g, SIZE_MAX), (ssize_t)P);
	vr_ctx_destroy(c);
}

/* ---- requeue ---- */
enum { RQ_N = 128 };
static struct {
	struct vr_group *g;
	struct vr_obj *o[RQ_N];
	int depth, done;
} R;

static void requeue_fn(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
	R.depth++;
	if (R.depth == 1 && !R.done) {
		vr_group_purge(R.g, SIZE_MAX); /* the next batch, reported in here */
	} else if (R.depth == 2 && !R.done) {
		R.done = 1;
		/* 126 reports pending: pin and unpin them, then purge: each is
		 * skipped, more than a run keeps */
		for (int i = 0; i < RQ_N; i++) {
			assert_true(vr_obj_pin(R.o[i]) >= 0);
			assert_int_equal(vr_obj_unpin(R.o[i]), 0);
		}
		vr_group_purge(R.g, SIZE_MAX);
	}
	R.depth--;
}

static void test_requeue(void **state)
{
	(void)state;
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &R.g), 0);
	assert_int_equal(vr_group_set_purge_handler(R.g, requeue_fn, NULL), 0);
	for (int i = 0; i < RQ_N; i++) {
		assert_int_equal(vr_obj_new_in(R.g, P, 0, 0, &R.o[i]), 0);
		assert_int_equal(vr_obj_unpin(R.o[i]), 0);
	}
	vr_group_purge(R.g, SIZE_MAX);
	assert_true(R.done);
	assert_int_equal(vr_group_set_purge_handler(R.g, NULL, NULL), 0);
	vr_group_purge(R.g, SIZE_MAX);
	for (int i = 0; i < RQ_N; i++)
		assert_int_equal(vr_obj_status(R.o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(vr_group_stat(R.g, VR_STAT_VOLATILE_BYTES), 0);
	vr_ctx_destroy(c);
}

/* ---- logfn ---- */
static struct {
	_Atomic int in_log, log_done, waited;
} L;
static __thread int slow_logger;

static void slow_log(int prio, const char *msg, void *arg)
{
	(void)prio;
	(void)msg;
	(void)arg;
	if (!slow_logger || atomic_exchange(&L.in_log, 1))
		return;
	usleep(200 * 1000);
	atomic_store(&L.log_done, 1);
}

static void set_log_in_handler(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
	vr_set_log_fn(NULL, NULL);
	atomic_store(&L.waited, atomic_load(&L.log_done) ? 1 : 2);
}

static void *logging_purger(void *arg)
{
	slow_logger = 1;
	vr_ctx_purge(arg, SIZE_MAX); /* logs the purge of its object */
	return NULL;
}

static void test_logfn(void **state)
{
	(void)state;
	struct vr_ctx *c1, *c2;
	struct vr_group *g;
	struct vr_obj *o1, *o2;
	pthread_t t;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c1), 0);
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	assert_int_equal(vr_group_new(c2, 3, &g), 0);
	assert_int_equal(vr_group_set_purge_handler(g, set_log_in_handler, NULL), 0);
	assert_int_equal(vr_obj_new(c1, P, 0, &o1), 0);
	assert_int_equal(vr_obj_unpin(o1), 0);
	assert_int_equal(vr_obj_new_in(g, P, 0, 0, &o2), 0);
	assert_int_equal(vr_obj_unpin(o2), 0);
	vr_set_log_fn(slow_log, NULL);
	assert_int_equal(pthread_create(&t, NULL, logging_purger, c1), 0);
	while (!atomic_load(&L.in_log))
		usleep(1000);
	assert_int_equal(vr_group_purge(g, SIZE_MAX), (ssize_t)P);
	pthread_join(t, NULL);
	vr_set_log_fn(NULL, NULL);
	assert_int_equal(atomic_load(&L.waited), 1);
	vr_ctx_destroy(c1);
	vr_ctx_destroy(c2);
}

/* ---- logfn_removed ---- */
static atomic_bool lr_stop;

static void lr_log(int prio, const char *msg, void *arg)
{
	(void)prio;
	(void)msg;
	(void)arg;
}

/* purges that log a line per object, as fast as they can */
static void *lr_purger(void *arg)
{
	struct vr_ctx *c = arg;
	struct vr_obj *o[8];
	while (!atomic_load(&lr_stop)) {
		for (int i = 0; i < 8; i++) {
			assert_int_equal(vr_obj_new(c, P, 0, &o[i]), 0);
			assert_int_equal(vr_obj_unpin(o[i]), 0);
		}
		vr_ctx_purge(c, SIZE_MAX);
		for (int i = 0; i < 8; i++)
			vr_obj_free(o[i]);
	}
	return NULL;
}

static void test_logfn_removed(void **state)
{
	(void)state;
	const char *d = getenv("VRANGE_DEBUG");
	if (d && *d && strcmp(d, "0") != 0)
		skip(); /* then stderr is where the lines go */
	struct vr_ctx *c;
	pthread_t t[2];
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	int fd = memfd_create("vt-stderr", 0), saved = dup(STDERR_FILENO);
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	atomic_store(&lr_stop, false);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, lr_purger, c), 0);
	/* a line whose caller saw the function set, read after it was
	 * removed: it went to stderr, without VRANGE_DEBUG (a few in a
	 * thousand rounds) */
	off_t len = 0;
	for (int k = 0; k < 4000 && !len; k++) {
		vr_set_log_fn(lr_log, NULL);
		sched_yield();
		vr_set_log_fn(NULL, NULL);
		len = lseek(fd, 0, SEEK_END);
	}
	atomic_store(&lr_stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	char buf[200] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	(void)n;
	close(fd);
	vr_ctx_destroy(c);
	if (len)
		fail_msg("a debug line went to stderr after vr_set_log_fn(NULL): %s", buf);
}

/* ---- stuck ---- */
static struct {
	struct vr_ctx *c;
	int calls;
	ssize_t vol_in_call;
} S;

/* re-volatilise o, then set a limit below it: that purge skips o (its
 * report runs), finds nothing else, and says "nothing purgeable" */
static void stuck_fn(struct vr_obj *o, void *arg)
{
	(void)arg;
	if (S.calls++)
		return;
	assert_int_equal(vr_obj_pin(o), VR_PURGED);
	assert_int_equal(vr_obj_unpin(o), 0);
	assert_int_equal(vr_ctx_set_limit(S.c, P), 0);
	S.vol_in_call = (ssize_t)vr_ctx_stat(S.c, VR_STAT_VOLATILE_BYTES);
}

static void test_stuck(void **state)
{
	(void)state;
	struct vr_region *r;
	struct vr_group *g;
	struct vr_obj *o;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &S.c), 0);
	assert_int_equal(vr_region_new(S.c, "stuck", P, 0, &r), 0);
	/* volatile but never purgeable (no whole page) */
	assert_int_equal(vr_mark(r, 0, 100), VR_INTACT);
	assert_int_equal(vr_group_new(S.c, 4, &g), 0);
	assert_int_equal(vr_group_set_purge_handler(g, stuck_fn, NULL), 0);
	assert_int_equal(vr_obj_new_in(g, 4 * P, 0, 0, &o), 0);
	assert_int_equal(vr_obj_unpin(o), 0);
	assert_int_equal(vr_ctx_purge(S.c, SIZE_MAX), (ssize_t)(4 * P));
	assert_int_equal(S.calls, 1);
	assert_int_equal(S.vol_in_call, (ssize_t)(4 * P + 100)); /* o was not purgeable */
	assert_int_equal(vr_obj_status(o), VR_STATE_VOLATILE);
	/* o is purgeable now: a mark (inside the sub-page range, adding
	 * nothing) returns with the limit kept (S10) */
	assert_int_equal(vr_mark(r, 10, 20), VR_INTACT);
	assert_int_equal(vr_obj_status(o), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_true(vr_ctx_stat(S.c, VR_STAT_VOLATILE_BYTES) <= P);
	assert_int_equal(S.calls, 2);
	vr_ctx_destroy(S.c);
}

/* ---- lost entries ----
 * A page held across a requeue (the reporter's after a call, a free's, a
 * failed pin's) got its LRU entry back, and a purge that popped it before
 * the hold was dropped saw a pin, dropped the entry and cleared QUEUED:
 * the page kept unpinned objects that no purge ever took again (1 stuck
 * page in about 50 rounds of this churn; with a delay in that window, in
 * every round).  Objects are made, pinned, unpinned and freed by two
 * threads while two purge, then everything left is unpinned: full purges
 * take it all */
#define LOST_N 1024
static struct {
	struct vr_group *g;
	struct vr_obj *o[LOST_N];
	pthread_mutex_t lk[LOST_N];
	atomic_int stop;
} LE;

/* now and then slow: objects are freed and pinned during calls */
static void lost_fn(struct vr_obj *o, void *arg)
{
	(void)arg;
	if (rand() % 8 == 0)
		usleep(200);
	(void)vr_obj_status(o);
}

static void *lost_purger(void *arg)
{
	(void)arg;
	while (!atomic_load(&LE.stop))
		vr_group_purge(LE.g, 64 << 10);
	return NULL;
}

static void *lost_churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int it = 0; it < 200000; it++) {
		int i = (int)(rand_r(&seed) % LOST_N);
		pthread_mutex_lock(&LE.lk[i]);
		if (!LE.o[i]) {
			if (vr_obj_new_in(LE.g, 16 + rand_r(&seed) % 3000, 0, 0, &LE.o[i]) == 0)
				CK_EQ(vr_obj_unpin(LE.o[i]), 0);
			else
				LE.o[i] = NULL;
		} else if (rand_r(&seed) % 2) {
			vr_obj_free(LE.o[i]);
			LE.o[i] = NULL;
		} else if (vr_obj_pin(LE.o[i]) >= 0) {
			CK_EQ(vr_obj_unpin(LE.o[i]), 0);
		}
		pthread_mutex_unlock(&LE.lk[i]);
	}
	return NULL;
}

static void test_lost_entry(void **state)
{
	(void)state;
	struct vr_ctx *c;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	for (int i = 0; i < LOST_N; i++)
		pthread_mutex_init(&LE.lk[i], NULL);
	for (int round = 0; round < 16; round++) {
		pthread_t t[4];
		assert_int_equal(vr_group_new(c, 4, &LE.g), 0);
		assert_int_equal(vr_group_set_purge_handler(LE.g, lost_fn, NULL), 0);
		atomic_store(&LE.stop, 0);
		for (int j = 0; j < 2; j++)
			assert_int_equal(pthread_create(&t[j], NULL, lost_purger, NULL), 0);
		for (int j = 2; j < 4; j++)
			assert_int_equal(pthread_create(&t[j], NULL, lost_churn,
							(void *)(uintptr_t)(round * 4 + j)),
					 0);
		for (int j = 2; j < 4; j++)
			pthread_join(t[j], NULL);
		atomic_store(&LE.stop, 1);
		for (int j = 0; j < 2; j++)
			pthread_join(t[j], NULL);
		for (int k = 0; k < 3; k++)
			vr_group_purge(LE.g, SIZE_MAX);
		uint64_t left = vr_group_stat(LE.g, VR_STAT_VOLATILE_BYTES);
		for (int i = 0; i < LOST_N; i++) {
			if (LE.o[i] && !left)
				assert_int_equal(vr_obj_status(LE.o[i]),
						 VR_STATE_VOLATILE | VR_STATE_PURGED);
			LE.o[i] = NULL;
		}
		vr_group_destroy(LE.g);
		if (left)
			fail_msg("round %d: %llu volatile bytes no purge takes", round,
				 (unsigned long long)left);
	}
	vr_ctx_destroy(c);
}

/* a handler that purges on every call: each purge reports its batch of
 * 64 from inside the handler, which nested one level per batch (about
 * 1.3 KiB of stack each) and overflowed the stack; deeper than a few
 * levels the batches are now reported by the outermost call */
#define NEST_OBJS 16384
static struct {
	struct vr_ctx *c;
	long calls, purged_in_calls;
} NS;

static void nest_fn(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
	NS.calls++;
	ssize_t got = vr_ctx_purge(NS.c, SIZE_MAX);
	if (got > 0)
		NS.purged_in_calls += got;
}

static void *nest_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)vr_ctx_purge(NS.c, SIZE_MAX);
}

static void test_nested(void **state)
{
	(void)state;
	struct vr_group *g;
	static struct vr_obj *o[NEST_OBJS];
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &NS.c), 0);
	assert_int_equal(vr_group_new(NS.c, 4, &g), 0);
	assert_int_equal(vr_group_set_purge_handler(g, nest_fn, NULL), 0);
	for (int i = 0; i < NEST_OBJS; i++) {
		assert_int_equal(vr_obj_new_in(g, P, 0, 0, &o[i]), 0);
		assert_int_equal(vr_obj_unpin(o[i]), 0);
	}
	/* a thread whose stack holds far fewer than NEST_OBJS / 64 levels */
	pthread_attr_t at;
	pthread_t t;
	void *ret;
	assert_int_equal(pthread_attr_init(&at), 0);
	assert_int_equal(pthread_attr_setstacksize(&at, 192 << 10), 0);
	assert_int_equal(pthread_create(&t, &at, nest_thread, NULL), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	pthread_attr_destroy(&at);
	/* every object purged and reported once */
	assert_int_equal(NS.calls, NEST_OBJS);
	assert_int_equal((intptr_t)ret + NS.purged_in_calls, (intptr_t)NEST_OBJS * (intptr_t)P);
	for (int i = 0; i < NEST_OBJS; i++)
		assert_int_equal(vr_obj_status(o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	vr_ctx_destroy(NS.c);
}

/* ---- reuse ---- */
static struct {
	struct vr_group *g;
	size_t size;
	struct vr_obj *first, *x;
	_Atomic int calls, go, in, release, x_calls;
} RU;

static void reuse_fn(struct vr_obj *o, void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&RU.calls, 1) == 0) {
		/* the first object, in the main thread: freed, its handle taken
		 * by another thread for a new object that is reported there */
		vr_obj_free(o);
		atomic_store(&RU.go, 1);
		for (int i = 0; i < 2000 && !atomic_load(&RU.in); i++)
			usleep(1000);
		return;
	}
	atomic_fetch_add(&RU.x_calls, 1);
	atomic_store(&RU.in, 1);
	for (int i = 0; i < 2000 && !atomic_load(&RU.release); i++)
		usleep(1000);
}

static void *reuse_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&RU.go))
		usleep(100);
	if (vr_obj_new_in(RU.g, RU.size, 0, 0, &RU.x) == 0) {
		vr_obj_unpin(RU.x);
		vr_group_purge(RU.g, SIZE_MAX); /* X reported here, held */
	}
	atomic_store(&RU.in, 1);
	return NULL;
}

static void reuse_run(size_t size)
{
	struct vr_ctx *c;
	struct vr_obj *y;
	pthread_t t;
	size_t unit = size < P ? P : size;
	memset(&RU, 0, sizeof(RU));
	RU.size = size;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 4, &RU.g), 0);
	assert_int_equal(vr_group_set_purge_handler(RU.g, reuse_fn, NULL), 0);
	assert_int_equal(vr_obj_new_in(RU.g, size, 0, 0, &RU.first), 0);
	assert_int_equal(vr_obj_unpin(RU.first), 0);
	assert_int_equal(pthread_create(&t, NULL, reuse_thread, NULL), 0);
	assert_int_equal(vr_group_purge(RU.g, SIZE_MAX), (ssize_t)unit);
	/* X's call runs in the other thread: pin (refill) and unpin X */
	assert_true(atomic_load(&RU.in));
	assert_non_null(RU.x);
	assert_int_equal(vr_obj_pin(RU.x), VR_PURGED);
	assert_int_equal(vr_obj_unpin(RU.x), 0);
	/* not purged again before its call returned */
	assert_int_equal(vr_group_purge(RU.g, SIZE_MAX), 0);
	assert_int_equal(atomic_load(&RU.x_calls), 1);
	atomic_store(&RU.release, 1);
	pthread_join(t, NULL);
	assert_int_equal(vr_group_set_purge_handler(RU.g, NULL, NULL), 0);
	assert_int_equal(vr_group_purge(RU.g, SIZE_MAX), (ssize_t)unit);
	/* the first object's handle was handed back when its call returned */
	assert_int_equal(vr_obj_new_in(RU.g, size, 0, 0, &y), 0);
	assert_ptr_equal(y, RU.first);
	assert_int_equal(vr_group_stat(RU.g, VR_STAT_OBJECTS), 2);
	assert_int_equal(vr_group_stat(RU.g, VR_STAT_PURGED_BYTES), size);
	vr_ctx_destroy(c);
}

static void test_reuse(void **state)
{
	(void)state;
	reuse_run(64);
	reuse_run(2 * P);
}

/* ---- destroyed ---- */
static struct {
	struct vr_group *a, *b;
	void *bptr, *b2ptr;
	_Atomic int calls;
	struct vr_obj *of_b, *of_b2;
} DG;

static void destroyer_fn(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
	if (atomic_fetch_add(&DG.calls, 1))
		return;
	vr_group_destroy(DG.b); /* not its own group: allowed */
	DG.of_b = vr_obj_of(DG.bptr);
	DG.of_b2 = vr_obj_of(DG.b2ptr);
}

static void nop_b_fn(struct vr_obj *o, void *arg)
{
	(void)o;
	(void)arg;
}

static void test_destroyed(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_obj *a, *b, *b2;
	memset(&DG, 0, sizeof(DG));
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 4, &DG.a), 0);
	assert_int_equal(vr_group_new(c, 4, &DG.b), 0);
	assert_int_equal(vr_group_set_purge_handler(DG.a, destroyer_fn, NULL), 0);
	assert_int_equal(vr_group_set_purge_handler(DG.b, nop_b_fn, NULL), 0);
	assert_int_equal(vr_obj_new_in(DG.a, P, 0, 0, &a), 0);
	assert_int_equal(vr_obj_new_in(DG.b, P, 0, 0, &b), 0);
	assert_int_equal(vr_obj_new_in(DG.b, 100, 0, 0, &b2), 0); /* stays pinned */
	DG.bptr = vr_obj_ptr(b);
	DG.b2ptr = (char *)vr_obj_ptr(b2) + 50;
	assert_int_equal(vr_obj_unpin(a), 0); /* older: reported first */
	assert_int_equal(vr_obj_unpin(b), 0);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(2 * P));
	assert_int_equal(atomic_load(&DG.calls), 1);
	assert_null(DG.of_b);
	assert_null(DG.of_b2);
	assert_null(vr_obj_of(DG.bptr));
	assert_int_equal(vr_ctx_stat(c, VR_STAT_OBJECTS), 1);
	assert_ptr_equal(vr_obj_of(vr_obj_ptr(a)), a);
	vr_ctx_destroy(c);
}

/* ---- unreported ---- */
static struct {
	struct vr_obj *z, *y, *b;
	pthread_t t1, main;
	struct vr_group *g;
	_Atomic int z_in, go, t1_done, b_calls, b_calls_t1, b_calls_main;
} UR;

static void ur_wait(_Atomic int *f)
{
	for (int i = 0; i < 5000 && !atomic_load(f); i++)
		usleep(1000);
}

static void ur_fn(struct vr_obj *o, void *arg)
{
	(void)arg;
	if (o == UR.z && pthread_equal(pthread_self(), UR.t1)) {
		/* T1's report, held before it reaches the freed object */
		atomic_store(&UR.z_in, 1);
		ur_wait(&UR.go);
	} else if (UR.b && o == UR.b) {
		atomic_fetch_add(&UR.b_calls, 1);
		if (pthread_equal(pthread_self(), UR.t1))
			atomic_fetch_add(&UR.b_calls_t1, 1);
		else if (pthread_equal(pthread_self(), UR.main))
			atomic_fetch_add(&UR.b_calls_main, 1);
	} else if (o == UR.y && pthread_equal(pthread_self(), UR.main)) {
		/* the main thread's report, held: T1 reports the rest of its
		 * batch now */
		atomic_store(&UR.go, 1);
		ur_wait(&UR.t1_done);
	}
}

static void *ur_purger(void *arg)
{
	(void)arg;
	vr_group_purge(UR.g, SIZE_MAX); /* Z and A, reported here */
	atomic_store(&UR.t1_done, 1);
	return NULL;
}

/* this thread purges Y, then B (Y's call is held until T1 is done), and
 * T1 is joined */
static void purge_b_here(struct vr_obj *b)
{
	UR.b = b;
	assert_int_equal(vr_obj_unpin(UR.y), 0);
	usleep(1000);
	assert_int_equal(vr_obj_unpin(b), 0);
	assert_true(vr_group_purge(UR.g, SIZE_MAX) > 0);
	assert_int_equal(pthread_join(UR.t1, NULL), 0);
}

static void unreported_run(size_t size)
{
	struct vr_ctx *c;
	struct vr_obj *a;
	memset(&UR, 0, sizeof(UR));
	UR.main = pthread_self();
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &UR.g), 0);
	assert_int_equal(vr_obj_new_in(UR.g, 2 * P, 0, 0, &UR.z), 0);
	assert_int_equal(vr_obj_new_in(UR.g, size, 0, 0, &a), 0);
	assert_int_equal(vr_obj_new_in(UR.g, 2 * P, 0, 0, &UR.y), 0);
	memset(vr_obj_ptr(UR.z), 1, 2 * P);
	memset(vr_obj_ptr(a), 2, size);
	memset(vr_obj_ptr(UR.y), 3, 2 * P);
	assert_int_equal(vr_group_set_purge_handler(UR.g, ur_fn, NULL), 0);
	assert_int_equal(vr_obj_unpin(UR.z), 0);
	assert_int_equal(vr_obj_unpin(a), 0);
	assert_int_equal(pthread_create(&UR.t1, NULL, ur_purger, NULL), 0);
	ur_wait(&UR.z_in);
	assert_true(atomic_load(&UR.z_in));
	/* A is purged, its report pending in T1: freed, and a new object B
	 * (which may take A's handle) purged by this thread */
	assert_int_equal(vr_obj_status(a), VR_STATE_VOLATILE | VR_STATE_PURGED);
	vr_obj_free(a);
	struct vr_obj *b;
	assert_int_equal(vr_obj_new_in(UR.g, size, 0, 0, &b), 0);
	memset(vr_obj_ptr(b), 4, size);
	purge_b_here(b);
	/* T1 never purged B: it must not report it (it did, through A's
	 * handle) */
	assert_int_equal(atomic_load(&UR.b_calls_t1), 0);
	assert_int_equal(atomic_load(&UR.b_calls),
			 vr_obj_status(b) == (VR_STATE_VOLATILE | VR_STATE_PURGED) ? 1 : 0);
	/* B was skipped while A's report was pending: purgeable now, and
	 * reported here */
	vr_group_purge(UR.g, SIZE_MAX);
	assert_int_equal(vr_obj_status(b), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(atomic_load(&UR.b_calls), 1);
	assert_int_equal(atomic_load(&UR.b_calls_main), 1);
	vr_ctx_destroy(c);
}

/* the same with the small object freed during its call in T1: a new
 * object on its page, purged by this thread, is not T1's to report */
static void unreported_in_call(void)
{
	struct vr_ctx *c;
	struct vr_obj *a, *b;
	memset(&UR, 0, sizeof(UR));
	UR.main = pthread_self();
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_group_new(c, 3, &UR.g), 0);
	assert_int_equal(vr_obj_new_in(UR.g, P / 4, 0, 0, &a), 0);
	assert_int_equal(vr_obj_new_in(UR.g, 2 * P, 0, 0, &UR.y), 0);
	memset(vr_obj_ptr(a), 2, P / 4);
	UR.z = a; /* its call in T1 is held */
	assert_int_equal(vr_group_set_purge_handler(UR.g, ur_fn, NULL), 0);
	assert_int_equal(vr_obj_unpin(a), 0);
	assert_int_equal(pthread_create(&UR.t1, NULL, ur_purger, NULL), 0);
	ur_wait(&UR.z_in);
	assert_true(atomic_load(&UR.z_in));
	assert_int_equal(vr_obj_new_in(UR.g, P / 4, 0, 0, &b), 0);
	memset(vr_obj_ptr(b), 4, P / 4);
	vr_obj_free(a); /* during its call */
	purge_b_here(b);
	assert_int_equal(atomic_load(&UR.b_calls_t1), 0);
	vr_group_purge(UR.g, SIZE_MAX);
	assert_int_equal(vr_obj_status(b), VR_STATE_VOLATILE | VR_STATE_PURGED);
	assert_int_equal(atomic_load(&UR.b_calls), 1);
	assert_int_equal(atomic_load(&UR.b_calls_main), 1);
	vr_ctx_destroy(c);
}

static void test_unreported(void **state)
{
	(void)state;
	unreported_run(2 * P);
	unreported_run(P / 4);
	unreported_in_call();
}

int main(void)
{
	P = vt_pg();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_once),       cmocka_unit_test(test_frees),
		cmocka_unit_test(test_replace),    cmocka_unit_test(test_destroy_default),
		cmocka_unit_test(test_concurrent), cmocka_unit_test(test_repin),
		cmocka_unit_test(test_again),      cmocka_unit_test(test_requeue),
		cmocka_unit_test(test_logfn),      cmocka_unit_test(test_logfn_removed),
		cmocka_unit_test(test_stuck),      cmocka_unit_test(test_nested),
		cmocka_unit_test(test_lost_entry), cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_destroyed),  cmocka_unit_test(test_unreported),
	};
	return cmocka_run_group_tests_name("purge notification", tests, NULL, NULL);
}
