/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* monitor-meminfo.c - polling MemAvailable against MemTotal in /proc/meminfo */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "monitor/monitor.h"
#include "base/log.h"

#define MON_MEMINFO_PERIOD_MS 5000 /* Chromium's Linux evaluator period */

/* percent of MemTotal in use, or -errno */
static int meminfo_used_pct(void)
{
	char buf[4096];
	uint64_t total, avail;
	ssize_t n = mon_read_text(NULL, "/proc/meminfo", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (!mon_find_key(buf, "MemTotal", &total) || !mon_find_key(buf, "MemAvailable", &avail) ||
	    !total)
		return -ENODATA;
	if (avail > total)
		avail = total;
	return (int)((total - avail) * 100 / total);
}

static unsigned meminfo_check(struct vr_monitor *m, uint64_t now)
{
	int used = meminfo_used_pct();
	char why[64];
	snprintf(why, sizeof(why), "%d%% of MemTotal in use", used);
	mon_hold(m, &m->mi.hold, mon_meminfo_level(used), now, why);
	return MON_MEMINFO_PERIOD_MS;
}

static int meminfo_open(struct vr_monitor *m)
{
	(void)m;
	int used = meminfo_used_pct();
	if (used < 0) {
		vr_dbg("monitor: meminfo unusable: /proc/meminfo: %s", strerror(-used));
		return used;
	}
	vr_dbg("monitor: meminfo: %d%% in use, polled every %d ms", used, MON_MEMINFO_PERIOD_MS);
	return 0;
}

static void meminfo_close(struct vr_monitor *m)
{
	m->mi.hold = (struct mon_hold){ 0 };
}

const struct mon_source mon_src_meminfo = {
	.id = VR_MONITOR_MEMINFO,
	.period_ms = MON_MEMINFO_PERIOD_MS,
	.open = meminfo_open,
	.close = meminfo_close,
	.check = meminfo_check,
};
