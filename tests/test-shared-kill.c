/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shared-kill.c - processes sharing a VR_REGION_SHARED memfd under
 * stress and SIGKILL at random instants (API S27-S30)
 *
 * Workers are this program re-executed ("--scenario worker") with the
 * region's memfd inherited; each joins with vr_region_from_fd in a ctx of
 * its own.  The region is cut into page-aligned slots; an owner worker
 * owns some of them and cycles each through
 *     STABLE(g): non-volatile, holding generation g
 *  -> MARKING -> VOLATILE (marked whole, or in two halves)
 *  -> UNMARKING -> FILLING(g + 1) -> STABLE(g + 1)
 * recording every step in a journal (a memfd shared by all, one atomic
 * word per slot: generation and state, never repeating).  After
 * vr_unmark returns VR_INTACT the data must be generation g; after
 * VR_PURGED each piece it marked is either all g or all zeros (a range is
 * purged whole, S7, S30).  While a slot is VOLATILE its owner also reads
 * it: a read returns the data or traps, never zeros.  Purgers purge
 * random amounts, a "hog" marks and unmarks in a tight loop (so kills land
 * while it holds the file's lock).
 *
 * The scenario process is the verifier: it keeps reading STABLE slots of
 * live workers (a change of the journal word during the read voids the
 * read; a trap or a wrong byte without one is a lost non-volatile byte),
 * and in the kill scenarios SIGKILLs a random worker at random instants,
 * takes over its slots (per the journal: a STABLE slot must read intact;
 * a slot caught marking or volatile is unmarked and checked as above;
 * one caught unmarking may also read all zeros), calls into the library
 * at once (the next caller must proceed: no call hangs, alarm() is the
 * hang detector in every process) and starts a new worker.
 *
 *   stress      3 owner/purger processes, no kills (~2 s)
 *   kill        owners, a purger and a hog, 20 kills (~3 s)
 *   kill_long   a peer killed while it purges 500 ranges (each ends
 *               purged or intact), unmarks 500 purged ranges at once (each
 *               is still purged, or readable) or makes one merge of 500
 *               ranges (the map and the gauges agree)
 *   race        4 processes of 2 threads mark, unmark, purge page-aligned
 *               ranges at random (race_kill: and are killed): the state left is one
 *               a serial history could leave (gauges, traps, data)
 *   purges      3 processes purge at once: every range purged once
 *   first_caller  after a lock holder is killed, the first call of each
 *               kind (a fault, status, stat, purge, mark, a join) proceeds
 *   kill-soak   kill with VT_KILLS kills (slow suite: 150)
 * Run with the default trap backend, VRANGE_TRAP=uffd and VRANGE_TRAP=guard.
 */
#define _GNU_SOURCE
#include "vt-shared.h"

#include <pthread.h>
#include <stdatomic.h>

#define KJ_SLOTS 24  /* data slots: owners' */
#define KJ_SCRATCH 4 /* the hog's slots, after the data slots */
#define KJ_SLOT_PAGES 4
#define KJ_MAXW 8
#define VP_STATE (VR_STATE_VOLATILE | VR_STATE_PURGED)

enum kj_state { KS_STABLE = 1, KS_MARKING, KS_VOLATILE, KS_UNMARKING, KS_FILLING };
#define KS_HALVES 0x10 /* VOLATILE/MARKING/UNMARKING: marked in two halves */

enum kj_role { KR_OWNER, KR_OWNER_PURGER, KR_PURGER, KR_HOG };

struct kj {
	_Atomic int stop;
	int nowners;
	_Atomic uint64_t word[KJ_SLOTS]; /* gen << 8 | state */
	_Atomic uint64_t intact, purged, traps, ops[KJ_MAXW];
};

static struct kj *J;
static size_t P, SLOT;

static uint64_t kj_word(uint64_t gen, unsigned st)
{
	return gen << 8 | st;
}
static unsigned kj_st(uint64_t w)
{
	return (unsigned)(w & 0xff);
}
static uint64_t kj_gen(uint64_t w)
{
	return w >> 8;
}
/* the pattern generation of slot s at generation g: unique per slot */
static uint64_t kj_pat(size_t s, uint64_t g)
{
	return (uint64_t)s << 40 | g;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int env_int(const char *k, int d)
{
	const char *v = getenv(k);
	return v ? atoi(v) : d;
}

static struct kj *map_journal(int fd)
{
	struct kj *j = mmap(NULL, sizeof(*j), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CK(j != MAP_FAILED);
	return j;
}

/* every byte of [off, off + len) is generation pg, or every byte is 0
 * (zero_ok), else the check fails; returns 1 for zeros */
static int piece_is(int reg, size_t off, size_t len, uint64_t pg, bool zero_ok, const char *what)
{
	int64_t v[4];
	int64_t rc =
		vs_call_fd(&(struct vs_proc){ .sock = -1 }, VS_CHECK, reg, off, len, pg, -1, v);
	if (rc == 0)
		return 0;
	CK(rc != VS_TRAPPED, "(%s: trap at offset %" PRId64 ")", what, v[0]);
	if (zero_ok) {
		int64_t z = vs_call_fd(&(struct vs_proc){ .sock = -1 }, VS_CHECK, reg, off, len,
				       VS_ZERO, -1, v);
		if (z == 0)
			return 1;
	}
	CK(0,
	   "(%s: [%zu, +%zu) is neither its data nor zeros: offset %" PRId64 " reads %" PRId64 ")",
	   what, off, len, v[0], v[1]);
	return -1;
}

/* after vr_unmark of slot s (state word w) returned rc: the truth */
static void check_unmarked(int reg, size_t s, uint64_t w, int rc, bool zeros_ok)
{
	uint64_t g = kj_pat(s, kj_gen(w));
	size_t off = s * SLOT;
	CK(rc == VR_INTACT || rc == VR_PURGED, "(vr_unmark: %d)", rc);
	if (rc == VR_INTACT) {
		piece_is(reg, off, SLOT, g, zeros_ok, "VR_INTACT unmark");
		atomic_fetch_add(&J->intact, 1);
		return;
	}
	int z;
	if (kj_st(w) & KS_HALVES)
		z = piece_is(reg, off, SLOT / 2, g, true, "VR_PURGED unmark, first half") +
		    piece_is(reg, off + SLOT / 2, SLOT / 2, g, true,
			     "VR_PURGED unmark, second half");
	else
		z = piece_is(reg, off, SLOT, g, true, "VR_PURGED unmark");
	CK(z > 0 || zeros_ok, "(VR_PURGED but slot %zu holds all its data)", s);
	atomic_fetch_add(&J->purged, 1);
}

/* ---- workers ---- */

static void set_word(size_t s, uint64_t w)
{
	atomic_store(&J->word[s], w);
}

/* one step of the owner's cycle on slot s */
static void owner_step(int reg, size_t s, struct vt_rng *rng)
{
	struct vr_region *r = VS.r[reg];
	size_t off = s * SLOT;
	uint64_t w = atomic_load(&J->word[s]);
	uint64_t g = kj_gen(w);
	switch (kj_st(w) & 0xf) {
	case KS_STABLE: {
		piece_is(reg, off, SLOT, kj_pat(s, g), false, "owner: a STABLE slot");
		bool halves = vt_below(rng, 3) == 0;
		unsigned h = halves ? KS_HALVES : 0;
		set_word(s, kj_word(g, KS_MARKING | h));
		if (halves) {
			CK_EQ(vr_mark(r, off, SLOT / 2), VR_INTACT);
			CK_EQ(vr_mark(r, off + SLOT / 2, SLOT / 2), VR_INTACT);
		} else {
			CK_EQ(vr_mark(r, off, SLOT), VR_INTACT);
		}
		set_word(s, kj_word(g, KS_VOLATILE | h));
		return;
	}
	case KS_VOLATILE:
		if (vt_below(rng, 2) == 0) {
			/* lazy access: the data or a trap, never zeros */
			size_t at = off + vt_below(rng, SLOT);
			int64_t v[4];
			int64_t rc = vs_call_fd(&(struct vs_proc){ .sock = -1 }, VS_READ, reg, at,
						0, 0, -1, v);
			if (rc == VS_TRAPPED) {
				CK_EQ(v[0], (int64_t)at);
				CK_EQ(v[1], BUS_ADRERR);
				CK_EQ(vr_status(r, at, 1), VR_STATE_VOLATILE | VR_STATE_PURGED);
				atomic_fetch_add(&J->traps, 1);
			} else {
				CK(v[0] == vt_pat(kj_pat(s, g), at),
				   "(volatile byte at %zu reads %" PRId64 ", not its data)", at,
				   v[0]);
			}
			return;
		}
		set_word(s, kj_word(g, KS_UNMARKING | (kj_st(w) & KS_HALVES)));
		check_unmarked(reg, s, w, vr_unmark(r, off, SLOT), false);
		set_word(s, kj_word(g + 1, KS_FILLING));
		vt_fill((uint8_t *)vr_region_base(r) + off, off, SLOT, kj_pat(s, g + 1));
		set_word(s, kj_word(g + 1, KS_STABLE));
		return;
	default:
		CK(0, "(slot %zu of a live owner in state %#x)", s, kj_st(w));
	}
}

static void sc_worker(void)
{
	P = vt_pg();
	SLOT = KJ_SLOT_PAGES * P;
	int id = env_int("VT_K_ID", -1), role = env_int("VT_K_ROLE", -1);
	J = map_journal(env_int("VT_K_JFD", -1));
	vs_init();
	int reg = vs_join(&(struct vs_proc){ .sock = -1 }, env_int("VT_K_FD", -1), 0);
	CK(reg >= 0, "(join: %d)", reg);
	struct vr_region *r = VS.r[reg];
	struct vt_rng rng;
	vt_seed(&rng, (uint64_t)env_int("VT_K_SEED", 1) * 131 + (uint64_t)getpid());
	size_t data = KJ_SLOTS * SLOT;
	while (!atomic_load(&J->stop)) {
		alarm(30); /* a call that hangs kills this worker with SIGALRM */
		atomic_fetch_add(&J->ops[id], 1);
		switch (role) {
		case KR_OWNER:
		case KR_OWNER_PURGER: {
			size_t n = (KJ_SLOTS - (size_t)id + (size_t)J->nowners - 1) /
				   (size_t)J->nowners;
			owner_step(reg, (size_t)id + vt_below(&rng, n) * (size_t)J->nowners, &rng);
			if (role == KR_OWNER_PURGER && vt_below(&rng, 4) == 0)
				CK(vr_ctx_purge(VS.ctx, vt_below(&rng, 3 * SLOT)) >= 0);
			usleep((useconds_t)vt_below(&rng, 300));
			break;
		}
		case KR_PURGER: {
			size_t n = vt_below(&rng, 8) == 0 ? SIZE_MAX : (vt_below(&rng, 8) + 1) * P;
			CK(vr_ctx_purge(VS.ctx, n) >= 0);
			int st = vr_status(r, 0, data);
			CK(st >= 0 && st <= (int)(VR_STATE_VOLATILE | VR_STATE_PURGED), "(%d)", st);
			usleep((useconds_t)vt_below(&rng, 2000));
			break;
		}
		case KR_HOG: {
			/* mark and unmark the same bytes: the lock, again and again */
			size_t off = data + vt_below(&rng, KJ_SCRATCH * SLOT / 2);
			size_t len = 1 + vt_below(&rng, 3 * P);
			int rc = vr_mark(r, off, len);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
			rc = vr_unmark(r, off, len);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
			break;
		}
		default:
			CK(0, "(role %d)", role);
		}
	}
	vr_ctx_destroy(VS.ctx);
	_exit(0);
}

/* ---- the verifier ---- */

struct kworker {
	pid_t pid;
	int role;
};

static int K_FD, K_JFD;
static uint64_t K_SEED;

/* a re-executed copy of this program running scenario (worker or
 * racer) with its parameters in the environment; role < 0: none */
static pid_t start_child(const char *scenario, int id, int role, uint64_t seed)
{
	char b[5][24];
	snprintf(b[0], sizeof(b[0]), "%d", id);
	snprintf(b[1], sizeof(b[1]), "%d", role);
	snprintf(b[2], sizeof(b[2]), "%d", K_FD);
	snprintf(b[3], sizeof(b[3]), "%d", K_JFD);
	snprintf(b[4], sizeof(b[4]), "%" PRIu64, seed);
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		setenv("VT_K_ID", b[0], 1);
		if (role >= 0)
			setenv("VT_K_ROLE", b[1], 1);
		setenv("VT_K_FD", b[2], 1);
		setenv("VT_K_JFD", b[3], 1);
		setenv("VT_K_SEED", b[4], 1);
		vt_default_signals();
		execl(program_invocation_name, "vt-scenario", "--scenario", scenario, (char *)NULL);
		execl("/proc/self/exe", "vt-scenario", "--scenario", scenario, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static pid_t start_worker(int id, int role)
{
	return start_child("worker", id, role, K_SEED + (uint64_t)id * 7919);
}

/* a worker that ended by itself: a failed check (3), SIGALRM (a call
 * hung) or a signal of its own */
static void fail_worker(int id, int st)
{
	CK(0, "(worker %d: %s %d)", id, WIFSIGNALED(st) ? "signal" : "exit",
	   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* read a STABLE slot of a live worker: a change of its word voids it */
static void verify_live(int reg, size_t s)
{
	uint64_t w1 = atomic_load(&J->word[s]);
	if (kj_st(w1) != KS_STABLE)
		return;
	int64_t v[4];
	int64_t rc = vs_call_fd(&(struct vs_proc){ .sock = -1 }, VS_CHECK, reg, s * SLOT, SLOT,
				kj_pat(s, kj_gen(w1)), -1, v);
	uint64_t w2 = atomic_load(&J->word[s]);
	CK(rc == 0 || w1 != w2, "(verifier: non-volatile slot %zu: %s at offset %" PRId64 ")", s,
	   rc == VS_TRAPPED ? "trap" : "wrong byte", v[0]);
}

/* take over slot s of a dead owner and leave it STABLE */
static void repair_slot(int reg, size_t s)
{
	struct vr_region *r = VS.r[reg];
	size_t off = s * SLOT;
	uint64_t w = atomic_load(&J->word[s]);
	uint64_t g = kj_gen(w);
	switch (kj_st(w) & 0xf) {
	case KS_STABLE:
		CK_EQ(vr_status(r, off, SLOT), 0);
		piece_is(reg, off, SLOT, kj_pat(s, g), false, "repair: a STABLE slot");
		return;
	case KS_MARKING:
	case KS_VOLATILE:
		check_unmarked(reg, s, w, vr_unmark(r, off, SLOT), false);
		break;
	case KS_UNMARKING:
		/* its own unmark may have returned VR_PURGED already */
		check_unmarked(reg, s, w, vr_unmark(r, off, SLOT), true);
		break;
	case KS_FILLING:
		CK_EQ(vr_unmark(r, off, SLOT), VR_INTACT);
		break;
	default:
		CK(0, "(slot %zu in state %#x)", s, kj_st(w));
	}
	vt_fill((uint8_t *)vr_region_base(r) + off, off, SLOT, kj_pat(s, g + 1));
	set_word(s, kj_word(g + 1, KS_STABLE));
}

/* the next caller proceeds after a death: a mark, a status, a purge, an
 * unmark of scratch bytes (alarm() catches a hang) */
static void next_caller(int reg)
{
	struct vr_region *r = VS.r[reg];
	size_t off = (KJ_SLOTS + KJ_SCRATCH) * SLOT - 3 * P;
	alarm(20);
	int rc = vr_mark(r, off, 3 * P);
	CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
	CK(vr_status(r, 0, vr_region_size(r)) >= 0);
	CK(vr_ctx_purge(VS.ctx, P) >= 0);
	rc = vr_unmark(r, off, 3 * P);
	CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
}

static void run_verifier(const int *roles, int nw, int nowners, int kills, double seconds)
{
	P = vt_pg();
	SLOT = KJ_SLOT_PAGES * P;
	K_SEED = vt_get_seed("shared-kill");
	struct vt_rng rng;
	vt_seed(&rng, K_SEED);
	K_JFD = memfd_create("vt-journal", 0);
	CK(K_JFD >= 0);
	CK_EQ(ftruncate(K_JFD, sizeof(struct kj)), 0);
	J = map_journal(K_JFD);
	J->nowners = nowners;
	vs_init();
	int reg = vs_new_shared(&(struct vs_proc){ .sock = -1 }, (KJ_SLOTS + KJ_SCRATCH) * SLOT);
	struct vr_region *r = VS.r[reg];
	for (size_t s = 0; s < KJ_SLOTS; s++) {
		vt_fill((uint8_t *)vr_region_base(r) + s * SLOT, s * SLOT, SLOT, kj_pat(s, 1));
		set_word(s, kj_word(1, KS_STABLE));
	}
	K_FD = dup(vr_region_fd(r)); /* without O_CLOEXEC: the workers inherit it */
	CK(K_FD >= 0);
	struct kworker w[KJ_MAXW];
	for (int i = 0; i < nw; i++)
		w[i] = (struct kworker){ .pid = start_worker(i, roles[i]), .role = roles[i] };
	double t0 = now_s(), next = t0 + 0.05;
	int killed = 0;
	while (kills ? killed < kills : now_s() - t0 < seconds) {
		alarm(30);
		verify_live(reg, vt_below(&rng, KJ_SLOTS));
		int st;
		for (int i = 0; i < nw; i++)
			if (vs_waitpid(w[i].pid, &st, WNOHANG) == w[i].pid)
				fail_worker(i, st);
		if (!kills || now_s() < next) {
			usleep(200);
			continue;
		}
		int i = (int)vt_below(&rng, (uint64_t)nw);
		CK_EQ(kill(w[i].pid, SIGKILL), 0);
		CK_EQ(vs_waitpid(w[i].pid, &st, 0), w[i].pid);
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
			fail_worker(i, st);
		killed++;
		if (w[i].role == KR_OWNER || w[i].role == KR_OWNER_PURGER)
			for (size_t s = (size_t)i; s < KJ_SLOTS; s += (size_t)nowners)
				repair_slot(reg, s);
		next_caller(reg);
		w[i].pid = start_worker(i, w[i].role);
		/* sometimes at once: the new worker dies while it joins */
		next = now_s() + (vt_below(&rng, 8) == 0 ? 0.001 : 0.01) +
		       (double)vt_below(&rng, 150) / 1000.0;
	}
	atomic_store(&J->stop, 1);
	for (int i = 0; i < nw; i++) {
		int st;
		alarm(60);
		CK_EQ(vs_waitpid(w[i].pid, &st, 0), w[i].pid);
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			fail_worker(i, st);
		CK(atomic_load(&J->ops[i]) > 0, "(worker %d did nothing)", i);
	}
	/* every slot, whoever left it how */
	for (size_t s = 0; s < KJ_SLOTS; s++)
		repair_slot(reg, s);
	printf("shared-kill: %d kills, %" PRIu64 " intact and %" PRIu64
	       " purged unmarks verified, %" PRIu64 " traps\n",
	       killed, atomic_load(&J->intact), atomic_load(&J->purged), atomic_load(&J->traps));
	/* the run exercised both answers (not a timing bound: a count) */
	CK(atomic_load(&J->intact) > 0 && atomic_load(&J->purged) > 0);
	close(K_FD);
	vr_ctx_destroy(VS.ctx);
}

static void sc_stress(void)
{
	const int roles[] = { KR_OWNER_PURGER, KR_OWNER_PURGER, KR_OWNER_PURGER };
	run_verifier(roles, 3, 3, 0, env_int("VT_STRESS_SECONDS", 2));
}

static void sc_kill(void)
{
	const int roles[] = { KR_OWNER, KR_OWNER, KR_OWNER_PURGER, KR_PURGER, KR_HOG };
	run_verifier(roles, 5, 3, env_int("VT_KILLS", 20), 0);
}

/* ---- one long call killed at a random instant ----
 * A peer purges one big range, or marks one range that merges hundreds,
 * and is killed while it runs: the range ends purged (every whole page
 * reads 0 after vr_unmark) or intact (every byte kept), the merge
 * happened or not, and the next caller proceeds. */
static void kill_peer_during(struct vs_proc *B, int op, int reg, uint64_t a, uint64_t b,
			     struct vt_rng *rng, unsigned max_us)
{
	struct vs_req q = { .op = op, .reg = reg, .a = a, .b = b };
	vs_sendmsg(B->sock, &q, sizeof(q), -1);
	usleep((useconds_t)vt_below(rng, max_us));
	CK_EQ(kill(B->pid, SIGKILL), 0);
	int st = vs_reap(B);
	CK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "(peer: status 0x%x)", st);
	close(B->sock);
}

/* the volatile bytes of [off, off + len), counted byte by byte with
 * vr_status, and the maximal runs they form */
static void scan_volatile(struct vr_region *r, size_t off, size_t len, size_t *bytes, size_t *runs)
{
	*bytes = *runs = 0;
	bool prev = false;
	for (size_t i = 0; i < len; i++) {
		int st = vr_status(r, off + i, 1);
		CK(st >= 0);
		bool v = st & VR_STATE_VOLATILE;
		*bytes += v;
		*runs += v && !prev;
		prev = v;
	}
}

static void sc_kill_long(void)
{
	P = vt_pg();
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("shared-kill-long"));

	vs_init();
	const size_t nr = 500, stride = 8 * P, rlen = 7 * P, big = nr * stride;
	int ra = vs_new_shared(&A, big + 16 * P);
	struct vr_region *r = VS.r[ra];
	uint8_t *base = vr_region_base(r);
	int64_t v[4];
	for (uint64_t round = 0; round < 5; round++) {
		alarm(30);
		/* one purge of 500 ranges, killed: each ends purged or intact */
		vt_fill(base, 0, big, round + 1);
		for (size_t i = 0; i < nr; i++)
			CK_EQ(vr_mark(r, i * stride, rlen), VR_INTACT);
		struct vs_proc B = vs_spawn();
		int fd = vs_fd_of(&A, ra);
		int rb = vs_join(&B, fd, 0);
		close(fd);
		CK(rb >= 0);
		kill_peer_during(&B, VS_PURGE, 0, SIZE_MAX, 0, &rng, 12000);
		size_t purged = 0;
		for (size_t i = 0; i < nr; i++) {
			int rc = vr_unmark(r, i * stride, rlen);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
			purged += rc == VR_PURGED;
			int64_t c = vs_call_fd(&A, VS_CHECK, ra, i * stride, rlen,
					       rc == VR_INTACT ? round + 1 : VS_ZERO, -1, v);
			/* S5: after VR_PURGED the discarded pages read zero and
			 * the others keep their data: a page the killed purger
			 * had not punched, and the repair could not punch (a
			 * mapper slow to answer its ARM), is still this round's */
			for (size_t pg = 0; rc == VR_PURGED && pg < rlen; pg += P) {
				c = vs_call_fd(&A, VS_CHECK, ra, i * stride + pg, P, VS_ZERO, -1,
					       v);
				if (c != 0)
					c = vs_call_fd(&A, VS_CHECK, ra, i * stride + pg, P,
						       round + 1, -1, v);
				if (c != 0)
					break;
			}
			CK(c == 0,
			   "(round %" PRIu64 ", range %zu: vr_unmark says %s; offset %" PRId64
			   ": %s %" PRId64 ")",
			   round, i, rc == VR_INTACT ? "intact" : "purged", v[0],
			   c == VS_TRAPPED ? "trap" : "byte", v[1]);
			/* the non-volatile page after it */
			c = vs_call_fd(&A, VS_CHECK, ra, i * stride + rlen, P, round + 1, -1, v);
			CK(c == 0, "(non-volatile page at %zu: offset %" PRId64 ")",
			   i * stride + rlen, v[0]);
		}
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_RANGES), 0);
		printf("kill-long %" PRIu64 ": purge killed after %zu of %zu ranges\n", round,
		       purged, nr);

		/* one unmark of 500 purged ranges, killed: each range is still
		 * purged (and traps) or non-volatile and readable (zeros) */
		for (size_t i = 0; i < nr; i++)
			CK_EQ(vr_mark(r, i * stride, rlen), VR_INTACT);
		CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)(nr * 7 * P));
		B = vs_spawn();
		fd = vs_fd_of(&A, ra);
		rb = vs_join(&B, fd, 0);
		close(fd);
		CK(rb >= 0);
		kill_peer_during(&B, VS_UNMARK, rb, 0, big, &rng, 12000);
		size_t left = 0;
		for (size_t i = 0; i < nr; i++) {
			int st = vr_status(r, i * stride, rlen);
			CK(st == 0 || st == VP_STATE, "(range %zu: status %d)", i, st);
			if (st) {
				left++;
				CK_EQ(vs_call_fd(&A, VS_READ, ra, i * stride + 3 * P, 0, 0, -1, v),
				      VS_TRAPPED);
				CK_EQ(vr_unmark(r, i * stride, rlen), VR_PURGED);
			}
			int64_t c = vs_call_fd(&A, VS_CHECK, ra, i * stride, rlen, VS_ZERO, -1, v);
			CK(c == 0,
			   "(round %" PRIu64 ", range %zu, %s: offset %" PRId64 ": %s %" PRId64 ")",
			   round, i, st ? "purged" : "unmarked by the dead process", v[0],
			   c == VS_TRAPPED ? "trap" : "byte", v[1]);
		}
		printf("kill-long %" PRIu64 ": unmark killed with %zu of %zu ranges left\n", round,
		       left, nr);
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_RANGES), 0);

		/* a mark merging 500 ranges, killed: the map and the gauges agree */
		size_t m = big + P;
		for (size_t i = 0; i < nr; i++)
			CK_EQ(vr_mark(r, m + 2 * i, 1), VR_INTACT);
		B = vs_spawn();
		fd = vs_fd_of(&A, ra);
		rb = vs_join(&B, fd, 0);
		close(fd);
		CK(rb >= 0);
		kill_peer_during(&B, VS_MARK, rb, m, 2 * nr, &rng, 3000);
		size_t bytes, runs;
		scan_volatile(r, m, 2 * nr, &bytes, &runs);
		uint64_t n = vr_ctx_stat(VS.ctx, VR_STAT_RANGES);
		CK_EQ(n, runs);
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_VOLATILE_BYTES), bytes);
		CK(bytes >= nr, "(%zu volatile bytes: a marked byte lost its state)", bytes);
		if (n != nr && n != 1)
			printf("kill-long %" PRIu64 ": merge killed midway: %" PRIu64
			       " ranges, %zu bytes volatile\n",
			       round, n, bytes);
		CK_EQ(vr_unmark(r, m, 2 * nr), VR_INTACT);
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_RANGES), 0);
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_VOLATILE_BYTES), 0);
	}
	vr_ctx_destroy(VS.ctx);
}

/* ---- racing processes: page-aligned marks, unmarks, purges ----
 * Racers change the state of one file at random with no plan; when they
 * are stopped (or killed at random instants, race_kill) the state must be
 * one a serial history could leave: the gauges agree with vr_status page
 * by page, every page of a purged range traps, every other page reads
 * without a trap, all its data or all zeros. */
#define RACE_PAGES 48

struct racer {
	struct vr_region *r;
	uint64_t seed;
	int id;
};

/* random page-aligned marks, unmarks, purges and statuses until stopped */
static void *racer_loop(void *arg)
{
	struct racer *a = arg;
	struct vt_rng rng;
	vt_seed(&rng, a->seed);
	while (!atomic_load(&J->stop)) {
		atomic_fetch_add(&J->ops[a->id], 1);
		size_t at = vt_below(&rng, RACE_PAGES), n = 1 + vt_below(&rng, RACE_PAGES - at);
		uint64_t op = vt_below(&rng, 20);
		int rc;
		if (op < 11) {
			rc = vr_mark(a->r, at * P, n * P);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(mark: %d)", rc);
		} else if (op < 18) {
			rc = vr_unmark(a->r, at * P, n * P);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(unmark: %d)", rc);
		} else if (op < 19) {
			CK(vr_ctx_purge(VS.ctx, vt_below(&rng, 4) * P) >= 0);
		} else {
			rc = vr_status(a->r, at * P, n * P);
			CK(rc >= 0 && rc <= (int)(VR_STATE_VOLATILE | VR_STATE_PURGED), "(%d)", rc);
		}
	}
	return NULL;
}

/* a racer process: two threads (a kill may find either holding the lock) */
static void sc_racer(void)
{
	P = vt_pg();
	int id = env_int("VT_K_ID", -1);
	J = map_journal(env_int("VT_K_JFD", -1));
	vs_init();
	int reg = vs_join(&(struct vs_proc){ .sock = -1 }, env_int("VT_K_FD", -1), 0);
	CK(reg >= 0, "(join: %d)", reg);
	uint64_t seed = (uint64_t)env_int("VT_K_SEED", 1) * 131 + (uint64_t)getpid();
	struct racer a[2] = { { VS.r[reg], seed, id }, { VS.r[reg], seed + 1, id } };
	alarm(60); /* a call that hangs kills this racer with SIGALRM */
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, racer_loop, &a[1]), 0);
	racer_loop(&a[0]);
	CK_EQ(pthread_join(t, NULL), 0);
	vr_ctx_destroy(VS.ctx);
	_exit(0);
}

static pid_t start_racer(int id)
{
	return start_child("racer", id, -1, K_SEED + (uint64_t)id * 104729);
}

/* the state left: serial-history invariants (see above) */
static void check_race_state(int reg)
{
	struct vr_region *r = VS.r[reg];
	size_t vol = 0, pur = 0, runs = 0;
	int prev = 0;
	for (size_t pg = 0; pg < RACE_PAGES; pg++) {
		int st = vr_status(r, pg * P, P);
		CK(st == 0 || st == VR_STATE_VOLATILE || st == VP_STATE, "(page %zu: %d)", pg, st);
		vol += st == VR_STATE_VOLATILE;
		pur += st == VP_STATE;
		runs += st && st != prev;
		prev = st;
		int64_t v[4];
		if (st == VP_STATE) {
			int64_t rc = vs_call_fd(&(struct vs_proc){ .sock = -1 }, VS_READ, reg,
						pg * P + 5, 0, 0, -1, v);
			CK(rc == VS_TRAPPED, "(page %zu is purged but reads %" PRId64 ")", pg,
			   v[0]);
			continue;
		}
		/* all its data or all zeros, and no trap */
		piece_is(reg, pg * P, P, 1, true, st ? "a volatile page" : "a non-volatile page");
	}
	uint64_t n = vr_ctx_stat(VS.ctx, VR_STAT_RANGES);
	CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_VOLATILE_BYTES), vol * P);
	CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_PURGED_BYTES), pur * P);
	CK(n >= runs && n <= runs + pur, "(%" PRIu64 " ranges, %zu runs, %zu purged pages)", n,
	   runs, pur);
	int rc = vr_unmark(r, 0, RACE_PAGES * P);
	CK_EQ(rc, pur ? VR_PURGED : VR_INTACT);
	CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_RANGES), 0);
	printf("race: %zu volatile, %zu purged pages, %" PRIu64 " ranges at the end\n", vol, pur,
	       n);
}

static void run_race(int kills)
{
	P = vt_pg();
	SLOT = KJ_SLOT_PAGES * P;
	K_SEED = vt_get_seed("shared-race");
	struct vt_rng rng;
	vt_seed(&rng, K_SEED);
	K_JFD = memfd_create("vt-journal", 0);
	CK(K_JFD >= 0);
	CK_EQ(ftruncate(K_JFD, sizeof(struct kj)), 0);
	J = map_journal(K_JFD);
	vs_init();
	int reg = vs_new_shared(&(struct vs_proc){ .sock = -1 }, RACE_PAGES * P);
	vt_fill(vr_region_base(VS.r[reg]), 0, RACE_PAGES * P, 1);
	K_FD = dup(vr_region_fd(VS.r[reg]));
	CK(K_FD >= 0);
	enum { NR = 4 };
	pid_t w[NR];
	for (int i = 0; i < NR; i++)
		w[i] = start_racer(i);
	double t0 = now_s();
	int killed = 0;
	while (kills ? killed < kills : now_s() - t0 < 1.5) {
		alarm(30);
		usleep((useconds_t)(kills ? 5000 + vt_below(&rng, 60000) : 10000));
		int st;
		for (int i = 0; i < NR; i++)
			if (vs_waitpid(w[i], &st, WNOHANG) == w[i])
				fail_worker(i, st);
		if (!kills)
			continue;
		int i = (int)vt_below(&rng, NR);
		CK_EQ(kill(w[i], SIGKILL), 0);
		CK_EQ(vs_waitpid(w[i], &st, 0), w[i]);
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
			fail_worker(i, st);
		killed++;
		CK(vr_status(VS.r[reg], 0, RACE_PAGES * P) >= 0); /* the next caller proceeds */
		w[i] = start_racer(i);
	}
	atomic_store(&J->stop, 1);
	for (int i = 0; i < NR; i++) {
		int st;
		alarm(60);
		CK_EQ(vs_waitpid(w[i], &st, 0), w[i]);
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			fail_worker(i, st);
	}
	check_race_state(reg);
	close(K_FD);
	vr_ctx_destroy(VS.ctx);
}

static void sc_race(void)
{
	run_race(0);
}

static void sc_race_kill(void)
{
	run_race(env_int("VT_KILLS", 25));
}

/* ---- the first caller after a lock holder died ----
 * A peer marks and unmarks in a loop and is killed at a random instant
 * (often while it holds the file's lock); the first thing to touch the
 * file next is, in turn: a fault on a discarded page, vr_status,
 * vr_ctx_stat, a purge, a mark, a new process joining (and faulting).
 * None may hang (alarm), and the purged range stays purged and trapping. */
static void sc_first_caller(void)
{
	P = vt_pg();
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("shared-first-caller"));

	vs_init();
	int ra = vs_new_shared(&A, 64 * P);
	struct vr_region *r = VS.r[ra];
	vt_fill(vr_region_base(r), 0, 64 * P, 4);
	CK_EQ(vr_mark(r, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)(4 * P));
	int64_t v[4];
	for (int round = 0; round < 36; round++) {
		alarm(20);
		struct vs_proc B = vs_spawn();
		int fd = vs_fd_of(&A, ra);
		int rb = vs_join(&B, fd, 0);
		CK(rb >= 0);
		struct vs_req q = {
			.op = VS_HOG, .reg = rb, .a = 8 * P + 100, .b = 40 * P, .c = 1000000
		};
		vs_sendmsg(B.sock, &q, sizeof(q), -1);
		usleep((useconds_t)(500 + vt_below(&rng, 4000)));
		CK_EQ(kill(B.pid, SIGKILL), 0);
		int st = vs_reap(&B);
		CK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "(hog: status 0x%x)", st);
		close(B.sock);
		size_t at = vt_below(&rng, 4 * P);
		switch (round % 6) {
		case 0:
			CK_EQ(vs_call_fd(&A, VS_READ, ra, at, 0, 0, -1, v), VS_TRAPPED);
			CK_EQ(v[0], (int64_t)at);
			break;
		case 1:
			CK_EQ(vr_status(r, 0, 4 * P), VP_STATE);
			break;
		case 2:
			CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_PURGED_BYTES), 4 * P);
			break;
		case 3:
			CK(vr_ctx_purge(VS.ctx, P) >= 0);
			break;
		case 4:
			CK_EQ(vr_mark(r, 60 * P, P), VR_INTACT);
			CK_EQ(vr_unmark(r, 60 * P, P), VR_INTACT);
			break;
		case 5: {
			struct vs_proc C = vs_spawn();
			int rc = vs_join(&C, fd, 0);
			CK(rc >= 0);
			CK_EQ(vs_call_fd(&C, VS_READ, rc, at, 0, 0, -1, v), VS_TRAPPED);
			CK_EQ(vs_call(&C, VS_STATUS, rc, 0, 4 * P, 0), VP_STATE);
			vs_stop(&C);
			break;
		}
		}
		close(fd);
		CK_EQ(vr_status(r, 0, 4 * P), VP_STATE);
		CK_EQ(vs_call_fd(&A, VS_READ, ra, at, 0, 0, -1, v), VS_TRAPPED);
		CK_EQ(vs_call_fd(&A, VS_CHECK, ra, 4 * P, 4 * P, 4, -1, v), 0);
		/* the hog's bytes: volatile or not, never purged data lost
		 * outside them */
		CK_EQ(vs_call_fd(&A, VS_CHECK, ra, 48 * P + 100, 16 * P - 100, 4, -1, v), 0);
	}
	/* how often the kill found the hog holding the lock (informative) */
	printf("first-caller: %" PRIu64 " repairs in this process\n",
	       vr_ctx_stat(VS.ctx, VR_STAT_REPAIRS));
	vr_ctx_destroy(VS.ctx);
}

/* ---- concurrent purges: every range purged once ---- */
static void sc_purges(void)
{
	P = vt_pg();
	vs_init();
	struct vs_proc peer[3];
	const size_t nr = 300;
	int ra = vs_new_shared(&A, 2 * nr * P);
	vt_fill(vr_region_base(VS.r[ra]), 0, 2 * nr * P, 3);
	int reg[3];
	for (int i = 0; i < 3; i++) {
		peer[i] = vs_spawn();
		int fd = vs_fd_of(&A, ra);
		reg[i] = vs_join(&peer[i], fd, 0);
		close(fd);
		CK(reg[i] >= 0);
	}
	for (int round = 0; round < 5; round++) {
		for (size_t i = 0; i < nr; i++)
			CK_EQ(vr_mark(VS.r[ra], 2 * i * P, P), VR_INTACT);
		uint64_t before[3];
		for (int i = 0; i < 3; i++)
			before[i] = (uint64_t)vs_call(&peer[i], VS_STAT, 0, VR_STAT_PURGES, 0, 0);
		/* all three at once */
		struct vs_req q = { .op = VS_PURGE, .a = SIZE_MAX };
		for (int i = 0; i < 3; i++)
			vs_sendmsg(peer[i].sock, &q, sizeof(q), -1);
		int64_t total = 0;
		uint64_t purges = 0;
		for (int i = 0; i < 3; i++) {
			struct vs_rep rep;
			int fd;
			CK_EQ(vs_recvmsg(peer[i].sock, &rep, sizeof(rep), &fd),
			      (ssize_t)sizeof(rep));
			CK(rep.rc >= 0);
			total += rep.rc;
			purges += (uint64_t)vs_call(&peer[i], VS_STAT, 0, VR_STAT_PURGES, 0, 0) -
				  before[i];
		}
		CK_EQ(total, (int64_t)(nr * P));
		CK_EQ(purges, nr);
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_PURGED_BYTES), nr * P);
		for (size_t i = 0; i < nr; i++)
			CK_EQ(vr_unmark(VS.r[ra], 2 * i * P, P), VR_PURGED);
		int64_t v[4];
		for (size_t i = 0; i < nr; i++)
			CK_EQ(vs_call_fd(&A, VS_CHECK, ra, (2 * i + 1) * P, P, 3, -1, v), 0);
	}
	for (int i = 0; i < 3; i++)
		vs_stop(&peer[i]);
	vr_ctx_destroy(VS.ctx);
}

static const struct vt_scenario scenarios[] = {
	{ "peer", vs_peer_main },      { "worker", sc_worker },
	{ "stress", sc_stress },       { "kill", sc_kill },
	{ "kill_long", sc_kill_long }, { "racer", sc_racer },
	{ "race", sc_race },           { "race_kill", sc_race_kill },
	{ "purges", sc_purges },       { "first_caller", sc_first_caller },
};

static void run_backends(const char *name)
{
	vs_run_traps(name, 4);
}

/* the outer and the default backend only (shared regions trap through
 * userfaultfd under both forced ones today: the kill scenarios cover them) */
static void run_default(const char *name)
{
	vs_run_traps(name, 2);
}

static void test_stress(void **state)
{
	(void)state;
	run_default("stress");
}

static void test_kill(void **state)
{
	(void)state;
	run_backends("kill");
}

static void test_race(void **state)
{
	(void)state;
	run_default("race");
	run_default("race_kill");
}

static void test_first_caller_after_death(void **state)
{
	(void)state;
	run_default("first_caller");
}

static void test_concurrent_purges(void **state)
{
	(void)state;
	run_default("purges");
}

static void test_kill_long_call(void **state)
{
	(void)state;
	run_backends("kill_long");
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 3600);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress),
		cmocka_unit_test(test_kill),
		cmocka_unit_test(test_kill_long_call),
		cmocka_unit_test(test_race),
		cmocka_unit_test(test_concurrent_purges),
		cmocka_unit_test(test_first_caller_after_death),
	};
	const struct CMUnitTest soak[] = {
		cmocka_unit_test(test_kill),
	};
	if (getenv("VT_KILLS")) /* the soak: kills only */
		return cmocka_run_group_tests(soak, NULL, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
