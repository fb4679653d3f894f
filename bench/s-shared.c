/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-shared.c - scenario "shared": volatility shared by the processes that
 * map one memfd (VR_REGION_SHARED, api.md S27-S33), against private
 * regions, in one run.
 *
 * The scenario process forks its mapper processes first (before any
 * vr_ctx_new, so they inherit no library state), each with a
 * SOCK_SEQPACKET socketpair.  A mapper joins a shared region when the fd
 * arrives over SCM_RIGHTS (its own ctx, vr_region_from_fd), and then
 * obeys one-message commands: touch every page, take a timed fault,
 * leave.  VRANGE_TRAP is inherited, so mappers use the backend the job
 * asked for.
 *
 * (a) purge: one 64 KiB range, marked, then vr_ctx_purge(ctx, 64 KiB)
 *     timed in the scenario process (must reclaim 64 KiB), with 1, 2 and
 *     8 processes mapping the file: the purger alone, or with 1 or 7
 *     mappers that read every page of the range (so that they have it
 *     mapped) before each purge.  Between purges the range is unmarked
 *     (must say VR_PURGED) and rewritten.  The same loop on a private
 *     region is the baseline ("private-purge-64k"), and the floor is
 *     the hole punch alone in a plain memfd that 1 or 8 processes map
 *     and have read ("raw-punch-64k-m1/-m8": the kernel then unmaps the
 *     pages from every mapping, which the library cannot avoid).
 *     "shared-purge-64k-m8-untouched": 7 mappers joined but never read
 *     the range (nothing to unmap in them).  "shared-purge-stopped-mapper":
 *     the purge while the one other mapper is stopped with SIGSTOP (the
 *     guard protocol waits for its answer, then skips the range).
 * (b) fault round trip, one-page range purged by the scenario process:
 *     "shared-fault-peer"  a mapper reads the page; time from the access
 *                          until it returns, the mapper's fault handler
 *                          having called vr_unmark_fill (VR_PURGED) in
 *                          between; the purger then checks that the
 *                          page is non-volatile and holds the data;
 *     "shared-fault-self"  the same, the purger touching its own page;
 *     "private-fault"      the same on a private region.
 * (c) intact pair: 256 volatile 64 KiB ranges (each followed by a
 *     one-page gap), one pair = vr_unmark then vr_mark of a random range
 *     (both VR_INTACT), a sample = the mean of 64 pairs; the private and
 *     the shared region alternate sample by sample.
 *
 * Style "no-uffd" (job backend "guard"): the scenario process first
 * installs a seccomp filter that fails userfaultfd() with EPERM, as
 * Docker's default profile does, inherited by the mappers, so that
 * shared regions must use the guard protocol of S32.  Where the library
 * cannot trap a shared mapping (-EOPNOTSUPP) the job is skipped with a
 * note.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vrange.h>

#define SCEN "shared"
#define RANGE (64 * KiB)
#define NPAIR_RANGES 256
#define BATCH 64
#define MAXPEERS 7 /* + the purger: 8 mapping processes */
#define FILL 0x5a

/* ---- the mapper processes ---- */
struct cmd {
	char op; /* J join (fd attached), M map raw (fd attached), T touch, F fault at off,
		    L leave, Q quit */
	uint64_t off;
};
struct reply {
	int32_t rc; /* 0, or a negative errno / -EPROTO for wrong data */
	int32_t backend;
	double us;
};

static struct {
	pid_t pid;
	int sock;
} peers[MAXPEERS];
static unsigned char fill_buf[RANGE];

struct fstate {
	unsigned calls;
	int rc;
};

/* the lazy pattern: refill through the file and unmark in one step */
static int refill(struct vr_region *r, size_t off, size_t len, void *fault_addr, void *arg)
{
	struct fstate *st = arg;
	(void)fault_addr;
	st->calls++;
	st->rc = len <= RANGE ? vr_unmark_fill(r, off, len, fill_buf) : -ERANGE;
	return st->rc == VR_PURGED ? VR_FAULT_RETRY : VR_FAULT_SIGBUS;
}

static int send_msg(int sock, const void *m, size_t len, int fd)
{
	struct iovec iov = { .iov_base = (void *)m, .iov_len = len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* a message of exactly len bytes; *fd gets an fd passed with it, or -1 */
static int recv_msg(int sock, void *m, size_t len, int *fd)
{
	struct iovec iov = { .iov_base = m, .iov_len = len };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t got;
	while ((got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (got != (ssize_t)len)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	if (fd) {
		*fd = -1;
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
	}
	return 0;
}

static void peer_fault(struct vr_region *r, struct fstate *st, uint64_t off, struct reply *rp)
{
	unsigned before = st->calls;
	uint64_t t0 = now_ns();
	char v = *(volatile char *)((char *)vr_region_base(r) + off + 100);
	rp->us = (double)(now_ns() - t0) / 1000.0;
	if (st->calls != before + 1 || st->rc != VR_PURGED || v != FILL)
		rp->rc = -EPROTO;
}

static _Noreturn void peer_main(int sock)
{
	struct vr_ctx *ctx = NULL;
	struct vr_region *r = NULL;
	struct fstate st = { 0 };
	char *raw = NULL; /* the raw floor's plain mapping, RANGE bytes */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		struct cmd c;
		struct reply rp = { 0 };
		int fd;
		if (recv_msg(sock, &c, sizeof(c), &fd) < 0 || c.op == 'Q')
			break;
		if (c.op == 'J') {
			rp.rc = ctx ? 0 : vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
			if (!rp.rc)
				rp.rc = fd < 0 ? -EBADF : vr_region_from_fd(ctx, fd, 0, &r);
			if (!rp.rc)
				rp.rc = vr_region_set_fault_handler(r, refill, &st);
			if (fd >= 0)
				close(fd);
			rp.backend = vr_trap_backend();
		} else if (c.op == 'M') {
			raw = fd < 0 ? MAP_FAILED
				     : mmap(NULL, RANGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			rp.rc = raw == MAP_FAILED ? -errno : 0;
			if (raw == MAP_FAILED)
				raw = NULL;
			if (fd >= 0)
				close(fd);
		} else if (c.op == 'T' && (r || raw)) {
			const volatile char *p = r ? vr_region_base(r) : raw;
			size_t len = r ? vr_region_size(r) : RANGE;
			for (size_t o = 0; o < len; o += page_size)
				(void)p[o];
		} else if (c.op == 'F' && r) {
			peer_fault(r, &st, c.off, &rp);
		} else if (c.op == 'L') {
			vr_region_destroy(r);
			r = NULL;
			if (raw)
				munmap(raw, RANGE);
			raw = NULL;
		} else {
			rp.rc = -EINVAL;
		}
		if (send_msg(sock, &rp, sizeof(rp), -1) < 0)
			break;
	}
	vr_ctx_destroy(ctx);
	_exit(0);
}

static void spawn_peers(void)
{
	for (int i = 0; i < MAXPEERS; i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
		fflush(NULL);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			for (int j = 0; j < i; j++)
				close(peers[j].sock);
			close(sv[0]);
			peer_main(sv[1]);
		}
		close(sv[1]);
		peers[i].pid = pid;
		peers[i].sock = sv[0];
	}
}

static void reap_peers(void)
{
	for (int i = 0; i < MAXPEERS; i++) {
		struct cmd c = { .op = 'Q' };
		send_msg(peers[i].sock, &c, sizeof(c), -1);
		close(peers[i].sock);
		int st;
		CHECK(waitpid(peers[i].pid, &st, 0) == peers[i].pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/* one command to peer i and its reply; a failed reply ends the scenario */
static struct reply ask(int i, char op, uint64_t off, int fd)
{
	struct cmd c = { .op = op, .off = off };
	struct reply rp;
	if (send_msg(peers[i].sock, &c, sizeof(c), fd) < 0 ||
	    recv_msg(peers[i].sock, &rp, sizeof(rp), NULL) < 0)
		die("mapper %d: no answer to '%c'", i, op);
	if (rp.rc < 0)
		die("mapper %d: '%c' at %llu failed: %d (%s)", i, op, (unsigned long long)off,
		    rp.rc, rp.rc == -EPROTO ? "wrong fault result or data" : strerror(-rp.rc));
	return rp;
}

static void join(int npeers, struct vr_region *r)
{
	for (int i = 0; i < npeers; i++) {
		struct reply rp = ask(i, 'J', 0, vr_region_fd(r));
		if (rp.backend != vr_trap_backend())
			die("mapper %d uses trap backend %d, the purger %d", i, rp.backend,
			    vr_trap_backend());
	}
}

static void leave(int npeers)
{
	for (int i = 0; i < npeers; i++)
		ask(i, 'L', 0, -1);
}

/* vr_ctx_purge(ctx, len), tried again while the guard protocol skips
 * the range because a mapper was late (counted in VR_STAT_SKIPPED_BUSY);
 * the caller checks what came back */
static ssize_t purge_retry(struct vr_ctx *ctx, size_t len)
{
	for (int tries = 0;; tries++) {
		uint64_t busy = vr_ctx_stat(ctx, VR_STAT_SKIPPED_BUSY);
		ssize_t got = VRCHECK(vr_ctx_purge(ctx, len));
		if (got || tries == 20 || vr_ctx_stat(ctx, VR_STAT_SKIPPED_BUSY) == busy)
			return got;
	}
}

/* ---- (a) the floor: punching 64 KiB out of a plain memfd that
 * 1 + npeers processes map and have read ---- */
static void bench_raw_punch(int npeers, const char *name)
{
	size_t reps = BY_MODE(20, 150, 1000);
	int fd = memfd_create("vrbench-shared-raw", MFD_CLOEXEC);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)RANGE) == 0);
	char *base = mmap(NULL, RANGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(base != MAP_FAILED);
	for (int p = 0; p < npeers; p++)
		ask(p, 'M', 0, fd);
	struct samples s = { 0 };
	for (size_t i = 0; i <= reps; i++) {
		memset(base, (int)(i & 0x7f) + 1, RANGE);
		for (int p = 0; p < npeers; p++)
			ask(p, 'T', 0, -1);
		uint64_t t0 = now_ns();
		CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)RANGE) ==
		      0);
		uint64_t dt = now_ns() - t0;
		if (i)
			samples_add(&s, (double)dt / 1000.0);
	}
	emit_samples(SCEN, name, &s, "us");
	samples_free(&s);
	leave(npeers);
	munmap(base, RANGE);
	close(fd);
}

/* ---- (a) purge of one 64 KiB range with 1 + npeers mapping processes ---- */
static void bench_purge(struct vr_ctx *ctx, unsigned flags, int npeers, bool touch,
			const char *name)
{
	size_t reps = BY_MODE(20, 150, 1000);
	struct vr_region *r;
	VRCHECK(vr_region_new(ctx, "vrbench-shared-purge", RANGE, flags, &r));
	join(npeers, r);
	char *base = vr_region_base(r);
	struct samples s = { 0 };
	size_t skipped = 0;
	for (size_t i = 0; i <= reps; i++) {
		int u = VRCHECK(vr_unmark(r, 0, RANGE));
		if (i && u != VR_PURGED)
			die("%s: unmark after a purge said %d", name, u);
		char v = (char)((i & 0x7f) + 1);
		memset(base, v, RANGE);
		for (int p = 0; touch && p < npeers; p++)
			ask(p, 'T', 0, -1);
		if (VRCHECK(vr_mark(r, 0, RANGE)) != VR_INTACT)
			die("%s: fresh mark purged", name);
		uint64_t busy = vr_ctx_stat(ctx, VR_STAT_SKIPPED_BUSY), t0 = now_ns();
		ssize_t got = VRCHECK(vr_ctx_purge(ctx, RANGE));
		uint64_t dt = now_ns() - t0;
		/* guard protocol: a mapper that did not answer in time (this
		 * machine is shared) makes the purge skip the range, data kept;
		 * the time it cost stays in the samples, the next try takes it */
		if (got == 0) {
			CHECK(vr_ctx_stat(ctx, VR_STAT_SKIPPED_BUSY) > busy);
			CHECK(vr_status(r, 0, RANGE) == VR_STATE_VOLATILE && base[0] == v &&
			      base[RANGE - 1] == v);
			skipped++;
			got = purge_retry(ctx, RANGE);
		}
		if (got != (ssize_t)RANGE)
			die("%s: vr_ctx_purge reclaimed %zd of %zu bytes", name, got, RANGE);
		if (i) /* the first one warms up */
			samples_add(&s, (double)dt / 1000.0);
	}
	emit_samples(SCEN, name, &s, "us");
	if (skipped)
		emit_note("%s%s%s: %zu of %zu purges skipped (a mapper did not answer in time), "
			  "taken by the next try",
			  name, bopt.backend ? " " : "", bopt.backend ? bopt.backend : "", skipped,
			  reps + 1);
	samples_free(&s);
	leave(npeers);
	vr_region_destroy(r);
}

/* ---- (a') a purge while the one other mapper is stopped (SIGSTOP):
 * under userfaultfd it is a purge like any other; under the guard
 * protocol the purger waits for the mapper's answer until its timeout,
 * then skips the range (VR_STAT_SKIPPED_BUSY), which a purge after
 * SIGCONT takes ---- */
static void bench_stopped(struct vr_ctx *ctx)
{
	size_t reps = BY_MODE(2, 5, 20);
	struct vr_region *r;
	VRCHECK(vr_region_new(ctx, "vrbench-shared-stopped", RANGE, VR_REGION_SHARED, &r));
	join(1, r);
	char *base = vr_region_base(r);
	struct samples s = { 0 };
	size_t skipped = 0;
	for (size_t i = 0; i < reps; i++) {
		VRCHECK(vr_unmark(r, 0, RANGE));
		memset(base, (int)i + 1, RANGE);
		ask(0, 'T', 0, -1);
		if (VRCHECK(vr_mark(r, 0, RANGE)) != VR_INTACT)
			die("stopped: fresh mark purged");
		int st;
		CHECK(kill(peers[0].pid, SIGSTOP) == 0);
		CHECK(waitpid(peers[0].pid, &st, WUNTRACED) == peers[0].pid && WIFSTOPPED(st));
		uint64_t busy = vr_ctx_stat(ctx, VR_STAT_SKIPPED_BUSY), t0 = now_ns();
		ssize_t got = VRCHECK(vr_ctx_purge(ctx, RANGE));
		samples_add(&s, (double)(now_ns() - t0) / 1000.0);
		CHECK(kill(peers[0].pid, SIGCONT) == 0);
		if (got == 0) { /* skipped: counted, data kept, purgeable later */
			CHECK(vr_ctx_stat(ctx, VR_STAT_SKIPPED_BUSY) == busy + 1);
			CHECK(vr_status(r, 0, RANGE) == VR_STATE_VOLATILE);
			CHECK(base[0] == (char)(i + 1) && base[RANGE - 1] == (char)(i + 1));
			skipped++;
			got = purge_retry(ctx, RANGE);
		}
		if (got != (ssize_t)RANGE)
			die("stopped: vr_ctx_purge reclaimed %zd of %zu bytes", got, RANGE);
	}
	emit_samples(SCEN, "shared-purge-stopped-mapper", &s, "us");
	emit_note("shared%s%s: with the other mapper stopped, %zu of %zu purges skipped, each "
		  "taken by the next purge after SIGCONT",
		  bopt.backend ? " " : "", bopt.backend ? bopt.backend : "", skipped, reps);
	samples_free(&s);
	leave(1);
	vr_region_destroy(r);
}

/* ---- (b) fault round trip ---- */
static void bench_fault(struct vr_ctx *ctx, unsigned flags, bool peer, const char *name)
{
	size_t reps = BY_MODE(30, 300, 2000);
	struct vr_region *r;
	struct fstate st = { 0 };
	VRCHECK(vr_region_new(ctx, "vrbench-shared-fault", 4 * page_size, flags, &r));
	VRCHECK(vr_region_set_fault_handler(r, refill, &st));
	if (peer)
		join(1, r);
	char *base = vr_region_base(r);
	size_t off = page_size;
	struct samples s = { 0 };
	for (size_t i = 0; i <= reps; i++) {
		memset(base + off, 1, page_size);
		if (VRCHECK(vr_mark(r, off, page_size)) != VR_INTACT)
			die("%s: fresh mark purged", name);
		if (purge_retry(ctx, page_size) != (ssize_t)page_size)
			die("%s: purge did not reclaim the page", name);
		double us;
		if (peer) {
			us = ask(0, 'F', off, -1).us;
		} else {
			struct reply rp = { 0 };
			peer_fault(r, &st, off, &rp);
			if (rp.rc)
				die("%s: calls %u rc %d", name, st.calls, st.rc);
			us = rp.us;
		}
		/* the unmark and the data are the file's, whoever faulted */
		if (VRCHECK(vr_status(r, off, page_size)) != 0 || base[off] != FILL ||
		    base[off + page_size - 1] != FILL)
			die("%s: after the fault: status %d, byte %d", name,
			    vr_status(r, off, page_size), base[off]);
		if (i)
			samples_add(&s, us);
	}
	emit_samples(SCEN, name, &s, "us");
	samples_free(&s);
	if (peer)
		leave(1);
	vr_region_destroy(r);
}

/* ---- (c) intact pairs, private and shared alternating ---- */
static void pair_batch(struct vr_region *r, uint64_t *rng)
{
	for (size_t j = 0; j < BATCH; j++) {
		size_t off = rng_below(rng, NPAIR_RANGES) * (RANGE + page_size);
		int a = vr_unmark(r, off, RANGE), b = vr_mark(r, off, RANGE);
		if (a != VR_INTACT || b != VR_INTACT)
			die("pair at %zu: unmark %d mark %d (expected intact)", off, a, b);
	}
}

static void bench_pairs(struct vr_ctx *ctx)
{
	size_t nsamp = BY_MODE(100, 800, 3000);
	struct vr_region *r[2];
	struct samples s[2] = { { 0 }, { 0 } };
	uint64_t rng[2] = { 7, 7 }; /* the same ranges in the same order */
	for (int k = 0; k < 2; k++) {
		VRCHECK(vr_region_new(ctx, "vrbench-shared-pair",
				      NPAIR_RANGES * (RANGE + page_size), k ? VR_REGION_SHARED : 0,
				      &r[k]));
		for (size_t i = 0; i < NPAIR_RANGES; i++)
			if (VRCHECK(vr_mark(r[k], i * (RANGE + page_size), RANGE)) != VR_INTACT)
				die("fresh mark purged");
		pair_batch(r[k], &rng[k]); /* warm-up */
	}
	for (size_t i = 0; i < nsamp; i++)
		for (int k = 0; k < 2; k++) {
			uint64_t t = now_ns();
			pair_batch(r[k], &rng[k]);
			samples_add(&s[k], (double)(now_ns() - t) / BATCH);
		}
	CHECK(vr_ctx_stat(ctx, VR_STAT_PURGES) == 0);
	emit_samples(SCEN, "private-pair", &s[0], "ns");
	emit_samples(SCEN, "shared-pair", &s[1], "ns");
	for (int k = 0; k < 2; k++) {
		samples_free(&s[k]);
		vr_region_destroy(r[k]);
	}
}

/* userfaultfd() fails with EPERM from now on, in this process and its
 * children (no other system call is touched) */
static void refuse_userfaultfd(void)
{
#if defined(SYS_userfaultfd) && defined(__x86_64__)
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0);
	CHECK(syscall(SYS_userfaultfd, 0) < 0 && errno == EPERM);
#else
	die("the no-uffd style needs x86-64");
#endif
}

int run_shared(const char *style)
{
	memset(fill_buf, FILL, sizeof(fill_buf));
	if (style && !strcmp(style, "no-uffd"))
		refuse_userfaultfd();
	spawn_peers();
	struct vr_ctx *ctx;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (rc == -EOPNOTSUPP && bopt.backend) {
		emit_note("shared: trap backend %s not supported by libvrange here", bopt.backend);
		reap_peers();
		return 77;
	}
	VRCHECK(rc);
	int before = vr_trap_backend(); /* the backend of private regions */
	struct vr_region *probe;
	rc = vr_region_new(ctx, "vrbench-shared-probe", RANGE, VR_REGION_SHARED, &probe);
	if (rc == -EOPNOTSUPP) {
		emit_note("shared%s%s: VR_REGION_SHARED refused (no trap for shared mappings "
			  "here): scenario skipped",
			  bopt.backend ? " " : "", bopt.backend ? bopt.backend : "");
		vr_ctx_destroy(ctx);
		reap_peers();
		return 77;
	}
	VRCHECK(rc);
	vr_region_destroy(probe);
	emit_note("shared%s%s: vr_trap_backend() %d before the first shared region, %d after it "
		  "(1 guard, 2 mprotect, 3 uffd), the same in every mapper",
		  bopt.backend ? " " : "", bopt.backend ? bopt.backend : "", before,
		  vr_trap_backend());

	bench_pairs(ctx);
	bench_raw_punch(0, "raw-punch-64k-m1");
	bench_raw_punch(MAXPEERS, "raw-punch-64k-m8");
	bench_purge(ctx, 0, 0, true, "private-purge-64k");
	bench_purge(ctx, VR_REGION_SHARED, 0, true, "shared-purge-64k-m1");
	bench_purge(ctx, VR_REGION_SHARED, 1, true, "shared-purge-64k-m2");
	bench_purge(ctx, VR_REGION_SHARED, MAXPEERS, true, "shared-purge-64k-m8");
	bench_purge(ctx, VR_REGION_SHARED, MAXPEERS, false, "shared-purge-64k-m8-untouched");
	bench_stopped(ctx);
	bench_fault(ctx, 0, false, "private-fault");
	bench_fault(ctx, VR_REGION_SHARED, false, "shared-fault-self");
	bench_fault(ctx, VR_REGION_SHARED, true, "shared-fault-peer");
	vr_ctx_destroy(ctx);
	reap_peers();
	return 0;
}
