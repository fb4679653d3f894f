/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ctx.c - contexts: what a context owns (regions, objects, gauges), limit,
 * explicit purge, pressure, stats; made and freed by lib.c */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vrange.h"
#include "base/age.h"
#include "base/inject.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/registry.h"
#include "region/region.h"
#include "obj/obj.h"
#include "ctx.h"
#include "mem/mem-kind.h"
#include "mem/mem-shared.h"

/* ---- the region list ---- */

/* registers r and links it into c; on failure r is closed (its memory
 * released as the failed create would have) and -errno returned */
static int link_region(struct vr_ctx *c, struct vr_region *r, struct vr_region **out)
{
	/* the purge heap gets room for this region first: a purge must never
	 * need memory */
	vr_lock(&c->purge_lock, VR_RANK_PURGE);
	vr_lock(&c->lock, VR_RANK_CTX);
	int err = vr_purge_reserve(c, c->nregions + 1);
	if (!err) /* -EBUSY: this file is a region already; -EEXIST: this
		   * adopted span overlaps a region */
		err = vr_registry_add(r, r->kind == &vr_kind_adopted);
	if (err < 0) {
		vr_unlock(&c->lock);
		vr_unlock(&c->purge_lock);
		vr_region_close(r, false);
		return err;
	}
	if (r->shm) {
		/* S29: one region per file and ctx counts the file's gauges */
		bool first = true;
		for (struct vr_region *o = c->regions; o; o = o->next)
			first &= o->shm_map != r->shm_map;
		__atomic_store_n(&r->shm_primary, first, __ATOMIC_RELEASE);
		atomic_fetch_add_explicit(&c->nshared, 1, memory_order_relaxed);
	}
	r->next = c->regions;
	if (c->regions)
		c->regions->prev = r;
	c->regions = r;
	c->nregions++;
	atomic_fetch_add_explicit(&c->nregions_stat, 1, memory_order_relaxed);
	vr_unlock(&c->lock);
	vr_unlock(&c->purge_lock);
	*out = r;
	return 0;
}

/* unlinks r from its ctx and frees it; c->purge_lock and c->lock held,
 * or vr_global_lock if inherited */
static void region_free(struct vr_region *r, bool inherited)
{
	struct vr_ctx *c = r->ctx;
	/* first, so that a fork from here on leaves the child no span of a
	 * region it cannot destroy; in a fork child: an inherited adopted
	 * span, which the child's own adopts overlap until now (registry.c) */
	vr_registry_remove(r);
	if (inherited) {
		/* a fork child: only the forward links can be trusted.  A
		 * parent thread that forked in the middle of an unlink left
		 * the next region's prev pointing at a region no longer in the
		 * list (its memory then reused by the child's own calls, then
		 * freed twice: test-fork's fork_hammer, "double free detected
		 * in tcache").  The forward chain is whole at every instant:
		 * a region is linked by one store of c->regions and unlinked
		 * by one store of its predecessor's next, under c->lock. */
		struct vr_region **pp = &c->regions;
		while (*pp && *pp != r)
			pp = &(*pp)->next;
		if (*pp)
			*pp = r->next;
	} else {
		if (r->prev)
			r->prev->next = r->next;
		else
			c->regions = r->next;
		if (r->next)
			r->next->prev = r->prev;
	}
	c->nregions--;
	atomic_fetch_sub_explicit(&c->nregions_stat, 1, memory_order_relaxed);
	if (r->shm && !inherited) {
		atomic_fetch_sub_explicit(&c->nshared, 1, memory_order_relaxed);
		/* another region of the file in this ctx counts it from now on
		 * (its last-seen values are 0: its first sync adds it all) */
		struct vr_region *o = c->regions;
		while (o && o->shm_map != r->shm_map)
			o = o->next;
		if (__atomic_load_n(&r->shm_primary, __ATOMIC_ACQUIRE) && o)
			__atomic_store_n(&o->shm_primary, true, __ATOMIC_RELEASE);
	}
	vr_region_close(r, inherited);
}

_export_ int vr_region_new(struct vr_ctx *ctx, const char *name, size_t size, unsigned flags,
			   struct vr_region **out)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* a shared file's tail written (pwrite) */
	struct vr_region *r;
	if (!out)
		return -EINVAL;
	int err = vr_region_create(ctx, name, size, flags, &r);
	return err < 0 ? err : link_region(ctx, r, out);
}

_export_ int vr_region_adopt(struct vr_ctx *ctx, void *addr, size_t len, unsigned flags,
			     struct vr_region **out)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* /proc/self/smaps read */
	struct vr_region *r;
	if (!out)
		return -EINVAL;
	int err = vr_region_create_adopt(ctx, addr, len, flags, &r);
	return err < 0 ? err : link_region(ctx, r, out);
}

_export_ int vr_region_from_fd(struct vr_ctx *ctx, int fd, unsigned flags, struct vr_region **out)
{
	VR_API_ENTRY;
	VR_API_NOCANCEL; /* a shared file's tail read (pread) */
	struct vr_region *r;
	if (!out)
		return -EINVAL;
	int err = vr_region_create_from_fd(ctx, fd, flags, &r);
	return err < 0 ? err : link_region(ctx, r, out);
}

_export_ void vr_region_destroy(struct vr_region *r)
{
	VR_API_ENTRY;
	if (!r)
		return;
	struct vr_ctx *c = r->ctx;
	if (vr_inherited_region(r)) {
		/* the ctx's own locks may be held by threads that do not exist
		 * in this child: the global lock (re-created at fork) guards
		 * the inherited lists instead */
		vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
		region_free(r, true);
		vr_unlock(&vr_global_lock);
		return;
	}
	vr_lock(&c->purge_lock, VR_RANK_PURGE);
	vr_lock(&c->lock, VR_RANK_CTX);
	region_free(r, false);
	vr_unlock(&c->lock);
	vr_unlock(&c->purge_lock);
}

/* ---- the ctx itself (lib.c adds trap backend, monitor, handler) ---- */
int vr_ctx_create(unsigned flags, struct vr_ctx **out)
{
	struct vr_ctx *c = vr_calloc_aligned(sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->purge_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	c->flags = flags;
	c->fork_gen = atomic_load(&vr_fork_gen);
	c->region_src = &vr_region_source;
	c->group_src = &vr_objs_source;
	/* the default group (S35), before anyone can see the ctx */
	c->groups = vr_malloc(4 * sizeof(*c->groups));
	c->objs = c->groups ? vr_objs_create(c, VR_RANGE_PRIORITY, true) : NULL;
	if (c->objs) {
		c->groups[c->ngroups++] = c->objs;
		c->groups_cap = 4;
	}
	if (!c->objs || vr_purge_reserve(c, 0) < 0) {
		if (c->objs)
			vr_objs_put(c->objs);
		free(c->groups);
		pthread_mutex_destroy(&c->lock);
		pthread_mutex_destroy(&c->purge_lock);
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void vr_ctx_free(struct vr_ctx *c, bool inherited)
{
	if (inherited) {
		/* the heap and the groups only if whole (vr_ctx_fork_whole);
		 * the region list stays walkable forward (region_free) */
		bool whole = vr_ctx_fork_whole(c);
		vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
		while (c->regions)
			region_free(c->regions, true);
		if (whole)
			vr_obj_ctx_destroy(c, true);
		vr_unlock(&vr_global_lock);
		if (whole)
			free(c->heap);
		else
			vr_dbg("fork child: the ctx was being changed at the fork: its heap left");
		free(c);
		return;
	}
	vr_lock(&c->purge_lock, VR_RANK_PURGE);
	vr_lock(&c->lock, VR_RANK_CTX);
	while (c->regions)
		region_free(c->regions, false);
	vr_unlock(&c->lock);
	vr_obj_ctx_destroy(c, false);
	vr_unlock(&c->purge_lock);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->purge_lock);
	free(c->heap);
	free(c);
}

/* S29: what other processes did to the shared files of c, into its
 * gauges (lock-free per region: vr_shared_sync); skipped in a signal
 * handler that interrupted library code in this thread: the interrupted
 * call may hold c->lock, or a lock that another thread holding c->lock
 * waits for (a span lock, under vr_obj_footprint).  (A purge calls this
 * with its own purge lock held: that one does not count.) */
static void sync_regions(struct vr_ctx *c) /* c->lock held */
{
	for (struct vr_region *r = c->regions; r; r = r->next)
		if (r->shm)
			vr_shared_sync(r);
}

void vr_ctx_sync_shared(struct vr_ctx *c)
{
	if (!atomic_load_explicit(&c->nshared, memory_order_relaxed) || vr_held(&c->lock) ||
	    vr_held_interrupted())
		return;
	vr_lock(&c->lock, VR_RANK_CTX);
	sync_regions(c);
	vr_unlock(&c->lock);
}

/* the unpurged volatile bytes for a limit check on a hot path (vr_mark,
 * vr_obj_unpin): shared files synced only if the region list's lock is
 * free (trylock: a hot path never waits on it, S16); a file changed by
 * another process since is then counted at the next sync */
static uint64_t volatile_now(struct vr_ctx *c)
{
	if (atomic_load_explicit(&c->nshared, memory_order_relaxed) && !vr_held(&c->lock)) {
		vr_held_push(&c->lock, VR_RANK_CTX);
		if (pthread_mutex_trylock(&c->lock) == 0) {
			sync_regions(c);
			pthread_mutex_unlock(&c->lock);
		}
		vr_held_pop(&c->lock);
	}
	return vr_ctx_gauge(c, VR_G_VOLATILE);
}

ssize_t vr_ctx_purge_in(struct vr_ctx *c, struct vr_objs *only, enum vr_purge_goal goal, uint64_t n)
{
	/* a signal handler that interrupted library code in its own thread
	 * would wait for itself: directly (a purge or the region list of
	 * this ctx), or through a purge in another thread, whose purge lock
	 * it waits for while that purge waits for the region (or other)
	 * lock the interrupted call holds */
	if (vr_held_any())
		return -EDEADLK;
	struct vr_notify_batch b = { 0 };
	uint64_t total = 0;
	do {
		/* a purge handler that forked returns in the child too, and
		 * the call goes on there: the ctx is then inherited, and its
		 * purge lock may be held by a parent thread the child does not
		 * have (obj-group.c, FORK IN A HANDLER) */
		if (vr_inherited_ctx(c))
			break;
		b.full = false;
		vr_lock(&c->purge_lock, VR_RANK_PURGE);
		vr_ctx_sync_shared(c);
		uint64_t rest = goal == VR_PURGE_BYTES ? n - total : n;
		total += (uint64_t)vr_purge_run(c, only, goal, rest, &b);
		vr_unlock(&c->purge_lock);
		/* S37: the purge handlers, with no library lock held */
		if (b.n)
			vr_obj_notify(&b);
	} while (b.full && (goal != VR_PURGE_BYTES || total < n));
	return (ssize_t)total;
}

/* S10/S22/S34 at every unpin (the application's limit or the monitor's
 * budget, the smaller), then the group's own limit (S35); an unpin may
 * have made something purgeable, so the "nothing purgeable" hint is
 * cleared first (written only when set), with or without a limit: a
 * budget that appears later (a cgroup limit set on a running process)
 * clears no hint, and marks that add nothing purgeable would skip it */
static int enforce_limit(struct vr_ctx *c, struct vr_objs *os, size_t glimit)
{
	vr_ctx_unstick(c);
	size_t limit = vr_ctx_effective_limit(c);
	if (limit) {
		if (volatile_now(c) > limit) {
			ssize_t got = vr_ctx_purge_lru(c, VR_PURGE_VOLATILE, limit);
			if (got < 0)
				return (int)got; /* -EDEADLK: see vr_ctx_purge_in */
		}
	}
	limit = glimit ? vr_objs_over_limit(os) : 0;
	if (limit) {
		ssize_t got = vr_ctx_purge_in(c, os, VR_PURGE_VOLATILE, limit);
		if (got < 0)
			return (int)got;
	}
	return 0;
}

/* ---- the limit on the hot paths: the unit's call, then the limit ---- */
_export_ int vr_mark(struct vr_region *r, size_t off, size_t len)
{
	VR_API_ENTRY;
	bool added;
	int rc = vr_region_mark(r, off, len, &added);
	if (rc < 0)
		return rc;

	/* S10: the limit, enforced outside the region lock.  When the last
	 * purge found nothing more to purge (sub-page ranges, traps that
	 * cannot be armed), a mark that added nothing purgeable cannot help
	 * it: skip the walk over every region.  A mark that adds a
	 * purgeable range clears the flag (written only when set, so marks
	 * on different regions do not share a written cache line). */
	struct vr_ctx *c = r->ctx;
	if (added)
		vr_ctx_added(c);
	bool stuck = !added && atomic_load_explicit(&c->limit_stuck, memory_order_relaxed);
	/* ranges that other processes (or other ctxs of this process) mark
	 * in a shared file clear no flag of this ctx, yet its limit takes
	 * them (S29): with a shared file mapped the hint proves nothing */
	if (stuck && atomic_load_explicit(&c->nshared, memory_order_relaxed))
		stuck = false;
	size_t limit = vr_ctx_effective_limit(c);
	if (limit && !stuck && volatile_now(c) > limit) {
		ssize_t got = vr_ctx_purge_lru(c, VR_PURGE_VOLATILE, limit);
		if (got < 0)
			return (int)got; /* -EDEADLK: see vr_ctx_purge_lru */
		/* in a fork child (a purge handler forked, see
		 * vr_ctx_purge_in) r's lock may be held by a parent thread,
		 * and nothing of r is mapped: purged as far as it can tell */
		if (rc == VR_INTACT)
			rc = vr_inherited_ctx(c) || vr_region_purged_in(r, off, len) ? VR_PURGED
										     : VR_INTACT;
	}
	return rc;
}

_export_ int vr_mark_ptr(void *addr, size_t len)
{
	struct vr_region *r;
	size_t off;
	int rc = vr_region_span_of(addr, len, &r, &off);
	return rc < 0 ? rc : vr_mark(r, off, len);
}

_export_ int vr_obj_unpin(struct vr_obj *o)
{
	VR_API_ENTRY;
	struct vr_objs *os = NULL;
	size_t glimit = 0;
	int err = vr_obj_unpin_unit(o, &os, &glimit);
	return err < 0 || !os ? err : enforce_limit(vr_objs_ctx(os), os, glimit);
}

_export_ int vr_obj_unpin_many(struct vr_obj *const *objs, size_t n)
{
	VR_API_ENTRY;
	if (!objs)
		return n ? -EINVAL : 0;
	/* one age for all (vr_obj_unpin_at), the gauges and the limits
	 * settled once per run of objects of one group */
	uint64_t last = 0, t = n ? vr_age_after(&last) : 0;
	struct vr_objs *run = NULL;
	size_t run_bytes = 0;
	int first = 0;
	for (size_t i = 0; i <= n; i++) {
		struct vr_objs *os = NULL;
		size_t bytes = 0;
		if (i < n) {
			int err = vr_obj_unpin_at(objs[i], t, &os, &bytes);
			if (err < 0 && !first)
				first = err;
			if (!os || os == run) {
				run_bytes += bytes;
				continue;
			}
		}
		if (run) {
			size_t glimit;
			vr_obj_unpinned(run, run_bytes, &glimit);
			int err = enforce_limit(vr_objs_ctx(run), run, glimit);
			if (err < 0 && !first)
				first = err;
		}
		run = os;
		run_bytes = bytes;
	}
	return first;
}

static bool live(const struct vr_ctx *c)
{
	return c && !vr_inherited_ctx(c);
}

_export_ int vr_ctx_set_limit(struct vr_ctx *c, size_t bytes)
{
	VR_API_ENTRY;
	if (!live(c))
		return -EINVAL;
	atomic_store(&c->limit, bytes);
	atomic_store(&c->limit_stuck, false);
	vr_ctx_sync_shared(c);
	if (bytes && vr_ctx_gauge(c, VR_G_VOLATILE) > bytes) {
		ssize_t n = vr_ctx_purge_lru(c, VR_PURGE_VOLATILE, bytes);
		if (n < 0)
			return (int)n;
	}
	return 0;
}

_export_ ssize_t vr_ctx_purge(struct vr_ctx *c, size_t bytes)
{
	VR_API_ENTRY;
	if (!live(c))
		return -EINVAL;
	if (bytes == 0)
		return 0;
	return vr_ctx_purge_lru(c, VR_PURGE_BYTES, bytes);
}

_export_ ssize_t vr_ctx_notify_pressure(struct vr_ctx *c, enum vr_pressure level)
{
	VR_API_ENTRY;
	if (!live(c) || (unsigned)level > VR_PRESSURE_CRITICAL)
		return -EINVAL;
	if (level == VR_PRESSURE_NONE)
		return 0;
	atomic_fetch_add(&c->pressure_events, 1);
	vr_dbg("pressure %s", level == VR_PRESSURE_CRITICAL ? "critical" : "moderate");
	if (level == VR_PRESSURE_CRITICAL)
		return vr_ctx_purge_lru(c, VR_PURGE_BYTES, UINT64_MAX);
	vr_ctx_sync_shared(c);
	return vr_ctx_purge_lru(c, VR_PURGE_VOLATILE, vr_ctx_gauge(c, VR_G_VOLATILE) / 2);
}

_export_ uint64_t vr_ctx_stat(struct vr_ctx *c, enum vr_stat which)
{
	VR_API_ENTRY;
	if (!live(c))
		return 0;
	switch (which) {
	case VR_STAT_REGIONS:
		return atomic_load(&c->nregions_stat);
	case VR_STAT_RANGES:
		vr_ctx_sync_shared(c);
		return vr_ctx_gauge(c, VR_G_RANGES);
	case VR_STAT_VOLATILE_BYTES:
		vr_ctx_sync_shared(c);
		return vr_ctx_gauge(c, VR_G_VOLATILE);
	case VR_STAT_PURGED_BYTES:
		vr_ctx_sync_shared(c);
		return vr_ctx_gauge(c, VR_G_PURGED);
	case VR_STAT_RECLAIMED_BYTES:
		return atomic_load(&c->reclaimed_bytes);
	case VR_STAT_PURGES:
		return atomic_load(&c->purges);
	case VR_STAT_FAULTS:
		return atomic_load(&c->faults);
	case VR_STAT_PRESSURE_EVENTS:
		return atomic_load(&c->pressure_events);
	case VR_STAT_SKIPPED:
		return atomic_load(&c->skipped);
	case VR_STAT_LIMIT_EVENTS:
		return atomic_load(&c->limit_events);
	case VR_STAT_LIMIT_PURGES:
		return atomic_load(&c->limit_purges);
	case VR_STAT_BUDGET:
		return atomic_load(&c->budget);
	case VR_STAT_LIMIT_LATENCY_NS:
		return atomic_load(&c->limit_latency_ns);
	case VR_STAT_OBJECTS:
		return vr_obj_count(c);
	case VR_STAT_FOOTPRINT:
		return vr_obj_footprint(c);
	case VR_STAT_SKIPPED_BUSY:
		return atomic_load(&c->skipped_busy);
	case VR_STAT_REPAIRS:
		return atomic_load(&c->repairs);
	case VR_STAT_LIMIT_USAGE:
		return atomic_load(&c->limit_usage);
	case VR_STAT_LIMIT_FILE_CACHE:
		return atomic_load(&c->limit_file);
	}
	return 0;
}

_export_ int vr_ctx_monitor_source(struct vr_ctx *c)
{
	return live(c) ? atomic_load(&c->monitor_source) : VR_MONITOR_NONE;
}

_export_ unsigned vr_ctx_monitor_sources(struct vr_ctx *c)
{
	return live(c) ? atomic_load(&c->monitor_sources) : 0;
}

_export_ uint64_t vr_ctx_memory_limit(struct vr_ctx *c)
{
	return live(c) ? atomic_load(&c->memory_limit) : 0;
}

_export_ int vr_ctx_memory_limit_scope(struct vr_ctx *c)
{
	return live(c) ? atomic_load(&c->memory_limit_scope) : VR_LIMIT_NONE;
}
