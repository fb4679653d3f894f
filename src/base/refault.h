/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * refault.h - the fault path's re-fault record, one per thread, shared by
 * region faults (fault.c) and object faults (obj.c)
 *
 * A fault on memory the library owns but did not discard (a restore raced
 * the access) is re-run once; faulting again at the same address with the
 * same trap generation means nothing changed: not ours, forwarded.  A
 * fault on discarded memory calls the application's handler at most
 * VR_MAX_REFAULTS times in a row for one address and generation, then
 * SIGBUS.  Trap generations are unique in the process (vr_trap_gen_next),
 * so a region created at a reused address, or an object page, never
 * matches an old record.  Async-signal-safe: TLS only.
 *
 * A generation that keeps changing (another thread purging and unmarking
 * other ranges of the region without pause) would re-run a foreign fault
 * (an application's PROT_NONE page inside a region) for ever: after
 * VR_MAX_RERUNS re-runs in a row at one address with nothing found
 * discarded there, the caller decides.  Ours can fault that often in a
 * row: a thread touching a range that another thread marks, purges and
 * unmarks back to back may find it unmarked again at each fault and
 * purged again at each re-run (test-anon rerun-race; forwarding it was a
 * SIGSEGV on a legal access).  A region fault checks the page under the
 * region lock then (fault.c); an object fault is forwarded.
 */
#ifndef VR_REFAULT_H
#define VR_REFAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VR_MAX_REFAULTS 8
#define VR_MAX_RERUNS 256

struct vr_refault {
	void *addr;
	uint64_t gen;
	unsigned count;  /* handler calls in a row (same address and generation) */
	unsigned reruns; /* re-runs in a row at this address, any generation */
};
extern __thread struct vr_refault vr_refault_tls __attribute__((tls_model("initial-exec")));

/* what vr_refault_rerun says */
enum {
	VR_REFAULT_FOREIGN, /* faulted there before with nothing changed (record cleared) */
	VR_REFAULT_RERUN,   /* re-run the access (recorded) */
	VR_REFAULT_MANY,    /* VR_MAX_RERUNS re-runs in a row there (record cleared) */
};

/* nothing discarded at addr: re-run the access, or not */
static inline int vr_refault_rerun(void *addr, uint64_t gen)
{
	struct vr_refault *t = &vr_refault_tls;
	if (t->addr == addr && (t->gen == gen || ++t->reruns >= VR_MAX_RERUNS)) {
		t->addr = NULL;
		return t->gen == gen ? VR_REFAULT_FOREIGN : VR_REFAULT_MANY;
	}
	if (t->addr != addr)
		t->reruns = 0;
	t->addr = addr;
	t->gen = gen;
	t->count = 0;
	return VR_REFAULT_RERUN;
}

/* a fault on discarded memory, counted: may the handler run once more? */
static inline bool vr_refault_handler_allowed(void *addr, uint64_t gen)
{
	struct vr_refault *t = &vr_refault_tls;
	bool same = t->addr == addr && t->gen == gen;
	t->count = same ? t->count + 1 : 1;
	t->reruns = 0;
	t->addr = addr;
	t->gen = gen;
	return t->count <= VR_MAX_REFAULTS;
}

/* before a SIGBUS (whose handler may siglongjmp): nothing is left open */
static inline void vr_refault_forget(void)
{
	vr_refault_tls.addr = NULL;
}

#endif
