/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * range-map.c - B+-tree of disjoint volatile ranges (the LRU log and heap
 * are in range-lru.c)
 *
 * All functions are called with the owning region's lock held (or on a
 * private map in tests), except vr_map_lookup_racy() (rules in
 * range-map.h).  Nothing here makes a system call.
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

#include "inject.h"
#include "range-map.h"

#define LD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)

/* every pointer slot of a node is written with one aligned store: a
 * racing reader never sees a torn pointer (see range-map.h) */
static inline void ptr_store(void **slot, void *v)
{
	__atomic_store_n(slot, v, __ATOMIC_RELAXED);
}

static inline struct vr_range *rec(const struct vr_bnode *n, unsigned i)
{
	return n->ptr[i];
}

static inline unsigned min_fill(const struct vr_map *m)
{
	return m->fanout / 2;
}

/* ---- memory: records and nodes are carved from arenas ---- */

/* An arena is one malloc'd block, carved by a bump pointer and freed only
 * by vr_map_fini (racing readers may walk anything ever carved).  A new
 * arena holds a 32nd of what the map has, so at most about that much is
 * unused (a piece of records too large for an arena's tail is cut to fit).  At 10^6 ranges and more the records and nodes span hundreds
 * of MB: with 4 KiB pages every cold access adds a TLB miss whose page
 * walk misses the cache too, so a large arena asks for transparent huge
 * pages on its 2 MiB-aligned interior (a hint, once per arena; the block
 * is malloc'd, so heap accounting sees it all). */
struct vr_arena {
	struct vr_arena *next;
	size_t size, used;
};

#define ARENA_HDR 64
#define ARENA_MIN ((size_t)4 << 10)
#define ARENA_MAX ((size_t)32 << 20)
#define ARENA_HUGE ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)
/* records per carve: a 128th of the records, 16 .. 8192 (256 KiB) */
#define SLAB_MIN 16
#define SLAB_MAX 8192

static void *carve(struct vr_map *m, size_t size)
{
	struct vr_arena *a = m->arenas;
	size = (size + 63) & ~(size_t)63;
	if (!a || a->size - a->used < size) {
		size_t want = m->arena_bytes / 32;
		want = want < ARENA_MIN ? ARENA_MIN : want > ARENA_MAX ? ARENA_MAX : want;
		if (want < size + ARENA_HDR)
			want = size + ARENA_HDR;
		void *p = NULL;
		VR_FI_FAIL(VR_FI_MALLOC, NULL);
		if (posix_memalign(&p, 64, want) != 0)
			return NULL;
		a = p;
		a->size = want;
		a->used = ARENA_HDR;
		a->next = m->arenas;
		m->arenas = a;
		m->arena_bytes += want;
		if (want >= ARENA_HUGE) {
			uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
			uintptr_t hi = ((uintptr_t)p + want) & ~(HUGE_PAGE - 1);
			if (lo < hi)
				madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
		}
	}
	void *p = (char *)a + a->used;
	a->used += size;
	return p;
}

void vr_map_init(struct vr_map *m, unsigned page_shift)
{
	*m = (struct vr_map){ .page_shift = page_shift, .fanout = VR_BT_KEYS };
}

void vr_map_fini(struct vr_map *m)
{
	struct vr_arena *a = m->arenas;
	while (a) {
		struct vr_arena *n = a->next;
		free(a);
		a = n;
	}
	vr_lru_fini(m);
	*m = (struct vr_map){ .page_shift = m->page_shift, .fanout = m->fanout };
}

/* free records are linked through their start field */
static inline struct vr_range *free_link(const struct vr_range *r)
{
	return (struct vr_range *)(uintptr_t)r->start;
}

/* a node's kind is fixed when it is carved */
static int node_new(struct vr_map *m, bool leaf)
{
	struct vr_bnode *n = carve(m, sizeof(*n));
	if (!n)
		return -1;
	memset(n, 0, sizeof(*n));
	n->leaf = leaf;
	if (leaf) {
		n->next = m->free_leaves;
		m->free_leaves = n;
		m->nfree_leaves++;
	} else {
		n->next = m->free_inner;
		m->free_inner = n;
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
	struct vr_range *r = m->free_nodes;
	if (!r) {
		size_t n = m->nrecords / 128;
		n = n < SLAB_MIN ? SLAB_MIN : n > SLAB_MAX ? SLAB_MAX : n;
		/* fill the current arena's tail rather than leave it unused */
		size_t room = m->arenas ? (m->arenas->size - m->arenas->used) / sizeof(*r) : 0;
		if (room >= SLAB_MIN && room < n)
			n = room & ~(size_t)1; /* carves are 64-byte multiples */
		struct vr_range *v = carve(m, n * sizeof(*v));
		if (!v)
			return NULL;
		m->nrecords += n;
		for (size_t i = 0; i < n; i++) {
			v[i] = (struct vr_range){ .start = (uintptr_t)m->free_nodes,
						  .lru_pos = VR_LRU_NONE };
			m->free_nodes = &v[i];
		}
		r = m->free_nodes;
	}
	m->free_nodes = free_link(r);
	*r = (struct vr_range){ 0 };
	return r;
}

void vr_map_free(struct vr_map *m, struct vr_range *r)
{
	/* a stale LRU entry must never see this record as its own again */
	r->age_flags &= ~(uint64_t)VR_RANGE_ONLRU;
	r->lru_pos = VR_LRU_NONE;
	r->start = (uintptr_t)m->free_nodes;
	m->free_nodes = r;
}

/* ---- nodes: taken from the reserve, given back to it (never freed
 * before vr_map_fini: racing readers may still walk them) ---- */

static struct vr_bnode *node_get(struct vr_map *m, bool leaf)
{
	struct vr_bnode **list = leaf ? &m->free_leaves : &m->free_inner;
	if (!*list && node_new(m, leaf) < 0)
		abort(); /* the ALLOCATION RULE was broken: vr_map_alloc first */
	struct vr_bnode *n = *list;
	*list = n->next;
	if (leaf)
		m->nfree_leaves--;
	else
		m->nfree_inner--;
	n->n = 0;
	n->next = n->prev = NULL;
	return n;
}

static void node_put(struct vr_map *m, struct vr_bnode *n)
{
	n->n = 0;
	n->prev = NULL;
	if (n->leaf) {
		n->next = m->free_leaves;
		m->free_leaves = n;
		m->nfree_leaves++;
	} else {
		n->next = m->free_inner;
		m->free_inner = n;
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
	struct vr_bnode *n = m->root;
	for (unsigned l = 0; l + 1 < m->height; l++) {
		unsigned i = upper(n->key, 1, n->n, k) - 1;
		if (p) {
			p->n[l] = n;
			p->i[l] = i;
		}
		n = n->ptr[i];
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
static struct pos pos_before(struct vr_bnode *leaf, unsigned i)
{
	if (i > 0)
		return (struct pos){ leaf, i - 1 };
	leaf = leaf->prev;
	return leaf ? (struct pos){ leaf, leaf->n - 1 } : (struct pos){ NULL, 0 };
}

/* the entry at (leaf, i) (i may be leaf->n), or {NULL} */
static struct pos pos_at(struct vr_bnode *leaf, unsigned i)
{
	if (i < leaf->n)
		return (struct pos){ leaf, i };
	leaf = leaf->next;
	return leaf ? (struct pos){ leaf, 0 } : (struct pos){ NULL, 0 };
}

static inline struct vr_range *pos_rec(struct pos p)
{
	return p.leaf ? rec(p.leaf, p.i) : NULL;
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
		*pred = pos_before(leaf, i);
	if (succ)
		*succ = pos_at(leaf, i);
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
	struct vr_range *r = pos_rec(p);
	if (r && r->end > off)
		return r;
	return pos_rec(s);
}

struct vr_range *vr_map_last_start_before(const struct vr_map *m, uint64_t off)
{
	struct pos p;
	around(m, off, &p, NULL);
	return pos_rec(p);
}

struct vr_range *vr_map_next(const struct vr_map *m, const struct vr_range *r)
{
	struct pos p = pos_of(m, r);
	return p.leaf ? pos_rec(pos_at(p.leaf, p.i + 1)) : NULL;
}

struct vr_range *vr_map_prev(const struct vr_map *m, const struct vr_range *r)
{
	struct pos p = pos_of(m, r);
	return p.leaf ? pos_rec(pos_before(p.leaf, p.i)) : NULL;
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
	struct vr_bnode *t = m->tail;
	if (m->ins_leaf && m->ins_key == off) {
		/* the spot a range starting at off was just erased from, or
		 * the one the last call found (nothing changed since) */
		leaf = m->ins_leaf;
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
			m->tail = leaf;
	}
	*pred = pos_rec(pos_before(leaf, i));
	*succ = pos_rec(pos_at(leaf, i));
	/* where a range starting at off goes: vr_map_insert() takes it from
	 * here if the map does not change in between (mark after unmark) */
	m->ins_leaf = leaf;
	m->ins_i = i;
	m->ins_key = off;
}

struct vr_range **vr_map_find_link(struct vr_map *m, uint64_t off)
{
	struct pos p, s;
	if (off == UINT64_MAX)
		return NULL;
	around(m, off + 1, &p, &s);
	struct vr_range *r = pos_rec(p);
	/* the caller is about to read r and, if it erases r and marks the
	 * same bytes again (the intact pair), r's neighbours: fetch all three
	 * records at once */
	if (p.leaf) {
		struct pos q = pos_before(p.leaf, p.i);
		if (q.leaf)
			__builtin_prefetch(pos_rec(q));
		if (s.leaf)
			__builtin_prefetch(pos_rec(s));
	}
	if (!r || r->end <= off)
		return NULL;
	m->hint = p.leaf;
	return (struct vr_range **)&p.leaf->ptr[p.i];
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

static void put_entry(struct vr_bnode *n, unsigned i, uint64_t key, void *p)
{
	n->key[i] = key;
	ptr_store(&n->ptr[i], p);
}

/* insert (key, p) at position i of n, which has room */
static void node_insert(struct vr_bnode *n, unsigned i, uint64_t key, void *p)
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
				   void *p, bool uneven)
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
		r->prev = n;
		if (n->next)
			n->next->prev = r;
		n->next = r;
	}
	return r;
}

void vr_map_insert(struct vr_map *m, struct vr_range *r)
{
	struct vr_bnode *h = m->ins_leaf;
	m->hint = NULL;
	m->ins_leaf = NULL;
	m->nranges++;
	if (h && m->ins_key == r->start && h->n < m->fanout) {
		node_insert(h, m->ins_i, r->start, r);
		return;
	}
	if (!m->root) {
		struct vr_bnode *leaf = node_get(m, true);
		put_entry(leaf, 0, r->start, r);
		leaf->n = 1;
		m->root = leaf;
		m->height = 1;
		return;
	}
	struct path p;
	struct vr_bnode *leaf = descend(m, r->start, &p);
	unsigned i = upper(leaf->key, 0, leaf->n, r->start);
	if (leaf->n < m->fanout) {
		node_insert(leaf, i, r->start, r);
		return;
	}
	/* appending to the rightmost leaf: keep it full (sequential builds) */
	bool edge = !leaf->next;
	struct vr_bnode *nn = node_split(m, leaf, i, r->start, r, edge && i == leaf->n);
	uint64_t sep = nn->key[0];
	for (unsigned l = m->height - 1; l-- > 0;) {
		struct vr_bnode *in = p.n[l];
		unsigned j = p.i[l] + 1;
		if (in->n < m->fanout) {
			node_insert(in, j, sep, nn);
			return;
		}
		nn = node_split(m, in, j, sep, nn, edge && j == in->n);
		sep = nn->key[0];
	}
	/* the root split: a new root */
	struct vr_bnode *root = node_get(m, false);
	put_entry(root, 0, m->root->key[0], m->root);
	put_entry(root, 1, sep, nn);
	root->n = 2;
	__atomic_store_n(&m->root, root, __ATOMIC_RELEASE);
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
			a = par->ptr[xi - 1];
			b = x;
			s = xi;
		} else {
			a = x;
			b = par->ptr[xi + 1];
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
					b->next->prev = a;
			}
			shift_left(par, s + 1, 1);
			par->n--;
			node_put(m, b);
			if (l - 1 == 0) {
				if (par->n == 1) { /* the root has one child: drop a level */
					__atomic_store_n(&m->root, (struct vr_bnode *)par->ptr[0],
							 __ATOMIC_RELEASE);
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
	m->hint = NULL;
	m->ins_leaf = NULL;
	if (m->height == 1) {
		if (leaf->n == 0) {
			__atomic_store_n(&m->root, NULL, __ATOMIC_RELEASE);
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
	if (i >= leaf->n || rec(leaf, i) != r)
		abort(); /* not in the map: a caller bug that must not go on */
	leaf_remove(m, &p, i);
}

void vr_map_erase_at(struct vr_map *m, struct vr_range **link)
{
	struct vr_bnode *h = m->hint;
	void **slot = (void **)link;
	if (h && slot >= &h->ptr[0] && slot < &h->ptr[h->n] &&
	    (h->n > min_fill(m) || h == m->root)) {
		/* no rebalancing needed: no second descent */
		unsigned i = (unsigned)(slot - &h->ptr[0]);
		uint64_t key = h->key[i];
		shift_left(h, i + 1, 1);
		h->n--;
		m->nranges--;
		m->hint = NULL;
		m->ins_leaf = NULL;
		if (h->n == 0) { /* the root leaf emptied */
			__atomic_store_n(&m->root, NULL, __ATOMIC_RELEASE);
			m->height = 0;
			node_put(m, h);
			return;
		}
		/* the intact pair marks the same bytes next: where they go */
		m->ins_leaf = h;
		m->ins_i = i;
		m->ins_key = key;
		return;
	}
	vr_map_erase(m, *link);
}

void vr_map_set_start(struct vr_map *m, struct vr_range *r, uint64_t start)
{
	struct path p;
	struct vr_bnode *leaf = descend(m, r->start, &p);
	unsigned i = lower(leaf->key, 0, leaf->n, r->start);
	if (i >= leaf->n || rec(leaf, i) != r || start < r->start || start >= r->end)
		abort();
	/* the next key (in this leaf or to the right) is >= r->end > start,
	 * so the leaf order holds; the separator right of r's subtree, at the
	 * lowest level that has one, may have to drop to start + 1 (still <=
	 * every key to its right, which are >= r->end) */
	leaf->key[i] = start;
	r->start = start;
	m->ins_leaf = NULL; /* a key moved: the insert hint may be wrong */
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

/* ---- the lock-free read (rules in range-map.h) ---- */

int vr_map_lookup_racy(const struct vr_map *m, uint64_t off, struct vr_range *out)
{
	const struct vr_bnode *n = __atomic_load_n(&m->root, __ATOMIC_ACQUIRE);
	for (unsigned depth = 0;; depth++) {
		if (!n)
			return 0;
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
				n = LD(n->prev);
				if (!n)
					return 0;
				i = LD(n->n);
				if (i == 0 || i > VR_BT_KEYS)
					return -1;
			}
			const struct vr_range *r = LD(n->ptr[i - 1]);
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
		n = LD(n->ptr[i - 1]);
	}
}

/* ---- vr_map_check ---- */

static int check_node(const struct vr_map *m, const struct vr_bnode *n, unsigned level, uint64_t lo,
		      uint64_t hi, const struct vr_bnode **leaf_prev, size_t *count)
{
	if (n->n == 0 || n->n > m->fanout)
		return -1;
	if (n->leaf != (level + 1 == m->height))
		return -1;
	if (n->leaf) {
		if (n->prev != *leaf_prev || (*leaf_prev && (*leaf_prev)->next != n))
			return -1;
		*leaf_prev = n;
		for (unsigned i = 0; i < n->n; i++) {
			const struct vr_range *r = rec(n, i);
			if (!r || n->key[i] != r->start || r->start >= r->end)
				return -1;
			if (r->start < lo || r->start >= hi)
				return -1;
			if (i > 0 && rec(n, i - 1)->end > r->start)
				return -1; /* overlap */
		}
		*count += n->n;
		return 0;
	}
	if (n->n < 2 && n != m->root)
		return -1;
	for (unsigned i = 0; i < n->n; i++) {
		uint64_t clo = i ? n->key[i] : lo, chi = i + 1 < n->n ? n->key[i + 1] : hi;
		if (i && (n->key[i] < lo || n->key[i] >= hi))
			return -1;
		if (chi <= clo || !n->ptr[i])
			return -1;
		if (check_node(m, n->ptr[i], level + 1, clo, chi, leaf_prev, count) < 0)
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
		if (check_node(m, m->root, 0, 0, UINT64_MAX, &last, &count) < 0)
			return -1;
		if (last->next || count != m->nranges)
			return -1;
		/* ranges are disjoint across leaves too */
		for (const struct vr_bnode *l = last; l->prev; l = l->prev)
			if (rec(l->prev, l->prev->n - 1)->end > rec(l, 0)->start)
				return -1;
	}
	return vr_lru_check(m);
}
