/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shared-env.c - shared volatility (VR_REGION_SHARED) across
 * processes, trap backends and environments: API S15, S16, S18, S28,
 * S32, S33, against the public contract only (peers: vt-shared.h)
 *
 *   leaks     S15: joins and destroys in every order, also by threads at
 *             once, leave no fd or mapping
 *   flicker   a reader racing another process's purges and unmarks of
 *             its page: every trap through its handler, data or 0 read
 *   nosyscall S16: intact marks, unmarks, statuses make no system call
 *   inproc    S33: a second region on the file in one process (or a
 *             reopened file) shares the state; on a plain memfd -EBUSY
 *   fork      S33/S18: inherited handles are dead, the child joins
 *   seccomp   userfaultfd refused: shared regions work (guard protocol)
 *             or fail with -EOPNOTSUPP, never a read of zeros; then a
 *             free process joins the filtered ones
 *   mixed     one mapper on userfaultfd, one on the guard protocol: each
 *             one's purge traps the other, each one's unmark frees both
 *   mixed_race  the same, the userfaultfd mapper reading the page while
 *             the guard one purges it: the guard one still traps
 *   stopped   a SIGSTOPped mapper: the purge either skips the range
 *             (VR_STAT_SKIPPED_BUSY) or the mapper traps when it resumes;
 *             a dead mapper does not hold purges back
 */
#define _GNU_SOURCE
#include "vt-shared.h"
#include "vt-seccomp.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>

/* ---- S15: no fd or mapping left behind by joins and destroys ---- */
/* mappings of memfds (the data and the states; a sanitizer's own
 * mappings come and go, so not every line counts) */
static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	CK(f != NULL);
	int n = 0;
	char line[512];
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:") != NULL;
	fclose(f);
	return n;
}

struct joiner {
	struct vr_ctx *c;
	int fd, i, rounds;
	pthread_barrier_t *go;
};

/* join, mark one's own page, check, leave; again and again */
static void *joiner(void *arg)
{
	struct joiner *j = arg;
	size_t P = vt_pg();
	pthread_barrier_wait(j->go);
	for (int k = 0; k < j->rounds; k++) {
		struct vr_region *r = NULL;
		CK_EQ(vr_region_from_fd(j->c, j->fd, 0, &r), 0);
		CK_EQ(vr_mark(r, (size_t)j->i * 2 * P, P), VR_INTACT);
		CK_EQ(vr_status(r, (size_t)j->i * 2 * P, P), VR_STATE_VOLATILE);
		CK_EQ(vr_unmark(r, (size_t)j->i * 2 * P, P), VR_INTACT);
		vr_region_destroy(r);
	}
	return NULL;
}

static void sc_leaks(void)
{
	size_t P = vt_pg();
	vs_init();
	struct vr_ctx *c2 = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	int fds = vt_count_fds(), maps = count_maps();
	for (int round = 0; round < 12; round++) {
		struct vr_region *r1 = NULL, *r2 = NULL, *r3 = NULL;
		CK_EQ(vr_region_new(VS.ctx, "vt-leak", 8 * P, VR_REGION_SHARED, &r1), 0);
		CK(count_maps() > maps, "(the count sees the new mappings)");
		CK_EQ(vr_region_from_fd(VS.ctx, vr_region_fd(r1), 0, &r2), 0);
		CK_EQ(vr_region_from_fd(c2, vr_region_fd(r1), 0, &r3), 0);
		CK_EQ(vr_mark(r2, P, 2 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c2, SIZE_MAX), (ssize_t)(2 * P));
		CK_EQ(vr_status(r1, P, P), VP);
		/* every order of leaving */
		struct vr_region *order[3][3] = { { r1, r2, r3 }, { r3, r2, r1 }, { r2, r3, r1 } };
		for (int i = 0; i < 3; i++) {
			vr_region_destroy(order[round % 3][i]);
			if (i < 2)
				CK_EQ(vr_status(order[round % 3][2], P, P), VP);
		}
		CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_REGIONS), 0);
		CK_EQ(vr_ctx_stat(c2, VR_STAT_RANGES), 0);
		CK_EQ(vt_count_fds(), fds);
		CK_EQ(count_maps(), maps);
	}
	/* threads joining and leaving one file at once, in two ctxs */
	struct vr_region *keep = NULL;
	CK_EQ(vr_region_new(VS.ctx, "vt-leak", 16 * P, VR_REGION_SHARED, &keep), 0);
	pthread_barrier_t go;
	pthread_barrier_init(&go, NULL, 4);
	struct joiner jn[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		jn[i] = (struct joiner){ .c = i % 2 ? c2 : VS.ctx,
					 .fd = vr_region_fd(keep),
					 .i = i,
					 .rounds = 200,
					 .go = &go };
		CK_EQ(pthread_create(&th[i], NULL, joiner, &jn[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		CK_EQ(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&go);
	CK_EQ(vr_status(keep, 0, 16 * P), 0);
	CK_EQ(vr_ctx_stat(c2, VR_STAT_REGIONS), 0);
	vr_region_destroy(keep);
	CK_EQ(vt_count_fds(), fds);
	CK_EQ(count_maps(), maps);

	/* a ctx destroyed with shared regions in it */
	struct vr_ctx *c3 = NULL;
	struct vr_region *r = NULL, *j = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c3), 0);
	CK_EQ(vr_region_new(c3, "vt-leak", 8 * P, VR_REGION_SHARED, &r), 0);
	CK_EQ(vr_region_from_fd(c2, vr_region_fd(r), 0, &j), 0);
	CK_EQ(vr_mark(r, 0, P), VR_INTACT);
	vr_ctx_destroy(c3);
	CK_EQ(vr_status(j, 0, P), VR_STATE_VOLATILE);
	vr_region_destroy(j);
	vr_ctx_destroy(c2);
	CK_EQ(vt_count_fds(), fds);
	CK_EQ(count_maps(), maps);
	vr_ctx_destroy(VS.ctx);
}

/* ---- a reader racing purges and unmarks of its page ----
 * B reads one byte in a loop with a fault handler set while A marks,
 * purges and unmarks that page: every trap goes through B's handler (a
 * SIGBUS reaching the application without a handler call would be a trap
 * the library took for someone else's signal), and every byte read is the
 * data or, once unmarked after a purge, 0. */
static void sc_flicker(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 4 * P);
	FILL(&A, ra, 0, 4 * P, 11);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	CK_EQ(vs_call(&B, VS_HANDLER, rb, VS_H_SIGBUS, 0, 0), 0);
	struct vs_req q = { .op = VS_FLICKER, .reg = rb, .a = P + 9, .b = 100000, .c = 11 };
	vs_sendmsg(B.sock, &q, sizeof(q), -1);
	struct vr_region *r = VS.r[ra];
	struct pollfd pf = { .fd = B.sock, .events = POLLIN };
	uint64_t cycles = 0;
	uint64_t busy = 0;
	while (poll(&pf, 1, 0) == 0) {
		CK_EQ(vr_mark(r, P, P), VR_INTACT);
		uint64_t b0 = vr_ctx_stat(VS.ctx, VR_STAT_SKIPPED_BUSY);
		ssize_t got = vr_ctx_purge(VS.ctx, SIZE_MAX);
		if (got == 0 && vr_ctx_stat(VS.ctx, VR_STAT_SKIPPED_BUSY) > b0) {
			/* S32: B did not answer the guard protocol's ARM in time
			 * (a loaded machine): skipped, the data kept */
			CK_EQ(vr_unmark(r, P, P), VR_INTACT);
			busy++;
			continue;
		}
		CK_EQ(got, (ssize_t)P);
		for (volatile int spin = 0; spin < 2000; spin++) /* let B meet the hole */
			;
		CK_EQ(vr_unmark(r, P, P), VR_PURGED);
		cycles++;
	}
	CK(cycles > 0, "(every purge skipped: %" PRIu64 ")", busy);
	struct vs_rep rep;
	int fd;
	CK_EQ(vs_recvmsg(B.sock, &rep, sizeof(rep), &fd), (ssize_t)sizeof(rep));
	printf("flicker: %" PRIu64 " purge cycles (%" PRIu64 " skipped, B busy); B read %" PRId64
	       ", trapped %" PRId64 "\n",
	       cycles, busy, rep.v[0], rep.v[1]);
	CK(rep.rc == 0, "(%" PRId64 " SIGBUS reached B's application without its handler)", rep.rc);
	CK(rep.v[2] == 0, "(%" PRId64 " reads neither the data nor 0)", rep.v[2]);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S16: intact marks, unmarks and statuses of a shared file make no
 * system call (counted with ptrace in a child) ---- */
static void nosys_loop(struct vr_region *r, size_t P)
{
	for (int it = 0; it < 20; it++) {
		for (size_t i = 0; i < 32; i++) {
			CK_EQ(vr_mark(r, 2 * i * P + 1, P), VR_INTACT);
			CK_EQ(vr_status(r, 2 * i * P, 2 * P), VR_STATE_VOLATILE);
		}
		for (size_t i = 0; i < 32; i++)
			CK_EQ(vr_unmark(r, 2 * i * P, 2 * P), VR_INTACT);
	}
}

static void sc_nosyscall(void)
{
	size_t P = vt_pg();
	fflush(NULL);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		CK_EQ(ptrace(PTRACE_TRACEME, 0, NULL, NULL), 0);
		raise(SIGSTOP);
		vs_init();
		int ra = vs_new_shared(&A, 64 * P);
		struct vr_region *r = VS.r[ra];
		nosys_loop(r, P); /* warm-up */
		syscall(SYS_getppid);
		nosys_loop(r, P);
		syscall(SYS_getppid);
		CK_EQ(vr_mark(r, 0, P), VR_INTACT);
		CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)P); /* system calls */
		syscall(SYS_getppid);
		vr_ctx_destroy(VS.ctx);
		_exit(0);
	}
	int ws;
	CK_EQ(waitpid(pid, &ws, 0), pid);
	CK(WIFSTOPPED(ws) && WSTOPSIG(ws) == SIGSTOP);
	CK_EQ(ptrace(PTRACE_SETOPTIONS, pid, NULL,
		     (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)),
	      0);
	long count[4] = { 0 }, first[4] = { -1, -1, -1, -1 };
	int phase = 0, sig = 0;
	for (;;) {
		CK_EQ(ptrace(PTRACE_SYSCALL, pid, NULL, (void *)(long)sig), 0);
		sig = 0;
		CK_EQ(waitpid(pid, &ws, 0), pid);
		if (WIFEXITED(ws) || WIFSIGNALED(ws))
			break;
		if (WSTOPSIG(ws) != (SIGTRAP | 0x80)) {
			sig = WSTOPSIG(ws);
			continue;
		}
		struct __ptrace_syscall_info si;
		memset(&si, 0, sizeof(si));
		CK(ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof(si), &si) > 0);
		if (si.op != PTRACE_SYSCALL_INFO_ENTRY)
			continue;
		if (si.entry.nr == SYS_getppid) {
			phase++;
			CK(phase <= 3);
			continue;
		}
		if (count[phase]++ == 0)
			first[phase] = (long)si.entry.nr;
	}
	CK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "(child: status 0x%x)", ws);
	CK_EQ(phase, 3);
	CK(count[1] == 0, "(%ld system calls in the intact loop, the first: %ld)", count[1],
	   first[1]);
	CK(count[2] > 0); /* the method sees them when there are some */
}

/* ---- S33: in one process ---- */
static void sc_inproc(void)
{
	size_t P = vt_pg();
	vs_init();
	int i1 = vs_new_shared(&A, 8 * P);
	struct vr_region *r1 = VS.r[i1];
	FILL(&A, i1, 0, 8 * P, 4);
	int i2 = vs_join(&A, vr_region_fd(r1), 0);
	int i3 = vs_join(&A, vr_region_fd(r1), VR_REGION_SHARED);
	CK(i2 >= 0 && i3 >= 0, "(second region on a shared memfd: %d, %d)", i2, i3);
	struct vr_region *r2 = VS.r[i2];
	uint8_t *b1 = vr_region_base(r1), *b2 = vr_region_base(r2);
	CK(b1 != b2);
	CK(vr_region_of(b2 + P) == r2);
	CK_EQ(vr_region_size(r2), 8 * P);
	VS_EXPECT_DATA(&A, i2, 0, 8 * P, 4);
	CK_EQ(vr_mark(r1, P, 2 * P), VR_INTACT);
	CK_EQ(vr_status(r2, P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(STATUS(&A, i3, 2 * P, 1), VR_STATE_VOLATILE);
	CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_RANGES), 1);
	CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)(2 * P));
	VS_EXPECT_TRAP(&A, i1, P + 3);
	VS_EXPECT_TRAP(&A, i2, 2 * P + 7);
	VS_EXPECT_TRAP(&A, i3, P);
	CK_EQ(vr_unmark(r2, P, 2 * P), VR_PURGED);
	CK_EQ(vr_status(r1, 0, 8 * P), 0);
	CK_EQ(vr_unmark(r1, P, 2 * P), VR_INTACT);
	VS_EXPECT_DATA(&A, i1, P, 2 * P, VS_ZERO);
	VS_EXPECT_DATA(&A, i3, 0, P, 4);
	/* pointer style through either mapping */
	CK_EQ(vr_mark_ptr(b2 + 4 * P, P), VR_INTACT);
	CK_EQ(vr_status(r1, 4 * P, P), VR_STATE_VOLATILE);
	CK_EQ(vr_unmark_ptr(b1 + 4 * P, P), VR_INTACT);
	CK_EQ(vr_status(r2, 0, 8 * P), 0);
	/* the first region goes: the others keep the state */
	CK_EQ(vr_mark(r1, 6 * P, P), VR_INTACT);
	CK_EQ(vs_call(&A, VS_DESTROY, i1, 0, 0, 0), 0);
	CK_EQ(vr_status(r2, 6 * P, P), VR_STATE_VOLATILE);
	CK_EQ(STATUS(&A, i3, 6 * P, P), VR_STATE_VOLATILE);
	/* another ctx of this process joins the same state */
	struct vr_ctx *c2 = NULL;
	struct vr_region *r4 = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	CK_EQ(vr_region_from_fd(c2, vr_region_fd(r2), 0, &r4), 0);
	CK_EQ(vr_status(r4, 6 * P, P), VR_STATE_VOLATILE);
	CK_EQ(vr_ctx_purge(c2, SIZE_MAX), (ssize_t)P);
	VS_EXPECT_TRAP(&A, i2, 6 * P + 1);
	CK_EQ(vr_unmark(r2, 6 * P, P), VR_PURGED);
	vr_ctx_destroy(c2);

	/* the file reopened through /proc: the same state */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", vr_region_fd(r2));
	int ro = open(path, O_RDWR | O_CLOEXEC);
	CK(ro >= 0);
	struct vr_region *r5 = NULL;
	CK_EQ(vr_region_from_fd(VS.ctx, ro, 0, &r5), 0);
	close(ro);
	CK_EQ(vr_mark(r5, 7 * P, P), VR_INTACT);
	CK_EQ(vr_status(r2, 7 * P, P), VR_STATE_VOLATILE);
	CK_EQ(vr_unmark(r2, 7 * P, P), VR_INTACT);
	CK_EQ(vr_status(r5, 0, 8 * P), 0);
	vr_region_destroy(r5);
	/* read-only: refused with an errno, nothing left behind */
	int fds = vt_count_fds();
	ro = open(path, O_RDONLY | O_CLOEXEC);
	CK(ro >= 0);
	r5 = NULL;
	int e = vr_region_from_fd(VS.ctx, ro, 0, &r5);
	CK(e < 0 && r5 == NULL, "(a read-only fd: %d)", e);
	close(ro);
	CK_EQ(vt_count_fds(), fds);
	CK_EQ(vr_status(r2, 0, 8 * P), 0);

	/* a plain memfd this process maps: -EBUSY, until it is unmapped */
	struct vr_region *p = NULL, *q = NULL;
	CK_EQ(vr_region_new(VS.ctx, "vt-plain", 4 * P, 0, &p), 0);
	CK_EQ(vr_region_from_fd(VS.ctx, vr_region_fd(p), 0, &q), -EBUSY);
	CK(q == NULL);
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	CK_EQ(vr_region_from_fd(c2, vr_region_fd(p), 0, &q), -EBUSY);
	int d = dup(vr_region_fd(p));
	CK(d >= 0);
	vr_region_destroy(p);
	CK_EQ(vr_region_from_fd(c2, d, 0, &q), 0);
	close(d);
	vr_ctx_destroy(c2);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S33, S18: fork ---- */
static void sc_fork(void)
{
	size_t P = vt_pg();
	vs_init();
	int i1 = vs_new_shared(&A, 8 * P);
	struct vr_region *r = VS.r[i1];
	uint8_t *base = vr_region_base(r);
	FILL(&A, i1, 0, 8 * P, 5);
	CK_EQ(vr_mark(r, P, P), VR_INTACT);
	int fd = vr_region_fd(r);
	int up[2], down[2];
	CK_EQ(pipe(up), 0);
	CK_EQ(pipe(down), 0);
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		/* inherited handles are dead (S18) */
		CK_EQ(vr_mark(r, 0, P), -EINVAL);
		CK_EQ(vr_unmark(r, P, P), -EINVAL);
		CK_EQ(vr_status(r, 0, P), -EINVAL);
		CK(vr_region_base(r) == NULL);
		CK_EQ(vr_region_size(r), 0);
		CK(vr_region_of(base) == NULL);
		/* the child joins on the inherited fd number */
		struct vr_ctx *c = NULL;
		struct vr_region *j = NULL;
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
		CK_EQ(vr_region_from_fd(c, fd, 0, &j), 0);
		VS.ctx = c;
		memset(VS.r, 0, sizeof(VS.r));
		VS.r[0] = j;
		CK_EQ(vr_status(j, P, P), VR_STATE_VOLATILE);
		VS_EXPECT_DATA(&A, 0, 0, P, 5);
		CK_EQ(vr_mark(j, 4 * P, 2 * P), VR_INTACT);
		CK_EQ(vs_xfer1(up[1], true), 1);
		CK_EQ(vs_xfer1(down[0], false), 1);
		VS_EXPECT_TRAP(&A, 0, 4 * P + 9);
		VS_EXPECT_TRAP(&A, 0, P);
		CK_EQ(vr_ctx_stat(c, VR_STAT_PURGED_BYTES), 3 * P);
		/* destroying the inherited handle touches nothing of the parent's */
		vr_region_destroy(r);
		vr_ctx_destroy(c);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	CK_EQ(vs_xfer1(up[0], false), 1);
	CK_EQ(vr_status(r, 4 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)(3 * P));
	CK_EQ(vs_xfer1(down[1], true), 1);
	int st = 0;
	CK_EQ(vs_waitpid(pid, &st, 0), pid);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(child: status 0x%x)", st);
	CK_EQ(vr_status(r, P, P), VP);
	CK_EQ(vr_status(r, 4 * P, 2 * P), VP);
	VS_EXPECT_TRAP(&A, i1, 5 * P);
	CK_EQ(vr_unmark(r, 0, 8 * P), VR_PURGED);
	VS_EXPECT_DATA(&A, i1, 0, P, 5);
	VS_EXPECT_DATA(&A, i1, 6 * P, 2 * P, 5);

	/* a child that destroys its inherited handles first (a ctx too),
	 * then joins through a dup of the fd */
	CK_EQ(vr_mark(r, 2 * P, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(VS.ctx, SIZE_MAX), (ssize_t)P);
	fflush(stderr);
	pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		int d = dup(fd);
		CK(d >= 0);
		vr_region_destroy(r);
		vr_ctx_destroy(VS.ctx);
		struct vr_ctx *c = NULL;
		struct vr_region *j = NULL;
		CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
		CK_EQ(vr_region_from_fd(c, d, 0, &j), 0);
		close(d);
		VS.ctx = c;
		memset(VS.r, 0, sizeof(VS.r));
		VS.r[0] = j;
		CK_EQ(vr_status(j, 2 * P, P), VP);
		VS_EXPECT_TRAP(&A, 0, 2 * P + 1);
		CK_EQ(vr_unmark(j, 2 * P, P), VR_PURGED);
		vr_ctx_destroy(c);
		_exit(0);
	}
	CK_EQ(vs_waitpid(pid, &st, 0), pid);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(second child: status 0x%x)", st);
	CK_EQ(vr_status(r, 0, 8 * P), 0);
	VS_EXPECT_DATA(&A, i1, 2 * P, P, VS_ZERO);
	vr_ctx_destroy(VS.ctx);
}

/* ---- userfaultfd refused by a seccomp filter ---- */
static void block_userfaultfd(int err)
{
	CK_EQ(vt_block_userfaultfd(err), 0);
}

/* p's purge of everything purgeable, where the only purgeable range is
 * n bytes: under the guard protocol a mapper may not answer in time
 * (S32: skipped, counted), never half; tries again a bounded number of
 * times */
static void purge_all_of(struct vs_proc *p, struct vs_proc *q, int rq, size_t off, size_t n,
			 uint64_t gen)
{
	for (int i = 0; i < 50; i++) {
		uint64_t sk = (uint64_t)STAT(p, VR_STAT_SKIPPED_BUSY);
		int64_t got = PURGE(p, SIZE_MAX);
		if (got == (int64_t)n)
			return;
		CK_EQ(got, 0);
		CK(STAT(p, VR_STAT_SKIPPED_BUSY) > (int64_t)sk,
		   "(purged nothing, skipped nothing)");
		CK_EQ(STATUS(q, rq, off, n), VR_STATE_VOLATILE);
		VS_EXPECT_DATA(q, rq, off, n, gen);
	}
	CK(0, "(50 purges skipped)");
}

static void sc_seccomp(void)
{
	size_t P = vt_pg();
	const char *e = getenv("VT_ERRNO");
	int err = e && strcmp(e, "ENOSYS") == 0 ? ENOSYS : EPERM;
	struct vs_proc F = vs_spawn(); /* started before the filter: free */
	block_userfaultfd(err);
	vs_init();
	struct vs_proc B = vs_spawn(); /* inherits the filter */
	int ra = vs_new(&A, 8 * P, VR_REGION_SHARED);
	if (ra == -EOPNOTSUPP) {
		printf("shared region without userfaultfd: -EOPNOTSUPP\n");
		/* a free process's shared region: joining fails the same way */
		int rf = vs_new_shared(&F, 8 * P);
		int fd = vs_fd_of(&F, rf);
		int j = vs_join(&A, fd, 0);
		close(fd);
		CK_EQ(j, -EOPNOTSUPP);
		vs_stop(&B);
		vs_stop(&F);
		return;
	}
	CK(ra >= 0, "(%d)", ra);
	printf("shared region without userfaultfd: works (backend %d)\n", vr_trap_backend());
	FILL(&A, ra, 0, 8 * P, 6);
	int fd = vs_fd_of(&A, ra);
	int rb = vs_join(&B, fd, 0);
	close(fd);
	CK(rb >= 0, "(a second filtered process joins: %d)", rb);
	int64_t v[4];
	/* the filtered processes alone: B marks, A purges, both trap; B
	 * unmarks, both read zeros; and the other way round */
	CK_EQ(MARK(&B, rb, 2 * P, 2 * P), VR_INTACT);
	purge_all_of(&A, &B, rb, 2 * P, 2 * P, 6);
	VS_EXPECT_TRAP(&A, ra, 3 * P + 1);
	VS_EXPECT_TRAP(&B, rb, 2 * P + 3);
	CK_EQ(vs_call_fd(&B, VS_SYSOUT, rb, 2 * P, 8, 6, -1, v), -EFAULT);
	CK_EQ(UNMARK(&B, rb, 2 * P, 2 * P), VR_PURGED);
	VS_EXPECT_DATA(&A, ra, 2 * P, 2 * P, VS_ZERO);
	VS_EXPECT_DATA(&B, rb, 2 * P, 2 * P, VS_ZERO);
	CK_EQ(MARK(&A, ra, 5 * P, 2 * P), VR_INTACT);
	purge_all_of(&B, &A, ra, 5 * P, 2 * P, 6);
	VS_EXPECT_TRAP(&A, ra, 5 * P);
	VS_EXPECT_TRAP(&B, rb, 7 * P - 1);
	CK_EQ(UNMARK(&A, ra, 5 * P, 2 * P), VR_PURGED);
	VS_EXPECT_DATA(&B, rb, 5 * P, 2 * P, VS_ZERO);
	VS_EXPECT_DATA(&B, rb, 0, 2 * P, 6);
	/* a late filtered joiner sees a purge and traps */
	CK_EQ(MARK(&A, ra, 4 * P, P), VR_INTACT);
	purge_all_of(&A, &B, rb, 4 * P, P, 6);
	struct vs_proc C = vs_spawn();
	int rc = join_from(&C, &A, ra, 0);
	VS_EXPECT_TRAP(&C, rc, 4 * P + 8);
	CK_EQ(UNMARK(&C, rc, 4 * P, P), VR_PURGED);
	VS_EXPECT_DATA(&A, ra, 4 * P, P, VS_ZERO);
	vs_stop(&C);

	/* a free process (userfaultfd) joins: the mixed file (see mixed) */
	int rf = join_from(&F, &A, ra, 0);
	CK_EQ(MARK(&A, ra, 2 * P, 2 * P), VR_INTACT);
	purge_all_of(&A, &F, rf, 2 * P, 2 * P, 6);
	VS_EXPECT_TRAP(&F, rf, 2 * P + 2);
	VS_EXPECT_TRAP(&B, rb, 2 * P + 3);
	CK_EQ(UNMARK(&F, rf, 2 * P, 2 * P), VR_PURGED);
	VS_EXPECT_DATA(&A, ra, 2 * P, 2 * P, VS_ZERO);
	VS_EXPECT_DATA(&B, rb, 2 * P, 2 * P, VS_ZERO);
	CK_EQ(MARK(&A, ra, 5 * P, 2 * P), VR_INTACT);
	purge_all_of(&F, &A, ra, 5 * P, 2 * P, 6);
	VS_EXPECT_TRAP(&A, ra, 5 * P);
	VS_EXPECT_TRAP(&B, rb, 7 * P - 1);
	VS_EXPECT_DATA(&F, rf, 0, 2 * P, 6);
	VS_EXPECT_DATA(&A, ra, 7 * P, P, 6);
	vs_stop(&B);
	vs_stop(&F);
	vr_ctx_destroy(VS.ctx);
}

/* ---- mappers on different traps: userfaultfd and the guard protocol ----
 * U maps the file with the userfaultfd trap, G with the guard protocol
 * (VRANGE_TRAP=guard; a process where userfaultfd is refused gets it):
 * a purge by either makes both trap, an unmark by either makes the bytes
 * readable (zeros) for both. */
static void mixed_round(struct vs_proc *X, int rx, struct vs_proc *Y, int ry, size_t off,
			uint64_t gen, const char *what)
{
	size_t P = vt_pg();
	FILL(X, rx, off, 2 * P, gen);
	CK_EQ(MARK(X, rx, off, 2 * P), VR_INTACT);
	CK_EQ(PURGE(X, SIZE_MAX), (int64_t)(2 * P));
	int64_t v[4];
	int64_t rc = vs_call_fd(Y, VS_READ, ry, off + 5, 0, 0, -1, v);
	CK(rc == VS_TRAPPED, "(%s: the other mapper read %" PRId64 " from a purged page)", what,
	   v[0]);
	VS_EXPECT_TRAP(X, rx, off + P);
	CK_EQ(UNMARK(X, rx, off, 2 * P), VR_PURGED);
	rc = vs_call_fd(Y, VS_CHECK, ry, off, 2 * P, VS_ZERO, -1, v);
	CK(rc == 0, "(%s: after the unmark the other mapper %s at %" PRId64 ")", what,
	   rc == VS_TRAPPED ? "traps" : "reads data", v[0]);
	/* and the other way: X purges, Y unmarks, X reads */
	CK_EQ(MARK(X, rx, off, 2 * P), VR_INTACT);
	CK_EQ(PURGE(X, SIZE_MAX), (int64_t)(2 * P));
	CK_EQ(UNMARK(Y, ry, off, 2 * P), VR_PURGED);
	rc = vs_call_fd(X, VS_CHECK, rx, off, 2 * P, VS_ZERO, -1, v);
	CK(rc == 0, "(%s: after the other's unmark the purger %s at %" PRId64 ")", what,
	   rc == VS_TRAPPED ? "traps" : "reads data", v[0]);
}

static void mixed(bool uffd_first)
{
	size_t P = vt_pg();
	vs_init();
	struct vs_proc U = vs_spawn_trap(""), G = vs_spawn_trap("guard");
	/* the creator's trap must not matter */
	struct vs_proc *C = uffd_first ? &U : &G, *J = uffd_first ? &G : &U;
	int rc = vs_new(C, 16 * P, VR_REGION_SHARED);
	CK(rc >= 0, "(%d)", rc);
	int rj = join_from(J, C, rc, 0);
	int ru = uffd_first ? rc : rj, rg = uffd_first ? rj : rc;
	if (uffd_first)
		mixed_round(&U, ru, &G, rg, 2 * P, 21, "userfaultfd purger, guard reader");
	else
		mixed_round(&G, rg, &U, ru, 8 * P, 22, "guard purger, userfaultfd reader");
	vs_stop(&U);
	vs_stop(&G);
	vr_ctx_destroy(VS.ctx);
}

static void sc_mixed_ug(void)
{
	mixed(true);
}

static void sc_mixed_gu(void)
{
	mixed(false);
}

/* ---- mixed traps, a userfaultfd mapper reading while the guard one
 * purges ----
 * U (this process, userfaultfd) reads page 1 of the file without pause;
 * G (a child on the guard protocol) marks page 1, purges it and reads it
 * back through its fault handler, again and again.  U's read faults the
 * page in while G's punch runs; the kernel's unmap of that page then took
 * G's guard marker with it, and G's next read found the hole untrapped:
 * it read 0 and allocated a zero page that U read as data too, with the
 * range still purged. */
#define MR_ROUNDS 20000

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}
static uint8_t mr_src[1 << 16];

static int mr_refill(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	(void)addr;
	(void)arg;
	CK(vr_unmark_fill(r, off, len, mr_src + off) >= 0);
	return VR_FAULT_RETRY;
}

static struct {
	uint8_t *base;
	atomic_bool stop;
	atomic_long bad, reads;
} MR;

static void *mr_reader(void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	while (!atomic_load(&MR.stop)) {
		if (rd(MR.base + P + 100) != vt_pat(5, P + 100))
			atomic_fetch_add(&MR.bad, 1);
		atomic_fetch_add(&MR.reads, 1);
	}
	return NULL;
}

/* G: the child on the guard protocol; the file is fd VT_MR_FD */
static void sc_mixed_race_g(void)
{
	size_t P = vt_pg();
	vt_fill(mr_src, 0, 4 * P, 5);
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	struct vr_region *r = NULL;
	CK_EQ(vr_region_from_fd(c, atoi(getenv("VT_MR_FD")), VR_REGION_SHARED, &r), 0);
	CK_EQ(vr_trap_backend(), VR_TRAP_GUARD);
	CK_EQ(vr_region_set_fault_handler(r, mr_refill, NULL), 0);
	uint8_t *b = vr_region_base(r);
	for (int i = 0; i < MR_ROUNDS; i++) {
		CK_EQ(vr_mark(r, P, P), VR_INTACT);
		ssize_t n = vr_ctx_purge(c, SIZE_MAX);
		if (n == 0) { /* skipped (a slow listener): not this test's matter */
			CK_EQ(vr_unmark(r, P, P), VR_INTACT);
			continue;
		}
		CK_EQ(n, (ssize_t)P);
		uint8_t v = rd(b + P + 100);
		CK(v == vt_pat(5, P + 100), "(round %d: the purger read %d, status %d)", i, v,
		   vr_status(r, P, P));
	}
	vr_ctx_destroy(c);
}

static void sc_mixed_race(void)
{
	size_t P = vt_pg();
	vt_fill(mr_src, 0, 4 * P, 5);
	struct vr_ctx *c = NULL;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	struct vr_region *r = NULL;
	int rc = vr_region_new(c, "vt-mixed-race", 4 * P, VR_REGION_SHARED, &r);
	if (rc == -EOPNOTSUPP || vr_trap_backend() != VR_TRAP_UFFD) {
		fprintf(stderr, "userfaultfd does not trap shared regions here: skip\n");
		_exit(77);
	}
	CK_EQ(rc, 0);
	MR.base = vr_region_base(r);
	memcpy(MR.base, mr_src, 4 * P);
	CK_EQ(vr_region_set_fault_handler(r, mr_refill, NULL), 0);
	int fd = dup(vr_region_fd(r)); /* without O_CLOEXEC: survives the exec */
	CK(fd >= 0);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, mr_reader, NULL), 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		char buf[16];
		snprintf(buf, sizeof(buf), "%d", fd);
		setenv("VT_MR_FD", buf, 1);
		setenv("VRANGE_TRAP", "guard", 1);
		vt_default_signals();
		execl("/proc/self/exe", "vt-scenario", "--scenario", "mixed_race_g", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	CK_EQ(vs_waitpid(pid, &st, 0), pid);
	atomic_store(&MR.stop, true);
	CK_EQ(pthread_join(t, NULL), 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		_exit(77); /* no guard markers here */
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(the guard mapper: status 0x%x)", st);
	CK(atomic_load(&MR.bad) == 0, "(%ld of %ld reads were not the data)", atomic_load(&MR.bad),
	   atomic_load(&MR.reads));
	close(fd);
	vr_ctx_destroy(c);
}

/* ---- a stopped mapper ---- */
static void sc_stopped(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 8 * P);
	FILL(&A, ra, 0, 8 * P, 8);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	VS_EXPECT_DATA(&B, rb, 0, 8 * P, 8);
	CK_EQ(MARK(&A, ra, 2 * P, 2 * P), VR_INTACT);
	CK_EQ(kill(B.pid, SIGSTOP), 0);
	int st;
	CK_EQ(vs_waitpid(B.pid, &st, WUNTRACED), B.pid);
	CK(WIFSTOPPED(st));
	ssize_t n = vr_ctx_purge(VS.ctx, SIZE_MAX);
	uint64_t sk = vr_ctx_stat(VS.ctx, VR_STAT_SKIPPED_BUSY);
	printf("purge with a stopped mapper: %zd bytes, %" PRIu64 " skipped (backend %d)\n", n, sk,
	       vr_trap_backend());
	if (n == 0) {
		/* skipped: counted, intact for all */
		CK_EQ(sk, 1);
		CK_EQ(vr_status(VS.r[ra], 2 * P, 2 * P), VR_STATE_VOLATILE);
		VS_EXPECT_DATA(&A, ra, 2 * P, 2 * P, 8);
	} else {
		CK_EQ(n, (ssize_t)(2 * P));
		CK_EQ(sk, 0);
	}
	CK_EQ(kill(B.pid, SIGCONT), 0);
	if (n == 0) {
		VS_EXPECT_DATA(&B, rb, 2 * P, 2 * P, 8);
		purge_all_of(&A, &B, rb, 2 * P, 2 * P, 8);
	}
	VS_EXPECT_TRAP(&B, rb, 3 * P + 3);
	VS_EXPECT_TRAP(&A, ra, 2 * P + 3);
	CK_EQ(UNMARK(&B, rb, 2 * P, 2 * P), VR_PURGED);

	/* a mapper that died: it cannot hold purges back for ever */
	struct vs_proc C = vs_spawn();
	int rc = join_from(&C, &A, ra, 0);
	VS_EXPECT_DATA(&C, rc, 0, 2 * P, 8);
	CK_EQ(kill(C.pid, SIGKILL), 0);
	st = vs_reap(&C);
	CK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	close(C.sock);
	CK_EQ(MARK(&B, rb, 5 * P, 2 * P), VR_INTACT);
	purge_all_of(&A, &B, rb, 5 * P, 2 * P, 8);
	VS_EXPECT_TRAP(&B, rb, 6 * P);
	CK_EQ(UNMARK(&A, ra, 5 * P, 2 * P), VR_PURGED);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

static const struct vt_scenario scenarios[] = {
	{ "peer", vs_peer_main },        { "leaks", sc_leaks },
	{ "flicker", sc_flicker },       { "nosyscall", sc_nosyscall },
	{ "inproc", sc_inproc },         { "fork", sc_fork },
	{ "stopped", sc_stopped },       { "seccomp", sc_seccomp },
	{ "mixed_ug", sc_mixed_ug },     { "mixed_gu", sc_mixed_gu },
	{ "mixed_race", sc_mixed_race }, { "mixed_race_g", sc_mixed_race_g },
};

SHARED_TEST(leaks)
SHARED_TEST(flicker)
SHARED_TEST(nosyscall)
SHARED_TEST(inproc)
SHARED_TEST(fork)
SHARED_TEST(stopped)

static void test_mixed_traps(void **state)
{
	(void)state;
	int a = vt_run_scenario("mixed_ug"), b = vt_run_scenario("mixed_gu");
	vt_assert_exit_ok(a);
	vt_assert_exit_ok(b);
}

static void test_mixed_race(void **state)
{
	(void)state;
	int st = vt_run_scenario("mixed_race");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		skip();
	vt_assert_exit_ok(st);
}

static void test_seccomp(void **state)
{
	(void)state;
	/* the fallback is the point: under a forced VRANGE_TRAP=uffd (CI's
	 * uffd leg) the filtered process's vr_ctx_new would only refuse */
	const char *e = getenv("VRANGE_TRAP");
	char outer[32] = "";
	if (e)
		snprintf(outer, sizeof(outer), "%s", e);
	if (e && strcmp(outer, "uffd") == 0)
		unsetenv("VRANGE_TRAP");
	setenv("VT_ERRNO", "EPERM", 1);
	vt_assert_exit_ok(vt_run_scenario("seccomp"));
	setenv("VT_ERRNO", "ENOSYS", 1);
	vt_assert_exit_ok(vt_run_scenario("seccomp"));
	unsetenv("VT_ERRNO");
	if (outer[0])
		setenv("VRANGE_TRAP", outer, 1);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leaks),       cmocka_unit_test(test_flicker),
		cmocka_unit_test(test_nosyscall),   cmocka_unit_test(test_inproc),
		cmocka_unit_test(test_fork),        cmocka_unit_test(test_stopped),
		cmocka_unit_test(test_mixed_traps), cmocka_unit_test(test_mixed_race),
		cmocka_unit_test(test_seccomp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
