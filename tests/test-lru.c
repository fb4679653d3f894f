/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-lru.c - purge order in depth (API S8, with S3 growth and S5 pieces)
 *
 * The order is observed from outside: vr_ctx_purge(ctx, 1) purges exactly
 * one range (the least recently marked one) and returns its whole-page
 * bytes; vr_status over every known range then tells which one it was.
 */
#include "tests.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>

static size_t P;

struct rg {
	struct vr_region *r;
	size_t off, len;
};

static struct vr_ctx *new_ctx(void)
{
	struct vr_ctx *c = NULL;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	return c;
}

static struct vr_region *new_region(struct vr_ctx *c, size_t size)
{
	struct vr_region *r = NULL;
	assert_int_equal(vr_region_new(c, "vt-lru", size, 0, &r), 0);
	return r;
}

static size_t whole(size_t off, size_t len)
{
	size_t a = (off + P - 1) / P * P, b = (off + len) / P * P;
	return b > a ? b - a : 0;
}

static bool is_purged(const struct rg *g)
{
	int s = vr_status(g->r, g->off, g->len);
	assert_true(s == VR_STATE_VOLATILE || s == (VR_STATE_VOLATILE | VR_STATE_PURGED));
	return s & VR_STATE_PURGED;
}

/* purge(1) once: exactly one of g[0..n) not yet purged becomes purged, it
 * is one of the candidates cand[0..nc) (indices into g), and the call
 * returns its whole pages; returns its index */
static int purge_one(struct vr_ctx *c, struct rg *g, int n, bool *done, const int *cand, int nc)
{
	ssize_t got = vr_ctx_purge(c, 1);
	int which = -1;
	for (int i = 0; i < n; i++) {
		if (done[i])
			continue;
		if (is_purged(&g[i])) {
			if (which >= 0)
				fail_msg("purge(1) purged both range %d and range %d", which, i);
			which = i;
		}
	}
	if (which < 0)
		fail_msg("purge(1) = %zd purged nothing", got);
	bool ok = false;
	for (int k = 0; k < nc; k++)
		ok |= cand[k] == which;
	if (!ok)
		fail_msg("purge(1) took range %d (off %zu, len %zu) out of order; expected one of "
			 "%d..",
			 which, g[which].off, g[which].len, cand[0]);
	assert_int_equal(got, (ssize_t)whole(g[which].off, g[which].len));
	done[which] = true;
	return which;
}

/* purges one at a time in exactly the order order[0..n) */
static void drain_in_order(struct vr_ctx *c, struct rg *g, const int *order, int n)
{
	bool done[256] = { false };
	assert_true(n <= 256);
	for (int i = 0; i < n; i++)
		purge_one(c, g, n, done, &order[i], 1);
	assert_int_equal(vr_ctx_purge(c, 1), 0);
}

/* 8 regions, 32 ranges marked in a shuffled order across them */
static void test_lru_many_regions_interleaved(void **state)
{
	(void)state;
	enum { R = 8, S = 4, N = R * S };
	struct vr_ctx *c = new_ctx();
	struct vr_region *reg[R];
	struct rg g[N];
	int order[N], byorder[N];
	struct vt_rng rng;
	vt_seed(&rng, 1234);
	for (int i = 0; i < R; i++)
		reg[i] = new_region(c, 4 * S * P + 1);
	for (int k = 0; k < N; k++)
		order[k] = k;
	for (int k = N - 1; k > 0; k--) {
		int j = (int)vt_below(&rng, (uint64_t)k + 1), t = order[k];
		order[k] = order[j];
		order[j] = t;
	}
	/* slot k = region k % R, offset (k / R) * 4P, 1..3 pages plus bytes */
	for (int i = 0; i < N; i++) {
		int k = order[i];
		g[i].r = reg[k % R];
		g[i].off = (size_t)(k / R) * 4 * P + (size_t)(k % 3) * 7;
		g[i].len = (size_t)(1 + k % 3) * P + (size_t)(k % 5);
		assert_int_equal(vr_mark(g[i].r, g[i].off, g[i].len), VR_INTACT);
		byorder[i] = i;
	}
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), N);
	drain_in_order(c, g, byorder, N);
	vr_ctx_destroy(c);
}

/* pieces left by vr_unmark keep the age of their range */
static void test_lru_unmark_split_keeps_age(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r[3] = { new_region(c, 16 * P), new_region(c, 16 * P),
				   new_region(c, 16 * P) };
	struct rg g[7] = {
		{ r[0], 0, 2 * P },      /* A */
		{ r[1], 0, 2 * P },      /* B1  \                          */
		{ r[1], 3 * P, P + 10 }, /* B2   } B = [0, 12P) split twice */
		{ r[1], 5 * P, 7 * P },  /* B3  /                          */
		{ r[2], 0, 3 * P },      /* C1 \ C = [0, 8P) split once     */
		{ r[2], 4 * P, 4 * P },  /* C2 /                           */
		{ r[0], 8 * P, P },      /* D: marked after the splits of B */
	};
	bool done[7] = { false };
	assert_int_equal(vr_mark(r[0], 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_mark(r[1], 0, 12 * P), VR_INTACT);
	assert_int_equal(vr_mark(r[2], 0, 8 * P), VR_INTACT);
	assert_int_equal(vr_unmark(r[1], 2 * P, P), VR_INTACT);
	assert_int_equal(vr_unmark(r[1], 4 * P + 10, P - 10), VR_INTACT);
	assert_int_equal(vr_mark(r[0], 8 * P, P), VR_INTACT);
	assert_int_equal(vr_unmark(r[2], 3 * P, P), VR_INTACT);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 7);
	const int a[] = { 0 }, b[] = { 1, 2, 3 }, cc[] = { 4, 5 }, d[] = { 6 };
	purge_one(c, g, 7, done, a, 1);
	for (int i = 0; i < 3; i++)
		purge_one(c, g, 7, done, b, 3);
	for (int i = 0; i < 2; i++)
		purge_one(c, g, 7, done, cc, 2);
	purge_one(c, g, 7, done, d, 1);
	assert_int_equal(vr_ctx_purge(c, 1), 0);
	vr_ctx_destroy(c);
}

/* a piece that loses its last whole page leaves the LRU; the others stay */
static void test_lru_piece_without_whole_page(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r = new_region(c, 16 * P);
	struct rg g[3] = { { r, 0, P / 2 }, { r, P + P / 2, P / 2 }, { r, 4 * P, P } };
	assert_int_equal(vr_mark(r, 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_mark(r, 4 * P, P), VR_INTACT);
	assert_int_equal(vr_unmark(r, P / 2, P), VR_INTACT);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 3);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)P);
	assert_false(is_purged(&g[0]));
	assert_false(is_purged(&g[1]));
	assert_true(is_purged(&g[2]));
	assert_int_equal(vr_ctx_purge(c, SIZE_MAX), 0);
	/* joined again (adjacency on both sides): young, purgeable */
	assert_int_equal(vr_mark(r, P / 2, P), VR_INTACT);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 2);
	assert_int_equal(vr_ctx_purge(c, 1), (ssize_t)(2 * P));
	vr_ctx_destroy(c);
}

/* growth by overlap or adjacency makes a range the youngest; a mark inside
 * (equal bounds included) does not */
static void test_lru_rejuvenation(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r[2] = { new_region(c, 32 * P), new_region(c, 32 * P) };
	/* A, B, C, D, E (E and F are two ranges of r1 with a one-page gap) */
	assert_int_equal(vr_mark(r[0], 0, 2 * P), VR_INTACT);     /* A */
	assert_int_equal(vr_mark(r[1], 0, 2 * P), VR_INTACT);     /* B */
	assert_int_equal(vr_mark(r[0], 4 * P, 2 * P), VR_INTACT); /* C */
	assert_int_equal(vr_mark(r[1], 4 * P, 2 * P), VR_INTACT); /* D */
	assert_int_equal(vr_mark(r[1], 8 * P, P), VR_INTACT);     /* E */
	assert_int_equal(vr_mark(r[1], 10 * P, P), VR_INTACT);    /* F */
	assert_int_equal(vr_mark(r[0], 10 * P, P), VR_INTACT);    /* G */
	/* order A B C D E F G; no change: */
	assert_int_equal(vr_mark(r[1], P, P), VR_INTACT);         /* inside B */
	assert_int_equal(vr_mark(r[0], 4 * P, 2 * P), VR_INTACT); /* C exactly */
	/* A grows by overlap -> B C D E F G A */
	assert_int_equal(vr_mark(r[0], P, 2 * P), VR_INTACT); /* A = [0, 3P) */
	/* C grows by adjacency on its left -> B D E F G A C */
	assert_int_equal(vr_mark(r[0], 3 * P + 10, P - 10), VR_INTACT); /* C = [3P+10, 6P) */
	/* the gap between E and F joins them: one range, youngest
	 * -> B D G A C EF */
	assert_int_equal(vr_mark(r[1], 9 * P, P), VR_INTACT); /* EF = [8P, 11P) */
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 6);
	struct rg g[6] = {
		{ r[1], 0, 2 * P }, { r[1], 4 * P, 2 * P },           { r[0], 10 * P, P },
		{ r[0], 0, 3 * P }, { r[0], 3 * P + 10, 3 * P - 10 }, { r[1], 8 * P, 3 * P },
	};
	const int order[6] = { 0, 1, 2, 3, 4, 5 };
	drain_in_order(c, g, order, 6);
	vr_ctx_destroy(c);
}

/* vr_ctx_purge(ctx, n) takes exactly the shortest prefix of the order that
 * reaches n bytes */
static void test_lru_purge_n_prefix(void **state)
{
	(void)state;
	enum { N = 24 };
	struct vr_ctx *c = new_ctx();
	struct vr_region *r[3] = { new_region(c, 64 * P), new_region(c, 64 * P),
				   new_region(c, 64 * P) };
	struct rg g[N];
	size_t used[3] = { 0 };
	for (int i = 0; i < N; i++) {
		int k = (i * 7) % 3;
		size_t len = (size_t)(1 + (i * 5) % 4) * P + (size_t)(i % 2) * 33;
		g[i] = (struct rg){ r[k], used[k], len };
		used[k] += (len + P - 1) / P * P + P;
		assert_int_equal(vr_mark(g[i].r, g[i].off, g[i].len), VR_INTACT);
	}
	int next = 0;
	const size_t asks[] = { 1, 2 * P, P + 1, 5 * P, 3, 7 * P + 1, 4 * P, SIZE_MAX };
	for (size_t a = 0; a < sizeof(asks) / sizeof(asks[0]); a++) {
		size_t want = asks[a], sum = 0;
		int end = next;
		while (end < N && sum < want)
			sum += whole(g[end].off, g[end].len), end++;
		assert_int_equal(vr_ctx_purge(c, want), (ssize_t)sum);
		for (int i = 0; i < N; i++)
			if (is_purged(&g[i]) != (i < end))
				fail_msg("ask %zu: range %d purged=%d, expected %d", want, i,
					 is_purged(&g[i]), i < end);
		next = end;
	}
	assert_int_equal(next, N);
	vr_ctx_destroy(c);
}

/* a destroyed region's ranges leave the order; the others keep theirs */
static void test_lru_region_destroyed(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	struct vr_region *r[3] = { new_region(c, 8 * P), new_region(c, 8 * P),
				   new_region(c, 8 * P) };
	struct rg g[4] = {
		{ r[1], 0, P }, { r[2], 0, 2 * P }, { r[1], 4 * P, P }, { r[2], 4 * P, 3 * P }
	};
	assert_int_equal(vr_mark(r[0], 0, P), VR_INTACT); /* oldest */
	assert_int_equal(vr_mark(g[0].r, g[0].off, g[0].len), VR_INTACT);
	assert_int_equal(vr_mark(r[0], 2 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(g[1].r, g[1].off, g[1].len), VR_INTACT);
	assert_int_equal(vr_mark(g[2].r, g[2].off, g[2].len), VR_INTACT);
	assert_int_equal(vr_mark(r[0], 4 * P, P), VR_INTACT);
	assert_int_equal(vr_mark(g[3].r, g[3].off, g[3].len), VR_INTACT);
	vr_region_destroy(r[0]);
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 4);
	const int order[4] = { 0, 1, 2, 3 };
	drain_in_order(c, g, order, 4);
	vr_ctx_destroy(c);
}

/* marks from two threads, strictly alternating through a mutex: the
 * synchronization orders them, so the purge order must follow it */
enum { HN = 60 };
struct handoff {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int turn; /* next global sequence number */
	struct rg g[2 * HN];
};
struct handoff_arg {
	struct handoff *h;
	struct vr_region *r;
	int parity;
};

static void *handoff_worker(void *p)
{
	struct handoff_arg *a = p;
	struct handoff *h = a->h;
	for (int i = 0; i < HN; i++) {
		pthread_mutex_lock(&h->mu);
		while (h->turn % 2 != a->parity)
			pthread_cond_wait(&h->cv, &h->mu);
		int seq = h->turn;
		/* range i of this thread: 1..2 pages, one page gap */
		size_t off = (size_t)i * 3 * P, len = (size_t)(1 + seq % 2) * P;
		int rc = vr_mark(a->r, off, len);
		h->g[seq] = (struct rg){ rc == VR_INTACT ? a->r : NULL, off, len };
		h->turn++;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
	}
	return NULL;
}

static void test_lru_threads_handoff(void **state)
{
	(void)state;
	struct vr_ctx *c = new_ctx();
	static struct handoff h;
	memset(&h, 0, sizeof(h));
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	struct handoff_arg a[2];
	pthread_t th[2];
	for (int k = 0; k < 2; k++) {
		a[k] = (struct handoff_arg){ &h, new_region(c, 3 * HN * P), k };
		assert_int_equal(pthread_create(&th[k], NULL, handoff_worker, &a[k]), 0);
	}
	for (int k = 0; k < 2; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	int order[2 * HN];
	for (int i = 0; i < 2 * HN; i++) {
		assert_non_null(h.g[i].r);
		order[i] = i;
	}
	assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 2 * HN);
	drain_in_order(c, h.g, order, 2 * HN);
	pthread_mutex_destroy(&h.mu);
	pthread_cond_destroy(&h.cv);
	vr_ctx_destroy(c);
}

/* ---- randomized: page-granular marks and unmarks, then a full drain ---- */

enum { MR = 4, MNP = 24, MMAX = MR * MNP };

struct mrange {
	int region;
	size_t start, end; /* pages */
	uint64_t age;
	bool purged;
};

struct lmodel {
	struct mrange g[MMAX];
	int n;
	uint64_t age;
};

static int lm_find(struct lmodel *m, int reg, size_t pg)
{
	for (int i = 0; i < m->n; i++)
		if (m->g[i].region == reg && m->g[i].start <= pg && pg < m->g[i].end)
			return i;
	return -1;
}

static void lm_del(struct lmodel *m, int i)
{
	m->g[i] = m->g[--m->n];
}

static void lm_mark(struct lmodel *m, int reg, size_t a, size_t b)
{
	int in = lm_find(m, reg, a);
	if (in >= 0 && m->g[in].end >= b)
		return; /* wholly inside: nothing */
	size_t s = a, e = b;
	for (;;) { /* all unpurged: join overlaps and adjacent ranges */
		bool again = false;
		for (int i = 0; i < m->n; i++) {
			struct mrange *x = &m->g[i];
			if (x->region != reg || x->end < s || x->start > e)
				continue;
			s = x->start < s ? x->start : s;
			e = x->end > e ? x->end : e;
			lm_del(m, i);
			again = true;
			break;
		}
		if (!again)
			break;
	}
	m->g[m->n++] = (struct mrange){ reg, s, e, ++m->age, false };
}

static void lm_unmark(struct lmodel *m, int reg, size_t a, size_t b)
{
	for (int i = 0; i < m->n; i++) {
		struct mrange x = m->g[i];
		if (x.region != reg || x.end <= a || x.start >= b)
			continue;
		lm_del(m, i);
		if (x.start < a)
			m->g[m->n++] = (struct mrange){ reg, x.start, a, x.age, false };
		if (x.end > b)
			m->g[m->n++] = (struct mrange){ reg, b, x.end, x.age, false };
		i = -1; /* restart: the array changed */
	}
}

static void test_lru_random(void **state)
{
	(void)state;
	uint64_t seed = vt_get_seed("test-lru random");
	struct vt_rng rng;
	vt_seed(&rng, seed);
	struct vr_ctx *c = new_ctx();
	struct vr_region *reg[MR];
	for (int i = 0; i < MR; i++)
		reg[i] = new_region(c, MNP * P);
	static struct lmodel m;
	long drained = 0, ties = 0;
	for (int round = 0; round < 200; round++) {
		memset(&m, 0, sizeof(m));
		int ops = 5 + (int)vt_below(&rng, 60);
		for (int k = 0; k < ops; k++) {
			int ri = (int)vt_below(&rng, MR);
			size_t a = vt_below(&rng, MNP),
			       len = 1 + vt_below(&rng, vt_below(&rng, 2) ? 3 : 10);
			size_t b = a + len > MNP ? MNP : a + len;
			if (vt_below(&rng, 3)) {
				assert_int_equal(vr_mark(reg[ri], a * P, (b - a) * P), VR_INTACT);
				lm_mark(&m, ri, a, b);
			} else {
				assert_int_equal(vr_unmark(reg[ri], a * P, (b - a) * P), VR_INTACT);
				lm_unmark(&m, ri, a, b);
			}
			if (vr_ctx_stat(c, VR_STAT_RANGES) != (uint64_t)m.n)
				fail_msg("seed %" PRIu64 " round %d op %d: %" PRIu64
					 " ranges, model %d",
					 seed, round, k, vr_ctx_stat(c, VR_STAT_RANGES), m.n);
		}
		/* drain: each purge(1) takes one of the oldest remaining */
		struct rg g[MMAX];
		bool done[MMAX] = { false };
		for (int i = 0; i < m.n; i++)
			g[i] = (struct rg){ reg[m.g[i].region], m.g[i].start * P,
					    (m.g[i].end - m.g[i].start) * P };
		for (int left = m.n; left > 0; left--) {
			uint64_t oldest = UINT64_MAX;
			int cand[MMAX], nc = 0;
			for (int i = 0; i < m.n; i++)
				if (!done[i] && m.g[i].age < oldest)
					oldest = m.g[i].age;
			for (int i = 0; i < m.n; i++)
				if (!done[i] && m.g[i].age == oldest)
					cand[nc++] = i;
			purge_one(c, g, m.n, done, cand, nc);
			drained++;
			ties += nc > 1;
		}
		assert_int_equal(vr_ctx_purge(c, 1), 0);
		for (int i = 0; i < MR; i++)
			vr_unmark(reg[i], 0, MNP * P);
		assert_int_equal(vr_ctx_stat(c, VR_STAT_RANGES), 0);
	}
	print_message("%ld ranges drained in order (%ld among equally old pieces)\n", drained,
		      ties);
	assert_true(drained > 1000);
	vr_ctx_destroy(c);
}

/* ---- counter stamps: a clocksource without vDSO (base/age.c) ----
 * The library picks its stamp source by the clocksource's name at the first
 * vr_ctx_new.  A scenario run with VT_CLOCKSOURCE set reads that name from
 * this fopen64, which interposes the library's: the counter then stamps
 * private ranges and objects, the clock a shared file's ranges. */
FILE *fopen64(const char *path, const char *mode)
{
	static FILE *(*real)(const char *, const char *);
	const char *fake = getenv("VT_CLOCKSOURCE");
	if (fake && strstr(path, "current_clocksource")) {
		static char buf[64];
		snprintf(buf, sizeof(buf), "%s\n", fake);
		return fmemopen(buf, strlen(buf), "r");
	}
	if (!real)
		real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen64");
	return real(path, mode);
}

static bool counter_seen;
static void counter_log(int prio, const char *msg, void *arg)
{
	(void)prio;
	(void)arg;
	if (strstr(msg, "age stamps: counter"))
		counter_seen = true;
}

static struct vr_region *cs_r2;
static struct vr_obj *cs_o2;
static void *counter_thread(void *arg)
{
	(void)arg;
	CK_EQ(vr_mark(cs_r2, 0, P), VR_INTACT);
	CK_EQ(vr_obj_unpin(cs_o2), 0);
	return NULL;
}

/* a thread that marked a shared file (a clock stamp) must not stamp its
 * later private ranges and objects above those another thread marks
 * after it (S8, S22), nor a group made there get an age base above other
 * threads' stamps */
static void sc_counter_ages(void)
{
	vr_set_log_fn(counter_log, NULL);
	struct vr_ctx *c;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	vr_set_log_fn(NULL, NULL);
	CK(counter_seen, "(the stamps do not come from the counter)");
	struct vr_region *r1, *rs;
	struct vr_group *g;
	struct vr_obj *o1;
	CK_EQ(vr_region_new(c, "vt-p1", 4 * P, 0, &r1), 0);
	CK_EQ(vr_region_new(c, "vt-p2", 4 * P, 0, &cs_r2), 0);
	int rc = vr_region_new(c, "vt-s", 4 * P, VR_REGION_SHARED, &rs);
	if (rc == -EOPNOTSUPP)
		exit(77);
	CK_EQ(rc, 0);
	CK_EQ(vr_mark(r1, 2 * P, P), VR_INTACT); /* P0 */
	CK_EQ(vr_mark(rs, 0, P), VR_INTACT);     /* a clock stamp in this thread */
	CK_EQ(vr_group_new(c, 4, &g), 0);
	CK_EQ(vr_obj_new_in(g, P, 0, 0, &o1), 0);
	CK_EQ(vr_obj_new_in(g, P, 0, 0, &cs_o2), 0);
	CK_EQ(vr_mark(r1, 0, P), VR_INTACT); /* X1 */
	CK_EQ(vr_obj_unpin(o1), 0);
	pthread_t t; /* X2, then o2, in another thread, after all of these */
	CK_EQ(pthread_create(&t, NULL, counter_thread, NULL), 0);
	CK_EQ(pthread_join(t, NULL), 0);
	const int vp = VR_STATE_VOLATILE | VR_STATE_PURGED;
	for (int i = 1; i <= 5; i++) {
		CK_EQ(vr_ctx_purge(c, P), (ssize_t)P);
		int st[5] = { vr_status(r1, 2 * P, P) == vp, vr_status(r1, 0, P) == vp,
			      vr_obj_status(o1) == vp, vr_status(cs_r2, 0, P) == vp,
			      vr_obj_status(cs_o2) == vp };
		for (int k = 0; k < 5; k++)
			CK(st[k] == (k < i), "(purge %d: unit %d of P0 X1 o1 X2 o2 is %s)", i, k,
			   st[k] ? "purged" : "not purged");
	}
	vr_ctx_destroy(c);
}

static void test_lru_counter_ages(void **state)
{
	(void)state;
	setenv("VT_CLOCKSOURCE", "hpet", 1);
	int st = vt_run_scenario("counter_ages");
	unsetenv("VT_CLOCKSOURCE");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		skip();
	vt_assert_exit_ok(st);
}

static const struct vt_scenario scenarios[] = {
	{ "counter_ages", sc_counter_ages },
};

int main(int argc, char **argv)
{
	P = vt_pg();
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lru_many_regions_interleaved),
		cmocka_unit_test(test_lru_unmark_split_keeps_age),
		cmocka_unit_test(test_lru_piece_without_whole_page),
		cmocka_unit_test(test_lru_rejuvenation),
		cmocka_unit_test(test_lru_purge_n_prefix),
		cmocka_unit_test(test_lru_region_destroyed),
		cmocka_unit_test(test_lru_threads_handoff),
		cmocka_unit_test(test_lru_random),
		cmocka_unit_test(test_lru_counter_ages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
