/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-lock.c - the held-lock stack and the lock-order check (src/base/lock.h)
 *
 * The order check is compiled in builds without NDEBUG (all of CI's);
 * violations abort, so they run as scenarios in a child process.
 */
#include "tests.h"

#include "base/lock.h"

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

static const struct vt_scenario scenarios[] = {
	{ "named_ranks", sc_named_ranks },
	{ "wrong_order", sc_wrong_order },
	{ "wrong_release", sc_wrong_release },
	{ "signal_level", sc_signal_level },
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
