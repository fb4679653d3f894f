/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fork-list.c - a fork child destroys an inherited ctx whose lists a
 * parent thread was changing at the fork (API S18; src/ctx.c region_free,
 * src/base/fork.h)
 *
 * test-fork's fork_hammer crashed a child 1 time in 30-90 ("free():
 * double free detected in tcache 2"): a worker destroyed a region at the
 * head of the ctx's list while the main thread forked, between the two
 * stores of the unlink (the list head moved on, the next region's prev
 * still pointing at the region going away).  The child's destroy trusted
 * prev, never advanced the head and freed a region twice.  Here the
 * parent makes that state itself, holding the ctx lock as the worker did,
 * and forks: the child must destroy the ctx (its other regions, their
 * maps and the ctx) and exit 0; the parent then puts its list back and
 * destroys everything as usual.  White-box: it writes the ctx's list.
 * A second case forks while the ctx's two locks and a region's lock are
 * held (nothing half-changed): the child's destroys of the region, a
 * group and the ctx must not take them (a hang ends in SIGALRM) and
 * leave what they guard; the parent's objects are intact after.
 */
#include "tests.h"

#include <sys/wait.h>

#include "ctx.h"
#include "mem/mem.h"

static int child_status(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		assert_int_equal(errno, EINTR);
	return st;
}

static void test_fork_mid_unlink_of_head(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_region *r[3];
	size_t P = vt_pg();
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(vr_region_new(c, "vt-fork-list", 4 * P, 0, &r[i]), 0);
		assert_int_equal(vr_mark(r[i], 0, P), VR_INTACT);
	}
	/* head insertion: r2 -> r1 -> r0 */
	assert_ptr_equal(c->regions, r[2]);
	assert_ptr_equal(r[1]->prev, r[2]);
	/* a destroy of r2 stopped after its first store, as a fork from
	 * another thread can stop it: head moved on, r1->prev not yet */
	pthread_mutex_lock(&c->lock);
	c->regions = r[2]->next;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);
		vr_ctx_destroy(c); /* inherited: the two regions still listed */
		_exit(0);
	}
	int st = child_status(pid);
	/* the parent undoes its half unlink and goes on */
	c->regions = r[2];
	pthread_mutex_unlock(&c->lock);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vr_unmark(r[i], 0, P), VR_INTACT);
	vr_ctx_destroy(c);
}

static void test_fork_with_locks_held(void **state)
{
	(void)state;
	struct vr_ctx *c;
	struct vr_region *r;
	size_t P = vt_pg();
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	assert_int_equal(vr_region_new(c, "vt-fork-list", 4 * P, 0, &r), 0);
	assert_int_equal(vr_mark(r, 0, P), VR_INTACT);
	struct vr_group *g;
	struct vr_obj *o;
	assert_int_equal(vr_group_new(c, 2, &g), 0);
	assert_int_equal(vr_obj_new_in(g, 100, 0, 0, &o), 0);
	assert_int_equal(vr_obj_unpin(o), 0);
	/* a thread in the middle of a purge (purge_lock, ctx lock) and of a
	 * mark (the region's lock) at the fork */
	pthread_mutex_lock(&c->purge_lock);
	pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&r->lock);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10); /* a destroy that took a held lock would hang */
		vr_region_destroy(r);
		vr_group_destroy(g);
		vr_ctx_destroy(c);
		_exit(0);
	}
	int st = child_status(pid);
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&c->purge_lock);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(vr_unmark(r, 0, P), VR_INTACT);
	assert_int_equal(vr_obj_pin(o), VR_INTACT);
	vr_group_destroy(g);
	vr_ctx_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_mid_unlink_of_head),
		cmocka_unit_test(test_fork_with_locks_held),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
