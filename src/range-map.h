/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * range-map.h - the per-region set of volatile byte ranges
 *
 * Pure data structure, no system calls, no locks: the caller (region.c)
 * holds the region lock around every call.  Ranges are disjoint half-open
 * byte intervals kept in a treap ordered by start (priorities are a hash
 * of the node address, so no space is spent on them) and, when they can
 * be purged (unpurged and holding at least one whole page), on the map's
 * LRU list, oldest first.  Across regions the LRU order is given by the
 * age stamp each range carries (a per-ctx counter), so the purge engine
 * merges the per-region lists by age without any shared list lock.
 *
 * A node is 56 bytes and nodes come from a slab owned by the map, so a
 * range costs 56 bytes of heap.
 */
#ifndef VR_RANGE_MAP_H
#define VR_RANGE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define VR_RANGE_PURGED 0x1u /* the range was purged (its whole pages discarded) */
#define VR_RANGE_ONLRU 0x2u  /* the range is on the map's LRU list */
#define VR_RANGE_FLAG_BITS 2

struct vr_range {
	uint64_t start, end;           /* [start, end) in bytes */
	struct vr_range *left, *right; /* treap children */
	struct vr_range *prev, *next;  /* LRU links, valid while ONLRU */
	uint64_t age_flags;            /* age << 2 | VR_RANGE_* flags */
};

struct vr_slab;

struct vr_map {
	struct vr_range *root;
	struct vr_range *lru_head, *lru_tail; /* oldest ... youngest */
	/* purge cursor: the next candidate of the purge generation cursor_gen */
	struct vr_range *cursor;
	uint64_t cursor_gen;
	struct vr_slab *slabs;
	struct vr_range *free_nodes;
	unsigned page_shift;
	size_t nranges;
};

static inline uint64_t vr_range_age(const struct vr_range *r)
{
	return r->age_flags >> VR_RANGE_FLAG_BITS;
}
static inline bool vr_range_purged(const struct vr_range *r)
{
	return r->age_flags & VR_RANGE_PURGED;
}
static inline bool vr_range_on_lru(const struct vr_range *r)
{
	return r->age_flags & VR_RANGE_ONLRU;
}
static inline void vr_range_set_age(struct vr_range *r, uint64_t age)
{
	r->age_flags =
		(age << VR_RANGE_FLAG_BITS) | (r->age_flags & ((1u << VR_RANGE_FLAG_BITS) - 1));
}

/* whole pages of [start, end): [*p0, *p1), page aligned; false if none */
static inline bool vr_whole_pages(uint64_t start, uint64_t end, unsigned shift, uint64_t *p0,
				  uint64_t *p1)
{
	uint64_t mask = ((uint64_t)1 << shift) - 1;
	uint64_t a = (start + mask) & ~mask, b = end & ~mask;
	if (p0)
		*p0 = a;
	if (p1)
		*p1 = b;
	return a < b;
}

void vr_map_init(struct vr_map *m, unsigned page_shift) _nonnull_();
/* frees every node and slab */
void vr_map_fini(struct vr_map *m) _nonnull_();

/* node allocation from the map's slab; NULL on ENOMEM */
struct vr_range *vr_map_alloc(struct vr_map *m) _nonnull_() _must_check_;
void vr_map_free(struct vr_map *m, struct vr_range *r) _nonnull_();

/* first range with end > off (the first that overlaps [off, ...)) */
struct vr_range *vr_map_first_end_after(const struct vr_map *m, uint64_t off) _nonnull_();
/* last range with start < off, or NULL */
struct vr_range *vr_map_last_start_before(const struct vr_map *m, uint64_t off) _nonnull_();
struct vr_range *vr_map_next(const struct vr_map *m, const struct vr_range *r) _nonnull_();
struct vr_range *vr_map_prev(const struct vr_map *m, const struct vr_range *r) _nonnull_();

/* one descent: *pred = last range with start < off, *succ = first range
 * with start >= off (either may be NULL) */
void vr_map_neighbours(const struct vr_map *m, uint64_t off, struct vr_range **pred,
		       struct vr_range **succ) _nonnull_();
/* the link (parent's child pointer or &root) that holds the range
 * containing off, or NULL: lets vr_map_erase_at() skip a second descent */
struct vr_range **vr_map_find_link(struct vr_map *m, uint64_t off) _nonnull_();
void vr_map_erase_at(struct vr_map *m, struct vr_range **link) _nonnull_();

/* tree membership; keys must not overlap existing ranges */
void vr_map_insert(struct vr_map *m, struct vr_range *r) _nonnull_();
void vr_map_erase(struct vr_map *m, struct vr_range *r) _nonnull_();

/* LRU membership (flags kept in step); removal keeps the purge cursor valid */
void vr_lru_append(struct vr_map *m, struct vr_range *r) _nonnull_();
void vr_lru_insert_after(struct vr_map *m, struct vr_range *pos, struct vr_range *r) _nonnull_();
void vr_lru_remove(struct vr_map *m, struct vr_range *r) _nonnull_();

/* checks the treap order, disjointness, LRU order/flags; returns 0 or -1 */
int vr_map_check(const struct vr_map *m) _nonnull_();

#endif
