/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor-cgroup2.c - the process's cgroup v2 (or VRANGE_CGROUP_DIR): counts
 * of memory.events rising, memory.current against memory.high/max, and
 * memory.pressure triggers on a real cgroup2 file system.  Changes are
 * noticed through inotify on the directory, POLLPRI on memory.events
 * (kernfs), and a re-read at least every MON_CG2_PERIOD_MS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "monitor/monitor.h"
#include "base/sys.h"
#include "base/log.h"

#define MON_CG2_PERIOD_MS 1000 /* files re-read at least this often */

/* (re)adds the inotify watch on the directory: ino_wd or -1 */
static int cg2_watch(struct mon_cg2 *g)
{
	g->ino_wd = inotify_add_watch(g->ino_fd, g->dir,
				      IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO |
					      IN_DELETE | IN_ATTRIB | IN_DELETE_SELF);
	return g->ino_wd;
}

static void cg2_check_events(struct vr_monitor *m, struct mon_cg2 *g)
{
	char buf[1024];
	uint64_t high = 0, max = 0, oom = 0;
	ssize_t n = mon_read_text(g->dir, "memory.events", buf, sizeof(buf));
	if (n < 0) { /* gone: whatever comes back is a new baseline */
		g->ev_valid = false;
		return;
	}
	/* the kernel writes every key; a seam file may hold only some, or be
	 * caught empty between a writer's truncate and write: skip that read */
	if ((!mon_find_key(buf, "high", &high) + !mon_find_key(buf, "max", &max) +
	     !mon_find_key(buf, "oom", &oom)) == 3)
		return;
	if (g->ev_valid) {
		char why[128];
		if (max > g->ev_max || oom > g->ev_oom) {
			snprintf(why, sizeof(why),
				 "memory.events max %" PRIu64 "->%" PRIu64 " oom %" PRIu64
				 "->%" PRIu64,
				 g->ev_max, max, g->ev_oom, oom);
			mon_raise(m, VR_PRESSURE_CRITICAL, why);
		} else if (high > g->ev_high) {
			snprintf(why, sizeof(why), "memory.events high %" PRIu64 "->%" PRIu64,
				 g->ev_high, high);
			mon_raise(m, VR_PRESSURE_MODERATE, why);
		}
	}
	/* counts that went down (a file replaced) are a new baseline */
	g->ev_high = high;
	g->ev_max = max;
	g->ev_oom = oom;
	g->ev_valid = true;
}

static unsigned cg2_check(struct vr_monitor *m, uint64_t now)
{
	struct mon_cg2 *g = &m->cg2;
	/* a directory that was removed and came back is watched again */
	if (g->ino_fd >= 0 && g->ino_wd < 0 && cg2_watch(g) >= 0)
		vr_dbg("monitor: cgroup2: %s back, watched again", g->dir);
	/* acknowledge a kernfs POLLPRI (reading resets it); a failed read
	 * means the file is going away: stop polling it */
	if (g->kernfs && g->events_fd < 0 && mon_exists_in(g->dir, "memory.events")) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/memory.events", g->dir);
		g->events_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (g->events_fd >= 0) {
		char scratch[512];
		if (pread(g->events_fd, scratch, sizeof(scratch), 0) < 0)
			mon_close_fd(&g->events_fd);
	}
	cg2_check_events(m, g);

	uint64_t cur = 0, high = UINT64_MAX, max = UINT64_MAX;
	bool have = mon_read_u64_or_max(g->dir, "memory.current", &cur);
	if (have) {
		if (!mon_read_u64_or_max(g->dir, "memory.high", &high))
			high = UINT64_MAX;
		if (!mon_read_u64_or_max(g->dir, "memory.max", &max))
			max = UINT64_MAX;
	}
	/* logged once per disappearance, not for a directory that never had
	 * them (a root cgroup watched through its triggers) */
	if (!have && !g->ev_valid) {
		if (g->files_seen && !g->files_gone)
			vr_dbg("monitor: cgroup2: %s: memory.current and memory.events gone; still "
			       "watching",
			       g->dir);
		g->files_gone = true;
	} else {
		if (g->files_seen && g->files_gone)
			vr_dbg("monitor: cgroup2: %s: files back", g->dir);
		g->files_gone = false;
		g->files_seen = true;
	}
	char why[160];
	snprintf(why, sizeof(why), "memory.current %" PRIu64 " high %" PRIu64 " max %" PRIu64,
		 have ? cur : 0, high, max);
	mon_hold(m, &g->hold, mon_cg2_level(have, cur, high, max), now, why);
	return MON_CG2_PERIOD_MS;
}

static int cg2_open(struct vr_monitor *m)
{
	struct mon_cg2 *g = &m->cg2;
	const char *env = secure_getenv("VRANGE_CGROUP_DIR");
	g->seam = env && *env;
	g->dir = g->seam ? strdup(env) : mon_cg2_find_dir();
	if (!g->dir)
		return g->seam ? -ENOMEM : -ENOENT;
	struct statfs sf;
	if (statfs(g->dir, &sf) < 0) {
		int err = -errno;
		vr_dbg("monitor: cgroup2 unusable: %s: %s", g->dir, strerror(-err));
		return err;
	}
	g->kernfs = sf.f_type == CGROUP2_SUPER_MAGIC;
	/* cgroup.events exists in every cgroup but the root; the root has no
	 * limits and its memory.pressure is the system's: leave it to PSI */
	if (g->kernfs && !g->seam && !mon_exists_in(g->dir, "cgroup.events")) {
		vr_dbg("monitor: cgroup2 unusable: %s is the root cgroup (system-wide: use PSI)",
		       g->dir);
		return -ENOENT;
	}
	/* triggers only on kernfs: never write into a seam's ordinary file */
	if (g->kernfs && mon_exists_in(g->dir, "memory.pressure")) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/memory.pressure", g->dir);
		int err = mon_psi_open(&g->trig, path);
		if (err < 0)
			vr_dbg("monitor: cgroup2: no trigger on %s: %s", path, strerror(-err));
	}
	bool events = mon_exists_in(g->dir, "memory.events");
	if (g->trig.trig_fd[0] < 0 && !events && !mon_exists_in(g->dir, "memory.current") &&
	    !(g->seam && mon_exists_in(g->dir, "memory.pressure"))) {
		vr_dbg("monitor: cgroup2 unusable: %s has no memory.events, memory.current or "
		       "usable memory.pressure",
		       g->dir);
		return -ENOENT;
	}
	g->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (g->ino_fd >= 0 && cg2_watch(g) < 0) {
		vr_dbg("monitor: cgroup2: inotify on %s: %m (re-reading every %d ms)", g->dir,
		       MON_CG2_PERIOD_MS);
		mon_close_fd(&g->ino_fd);
	}
	/* baseline now, so that a change right after vr_ctx_new counts */
	cg2_check(m, vr_now_ms());
	vr_dbg("monitor: cgroup2: watching %s%s%s", g->dir, g->seam ? " (VRANGE_CGROUP_DIR)" : "",
	       g->trig.trig_fd[0] >= 0 ? " with memory.pressure triggers" : "");
	return 0;
}

static void cg2_close(struct vr_monitor *m)
{
	struct mon_cg2 *g = &m->cg2;
	mon_psi_close(&g->trig);
	mon_close_fd(&g->ino_fd);
	mon_close_fd(&g->events_fd);
	free(g->dir);
	*g = (struct mon_cg2){
		.ino_fd = -1, .ino_wd = -1, .events_fd = -1, .trig = { .trig_fd = { -1, -1 } }
	};
}

enum { CG2_TRIG0, CG2_TRIG1, CG2_INOTIFY, CG2_EVENTS };

static int cg2_fds(struct vr_monitor *m, struct pollfd *pfd)
{
	struct mon_cg2 *g = &m->cg2;
	mon_psi_fds(&g->trig, pfd);
	pfd[CG2_INOTIFY] = (struct pollfd){ .fd = g->ino_fd, .events = POLLIN };
	pfd[CG2_EVENTS] = (struct pollfd){ .fd = g->events_fd, .events = POLLPRI };
	return 4;
}

/* drains the inotify queue; true if something in the directory changed */
static bool cg2_drain_inotify(struct mon_cg2 *g)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;
	for (;;) {
		ssize_t n = read(g->ino_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		any = true;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			if (ev->mask & IN_IGNORED) {
				vr_dbg("monitor: cgroup2: %s removed; re-reading every %d ms",
				       g->dir, MON_CG2_PERIOD_MS);
				g->ino_wd = -1;
			}
			p += sizeof(*ev) + ev->len;
		}
	}
	return any;
}

static bool cg2_ready(struct vr_monitor *m, int i, short revents, uint64_t now)
{
	struct mon_cg2 *g = &m->cg2;
	bool recheck = false;
	if (i <= CG2_TRIG1)
		mon_psi_ready(m, &g->trig, i, revents, now); /* the files remain */
	else if (i == CG2_INOTIFY)
		recheck = cg2_drain_inotify(g);
	else
		recheck = true;
	if (recheck)
		m->next_check[VR_MONITOR_CGROUP2] = now + cg2_check(m, now);
	return true;
}

const struct mon_source mon_src_cgroup2 = {
	.id = VR_MONITOR_CGROUP2,
	.period_ms = MON_CG2_PERIOD_MS,
	.open = cg2_open,
	.close = cg2_close,
	.fds = cg2_fds,
	.ready = cg2_ready,
	.check = cg2_check,
};
