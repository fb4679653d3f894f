/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-callback.c - callback slots (src/base/callback.h): a reader
 * never pairs one setter's function with another setter's argument
 *
 * Two setters put (fa, &a) and (fb, &b) into one slot in turn as fast as
 * they can while two readers read it: every function read must come with
 * its own argument.  Two plain loads (the function, then the argument)
 * fail this within a few thousand reads on two cores.
 */
#include "tests.h"

#include <pthread.h>

#include "base/callback.h"

static int a, b;
static void fa(void)
{
}
static void fb(void)
{
}

static struct vr_cb_slot slot;
static atomic_bool stop;
static atomic_ulong torn, reads;

static void *setter(void *p)
{
	bool first = p != NULL;
	while (!atomic_load(&stop)) {
		vr_cb_slot_set(&slot, first ? fa : fb, first ? (void *)&a : (void *)&b);
		vr_cb_slot_set(&slot, first ? fb : fa, first ? (void *)&b : (void *)&a);
	}
	return NULL;
}

static void *reader(void *p)
{
	(void)p;
	unsigned long bad = 0, n = 0;
	while (!atomic_load(&stop)) {
		void *arg;
		vr_cb_any fn = vr_cb_slot_get(&slot, &arg);
		bad += (fn == fa && arg != &a) || (fn == fb && arg != &b) || (!fn && arg);
		n++;
	}
	atomic_fetch_add(&torn, bad);
	atomic_fetch_add(&reads, n);
	return NULL;
}

static void test_slot_pairs(void **state)
{
	(void)state;
	pthread_t t[4];
	vr_cb_slot_set(&slot, fa, &a);
	assert_int_equal(pthread_create(&t[0], NULL, setter, &a), 0);
	assert_int_equal(pthread_create(&t[1], NULL, setter, NULL), 0);
	assert_int_equal(pthread_create(&t[2], NULL, reader, NULL), 0);
	assert_int_equal(pthread_create(&t[3], NULL, reader, NULL), 0);
	struct timespec ts = { 1, 0 };
	nanosleep(&ts, NULL);
	atomic_store(&stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	print_message("%lu reads, %lu torn\n", atomic_load(&reads), atomic_load(&torn));
	assert_true(atomic_load(&reads) > 0);
	assert_int_equal(atomic_load(&torn), 0);
	/* NULL drops the argument */
	vr_cb_slot_set(&slot, NULL, &a);
	void *arg = &b;
	assert_null(vr_cb_slot_get(&slot, &arg));
	assert_null(arg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_pairs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
