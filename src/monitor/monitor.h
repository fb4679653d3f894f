/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor.h - internals of the memory-pressure monitor
 *
 *   monitor.c           the thread, its loop, the source set, start/stop
 *   monitor-policy.c    pure decisions (coalescing, rate limits, levels, the
 *                       limit's threshold/target/budget/poll rate): every
 *                       function takes `now` and touches no system state
 *   monitor-platform.c  discovery and parsing: cgroup paths, mountinfo,
 *                       /proc/self/cgroup, limit files, "key value" files
 *   monitor-psi.c, monitor-cgroup2.c, monitor-cgroup1.c, monitor-meminfo.c,
 *   monitor-limit.c     one source each, behind struct mon_source
 *
 * Everything in struct vr_monitor is owned by the monitor thread once it
 * runs; vr_monitor_start() sets it up before the thread exists and
 * vr_monitor_stop() tears it down after joining it.  In a fork child the
 * thread does not exist: stop only closes fds and frees.
 */
#ifndef VR_MONITOR_H
#define VR_MONITOR_H

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctx.h"

/* start the monitor thread of ctx (ctx->monitor); 0 or -errno (thread
 * creation); a missing pressure source is not an error */
int vr_monitor_start(struct vr_ctx *ctx) _nonnull_();
/* stop and join (if inherited: only release fds and memory) */
void vr_monitor_stop(struct vr_ctx *ctx, bool inherited) _nonnull_();

/* ---- monitor-policy.c: pure, unit-tested directly ---- */

#define MON_GAP_MS 200 /* at most one action per level per gap */
#define MON_REPEAT_MODERATE_MS 10000
#define MON_REPEAT_CRITICAL_MS 5000

/* coalescing and rate limiting of the pressure levels, indexed by
 * enum vr_pressure */
struct mon_policy {
	bool pending[3];
	bool acted[3];
	uint64_t acted_ms[3];
	unsigned coalesced[3];
};
/* a level-triggered source's memory of what it measured last */
struct mon_hold {
	int held;         /* level at the last check */
	uint64_t held_ms; /* when that level was last raised */
};

void mon_pol_raise(struct mon_policy *p, int level) _nonnull_();
/* the level to act on now (CRITICAL first, swallowing a pending MODERATE),
 * VR_PRESSURE_NONE when nothing is due; *coalesced: events folded in */
int mon_pol_take(struct mon_policy *p, uint64_t now, unsigned *coalesced) _nonnull_();
/* when the next pending level becomes due (ms), or UINT64_MAX */
uint64_t mon_pol_deadline(const struct mon_policy *p) _nonnull_();
/* a level measured now: true if it must be raised (it rose, or it has
 * persisted for the repeat period) */
bool mon_hold_update(struct mon_hold *h, int level, uint64_t now) _nonnull_();
/* cgroup2 headroom and meminfo decisions */
int mon_cg2_level(bool have, uint64_t cur, uint64_t high, uint64_t max);
int mon_meminfo_level(int used_pct);

/* the limit: the lines drawn under it (bytes) */
struct mon_limit_plan {
	uint64_t limit;        /* the smallest applicable limit */
	uint64_t threshold;    /* a crossing starts a purge (97%) */
	uint64_t line;         /* the budget keeps usage under it (94%) */
	uint64_t target;       /* a threshold purge stops here (75%) */
	uint64_t file_reserve; /* file cache still counted (mon_file_reserve) */
};
void mon_limit_plan(uint64_t limit, struct mon_limit_plan *out) _nonnull_();
/* bytes a limit purge takes at usage: down to the target, never below */
uint64_t mon_limit_excess(const struct mon_limit_plan *pl, uint64_t usage) _nonnull_();
/* the file cache left out of the usage (A3): all the reclaimable cache
 * but a reserve for file I/O in flight.  Pages being read in are locked,
 * so the kernel cannot reclaim them, and a sequential reader can have two
 * readahead windows in flight (the one it waits for and the next).  With
 * L/16 only, a cache at its line beside a streaming reader left 16 MiB of
 * a 128 MiB limit to file cache and the cgroup hit its limit millions of
 * times in 10 s; once it was OOM-killed (doc/monitor.md).  The reserve is
 * two of the largest window among the block devices, at least
 * L/MON_FILE_RESERVE_DIV (mon_limit_plan's value) and at most
 * L/MON_FILE_RESERVE_MAX_DIV (the cache keeps the rest of the limit) */
#define MON_FILE_RESERVE_DIV 16
#define MON_FILE_RESERVE_MAX_DIV 4
uint64_t mon_file_reserve(uint64_t limit, uint64_t readahead);
uint64_t mon_limit_reclaimable(const struct mon_limit_plan *pl, uint64_t file) _nonnull_();
/* A3 for pressure events: a limited cgroup that still holds more than
 * L/MON_FILE_FIRST_DIV of file cache the kernel can reclaim (beyond the
 * reserve above) stalls because the kernel is reclaiming that cache (its
 * stalls count in every ancestor's PSI, the system's too): a pressure
 * purge then waits, the kernel goes first */
#define MON_FILE_FIRST_DIV 32
bool mon_pressure_file_first(const struct mon_limit_plan *pl, uint64_t reclaimable) _nonnull_();
/* the ctx's budget: the line minus what the cgroup holds that is not this
 * ctx's unpurged volatile bytes; at least 1 (0 would mean "no budget") */
uint64_t mon_limit_budget(const struct mon_limit_plan *pl, uint64_t usage, uint64_t own_volatile)
	_nonnull_();
/* ms to the next usage poll: the time to fill the distance to the
 * threshold at MON_FILL_RATE, doubled while usage stands still */
#define MON_FILL_RATE_BPMS (1024ull * 1024) /* 1 MiB per ms (~1 GiB/s) */
#define MON_LIMIT_MIN_MS 1
#define MON_LIMIT_MAX_MS 250
unsigned mon_limit_interval(const struct mon_limit_plan *pl, uint64_t usage, uint64_t prev_usage,
			    unsigned prev_ms) _nonnull_();

/* what the process's memory cgroups can still charge before a limit: the
 * least, over the cgroup and its ancestors with a limit, of that limit
 * less the cgroup's usage, the reclaimable file cache counted free;
 * UINT64_MAX without a cgroup limit (or its usage unread) */
uint64_t mon_limit_headroom(void);

/* ---- monitor-platform.c: discovery and parsing ---- */

ssize_t mon_read_text(const char *dir, const char *name, char *buf, size_t size);
bool mon_exists_in(const char *dir, const char *name) _nonnull_();
bool mon_find_key(const char *text, const char *key, uint64_t *out) _nonnull_();
/* the largest readahead window of the block devices under dir
 * (dir/NAME/queue/read_ahead_kb, /sys/block), in bytes; 0 if none */
uint64_t mon_readahead_max(const char *dir) _nonnull_();
/* a number, or "max" (UINT64_MAX); v1's "unlimited" values (>= 2^62) too */
bool mon_parse_limit(const char *text, uint64_t *out) _nonnull_();
bool mon_read_u64_or_max(const char *dir, const char *name, uint64_t *out) _nonnull_(2, 3);
void mon_close_fd(int *fd) _nonnull_();
/* the cgroup2 mount (/sys/fs/cgroup or /sys/fs/cgroup/unified) or NULL */
const char *mon_cg2_mount(void);
/* path of the "0::" line of a /proc/self/cgroup text (malloc'ed) */
char *mon_cg2_path(const char *proc_cgroup) _nonnull_();
/* the process's cgroup2 directory (malloc'ed), or NULL (reason logged) */
char *mon_cg2_find_dir(void);
/* the v1 memory controller's directory from the texts of
 * /proc/self/cgroup and /proc/self/mountinfo; *mnt gets its mount point
 * (both malloc'ed); 0 or -errno */
int mon_cg1_parse_dir(const char *proc_cgroup, const char *mountinfo, char **dir, char **mnt)
	_nonnull_();
/* the same, from this process's files */
int mon_cg1_find_dir(char **dir, char **mnt) _nonnull_();
/* smallest value of the limit files @names (NULL-terminated) in @dir and
 * its ancestors up to @top (included); *where: the directory holding it,
 * the uppermost one on a tie (malloc'ed); UINT64_MAX if none; 1 for a
 * limit of 0 */
uint64_t mon_walk_limit(const char *top, const char *dir, const char *const *names, char **where)
	_nonnull_(1, 2, 3);
/* what the memory cgroups @dir and its ancestors up to @top (included)
 * can still charge: the least, over those with a limit (@names, the
 * smallest of them), of that limit less the cgroup's usage, its
 * reclaimable file cache counted free (v1: memory.usage_in_bytes, else
 * memory.current); UINT64_MAX if none has one */
uint64_t mon_walk_headroom(const char *top, const char *dir, const char *const *names, bool v1)
	_nonnull_(1, 2, 3);
/* whole file into a malloc'ed string, or NULL */
char *mon_slurp(const char *path) _nonnull_();
/* "BYTES[k|m|g]" or "off": 0 = off, UINT64_MAX = not set/invalid */
uint64_t mon_parse_bytes(const char *s);
/* the reclaimable file cache of a memory.stat text (v1: total_ keys) */
uint64_t mon_stat_file_cache(const char *stat, bool v1) _nonnull_();
/* RssAnon + RssShmem of a /proc/self/status text, in bytes */
bool mon_status_own(const char *status, uint64_t *out) _nonnull_();

/* ---- sources ---- */

struct vr_monitor;
#define MON_MAX_FDS 4

struct mon_source {
	int id;             /* enum vr_monitor_source */
	unsigned period_ms; /* first periodic check after this, 0 = none */
	/* 0 if usable (state set up in m), else -errno (reason logged) */
	int (*open)(struct vr_monitor *m);
	void (*close)(struct vr_monitor *m);
	/* fills up to MON_MAX_FDS fds; their count */
	int (*fds)(struct vr_monitor *m, struct pollfd *pfd);
	/* fd i had revents: false if the source is lost */
	bool (*ready)(struct vr_monitor *m, int i, short revents, uint64_t now);
	/* periodic check; returns ms to the next one, 0 = none */
	unsigned (*check)(struct vr_monitor *m, uint64_t now);
};

extern const struct mon_source mon_src_psi, mon_src_cgroup2, mon_src_cgroup1, mon_src_meminfo,
	mon_src_limit;

struct mon_psi {
	int trig_fd[2];       /* [0] "some" -> MODERATE, [1] "full" -> CRITICAL */
	uint64_t armed_ms[2]; /* when written */
	unsigned win_ms[2];   /* the window the kernel accepted */
	bool seen[2];         /* an event came (the first one may be spurious) */
};
struct mon_cg2 {
	char *dir;
	bool kernfs; /* a real cgroup2 directory (POLLPRI works) */
	bool seam;   /* from VRANGE_CGROUP_DIR */
	int ino_fd;  /* inotify on dir, or -1 */
	int ino_wd;  /* its watch, -1 while the directory is gone */
	int events_fd;
	bool ev_valid;
	uint64_t ev_high, ev_max, ev_oom;
	bool files_seen, files_gone;
	struct mon_psi trig; /* memory.pressure triggers */
	struct mon_hold hold;
};
struct mon_cg1 {
	int efd[2]; /* [0] medium, [1] critical */
	char *dir;
};
struct mon_meminfo {
	struct mon_hold hold;
};
enum mon_limit_kind { MON_LIM_V1 = 1, MON_LIM_V2, MON_LIM_OVERRIDE };
struct mon_limit {
	int kind;      /* 0 while no limit applies (the watcher waits for one) */
	char *dir;     /* the cgroup holding the limit, whose usage counts */
	uint64_t env;  /* VRANGE_MEMORY_LIMIT, or 0 */
	int usage_fd;  /* memory.usage_in_bytes / memory.current / status */
	int stat_fd;   /* memory.stat of dir: the file cache, or -1 */
	bool own;      /* usage_fd is /proc/self/status (VRANGE_MEMORY_LIMIT) */
	int thr_efd;   /* v1 usage threshold eventfd, or -1 */
	int events_fd; /* v2 memory.events (POLLPRI), or -1 */
	struct mon_limit_plan plan;
	uint64_t usage;     /* last counted: raw - file */
	uint64_t raw, file; /* last read: the usage file, the reclaimable cache */
	uint64_t readahead; /* mon_readahead_max, read when the watcher opens */
	unsigned interval;
	uint64_t recheck_ms; /* next re-read of the limit itself */
	/* under VRANGE_MEMORY_LIMIT or without a limit watcher: the cgroup
	 * limit still detected, for the pressure gate only
	 * (mon_limit_file_first, A3): its memory.stat */
	int gate_stat_fd;           /* or -1: no cgroup limit, no gate */
	char *gate_dir;             /* the cgroup of gate_stat_fd, or NULL */
	bool gate_v1;               /* memory.stat has v1's total_ keys */
	struct mon_limit_plan gate; /* the cgroup limit's lines */
	bool warned;                /* the budget-zero warning was given */
	uint64_t dbg_ms;            /* last per-event debug line */
	unsigned dbg_quiet;         /* lines held back since */
};

/* a watcher with no file open (every fd -1) */
#define MON_LIMIT_CLOSED                                                                           \
	((struct mon_limit){ .usage_fd = -1,                                                       \
			     .stat_fd = -1,                                                        \
			     .thr_efd = -1,                                                        \
			     .events_fd = -1,                                                      \
			     .gate_stat_fd = -1 })

struct vr_monitor {
	struct vr_ctx *ctx;
	pthread_t thread;
	int wake_fd;     /* eventfd: written by vr_monitor_stop */
	int forced;      /* VRANGE_MONITOR source, or MON_AUTO */
	int primary;     /* the pressure source in use (enum vr_monitor_source) */
	unsigned active; /* bit per source id running now */
	uint64_t next_check[VR_MONITOR_LIMIT + 1]; /* ms, 0 = none */
	uint64_t last_wake;                        /* ms, last fd wake-up handled */
	struct mon_policy pol;

	struct mon_psi psi;
	struct mon_cg2 cg2;
	struct mon_cg1 cg1;
	struct mon_meminfo mi;
	struct mon_limit lim;
};

#define MON_AUTO (-1)

/* a source signalled a level (edge): coalesced by the policy */
void mon_raise(struct vr_monitor *m, int level, const char *why) _nonnull_();
/* monitor-limit.c: a fresh read of the limited cgroup says a pressure
 * event is the kernel reclaiming its file cache (mon_pressure_file_first);
 * *file: the reclaimable file cache read */
bool mon_limit_file_first(struct vr_monitor *m, uint64_t *file) _nonnull_();
/* monitor-limit.c: the monitor thread starts (binds per-thread files) */
void mon_limit_thread_start(struct vr_monitor *m) _nonnull_();
/* the pressure gate's memory.stat closed and its cgroup forgotten */
void mon_limit_gate_close(struct mon_limit *l) _nonnull_();
/* a level-triggered source measured level now */
void mon_hold(struct vr_monitor *m, struct mon_hold *h, int level, uint64_t now, const char *why)
	_nonnull_();
/* PSI triggers on path into t (shared by psi and cgroup2); 0 or -errno */
int mon_psi_open(struct mon_psi *t, const char *path) _nonnull_();
void mon_psi_close(struct mon_psi *t) _nonnull_();
int mon_psi_fds(struct mon_psi *t, struct pollfd *pfd) _nonnull_();
/* false once both triggers are gone */
bool mon_psi_ready(struct vr_monitor *m, struct mon_psi *t, int i, short revents, uint64_t now)
	_nonnull_();

#endif
