/* test-smoke.c - the shortest round trip through the public API */
#include "tests.h"

static void test_round_trip(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_region *r;
	size_t P = vt_pg();
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_region_new(c, "smoke", 4 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 1);
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, P), (ssize_t)(2 * P));
	assert_int_equal(vr_unmark(r, 0, 2 * P), VR_PURGED);
	assert_true(vt_all_zero(b, 2 * P));
	assert_true(vt_check(b + 2 * P, 2 * P, 2 * P, 1) == SIZE_MAX);
	assert_ptr_equal(vr_region_of(b + P), r);
	vr_ctx_destroy(c);
}

struct log_seen {
	int lines, purged;
};

static void log_cb(int priority, const char *msg, void *arg)
{
	struct log_seen *s = arg;
	assert_int_equal(priority, VR_LOG_DEBUG);
	assert_null(strchr(msg, '\n'));
	s->lines++;
	s->purged += strstr(msg, "purged") != NULL;
}

/* vr_set_log_fn routes the purge log lines, and NULL stops them */
static void test_log_fn(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_region *r;
	struct log_seen seen = { 0, 0 };
	size_t P = vt_pg();
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_region_new(c, "log", 4 * P, 0, &r), 0);
	vr_set_log_fn(log_cb, &seen);
	assert_int_equal(vr_mark(r, 0, P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	assert_true(seen.purged >= 1);
	vr_set_log_fn(NULL, NULL);
	int before = seen.lines;
	assert_int_equal(vr_mark(r, 2 * P, P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	assert_int_equal(seen.lines, before);
	vr_ctx_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_round_trip),
					    cmocka_unit_test(test_log_fn) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
