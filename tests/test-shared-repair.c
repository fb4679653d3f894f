/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shared-repair.c - a shared file after a process was killed in the
 * middle of a call, under the cooperative guard protocol (S28, S30, S32;
 * issue 21 items 1 and 2; the invariant: src/mem/mem-shared.h, TRAPPED HOLES)
 *
 *   survivor    victims (VRANGE_TRAP=guard: the guard protocol) mark,
 *               unmark, purge and read one shared file and are SIGKILLed
 *               at random instants; the survivor (this process, under the
 *               suite's trap) reads the file all along and calls into the
 *               library: it never gets a SIGSEGV (a trap is SIGBUS
 *               BUS_ADRERR), and neither does a victim before its kill
 *   purger_dies a purger SIGKILLed while it waits for a stopped mapper's
 *               ARM (the range is published purged, nothing punched): the
 *               repair must not punch what that mapper has not armed
 *   unmarker_dies  an unmarker SIGKILLed while it waits for a stopped
 *               mapper's DISARM, after a third mapper acknowledged it
 *               (and read zeros): the repair completes the unmark
 *   merger_dies a mark merging with a purged range SIGKILLed while it
 *               waits for a stopped mapper's ARM of the gap
 * In the three deterministic scenarios the kill lands in a 100 ms window
 * (the protocol's timeout, held open by the stopped mapper); a round
 * whose kill missed it (seen from the range's state) is run again.
 */
#define _GNU_SOURCE
#include "vt-shared.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

static size_t P;

static int env_int(const char *k, int d)
{
	const char *v = getenv(k);
	return v ? atoi(v) : d;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- survivor ---- */
static size_t SV_PAGES = 32;
#define SV_VICTIMS 3

/* a read of byte at: its data, zeros (purged then unmarked by someone),
 * or a trap that is SIGBUS BUS_ADRERR at exactly at */
static void read_one(int reg, size_t at, const char *who)
{
	int64_t v[4];
	int64_t rc = vs_call_fd(&A, VS_READ, reg, at, 0, 0, -1, v);
	if (rc != VS_TRAPPED)
		return;
	CK(v[2] == SIGBUS && v[1] == BUS_ADRERR && v[0] == (int64_t)at,
	   "(%s: read at %zu: signal %" PRId64 " code %" PRId64 " at %" PRId64 ")", who, at, v[2],
	   v[1], v[0]);
}

static void random_call(struct vr_region *r, struct vt_rng *rng)
{
	size_t at = vt_below(rng, SV_PAGES),
	       n = 1 + vt_below(rng, vt_below(rng, 4) ? 4 : SV_PAGES - at);
	if (n > SV_PAGES - at)
		n = SV_PAGES - at;
	uint64_t op = vt_below(rng, 10);
	int rc = 0;
	if (op < 4)
		rc = vr_mark(r, at * P, n * P);
	else if (op < 7)
		rc = vr_unmark(r, at * P, n * P);
	else if (op < 9)
		CK(vr_ctx_purge(VS.ctx, vt_below(rng, 4) * P) >= 0);
	else
		CK(vr_status(r, at * P, n * P) >= 0);
	CK(rc >= 0, "(op %" PRIu64 ": %d)", op, rc);
}

struct victim_arg {
	struct vr_region *r;
	uint64_t seed;
};

static void *victim_calls(void *p)
{
	struct victim_arg *a = p;
	struct vt_rng rng;
	vt_seed(&rng, a->seed);
	for (;;)
		random_call(a->r, &rng);
	return NULL;
}

/* killed by the survivor, never ends by itself */
static void sc_victim(void)
{
	P = vt_pg();
	SV_PAGES = (size_t)env_int("VT_SV_PAGES", 32);
	vs_init();
	int reg = vs_join(&A, env_int("VT_R_FD", -1), 0);
	CK(reg >= 0, "(join: %d)", reg);
	struct vt_rng rng;
	uint64_t seed = (uint64_t)env_int("VT_R_SEED", 1) * 131 + (uint64_t)getpid();
	vt_seed(&rng, seed);
	struct victim_arg a = { VS.r[reg], seed + 1 };
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, victim_calls, &a), 0);
	alarm(60);
	for (;;) {
		read_one(reg, vt_below(&rng, SV_PAGES * P), "victim");
		if (vt_below(&rng, 4) == 0)
			random_call(VS.r[reg], &rng);
	}
}

static pid_t start_victim(int fd, uint64_t seed)
{
	char b[2][24];
	snprintf(b[0], sizeof(b[0]), "%d", fd);
	snprintf(b[1], sizeof(b[1]), "%" PRIu64, seed);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		setenv("VT_R_FD", b[0], 1);
		setenv("VT_R_SEED", b[1], 1);
		setenv("VRANGE_TRAP", "guard", 1);
		vt_default_signals();
		execl(program_invocation_name, "vt-scenario", "--scenario", "victim", (char *)NULL);
		execl("/proc/self/exe", "vt-scenario", "--scenario", "victim", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* fills page pg of the file: true when it was a hole */
static bool is_hole(int fd, size_t pg)
{
	struct stat s0, s1;
	CK_EQ(fstat(fd, &s0), 0);
	CK_EQ(fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)(pg * P), (off_t)P), 0);
	CK_EQ(fstat(fd, &s1), 0);
	return s1.st_blocks != s0.st_blocks;
}

static void sc_survivor(void)
{
	P = vt_pg();
	SV_PAGES = (size_t)env_int("VT_SV_PAGES", 32);
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("shared-survivor"));
	vs_init();
	int reg = vs_new_shared(&A, SV_PAGES * P);
	struct vr_region *r = VS.r[reg];
	vt_fill(vr_region_base(r), 0, SV_PAGES * P, 1);
	int fd = dup(vr_region_fd(r)); /* without O_CLOEXEC: the victims inherit it */
	CK(fd >= 0);
	pid_t w[SV_VICTIMS];
	for (int i = 0; i < SV_VICTIMS; i++)
		w[i] = start_victim(fd, vt_next(&rng));
	int kills = env_int("VT_KILLS", 30), killed = 0;
	double next = now_s() + 0.02;
	while (killed < kills) {
		alarm(30);
		read_one(reg, vt_below(&rng, SV_PAGES * P), "survivor");
		if (vt_below(&rng, 16) == 0)
			random_call(r, &rng);
		int st;
		for (int i = 0; i < SV_VICTIMS; i++)
			CK(vs_waitpid(w[i], &st, WNOHANG) == 0,
			   "(victim %d before its kill: status 0x%x: %s %d)", i, st,
			   WIFSIGNALED(st) ? "signal" : "exit",
			   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		if (now_s() < next)
			continue;
		int i = (int)vt_below(&rng, SV_VICTIMS);
		CK_EQ(kill(w[i], SIGKILL), 0);
		CK_EQ(vs_waitpid(w[i], &st, 0), w[i]);
		CK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "(victim %d: status 0x%x)", i, st);
		killed++;
		w[i] = start_victim(fd, vt_next(&rng));
		next = now_s() + 0.005 + (double)vt_below(&rng, 60) / 1000.0;
	}
	for (int i = 0; i < SV_VICTIMS; i++) {
		int st;
		CK_EQ(kill(w[i], SIGKILL), 0);
		CK_EQ(vs_waitpid(w[i], &st, 0), w[i]);
	}
	/* TRAPPED HOLES at the end, page by page, the survivor alone: a
	 * page that is a hole traps.  A purged page that is no hole may read:
	 * a mark merging with a purged range keeps a gap's data when a
	 * mapper did not arm it in time (purge_at_once: S4 is best effort
	 * there, S9 first).  Whether a page is a hole: fallocate() on it
	 * adds blocks only to a hole (SEEK_DATA takes a filled page for a
	 * hole too).  Under guard markers a page is probed before it is read
	 * (a read without a marker fills a hole with a zero page); under
	 * userfaultfd after (the probe's fill would turn the hole, which
	 * traps by itself, into a page that does not). */
	bool uffd = vr_trap_backend() == VR_TRAP_UFFD;
	int kept = 0;
	for (size_t pg = 0; pg < SV_PAGES; pg++) {
		int st = vr_status(r, pg * P, P);
		size_t at = pg * P + 7;
		int64_t v[4];
		bool hole = !uffd && is_hole(fd, pg);
		bool trapped = vs_call_fd(&A, VS_READ, reg, at, 0, 0, -1, v) == VS_TRAPPED;
		if (trapped) {
			CK(v[2] == SIGBUS && v[1] == BUS_ADRERR && v[0] == (int64_t)at,
			   "(at the end: read at %zu: signal %" PRId64 " code %" PRId64 ")", at,
			   v[2], v[1]);
		} else if (uffd) {
			hole = is_hole(fd, pg);
		}
		CK(!hole || (st & VR_STATE_PURGED), "(page %zu is a hole, state %d)", pg, st);
		CK(trapped || !hole,
		   "(page %zu, state %d, is a hole the survivor reads as %" PRId64 ", no trap)", pg,
		   st, v[0]);
		kept += !trapped && (st & VR_STATE_PURGED);
	}
	printf("survivor: %d kills, %" PRIu64 " repairs here, %d purged pages kept their data\n",
	       killed, vr_ctx_stat(VS.ctx, VR_STAT_REPAIRS), kept);
	close(fd);
	vr_ctx_destroy(VS.ctx);
}

/* ---- a holder killed in the protocol's wait (deterministic) ----
 * A (this process, the suite's trap) owns the file; B and C are guard-
 * protocol peers, V the victim (guard too).  C is stopped before V's
 * call, so V's request waits the protocol's 100 ms for it; V is killed
 * 40 ms in; A's next call repairs.  The oracle (TRAPPED HOLES): a page C
 * had not armed when it stopped must not be a hole (C would read it as
 * zeros when it runs again), and B, which answers, traps on every purged
 * page once A's repairing call returned. */
#define KD_PAGES 8
enum { KD_PURGER, KD_UNMARKER, KD_MERGER };

struct kd {
	int ra, rb, rc, fd;
	struct vs_proc B, C;
	uint64_t gen;
};

static void stop_peer(struct vs_proc *p, bool stop)
{
	int st;
	CK_EQ(kill(p->pid, stop ? SIGSTOP : SIGCONT), 0);
	CK_EQ(vs_waitpid(p->pid, &st, stop ? WUNTRACED : WCONTINUED), p->pid);
	CK(stop ? WIFSTOPPED(st) : WIFCONTINUED(st), "(status 0x%x)", st);
}

/* the file's bytes [off, off + len) through pread: generation gen */
static void file_holds(int fd, size_t off, size_t len, uint64_t gen, const char *what)
{
	uint8_t *buf = malloc(len);
	CK(buf != NULL);
	CK_EQ(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	for (size_t i = 0; i < len; i++)
		CK(buf[i] == vt_pat(gen, off + i),
		   "(%s: file offset %zu reads %u: a hole the stopped mapper has no marker on)",
		   what, off + i, buf[i]);
	free(buf);
}

/* p's read of each page of [off, off + len): its data or a trap, never
 * zeros (must_trap: a SIGBUS trap; gen VS_ZERO: zeros or a trap) */
static void reads_data_or_trap(struct vs_proc *p, int reg, size_t off, size_t len, uint64_t gen,
			       bool must_trap, const char *who)
{
	for (size_t at = off + 11; at < off + len; at += P) {
		int64_t v[4];
		int64_t rc = vs_call_fd(p, VS_READ, reg, at, 0, 0, -1, v);
		if (rc == VS_TRAPPED) {
			CK(v[2] == SIGBUS && v[0] == (int64_t)at,
			   "(%s: read at %zu: signal %" PRId64 " at %" PRId64 ")", who, at, v[2],
			   v[0]);
			continue;
		}
		CK(!must_trap, "(%s: byte %zu of a purged range reads %" PRId64 ", no trap)", who,
		   at, v[0]);
		CK(v[0] == (gen == VS_ZERO ? 0 : vt_pat(gen, at)),
		   "(%s: byte %zu reads %" PRId64 ", not its data)", who, at, v[0]);
	}
}

/* one round: true when V died holding the lock (A repaired) */
static bool kd_round(struct kd *k, int kind)
{
	struct vr_region *r = VS.r[k->ra];
	size_t X = 4 * P;
	uint64_t g = ++k->gen;
	vt_fill(vr_region_base(r), 0, KD_PAGES * P, g);
	struct vs_proc V = vs_spawn_trap("guard");
	int rv = join_from(&V, &A, k->ra, 0);
	struct vs_req q = { .reg = rv };
	if (kind == KD_PURGER) {
		CK_EQ(vr_mark(r, 0, X), VR_INTACT);
		q.op = VS_PURGE;
		q.a = SIZE_MAX;
	} else if (kind == KD_UNMARKER) {
		CK_EQ(vr_mark(r, 0, X), VR_INTACT);
		CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)X);
		q.op = VS_UNMARK;
		q.b = X;
	} else {
		CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)(2 * P));
		q.op = VS_MARK; /* [P, 6P): merges with the purged [0, 2P) */
		q.a = P;
		q.b = 5 * P;
	}
	uint64_t repairs = vr_ctx_stat(VS.ctx, VR_STAT_REPAIRS);
	stop_peer(&k->C, true);
	vs_sendmsg(V.sock, &q, sizeof(q), -1);
	usleep(40000);
	CK_EQ(kill(V.pid, SIGKILL), 0);
	int st = vs_reap(&V);
	CK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "(victim: status 0x%x)", st);
	close(V.sock);
	size_t span = kind == KD_MERGER ? 6 * P : X;
	int s1 = vr_status(r, 0, span); /* the first call after the death */
	bool hit = vr_ctx_stat(VS.ctx, VR_STAT_REPAIRS) > repairs;
	if (hit) {
		/* what C had not armed when it stopped holds its data */
		if (kind == KD_PURGER)
			file_holds(k->fd, 0, X, g, "purger killed");
		else if (kind == KD_MERGER)
			file_holds(k->fd, 2 * P, 4 * P, g, "merger killed");
		if (kind == KD_UNMARKER) {
			/* V had filled the holes and B had taken its markers
			 * off (B read zeros from then on): the repair completed
			 * the unmark (mem-shared.h, DEATH), never purged again */
			CK_EQ(s1, 0);
			reads_data_or_trap(&k->B, k->rb, 0, span, VS_ZERO, false, "B");
		} else {
			CK_EQ(s1, VP);
			/* B answered the repair's ARM before it returned */
			reads_data_or_trap(&k->B, k->rb, 0, span, g, false, "B");
		}
	}
	stop_peer(&k->C, false);
	/* C missed V's DISARM of its unmark (the bytes were purged, then
	 * filled: zeros) and the repair's ARM: until its listener caught up
	 * it reads what V's unmark left, zeros, or traps */
	reads_data_or_trap(&k->C, k->rc, 0, span, kind == KD_UNMARKER ? VS_ZERO : g, false,
			   "C, resumed");
	int u = vr_unmark(r, 0, KD_PAGES * P);
	CK(u == VR_INTACT || u == VR_PURGED, "(%d)", u);
	return hit;
}

static void run_killed_holder(int kind, const char *name)
{
	P = vt_pg();
	vs_init();
	struct kd k = { .gen = 40 };
	k.ra = vs_new_shared(&A, KD_PAGES * P);
	k.fd = vr_region_fd(VS.r[k.ra]);
	k.B = vs_spawn_trap("guard");
	k.rb = join_from(&k.B, &A, k.ra, 0);
	k.C = vs_spawn_trap("guard");
	k.rc = join_from(&k.C, &A, k.ra, 0);
	int hits = 0, rounds = 0;
	while (hits < 3 && rounds < 12) {
		alarm(30);
		rounds++;
		hits += kd_round(&k, kind);
	}
	printf("%s: the kill hit the holder in %d of %d rounds\n", name, hits, rounds);
	CK(hits > 0, "(no round killed the victim holding the lock)");
	vs_stop(&k.B);
	vs_stop(&k.C);
	vr_ctx_destroy(VS.ctx);
}

static void sc_purger_dies(void)
{
	run_killed_holder(KD_PURGER, "purger_dies");
}

static void sc_unmarker_dies(void)
{
	run_killed_holder(KD_UNMARKER, "unmarker_dies");
}

static void sc_merger_dies(void)
{
	run_killed_holder(KD_MERGER, "merger_dies");
}

/* ---- purges that take turns while a mapper is stopped ----
 * B1 and B2 purge the whole file at once while C, a guard-protocol
 * mapper, is stopped: every range is skipped after the protocol's
 * timeout.  The map keeps one purge cursor, and each purge's step took
 * it back to the LRU's head when the other had moved it: the two retried
 * the first ranges in turn and neither ended while C stayed stopped
 * (16 ranges: still running after 30 s, hundreds of skips).  Each purge
 * tries each range once (VR_STAT_SKIPPED_BUSY at most TT_RANGES). */
#define TT_RANGES 12

static bool readable(int sock, int ms)
{
	struct pollfd pf = { .fd = sock, .events = POLLIN };
	return poll(&pf, 1, ms) == 1;
}

static void sc_purgers_take_turns(void)
{
	P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, (2 * TT_RANGES + 1) * P);
	struct vs_proc B[2] = { vs_spawn_trap("guard"), vs_spawn_trap("guard") };
	struct vs_proc C = vs_spawn_trap("guard");
	int rb[2] = { join_from(&B[0], &A, ra, 0), join_from(&B[1], &A, ra, 0) };
	(void)join_from(&C, &A, ra, 0);
	for (size_t i = 0; i < TT_RANGES; i++)
		CK_EQ(vr_mark(VS.r[ra], (2 * i + 1) * P, P), VR_INTACT);
	stop_peer(&C, true);
	alarm(120);
	for (int j = 0; j < 2; j++) {
		struct vs_req q = { .op = VS_PURGE, .reg = rb[j], .a = SIZE_MAX };
		vs_sendmsg(B[j].sock, &q, sizeof(q), -1);
	}
	/* each purge costs at most TT_RANGES timeouts, the two in turn
	 * twice that: give them three times as long */
	double t0 = now_s();
	bool done = true;
	for (int j = 0; j < 2; j++) {
		int left = (int)((6 * TT_RANGES * 0.1 - (now_s() - t0)) * 1000);
		done &= readable(B[j].sock, left > 0 ? left : 0);
	}
	double took = now_s() - t0;
	stop_peer(&C, false); /* ends the turns if they did not end */
	for (int j = 0; j < 2; j++) {
		struct vs_rep rep;
		int fd;
		CK_EQ(vs_recvmsg(B[j].sock, &rep, sizeof(rep), &fd), (ssize_t)sizeof(rep));
		CK(rep.rc >= 0, "(purge: %" PRId64 ")", rep.rc);
	}
	int64_t sk[2] = { STAT(&B[0], VR_STAT_SKIPPED_BUSY), STAT(&B[1], VR_STAT_SKIPPED_BUSY) };
	printf("purgers_take_turns: %.2f s, skipped %" PRId64 " and %" PRId64 "\n", took, sk[0],
	       sk[1]);
	CK(done, "(the purges still ran after %.2f s)", took);
	CK(sk[0] <= TT_RANGES && sk[1] <= TT_RANGES,
	   "(skipped %" PRId64 " and %" PRId64 " of %d ranges)", sk[0], sk[1], TT_RANGES);
	vs_stop(&B[0]);
	vs_stop(&B[1]);
	vs_stop(&C);
	vr_ctx_destroy(VS.ctx);
}

static const struct vt_scenario scenarios[] = {
	{ "peer", vs_peer_main },
	{ "victim", sc_victim },
	{ "survivor", sc_survivor },
	{ "purger_dies", sc_purger_dies },
	{ "unmarker_dies", sc_unmarker_dies },
	{ "merger_dies", sc_merger_dies },
	{ "purgers_take_turns", sc_purgers_take_turns },
};

static void test_purgers_take_turns(void **state)
{
	(void)state;
	vs_run_traps("purgers_take_turns", 2);
}

static void test_survivor(void **state)
{
	(void)state;
	vs_run_traps("survivor", 4);
}

static void test_purger_dies(void **state)
{
	(void)state;
	vs_run_traps("purger_dies", 4);
}

static void test_unmarker_dies(void **state)
{
	(void)state;
	vs_run_traps("unmarker_dies", 4);
}

static void test_merger_dies(void **state)
{
	(void)state;
	vs_run_traps("merger_dies", 4);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 600);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_purger_dies),        cmocka_unit_test(test_unmarker_dies),
		cmocka_unit_test(test_merger_dies),        cmocka_unit_test(test_survivor),
		cmocka_unit_test(test_purgers_take_turns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
