/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-coop.c - the cooperative trap protocol (src/coop.h), with real
 * processes, futexes and guard markers
 *
 * A "fleet": one memfd holding NPAGES data pages, the struct vr_coop
 * page and a page standing in for the shared map (a seqlock word and a
 * bitmap of purged pages, as the lead's shared state will be), and n
 * forked mapper processes.  Each maps the file itself (at an address of
 * its own), joins, and arms/disarms guard markers on its own mapping
 * from its listener; its resync sets markers from the bitmap, read under
 * the seqlock and giving up with -EAGAIN when a request is pending.  The
 * test process plays the purger: it takes the "lock" (seqlock odd),
 * posts the request, publishes the bitmap, releases.  Children answer
 * commands over a pipe; a probe reads every data page in the child and
 * reports which ones fault.
 *
 * The parent forks every child while it is single-threaded (ASan's
 * allocator and TSan both dislike a fork beside running threads).
 */
#include "tests.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/sys.h"
#include "coop.h"

#define NPAGES 16
#define MAXC 8

struct tmap {
	_Atomic uint32_t seq;  /* odd while the "region lock" is held */
	_Atomic uint32_t bits; /* purged data pages */
};

struct fleet {
	int n, fd;
	size_t pg;
	uint8_t *base; /* the parent's mapping */
	struct vr_coop *c;
	struct tmap *map;
	pid_t pid[MAXC];
	int cmd[MAXC], rep[MAXC];
	bool alive[MAXC];
};

static size_t file_size(size_t pg)
{
	return (NPAGES + 2) * pg;
}

/* ---- the child ---- */

static struct {
	uint8_t *base;
	size_t pg;
	struct tmap *map;
	_Atomic int resyncs, ops;
} CH;
static sigjmp_buf probe_env;

static void probe_segv(int sig)
{
	(void)sig;
	siglongjmp(probe_env, 1);
}

static int ch_arm(void *arg, uint64_t off, uint64_t len)
{
	(void)arg;
	atomic_fetch_add(&CH.ops, 1);
	return madvise(CH.base + off, len, MADV_GUARD_INSTALL) < 0 ? -errno : 0;
}

static int ch_disarm(void *arg, uint64_t off, uint64_t len)
{
	(void)arg;
	atomic_fetch_add(&CH.ops, 1);
	return madvise(CH.base + off, len, MADV_GUARD_REMOVE) < 0 ? -errno : 0;
}

/* markers from the map, read lock-free: never wait for the lock while a
 * request (from the lock holder) waits for this listener */
static int ch_resync(void *arg, const struct vr_coop_member *m)
{
	(void)arg;
	for (;;) {
		uint32_t v = atomic_load(&CH.map->seq);
		if (v & 1) {
			if (vr_coop_pending(m))
				return -EAGAIN;
			usleep(100);
			continue;
		}
		uint32_t bits = atomic_load(&CH.map->bits);
		for (int p = 0; p < NPAGES; p++)
			if (madvise(CH.base + p * CH.pg, CH.pg,
				    bits >> p & 1 ? MADV_GUARD_INSTALL : MADV_GUARD_REMOVE) < 0)
				return -errno;
		if (atomic_load(&CH.map->seq) == v) {
			atomic_fetch_add(&CH.resyncs, 1);
			return 0;
		}
	}
}

static const struct vr_coop_ops ch_ops = { ch_arm, ch_disarm, ch_resync };

/* data pages that fault when read in this process */
static uint32_t ch_probe(void)
{
	volatile uint32_t mask = 0;
	for (volatile int p = 0; p < NPAGES; p++) {
		if (sigsetjmp(probe_env, 1) == 0)
			(void)*(volatile uint8_t *)(CH.base + p * CH.pg);
		else
			mask |= 1u << p;
	}
	return mask;
}

struct cmd {
	char op; /* 'p' probe, 'r' resyncs, 'o' ops, 'c' caught up, 'l' leave, 'x' exit */
};

__attribute__((noreturn)) static void child_main(int idx, int fd, int cmd, int rep)
{
	size_t pg = vt_pg();
	/* a spacer, so that each child maps the file at its own address */
	if (mmap(NULL, (size_t)(idx + 1) * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
	    MAP_FAILED)
		_exit(3);
	uint8_t *b = mmap(NULL, file_size(pg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED)
		_exit(3);
	CH.base = b;
	CH.pg = pg;
	CH.map = (struct tmap *)(b + (NPAGES + 1) * pg);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = probe_segv;
	sigaction(SIGSEGV, &sa, NULL);
	struct vr_coop_member *m = NULL;
	int32_t r = vr_coop_join((struct vr_coop *)(b + NPAGES * pg), &ch_ops, NULL, &m);
	if (write(rep, &r, sizeof(r)) != sizeof(r))
		_exit(3);
	for (struct cmd c; read(cmd, &c, sizeof(c)) == sizeof(c);) {
		uint32_t a = 0;
		switch (c.op) {
		case 'p':
			a = ch_probe();
			break;
		case 'r':
			a = (uint32_t)atomic_load(&CH.resyncs);
			break;
		case 'o':
			a = (uint32_t)atomic_load(&CH.ops);
			break;
		case 'c':
			a = vr_coop_caught_up(m);
			break;
		case 'l':
			vr_coop_leave(m);
			m = NULL;
			break;
		default:
			goto out;
		}
		if (write(rep, &a, sizeof(a)) != sizeof(a))
			_exit(3);
	}
out:
	vr_coop_leave(m); /* no thread left: TSan makes _exit wait 1 s for them */
	_exit(0);
}

/* ---- the parent ---- */

static void rd_reply(int fd, void *p, size_t n)
{
	struct pollfd q = { .fd = fd, .events = POLLIN };
	if (poll(&q, 1, 20000) != 1)
		fail_msg("child did not answer in 20 s");
	if (read(fd, p, n) != (ssize_t)n)
		fail_msg("child's reply pipe closed");
}

static uint32_t ask(struct fleet *f, int i, char op)
{
	struct cmd c = { op };
	uint32_t a = 0;
	assert_int_equal(write(f->cmd[i], &c, sizeof(c)), sizeof(c));
	rd_reply(f->rep[i], &a, sizeof(a));
	return a;
}

static void fleet_start(struct fleet *f, int n)
{
	memset(f, 0, sizeof(*f));
	f->n = n;
	f->pg = vt_pg();
	f->fd = memfd_create("test-coop", MFD_CLOEXEC);
	assert_true(f->fd >= 0);
	assert_int_equal(ftruncate(f->fd, (off_t)file_size(f->pg)), 0);
	f->base = mmap(NULL, file_size(f->pg), PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	assert_true(f->base != MAP_FAILED);
	f->c = (struct vr_coop *)(f->base + NPAGES * f->pg);
	f->map = (struct tmap *)(f->base + (NPAGES + 1) * f->pg);
	memset(f->base, 0x5a, NPAGES * f->pg);
	fflush(stdout);
	fflush(stderr);
	for (int i = 0; i < n; i++) {
		int cp[2], rp[2];
		assert_int_equal(pipe2(cp, O_CLOEXEC), 0);
		assert_int_equal(pipe2(rp, O_CLOEXEC), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(cp[1]);
			close(rp[0]);
			for (int j = 0; j < i; j++) { /* the others' pipes: EOF must reach them */
				close(f->cmd[j]);
				close(f->rep[j]);
			}
			child_main(i, f->fd, cp[0], rp[1]);
		}
		close(cp[0]);
		close(rp[1]);
		f->pid[i] = pid;
		f->cmd[i] = cp[1];
		f->rep[i] = rp[0];
		f->alive[i] = true;
	}
	for (int i = 0; i < n; i++) {
		int32_t r = -1;
		rd_reply(f->rep[i], &r, sizeof(r));
		assert_int_equal(r, 0);
	}
	assert_int_equal(vr_coop_count(f->c), n);
}

/* SIGKILL child i and wait until it is dead, leaving it a zombie */
static void fleet_kill(struct fleet *f, int i)
{
	siginfo_t si;
	kill(f->pid[i], SIGKILL);
	assert_int_equal(waitid(P_PID, (id_t)f->pid[i], &si, WEXITED | WNOWAIT), 0);
}

/* SIGSTOP / SIGCONT child i, returning once it took effect */
static void fleet_pause(struct fleet *f, int i, bool stop)
{
	int st = 0;
	kill(f->pid[i], stop ? SIGSTOP : SIGCONT);
	assert_int_equal(waitpid(f->pid[i], &st, stop ? WUNTRACED : WCONTINUED), f->pid[i]);
	assert_true(stop ? WIFSTOPPED(st) : WIFCONTINUED(st));
}

static void fleet_reap(struct fleet *f, int i)
{
	int st = 0;
	assert_int_equal(waitpid(f->pid[i], &st, 0), f->pid[i]);
	f->alive[i] = false;
}

static void fleet_stop(struct fleet *f)
{
	for (int i = 0; i < f->n; i++) {
		close(f->cmd[i]); /* EOF: the child exits */
		close(f->rep[i]);
		if (f->alive[i]) {
			kill(f->pid[i], SIGCONT);
			int st = 0;
			assert_int_equal(waitpid(f->pid[i], &st, 0), f->pid[i]);
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
	}
	munmap(f->base, file_size(f->pg));
	close(f->fd);
}

/* the purger's side: lock, post, publish the outcome, unlock.  ARM:
 * published purged only if every mapper armed; else skipped, and the
 * DISARM posted at once (timeout 0). */
static int purge(struct fleet *f, int page, int npages, int timeout_ms)
{
	uint32_t mask = ((1u << npages) - 1) << page;
	atomic_fetch_add(&f->map->seq, 1);
	int r = vr_coop_request(f->c, NULL, VR_COOP_ARM, page * f->pg, npages * f->pg, timeout_ms);
	if (r == 0)
		atomic_fetch_or(&f->map->bits, mask);
	else
		vr_coop_request(f->c, NULL, VR_COOP_DISARM, page * f->pg, npages * f->pg, 0);
	atomic_fetch_add(&f->map->seq, 1);
	return r;
}

static int unmark(struct fleet *f, int page, int timeout_ms)
{
	atomic_fetch_add(&f->map->seq, 1);
	atomic_fetch_and(&f->map->bits, ~(1u << page));
	int r = vr_coop_request(f->c, NULL, VR_COOP_DISARM, page * f->pg, f->pg, timeout_ms);
	atomic_fetch_add(&f->map->seq, 1);
	return r;
}

static void expect_marks(struct fleet *f, int i, uint32_t mask)
{
	uint32_t got = ask(f, i, 'p');
	if (got != mask)
		fail_msg("child %d faults on pages 0x%x, expected 0x%x", i, got, mask);
}

static int guard_works(void)
{
	size_t pg = vt_pg();
	int fd = memfd_create("probe", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)pg) < 0)
		return 0;
	void *p = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int ok = p != MAP_FAILED && madvise(p, pg, MADV_GUARD_INSTALL) == 0;
	if (p != MAP_FAILED)
		munmap(p, pg);
	close(fd);
	return ok;
}

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- tests ---- */

static void arm_all(int n)
{
	struct fleet f;
	fleet_start(&f, n);
	assert_int_equal(purge(&f, 3, 2, 10000), 0);
	for (int i = 0; i < n; i++)
		expect_marks(&f, i, 3u << 3);
	assert_int_equal(unmark(&f, 3, 10000), 0);
	for (int i = 0; i < n; i++)
		expect_marks(&f, i, 1u << 4);
	fleet_stop(&f);
}

static void test_two_mappers_arm(void **state)
{
	(void)state;
	arm_all(2);
}

static void test_eight_mappers_arm(void **state)
{
	(void)state;
	arm_all(8);
}

/* a stopped mapper: the purge times out (1 late), the others armed and
 * then disarmed; resumed, it replays the requests it missed in order */
static void test_stopped_replays(void **state)
{
	(void)state;
	struct fleet f;
	fleet_start(&f, 3);
	fleet_pause(&f, 1, true);
	atomic_fetch_add(&f.map->seq, 1); /* the purger's lock */
	assert_int_equal(vr_coop_request(f.c, NULL, VR_COOP_ARM, 5 * f.pg, f.pg, 200), 1);
	expect_marks(&f, 0, 1u << 5);
	expect_marks(&f, 2, 1u << 5);
	/* the purge is skipped: disarm, without waiting */
	assert_true(vr_coop_request(f.c, NULL, VR_COOP_DISARM, 5 * f.pg, f.pg, 0) >= 1);
	atomic_fetch_add(&f.map->seq, 1);
	fleet_pause(&f, 1, false);
	assert_int_equal(purge(&f, 6, 1, 10000), 0);
	for (int i = 0; i < 3; i++)
		expect_marks(&f, i, 1u << 6);
	assert_int_equal(ask(&f, 1, 'o'), 3); /* arm 5, disarm 5, arm 6 */
	assert_int_equal(ask(&f, 1, 'r'), 0);
	fleet_stop(&f);
}

/* a stopped mapper misses more than the ring holds, including the unmark
 * of a page it had armed: resumed, it resyncs from the map */
static void test_stopped_resyncs(void **state)
{
	(void)state;
	struct fleet f;
	fleet_start(&f, 2);
	assert_int_equal(purge(&f, 2, 1, 10000), 0);
	assert_int_equal(purge(&f, 9, 1, 10000), 0);
	fleet_pause(&f, 1, true);
	assert_int_equal(unmark(&f, 2, 100), 1);
	for (int k = 0; k < VR_COOP_RING; k++)
		assert_true(purge(&f, 11, 1, 20) >= 1);
	fleet_pause(&f, 1, false);
	assert_int_equal(purge(&f, 4, 1, 10000), 0);
	/* the resync runs after the ack, once the "lock" is free */
	for (int t = 0; t < 2000 && !ask(&f, 1, 'c'); t++)
		usleep(5000);
	assert_int_equal(ask(&f, 1, 'c'), 1);
	assert_int_equal(ask(&f, 1, 'r'), 1);
	expect_marks(&f, 0, 1u << 9 | 1u << 4);
	expect_marks(&f, 1, 1u << 9 | 1u << 4);
	fleet_stop(&f);
}

/* a killed mapper (a zombie, not yet reaped) is found dead and dropped */
static void test_killed_mapper_dropped(void **state)
{
	(void)state;
	struct fleet f;
	fleet_start(&f, 3);
	fleet_kill(&f, 1);
	uint64_t t0 = mono_ns();
	assert_int_equal(purge(&f, 0, 1, 30000), 0);
	printf("coop request with a dead mapper: %.1f us (found dead, dropped)\n",
	       (mono_ns() - t0) / 1e3);
	assert_int_equal(vr_coop_count(f.c), 2);
	fleet_reap(&f, 1);
	expect_marks(&f, 0, 1);
	expect_marks(&f, 2, 1);
	fleet_stop(&f);
}

/* a requester killed while it waits, a request half written (as a kill
 * inside the post leaves it) and one published without its wake-up:
 * the next requests work and every mapper applies what was published */
static void test_killed_requester(void **state)
{
	(void)state;
	struct fleet f;
	fleet_start(&f, 2);
	fleet_pause(&f, 1, true);
	uint32_t s0 = atomic_load(&f.c->seq);
	fflush(stdout);
	fflush(stderr);
	pid_t r = fork();
	assert_true(r >= 0);
	if (r == 0) {
		vr_coop_request(f.c, NULL, VR_COOP_ARM, 8 * f.pg, f.pg, 60000);
		_exit(0);
	}
	for (int t = 0; t < 20000 && atomic_load(&f.c->seq) == s0; t++)
		usleep(1000);
	assert_int_equal(atomic_load(&f.c->seq), s0 + 1);
	usleep(20000);
	kill(r, SIGKILL);
	waitpid(r, NULL, 0);
	fleet_pause(&f, 1, false);
	/* page 8 was armed, never published: the repair has everyone resync */
	expect_marks(&f, 0, 1u << 8);
	atomic_fetch_add(&f.map->seq, 1);
	assert_int_equal(vr_coop_request(f.c, NULL, VR_COOP_RESYNC, 0, 0, 10000), 0);
	atomic_fetch_add(&f.map->seq, 1);
	for (int i = 0; i < 2; i++) {
		for (int t = 0; t < 2000 && !ask(&f, i, 'c'); t++)
			usleep(5000);
		assert_int_equal(ask(&f, i, 'r'), 1);
		expect_marks(&f, i, 0);
	}
	assert_int_equal(purge(&f, 10, 1, 10000), 0);
	/* killed inside the post: entry s + 1 half written, seq still s */
	uint32_t s = atomic_load(&f.c->seq);
	struct vr_coop_req *e = &f.c->ring[(s + 1) % VR_COOP_RING];
	atomic_store(&e->seq, s);
	atomic_store(&e->op, 77);
	assert_int_equal(purge(&f, 11, 1, 10000), 0);
	/* killed between publishing and waking: s + 1 = arm page 12 */
	s = atomic_load(&f.c->seq);
	e = &f.c->ring[(s + 1) % VR_COOP_RING];
	atomic_store(&e->seq, s);
	atomic_store(&e->op, VR_COOP_ARM);
	atomic_store(&e->off, 12 * f.pg);
	atomic_store(&e->len, f.pg);
	atomic_store(&e->seq, s + 1);
	atomic_store(&f.c->seq, s + 1);
	atomic_fetch_or(&f.map->bits, 1u << 12);
	assert_int_equal(purge(&f, 13, 1, 10000), 0);
	for (int i = 0; i < 2; i++) {
		expect_marks(&f, i, 1u << 10 | 1u << 11 | 1u << 12 | 1u << 13);
		assert_int_equal(ask(&f, i, 'r'), 1); /* replayed, no other resync */
	}
	fleet_stop(&f);
}

/* random purges, unmarks, stops and resumes with short timeouts: after
 * every purge that went through, a mapper checked has the marker; at the
 * end, once all caught up, every mapper's markers are exactly the purged
 * pages (never stale ones, never missing ones) */
static void test_random_schedule(void **state)
{
	(void)state;
	enum { N = 4, STEPS = 300 };
	struct vt_rng rng;
	vt_seed(&rng, vt_get_seed("coop random schedule"));
	struct fleet f;
	fleet_start(&f, N);
	bool stopped[N] = { false };
	int done = 0, skipped = 0;
	for (int k = 0; k < STEPS; k++) {
		int page = (int)vt_below(&rng, NPAGES), i = (int)vt_below(&rng, N);
		uint32_t bits = atomic_load(&f.map->bits);
		switch (vt_below(&rng, 16)) {
		case 0:
			fleet_pause(&f, i, !stopped[i]);
			stopped[i] = !stopped[i];
			break;
		case 1:
			for (int j = 0; j < N; j++)
				if (stopped[j]) {
					fleet_pause(&f, j, false);
					stopped[j] = false;
				}
			break;
		case 2:
		case 3:
		case 4:
			if (bits >> page & 1)
				unmark(&f, page, (int)vt_below(&rng, 10));
			break;
		case 5:
			atomic_fetch_add(&f.map->seq, 1);
			vr_coop_request(f.c, NULL, VR_COOP_RESYNC, 0, 0, (int)vt_below(&rng, 10));
			atomic_fetch_add(&f.map->seq, 1);
			break;
		default:
			if (bits >> page & 1)
				break;
			if (purge(&f, page, 1, (int)vt_below(&rng, 10)) != 0) {
				skipped++;
				break;
			}
			done++;
			for (int j = 0; j < N; j++)
				if (!stopped[j]) /* none is: the purge went through */
					assert_true(ask(&f, j, 'p') >> page & 1);
		}
	}
	for (int i = 0; i < N; i++)
		if (stopped[i])
			fleet_pause(&f, i, false);
	/* one request everyone answers, then each catches up fully */
	atomic_fetch_add(&f.map->seq, 1);
	assert_int_equal(vr_coop_request(f.c, NULL, VR_COOP_DISARM, 0, 0, 30000), 0);
	atomic_fetch_add(&f.map->seq, 1);
	uint32_t bits = atomic_load(&f.map->bits);
	int resyncs = 0;
	for (int i = 0; i < N; i++) {
		for (int t = 0; t < 2000 && !ask(&f, i, 'c'); t++)
			usleep(5000);
		assert_int_equal(ask(&f, i, 'c'), 1);
		expect_marks(&f, i, bits);
		resyncs += (int)ask(&f, i, 'r');
	}
	printf("coop random schedule: %d purges, %d skipped, %d resyncs\n", done, skipped, resyncs);
	fleet_stop(&f);
}

/* leave frees the slot; requests no longer wait for the leaver */
static void test_leave_frees_slot(void **state)
{
	(void)state;
	struct fleet f;
	fleet_start(&f, 2);
	ask(&f, 0, 'l');
	assert_int_equal(vr_coop_count(f.c), 1);
	fleet_pause(&f, 0, true); /* would time out if still a member */
	assert_int_equal(purge(&f, 1, 1, 30000), 0);
	expect_marks(&f, 1, 2);
	fleet_pause(&f, 0, false);
	expect_marks(&f, 0, 0);
	fleet_stop(&f);
}

static int nop_op(void *arg, uint64_t off, uint64_t len)
{
	(void)off;
	(void)len;
	atomic_fetch_add((_Atomic int *)arg, 1);
	return 0;
}
static int nop_resync(void *arg, const struct vr_coop_member *m)
{
	(void)arg;
	(void)m;
	return 0;
}
static const struct vr_coop_ops nop_ops = { nop_op, nop_op, nop_resync };

/* a full table: the slot of a dead mapper is reclaimed, then -ENOSPC;
 * a request with self set waits for every member but self */
static void test_full_table(void **state)
{
	(void)state;
	struct fleet f;
	fleet_start(&f, 1);
	fleet_kill(&f, 0); /* a zombie holding a slot */
	static struct vr_coop_member *m[VR_COOP_MAX];
	static _Atomic int calls;
	atomic_store(&calls, 0);
	for (int i = 0; i < VR_COOP_MAX - 1; i++)
		assert_int_equal(vr_coop_join(f.c, &nop_ops, (void *)&calls, &m[i]), 0);
	assert_int_equal(vr_coop_count(f.c), VR_COOP_MAX);
	/* full: the zombie's slot is reaped */
	assert_int_equal(vr_coop_join(f.c, &nop_ops, (void *)&calls, &m[VR_COOP_MAX - 1]), 0);
	assert_int_equal(vr_coop_count(f.c), VR_COOP_MAX);
	struct vr_coop_member *x = NULL;
	assert_int_equal(vr_coop_join(f.c, &nop_ops, (void *)&calls, &x), -ENOSPC);
	assert_int_equal(vr_coop_request(f.c, m[0], VR_COOP_ARM, 0, f.pg, 30000), 0);
	assert_int_equal(atomic_load(&calls), VR_COOP_MAX - 1);
	vr_coop_leave(m[5]);
	assert_int_equal(vr_coop_count(f.c), VR_COOP_MAX - 1);
	assert_int_equal(vr_coop_join(f.c, &nop_ops, (void *)&calls, &m[5]), 0);
	for (int i = 0; i < VR_COOP_MAX; i++)
		vr_coop_leave(m[i]);
	assert_int_equal(vr_coop_count(f.c), 0);
	fleet_reap(&f, 0);
	fleet_stop(&f);
}

/* the listener blocks the application's signals, not the synchronous ones */
static void check_listener_mask(void)
{
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	int seen = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char p[300], line[256], comm[64] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		FILE *fc = fopen(p, "re");
		if (!fc)
			continue;
		if (!fgets(comm, sizeof(comm), fc))
			comm[0] = 0;
		fclose(fc);
		if (strcmp(comm, "vrange-coop\n") != 0)
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/status", e->d_name);
		FILE *fs = fopen(p, "re");
		assert_non_null(fs);
		while (fgets(line, sizeof(line), fs))
			if (strncmp(line, "SigBlk:", 7) == 0) {
				unsigned long long blk = strtoull(line + 7, NULL, 16);
				assert_true(blk >> (SIGTERM - 1) & 1);
				assert_true(blk >> (SIGUSR1 - 1) & 1);
				assert_false(blk >> (SIGSEGV - 1) & 1);
				assert_false(blk >> (SIGBUS - 1) & 1);
				seen++;
			}
		fclose(fs);
	}
	closedir(d);
	assert_true(seen > 0);
}

/* a fork child's copy of a member: freed, the parent's slot untouched;
 * the parent's listener serves a request the parent posts without self */
static void test_fork_inherited(void **state)
{
	(void)state;
	static struct vr_coop c;
	static _Atomic int calls;
	struct vr_coop_member *m = NULL;
	assert_int_equal(vr_coop_join(&c, &nop_ops, (void *)&calls, &m), 0);
	check_listener_mask();
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		vr_coop_leave_inherited(m);
		_exit(vr_coop_count(&c) == 1 ? 0 : 3);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(vr_coop_count(&c), 1);
	assert_int_equal(vr_coop_request(&c, NULL, VR_COOP_ARM, 0, 4096, 30000), 0);
	assert_int_equal(atomic_load(&calls), 1);
	assert_true(vr_coop_caught_up(m));
	/* with self, its own listener skips the request */
	assert_int_equal(vr_coop_request(&c, m, VR_COOP_DISARM, 0, 4096, 30000), 0);
	for (int t = 0; t < 2000 && !vr_coop_caught_up(m); t++)
		usleep(1000);
	assert_true(vr_coop_caught_up(m));
	assert_int_equal(atomic_load(&calls), 1);
	vr_coop_leave(m);
	assert_int_equal(vr_coop_count(&c), 0);
}

static void test_bad_args(void **state)
{
	(void)state;
	static struct vr_coop c; /* zero: the empty state */
	assert_int_equal(vr_coop_count(&c), 0);
	assert_int_equal(vr_coop_request(&c, NULL, 0, 0, 4096, 0), -EINVAL);
	assert_int_equal(vr_coop_request(&c, NULL, VR_COOP_RESYNC + 1, 0, 4096, 0), -EINVAL);
	assert_int_equal(vr_coop_request(&c, NULL, VR_COOP_ARM, 0, 4096, -1), -EINVAL);
	assert_int_equal(vr_coop_request(&c, NULL, VR_COOP_ARM, 0, 4096, 1000), 0);
	vr_coop_leave(NULL);
	vr_coop_leave_inherited(NULL);
}

/* ---- a round-trip figure, printed, never asserted ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_bench_round_trip(void **state)
{
	(void)state;
	static const int sizes[] = { 1, 2, 8 };
	enum { N = 200 };
	for (size_t k = 0; k < VR_ARRAY_SIZE(sizes); k++) {
		struct fleet f;
		fleet_start(&f, sizes[k]);
		static uint64_t t[N];
		for (int i = 0; i < N; i++) {
			uint64_t t0 = mono_ns();
			int r = vr_coop_request(f.c, NULL, i & 1 ? VR_COOP_DISARM : VR_COOP_ARM, 0,
						f.pg, 10000);
			t[i] = mono_ns() - t0;
			assert_int_equal(r, 0);
		}
		qsort(t, N, sizeof(t[0]), cmp_u64);
		printf("coop round trip, %d mapper(s): median %.1f us, p90 %.1f us, max %.1f us "
		       "(%d requests)\n",
		       sizes[k], t[N / 2] / 1e3, t[N * 9 / 10] / 1e3, t[N - 1] / 1e3, N);
		fleet_stop(&f);
	}
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (!guard_works()) {
		printf("guard markers on shared memfd mappings not supported: skip\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_two_mappers_arm),
		cmocka_unit_test(test_eight_mappers_arm),
		cmocka_unit_test(test_stopped_replays),
		cmocka_unit_test(test_stopped_resyncs),
		cmocka_unit_test(test_killed_mapper_dropped),
		cmocka_unit_test(test_killed_requester),
		cmocka_unit_test(test_random_schedule),
		cmocka_unit_test(test_leave_frees_slot),
		cmocka_unit_test(test_full_table),
		cmocka_unit_test(test_fork_inherited),
		cmocka_unit_test(test_bench_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
