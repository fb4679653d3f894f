/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fault-stress.c - touching volatile memory while it is purged,
 * unmarked and marked again (architecture.md problem 2, API S9, S13)
 *
 * Two regions of chunks (each chunk one volatile range with whole pages
 * and partial pages at both ends, chunks never adjacent).  Every chunk has
 * a data generation: its bytes are vt_pat(gen, offset).  Threads:
 *   readers   read random bytes of random chunks under a per-chunk seqlock;
 *             a read either returns the generation's data or faults into
 *             the handler, which unmarks, regenerates (gen + 1) and retries;
 *             zeros (or anything else) where the model says data = failure
 *   markers   under the chunk lock: unmark (VR_INTACT => the data is the
 *             generation's, all of it; VR_PURGED => discarded pages read
 *             zero, shared pages keep their bytes) and refill, or mark again
 *   purger    vr_ctx_purge / pressure / limit changes, all the time
 * A hang is a SIGALRM death of the scenario.  Runs once per trap backend.
 */
#include "tests.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>

#define NREG 2
#define NCH 40 /* chunks per region */
#define NREADERS 3
#define NMARKERS 2

/* data that readers read under a seqlock while writers change it: relaxed
 * atomics, so the test is data-race free (ThreadSanitizer clean) */
static inline uint8_t ard(const uint8_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void afill(uint8_t *p, size_t off, size_t len, uint64_t gen)
{
	for (size_t i = 0; i < len; i++)
		__atomic_store_n(&p[i], vt_pat(gen, off + i), __ATOMIC_RELAXED);
}

static pid_t vt_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

struct chunk {
	atomic_uint seq;      /* odd while data or state changes */
	atomic_int lock;      /* 0 or the owner's tid */
	_Atomic uint64_t gen; /* data generation */
	bool vol;             /* marked volatile (under lock) */
};

static struct {
	struct vr_ctx *c;
	struct vr_region *r[NREG];
	uint8_t *b[NREG];
	struct chunk ch[NREG][NCH];
	size_t P, S, d0, dlen;
	uint64_t seed;
	atomic_int stop;
	atomic_long reads, calls, regen, marks, unmarks_intact, unmarks_purged, purges, limits;
} G;

static int reg_index(struct vr_region *r)
{
	for (int i = 0; i < NREG; i++)
		if (G.r[i] == r)
			return i;
	CK(0, "unknown region %p", (void *)r);
}

static void ch_lock(struct chunk *k, const char *who)
{
	int me = (int)vt_tid(), z = 0;
	CK(atomic_load(&k->lock) != me,
	   "%s: this thread holds the chunk lock: a non-volatile chunk faulted (S9)", who);
	while (!atomic_compare_exchange_weak(&k->lock, &z, me)) {
		z = 0;
		sched_yield();
	}
}

static void ch_unlock(struct chunk *k)
{
	atomic_store(&k->lock, 0);
}

/* the chunk was unmarked with result rc: check its bytes (lock held) */
static void check_after_unmark(int ri, size_t i, int rc)
{
	size_t off = i * G.S + G.d0, P = G.P;
	uint8_t *p = G.b[ri] + off;
	uint64_t g = atomic_load(&G.ch[ri][i].gen);
	if (rc == VR_INTACT) {
		size_t bad = vt_check(p, off, G.dlen, g);
		CK(bad == SIZE_MAX,
		   "region %d chunk %zu: vr_unmark said VR_INTACT but byte %zu is 0x%02x, expected "
		   "0x%02x (gen %" PRIu64 ")",
		   ri, i, off + bad, p[bad], vt_pat(g, off + bad), g);
		atomic_fetch_add(&G.unmarks_intact, 1);
		return;
	}
	CK_EQ(rc, VR_PURGED);
	/* whole pages [i*S + P, i*S + 3P) read zero (S5); the shared pages
	 * keep their bytes (S7) */
	size_t w0 = i * G.S + P, w1 = i * G.S + 3 * P;
	CK(vt_all_zero(G.b[ri] + w0, w1 - w0), "region %d chunk %zu: discarded pages not zero", ri,
	   i);
	CK(vt_check(p, off, w0 - off, g) == SIZE_MAX, "region %d chunk %zu: head bytes lost", ri,
	   i);
	CK(vt_check(G.b[ri] + w1, w1, off + G.dlen - w1, g) == SIZE_MAX,
	   "region %d chunk %zu: tail bytes lost", ri, i);
	atomic_fetch_add(&G.unmarks_purged, 1);
}

/* new data generation for a non-volatile chunk (lock held) */
static void regenerate(int ri, size_t i)
{
	size_t off = i * G.S + G.d0;
	uint64_t g = atomic_fetch_add(&G.ch[ri][i].gen, 1) + 1;
	afill(G.b[ri] + off, off, G.dlen, g);
}

static int handler(struct vr_region *r, size_t off, size_t len, void *fa, void *arg)
{
	(void)arg;
	atomic_fetch_add(&G.calls, 1);
	int ri = reg_index(r);
	size_t i = off / G.S;
	CK(i < NCH && off == i * G.S + G.d0 && len == G.dlen, "handler range (%zu, %zu)", off, len);
	CK((uint8_t *)fa >= G.b[ri] + i * G.S + G.P && (uint8_t *)fa < G.b[ri] + i * G.S + 3 * G.P,
	   "fault_addr %p not on a whole page of chunk %zu", fa, i);
	struct chunk *k = &G.ch[ri][i];
	ch_lock(k, "handler");
	atomic_fetch_add(&k->seq, 1);
	int rc = vr_unmark(r, off, len);
	CK(rc == VR_INTACT || rc == VR_PURGED, "(vr_unmark in the handler: %d)", rc);
	check_after_unmark(ri, i, rc);
	regenerate(ri, i);
	if (rc == VR_PURGED)
		atomic_fetch_add(&G.regen, 1);
	k->vol = false;
	atomic_fetch_add(&k->seq, 1);
	ch_unlock(k);
	return VR_FAULT_RETRY;
}

static void *reader(void *arg)
{
	struct vt_rng g;
	vt_seed(&g, G.seed * 31 + (uintptr_t)arg);
	while (!atomic_load(&G.stop)) {
		int ri = (int)vt_below(&g, NREG);
		size_t i = vt_below(&g, NCH);
		struct chunk *k = &G.ch[ri][i];
		size_t o[8];
		uint8_t v[8];
		for (int j = 0; j < 8; j++)
			o[j] = i * G.S + G.d0 + vt_below(&g, G.dlen);
		uint64_t gen;
		for (;;) {
			unsigned s1 = atomic_load(&k->seq);
			if (s1 & 1) {
				sched_yield();
				continue;
			}
			gen = atomic_load(&k->gen);
			for (int j = 0; j < 8; j++)
				v[j] = ard(G.b[ri] + o[j]);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load(&k->seq) == s1)
				break;
		}
		for (int j = 0; j < 8; j++)
			CK(v[j] == vt_pat(gen, o[j]),
			   "region %d chunk %zu byte %zu reads 0x%02x, expected 0x%02x (gen "
			   "%" PRIu64 ")%s",
			   ri, i, o[j], v[j], vt_pat(gen, o[j]), gen,
			   v[j] == 0 ? ": silently zeroed" : "");
		atomic_fetch_add(&G.reads, 1);
	}
	return NULL;
}

static void *marker(void *arg)
{
	struct vt_rng g;
	vt_seed(&g, G.seed * 17 + (uintptr_t)arg);
	while (!atomic_load(&G.stop)) {
		int ri = (int)vt_below(&g, NREG);
		size_t i = vt_below(&g, NCH);
		size_t off = i * G.S + G.d0;
		struct chunk *k = &G.ch[ri][i];
		ch_lock(k, "marker");
		atomic_fetch_add(&k->seq, 1);
		if (!k->vol) {
			if (vt_below(&g, 2))
				regenerate(ri, i);
			int rc = vr_mark(G.r[ri], off, G.dlen);
			/* VR_PURGED only when a limit purged it at once (S10) */
			CK(rc == VR_INTACT || rc == VR_PURGED, "(vr_mark: %d)", rc);
			k->vol = true;
			atomic_fetch_add(&G.marks, 1);
		} else {
			int rc = vr_unmark(G.r[ri], off, G.dlen);
			check_after_unmark(ri, i, rc);
			if (rc == VR_PURGED || vt_below(&g, 2))
				regenerate(ri, i);
			k->vol = false;
		}
		atomic_fetch_add(&k->seq, 1);
		ch_unlock(k);
		if (vt_below(&g, 4) == 0)
			sched_yield();
	}
	return NULL;
}

static void *purger(void *arg)
{
	(void)arg;
	struct vt_rng g;
	vt_seed(&g, G.seed * 7 + 1);
	size_t P = G.P;
	while (!atomic_load(&G.stop)) {
		ssize_t n = 0;
		switch (vt_below(&g, 8)) {
		case 0:
		case 1:
		case 2:
			n = vr_ctx_purge(G.c, (1 + vt_below(&g, 8)) * P);
			break;
		case 3:
			n = vr_ctx_purge(G.c, SIZE_MAX);
			break;
		case 4:
			n = vr_ctx_notify_pressure(G.c, VR_PRESSURE_MODERATE);
			break;
		case 5:
			n = vr_ctx_notify_pressure(G.c, VR_PRESSURE_CRITICAL);
			break;
		case 6:
			/* a limit makes vr_mark purge too, for a while */
			CK_EQ(vr_ctx_set_limit(G.c,
					       vt_below(&g, 3) ? 0 : (4 + vt_below(&g, 40)) * P),
			      0);
			atomic_fetch_add(&G.limits, 1);
			break;
		case 7:
			usleep((useconds_t)vt_below(&g, 500));
			break;
		}
		CK(n >= 0, "(purge: %zd)", n);
		atomic_fetch_add(&G.purges, 1);
		usleep((useconds_t)(20 + vt_below(&g, 200)));
	}
	return NULL;
}

static void sc_stress(void)
{
	size_t P = G.P = vt_pg();
	G.seed = vt_get_seed("fault-stress");
	G.S = 4 * P;
	G.d0 = 100;
	G.dlen = 3 * P; /* [i*S + 100, i*S + 3P + 100): whole pages [i*S + P, i*S + 3P) */
	struct vr_ctx *c = NULL;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	const char *t = getenv("VRANGE_TRAP");
	if (rc == -EOPNOTSUPP && vt_trap_optional(t)) {
		fprintf(stderr, "guard backend not supported here: skip\n");
		_exit(77);
	}
	CK_EQ(rc, 0);
	G.c = c;
	if (t)
		CK_EQ(vr_trap_backend(), vt_trap_id(t));
	for (int ri = 0; ri < NREG; ri++) {
		CK_EQ(vr_region_new(c, "vt-fstress", NCH * G.S, 0, &G.r[ri]), 0);
		G.b[ri] = vr_region_base(G.r[ri]);
		CK_EQ(vr_region_set_fault_handler(G.r[ri], handler, NULL), 0);
		for (size_t i = 0; i < NCH; i++) {
			size_t off = i * G.S + G.d0;
			atomic_store(&G.ch[ri][i].gen, (uint64_t)(ri * NCH + i) << 32);
			vt_fill(G.b[ri] + off, off, G.dlen, atomic_load(&G.ch[ri][i].gen));
			CK_EQ(vr_mark(G.r[ri], off, G.dlen), VR_INTACT);
			G.ch[ri][i].vol = true;
		}
	}
	CK_EQ(vr_ctx_stat(c, VR_STAT_RANGES), NREG * NCH);

	pthread_t th[NREADERS + NMARKERS + 1];
	int n = 0;
	for (uintptr_t i = 0; i < NREADERS; i++)
		CK_EQ(pthread_create(&th[n++], NULL, reader, (void *)i), 0);
	for (uintptr_t i = 0; i < NMARKERS; i++)
		CK_EQ(pthread_create(&th[n++], NULL, marker, (void *)i), 0);
	CK_EQ(pthread_create(&th[n++], NULL, purger, NULL), 0);
	unsigned secs = (unsigned)strtoul(
		getenv("VT_STRESS_SECONDS") ? getenv("VT_STRESS_SECONDS") : "10", NULL, 0);
	alarm(secs + 30);
	for (unsigned s = 0; s < secs; s++) {
		sleep(1);
		fprintf(stderr,
			"fault-stress %us: %ld reads, %ld handler calls, %ld regenerations\n",
			s + 1, atomic_load(&G.reads), atomic_load(&G.calls), atomic_load(&G.regen));
	}
	atomic_store(&G.stop, 1);
	for (int i = 0; i < n; i++)
		CK_EQ(pthread_join(th[i], NULL), 0);
	fprintf(stderr,
		"fault-stress: %ld reads, %ld handler calls, %ld regenerations, %ld marks, "
		"%ld intact / %ld purged unmarks, %ld purge ops, %ld limit changes; faults stat "
		"%" PRIu64 ", purges stat %" PRIu64 "\n",
		atomic_load(&G.reads), atomic_load(&G.calls), atomic_load(&G.regen),
		atomic_load(&G.marks), atomic_load(&G.unmarks_intact),
		atomic_load(&G.unmarks_purged), atomic_load(&G.purges), atomic_load(&G.limits),
		vr_ctx_stat(c, VR_STAT_FAULTS), vr_ctx_stat(c, VR_STAT_PURGES));
	CK(atomic_load(&G.calls) > 0, "no fault was taken: the test did not test anything");
	CK(atomic_load(&G.unmarks_intact) > 0 && atomic_load(&G.unmarks_purged) > 0);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), atomic_load(&G.calls));
	/* final pass: every chunk per the model */
	CK_EQ(vr_ctx_set_limit(c, 0), 0);
	for (int ri = 0; ri < NREG; ri++)
		for (size_t i = 0; i < NCH; i++) {
			size_t off = i * G.S + G.d0;
			int st = vr_status(G.r[ri], off, G.dlen);
			CK_EQ(!!(st & VR_STATE_VOLATILE), G.ch[ri][i].vol);
			rc = vr_unmark(G.r[ri], off, G.dlen);
			if (!G.ch[ri][i].vol)
				CK_EQ(rc, VR_INTACT);
			check_after_unmark(ri, i, rc);
		}
	CK_EQ(vr_ctx_stat(c, VR_STAT_RANGES), 0);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "stress", sc_stress },
};

static void run_backend(const char *trap)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vt_default_signals();
		setenv("VRANGE_TRAP", trap, 1);
		execl("/proc/self/exe", "vt-scenario", "--scenario", "stress", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		assert_true(errno == EINTR);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		print_message("[  SKIP    ] VRANGE_TRAP=%s not supported here\n", trap);
		return;
	}
	if (WIFSIGNALED(st))
		fail_msg("fault-stress (VRANGE_TRAP=%s): killed by signal %d (%s)%s", trap,
			 WTERMSIG(st), strsignal(WTERMSIG(st)),
			 WTERMSIG(st) == SIGALRM ? ": deadlock or livelock" : "");
	if (WEXITSTATUS(st) != 0)
		fail_msg("fault-stress (VRANGE_TRAP=%s): exit %d", trap, WEXITSTATUS(st));
}

static void test_touch_during_purge_mprotect(void **state)
{
	(void)state;
	run_backend("mprotect");
}

static void test_touch_during_purge_guard(void **state)
{
	(void)state;
	run_backend("guard");
}

static void test_touch_during_purge_uffd(void **state)
{
	(void)state;
	run_backend("uffd");
}

int main(int argc, char **argv)
{
	/* the scenario sets its own alarm from VT_STRESS_SECONDS */
	int rc = vt_scenario_dispatch(argc, argv, scenarios, 1, 120);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_touch_during_purge_mprotect),
		cmocka_unit_test(test_touch_during_purge_guard),
		cmocka_unit_test(test_touch_during_purge_uffd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
