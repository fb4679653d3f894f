/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fault.c - turning traps on discarded pages into fault callbacks or SIGBUS
 * (API S13)
 *
 * One process-wide SIGSEGV handler (SA_SIGINFO|SA_ONSTACK|SA_NODEFER),
 * installed by the first successful vr_ctx_new(), keeping the previous
 * sigaction; under the userfaultfd backend (trap-uffd.c, S32) a SIGBUS
 * handler too, installed the same way at the same time, since that trap
 * arrives as SIGBUS BUS_ADRERR.  Both entries share one path (trap()):
 * for a kernel-generated fault it
 *   1. finds the region by address in the lock-free registry;
 *   2. reads the region's map without a lock (a seqlock, see SEQLOCK in mem/mem.h
 *      and vr_map_lookup_racy in map/map.h)
 *      to learn whether the page is a whole page of a purged range;
 *   3. if so, calls the region's vr_fault_fn outside the lock, or delivers
 *      SIGBUS (BUS_ADRERR, si_addr exact) with the kernel's forced-signal
 *      semantics: a blocked or ignored SIGBUS is unblocked and reset to
 *      the default action;
 *   4. if not, the fault may be stale (the page was restored between the
 *      trap and the lookup): the access is re-run once; a second fault at
 *      the same address with no arm/disarm in the region since then is
 *      foreign and goes to the previous handler.
 * Faults outside every region and signals sent by kill/tgkill/sigqueue
 * (si_code <= 0) go straight to the previous handler of that signal,
 * called as its SA_SIGINFO flag says, with its sa_mask blocked,
 * SA_RESETHAND honoured; with no previous handler they get the default
 * action.
 *
 * The SIGBUS the library delivers itself (step 3) is queued to the thread
 * with rt_tgsigqueueinfo and si_code BUS_ADRERR, which the kernel keeps
 * as given for a signal a process sends itself, while SIGBUS is blocked
 * in the handler and unblocked in the interrupted context's mask: it
 * arrives when the library's handler returns, at the faulting
 * instruction, as the kernel's own SIGBUS would.  Sent unblocked, it
 * arrived nested in the library's handler: the application's handler was
 * given the library's context (a handler that moves the instruction
 * pointer to a recovery point, as for a SIGBUS past the end of a file,
 * then re-ran the faulting access for ever) on a second signal frame
 * (an alternate stack of SIGSTKSZ overflowed).  It cannot be told from a
 * userfaultfd SIGBUS by its siginfo, so the SIGBUS entry knows it by a
 * per-thread record (ftls_pending) and hands it to the application's
 * handler (the one it replaced) untouched, never takes it for a trap.
 *
 * Only async-signal-safe calls are made here: sigaction, pthread_sigmask,
 * syscall(), write, sched_yield, atomics, and -- only when the lock-free
 * read keeps colliding with writers -- pthread_mutex_lock on a region lock
 * that this thread cannot hold (checked through vr_tls_held).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "vrange.h"
#include "config.h"
#include "coop.h"
#include "base/refault.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/callback.h"
#include "base/registry.h"
#include "fault.h"
#include "region/region.h"
#include "obj/obj.h"
#include "ctx.h"
#include "mem/mem-shared.h"

#if HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

/* the handlers the library replaced, per signal; written once before the
 * library's handler goes live (prev_bus only under the uffd backend) */
static struct sigaction prev_segv, prev_bus;
static _Atomic bool installed, bus_installed;

/* the address of the library's SIGBUS queued to this thread that the
 * SIGBUS entry has not seen yet (deliver_sigbus), or NULL */
static __thread void *volatile ftls_pending __attribute__((tls_model("initial-exec")));
/* this thread is sending itself the library's SIGBUS nested (bus_handler) */
static __thread volatile bool ftls_delivering __attribute__((tls_model("initial-exec")));

/* ---- async-signal-safe formatting for VRANGE_DEBUG ---- */
static char *put_str(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

static char *put_hex(char *p, uint64_t v)
{
	char tmp[17];
	int n = 0;
	*p++ = '0';
	*p++ = 'x';
	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* a short backtrace of the faulting context, appended to p; local
 * libunwind cursors may be used from signal handlers */
static char *put_backtrace(char *p, char *end, ucontext_t *uc)
{
#if HAVE_LIBUNWIND
	unw_cursor_t cur;
	if (unw_init_local2(&cur, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) < 0)
		return p;
	p = put_str(p, " backtrace:");
	for (int i = 0; i < 6 && end - p > 160; i++) {
		char name[96];
		unw_word_t ip = 0, offp = 0;
		unw_get_reg(&cur, UNW_REG_IP, &ip);
		p = put_str(p, " ");
		p = put_hex(p, ip);
		if (unw_get_proc_name(&cur, name, sizeof(name), &offp) == 0) {
			name[sizeof(name) - 1] = 0;
			p = put_str(p, "(");
			p = put_str(p, name);
			p = put_str(p, "+");
			p = put_hex(p, offp);
			p = put_str(p, ")");
		}
		if (unw_step(&cur) <= 0)
			break;
	}
#else
	(void)end;
	(void)uc;
#endif
	return p;
}

/* one line on stderr before a SIGBUS is delivered (VRANGE_DEBUG=1); takes
 * values, not the region: a fault handler may have destroyed it */
static void log_sigbus(uintptr_t region, uint64_t off, uint64_t start, uint64_t len, ucontext_t *uc)
{
	char buf[1024], *p = buf;
	p = put_str(p, "vrange: SIGBUS on discarded page: region ");
	p = put_hex(p, region);
	p = put_str(p, " offset ");
	p = put_hex(p, off);
	p = put_str(p, " range ");
	p = put_hex(p, start);
	p = put_str(p, "+");
	p = put_hex(p, len);
	p = put_backtrace(p, buf + sizeof(buf), uc);
	p = put_str(p, "\n");
	*p = 0;
	vr_log_raw(buf);
}

/* ---- delivery ---- */
static void set_default(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* block or unblock sig in this thread */
static void mask_one(int how, int sig)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, sig);
	pthread_sigmask(how, &m, NULL);
}

static void bus_handler(int sig, siginfo_t *si, void *uc);

static void send_sigbus(void *addr)
{
	siginfo_t info;
	memset(&info, 0, sizeof(info));
	info.si_signo = SIGBUS;
	info.si_code = BUS_ADRERR;
	info.si_addr = addr;
	syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGBUS, &info);
}

/* SIGBUS for the access of uc at addr, arriving when the signal handler
 * that called this returns (see the top of this file); the caller returns
 * straight away */
static void deliver_sigbus(void *addr, ucontext_t *uc)
{
	struct sigaction cur;
	sigaction(SIGBUS, NULL, &cur);
	/* our own SIGBUS entry (uffd backend) passes the signal on to the
	 * handler it replaced: that one decides what happens */
	bool ours = atomic_load(&bus_installed) && (cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_sigaction == bus_handler;
	struct sigaction app = ours ? prev_bus : cur;
	/* the mask the access runs with again: the handler's own mask (an
	 * application handler that chained here may block SIGBUS) is gone
	 * by then */
	bool blocked = sigismember(&uc->uc_sigmask, SIGBUS);
	bool plain = !(app.sa_flags & SA_SIGINFO);
	bool ignored = plain && app.sa_handler == SIG_IGN;
	/* the kernel's forced-signal rule: blocked or ignored -> default;
	 * and with no application handler the default action is due */
	if (blocked || ignored || (ours && plain && app.sa_handler == SIG_DFL))
		set_default(SIGBUS);
	sigdelset(&uc->uc_sigmask, SIGBUS);
	mask_one(SIG_BLOCK, SIGBUS);
	ftls_pending = addr;
	send_sigbus(addr);
}

/* to the handler the library replaced for sig (*p: prev_segv or prev_bus) */
static void forward(int sig, siginfo_t *si, void *uc, struct sigaction *pp)
{
	struct sigaction p = *pp;
	bool from_kernel = si->si_code > 0;
	if (!(p.sa_flags & SA_SIGINFO) && (p.sa_handler == SIG_DFL || p.sa_handler == SIG_IGN)) {
		if (!from_kernel && p.sa_handler == SIG_IGN)
			return;
		/* the default action, as if the library were absent */
		set_default(sig);
		if (!from_kernel)
			syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), sig,
				si);
		/* a kernel fault re-faults on return and kills the process */
		return;
	}
	if (p.sa_flags & SA_RESETHAND) {
		pp->sa_handler = SIG_DFL;
		pp->sa_flags = 0;
	}
	sigset_t m = p.sa_mask, old;
	if (!(p.sa_flags & SA_NODEFER))
		sigaddset(&m, sig);
	pthread_sigmask(SIG_BLOCK, &m, &old);
	if (p.sa_flags & SA_SIGINFO)
		p.sa_sigaction(sig, si, uc);
	else
		p.sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- lock-free lookup of the purged range under a fault ---- */
struct lookup {
	bool claimed; /* off is on a whole page of a purged range */
	uint64_t start, len, gen;
	vr_fault_fn fn;
	void *arg;
};

/* one attempt at reading the map; false if it is not worth validating.
 * The walk itself is vr_map_lookup_racy() (its rules are in map/map.h). */
static bool lookup_once(struct vr_region *r, uint64_t off, struct lookup *lk)
{
	struct vr_range rg;
	int found = vr_map_lookup_racy(r->map, off, &rg);
	if (found < 0)
		return false;
	uint64_t gen = atomic_load_explicit(&r->trap_gen, memory_order_relaxed);
	if (r->shm) /* discards and restores by other processes count too */
		gen ^= atomic_load_explicit(&r->shm->trap_epoch, memory_order_relaxed) << 40;
	*lk = (struct lookup){ .gen = gen };
	uint64_t p0, p1;
	if (found && (rg.age_flags & VR_RANGE_PURGED) &&
	    vr_whole_pages(rg.start, rg.end, r->map->page_shift, &p0, &p1) && off >= p0 &&
	    off < p1) {
		lk->claimed = true;
		lk->start = rg.start;
		lk->len = rg.end - rg.start;
		lk->fn = __atomic_load_n(&r->fault_fn, __ATOMIC_RELAXED);
		lk->arg = __atomic_load_n(&r->fault_arg, __ATOMIC_RELAXED);
	}
	return true;
}

/* Lock-free in the common case: retried until the map was read with no
 * writer inside (seq even and unchanged).  A reader can starve while
 * other threads keep the region locked (a purge in progress, a storm of
 * marks): after MAX_TRIES it takes the region lock instead and waits its
 * turn, which is safe because the caller checked that this thread does
 * not hold it (see SEQLOCK in mem/mem.h). */
#define MAX_TRIES 64
static void lookup(struct vr_region *r, uint64_t off, struct lookup *lk)
{
	for (int tries = 0; tries < MAX_TRIES; tries++) {
		unsigned s1 = atomic_load_explicit(r->seqp, memory_order_acquire);
		if (s1 & 1) {
			sched_yield();
			continue;
		}
		bool ok = lookup_once(r, off, lk);
		atomic_thread_fence(memory_order_acquire);
		if (ok && atomic_load_explicit(r->seqp, memory_order_relaxed) == s1)
			return;
	}
	vr_region_lock_raw(r);
	lookup_once(r, off, lk); /* nobody writes: one walk is exact */
	vr_region_unlock_raw(r);
}

/* ---- one regeneration per purge (lazy refill) ----
 * The first thread that faults on a purged range claims it in the
 * region's small table and calls the handler; threads that fault on the
 * same range meanwhile wait for it to return, then re-run their access:
 * with the documented pattern (fill through vr_region_fill, then
 * vr_unmark) they see the regenerated data, never zeros, and the data is
 * generated once.  A thread that is itself inside a fault handler does
 * not wait (two handlers waiting for each other's ranges would deadlock),
 * nor does anyone when the table is full; a wait ends after about a
 * second even if the handler never returns (it left with siglongjmp). */
#define WAIT_SPINS 100000
#define FILL_SLOTS 32

/* process-wide, never in the region: a handler may destroy its region
 * before the slot is released.  A key is a hash of (region, range start);
 * a collision only makes a thread wait for an unrelated range. */
static _Atomic uint64_t filling[FILL_SLOTS];

static uint64_t fill_key(const struct vr_region *r, uint64_t start)
{
	uint64_t x = (uint64_t)(uintptr_t)r ^ (start * 0x9e3779b97f4a7c15ull);
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return (x ^ (x >> 29)) | 1;
}

static bool fill_busy(uint64_t key)
{
	for (int i = 0; i < FILL_SLOTS; i++)
		if (atomic_load_explicit(&filling[i], memory_order_acquire) == key)
			return true;
	return false;
}

/* the slot claimed for key, or -1: *wait when another thread holds it */
static int claim_range(uint64_t key, bool *wait)
{
	*wait = fill_busy(key);
	if (*wait)
		return -1;
	for (int i = 0; i < FILL_SLOTS; i++) {
		uint64_t zero = 0;
		if (atomic_compare_exchange_strong(&filling[i], &zero, key))
			return i;
		if (zero == key) {
			*wait = true;
			return -1;
		}
	}
	return -1; /* full: no coordination */
}

static void wait_range(uint64_t key)
{
	/* nanosleep is a cancellation point: a cancel pending in the
	 * faulting thread acts after its access, not in here (vrange.h) */
	vr_nocancel_enter();
	for (long spins = 0; spins < WAIT_SPINS && fill_busy(key); spins++) {
		if (spins > 64) {
			struct timespec ts = { 0, 10000 }; /* 10 us */
			nanosleep(&ts, NULL);
		} else {
			sched_yield();
		}
	}
	vr_nocancel_leave();
}

/* the kernel cannot read the byte at addr now (a trap, or PROT_NONE) */
static bool unreadable(void *addr)
{
	uint8_t c;
	struct iovec to = { &c, 1 }, from = { addr, 1 };
	int saved = errno;
	bool no = syscall(SYS_process_vm_readv, getpid(), &to, 1UL, &from, 1UL, 0UL) != 1;
	errno = saved;
	return no;
}

/* many re-runs in a row at addr, each finding it not discarded: a foreign
 * fault in a region whose traps keep changing, or ours, starved by a
 * thread that purges and unmarks its range back to back (refault.h).
 * Under the region lock no trap changes: a page outside every purged
 * range that the kernel cannot read is not the library's trap; otherwise
 * (a trap gone, or a purge just found) the access re-runs. */
static bool foreign_after_reruns(struct vr_region *r, void *addr)
{
	struct lookup lk;
	vr_region_lock_raw(r);
	lookup_once(r, (uint64_t)((uint8_t *)addr - r->base), &lk);
	bool foreign = !lk.claimed && unreadable(addr);
	vr_region_unlock_raw(r);
	return foreign;
}

/* a fault the lookup did not claim (the page is not in a purged range
 * now): a marker this mapping of a shared file has not taken off yet, a
 * range unmarked or refilled since (re-run the access), or not ours */
static void unclaimed(struct vr_region *r, void *addr, uint64_t gen, int sig, siginfo_t *si,
		      void *ucv, struct sigaction *pp)
{
	if (r->coop_m && !vr_coop_caught_up(r->coop_m)) {
		/* wait for the listener (mem-trap-coop.c), then re-run */
		vr_trap_coop_wait(r);
		return;
	}
	/* the re-fault record: base/refault.h */
	int why = vr_refault_rerun(addr, gen);
	if (why == VR_REFAULT_FOREIGN || (why == VR_REFAULT_MANY && foreign_after_reruns(r, addr)))
		forward(sig, si, ucv, pp); /* faulted again with nothing changed */
}

/* a fault on region r's memory, r's lock not held by this thread */
static void region_fault(struct vr_region *r, int sig, siginfo_t *si, void *ucv,
			 struct sigaction *pp)
{
	ucontext_t *uc = ucv;
	void *addr = si->si_addr;
	uint64_t off = (uint64_t)((uint8_t *)addr - r->base);
	struct vr_ctx *c = r->ctx;

	/* the handler read by the lookup is called inside a callback
	 * section, so that replacing it waits for this call (callback.c) */
	vr_held_enter_signal();
	unsigned long cb = vr_cb_enter();
	struct lookup lk;
	lookup(r, off, &lk);
	if (!lk.claimed) {
		vr_cb_leave(cb);
		vr_held_leave_signal();
		unclaimed(r, addr, lk.gen, sig, si, ucv, pp);
		return;
	}
	int slot = -1;
	uint64_t key = fill_key(r, lk.start);
	if (lk.fn && vr_tls_held.level == 1) {
		bool wait;
		slot = claim_range(key, &wait);
		if (wait) {
			/* another thread regenerates this range: wait, then
			 * re-run the access (no fault counted: none handled) */
			vr_cb_leave(cb);
			vr_held_leave_signal();
			wait_range(key);
			return;
		}
	}
	atomic_fetch_add_explicit(&c->faults, 1, memory_order_relaxed);
	bool allowed = vr_refault_handler_allowed(addr, lk.gen);
	/* from here on r may be freed by the handler: only values are used */
	bool fixed = lk.fn && allowed &&
		     lk.fn(r, (size_t)lk.start, (size_t)lk.len, addr, lk.arg) == VR_FAULT_RETRY;
	if (slot >= 0)
		atomic_store_explicit(&filling[slot], 0, memory_order_release);
	vr_cb_leave(cb);
	vr_held_leave_signal();
	if (fixed)
		return;
	/* the SIGBUS handler may leave with siglongjmp: nothing of ours is
	 * left open when it runs */
	vr_refault_forget();
	if (vr_debug_stderr())
		log_sigbus((uintptr_t)r, off, lk.start, lk.len, uc);
	deliver_sigbus(addr, uc);
}

/* the fault path shared by the SIGSEGV and SIGBUS entries: pp is the
 * handler the library replaced for sig */
static void trap(int sig, siginfo_t *si, void *ucv, struct sigaction *pp)
{
	int saved_errno = errno;
	struct vr_region *r = si->si_code > 0 ? vr_registry_lookup(si->si_addr) : NULL;
	if (!r) {
		if (!vr_obj_fault(si, ucv, deliver_sigbus))
			forward(sig, si, ucv, pp);
	} else if (vr_held(r->lockp)) {
		/* an asynchronous signal handler touched a trapped page of the
		 * region its own thread is changing: waiting would deadlock */
		atomic_fetch_add_explicit(&r->ctx->faults, 1, memory_order_relaxed);
		deliver_sigbus(si->si_addr, ucv);
	} else {
		region_fault(r, sig, si, ucv, pp);
	}
	errno = saved_errno;
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	trap(sig, si, uc, &prev_segv);
}

/* under the uffd backend: a SIGBUS BUS_ADRERR from the kernel on a region
 * is a trap; the library's own SIGBUS (ftls_pending), signals sent by a
 * process and every other SIGBUS go to the handler it replaced */
static void bus_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;
	if (ftls_delivering) {
		/* the library's SIGBUS given back nested (below), passed on
		 * here once more: on as the kernel's would go */
		ftls_delivering = false;
		forward(sig, si, uc, &prev_bus);
	} else if (si->si_code == BUS_ADRERR && ftls_pending && si->si_addr == ftls_pending) {
		/* the library's own SIGBUS, never a trap: straight from the
		 * kernel when this entry is the disposition (on to the handler
		 * it replaced), or passed on to this entry by an application
		 * handler installed later that chains (S32): then delivered
		 * once more, nested, to that handler, which sees it while it
		 * is in its chaining state (as under the uffd backend, where
		 * the trap itself comes through its chain) */
		ftls_pending = NULL;
		struct sigaction cur;
		sigaction(SIGBUS, NULL, &cur);
		if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == bus_handler) {
			forward(sig, si, uc, &prev_bus);
		} else {
			/* blocked in that handler (no SA_NODEFER): the
			 * kernel's forced-signal rule */
			sigset_t m;
			pthread_sigmask(SIG_SETMASK, NULL, &m);
			if (sigismember(&m, SIGBUS)) {
				set_default(SIGBUS);
				mask_one(SIG_UNBLOCK, SIGBUS);
			}
			ftls_delivering = true;
			send_sigbus(si->si_addr);
			ftls_delivering = false;
		}
	} else if (si->si_code != BUS_ADRERR) {
		forward(sig, si, uc, &prev_bus);
	} else {
		trap(sig, si, uc, &prev_bus);
	}
	errno = saved_errno;
}

static void atfork_child(void)
{
	/* ranges being regenerated by threads that do not exist here */
	for (int i = 0; i < FILL_SLOTS; i++)
		atomic_store(&filling[i], 0);
}

const struct vr_atfork vr_fault_atfork = { 0, NULL, NULL, atfork_child };

/* query first, then install: sigaction(sig, &new, &old) fills old only
 * after new is live, and a foreign signal in another thread in that
 * window would find *prevp empty.  vr_global_lock held. */
static int install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *prevp)
{
	struct sigaction sa, cur;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = fn;
	if (sigaction(sig, NULL, &cur) < 0)
		return -errno;
	*prevp = cur;
	/* SA_RESTART only matters for signals that interrupt a system call,
	 * i.e. the kill()-sent ones we forward: keep the previous handler's
	 * choice so it sees EINTR exactly as before */
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | (cur.sa_flags & SA_RESTART);
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL) < 0 ? -errno : 0;
}

int vr_fault_install(void)
{
	int err = 0;
	/* S32: the SIGBUS entry wherever userfaultfd traps (the backend, or
	 * shared regions) */
	bool bus = vr_trap_current() == VR_TRAP_UFFD || vr_trap_uffd_works();
	if (atomic_load(&installed) && (!bus || atomic_load(&bus_installed)))
		return 0;
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	/* SIGBUS first: once SIGSEGV is in, this is never retried */
	if (bus && !atomic_load(&bus_installed)) {
		err = install(SIGBUS, bus_handler, &prev_bus);
		if (!err)
			atomic_store(&bus_installed, true);
	}
	if (!err && !atomic_load(&installed)) {
		err = install(SIGSEGV, segv_handler, &prev_segv);
		if (!err)
			atomic_store(&installed, true);
	}
	vr_unlock(&vr_global_lock);
	return err;
}
