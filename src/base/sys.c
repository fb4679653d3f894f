/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sys.c - small system helpers (sys.h) */
#define _GNU_SOURCE
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/sys.h"
#include "base/sys.h"
#include "base/log.h"

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

/* ---- huge pages (sys.h) ---- */
static bool huge_on;
static const char *huge_why = "";
static _Atomic uint64_t huge_bytes;
static _Atomic bool huge_told;

void vr_huge_init(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	const char *e = secure_getenv("VRANGE_HUGEPAGES");
	huge_on = false;
	if (e && strcmp(e, "0") == 0)
		huge_why = "off (VRANGE_HUGEPAGES=0)";
	else if (!f)
		huge_why = "off (no transparent huge pages)";
	else if (strstr(buf, "[never]"))
		huge_why = "off (transparent_hugepage is never)";
	else
		huge_on = true, huge_why = "on";
}

void vr_advise_huge(void *p, size_t len)
{
	uintptr_t lo = ((uintptr_t)p + VR_HUGE_SIZE - 1) & ~(uintptr_t)(VR_HUGE_SIZE - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(uintptr_t)(VR_HUGE_SIZE - 1);
	if (lo >= hi)
		return;
	/* a hint whose failure changes nothing: plain madvise, not an
	 * injection site (inject.h), so that VRANGE_FAULT_INJECT's madvise
	 * calls stay the trap backends' */
	int err = madvise((void *)lo, hi - lo, huge_on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) < 0
			  ? errno
			  : 0;
	if (huge_on && !err)
		atomic_fetch_add_explicit(&huge_bytes, hi - lo, memory_order_relaxed);
	if (!atomic_exchange(&huge_told, true))
		vr_dbg("metadata huge pages: %s%s%s", huge_why, err ? ", refused: " : "",
		       err ? strerror(err) : "");
}

void *vr_map_huge(size_t len)
{
	uint8_t *m = vr_mmap(NULL, len + VR_HUGE_SIZE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return MAP_FAILED;
	uint8_t *a = (uint8_t *)(((uintptr_t)m + VR_HUGE_SIZE - 1) & ~(VR_HUGE_SIZE - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	munmap(a + len, (size_t)(m + VR_HUGE_SIZE - a));
	vr_advise_huge(a, len); /* a hint: may be refused */
	return a;
}

uint64_t vr_huge_advised(void)
{
	return atomic_load_explicit(&huge_bytes, memory_order_relaxed);
}
