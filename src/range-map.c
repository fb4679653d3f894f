/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * range-map.c - treap of disjoint volatile ranges + per-region LRU list
 *
 * All functions are called with the owning region's lock held (or on a
 * private map in tests).  Nothing here makes a system call.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "inject.h"
#include "range-map.h"

/* a treap priority derived from the node address (splitmix64 finaliser) */
static inline uint64_t prio(const struct vr_range *r)
{
	uint64_t x = (uint64_t)(uintptr_t)r;
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

struct vr_slab {
	struct vr_slab *next;
	size_t n;
	struct vr_range nodes[];
};

#define SLAB_MIN 16
#define SLAB_MAX 4096

void vr_map_init(struct vr_map *m, unsigned page_shift)
{
	*m = (struct vr_map){ .page_shift = page_shift };
}

void vr_map_fini(struct vr_map *m)
{
	struct vr_slab *s = m->slabs;
	while (s) {
		struct vr_slab *n = s->next;
		free(s);
		s = n;
	}
	*m = (struct vr_map){ .page_shift = m->page_shift };
}

struct vr_range *vr_map_alloc(struct vr_map *m)
{
	struct vr_range *r = m->free_nodes;
	if (!r) {
		size_t n = m->slabs ? m->slabs->n * 2 : SLAB_MIN;
		if (n > SLAB_MAX)
			n = SLAB_MAX;
		struct vr_slab *s = vr_malloc(sizeof(*s) + n * sizeof(struct vr_range));
		if (!s)
			return NULL;
		s->n = n;
		s->next = m->slabs;
		m->slabs = s;
		for (size_t i = 0; i < n; i++) {
			s->nodes[i].left = m->free_nodes;
			m->free_nodes = &s->nodes[i];
		}
		r = m->free_nodes;
	}
	m->free_nodes = r->left;
	*r = (struct vr_range){ 0 };
	return r;
}

void vr_map_free(struct vr_map *m, struct vr_range *r)
{
	r->left = m->free_nodes;
	m->free_nodes = r;
}

struct vr_range *vr_map_first_end_after(const struct vr_map *m, uint64_t off)
{
	struct vr_range *n = m->root, *best = NULL;
	while (n) {
		if (n->end > off) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return best;
}

struct vr_range *vr_map_last_start_before(const struct vr_map *m, uint64_t off)
{
	struct vr_range *n = m->root, *best = NULL;
	while (n) {
		if (n->start < off) {
			best = n;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	return best;
}

struct vr_range *vr_map_next(const struct vr_map *m, const struct vr_range *r)
{
	/* ranges are disjoint and non-empty: the successor is the first one
	 * ending after r->end */
	return vr_map_first_end_after(m, r->end);
}

struct vr_range *vr_map_prev(const struct vr_map *m, const struct vr_range *r)
{
	return vr_map_last_start_before(m, r->start);
}

void vr_map_neighbours(const struct vr_map *m, uint64_t off, struct vr_range **pred,
		       struct vr_range **succ)
{
	struct vr_range *n = m->root;
	*pred = *succ = NULL;
	while (n) {
		if (n->start < off) {
			*pred = n;
			n = n->right;
		} else {
			*succ = n;
			n = n->left;
		}
	}
}

struct vr_range **vr_map_find_link(struct vr_map *m, uint64_t off)
{
	struct vr_range **link = &m->root;
	while (*link) {
		struct vr_range *n = *link;
		if (off < n->start)
			link = &n->left;
		else if (off >= n->end)
			link = &n->right;
		else
			return link;
	}
	return NULL;
}

/* split t into keys < key (*l) and keys >= key (*r) */
static void split(struct vr_range *t, uint64_t key, struct vr_range **l, struct vr_range **r)
{
	while (t) {
		if (t->start < key) {
			*l = t;
			l = &t->right;
			t = t->right;
		} else {
			*r = t;
			r = &t->left;
			t = t->left;
		}
	}
	*l = NULL;
	*r = NULL;
}

/* join two treaps where every key of a is below every key of b */
static struct vr_range *merge(struct vr_range *a, struct vr_range *b)
{
	struct vr_range *res = NULL, **link = &res;
	while (a && b) {
		if (prio(a) > prio(b)) {
			*link = a;
			link = &a->right;
			a = a->right;
		} else {
			*link = b;
			link = &b->left;
			b = b->left;
		}
	}
	*link = a ? a : b;
	return res;
}

void vr_map_insert(struct vr_map *m, struct vr_range *r)
{
	struct vr_range **link = &m->root;
	uint64_t p = prio(r);
	while (*link && prio(*link) > p)
		link = r->start < (*link)->start ? &(*link)->left : &(*link)->right;
	split(*link, r->start, &r->left, &r->right);
	*link = r;
	m->nranges++;
}

void vr_map_erase_at(struct vr_map *m, struct vr_range **link)
{
	struct vr_range *r = *link;
	*link = merge(r->left, r->right);
	r->left = r->right = NULL;
	m->nranges--;
}

void vr_map_erase(struct vr_map *m, struct vr_range *r)
{
	struct vr_range **link = &m->root;
	while (*link != r)
		link = r->start < (*link)->start ? &(*link)->left : &(*link)->right;
	vr_map_erase_at(m, link);
}

void vr_lru_append(struct vr_map *m, struct vr_range *r)
{
	r->next = NULL;
	r->prev = m->lru_tail;
	if (m->lru_tail)
		m->lru_tail->next = r;
	else
		m->lru_head = r;
	m->lru_tail = r;
	r->age_flags |= VR_RANGE_ONLRU;
}

void vr_lru_insert_after(struct vr_map *m, struct vr_range *pos, struct vr_range *r)
{
	r->prev = pos;
	r->next = pos->next;
	if (pos->next)
		pos->next->prev = r;
	else
		m->lru_tail = r;
	pos->next = r;
	r->age_flags |= VR_RANGE_ONLRU;
}

void vr_lru_remove(struct vr_map *m, struct vr_range *r)
{
	if (m->cursor == r)
		m->cursor = r->next;
	if (r->prev)
		r->prev->next = r->next;
	else
		m->lru_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		m->lru_tail = r->prev;
	r->prev = r->next = NULL;
	r->age_flags &= ~(uint64_t)VR_RANGE_ONLRU;
}

static int check_tree(const struct vr_range *n, uint64_t lo, uint64_t hi, uint64_t maxprio,
		      size_t *count, size_t *onlru, unsigned shift)
{
	if (!n)
		return 0;
	if (n->start >= n->end || n->start < lo || n->end > hi || prio(n) > maxprio)
		return -1;
	bool whole = vr_whole_pages(n->start, n->end, shift, NULL, NULL);
	if (vr_range_on_lru(n) && (vr_range_purged(n) || !whole))
		return -1;
	if (!vr_range_on_lru(n) && !vr_range_purged(n) && whole)
		return -1;
	(*count)++;
	*onlru += vr_range_on_lru(n);
	if (check_tree(n->left, lo, n->start, prio(n), count, onlru, shift) < 0)
		return -1;
	return check_tree(n->right, n->end, hi, prio(n), count, onlru, shift);
}

int vr_map_check(const struct vr_map *m)
{
	size_t count = 0, onlru = 0, n = 0;
	if (check_tree(m->root, 0, UINT64_MAX, UINT64_MAX, &count, &onlru, m->page_shift) < 0)
		return -1;
	if (count != m->nranges)
		return -1;
	const struct vr_range *prev = NULL;
	for (const struct vr_range *r = m->lru_head; r; r = r->next) {
		if (!vr_range_on_lru(r) || r->prev != prev)
			return -1;
		if (prev && vr_range_age(prev) > vr_range_age(r))
			return -1;
		prev = r;
		n++;
	}
	return (prev == m->lru_tail && n == onlru) ? 0 : -1;
}
