/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * map/map-lru.c - a region's LRU off the hot path: an append-only log of
 * range records in age order plus a small heap for pieces cut out of the
 * middle of a range (the design is in map/map.h)
 *
 * Called with the region lock held, like map/map.c.  A pair vr_unmark
 * + vr_mark of an intact range touches only the record (its flag) and the
 * hot tail of the log; the cost of skipping stale entries moves to the
 * purge path and to compaction, which reads the log sequentially and
 * prefetches the records it checks.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "base/inject.h"
#include "map/map.h"

enum { SRC_NONE, SRC_LOG, SRC_HEAP };

/* stored links are refs (map/map.h: POSITION INDEPENDENCE) */
#define REC(x) ((struct vr_range *)vr_deref(m, (x)))
#define LOG(m) ((vr_ref *)vr_deref((m), (m)->log))
#define HEAP(m) ((struct vr_lru_ent *)vr_deref((m), (m)->heap))

/* Log and heap entries always hold a record (never 0), so the hot loops
 * below take the base once (vr_map_base) and add it without vr_deref's
 * test: the compiler cannot keep m->self and m->log in registers across
 * stores into the log (all are uint64_t), so a per-access conversion
 * would reload them every time. */
static inline struct vr_range *at(uintptr_t base, vr_ref x)
{
	return (struct vr_range *)(base + x);
}

static inline bool live_at(uintptr_t base, const vr_ref *log, uint32_t i)
{
	const struct vr_range *r = at(base, log[i]);
	return (r->age_flags & VR_RANGE_ONLRU) && r->lru_pos == i;
}

static inline bool log_live(const struct vr_map *m, uint32_t i)
{
	return live_at(vr_map_base(m), LOG(m), i);
}

static inline bool heap_live_at(uintptr_t base, const struct vr_lru_ent *e)
{
	const struct vr_range *r = at(base, e->r);
	return (r->age_flags & VR_RANGE_ONLRU) && r->lru_pos == VR_LRU_HEAP &&
	       r->heap_tag == e->tag && vr_range_age(r) == e->age;
}

static inline bool heap_live(const struct vr_map *m, const struct vr_lru_ent *e)
{
	const struct vr_range *r = REC(e->r);
	return (r->age_flags & VR_RANGE_ONLRU) && r->lru_pos == VR_LRU_HEAP &&
	       r->heap_tag == e->tag && vr_range_age(r) == e->age;
}

/* ---- the heap: [0, nheap) ordered by age ---- */

static void sift_up(struct vr_lru_ent *h, uint32_t i)
{
	struct vr_lru_ent e = h[i];
	while (i > 0 && h[(i - 1) / 2].age > e.age) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void sift_down(struct vr_lru_ent *h, uint32_t n, uint32_t i)
{
	struct vr_lru_ent e = h[i];
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1].age < h[c].age)
			c++;
		if (h[c].age >= e.age)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

static void heap_pop(struct vr_map *m)
{
	struct vr_lru_ent *h = HEAP(m);
	h[0] = h[--m->nheap];
	if (m->nheap)
		sift_down(h, m->nheap, 0);
}

static void heap_push(struct vr_map *m, struct vr_lru_ent e)
{
	struct vr_lru_ent *h = HEAP(m);
	h[m->nheap] = e;
	sift_up(h, m->nheap++);
}

/* the entries skipped by the current generation go back into the heap */
static void unskip(struct vr_map *m)
{
	while (m->nskip) {
		struct vr_lru_ent e = HEAP(m)[m->heap_cap - m->nskip];
		m->nskip--;
		if (heap_live(m, &e))
			heap_push(m, e);
	}
}

/* ---- room: compaction and growth (vr_map_alloc's reserve) ---- */

static void *grow(void *p, size_t n, size_t size)
{
	VR_FI_FAIL(VR_FI_MALLOC, NULL);
	return realloc(p, n * size);
}

/*
 * Incremental compaction.  The log's entries are in [log_head, log_hw) and
 * [log_hc, log_tail), oldest first; [log_hw, log_hc) is a hole (empty when
 * no pass runs).  A pass starts with the whole log as its second part and
 * the hole at index 0, then each vr_map_alloc() examines a few entries at
 * log_hc: a live one moves down to log_hw (its record's lru_pos follows),
 * a stale one is dropped.  When log_hc meets the tail the hole closes.  So
 * no call pays more than STEP entries, the order never changes, and the
 * purge cursor (log_cur, never inside the hole) keeps its place.
 */
#define STEP 8

static inline uint32_t log_first(const struct vr_map *m)
{
	return m->log_head < m->log_hw ? m->log_head : m->log_hc;
}

static inline uint32_t log_adv(const struct vr_map *m, uint32_t i)
{
	i++;
	return i == m->log_hw ? m->log_hc : i;
}

static void cur_fix(struct vr_map *m)
{
	if (m->log_cur < m->log_head)
		m->log_cur = m->log_head;
	if (m->log_cur >= m->log_hw && m->log_cur < m->log_hc)
		m->log_cur = m->log_hc;
}

/* drop the first entry (stale) for good */
static void log_drop_first(struct vr_map *m)
{
	if (m->log_head < m->log_hw)
		m->log_head++;
	else if (m->log_pass)
		m->log_hc++; /* what the pass would do with it */
	else
		m->log_head = m->log_hw = ++m->log_hc;
	cur_fix(m);
}

static void log_step(struct vr_map *m, unsigned n)
{
	const uintptr_t base = vr_map_base(m);
	vr_ref *log = (vr_ref *)(base + m->log); /* not moved by a step */
	for (; n && m->log_pass; n--) {
		uint32_t c = m->log_hc;
		if (c + 16 < m->log_tail)
			__builtin_prefetch(at(base, log[c + 16]), 1);
		if (c == m->log_tail) {
			/* done: the hole closes at the tail */
			m->log_tail = m->log_hc = m->log_hw;
			m->log_pass = false;
			if (m->log_cur > m->log_tail)
				m->log_cur = m->log_tail;
			return;
		}
		vr_ref x = log[c];
		struct vr_range *r = at(base, x);
		if (live_at(base, log, c)) {
			log[m->log_hw] = x;
			r->lru_pos = m->log_hw;
			if (m->log_cur == c)
				m->log_cur = m->log_hw;
			m->log_hw++;
		}
		m->log_hc++;
		cur_fix(m);
	}
}

static int log_reserve(struct vr_map *m)
{
	uint32_t len = (m->log_hw - m->log_head) + (m->log_tail - m->log_hc);
	/* more than a fifth stale, or the front of the array unused: a pass
	 * (STEP entries per call; the appends it overlaps are fewer); so the
	 * log holds about 5/4 of the live entries, its capacity (grown by an
	 * eighth: realloc of a large block is an mremap) about 1.5 times */
	if (!m->log_pass && ((len > 64 && len - m->nlog > len / 5) ||
			     (m->log_head > 64 && m->log_head >= m->log_cap / 8))) {
		m->log_hc = m->log_head; /* hw == hc: no hole before a pass */
		m->log_head = m->log_hw = 0;
		m->log_pass = true;
	}
	log_step(m, STEP);
	if (m->log_tail < m->log_cap)
		return 0;
	if (m->cap) {
		/* fixed storage: compact all of it now (live entries are at
		 * most cap, half the log) */
		if (!m->log_pass) {
			m->log_hc = m->log_head;
			m->log_head = m->log_hw = 0;
			m->log_pass = true;
		}
		while (m->log_pass)
			log_step(m, UINT32_MAX);
		return m->log_tail < m->log_cap ? 0 : -1;
	}
	size_t cap = m->log_cap ? (size_t)m->log_cap + m->log_cap / 8 : 64;
	if (cap >= VR_LRU_NONE)
		return -1;
	vr_ref *l = grow(LOG(m), cap, sizeof(*l));
	if (!l)
		return -1;
	m->log = vr_mkref(m, l);
	m->log_cap = (uint32_t)cap;
	return 0;
}

static int heap_reserve(struct vr_map *m)
{
	if (m->nheap + m->nskip < m->heap_cap)
		return 0;
	/* full: drop the stale entries first */
	struct vr_lru_ent *hp = HEAP(m);
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->nheap; i++)
		if (heap_live(m, &hp[i]))
			hp[n++] = hp[i];
	m->nheap = n;
	for (uint32_t i = n / 2; i-- > 0;)
		sift_down(hp, n, i);
	uint32_t k = 0, base = m->heap_cap - m->nskip;
	for (uint32_t i = m->nskip; i-- > 0;) /* writes never pass the reads */
		if (heap_live(m, &hp[base + i]))
			hp[m->heap_cap - ++k] = hp[base + i];
	m->nskip = k;
	if (m->nheap + m->nskip <= m->heap_cap / 2 && m->heap_cap)
		return 0;
	if (m->cap) /* fixed storage: live entries never pass half of it */
		return m->nheap + m->nskip < m->heap_cap ? 0 : -1;
	size_t cap = m->heap_cap ? (size_t)m->heap_cap * 2 : 16;
	if (cap >= VR_LRU_NONE)
		return -1;
	struct vr_lru_ent *h = grow(HEAP(m), cap, sizeof(*h));
	if (!h)
		return -1;
	/* the skipped entries live at the end */
	memmove(&h[cap - m->nskip], &h[m->heap_cap - m->nskip], m->nskip * sizeof(*h));
	m->heap = vr_mkref(m, h);
	m->heap_cap = (uint32_t)cap;
	return 0;
}

int vr_lru_reserve(struct vr_map *m)
{
	return log_reserve(m) < 0 || heap_reserve(m) < 0 ? -1 : 0;
}

void vr_lru_fini(struct vr_map *m)
{
	if (m->cap)
		return;
	free(LOG(m));
	free(HEAP(m));
}

/* ---- membership ---- */

void vr_lru_append(struct vr_map *m, struct vr_range *r)
{
	if (m->log_tail == m->log_cap && log_reserve(m) < 0)
		abort(); /* the ALLOCATION RULE was broken: vr_map_alloc first */
	LOG(m)[m->log_tail] = vr_mkref(m, r);
	r->lru_pos = m->log_tail++;
	r->age_flags |= VR_RANGE_ONLRU;
	m->nlog++;
}

void vr_lru_insert_after(struct vr_map *m, struct vr_range *pos, struct vr_range *r)
{
	(void)pos; /* same age: the heap orders it */
	if (m->nheap + m->nskip == m->heap_cap && heap_reserve(m) < 0)
		abort();
	r->heap_tag = ++m->heap_tag;
	heap_push(m, (struct vr_lru_ent){ vr_range_age(r), vr_mkref(m, r), r->heap_tag });
	r->lru_pos = VR_LRU_HEAP;
	r->age_flags |= VR_RANGE_ONLRU;
	m->nheap_live++;
}

void vr_lru_remove(struct vr_map *m, struct vr_range *r)
{
	if (r->lru_pos == VR_LRU_HEAP)
		m->nheap_live--;
	else
		m->nlog--;
	r->lru_pos = VR_LRU_NONE;
	r->age_flags &= ~(uint64_t)VR_RANGE_ONLRU;
}

uint64_t vr_lru_oldest_age(struct vr_map *m)
{
	const uintptr_t base = vr_map_base(m);
	const vr_ref *log = (const vr_ref *)(base + m->log);
	const struct vr_lru_ent *h = (const struct vr_lru_ent *)(base + m->heap);
	uint64_t age = UINT64_MAX;
	while (log_first(m) < m->log_tail && !live_at(base, log, log_first(m)))
		log_drop_first(m);
	if (log_first(m) < m->log_tail)
		age = vr_range_age(at(base, log[log_first(m)]));
	while (m->nheap && !heap_live_at(base, &h[0]))
		heap_pop(m);
	if (m->nheap && h[0].age < age)
		age = h[0].age;
	for (uint32_t i = m->heap_cap - m->nskip; i < m->heap_cap; i++)
		if (heap_live_at(base, &h[i]) && h[i].age < age)
			age = h[i].age;
	return age;
}

struct vr_range *vr_lru_peek(struct vr_map *m, uint64_t gen)
{
	if (m->cursor_gen != gen) {
		m->cursor_gen = gen;
		m->log_cur = log_first(m);
		unskip(m);
	}
	while (m->log_cur < m->log_tail && !log_live(m, m->log_cur)) {
		if (m->log_cur == log_first(m))
			log_drop_first(m); /* moves the cursor on too */
		else
			m->log_cur = log_adv(m, m->log_cur);
	}
	while (m->nheap && !heap_live(m, &HEAP(m)[0]))
		heap_pop(m);
	struct vr_range *a = m->log_cur < m->log_tail ? REC(LOG(m)[m->log_cur]) : NULL;
	struct vr_range *b = m->nheap ? REC(HEAP(m)[0].r) : NULL;
	if (b && (!a || vr_range_age(b) < vr_range_age(a))) {
		m->peek_src = SRC_HEAP;
		return b;
	}
	m->peek_src = a ? SRC_LOG : SRC_NONE;
	return a;
}

void vr_lru_pop(struct vr_map *m)
{
	if (m->peek_src == SRC_LOG) {
		m->log_cur = log_adv(m, m->log_cur);
	} else if (m->peek_src == SRC_HEAP) {
		struct vr_lru_ent e = HEAP(m)[0];
		heap_pop(m);
		if (heap_live(m, &e)) /* skipped: back in the next generation */
			HEAP(m)[m->heap_cap - ++m->nskip] = e;
	}
	m->peek_src = SRC_NONE;
}

/* ---- vr_map_check's LRU half ---- */

static int cmp_ref(const void *a, const void *b)
{
	vr_ref x = *(const vr_ref *)a, y = *(const vr_ref *)b;
	return x < y ? -1 : x > y;
}

/* one pass over the leaves (not vr_map_next descents: the check runs
 * after every operation of the model tests) */
static int check_record(const struct vr_map *m, const struct vr_range *r, size_t *inlog,
			size_t *inheap)
{
	bool whole = vr_whole_pages(r->start, r->end, m->page_shift, NULL, NULL);
	if (vr_range_on_lru(r) && (vr_range_purged(r) || !whole))
		return -1;
	if (!vr_range_on_lru(r) && !vr_range_purged(r) && whole)
		return -1;
	if (!vr_range_on_lru(r))
		return 0;
	if (r->lru_pos == VR_LRU_HEAP) {
		(*inheap)++;
		return 0;
	}
	if (r->lru_pos < m->log_head || r->lru_pos >= m->log_tail ||
	    (r->lru_pos >= m->log_hw && r->lru_pos < m->log_hc) || REC(LOG(m)[r->lru_pos]) != r)
		return -1;
	(*inlog)++;
	return 0;
}

static int check_records(const struct vr_map *m, size_t *inlog, size_t *inheap)
{
	*inlog = *inheap = 0;
	const struct vr_bnode *leaf = vr_deref(m, m->root);
	while (leaf && !leaf->leaf)
		leaf = vr_deref(m, leaf->ptr[0]);
	for (; leaf; leaf = vr_deref(m, leaf->next))
		for (unsigned i = 0; i < leaf->n; i++)
			if (check_record(m, REC(leaf->ptr[i]), inlog, inheap) < 0)
				return -1;
	return 0;
}

int vr_lru_check(const struct vr_map *m)
{
	size_t inlog, inheap;
	if (check_records(m, &inlog, &inheap) < 0)
		return -1;
	if (inlog != m->nlog || inheap != m->nheap_live)
		return -1;
	if (m->log_head > m->log_hw || m->log_hw > m->log_hc || m->log_hc > m->log_tail ||
	    m->log_tail > m->log_cap || (!m->log_pass && m->log_hw != m->log_hc))
		return -1;
	if (m->log_cur < m->log_head || m->log_cur > m->log_tail ||
	    (m->log_cur >= m->log_hw && m->log_cur < m->log_hc))
		return -1;
	/* live log entries in age order */
	uint64_t last = 0;
	size_t live = 0;
	for (uint32_t i = log_first(m); i < m->log_tail; i = log_adv(m, i)) {
		if (!log_live(m, i))
			continue;
		if (vr_range_age(REC(LOG(m)[i])) < last)
			return -1;
		last = vr_range_age(REC(LOG(m)[i]));
		live++;
	}
	if (live != m->nlog)
		return -1;
	if (m->nheap + m->nskip > m->heap_cap)
		return -1;
	const struct vr_lru_ent *hp = HEAP(m);
	for (uint32_t i = 1; i < m->nheap; i++)
		if (hp[(i - 1) / 2].age > hp[i].age)
			return -1;
	/* every heap record once among the live entries (a duplicate would
	 * need a tag that wrapped around 2^32 pushes: then it has the same
	 * record and age, so the order is still exact) */
	size_t n = 0;
	vr_ref *v = malloc((m->nheap + m->nskip + 1) * sizeof(*v));
	if (!v)
		return -1;
	for (uint32_t i = 0; i < m->heap_cap; i++) {
		if (i >= m->nheap && i < m->heap_cap - m->nskip)
			continue;
		if (heap_live(m, &hp[i]))
			v[n++] = hp[i].r;
	}
	qsort(v, n, sizeof(*v), cmp_ref);
	size_t uniq = 0;
	for (size_t i = 0; i < n; i++)
		uniq += !i || v[i] != v[i - 1];
	free(v);
	return uniq == m->nheap_live ? 0 : -1;
}
