/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * map/map.c - B+-tree of disjoint volatile ranges (the LRU log and heap
 * are in map/map-lru.c)
 *
 * All functions are called with the owning region's lock held (or on a
 * private map in tests), except vr_map_lookup_racy() (rules in
 * map/map.h).  Nothing here makes a system call.
 *
 * Separators: in an inner node key[i] (i >= 1) is a lower bound of child
 * i's keys and an upper bound (exclusive) of child i-1's; key[0] is not
 * used for search.  Deleting a key never updates separators; they stay
 * valid bounds.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/inject.h"
#include "base/sys.h"
#include "map/map.h"

#define LD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)

/* every pointer slot of a node is written with one aligned store: a
 * racing reader never sees a torn pointer (see map/map.h) */
static inline void ptr_store(vr_ref *slot, vr_ref v)
{
	__atomic_store_n(slot, v, __ATOMIC_RELAXED);
}

/* refs <-> pointers; m in scope (map/map.h: POSITION INDEPENDENCE) */
#define NODE(x) ((struct vr_bnode *)vr_deref(m, (x)))
#define REC(x) ((struct vr_range *)vr_deref(m, (x)))
#define REF(p) vr_mkref(m, (p))

/* a slot in use of a node always holds a ref (never 0): no test */
static inline struct vr_range *rec(const struct vr_map *m, const struct vr_bnode *n, unsigned i)
{
	return (struct vr_range *)(vr_map_base(m) + n->ptr[i]);
}

static inline unsigned min_fill(const struct vr_map *m)
{
	return m->fanout / 2;
}

/* ---- memory: records and nodes are carved from arenas ---- */

/* An arena is one block, carved by a bump pointer and freed only by
 * vr_map_fini (racing readers may walk anything ever carved).  A new arena
 * holds a 32nd of what the map has, so at most about that much is unused
 * (a piece of records too large for an arena's tail is cut to fit).
 *
 * HUGE PAGES.  At 10^6 ranges and more the records and nodes span tens to
 * hundreds of MB: with 4 KiB pages every cold access adds a TLB miss whose
 * page walk misses the cache too.  So once a map holds ARENA_HUGE_FROM
 * bytes, each new arena is whole 2 MiB pages, 2 MiB-aligned, mapped by
 * vr_map_huge (base/sys.h: advised MADV_HUGEPAGE, a hint) rather than
 * malloc'd: a malloc'd block gets huge pages only on its aligned interior
 * (half of a 4 MiB block), and an aligned malloc keeps its padding.
 * Random unmark+mark pairs among 10^7 ranges: 720-780 ns instead of
 * 890-970 with the interior-only hint, which covered 45% of such a map
 * (0% of a 10^6 one, whose pairs did not change).  What it
 * costs: the current arena's unused tail may be resident up to its 2 MiB
 * page (at most an eighth of a map of ARENA_HUGE_FROM, less beyond).
 * Smaller maps keep malloc'd arenas (heap accounting sees them); the large
 * ones show in RSS, as the object arenas do.
 *
 * INNER NODES are carved from the top of an arena downwards, records and
 * leaves from the bottom up, so each arena's inner nodes share a few
 * pages instead of being strewn among its records and leaves: a descent
 * at 10^7 ranges then needs fewer TLB entries for the level above the
 * leaves, the one that no longer stays cached.  rdtsc per level at 10^7
 * with a separate inner arena: that level 144-174 cycles instead of
 * 231-233; this layout, random pairs among 10^7 ranges in two A/B
 * batches: medians 689 and 701 ns against 724 and 735 (about 5%); 10^6
 * unchanged. */
struct vr_arena {
	struct vr_arena *next;
	size_t size;
	size_t used; /* records and leaves: [ARENA_HDR, used) */
	size_t top;  /* inner nodes: [top, size), carved downwards */
	bool mapped; /* vr_map_huge'd (munmap), else malloc'd (free) */
};

#define ARENA_HDR 64
#define ARENA_MIN ((size_t)4 << 10)
#define ARENA_MAX ((size_t)32 << 20)
#define ARENA_HUGE_FROM ((size_t)16 << 20)
/* records per carve: a 128th of the records, 16 .. 8192 (256 KiB) */
#define SLAB_MIN 16
#define SLAB_MAX 8192

static struct vr_arena *arena_new(struct vr_map *m, size_t want)
{
	struct vr_arena *a;
	VR_FI_FAIL(VR_FI_MALLOC, NULL);
	if (m->arena_bytes >= ARENA_HUGE_FROM) {
		want = (want + VR_HUGE_SIZE - 1) & ~(VR_HUGE_SIZE - 1);
		a = vr_map_huge(want);
		if (a == MAP_FAILED)
			return NULL;
		a->mapped = true;
	} else {
		void *p = NULL;
		if (posix_memalign(&p, 64, want) != 0)
			return NULL;
		a = p;
		a->mapped = false;
	}
	a->size = want;
	a->top = want & ~(size_t)63; /* carves are 64-byte multiples, aligned */
	a->used = ARENA_HDR;
	a->next = m->arenas;
	m->arenas = a;
	m->arena_bytes += want;
	return a;
}

/* bytes left between an arena's two carved parts */
static inline size_t arena_room(const struct vr_arena *a)
{
	return a ? a->top - a->used : 0;
}

/* size bytes from the current arena: from its bottom, or for an inner
 * node (high) from its top (see INNER NODES above) */
static void *carve(struct vr_map *m, size_t size, bool high)
{
	struct vr_arena *a = m->arenas;
	size = (size + 63) & ~(size_t)63;
	if (m->cap) { /* fixed storage: nodes only (records are preallocated) */
		if (m->node_hi - m->node_next < size)
			return NULL;
		void *p = vr_deref(m, m->node_next);
		m->node_next += size;
		return p;
	}
	if (arena_room(a) < size) {
		size_t want = m->arena_bytes / 32;
		want = want < ARENA_MIN ? ARENA_MIN : want > ARENA_MAX ? ARENA_MAX : want;
		if (want < size + ARENA_HDR)
			want = size + ARENA_HDR;
		if (!(a = arena_new(m, want)))
			return NULL;
	}
	if (high) {
		a->top -= size;
		return (char *)a + a->top;
	}
	void *p = (char *)a + a->used;
	a->used += size;
	return p;
}

void vr_map_init(struct vr_map *m, unsigned page_shift)
{
	*m = (struct vr_map){ .self = (uintptr_t)m,
			      .page_shift = page_shift,
			      .fanout = VR_BT_KEYS,
			      .limit = UINT64_MAX };
}

void vr_map_fini(struct vr_map *m)
{
	if (m->cap)
		return; /* fixed storage belongs to the caller */
	struct vr_arena *a = m->arenas;
	while (a) {
		struct vr_arena *n = a->next;
		if (a->mapped)
			munmap(a, a->size);
		else
			free(a);
		a = n;
	}
	vr_lru_fini(m);
	vr_map_init(m, m->page_shift);
}

/* ---- fixed storage: [map][records][log][heap][nodes] ---- */

#define ALIGN64(x) (((x) + 63) & ~(uint64_t)63)
/* records: cap plus the one a change allocates before it frees others;
 * log: twice the live entries (compacted when full); heap: live entries
 * stay at most half of it; nodes: leaves at least half full but the
 * rightmost ones, inner levels, the reserve of a split path */
static uint64_t fixed_recs(uint64_t cap)
{
	return cap + 4;
}
static uint64_t fixed_log(uint64_t cap)
{
	return 2 * cap + 64;
}
static uint64_t fixed_heap(uint64_t cap)
{
	return 2 * cap + 16;
}
static uint64_t fixed_nodes(uint64_t cap)
{
	return cap / (VR_BT_KEYS / 2 - 1) * 2 + 4 * VR_BT_MAXH + 16;
}

size_t vr_map_fixed_bytes(uint64_t cap)
{
	return ALIGN64(sizeof(struct vr_map)) + ALIGN64(fixed_recs(cap) * sizeof(struct vr_range)) +
	       ALIGN64(fixed_log(cap) * sizeof(vr_ref)) +
	       ALIGN64(fixed_heap(cap) * sizeof(struct vr_lru_ent)) +
	       fixed_nodes(cap) * sizeof(struct vr_bnode);
}

/* the record array's free list: every record not in use */
static void fixed_free_all(struct vr_map *m)
{
	struct vr_range *v = REC(m->rec_lo);
	m->free_nodes = 0;
	for (uint64_t i = m->rec_n; i-- > 0;)
		if (!(v[i].age_flags & (VR_RANGE_INTREE | VR_RANGE_PENDING))) {
			v[i] = (struct vr_range){ .start = m->free_nodes, .lru_pos = VR_LRU_NONE };
			m->free_nodes = REF(&v[i]);
		}
}

void vr_map_init_fixed(struct vr_map *m, unsigned page_shift, const void *base, uint64_t cap)
{
	uintptr_t b = (uintptr_t)base;
	*m = (struct vr_map){
		.self = (uintptr_t)m - b, .page_shift = page_shift, .fanout = VR_BT_KEYS, .cap = cap
	};
	uint64_t o = m->self + ALIGN64(sizeof(*m));
	m->rec_lo = o;
	m->rec_n = fixed_recs(cap);
	o += ALIGN64(m->rec_n * sizeof(struct vr_range));
	m->log = o;
	m->log_cap = (uint32_t)fixed_log(cap);
	o += ALIGN64(fixed_log(cap) * sizeof(vr_ref));
	m->heap = o;
	m->heap_cap = (uint32_t)fixed_heap(cap);
	o += ALIGN64(fixed_heap(cap) * sizeof(struct vr_lru_ent));
	m->node_lo = m->node_next = o;
	m->node_hi = o + fixed_nodes(cap) * sizeof(struct vr_bnode);
	m->limit = m->node_hi;
	memset(REC(m->rec_lo), 0, m->rec_n * sizeof(struct vr_range));
	fixed_free_all(m);
}

/* free records are linked through their start field */
static inline struct vr_range *free_link(const struct vr_map *m, const struct vr_range *r)
{
	return REC(r->start);
}

/* a node's kind is fixed when it is carved */
static int node_new(struct vr_map *m, bool leaf)
{
	struct vr_bnode *n = carve(m, sizeof(*n), !leaf);
	if (!n)
		return -1;
	memset(n, 0, sizeof(*n));
	n->leaf = leaf;
	if (leaf) {
		n->next = m->free_leaves;
		m->free_leaves = REF(n);
		m->nfree_leaves++;
	} else {
		n->next = m->free_inner;
		m->free_inner = REF(n);
		m->nfree_inner++;
	}
	return 0;
}

struct vr_range *vr_map_alloc(struct vr_map *m)
{
	/* the reserve for one insert: a leaf and an inner node per level
	 * (a split path up to a new root) */
	while (m->nfree_leaves < 1)
		if (node_new(m, true) < 0)
			return NULL;
	while (m->nfree_inner < m->height + 1)
		if (node_new(m, false) < 0)
			return NULL;
	if (vr_lru_reserve(m) < 0)
		return NULL;
	struct vr_range *r = REC(m->free_nodes);
	if (!r && m->cap)
		return NULL; /* fixed storage: every record in use */
	if (!r) {
		size_t n = m->nrecords / 128;
		n = n < SLAB_MIN ? SLAB_MIN : n > SLAB_MAX ? SLAB_MAX : n;
		/* fill the current arena's tail rather than leave it unused */
		size_t room = arena_room(m->arenas) / sizeof(*r);
		if (room >= SLAB_MIN && room < n)
			n = room & ~(size_t)1; /* carves are 64-byte multiples */
		struct vr_range *v = carve(m, n * sizeof(*v), false);
		if (!v)
			return NULL;
		m->nrecords += n;
		for (size_t i = 0; i < n; i++) {
			v[i] = (struct vr_range){ .start = m->free_nodes, .lru_pos = VR_LRU_NONE };
			m->free_nodes = REF(&v[i]);
		}
		r = REC(m->free_nodes);
	}
	m->free_nodes = REF(free_link(m, r));
	*r = (struct vr_range){ 0 };
	return r;
}

void vr_map_free(struct vr_map *m, struct vr_range *r)
{
	/* a stale LRU entry must never see this record as its own again */
	r->age_flags &= ~(uint64_t)VR_RANGE_ONLRU;
	r->age_flags &= ~(uint64_t)(VR_RANGE_INTREE | VR_RANGE_PENDING);
	r->lru_pos = VR_LRU_NONE;
	r->start = m->free_nodes;
	m->free_nodes = REF(r);
}

/* ---- nodes: taken from the reserve, given back to it (never freed
 * before vr_map_fini: racing readers may still walk them) ---- */

static struct vr_bnode *node_get(struct vr_map *m, bool leaf)
{
	vr_ref *list = leaf ? &m->free_leaves : &m->free_inner;
	if (!*list && node_new(m, leaf) < 0)
		abort(); /* the ALLOCATION RULE was broken: vr_map_alloc first */
	struct vr_bnode *n = NODE(*list);
	*list = n->next;
	if (leaf)
		m->nfree_leaves--;
	else
		m->nfree_inner--;
	n->n = 0;
	n->next = n->prev = 0;
	return n;
}

static void node_put(struct vr_map *m, struct vr_bnode *n)
{
	n->n = 0;
	n->prev = 0;
	if (n->leaf) {
		n->next = m->free_leaves;
		m->free_leaves = REF(n);
		m->nfree_leaves++;
	} else {
		n->next = m->free_inner;
		m->free_inner = REF(n);
		m->nfree_inner++;
	}
}

/* ---- search ---- */

/* first i in [lo, hi) with key[i] > k (hi if none): the keys are sorted,
 * so that is lo + how many are <= k, a count without branches that the
 * compiler vectorizes (a binary search's comparisons on a random lookup
 * are coin flips no predictor learns; the node's lines are prefetched) */
static inline unsigned upper(const uint64_t *key, unsigned lo, unsigned hi, uint64_t k)
{
	unsigned c = lo;
	for (unsigned i = lo; i < hi; i++)
		c += key[i] <= k;
	return c;
}

/* first i in [lo, hi) with key[i] >= k (hi if none) */
static inline unsigned lower(const uint64_t *key, unsigned lo, unsigned hi, uint64_t k)
{
	return k == 0 ? lo : upper(key, lo, hi, k - 1);
}

struct path {
	struct vr_bnode *n[VR_BT_MAXH];
	unsigned i[VR_BT_MAXH]; /* inner levels: the child taken */
};

/* the leaf where key k is or would go: every key < k of the map is in it
 * or to its left, every key >= k in it or to its right */
/* a node is 8 lines: ask for all of them at once so that a cold node
 * costs one memory latency, not one per step of the binary search */
static inline void node_prefetch(const struct vr_bnode *n)
{
	for (unsigned i = 0; i < sizeof(*n); i += 64)
		__builtin_prefetch((const char *)n + i);
}

static struct vr_bnode *descend(const struct vr_map *m, uint64_t k, struct path *p)
{
	const uintptr_t base = vr_map_base(m);
	struct vr_bnode *n = NODE(m->root);
	for (unsigned l = 0; l + 1 < m->height; l++) {
		unsigned i = upper(n->key, 1, n->n, k) - 1;
		if (p) {
			p->n[l] = n;
			p->i[l] = i;
		}
		n = (struct vr_bnode *)(base + n->ptr[i]); /* inner slots are never 0 */
		node_prefetch(n);
	}
	if (p)
		p->n[m->height - 1] = n;
	return n;
}

struct pos {
	struct vr_bnode *leaf;
	unsigned i;
};

/* the entry before (leaf, i) (i may be 0), or {NULL} */
static struct pos pos_before(const struct vr_map *m, struct vr_bnode *leaf, unsigned i)
{
	if (i > 0)
		return (struct pos){ leaf, i - 1 };
	leaf = NODE(leaf->prev);
	return leaf ? (struct pos){ leaf, leaf->n - 1 } : (struct pos){ NULL, 0 };
}

/* the entry at (leaf, i) (i may be leaf->n), or {NULL} */
static struct pos pos_at(const struct vr_map *m, struct vr_bnode *leaf, unsigned i)
{
	if (i < leaf->n)
		return (struct pos){ leaf, i };
	leaf = NODE(leaf->next);
	return leaf ? (struct pos){ leaf, 0 } : (struct pos){ NULL, 0 };
}

static inline struct vr_range *pos_rec(const struct vr_map *m, struct pos p)
{
	return p.leaf ? rec(m, p.leaf, p.i) : NULL;
}

/* the last entry with key < k and the first with key >= k */
static void around(const struct vr_map *m, uint64_t k, struct pos *pred, struct pos *succ)
{
	if (!m->root) {
		if (pred)
			*pred = (struct pos){ NULL, 0 };
		if (succ)
			*succ = (struct pos){ NULL, 0 };
		return;
	}
	struct vr_bnode *leaf = descend(m, k, NULL);
	unsigned i = lower(leaf->key, 0, leaf->n, k);
	if (pred)
		*pred = pos_before(m, leaf, i);
	if (succ)
		*succ = pos_at(m, leaf, i);
}

/* the entry of r itself */
static struct pos pos_of(const struct vr_map *m, const struct vr_range *r)
{
	struct pos s;
	around(m, r->start, NULL, &s);
	return s;
}

struct vr_range *vr_map_first_end_after(const struct vr_map *m, uint64_t off)
{
	struct pos p, s;
	if (off == UINT64_MAX)
		return NULL;
	around(m, off + 1, &p, &s); /* p: last with start <= off */
	struct vr_range *r = pos_rec(m, p);
	if (r && r->end > off)
		return r;
	return pos_rec(m, s);
}

struct vr_range *vr_map_last_start_before(const struct vr_map *m, uint64_t off)
{
	struct pos p;
	around(m, off, &p, NULL);
	return pos_rec(m, p);
}

struct vr_range *vr_map_next(const struct vr_map *m, const struct vr_range *r)
{
	struct pos p = pos_of(m, r);
	return p.leaf ? pos_rec(m, pos_at(m, p.leaf, p.i + 1)) : NULL;
}

struct vr_range *vr_map_prev(const struct vr_map *m, const struct vr_range *r)
{
	struct pos p = pos_of(m, r);
	return p.leaf ? pos_rec(m, pos_before(m, p.leaf, p.i)) : NULL;
}

void vr_map_neighbours(struct vr_map *m, uint64_t off, struct vr_range **pred,
		       struct vr_range **succ)
{
	if (!m->root) {
		*pred = *succ = NULL;
		return;
	}
	struct vr_bnode *leaf;
	unsigned i;
	struct vr_bnode *t = NODE(m->tail);
	if (m->ins_leaf && m->ins_key == off) {
		/* the spot a range starting at off was just erased from, or
		 * the one the last call found (nothing changed since) */
		leaf = NODE(m->ins_leaf);
		i = m->ins_i;
	} else if (t && t->n && !t->next && off > t->key[t->n - 1]) {
		/* beyond every key (an ascending build): the end of the last
		 * leaf, which has no separator on its right.  A live leaf has
		 * n > 0 and only the last has no next; a freed one has n == 0. */
		leaf = t;
		i = t->n;
	} else {
		leaf = descend(m, off, NULL);
		i = lower(leaf->key, 0, leaf->n, off);
		if (!leaf->next)
			m->tail = REF(leaf);
	}
	*pred = pos_rec(m, pos_before(m, leaf, i));
	*succ = pos_rec(m, pos_at(m, leaf, i));
	/* where a range starting at off goes: vr_map_insert() takes it from
	 * here if the map does not change in between (mark after unmark) */
	m->ins_leaf = REF(leaf);
	m->ins_i = i;
	m->ins_key = off;
}

vr_ref *vr_map_find_link(struct vr_map *m, uint64_t off)
{
	struct pos p, s;
	if (off == UINT64_MAX)
		return NULL;
	around(m, off + 1, &p, &s);
	struct vr_range *r = pos_rec(m, p);
	/* the caller is about to read r and, if it erases r and marks the
	 * same bytes again (the intact pair), r's neighbours: fetch all three
	 * records at once */
	if (p.leaf) {
		struct pos q = pos_before(m, p.leaf, p.i);
		if (q.leaf)
			__builtin_prefetch(pos_rec(m, q));
		if (s.leaf)
			__builtin_prefetch(pos_rec(m, s));
	}
	if (!r || r->end <= off)
		return NULL;
	m->hint = REF(p.leaf);
	return &p.leaf->ptr[p.i];
}

/* ---- changes ---- */

static void shift_right(struct vr_bnode *n, unsigned from, unsigned by)
{
	for (unsigned j = n->n; j-- > from;) {
		n->key[j + by] = n->key[j];
		ptr_store(&n->ptr[j + by], n->ptr[j]);
	}
}

static void shift_left(struct vr_bnode *n, unsigned from, unsigned by)
{
	for (unsigned j = from; j < n->n; j++) {
		n->key[j - by] = n->key[j];
		ptr_store(&n->ptr[j - by], n->ptr[j]);
	}
}

static void put_entry(struct vr_bnode *n, unsigned i, uint64_t key, vr_ref p)
{
	n->key[i] = key;
	ptr_store(&n->ptr[i], p);
}

/* insert (key, p) at position i of n, which has room */
static void node_insert(struct vr_bnode *n, unsigned i, uint64_t key, vr_ref p)
{
	shift_right(n, i, 1);
	put_entry(n, i, key, p);
	n->n++;
}

/* n is full: move the upper part of n plus (key, p) at position i into a
 * new node; returns it.  uneven (appending at the right edge of the tree):
 * a leaf keeps everything and the new one gets only (key, p); an inner
 * node keeps all but its last entry (inner nodes keep two or more). */
static struct vr_bnode *node_split(struct vr_map *m, struct vr_bnode *n, unsigned i, uint64_t key,
				   vr_ref p, bool uneven)
{
	struct vr_bnode *r = node_get(m, n->leaf);
	unsigned total = n->n + 1, keep = uneven ? n->n - !n->leaf : total / 2;
	/* entry j of the combined sequence */
	for (unsigned j = keep; j < total; j++) {
		if (j == i)
			put_entry(r, j - keep, key, p);
		else
			put_entry(r, j - keep, n->key[j - (j > i)], n->ptr[j - (j > i)]);
	}
	r->n = total - keep;
	if (i < keep) {
		n->n = keep - 1;
		node_insert(n, i, key, p);
	} else {
		n->n = keep;
	}
	if (n->leaf) {
		r->next = n->next;
		r->prev = REF(n);
		if (n->next)
			NODE(n->next)->prev = REF(r);
		n->next = REF(r);
	}
	return r;
}

void vr_map_insert(struct vr_map *m, struct vr_range *r)
{
	struct vr_bnode *h = NODE(m->ins_leaf);
	vr_ref rr = REF(r);
	m->hint = 0;
	m->ins_leaf = 0;
	m->nranges++;
	r->age_flags |= VR_RANGE_INTREE;
	if (h && m->ins_key == r->start && h->n < m->fanout) {
		node_insert(h, m->ins_i, r->start, rr);
		return;
	}
	if (!m->root) {
		struct vr_bnode *leaf = node_get(m, true);
		put_entry(leaf, 0, r->start, rr);
		leaf->n = 1;
		__atomic_store_n(&m->root, REF(leaf), __ATOMIC_RELEASE);
		m->height = 1;
		return;
	}
	struct path p;
	struct vr_bnode *leaf = descend(m, r->start, &p);
	unsigned i = upper(leaf->key, 0, leaf->n, r->start);
	if (leaf->n < m->fanout) {
		node_insert(leaf, i, r->start, rr);
		return;
	}
	/* appending to the rightmost leaf: keep it full (sequential builds) */
	bool edge = !leaf->next;
	struct vr_bnode *nn = node_split(m, leaf, i, r->start, rr, edge && i == leaf->n);
	uint64_t sep = nn->key[0];
	for (unsigned l = m->height - 1; l-- > 0;) {
		struct vr_bnode *in = p.n[l];
		unsigned j = p.i[l] + 1;
		if (in->n < m->fanout) {
			node_insert(in, j, sep, REF(nn));
			return;
		}
		nn = node_split(m, in, j, sep, REF(nn), edge && j == in->n);
		sep = nn->key[0];
	}
	/* the root split: a new root */
	struct vr_bnode *root = node_get(m, false);
	put_entry(root, 0, NODE(m->root)->key[0], m->root);
	put_entry(root, 1, sep, REF(nn));
	root->n = 2;
	__atomic_store_n(&m->root, REF(root), __ATOMIC_RELEASE);
	m->height++;
}

/* node p->n[l] (not the root) has fewer than min_fill entries: merge it
 * with a sibling or borrow from one */
static void rebalance(struct vr_map *m, struct path *p, unsigned l)
{
	while (l > 0) {
		struct vr_bnode *par = p->n[l - 1], *x = p->n[l], *a, *b;
		unsigned xi = p->i[l - 1], s;
		if (x->n >= min_fill(m))
			return;
		if (xi > 0) {
			a = NODE(par->ptr[xi - 1]);
			b = x;
			s = xi;
		} else {
			a = x;
			b = NODE(par->ptr[xi + 1]);
			s = xi + 1;
		}
		if (!b->leaf) /* pull the separator down as b's key[0] */
			b->key[0] = par->key[s];
		if (a->n + b->n <= m->fanout) {
			for (unsigned j = 0; j < b->n; j++)
				put_entry(a, a->n + j, b->key[j], b->ptr[j]);
			a->n += b->n;
			if (a->leaf) {
				a->next = b->next;
				if (b->next)
					NODE(b->next)->prev = REF(a);
			}
			shift_left(par, s + 1, 1);
			par->n--;
			node_put(m, b);
			if (l - 1 == 0) {
				if (par->n == 1) { /* the root has one child: drop a level */
					__atomic_store_n(&m->root, par->ptr[0], __ATOMIC_RELEASE);
					m->height--;
					node_put(m, par);
				}
				return;
			}
			l--;
			continue;
		}
		unsigned total = a->n + b->n, want = total / 2;
		if (a->n > want) {
			unsigned k = a->n - want;
			shift_right(b, 0, k);
			for (unsigned j = 0; j < k; j++)
				put_entry(b, j, a->key[want + j], a->ptr[want + j]);
			b->n += k;
			a->n = want;
		} else {
			unsigned k = want - a->n;
			for (unsigned j = 0; j < k; j++)
				put_entry(a, a->n + j, b->key[j], b->ptr[j]);
			a->n += k;
			shift_left(b, k, k);
			b->n -= k;
		}
		par->key[s] = b->key[0];
		return;
	}
}

/* remove entry i of the leaf at the bottom of path p */
static void leaf_remove(struct vr_map *m, struct path *p, unsigned i)
{
	struct vr_bnode *leaf = p->n[m->height - 1];
	shift_left(leaf, i + 1, 1);
	leaf->n--;
	m->nranges--;
	m->hint = 0;
	m->ins_leaf = 0;
	if (m->height == 1) {
		if (leaf->n == 0) {
			__atomic_store_n(&m->root, 0, __ATOMIC_RELEASE);
			m->height = 0;
			node_put(m, leaf);
		}
		return;
	}
	rebalance(m, p, m->height - 1);
}

void vr_map_erase(struct vr_map *m, struct vr_range *r)
{
	struct path p;
	struct vr_bnode *leaf = descend(m, r->start, &p);
	unsigned i = lower(leaf->key, 0, leaf->n, r->start);
	if (i >= leaf->n || rec(m, leaf, i) != r)
		abort(); /* not in the map: a caller bug that must not go on */
	r->age_flags &= ~(uint64_t)VR_RANGE_INTREE;
	leaf_remove(m, &p, i);
}

void vr_map_erase_at(struct vr_map *m, vr_ref *link)
{
	struct vr_bnode *h = NODE(m->hint);
	vr_ref *slot = link;
	if (h && slot >= &h->ptr[0] && slot < &h->ptr[h->n] &&
	    (h->n > min_fill(m) || REF(h) == m->root)) {
		/* no rebalancing needed: no second descent */
		unsigned i = (unsigned)(slot - &h->ptr[0]);
		uint64_t key = h->key[i];
		REC(*slot)->age_flags &= ~(uint64_t)VR_RANGE_INTREE;
		shift_left(h, i + 1, 1);
		h->n--;
		m->nranges--;
		m->hint = 0;
		m->ins_leaf = 0;
		if (h->n == 0) { /* the root leaf emptied */
			__atomic_store_n(&m->root, 0, __ATOMIC_RELEASE);
			m->height = 0;
			node_put(m, h);
			return;
		}
		/* the intact pair marks the same bytes next: where they go */
		m->ins_leaf = REF(h);
		m->ins_i = i;
		m->ins_key = key;
		return;
	}
	vr_map_erase(m, REC(*link));
}

void vr_map_set_start(struct vr_map *m, struct vr_range *r, uint64_t start)
{
	struct path p;
	struct vr_bnode *leaf = descend(m, r->start, &p);
	unsigned i = lower(leaf->key, 0, leaf->n, r->start);
	if (i >= leaf->n || rec(m, leaf, i) != r || start < r->start || start >= r->end)
		abort();
	/* the next key (in this leaf or to the right) is >= r->end > start,
	 * so the leaf order holds; the separator right of r's subtree, at the
	 * lowest level that has one, may have to drop to start + 1 (still <=
	 * every key to its right, which are >= r->end) */
	leaf->key[i] = start;
	r->start = start;
	m->ins_leaf = 0; /* a key moved: the insert hint may be wrong */
	if (i + 1 < leaf->n)
		return;
	for (unsigned l = m->height - 1; l-- > 0;) {
		struct vr_bnode *in = p.n[l];
		if (p.i[l] + 1 < in->n) {
			if (in->key[p.i[l] + 1] <= start)
				in->key[p.i[l] + 1] = start + 1;
			return;
		}
	}
}

/* ---- rebuilding a fixed map from its records ---- */

/* in-place heapsort of refs: no malloc (rebuild may run in the fault
 * path, and qsort allocates for large arrays) */
static bool ref_less(const struct vr_map *m, vr_ref a, vr_ref b, bool by_age)
{
	const struct vr_range *x = REC(a), *y = REC(b);
	return by_age ? vr_range_age(x) < vr_range_age(y) : x->start < y->start;
}

static void ref_sift(const struct vr_map *m, vr_ref *v, uint64_t n, uint64_t i, bool by_age)
{
	vr_ref e = v[i];
	for (;;) {
		uint64_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && ref_less(m, v[c], v[c + 1], by_age))
			c++;
		if (!ref_less(m, e, v[c], by_age))
			break;
		v[i] = v[c];
		i = c;
	}
	v[i] = e;
}

static void ref_sort(const struct vr_map *m, vr_ref *v, uint64_t n, bool by_age)
{
	for (uint64_t i = n / 2; i-- > 0;)
		ref_sift(m, v, n, i, by_age);
	while (n > 1) {
		vr_ref t = v[0];
		v[0] = v[--n];
		v[n] = t;
		ref_sift(m, v, n, 0, by_age);
	}
}

/* rebuild, step 1: the records in the tree or PENDING, into v sorted by
 * start; the others are marked free.  Returns how many. */
static uint64_t rebuild_collect(struct vr_map *m, vr_ref *v)
{
	struct vr_range *recs = REC(m->rec_lo);
	uint64_t n = 0;
	for (uint64_t i = 0; i < m->rec_n; i++) {
		struct vr_range *r = &recs[i];
		if ((r->age_flags & (VR_RANGE_INTREE | VR_RANGE_PENDING)) && r->start < r->end &&
		    n < m->log_cap)
			v[n++] = REF(r);
		else
			r->age_flags &= ~(VR_RANGE_INTREE | VR_RANGE_PENDING);
	}
	ref_sort(m, v, n, false);
	return n;
}

/* step 2: join overlaps: the union, purged if any part was, the oldest
 * age; the records joined into another are freed.  Returns how many are
 * left in v (it may pass cap by the few spare records: the storage holds
 * them). */
static uint64_t rebuild_join(struct vr_map *m, vr_ref *v, uint64_t n)
{
	uint64_t k = 0;
	for (uint64_t i = 0; i < n; i++) {
		struct vr_range *r = REC(v[i]), *c = k ? REC(v[k - 1]) : NULL;
		r->age_flags &= ~(uint64_t)VR_RANGE_ONLRU;
		if (c && r->start < c->end) {
			uint64_t age = vr_range_age(c) < vr_range_age(r) ? vr_range_age(c)
									 : vr_range_age(r);
			if (r->end > c->end)
				c->end = r->end;
			c->age_flags |= r->age_flags & VR_RANGE_PURGED;
			vr_range_set_age(c, age);
			r->age_flags = 0;
			continue;
		}
		v[k++] = v[i];
	}
	return k;
}

/* step 3: an empty tree and LRU, the free lists from scratch */
static void rebuild_reset(struct vr_map *m)
{
	m->root = m->hint = m->ins_leaf = m->tail = 0;
	m->height = 0;
	m->free_leaves = m->free_inner = 0;
	m->nfree_leaves = m->nfree_inner = 0;
	m->node_next = m->node_lo;
	m->nranges = 0;
	m->log_head = m->log_hw = m->log_hc = m->log_tail = m->log_cur = 0;
	m->log_pass = false;
	m->nlog = 0;
	m->nheap = m->nskip = 0;
	m->nheap_live = 0;
	m->cursor_gen = 0;
	m->peek_src = 0;
}

/* step 4: the k ranges of v into the tree; 0 or -1 */
static int rebuild_tree(struct vr_map *m, const vr_ref *v, uint64_t k)
{
	for (uint64_t i = 0; i < k; i++) {
		struct vr_range *r = REC(v[i]);
		r->age_flags = (r->age_flags & ~(uint64_t)(VR_RANGE_PENDING | VR_RANGE_ONLRU)) |
			       VR_RANGE_INTREE;
		r->lru_pos = VR_LRU_NONE;
	}
	fixed_free_all(m);
	for (uint64_t i = 0; i < k; i++) {
		while (m->nfree_leaves < 1)
			if (node_new(m, true) < 0)
				return -1;
		while (m->nfree_inner < m->height + 1)
			if (node_new(m, false) < 0)
				return -1;
		vr_map_insert(m, REC(v[i]));
	}
	return 0;
}

/* step 5: the LRU, every unpurged range holding a whole page, by age
 * (v is scratch from here on) */
static void rebuild_lru(struct vr_map *m, vr_ref *v, uint64_t k)
{
	uint64_t l = 0;
	for (uint64_t i = 0; i < k; i++) {
		struct vr_range *r = REC(v[i]);
		if (!vr_range_purged(r) &&
		    vr_whole_pages(r->start, r->end, (unsigned)m->page_shift, NULL, NULL))
			v[l++] = v[i];
	}
	ref_sort(m, v, l, true);
	for (uint64_t i = 0; i < l; i++) {
		struct vr_range *r = REC(v[i]);
		r->lru_pos = (uint32_t)i;
		r->age_flags |= VR_RANGE_ONLRU;
	}
	m->log_tail = (uint32_t)l;
	m->nlog = l;
}

int vr_map_rebuild(struct vr_map *m)
{
	if (!m->cap)
		return -1;
	vr_ref *v = vr_deref(m, m->log); /* scratch: the log is rebuilt last */
	uint64_t k = rebuild_join(m, v, rebuild_collect(m, v));
	rebuild_reset(m);
	if (rebuild_tree(m, v, k) < 0)
		return -1;
	rebuild_lru(m, v, k);
	return vr_map_check(m);
}

/* ---- the lock-free read (rules in map/map.h) ---- */

/* a ref read without the lock, or NULL if it cannot be one (a fixed map
 * rebuilt under the reader; private maps: limit is UINT64_MAX) */
static inline const void *racy_deref(const struct vr_map *m, vr_ref x, size_t size)
{
	if (x > m->limit - size)
		return NULL;
	return vr_deref(m, x);
}

int vr_map_lookup_racy(const struct vr_map *m, uint64_t off, struct vr_range *out)
{
	vr_ref x = __atomic_load_n(&m->root, __ATOMIC_ACQUIRE);
	if (!x)
		return 0;
	const struct vr_bnode *n = racy_deref(m, x, sizeof(*n));
	for (unsigned depth = 0;; depth++) {
		if (!n)
			return -1;
		if (depth == VR_BT_MAXH)
			return -1;
		unsigned cnt = LD(n->n);
		if (cnt > VR_BT_KEYS)
			return -1;
		bool leaf = LD(n->leaf);
		/* the last entry whose key is <= off (inner: at least child 0) */
		unsigned i = leaf ? 0 : 1;
		while (i < cnt && LD(n->key[i]) <= off)
			i++;
		if (leaf) {
			if (i == 0) {
				/* off is below this leaf's keys: the last range of
				 * the leaf before may still reach it */
				x = LD(n->prev);
				if (!x)
					return 0;
				n = racy_deref(m, x, sizeof(*n));
				if (!n)
					return -1;
				i = LD(n->n);
				if (i == 0 || i > VR_BT_KEYS)
					return -1;
			}
			const struct vr_range *r = racy_deref(m, LD(n->ptr[i - 1]), sizeof(*r));
			if (!r)
				return -1;
			uint64_t s = LD(r->start), e = LD(r->end);
			if (off < s || off >= e)
				return 0;
			out->start = s;
			out->end = e;
			out->age_flags = LD(r->age_flags);
			return 1;
		}
		if (cnt == 0)
			return -1;
		n = racy_deref(m, LD(n->ptr[i - 1]), sizeof(*n));
	}
}

/* ---- vr_map_check ---- */

/* a private map's node lies in one of its arenas, an inner node in the
 * part carved from the top (INNER NODES), a leaf in the part from the
 * bottom */
static bool node_placed(const struct vr_map *m, const struct vr_bnode *n)
{
	if (m->cap)
		return true; /* fixed storage: no arenas */
	for (const struct vr_arena *a = m->arenas; a; a = a->next) {
		const char *b = (const char *)a, *p = (const char *)n;
		if (p >= b && p < b + a->size)
			return n->leaf ? p >= b + ARENA_HDR && p + sizeof(*n) <= b + a->used
				       : p >= b + a->top && p + sizeof(*n) <= b + a->size;
	}
	return false;
}

static int check_node(const struct vr_map *m, const struct vr_bnode *n, unsigned level, uint64_t lo,
		      uint64_t hi, const struct vr_bnode **leaf_prev, size_t *count)
{
	if (n->n == 0 || n->n > m->fanout || !node_placed(m, n))
		return -1;
	if (n->leaf != (level + 1 == m->height))
		return -1;
	if (n->leaf) {
		if (NODE(n->prev) != *leaf_prev || (*leaf_prev && NODE((*leaf_prev)->next) != n))
			return -1;
		*leaf_prev = n;
		for (unsigned i = 0; i < n->n; i++) {
			const struct vr_range *r = rec(m, n, i);
			if (!r || n->key[i] != r->start || r->start >= r->end)
				return -1;
			if (r->start < lo || r->start >= hi || !(r->age_flags & VR_RANGE_INTREE))
				return -1;
			if (i > 0 && rec(m, n, i - 1)->end > r->start)
				return -1; /* overlap */
		}
		*count += n->n;
		return 0;
	}
	if (n->n < 2 && REF(n) != m->root)
		return -1;
	for (unsigned i = 0; i < n->n; i++) {
		uint64_t clo = i ? n->key[i] : lo, chi = i + 1 < n->n ? n->key[i + 1] : hi;
		if (i && (n->key[i] < lo || n->key[i] >= hi))
			return -1;
		if (chi <= clo || !n->ptr[i])
			return -1;
		if (check_node(m, NODE(n->ptr[i]), level + 1, clo, chi, leaf_prev, count) < 0)
			return -1;
	}
	return 0;
}

int vr_map_check(const struct vr_map *m)
{
	size_t count = 0;
	const struct vr_bnode *last = NULL;
	if (!m->root) {
		if (m->height != 0 || m->nranges != 0)
			return -1;
	} else {
		if (m->height == 0 || m->height > VR_BT_MAXH)
			return -1;
		if (check_node(m, NODE(m->root), 0, 0, UINT64_MAX, &last, &count) < 0)
			return -1;
		if (last->next || count != m->nranges)
			return -1;
		/* ranges are disjoint across leaves too */
		for (const struct vr_bnode *l = last; l->prev; l = NODE(l->prev))
			if (rec(m, NODE(l->prev), NODE(l->prev)->n - 1)->end > rec(m, l, 0)->start)
				return -1;
	}
	return vr_lru_check(m);
}
