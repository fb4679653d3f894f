/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * callback.h - waiting for application callbacks in flight (callback.c)
 */
#ifndef VR_CALLBACK_H
#define VR_CALLBACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/*
 * CALLBACK SLOTS: a function and its argument, set together and read
 * together without a lock, so that a reader never pairs one setter's
 * function with another's argument (two plain loads could).  A sequence
 * word, odd while a setter writes; setters of one slot take turns on it.
 * Reading is async-signal-safe and waits (yielding) while a setter in
 * another thread writes; a reader that interrupted a setter of the same
 * slot in its own thread (a signal handler), or that finds a set never
 * finished (its thread did not survive a fork), reads no function.
 */
typedef void (*vr_cb_any)(void);
struct vr_cb_slot {
	_Atomic uint64_t seq;
	_Atomic(vr_cb_any) fn;
	_Atomic(void *) arg;
};
/* fn NULL: no callback (the argument is dropped too) */
void vr_cb_slot_set(struct vr_cb_slot *s, vr_cb_any fn, void *arg);
/* the function (NULL: none) and, in *arg, its argument */
vr_cb_any vr_cb_slot_get(struct vr_cb_slot *s, void **arg);
/* is a function set (a hint: it may change at once) */
static inline bool vr_cb_slot_any(struct vr_cb_slot *s)
{
	return atomic_load_explicit(&s->fn, memory_order_relaxed) != NULL;
}

#endif
