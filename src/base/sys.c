/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sys.c - small system helpers (sys.h) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

#include "base/sys.h"

unsigned vr_pg_shift;

int vr_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name)
{
	/* the thread takes no application signal: all blocked but the
	 * synchronous ones, which must never be blocked */
	sigset_t all, old;
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err) /* named here, so it is named when the caller returns */
		pthread_setname_np(*t, name);
	return err;
}
