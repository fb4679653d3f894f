/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor-limit.c - the limit watcher (API S34, A3): keeps the process's
 * memory limit from being reached because of the ctx's unpurged volatile
 * bytes.
 *
 * The limit is the smallest of: cgroup v1 memory.limit_in_bytes of the
 * process's memcg and its ancestors, cgroup v2 memory.max and memory.high
 * of its cgroup and its ancestors.  The usage counted against it (A3) is
 * what the kernel cannot reclaim without losing data: the usage of the
 * cgroup holding the limit less its reclaimable file cache (memory.stat:
 * inactive + active file; why both in doc/monitor.md).  A file being
 * streamed fills a cgroup with page cache up to its limit, which the
 * kernel reclaims on demand: counted raw, it made the watcher purge
 * everything.  VRANGE_MEMORY_LIMIT=BYTES|off overrides the limit; the
 * usage is then this process's own memory, RssAnon + RssShmem of
 * /proc/self/status (other processes of the cgroup do not count).
 *
 * The limit is detected again twice a second along the whole ancestry: a
 * limit removed, raised, lowered or appearing (also on an ancestor) is
 * followed, vr_ctx_memory_limit() included.  With no limit the watcher
 * stays, idle but for that re-detection, and its source bit is hidden.
 *
 * Three mechanisms, lines from monitor-policy.c:
 *   - a v1 usage threshold (cgroup.event_control + eventfd on
 *     memory.usage_in_bytes) at plan.threshold wakes the monitor within
 *     ~0.3 ms of a crossing; v2 memory.events POLLPRI (high, max).  These
 *     see the raw usage: with file cache in the cgroup they fire and find
 *     nothing to do, the polls below keep watch;
 *   - the usage polled at a rate that grows as the headroom (of the usage
 *     counted) shrinks (mon_limit_interval); each poll reads the usage
 *     file and memory.stat (~2 + ~5 us here, measured: doc/monitor.md);
 *   - each poll publishes the ctx's budget (ctx->budget, one atomic):
 *     vr_mark keeps the unpurged volatile bytes within it synchronously,
 *     in the marking thread, with no system call (vr_ctx_effective_limit),
 *     so the marking thread purges for itself when the monitor is late.
 * A crossing purges in S8 order until usage is back at plan.target, never
 * further (one range of overshoot at most): vr_ctx_purge_lru(BYTES, excess).
 *
 * The purge path allocates nothing and opens nothing: the usage files are
 * opened once and re-read with pread.  One limit purge at a time per
 * process (limit_owner), so two ctxs woken by the same crossing do not
 * both purge to the target: the second re-reads usage after the first.
 * Debug lines per event are rate-limited (one a second, with the count
 * held back); the budget falling to nothing is said once at LOG_WARNING.
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

#include "monitor/monitor.h"
#include "base/sys.h"
#include "base/log.h"

#define MON_LIMIT_RECHECK_MS 500 /* the limit is detected again this often (A3: 1 s) */
#define MON_LIMIT_STUCK_MS 50    /* over the threshold, nothing to purge */
#define MON_LIMIT_DBG_MS 1000    /* at most one per-event debug line per second */

/* pid of the process whose monitor runs a limit purge, or 0; a pid that
 * is not ours was inherited across fork() and counts as free */
static _Atomic pid_t limit_owner;

/* whole small file at fd into buf (NUL terminated); false if empty */
static bool pread_text(int fd, char *buf, size_t size)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, size - 1, 0) : -1;
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* the usage counted (A3) into *out, l->raw and l->file: the cgroup's
 * usage less its reclaimable file cache, or RssAnon + RssShmem */
static bool read_usage(struct mon_limit *l, uint64_t *out)
{
	char buf[8192]; /* memory.stat, status: 1-3 KiB; the stack is mlocked */
	if (!pread_text(l->usage_fd, buf, l->own ? sizeof(buf) : 64))
		return false;
	if (l->own) {
		if (!mon_status_own(buf, &l->raw))
			return false;
		l->file = 0;
	} else {
		if (!mon_parse_limit(buf, &l->raw) || l->raw == UINT64_MAX)
			return false;
		/* no memory.stat: the raw usage, never less */
		uint64_t file = pread_text(l->stat_fd, buf, sizeof(buf))
					? mon_stat_file_cache(buf, l->kind == MON_LIM_V1)
					: 0;
		l->file = mon_limit_reclaimable(&l->plan, file);
		if (l->file > l->raw)
			l->file = l->raw;
	}
	*out = l->raw - l->file;
	return true;
}

static void limit_gate(struct mon_limit *l);

bool mon_limit_file_first(struct vr_monitor *m, uint64_t *file)
{
	struct mon_limit *l = &m->lim;
	uint64_t usage;
	bool watched = m->active & (1u << VR_MONITOR_LIMIT);
	if (!watched) {
		/* no limit watcher (VRANGE_MEMORY_LIMIT=off, or lost): the
		 * pressure may still be a cgroup limit reclaiming file cache,
		 * which reading files must not turn into purges (A3); its
		 * limit, looked up now (events are rare and coalesced) */
		if (!l->readahead)
			l->readahead = mon_readahead_max("/sys/block");
		limit_gate(l);
	}
	if (!watched || (l->kind && l->own)) {
		/* no cgroup limit watched (VRANGE_MEMORY_LIMIT limits the
		 * process, or nothing is watched), but the pressure still
		 * comes from the cgroup's limit reclaiming file cache: the
		 * same gate, on that cgroup (A3) */
		char buf[8192];
		if (!pread_text(l->gate_stat_fd, buf, sizeof(buf)))
			return false;
		*file = mon_limit_reclaimable(&l->gate, mon_stat_file_cache(buf, l->gate_v1));
		return mon_pressure_file_first(&l->gate, *file);
	}
	if (!l->kind || l->own || !read_usage(l, &usage))
		return false;
	*file = l->file;
	return mon_pressure_file_first(&l->plan, l->file);
}

static const char *limit_where(const struct mon_limit *l)
{
	return l->kind == MON_LIM_V1   ? "memory.limit_in_bytes"
	       : l->kind == MON_LIM_V2 ? "memory.max/memory.high"
				       : "VRANGE_MEMORY_LIMIT";
}

static const char *usage_where(const struct mon_limit *l)
{
	return l->own                  ? "RssAnon+RssShmem of /proc/self/status"
	       : l->kind == MON_LIM_V1 ? "memory.usage_in_bytes less file cache of memory.stat"
				       : "memory.current less file cache of memory.stat";
}

static void publish_budget(struct vr_monitor *m, uint64_t usage)
{
	struct vr_ctx *c = m->ctx;
	struct mon_limit *l = &m->lim;
	vr_ctx_sync_shared(c); /* S29: shared files changed by other processes */
	uint64_t b = mon_limit_budget(&l->plan, usage, vr_ctx_gauge(c, VR_G_VOLATILE));
	atomic_store_explicit(&c->budget, (size_t)b, memory_order_relaxed);
	atomic_store_explicit(&c->limit_usage, usage, memory_order_relaxed);
	atomic_store_explicit(&c->limit_file, l->file, memory_order_relaxed);
	if (b > 1 || l->warned)
		return;
	l->warned = true;
	vr_warn("limit: no budget left for volatile bytes (every new one is purged): limit "
		"%" PRIu64 " (%s%s%s), usage %" PRIu64 " (%s%s%s: %" PRIu64 " less %" PRIu64
		"), %" PRIu64 " of it not this ctx's volatile bytes",
		l->plan.limit, limit_where(l), l->dir && !l->own ? " of " : "",
		l->dir && !l->own ? l->dir : "", usage, usage_where(l),
		l->dir && !l->own ? " of " : "", l->dir && !l->own ? l->dir : "", l->raw, l->file,
		usage - (usage < vr_ctx_gauge(c, VR_G_VOLATILE) ? usage
								: vr_ctx_gauge(c, VR_G_VOLATILE)));
}

/* rate-limited per-event debug line: true if one may be written now */
static bool dbg_due(struct mon_limit *l)
{
	if (!atomic_load_explicit(&vr_debug, memory_order_relaxed))
		return false;
	uint64_t now = vr_now_ms();
	if (l->dbg_ms && now - l->dbg_ms < MON_LIMIT_DBG_MS) {
		l->dbg_quiet++;
		return false;
	}
	l->dbg_ms = now;
	return true;
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
	ssize_t got = vr_ctx_purge_lru(c, VR_PURGE_BYTES, 1);
	uint64_t lat = vr_now_ns() - t0;
	for (int i = 0; got > 0 && i < 8; i++) {
		total += (uint64_t)got;
		if (!read_usage(l, &usage))
			break;
		uint64_t n = mon_limit_excess(&l->plan, usage);
		if (!n)
			break;
		got = vr_ctx_purge_lru(c, VR_PURGE_BYTES, n);
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
	if (dbg_due(l)) {
		vr_log("monitor: limit: usage %" PRIu64 " (file cache %" PRIu64
		       " left out) >= %" PRIu64 ": purged %" PRIu64 " bytes, usage now %" PRIu64
		       " (target %" PRIu64 "), first byte after %" PRIu64
		       " us (%u such lines held back)",
		       start, l->file, l->plan.threshold, total, usage, l->plan.target, lat / 1000,
		       l->dbg_quiet);
		l->dbg_quiet = 0;
	}
	return (int64_t)total;
}

/* ms to the next re-detection of the limit */
static unsigned until_recheck(const struct mon_limit *l)
{
	uint64_t now = vr_now_ms();
	return l->recheck_ms > now ? (unsigned)(l->recheck_ms - now) : MON_LIMIT_MIN_MS;
}

/* one observation of usage: budget, purge on a crossing, next poll;
 * @event: woken by the kernel's usage event rather than a poll */
static unsigned limit_observe(struct vr_monitor *m, bool event)
{
	struct mon_limit *l = &m->lim;
	uint64_t usage, t0 = vr_now_ns();
	if (!l->kind)
		return until_recheck(l);
	if (!read_usage(l, &usage))
		return MON_LIMIT_MAX_MS;
	publish_budget(m, usage);
	/* an event acts from the line, not the exact threshold (usage may
	 * already be a little under it); a downward crossing after our own
	 * purge finds usage at the target and does nothing.  The event is
	 * on the raw usage: with file cache left out (the raw usage then
	 * hovers at the limit and crosses often) only the threshold counts,
	 * or each crossing would purge a cache at its line to the target.
	 * Whether file cache is left out is known only now: the previous
	 * poll's figure, taken before a file was read, made the first
	 * crossing of a read purge a quarter of the limit from the line */
	uint64_t act_from = event && !l->file ? l->plan.line : l->plan.threshold;
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
	if (l->own || l->kind != MON_LIM_V1 || !l->dir)
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

/* the smallest limit of the process's cgroups: *kind, *where (malloc'ed) */
static uint64_t limit_detect(int *kind, char **where)
{
	uint64_t best = UINT64_MAX;
	char *dir = NULL, *mnt = NULL, *w = NULL;
	*kind = 0;
	*where = NULL;
	if (mon_cg1_find_dir(&dir, &mnt) == 0) {
		best = mon_walk_limit(mnt, dir, v1_limit, &w);
		if (best != UINT64_MAX) {
			*kind = MON_LIM_V1;
			*where = w;
			w = NULL;
		}
	}
	free(dir);
	free(mnt);
	free(w);
	w = NULL;
	const char *m2 = mon_cg2_mount();
	dir = m2 ? mon_cg2_find_dir() : NULL;
	if (dir) {
		uint64_t v = mon_walk_limit(m2, dir, v2_limit, &w);
		if (v < best) {
			best = v;
			*kind = MON_LIM_V2;
			free(*where);
			*where = w;
			w = NULL;
		}
	}
	free(dir);
	free(w);
	if (best == UINT64_MAX) {
		free(*where);
		*where = NULL;
		*kind = 0;
	}
	return best;
}

/* every limit of the process's cgroups, not only the smallest: a parent's
 * larger limit can leave less room, its usage counting its other children
 * (a 96 MiB commit in a 128 MiB cgroup, empty, under a 160 MiB parent
 * whose other child held 100 MiB: the parent's OOM killer ran) */
uint64_t mon_limit_headroom(void)
{
	uint64_t room = UINT64_MAX;
	char *dir = NULL, *mnt = NULL;
	if (mon_cg1_find_dir(&dir, &mnt) == 0)
		room = mon_walk_headroom(mnt, dir, v1_limit, true);
	free(dir);
	free(mnt);
	const char *m2 = mon_cg2_mount();
	dir = m2 ? mon_cg2_find_dir() : NULL;
	if (dir) {
		uint64_t v = mon_walk_headroom(m2, dir, v2_limit, false);
		if (v < room)
			room = v;
	}
	free(dir);
	return room;
}

static int open_in(const char *dir, const char *name);

void mon_limit_gate_close(struct mon_limit *l)
{
	mon_close_fd(&l->gate_stat_fd);
	free(l->gate_dir);
	l->gate_dir = NULL;
}

/* under VRANGE_MEMORY_LIMIT, or without a limit watcher: (re)detect the
 * cgroup limit for the pressure gate (mon_limit_file_first) */
static void limit_gate(struct mon_limit *l)
{
	int kind;
	char *where;
	uint64_t lim = limit_detect(&kind, &where);
	/* the same limit may now be another cgroup's (the process moved to
	 * a cgroup with an equal limit): the memory.stat read must be its
	 * (the old one's had none of the file cache read since) */
	if (lim == l->gate.limit && (lim == UINT64_MAX || (l->gate_stat_fd >= 0 && where &&
							   strcmp(where, l->gate_dir) == 0))) {
		free(where);
		return;
	}
	mon_limit_gate_close(l);
	l->gate = (struct mon_limit_plan){ 0 };
	if (lim != UINT64_MAX && where)
		l->gate_stat_fd = open_in(where, "memory.stat");
	if (l->gate_stat_fd >= 0) {
		mon_limit_plan(lim, &l->gate);
		l->gate.file_reserve = mon_file_reserve(lim, l->readahead);
		l->gate_v1 = kind == MON_LIM_V1;
		l->gate_dir = where;
		where = NULL;
	}
	l->gate.limit = lim; /* UINT64_MAX: none, looked for again */
	free(where);
}

static void limit_close_fds(struct mon_limit *l)
{
	mon_close_fd(&l->thr_efd);
	mon_close_fd(&l->events_fd);
	mon_close_fd(&l->stat_fd);
	mon_close_fd(&l->usage_fd);
}

static int open_in(const char *dir, const char *name)
{
	char p[PATH_MAX];
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) >= sizeof(p))
		return -1;
	return open(p, O_RDONLY | O_CLOEXEC);
}

/* the usage files of l->kind / l->dir; 0 or -errno */
static int limit_open_usage(struct mon_limit *l)
{
	if (l->own) {
		l->usage_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
		return l->usage_fd < 0 ? -errno : 0;
	}
	bool v1 = l->kind == MON_LIM_V1;
	l->usage_fd = open_in(l->dir, v1 ? "memory.usage_in_bytes" : "memory.current");
	if (l->usage_fd < 0)
		return -errno;
	l->stat_fd = open_in(l->dir, "memory.stat");
	if (!v1)
		l->events_fd = open_in(l->dir, "memory.events");
	return 0;
}

/* the watcher now keeps to @limit (0: none) found in @where: files,
 * plan, lines, threshold, the ctx's view; false if usage cannot be read */
static bool limit_apply(struct vr_monitor *m, uint64_t limit, int kind, char *where)
{
	struct mon_limit *l = &m->lim;
	struct vr_ctx *c = m->ctx;
	limit_close_fds(l);
	free(l->dir);
	l->dir = where;
	l->kind = limit ? kind : 0;
	int err = l->kind ? limit_open_usage(l) : 0;
	if (err < 0) {
		vr_dbg("monitor: limit: no usage to read in %s: %s", l->dir ? l->dir : "?",
		       strerror(-err));
		limit_close_fds(l);
		l->kind = 0;
	}
	if (!l->kind) {
		l->plan = (struct mon_limit_plan){ 0 };
		atomic_store(&c->budget, 0);
		atomic_store(&c->memory_limit, 0);
		atomic_store(&c->memory_limit_scope, VR_LIMIT_NONE);
		atomic_store(&c->limit_usage, 0);
		atomic_store(&c->limit_file, 0);
		atomic_fetch_and(&c->monitor_sources, ~(1u << VR_MONITOR_LIMIT));
		return err == 0;
	}
	mon_limit_plan(limit, &l->plan);
	if (!l->own) /* file cache counts only in a cgroup's usage */
		l->plan.file_reserve = mon_file_reserve(limit, l->readahead);
	limit_arm_threshold(l);
	if (!read_usage(l, &l->usage))
		l->usage = 0;
	l->interval = 0;
	publish_budget(m, l->usage);
	atomic_store(&c->memory_limit_scope, l->own ? VR_LIMIT_PROCESS : VR_LIMIT_CGROUP);
	atomic_store(&c->memory_limit, limit);
	atomic_fetch_or(&c->monitor_sources, 1u << VR_MONITOR_LIMIT);
	vr_dbg("monitor: limit %" PRIu64 " (%s%s%s), usage %" PRIu64 " (%s: %" PRIu64
	       " less %" PRIu64 "), threshold %" PRIu64 ", line %" PRIu64 ", target %" PRIu64
	       ", file cache counted up to %" PRIu64 " (readahead %" PRIu64 ")%s",
	       limit, limit_where(l), l->dir ? " of " : "", l->dir ? l->dir : "", l->usage,
	       usage_where(l), l->raw, l->file, l->plan.threshold, l->plan.line, l->plan.target,
	       l->own ? 0 : l->plan.file_reserve, l->readahead,
	       l->thr_efd >= 0 ? ", usage threshold armed" : "");
	return true;
}

/* VRANGE_MEMORY_LIMIT: read the monitor thread's own status file.
 * /proc/self/status is the thread-group leader's: once the main thread
 * has called pthread_exit() the leader is a zombie without an mm, its
 * status has no RssAnon/RssShmem lines, and the watcher would go blind.
 * Every thread's status shows the same mm; this one lives as long as the
 * ctx's monitor.  Called by the monitor thread when it starts. */
void mon_limit_thread_start(struct vr_monitor *m)
{
	struct mon_limit *l = &m->lim;
	if (!l->own)
		return;
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		vr_dbg("monitor: limit: /proc/thread-self/status: %m (keeping /proc/self/status)");
		return;
	}
	mon_close_fd(&l->usage_fd);
	l->usage_fd = fd;
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
	l->recheck_ms = vr_now_ms() + MON_LIMIT_RECHECK_MS;
	l->readahead = mon_readahead_max("/sys/block");
	if (limit != UINT64_MAX) {
		l->env = limit;
		l->own = true;
		limit_gate(l);
		return limit_apply(m, limit, MON_LIM_OVERRIDE, NULL) ? 0 : -EIO;
	}
	int kind;
	char *where;
	limit = limit_detect(&kind, &where);
	if (limit == UINT64_MAX)
		vr_dbg("monitor: limit: none of the process's cgroups has a memory limit (yet: "
		       "looked for again twice a second)");
	limit_apply(m, limit == UINT64_MAX ? 0 : limit, kind, where);
	return 0;
}

static void limit_close(struct vr_monitor *m)
{
	struct mon_limit *l = &m->lim;
	limit_close_fds(l);
	mon_limit_gate_close(l);
	free(l->dir);
	*l = MON_LIMIT_CLOSED;
	atomic_store(&m->ctx->budget, 0);
	atomic_store(&m->ctx->memory_limit, 0);
	atomic_store(&m->ctx->memory_limit_scope, VR_LIMIT_NONE);
}

/* the limit itself may change (written, removed, set on an ancestor):
 * detect it again along the whole ancestry and follow it */
static void limit_recheck(struct vr_monitor *m, uint64_t now)
{
	struct mon_limit *l = &m->lim;
	l->recheck_ms = now + MON_LIMIT_RECHECK_MS;
	if (l->own) {
		limit_gate(l);
		return;
	}
	int kind;
	char *where;
	uint64_t best = limit_detect(&kind, &where);
	uint64_t was = l->kind ? l->plan.limit : 0, now_lim = best == UINT64_MAX ? 0 : best;
	bool same_dir = (!where && !l->dir) || (where && l->dir && strcmp(where, l->dir) == 0);
	if (now_lim == was && same_dir && kind == l->kind) {
		free(where);
		return;
	}
	vr_dbg("monitor: limit %" PRIu64 " -> %" PRIu64 " (%s)", was, now_lim,
	       where ? where : "no limit");
	limit_apply(m, now_lim, kind, where);
}

static unsigned limit_check(struct vr_monitor *m, uint64_t now)
{
	if (now >= m->lim.recheck_ms)
		limit_recheck(m, now);
	unsigned ms = limit_observe(m, false);
	unsigned re = until_recheck(&m->lim);
	return ms < re ? ms : re;
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
	if ((revents & POLLNVAL) || (i == 0 && (revents & POLLERR)))
		return false;
	if (i == 0) {
		uint64_t cnt;
		if (read(l->thr_efd, &cnt, sizeof(cnt)) != sizeof(cnt))
			return errno == EAGAIN || errno == EINTR;
		/* the kernel signals once more when the cgroup goes away:
		 * detect the limit again at once */
		if (!mon_exists_in(l->dir, "memory.usage_in_bytes")) {
			limit_recheck(m, now);
			m->next_check[VR_MONITOR_LIMIT] = now + MON_LIMIT_MIN_MS;
			return true;
		}
	} else {
		/* kernfs reports every change of memory.events as
		 * POLLERR | POLLPRI (kernfs_generic_poll), and a file being
		 * removed the same way: POLLERR is no loss here.  Only a
		 * failed read says the file is gone: stop polling it (or it
		 * reports POLLERR forever) and detect the limit again */
		char scratch[512]; /* acknowledge the kernfs POLLPRI */
		if (pread(l->events_fd, scratch, sizeof(scratch), 0) < 0) {
			mon_close_fd(&l->events_fd);
			limit_recheck(m, now);
			m->next_check[VR_MONITOR_LIMIT] = now + MON_LIMIT_MIN_MS;
			return true;
		}
	}
	m->next_check[VR_MONITOR_LIMIT] = now + limit_observe(m, true);
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
