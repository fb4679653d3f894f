/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-obj-race.c - concurrent vr_obj_pin / vr_obj_unpin (one racer:
 * vr_obj_unpin_many) of ONE handle while other threads purge (API S16,
 * S20, S9; issue 21, item 6)
 *
 * Only vr_obj_free may not race with other calls on a handle (S20), so
 * two threads pinning and unpinning the same object while two others
 * call vr_ctx_purge must never fault inside the library, and every pin
 * must be exact.  The scenario runs in rounds:
 *   race   the two racers pin and unpin the object (a 64-byte object on a
 *          page of its own, or a one-page object) as fast as they can,
 *          touching none of its bytes (the other racer may unpin it at
 *          any moment, and the page may then be trapped); every pin
 *          returns VR_INTACT or VR_PURGED, every unpin 0;
 *   check  the main thread pins it: VR_INTACT with the round's pattern
 *          when no pin of the round reported VR_PURGED, all zero when one
 *          did or this pin does; the gauges then show nothing volatile
 *          or purged (52 other objects stay pinned all along); it writes
 *          the next round's pattern and unpins.
 * The purgers purge everything all the time.  A SIGBUS kills the
 * scenario: the library touched a trapped page (the bug: a pin that had
 * set PINNED zeroed a purged object after a concurrent unpin had dropped
 * the page's pin count and a purge had trapped the page again).
 * No object fault handler is installed: it would hide that fault.
 * One run per trap backend (VRANGE_TRAP), for VT_RACE_MS milliseconds
 * (default 1500) each.
 *
 * of_reuse: vr_obj_of (lock-free, callable at any time) on the bytes of
 * small and large objects that two other threads free and allocate all
 * the time: it returns NULL or an object holding the address, and under
 * TSan reports no data race (it read the handle's size and a large
 * handle's address with plain loads that vr_obj_new's plain stores to a
 * reused handle raced with).
 */
#include "tests.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#define NOTHERS 52
#define NROUND 2000 /* pin+unpin pairs per racer per round */

static struct {
	struct vr_ctx *c;
	struct vr_obj *o;
	size_t size;
	pthread_barrier_t start, end;
	_Atomic bool stop, quit;
	_Atomic uint64_t purged_pins, intact_pins, purges;
} G;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* racer 0 unpins with vr_obj_unpin, racer 1 with vr_obj_unpin_many of
 * the object twice (the second a no-op, or the first if racer 0 came in
 * between) */
static void *racer(void *arg)
{
	bool many = arg != NULL;
	struct vr_obj *twice[2] = { G.o, G.o };
	for (;;) {
		pthread_barrier_wait(&G.start);
		if (atomic_load(&G.quit))
			return NULL;
		for (int i = 0; i < NROUND; i++) {
			int rc = vr_obj_pin(G.o);
			CK(rc == VR_INTACT || rc == VR_PURGED, "pin: %d", rc);
			atomic_fetch_add(rc == VR_PURGED ? &G.purged_pins : &G.intact_pins, 1);
			CK_EQ(many ? vr_obj_unpin_many(twice, 2) : vr_obj_unpin(G.o), 0);
			sched_yield(); /* let a purger in */
		}
		pthread_barrier_wait(&G.end);
	}
}

static void *purger(void *arg)
{
	(void)arg;
	while (!atomic_load(&G.stop)) {
		ssize_t got = vr_ctx_purge(G.c, SIZE_MAX);
		CK(got >= 0, "purge: %zd", got);
		if (got > 0)
			atomic_fetch_add(&G.purges, 1);
	}
	return NULL;
}

/* the round's check, with the racers parked: see the header */
static void check_round(uint64_t gen, uint64_t purged_before)
{
	uint8_t *p = vr_obj_ptr(G.o);
	int rc = vr_obj_pin(G.o);
	CK(rc == VR_INTACT || rc == VR_PURGED, "check pin: %d", rc);
	if (rc == VR_PURGED)
		atomic_fetch_add(&G.purged_pins, 1);
	if (rc == VR_PURGED || atomic_load(&G.purged_pins) != purged_before) {
		CK(vt_all_zero(p, G.size), "round %" PRIu64 ": purged object not zero", gen);
	} else {
		size_t bad = vt_check(p, 0, G.size, gen);
		CK(bad == SIZE_MAX, "round %" PRIu64 ": VR_INTACT but byte %zu changed", gen, bad);
	}
	CK_EQ(vr_ctx_stat(G.c, VR_STAT_VOLATILE_BYTES), 0);
	CK_EQ(vr_ctx_stat(G.c, VR_STAT_PURGED_BYTES), 0);
	CK_EQ(vr_obj_status(G.o), 0);
	vt_fill(p, 0, G.size, gen + 1);
	CK_EQ(vr_obj_unpin(G.o), 0);
}

static void race(size_t size)
{
	const char *t = getenv("VRANGE_TRAP");
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &G.c);
	if (rc == -EOPNOTSUPP && vt_trap_optional(t)) {
		fprintf(stderr, "VRANGE_TRAP=%s not supported here: skip\n", t);
		_exit(77);
	}
	CK_EQ(rc, 0);
	if (t)
		CK_EQ(vr_trap_backend(), vt_trap_id(t));
	/* the object first: a fresh ctx gives it a page of its own */
	G.size = size;
	CK_EQ(vr_obj_new(G.c, size, 0, &G.o), 0);
	struct vr_obj *others[NOTHERS];
	for (int i = 0; i < NOTHERS; i++)
		CK_EQ(vr_obj_new(G.c, 1000, 0, &others[i]), 0); /* another size class */
	const char *e = getenv("VT_RACE_MS");
	uint64_t ms = e ? strtoull(e, NULL, 0) : 1500, t0 = now_ms(), gen = 1;
	vt_fill(vr_obj_ptr(G.o), 0, size, gen);
	CK_EQ(vr_obj_unpin(G.o), 0);
	pthread_barrier_init(&G.start, NULL, 3);
	pthread_barrier_init(&G.end, NULL, 3);
	pthread_t rt[2], pt[2];
	for (int i = 0; i < 2; i++) {
		CK_EQ(pthread_create(&rt[i], NULL, racer, i ? &G : NULL), 0);
		CK_EQ(pthread_create(&pt[i], NULL, purger, NULL), 0);
	}
	uint64_t rounds = 0;
	do {
		uint64_t before = atomic_load(&G.purged_pins);
		pthread_barrier_wait(&G.start);
		pthread_barrier_wait(&G.end);
		check_round(gen, before);
		gen++;
		rounds++;
	} while (now_ms() - t0 < ms);
	atomic_store(&G.quit, true);
	pthread_barrier_wait(&G.start);
	atomic_store(&G.stop, true);
	for (int i = 0; i < 2; i++) {
		pthread_join(rt[i], NULL);
		pthread_join(pt[i], NULL);
	}
	fprintf(stderr,
		"%s, %zu-byte object: %" PRIu64 " rounds, %" PRIu64 " pins VR_INTACT, %" PRIu64
		" VR_PURGED, %" PRIu64 " purges\n",
		t ? t : "default trap", size, rounds, atomic_load(&G.intact_pins),
		atomic_load(&G.purged_pins), atomic_load(&G.purges));
	/* the race must have been run: the object was purged under the racers */
	CK(atomic_load(&G.purged_pins) > 0, "no pin ever found the object purged");
	for (int i = 0; i < NOTHERS; i++)
		vr_obj_free(others[i]);
	vr_obj_free(G.o);
	vr_ctx_destroy(G.c);
}

static void sc_small(void)
{
	race(64);
}

static void sc_large(void)
{
	race(vt_pg());
}

static const struct vt_scenario scenarios[] = {
	{ "small", sc_small },
	{ "large", sc_large },
};

static void run(const char *name, const char *trap)
{
	int st = vt_run_scenario_trap(name, trap, NULL);
	if (st == -77)
		return;
	if (st != -1 && WIFSIGNALED(st))
		fail_msg("%s object, VRANGE_TRAP=%s: killed by signal %d (%s)", name, trap,
			 WTERMSIG(st), strsignal(WTERMSIG(st)));
	vt_assert_exit_ok(st);
}

static void test_small_guard(void **state)
{
	(void)state;
	run("small", "guard");
}
static void test_small_mprotect(void **state)
{
	(void)state;
	run("small", "mprotect");
}
static void test_small_uffd(void **state)
{
	(void)state;
	run("small", "uffd");
}
static void test_large(void **state)
{
	(void)state;
	run("large", "mprotect");
}

/* ---- of_reuse ---- */
static struct {
	struct vr_ctx *c;
	_Atomic int stop;
	_Atomic long found, wrong;
	uintptr_t lo, hi;
} OR;

static void *of_looker(void *arg)
{
	(void)arg;
	unsigned seed = 7;
	while (!atomic_load(&OR.stop)) {
		uintptr_t a = OR.lo + (uintptr_t)rand_r(&seed) % (OR.hi - OR.lo);
		struct vr_obj *o = vr_obj_of((void *)a);
		if (o)
			atomic_fetch_add(&OR.found, 1);
	}
	return NULL;
}

static void *of_churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	struct vr_obj *o[128] = { 0 };
	for (int it = 0; it < 40000; it++) {
		int k = rand_r(&seed) % 128;
		if (o[k]) {
			vr_obj_free(o[k]);
			o[k] = NULL;
		} else {
			size_t size = k % 2 ? 1 + (size_t)rand_r(&seed) % 300
					    : vt_pg() + (size_t)rand_r(&seed) % (3 * vt_pg());
			if (vr_obj_new(OR.c, size, 0, &o[k]) != 0)
				atomic_fetch_add(&OR.wrong, 1);
		}
	}
	for (int k = 0; k < 128; k++)
		vr_obj_free(o[k]);
	return NULL;
}

static void test_of_reuse(void **state)
{
	(void)state;
	struct vr_obj *first;
	pthread_t t[3];
	memset(&OR, 0, sizeof(OR));
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &OR.c), 0);
	assert_int_equal(vr_obj_new(OR.c, 16, 0, &first), 0);
	/* the chunk's first pages: the slabs and the large objects made here */
	OR.lo = (uintptr_t)vr_obj_ptr(first) & ~(uintptr_t)(vt_pg() - 1);
	OR.hi = OR.lo + 1024 * vt_pg();
	assert_int_equal(pthread_create(&t[0], NULL, of_looker, NULL), 0);
	assert_int_equal(pthread_create(&t[1], NULL, of_churn, (void *)1), 0);
	assert_int_equal(pthread_create(&t[2], NULL, of_churn, (void *)2), 0);
	pthread_join(t[1], NULL);
	pthread_join(t[2], NULL);
	atomic_store(&OR.stop, 1);
	pthread_join(t[0], NULL);
	assert_int_equal(atomic_load(&OR.wrong), 0);
	assert_true(atomic_load(&OR.found) > 0);
	vr_obj_free(first);
	vr_ctx_destroy(OR.c);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_guard), cmocka_unit_test(test_small_mprotect),
		cmocka_unit_test(test_small_uffd),  cmocka_unit_test(test_large),
		cmocka_unit_test(test_of_reuse),
	};
	return cmocka_run_group_tests_name("pin/unpin races", tests, NULL, NULL);
}
