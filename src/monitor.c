/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* monitor.c - placeholder until the pressure monitor lands (issue 5) */
#include "private.h"

int vr_monitor_start(struct vr_ctx *ctx)
{
	atomic_store(&ctx->monitor_source, VR_MONITOR_NONE);
	return 0;
}

void vr_monitor_stop(struct vr_ctx *ctx, bool inherited)
{
	(void)ctx;
	(void)inherited;
}
