/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shared.c - the state of a VR_REGION_SHARED memfd: layout, creation,
 * joining, the robust lock and its repair, the gauges (design: shared.h)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "vrange.h"
#include "base/inject.h"
#include "base/lock.h"
#include "base/sys.h"
#include "base/log.h"
#include "mem/mem.h"
#include "ctx.h" /* r->ctx counters: to move into base/acct.h (layering S15) */
#include "mem/mem-shared.h"

#define TAIL_BYTES ((uint64_t)sizeof(struct vr_shm_tail))

static uint64_t layout_id(void)
{
	return (uint64_t)sizeof(struct vr_shm) << 32 | (uint64_t)sizeof(struct vr_map);
}

static uint64_t tail_hash(const struct vr_shm_tail *t)
{
	const uint64_t *w = (const uint64_t *)t;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < offsetof(struct vr_shm_tail, check) / 8; i++) {
		h ^= w[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

static uint64_t round_up(uint64_t x, uint64_t pg)
{
	return (x + pg - 1) & ~(pg - 1);
}

void vr_shared_layout(uint64_t data_size, struct vr_shm_tail *t)
{
	uint64_t pg = (uint64_t)1 << vr_page_shift();
	uint64_t map_size = round_up(data_size, pg);
	uint64_t cap = (map_size >> vr_page_shift()) / 16;
	if (cap < VR_SHM_MIN_CAP)
		cap = VR_SHM_MIN_CAP;
	*t = (struct vr_shm_tail){
		.magic = VR_SHM_MAGIC,
		.layout = layout_id(),
		.data_size = data_size,
		.map_size = map_size,
		.state_size = round_up(
			offsetof(struct vr_shm, map) + vr_map_fixed_bytes(cap) + TAIL_BYTES, pg),
		.page_size = pg,
		.cap = cap,
	};
	t->check = tail_hash(t);
}

int vr_shared_probe(int fd, const struct stat *st, struct vr_shm_tail *t)
{
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_GROW | F_SEAL_SHRINK)) != (F_SEAL_GROW | F_SEAL_SHRINK))
		return 0; /* not sealable, or resizable: not ours */
	if (st->st_size < (off_t)TAIL_BYTES)
		return 0;
	ssize_t n = pread(fd, t, sizeof(*t), st->st_size - (off_t)TAIL_BYTES);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(*t) || t->magic != VR_SHM_MAGIC || t->check != tail_hash(t))
		return 0;
	struct vr_shm_tail want;
	vr_shared_layout(t->data_size, &want);
	if (memcmp(&want, t, sizeof(want)) != 0 ||
	    t->map_size + t->state_size != (uint64_t)st->st_size)
		return -EPROTO; /* a shared state of another layout or page size */
	return 1;
}

int vr_shared_create(const char *name, size_t size, struct vr_shm_tail *t)
{
	vr_shared_layout(size, t);
	uint64_t total = t->map_size + t->state_size;
	if (total < t->map_size || total > (uint64_t)INT64_MAX)
		return -EINVAL;
	/* every page is committed below, and a memfd's tmpfs has no size
	 * limit: a size the system's RAM and swap cannot hold would not
	 * fail, it would run the OOM killer, which picks other processes
	 * (an unmapped file's pages are nobody's).  Refuse it first, as
	 * tmpfs refuses a fallocate beyond its mount's size. */
	struct sysinfo si;
	if (sysinfo(&si) == 0 && si.mem_unit != 0 &&
	    total / si.mem_unit > (uint64_t)si.totalram + (uint64_t)si.totalswap)
		return -ENOMEM;
	/* nor beyond what the memory cgroup's limit leaves: the charge
	 * would not fail either, its OOM killer would pick a process of the
	 * cgroup, often this one (best effort: others may charge meanwhile) */
	uint64_t (*room)(void) = __atomic_load_n(&vr_shared_headroom_fn, __ATOMIC_RELAXED);
	if (room && total > room())
		return -ENOMEM;
	int fd = vr_memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	int err = 0;
	struct vr_shm *s = MAP_FAILED;
	/* every page present: the uffd trap (S32) makes a hole fault, and
	 * only purges may make holes */
	if (vr_ftruncate(fd, (off_t)total) < 0 ||
	    vr_fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)total) < 0) {
		err = -errno;
		goto fail;
	}
	s = vr_mmap(NULL, t->state_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)t->map_size);
	if (s == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	err = -pthread_mutex_init(&s->lock, &a);
	pthread_mutexattr_destroy(&a);
	if (err < 0)
		goto fail;
	vr_map_init_fixed(&s->map, vr_page_shift(), s, t->cap);
	atomic_init(&s->oldest_age, UINT64_MAX);
	s->layout = layout_id();
	atomic_thread_fence(memory_order_release);
	s->magic = VR_SHM_MAGIC;
	munmap(s, t->state_size);
	s = MAP_FAILED;
	/* the tail last: a file is recognised only once its state is whole */
	ssize_t n = pwrite(fd, t, sizeof(*t), (off_t)(total - TAIL_BYTES));
	if (n != (ssize_t)sizeof(*t)) {
		err = n < 0 ? -errno : -EIO; /* short: errno was not set */
		goto fail;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		err = -errno;
		goto fail;
	}
	return fd;
fail:
	if (s != MAP_FAILED)
		munmap(s, t->state_size);
	close(fd);
	return err;
}

/* ---- this process's mappings of shared states, one per file ----
 * shm_lock (rank VR_RANK_SHM) guards the list; a child of fork() gets it
 * re-initialised (its fork hook) and its inherited entries are
 * only freed (their mappings are MADV_DONTFORK: not in the child). */
static pthread_mutex_t shm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vr_shm_map *shm_list;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&shm_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&shm_lock);
}

static void atfork_child(void)
{
	pthread_mutex_init(&shm_lock, NULL);
	vr_pages_atfork_child(); /* mem's other process-wide state */
}

const struct vr_atfork vr_shared_atfork = { VR_RANK_SHM, atfork_prepare, atfork_parent,
					    atfork_child };

int vr_shared_get(int fd, const struct stat *st, const struct vr_shm_tail *t,
		  struct vr_shm_map **out)
{
	unsigned gen = atomic_load(&vr_fork_gen);
	int err = 0;
	vr_lock(&shm_lock, VR_RANK_SHM);
	struct vr_shm_map *sm = shm_list;
	while (sm && !(sm->dev == st->st_dev && sm->ino == st->st_ino && sm->fork_gen == gen))
		sm = sm->next;
	if (sm) {
		sm->refs++;
		goto out;
	}
	sm = calloc(1, sizeof(*sm));
	if (!sm) {
		err = -ENOMEM;
		goto out;
	}
	struct vr_shm *s = vr_mmap(NULL, t->state_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
				   (off_t)t->map_size);
	if (s == MAP_FAILED) {
		err = -errno;
		free(sm);
		goto out;
	}
	if (s->magic != VR_SHM_MAGIC || s->layout != layout_id() || s->map.cap != t->cap) {
		err = -EPROTO;
	} else if (vr_madvise(s, t->state_size, MADV_DONTFORK) < 0) {
		err = -errno;
	}
	if (err < 0) {
		munmap(s, t->state_size);
		free(sm);
		goto out;
	}
	*sm = (struct vr_shm_map){ .next = shm_list,
				   .shm = s,
				   .state_size = t->state_size,
				   .dev = st->st_dev,
				   .ino = st->st_ino,
				   .refs = 1,
				   .fork_gen = gen };
	shm_list = sm;
out:
	vr_unlock(&shm_lock);
	if (!err)
		*out = sm;
	return err;
}

/* inherited (a fork child, vr_global_lock held): only the child's copy of
 * the list entry is freed, under shm_lock all the same: the fork hook
 * re-created it, and another thread of the child may be linking or
 * unlinking its own files' entries in the same list (without it a child
 * that destroyed an inherited shared region while another of its threads
 * made one freed an entry the other had just linked behind) */
void vr_shared_put(struct vr_shm_map *sm, bool inherited)
{
	vr_lock(&shm_lock, VR_RANK_SHM);
	if (--sm->refs == 0) {
		struct vr_shm_map **pp = &shm_list;
		while (*pp && *pp != sm)
			pp = &(*pp)->next;
		if (*pp)
			*pp = sm->next;
		if (!inherited)
			munmap(sm->shm, sm->state_size);
		free(sm);
	}
	vr_unlock(&shm_lock);
}

/* ---- the lock, and the repair after a holder died ---- */

/* the file's gauges recounted from the map (lock held, the map rebuilt) */
static void recount(struct vr_shm *s)
{
	struct vr_map *m = &s->map;
	uint64_t n = 0, vol = 0, pur = 0;
	for (struct vr_range *x = vr_map_first_end_after(m, 0); x; x = vr_map_next(m, x)) {
		n++;
		if (vr_range_purged(x))
			pur += x->end - x->start;
		else
			vol += x->end - x->start;
	}
	atomic_store_explicit(&s->nranges, n, memory_order_relaxed);
	atomic_store_explicit(&s->volatile_bytes, vol, memory_order_relaxed);
	atomic_store_explicit(&s->purged_bytes, pur, memory_order_relaxed);
}

/* Every purged range's whole pages punched again, each only after every
 * mapping traps them (shared.h, TRAPPED HOLES: the dead holder may have
 * published a purge no member has armed yet, or had members disarm a
 * range it then did not trim).  Once a member does not answer (stopped),
 * nothing more is asked or punched: each request would cost the timeout,
 * and what is left is safe as it is (data, or holes (T) already traps),
 * with the ranges purged.  A failed punch is as safe: the pages keep
 * their data behind the markers.  Lock held, the map rebuilt. */
static void rearm_and_repunch(struct vr_region *r)
{
	struct vr_map *m = &r->shm->map;
	uint64_t left = 0;
	for (struct vr_range *x = vr_map_first_end_after(m, 0); x; x = vr_map_next(m, x)) {
		uint64_t p0, p1;
		if (!vr_range_purged(x) ||
		    !vr_whole_pages(x->start, x->end, m->page_shift, &p0, &p1))
			continue;
		if (left || vr_trap_coop_rearm(r, p0, p1 - p0) < 0) {
			left++;
			continue;
		}
		if (vr_fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p0,
				 (off_t)(p1 - p0)) < 0)
			vr_dbg("repair: punch of [%llu, %llu) failed: %s", (unsigned long long)p0,
			       (unsigned long long)p1, strerror(errno));
	}
	if (left)
		vr_dbg("repair: %llu purged ranges left unpunched: a mapper did not arm",
		       (unsigned long long)left);
}

int (*vr_shared_unmark_fn)(struct vr_region *r, uint64_t a, uint64_t b);
uint64_t (*vr_shared_headroom_fn)(void);

/* an unmark that had begun to fill holes when its holder died: finish
 * it (shared.h, DEATH); lock held, the map rebuilt */
static void complete_unmark(struct vr_region *r)
{
	struct vr_shm *s = r->shm;
	uint64_t a = atomic_load_explicit(&s->unmark_lo, memory_order_relaxed);
	uint64_t b = atomic_load_explicit(&s->unmark_hi, memory_order_relaxed);
	int (*fn)(struct vr_region *, uint64_t, uint64_t) =
		__atomic_load_n(&vr_shared_unmark_fn, __ATOMIC_RELAXED);
	if (a < b && b <= r->size && fn) {
		int rc = fn(r, a, b);
		/* failed: the bytes stay purged, their pages punched again
		 * below once every mapping traps them */
		if (rc < 0)
			vr_dbg("repair: unmark of [%llu, %llu) not completed: %s",
			       (unsigned long long)a, (unsigned long long)b, strerror(-rc));
	}
	atomic_store_explicit(&s->unmark_lo, 0, memory_order_relaxed);
	atomic_store_explicit(&s->unmark_hi, 0, memory_order_relaxed);
}

/* EOWNERDEAD: this thread holds the lock, the map may be mid-change */
static void repair(struct vr_region *r)
{
	struct vr_shm *s = r->shm;
	unsigned q = atomic_load_explicit(&s->seq, memory_order_relaxed);
	if (!(q & 1)) /* readers must wait while the map is rebuilt */
		atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	if (vr_map_rebuild(&s->map) < 0) {
		/* the records themselves are inconsistent: a bug, not a death */
		vr_log_raw("vrange: shared state of a dead process cannot be repaired\n");
		abort();
	}
	complete_unmark(r);
	recount(s);
	rearm_and_repunch(r);
	atomic_fetch_add_explicit(&s->trap_epoch, 1, memory_order_relaxed);
	atomic_store_explicit(&s->oldest_age, vr_lru_oldest_age(&s->map), memory_order_relaxed);
	vr_trap_coop_resync_all(r); /* markers of a purge cut short (TRAPPED HOLES) */
	atomic_fetch_add_explicit(&s->repairs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&r->ctx->repairs, 1, memory_order_relaxed);
	if (pthread_mutex_consistent(&s->lock) != 0)
		abort();
}

/* the lock was just taken (rc 0) or inherited from a dead holder
 * (EOWNERDEAD): repair, and leave seq odd for a writer, even for a raw
 * reader */
static void acquired(struct vr_region *r, int rc, bool raw)
{
	struct vr_shm *s = r->shm;
	if (rc == EOWNERDEAD) {
		repair(r); /* leaves seq odd */
		if (raw)   /* a reader: the map is whole again */
			atomic_store_explicit(
				&s->seq, atomic_load_explicit(&s->seq, memory_order_relaxed) + 1,
				memory_order_release);
		return;
	}
	if (!raw) {
		atomic_store_explicit(&s->seq,
				      atomic_load_explicit(&s->seq, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
	}
}

/* the lock when trylock found it held: waits of at most VR_SHM_REWAIT_NS,
 * each followed by a look at the lock (shared.h, LOST WAKEUPS).  The
 * deadline is CLOCK_REALTIME's because sanitizers know timedlock and not
 * clocklock; a step of the clock lengthens or shortens one wait, no more */
static int lock_contended(struct vr_shm *s)
{
	for (;;) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += VR_SHM_REWAIT_NS;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		int rc = pthread_mutex_timedlock(&s->lock, &t);
		if (rc != ETIMEDOUT)
			return rc;
		atomic_fetch_add_explicit(&s->rewaits, 1, memory_order_relaxed);
	}
}

void vr_shared_lock(struct vr_region *r, bool raw)
{
	struct vr_shm *s = r->shm;
	vr_held_push(&s->lock, VR_RANK_REGION);
	int rc = pthread_mutex_trylock(&s->lock);
	if (rc == EBUSY)
		rc = lock_contended(s);
	if (rc != 0 && rc != EOWNERDEAD) {
		/* ENOTRECOVERABLE: someone unlocked without repairing, which
		 * this library never does */
		vr_log_raw("vrange: shared state lock unusable\n");
		abort();
	}
	acquired(r, rc, raw);
}

int vr_shared_trylock(struct vr_region *r)
{
	struct vr_shm *s = r->shm;
	vr_held_push(&s->lock, VR_RANK_REGION);
	int rc = pthread_mutex_trylock(&s->lock);
	if (rc != 0 && rc != EOWNERDEAD) {
		vr_held_pop(&s->lock);
		return -EBUSY;
	}
	acquired(r, rc, true);
	return 0;
}

void vr_shared_unlock(struct vr_region *r, bool raw)
{
	struct vr_shm *s = r->shm;
	if (!raw) {
		vr_shared_sync(r);
		atomic_store_explicit(&s->seq,
				      atomic_load_explicit(&s->seq, memory_order_relaxed) + 1,
				      memory_order_release);
	}
	pthread_mutex_unlock(&s->lock);
	vr_held_pop(&s->lock);
}

/* ---- gauges (S29): the file's, moved into the ctx by its primary region
 * (one per file and ctx).  Lock-free: each difference is taken with one
 * exchange of the region's last-seen value, so concurrent syncs apply it
 * once. */
static void sync_one(_Atomic uint64_t *file, uint64_t *seen, _Atomic uint64_t *shard)
{
	uint64_t cur = atomic_load_explicit(file, memory_order_relaxed);
	if (cur == __atomic_load_n(seen, __ATOMIC_RELAXED))
		return; /* the common case: two loads, no locked instruction */
	uint64_t old = __atomic_exchange_n(seen, cur, __ATOMIC_RELAXED);
	if (cur != old)
		atomic_fetch_add_explicit(shard, cur - old, memory_order_relaxed);
}

void vr_shared_sync(struct vr_region *r)
{
	if (!__atomic_load_n(&r->shm_primary, __ATOMIC_ACQUIRE))
		return;
	struct vr_shm *s = r->shm;
	struct vr_shard *sh = r->shard;
	sync_one(&s->nranges, &r->nranges, &sh->ranges);
	sync_one(&s->volatile_bytes, &r->volatile_bytes, &sh->volatile_bytes);
	sync_one(&s->purged_bytes, &r->purged_bytes, &sh->purged_bytes);
}
