/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * map/map.h - the per-region set of volatile byte ranges
 *
 * Pure data structure, no system calls, no locks: the caller (region.c)
 * holds the region lock around every call (the fault path's lock-free
 * read, vr_map_lookup_racy(), is the one exception; its rules are below).
 *
 * Ranges are disjoint half-open byte intervals.  Each is a 32-byte record
 * (struct vr_range) carved from the map's arenas, so a range pointer stays
 * valid until the range is freed.  The records are indexed by a B+-tree
 * keyed by range start: leaves hold up to VR_BT_KEYS (start, record)
 * pairs, internal nodes up to VR_BT_KEYS (separator, child) pairs, keys
 * and pointers in two arrays of one 512-byte, cache-aligned node, so a
 * lookup among 10^6 ranges touches the (cached) upper levels, about two
 * lines of one cold leaf and the record.  A sequential build fills leaves
 * completely (the rightmost leaf splits unevenly).
 *
 * LRU (S8).  A range can be purged while it is unpurged and holds a whole
 * page ("on the LRU", flag VR_RANGE_ONLRU).  Ranges carry an age stamp;
 * the purge order is oldest first.  Instead of a linked list (whose
 * unlinking touches two cold neighbours on every unmark) the map keeps:
 *   - an append-only log of record pointers in age order: a new range is
 *     appended at the (hot) tail; leaving the LRU only clears the record's
 *     flag, so the log entry goes stale and is skipped (or compacted away)
 *     later.  An entry is live iff its record is ONLRU and the record's
 *     lru_pos is the entry's index;
 *   - a small binary heap (by age) for the pieces vr_unmark cuts out of
 *     the middle of a range: they keep the old age (S8), so they cannot be
 *     appended in order.  A heap entry is live iff its record is ONLRU,
 *     has lru_pos == VR_LRU_HEAP, the entry's tag in heap_tag and the
 *     entry's age.
 * vr_lru_peek() returns the oldest live candidate of a purge generation,
 * vr_lru_pop() steps past it (a skipped range keeps its place for later
 * generations).  Memory stays bounded: the log is compacted when more than
 * a fifth of it is stale (incrementally: a few entries per vr_map_alloc,
 * see map/map-lru.c), the heap when it is full.
 *
 * ALLOCATION RULE: vr_map_insert, vr_lru_append and vr_lru_insert_after
 * never fail; they use a reserve (tree nodes for a full split path, one log
 * slot, one heap slot) that vr_map_alloc() refills.  So every insert must
 * follow a successful vr_map_alloc(), with at most one insert, one append
 * and one insert_after per vr_map_alloc().
 */
#ifndef VR_RANGE_MAP_H
#define VR_RANGE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/macro.h"

#define VR_RANGE_PURGED 0x1u /* the range was purged (its whole pages discarded) */
#define VR_RANGE_ONLRU 0x2u  /* the range can be purged: it has a live LRU entry */
#define VR_RANGE_INTREE 0x4u /* the record is in the tree (set by insert, cleared by erase) */
#define VR_RANGE_PENDING                                                                           \
	0x8u /* a change in progress will end with this record in the
				 tree (vr_mark's merged range): see vr_map_rebuild */
#define VR_RANGE_FLAG_BITS 4

#define VR_LRU_NONE 0xfffffffeu /* lru_pos: no entry */
#define VR_LRU_HEAP 0xffffffffu /* lru_pos: the entry is in the heap */

/*
 * POSITION INDEPENDENCE.  A map may live in memory that several processes
 * map at different addresses (a shared region's state, shared.h).  So the
 * map stores no pointer: every link (tree nodes, records, the LRU log and
 * heap) is a vr_ref, an offset from the map's base, 0 meaning none.  The
 * base is derived from the map's own address: base = (char *)m - m->self.
 * A private map has self = its own address, so its base is 0 and a ref is
 * just the pointer's value; a map inside a shared state has self = its
 * offset in that state, the same number in every process.  Functions take
 * and return ordinary pointers; only stored links are refs.
 *
 * FIXED STORAGE.  A map set up with vr_map_init_fixed() carves nothing
 * from malloc: its records, nodes, log and heap are arrays after the map
 * in the caller's area, sized for vr_map_capacity() ranges; allocation
 * beyond that fails (callers turn it into -ENOSPC).  Its records are the
 * source of truth for vr_map_rebuild(), which recreates the tree and the
 * LRU from them after a process died in the middle of a change.
 */
typedef uint64_t vr_ref;

struct vr_range {
	uint64_t start, end; /* [start, end) in bytes; free records: start = next free */
	uint64_t age_flags;  /* age << 2 | VR_RANGE_* flags */
	uint32_t lru_pos;    /* index of the log entry, VR_LRU_HEAP or VR_LRU_NONE */
	uint32_t heap_tag;   /* with VR_LRU_HEAP: the tag of its heap entry */
};

/* B+-tree node: 30 keys + 30 pointers + header = 512 bytes (a build may
 * set another count to measure; 62 makes 1 KiB nodes) */
#ifndef VR_BT_KEYS
#define VR_BT_KEYS 30
#endif
#define VR_BT_MAXH 16 /* levels; 30^16 ranges is far beyond memory */

struct vr_bnode {
	uint32_t n;               /* entries in use */
	uint32_t leaf;            /* immutable for the node's life */
	vr_ref next, prev;        /* leaves in key order; free list */
	uint64_t key[VR_BT_KEYS]; /* leaf: range starts; inner: key[i]
				     (i >= 1) separates child i-1 | i */
	vr_ref ptr[VR_BT_KEYS];   /* leaf: struct vr_range; inner: children */
};

struct vr_lru_ent {
	uint64_t age;
	vr_ref r;
	uint32_t tag; /* a record freed and reused keeps no stale entry alive */
};

struct vr_arena;

struct vr_map {
	uint64_t self;   /* this map's address minus its base (see above) */
	vr_ref root;     /* 0 when empty */
	unsigned height; /* levels, leaves included; 0 when empty */
	unsigned fanout; /* entries per node, <= VR_BT_KEYS (tests lower it) */
	vr_ref free_leaves, free_inner;
	unsigned nfree_leaves, nfree_inner;
	vr_ref hint; /* leaf of the last vr_map_find_link */
	/* where a range starting at ins_key goes, as the last
	 * vr_map_neighbours(ins_key) found it or the last vr_map_erase_at()
	 * left it; cleared by every other change */
	vr_ref ins_leaf;
	vr_ref tail; /* the last leaf, if still so (checked on use) */
	unsigned ins_i;
	uint64_t ins_key;

	/* LRU log: entries in [log_head, log_hw) and [log_hc, log_tail),
	 * oldest first (the hole between: an incremental compaction pass) */
	vr_ref log; /* vr_ref[log_cap] */
	uint32_t log_head, log_hw, log_hc, log_tail, log_cap;
	uint32_t log_cur; /* purge cursor */
	bool log_pass;
	size_t nlog; /* live log entries */
	/* LRU heap: [0, nheap) a min-heap by age; [cap - nskip, cap) the
	 * entries skipped by the current purge generation */
	vr_ref heap; /* struct vr_lru_ent[heap_cap] */
	uint32_t nheap, nskip, heap_cap, heap_tag;
	size_t nheap_live;
	uint64_t cursor_gen; /* purge generation of log_cur and the skipped entries */
	int peek_src;        /* where the last vr_lru_peek() found its range */

	struct vr_arena *arenas; /* private maps: where records and nodes are carved */
	uint64_t arena_bytes, nrecords;
	vr_ref free_nodes; /* free records */
	unsigned page_shift;
	uint64_t nranges;

	/* fixed storage (vr_map_init_fixed); cap == 0 for a private map */
	uint64_t cap;   /* ranges the map may hold */
	uint64_t limit; /* every valid ref is below this (UINT64_MAX: private) */
	vr_ref rec_lo;  /* the record array ... */
	uint64_t rec_n; /* ... of rec_n records */
	vr_ref node_lo, node_next, node_hi; /* nodes: [node_lo, node_next) carved */
};

static inline uintptr_t vr_map_base(const struct vr_map *m)
{
	return (uintptr_t)m - m->self;
}
static inline void *vr_deref(const struct vr_map *m, vr_ref x)
{
	return x ? (void *)(vr_map_base(m) + x) : NULL;
}
static inline vr_ref vr_mkref(const struct vr_map *m, const void *p)
{
	return p ? (vr_ref)((uintptr_t)p - vr_map_base(m)) : 0;
}
/* ranges the map may hold, 0 = no fixed bound (a private map) */
static inline uint64_t vr_map_capacity(const struct vr_map *m)
{
	return m->cap;
}

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
/* frees every record, node and log (nothing for a fixed map) */
void vr_map_fini(struct vr_map *m) _nonnull_();
/* bytes a fixed map for cap ranges needs, itself included */
size_t vr_map_fixed_bytes(uint64_t cap);
/* an empty fixed map at m (64-byte aligned, vr_map_fixed_bytes(cap)
 * bytes); base: what refs are relative to (<= m), the start of an area
 * that every process maps whole */
void vr_map_init_fixed(struct vr_map *m, unsigned page_shift, const void *base, uint64_t cap)
	_nonnull_();
/* a fixed map's tree and LRU rebuilt from its records: every record that
 * is VR_RANGE_INTREE or VR_RANGE_PENDING with start < end counts;
 * overlapping ones are joined (the union, PURGED if any was, the oldest
 * age); PENDING is cleared.  For the repair after a process died in the
 * middle of a change (shared.c).  0, or -1 if the records do not fit. */
int vr_map_rebuild(struct vr_map *m) _nonnull_();

/* a zeroed record from the map's arenas, and the reserve for one insert (see
 * ALLOCATION RULE); NULL on ENOMEM (nothing changed) */
struct vr_range *vr_map_alloc(struct vr_map *m) _nonnull_() _must_check_;
/* the record must be out of the tree and off the LRU */
void vr_map_free(struct vr_map *m, struct vr_range *r) _nonnull_();

/* first range with end > off (the first that overlaps [off, ...)) */
struct vr_range *vr_map_first_end_after(const struct vr_map *m, uint64_t off) _nonnull_();
/* last range with start < off, or NULL */
struct vr_range *vr_map_last_start_before(const struct vr_map *m, uint64_t off) _nonnull_();
struct vr_range *vr_map_next(const struct vr_map *m, const struct vr_range *r) _nonnull_();
struct vr_range *vr_map_prev(const struct vr_map *m, const struct vr_range *r) _nonnull_();

/* one descent: *pred = last range with start < off, *succ = first range
 * with start >= off (either may be NULL) */
void vr_map_neighbours(struct vr_map *m, uint64_t off, struct vr_range **pred,
		       struct vr_range **succ) _nonnull_();
/* the leaf slot that holds the range containing off, or NULL: lets
 * vr_map_erase_at() skip a second descent if nothing changed in between */
vr_ref *vr_map_find_link(struct vr_map *m, uint64_t off) _nonnull_();
void vr_map_erase_at(struct vr_map *m, vr_ref *link) _nonnull_();
static inline struct vr_range *vr_map_link_rec(const struct vr_map *m, const vr_ref *link)
{
	return vr_deref(m, *link);
}

/* tree membership; keys must not overlap existing ranges */
void vr_map_insert(struct vr_map *m, struct vr_range *r) _nonnull_();
void vr_map_erase(struct vr_map *m, struct vr_range *r) _nonnull_();
/* raise r's start in place to start (< r->end); what vr_unmark does to a
 * piece.  r->end may be lowered directly (the tree does not hold ends). */
void vr_map_set_start(struct vr_map *m, struct vr_range *r, uint64_t start) _nonnull_();

/* LRU membership (flags kept in step).  append: r is the youngest range
 * (age >= every appended age); insert_after: r is a piece of pos with
 * pos's age, cut out by vr_unmark. */
void vr_lru_append(struct vr_map *m, struct vr_range *r) _nonnull_();
void vr_lru_insert_after(struct vr_map *m, struct vr_range *pos, struct vr_range *r) _nonnull_();
void vr_lru_remove(struct vr_map *m, struct vr_range *r) _nonnull_();
/* ranges on the LRU */
static inline size_t vr_lru_count(const struct vr_map *m)
{
	return m->nlog + m->nheap_live;
}
/* the oldest age on the LRU, UINT64_MAX if none (drops stale entries) */
uint64_t vr_lru_oldest_age(struct vr_map *m) _nonnull_();
/* purge generation gen: the oldest LRU range not yet stepped past in this
 * generation, or NULL; vr_lru_pop() steps past it (call it after the purge
 * attempt, with no other map change in between) */
struct vr_range *vr_lru_peek(struct vr_map *m, uint64_t gen) _nonnull_();
void vr_lru_pop(struct vr_map *m) _nonnull_();

/*
 * LOCK-FREE READ (the fault path, under the region's seqlock, mem/mem.h):
 * is off inside a range, and which.  Returns 1 and copies the range's
 * start, end and age_flags to *out, 0 if no range contains off, -1 if the
 * walk met a map changing under it (retry).  The answer means nothing
 * until the caller has checked the seq was even and unchanged around it.
 *
 * What keeps it crash-free, for whoever changes this file:
 *   - nodes and records are never given back to malloc before
 *     vr_map_fini(): a freed node or record goes to the map's free list
 *     and is reused as the same kind (a leaf stays a leaf), so every
 *     pointer a racing reader can load points into live memory of the
 *     type it expects (or is NULL);
 *   - pointer slots are written with single aligned stores (ptr_store),
 *     never memmove/memcpy, so no torn pointer is ever visible;
 *   - in a fixed map (a shared state) every ref read is checked against
 *     m->limit before use: another process may rebuild the map under
 *     the reader, and all the area below limit is mapped;
 *   - counts are clamped to VR_BT_KEYS and the descent to VR_BT_MAXH
 *     levels, so a walk through garbage keys is bounded;
 *   - the log and the heap are reallocated and are NOT read here.
 */
int vr_map_lookup_racy(const struct vr_map *m, uint64_t off, struct vr_range *out) _nonnull_();

/* between map/map.c and map/map-lru.c only */
int vr_lru_reserve(struct vr_map *m) _nonnull_(); /* 0 or -1 (ENOMEM) */
void vr_lru_fini(struct vr_map *m) _nonnull_();
int vr_lru_check(const struct vr_map *m) _nonnull_();

/* checks the tree (order, counts, links), disjointness, LRU entries and
 * flags; returns 0 or -1 */
int vr_map_check(const struct vr_map *m) _nonnull_();

#endif
