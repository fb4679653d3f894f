/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-fault.c - the lazy-access fault path (API S13, S14)
 *
 * Everything that needs the library's SIGSEGV handler, or must die, runs
 * as a scenario in a re-exec'd process (tests.h); the cmocka tests below
 * assert the scenario's exit status or the signal it died of.  Scenarios
 * read their parameters from the environment (VT_MODE, VT_KIND, ...) and
 * the trap backend from VRANGE_TRAP, which the runner sets per variant;
 * "key" scenarios run with both backends.
 */
#include "tests.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>

#define SC_TIMEOUT 20 /* seconds before a scenario dies of SIGALRM (= hang) */

static const char *const traps[] = { "mprotect", "guard", "uffd" };
#define NTRAPS (sizeof(traps) / sizeof(traps[0]))

/* ------------------------------------------------------------------ */
/* helpers for scenarios                                                */

static pid_t vt_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static inline uint8_t rd(const void *p)
{
	return *(const volatile uint8_t *)p;
}

static inline void wr(void *p, uint8_t v)
{
	*(volatile uint8_t *)p = v;
}

static const char *env_or(const char *k, const char *d)
{
	const char *v = getenv(k);
	return v ? v : d;
}

static bool env_is(const char *k, const char *v)
{
	const char *e = getenv(k);
	return e && strcmp(e, v) == 0;
}

/* a ctx on the backend forced by VRANGE_TRAP (exit 77 if unsupported) */
static struct vr_ctx *sc_ctx(unsigned flags)
{
	struct vr_ctx *c = NULL;
	const char *t = getenv("VRANGE_TRAP");
	int rc = vr_ctx_new(flags, &c);
	if (rc == -EOPNOTSUPP && t && (strcmp(t, "guard") == 0 || strcmp(t, "uffd") == 0)) {
		fprintf(stderr, "%s trap backend not supported here: skip\n", t);
		_exit(77);
	}
	CK_EQ(rc, 0);
	CK(c != NULL);
	if (t && strcmp(t, "guard") == 0)
		CK_EQ(vr_trap_backend(), VR_TRAP_GUARD);
	else if (t && strcmp(t, "mprotect") == 0)
		CK_EQ(vr_trap_backend(), VR_TRAP_MPROTECT);
	else if (t && strcmp(t, "uffd") == 0)
		CK_EQ(vr_trap_backend(), VR_TRAP_UFFD);
	else
		CK(vr_trap_backend() == VR_TRAP_GUARD || vr_trap_backend() == VR_TRAP_MPROTECT);
	return c;
}

static uint64_t faults(struct vr_ctx *c)
{
	return vr_ctx_stat(c, VR_STAT_FAULTS);
}

static struct vr_region *sc_region(struct vr_ctx *c, const char *name, size_t size, uint64_t gen)
{
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(c, name, size, 0, &r), 0);
	vt_fill(vr_region_base(r), 0, size, gen);
	return r;
}

static bool sigsegv_is_default(void)
{
	struct sigaction sa;
	sigaction(SIGSEGV, NULL, &sa);
	return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

/* ---- the region fault handler used by most scenarios ---- */
enum { H_REFILL, H_SIGBUS, H_NOFIX, H_FIX_AFTER };

struct hcall {
	atomic_int calls;
	int mode;
	int fix_after; /* H_FIX_AFTER: the n-th call fixes */
	int log;       /* write one line per call to stderr */
	uint64_t gen;  /* refill generation */
	struct vr_region *r;
	size_t off, len;
	void *addr;
	pid_t tid;
	int unmark_rc;
	int on_alt;
	void *local;
};
static struct hcall H;

static int h_fn(struct vr_region *r, size_t off, size_t len, void *fault_addr, void *arg)
{
	struct hcall *h = arg;
	volatile char local = 0;
	int n = atomic_fetch_add(&h->calls, 1) + 1;
	stack_t ss;
	h->r = r;
	h->off = off;
	h->len = len;
	h->addr = fault_addr;
	h->tid = vt_tid();
	h->local = (void *)&local;
	h->on_alt = sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK);
	if (h->log) {
		static const char msg[] = "VT-handler-call\n";
		ssize_t _w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)_w;
	}
	switch (h->mode) {
	case H_SIGBUS:
		return VR_FAULT_SIGBUS;
	case H_NOFIX:
		return VR_FAULT_RETRY;
	case H_FIX_AFTER:
		if (n < h->fix_after)
			return VR_FAULT_RETRY;
		break;
	}
	h->unmark_rc = vr_unmark(r, off, len);
	vt_fill((uint8_t *)vr_region_base(r) + off, off, len, h->gen);
	return VR_FAULT_RETRY;
}

static void hreset(int mode, uint64_t gen)
{
	atomic_store(&H.calls, 0);
	H.mode = mode;
	H.gen = gen;
	H.fix_after = 0;
	H.log = 0;
	H.r = NULL;
	H.off = H.len = 0;
	H.addr = NULL;
	H.tid = 0;
	H.unmark_rc = -1;
	H.on_alt = -1;
	H.local = NULL;
}

/* ---- accesses that may end in SIGBUS (the app handler longjmps) ---- */
static __thread sigjmp_buf tenv;

static struct {
	volatile sig_atomic_t hits;
	int signo, code;
	void *addr;
	pid_t tid;
} BUS;

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	BUS.hits++;
	BUS.signo = si->si_signo;
	BUS.code = si->si_code;
	BUS.addr = si->si_addr;
	BUS.tid = vt_tid();
	siglongjmp(tenv, 1);
}

static void install_bus(void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGBUS, &sa, NULL), 0);
}

struct acc {
	void *p;
	int write;
	uint8_t v;   /* value to write */
	uint8_t got; /* value read */
	pid_t tid;
	int bus; /* 1 if the access ended in SIGBUS */
};

/* returns 1 if the access was left through the SIGBUS handler */
__attribute__((noinline)) static int do_access(struct acc *x)
{
	x->tid = vt_tid();
	if (sigsetjmp(tenv, 1))
		return 1;
	if (x->write)
		wr(x->p, x->v);
	else
		x->got = rd(x->p);
	return 0;
}

static void *acc_thread(void *arg)
{
	struct acc *x = arg;
	x->bus = do_access(x);
	return NULL;
}

static void access_in_thread(struct acc *x)
{
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, acc_thread, x), 0);
	CK_EQ(pthread_join(t, NULL), 0);
}

/* ------------------------------------------------------------------ */
/* scenarios: handler calls                                             */

/* read and write faults: (off, len), exact fault_addr, faulting thread,
 * unmark + refill, the access re-runs and sees the refilled data */
static void sc_fault_rw(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-fault", 8 * P, 1);
	uint8_t *b = vr_region_base(r);
	hreset(H_REFILL, 2);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);

	/* range [P+10, 4P+20): whole pages [2P, 4P) */
	CK_EQ(vr_mark(r, P + 10, 3 * P + 10), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	CK_EQ(vr_status(r, P + 10, 3 * P + 10), VR_STATE_VOLATILE | VR_STATE_PURGED);
	/* bytes of the range on shared pages are not discarded: no trap */
	CK_EQ(rd(b + P + 10), vt_pat(1, P + 10));
	CK_EQ(rd(b + 2 * P - 1), vt_pat(1, 2 * P - 1));
	CK_EQ(rd(b + 4 * P + 19), vt_pat(1, 4 * P + 19));
	CK_EQ(atomic_load(&H.calls), 0);
	CK_EQ(faults(c), 0);

	/* read fault in another thread */
	struct acc a = { .p = b + 2 * P + 123 };
	access_in_thread(&a);
	CK_EQ(a.bus, 0);
	CK_EQ(atomic_load(&H.calls), 1);
	CK(H.r == r);
	CK_EQ(H.off, P + 10);
	CK_EQ(H.len, 3 * P + 10);
	CK(H.addr == b + 2 * P + 123, "fault_addr %p, expected %p", H.addr,
	   (void *)(b + 2 * P + 123));
	CK_EQ(H.tid, a.tid);
	CK(H.tid != vt_tid());
	CK_EQ(H.unmark_rc, VR_PURGED);
	CK_EQ(a.got, vt_pat(2, 2 * P + 123));
	CK(vt_check(b + P + 10, P + 10, 3 * P + 10, 2) == SIZE_MAX);
	CK(vt_check(b, 0, P + 10, 1) == SIZE_MAX);
	CK(vt_check(b + 4 * P + 20, 4 * P + 20, 4 * P - 20, 1) == SIZE_MAX);
	CK_EQ(vr_status(r, 0, 8 * P), 0);
	CK_EQ(faults(c), 1);

	/* write fault in another thread: the write lands after the refill */
	hreset(H_REFILL, 3);
	CK_EQ(vr_mark(r, 2 * P, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 4 * P);
	struct acc w = { .p = b + 5 * P + 77, .write = 1, .v = (uint8_t)~vt_pat(3, 5 * P + 77) };
	access_in_thread(&w);
	CK_EQ(w.bus, 0);
	CK_EQ(atomic_load(&H.calls), 1);
	CK(H.r == r);
	CK_EQ(H.off, 2 * P);
	CK_EQ(H.len, 4 * P);
	CK(H.addr == b + 5 * P + 77, "fault_addr %p, expected %p", H.addr,
	   (void *)(b + 5 * P + 77));
	CK_EQ(H.tid, w.tid);
	CK_EQ(H.unmark_rc, VR_PURGED);
	CK_EQ(b[5 * P + 77], w.v);
	CK(vt_check(b + 2 * P, 2 * P, 3 * P + 77, 3) == SIZE_MAX);
	CK(vt_check(b + 5 * P + 78, 5 * P + 78, P - 78, 3) == SIZE_MAX);
	CK_EQ(faults(c), 2);

	/* main thread, the last byte of a page */
	hreset(H_REFILL, 4);
	CK_EQ(vr_mark(r, 6 * P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	CK_EQ(rd(b + 7 * P - 1), vt_pat(4, 7 * P - 1));
	CK_EQ(atomic_load(&H.calls), 1);
	CK(H.addr == b + 7 * P - 1);
	CK_EQ(H.off, 6 * P);
	CK_EQ(H.len, 2 * P);
	CK_EQ(H.tid, vt_tid());
	CK_EQ(faults(c), 3);
	vr_ctx_destroy(c);
}

/* the handler gets the purged range that holds the page: after an unmark
 * split one, and after a mark joined one (S3, S4, S7) */
static void sc_fault_split(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-split", 8 * P, 1);
	uint8_t *b = vr_region_base(r);
	hreset(H_REFILL, 2);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	CK_EQ(vr_mark(r, 0, 6 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 6 * P);
	/* pieces [0, 2P+10) and [3P-10, 6P) stay purged; page [2P, 3P) is
	 * restored and reads zero */
	CK_EQ(vr_unmark(r, 2 * P + 10, P - 20), VR_PURGED);
	CK_EQ(rd(b + 2 * P + 5), 0);
	CK_EQ(rd(b + 3 * P - 5), 0);
	CK_EQ(atomic_load(&H.calls), 0);
	CK_EQ(rd(b + 3 * P + 1), vt_pat(2, 3 * P + 1));
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(H.off, 3 * P - 10);
	CK_EQ(H.len, 3 * P + 10);
	CK(H.addr == b + 3 * P + 1);
	hreset(H_REFILL, 3);
	wr(b + P - 1, 0xee);
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(H.off, 0);
	CK_EQ(H.len, 2 * P + 10);
	CK(H.addr == b + P - 1);
	CK_EQ(b[P - 1], 0xee);
	CK(vt_check(b, 0, P - 1, 3) == SIZE_MAX);
	CK_EQ(vr_status(r, 0, 8 * P), 0);

	/* a mark overlapping a purged range joins it and discards at once */
	hreset(H_REFILL, 4);
	CK_EQ(vr_mark(r, 2 * P, P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), P);
	CK_EQ(vr_mark(r, P, 3 * P), VR_PURGED); /* [P, 4P), purged */
	CK_EQ(vr_status(r, P, 3 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(rd(b + P + 7), vt_pat(4, P + 7));
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(H.off, P);
	CK_EQ(H.len, 3 * P);
	CK(vt_check(b + P, P, 3 * P, 4) == SIZE_MAX);
	CK_EQ(faults(c), 3);
	vr_ctx_destroy(c);
}

/* foreign faults inside a region reach the prior handler even while
 * another thread keeps purging and unmarking other pages of the region */
static struct {
	struct vr_region *r;
	struct vr_ctx *c;
	atomic_int stop;
	atomic_long cycles;
} BZ;

static void *busy_purger(void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	while (!atomic_load(&BZ.stop)) {
		CK(vr_mark(BZ.r, 0, 2 * P) >= 0);
		CK(vr_ctx_purge(BZ.c, SIZE_MAX) >= 0);
		CK(vr_unmark(BZ.r, 0, 2 * P) >= 0);
		atomic_fetch_add(&BZ.cycles, 1);
	}
	return NULL;
}

static void prior_info(int sig, siginfo_t *si, void *uc);
static const char *install_prior(void);
static struct {
	volatile sig_atomic_t hits;
	int jump;
	int sig, code;
	void *addr;
	pid_t pid;
	int value;
} PRIOR;

static void sc_foreign_busy(void)
{
	size_t P = vt_pg();
	setenv("VT_PRIOR", "siginfo", 1);
	install_prior();
	PRIOR.jump = 1;
	BZ.c = sc_ctx(VR_CTX_NO_MONITOR);
	BZ.r = sc_region(BZ.c, "vt-busy", 8 * P, 1);
	uint8_t *b = vr_region_base(BZ.r);
	CK_EQ(mprotect(b + 6 * P, P, PROT_NONE), 0);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, busy_purger, NULL), 0);
	while (atomic_load(&BZ.cycles) < 10)
		sched_yield();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 200; i++) {
		if (sigsetjmp(tenv, 1) == 0) {
			wr(b + 6 * P + (size_t)i, 1);
			CK(0, "write to a PROT_NONE page returned");
		}
		CK_EQ(PRIOR.hits, i + 1);
		CK(PRIOR.addr == b + 6 * P + i);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long cyc = atomic_load(&BZ.cycles);
	atomic_store(&BZ.stop, 1);
	CK_EQ(pthread_join(t, NULL), 0);
	fprintf(stderr, "foreign_busy: 200 foreign faults in %.3f s while %ld purge cycles ran\n",
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, cyc);
	vr_ctx_destroy(BZ.c);
}

/* SIGBUS to the application's handler: BUS_ADRERR, exact si_addr, the
 * faulting thread; VR_STAT_FAULTS counts handler calls and deliveries */
static void sc_sigbus_info(void)
{
	size_t P = vt_pg();
	install_bus(bus_handler);
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-sigbus", 8 * P, 1);
	uint8_t *b = vr_region_base(r);
	CK_EQ(vr_mark(r, 0, 8 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 8 * P);

	/* no handler: read */
	struct acc a = { .p = b + 2 * P + 123 };
	CK_EQ(do_access(&a), 1);
	CK_EQ(BUS.hits, 1);
	CK_EQ(BUS.signo, SIGBUS);
	CK_EQ(BUS.code, BUS_ADRERR);
	CK(BUS.addr == a.p, "si_addr %p, expected %p", BUS.addr, a.p);
	CK_EQ(BUS.tid, vt_tid());
	CK_EQ(faults(c), 1);

	/* no handler: write */
	struct acc w = { .p = b + 3 * P + 7, .write = 1, .v = 9 };
	CK_EQ(do_access(&w), 1);
	CK_EQ(BUS.hits, 2);
	CK_EQ(BUS.code, BUS_ADRERR);
	CK(BUS.addr == w.p, "si_addr %p, expected %p", BUS.addr, w.p);
	CK_EQ(faults(c), 2);

	/* handler returning VR_FAULT_SIGBUS, in another thread */
	hreset(H_SIGBUS, 0);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	struct acc t = { .p = b + 6 * P - 1 };
	access_in_thread(&t);
	CK_EQ(t.bus, 1);
	CK_EQ(BUS.hits, 3);
	CK_EQ(BUS.tid, t.tid);
	CK(BUS.tid != vt_tid());
	CK_EQ(BUS.code, BUS_ADRERR);
	CK(BUS.addr == t.p, "si_addr %p, expected %p", BUS.addr, t.p);
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(H.off, 0);
	CK_EQ(H.len, 8 * P);
	CK(H.addr == t.p);
	CK_EQ(H.tid, t.tid);
	CK_EQ(faults(c), 3);

	/* vr_region_set_fault_handler(r, NULL, arg) removes the handler */
	CK_EQ(vr_region_set_fault_handler(r, NULL, &H), 0);
	struct acc n = { .p = b + 7 * P + 1 };
	CK_EQ(do_access(&n), 1);
	CK_EQ(BUS.hits, 4);
	CK(BUS.addr == n.p);
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(faults(c), 4);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);

	/* the range is still purged and faults are still handled */
	CK_EQ(vr_status(r, 0, 8 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	struct sigaction sa;
	sigaction(SIGSEGV, NULL, &sa);
	CK(sa.sa_flags & SA_SIGINFO);
	hreset(H_REFILL, 5);
	CK_EQ(rd(b + 6 * P), vt_pat(5, 6 * P));
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(faults(c), 5);
	CK_EQ(vr_status(r, 0, 8 * P), 0);
	CK_EQ(BUS.hits, 4);
	vr_ctx_destroy(c);
}

/* a handler returning VR_FAULT_RETRY without fixing anything: SIGBUS after
 * a bounded number of re-faults; one that fixes on its third call wins */
/* The application's SIGBUS handler gets the faulting instruction's
 * context, as from the kernel: a handler that moves the instruction
 * pointer to a recovery point (as for a SIGBUS past the end of a file)
 * must work.  The library's SIGBUS used to arrive nested in its own
 * handler, with the library's context: the edit was lost and the access
 * re-ran for ever. */
#if defined(__x86_64__)
extern char vt_probe_insn[], vt_probe_pad[];
__attribute__((noinline)) static int probe(const volatile uint8_t *p)
{
	int v;
	__asm__ volatile(".globl vt_probe_insn\nvt_probe_insn: movzbl (%1), %0\n"
			 "jmp 1f\n"
			 ".globl vt_probe_pad\nvt_probe_pad: movl $-1, %0\n"
			 "1:\n"
			 : "=r"(v)
			 : "r"(p)
			 : "memory");
	return v;
}

static struct {
	volatile sig_atomic_t hits;
	int code;
	void *addr, *pc;
} PB;

static void probe_bus(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	(void)sig;
	PB.hits++;
	PB.code = si->si_code;
	PB.addr = si->si_addr;
	PB.pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
	if (PB.hits > 4)
		_exit(4); /* the access re-ran: the edit below was lost */
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)vt_probe_pad;
}

static void sc_sigbus_context(void)
{
	size_t P = vt_pg();
	install_bus(probe_bus);
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	/* plain (SIGSEGV trap), then shared (SIGBUS trap under uffd) */
	for (unsigned flags = 0; flags <= VR_REGION_SHARED; flags += VR_REGION_SHARED) {
		struct vr_region *r = NULL;
		int rc = vr_region_new(c, "vt-probe", 4 * P, flags, &r);
		if (rc == -EOPNOTSUPP && flags)
			break;
		CK_EQ(rc, 0);
		uint8_t *b = vr_region_base(r);
		memset(b, 7, 4 * P);
		CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
		CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
		memset(&PB, 0, sizeof(PB));
		CK_EQ(probe(b + P + 9), -1);
		CK_EQ(PB.hits, 1);
		CK_EQ(PB.code, BUS_ADRERR);
		CK(PB.addr == b + P + 9);
		CK(PB.pc == (void *)vt_probe_insn, "(pc %p, the access at %p)", PB.pc,
		   (void *)vt_probe_insn);
		CK_EQ(probe(b + 4), 7);
		vr_region_destroy(r);
	}
	vr_ctx_destroy(c);
}
#else
static void sc_sigbus_context(void)
{
	_exit(77);
}
#endif

static void sc_retry_count(void)
{
	size_t P = vt_pg();
	install_bus(bus_handler);
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-retry", 4 * P, 1);
	uint8_t *b = vr_region_base(r);
	hreset(H_NOFIX, 0);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);

	for (int write = 0; write < 2; write++) {
		uint64_t f0 = faults(c);
		int hits0 = BUS.hits;
		hreset(H_NOFIX, 0);
		struct acc a = { .p = b + P + 99 + (size_t)write * P, .write = write, .v = 1 };
		CK_EQ(do_access(&a), 1);
		int calls = atomic_load(&H.calls);
		uint64_t nf = faults(c) - f0;
		fprintf(stderr, "%s: %d handler calls, %" PRIu64 " faults counted\n",
			write ? "write" : "read", calls, nf);
		CK(calls >= 1 && calls <= 9, "(%d handler calls)", calls);
		CK_EQ(BUS.hits, hits0 + 1);
		CK_EQ(BUS.code, BUS_ADRERR);
		CK(BUS.addr == a.p, "si_addr %p, expected %p", BUS.addr, a.p);
		CK(nf == (uint64_t)calls || nf == (uint64_t)calls + 1,
		   "(%" PRIu64 " faults, %d calls)", nf, calls);
	}

	/* two spurious retries, then the handler fixes: the access completes */
	hreset(H_FIX_AFTER, 7);
	H.fix_after = 3;
	int hits0 = BUS.hits;
	CK_EQ(rd(b + P + 1), vt_pat(7, P + 1));
	CK_EQ(atomic_load(&H.calls), 3);
	CK_EQ(H.unmark_rc, VR_PURGED);
	CK_EQ(BUS.hits, hits0);
	CK_EQ(vr_status(r, 0, 4 * P), 0);
	vr_ctx_destroy(c);
}

/* must die of SIGBUS; VT_MODE says how, VT_ACCESS=read|write */
static void *blocked_thread(void *arg)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	struct acc *x = arg;
	if (x->write)
		wr(x->p, x->v);
	else
		x->got = rd(x->p);
	return NULL;
}

static void bus_exit4(int sig)
{
	(void)sig;
	static const char msg[] =
		"VT: application SIGBUS handler called although SIGBUS was blocked\n";
	ssize_t _w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)_w;
	_exit(4);
}

static void sc_die(void)
{
	size_t P = vt_pg();
	const char *mode = env_or("VT_MODE", "nohandler");
	bool write = env_is("VT_ACCESS", "write");
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-die", 4 * P, 1);
	uint8_t *b = vr_region_base(r);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	hreset(H_REFILL, 2);
	sigset_t bus;
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	if (strcmp(mode, "nohandler") == 0 || strcmp(mode, "blocked_thread") == 0) {
		/* nothing */
	} else if (strcmp(mode, "handler_sigbus") == 0) {
		H.mode = H_SIGBUS;
		CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	} else if (strcmp(mode, "retry_loop") == 0) {
		H.mode = H_NOFIX;
		H.log = 1;
		CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	} else if (strcmp(mode, "ignored") == 0) {
		CK(signal(SIGBUS, SIG_IGN) != SIG_ERR);
	} else if (strcmp(mode, "blocked") == 0) {
		CK_EQ(pthread_sigmask(SIG_BLOCK, &bus, NULL), 0);
	} else if (strcmp(mode, "blocked_handler") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = bus_exit4;
		sigemptyset(&sa.sa_mask);
		CK_EQ(sigaction(SIGBUS, &sa, NULL), 0);
		CK_EQ(pthread_sigmask(SIG_BLOCK, &bus, NULL), 0);
	} else {
		CK(0, "unknown VT_MODE %s", mode);
	}
	size_t off = 2 * P + 5;
	struct acc a = { .p = b + off, .write = write, .v = 3 };
	fprintf(stderr, "VT offset=0x%zx offset_dec=%zu region=%p\n", off, off, (void *)r);
	fflush(stderr);
	if (strcmp(mode, "blocked_thread") == 0) {
		pthread_t t;
		CK_EQ(pthread_create(&t, NULL, blocked_thread, &a), 0);
		pthread_join(t, NULL);
	} else if (write) {
		wr(a.p, a.v);
	} else {
		a.got = rd(a.p);
	}
	fprintf(stderr, "VT: survived a %s of a discarded page (mode %s)\n",
		write ? "write" : "read", mode);
	_exit(3);
}

/* the library's handler runs on the alternate stack of the faulting thread */
#define ALT_SZ (256 * 1024)
struct alt_arg {
	uint8_t *p;
	uint8_t got;
	char *alt;
};

static void *alt_thread(void *arg)
{
	struct alt_arg *x = arg;
	stack_t ss = { .ss_sp = x->alt, .ss_size = ALT_SZ, .ss_flags = 0 };
	CK_EQ(sigaltstack(&ss, NULL), 0);
	x->got = rd(x->p);
	ss.ss_flags = SS_DISABLE;
	CK_EQ(sigaltstack(&ss, NULL), 0);
	return NULL;
}

static void sc_altstack(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-alt", 4 * P, 1);
	uint8_t *b = vr_region_base(r);
	hreset(H_REFILL, 2);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	CK_EQ(vr_mark(r, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 4 * P);

	struct alt_arg x = { .p = b + P + 3, .alt = malloc(ALT_SZ) };
	CK(x.alt != NULL);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, alt_thread, &x), 0);
	CK_EQ(pthread_join(t, NULL), 0);
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(x.got, vt_pat(2, P + 3));
	CK_EQ(H.on_alt, 1);
	CK((char *)H.local >= x.alt && (char *)H.local < x.alt + ALT_SZ,
	   "handler local %p outside the alternate stack [%p, %p)", H.local, (void *)x.alt,
	   (void *)(x.alt + ALT_SZ));

	/* without an alternate stack the handler runs on the thread's stack
	 * (sanitizers give every thread one of their own: then skip this) */
	stack_t cur;
	CK_EQ(sigaltstack(NULL, &cur), 0);
	hreset(H_REFILL, 3);
	CK_EQ(vr_mark(r, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 4 * P);
	CK_EQ(rd(b + 2 * P), vt_pat(3, 2 * P));
	CK_EQ(atomic_load(&H.calls), 1);
	if (cur.ss_flags & SS_DISABLE)
		CK_EQ(H.on_alt, 0);
	free(x.alt);
	vr_ctx_destroy(c);
}

/* a fault handler that calls other vr_* functions */
static struct {
	struct vr_ctx *c;
	struct vr_region *r2;
	uint8_t *b2;
	int status_in, region_of_ok, unmark2, mark2, unmark, status_after, mark_other, setfh;
	ssize_t purged;
	int unmark_ptr2, mark_ptr2, setfh_self, new_rc, new_of;
	uint64_t faults_in;
	int calls;
} HV;

static int h_calls_vr(struct vr_region *r, size_t off, size_t len, void *fa, void *arg)
{
	(void)arg;
	size_t P = vt_pg();
	HV.calls++;
	HV.status_in = vr_status(r, off, len);
	HV.region_of_ok = vr_region_of(fa) == r;
	HV.faults_in = vr_ctx_stat(HV.c, VR_STAT_FAULTS);
	HV.unmark2 = vr_unmark(HV.r2, 0, P);
	HV.mark2 = vr_mark(HV.r2, 0, P);
	HV.setfh = vr_region_set_fault_handler(HV.r2, h_fn, &H);
	HV.unmark = vr_unmark(r, off, len);
	vt_fill((uint8_t *)vr_region_base(r) + off, off, len, 2);
	HV.status_after = vr_status(r, off, len);
	HV.mark_other = vr_mark(r, 3 * P, P);
	HV.purged = vr_ctx_purge(HV.c, SIZE_MAX);
	HV.unmark_ptr2 = vr_unmark_ptr(HV.b2, P);
	HV.mark_ptr2 = vr_mark_ptr(HV.b2, P);
	HV.setfh_self = vr_region_set_fault_handler(r, h_calls_vr, NULL);
	struct vr_region *t = NULL;
	HV.new_rc = vr_region_new(HV.c, "vt-in-handler", P, 0, &t);
	HV.new_of = t && vr_region_of(vr_region_base(t)) == t;
	vr_region_destroy(t);
	return VR_FAULT_RETRY;
}

static void sc_handler_calls_vr(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-hv1", 4 * P, 1);
	struct vr_region *r2 = sc_region(c, "vt-hv2", 4 * P, 1);
	uint8_t *b = vr_region_base(r);
	HV.c = c;
	HV.r2 = r2;
	HV.b2 = vr_region_base(r2);
	CK_EQ(vr_region_set_fault_handler(r, h_calls_vr, NULL), 0);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	CK_EQ(vr_mark(r2, 0, 2 * P), VR_INTACT);

	CK_EQ(rd(b + P + 1), vt_pat(2, P + 1));
	CK_EQ(HV.calls, 1);
	CK_EQ(HV.status_in, VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(HV.region_of_ok, 1);
	CK_EQ(HV.faults_in, 1);
	CK_EQ(HV.unmark2, VR_INTACT);
	CK_EQ(HV.mark2, VR_INTACT);
	CK_EQ(HV.setfh, 0);
	CK_EQ(HV.unmark, VR_PURGED);
	CK_EQ(HV.status_after, 0);
	CK_EQ(HV.mark_other, VR_INTACT);
	/* r2 [0, 2P) and r [3P, 4P) */
	CK_EQ(HV.purged, 3 * P);
	CK_EQ(HV.unmark_ptr2, VR_PURGED);
	CK_EQ(HV.mark_ptr2, VR_INTACT);
	CK_EQ(HV.setfh_self, 0);
	CK_EQ(HV.new_rc, 0);
	CK_EQ(HV.new_of, 1);
	CK_EQ(vr_ctx_stat(c, VR_STAT_REGIONS), 2);
	CK(vt_check(b + P, P, 2 * P, 2) == SIZE_MAX);
	CK(vt_check(b, 0, P, 1) == SIZE_MAX);
	CK_EQ(vr_status(r, 3 * P, P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(faults(c), 1);
	vr_ctx_destroy(c);
}

/* a handler regenerating r1 from r2, which is purged too: a nested fault
 * with its own handler call; errno survives; stats go to the right ctx */
static struct {
	struct vr_region *r2;
	int outer, inner;
} NS;

static int h_inner(struct vr_region *r, size_t off, size_t len, void *fa, void *arg)
{
	(void)fa;
	(void)arg;
	NS.inner++;
	CK_EQ(vr_unmark(r, off, len), VR_PURGED);
	vt_fill((uint8_t *)vr_region_base(r) + off, off, len, 7);
	errno = EBADF;
	return VR_FAULT_RETRY;
}

static int h_outer(struct vr_region *r, size_t off, size_t len, void *fa, void *arg)
{
	(void)fa;
	(void)arg;
	NS.outer++;
	CK_EQ(vr_unmark(r, off, len), VR_PURGED);
	uint8_t *dst = (uint8_t *)vr_region_base(r) + off;
	const uint8_t *src = vr_region_base(NS.r2);
	for (size_t i = 0; i < len; i++)
		dst[i] = rd(src + off + i); /* faults on r2 */
	errno = ENOSPC;
	return VR_FAULT_RETRY;
}

static void sc_nested(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c1 = sc_ctx(VR_CTX_NO_MONITOR), *c2;
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	struct vr_region *r1 = sc_region(c1, "vt-outer", 4 * P, 1);
	NS.r2 = sc_region(c2, "vt-inner", 4 * P, 1);
	uint8_t *b1 = vr_region_base(r1);
	CK_EQ(vr_region_set_fault_handler(r1, h_outer, NULL), 0);
	CK_EQ(vr_region_set_fault_handler(NS.r2, h_inner, NULL), 0);
	CK_EQ(vr_mark(r1, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_mark(NS.r2, 0, 4 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c1, SIZE_MAX), 4 * P);
	CK_EQ(vr_ctx_purge(c2, SIZE_MAX), 4 * P);
	errno = EDOM;
	uint8_t v = rd(b1 + 2 * P + 3);
	int e = errno;
	CK_EQ(e, EDOM);
	CK_EQ(v, vt_pat(7, 2 * P + 3));
	CK_EQ(NS.outer, 1);
	CK_EQ(NS.inner, 1);
	CK(vt_check(b1, 0, 4 * P, 7) == SIZE_MAX);
	CK_EQ(vr_ctx_stat(c1, VR_STAT_FAULTS), 1);
	CK_EQ(vr_ctx_stat(c2, VR_STAT_FAULTS), 1);
	vr_ctx_destroy(c2);
	vr_ctx_destroy(c1);
}

/* ------------------------------------------------------------------ */
/* lazy regeneration across threads                                     */

#define LZ_CHUNKS 48
#define LZ_READERS 3

struct lz_chunk {
	atomic_uint seq; /* odd while the chunk is being regenerated */
	atomic_int lock; /* 0 or the owner's tid */
};

static struct {
	struct vr_ctx *c;
	struct vr_region *r;
	uint8_t *b;
	size_t S, d0, dlen; /* chunk i: [i*S + d0, i*S + d0 + dlen) */
	struct lz_chunk ch[LZ_CHUNKS];
	atomic_int stop;
	atomic_long calls, regenerated, reads, remarks, purges;
	uint64_t seed;
} LZ;

static void lz_lock(struct lz_chunk *k)
{
	int me = (int)vt_tid(), z = 0;
	CK(atomic_load(&k->lock) != me, "chunk lock taken twice by one thread");
	while (!atomic_compare_exchange_weak(&k->lock, &z, me)) {
		z = 0;
		sched_yield();
	}
}

static void lz_unlock(struct lz_chunk *k)
{
	atomic_store(&k->lock, 0);
}

static int lz_handler(struct vr_region *r, size_t off, size_t len, void *fa, void *arg)
{
	(void)arg;
	atomic_fetch_add(&LZ.calls, 1);
	size_t i = off / LZ.S;
	CK(i < LZ_CHUNKS && off == i * LZ.S + LZ.d0 && len == LZ.dlen,
	   "handler range (%zu, %zu) is not a chunk", off, len);
	CK((uint8_t *)fa >= LZ.b + off && (uint8_t *)fa < LZ.b + off + len,
	   "fault_addr %p outside the purged range", fa);
	struct lz_chunk *k = &LZ.ch[i];
	lz_lock(k);
	atomic_fetch_add(&k->seq, 1);
	int rc = vr_unmark(r, off, len);
	CK(rc == VR_PURGED || rc == VR_INTACT, "(vr_unmark in handler: %d)", rc);
	if (rc == VR_PURGED) {
		for (size_t j = 0; j < len; j++) /* relaxed atomics: readers race (seqlock) */
			__atomic_store_n(&LZ.b[off + j], vt_pat(1, off + j), __ATOMIC_RELAXED);
		atomic_fetch_add(&LZ.regenerated, 1);
	}
	atomic_fetch_add(&k->seq, 1);
	lz_unlock(k);
	return VR_FAULT_RETRY;
}

static void *lz_reader(void *arg)
{
	struct vt_rng g;
	vt_seed(&g, LZ.seed + (uintptr_t)arg);
	while (!atomic_load(&LZ.stop)) {
		size_t i = vt_below(&g, LZ_CHUNKS);
		size_t o = i * LZ.S + LZ.d0 + vt_below(&g, LZ.dlen);
		struct lz_chunk *k = &LZ.ch[i];
		uint8_t v;
		for (;;) {
			unsigned s1 = atomic_load(&k->seq);
			if (s1 & 1) {
				sched_yield();
				continue;
			}
			v = __atomic_load_n(&LZ.b[o], __ATOMIC_RELAXED);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load(&k->seq) == s1)
				break;
		}
		CK(v == vt_pat(1, o), "byte %zu of chunk %zu reads 0x%02x, expected 0x%02x", o, i,
		   v, vt_pat(1, o));
		atomic_fetch_add(&LZ.reads, 1);
		if (vt_below(&g, 4) == 0) {
			lz_lock(k);
			int rc = vr_mark(LZ.r, i * LZ.S + LZ.d0, LZ.dlen);
			lz_unlock(k);
			CK(rc == VR_INTACT || rc == VR_PURGED, "(vr_mark: %d)", rc);
			atomic_fetch_add(&LZ.remarks, 1);
		}
	}
	return NULL;
}

static void *lz_purger(void *arg)
{
	(void)arg;
	struct vt_rng g;
	vt_seed(&g, LZ.seed ^ 0x5555);
	while (!atomic_load(&LZ.stop)) {
		ssize_t n = vr_ctx_purge(LZ.c, vt_below(&g, 3) ? SIZE_MAX : 4 * vt_pg());
		CK(n >= 0);
		atomic_fetch_add(&LZ.purges, 1);
		usleep((useconds_t)(50 + vt_below(&g, 300)));
	}
	return NULL;
}

static void sc_lazy_threads(void)
{
	size_t P = vt_pg();
	LZ.seed = vt_get_seed("lazy_threads");
	LZ.c = sc_ctx(VR_CTX_NO_MONITOR);
	LZ.S = 4 * P;
	LZ.d0 = 100;
	LZ.dlen = 3 * P; /* whole pages: [i*S + P, i*S + 3P) */
	LZ.r = sc_region(LZ.c, "vt-lazy", LZ_CHUNKS * LZ.S, 1);
	LZ.b = vr_region_base(LZ.r);
	CK_EQ(vr_region_set_fault_handler(LZ.r, lz_handler, NULL), 0);
	for (size_t i = 0; i < LZ_CHUNKS; i++)
		CK_EQ(vr_mark(LZ.r, i * LZ.S + LZ.d0, LZ.dlen), VR_INTACT);
	CK_EQ(vr_ctx_stat(LZ.c, VR_STAT_RANGES), LZ_CHUNKS);
	CK_EQ(vr_ctx_purge(LZ.c, SIZE_MAX), (ssize_t)(LZ_CHUNKS * 2 * P));

	pthread_t t[LZ_READERS + 1];
	for (uintptr_t i = 0; i < LZ_READERS; i++)
		CK_EQ(pthread_create(&t[i], NULL, lz_reader, (void *)i), 0);
	CK_EQ(pthread_create(&t[LZ_READERS], NULL, lz_purger, NULL), 0);
	unsigned ms = (unsigned)strtoul(env_or("VT_LAZY_MS", "1500"), NULL, 0);
	usleep(ms * 1000);
	atomic_store(&LZ.stop, 1);
	for (int i = 0; i <= LZ_READERS; i++)
		CK_EQ(pthread_join(t[i], NULL), 0);
	fprintf(stderr,
		"lazy: %ld reads, %ld handler calls, %ld regenerations, %ld re-marks, %ld purges\n",
		atomic_load(&LZ.reads), atomic_load(&LZ.calls), atomic_load(&LZ.regenerated),
		atomic_load(&LZ.remarks), atomic_load(&LZ.purges));
	CK(atomic_load(&LZ.calls) > 0);
	CK(atomic_load(&LZ.regenerated) > 0);
	CK_EQ(faults(LZ.c), atomic_load(&LZ.calls));
	/* every chunk: an intact unmark means intact data */
	for (size_t i = 0; i < LZ_CHUNKS; i++) {
		size_t off = i * LZ.S + LZ.d0;
		int rc = vr_unmark(LZ.r, off, LZ.dlen);
		CK(rc == VR_INTACT || rc == VR_PURGED);
		if (rc == VR_INTACT)
			CK(vt_check(LZ.b + off, off, LZ.dlen, 1) == SIZE_MAX, "chunk %zu", i);
	}
	vr_ctx_destroy(LZ.c);
}

/* ------------------------------------------------------------------ */
/* S14: system calls on discarded pages fail with EFAULT                */

static void sc_efault(void)
{
	size_t P = vt_pg();
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = sc_region(c, "vt-efault", 4 * P, 1);
	uint8_t *b = vr_region_base(r);
	hreset(H_REFILL, 2);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	int p[2];
	CK_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	uint8_t tmp[64];

	errno = 0;
	CK_EQ(write(p[1], b + P + 5, 16), -1);
	CK_EQ(errno, EFAULT);
	static const char msg[] = "0123456789abcdef";
	CK_EQ(write(p[1], msg, 16), 16);
	errno = 0;
	CK_EQ(read(p[0], b + 2 * P + 7, 16), -1);
	CK_EQ(errno, EFAULT);
	ssize_t _n = read(p[0], tmp, sizeof(tmp)); /* drain */
	(void)_n;
	CK_EQ(atomic_load(&H.calls), 0);
	CK_EQ(faults(c), 0);
	CK_EQ(vr_status(r, P, 2 * P), VR_STATE_VOLATILE | VR_STATE_PURGED);

	/* after unmark both work; discarded bytes read as zero */
	CK_EQ(vr_unmark(r, P, 2 * P), VR_PURGED);
	CK_EQ(write(p[1], b + P + 5, 16), 16);
	CK_EQ(read(p[0], tmp, sizeof(tmp)), 16);
	CK(vt_all_zero(tmp, 16));
	CK_EQ(write(p[1], msg, 16), 16);
	CK_EQ(read(p[0], b + 2 * P + 7, 16), 16);
	CK(memcmp(b + 2 * P + 7, msg, 16) == 0);
	CK_EQ(atomic_load(&H.calls), 0);
	CK_EQ(faults(c), 0);
	close(p[0]);
	close(p[1]);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ */
/* installation of the handler                                          */

static void sc_install(void)
{
	struct sigaction sa;
	CK(sigsegv_is_default());
	CK_EQ(vr_trap_backend(), VR_TRAP_NONE);
	/* calls that need no ctx install nothing */
	CK(vr_region_of(&sa) == NULL);
	vr_ctx_destroy(NULL);
	vr_region_destroy(NULL);
	CK_EQ(vr_ctx_stat(NULL, VR_STAT_FAULTS), 0);
	CK_EQ(vr_mark_ptr(&sa, 1), -EINVAL);
	CK_EQ(vr_unmark_ptr(&sa, 1), -EINVAL);
	CK(sigsegv_is_default());

	/* failing vr_ctx_new: argument errors */
	struct vr_ctx *c = NULL, *c2 = NULL;
	CK_EQ(vr_ctx_new(~0u, &c), -EINVAL);
	CK(sigsegv_is_default());
	CK_EQ(vr_ctx_new(0, NULL), -EINVAL);
	CK(sigsegv_is_default());

	/* failing vr_ctx_new inside: guard forced, no fd for the probe */
	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl.rlim_cur = 3;
	rl.rlim_max = old.rlim_max;
	setenv("VRANGE_TRAP", "guard", 1);
	CK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
	CK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	unsetenv("VRANGE_TRAP");
	CK(rc < 0, "(vr_ctx_new with no free fd and VRANGE_TRAP=guard: %d)", rc);
	CK(sigsegv_is_default());

	/* the first successful vr_ctx_new installs it */
	CK_EQ(vr_ctx_new(0, &c), 0);
	CK(vr_trap_backend() != VR_TRAP_NONE);
	memset(&sa, 0, sizeof(sa));
	CK_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	CK(sa.sa_flags & SA_SIGINFO, "(sa_flags 0x%x)", (unsigned)sa.sa_flags);
	CK(sa.sa_flags & SA_ONSTACK, "(sa_flags 0x%x)", (unsigned)sa.sa_flags);
	CK(sa.sa_sigaction != NULL);
	void *h1 = (void *)sa.sa_sigaction;
	/* later contexts keep the same handler */
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c2), 0);
	CK_EQ(sigaction(SIGSEGV, NULL, &sa), 0);
	CK((void *)sa.sa_sigaction == h1);
	vr_ctx_destroy(c2);
	vr_ctx_destroy(c);
}

/* The backend is chosen once per process, by probes that need fds: a
 * first vr_ctx_new with none free must fail with -EMFILE and choose
 * nothing (it once chose mprotect for good, and with VRANGE_TRAP=guard
 * answered -EOPNOTSUPP); the next one, with fds, chooses what a process
 * that never ran short chooses. */
static void sc_probe_short(void)
{
	fflush(stderr);
	pid_t pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		struct vr_ctx *c;
		_exit(vr_ctx_new(VR_CTX_NO_MONITOR, &c) == 0 ? 100 + vr_trap_backend() : 1);
	}
	int st = 0;
	CK_EQ(waitpid(pid, &st, 0), pid);
	CK(WIFEXITED(st) && WEXITSTATUS(st) >= 100, "(fresh process: status 0x%x)", st);
	int fresh = WEXITSTATUS(st) - 100;

	struct rlimit old, rl;
	CK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl.rlim_cur = 3;
	rl.rlim_max = old.rlim_max;
	struct vr_ctx *c = NULL;
	const char *const forced[] = { NULL, "guard", "uffd", NULL };
	for (int i = 0; i < 3; i++) {
		if (forced[i])
			setenv("VRANGE_TRAP", forced[i], 1);
		CK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
		int rc = vr_ctx_new(VR_CTX_NO_MONITOR, &c);
		CK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
		unsetenv("VRANGE_TRAP");
		CK(rc == -EMFILE, "(VRANGE_TRAP=%s, no free fd: %d)", forced[i] ? forced[i] : "-",
		   rc);
		CK_EQ(vr_trap_backend(), VR_TRAP_NONE);
		CK(sigsegv_is_default());
	}
	CK_EQ(vr_ctx_new(VR_CTX_NO_MONITOR, &c), 0);
	CK(vr_trap_backend() == fresh, "(backend %d after a shortage, %d in a fresh process)",
	   vr_trap_backend(), fresh);
	vr_ctx_destroy(c);
}

/* ------------------------------------------------------------------ */
/* foreign faults and SIGSEGV not from the kernel                       */

static void prior_info(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	PRIOR.sig = sig;
	PRIOR.code = si->si_code;
	if (si->si_code > 0) {
		PRIOR.addr = si->si_addr;
	} else {
		PRIOR.pid = si->si_pid;
		PRIOR.value = si->si_value.sival_int;
	}
	/* last, with release: another thread polls hits, then reads the rest */
	__atomic_add_fetch(&PRIOR.hits, 1, __ATOMIC_RELEASE);
	if (PRIOR.jump)
		siglongjmp(tenv, 1);
}

/* a GC-style write barrier: make the page accessible and return */
static void prior_fixer(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	size_t P = vt_pg();
	PRIOR.hits++;
	PRIOR.sig = sig;
	PRIOR.code = si->si_code;
	PRIOR.addr = si->si_addr;
	uintptr_t pg = (uintptr_t)si->si_addr & ~(uintptr_t)(P - 1);
	if (si->si_code <= 0 || mprotect((void *)pg, P, PROT_READ | PROT_WRITE) < 0)
		_exit(5);
}

static void prior_plain(int sig)
{
	PRIOR.hits++;
	PRIOR.sig = sig;
	if (PRIOR.jump)
		siglongjmp(tenv, 1);
}

/* VT_PRIOR: none | siginfo | plain | resethand | ign */
static const char *install_prior(void)
{
	const char *prior = env_or("VT_PRIOR", "none");
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	if (strcmp(prior, "none") == 0)
		return prior;
	if (strcmp(prior, "siginfo") == 0) {
		sa.sa_sigaction = prior_info;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	} else if (strcmp(prior, "resethand") == 0) {
		sa.sa_sigaction = prior_info;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	} else if (strcmp(prior, "fixer") == 0) {
		sa.sa_sigaction = prior_fixer;
		sa.sa_flags = SA_SIGINFO;
	} else if (strcmp(prior, "plain") == 0) {
		sa.sa_handler = prior_plain;
		sa.sa_flags = SA_ONSTACK;
	} else if (strcmp(prior, "ign") == 0) {
		sa.sa_handler = SIG_IGN;
	} else {
		CK(0, "unknown VT_PRIOR %s", prior);
	}
	CK_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	return prior;
}

/* the library is busy: a region with a handled fault and a purged range */
static struct vr_region *busy_library(struct vr_ctx *c, size_t size)
{
	size_t P = vt_pg();
	struct vr_region *r = sc_region(c, "vt-foreign", size, 1);
	uint8_t *b = vr_region_base(r);
	hreset(H_REFILL, 2);
	CK_EQ(vr_region_set_fault_handler(r, h_fn, &H), 0);
	CK_EQ(vr_mark(r, P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P);
	CK_EQ(rd(b + P + 9), vt_pat(2, P + 9));
	CK_EQ(atomic_load(&H.calls), 1);
	CK_EQ(vr_mark(r, 0, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(c, SIZE_MAX), 2 * P); /* [0, 2P) stays purged */
	return r;
}

/* stack overflow on the guard page of a thread with an alternate stack */
static volatile int stop_depth = 1 << 30;

__attribute__((noinline)) static int recurse(volatile char *prev, int depth)
{
	volatile char buf[512];
	buf[0] = (char)depth;
	buf[511] = prev ? prev[0] : 0;
	if (depth > stop_depth)
		return buf[0];
	return recurse(buf, depth + 1) + buf[3];
}

struct stk {
	char *alt;
	uintptr_t guard_lo, guard_hi;
	int jumped;
};

static void *stack_thread(void *arg)
{
	struct stk *s = arg;
	stack_t ss = { .ss_sp = s->alt, .ss_size = ALT_SZ, .ss_flags = 0 };
	CK_EQ(sigaltstack(&ss, NULL), 0);
	pthread_attr_t a;
	void *lo;
	size_t sz, gs;
	CK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
	CK_EQ(pthread_attr_getstack(&a, &lo, &sz), 0);
	CK_EQ(pthread_attr_getguardsize(&a, &gs), 0);
	pthread_attr_destroy(&a);
	s->guard_hi = (uintptr_t)lo;
	s->guard_lo = (uintptr_t)lo - gs;
	if (sigsetjmp(tenv, 1) == 0)
		recurse(NULL, 0);
	else
		s->jumped = 1;
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	return NULL;
}

static uint8_t *volatile nullish = (uint8_t *)0x10;

/* one foreign fault of VT_KIND; returns 1 if left by siglongjmp */
static int foreign_fault(const char *kind, int nth, uint8_t *rb, uint8_t *anon, void **eaddr,
			 int *ecode)
{
	size_t P = vt_pg();
	if (strcmp(kind, "stack") == 0) {
		struct stk s = { .alt = malloc(ALT_SZ) };
		CK(s.alt != NULL);
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 256 * 1024);
		pthread_t t;
		CK_EQ(pthread_create(&t, &a, stack_thread, &s), 0);
		pthread_attr_destroy(&a);
		CK_EQ(pthread_join(t, NULL), 0);
		free(s.alt);
		*ecode = -1;
		*eaddr = NULL;
		if (s.jumped && strcmp(env_or("VT_PRIOR", ""), "plain") != 0)
			CK((uintptr_t)PRIOR.addr >= s.guard_lo &&
				   (uintptr_t)PRIOR.addr < s.guard_hi,
			   "si_addr %p outside the guard page [%#lx, %#lx)", PRIOR.addr,
			   (unsigned long)s.guard_lo, (unsigned long)s.guard_hi);
		return s.jumped;
	}
	struct acc x = { .write = 1, .v = 0x5a };
	if (strcmp(kind, "null") == 0) {
		x.p = nullish;
		x.write = 0;
		*ecode = SEGV_MAPERR;
	} else if (strcmp(kind, "noncanon") == 0) {
		/* x86-64: a general protection fault, si_code SI_KERNEL */
		x.p = (void *)(uintptr_t)0x8000000000000000ull;
		x.write = 0;
		*ecode = SI_KERNEL;
		*eaddr = NULL;
		if (sigsetjmp(tenv, 1))
			return 1;
		x.got = rd(x.p);
		return 0;
	} else if (strcmp(kind, "prot_none") == 0) {
		x.p = anon + (nth ? P + 33 : 17);
		*ecode = SEGV_ACCERR;
	} else if (strcmp(kind, "region_prot") == 0) {
		/* 1st: a volatile, unpurged page; then a non-volatile page; both
		 * mprotect'ed PROT_NONE by the application */
		x.p = rb + (nth ? 7 * P + 44 : 6 * P + 33);
		*ecode = SEGV_ACCERR;
	} else {
		CK(0, "unknown VT_KIND %s", kind);
	}
	*eaddr = x.p;
	if (sigsetjmp(tenv, 1))
		return 1;
	if (x.write)
		wr(x.p, x.v);
	else
		x.got = rd(x.p);
	return 0;
}

static void sc_foreign(void)
{
	size_t P = vt_pg();
	const char *kind = env_or("VT_KIND", "null");
	const char *prior = install_prior(); /* before the first vr_ctx_new */
	PRIOR.jump = 1;
	struct vr_ctx *c = sc_ctx(0);
	struct vr_region *r = busy_library(c, 8 * P);
	uint8_t *b = vr_region_base(r);
	struct sigaction cur;
	sigaction(SIGSEGV, NULL, &cur);
	CK(cur.sa_flags & SA_SIGINFO);
	CK(cur.sa_sigaction != prior_info);

	uint8_t *anon = mmap(NULL, 2 * P, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(anon != MAP_FAILED);
	CK_EQ(vr_mark(r, 6 * P, P), VR_INTACT);
	CK_EQ(mprotect(b + 6 * P, 2 * P, PROT_NONE), 0);
	uint64_t f0 = faults(c);
	int calls0 = atomic_load(&H.calls);

	void *eaddr;
	int ecode;
	int nfaults = 2;
	for (int nth = 0; nth < nfaults; nth++) {
		int jumped = foreign_fault(kind, nth, b, anon, &eaddr, &ecode);
		if (strcmp(prior, "none") == 0 || strcmp(prior, "ign") == 0 ||
		    (strcmp(prior, "resethand") == 0 && nth == 1)) {
			fprintf(stderr,
				"VT: survived foreign fault %d (%s) with prior handler %s\n", nth,
				kind, prior);
			_exit(3);
		}
		/* the fixer returns: the access completes */
		CK_EQ(jumped, strcmp(prior, "fixer") != 0);
		CK_EQ(PRIOR.hits, nth + 1);
		CK_EQ(PRIOR.sig, SIGSEGV);
		if (strcmp(prior, "plain") != 0) {
			CK(PRIOR.code > 0, "(si_code %d)", PRIOR.code);
			if (ecode > 0)
				CK_EQ(PRIOR.code, ecode);
			if (eaddr)
				CK(PRIOR.addr == eaddr, "si_addr %p, expected %p", PRIOR.addr,
				   eaddr);
		}
		CK_EQ(faults(c), f0);
		CK_EQ(atomic_load(&H.calls), calls0);
		if (strcmp(prior, "resethand") == 0) {
			fprintf(stderr, "VT: first foreign fault handled\n");
			fflush(stderr);
		}
	}

	/* the library still handles its own faults */
	CK_EQ(rd(b + 1), vt_pat(2, 1));
	CK_EQ(atomic_load(&H.calls), calls0 + 1);
	CK_EQ(mprotect(b + 6 * P, 2 * P, PROT_READ | PROT_WRITE), 0);

	/* and foreign faults still reach the prior handler once every region
	 * is gone */
	if (strcmp(kind, "region_prot") != 0 && strcmp(prior, "fixer") != 0) {
		vr_region_destroy(r);
		CK_EQ(foreign_fault(kind, 0, NULL, anon, &eaddr, &ecode), 1);
		CK_EQ(PRIOR.hits, nfaults + 1);
		if (eaddr && strcmp(prior, "plain") != 0)
			CK(PRIOR.addr == eaddr);
	}
	munmap(anon, 2 * P);
	vr_ctx_destroy(c);
}

/* SIGSEGV sent with tgkill to a thread blocked in read(): the prior
 * handler's SA_RESTART decides between EINTR and a restarted read, as
 * without the library (VT_RESTART=0|1, VT_NOLIB=1 runs without it) */
static struct {
	int p[2];
	atomic_int tid, ready;
	ssize_t n;
	int err;
} RS;

static void *blocked_reader(void *arg)
{
	(void)arg;
	char c;
	atomic_store(&RS.tid, vt_tid());
	atomic_store(&RS.ready, 1);
	RS.n = read(RS.p[0], &c, 1);
	RS.err = errno;
	return NULL;
}

static bool thread_sleeping(pid_t t)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)t);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 'S';
}

static void sc_segv_restart(void)
{
	bool restart = getenv("VT_RESTART") && strcmp(getenv("VT_RESTART"), "1") == 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prior_info;
	sa.sa_flags = SA_SIGINFO | (restart ? SA_RESTART : 0);
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	PRIOR.jump = 0;
	struct vr_ctx *c = NULL;
	if (!getenv("VT_NOLIB"))
		c = sc_ctx(VR_CTX_NO_MONITOR);
	CK_EQ(pipe2(RS.p, O_CLOEXEC), 0);
	pthread_t t;
	CK_EQ(pthread_create(&t, NULL, blocked_reader, NULL), 0);
	while (!atomic_load(&RS.ready))
		sched_yield();
	for (int i = 0; i < 2000 && !thread_sleeping(atomic_load(&RS.tid)); i++)
		usleep(1000);
	usleep(20000);
	CK_EQ(syscall(SYS_tgkill, getpid(), atomic_load(&RS.tid), SIGSEGV), 0);
	for (int i = 0; i < 2000 && __atomic_load_n(&PRIOR.hits, __ATOMIC_ACQUIRE) == 0; i++)
		usleep(1000);
	CK_EQ(__atomic_load_n(&PRIOR.hits, __ATOMIC_ACQUIRE), 1);
	CK_EQ(PRIOR.code, SI_TKILL);
	usleep(100000);
	CK_EQ(write(RS.p[1], "x", 1), 1);
	CK_EQ(pthread_join(t, NULL), 0);
	if (restart)
		CK_EQ(RS.n, 1);
	else
		CK(RS.n == -1 && RS.err == EINTR,
		   "read() returned %zd (%s): the prior handler has no SA_RESTART, so the kernel "
		   "alone would fail it with EINTR",
		   RS.n, RS.n < 0 ? strerror(RS.err) : "data");
	vr_ctx_destroy(c);
}

/* an application handler installed after the first vr_ctx_new that chains
 * to the one it replaced (the library's): both paths keep working */
static struct sigaction lib_sa, lib_bus_sa;
static volatile sig_atomic_t app_hits;

static void app_chaining(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *l = sig == SIGBUS ? &lib_bus_sa : &lib_sa;
	app_hits++;
	if (l->sa_flags & SA_SIGINFO)
		l->sa_sigaction(sig, si, uc);
	else
		CK(0, "the replaced handler has no SA_SIGINFO");
}

static void sc_chained_after(void)
{
	size_t P = vt_pg();
	setenv("VT_PRIOR", "siginfo", 1);
	install_prior();
	PRIOR.jump = 1;
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_chaining;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	CK_EQ(sigaction(SIGSEGV, &sa, &lib_sa), 0);
	/* the userfaultfd trap is a SIGBUS: the library's handler for it is
	 * chained to the same way (S32) */
	if (vr_trap_backend() == VR_TRAP_UFFD)
		CK_EQ(sigaction(SIGBUS, &sa, &lib_bus_sa), 0);
	struct vr_region *r = busy_library(c, 4 * P);
	uint8_t *b = vr_region_base(r);
	CK(app_hits >= 1); /* the fault in busy_library went through it */
	hreset(H_REFILL, 3);
	CK_EQ(rd(b + 5), vt_pat(3, 5)); /* [0, 2P) is purged */
	CK_EQ(atomic_load(&H.calls), 1);
	uint8_t *anon = mmap(NULL, P, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CK(anon != MAP_FAILED);
	int hits0 = app_hits;
	if (sigsetjmp(tenv, 1) == 0) {
		wr(anon + 3, 1);
		CK(0, "write to PROT_NONE returned");
	}
	CK_EQ(PRIOR.hits, 1);
	CK(PRIOR.addr == anon + 3);
	CK_EQ(app_hits, hits0 + 1);
	munmap(anon, P);
	vr_ctx_destroy(c);
}

/* SIGSEGV sent by kill / tgkill / sigqueue: VT_HOW, VT_PRIOR */
static void send_segv(const char *how)
{
	if (strcmp(how, "kill") == 0)
		CK_EQ(kill(getpid(), SIGSEGV), 0);
	else if (strcmp(how, "tgkill") == 0)
		CK_EQ(syscall(SYS_tgkill, getpid(), vt_tid(), SIGSEGV), 0);
	else if (strcmp(how, "sigqueue") == 0)
		CK_EQ(sigqueue(getpid(), SIGSEGV, (union sigval){ .sival_int = 42 }), 0);
	else
		CK(0, "unknown VT_HOW %s", how);
}

static void sc_user_segv(void)
{
	size_t P = vt_pg();
	const char *how = env_or("VT_HOW", "kill");
	const char *prior = install_prior();
	PRIOR.jump = 0;
	struct vr_ctx *c = sc_ctx(VR_CTX_NO_MONITOR);
	struct vr_region *r = busy_library(c, 4 * P);
	uint64_t f0 = faults(c);
	int calls0 = atomic_load(&H.calls);
	for (int n = 1; n <= 2; n++) {
		send_segv(how);
		for (int i = 0; i < 2000 && PRIOR.hits < n && strcmp(prior, "ign") != 0; i++)
			usleep(1000);
		if (strcmp(prior, "none") == 0) {
			fprintf(stderr, "VT: survived SIGSEGV sent by %s\n", how);
			_exit(3);
		}
		if (strcmp(prior, "ign") == 0) {
			CK_EQ(PRIOR.hits, 0);
			continue;
		}
		CK_EQ(PRIOR.hits, n);
		CK_EQ(PRIOR.sig, SIGSEGV);
		if (strcmp(prior, "siginfo") == 0) {
			int want = strcmp(how, "kill") == 0     ? SI_USER
				   : strcmp(how, "tgkill") == 0 ? SI_TKILL
								: SI_QUEUE;
			CK_EQ(PRIOR.code, want);
			CK_EQ(PRIOR.pid, getpid());
			if (want == SI_QUEUE)
				CK_EQ(PRIOR.value, 42);
		}
	}
	CK_EQ(faults(c), f0);
	CK_EQ(atomic_load(&H.calls), calls0);
	vr_region_destroy(r);
	vr_ctx_destroy(c);
}

static const struct vt_scenario scenarios[] = {
	{ "fault_rw", sc_fault_rw },
	{ "fault_split", sc_fault_split },
	{ "nested", sc_nested },
	{ "foreign_busy", sc_foreign_busy },
	{ "sigbus_info", sc_sigbus_info },
	{ "retry_count", sc_retry_count },
	{ "sigbus_context", sc_sigbus_context },
	{ "die", sc_die },
	{ "altstack", sc_altstack },
	{ "handler_calls_vr", sc_handler_calls_vr },
	{ "lazy_threads", sc_lazy_threads },
	{ "efault", sc_efault },
	{ "install", sc_install },
	{ "probe_short", sc_probe_short },
	{ "foreign", sc_foreign },
	{ "user_segv", sc_user_segv },
	{ "chained_after", sc_chained_after },
	{ "segv_restart", sc_segv_restart },
};

/* ------------------------------------------------------------------ */
/* the cmocka side                                                      */

/* fork + exec "<self> --scenario name" with VRANGE_TRAP=trap (NULL: unset)
 * and the NULL-terminated env list; stderr captured into cap if given */
static int run_sc(const char *name, const char *trap, const char *const *env, char *cap,
		  size_t capsz)
{
	int pfd[2] = { -1, -1 };
	if (cap && pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		vt_default_signals();
		unsetenv("VRANGE_TRAP");
		unsetenv("VRANGE_DEBUG");
		if (trap)
			setenv("VRANGE_TRAP", trap, 1);
		for (size_t i = 0; env && env[i]; i++)
			putenv(strdup(env[i]));
		if (cap)
			dup2(pfd[1], STDERR_FILENO);
		execl("/proc/self/exe", "vt-scenario", "--scenario", name, (char *)NULL);
		_exit(127);
	}
	if (cap) {
		size_t n = 0;
		close(pfd[1]);
		for (;;) {
			char tmp[4096];
			ssize_t k = read(pfd[0], tmp, sizeof(tmp));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break;
			fwrite(tmp, 1, (size_t)k, stderr); /* keep it in the test log */
			size_t room = capsz - 1 - n;
			size_t m = (size_t)k < room ? (size_t)k : room;
			memcpy(cap + n, tmp, m);
			n += m;
		}
		cap[n] = 0;
		close(pfd[0]);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

static const char *describe(int st)
{
	static char buf[64];
	if (st == -1)
		snprintf(buf, sizeof(buf), "runner failed");
	else if (WIFSIGNALED(st))
		snprintf(buf, sizeof(buf), "killed by signal %d (%s)", WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(st));
	return buf;
}

static bool is_skip(int st, const char *name, const char *trap)
{
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		print_message("[  SKIP    ] scenario %s with VRANGE_TRAP=%s: not supported here\n",
			      name, trap ? trap : "(default)");
		return true;
	}
	return false;
}

static void expect_ok_env(const char *name, const char *trap, const char *const *env)
{
	int st = run_sc(name, trap, env, NULL, 0);
	if (is_skip(st, name, trap))
		return;
	if (!(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("scenario %s (VRANGE_TRAP=%s, %s%s): %s, expected exit 0", name,
			 trap ? trap : "-", env && env[0] ? env[0] : "",
			 env && env[0] && env[1] ? " ..." : "", describe(st));
}

static void expect_sig_env(const char *name, const char *trap, const char *const *env, int sig)
{
	int st = run_sc(name, trap, env, NULL, 0);
	if (is_skip(st, name, trap))
		return;
	if (!(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == sig))
		fail_msg("scenario %s (VRANGE_TRAP=%s, %s%s): %s, expected death by signal %d (%s)",
			 name, trap ? trap : "-", env && env[0] ? env[0] : "",
			 env && env[0] && env[1] ? " ..." : "", describe(st), sig, strsignal(sig));
}

static void expect_ok_all(const char *name)
{
	for (size_t i = 0; i < NTRAPS; i++)
		expect_ok_env(name, traps[i], NULL);
}

static void test_fault_read_write(void **state)
{
	(void)state;
	expect_ok_all("fault_rw");
}

static void test_fault_range_after_split_and_join(void **state)
{
	(void)state;
	expect_ok_all("fault_split");
}

static void test_foreign_fault_during_purges(void **state)
{
	(void)state;
	expect_ok_all("foreign_busy");
}

static void test_nested_fault_errno_and_ctx_stats(void **state)
{
	(void)state;
	expect_ok_all("nested");
}

static void test_sigbus_siginfo_and_stats(void **state)
{
	(void)state;
	expect_ok_all("sigbus_info");
}

static void test_sigbus_default_action(void **state)
{
	(void)state;
	static const char *const modes[] = { "nohandler", "handler_sigbus" };
	for (size_t t = 0; t < NTRAPS; t++)
		for (size_t m = 0; m < 2; m++)
			for (int w = 0; w < 2; w++) {
				char me[64];
				snprintf(me, sizeof(me), "VT_MODE=%s", modes[m]);
				const char *env[] = { me, w ? "VT_ACCESS=write" : "VT_ACCESS=read",
						      NULL };
				expect_sig_env("die", traps[t], env, SIGBUS);
			}
}

static void test_sigbus_blocked_or_ignored(void **state)
{
	(void)state;
	static const char *const modes[] = { "blocked", "blocked_thread", "blocked_handler",
					     "ignored" };
	for (size_t t = 0; t < NTRAPS; t++)
		for (size_t m = 0; m < 4; m++) {
			char me[64];
			snprintf(me, sizeof(me), "VT_MODE=%s", modes[m]);
			const char *env[] = { me, NULL };
			expect_sig_env("die", traps[t], env, SIGBUS);
		}
}

static int count_lines(const char *buf, const char *needle, const char **first)
{
	int n = 0;
	*first = NULL;
	for (const char *l = buf; *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		char line[1024];
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		if (strstr(line, needle)) {
			if (!n)
				*first = l;
			n++;
		}
		l += len + (e ? 1 : 0);
	}
	return n;
}

static void test_sigbus_context(void **state)
{
	(void)state;
	expect_ok_all("sigbus_context");
}

static void test_retry_bounded(void **state)
{
	(void)state;
	expect_ok_all("retry_count");
	for (size_t t = 0; t < NTRAPS; t++) {
		char buf[16384];
		const char *env[] = { "VT_MODE=retry_loop", NULL };
		int st = run_sc("die", traps[t], env, buf, sizeof(buf));
		if (is_skip(st, "die", traps[t]))
			continue;
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS))
			fail_msg("retry loop (VRANGE_TRAP=%s): %s, expected SIGBUS", traps[t],
				 describe(st));
		const char *first;
		int calls = count_lines(buf, "VT-handler-call", &first);
		if (calls < 1 || calls > 9)
			fail_msg("retry loop (VRANGE_TRAP=%s): %d handler calls, expected 1..9",
				 traps[t], calls);
	}
}

/* VRANGE_DEBUG=1: one stderr line naming the region and the offset */
static void test_debug_sigbus_line(void **state)
{
	(void)state;
	static const char *const modes[] = { "nohandler", "handler_sigbus", "retry_loop" };
	for (size_t t = 0; t < NTRAPS; t++)
		for (size_t m = 0; m < 3; m++)
			for (int dbg = 0; dbg < 2; dbg++) {
				char buf[16384], me[64];
				snprintf(me, sizeof(me), "VT_MODE=%s", modes[m]);
				const char *env[] = { me, dbg ? "VRANGE_DEBUG=1" : NULL, NULL };
				int st = run_sc("die", traps[t], env, buf, sizeof(buf));
				if (is_skip(st, "die", traps[t]))
					continue;
				if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS))
					fail_msg("debug %s/%s: %s, expected SIGBUS", traps[t],
						 modes[m], describe(st));
				const char *vt = strstr(buf, "VT offset=");
				assert_non_null(vt);
				char hex[32], dec[32], reg[32];
				assert_int_equal(
					sscanf(vt, "VT offset=%31s offset_dec=%31s region=%31s",
					       hex, dec, reg),
					3);
				const char *line;
				int n = count_lines(buf, "SIGBUS", &line);
				if (!dbg) {
					if (n != 0)
						fail_msg("debug off %s/%s: %d SIGBUS lines on "
							 "stderr",
							 traps[t], modes[m], n);
					continue;
				}
				if (n != 1)
					fail_msg("VRANGE_DEBUG=1 %s/%s: %d stderr lines mention "
						 "SIGBUS, "
						 "expected 1",
						 traps[t], modes[m], n);
				char l[1024];
				const char *e = strchr(line, '\n');
				snprintf(l, sizeof(l), "%.*s",
					 (int)(e ? e - line : (long)strlen(line)), line);
				if (!strstr(l, hex) && !strstr(l, dec))
					fail_msg("SIGBUS line does not name offset %s: \"%s\"", hex,
						 l);
				if (!strstr(l, reg) && !strstr(l, "vt-die"))
					fail_msg("SIGBUS line does not name region %s: \"%s\"", reg,
						 l);
			}
}

static void test_altstack(void **state)
{
	(void)state;
	expect_ok_all("altstack");
}

static void test_handler_calls_vr(void **state)
{
	(void)state;
	expect_ok_all("handler_calls_vr");
}

static void test_lazy_regeneration_threads(void **state)
{
	(void)state;
	expect_ok_all("lazy_threads");
}

static void test_efault_syscalls(void **state)
{
	(void)state;
	expect_ok_all("efault");
}

static void test_handler_installation(void **state)
{
	(void)state;
	expect_ok_env("install", NULL, NULL);
}

static void test_probe_short(void **state)
{
	(void)state;
	expect_ok_env("probe_short", NULL, NULL);
}

static void foreign_matrix(const char *kind, bool both_traps)
{
	/* ign: a kernel fault is forced, as if the library were absent */
	static const char *const priors[] = { "none", "ign", "siginfo", "plain", "resethand" };
	for (size_t t = 0; t < (both_traps ? NTRAPS : 1); t++)
		for (size_t p = 0; p < 5; p++) {
			char ke[64], pe[64];
			snprintf(ke, sizeof(ke), "VT_KIND=%s", kind);
			snprintf(pe, sizeof(pe), "VT_PRIOR=%s", priors[p]);
			const char *env[] = { ke, pe, NULL };
			if (strcmp(priors[p], "none") == 0 || strcmp(priors[p], "ign") == 0) {
				expect_sig_env("foreign", traps[t], env, SIGSEGV);
			} else if (strcmp(priors[p], "resethand") == 0) {
				char buf[16384];
				int st = run_sc("foreign", traps[t], env, buf, sizeof(buf));
				if (is_skip(st, "foreign", traps[t]))
					continue;
				if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV))
					fail_msg("foreign %s resethand (%s): %s, expected SIGSEGV",
						 kind, traps[t], describe(st));
				if (!strstr(buf, "VT: first foreign fault handled"))
					fail_msg("foreign %s resethand (%s): the prior handler did "
						 "not "
						 "handle the first fault",
						 kind, traps[t]);
			} else {
				expect_ok_env("foreign", traps[t], env);
			}
		}
}

/* a prior handler that fixes the protection and returns */
static void test_foreign_fixed_by_prior(void **state)
{
	(void)state;
	for (size_t t = 0; t < NTRAPS; t++) {
		const char *env1[] = { "VT_KIND=prot_none", "VT_PRIOR=fixer", NULL };
		const char *env2[] = { "VT_KIND=region_prot", "VT_PRIOR=fixer", NULL };
		expect_ok_env("foreign", traps[t], env1);
		expect_ok_env("foreign", traps[t], env2);
	}
}

static void test_foreign_null(void **state)
{
	(void)state;
	foreign_matrix("null", false);
}

static void test_foreign_general_protection(void **state)
{
	(void)state;
#if defined(__x86_64__)
	foreign_matrix("noncanon", false);
#else
	skip();
#endif
}

static void test_foreign_prot_none(void **state)
{
	(void)state;
	foreign_matrix("prot_none", false);
}

static void test_foreign_stack_overflow(void **state)
{
	(void)state;
	foreign_matrix("stack", false);
}

static void test_foreign_region_mprotect(void **state)
{
	(void)state;
	foreign_matrix("region_prot", true);
}

static void test_user_segv_restart_semantics(void **state)
{
	(void)state;
	/* the kernel's behaviour first (no library), then with the library */
	const char *nolib0[] = { "VT_NOLIB=1", "VT_RESTART=0", NULL };
	const char *nolib1[] = { "VT_NOLIB=1", "VT_RESTART=1", NULL };
	const char *lib0[] = { "VT_RESTART=0", NULL };
	const char *lib1[] = { "VT_RESTART=1", NULL };
	expect_ok_env("segv_restart", NULL, nolib0);
	expect_ok_env("segv_restart", NULL, nolib1);
	expect_ok_env("segv_restart", NULL, lib1);
	expect_ok_env("segv_restart", NULL, lib0);
}

static void test_app_handler_installed_later_chains(void **state)
{
	(void)state;
	expect_ok_all("chained_after");
}

static void test_user_sent_segv(void **state)
{
	(void)state;
	static const char *const hows[] = { "kill", "tgkill", "sigqueue" };
	static const char *const priors[] = { "none", "siginfo", "plain", "ign" };
	for (size_t h = 0; h < 3; h++)
		for (size_t p = 0; p < 4; p++) {
			char he[64], pe[64];
			snprintf(he, sizeof(he), "VT_HOW=%s", hows[h]);
			snprintf(pe, sizeof(pe), "VT_PRIOR=%s", priors[p]);
			const char *env[] = { he, pe, NULL };
			if (strcmp(priors[p], "none") == 0)
				expect_sig_env("user_segv", NULL, env, SIGSEGV);
			else
				expect_ok_env("user_segv", NULL, env);
		}
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), SC_TIMEOUT);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fault_read_write),
		cmocka_unit_test(test_fault_range_after_split_and_join),
		cmocka_unit_test(test_nested_fault_errno_and_ctx_stats),
		cmocka_unit_test(test_sigbus_siginfo_and_stats),
		cmocka_unit_test(test_sigbus_default_action),
		cmocka_unit_test(test_sigbus_blocked_or_ignored),
		cmocka_unit_test(test_sigbus_context),
		cmocka_unit_test(test_retry_bounded),
		cmocka_unit_test(test_debug_sigbus_line),
		cmocka_unit_test(test_altstack),
		cmocka_unit_test(test_handler_calls_vr),
		cmocka_unit_test(test_lazy_regeneration_threads),
		cmocka_unit_test(test_efault_syscalls),
		cmocka_unit_test(test_handler_installation),
		cmocka_unit_test(test_probe_short),
		cmocka_unit_test(test_foreign_null),
		cmocka_unit_test(test_foreign_prot_none),
		cmocka_unit_test(test_foreign_general_protection),
		cmocka_unit_test(test_foreign_stack_overflow),
		cmocka_unit_test(test_foreign_region_mprotect),
		cmocka_unit_test(test_foreign_fault_during_purges),
		cmocka_unit_test(test_foreign_fixed_by_prior),
		cmocka_unit_test(test_user_sent_segv),
		cmocka_unit_test(test_user_segv_restart_semantics),
		cmocka_unit_test(test_app_handler_installed_later_chains),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
