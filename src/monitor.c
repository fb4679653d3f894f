/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor.c - the memory-pressure monitor: one thread per ctx (issue 5)
 *
 * The thread waits for a pressure signal from the first source that works
 * (cgroup v2, system PSI, cgroup v1, /proc/meminfo; VRANGE_MONITOR forces
 * one) and acts on it through vr_ctx_notify_pressure() (API S11), which
 * takes the ctx's purge lock and one region lock at a time itself: the
 * monitor holds no library lock, ever, and blocks only in poll().
 *
 * Two kinds of signals:
 *   edges   a PSI trigger fired, a cgroup v1 eventfd was signalled, a count
 *           in memory.events rose: each one is an event;
 *   levels  memory.current against memory.high / memory.max, MemAvailable
 *           against MemTotal: an event when the level rises, repeated while
 *           it persists (MODERATE every 10 s, CRITICAL every 5 s).
 * Events are coalesced: at most one action per level per 200 ms; events
 * arriving in between are folded into one pending action, and a CRITICAL
 * action swallows a pending MODERATE one.  A storm of file changes is
 * handled at most 100 times a second.
 *
 * Everything in struct vr_monitor is owned by the monitor thread once it
 * runs; vr_monitor_start() sets it up before the thread exists and
 * vr_monitor_stop() tears it down after joining it.  In a fork child the
 * thread does not exist: stop only closes fds and frees.
 * Thresholds and the measured reaction latency: doc/monitor.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "private.h"

#define MON_GAP_MS 200             /* at most one action per level per gap */
#define MON_MIN_LOOP_MS 10         /* at most 100 wake-ups handled per second */
#define MON_CG2_PERIOD_MS 1000     /* cgroup2 files re-read at least this often */
#define MON_MEMINFO_PERIOD_MS 5000 /* Chromium's Linux evaluator period */
#define MON_REPEAT_MODERATE_MS 10000
#define MON_REPEAT_CRITICAL_MS 5000

/* cgroup2 headroom, percent of memory.max */
#define MON_CG2_MODERATE_PCT 90
#define MON_CG2_CRITICAL_PCT 97
/* meminfo, percent of MemTotal in use (Chromium) */
#define MON_MEMINFO_MODERATE_PCT 75
#define MON_MEMINFO_CRITICAL_PCT 85

/* PSI triggers: stall time per 1 s window; the 2 s retry keeps the ratio */
#define MON_PSI_SOME_US 150000 /* "some" 15% -> MODERATE */
#define MON_PSI_FULL_US 100000 /* "full" 10% -> CRITICAL */

#define MON_AUTO (-1)

struct vr_monitor {
	struct vr_ctx *ctx;
	pthread_t thread;
	int wake_fd; /* eventfd: written by vr_monitor_stop */
	int forced;  /* VRANGE_MONITOR source, or MON_AUTO */
	int source;  /* enum vr_monitor_source in use */

	/* PSI triggers (system, or cgroup2 memory.pressure):
	 * [0] "some" -> MODERATE, [1] "full" -> CRITICAL */
	int trig_fd[2];

	/* cgroup1: eventfds for [0] medium, [1] critical */
	int cg1_efd[2];
	char *cg1_dir;

	/* cgroup2 */
	char *cg_dir;
	bool cg_kernfs; /* a real cgroup2 directory (POLLPRI works) */
	bool cg_seam;   /* from VRANGE_CGROUP_DIR */
	int ino_fd;     /* inotify on cg_dir, or -1 */
	int ino_wd;     /* its watch, -1 while the directory is gone */
	int events_fd;  /* memory.events for POLLPRI (kernfs only), or -1 */
	bool ev_valid;  /* ev_* hold the last counts read */
	uint64_t ev_high, ev_max, ev_oom;
	bool files_seen; /* memory.current or memory.events was read once */
	bool files_gone; /* ... and both are unreadable now (logged) */

	/* level-triggered sources (cgroup2 headroom, meminfo) */
	int held;         /* level at the last check */
	uint64_t held_ms; /* when that level was last raised */

	uint64_t period_ms;  /* periodic check, 0 = none */
	uint64_t next_check; /* ms */
	uint64_t last_wake;  /* ms, last fd wake-up handled */

	/* rate limiter, indexed by enum vr_pressure */
	bool pending[3];
	bool acted[3];
	uint64_t acted_ms[3];
	unsigned coalesced[3];
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *level_name(int level)
{
	return level == VR_PRESSURE_CRITICAL   ? "critical"
	       : level == VR_PRESSURE_MODERATE ? "moderate"
					       : "none";
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* reads dir/name (or name if dir is NULL) into buf, NUL terminated;
 * bytes read or -errno */
static ssize_t read_text(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	if (dir) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
			return -ENAMETOOLONG;
		name = path;
	}
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got < size - 1) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

static bool exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return false;
	return access(path, F_OK) == 0;
}

/* value of "key N" in a "key value" per line file (memory.events, meminfo) */
static bool find_key(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) != 0 ||
		    (p[klen] != ' ' && p[klen] != ':' && p[klen] != '\t'))
			continue;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p + klen + 1, &end, 10);
		if (errno || end == p + klen + 1)
			return false;
		*out = v;
		return true;
	}
	return false;
}

/* memory.current / memory.high / memory.max: a number or "max" (UINT64_MAX) */
static bool read_u64_or_max(const char *dir, const char *name, uint64_t *out)
{
	char buf[64];
	if (read_text(dir, name, buf, sizeof(buf)) <= 0)
		return false;
	if (strncmp(buf, "max", 3) == 0) {
		*out = UINT64_MAX;
		return true;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (errno || end == buf)
		return false;
	*out = v;
	return true;
}

/* cur >= pct% of lim, without overflow */
static bool at_pct(uint64_t cur, uint64_t lim, unsigned pct)
{
	return (unsigned __int128)cur * 100 >= (unsigned __int128)lim * pct;
}

/* ---------------------------------------------------------------------- */
/* acting on pressure: coalescing and rate limiting                        */

static void mon_raise(struct vr_monitor *m, int level, const char *why)
{
	if (level == VR_PRESSURE_NONE)
		return;
	if (m->pending[level])
		m->coalesced[level]++;
	m->pending[level] = true;
	vr_dbg("monitor: %s: %s -> %s pressure", vr_monitor_source_name(m->source), why,
	       level_name(level));
}

/* acts on pending levels whose gap has passed */
static void mon_flush(struct vr_monitor *m, uint64_t now)
{
	for (int l = VR_PRESSURE_CRITICAL; l >= VR_PRESSURE_MODERATE; l--) {
		if (!m->pending[l])
			continue;
		if (m->acted[l] && now - m->acted_ms[l] < MON_GAP_MS)
			continue; /* stays pending: coalesced into one later action */
		m->pending[l] = false;
		if (l == VR_PRESSURE_CRITICAL && m->pending[VR_PRESSURE_MODERATE]) {
			m->pending[VR_PRESSURE_MODERATE] = false; /* swallowed */
			m->coalesced[l] += 1 + m->coalesced[VR_PRESSURE_MODERATE];
			m->coalesced[VR_PRESSURE_MODERATE] = 0;
		}
		m->acted[l] = true;
		m->acted_ms[l] = now;
		ssize_t got = vr_ctx_notify_pressure(m->ctx, (enum vr_pressure)l);
		vr_dbg("monitor: acted on %s pressure (%u coalesced): %zd bytes reclaimed",
		       level_name(l), m->coalesced[l], got);
		m->coalesced[l] = 0;
	}
}

/* a level-triggered source measured @level: raise on a rise, repeat while
 * it persists */
static void mon_hold(struct vr_monitor *m, int level, uint64_t now, const char *why)
{
	bool raise = false;
	if (level > m->held)
		raise = true;
	else if (level != VR_PRESSURE_NONE)
		raise = now - m->held_ms >= (level == VR_PRESSURE_CRITICAL
						     ? MON_REPEAT_CRITICAL_MS
						     : MON_REPEAT_MODERATE_MS);
	if (raise) {
		m->held_ms = now;
		mon_raise(m, level, why);
	}
	m->held = level;
}

/* ---------------------------------------------------------------------- */
/* PSI triggers                                                            */

/* one trigger on its own fd: @stall_us per 1 s window, retried as
 * 2 * @stall_us per 2 s when the kernel insists on 2 s multiples (no
 * CAP_SYS_RESOURCE); fd or -errno */
static int psi_trigger(const char *path, const char *kind, unsigned stall_us)
{
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = 0;
	for (unsigned win = 1; win <= 2; win++) {
		char buf[64];
		int n = snprintf(buf, sizeof(buf), "%s %u %u", kind, stall_us * win,
				 win * 1000000u);
		/* the terminating NUL too, or the kernel loses the last digit */
		if (write(fd, buf, (size_t)n + 1) == n + 1) {
			vr_dbg("monitor: trigger \"%s\" on %s", buf, path);
			return fd;
		}
		err = -errno;
		vr_dbg("monitor: trigger \"%s\" on %s: %s", buf, path, strerror(-err));
		if (err != -EINVAL)
			break;
	}
	close(fd);
	return err;
}

/* some -> trig_fd[0]; full -> trig_fd[1] (optional); 0 or -errno */
static int psi_open(struct vr_monitor *m, const char *path)
{
	int fd = psi_trigger(path, "some", MON_PSI_SOME_US);
	if (fd < 0)
		return fd;
	m->trig_fd[0] = fd;
	fd = psi_trigger(path, "full", MON_PSI_FULL_US);
	if (fd >= 0)
		m->trig_fd[1] = fd;
	else
		vr_dbg("monitor: no \"full\" trigger on %s: CRITICAL comes from other signals only",
		       path);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* cgroup v2                                                               */

/* the process's cgroup v2 directory, malloc'ed, or NULL (reason logged) */
static char *cg2_find_dir(void)
{
	struct statfs sf;
	const char *mnt = NULL;
	if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		mnt = "/sys/fs/cgroup";
	else if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		mnt = "/sys/fs/cgroup/unified";
	if (!mnt) {
		vr_dbg("monitor: cgroup2 unusable: no cgroup2 mount at /sys/fs/cgroup(/unified)");
		return NULL;
	}
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f) {
		vr_dbg("monitor: cgroup2 unusable: /proc/self/cgroup: %m");
		return NULL;
	}
	char *line = NULL, *dir = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		const char *path = line + 3;
		if (asprintf(&dir, "%s%s", mnt, strcmp(path, "/") == 0 ? "" : path) < 0)
			dir = NULL;
		break;
	}
	free(line);
	fclose(f);
	if (!dir)
		vr_dbg("monitor: cgroup2 unusable: no 0:: line in /proc/self/cgroup");
	return dir;
}

static void cg2_check(struct vr_monitor *m, uint64_t now);

/* (re)adds the inotify watch on the directory: ino_wd or -1 */
static int cg2_watch(struct vr_monitor *m)
{
	m->ino_wd = inotify_add_watch(m->ino_fd, m->cg_dir,
				      IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO |
					      IN_DELETE | IN_ATTRIB | IN_DELETE_SELF);
	return m->ino_wd;
}

static int setup_cgroup2(struct vr_monitor *m)
{
	const char *env = getenv("VRANGE_CGROUP_DIR");
	m->cg_seam = env && *env;
	m->cg_dir = m->cg_seam ? strdup(env) : cg2_find_dir();
	if (!m->cg_dir)
		return m->cg_seam ? -ENOMEM : -ENOENT;
	struct statfs sf;
	if (statfs(m->cg_dir, &sf) < 0) {
		int err = -errno;
		vr_dbg("monitor: cgroup2 unusable: %s: %s", m->cg_dir, strerror(-err));
		return err;
	}
	m->cg_kernfs = sf.f_type == CGROUP2_SUPER_MAGIC;
	/* cgroup.events exists in every cgroup but the root; the root has no
	 * limits and its memory.pressure is the system's: leave it to PSI */
	if (m->cg_kernfs && !m->cg_seam && !exists_in(m->cg_dir, "cgroup.events")) {
		vr_dbg("monitor: cgroup2 unusable: %s is the root cgroup (system-wide: use PSI)",
		       m->cg_dir);
		return -ENOENT;
	}
	/* triggers only on kernfs: never write into a seam's ordinary file */
	if (m->cg_kernfs && exists_in(m->cg_dir, "memory.pressure")) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/memory.pressure", m->cg_dir);
		int err = psi_open(m, path);
		if (err < 0)
			vr_dbg("monitor: cgroup2: no trigger on %s: %s", path, strerror(-err));
	}
	bool events = exists_in(m->cg_dir, "memory.events");
	if (m->trig_fd[0] < 0 && !events && !exists_in(m->cg_dir, "memory.current") &&
	    !(m->cg_seam && exists_in(m->cg_dir, "memory.pressure"))) {
		vr_dbg("monitor: cgroup2 unusable: %s has no memory.events, memory.current or "
		       "usable memory.pressure",
		       m->cg_dir);
		return -ENOENT;
	}
	m->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (m->ino_fd >= 0 && cg2_watch(m) < 0) {
		vr_dbg("monitor: cgroup2: inotify on %s: %m (re-reading every %d ms)", m->cg_dir,
		       MON_CG2_PERIOD_MS);
		close_fd(&m->ino_fd);
	}
	m->period_ms = MON_CG2_PERIOD_MS;
	/* baseline now, so that a change right after vr_ctx_new counts */
	cg2_check(m, now_ms());
	vr_dbg("monitor: cgroup2: watching %s%s%s", m->cg_dir,
	       m->cg_seam ? " (VRANGE_CGROUP_DIR)" : "",
	       m->trig_fd[0] >= 0 ? " with memory.pressure triggers" : "");
	return 0;
}

static void cg2_check_events(struct vr_monitor *m)
{
	char buf[1024];
	uint64_t high = 0, max = 0, oom = 0;
	ssize_t n = read_text(m->cg_dir, "memory.events", buf, sizeof(buf));
	if (n < 0) { /* gone: whatever comes back is a new baseline */
		m->ev_valid = false;
		return;
	}
	/* the kernel writes every key; a seam file may hold only some, or be
	 * caught empty between a writer's truncate and write: skip that read */
	if ((!find_key(buf, "high", &high) + !find_key(buf, "max", &max) +
	     !find_key(buf, "oom", &oom)) == 3)
		return;
	if (m->ev_valid) {
		char why[128];
		if (max > m->ev_max || oom > m->ev_oom) {
			snprintf(why, sizeof(why),
				 "memory.events max %" PRIu64 "->%" PRIu64 " oom %" PRIu64
				 "->%" PRIu64,
				 m->ev_max, max, m->ev_oom, oom);
			mon_raise(m, VR_PRESSURE_CRITICAL, why);
		} else if (high > m->ev_high) {
			snprintf(why, sizeof(why), "memory.events high %" PRIu64 "->%" PRIu64,
				 m->ev_high, high);
			mon_raise(m, VR_PRESSURE_MODERATE, why);
		}
	}
	/* counts that went down (a file replaced) are a new baseline */
	m->ev_high = high;
	m->ev_max = max;
	m->ev_oom = oom;
	m->ev_valid = true;
}

static void cg2_check(struct vr_monitor *m, uint64_t now)
{
	/* a directory that was removed and came back is watched again */
	if (m->ino_fd >= 0 && m->ino_wd < 0 && cg2_watch(m) >= 0)
		vr_dbg("monitor: cgroup2: %s back, watched again", m->cg_dir);
	/* acknowledge a kernfs POLLPRI (reading resets it); a failed read
	 * means the file is going away: stop polling it */
	if (m->cg_kernfs && m->events_fd < 0 && exists_in(m->cg_dir, "memory.events")) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/memory.events", m->cg_dir);
		m->events_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (m->events_fd >= 0) {
		char scratch[512];
		if (pread(m->events_fd, scratch, sizeof(scratch), 0) < 0)
			close_fd(&m->events_fd);
	}
	cg2_check_events(m);

	uint64_t cur, high = UINT64_MAX, max = UINT64_MAX;
	int level = VR_PRESSURE_NONE;
	bool have = read_u64_or_max(m->cg_dir, "memory.current", &cur);
	if (have) {
		if (!read_u64_or_max(m->cg_dir, "memory.high", &high))
			high = UINT64_MAX;
		if (!read_u64_or_max(m->cg_dir, "memory.max", &max))
			max = UINT64_MAX;
		if (max != UINT64_MAX && at_pct(cur, max, MON_CG2_CRITICAL_PCT))
			level = VR_PRESSURE_CRITICAL;
		else if (max != UINT64_MAX && at_pct(cur, max, MON_CG2_MODERATE_PCT))
			level = VR_PRESSURE_MODERATE;
		else if (high != UINT64_MAX && cur > high)
			level = VR_PRESSURE_MODERATE;
	}
	/* logged once per disappearance, not for a directory that never had
	 * them (a root cgroup watched through its triggers) */
	if (!have && !m->ev_valid) {
		if (m->files_seen && !m->files_gone)
			vr_dbg("monitor: cgroup2: %s: memory.current and memory.events gone; still "
			       "watching",
			       m->cg_dir);
		m->files_gone = true;
	} else {
		if (m->files_seen && m->files_gone)
			vr_dbg("monitor: cgroup2: %s: files back", m->cg_dir);
		m->files_gone = false;
		m->files_seen = true;
	}
	char why[160];
	snprintf(why, sizeof(why), "memory.current %" PRIu64 " high %" PRIu64 " max %" PRIu64,
		 have ? cur : 0, high, max);
	mon_hold(m, level, now, why);
}

/* drains the inotify queue; true if something in the directory changed */
static bool cg2_drain_inotify(struct vr_monitor *m)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;
	for (;;) {
		ssize_t n = read(m->ino_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		any = true;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			if (ev->mask & IN_IGNORED) {
				vr_dbg("monitor: cgroup2: %s removed; re-reading every %d ms",
				       m->cg_dir, MON_CG2_PERIOD_MS);
				m->ino_wd = -1;
			}
			p += sizeof(*ev) + ev->len;
		}
	}
	return any;
}

/* ---------------------------------------------------------------------- */
/* system PSI, cgroup v1, meminfo                                          */

static int setup_psi(struct vr_monitor *m)
{
	int err = psi_open(m, "/proc/pressure/memory");
	if (err < 0)
		vr_dbg("monitor: psi unusable: /proc/pressure/memory: %s", strerror(-err));
	return err;
}

/* "N:ctrl,ctrl:path" line of the v1 memory controller -> path (malloc'ed) */
static char *cg1_memory_path(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return NULL;
	char *line = NULL, *out = NULL;
	size_t cap = 0;
	while (!out && getline(&line, &cap, f) > 0) {
		char *ctrls = strchr(line, ':');
		char *path = ctrls ? strchr(ctrls + 1, ':') : NULL;
		if (!path)
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		for (char *save, *t = strtok_r(ctrls + 1, ",", &save); t;
		     t = strtok_r(NULL, ",", &save))
			if (strcmp(t, "memory") == 0) {
				out = strdup(path);
				break;
			}
	}
	free(line);
	fclose(f);
	return out;
}

/* mount point and mounted root of the v1 memory hierarchy */
static bool cg1_mount(char *mnt, char *root, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		/* id parent maj:min root mountpoint opts [optional...] - type source superopts */
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char type[32], super[512], r[PATH_MAX], mp[PATH_MAX];
		if (sscanf(sep + 3, "%31s %*s %511s", type, super) != 2 ||
		    strcmp(type, "cgroup") != 0)
			continue;
		if (sscanf(line, "%*d %*d %*s %4095s %4095s", r, mp) != 2)
			continue;
		for (char *save, *t = strtok_r(super, ",", &save); t;
		     t = strtok_r(NULL, ",", &save))
			if (strcmp(t, "memory") == 0) {
				snprintf(mnt, size, "%s", mp);
				snprintf(root, size, "%s", r);
				found = true;
				break;
			}
	}
	free(line);
	fclose(f);
	return found;
}

static int cg1_register(int ctl_fd, int efd, int level_fd, const char *level)
{
	char buf[96];
	for (int hier = 1; hier >= 0; hier--) {
		int n = snprintf(buf, sizeof(buf), "%d %d %s%s", efd, level_fd, level,
				 hier ? ",hierarchy" : "");
		errno = EIO; /* for a short write */
		if (write(ctl_fd, buf, (size_t)n) == n)
			return 0;
		if (errno != EINVAL) /* old kernels know no ",hierarchy" */
			break;
	}
	return -errno;
}

static int setup_cgroup1(struct vr_monitor *m)
{
	char mnt[PATH_MAX], root[PATH_MAX];
	char *path = cg1_memory_path();
	if (!path) {
		vr_dbg("monitor: cgroup1 unusable: no memory controller line in /proc/self/cgroup");
		return -ENOENT;
	}
	if (!cg1_mount(mnt, root, sizeof(mnt))) {
		vr_dbg("monitor: cgroup1 unusable: no v1 memory hierarchy mounted");
		free(path);
		return -ENOENT;
	}
	size_t rl = strlen(root);
	const char *rel = path;
	if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0 &&
	    (path[rl] == '/' || !path[rl]))
		rel = path + rl;
	if (asprintf(&m->cg1_dir, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) < 0)
		m->cg1_dir = NULL;
	free(path);
	if (!m->cg1_dir)
		return -ENOMEM;

	char p[PATH_MAX];
	int err = 0, ctl = -1, lvl;
	snprintf(p, sizeof(p), "%s/memory.pressure_level", m->cg1_dir);
	lvl = open(p, O_RDONLY | O_CLOEXEC);
	if (lvl < 0)
		goto fail;
	snprintf(p, sizeof(p), "%s/cgroup.event_control", m->cg1_dir);
	ctl = open(p, O_WRONLY | O_CLOEXEC);
	if (ctl < 0)
		goto fail;
	static const char *const levels[2] = { "medium", "critical" };
	for (int i = 0; i < 2; i++) {
		m->cg1_efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (m->cg1_efd[i] < 0)
			goto fail;
		err = cg1_register(ctl, m->cg1_efd[i], lvl, levels[i]);
		if (err < 0) {
			errno = -err;
			goto fail;
		}
	}
	/* the registrations live as long as the eventfds */
	close(ctl);
	close(lvl);
	vr_dbg("monitor: cgroup1: memory.pressure_level of %s (medium, critical)", m->cg1_dir);
	return 0;
fail:
	err = errno ? -errno : -EIO;
	vr_dbg("monitor: cgroup1 unusable: %s: %s", p, strerror(-err));
	if (ctl >= 0)
		close(ctl);
	if (lvl >= 0)
		close(lvl);
	return err;
}

/* percent of MemTotal in use, or -errno */
static int meminfo_used_pct(void)
{
	char buf[4096];
	uint64_t total, avail;
	ssize_t n = read_text(NULL, "/proc/meminfo", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (!find_key(buf, "MemTotal", &total) || !find_key(buf, "MemAvailable", &avail) || !total)
		return -ENODATA;
	if (avail > total)
		avail = total;
	return (int)((total - avail) * 100 / total);
}

static void meminfo_check(struct vr_monitor *m, uint64_t now)
{
	int used = meminfo_used_pct();
	int level = VR_PRESSURE_NONE;
	if (used >= MON_MEMINFO_CRITICAL_PCT)
		level = VR_PRESSURE_CRITICAL;
	else if (used >= MON_MEMINFO_MODERATE_PCT)
		level = VR_PRESSURE_MODERATE;
	char why[64];
	snprintf(why, sizeof(why), "%d%% of MemTotal in use", used);
	mon_hold(m, level, now, why);
}

static int setup_meminfo(struct vr_monitor *m)
{
	int used = meminfo_used_pct();
	if (used < 0) {
		vr_dbg("monitor: meminfo unusable: /proc/meminfo: %s", strerror(-used));
		return used;
	}
	m->period_ms = MON_MEMINFO_PERIOD_MS;
	vr_dbg("monitor: meminfo: %d%% in use, polled every %d ms", used, MON_MEMINFO_PERIOD_MS);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* source selection                                                        */

static const struct {
	int source;
	int (*setup)(struct vr_monitor *m);
} sources[] = {
	{ VR_MONITOR_CGROUP2, setup_cgroup2 },
	{ VR_MONITOR_PSI, setup_psi },
	{ VR_MONITOR_CGROUP1, setup_cgroup1 },
	{ VR_MONITOR_MEMINFO, setup_meminfo },
};

static void close_source(struct vr_monitor *m)
{
	for (int i = 0; i < 2; i++) {
		close_fd(&m->trig_fd[i]);
		close_fd(&m->cg1_efd[i]);
	}
	close_fd(&m->ino_fd);
	m->ino_wd = -1;
	close_fd(&m->events_fd);
	free(m->cg_dir);
	free(m->cg1_dir);
	m->cg_dir = m->cg1_dir = NULL;
	m->cg_kernfs = m->cg_seam = m->ev_valid = m->files_seen = m->files_gone = false;
	m->held = VR_PRESSURE_NONE;
	m->period_ms = 0;
}

/* picks the first source that works, starting at sources[first] */
static void select_source(struct vr_monitor *m, size_t first)
{
	m->source = VR_MONITOR_NONE;
	for (size_t i = first; i < VR_ARRAY_SIZE(sources); i++) {
		if (m->forced != MON_AUTO && m->forced != sources[i].source)
			continue;
		m->source = sources[i].source;
		if (sources[i].setup(m) == 0)
			break;
		close_source(m);
		m->source = VR_MONITOR_NONE;
	}
	atomic_store(&m->ctx->monitor_source, m->source);
	vr_dbg("monitor: source %s%s",
	       m->forced == VR_MONITOR_NONE ? "off" : vr_monitor_source_name(m->source),
	       m->forced != MON_AUTO ? " (VRANGE_MONITOR)" : "");
}

static void source_lost(struct vr_monitor *m, const char *why)
{
	size_t next = VR_ARRAY_SIZE(sources);
	for (size_t i = 0; i < VR_ARRAY_SIZE(sources); i++)
		if (sources[i].source == m->source)
			next = i + 1;
	vr_dbg("monitor: %s lost (%s); falling back", vr_monitor_source_name(m->source), why);
	close_source(m);
	select_source(m, next);
	m->next_check = now_ms() + m->period_ms;
}

static int parse_forced(void)
{
	const char *e = getenv("VRANGE_MONITOR");
	if (!e || !*e)
		return MON_AUTO;
	if (strcmp(e, "off") == 0)
		return VR_MONITOR_NONE;
	for (int s = VR_MONITOR_CGROUP2; s <= VR_MONITOR_MEMINFO; s++)
		if (strcmp(e, vr_monitor_source_name(s)) == 0)
			return s;
	vr_dbg("monitor: unknown VRANGE_MONITOR=%s ignored", e);
	return MON_AUTO;
}

/* ---------------------------------------------------------------------- */
/* the thread                                                              */

enum { TAG_WAKE, TAG_TRIG0, TAG_TRIG1, TAG_CG1_0, TAG_CG1_1, TAG_INOTIFY, TAG_EVENTS, TAG_MAX };

static int build_pollfds(struct vr_monitor *m, struct pollfd *pfd, int *tag)
{
	int n = 0;
#define ADD(fd_, ev_, tag_)                                                                        \
	do {                                                                                       \
		if ((fd_) >= 0) {                                                                  \
			pfd[n] = (struct pollfd){ .fd = (fd_), .events = (ev_) };                  \
			tag[n++] = (tag_);                                                         \
		}                                                                                  \
	} while (0)
	ADD(m->wake_fd, POLLIN, TAG_WAKE);
	ADD(m->trig_fd[0], POLLPRI, TAG_TRIG0);
	ADD(m->trig_fd[1], POLLPRI, TAG_TRIG1);
	ADD(m->cg1_efd[0], POLLIN, TAG_CG1_0);
	ADD(m->cg1_efd[1], POLLIN, TAG_CG1_1);
	ADD(m->ino_fd, POLLIN, TAG_INOTIFY);
	ADD(m->events_fd, POLLPRI, TAG_EVENTS);
#undef ADD
	return n;
}

static int poll_timeout(const struct vr_monitor *m, uint64_t now)
{
	uint64_t deadline = UINT64_MAX;
	if (m->period_ms)
		deadline = m->next_check;
	for (int l = VR_PRESSURE_MODERATE; l <= VR_PRESSURE_CRITICAL; l++)
		if (m->pending[l] && m->acted_ms[l] + MON_GAP_MS < deadline)
			deadline = m->acted_ms[l] + MON_GAP_MS;
	if (deadline == UINT64_MAX)
		return -1;
	return deadline <= now ? 0 : (int)(deadline - now > INT_MAX ? INT_MAX : deadline - now);
}

/* handles the fds that poll reported; true if the source was lost */
static bool handle_fds(struct vr_monitor *m, const struct pollfd *pfd, const int *tag, int n,
		       uint64_t now)
{
	bool recheck = false;
	for (int i = 1; i < n; i++) {
		short re = pfd[i].revents;
		if (!re)
			continue;
		switch (tag[i]) {
		case TAG_TRIG0:
		case TAG_TRIG1: {
			int t = tag[i] - TAG_TRIG0;
			if (re & (POLLERR | POLLNVAL | POLLHUP)) {
				vr_dbg("monitor: %s trigger gone", t ? "full" : "some");
				close_fd(&m->trig_fd[t]);
				if (m->source == VR_MONITOR_PSI && m->trig_fd[0] < 0 &&
				    m->trig_fd[1] < 0)
					return true;
			} else if (re & POLLPRI) {
				mon_raise(m, t ? VR_PRESSURE_CRITICAL : VR_PRESSURE_MODERATE,
					  t ? "\"full\" trigger" : "\"some\" trigger");
			}
			break;
		}
		case TAG_CG1_0:
		case TAG_CG1_1: {
			int t = tag[i] - TAG_CG1_0;
			uint64_t cnt;
			if (read(m->cg1_efd[t], &cnt, sizeof(cnt)) != sizeof(cnt)) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				return true;
			}
			/* the kernel signals the eventfds once more when the
			 * cgroup goes away */
			if (!exists_in(m->cg1_dir, "memory.pressure_level"))
				return true;
			mon_raise(m, t ? VR_PRESSURE_CRITICAL : VR_PRESSURE_MODERATE,
				  t ? "memory.pressure_level critical"
				    : "memory.pressure_level medium");
			break;
		}
		case TAG_INOTIFY:
			recheck |= cg2_drain_inotify(m);
			break;
		case TAG_EVENTS:
			recheck = true;
			break;
		}
	}
	if (recheck && m->source == VR_MONITOR_CGROUP2) {
		cg2_check(m, now);
		m->next_check = now + m->period_ms;
	}
	return false;
}

static void periodic_check(struct vr_monitor *m, uint64_t now)
{
	if (m->source == VR_MONITOR_CGROUP2)
		cg2_check(m, now);
	else if (m->source == VR_MONITOR_MEMINFO)
		meminfo_check(m, now);
	m->next_check = now + m->period_ms;
}

static bool woken(int wake_fd, int timeout)
{
	struct pollfd p = { .fd = wake_fd, .events = POLLIN };
	return poll(&p, 1, timeout) > 0;
}

static void *monitor_main(void *arg)
{
	struct vr_monitor *m = arg;
	struct pollfd pfd[TAG_MAX];
	int tag[TAG_MAX];

	uint64_t now = now_ms();
	m->next_check = now + m->period_ms;
	for (;;) {
		int n = build_pollfds(m, pfd, tag);
		int r = poll(pfd, (nfds_t)n, poll_timeout(m, now));
		if (r < 0 && errno != EINTR) {
			vr_dbg("monitor: poll: %m");
			if (woken(m->wake_fd, 100))
				break;
		}
		if (r > 0 && pfd[0].revents)
			break;
		now = now_ms();
		if (r > 0) {
			/* a storm of wake-ups is handled at most every
			 * MON_MIN_LOOP_MS: the rest coalesces meanwhile */
			if (now - m->last_wake < MON_MIN_LOOP_MS) {
				if (woken(m->wake_fd, (int)(m->last_wake + MON_MIN_LOOP_MS - now)))
					break;
				now = now_ms();
			}
			m->last_wake = now;
			if (handle_fds(m, pfd, tag, n, now))
				source_lost(m, "fd error");
		}
		if (m->period_ms && now >= m->next_check)
			periodic_check(m, now);
		mon_flush(m, now);
	}
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* start / stop                                                            */

static void monitor_free(struct vr_monitor *m)
{
	close_source(m);
	close_fd(&m->wake_fd);
	free(m);
}

int vr_monitor_start(struct vr_ctx *ctx)
{
	struct vr_monitor *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ctx = ctx;
	m->trig_fd[0] = m->trig_fd[1] = m->cg1_efd[0] = m->cg1_efd[1] = -1;
	m->ino_fd = m->events_fd = m->ino_wd = -1;
	m->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->wake_fd < 0) {
		int err = -errno;
		free(m);
		return err;
	}
	m->forced = parse_forced();
	select_source(m, 0);

	/* the thread takes no application signal: all blocked but the
	 * synchronous ones, which must never be blocked */
	sigset_t all, old;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&m->thread, NULL, monitor_main, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err) /* named here, so it is named when vr_ctx_new returns */
		pthread_setname_np(m->thread, "vrange-mon");
	if (err) {
		vr_dbg("monitor: pthread_create: %s", strerror(err));
		atomic_store(&ctx->monitor_source, VR_MONITOR_NONE);
		monitor_free(m);
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
}
