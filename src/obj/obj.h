/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj.h - purgeable objects (API S19-S25): internal types of obj.c (the
 * handles, their state machine, the object LRU and the fault hook) and
 * obj-alloc.c (chunks, spans, size-class slabs).  doc/design.md has the
 * picture; the rules that matter for correctness are here.
 *
 * GROUPS (S35, obj-group.c)
 *   struct vr_objs is one group's arena: everything below is per group,
 *   so small objects of different groups never share a page and a
 *   group's purge reads only its own LRU.  The ctx lists its groups in
 *   c->groups (purge.c merges them by priority, then age).
 *
 * MEMORY
 *   A group's objects live in chunks: one memfd each, sized and mapped
 *   MAP_SHARED at creation (1 GiB of address space, or one object's
 *   size), MADV_DONTFORK, registered in the registry (kind VR_REG_OBJ) so
 *   that vr_obj_of and the fault path find them without a lock.  A chunk
 *   hands out page spans: objects of a page or more get their own span,
 *   smaller ones live in slabs (a span of 1-16 pages cut into slots of one
 *   size class, slots may straddle a page boundary).  Every page of a
 *   chunk has a page-map word: 0, a large object's handle (tag 1), its
 *   slab (tag 2) or a free span (tag 3).
 *
 * HANDLES
 *   struct vr_obj is 32 bytes.  A small object's handle is a slot of its
 *   slab's handle array; a large object's comes from a pool.  Handles,
 *   slabs and page descriptors are type-stable: they are recycled, never
 *   freed, until the ctx is destroyed, so lock-free readers (vr_obj_of,
 *   the fault path, the purger reading a stale log entry) always read
 *   valid memory and validate what they read.
 *
 * STATE (o->state, one atomic word: age << OS_AGE_SHIFT | flags)
 *   LIVE, PINNED, PURGED, LARGE, PURGING and QUEUED (large objects only).
 *   pin/unpin/free change it with compare-and-swap; nothing else locks.
 *   PINNED|PURGED is ZEROING: a small object's pin clearing its bytes.
 *   The state machine and the rules for racing calls on one handle are
 *   in obj.c, above vr_obj_unpin.
 *   The age is kept relative to the arena's age_base (56 bits: 2 years of
 *   nanoseconds); log entries carry full ages.
 *   NOTIFY and REPORTING (S37): purged while the group had a purge
 *   handler, not yet reported; its handler call is running.  A purge
 *   skips a unit with either (obj-lru.c: "not purged again before the
 *   call returned"); the reporter gives the unit an LRU entry back when
 *   the call returns (obj-group.c).
 *
 * PAGES OF SMALL OBJECTS (struct vr_opage)
 *   pw = number of pins held on objects overlapping the page (a pin, an
 *   allocation in progress or a free in progress each hold one) |
 *   PG_PURGING | PG_DISCARDED | PG_QUEUED.  The purger claims a page by CAS of pw from
 *   0 to PG_PURGING: it can only succeed when no object on the page is
 *   pinned, and a pin that arrives meanwhile increments pw and waits for
 *   PG_PURGING to clear, then sees PURGED in its object's state (set
 *   before the clear).  Large objects do the same with OS_PURGING in the
 *   object's own state word.  A pin's count belongs to the object once
 *   PINNED is set (the next unpin, from any thread, drops it): after that
 *   a thread touches the object's memory only as obj.c's ZEROING allows.
 *
 * LRU (exact S8 order, with lazy entries)
 *   Units are large objects and pages of small objects.  An unpin stamps
 *   the unit with its age (vr_age_after, comparable with the ages of
 *   ranges: a page's age is the largest of its objects').  A unit has an
 *   entry (unit, age) in the LRU when QUEUED is set in its state word;
 *   an unpin that finds QUEUED clear sets it and appends an entry to one
 *   of OBJ_NLOG logs (a thread always uses the same one; ages in a log
 *   grow), under that log's lock.  An unpin that finds QUEUED set appends
 *   nothing and takes no lock: the entry it has is older than the unit
 *   now, which is allowed -- an entry's age is a lower bound of its
 *   unit's.  A pin changes nothing but the object's state.  So a pin+unpin
 *   pair of an intact object touches no log at all, and the logs never
 *   hold more than about one entry per unit.
 *   The purge engine merges the logs' heads by age with the regions'
 *   LRUs and the requeue heap.  For the oldest entry (unit, a) it reads
 *   the unit: younger than a (unpinned again since) -> the entry moves to
 *   the requeue heap with the unit's true age (a lazy decrease-key: when
 *   it comes up again it is in its exact place); pinned, purged or gone
 *   -> the entry is dropped and QUEUED cleared in the same compare-and-
 *   swap (so the next unpin appends again); exactly a -> it is the
 *   oldest unit of all: claim it.  Claimed units whose pages follow each
 *   other in a chunk are discarded together, one trap call and one
 *   fallocate per batch (obj-lru.c, BATCHED DISCARD; OS_PURGING on a
 *   small object: taken by a page of the batch).  Units whose age changes without an
 *   unpin (a free leaves a page whose other objects are unpinned, a
 *   purge skipped a unit) are pushed on the requeue heap as well.
 *
 * PAGE HINTS (a random pin's second cache miss, overlapped)
 *   A small object's pin and unpin touch its handle and then its page
 *   descriptor, whose address is in the handle: two cache misses in a row
 *   when both are cold.  So each 2 MiB metadata block (obj-alloc.c) starts
 *   with a table of 16-bit hints, one per 256 bytes of the block: where
 *   (offset / 32 in the block) the page descriptor of the first handle
 *   in those 256 bytes is, 0 for none (large handles, headers).  Pin and
 *   unpin read the hint of their handle's address (the table is a 128th
 *   of the handles' size, so it mostly stays cached) and prefetch the
 *   two lines from that descriptor on, three or four descriptors, while
 *   the handle's own miss is under way: eight consecutive handles of a
 *   class up to 1 KiB span at most three pages.  A hint is written once,
 *   under span_lock, when its slab is made, and read without a lock: it
 *   only chooses what to prefetch, so a wrong or missing one costs a
 *   miss, never a wrong answer.  Random pairs among 10^6 256-byte
 *   objects: 311-323 ns in four vrbench runs, 440 ns in the run just
 *   before (doc/benchmarks.md, wall).
 *
 * LOCKS (nesting order)
 *   ctx->purge_lock -> log lock | requeue lock (leaves)
 *   class lock -> span_lock (leaf)
 *   No lock is held while object memory is touched by the library.
 */
#ifndef VR_OBJ_H
#define VR_OBJ_H

#include <signal.h>
#include <ucontext.h>

#include "base/sys.h"
#include "ctx.h"

/* ---- the object module's interface for ctx and the purge engine ---- */
#define VR_OBJ_NLOG 16        /* LRU logs (purge sources) per object group */
#define VR_OBJ_EXTRA_MAX 4096 /* side-car bytes per object (S36) */

/* every group of c (inherited: only the child's copies) */
void vr_obj_ctx_destroy(struct vr_ctx *c, bool inherited) _nonnull_();
uint64_t vr_obj_count(struct vr_ctx *c) _nonnull_(); /* lock-free */
/* a group (arena) of c with that priority, one reference held, not yet
 * in c->groups (ctx.c links it) */
struct vr_objs *vr_objs_create(struct vr_ctx *c, int priority, bool is_default) _nonnull_();
/* drop a reference; the last one frees the group and what is left in it */
void vr_objs_put(struct vr_objs *os) _nonnull_();
void vr_objs_free_inherited(struct vr_objs *os) _nonnull_(); /* fork child */
/* a group leaves its ctx: its objects leave the ctx's gauges */
void vr_objs_retire(struct vr_objs *os) _nonnull_();
/* the public group of an arena and back */
struct vr_group *vr_objs_group(struct vr_objs *os) _nonnull_();
struct vr_objs *vr_group_objs(struct vr_group *g) _nonnull_();
struct vr_ctx *vr_objs_ctx(const struct vr_objs *os) _nonnull_();
int vr_objs_priority(const struct vr_objs *os) _nonnull_();
/* vr_obj_new_in's object, arguments checked: 0 or -errno */
int vr_objs_new_obj(struct vr_objs *os, size_t size, size_t extra, struct vr_obj **out) _nonnull_();
/* free every live object of the group (vr_group_destroy of the default) */
void vr_objs_free_all(struct vr_objs *os) _nonnull_();
void vr_obj_set_fault_handler(struct vr_ctx *c, vr_obj_fault_fn fn, void *arg) _nonnull_(1);
int vr_objs_set_purge_handler(struct vr_objs *os, vr_purge_fn fn, void *arg) _nonnull_(1);
/* the group's limit (0 = none) and statistics (S35) */
void vr_objs_set_limit(struct vr_objs *os, size_t bytes) _nonnull_();
/* the limit when the group's unpurged volatile bytes exceed it, else 0 */
size_t vr_objs_over_limit(struct vr_objs *os) _nonnull_();
uint64_t vr_objs_stat(struct vr_objs *os, enum vr_stat which) _nonnull_();
/* vr_obj_unpin without the limits (ctx.c's vr_obj_unpin enforces them):
 * *owner is set to the object's group and *glimit to its limit when
 * bytes became volatile */
int vr_obj_unpin_unit(struct vr_obj *o, struct vr_objs **owner, size_t *glimit) _nonnull_(2, 3);
/* its two steps, for vr_obj_unpin_many: unpin @o with age @t (one
 * stamp, vr_age_after, for a whole batch; 0: a stamp of its own, taken
 * only when @o is pinned and can be unpinned): 0 with *owner its group and
 * *bytes its size when it was pinned, 0 with *owner untouched when it was
 * not, or -errno (nothing changed); then, once per group, the bytes made
 * volatile added to the gauges, *glimit the group's limit */
int vr_obj_unpin_at(struct vr_obj *o, uint64_t t, struct vr_objs **owner, size_t *bytes)
	_nonnull_(3, 4);
void vr_obj_unpinned(struct vr_objs *os, size_t bytes, size_t *glimit) _nonnull_();
uint64_t vr_obj_footprint(struct vr_ctx *c) _nonnull_();
/* the object LRU of a group as purge sources (ctx->purge_lock held): the
 * logs 0 .. VR_OBJ_NLOG - 1 and the requeue heap, source VR_OBJ_NLOG,
 * each with the age of its oldest entry (UINT64_MAX: empty) and a call
 * that pops and purges that entry (bytes reclaimed, 0 for a stale or
 * skipped entry; an object purged while the group has a purge handler
 * goes into *b).  A log's oldest only grows while purge_lock is held; the
 * requeue heap's can fall (a stale entry of another source moves there),
 * see base/source.h.  *vr_obj_src_mask is the engine's: the logs in its heap. */
uint64_t vr_obj_src_oldest(struct vr_objs *os, size_t i) _nonnull_();
int64_t vr_obj_src_purge(struct vr_objs *os, size_t i, struct vr_notify_batch *b) _nonnull_();
uint32_t *vr_obj_src_mask(struct vr_objs *os) _nonnull_();
bool vr_obj_src_pending(struct vr_objs *os) _nonnull_();
/* the units a source purge claimed are discarded in batches (obj-lru.c,
 * BATCHED DISCARD): vr_obj_src_purge's result counts its unit as
 * reclaimed, less the bytes of an earlier batch it had to discard and
 * could not (so it can be negative).  vr_obj_src_flush discards the
 * group's batch and returns the bytes it gave back (base/source.h:
 * flush). */
int64_t vr_obj_src_flush(struct vr_objs *os, struct vr_notify_batch *b) _nonnull_();
void vr_obj_purge_done(struct vr_objs *os) _nonnull_(); /* end of a purge level */
/* trap calls made for the group's objects: discards (one trap call and
 * one fallocate each) and restores (one trap call each); tests, vrbench */
void vr_objs_trap_calls(struct vr_objs *os, uint64_t *discards, uint64_t *restores) _nonnull_();
/* obj-source.c: a group (unit) as a purge source (base/source.h) */
extern const struct vr_source_ops vr_objs_source;
/* call the purge handlers for the batch's objects (no library lock held)
 * and drop the batch's references */
void vr_obj_notify(struct vr_notify_batch *b) _nonnull_();
/* the SIGSEGV handler's hook: 1 if the fault was on object memory and was
 * handled (re-run, handler called, or SIGBUS delivered through deliver) */
int vr_obj_fault(siginfo_t *si, void *uc, void (*deliver)(void *addr, ucontext_t *uc));

#define OBJ_CHUNK_SHIFT 30   /* address space of an ordinary chunk: 1 GiB */
#define OBJ_NLOG VR_OBJ_NLOG /* LRU logs per group */
#define OBJ_MAX_SLAB_PAGES 16
#define OBJ_BATCH 64 /* units one batched discard takes (obj-lru.c) */
/* units a purge run can skip and keep in place: a failed batch and more */
#define OBJ_NSKIPPED (OBJ_BATCH + 32)
#define OBJ_EXTRA_MAX VR_OBJ_EXTRA_MAX
#define OBJ_BATCH_BYTES ((size_t)1 << (OBJ_CHUNK_SHIFT - 4)) /* and bytes, < a chunk */

/* o->state */
#define OS_LIVE 0x1u
#define OS_PINNED 0x2u
#define OS_PURGED 0x4u
#define OS_LARGE 0x8u
#define OS_PURGING 0x10u
#define OS_QUEUED 0x20u
#define OS_NOTIFY 0x40u    /* purged while the group had a purge handler: not yet reported */
#define OS_REPORTING 0x80u /* the handler call reporting its purge is running */
#define OS_AGE_SHIFT 8
static inline uint64_t os_age(uint64_t s)
{
	return s >> OS_AGE_SHIFT;
}

/* page-map tags */
#define PM_LARGE 1u
#define PM_SLAB 2u
#define PM_FREE 3u
#define PM_TAG(v) ((v)&3u)
#define PM_PTR(v) ((void *)((v) & ~(uintptr_t)3))

/* opage->pw */
#define PG_PURGING 0x80000000u
#define PG_DISCARDED 0x40000000u
#define PG_QUEUED 0x20000000u
#define PG_COUNT 0x1fffffffu

struct vr_objs;
struct vr_slab;

struct vr_obj {
	_Atomic uint64_t state;
	uint8_t *ptr;
	void *home;        /* small: its first struct vr_opage; large: its chunk */
	uint64_t size_gen; /* size << 16 | fork generation (low 16 bits) */
} __attribute__((aligned(32)));

struct vr_opage {
	_Atomic uint32_t pw;
	uint32_t nlive;            /* live objects overlapping; class lock */
	_Atomic uint64_t youngest; /* the page's LRU age (0: none) */
	struct vr_slab *slab;      /* immutable while the slab exists */
	struct vr_objs *objs;      /* immutable */
} __attribute__((aligned(32)));

struct vr_chunk {
	uint8_t *base;
	size_t size; /* bytes mapped = memfd size */
	int fd;
	unsigned fork_gen;
	struct vr_objs *objs;
	_Atomic uintptr_t *map; /* one word per page */
	size_t bump;            /* bytes handed out from base; span_lock */
};

struct vr_class {
	pthread_mutex_t lock;
	uint32_t size, npages, nslots;
	uint32_t xstride;        /* side-car bytes per slot (a multiple of 16), or 0 */
	struct vr_slab *partial; /* slabs with a free slot; lock */
} __attribute__((aligned(64)));

struct vr_slab {
	struct vr_chunk *chunk;
	uint8_t *base;
	struct vr_class *cls;
	uint32_t size, nslots, npages, nfree, fresh; /* fresh: slots >= never used */
	struct vr_slab *next, *prev;                 /* cls->partial; cls->lock */
	struct vr_slab *all;                         /* objs->slabs; span_lock */
	uint64_t *freemap;                           /* bit set = slot free */
	struct vr_opage *pages;
	struct vr_obj *objs;
	uint8_t *extra;   /* side-cars: slot i's at extra + i * xstride, or NULL */
	uint32_t xstride; /* immutable: the class's side-car stride */
};

struct vr_fspan { /* a free span; span_lock */
	struct vr_chunk *chunk;
	size_t page, npages;
	struct vr_fspan *next, *prev;
};

struct lentry {
	uintptr_t unit; /* struct vr_obj * | 1, or struct vr_opage * */
	uint64_t age;
};

struct vr_olog {
	pthread_mutex_t lock;
	struct lentry *buf; /* ring of cap entries, len from head */
	size_t cap, head, len;
	_Atomic uint64_t oldest; /* head's age or UINT64_MAX (hint) */
	_Atomic int64_t objects; /* VR_STAT_OBJECTS share */
	/* the group's gauges, sharded as the ctx's (by the thread's log) */
	_Atomic int64_t volatile_bytes, purged_bytes;
} __attribute__((aligned(64)));

/* units the running purge claimed, whose pages follow each other in one
 * chunk, not yet discarded (obj-lru.c, BATCHED DISCARD); purge_lock */
struct vr_opend {
	struct vr_chunk *ch;
	uint8_t *p; /* [p, p + len): exactly the claimed units' pages */
	size_t len, n;
	struct {
		struct lentry e;
		uint64_t s;      /* a large object's state before its claim */
		uint64_t notify; /* OS_NOTIFY or 0 */
	} u[OBJ_BATCH];
};

#define OBJ_NBINS 48
struct vr_objs {
	struct vr_ctx *ctx;
	pthread_mutex_t span_lock; /* chunks, free spans, large handles, slabs */
	struct vr_chunk **chunks;
	size_t nchunks, cap_chunks;
	struct vr_chunk *cur;             /* the chunk being bump-allocated */
	struct vr_fspan *bins[OBJ_NBINS]; /* free spans by size */
	struct vr_obj *free_handles;      /* large handles to reuse (via home) */
	void **blocks;                    /* metadata mappings (slabs, handles), for destroy */
	size_t nblocks, cap_blocks;
	uint8_t *meta_cur; /* the mapping being bump-allocated */
	size_t meta_used;
	struct vr_slab *slabs; /* every slab, for destroy */
	struct vr_class *classes;
	unsigned nclasses;
	/* classes whose slabs have side-car bytes (S36), by stride / 16 - 1:
	 * made on first use under span_lock, then immutable */
	_Atomic(struct vr_class *) xclasses[OBJ_EXTRA_MAX / 16];
	struct vr_olog logs[OBJ_NLOG];
	pthread_mutex_t rq_lock; /* the requeue heap */
	struct lentry *rq;
	size_t rq_len, rq_cap;
	_Atomic uint64_t rq_oldest;
	struct lentry skipped[OBJ_NSKIPPED]; /* skipped by the running purge;
						purge_lock */
	size_t nskipped;
	struct vr_opend pend;                /* purge_lock */
	_Atomic uint64_t ndiscard, nrestore; /* trap calls made (tests, vrbench) */
	_Atomic uint64_t trap_gen;           /* bumped by every arm/disarm */
	_Atomic uint64_t nstuck;             /* discards left trapped, not punched */
	uint64_t age_base;                   /* immutable: ages in states are relative */

	/* the group (S35, S37; obj-group.c) */
	int priority;    /* immutable */
	bool is_default; /* immutable */
	_Atomic size_t limit;
	struct vr_cb_slot purge;            /* the vr_purge_fn and its argument */
	_Atomic uint64_t purges, reclaimed; /* cumulative; purge_lock */
	_Atomic long refs;                  /* c->groups + notification batches */
	uint32_t src_mask;                  /* purge.c: logs in its heap; purge_lock */
};

/* the public handle of a group is its arena */
struct vr_group {
	struct vr_objs objs;
};

/* a large object's handle, with its side-car pointer (S36) */
struct vr_lhandle {
	struct vr_obj o;
	uint8_t *extra;
} __attribute__((aligned(32)));

/* PAGE HINTS (above): metadata blocks are OBJ_META_BYTES, aligned; a hint
 * per 1 << OBJ_HINT_SHIFT bytes, in units of 1 << OBJ_HINT_UNIT bytes */
#define OBJ_META_BYTES VR_HUGE_SIZE
#define OBJ_HINT_SHIFT 8
#define OBJ_HINT_UNIT 5
#define OBJ_HINT_BYTES ((OBJ_META_BYTES >> OBJ_HINT_SHIFT) * sizeof(uint16_t))
/* the metadata block holding p: its page hints are at its start */
static inline uintptr_t obj_meta_block(const void *p)
{
	return (uintptr_t)p & ~(uintptr_t)(OBJ_META_BYTES - 1);
}
static inline uint16_t *obj_hint_slot(const void *handle)
{
	uintptr_t blk = obj_meta_block(handle);
	return (uint16_t *)blk + (((uintptr_t)handle - blk) >> OBJ_HINT_SHIFT);
}
/* prefetch (for writing) the page descriptors o's hint names; o is a
 * handle the library gave out (its block is mapped) */
static inline void obj_prefetch_pages(const struct vr_obj *o)
{
	uintptr_t h = __atomic_load_n(obj_hint_slot(o), __ATOMIC_RELAXED);
	if (h) {
		const char *p = (const char *)(obj_meta_block(o) + (h << OBJ_HINT_UNIT));
		__builtin_prefetch(p, 1);
		__builtin_prefetch(p + 64, 1);
	}
}

static inline size_t obj_size(const struct vr_obj *o)
{
	return (size_t)(o->size_gen >> 16);
}
static inline bool obj_inherited(const struct vr_obj *o)
{
	return (unsigned)(o->size_gen & 0xffff) !=
	       (atomic_load_explicit(&vr_fork_gen, memory_order_relaxed) & 0xffff);
}
static inline struct vr_objs *obj_objs(const struct vr_obj *o, uint64_t s)
{
	return (s & OS_LARGE) ? ((struct vr_chunk *)o->home)->objs
			      : ((struct vr_opage *)o->home)->objs;
}
/* pages of a small object: [*first, *first + *n) */
static inline void obj_pages(const struct vr_obj *o, struct vr_opage **first, unsigned *n)
{
	struct vr_opage *p = o->home;
	uintptr_t pg = (uintptr_t)vr_page_size();
	uintptr_t a = (uintptr_t)o->ptr, e = a + obj_size(o) - 1;
	*first = p;
	*n = 1 + (unsigned)((e & ~(pg - 1)) != (a & ~(pg - 1)));
}

/* the calling thread's share of the ctx's and the group's gauges */
static inline void obj_gauge(struct vr_objs *os, unsigned log, bool purged, int64_t delta)
{
	struct vr_shard *sh = &os->ctx->shards[log % VR_NSHARDS];
	atomic_fetch_add_explicit(purged ? &sh->purged_bytes : &sh->volatile_bytes, (uint64_t)delta,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(purged ? &os->logs[log].purged_bytes
					 : &os->logs[log].volatile_bytes,
				  delta, memory_order_relaxed);
}

/* ---- obj-alloc.c (classes and spans) ---- */
int vr_objs_alloc_init(struct vr_objs *os) _nonnull_();
void vr_objs_alloc_fini(struct vr_objs *os, bool inherited) _nonnull_();
/* a new pinned, zero-filled object with extra zeroed side-car bytes; 0
 * or -errno */
int vr_objs_alloc(struct vr_objs *os, size_t size, size_t extra, struct vr_obj **out) _nonnull_();
/* the side-car of a live object of this generation, or NULL */
void *vr_objs_extra(const struct vr_obj *o, uint64_t state) _nonnull_();
/* every live large object of the group into fn (no lock: the caller
 * owns the group) */
void vr_objs_each_large(struct vr_objs *os, void (*fn)(struct vr_obj *o)) _nonnull_();
/* frees o (live, this generation); gauges were settled by the caller.
 * Freed while its purge handler call runs (OS_REPORTING) or before its
 * purge was reported (OS_NOTIFY), its handle is kept dead (that bit,
 * with OS_LARGE for a large one) until the reporter hands it back with
 * vr_objs_release_handle (obj-alloc.c) */
void vr_objs_release(struct vr_objs *os, struct vr_obj *o) _nonnull_();
void vr_objs_release_handle(struct vr_objs *os, struct vr_obj *o) _nonnull_();
/* a destroyed group's chunks leave the registry (vr_obj_of and the fault
 * path no longer find its objects); its memory stays mapped until the
 * group is freed (a report batch may still hold it) */
void vr_objs_unregister(struct vr_objs *os) _nonnull_();
/* the live object holding addr in chunk ch, or NULL; async-signal-safe */
struct vr_obj *vr_objs_at(struct vr_chunk *ch, uintptr_t addr) _nonnull_();
/* restore the discarded pages of a small object (pins held); 0 or -errno */
int vr_objs_restore_small(struct vr_objs *os, struct vr_obj *o) _nonnull_();
/* arm + punch / disarm a span of chunk memory (purge.c's order) */
/* vr_objs_discard: 0; -errno with nothing changed (the trap undone); or
 * OBJ_DISCARD_STUCK: the pages keep their data but stay trapped (the undo
 * failed too), so the units must be taken as purged (as mem.h's
 * VR_DISCARD_STUCK), and os->nstuck counts it: a purged large object's
 * pages may then hold data after their restore */
#define OBJ_DISCARD_STUCK 1
int vr_objs_discard(struct vr_objs *os, struct vr_chunk *ch, uint8_t *p, size_t len) _nonnull_();
int vr_objs_restore(struct vr_objs *os, uint8_t *p, size_t len) _nonnull_();
bool vr_objs_zeroed(struct vr_objs *os, struct vr_chunk *ch, uint8_t *p, size_t len) _nonnull_();
/* wait until PG_PURGING is clear after taking a pin on page p */
void vr_opage_hold(struct vr_opage *p) _nonnull_();
/* the same, but with self (the purge is this thread's, interrupted by a
 * signal handler) returns false instead of waiting (the pin is held) */
bool vr_opage_hold_unless(struct vr_opage *p, bool self) _nonnull_();
static inline void vr_opage_drop(struct vr_opage *p)
{
	atomic_fetch_sub(&p->pw, 1);
}
/* the slots of slab s overlapping page index pi: [*lo, *hi] */
void vr_slab_page_slots(const struct vr_slab *s, size_t pi, uint32_t *lo, uint32_t *hi) _nonnull_();

/* ---- obj-lru.c ---- */
/* page p (class lock held, one pin held by the caller) may have become a
 * unit with another age: recompute its age and requeue it */
void vr_obj_page_requeue(struct vr_objs *os, struct vr_opage *p) _nonnull_();
/* the same for the n pages of one object, taking their class lock; the
 * caller's pin on each, held across the requeue, is then dropped
 * (vr_opage_drop_requeued) */
void vr_obj_pages_requeue(struct vr_objs *os, struct vr_opage *p, unsigned n) _nonnull_();
/* drops the caller's pin on p after a requeue, giving the page an entry
 * again if a purge dropped it meanwhile */
void vr_opage_drop_requeued(struct vr_objs *os, struct vr_opage *p) _nonnull_();
/* an entry for a unit whose QUEUED the caller just set; 0 or -ENOMEM */
int vr_obj_lru_append(struct vr_objs *os, uintptr_t unit, uint64_t age) _nonnull_();
void vr_obj_rq_push(struct vr_objs *os, uintptr_t unit, uint64_t age) _nonnull_();
int vr_obj_rq_reserve(struct vr_objs *os, size_t n) _nonnull_();
void vr_obj_lru_fini(struct vr_objs *os, bool inherited) _nonnull_();

/* ---- obj.c ---- */
/* the thread's log index */
unsigned vr_obj_log_index(void);

#endif
