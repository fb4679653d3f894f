/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vt-shared.h - processes that share a VR_REGION_SHARED memfd (S27-S33),
 * for test-shared.c and test-shared-kill.c
 *
 * A scenario (a fresh process, tests.h) drives "peers": copies of the
 * test program started with fork + exec ("--scenario peer"), each with a
 * ctx of its own, that run requests sent over a SOCK_SEQPACKET socketpair
 * and answer with a result.  Region fds travel as SCM_RIGHTS.  The same
 * requests run in the scenario process itself (vs_local), so a scenario
 * reads as "A does this, B does that".
 *
 * Every process installs an application SIGBUS handler before its first
 * vr_ctx_new: a trap on a discarded page with no fault handler (or one
 * that returns VR_FAULT_SIGBUS) reaches it (S13, S28), and it leaves with
 * siglongjmp, so a read reports "trapped at offset X, si_code C" instead
 * of dying, and a read of zeros where the data was is reported as such.
 */
#ifndef VT_SHARED_H
#define VT_SHARED_H

#include "tests.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

enum vs_op {
	VS_JOIN = 1, /* a = flags; the fd travels as SCM_RIGHTS -> rc, v0 = region */
	VS_NEW,      /* a = size, b = flags -> rc, v0 = region */
	VS_FD,       /* the region's fd comes back as SCM_RIGHTS */
	VS_MARK,     /* a = off, b = len */
	VS_UNMARK,
	VS_STATUS,
	VS_PURGE,   /* a = bytes -> bytes reclaimed */
	VS_READ,    /* a = off -> 0, v0 = byte; or VS_TRAPPED */
	VS_CHECK,   /* a = off, b = len, c = gen (VS_ZERO: zeros) -> 0, VS_DIFF, VS_TRAPPED */
	VS_FILL,    /* a = off, b = len, c = gen -> 0 or VS_TRAPPED */
	VS_SYSOUT,  /* write(pipe, base + a, b), then compare with gen c -> bytes or -errno */
	VS_SYSIN,   /* read(pipe, base + a, b) of gen c -> bytes or -errno */
	VS_STAT,    /* a = which */
	VS_SIZE,    /* vr_region_size */
	VS_HANDLER, /* a = VS_H_* mode, b = refill gen */
	VS_HINFO,   /* -> calls, v0 = off, v1 = len, v2 = fault offset, v3 = unmark rc */
	VS_DESTROY,
	VS_PRESSURE, /* a = level -> bytes reclaimed */
	VS_LIMIT,    /* a = bytes */
	VS_OBJ,      /* a new object of a bytes, unpinned -> vr_obj_unpin's result */
	VS_HOG,      /* c times: mark and unmark [a, a + b) -> 0 */
	VS_FLICKER,  /* b reads of byte a (gen c or 0), handler VS_H_SIGBUS set:
		      * -> SIGBUS without a handler call; v0 reads, v1 traps,
		      * v2 bytes neither gen c nor 0 */
	VS_EXIT,
};

/* results of VS_READ, VS_CHECK, VS_FILL: v0 = region offset, v1 = si_code
 * (trap) or the byte read (diff), v2 = the signal (trap) */
#define VS_DIFF 1
#define VS_TRAPPED 2
#define VS_ZERO UINT64_MAX

/* fault handler modes (S13) */
enum { VS_H_NONE, VS_H_SIGBUS, VS_H_REFILL, VS_H_RETRY /* retries, fixes nothing */ };

struct vs_req {
	int32_t op, reg;
	uint64_t a, b, c;
};
struct vs_rep {
	int64_t rc;
	int64_t v[4];
};

/* a process taking part: sock < 0 is this process */
struct vs_proc {
	pid_t pid;
	int sock;
};

#define VS_MAX_REGIONS 8

struct vs_hinfo {
	int mode;
	uint64_t gen;
	int calls;
	size_t off, len, at;
	int unmark_rc;
};

static struct {
	struct vr_ctx *ctx;
	struct vr_region *r[VS_MAX_REGIONS];
	struct vs_hinfo h[VS_MAX_REGIONS];
	int pipe[2];
} VS;

/* ---- the application's SIGBUS handler ---- */
static sigjmp_buf vs_env;
static volatile sig_atomic_t vs_armed;
static volatile struct {
	int hits, code, sig;
	void *addr;
} VS_BUS;

static inline void vs_bus(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	VS_BUS.hits++;
	VS_BUS.sig = sig;
	VS_BUS.code = si->si_code;
	VS_BUS.addr = si->si_addr;
	if (vs_armed) {
		vs_armed = 0;
		siglongjmp(vs_env, 1);
	}
	/* not expected: die of it as the default action would */
	signal(sig, SIG_DFL);
	raise(sig);
}

static inline void vs_install_bus(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = vs_bus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGBUS, &sa, NULL), 0);
	/* a SIGSEGV the library passes on (not a trap it knows) is reported
	 * as such instead of killing the process */
	CK_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
}

/* this process's ctx: a SIGBUS handler first, no monitor (no purge that
 * a scenario did not ask for) */
static inline void vs_init(void)
{
	vs_install_bus();
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &VS.ctx);
	if (rc == -EOPNOTSUPP && vt_trap_optional(getenv("VRANGE_TRAP"))) {
		fprintf(stderr, "VRANGE_TRAP=%s not available here: skip\n", getenv("VRANGE_TRAP"));
		_exit(77);
	}
	CK_EQ(rc, 0);
	CK_EQ(pipe2(VS.pipe, O_CLOEXEC), 0);
	/* a full pipe must not block a VS_SYSOUT of up to 16 pages */
	(void)fcntl(VS.pipe[1], F_SETPIPE_SZ, 1 << 20);
}

static inline int vs_fault(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	struct vs_hinfo *h = arg;
	uint8_t *base = vr_region_base(r);
	h->calls++;
	h->off = off;
	h->len = len;
	h->at = (size_t)((uint8_t *)addr - base);
	if (h->mode == VS_H_RETRY)
		return VR_FAULT_RETRY;
	if (h->mode != VS_H_REFILL)
		return VR_FAULT_SIGBUS;
	h->unmark_rc = vr_unmark(r, off, len);
	vt_fill(base + off, off, len, h->gen);
	return VR_FAULT_RETRY;
}

/* compare (or, fill) [off, off + len) of region base with generation gen,
 * leaving with siglongjmp from a trap */
static inline int vs_touch(uint8_t *base, size_t off, size_t len, uint64_t gen, bool fill,
			   int64_t *v)
{
	volatile size_t i = 0;
	if (sigsetjmp(vs_env, 1)) {
		v[0] = (int64_t)((uint8_t *)VS_BUS.addr - base);
		v[1] = VS_BUS.code;
		v[2] = VS_BUS.sig;
		return VS_TRAPPED;
	}
	vs_armed = 1;
	for (i = 0; i < len; i++) {
		volatile uint8_t *p = base + off + i;
		uint8_t want = gen == VS_ZERO ? 0 : vt_pat(gen, off + i);
		if (fill) {
			*p = want;
			continue;
		}
		uint8_t got = *p;
		if (got != want) {
			vs_armed = 0;
			v[0] = (int64_t)(off + i);
			v[1] = got;
			return VS_DIFF;
		}
	}
	vs_armed = 0;
	return 0;
}

static inline int64_t vs_read_byte(uint8_t *base, size_t off, int64_t *v)
{
	if (sigsetjmp(vs_env, 1)) {
		v[0] = (int64_t)((uint8_t *)VS_BUS.addr - base);
		v[1] = VS_BUS.code;
		v[2] = VS_BUS.sig;
		return VS_TRAPPED;
	}
	vs_armed = 1;
	v[0] = *(volatile uint8_t *)(base + off);
	vs_armed = 0;
	return 0;
}

/* the kernel reads region memory: write(2) from it */
static inline int64_t vs_sysout(uint8_t *base, size_t off, size_t len, uint64_t gen, int64_t *v)
{
	ssize_t n = write(VS.pipe[1], base + off, len);
	if (n < 0)
		return -errno;
	uint8_t *buf = malloc((size_t)n);
	CK(buf != NULL);
	CK_EQ(read(VS.pipe[0], buf, (size_t)n), n);
	v[0] = -1;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] != (gen == VS_ZERO ? 0 : vt_pat(gen, off + (size_t)i))) {
			v[0] = (int64_t)(off + (size_t)i);
			break;
		}
	free(buf);
	return n;
}

/* the kernel writes region memory: read(2) into it */
static inline int64_t vs_sysin(uint8_t *base, size_t off, size_t len, uint64_t gen)
{
	uint8_t *buf = malloc(len);
	CK(buf != NULL);
	vt_fill(buf, off, len, gen);
	CK_EQ(write(VS.pipe[1], buf, len), (ssize_t)len);
	ssize_t n = read(VS.pipe[0], base + off, len);
	int64_t rc = n < 0 ? -errno : n;
	if (n < 0) /* drain what the kernel could not copy */
		CK_EQ(read(VS.pipe[0], buf, len), (ssize_t)len);
	free(buf);
	return rc;
}

static inline int vs_slot(void)
{
	for (int i = 0; i < VS_MAX_REGIONS; i++)
		if (!VS.r[i])
			return i;
	CK(0, "(too many regions)");
	return -1;
}

static inline int64_t vs_region_added(int rc, int i, int64_t *v)
{
	if (rc == 0) {
		memset(&VS.h[i], 0, sizeof(VS.h[i]));
		v[0] = i;
	} else {
		VS.r[i] = NULL;
	}
	return rc;
}

/* run one request in this process; fd: the SCM_RIGHTS fd of VS_JOIN */
static inline int64_t vs_exec(const struct vs_req *q, int fd, int64_t *v)
{
	struct vr_region *r = q->reg >= 0 && q->reg < VS_MAX_REGIONS ? VS.r[q->reg] : NULL;
	uint8_t *base = r ? vr_region_base(r) : NULL;
	memset(v, 0, 4 * sizeof(*v));
	switch (q->op) {
	case VS_JOIN: {
		int i = vs_slot();
		return vs_region_added(vr_region_from_fd(VS.ctx, fd, (unsigned)q->a, &VS.r[i]), i,
				       v);
	}
	case VS_NEW: {
		int i = vs_slot();
		return vs_region_added(
			vr_region_new(VS.ctx, "vt-shared", q->a, (unsigned)q->b, &VS.r[i]), i, v);
	}
	case VS_MARK:
		return vr_mark(r, q->a, q->b);
	case VS_UNMARK:
		return vr_unmark(r, q->a, q->b);
	case VS_STATUS:
		return vr_status(r, q->a, q->b);
	case VS_PURGE:
		return vr_ctx_purge(VS.ctx, q->a);
	case VS_READ:
		return vs_read_byte(base, q->a, v);
	case VS_CHECK:
		return vs_touch(base, q->a, q->b, q->c, false, v);
	case VS_FILL:
		return vs_touch(base, q->a, q->b, q->c, true, v);
	case VS_SYSOUT:
		return vs_sysout(base, q->a, q->b, q->c, v);
	case VS_SYSIN:
		return vs_sysin(base, q->a, q->b, q->c);
	case VS_STAT:
		return (int64_t)vr_ctx_stat(VS.ctx, (enum vr_stat)q->a);
	case VS_SIZE:
		return (int64_t)vr_region_size(r);
	case VS_HANDLER:
		VS.h[q->reg].mode = (int)q->a;
		VS.h[q->reg].gen = q->b;
		return vr_region_set_fault_handler(r, q->a == VS_H_NONE ? NULL : vs_fault,
						   &VS.h[q->reg]);
	case VS_HINFO: {
		struct vs_hinfo *h = &VS.h[q->reg];
		v[0] = (int64_t)h->off;
		v[1] = (int64_t)h->len;
		v[2] = (int64_t)h->at;
		v[3] = h->unmark_rc;
		return h->calls;
	}
	case VS_PRESSURE:
		return vr_ctx_notify_pressure(VS.ctx, (enum vr_pressure)q->a);
	case VS_LIMIT:
		return vr_ctx_set_limit(VS.ctx, q->a);
	case VS_OBJ: {
		struct vr_obj *o = NULL;
		int rc = vr_obj_new(VS.ctx, q->a, 0, &o);
		return rc < 0 ? rc : vr_obj_unpin(o); /* freed with the ctx */
	}
	case VS_HOG:
		for (uint64_t i = 0; i < q->c; i++) {
			int rc = vr_mark(r, q->a, q->b);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
			rc = vr_unmark(r, q->a, q->b);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(%d)", rc);
		}
		return 0;
	case VS_FLICKER: {
		int64_t w[4], bad = 0;
		struct vs_hinfo *h = &VS.h[q->reg];
		for (uint64_t i = 0; i < q->b; i++) {
			int calls = h->calls;
			if (vs_read_byte(base, q->a, w) == VS_TRAPPED) {
				v[1]++;
				bad += h->calls == calls;
			} else {
				v[0]++;
				v[2] += w[0] != 0 && w[0] != vt_pat(q->c, q->a);
			}
		}
		return bad;
	}
	case VS_DESTROY:
		vr_region_destroy(r);
		VS.r[q->reg] = NULL;
		return 0;
	default:
		CK(0, "(unknown request %d)", q->op);
	}
	return 0;
}

/* ---- fds over the socket ---- */
static inline void vs_sendmsg(int sock, const void *buf, size_t len, int fd)
{
	struct iovec io = { .iov_base = (void *)buf, .iov_len = len };
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.b;
		m.msg_controllen = sizeof(u.b);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	ssize_t n;
	while ((n = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	CK_EQ(n, (ssize_t)len);
}

/* bytes received (0: the other end is gone); *fd: a received fd or -1 */
static inline ssize_t vs_recvmsg(int sock, void *buf, size_t len, int *fd)
{
	struct iovec io = { .iov_base = buf, .iov_len = len };
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {
		.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)
	};
	ssize_t n;
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	CK(n >= 0, "(recvmsg: %s)", strerror(errno));
	*fd = -1;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return n;
}

/* ---- peers ---- */

/* the peer scenario: serve requests until the socket closes or VS_EXIT */
static inline void vs_peer_main(void)
{
	const char *s = getenv("VT_PEER_SOCK");
	CK(s != NULL);
	int sock = atoi(s);
	vs_init();
	for (;;) {
		struct vs_req q;
		int fd;
		ssize_t n = vs_recvmsg(sock, &q, sizeof(q), &fd);
		if (n == 0 || q.op == VS_EXIT)
			break;
		CK_EQ(n, (ssize_t)sizeof(q));
		struct vs_rep p;
		if (q.op == VS_FD) {
			struct vr_region *r = VS.r[q.reg];
			p.rc = 0;
			vs_sendmsg(sock, &p, sizeof(p), vr_region_fd(r));
			continue;
		}
		p.rc = vs_exec(&q, fd, p.v);
		if (fd >= 0)
			close(fd);
		vs_sendmsg(sock, &p, sizeof(p), -1);
	}
	vr_ctx_destroy(VS.ctx);
	_exit(0);
}

/* start a peer: this test program re-executed as "--scenario peer";
 * trap: its VRANGE_TRAP ("" unsets it, NULL inherits this process's) */
static inline struct vs_proc vs_spawn_trap(const char *trap)
{
	int sv[2];
	CK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		int fd = dup(sv[1]); /* without O_CLOEXEC: survives the exec */
		char buf[16];
		snprintf(buf, sizeof(buf), "%d", fd);
		setenv("VT_PEER_SOCK", buf, 1);
		if (trap && *trap)
			setenv("VRANGE_TRAP", trap, 1);
		else if (trap)
			unsetenv("VRANGE_TRAP");
		vt_default_signals();
		execl(program_invocation_name, "vt-scenario", "--scenario", "peer", (char *)NULL);
		execl("/proc/self/exe", "vt-scenario", "--scenario", "peer", (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	return (struct vs_proc){ .pid = pid, .sock = sv[0] };
}

static inline struct vs_proc vs_spawn(void)
{
	return vs_spawn_trap(NULL);
}

/* waitpid and one-byte pipe transfers, again after EINTR (the guard
 * protocol may signal a mapper) */
static inline pid_t vs_waitpid(pid_t pid, int *st, int flags)
{
	pid_t r;
	while ((r = waitpid(pid, st, flags)) < 0 && errno == EINTR)
		;
	return r;
}

static inline ssize_t vs_xfer1(int fd, bool out)
{
	char x = 'x';
	ssize_t n;
	while ((n = out ? write(fd, &x, 1) : read(fd, &x, 1)) < 0 && errno == EINTR)
		;
	return n;
}

/* the wait status of a peer that is gone */
static inline int vs_reap(struct vs_proc *p)
{
	int st = 0;
	CK_EQ(vs_waitpid(p->pid, &st, 0), p->pid);
	return st;
}

/* a request to p (or to this process); fd: sent with VS_JOIN, or -1;
 * v (4 values) may be NULL */
static inline int64_t vs_call_fd(struct vs_proc *p, int op, int reg, uint64_t a, uint64_t b,
				 uint64_t c, int fd, int64_t *v)
{
	struct vs_req q = { .op = op, .reg = reg, .a = a, .b = b, .c = c };
	struct vs_rep rep;
	if (p->sock < 0) {
		rep.rc = vs_exec(&q, fd, rep.v);
	} else {
		int got;
		vs_sendmsg(p->sock, &q, sizeof(q), fd);
		ssize_t n = vs_recvmsg(p->sock, &rep, sizeof(rep), &got);
		if (n == 0) {
			int st = vs_reap(p);
			CK(0, "(peer %d died: status 0x%x)", (int)p->pid, st);
		}
		CK_EQ(n, (ssize_t)sizeof(rep));
		if (got >= 0)
			close(got);
	}
	if (v)
		memcpy(v, rep.v, sizeof(rep.v));
	return rep.rc;
}

static inline int64_t vs_call(struct vs_proc *p, int op, int reg, uint64_t a, uint64_t b,
			      uint64_t c)
{
	return vs_call_fd(p, op, reg, a, b, c, -1, NULL);
}

/* an fd of p's region reg (a new fd in this process: close it) */
static inline int vs_fd_of(struct vs_proc *p, int reg)
{
	if (p->sock < 0)
		return fcntl(vr_region_fd(VS.r[reg]), F_DUPFD_CLOEXEC, 0);
	struct vs_req q = { .op = VS_FD, .reg = reg };
	struct vs_rep rep;
	int fd;
	vs_sendmsg(p->sock, &q, sizeof(q), -1);
	CK_EQ(vs_recvmsg(p->sock, &rep, sizeof(rep), &fd), (ssize_t)sizeof(rep));
	CK(fd >= 0, "(no fd came back)");
	return fd;
}

/* p joins the memfd fd with flags: the region index, or the negative
 * errno of vr_region_from_fd */
static inline int vs_join(struct vs_proc *p, int fd, unsigned flags)
{
	int64_t v[4];
	int64_t rc = vs_call_fd(p, VS_JOIN, -1, flags, 0, 0, fd, v);
	return rc < 0 ? (int)rc : (int)v[0];
}

/* p creates a region; returns its index or the negative errno */
static inline int vs_new(struct vs_proc *p, size_t size, unsigned flags)
{
	int64_t v[4];
	int64_t rc = vs_call_fd(p, VS_NEW, -1, size, flags, 0, -1, v);
	return rc < 0 ? (int)rc : (int)v[0];
}

/* p's read of the byte at off: must trap at exactly off, with BUS_ADRERR */
#define VS_EXPECT_TRAP(p, reg, off)                                                                \
	do {                                                                                       \
		int64_t vs_v_[4];                                                                  \
		int64_t vs_rc_ = vs_call_fd((p), VS_READ, (reg), (off), 0, 0, -1, vs_v_);          \
		CK(vs_rc_ == VS_TRAPPED, "(read at %zu returned %" PRId64 ": byte %" PRId64 ")",   \
		   (size_t)(off), vs_rc_, vs_v_[0]);                                               \
		CK_EQ(vs_v_[0], (int64_t)(off));                                                   \
		CK_EQ(vs_v_[2], SIGBUS);                                                           \
		CK_EQ(vs_v_[1], BUS_ADRERR);                                                       \
	} while (0)

/* p's bytes [off, off + len) hold generation gen (VS_ZERO: zeros) */
#define VS_EXPECT_DATA(p, reg, off, len, gen)                                                      \
	do {                                                                                       \
		int64_t vs_v_[4];                                                                  \
		int64_t vs_rc_ = vs_call_fd((p), VS_CHECK, (reg), (off), (len), (gen), -1, vs_v_); \
		CK(vs_rc_ == 0,                                                                    \
		   "(%s at offset %" PRId64 ", value/code %" PRId64 ", checking [%zu, +%zu))",     \
		   vs_rc_ != VS_TRAPPED  ? "wrong byte"                                            \
		   : vs_v_[2] == SIGSEGV ? "SIGSEGV"                                               \
					 : "SIGBUS",                                               \
		   vs_v_[0], vs_v_[1], (size_t)(off), (size_t)(len));                              \
	} while (0)

/* p creates a VR_REGION_SHARED region of size bytes: its index.  Under a
 * forced trap backend that cannot trap shared regions (S32: -EOPNOTSUPP)
 * the scenario is skipped; without one it must work on this system
 * (userfaultfd unprivileged, or guard markers) */
static inline int vs_new_shared(struct vs_proc *p, size_t size)
{
	int i = vs_new(p, size, VR_REGION_SHARED);
	const char *t = getenv("VRANGE_TRAP");
	if (i == -EOPNOTSUPP && t) {
		fprintf(stderr, "VR_REGION_SHARED under VRANGE_TRAP=%s: -EOPNOTSUPP: skip\n", t);
		_exit(77);
	}
	CK(i >= 0, "(vr_region_new(VR_REGION_SHARED): %d)", i);
	return i;
}

static inline void vs_stop(struct vs_proc *p)
{
	if (p->sock < 0)
		return;
	struct vs_req q = { .op = VS_EXIT };
	vs_sendmsg(p->sock, &q, sizeof(q), -1);
	close(p->sock);
	int st = vs_reap(p);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(peer %d: status 0x%x)", (int)p->pid, st);
	p->sock = -1;
}

/* ---- for the scenarios ---- */

/* this process, as a party to requests */
static struct vs_proc A = { .pid = 0, .sock = -1 };

/* p joins owner's region reg (flags) and returns its region index */
static inline int join_from(struct vs_proc *p, struct vs_proc *owner, int reg, unsigned flags)
{
	int fd = vs_fd_of(owner, reg);
	CK(fd >= 0);
	int i = vs_join(p, fd, flags);
	close(fd);
	CK(i >= 0, "(vr_region_from_fd(%#x) in pid %d: %d)", flags, (int)p->pid, i);
	return i;
}

#define MARK(p, r, off, len) vs_call((p), VS_MARK, (r), (off), (len), 0)
#define UNMARK(p, r, off, len) vs_call((p), VS_UNMARK, (r), (off), (len), 0)
#define STATUS(p, r, off, len) vs_call((p), VS_STATUS, (r), (off), (len), 0)
#define PURGE(p, n) vs_call((p), VS_PURGE, 0, (n), 0, 0)
#define STAT(p, w) vs_call((p), VS_STAT, 0, (w), 0, 0)
#define FILL(p, r, off, len, gen) CK_EQ(vs_call((p), VS_FILL, (r), (off), (len), (gen)), 0)
#define VP (VR_STATE_VOLATILE | VR_STATE_PURGED)

/* (cmocka side) the scenario under the VRANGE_TRAP the suite runs with
 * (CI has an mprotect leg), the default backend, then, with ntraps 4,
 * uffd and guard forced (a forced backend that cannot trap shared
 * regions skips: exit 77) */
static inline void vs_run_traps(const char *name, size_t ntraps)
{
	const char *outer = getenv("VRANGE_TRAP");
	char saved[32] = "";
	if (outer)
		snprintf(saved, sizeof(saved), "%s", outer);
	const char *traps[] = { saved, NULL, "uffd", "guard" };
	int bad = 0; /* the first failure's status, reported once the
			environment is restored */
	for (size_t i = outer ? 0 : 1; i < ntraps; i++) {
		int st;
		if (traps[i]) {
			st = vt_run_scenario_trap(name, traps[i], NULL);
		} else {
			unsetenv("VRANGE_TRAP");
			st = vt_run_scenario(name);
		}
		if (!bad && st != -77 && !(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			bad = st == 0 ? -1 : st;
			printf("[  FAILED  ] scenario %s with VRANGE_TRAP=%s\n", name,
			       traps[i] ? traps[i] : "(default)");
		}
	}
	if (outer)
		setenv("VRANGE_TRAP", saved, 1);
	if (bad)
		vt_assert_exit_ok(bad);
}

#define SHARED_TEST(name)                                                                          \
	static void test_##name(void **state)                                                      \
	{                                                                                          \
		(void)state;                                                                       \
		vs_run_traps(#name, 4);                                                            \
	}

#endif
