/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fork.c - fork() and exec() (API S18; fds are CLOEXEC, S1)
 *
 * Every test is a scenario (tests.h): the scenario process sets up a ctx
 * with its monitor running, regions with purged and intact volatile
 * ranges, forks children that check what they may and may not do with
 * the inherited handles, and reports through its exit status.  Children
 * run under alarm() so that a hang shows as SIGALRM.
 */
#include "tests.h"

#include <dirent.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>

#define SC_TIMEOUT 60

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}

static pid_t vt_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ---- fd sets from /proc/self/fd ---- */
#define MAXFD 1024
struct fdset {
	bool open[MAXFD];
	int n;
};

static void fds_now(struct fdset *s)
{
	memset(s, 0, sizeof(*s));
	DIR *d = opendir("/proc/self/fd");
	CK(d != NULL);
	int self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		int fd = atoi(e->d_name);
		if (fd == self || fd < 0 || fd >= MAXFD)
			continue;
		s->open[fd] = true;
		s->n++;
	}
	closedir(d);
}

static int fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* wait for a child; returns its raw status */
static int wait_child(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		CK(errno == EINTR, "waitpid: %s", strerror(errno));
	return st;
}

static void ck_child_ok(int st, const char *what)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;
	if (WIFSIGNALED(st))
		CK(0, "%s: child killed by signal %d (%s)%s", what, WTERMSIG(st),
		   strsignal(WTERMSIG(st)), WTERMSIG(st) == SIGALRM ? " = hang" : "");
	CK(0, "%s: child exit %d", what, WEXITSTATUS(st));
}

/* ---- fault handler: unmark + refill ---- */
struct hrec {
	atomic_int calls;
	uint64_t gen;
	size_t off, len;
	void *addr;
};

static int h_refill(struct vr_region *r, size_t off, size_t len, void *fa, void *arg)
{
	struct hrec *h = arg;
	atomic_fetch_add(&h->calls, 1);
	h->off = off;
	h->len = len;
	h->addr = fa;
	if (vr_unmark(r, off, len) != VR_PURGED)
		return VR_FAULT_SIGBUS;
	vt_fill((uint8_t *)vr_region_base(r) + off, off, len, h->gen);
	return VR_FAULT_RETRY;
}

/* ---- the parent's state ---- */
static struct parent {
	struct vr_ctx *c;
	struct vr_region *r1, *r2;
	uint8_t *b1, *b2;
	int fd1, fd2, own_memfd;
	size_t P;
	struct hrec h;
	uint64_t stats[VR_STAT_SKIPPED + 1];
	struct fdset before_ctx;
} PA;

static void snapshot_parent(void)
{
	for (int s = 0; s <= VR_STAT_SKIPPED; s++)
		PA.stats[s] = vr_ctx_stat(PA.c, (enum vr_stat)s);
}

/* r1 (8 pages): [0, 4P) purged, [4P, 6P) volatile intact, rest plain;
 * r2 (4 pages, from an fd): [0, 2P) volatile intact.  All data gen 1. */
static void setup_parent(void)
{
	size_t P = PA.P = vt_pg();
	PA.own_memfd = memfd_create("vt-own", MFD_CLOEXEC);
	CK(PA.own_memfd >= 0);
	CK_EQ(ftruncate(PA.own_memfd, (off_t)(4 * P)), 0);
	fds_now(&PA.before_ctx);
	CK_EQ(vr_ctx_new(0, &PA.c), 0);
	CK_EQ(vr_region_new(PA.c, "vt-fork1", 8 * P, 0, &PA.r1), 0);
	CK_EQ(vr_region_from_fd(PA.c, PA.own_memfd, 0, &PA.r2), 0);
	PA.b1 = vr_region_base(PA.r1);
	PA.b2 = vr_region_base(PA.r2);
	PA.fd1 = vr_region_fd(PA.r1);
	PA.fd2 = vr_region_fd(PA.r2);
	vt_fill(PA.b1, 0, 8 * P, 1);
	vt_fill(PA.b2, 0, 4 * P, 1);
	PA.h.gen = 2;
	CK_EQ(vr_region_set_fault_handler(PA.r1, h_refill, &PA.h), 0);
	CK_EQ(vr_mark(PA.r1, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(PA.c, SIZE_MAX), 4 * P);
	CK_EQ(vr_mark(PA.r1, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(vr_mark(PA.r2, 0, 2 * P), VR_INTACT);
	snapshot_parent();
	CK_EQ(PA.stats[VR_STAT_REGIONS], 2);
	CK_EQ(PA.stats[VR_STAT_RANGES], 3);
}

/* after the children: the parent's state and data are as before */
static void check_parent(void)
{
	size_t P = PA.P;
	for (int s = 0; s <= VR_STAT_SKIPPED; s++) {
		if (s == VR_STAT_PRESSURE_EVENTS || s == VR_STAT_PURGES ||
		    s == VR_STAT_RECLAIMED_BYTES || s == VR_STAT_VOLATILE_BYTES ||
		    s == VR_STAT_PURGED_BYTES)
			continue; /* the monitor may act on real pressure */
		CK_EQ(vr_ctx_stat(PA.c, (enum vr_stat)s), PA.stats[s]);
	}
	CK(fd_open(PA.fd1) && fd_open(PA.fd2));
	CK(vr_region_of(PA.b1 + P) == PA.r1);
	CK(vr_region_of(PA.b2) == PA.r2);
	CK(vt_check(PA.b1 + 6 * P, 6 * P, 2 * P, 1) == SIZE_MAX);
	CK(vt_check(PA.b2 + 2 * P, 2 * P, 2 * P, 1) == SIZE_MAX);
	CK_EQ(vr_status(PA.r1, 0, 4 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	/* intact ranges are intact unless the monitor purged them */
	int rc = vr_unmark(PA.r1, 4 * P, 2 * P);
	CK(rc == VR_INTACT || rc == VR_PURGED);
	if (rc == VR_INTACT)
		CK(vt_check(PA.b1 + 4 * P, 4 * P, 2 * P, 1) == SIZE_MAX);
	rc = vr_unmark(PA.r2, 0, 2 * P);
	CK(rc == VR_INTACT || rc == VR_PURGED);
	if (rc == VR_INTACT)
		CK(vt_check(PA.b2, 0, 2 * P, 1) == SIZE_MAX);
	/* the parent's own faults still work */
	int calls = atomic_load(&PA.h.calls);
	CK_EQ(rd(PA.b1 + 3 * P + 5), vt_pat(2, 3 * P + 5));
	CK_EQ(atomic_load(&PA.h.calls), calls + 1);
	CK(PA.h.addr == PA.b1 + 3 * P + 5);
	CK_EQ(vr_ctx_stat(PA.c, VR_STAT_FAULTS), PA.stats[VR_STAT_FAULTS] + 1);
}

static void teardown_parent(void)
{
	vr_ctx_destroy(PA.c);
	close(PA.own_memfd);
}

/* ------------------------------------------------------------------ */
/* every call on inherited handles fails; none of them is mapped        */

static void child_checks_handles(void)
{
	size_t P = PA.P;
	struct vr_region *rs[2] = { PA.r1, PA.r2 };
	uint8_t *bs[2] = { PA.b1, PA.b2 };
	for (int i = 0; i < 2; i++) {
		struct vr_region *r = rs[i];
		CK(vr_region_base(r) == NULL, "region %d", i);
		CK_EQ(vr_region_size(r), 0);
		CK_EQ(vr_region_fd(r), -EINVAL);
		CK_EQ(vr_mark(r, 0, P), -EINVAL);
		CK_EQ(vr_mark(r, 2 * P, P), -EINVAL);
		CK_EQ(vr_unmark(r, 0, P), -EINVAL);
		CK_EQ(vr_status(r, 0, P), -EINVAL);
		CK_EQ(vr_region_set_fault_handler(r, h_refill, &PA.h), -EINVAL);
		CK_EQ(vr_region_set_fault_handler(r, NULL, NULL), -EINVAL);
		CK(vr_region_of(bs[i]) == NULL);
		CK(vr_region_of(bs[i] + P + 1) == NULL);
		CK_EQ(vr_mark_ptr(bs[i], P), -EINVAL);
		CK_EQ(vr_unmark_ptr(bs[i], P), -EINVAL);
		/* MADV_DONTFORK: nothing mapped there */
		errno = 0;
		CK(msync(bs[i], P, MS_ASYNC) == -1 && errno == ENOMEM,
		   "region %d is mapped in the child (msync: %s)", i, strerror(errno));
	}
	CK_EQ(vr_ctx_purge(PA.c, SIZE_MAX), -EINVAL);
	CK_EQ(vr_ctx_purge(PA.c, P), -EINVAL);
	CK_EQ(vr_ctx_set_limit(PA.c, P), -EINVAL);
	CK_EQ(vr_ctx_notify_pressure(PA.c, VR_PRESSURE_CRITICAL), -EINVAL);
	CK_EQ(vr_ctx_notify_pressure(PA.c, VR_PRESSURE_MODERATE), -EINVAL);
	for (int s = 0; s <= VR_STAT_SKIPPED; s++)
		CK_EQ(vr_ctx_stat(PA.c, (enum vr_stat)s), 0);
	CK_EQ(vr_ctx_monitor_source(PA.c), VR_MONITOR_NONE);
	struct vr_region *x = NULL;
	CK_EQ(vr_region_new(PA.c, "vt-child", P, 0, &x), -EINVAL);
	CK_EQ(vr_region_from_fd(PA.c, PA.own_memfd, 0, &x), -EINVAL);
}

static void sc_child_handles(void)
{
	setup_parent();
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		child_checks_handles();
		_exit(0);
	}
	ck_child_ok(wait_child(pid), "child_handles");
	check_parent();
	teardown_parent();
}

/* ------------------------------------------------------------------ */
/* the child destroys the inherited handles: no hang, fds closed        */

static void sc_child_destroy(void)
{
	setup_parent();
	for (int order = 0; order < 2; order++) {
		pid_t pid = fork();
		CK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			struct fdset s0, s1, s2;
			fds_now(&s0);
			CK(fd_open(PA.fd1) && fd_open(PA.fd2));
			if (order == 0) {
				/* one region, then the ctx with the other */
				vr_region_destroy(PA.r1);
				fds_now(&s1);
				CK(!fd_open(PA.fd1), "region fd %d still open", PA.fd1);
				CK(fd_open(PA.fd2));
				CK_EQ(s1.n, s0.n - vt_region_fds());
				vr_ctx_destroy(PA.c);
			} else {
				/* both regions, then the ctx */
				vr_region_destroy(PA.r2);
				vr_region_destroy(PA.r1);
				fds_now(&s1);
				CK_EQ(s1.n, s0.n - 2 * vt_region_fds());
				vr_ctx_destroy(PA.c);
			}
			fds_now(&s2);
			CK(!fd_open(PA.fd1) && !fd_open(PA.fd2));
			/* exactly the fds from before the parent's vr_ctx_new are
			 * left: nothing of the library's (monitor included) */
			for (int fd = 0; fd < MAXFD; fd++)
				CK(s2.open[fd] == PA.before_ctx.open[fd],
				   "fd %d: %s after destroying every inherited handle", fd,
				   s2.open[fd] ? "open" : "closed");
			CK(fd_open(PA.own_memfd));
			/* the child's own library still works */
			struct vr_ctx *c;
			struct vr_region *r;
			CK_EQ(vr_ctx_new(0, &c), 0);
			CK_EQ(vr_region_new(c, "vt-child", 2 * PA.P, 0, &r), 0);
			CK_EQ(vr_mark(r, 0, 2 * PA.P), VR_INTACT);
			CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * PA.P);
			vr_ctx_destroy(c);
			_exit(0);
		}
		ck_child_ok(wait_child(pid),
			    order ? "destroy regions then ctx" : "destroy region, ctx");
	}
	check_parent();
	teardown_parent();
}

/* ------------------------------------------------------------------ */
/* the child makes its own ctx and regions and takes its own faults     */

static struct {
	volatile sig_atomic_t hits;
	int code;
	void *addr;
} BUS;
static sigjmp_buf bus_env;

/* the handler this test replaced: under the uffd backend, the library's
 * SIGBUS entry (inherited from the parent), to which an application that
 * installs a SIGBUS handler later must chain (S32): the first call passes
 * the signal on; the library then calls this handler again (nested) with
 * its own SIGBUS when the fault is not handled */
static struct sigaction bus_prev;
static volatile sig_atomic_t bus_chained;

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
	if ((bus_prev.sa_flags & SA_SIGINFO) && !bus_chained) {
		bus_chained = 1;
		bus_prev.sa_sigaction(sig, si, uc);
		bus_chained = 0;
		return;
	}
	BUS.hits++;
	BUS.code = si->si_code;
	BUS.addr = si->si_addr;
	siglongjmp(bus_env, 1);
}

static void child_own_library(unsigned flags)
{
	size_t P = PA.P;
	struct vr_ctx *c;
	struct vr_region *r;
	struct hrec h = { .gen = 7 };
	CK_EQ(vr_ctx_new(flags, &c), 0);
	CK_EQ(vr_region_new(c, "vt-child", 4 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	CK(b != NULL);
	CK(vr_region_of(b + P) == r);
	CK(vr_region_of(PA.b1) == NULL);
	vt_fill(b, 0, 4 * P, 5);
	CK_EQ(vr_region_set_fault_handler(r, h_refill, &h), 0);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	CK_EQ(vr_status(r, P, 2 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(rd(b + 2 * P + 17), vt_pat(7, 2 * P + 17));
	CK_EQ(atomic_load(&h.calls), 1);
	CK(h.addr == b + 2 * P + 17);
	CK_EQ(h.off, P);
	CK_EQ(h.len, 2 * P);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 1);
	CK(vt_check(b, 0, P, 5) == SIZE_MAX);

	/* no handler: SIGBUS with the exact address */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = bus_handler;
	/* SA_NODEFER: the library's SIGBUS comes nested in this handler when
	 * it chains (a blocked SIGBUS would be fatal, as from the kernel) */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGBUS, &sa, &bus_prev), 0);
	CK_EQ(vr_region_set_fault_handler(r, NULL, NULL), 0);
	CK_EQ(vr_mark(r, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 4 * P);
	uint8_t *target = b + 3 * P + 1;
	if (sigsetjmp(bus_env, 1) == 0) {
		(void)rd(target);
		CK(0, "read of a discarded page in the child returned");
	}
	bus_chained = 0;
	CK_EQ(BUS.hits, 1);
	CK_EQ(BUS.code, BUS_ADRERR);
	CK(BUS.addr == target);
	CK_EQ(vr_ctx_stat(c, VR_STAT_FAULTS), 2);
	CK_EQ(vr_unmark(r, 0, 4 * P), VR_PURGED);
	CK(vt_all_zero(b, 4 * P));
	vr_ctx_destroy(c);
}

static void sc_child_own(void)
{
	setup_parent();
	for (int mode = 0; mode < 2; mode++) {
		pid_t pid = fork();
		CK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			if (mode == 1) {
				/* the inherited handles first, then a new library */
				vr_ctx_destroy(PA.c);
			}
			child_own_library(mode ? 0 : VR_CTX_NO_MONITOR);
			if (mode == 0)
				vr_ctx_destroy(PA.c);
			_exit(0);
		}
		ck_child_ok(wait_child(pid), "child_own");
	}
	check_parent();
	teardown_parent();
}

/* the parent's region addresses are not mapped in the child: a touch
 * kills it with SIGSEGV, it never reads data or zeros */
static void sc_child_touch(void)
{
	setup_parent();
	uint8_t *targets[3] = { PA.b1 + 5, PA.b1 + 4 * PA.P + 5, PA.b2 + 9 };
	for (int i = 0; i < 3; i++) {
		pid_t pid = fork();
		CK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			uint8_t v = rd(targets[i]);
			fprintf(stderr, "child read 0x%02x at the parent's region address %p\n", v,
				(void *)targets[i]);
			_exit(3);
		}
		int st = wait_child(pid);
		CK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		   "child touching %p: status 0x%x, expected SIGSEGV", (void *)targets[i], st);
	}
	check_parent();
	teardown_parent();
}

/* ------------------------------------------------------------------ */
/* fork while other threads are inside the library                      */

static struct {
	atomic_int stop;
	atomic_long ops, faults_taken, forks;
	uint64_t seed;
} HM;

struct worker {
	int id;
	struct vr_ctx *c;
	struct vr_region *r;
	struct hrec h;
	bool forks; /* this worker also forks */
};

static void hammer_child(int i)
{
	alarm(5);
	/* inherited handles refuse */
	CK_EQ(vr_mark(PA.r1, 0, PA.P), -EINVAL);
	CK_EQ(vr_ctx_purge(PA.c, SIZE_MAX), -EINVAL);
	struct vr_ctx *c;
	struct vr_region *r;
	struct hrec h = { .gen = 9 };
	size_t P = PA.P;
	CK_EQ(vr_ctx_new((i & 1) ? 0 : VR_CTX_NO_MONITOR, &c), 0);
	CK_EQ(vr_region_new(c, "vt-hchild", 4 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, 4 * P, 3);
	CK_EQ(vr_region_set_fault_handler(r, h_refill, &h), 0);
	CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
	CK_EQ(vr_mark(r, 3 * P, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, P), 2 * P); /* the older range, whole */
	CK_EQ(vr_unmark(r, 3 * P, P), VR_INTACT);
	CK(vt_check(b + 2 * P, 2 * P, 2 * P, 3) == SIZE_MAX);
	CK_EQ(rd(b + P + 3), vt_pat(9, P + 3));
	CK_EQ(atomic_load(&h.calls), 1);
	CK_EQ(vr_status(r, 0, 4 * P), 0);
	vr_region_destroy(r);
	if (i % 3 == 0)
		vr_ctx_destroy(PA.c);
	vr_ctx_destroy(c);
	_exit(0);
}

static void fork_once(int i)
{
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0)
		hammer_child(i);
	int st = wait_child(pid);
	char what[64];
	snprintf(what, sizeof(what), "fork %d from thread %d", i, (int)vt_tid());
	ck_child_ok(st, what);
	atomic_fetch_add(&HM.forks, 1);
}

static void *hammer_worker(void *arg)
{
	struct worker *w = arg;
	size_t P = PA.P, n = 16;
	struct vt_rng g;
	vt_seed(&g, HM.seed + (uint64_t)w->id);
	uint8_t *b = vr_region_base(w->r);
	int nforks = 0;
	vt_fill(b, 0, n * P, w->h.gen);
	while (!atomic_load(&HM.stop)) {
		size_t off = vt_below(&g, n - 2) * P, len = (1 + vt_below(&g, 2)) * P;
		switch (vt_below(&g, 8)) {
		case 0:
		case 1:
			CK(vr_mark(w->r, off, len) >= 0);
			break;
		case 2: {
			int rc = vr_unmark(w->r, off, len);
			CK(rc >= 0);
			if (rc == VR_PURGED)
				vt_fill(b + off, off, len, w->h.gen);
			break;
		}
		case 3:
			CK(vr_status(w->r, off, len) >= 0);
			break;
		case 4:
			CK(vr_ctx_purge(w->c, (1 + vt_below(&g, 4)) * P) >= 0);
			break;
		case 5: {
			/* touch: intact data or a handled fault */
			int calls = atomic_load(&w->h.calls);
			(void)rd(b + off + vt_below(&g, len));
			if (atomic_load(&w->h.calls) != calls)
				atomic_fetch_add(&HM.faults_taken, 1);
			break;
		}
		case 6: {
			/* a registry writer: create and destroy a region */
			struct vr_region *t;
			CK_EQ(vr_region_new(w->c, "vt-tmp", P, 0, &t), 0);
			vr_region_destroy(t);
			break;
		}
		case 7:
			if (w->forks && nforks < 20 && vt_below(&g, 8) == 0)
				fork_once(1000 + nforks++);
			break;
		}
		atomic_fetch_add(&HM.ops, 1);
	}
	return NULL;
}

static void sc_fork_hammer(void)
{
	HM.seed = vt_get_seed("fork_hammer");
	setup_parent();
	size_t P = PA.P;
	struct worker w[3];
	pthread_t t[3];
	for (int i = 0; i < 3; i++) {
		w[i] = (struct worker){ .id = i, .c = PA.c, .forks = i == 2 };
		w[i].h.gen = 50 + (uint64_t)i;
		CK_EQ(vr_region_new(PA.c, "vt-hammer", 16 * P, 0, &w[i].r), 0);
		CK_EQ(vr_region_set_fault_handler(w[i].r, h_refill, &w[i].h), 0);
	}
	for (int i = 0; i < 3; i++)
		CK_EQ(pthread_create(&t[i], NULL, hammer_worker, &w[i]), 0);
	for (int i = 0; i < 80; i++) {
		fork_once(i);
		usleep(500);
	}
	atomic_store(&HM.stop, 1);
	for (int i = 0; i < 3; i++)
		CK_EQ(pthread_join(t[i], NULL), 0);
	fprintf(stderr, "fork_hammer: %ld forks, %ld library calls, %ld faults taken\n",
		atomic_load(&HM.forks), atomic_load(&HM.ops), atomic_load(&HM.faults_taken));
	CK(atomic_load(&HM.forks) >= 80);
	for (int i = 0; i < 3; i++)
		vr_region_destroy(w[i].r);
	snapshot_parent(); /* the workers used the parent's ctx */
	check_parent();
	teardown_parent();
}

/* ------------------------------------------------------------------ */
/* exec: the library leaves no fd behind (all CLOEXEC)                  */

static void sc_exec_fds(void)
{
	setup_parent();
	/* a second ctx without monitor and a faulted region, to have used
	 * every path that may open something */
	struct vr_ctx *c2;
	struct vr_region *r3;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	CK_EQ(vr_region_new(c2, "vt-exec", 2 * PA.P, 0, &r3), 0);
	/* an fd of the test's own without CLOEXEC: proves the check sees
	 * fds that do survive exec */
	int keep = memfd_create("vt-keep", 0);
	CK(keep >= 0);
	struct fdset now;
	fds_now(&now);
	char list[4096] = "", *p = list;
	int nlib = 0;
	for (int fd = 0; fd < MAXFD; fd++)
		if (now.open[fd] && !PA.before_ctx.open[fd] && fd != keep) {
			p += snprintf(p, (size_t)(list + sizeof(list) - p), "%s%d", nlib ? "," : "",
				      fd);
			nlib++;
		}
	CK(nlib >= 3, "only %d library fds found", nlib);
	CK(now.open[PA.fd1] && now.open[PA.fd2] && now.open[vr_region_fd(r3)]);
	fprintf(stderr, "exec_fds: library fds %s, kept fd %d\n", list, keep);

	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		char keeps[32];
		snprintf(keeps, sizeof(keeps), "%d", keep);
		setenv("VT_FDS", list, 1);
		setenv("VT_KEEP", keeps, 1);
		execl("/proc/self/exe", "vt-scenario", "--scenario", "exec_check", (char *)NULL);
		_exit(127);
	}
	ck_child_ok(wait_child(pid), "exec_check");
	close(keep);
	vr_ctx_destroy(c2);
	teardown_parent();
}

/* runs after exec: none of the library's fds is open, the kept one is */
static void sc_exec_check(void)
{
	const char *list = getenv("VT_FDS");
	const char *keeps = getenv("VT_KEEP");
	CK(list && keeps);
	int keep = atoi(keeps);
	CK(fd_open(keep), "the non-CLOEXEC fd %d did not survive exec", keep);
	for (const char *s = list; *s;) {
		char *end;
		long fd = strtol(s, &end, 10);
		CK(end != s);
		CK(!fd_open((int)fd), "library fd %ld survived exec", fd);
		s = *end ? end + 1 : end;
	}
	/* and no memfd but the kept one */
	DIR *d = opendir("/proc/self/fd");
	CK(d != NULL);
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[320], target[256];
		if (e->d_name[0] == '.' || atoi(e->d_name) == keep)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		CK(strncmp(target, "/memfd:", 7) != 0, "fd %s -> %s survived exec", e->d_name,
		   target);
	}
	closedir(d);
}

/* ------------------------------------------------------------------ */
/* issue 13, item 3: a fork while another thread logs                   */

static atomic_int log_stop;
static atomic_long log_lines;
static void count_line(int prio, const char *msg, void *arg)
{
	(void)prio;
	(void)msg;
	(void)arg;
	atomic_fetch_add(&log_lines, 1);
}

static void *log_setter(void *arg)
{
	static int x;
	(void)arg;
	while (!atomic_load(&log_stop)) {
		vr_set_log_fn(count_line, NULL);
		vr_set_log_fn(count_line, &x);
	}
	return NULL;
}

static void *log_purger(void *arg)
{
	struct vr_ctx *c = arg;
	struct vr_region *r;
	size_t P = vt_pg();
	CK_EQ(vr_region_new(c, "vt-log", 4 * P, 0, &r), 0);
	while (!atomic_load(&log_stop)) {
		CK(vr_mark(r, 0, 4 * P) >= 0);
		CK(vr_ctx_purge(c, SIZE_MAX) >= 0); /* logs a line per purge */
		CK(vr_unmark(r, 0, 4 * P) >= 0);
	}
	vr_region_destroy(r);
	return NULL;
}

static void sc_fork_log(void)
{
	struct vr_ctx *c;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	vr_set_log_fn(count_line, NULL);
	pthread_t t[2];
	CK_EQ(pthread_create(&t[0], NULL, log_setter, NULL), 0);
	CK_EQ(pthread_create(&t[1], NULL, log_purger, c), 0);
	size_t P = vt_pg();
	for (int i = 0; i < 1000; i++) {
		pid_t pid = fork();
		CK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			/* every library lock must be usable: log through a new
			 * ctx's purge, set and clear the function */
			struct vr_ctx *cc;
			struct vr_region *r;
			long before = atomic_load(&log_lines);
			CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &cc), 0);
			CK_EQ(vr_region_new(cc, "vt-child", 2 * P, 0, &r), 0);
			CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
			CK_EQ(vr_ctx_purge(cc, SIZE_MAX), (ssize_t)(2 * P));
			CK(atomic_load(&log_lines) > before);
			vr_set_log_fn(NULL, NULL);
			vr_ctx_destroy(cc);
			vr_ctx_destroy(c); /* inherited */
			_exit(0);
		}
		int st;
		CK_EQ(waitpid(pid, &st, 0), pid);
		CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status 0x%x", i, st);
	}
	atomic_store(&log_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CK(atomic_load(&log_lines) > 0);
	vr_set_log_fn(NULL, NULL);
	vr_ctx_destroy(c);
}

/* issue 13, item 10f: two threads of a child destroy two halves of the
 * inherited regions of one ctx at the same time */
enum { NINH = 16 };
static struct vr_region *inh[NINH];
static pthread_barrier_t inh_bar;

static void *destroy_second_half(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&inh_bar);
	for (int i = NINH / 2; i < NINH; i++)
		vr_region_destroy(inh[i]);
	return NULL;
}

static void sc_child_destroy_threads(void)
{
	struct vr_ctx *c;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	size_t P = vt_pg();
	for (int round = 0; round < 300; round++) {
		for (int i = 0; i < NINH; i++)
			CK_EQ(vr_region_new(c, "vt-inh", P, 0, &inh[i]), 0);
		pid_t pid = fork();
		CK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			int fds = vt_count_fds();
			pthread_t t;
			pthread_barrier_init(&inh_bar, NULL, 2);
			CK_EQ(pthread_create(&t, NULL, destroy_second_half, NULL), 0);
			pthread_barrier_wait(&inh_bar);
			for (int i = 0; i < NINH / 2; i++)
				vr_region_destroy(inh[i]);
			pthread_join(t, NULL);
			CK_EQ(vt_count_fds(),
			      fds - NINH * vt_region_fds()); /* every inherited fd closed once */
			vr_ctx_destroy(c);
			_exit(0);
		}
		int st;
		CK_EQ(waitpid(pid, &st, 0), pid);
		CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status 0x%x", st);
		for (int i = 0; i < NINH; i++)
			vr_region_destroy(inh[i]);
		CK_EQ(vr_ctx_stat(c, VR_STAT_REGIONS), 0);
	}
	vr_ctx_destroy(c);
}

/* review: a child destroys inherited shared regions while another of its
 * threads makes and destroys shared regions of its own.  Both change this
 * process's list of shared-state mappings; the inherited destroy did it
 * without the list's lock (the child freed an entry the other thread had
 * just linked behind it: heap-use-after-free under ASan, a torn list
 * without) */
enum { NSHINH = 48 };
static struct vr_region *shinh[NSHINH];
static struct vr_ctx *sh_own;
static atomic_int sh_stop;

static void *shared_churn(void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	pthread_barrier_wait(&inh_bar);
	while (!atomic_load(&sh_stop)) {
		struct vr_region *r;
		CK_EQ(vr_region_new(sh_own, "vt-shown", P, VR_REGION_SHARED, &r), 0);
		vr_region_destroy(r);
	}
	return NULL;
}

static void sc_child_shared_threads(void)
{
	struct vr_ctx *c;
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	if (rc == -EOPNOTSUPP && vt_trap_optional(getenv("VRANGE_TRAP")))
		_exit(77); /* vt_run_scenario_each_trap: not supported here */
	CK_EQ(rc, 0);
	size_t P = vt_pg();
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < NSHINH; i++) {
			rc = vr_region_new(c, "vt-shinh", P, VR_REGION_SHARED, &shinh[i]);
			if (rc == -EOPNOTSUPP)
				_exit(77); /* S32: no trap for shared regions here */
			CK_EQ(rc, 0);
		}
		pid_t pid = fork();
		CK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &sh_own), 0);
			pthread_t t;
			pthread_barrier_init(&inh_bar, NULL, 2);
			CK_EQ(pthread_create(&t, NULL, shared_churn, NULL), 0);
			pthread_barrier_wait(&inh_bar);
			/* newest first: the list's head, where the other thread
			 * links and unlinks */
			for (int i = NSHINH - 1; i >= 0; i--)
				vr_region_destroy(shinh[i]);
			atomic_store(&sh_stop, 1);
			pthread_join(t, NULL);
			/* the list is whole: a file of the child's own joins its
			 * one state, and everything goes */
			struct vr_region *a, *b;
			CK_EQ(vr_region_new(sh_own, "vt-shown", P, VR_REGION_SHARED, &a), 0);
			CK_EQ(vr_region_from_fd(sh_own, vr_region_fd(a), VR_REGION_SHARED, &b), 0);
			CK_EQ(vr_mark(a, 0, P), VR_INTACT);
			CK_EQ(vr_status(b, 0, P), VR_STATE_VOLATILE);
			vr_ctx_destroy(sh_own);
			vr_ctx_destroy(c);
			_exit(0);
		}
		int st;
		CK_EQ(waitpid(pid, &st, 0), pid);
		CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status 0x%x", st);
		for (int i = 0; i < NSHINH; i++)
			vr_region_destroy(shinh[i]);
	}
	vr_ctx_destroy(c);
}

/* review: a purge handler forks (S37 forbids no call) and returns in the
 * child too, where the purge call goes on with inherited handles; at the
 * fork another thread held the ctx's purge lock (its purge was logging,
 * held in the log function until the fork).  The child's call went on to
 * its next batch, took that lock and hung; it also called the handler
 * for the parent's purges.  Now the call returns in the child and only
 * the parent reports its purges, each once. */
enum { NHF = 100 }; /* more than one report batch (64 units) */
static struct {
	struct vr_ctx *c;
	struct vr_group *g, *g2;
	pid_t parent, child;
	pthread_t holder;
	atomic_int hold, held, forked, calls, child_calls;
} HF;

static void hf_log(int prio, const char *msg, void *arg)
{
	(void)prio, (void)msg, (void)arg;
	/* the holder's purge logs with the purge lock held: keep it there
	 * until the other thread forked (calls no vr_* function) */
	if (pthread_equal(pthread_self(), HF.holder) && atomic_load(&HF.hold)) {
		atomic_store(&HF.held, 1);
		while (!atomic_load(&HF.forked))
			sched_yield();
	}
}

static void *hf_holder(void *arg)
{
	(void)arg;
	while (!atomic_load(&HF.hold))
		sched_yield();
	CK(vr_group_purge(HF.g2, SIZE_MAX) > 0);
	return NULL;
}

static void hf_handler(struct vr_obj *o, void *arg)
{
	(void)o, (void)arg;
	if (getpid() != HF.parent) {
		atomic_fetch_add(&HF.child_calls, 1);
		return;
	}
	if (atomic_fetch_add(&HF.calls, 1) != 0)
		return;
	atomic_store(&HF.hold, 1);
	while (!atomic_load(&HF.held))
		sched_yield();
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		return; /* the child goes on with the purge call */
	}
	HF.child = pid;
	atomic_store(&HF.forked, 1);
}

static void sc_handler_fork(void)
{
	size_t P = vt_pg();
	HF.parent = getpid();
	HF.holder = pthread_self(); /* not the holder until it runs */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &HF.c), 0);
	CK_EQ(vr_group_new(HF.c, 1, &HF.g), 0);
	CK_EQ(vr_group_new(HF.c, 2, &HF.g2), 0);
	CK_EQ(vr_group_set_purge_handler(HF.g, hf_handler, NULL), 0);
	struct vr_obj *o[NHF], *o2;
	for (int i = 0; i < NHF; i++) {
		CK_EQ(vr_obj_new_in(HF.g, 2 * P, 0, 0, &o[i]), 0);
		CK_EQ(vr_obj_unpin(o[i]), 0);
	}
	CK_EQ(vr_obj_new_in(HF.g2, 2 * P, 0, 0, &o2), 0);
	CK_EQ(vr_obj_unpin(o2), 0);
	vr_set_log_fn(hf_log, NULL);
	CK_EQ(pthread_create(&HF.holder, NULL, hf_holder, NULL), 0);
	ssize_t n = vr_group_purge(HF.g, SIZE_MAX);
	if (getpid() != HF.parent) {
		/* the child: its call returned, and reported nothing of the
		 * parent's */
		CK_EQ(atomic_load(&HF.child_calls), 0);
		_exit(0);
	}
	CK_EQ(n, (ssize_t)(NHF * 2 * P));
	int st;
	CK_EQ(waitpid(HF.child, &st, 0), HF.child);
	CK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status 0x%x", st);
	CK_EQ(atomic_load(&HF.calls), NHF); /* each purge reported once */
	CK_EQ(pthread_join(HF.holder, NULL), 0);
	vr_set_log_fn(NULL, NULL);
	vr_ctx_destroy(HF.c);
}

/* ------------------------------------------------------------------ */
/* a fork while a thread holds the dynamic loader's lock               */

/* The lock dl_iterate_phdr takes stays held in a child forked while a
 * parent thread was inside it.  The library's monitor thread was, when it
 * started (it found its code segment to mlock that way): a child forked
 * then hung in vr_ctx_destroy, joining a monitor thread of its own that
 * waited for that lock (test-fork's child_destroy, about once in a
 * hundred runs under load).  Here an application thread holds the lock
 * across the fork, so that every run has the window: the child's use of
 * the library must not need the lock. */
static atomic_int ldr_inside, ldr_release;

static int ldr_hold(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	atomic_store(&ldr_inside, 1);
	while (!atomic_load(&ldr_release))
		sched_yield();
	return 1;
}

static void *ldr_thread(void *arg)
{
	(void)arg;
	dl_iterate_phdr(ldr_hold, NULL);
	return NULL;
}

static void sc_child_loader_lock(void)
{
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, ldr_thread, NULL), 0);
	while (!atomic_load(&ldr_inside))
		sched_yield();
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		alarm(10);
		size_t P = vt_pg();
		struct vr_ctx *c;
		struct vr_region *r;
		CK_EQ(vr_ctx_new(0, &c), 0); /* with its monitor thread */
		CK(vr_ctx_monitor_source(c) != VR_MONITOR_NONE);
		CK_EQ(vr_region_new(c, "vt-child", 2 * P, 0, &r), 0);
		vt_fill(vr_region_base(r), 0, 2 * P, 3);
		CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
		CK_EQ(vr_unmark(r, 0, 2 * P), VR_PURGED);
		vr_ctx_destroy(c); /* joins the monitor thread */
		_exit(0);
	}
	atomic_store(&ldr_release, 1);
	pthread_join(t, NULL);
	ck_child_ok(wait_child(pid), "child of a fork inside dl_iterate_phdr");
}

static const struct vt_scenario scenarios[] = {
	{ "child_handles", sc_child_handles },
	{ "child_destroy", sc_child_destroy },
	{ "child_own", sc_child_own },
	{ "child_touch", sc_child_touch },
	{ "fork_hammer", sc_fork_hammer },
	{ "exec_fds", sc_exec_fds },
	{ "exec_check", sc_exec_check },
	{ "fork_log", sc_fork_log },
	{ "child_destroy_threads", sc_child_destroy_threads },
	{ "child_shared_threads", sc_child_shared_threads },
	{ "handler_fork", sc_handler_fork },
	{ "child_loader_lock", sc_child_loader_lock },
};

/* ------------------------------------------------------------------ */

static void run_ok(const char *name)
{
	int st = vt_run_scenario(name);
	if (!(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("scenario %s: %s %d", name,
			 st != -1 && WIFSIGNALED(st) ? "signal" : "exit",
			 st == -1          ? -1
			 : WIFSIGNALED(st) ? WTERMSIG(st)
					   : WEXITSTATUS(st));
}

static void test_child_inherited_handles_refuse(void **state)
{
	(void)state;
	run_ok("child_handles");
}

static void test_child_destroys_inherited(void **state)
{
	(void)state;
	run_ok("child_destroy");
}

static void test_child_own_ctx_and_faults(void **state)
{
	(void)state;
	run_ok("child_own");
}

static void test_child_never_sees_parent_memory(void **state)
{
	(void)state;
	run_ok("child_touch");
}

static void test_fork_during_library_calls(void **state)
{
	(void)state;
	run_ok("fork_hammer");
}

static void test_fork_while_logging(void **state)
{
	(void)state;
	run_ok("fork_log");
}

static void test_child_destroys_in_two_threads(void **state)
{
	(void)state;
	run_ok("child_destroy_threads");
}

static void test_child_shared_in_two_threads(void **state)
{
	(void)state;
	vt_run_scenario_each_trap("child_shared_threads"); /* guard: the coop protocol */
}

static void test_fork_in_purge_handler(void **state)
{
	(void)state;
	run_ok("handler_fork");
}

static void test_fork_holding_loader_lock(void **state)
{
	(void)state;
	run_ok("child_loader_lock");
}

static void test_exec_leaves_no_fd(void **state)
{
	(void)state;
	run_ok("exec_fds");
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), SC_TIMEOUT);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_child_inherited_handles_refuse),
		cmocka_unit_test(test_child_destroys_inherited),
		cmocka_unit_test(test_child_own_ctx_and_faults),
		cmocka_unit_test(test_child_never_sees_parent_memory),
		cmocka_unit_test(test_fork_during_library_calls),
		cmocka_unit_test(test_exec_leaves_no_fd),
		cmocka_unit_test(test_fork_while_logging),
		cmocka_unit_test(test_child_destroys_in_two_threads),
		cmocka_unit_test(test_child_shared_in_two_threads),
		cmocka_unit_test(test_fork_holding_loader_lock),
		cmocka_unit_test(test_fork_in_purge_handler),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
