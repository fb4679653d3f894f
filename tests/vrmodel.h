/*
 * vrmodel.h - an executable model of the libvrange contract (api.md S3-S12,
 * and the objects of S19-S22)
 *
 * Deliberately simple: ranges in a small unsorted array, a per-page
 * "discarded" flag and a per-byte expected content.  Used by the libFuzzer
 * target tests/fuzz/fuzz-api.c (and usable by any differential test) to
 * predict every return value and statistic of the library.
 *
 * Choices the contract leaves open are pinned to what libvrange does:
 * among pieces of one range that share an age, purges take the lowest
 * address first.
 *
 * Objects: the model is told where the library put each object (its
 * pages, from vr_obj_ptr), since placement is the allocator's choice; the
 * rest follows from the contract: a large object (a page or more) is one
 * LRU unit aged by its last unpin; a page of small objects is a unit when
 * every live object on it is unpinned and one is unpurged, aged by its
 * youngest unpinned object (S21, S22); ranges and units purge in one
 * order.  Callers keep small objects within one page each (no
 * straddling), so that no two units share an age.
 *
 * Groups (S35, S37): object k belongs to group obj[k].grp (0 is the
 * default group, priority 4; ranges have priority 4 too).  Ctx-wide purges
 * take the lowest priority that has a unit, oldest first; a group's purge
 * and limit take only its objects.  The limits at an unpin: the ctx's
 * first, then the group's (what vr_obj_unpin does).  Every object purged
 * counts one notification of its group; an object marked free_on_purge is
 * freed by the purge (what a purge handler that frees does).
 */
#ifndef VT_VRMODEL_H
#define VT_VRMODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VM_MAX_REGIONS 4
#define VM_MAX_RANGES 4096
#define VM_MAX_OBJS 128
#define VM_MAX_GROUPS 4

struct vm_obj {
	bool live, pinned, purged, large, free_on_purge;
	int grp;
	size_t size;
	uintptr_t pg0, pg1; /* first and last page (address / P) */
	uint64_t age;       /* of the last unpin */
};

struct vm_range {
	size_t start, end;
	uint64_t age;
	bool purged;
	int region;
};

struct vm_region {
	bool live;
	size_t size, pages, P;
	uint8_t *expect; /* expected content of every byte */
	bool *discarded; /* per page: whole page of a purged range, punched */
};

struct vm {
	size_t P;
	struct vm_region reg[VM_MAX_REGIONS];
	struct vm_range rg[VM_MAX_RANGES];
	size_t nrg;
	uint64_t clock;
	size_t limit;
	uint64_t reclaimed, purges, events;
	struct vm_obj obj[VM_MAX_OBJS];
	struct vm_group {
		bool live;
		int prio;
		size_t limit;
		uint64_t purges, reclaimed, notified;
	} grp[VM_MAX_GROUPS];
};

static inline void vm_init(struct vm *m, size_t P)
{
	memset(m, 0, sizeof(*m));
	m->P = P;
	m->grp[0] = (struct vm_group){ .live = true, .prio = 4 };
}

static inline void vm_region_new(struct vm *m, int i, size_t size)
{
	struct vm_region *g = &m->reg[i];
	g->live = true;
	g->size = size;
	g->P = m->P;
	g->pages = (size + m->P - 1) / m->P;
	g->expect = calloc(size, 1);
	g->discarded = calloc(g->pages, sizeof(bool));
}

static inline void vm_region_destroy(struct vm *m, int i)
{
	struct vm_region *g = &m->reg[i];
	for (size_t k = 0; k < m->nrg;)
		if (m->rg[k].region == i)
			m->rg[k] = m->rg[--m->nrg];
		else
			k++;
	free(g->expect);
	free(g->discarded);
	memset(g, 0, sizeof(*g));
}

static inline void vm_fini(struct vm *m)
{
	for (int i = 0; i < VM_MAX_REGIONS; i++)
		if (m->reg[i].live)
			vm_region_destroy(m, i);
}

/* whole pages [*p0, *p1) of [s, e) */
static inline bool vm_whole(const struct vm *m, size_t s, size_t e, size_t *p0, size_t *p1)
{
	*p0 = (s + m->P - 1) / m->P;
	*p1 = e / m->P;
	return *p0 < *p1;
}

static inline int vm_find(const struct vm *m, int region, size_t off) /* range holding off */
{
	for (size_t k = 0; k < m->nrg; k++)
		if (m->rg[k].region == region && m->rg[k].start <= off && off < m->rg[k].end)
			return (int)k;
	return -1;
}

static inline uint64_t vm_bytes(const struct vm *m, bool purged)
{
	uint64_t n = 0;
	for (size_t k = 0; k < m->nrg; k++)
		if (m->rg[k].purged == purged)
			n += m->rg[k].end - m->rg[k].start;
	for (size_t k = 0; k < VM_MAX_OBJS; k++) /* S22: unpinned objects */
		if (m->obj[k].live && !m->obj[k].pinned && m->obj[k].purged == purged)
			n += m->obj[k].size;
	return n;
}

/* discard the whole pages of range k that are not discarded yet */
static inline uint64_t vm_discard(struct vm *m, size_t k)
{
	struct vm_range *r = &m->rg[k];
	struct vm_region *g = &m->reg[r->region];
	size_t p0, p1;
	uint64_t n = 0;
	if (!vm_whole(m, r->start, r->end, &p0, &p1))
		return 0;
	for (size_t p = p0; p < p1; p++) {
		if (!g->discarded[p])
			n += m->P;
		g->discarded[p] = true;
		memset(g->expect + p * m->P, 0, m->P);
	}
	return n;
}

static inline bool vm_purgeable(const struct vm *m, size_t k)
{
	size_t p0, p1;
	return !m->rg[k].purged && vm_whole(m, m->rg[k].start, m->rg[k].end, &p0, &p1);
}

/* S8: oldest purgeable range (ties: lowest region, then address) or -1 */
static inline int vm_oldest(const struct vm *m)
{
	int best = -1;
	for (size_t k = 0; k < m->nrg; k++) {
		if (!vm_purgeable(m, k))
			continue;
		const struct vm_range *a = &m->rg[k], *b = best >= 0 ? &m->rg[best] : NULL;
		if (!b || a->age < b->age ||
		    (a->age == b->age &&
		     (a->region < b->region || (a->region == b->region && a->start < b->start))))
			best = (int)k;
	}
	return best;
}

/* S21: is page pg (of small objects) a unit, and how old is it? */
static inline bool vm_page_unit(const struct vm *m, uintptr_t pg, uint64_t *age)
{
	bool any = false;
	*age = 0;
	for (size_t k = 0; k < VM_MAX_OBJS; k++) {
		const struct vm_obj *o = &m->obj[k];
		if (!o->live || o->large || pg < o->pg0 || pg > o->pg1)
			continue;
		if (o->pinned)
			return false;
		any |= !o->purged;
		if (o->age > *age)
			*age = o->age;
	}
	return any;
}

/* the oldest object unit: *large = index of a large object, or -1 and
 * *pg = a page of small objects; false if there is none */
static inline bool vm_oldest_obj_in(const struct vm *m, int grp, int prio, int *large,
				    uintptr_t *pg, uint64_t *age)
{
	bool found = false;
	for (size_t k = 0; k < VM_MAX_OBJS; k++) {
		const struct vm_obj *o = &m->obj[k];
		uint64_t a;
		if (!o->live || o->pinned || o->purged)
			continue;
		if ((grp >= 0 && o->grp != grp) || (prio >= 0 && m->grp[o->grp].prio != prio))
			continue;
		if (o->large) {
			a = o->age;
			if (!found || a < *age) {
				found = true;
				*age = a;
				*large = (int)k;
			}
			continue;
		}
		for (uintptr_t p = o->pg0; p <= o->pg1; p++)
			if (vm_page_unit(m, p, &a) && (!found || a < *age)) {
				found = true;
				*age = a;
				*large = -1;
				*pg = p;
			}
	}
	return found;
}

static inline bool vm_oldest_obj(const struct vm *m, int *large, uintptr_t *pg, uint64_t *age)
{
	return vm_oldest_obj_in(m, -1, -1, large, pg, age);
}

/* object k is purged (S37: one notification; a handler may free it) */
static inline void vm_obj_purged(struct vm *m, struct vm_obj *o)
{
	o->purged = true;
	m->purges++;
	m->grp[o->grp].purges++;
	m->grp[o->grp].notified++;
	if (o->free_on_purge)
		o->live = false;
}

/* purge one object unit; returns the bytes reclaimed */
static inline uint64_t vm_purge_obj(struct vm *m, int large, uintptr_t pg)
{
	uint64_t r = m->P;
	int grp = 0;
	if (large >= 0) {
		struct vm_obj *o = &m->obj[large];
		r = (o->size + m->P - 1) / m->P * m->P;
		grp = o->grp;
		vm_obj_purged(m, o);
	} else {
		for (size_t k = 0; k < VM_MAX_OBJS; k++) {
			struct vm_obj *o = &m->obj[k];
			if (o->live && !o->large && pg >= o->pg0 && pg <= o->pg1 && !o->purged) {
				grp = o->grp;
				vm_obj_purged(m, o);
			}
		}
	}
	m->grp[grp].reclaimed += r;
	return r;
}

/* the bytes of group g's unpinned objects, purged or not (S22 per group) */
static inline uint64_t vm_gbytes(const struct vm *m, int g, bool purged)
{
	uint64_t n = 0;
	for (size_t k = 0; k < VM_MAX_OBJS; k++)
		if (m->obj[k].live && m->obj[k].grp == g && !m->obj[k].pinned &&
		    m->obj[k].purged == purged)
			n += m->obj[k].size;
	return n;
}

/* purge until goal: by_bytes ? reclaimed >= n : volatile <= n; grp < 0:
 * ctx-wide (S35: lowest priority first, S8 order within it), else only
 * that group's objects, oldest first */
static inline uint64_t vm_purge_in(struct vm *m, int grp, bool by_bytes, uint64_t n)
{
	uint64_t got = 0;
	for (;;) {
		uint64_t v = grp >= 0 ? vm_gbytes(m, grp, false) : vm_bytes(m, false);
		if (by_bytes ? got >= n : v <= n)
			break;
		int k = -1, large = -1;
		uintptr_t pg = 0;
		uint64_t oage = 0;
		bool obj = false;
		if (grp >= 0)
			obj = vm_oldest_obj_in(m, grp, -1, &large, &pg, &oage);
		for (int prio = 0; grp < 0 && prio < 8 && k < 0 && !obj; prio++) {
			k = prio == 4 ? vm_oldest(m) : -1;
			obj = vm_oldest_obj_in(m, -1, prio, &large, &pg, &oage);
		}
		if (k < 0 && !obj)
			break;
		uint64_t r;
		if (obj && (k < 0 || oage < m->rg[k].age)) {
			r = vm_purge_obj(m, large, pg);
		} else {
			r = vm_discard(m, (size_t)k);
			m->rg[k].purged = true;
			m->purges++;
		}
		m->reclaimed += r;
		got += r;
	}
	return got;
}

static inline uint64_t vm_purge(struct vm *m, bool by_bytes, uint64_t n)
{
	return vm_purge_in(m, -1, by_bytes, n);
}

/* ---- objects (S19-S22) ---- */
static inline void vm_obj_new_in(struct vm *m, int grp, int k, size_t size, uintptr_t addr)
{
	m->obj[k] = (struct vm_obj){ .live = true,
				     .grp = grp,
				     .pinned = true,
				     .large = size >= m->P,
				     .size = size,
				     .pg0 = addr / m->P,
				     .pg1 = (addr + size - 1) / m->P };
}

static inline void vm_obj_new(struct vm *m, int k, size_t size, uintptr_t addr)
{
	vm_obj_new_in(m, 0, k, size, addr);
}

static inline void vm_obj_free(struct vm *m, int k)
{
	m->obj[k].live = false;
}

static inline int vm_obj_pin(struct vm *m, int k)
{
	struct vm_obj *o = &m->obj[k];
	int was = o->pinned ? 0 : o->purged;
	o->pinned = true;
	o->purged = false;
	return was;
}

static inline int vm_obj_status(const struct vm *m, int k)
{
	const struct vm_obj *o = &m->obj[k];
	return o->pinned ? 0 : 1 | (o->purged ? 2 : 0);
}

static inline uint64_t vm_nobjs(const struct vm *m)
{
	uint64_t n = 0;
	for (size_t k = 0; k < VM_MAX_OBJS; k++)
		n += m->obj[k].live;
	return n;
}

static inline int vm_status(const struct vm *m, int region, size_t a, size_t b)
{
	int st = 0;
	for (size_t k = 0; k < m->nrg; k++) {
		const struct vm_range *r = &m->rg[k];
		if (r->region == region && r->start < b && a < r->end)
			st |= 1 | (r->purged ? 2 : 0);
	}
	return st;
}

static inline void vm_enforce_limit(struct vm *m)
{
	if (m->limit && vm_bytes(m, false) > m->limit)
		vm_purge(m, false, m->limit);
}

static inline int vm_obj_unpin(struct vm *m, int k)
{
	struct vm_obj *o = &m->obj[k];
	if (o->pinned) {
		o->pinned = false;
		o->age = ++m->clock;
		vm_enforce_limit(m); /* S22: the limit at every unpin */
		struct vm_group *g = &m->grp[o->grp];
		if (g->limit && vm_gbytes(m, o->grp, false) > g->limit)
			vm_purge_in(m, o->grp, false, g->limit); /* S35 */
	}
	return 0;
}

/* ---- groups (S35) ---- */
static inline void vm_group_new(struct vm *m, int g, int prio)
{
	m->grp[g] = (struct vm_group){ .live = true, .prio = prio };
}

/* frees the group's objects; the default group stays */
static inline void vm_group_destroy(struct vm *m, int g)
{
	for (size_t k = 0; k < VM_MAX_OBJS; k++)
		if (m->obj[k].live && m->obj[k].grp == g)
			m->obj[k].live = false;
	if (g != 0)
		m->grp[g].live = false;
}

static inline void vm_group_set_limit(struct vm *m, int g, size_t bytes)
{
	m->grp[g].limit = bytes;
	if (bytes && vm_gbytes(m, g, false) > bytes)
		vm_purge_in(m, g, false, bytes);
}

static inline uint64_t vm_gobjs(const struct vm *m, int g)
{
	uint64_t n = 0;
	for (size_t k = 0; k < VM_MAX_OBJS; k++)
		n += m->obj[k].live && m->obj[k].grp == g;
	return n;
}

/* S3, S4, S10 */
static inline int vm_mark(struct vm *m, int region, size_t a, size_t b)
{
	int in = vm_find(m, region, a);
	if (in >= 0 && m->rg[in].end >= b) {
		/* nothing changes (S3), but the limit holds whenever vr_mark
		 * returns (S10): a free may have made something purgeable */
		vm_enforce_limit(m);
		return (vm_status(m, region, a, b) & 2) ? 1 : 0;
	}
	size_t s = a, e = b;
	bool purged = false;
	for (size_t k = 0; k < m->nrg; k++) {
		struct vm_range *r = &m->rg[k];
		if (r->region == region && r->start < b && a < r->end) {
			if (r->start < s)
				s = r->start;
			if (r->end > e)
				e = r->end;
			purged |= r->purged;
		}
	}
	for (bool grew = true; grew;) {
		grew = false;
		for (size_t k = 0; k < m->nrg; k++) {
			struct vm_range *r = &m->rg[k];
			if (r->region != region || r->purged != purged)
				continue;
			if (r->end == s) {
				s = r->start;
				grew = true;
			} else if (r->start == e) {
				e = r->end;
				grew = true;
			}
		}
	}
	for (size_t k = 0; k < m->nrg;) /* every range inside [s, e) is absorbed */
		if (m->rg[k].region == region && m->rg[k].start >= s && m->rg[k].end <= e)
			m->rg[k] = m->rg[--m->nrg];
		else
			k++;
	m->rg[m->nrg] = (struct vm_range){ s, e, ++m->clock, purged, region };
	if (purged) {
		m->reclaimed += vm_discard(m, m->nrg);
		m->purges++;
	}
	m->nrg++;
	vm_enforce_limit(m);
	return (vm_status(m, region, a, b) & 2) ? 1 : 0;
}

/* S5; restores the region's content expectations for discarded pages */
static inline int vm_unmark(struct vm *m, int region, size_t a, size_t b)
{
	bool purged = false;
	struct vm_region *g = &m->reg[region];
	size_t n = m->nrg;
	for (size_t k = 0; k < n; k++) {
		struct vm_range r = m->rg[k];
		if (r.region != region || !(r.start < b && a < r.end))
			continue;
		purged |= r.purged;
		m->rg[k].end = 0; /* dropped below */
		if (r.start < a)
			m->rg[m->nrg++] = (struct vm_range){ r.start, a, r.age, r.purged, region };
		if (r.end > b)
			m->rg[m->nrg++] = (struct vm_range){ b, r.end, r.age, r.purged, region };
	}
	for (size_t k = 0; k < m->nrg;)
		if (m->rg[k].end == 0)
			m->rg[k] = m->rg[--m->nrg];
		else
			k++;
	/* pages sharing a byte with [a, b) stop being discarded (they read
	 * zero); pages still whole in a purged piece stay discarded */
	for (size_t p = a / m->P; p * m->P < b && p < g->pages; p++) {
		if (!g->discarded[p])
			continue;
		int k = vm_find(m, region, p * m->P);
		size_t p0, p1;
		if (k < 0 || !m->rg[k].purged ||
		    !vm_whole(m, m->rg[k].start, m->rg[k].end, &p0, &p1) || p < p0 || p >= p1)
			g->discarded[p] = false;
	}
	return purged ? 1 : 0;
}

#endif
