/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * mon-limit.c - the limit watcher (API S34): keeps the process's memory
 * limit from being reached because of the ctx's unpurged volatile bytes.
 *
 * The limit is the smallest of: cgroup v1 memory.limit_in_bytes of the
 * process's memcg and its ancestors, cgroup v2 memory.max and memory.high
 * of its cgroup and its ancestors; VRANGE_MEMORY_LIMIT=BYTES|off
 * overrides it (then the usage is the process's own memcg's, or its v2
 * cgroup's, or its resident set from /proc/self/statm).  Usage is read
 * from the cgroup that holds the limit.
 *
 * Three mechanisms, lines from mon-policy.c:
 *   - a v1 usage threshold (cgroup.event_control + eventfd on
 *     memory.usage_in_bytes) at plan.threshold wakes the monitor within
 *     ~0.3 ms of a crossing; v2 memory.events POLLPRI (high, max);
 *   - memory.current / usage_in_bytes polled at a rate that grows as the
 *     headroom shrinks (mon_limit_interval), which also catches what the
 *     events miss;
 *   - each poll publishes the ctx's budget (ctx->budget, one atomic):
 *     vr_mark keeps the unpurged volatile bytes within it synchronously,
 *     in the marking thread, with no system call (vr_ctx_effective_limit),
 *     so the marking thread purges for itself when the monitor is late.
 * A crossing purges in S8 order until usage is back at plan.target, never
 * further (one range of overshoot at most): vr_purge_lru(BYTES, excess).
 *
 * The purge path allocates nothing and opens nothing: the usage file is
 * opened once and re-read with pread.  One limit purge at a time per
 * process (limit_owner), so two ctxs woken by the same crossing do not
 * both purge to the target: the second re-reads usage after the first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"

#define MON_LIMIT_RECHECK_MS 1000 /* the limit itself is re-read this often */
#define MON_LIMIT_STUCK_MS 50     /* over the threshold, nothing to purge */

/* pid of the process whose monitor runs a limit purge, or 0; a pid that
 * is not ours was inherited across fork() and counts as free */
static _Atomic pid_t limit_owner;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool read_usage(struct mon_limit *l, uint64_t *out)
{
	char buf[128];
	ssize_t n = pread(l->usage_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	char *end;
	const char *p = buf;
	if (l->statm) { /* "size resident shared ...", in pages */
		strtoull(p, &end, 10);
		p = end;
	}
	errno = 0;
	unsigned long long v = strtoull(p, &end, 10);
	if (errno || end == p)
		return false;
	*out = l->statm ? (uint64_t)v << vr_page_shift() : v;
	return true;
}

static void publish_budget(struct vr_monitor *m, uint64_t usage)
{
	struct vr_ctx *c = m->ctx;
	vr_ctx_sync_shared(c); /* S29: shared files changed by other processes */
	uint64_t b = mon_limit_budget(&m->lim.plan, usage, vr_ctx_gauge(c, VR_G_VOLATILE));
	atomic_store_explicit(&c->budget, (size_t)b, memory_order_relaxed);
}

/* purges down to the target: the bytes reclaimed, or -1 if another ctx
 * of this process is at it (the caller polls again soon) */
static int64_t limit_purge(struct vr_monitor *m, uint64_t *usage_io, uint64_t t0)
{
	uint64_t usage = *usage_io;
	struct mon_limit *l = &m->lim;
	struct vr_ctx *c = m->ctx;
	pid_t me = getpid(), cur = 0;
	if (!atomic_compare_exchange_strong(&limit_owner, &cur, me) &&
	    (cur == me || !atomic_compare_exchange_strong(&limit_owner, &cur, me)))
		return -1;
	/* re-read: another ctx may have purged since we woke */
	if (!read_usage(l, &usage) || !mon_limit_excess(&l->plan, usage)) {
		atomic_store(&limit_owner, 0);
		*usage_io = usage;
		return 0;
	}
	uint64_t start = usage, before = atomic_load(&c->purges), total = 0;
	/* the first range alone, to time the first byte purged */
	ssize_t got = vr_purge_lru(c, VR_PURGE_BYTES, 1);
	uint64_t lat = now_ns() - t0;
	for (int i = 0; got > 0 && i < 8; i++) {
		total += (uint64_t)got;
		if (!read_usage(l, &usage))
			break;
		uint64_t n = mon_limit_excess(&l->plan, usage);
		if (!n)
			break;
		got = vr_purge_lru(c, VR_PURGE_BYTES, n);
	}
	atomic_store(&limit_owner, 0);
	if (total) {
		uint64_t old = atomic_load(&c->limit_latency_ns);
		while (lat > old && !atomic_compare_exchange_weak(&c->limit_latency_ns, &old, lat))
			;
		atomic_fetch_add_explicit(&c->limit_events, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->limit_purges, atomic_load(&c->purges) - before,
					  memory_order_relaxed);
	}
	publish_budget(m, usage);
	*usage_io = usage;
	vr_dbg("monitor: limit: usage %" PRIu64 " >= %" PRIu64 ": purged %" PRIu64
	       " bytes, usage now %" PRIu64 " (target %" PRIu64 "), first byte after %" PRIu64
	       " us",
	       start, l->plan.threshold, total, usage, l->plan.target, lat / 1000);
	return (int64_t)total;
}

/* one observation of usage: budget, purge on a crossing, next poll */
static unsigned limit_observe(struct vr_monitor *m, uint64_t act_from)
{
	struct mon_limit *l = &m->lim;
	uint64_t usage, t0 = now_ns();
	if (!read_usage(l, &usage))
		return MON_LIMIT_MAX_MS;
	publish_budget(m, usage);
	if (usage >= act_from) {
		int64_t got = limit_purge(m, &usage, t0);
		if (got < 0)
			return MON_LIMIT_MIN_MS;
		/* over the threshold with nothing purgeable (ordinary memory):
		 * the budget already stops new volatile bytes; poll calmly */
		if (got == 0 && usage >= l->plan.threshold) {
			l->usage = usage;
			return MON_LIMIT_STUCK_MS;
		}
	}
	l->interval = mon_limit_interval(&l->plan, usage, l->usage, l->interval);
	l->usage = usage;
	return l->interval;
}

/* v1: "<efd> <usage fd> <bytes>" in cgroup.event_control; 0 or -errno */
static int limit_arm_threshold(struct mon_limit *l)
{
	mon_close_fd(&l->thr_efd);
	if (l->statm || l->kind == MON_LIM_V2 || !l->dir)
		return 0;
	char p[PATH_MAX], buf[96];
	snprintf(p, sizeof(p), "%s/cgroup.event_control", l->dir);
	int ctl = open(p, O_WRONLY | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	l->thr_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int err = l->thr_efd < 0 ? -errno : 0;
	if (!err) {
		int n = snprintf(buf, sizeof(buf), "%d %d %" PRIu64, l->thr_efd, l->usage_fd,
				 l->plan.threshold);
		if (write(ctl, buf, (size_t)n) != n)
			err = -errno;
	}
	close(ctl);
	if (err < 0) {
		vr_dbg("monitor: limit: no usage threshold on %s: %s (polling only)", l->dir,
		       strerror(-err));
		mon_close_fd(&l->thr_efd);
	}
	return err;
}

static const char *const v1_limit[] = { "memory.limit_in_bytes", NULL };
static const char *const v2_limit[] = { "memory.max", "memory.high", NULL };

/* the smallest limit of the process's cgroups: l->kind, l->dir */
static uint64_t limit_detect(struct mon_limit *l)
{
	uint64_t best = UINT64_MAX;
	char *dir = NULL, *mnt = NULL, *where = NULL;
	if (mon_cg1_find_dir(&dir, &mnt) == 0) {
		best = mon_walk_limit(mnt, dir, v1_limit, &where);
		if (best != UINT64_MAX) {
			l->kind = MON_LIM_V1;
			l->dir = where;
			where = NULL;
		}
	}
	free(dir);
	free(mnt);
	free(where);
	const char *m2 = mon_cg2_mount();
	dir = m2 ? mon_cg2_find_dir() : NULL;
	if (dir) {
		uint64_t v = mon_walk_limit(m2, dir, v2_limit, &where);
		if (v < best) {
			best = v;
			l->kind = MON_LIM_V2;
			free(l->dir);
			l->dir = where;
			where = NULL;
		}
	}
	free(dir);
	free(where);
	return best;
}

/* VRANGE_MEMORY_LIMIT: usage of the own memcg, v2 cgroup, or statm */
static void limit_override_dir(struct mon_limit *l)
{
	char *dir = NULL, *mnt = NULL;
	l->kind = MON_LIM_OVERRIDE;
	if (mon_cg1_find_dir(&dir, &mnt) == 0 && mon_exists_in(dir, "memory.usage_in_bytes")) {
		l->dir = dir;
		dir = NULL;
	} else {
		free(dir);
		dir = mon_cg2_mount() ? mon_cg2_find_dir() : NULL;
		if (dir && mon_exists_in(dir, "memory.current") &&
		    mon_exists_in(dir, "cgroup.events")) {
			l->dir = dir;
			dir = NULL;
		}
	}
	free(dir);
	free(mnt);
}

static int limit_open_usage(struct mon_limit *l)
{
	char p[PATH_MAX];
	if (l->dir) {
		bool v1 = mon_exists_in(l->dir, "memory.usage_in_bytes");
		snprintf(p, sizeof(p), "%s/%s", l->dir,
			 v1 ? "memory.usage_in_bytes" : "memory.current");
		l->usage_fd = open(p, O_RDONLY | O_CLOEXEC);
		if (l->usage_fd >= 0) {
			if (l->kind == MON_LIM_OVERRIDE && !v1)
				l->kind = MON_LIM_V2; /* no threshold events there */
			if (!v1) {
				snprintf(p, sizeof(p), "%s/memory.events", l->dir);
				l->events_fd = open(p, O_RDONLY | O_CLOEXEC);
			}
			return 0;
		}
	}
	l->statm = true;
	l->usage_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	return l->usage_fd < 0 ? -errno : 0;
}

static int limit_open(struct vr_monitor *m)
{
	struct mon_limit *l = &m->lim;
	const char *env = secure_getenv("VRANGE_MEMORY_LIMIT");
	uint64_t limit = env && *env ? mon_parse_bytes(env) : UINT64_MAX;
	if (env && *env && limit == UINT64_MAX)
		vr_dbg("monitor: invalid VRANGE_MEMORY_LIMIT=%s ignored", env);
	if (limit == 0) {
		vr_dbg("monitor: limit: off (VRANGE_MEMORY_LIMIT)");
		return -ENOENT;
	}
	if (limit == UINT64_MAX)
		limit = limit_detect(l);
	else
		limit_override_dir(l);
	if (limit == UINT64_MAX) {
		vr_dbg("monitor: limit: none of the process's cgroups has a memory limit");
		return -ENOENT;
	}
	int err = limit_open_usage(l);
	if (err < 0) {
		vr_dbg("monitor: limit: no usage to read: %s", strerror(-err));
		return err;
	}
	mon_limit_plan(limit, &l->plan);
	atomic_store(&m->ctx->memory_limit, limit);
	limit_arm_threshold(l);
	read_usage(l, &l->usage);
	publish_budget(m, l->usage);
	l->recheck_ms = mon_now_ms() + MON_LIMIT_RECHECK_MS;
	vr_dbg("monitor: limit %" PRIu64 " (%s%s%s), usage %" PRIu64 ", threshold %" PRIu64
	       ", line %" PRIu64 ", target %" PRIu64 "%s",
	       limit,
	       l->kind == MON_LIM_V1   ? "cgroup1 "
	       : l->kind == MON_LIM_V2 ? "cgroup2 "
				       : "VRANGE_MEMORY_LIMIT",
	       l->kind == MON_LIM_OVERRIDE ? (l->statm ? ", statm" : ", usage of ") : "",
	       l->dir && !l->statm ? l->dir : "", l->usage, l->plan.threshold, l->plan.line,
	       l->plan.target, l->thr_efd >= 0 ? ", usage threshold armed" : "");
	return 0;
}

static void limit_close(struct vr_monitor *m)
{
	struct mon_limit *l = &m->lim;
	mon_close_fd(&l->thr_efd);
	mon_close_fd(&l->events_fd);
	mon_close_fd(&l->usage_fd);
	free(l->dir);
	*l = (struct mon_limit){ .usage_fd = -1, .thr_efd = -1, .events_fd = -1 };
	atomic_store(&m->ctx->budget, 0);
	atomic_store(&m->ctx->memory_limit, 0);
}

/* the limit itself may change (a v1 limit_in_bytes written, a v2
 * memory.max): re-read it where it was found and re-arm */
static void limit_recheck(struct vr_monitor *m, uint64_t now)
{
	struct mon_limit *l = &m->lim;
	l->recheck_ms = now + MON_LIMIT_RECHECK_MS;
	if (l->kind == MON_LIM_OVERRIDE || !l->dir)
		return;
	const char *const *names = l->kind == MON_LIM_V1 ? v1_limit : v2_limit;
	uint64_t best = UINT64_MAX;
	for (const char *const *n = names; *n; n++) {
		uint64_t v;
		if (mon_read_u64_or_max(l->dir, *n, &v) && v < best)
			best = v;
	}
	if (best == l->plan.limit || best == UINT64_MAX)
		return;
	vr_dbg("monitor: limit %" PRIu64 " -> %" PRIu64, l->plan.limit, best);
	mon_limit_plan(best, &l->plan);
	atomic_store(&m->ctx->memory_limit, best);
	limit_arm_threshold(l);
}

static unsigned limit_check(struct vr_monitor *m, uint64_t now)
{
	if (now >= m->lim.recheck_ms)
		limit_recheck(m, now);
	return limit_observe(m, m->lim.plan.threshold);
}

static int limit_fds(struct vr_monitor *m, struct pollfd *pfd)
{
	pfd[0] = (struct pollfd){ .fd = m->lim.thr_efd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = m->lim.events_fd, .events = POLLPRI };
	return 2;
}

static bool limit_ready(struct vr_monitor *m, int i, short revents, uint64_t now)
{
	struct mon_limit *l = &m->lim;
	if (revents & (POLLERR | POLLNVAL))
		return false;
	if (i == 0) {
		uint64_t cnt;
		if (read(l->thr_efd, &cnt, sizeof(cnt)) != sizeof(cnt))
			return errno == EAGAIN || errno == EINTR;
		/* the kernel signals once more when the cgroup goes away */
		if (!mon_exists_in(l->dir, "memory.usage_in_bytes"))
			return false;
	} else {
		char scratch[512]; /* acknowledge the kernfs POLLPRI */
		if (pread(l->events_fd, scratch, sizeof(scratch), 0) < 0)
			mon_close_fd(&l->events_fd);
	}
	/* an event: act from the line, not the exact threshold (usage may
	 * already be a little under it); a downward crossing after our own
	 * purge finds usage at the target and does nothing */
	m->next_check[VR_MONITOR_LIMIT] = now + limit_observe(m, l->plan.line);
	return true;
}

const struct mon_source mon_src_limit = {
	.id = VR_MONITOR_LIMIT,
	.period_ms = MON_LIMIT_MIN_MS,
	.open = limit_open,
	.close = limit_close,
	.fds = limit_fds,
	.ready = limit_ready,
	.check = limit_check,
};
