/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * callback.h - waiting for application callbacks in flight (callback.c)
 */
#ifndef VR_CALLBACK_H
#define VR_CALLBACK_H

unsigned long vr_cb_enter(void); /* async-signal-safe */
void vr_cb_leave(unsigned long e);
/* returns once no callback section entered before the call is running;
 * returns at once when called from inside a callback */
void vr_cb_synchronize(void);
/* the log function's sections, an epoch of their own: a log function
 * calls no vr_* function, so waiting for one never closes a cycle, and
 * vr_set_log_fn waits for them also from inside a fault or purge handler
 * (only not from inside a log function) */
unsigned long vr_cb_log_enter(void); /* async-signal-safe */
void vr_cb_log_leave(unsigned long e);
void vr_cb_log_synchronize(void);
void vr_cb_atfork_child(void);

#endif
