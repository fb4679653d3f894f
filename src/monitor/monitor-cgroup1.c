/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor-cgroup1.c - cgroup v1 memory.pressure_level of the process's memcg:
 * "medium" -> MODERATE, "critical" -> CRITICAL, each through an eventfd
 * registered in cgroup.event_control (with ",hierarchy" where known).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "base/log.h"

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

static int cg1_open(struct vr_monitor *m)
{
	struct mon_cg1 *s = &m->cg1;
	char *mnt = NULL;
	int err = mon_cg1_find_dir(&s->dir, &mnt);
	free(mnt);
	if (err < 0) {
		vr_dbg("monitor: cgroup1 unusable: no v1 memory controller for this process");
		return err;
	}
	char p[PATH_MAX];
	int ctl = -1, lvl;
	errno = 0;
	snprintf(p, sizeof(p), "%s/memory.pressure_level", s->dir);
	lvl = open(p, O_RDONLY | O_CLOEXEC);
	if (lvl < 0)
		goto fail;
	snprintf(p, sizeof(p), "%s/cgroup.event_control", s->dir);
	ctl = open(p, O_WRONLY | O_CLOEXEC);
	if (ctl < 0)
		goto fail;
	static const char *const levels[2] = { "medium", "critical" };
	for (int i = 0; i < 2; i++) {
		s->efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (s->efd[i] < 0)
			goto fail;
		err = cg1_register(ctl, s->efd[i], lvl, levels[i]);
		if (err < 0) {
			errno = -err;
			goto fail;
		}
	}
	/* the registrations live as long as the eventfds */
	close(ctl);
	close(lvl);
	vr_dbg("monitor: cgroup1: memory.pressure_level of %s (medium, critical)", s->dir);
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

static void cg1_close(struct vr_monitor *m)
{
	struct mon_cg1 *s = &m->cg1;
	mon_close_fd(&s->efd[0]);
	mon_close_fd(&s->efd[1]);
	free(s->dir);
	s->dir = NULL;
}

static int cg1_fds(struct vr_monitor *m, struct pollfd *pfd)
{
	for (int i = 0; i < 2; i++)
		pfd[i] = (struct pollfd){ .fd = m->cg1.efd[i], .events = POLLIN };
	return 2;
}

static bool cg1_ready(struct vr_monitor *m, int i, short revents, uint64_t now)
{
	(void)revents;
	(void)now;
	uint64_t cnt;
	if (read(m->cg1.efd[i], &cnt, sizeof(cnt)) != sizeof(cnt))
		return errno == EAGAIN || errno == EINTR;
	/* the kernel signals the eventfds once more when the cgroup goes away */
	if (!mon_exists_in(m->cg1.dir, "memory.pressure_level"))
		return false;
	mon_raise(m, i ? VR_PRESSURE_CRITICAL : VR_PRESSURE_MODERATE,
		  i ? "memory.pressure_level critical" : "memory.pressure_level medium");
	return true;
}

const struct mon_source mon_src_cgroup1 = {
	.id = VR_MONITOR_CGROUP1,
	.open = cg1_open,
	.close = cg1_close,
	.fds = cg1_fds,
	.ready = cg1_ready,
};
