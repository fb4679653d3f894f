/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ctx.c - contexts: lifecycle, limit, explicit purge, pressure, stats */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "inject.h"
#include "private.h"
#include "shared.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
	vr_log_init();
	vr_age_init();
	vr_fi_init();
	vr_pg_shift = (unsigned)__builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
}

/* ---- the live contexts (issue 21, item 9) ----
 * A second vr_ctx_destroy of one ctx used to hang on its freed locks.
 * Every ctx that vr_ctx_new returned is listed here until vr_ctx_destroy
 * takes it out, first thing, so a destroy of anything else (twice, never
 * made, or made in a parent and destroyed twice in a fork child, which
 * inherits the list) aborts with a message instead of touching freed
 * memory.  vr_global_lock held; the list is copied into fork children
 * with the rest of the heap. */
static struct vr_ctx **live_ctxs;
static size_t nlive, cap_live;

static int live_add(struct vr_ctx *c)
{
	if (nlive == cap_live) {
		size_t cap = cap_live ? 2 * cap_live : 16;
		struct vr_ctx **a = realloc(live_ctxs, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		live_ctxs = a;
		cap_live = cap;
	}
	live_ctxs[nlive++] = c;
	return 0;
}

static bool live_remove(struct vr_ctx *c)
{
	for (size_t i = nlive; i-- > 0;)
		if (live_ctxs[i] == c) {
			live_ctxs[i] = live_ctxs[--nlive];
			if (nlive == 0) { /* no block left behind (S15) */
				free(live_ctxs);
				live_ctxs = NULL;
				cap_live = 0;
			}
			return true;
		}
	return false;
}

static void live_forget(struct vr_ctx *c)
{
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	bool ok = live_remove(c);
	vr_unlock(&vr_global_lock);
	if (!ok) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "libvrange: vr_ctx_destroy(%p): not a live ctx (destroyed twice?)\n",
			 (void *)c);
		vr_log_raw(msg);
		abort();
	}
}

_export_ int vr_ctx_new(unsigned flags, struct vr_ctx **out)
{
	if (!out || (flags & ~VR_CTX_NO_MONITOR))
		return -EINVAL;
	pthread_once(&init_once, global_init);
	int err = vr_fork_setup();
	if (err < 0)
		return err;
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	err = vr_trap_init();
	vr_unlock(&vr_global_lock);
	if (err < 0)
		return err;

	struct vr_ctx *c = vr_calloc_aligned(sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->purge_lock, NULL);
	pthread_mutex_init(&c->lock, NULL);
	c->flags = flags;
	c->fork_gen = atomic_load(&vr_fork_gen);
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	err = live_add(c);
	vr_unlock(&vr_global_lock);
	if (err < 0)
		goto fail_live;
	if (!(flags & VR_CTX_NO_MONITOR)) {
		err = vr_monitor_start(c);
		if (err < 0)
			goto fail;
	}
	/* last: a failing vr_ctx_new installs nothing (S13) */
	vr_purge_init();
	err = vr_fault_install();
	if (err < 0) {
		vr_monitor_stop(c, false);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
	live_remove(c);
	vr_unlock(&vr_global_lock);
fail_live:
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->purge_lock);
	free(c);
	return err;
}

_export_ void vr_ctx_destroy(struct vr_ctx *c)
{
	if (!c)
		return;
	live_forget(c); /* aborts unless c is live: nothing of it is read before */
	bool inherited = vr_inherited_ctx(c);
	vr_monitor_stop(c, inherited);
	if (inherited) {
		vr_lock(&vr_global_lock, VR_RANK_GLOBAL);
		while (c->regions)
			vr_region_free(c->regions, true);
		vr_obj_ctx_destroy(c, true);
		vr_unlock(&vr_global_lock);
		free(c->heap);
		free(c);
		return;
	}
	vr_lock(&c->purge_lock, VR_RANK_PURGE);
	vr_lock(&c->lock, VR_RANK_CTX);
	while (c->regions)
		vr_region_free(c->regions, false);
	vr_unlock(&c->lock);
	vr_obj_ctx_destroy(c, false);
	vr_unlock(&c->purge_lock);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->purge_lock);
	free(c->heap);
	free(c);
}

/* S29: what other processes did to the shared files of c, into its
 * gauges (lock-free per region: vr_shared_sync); skipped when this thread
 * holds c->lock (a signal handler interrupted it) */
static void sync_regions(struct vr_ctx *c) /* c->lock held */
{
	for (struct vr_region *r = c->regions; r; r = r->next)
		if (r->shm)
			vr_shared_sync(r);
}

void vr_ctx_sync_shared(struct vr_ctx *c)
{
	if (!atomic_load_explicit(&c->nshared, memory_order_relaxed) || vr_held(&c->lock))
		return;
	vr_lock(&c->lock, VR_RANK_CTX);
	sync_regions(c);
	vr_unlock(&c->lock);
}

/* the unpurged volatile bytes for a limit check on a hot path (vr_mark,
 * vr_obj_unpin): shared files synced only if the region list's lock is
 * free (trylock: a hot path never waits on it, S16); a file changed by
 * another process since is then counted at the next sync */
uint64_t vr_ctx_volatile_now(struct vr_ctx *c)
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

uint64_t vr_ctx_gauge(struct vr_ctx *c, enum vr_gauge g)
{
	uint64_t sum = 0;
	for (int i = 0; i < VR_NSHARDS; i++) {
		struct vr_shard *sh = &c->shards[i];
		sum += atomic_load_explicit(g == VR_G_RANGES     ? &sh->ranges
					    : g == VR_G_VOLATILE ? &sh->volatile_bytes
								 : &sh->purged_bytes,
					    memory_order_relaxed);
	}
	return sum;
}

static bool live(const struct vr_ctx *c)
{
	return c && !vr_inherited_ctx(c);
}

_export_ int vr_ctx_set_limit(struct vr_ctx *c, size_t bytes)
{
	if (!live(c))
		return -EINVAL;
	atomic_store(&c->limit, bytes);
	atomic_store(&c->limit_stuck, false);
	vr_ctx_sync_shared(c);
	if (bytes && vr_ctx_gauge(c, VR_G_VOLATILE) > bytes) {
		ssize_t n = vr_purge_lru(c, VR_PURGE_VOLATILE, bytes);
		if (n < 0)
			return (int)n;
	}
	return 0;
}

_export_ ssize_t vr_ctx_purge(struct vr_ctx *c, size_t bytes)
{
	if (!live(c))
		return -EINVAL;
	if (bytes == 0)
		return 0;
	return vr_purge_lru(c, VR_PURGE_BYTES, bytes);
}

_export_ ssize_t vr_ctx_notify_pressure(struct vr_ctx *c, enum vr_pressure level)
{
	if (!live(c) || (unsigned)level > VR_PRESSURE_CRITICAL)
		return -EINVAL;
	if (level == VR_PRESSURE_NONE)
		return 0;
	atomic_fetch_add(&c->pressure_events, 1);
	vr_dbg("pressure %s", level == VR_PRESSURE_CRITICAL ? "critical" : "moderate");
	if (level == VR_PRESSURE_CRITICAL)
		return vr_purge_lru(c, VR_PURGE_BYTES, UINT64_MAX);
	vr_ctx_sync_shared(c);
	return vr_purge_lru(c, VR_PURGE_VOLATILE, vr_ctx_gauge(c, VR_G_VOLATILE) / 2);
}

_export_ uint64_t vr_ctx_stat(struct vr_ctx *c, enum vr_stat which)
{
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

_export_ const char *vr_monitor_source_name(int source)
{
	static const char *const names[] = {
		"none", "cgroup2", "psi", "cgroup1", "meminfo", "limit"
	};
	if (source < 0 || (size_t)source >= VR_ARRAY_SIZE(names))
		return "unknown";
	return names[source];
}
