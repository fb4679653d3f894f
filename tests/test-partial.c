/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-partial.c - partial pages (api.md A1; issue 21, item 8)
 *
 * Protection is per page: when vr_unmark or vr_obj_pin makes a page
 * accessible that also holds bytes still purged (the rest of a range, or
 * other objects), those bytes read 0 without a trap.  What must stay
 * exact is the state: they are still reported purged (vr_status,
 * vr_obj_status), their own vr_unmark / vr_obj_pin returns VR_PURGED, and
 * no fault is counted for them.  Each scenario runs under VRANGE_TRAP=guard,
 * mprotect and uffd:
 *   sub_unmark  a sub-page vr_unmark at the start of a purged range;
 *   small_pin   pinning one of several small objects of a purged page.
 */
#define _GNU_SOURCE
#include "tests.h"

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}

static struct vr_ctx *ctx_forced(void)
{
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	const char *t = getenv("VRANGE_TRAP");
	if (rc == -EOPNOTSUPP && vt_trap_optional(t))
		_exit(77);
	CK_EQ(rc, 0);
	return c;
}

/* no handler: a trap would be SIGBUS, and the scenario would die of it */
static void sc_sub_unmark(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = ctx_forced();
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, "vt-partial", 4 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 1);
	CK_EQ(vr_mark(r, 0, 3 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)(3 * P));
	/* 100 bytes unmarked: their page is accessible again */
	CK_EQ(vr_unmark(r, 0, 100), VR_PURGED);
	CK_EQ(vr_status(r, 0, 100), 0);
	/* the rest of page 0 reads 0 without a trap (A1) ... */
	CK(vt_all_zero(b + 100, P - 100));
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 0);
	/* ... but stays purged, byte for byte */
	CK_EQ(vr_status(r, 100, 1), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_status(r, 100, P - 100), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_status(r, 99, 2), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 3 * P - 100);
	/* a purge takes nothing more from it */
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 0);
	CK_EQ(vr_status(r, 200, 10), VR_STATE_VOLATILE | VR_STATE_PURGED);
	/* its own unmark reports the purge */
	CK_EQ(vr_unmark(r, 100, P - 100), VR_PURGED);
	CK_EQ(vr_status(r, 0, P), 0);
	CK_EQ(vr_status(r, P, 2 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_unmark(r, P, 2 * P), VR_PURGED);
	CK(vt_all_zero(b, 3 * P));
	CK(vt_check(b + 3 * P, 3 * P, P, 1) == SIZE_MAX);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 0);
	vr_ctx_destroy(c);
}

static void sc_small_pin(void)
{
	size_t P = vt_pg(), S = 256;
	struct vr_ctx *c = ctx_forced();
	/* a fresh ctx: its first slab of this class starts on a page */
	struct vr_obj *o[4];
	for (int i = 0; i < 4; i++) {
		CK_EQ(vr_obj_new(c, S, 0, &o[i]), 0);
		memset(vr_obj_ptr(o[i]), 0x40 + i, S);
	}
	uint8_t *p0 = vr_obj_ptr(o[0]);
	for (int i = 1; i < 4; i++) /* one page */
		CK(((uintptr_t)vr_obj_ptr(o[i]) & ~(uintptr_t)(P - 1)) ==
		   ((uintptr_t)p0 & ~(uintptr_t)(P - 1)));
	for (int i = 0; i < 4; i++)
		CK_EQ(vr_obj_unpin(o[i]), 0);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), (ssize_t)P);
	CK_EQ(vr_obj_pin(o[0]), VR_PURGED);
	CK(vt_all_zero(p0, S));
	/* the others read 0 without a trap (A1) and stay purged */
	for (int i = 1; i < 4; i++) {
		CK_EQ(rd(vr_obj_ptr(o[i])), 0);
		CK_EQ(vr_obj_status(o[i]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	}
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 0);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 0);
	CK_EQ(vr_obj_status(o[2]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_obj_pin(o[2]), VR_PURGED);
	CK_EQ(vr_obj_status(o[2]), 0);
	CK_EQ(vr_obj_pin(o[2]), VR_INTACT);
	CK_EQ(vr_obj_status(o[1]), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_obj_pin(o[1]), VR_PURGED);
	CK_EQ(vr_obj_pin(o[3]), VR_PURGED);
	for (int i = 0; i < 4; i++)
		vr_obj_free(o[i]);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "sub_unmark", sc_sub_unmark },
	{ "small_pin", sc_small_pin },
};

static void test_sub_page_unmark(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("sub_unmark");
}

static void test_small_object_pin(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("small_pin");
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 30);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sub_page_unmark),
		cmocka_unit_test(test_small_object_pin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
