/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log.c - diagnostics: VRANGE_DEBUG=1 to stderr, or an application's
 * vr_log_fn
 *
 * Log lines are produced on slow paths only (purges, pressure, source
 * choice, skipped purges), sometimes with a region lock held, so a log
 * function must not call back into the library.  log_lock is a leaf lock:
 * it is held only to copy the function pointer and its argument, and the
 * call runs in a callback section (callback.c) so that vr_set_log_fn can
 * wait for calls of the function it replaced.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vrange.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/callback.h"

_Atomic int vr_debug;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static vr_log_fn log_fn; /* protected by log_lock */
static void *log_arg;    /* protected by log_lock */

void vr_log_init(void)
{
	const char *e = secure_getenv("VRANGE_DEBUG");
	if (e && *e && strcmp(e, "0") != 0)
		atomic_fetch_or(&vr_debug, 1);
}

_export_ void vr_set_log_fn(vr_log_fn fn, void *arg)
{
	VR_API_ENTRY;
	vr_lock(&log_lock, VR_RANK_LOG);
	log_fn = fn;
	log_arg = fn ? arg : NULL;
	if (fn)
		atomic_fetch_or(&vr_debug, 2);
	else
		atomic_fetch_and(&vr_debug, ~2);
	vr_unlock(&log_lock);
	/* the function replaced is not running when this returns */
	vr_cb_log_synchronize();
}

/* fork: log_lock is taken in prepare and re-created in the child, so a
 * fork while another thread logs leaves it usable (S18) */
void vr_log_atfork_prepare(void)
{
	pthread_mutex_lock(&log_lock);
}

void vr_log_atfork_parent(void)
{
	pthread_mutex_unlock(&log_lock);
}

void vr_log_atfork_child(void)
{
	pthread_mutex_init(&log_lock, NULL);
}

static void log_line(int prio, const char *buf);

__attribute__((format(printf, 2, 0))) static void log_va(int prio, const char *fmt, va_list ap)
{
	char buf[512];
	vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	log_line(prio, buf);
}

void vr_log(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_va(VR_LOG_DEBUG, fmt, ap);
	va_end(ap);
}

/* a line the user must see (A2): to the log function, or to stderr
 * whether or not VRANGE_DEBUG is set */
void vr_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_va(VR_LOG_WARNING, fmt, ap);
	va_end(ap);
}

static void log_line(int prio, const char *buf)
{
	if (vr_held(&log_lock))
		return; /* a signal handler interrupted this thread's vr_set_log_fn */
	unsigned long cb = vr_cb_log_enter();
	vr_lock(&log_lock, VR_RANK_LOG);
	vr_log_fn fn = log_fn;
	void *arg = log_arg;
	vr_unlock(&log_lock);
	if (fn) {
		fn(prio, buf, arg);
		vr_cb_log_leave(cb);
		return;
	}
	vr_cb_log_leave(cb);
	/* the caller saw a function set (vr_dbg), removed since: without
	 * VRANGE_DEBUG=1 a debug line goes nowhere, as with no function
	 * (vr_set_log_fn), not to stderr */
	if (prio == VR_LOG_DEBUG && !vr_debug_stderr())
		return;
	char line[600];
	int n = snprintf(line, sizeof(line), "vrange[%d]: %s%s\n", (int)getpid(),
			 prio == VR_LOG_WARNING ? "warning: " : "", buf);
	if (n > 0)
		vr_log_raw(line);
}

void vr_log_raw(const char *s)
{
	/* write is a cancellation point, and log lines come from calls
	 * that hold no lock (VRANGE_DEBUG=1) and from the fault path */
	vr_nocancel_enter();
	ssize_t _unused_ w = write(STDERR_FILENO, s, strlen(s));
	vr_nocancel_leave();
}
