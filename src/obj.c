/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj.c - purgeable objects (API S19-S25): the public calls, the per-object
 * state machine, the object LRU (logs + requeue heap) as purge sources for
 * purge.c, and the fault hook called by fault.c.  See obj.h for the rules.
 *
 * Pin and unpin of an intact object touch the handle, its page
 * descriptor(s) (small objects) and the calling thread's log and gauge
 * shard; no search by address, no system call, no lock but the thread's
 * own log lock (shared only with threads hashed onto the same log, and
 * with the purger popping it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <ucontext.h>

#include "inject.h"
#include "obj.h"

static _Atomic unsigned next_log;
static __thread unsigned my_log __attribute__((tls_model("initial-exec")));

unsigned vr_obj_log_index(void)
{
	unsigned l = my_log;
	if (!l) {
		l = atomic_fetch_add(&next_log, 1) % OBJ_NLOG + 1;
		my_log = l;
	}
	return l - 1;
}

static inline struct vr_shard *my_shard(struct vr_ctx *c)
{
	return &c->shards[vr_obj_log_index() % VR_NSHARDS];
}

static inline size_t pgsz(void)
{
	return (size_t)1 << vr_page_shift();
}

/* ---- the arena of a ctx ---- */
static struct vr_objs *objs_get(struct vr_ctx *c)
{
	struct vr_objs *os = atomic_load_explicit(&c->objs, memory_order_acquire);
	if (_likely_(os))
		return os;
	pthread_mutex_lock(&c->lock);
	os = atomic_load(&c->objs);
	if (!os) {
		os = vr_calloc_aligned(sizeof(*os));
		if (os && vr_objs_alloc_init(os) < 0) {
			free(os);
			os = NULL;
		}
		if (os) {
			os->ctx = c;
			pthread_mutex_init(&os->span_lock, NULL);
			pthread_mutex_init(&os->rq_lock, NULL);
			atomic_init(&os->rq_oldest, UINT64_MAX);
			for (int i = 0; i < OBJ_NLOG; i++) {
				pthread_mutex_init(&os->logs[i].lock, NULL);
				atomic_init(&os->logs[i].oldest, UINT64_MAX);
			}
			atomic_store_explicit(&c->objs, os, memory_order_release);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return os;
}

void vr_obj_ctx_destroy(struct vr_ctx *c, bool inherited)
{
	struct vr_objs *os = atomic_load(&c->objs);
	if (!os)
		return;
	vr_objs_alloc_fini(os, inherited);
	for (int i = 0; i < OBJ_NLOG; i++) {
		free(os->logs[i].buf);
		if (!inherited)
			pthread_mutex_destroy(&os->logs[i].lock);
	}
	free(os->rq);
	free(os->skipped);
	if (!inherited) {
		pthread_mutex_destroy(&os->rq_lock);
		pthread_mutex_destroy(&os->span_lock);
	}
	free(os);
	atomic_store(&c->objs, NULL);
}

/* ---- LRU units and their validity ---- */
static inline bool unit_large(uintptr_t u)
{
	return u & 1;
}

/* could this entry still be the unit's place in the LRU? (lock-free read
 * of type-stable memory) */
static bool entry_live(const struct lentry *e)
{
	if (unit_large(e->unit)) {
		struct vr_obj *o = (struct vr_obj *)(e->unit & ~(uintptr_t)1);
		uint64_t s = atomic_load_explicit(&o->state, memory_order_relaxed);
		return (s & OS_LIVE) && !(s & (OS_PINNED | OS_PURGED)) && os_age(s) == e->age;
	}
	struct vr_opage *p = (struct vr_opage *)e->unit;
	return atomic_load_explicit(&p->youngest, memory_order_relaxed) == e->age &&
	       !(atomic_load_explicit(&p->pw, memory_order_relaxed) & PG_DISCARDED);
}

/* ---- logs: rings of (unit, age), ages growing; lg->lock held ---- */
static inline struct lentry *log_at(struct vr_olog *lg, size_t k)
{
	return &lg->buf[(lg->head + k) & (lg->cap - 1)];
}

static void log_publish(struct vr_olog *lg)
{
	atomic_store_explicit(&lg->oldest, lg->len ? log_at(lg, 0)->age : UINT64_MAX,
			      memory_order_relaxed);
}

/* room for n more entries: drop stale entries, grow if still half full */
static int log_reserve(struct vr_olog *lg, size_t n)
{
	if (lg->len + n <= lg->cap)
		return 0;
	size_t w = 0;
	for (size_t k = 0; k < lg->len; k++) {
		if (k + 8 < lg->len)
			__builtin_prefetch((void *)(log_at(lg, k + 8)->unit & ~(uintptr_t)1));
		struct lentry e = *log_at(lg, k);
		if (entry_live(&e))
			*log_at(lg, w++) = e;
	}
	lg->len = w;
	log_publish(lg);
	if (lg->len + n <= lg->cap / 2)
		return 0;
	size_t cap = lg->cap ? 2 * lg->cap : 64;
	struct lentry *b = vr_malloc(cap * sizeof(*b));
	if (!b)
		return lg->len + n <= lg->cap ? 0 : -ENOMEM;
	for (size_t k = 0; k < lg->len; k++)
		b[k] = *log_at(lg, k);
	free(lg->buf);
	lg->buf = b;
	lg->cap = cap;
	lg->head = 0;
	return 0;
}

static void log_push(struct vr_olog *lg, uintptr_t unit, uint64_t age)
{
	*log_at(lg, lg->len++) = (struct lentry){ unit, age };
	if (lg->len == 1)
		log_publish(lg);
}

/* ---- the requeue heap: units that got an age without an unpin ---- */
static void rq_sift_down(struct lentry *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && h[l].age < h[m].age)
			m = l;
		if (l + 1 < n && h[l + 1].age < h[m].age)
			m = l + 1;
		if (m == i)
			return;
		struct lentry t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static void rq_publish(struct vr_objs *os)
{
	atomic_store(&os->rq_oldest, os->rq_len ? os->rq[0].age : UINT64_MAX);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct lentry *x = a, *y = b;
	if (x->unit != y->unit)
		return x->unit < y->unit ? -1 : 1;
	return x->age < y->age ? -1 : x->age > y->age;
}

static void rq_push(struct vr_objs *os, uintptr_t unit, uint64_t age)
{
	pthread_mutex_lock(&os->rq_lock);
	if (os->rq_len == os->rq_cap) {
		/* drop stale entries and duplicates */
		qsort(os->rq, os->rq_len, sizeof(*os->rq), cmp_entry);
		size_t w = 0;
		for (size_t k = 0; k < os->rq_len; k++)
			if (entry_live(&os->rq[k]) &&
			    (w == 0 || os->rq[w - 1].unit != os->rq[k].unit ||
			     os->rq[w - 1].age != os->rq[k].age))
				os->rq[w++] = os->rq[k];
		os->rq_len = w;
		for (size_t i = w / 2; i-- > 0;)
			rq_sift_down(os->rq, w, i);
		if (w >= os->rq_cap / 2) {
			size_t cap = os->rq_cap ? 2 * os->rq_cap : 32;
			struct lentry *b = vr_malloc(cap * sizeof(*b));
			if (b) {
				memcpy(b, os->rq, w * sizeof(*b));
				free(os->rq);
				os->rq = b;
				os->rq_cap = cap;
			}
		}
	}
	if (os->rq_len < os->rq_cap) { /* else: no memory, the unit waits for its next unpin */
		size_t i = os->rq_len++;
		os->rq[i] = (struct lentry){ unit, age };
		while (i > 0 && os->rq[(i - 1) / 2].age > os->rq[i].age) {
			struct lentry t = os->rq[i];
			os->rq[i] = os->rq[(i - 1) / 2];
			os->rq[(i - 1) / 2] = t;
			i = (i - 1) / 2;
		}
	}
	rq_publish(os);
	pthread_mutex_unlock(&os->rq_lock);
}

/* S21/S22 after a free: the page's age is its youngest unpinned object's
 * (class lock held, the caller holds one pin on p) */
void vr_obj_page_requeue(struct vr_objs *os, struct vr_opage *p)
{
	if ((atomic_load(&p->pw) & PG_COUNT) != 1)
		return; /* another object is pinned: its unpin gives the age */
	struct vr_slab *s = p->slab;
	uint32_t lo, hi;
	vr_slab_page_slots(s, (size_t)(p - s->pages), &lo, &hi);
	uint64_t age = 0;
	bool unpurged = false;
	for (uint32_t i = lo; i <= hi; i++) {
		uint64_t st = atomic_load(&s->objs[i].state);
		if (!(st & OS_LIVE))
			continue;
		if (os_age(st) > age)
			age = os_age(st);
		unpurged |= !(st & OS_PURGED);
	}
	if (!unpurged)
		return; /* no unit */
	/* the page's log entry may have been dropped while the page held a
	 * pin (this free's own, or the freed object's): always requeue */
	atomic_store(&p->youngest, age);
	rq_push(os, (uintptr_t)p, age);
}

/* ---- purging one unit (purge_lock held) ---- */
static void gauge_purged(struct vr_ctx *c, size_t size)
{
	struct vr_shard *sh = my_shard(c);
	atomic_fetch_sub_explicit(&sh->volatile_bytes, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&sh->purged_bytes, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->purges, 1, memory_order_relaxed);
}

static int64_t purge_large(struct vr_objs *os, struct vr_obj *o, uint64_t age)
{
	uint64_t s = atomic_load(&o->state);
	if (!(s & OS_LIVE) || (s & (OS_PINNED | OS_PURGED | OS_PURGING)) || os_age(s) != age ||
	    !atomic_compare_exchange_strong(&o->state, &s, s | OS_PURGING))
		return 0;
	size_t len = ((obj_size(o) - 1) | (pgsz() - 1)) + 1;
	int err = vr_objs_discard(os, o->home, o->ptr, len);
	if (err < 0) {
		atomic_store(&o->state, s);
		return err;
	}
	atomic_store(&o->state, s | OS_PURGED);
	gauge_purged(os->ctx, obj_size(o));
	return (int64_t)len;
}

static int64_t purge_page(struct vr_objs *os, struct vr_opage *p, uint64_t age)
{
	uint32_t z = 0;
	if (atomic_load(&p->youngest) != age ||
	    !atomic_compare_exchange_strong(&p->pw, &z, PG_PURGING))
		return 0;
	/* claimed: no object on the page is pinned, allocated or freed now */
	struct vr_slab *s = p->slab;
	size_t pi = (size_t)(p - s->pages);
	uint32_t lo, hi;
	vr_slab_page_slots(s, pi, &lo, &hi);
	bool any = false;
	for (uint32_t i = lo; i <= hi && !any; i++) {
		uint64_t st = atomic_load(&s->objs[i].state);
		any = (st & OS_LIVE) && !(st & OS_PURGED);
	}
	int64_t got = 0;
	if (any && atomic_load(&p->youngest) == age) {
		got = vr_objs_discard(os, s->chunk, s->base + (pi << vr_page_shift()), pgsz());
		if (got == 0) {
			for (uint32_t i = lo; i <= hi; i++) {
				struct vr_obj *o = &s->objs[i];
				uint64_t st = atomic_load(&o->state);
				if ((st & OS_LIVE) && !(st & OS_PURGED)) {
					atomic_fetch_or(&o->state, OS_PURGED);
					gauge_purged(os->ctx, obj_size(o));
				}
			}
			atomic_fetch_or(&p->pw, PG_DISCARDED);
			got = (int64_t)pgsz();
		}
	}
	atomic_fetch_and(&p->pw, ~PG_PURGING);
	return got;
}

static int64_t purge_unit(struct vr_objs *os, const struct lentry *e)
{
	int64_t got = unit_large(e->unit)
			      ? purge_large(os, (struct vr_obj *)(e->unit & ~(uintptr_t)1), e->age)
			      : purge_page(os, (struct vr_opage *)e->unit, e->age);
	if (got > 0) {
		atomic_fetch_add_explicit(&os->ctx->reclaimed_bytes, (uint64_t)got,
					  memory_order_relaxed);
		vr_dbg("purged object unit %p: %lld bytes reclaimed", (void *)e->unit,
		       (long long)got);
	} else if (got < 0) {
		atomic_fetch_add_explicit(&os->ctx->skipped, 1, memory_order_relaxed);
		vr_dbg("object purge skipped: unit %p: %s", (void *)e->unit, strerror((int)-got));
		if (os->nskipped == os->cap_skipped) {
			size_t cap = os->cap_skipped ? 2 * os->cap_skipped : 16;
			struct lentry *b = realloc(os->skipped, cap * sizeof(*b));
			if (!b)
				return 0; /* the unit waits for its next unpin */
			os->skipped = b;
			os->cap_skipped = cap;
		}
		os->skipped[os->nskipped++] = *e; /* keeps its place (S8) */
		return 0;
	}
	return got;
}

/* ---- purge sources for purge.c (ctx->purge_lock held) ---- */
size_t vr_obj_nsources(struct vr_ctx *c)
{
	return atomic_load(&c->objs) ? OBJ_NLOG + 1 : 0;
}

uint64_t vr_obj_src_oldest(struct vr_ctx *c, size_t i)
{
	struct vr_objs *os = atomic_load(&c->objs);
	return i < OBJ_NLOG ? atomic_load_explicit(&os->logs[i].oldest, memory_order_relaxed)
			    : atomic_load(&os->rq_oldest);
}

int64_t vr_obj_src_purge(struct vr_ctx *c, size_t i)
{
	struct vr_objs *os = atomic_load(&c->objs);
	struct lentry e;
	if (i < OBJ_NLOG) {
		struct vr_olog *lg = &os->logs[i];
		pthread_mutex_lock(&lg->lock);
		if (!lg->len) {
			pthread_mutex_unlock(&lg->lock);
			return 0;
		}
		e = *log_at(lg, 0);
		lg->head = (lg->head + 1) & (lg->cap - 1);
		lg->len--;
		log_publish(lg);
		pthread_mutex_unlock(&lg->lock);
	} else {
		pthread_mutex_lock(&os->rq_lock);
		if (!os->rq_len) {
			pthread_mutex_unlock(&os->rq_lock);
			return 0;
		}
		e = os->rq[0];
		os->rq[0] = os->rq[--os->rq_len];
		rq_sift_down(os->rq, os->rq_len, 0);
		rq_publish(os);
		pthread_mutex_unlock(&os->rq_lock);
	}
	return purge_unit(os, &e);
}

/* the units skipped by this purge keep their place for the next one */
void vr_obj_purge_done(struct vr_ctx *c)
{
	struct vr_objs *os = atomic_load(&c->objs);
	if (!os)
		return;
	for (size_t k = 0; k < os->nskipped; k++)
		rq_push(os, os->skipped[k].unit, os->skipped[k].age);
	os->nskipped = 0;
}

/* ---- public calls ---- */
static inline int check_obj(const struct vr_obj *o, uint64_t *s)
{
	if (!o || obj_inherited(o))
		return -EINVAL;
	*s = atomic_load_explicit(&o->state, memory_order_acquire);
	return (*s & OS_LIVE) ? 0 : -EINVAL;
}

static void enforce_limit(struct vr_ctx *c)
{
	size_t limit = atomic_load_explicit(&c->limit, memory_order_relaxed);
	if (limit && vr_ctx_gauge(c, VR_G_VOLATILE) > limit)
		vr_purge_lru(c, VR_PURGE_VOLATILE, limit);
}

_export_ int vr_obj_new(struct vr_ctx *ctx, size_t size, unsigned flags, struct vr_obj **out)
{
	size_t pm = pgsz() - 1;
	if (!ctx || !out || flags || size == 0 || size > SIZE_MAX - pm || vr_inherited_ctx(ctx))
		return -EINVAL;
	if ((uint64_t)size >= (uint64_t)1 << 47)
		return -ENOMEM;
	struct vr_objs *os = objs_get(ctx);
	if (!os)
		return -ENOMEM;
	int err = vr_objs_alloc(os, size, out);
	if (err < 0)
		return err;
	atomic_fetch_add_explicit(&os->logs[vr_obj_log_index()].objects, 1, memory_order_relaxed);
	return 0;
}

_export_ void vr_obj_free(struct vr_obj *o)
{
	uint64_t s;
	if (check_obj(o, &s) < 0)
		return; /* NULL, or inherited: the child's copy goes with its ctx */
	struct vr_objs *os = obj_objs(o, s);
	struct vr_opage *p = NULL;
	unsigned n = 0;
	if (s & OS_LARGE) {
		/* OS_PURGING keeps the purger away while the span is released */
		while ((s & OS_PURGING) ||
		       !atomic_compare_exchange_weak(&o->state, &s, s | OS_PURGING)) {
			if (s & OS_PURGING) {
				sched_yield();
				s = atomic_load(&o->state);
			}
		}
	} else {
		obj_pages(o, &p, &n);
		for (unsigned i = 0; i < n; i++)
			vr_opage_hold(&p[i]);
		s = atomic_load(&o->state);
	}
	struct vr_ctx *c = os->ctx;
	if (!(s & OS_PINNED)) {
		struct vr_shard *sh = my_shard(c);
		atomic_fetch_sub_explicit((s & OS_PURGED) ? &sh->purged_bytes : &sh->volatile_bytes,
					  obj_size(o), memory_order_relaxed);
	}
	vr_objs_release(os, o);
	for (unsigned i = 0; i < n; i++)
		vr_opage_drop(&p[i]);
	atomic_fetch_sub_explicit(&os->logs[vr_obj_log_index()].objects, 1, memory_order_relaxed);
}

_export_ void *vr_obj_ptr(const struct vr_obj *o)
{
	return !o || obj_inherited(o) ? NULL : o->ptr;
}

_export_ size_t vr_obj_size(const struct vr_obj *o)
{
	return !o || obj_inherited(o) ? 0 : obj_size(o);
}

_export_ struct vr_obj *vr_obj_of(const void *addr)
{
	struct vr_chunk *ch = vr_registry_find(addr, VR_REG_OBJ);
	return ch ? vr_objs_at(ch, (uintptr_t)addr) : NULL;
}

_export_ int vr_obj_status(const struct vr_obj *o)
{
	uint64_t s;
	int err = check_obj(o, &s);
	if (err < 0)
		return err;
	if (s & OS_PINNED)
		return 0;
	return VR_STATE_VOLATILE | ((s & OS_PURGED) ? VR_STATE_PURGED : 0);
}

_export_ int vr_obj_unpin(struct vr_obj *o)
{
	uint64_t s;
	int err = check_obj(o, &s);
	if (err < 0 || !(s & OS_PINNED))
		return err;
	struct vr_objs *os = obj_objs(o, s);
	struct vr_olog *lg = &os->logs[vr_obj_log_index()];
	pthread_mutex_lock(&lg->lock);
	if (log_reserve(lg, 2) < 0) {
		pthread_mutex_unlock(&lg->lock);
		return -ENOMEM;
	}
	uint64_t t = vr_age_after(&lg->last_age);
	uint64_t keep = (1u << OS_AGE_SHIFT) - 1 - OS_PINNED;
	do {
		if (!(s & OS_PINNED)) { /* another thread unpinned it */
			pthread_mutex_unlock(&lg->lock);
			return 0;
		}
	} while (!atomic_compare_exchange_weak(&o->state, &s, (s & keep) | t << OS_AGE_SHIFT));
	if (s & OS_LARGE) {
		log_push(lg, (uintptr_t)o | 1, t);
	} else {
		struct vr_opage *p;
		unsigned n;
		obj_pages(o, &p, &n);
		for (unsigned i = 0; i < n; i++) {
			/* age first, pin dropped second: the purger claims the page
			 * only with no pin left, and then sees this age */
			uint64_t y = atomic_load(&p[i].youngest);
			while (y < t && !atomic_compare_exchange_weak(&p[i].youngest, &y, t))
				;
			vr_opage_drop(&p[i]);
			log_push(lg, (uintptr_t)&p[i], t);
		}
	}
	pthread_mutex_unlock(&lg->lock);
	struct vr_ctx *c = os->ctx;
	atomic_fetch_add_explicit(&my_shard(c)->volatile_bytes, obj_size(o), memory_order_relaxed);
	enforce_limit(c);
	return 0;
}

static int pin_large(struct vr_objs *os, struct vr_obj *o, uint64_t s)
{
	for (;;) {
		if (s & OS_PINNED)
			return VR_INTACT;
		if (s & OS_PURGING) { /* a purge of this object is under way */
			sched_yield();
			s = atomic_load(&o->state);
			continue;
		}
		if (!(s & OS_PURGED)) {
			if (atomic_compare_exchange_weak(&o->state, &s, s | OS_PINNED)) {
				atomic_fetch_sub_explicit(&my_shard(os->ctx)->volatile_bytes,
							  obj_size(o), memory_order_relaxed);
				return VR_INTACT;
			}
			continue;
		}
		if (!atomic_compare_exchange_weak(&o->state, &s, s | OS_PURGING))
			continue;
		size_t len = ((obj_size(o) - 1) | (pgsz() - 1)) + 1;
		int err = vr_objs_restore(os, o->ptr, len);
		if (err < 0) {
			atomic_store(&o->state, s); /* nothing changed (S20, S5) */
			return err;
		}
		/* the pages were punched: they read 0 */
		atomic_store(&o->state, (s | OS_PINNED) & ~(uint64_t)OS_PURGED);
		atomic_fetch_sub_explicit(&my_shard(os->ctx)->purged_bytes, obj_size(o),
					  memory_order_relaxed);
		return VR_PURGED;
	}
}

_export_ int vr_obj_pin(struct vr_obj *o)
{
	uint64_t s;
	int err = check_obj(o, &s);
	if (err < 0)
		return err;
	if (s & OS_PINNED)
		return VR_INTACT;
	struct vr_objs *os = obj_objs(o, s);
	if (s & OS_LARGE)
		return pin_large(os, o, s);
	struct vr_opage *p;
	unsigned n;
	obj_pages(o, &p, &n);
	for (unsigned i = 0; i < n; i++)
		vr_opage_hold(&p[i]);
	/* with the pins held no purge can change PURGED under us */
	s = atomic_load(&o->state);
	if ((s & (OS_PURGED | OS_PINNED)) == OS_PURGED) {
		err = vr_objs_restore_small(os, o);
		if (err < 0)
			goto undo;
	}
	do {
		if (s & OS_PINNED) { /* another thread pinned it */
			err = VR_INTACT;
			goto undo;
		}
	} while (!atomic_compare_exchange_weak(&o->state, &s,
					       (s | OS_PINNED) & ~(uint64_t)OS_PURGED));
	struct vr_shard *sh = my_shard(os->ctx);
	if (s & OS_PURGED) {
		/* bytes on a page that was not discarded (a straddling object)
		 * kept their data: every byte of a purged object reads 0 */
		memset(o->ptr, 0, obj_size(o));
		atomic_fetch_sub_explicit(&sh->purged_bytes, obj_size(o), memory_order_relaxed);
		return VR_PURGED;
	}
	atomic_fetch_sub_explicit(&sh->volatile_bytes, obj_size(o), memory_order_relaxed);
	return VR_INTACT;
undo:
	for (unsigned i = 0; i < n; i++)
		vr_opage_drop(&p[i]);
	return err;
}

_export_ int vr_ctx_set_obj_fault_handler(struct vr_ctx *ctx, vr_obj_fault_fn fn, void *arg)
{
	if (!ctx || vr_inherited_ctx(ctx))
		return -EINVAL;
	struct vr_objs *os = objs_get(ctx);
	if (!os)
		return -ENOMEM;
	atomic_store(&os->fault_arg, fn ? arg : NULL);
	atomic_store(&os->fault_fn, fn);
	return 0;
}

/* ---- statistics ---- */
uint64_t vr_obj_count(struct vr_ctx *c)
{
	struct vr_objs *os = atomic_load(&c->objs);
	int64_t n = 0;
	for (int i = 0; os && i < OBJ_NLOG; i++)
		n += atomic_load_explicit(&os->logs[i].objects, memory_order_relaxed);
	return n > 0 ? (uint64_t)n : 0;
}

static uint64_t fd_bytes(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

uint64_t vr_obj_footprint(struct vr_ctx *c)
{
	uint64_t sum = 0;
	pthread_mutex_lock(&c->lock);
	for (struct vr_region *r = c->regions; r; r = r->next)
		sum += fd_bytes(r->fd);
	pthread_mutex_unlock(&c->lock);
	struct vr_objs *os = atomic_load(&c->objs);
	if (os) {
		pthread_mutex_lock(&os->span_lock);
		for (size_t i = 0; i < os->nchunks; i++)
			sum += fd_bytes(os->chunks[i]->fd);
		pthread_mutex_unlock(&os->span_lock);
	}
	return sum;
}

/* ---- the fault path (called from fault.c's SIGSEGV handler) ----
 * Async-signal-safe: registry lookup, atomics, sched_yield, the user's
 * handler, and the SIGBUS delivery fault.c passes in. */
#define MAX_REFAULTS 8
static __thread struct {
	void *addr;
	uint64_t gen;
	unsigned count;
} oftls __attribute__((tls_model("initial-exec")));

/* is addr on a discarded page of ch?  *o: the object there, if any */
static bool classify(struct vr_chunk *ch, uintptr_t a, struct vr_obj **o)
{
	size_t pi = (a - (uintptr_t)ch->base) >> vr_page_shift();
	for (int tries = 0; tries < 10000; tries++) {
		uintptr_t v = atomic_load(&ch->map[pi]);
		*o = NULL;
		if (PM_TAG(v) == PM_LARGE) {
			struct vr_obj *h = PM_PTR(v);
			uint64_t s = atomic_load(&h->state);
			if (s & OS_PURGING) {
				sched_yield();
				continue;
			}
			/* the tail of the last page is discarded too; it has no object */
			*o = vr_objs_at(ch, a);
			return (s & (OS_LIVE | OS_PURGED | OS_PINNED)) == (OS_LIVE | OS_PURGED);
		}
		if (PM_TAG(v) != PM_SLAB)
			return false;
		struct vr_slab *s = PM_PTR(v);
		struct vr_opage *p =
			&s->pages[((a & ~(uintptr_t)(pgsz() - 1)) - (uintptr_t)s->base) >>
				  vr_page_shift()];
		uint32_t w = atomic_load(&p->pw);
		if (w & PG_PURGING) {
			sched_yield();
			continue;
		}
		*o = vr_objs_at(ch, a);
		return w & PG_DISCARDED;
	}
	return true; /* a purge that never ends: only a handler interrupting it */
}

int vr_obj_fault(siginfo_t *si, void *ucv, void (*deliver)(void *addr, ucontext_t *uc))
{
	if (si->si_code <= 0)
		return 0;
	void *addr = si->si_addr;
	struct vr_chunk *ch = vr_registry_find(addr, VR_REG_OBJ);
	if (!ch)
		return 0;
	struct vr_objs *os = ch->objs;
	uint64_t gen = atomic_load(&os->trap_gen);
	struct vr_obj *o;
	bool claimed = classify(ch, (uintptr_t)addr, &o);
	bool same = oftls.addr == addr && oftls.gen == gen;
	if (!claimed) {
		if (same) { /* faulted again with nothing changed: not ours */
			oftls.addr = NULL;
			return 0;
		}
		oftls.addr = addr;
		oftls.gen = gen;
		oftls.count = 0;
		return 1; /* re-run the access: a restore may have raced */
	}
	atomic_fetch_add_explicit(&os->ctx->faults, 1, memory_order_relaxed);
	oftls.count = same ? oftls.count + 1 : 1;
	oftls.addr = addr;
	oftls.gen = gen;
	vr_obj_fault_fn fn = atomic_load(&os->fault_fn);
	void *arg = atomic_load(&os->fault_arg);
	if (o && fn && oftls.count <= MAX_REFAULTS && fn(o, addr, arg) == VR_FAULT_RETRY)
		return 1;
	oftls.addr = NULL;
	if (vr_debug_stderr())
		vr_log_raw("vrange: SIGBUS on a discarded object page\n");
	deliver(addr, ucv);
	return 1;
}
