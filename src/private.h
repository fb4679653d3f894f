/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * private.h - internal types shared by the subsystems of libvrange
 *
 * LOCKING (the rules every file must respect; mechanics in lock.h)
 *
 *   vr_global_lock    one-time setup; inherited lists in a fork child.
 *   ctx->purge_lock   one purge engine run per ctx at a time (vr_ctx_purge,
 *                     limit, pressure, monitor); also held by region
 *                     creation (it reserves room in the purge heap) and
 *                     by vr_region_destroy / vr_ctx_destroy, so that a
 *                     purge never sees a region being freed.
 *   ctx->lock         the ctx's region list (regions, nregions).
 *   region->lock      the region's range map, fault handler, purge cursor.
 *   obj class, span   an object size class; the arena's chunks (obj.h).
 *   shm list          this process's shared-state mappings (mem-shared.c).
 *   registry wlock    registry writers (registry.c).
 *   obj lru           an object LRU log, the requeue heap (obj.h), leaves.
 *   log_lock          the log function (log.c), a leaf.
 *
 *   Order: the ten ranks of base/lock.h (global -> purge_lock ->
 *   ctx->lock -> region->lock -> obj class -> obj span -> shm list ->
 *   registry -> obj lru -> log), checked in builds without NDEBUG.  Every lock is taken with
 *   vr_lock()/vr_unlock(), never pthread_mutex_lock() directly (the
 *   atfork handlers are the exception: they run outside any call).
 *   At most ONE region lock per signal level.  vr_mark (ctx.c) enforces
 *   the ctx limit after vr_region_mark dropped the region lock.  Code that may run in a signal
 *   handler checks vr_held() before blocking on a lock.  The purge path
 *   allocates nothing.  Gauges and counters are atomics in the ctx (no
 *   lock).
 *
 *   The SIGSEGV handler (fault.c; and its SIGBUS entry under the
 *   userfaultfd backend, which shares the path) takes no lock in the
 *   common case.  It
 *   reads the region's map under a seqlock: region->seq is odd while a
 *   thread holds the region lock (vr_region_lock/unlock bump it), and a
 *   reader retries until it read the map with the same even seq before
 *   and after.  Map nodes and records live in the map's arenas until the
 *   region is destroyed, so a reader racing a writer follows stale but
 *   valid pointers, bounded and then discarded (the walk and its rules:
 *   vr_map_lookup_racy in range-map.h).  While a purge holds the lock
 *   (trap armed, hole being punched) a faulting thread waits for the seq
 *   to turn even: it then sees the range purged, or intact with the trap
 *   removed.  A reader that keeps colliding with writers (64 tries) takes
 *   the region lock instead, so a fault never starves behind a busy
 *   region; it never does so for a lock its own thread holds (vr_held):
 *   an asynchronous signal handler touching volatile memory while its
 *   thread holds that region's lock gets SIGBUS instead.
 *
 * FORK (hook table and generations: base/fork.h)
 *
 *   vr_fork_gen is bumped in the child (pthread_atfork).  Objects created
 *   under another generation are inherited: their locks may be held by
 *   threads that do not exist in the child, so the child never takes them;
 *   only destroy is allowed, and it frees memory and closes fds without
 *   locking, unmapping (MADV_DONTFORK: nothing is mapped) or joining.
 *   A module with a process-wide lock or per-thread state registers a
 *   struct vr_atfork from lib.c.
 */
#ifndef VR_PRIVATE_H
#define VR_PRIVATE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>
#include <sys/types.h>

#include "vrange.h"
#include "base/fork.h"
#include "base/lock.h"
#include "base/macro.h"
#include "base/sys.h"
#include "mem/mem.h"
#include "range-map.h"

struct vr_monitor;
struct vr_objs;
struct vr_kind_ops;
struct vr_shm;
struct vr_shm_map;
struct vr_trap_ops;
struct vr_coop_member;

/*
 * Gauges (ranges, unpurged and purged volatile bytes) are sharded: each
 * region adds to one of VR_NSHARDS cache-line-sized shards of its ctx,
 * chosen round-robin at creation, and readers sum the shards.  Two
 * threads working on two regions then never bounce a shared cache line
 * (S16: no serialization between regions in the intact case).
 */
#define VR_NSHARDS 16
struct vr_shard {
	_Atomic uint64_t ranges, volatile_bytes, purged_bytes;
	_Atomic int64_t objects; /* live objects (obj.c) */
} __attribute__((aligned(64)));

/* one entry of the purge engine's heap of regions (purge.c); r == NULL:
 * LRU log src of the object group os (obj-lru.c) */
struct vr_cand {
	uint64_t age;
	struct vr_region *r;
	struct vr_objs *os;
	size_t src;
};

/* priorities (S35): ctx-wide purges take 0 first ... VR_NPRIO - 1 last;
 * the ranges of regions have VR_RANGE_PRIORITY */
#define VR_NPRIO 8
#define VR_RANGE_PRIORITY 4
#define VR_OBJ_NLOG 16        /* LRU logs (purge sources) per object group */
#define VR_OBJ_EXTRA_MAX 4096 /* side-car bytes per object (S36) */

/* Objects purged while their group had a purge handler (S37), collected
 * by a purge run under purge_lock and reported after it is released
 * (vr_obj_notify): one entry per purged unit (a large object or a page of
 * small ones), which holds a reference on its group.  A run stops when
 * the batch is full; vr_ctx_purge_in then reports and runs again. */
#define VR_NOTIFY_BATCH 64
struct vr_notify_batch {
	size_t n;
	bool full; /* the run stopped because the batch was full */
	struct {
		uintptr_t unit;
		struct vr_objs *os;
	} e[VR_NOTIFY_BATCH];
};

struct vr_ctx {
	pthread_mutex_t purge_lock;
	pthread_mutex_t lock;
	struct vr_region *regions; /* protected by lock; doubly linked */
	size_t nregions;           /* protected by lock */
	struct vr_cand *heap;      /* protected by purge_lock: room for every region
				      and every group's logs */
	size_t heap_cap;           /* protected by purge_lock */
	/* object groups (S35): written under purge_lock and lock, read under
	 * either; groups[0] is the default group (created with the ctx) */
	struct vr_objs **groups;
	size_t ngroups, groups_cap;
	_Atomic bool limit_stuck; /* the last purge could not reach its goal */
	unsigned fork_gen;        /* vr_fork_gen at creation; immutable */
	unsigned flags;           /* immutable */

	/* gauges: sharded atomics, updated under the region lock that
	 * changed them, read without locks (vr_ctx_gauge) */
	struct vr_shard shards[VR_NSHARDS];
	_Atomic unsigned next_shard;
	/* cumulative counters: slow paths only (purge, fault, pressure) */
	_Atomic uint64_t reclaimed_bytes, purges, faults, pressure_events, skipped;
	_Atomic uint64_t nregions_stat;
	_Atomic unsigned nshared;      /* shared regions (S29: gauges synced) */
	_Atomic uint64_t skipped_busy; /* S32: purges skipped, a mapper did not arm */
	_Atomic uint64_t repairs;      /* S30: shared states repaired after a death */
	_Atomic size_t limit;          /* 0 = none */

	struct vr_monitor *monitor;            /* owned by monitor.c; NULL if none */
	struct vr_objs *objs;                  /* obj.c: the default group; immutable */
	_Atomic(vr_obj_fault_fn) obj_fault_fn; /* every group's objects (S24) */
	_Atomic(void *) obj_fault_arg;
	_Atomic int monitor_source;       /* enum vr_monitor_source: the pressure source */
	_Atomic unsigned monitor_sources; /* bit (1 << source) per source running */

	/* S34, written by the monitor's limit watcher (monitor-limit.c) */
	_Atomic size_t budget;         /* 0 = none; else keep volatile bytes <= it */
	_Atomic uint64_t memory_limit; /* the limit watched, 0 = none */
	_Atomic uint64_t limit_events, limit_purges, limit_latency_ns;
	_Atomic uint64_t limit_usage, limit_file; /* A3: usage counted, cache left out */
};

/* S10 + S34: what vr_mark keeps the unpurged volatile bytes within: the
 * smaller of the application's limit and the monitor's budget, 0 = none.
 * Two relaxed loads, no system call. */
static inline size_t vr_ctx_effective_limit(struct vr_ctx *c)
{
	size_t a = atomic_load_explicit(&c->limit, memory_order_relaxed);
	size_t b = atomic_load_explicit(&c->budget, memory_order_relaxed);
	if (!a || (b && b < a))
		return b;
	return a;
}

struct vr_region {
	pthread_mutex_t lock;
	struct vr_map *map; /* &own_map, or a shared state's (shared.h);
					  protected by the region lock */
	struct vr_map own_map;
	vr_fault_fn fault_fn;          /* protected by lock */
	void *fault_arg;               /* protected by lock */
	struct vr_region *prev, *next; /* ctx->regions, protected by ctx->lock */
	struct vr_ctx *ctx;            /* immutable */
	uint8_t *base;                 /* immutable */
	size_t size;                   /* immutable: bytes given at creation */
	size_t map_size;               /* immutable: page rounded */
	int fd;                        /* immutable; -1: anonymous */
	unsigned fork_gen;             /* immutable */
	_Atomic uint64_t oldest_age;   /* LRU head's age or UINT64_MAX (hint) */
	_Atomic uint64_t trap_gen;     /* new unique value at every arm/disarm in the
					  region (vr_trap_gen_bump) */
	_Atomic unsigned seq;          /* seqlock for the fault path: odd while locked */
	struct vr_shard *shard;        /* immutable: where this region's gauges go */
	uint64_t last_age;             /* protected by lock: youngest age handed out */
	bool lru_added;                /* protected by lock: a range joined the LRU */
	_Atomic bool used_prot;        /* guard backend: some range used mprotect */
	dev_t dev;                     /* immutable: the memfd's st_dev ... */
	ino_t ino;                     /* ... and st_ino (S33: one region per file) */
	uint64_t nranges, volatile_bytes, purged_bytes; /* protected by lock: this
					region's share of the gauges */
	/* immutable: memfd, anonymous or adopted memory (kind.h), and the
	 * protection of its accessible pages (PROT_READ|PROT_WRITE, or with
	 * PROT_EXEC for an adopted span that had it) */
	const struct vr_kind_ops *kind;
	int prot;
	int trap_fd;                    /* immutable after attach: the uffd backend's userfaultfd */
	const struct vr_trap_ops *trap; /* immutable: how this region's pages trap */

	/* VR_REGION_SHARED (shared.h); for other regions shm is NULL and
	 * lockp/seqp point at lock/seq above */
	struct vr_shm *shm;            /* immutable: the file's state, mapped */
	struct vr_shm_map *shm_map;    /* immutable: this process's mapping of it */
	pthread_mutex_t *lockp;        /* immutable: the region lock */
	_Atomic unsigned *seqp;        /* immutable: the region's seqlock */
	struct vr_coop_member *coop_m; /* immutable after attach: the guard protocol's
					  membership (trap-coop.c), or NULL */
	bool shm_primary;              /* protected by ctx->lock: the region of its file that
					counts the file in the ctx gauges (S29) */
} __attribute__((aligned(64)));        /* regions used by different threads share no line */

enum vr_gauge { VR_G_RANGES, VR_G_VOLATILE, VR_G_PURGED };
/* a gauge: the sum of the shards (relaxed, no lock) */
static inline uint64_t vr_ctx_gauge(struct vr_ctx *c, enum vr_gauge g)
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
/* a context without monitor, trap backend or handler (lib.c adds them) */
int vr_ctx_create(unsigned flags, struct vr_ctx **out) _nonnull_();
/* its regions, its object arena, its locks and memory (inherited: only
 * what a fork child may touch, see vr_inherited_region) */
void vr_ctx_free(struct vr_ctx *c, bool inherited) _nonnull_();
enum vr_purge_goal {
	VR_PURGE_BYTES,    /* reclaim at least n bytes */
	VR_PURGE_VOLATILE, /* until unpurged volatile bytes <= n */
};
/* purge_lock taken (-EDEADLK if this thread holds it or c->lock), shared
 * gauges synced, then vr_purge_run, purge_lock released, then the purge
 * handlers called (vr_obj_notify), repeated while the notification batch
 * filled up: bytes reclaimed or -errno.  only: a group's own purge (its
 * objects, its gauge for VR_PURGE_VOLATILE), NULL: the whole ctx */
ssize_t vr_ctx_purge_in(struct vr_ctx *c, struct vr_objs *only, enum vr_purge_goal goal, uint64_t n)
	_nonnull_(1);
static inline ssize_t vr_ctx_purge_lru(struct vr_ctx *c, enum vr_purge_goal goal, uint64_t n)
{
	return vr_ctx_purge_in(c, NULL, goal, n);
}
void vr_ctx_sync_shared(struct vr_ctx *c) _nonnull_();

/* ---- age.c: LRU age stamps ---- */
/* a stamp younger than every stamp this thread got before, than *last
 * (updated; the caller serializes *last) and than every mark that
 * happened before this call in real time */
uint64_t vr_age_after(uint64_t *last) _nonnull_();
uint64_t vr_age_after_clock(uint64_t *last) _nonnull_(); /* always the clock */
void vr_age_init(void);

/* ---- fork: base/fork.h ---- */
static inline bool vr_inherited_ctx(const struct vr_ctx *c)
{
	return vr_gen_inherited(c->fork_gen);
}
static inline bool vr_inherited_region(const struct vr_region *r)
{
	return vr_gen_inherited(r->fork_gen);
}

/* ---- region.c ---- */
/* vr_mark without the limit (ctx.c's vr_mark enforces it): *added says a
 * purgeable range was added.  VR_INTACT/VR_PURGED or -errno. */
int vr_region_mark(struct vr_region *r, size_t off, size_t len, bool *added) _nonnull_(4);
/* is anything in [off, off + len) purged?  Takes the region lock. */
bool vr_region_purged_in(struct vr_region *r, size_t off, size_t len) _nonnull_();
/* the live region containing [addr, addr + len) and the offset; -EINVAL */
int vr_region_span_of(void *addr, size_t len, struct vr_region **rp, size_t *off) _nonnull_(3, 4);
void vr_region_lock(struct vr_region *r) _nonnull_();
void vr_region_unlock(struct vr_region *r) _nonnull_();
void vr_region_lock_raw(struct vr_region *r) _nonnull_();
void vr_region_unlock_raw(struct vr_region *r) _nonnull_();
/* len bytes of the region's volatile ranges were purged (lock held) */
void vr_region_account_purge(struct vr_region *r, uint64_t len) _nonnull_();
/* the region's LRU oldest age (a hint: purge.c re-reads under the lock) */
uint64_t vr_region_oldest(const struct vr_region *r) _nonnull_();
void vr_region_publish_oldest(struct vr_region *r) _nonnull_(); /* lock held */
/* ends the ranges of r, freeing nodes and subtracting the ctx gauges */
void vr_region_release(struct vr_region *r, bool inherited) _nonnull_();
/* the public create calls (arguments checked as documented) up to a
 * region that owns its fd and mapping, trap attached, neither registered
 * nor linked: ctx.c registers and links it, or closes it */
int vr_region_create(struct vr_ctx *ctx, const char *name, size_t size, unsigned flags,
		     struct vr_region **out);
int vr_region_create_adopt(struct vr_ctx *ctx, void *addr, size_t len, unsigned flags,
			   struct vr_region **out);
int vr_region_create_from_fd(struct vr_ctx *ctx, int fd, unsigned flags, struct vr_region **out);
/* releases a region that is not (or no longer) registered nor linked */
void vr_region_close(struct vr_region *r, bool inherited) _nonnull_();

/* ---- purge.c: the purge engine ---- */
/* purges in S35 order (priority, then S8 age) until the goal is met, the
 * objects' purges it made collected in *b; bytes reclaimed.  only: the
 * objects of that group alone.  purge_lock held and shared gauges synced
 * (vr_ctx_purge_in does both).  Never allocates. */
ssize_t vr_purge_run(struct vr_ctx *ctx, struct vr_objs *only, enum vr_purge_goal goal, uint64_t n,
		     struct vr_notify_batch *b) _nonnull_(1, 5);
/* room in the purge heap for n regions and the ctx's groups; called
 * with purge_lock held */
int vr_purge_reserve(struct vr_ctx *ctx, size_t n) _nonnull_();
void vr_purge_init(void);                      /* at every vr_ctx_new */
extern const struct vr_atfork vr_purge_atfork; /* child: new purge generations */

/* ---- registry.c: address -> region, lock-free for readers ---- */
/* 0, -ENOMEM, -EBUSY when a live region maps the same file (S33), or
 * -EEXIST if [base, base + size) overlaps a live region (an adopted span) */
int vr_registry_add(struct vr_region *r) _nonnull_();
void vr_registry_remove(struct vr_region *r) _nonnull_();
struct vr_region *vr_registry_lookup(const void *addr); /* async-signal-safe */
/* entries of other kinds (object chunks, obj.c): lookup by kind */
enum { VR_REG_REGION, VR_REG_OBJ };
int vr_registry_add_kind(void *p, const void *base, size_t size, int kind) _nonnull_();
void vr_registry_remove_any(void *p) _nonnull_();
void *vr_registry_find(const void *addr, int kind); /* async-signal-safe */
/* some live region shares a byte with [addr, addr + len) */
bool vr_registry_overlaps(const void *addr, size_t len);
void vr_registry_atfork_prepare(void);
void vr_registry_atfork_parent(void);
void vr_registry_atfork_child(void);

/* ---- obj*.c: objects and their groups (obj.h has the rest) ---- */
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
uint64_t vr_obj_footprint(struct vr_ctx *c) _nonnull_();
/* the object LRU of a group as purge sources (ctx->purge_lock held): the
 * logs 0 .. VR_OBJ_NLOG - 1 and the requeue heap, source VR_OBJ_NLOG,
 * each with the age of its oldest entry (UINT64_MAX: empty) and a call
 * that pops and purges that entry (bytes reclaimed, 0 for a stale or
 * skipped entry; an object purged while the group has a purge handler
 * goes into *b).  A log's oldest only grows while purge_lock is held; the
 * requeue heap's can fall (a stale entry of another source moves there),
 * see purge.c.  *vr_obj_src_mask is purge.c's: the logs in its heap. */
uint64_t vr_obj_src_oldest(struct vr_objs *os, size_t i) _nonnull_();
int64_t vr_obj_src_purge(struct vr_objs *os, size_t i, struct vr_notify_batch *b) _nonnull_();
/* the units a source purge claimed are discarded in batches (obj-lru.c,
 * BATCHED DISCARD): vr_obj_src_purge's result counts its unit as
 * reclaimed, less the bytes of an earlier batch it had to discard and
 * could not (so it can be negative).  vr_obj_src_flush discards the
 * group's batch and returns the bytes it gave back; call it before the
 * run stops, before a region step and before vr_obj_purge_done. */
int64_t vr_obj_src_flush(struct vr_objs *os, struct vr_notify_batch *b) _nonnull_();
uint32_t *vr_obj_src_mask(struct vr_objs *os) _nonnull_();
void vr_obj_purge_done(struct vr_objs *os) _nonnull_(); /* end of a purge level */
/* trap calls made for the group's objects: discards (one trap call and
 * one fallocate each) and restores (one trap call each); tests, vrbench */
void vr_objs_trap_calls(struct vr_objs *os, uint64_t *discards, uint64_t *restores) _nonnull_();
/* call the purge handlers for the batch's objects (no library lock held)
 * and drop the batch's references */
void vr_obj_notify(struct vr_notify_batch *b) _nonnull_();
/* the SIGSEGV handler's hook: 1 if the fault was on object memory and was
 * handled (re-run, handler called, or SIGBUS delivered through deliver) */
int vr_obj_fault(siginfo_t *si, void *uc, void (*deliver)(void *addr, ucontext_t *uc));
/* ---- callback.c: waiting for application callbacks in flight ---- */
unsigned long vr_cb_enter(void); /* async-signal-safe */
void vr_cb_leave(unsigned long e);
/* returns once no callback section entered before the call is running;
 * returns at once when called from inside a callback */
void vr_cb_synchronize(void);
void vr_cb_atfork_child(void);

/* ---- fault.c ---- */
int vr_fault_install(void);                    /* installs the SIGSEGV handler once */
extern const struct vr_atfork vr_fault_atfork; /* child: fill slots reset */

/* ---- monitor.c (and monitor.h, mon-*.c) ---- */
/* start the monitor thread of ctx (ctx->monitor); 0 or -errno (thread
 * creation); a missing pressure source is not an error */
int vr_monitor_start(struct vr_ctx *ctx) _nonnull_();
/* stop and join (if inherited: only release fds and memory) */
void vr_monitor_stop(struct vr_ctx *ctx, bool inherited) _nonnull_();

/* ---- log.c ---- */
/* VRANGE_DEBUG=1 (bit 0) or a log function set (bit 1): log lines wanted */
extern _Atomic int vr_debug;
/* VRANGE_DEBUG=1: fatal-fault lines go to stderr from the signal handler */
static inline bool vr_debug_stderr(void)
{
	return atomic_load_explicit(&vr_debug, memory_order_relaxed) & 1;
}
void vr_log_init(void);
void vr_log_atfork_prepare(void);
void vr_log_atfork_parent(void);
void vr_log_atfork_child(void);
void vr_log(const char *fmt, ...) _printf_(1, 2);
void vr_warn(const char *fmt, ...) _printf_(1, 2); /* VR_LOG_WARNING, always shown */
#define vr_dbg(...)                                                                                \
	do {                                                                                       \
		if (_unlikely_(atomic_load_explicit(&vr_debug, memory_order_relaxed)))             \
			vr_log(__VA_ARGS__);                                                       \
	} while (0)
/* async-signal-safe: writes a preformatted string to stderr */
void vr_log_raw(const char *s) _nonnull_();

#endif
