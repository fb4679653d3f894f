/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* log.c - VRANGE_DEBUG logging to stderr */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "private.h"

int vr_debug;
unsigned vr_pg_shift;

void vr_log_init(void)
{
	const char *e = getenv("VRANGE_DEBUG");
	vr_debug = e && *e && strcmp(e, "0") != 0;
}

void vr_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "vrange[%d]: ", (int)getpid());
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = strlen(buf);
	buf[len++] = '\n';
	ssize_t _unused_ w = write(STDERR_FILENO, buf, len);
}

void vr_log_raw(const char *s)
{
	ssize_t _unused_ w = write(STDERR_FILENO, s, strlen(s));
}
