/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * registry.c - process-wide address -> region map, read from signal handlers
 *
 * Readers (vr_region_of, pointer-style calls, the SIGSEGV handler) must be
 * lock-free and async-signal-safe in ANY thread, including threads the
 * library never saw.  That rules out the liburcu flavors we could use here:
 * qsbr and memb/mb need every reader thread registered (we do not own the
 * application's threads, and registering from a signal handler is not
 * async-signal-safe), and bp registers a thread lazily on its first read
 * (malloc + mutex: not async-signal-safe on first use in a handler).
 * Debian's liburcu 0.13 also lacks ThreadSanitizer annotations.
 *
 * So the registry is a tiny purpose-built RCU: an immutable sorted array
 * published through one atomic pointer, read in sections of the
 * reader-epoch scheme (epoch.h).  A reader enters, loads the pointer,
 * searches, leaves.  A writer (serialized by wlock) publishes a new
 * array, then synchronizes; after that no reader can hold the old array,
 * which is then freed.  Reader sections are a
 * binary search long, so writers wait microseconds at most.  All accesses
 * are seq_cst C11 atomics, which ThreadSanitizer understands.
 *
 * Caveat (documented in the README): a signal handler that creates or
 * destroys a region while it interrupted a registry reader in the same
 * thread would wait for itself.  The library's own reader sections never
 * call out, so only asynchronous handlers doing that could hit it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/epoch.h"
#include "base/lock.h"
#include "base/registry.h"
#include "mem/mem.h"

/* r is NULL once the region was removed (a tombstone, see update()) */
struct entry {
	uintptr_t base, end;
	_Atomic(void *) p; /* kind VR_REG_REGION, REG_ADOPTED, REG_INHERITED: a
			      struct vr_region; VR_REG_OBJ: a chunk of object
			      memory (obj-alloc.c) */
	int kind;
};

/* Kinds of entries beside registry.h's.  An adopted span is the caller's
 * memory, which a fork child inherits mapped with its traps (S26), unlike
 * everything else the registry holds (MADV_DONTFORK).  Until the child
 * destroys the inherited region (which takes the traps off, in the child
 * only), the span is still that region's: a region the child adopted over
 * it would see those traps on its non-volatile pages, and that destroy
 * would take away the new region's own traps (its purged pages then read
 * zeros without a fault).  So the child keeps such an entry as
 * REG_INHERITED: never found by a lookup (S18: vr_region_of never returns
 * an inherited region, and its faults are not the library's), but an
 * overlap for vr_region_adopt (-EEXIST) until the region is destroyed. */
enum { REG_ADOPTED = VR_REG_OBJ + 1, REG_INHERITED };

/* does an entry of kind k answer a search for want: -1 any entry,
 * REG_INHERITED any region span (live or inherited), else that kind
 * (VR_REG_REGION: adopted regions too) */
static bool kind_matches(int k, int want)
{
	if (want < 0 || k == want)
		return true;
	if (want == REG_INHERITED)
		return k == VR_REG_REGION || k == REG_ADOPTED;
	return want == VR_REG_REGION && k == REG_ADOPTED;
}

struct snap {
	size_t n;
	struct entry e[];
};

static _Atomic(struct snap *) current;
/* reader sections (epoch.h): sharded so that threads looking up addresses
 * (every pointer-style call) do not bounce one cache line */
static struct vr_epoch ep;
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;

/* index of the first entry with base >= b (binary search) */
static size_t first_at_or_after(const struct snap *s, uintptr_t b)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->e[mid].base < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* a live region whose [base, end) shares a byte with [a, b), a < b.
 * Entries (live ones and the tombstones of removed ones, which exist only
 * until the next add) do not overlap, so their ends grow with their
 * bases: walking back from the last entry starting before b, only those
 * ending after a can overlap (for one address: at most one entry). */
static void *overlapping(struct snap *s, uintptr_t a, uintptr_t b, int kind)
{
	if (!s)
		return NULL;
	for (size_t i = first_at_or_after(s, b); i > 0 && a < s->e[i - 1].end; i--) {
		void *p = atomic_load(&s->e[i - 1].p);
		if (p && kind_matches(s->e[i - 1].kind, kind))
			return p;
	}
	return NULL;
}

static void *lookup_span(uintptr_t a, uintptr_t b, int kind)
{
	unsigned long e = vr_epoch_enter(&ep);
	void *found = overlapping(atomic_load(&current), a, b, kind);
	vr_epoch_leave(&ep, e);
	return found;
}

void *vr_registry_find(const void *addr, int kind)
{
	uintptr_t a = (uintptr_t)addr;
	return a == UINTPTR_MAX ? NULL : lookup_span(a, a + 1, kind);
}

struct vr_region *vr_registry_lookup(const void *addr)
{
	return vr_registry_find(addr, VR_REG_REGION);
}

bool vr_registry_overlaps(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	return len && lookup_span(a, len > UINTPTR_MAX - a ? UINTPTR_MAX : a + len, REG_INHERITED);
}

static void synchronize(void)
{
	vr_epoch_synchronize(&ep);
}

/* Adding publishes a sorted copy of the array with r in it and the
 * tombstones left out.  Removing allocates nothing (a region must be
 * destroyable when memory is exhausted): the entry's region pointer is
 * cleared in place, which readers see atomically, and the grace period
 * then guarantees no reader still returns it.  Called under wlock. */
static int add_locked(void *p, uintptr_t base, size_t size, int kind)
{
	struct snap *old = atomic_load(&current);
	size_t n = old ? old->n : 0, k = 0;
	/* an adopted span over a live region (vr_region_adopt checked before,
	 * but two adopts of one span race to this point) */
	if (overlapping(old, base, base + size, -1))
		return -EEXIST;
	struct vr_region *r = p;
	for (size_t i = 0; kind == VR_REG_REGION && i < n && r->ino; i++) {
		/* (anonymous memory: no file) */
		struct vr_region *o = atomic_load(&old->e[i].p);
		if (o && kind_matches(old->e[i].kind, VR_REG_REGION) && o->dev == r->dev &&
		    o->ino == r->ino && !(o->shm && r->shm))
			return -EBUSY; /* S33: one region per file in a process, unless
					* the file's state is shared (both join it) */
	}
	struct snap *s = vr_malloc(sizeof(*s) + (n + 1) * sizeof(struct entry));
	if (!s)
		return -ENOMEM;
	bool placed = false;
	for (size_t i = 0; i < n; i++) {
		void *o = atomic_load(&old->e[i].p);
		if (!o)
			continue;
		if (!placed && old->e[i].base > base) {
			s->e[k] = (struct entry){ base, base + size, p, kind };
			k++;
			placed = true;
		}
		s->e[k] = (struct entry){ old->e[i].base, old->e[i].end, o, old->e[i].kind };
		k++;
	}
	if (!placed) {
		s->e[k] = (struct entry){ base, base + size, p, kind };
		k++;
	}
	s->n = k;
	atomic_store(&current, s);
	synchronize();
	free(old);
	return 0;
}

int vr_registry_add_kind(void *p, const void *base, size_t size, int kind)
{
	vr_lock(&wlock, VR_RANK_REGISTRY);
	int err = add_locked(p, (uintptr_t)base, size, kind);
	vr_unlock(&wlock);
	return err;
}

int vr_registry_add(struct vr_region *r, bool adopted)
{
	return vr_registry_add_kind(r, r->base, r->size, adopted ? REG_ADOPTED : VR_REG_REGION);
}

void vr_registry_remove_any(void *p)
{
	vr_lock(&wlock, VR_RANK_REGISTRY);
	struct snap *s = atomic_load(&current);
	for (size_t i = 0; s && i < s->n; i++)
		if (atomic_load(&s->e[i].p) == p)
			atomic_store(&s->e[i].p, NULL);
	synchronize();
	vr_unlock(&wlock);
}

void vr_registry_remove(struct vr_region *r)
{
	vr_registry_remove_any(r);
}

void vr_registry_atfork_prepare(void)
{
	pthread_mutex_lock(&wlock);
}

void vr_registry_atfork_parent(void)
{
	pthread_mutex_unlock(&wlock);
}

void vr_registry_atfork_child(void)
{
	/* the child has none of the parent's mappings (MADV_DONTFORK): their
	 * entries become tombstones; adopted spans are inherited mapped, and
	 * stay as their inherited regions' (REG_INHERITED, see there) until
	 * destroyed.  The array is whole: prepare took wlock. */
	struct snap *s = atomic_load(&current);
	for (size_t i = 0; s && i < s->n; i++) {
		if (s->e[i].kind == REG_ADOPTED || s->e[i].kind == REG_INHERITED) {
			s->e[i].kind = REG_INHERITED;
			/* a span the caller made MADV_DONTFORK (all or part) is
			 * not the child's: what the child maps there later is
			 * its own, and destroying the inherited region must not
			 * take its protection or guard markers away (msync:
			 * ENOMEM for a range that is not wholly mapped).  Only
			 * the forking thread runs here, before any code of the
			 * child. */
			struct vr_region *r = atomic_load(&s->e[i].p);
			if (r &&
			    msync((void *)s->e[i].base, s->e[i].end - s->e[i].base, MS_ASYNC) < 0)
				r->span_lost = true;
		} else {
			atomic_store(&s->e[i].p, NULL);
		}
	}
	vr_epoch_reset(&ep, NULL);
	pthread_mutex_init(&wlock, NULL);
}
