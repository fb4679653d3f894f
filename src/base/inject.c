/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* inject.c - the fault-injection counter (built with -Dfault-injection=true) */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/inject.h"
#include "base/log.h"

#if VR_FAULT_INJECTION

static const char *const site_names[VR_FI_NSITES] = {
	"memfd", "ftruncate", "mmap", "madvise", "mprotect", "fallocate", "malloc",
};

static int fi_site = -1; /* VR_FI_NSITES = any */
static unsigned long fi_n, fi_times = 1;
static int fi_errno;
static _Atomic unsigned long fi_count;

void vr_fi_init(void)
{
	const char *e = secure_getenv("VRANGE_FAULT_INJECT");
	char name[16];
	unsigned long n = 0, times = 1;
	int err = 0;
	if (!e || sscanf(e, "%15[a-z]:%lu:%d:%lu", name, &n, &err, &times) < 2 || n == 0 ||
	    times == 0)
		return;
	fi_times = times;
	for (int i = 0; i < VR_FI_NSITES; i++)
		if (strcmp(name, site_names[i]) == 0)
			fi_site = i;
	if (strcmp(name, "any") == 0)
		fi_site = VR_FI_NSITES;
	fi_n = n;
	fi_errno = err;
}

int vr_fi_check(enum vr_fi_site site)
{
	if (fi_site < 0 || (fi_site != VR_FI_NSITES && fi_site != (int)site))
		return 0;
	unsigned long k = atomic_fetch_add(&fi_count, 1) + 1;
	if (k < fi_n || k - fi_n >= fi_times)
		return 0;
	int err = fi_errno ? fi_errno : site == VR_FI_FALLOCATE ? EPERM : ENOMEM;
	char buf[128];
	snprintf(buf, sizeof(buf), "vrange: fault injection fired: %s call %lu errno %d\n",
		 site_names[site], k, err);
	vr_log_raw(buf);
	return err;
}
#endif
