/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor-psi.c - PSI triggers (/proc/pressure/memory, and a cgroup2's
 * memory.pressure through monitor-cgroup2.c): "some" -> MODERATE, "full" ->
 * CRITICAL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "base/sys.h"
#include "base/log.h"

/* stall time per 1 s window; the 2 s retry keeps the ratio */
#define MON_PSI_SOME_US 150000 /* "some" 15% -> MODERATE */
#define MON_PSI_FULL_US 100000 /* "full" 10% -> CRITICAL */

/* one trigger on its own fd: @stall_us per 1 s window, retried as
 * 2 * @stall_us per 2 s when the kernel insists on 2 s multiples (no
 * CAP_SYS_RESOURCE); fd or -errno */
static int psi_trigger(const char *path, const char *kind, unsigned stall_us, unsigned *win_ms)
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
			*win_ms = win * 1000;
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

int mon_psi_open(struct mon_psi *t, const char *path)
{
	int fd = psi_trigger(path, "some", MON_PSI_SOME_US, &t->win_ms[0]);
	if (fd < 0)
		return fd;
	t->trig_fd[0] = fd;
	t->armed_ms[0] = t->armed_ms[1] = vr_now_ms();
	t->seen[0] = t->seen[1] = false;
	fd = psi_trigger(path, "full", MON_PSI_FULL_US, &t->win_ms[1]);
	if (fd >= 0)
		t->trig_fd[1] = fd;
	else
		vr_dbg("monitor: no \"full\" trigger on %s: CRITICAL comes from other signals only",
		       path);
	return 0;
}

void mon_psi_close(struct mon_psi *t)
{
	mon_close_fd(&t->trig_fd[0]);
	mon_close_fd(&t->trig_fd[1]);
}

int mon_psi_fds(struct mon_psi *t, struct pollfd *pfd)
{
	int n = 0;
	for (int i = 0; i < 2; i++)
		pfd[n++] = (struct pollfd){ .fd = t->trig_fd[i], .events = POLLPRI };
	return n;
}

bool mon_psi_ready(struct vr_monitor *m, struct mon_psi *t, int i, short revents, uint64_t now)
{
	if (i < 0 || i > 1)
		return true;
	if (revents & (POLLERR | POLLNVAL | POLLHUP)) {
		vr_dbg("monitor: %s trigger gone", i ? "full" : "some");
		mon_close_fd(&t->trig_fd[i]);
		return t->trig_fd[0] >= 0 || t->trig_fd[1] >= 0;
	}
	/* once the system's cumulative stall has passed a trigger's threshold,
	 * a new unprivileged trigger fires once within its first window
	 * whatever the stall now (measured, architecture.md): ignore that one */
	if ((revents & POLLPRI) && !t->seen[i] && now - t->armed_ms[i] <= t->win_ms[i]) {
		t->seen[i] = true;
		vr_dbg("monitor: first \"%s\" event within the trigger's first window ignored",
		       i ? "full" : "some");
		return true;
	}
	t->seen[i] = true;
	if (revents & POLLPRI)
		mon_raise(m, i ? VR_PRESSURE_CRITICAL : VR_PRESSURE_MODERATE,
			  i ? "\"full\" trigger" : "\"some\" trigger");
	return true;
}

static int psi_open(struct vr_monitor *m)
{
	int err = mon_psi_open(&m->psi, "/proc/pressure/memory");
	if (err < 0)
		vr_dbg("monitor: psi unusable: /proc/pressure/memory: %s", strerror(-err));
	return err;
}

static void psi_close(struct vr_monitor *m)
{
	mon_psi_close(&m->psi);
}

static int psi_fds(struct vr_monitor *m, struct pollfd *pfd)
{
	return mon_psi_fds(&m->psi, pfd);
}

static bool psi_ready(struct vr_monitor *m, int i, short revents, uint64_t now)
{
	return mon_psi_ready(m, &m->psi, i, revents, now);
}

const struct mon_source mon_src_psi = {
	.id = VR_MONITOR_PSI,
	.open = psi_open,
	.close = psi_close,
	.fds = psi_fds,
	.ready = psi_ready,
};
