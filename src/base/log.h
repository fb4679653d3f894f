/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log.h - VRANGE_DEBUG logging and the async-signal-safe raw writer (log.c)
 */
#ifndef VR_LOG_H
#define VR_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/macro.h"

/* VRANGE_DEBUG=1 (bit 0) or a log function set (bit 1): log lines wanted */
extern _Atomic int vr_debug;
/* VRANGE_DEBUG=1: fatal-fault lines go to stderr from the signal handler */
static inline bool vr_debug_stderr(void)
{
	return atomic_load_explicit(&vr_debug, memory_order_relaxed) & 1;
}
void vr_log_init(void);
void vr_log_atfork_prepare(void);
void vr_log_atfork_parent(void);
void vr_log_atfork_child(void);
void vr_log(const char *fmt, ...) _printf_(1, 2);
void vr_warn(const char *fmt, ...) _printf_(1, 2); /* VR_LOG_WARNING, always shown */
#define vr_dbg(...)                                                                                \
	do {                                                                                       \
		if (_unlikely_(atomic_load_explicit(&vr_debug, memory_order_relaxed)))             \
			vr_log(__VA_ARGS__);                                                       \
	} while (0)
/* async-signal-safe: writes a preformatted string to stderr */
void vr_log_raw(const char *s) _nonnull_();

#endif
