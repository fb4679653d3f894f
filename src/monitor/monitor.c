/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor.c - the memory-pressure monitor: one thread per ctx
 *
 * The thread runs a SET of sources together: one pressure source (the
 * first of cgroup v2, system PSI, cgroup v1, /proc/meminfo that works;
 * VRANGE_MONITOR forces one) and the limit watcher (monitor-limit.c) when the
 * process has a memory limit.  Pressure sources signal levels that the
 * policy (monitor-policy.c) coalesces and rate-limits; the thread acts on them
 * through vr_ctx_notify_pressure() (API S11).  The limit watcher purges
 * to its target itself and publishes the ctx's budget (S34).  Both take
 * the ctx's purge lock and one region lock at a time inside the purge
 * engine: the monitor holds no library lock of its own, ever, and blocks
 * only in poll().
 *
 * A monitor that its cgroup cannot stall: the thread pre-faults 64 KiB of
 * its stack, mlock()s its stack top and the library's code where
 * RLIMIT_MEMLOCK allows (failure ignored), and with a limit to watch asks
 * for SCHED_FIFO priority 1, else nice -5 (EPERM ignored).  The purge
 * path opens no file and allocates nothing: the purge heap has room for
 * every region, reserved when the region is created.  Thresholds and latencies: doc/monitor.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "base/fork.h"
#include "base/sys.h"
#include "base/log.h"

#define MON_MIN_LOOP_MS 10            /* at most 100 wake-ups handled per second */
#define MON_STACK_PREFAULT (64 << 10) /* stack touched and locked at start */

static const char *level_name(int level)
{
	return level == VR_PRESSURE_CRITICAL   ? "critical"
	       : level == VR_PRESSURE_MODERATE ? "moderate"
					       : "none";
}

void mon_raise(struct vr_monitor *m, int level, const char *why)
{
	if (level == VR_PRESSURE_NONE)
		return;
	mon_pol_raise(&m->pol, level);
	vr_dbg("monitor: %s: %s -> %s pressure", vr_monitor_source_name(m->primary), why,
	       level_name(level));
}

void mon_hold(struct vr_monitor *m, struct mon_hold *h, int level, uint64_t now, const char *why)
{
	if (mon_hold_update(h, level, now))
		mon_raise(m, level, why);
}

static void act(struct vr_monitor *m, uint64_t now)
{
	unsigned coalesced;
	int l;
	while ((l = mon_pol_take(&m->pol, now, &coalesced)) != VR_PRESSURE_NONE) {
		uint64_t file;
		if (mon_limit_file_first(m, &file)) {
			vr_dbg("monitor: %s pressure (%u coalesced) left to the kernel: %" PRIu64
			       " bytes of reclaimable file cache in the limited cgroup (A3)",
			       level_name(l), coalesced, file);
			continue;
		}
		ssize_t got = vr_ctx_notify_pressure(m->ctx, (enum vr_pressure)l);
		vr_dbg("monitor: acted on %s pressure (%u coalesced): %zd bytes reclaimed",
		       level_name(l), coalesced, got);
	}
}

/* ---------------------------------------------------------------------- */
/* the source set                                                          */

static const struct mon_source *const primaries[] = {
	&mon_src_cgroup2,
	&mon_src_psi,
	&mon_src_cgroup1,
	&mon_src_meminfo,
};
/* every source the loop runs, primary candidates first */
static const struct mon_source *const all_sources[] = {
	&mon_src_cgroup2, &mon_src_psi, &mon_src_cgroup1, &mon_src_meminfo, &mon_src_limit,
};

static void publish(struct vr_monitor *m)
{
	atomic_store(&m->ctx->monitor_source, m->primary);
	/* the limit watcher waiting for a limit to appear is not shown */
	unsigned hide = m->lim.kind ? 0 : 1u << VR_MONITOR_LIMIT;
	atomic_store(&m->ctx->monitor_sources, m->active & ~hide);
}

static void activate(struct vr_monitor *m, const struct mon_source *s)
{
	m->active |= 1u << s->id;
	m->next_check[s->id] = s->check && s->period_ms ? vr_now_ms() + s->period_ms : 0;
}

static void deactivate(struct vr_monitor *m, const struct mon_source *s)
{
	s->close(m);
	m->active &= ~(1u << s->id);
	m->next_check[s->id] = 0;
}

/* the first pressure source that works, starting at primaries[first] */
static void select_primary(struct vr_monitor *m, size_t first)
{
	m->primary = VR_MONITOR_NONE;
	for (size_t i = first; i < VR_ARRAY_SIZE(primaries); i++) {
		const struct mon_source *s = primaries[i];
		if (m->forced != MON_AUTO && m->forced != s->id)
			continue;
		if (s->open(m) == 0) {
			m->primary = s->id;
			activate(m, s);
			break;
		}
		s->close(m);
	}
	vr_dbg("monitor: pressure source %s%s",
	       m->forced == VR_MONITOR_NONE ? "off" : vr_monitor_source_name(m->primary),
	       m->forced != MON_AUTO ? " (VRANGE_MONITOR)" : "");
}

static void select_sources(struct vr_monitor *m)
{
	select_primary(m, 0);
	/* the limit watcher runs beside any pressure source; VRANGE_MONITOR=off
	 * stops it too, VRANGE_MEMORY_LIMIT=off alone */
	if (m->forced != VR_MONITOR_NONE) {
		if (mon_src_limit.open(m) == 0)
			activate(m, &mon_src_limit);
		else
			mon_src_limit.close(m);
	}
	publish(m);
}

static void source_lost(struct vr_monitor *m, const struct mon_source *s)
{
	vr_dbg("monitor: %s lost; %s", vr_monitor_source_name(s->id),
	       s->id == VR_MONITOR_LIMIT ? "limit watcher stopped" : "falling back");
	deactivate(m, s);
	if (s->id != VR_MONITOR_LIMIT) {
		size_t next = VR_ARRAY_SIZE(primaries);
		for (size_t i = 0; i < VR_ARRAY_SIZE(primaries); i++)
			if (primaries[i] == s)
				next = i + 1;
		select_primary(m, next);
	}
	publish(m);
}

static int parse_forced(void)
{
	const char *e = secure_getenv("VRANGE_MONITOR");
	if (!e || !*e)
		return MON_AUTO;
	if (strcmp(e, "off") == 0)
		return VR_MONITOR_NONE;
	for (int s = VR_MONITOR_CGROUP2; s <= VR_MONITOR_LIMIT; s++)
		if (strcmp(e, vr_monitor_source_name(s)) == 0)
			return s;
	vr_dbg("monitor: unknown VRANGE_MONITOR=%s ignored", e);
	return MON_AUTO;
}

/* ---------------------------------------------------------------------- */
/* hardening: the thread must not stall in the reclaim of its own cgroup   */

/* pid of the process whose library code is mlock()ed: memory locks are
 * not inherited across fork(), so a fork child locks it again */
static _Atomic pid_t code_locked;

/* the ELF header of the object this file is linked into (the linker
 * defines it: libvrange.so, or the executable that links libvrange.a) */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

/* mlock the loadable segment that holds self, found from the object's own
 * program headers.  Not dl_iterate_phdr: it takes the dynamic loader's
 * lock, which a fork child inherits held when any parent thread was in it
 * at the fork (this thread was, at its start: a child's vr_ctx_new then
 * hung for ever in its own monitor thread's start) */
static void lock_code(const void *self)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	uintptr_t bias = 0, addr = (uintptr_t)self;
	bool found = false;
	/* the segment that maps the header (file offset 0) gives the bias */
	for (int i = 0; i < eh->e_phnum && !found; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			bias = (uintptr_t)eh - ph[i].p_vaddr;
			found = true;
		}
	for (int i = 0; found && i < eh->e_phnum; i++) {
		uintptr_t lo = bias + ph[i].p_vaddr;
		if (ph[i].p_type != PT_LOAD || addr < lo || addr >= lo + ph[i].p_memsz)
			continue;
		uintptr_t pg = (uintptr_t)vr_page_size();
		uintptr_t a = lo & ~(pg - 1), b = (lo + ph[i].p_memsz + pg - 1) & ~(pg - 1);
		if (mlock((void *)a, b - a) < 0)
			vr_dbg("monitor: mlock of the library's code: %m (ignored)");
		return;
	}
	vr_dbg("monitor: the library's code segment not found: not locked");
}

static __attribute__((noinline)) void prefault_stack(void)
{
	volatile char buf[MON_STACK_PREFAULT - 4096];
	for (size_t i = 0; i < sizeof(buf); i += 1024)
		buf[i] = 0;
	__asm__ volatile("" : : "r"(buf) : "memory");
}

/* locks the top of the stack; the span to unlock, or len 0 */
static void harden(struct vr_monitor *m, void **lk, size_t *lklen)
{
	*lklen = 0;
	prefault_stack();
	pthread_attr_t a;
	void *base;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		if (pthread_attr_getstack(&a, &base, &size) == 0 && size > MON_STACK_PREFAULT) {
			uintptr_t pg = (uintptr_t)vr_page_size();
			uintptr_t top = ((uintptr_t)base + size) & ~(pg - 1);
			*lk = (void *)(top - MON_STACK_PREFAULT);
			if (mlock(*lk, MON_STACK_PREFAULT) == 0)
				*lklen = MON_STACK_PREFAULT;
		}
		pthread_attr_destroy(&a);
	}
	pid_t me = getpid(), cur = atomic_load(&code_locked);
	/* any code address of the library finds its text segment */
	if (cur != me && atomic_compare_exchange_strong(&code_locked, &cur, me))
		lock_code((const void *)(uintptr_t)vr_monitor_start);
	if (!(m->active & (1u << VR_MONITOR_LIMIT)) || !m->lim.kind)
		return;
	struct sched_param sp = { .sched_priority = 1 };
	int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	if (err) {
		errno = 0;
		if (setpriority(PRIO_PROCESS, (id_t)gettid(), -5) < 0)
			vr_dbg("monitor: no SCHED_FIFO (%s), no nice -5 (%m): normal priority",
			       strerror(err));
	}
}

/* ---------------------------------------------------------------------- */
/* the thread                                                              */

#define MON_NFDS (1 + MON_MAX_FDS * VR_ARRAY_SIZE(all_sources))

struct fdset {
	struct pollfd pfd[MON_NFDS];
	const struct mon_source *src[MON_NFDS];
	int idx[MON_NFDS];
	int n;
};

static void build_pollfds(struct vr_monitor *m, struct fdset *f)
{
	f->pfd[0] = (struct pollfd){ .fd = m->wake_fd, .events = POLLIN };
	f->n = 1;
	for (size_t i = 0; i < VR_ARRAY_SIZE(all_sources); i++) {
		const struct mon_source *s = all_sources[i];
		if (!(m->active & (1u << s->id)) || !s->fds)
			continue;
		int k = s->fds(m, &f->pfd[f->n]);
		for (int j = 0; j < k; j++) {
			f->src[f->n + j] = s;
			f->idx[f->n + j] = j;
		}
		f->n += k;
	}
}

static int poll_timeout(const struct vr_monitor *m, uint64_t now)
{
	uint64_t deadline = mon_pol_deadline(&m->pol);
	for (size_t i = 0; i <= VR_MONITOR_LIMIT; i++)
		if (m->next_check[i] && m->next_check[i] < deadline)
			deadline = m->next_check[i];
	if (deadline == UINT64_MAX)
		return -1;
	return deadline <= now ? 0 : (int)(deadline - now > INT_MAX ? INT_MAX : deadline - now);
}

static bool woken(int wake_fd, int timeout)
{
	struct pollfd p = { .fd = wake_fd, .events = POLLIN };
	return poll(&p, 1, timeout) > 0;
}

static void handle_fds(struct vr_monitor *m, const struct fdset *f, uint64_t now)
{
	for (int i = 1; i < f->n; i++) {
		const struct mon_source *s = f->src[i];
		/* a source lost earlier in this pass closed its fds */
		if (!f->pfd[i].revents || !(m->active & (1u << s->id)))
			continue;
		if (!s->ready(m, f->idx[i], f->pfd[i].revents, now))
			source_lost(m, s);
	}
}

static void periodic(struct vr_monitor *m, uint64_t now)
{
	for (size_t i = 0; i < VR_ARRAY_SIZE(all_sources); i++) {
		const struct mon_source *s = all_sources[i];
		if (m->next_check[s->id] && now >= m->next_check[s->id])
			m->next_check[s->id] = now + s->check(m, now);
	}
}

/* true if the limit watcher's fds woke us: never delayed */
static bool limit_woke(const struct fdset *f)
{
	for (int i = 1; i < f->n; i++)
		if (f->pfd[i].revents && f->src[i]->id == VR_MONITOR_LIMIT)
			return true;
	return false;
}

static void *monitor_main(void *arg)
{
	struct vr_monitor *m = arg;
	struct fdset f;
	void *lk = NULL;
	size_t lklen;
	harden(m, &lk, &lklen);
	mon_limit_thread_start(m);

	/* a purge handler run by this thread may fork and return in the
	 * child, where this thread is then the only one and its ctx is
	 * inherited (base/fork.h): the child's copy stops watching after
	 * that round, rather than loop for ever on the parent's files */
	const unsigned gen = atomic_load(&vr_fork_gen);
	uint64_t now = vr_now_ms();
	for (;;) {
		build_pollfds(m, &f);
		int r = poll(f.pfd, (nfds_t)f.n, poll_timeout(m, now));
		if (r < 0 && errno != EINTR) {
			vr_dbg("monitor: poll: %m");
			if (woken(m->wake_fd, 100))
				break;
		}
		if (r > 0 && f.pfd[0].revents)
			break;
		now = vr_now_ms();
		if (r > 0) {
			/* a storm of wake-ups is handled at most every
			 * MON_MIN_LOOP_MS: the rest coalesces meanwhile */
			if (now - m->last_wake < MON_MIN_LOOP_MS && !limit_woke(&f)) {
				if (woken(m->wake_fd, (int)(m->last_wake + MON_MIN_LOOP_MS - now)))
					break;
				now = vr_now_ms();
			}
			m->last_wake = now;
			handle_fds(m, &f, now);
		}
		periodic(m, now);
		act(m, now);
		if (vr_gen_inherited(gen))
			break;
	}
	if (lklen)
		munlock(lk, lklen);
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* start / stop                                                            */

static void monitor_free(struct vr_monitor *m)
{
	for (size_t i = 0; i < VR_ARRAY_SIZE(all_sources); i++)
		if (m->active & (1u << all_sources[i]->id))
			all_sources[i]->close(m);
	mon_limit_gate_close(&m->lim); /* a gate without the limit watcher */
	mon_close_fd(&m->wake_fd);
	free(m);
}

int vr_monitor_start(struct vr_ctx *ctx)
{
	struct vr_monitor *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ctx = ctx;
	m->psi.trig_fd[0] = m->psi.trig_fd[1] = -1;
	m->cg2 = (struct mon_cg2){
		.ino_fd = -1, .ino_wd = -1, .events_fd = -1, .trig = { .trig_fd = { -1, -1 } }
	};
	m->cg1.efd[0] = m->cg1.efd[1] = -1;
	m->lim = MON_LIMIT_CLOSED;
	m->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->wake_fd < 0) {
		int err = -errno;
		free(m);
		return err;
	}
	m->forced = parse_forced();
	select_sources(m);

	/* the thread takes no application signal; named before vr_ctx_new
	 * returns */
	int err = vr_thread_start(&m->thread, monitor_main, m, "vrange-mon");
	if (err) {
		vr_dbg("monitor: pthread_create: %s", strerror(err));
		monitor_free(m);
		atomic_store(&ctx->monitor_source, VR_MONITOR_NONE);
		atomic_store(&ctx->monitor_sources, 0);
		return -err;
	}
	ctx->monitor = m;
	return 0;
}

void vr_monitor_stop(struct vr_ctx *ctx, bool inherited)
{
	struct vr_monitor *m = ctx->monitor;
	if (!m)
		return;
	ctx->monitor = NULL;
	if (!inherited) {
		uint64_t one = 1;
		while (write(m->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		pthread_join(m->thread, NULL);
	}
	/* inherited: the thread is the parent's; only our fd copies and
	 * memory are released */
	monitor_free(m);
	atomic_store(&ctx->monitor_source, VR_MONITOR_NONE);
	atomic_store(&ctx->monitor_sources, 0);
}

_export_ const char *vr_monitor_source_name(int source)
{
	static const char *const names[] = {
		"none", "cgroup2", "psi", "cgroup1", "meminfo", "limit"
	};
	if (source < 0 || (size_t)source >= VR_ARRAY_SIZE(names))
		return "unknown";
	return names[source];
}
