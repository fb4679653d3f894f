/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region-life.c - a region's life (cut from region.c): the public create
 * calls up to an unlinked region that owns its memory (a memfd mapping,
 * anonymous or adopted memory: mem-kind.h; a shared file's state:
 * mem-shared.h), trap attached; releasing it again.  ctx.c registers and
 * links a region, and unlinks it before closing it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "vrange.h"
#include "base/fork.h"
#include "base/inject.h"
#include "base/lock.h"
#include "base/log.h"
#include "base/registry.h"
#include "base/sys.h"
#include "mem/mem-kind.h"
#include "mem/mem-shared.h"
#include "region/region.h"
#include "ctx.h" /* r->ctx and its shards: to move into base/acct.h (layering S15) */

/* ---- lifecycle ---- */

/* a region over [base, base + map_size), already mapped (or adopted),
 * its trap attached; not registered, not linked (ctx.c does both).  st:
 * the memfd's (S33), NULL for anonymous memory.  On failure nothing is
 * kept; the caller still owns the mapping and the fd.  On success the
 * region owns them (vr_region_close releases them). */
static int region_setup(struct vr_ctx *ctx, void *base, size_t size, size_t map_size, int fd,
			const struct stat *st, const struct vr_kind_ops *kind, int prot,
			struct vr_shm_map *sm, struct vr_region **out)
{
	struct vr_region *r = vr_calloc_aligned(sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (st) {
		r->dev = st->st_dev;
		r->ino = st->st_ino;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->lockp = &r->lock;
	r->seqp = &r->seq;
	r->trap = vr_trap_region_ops(sm != NULL);
	if (sm) { /* the file's state: lock, seqlock, map (shared.h) */
		r->shm_map = sm;
		r->shm = sm->shm;
		r->lockp = &r->shm->lock;
		r->seqp = &r->shm->seq;
		r->map = &r->shm->map;
	} else {
		r->map = &r->own_map;
		vr_map_init(r->map, vr_page_shift());
	}
	r->ctx = ctx;
	r->base = base;
	r->size = size;
	r->map_size = map_size;
	r->fd = fd;
	r->kind = kind;
	r->prot = prot;
	r->fork_gen = ctx->fork_gen;
	r->shard = &ctx->shards[atomic_fetch_add(&ctx->next_shard, 1) % VR_NSHARDS];
	atomic_init(&r->oldest_age, UINT64_MAX);
	/* Rule: nothing before the checks that can refuse (the registry's
	 * -EBUSY and -EEXIST below) may be seen outside this new mapping.
	 * attach only registers the mapping itself (a userfaultfd of a shared
	 * region): it never writes to the file, whose holes may be other
	 * mappings' traps. */
	int err = vr_trap_attach(r);
	if (err < 0)
		goto fail;
	*out = r;
	return 0;
fail:
	if (!sm)
		vr_map_fini(r->map);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return err;
}

static size_t page_round(size_t size)
{
	return (size + vr_page_mask()) & ~(size_t)vr_page_mask();
}

/* maps the memfd; on failure the caller still owns fd */
static int region_map(struct vr_ctx *ctx, int fd, const struct stat *st, size_t size,
		      struct vr_region **out)
{
	size_t map_size = page_round(size);
	void *p;
	int err = vr_kind_map(fd, map_size, &p);
	if (err < 0)
		return err;
	err = region_setup(ctx, p, size, map_size, fd, st, &vr_kind_memfd, PROT_READ | PROT_WRITE,
			   NULL, out);
	if (err < 0)
		munmap(p, map_size);
	return err;
}

/* S27: joins the shared state of fd (described by t); on failure the
 * caller still owns fd */
static int region_join(struct vr_ctx *ctx, int fd, const struct stat *st,
		       const struct vr_shm_tail *t, struct vr_region **out)
{
	if (!vr_trap_shared_ops())
		return -EOPNOTSUPP; /* S32: no way to trap every mapping */
	/* what a repair completes an unmark with (shared.h, DEATH) */
	__atomic_store_n(&vr_shared_unmark_fn, vr_region_unmark_locked, __ATOMIC_RELAXED);
	struct vr_shm_map *sm;
	int err = vr_shared_get(fd, st, t, &sm);
	if (err < 0)
		return err;
	void *p;
	err = vr_kind_map(fd, t->map_size, &p);
	if (err == 0) {
		err = region_setup(ctx, p, t->data_size, t->map_size, fd, st, &vr_kind_memfd,
				   PROT_READ | PROT_WRITE, sm, out);
		if (err < 0)
			munmap(p, t->map_size);
	}
	if (err < 0)
		vr_shared_put(sm, false);
	return err;
}

/* S1 for memfds: the page round-up fits size_t and off_t */
static bool size_ok(size_t size)
{
	size_t pm = (size_t)vr_page_mask();
	return size != 0 && size <= SIZE_MAX - pm && size + pm <= (size_t)INT64_MAX;
}

/* S26: anonymous memory has no off_t clause; mmap says what is too big */
static int region_new_anon(struct vr_ctx *ctx, size_t size, struct vr_region **out)
{
	if (size == 0 || size > SIZE_MAX - (size_t)vr_page_mask())
		return -EINVAL;
	size_t map_size = page_round(size);
	void *p;
	int err = vr_kind_map(-1, map_size, &p);
	if (err < 0)
		return err;
	err = region_setup(ctx, p, size, map_size, -1, NULL, &vr_kind_anon, PROT_READ | PROT_WRITE,
			   NULL, out);
	if (err < 0)
		munmap(p, map_size);
	return err;
}

int vr_region_create(struct vr_ctx *ctx, const char *name, size_t size, unsigned flags,
		     struct vr_region **out)
{
	if (!ctx || !out || (flags & ~(VR_REGION_ANON | VR_REGION_SHARED)) ||
	    flags == (VR_REGION_ANON | VR_REGION_SHARED) || vr_inherited_ctx(ctx))
		return -EINVAL;
	if (flags & VR_REGION_ANON)
		return region_new_anon(ctx, size, out);
	if (!size_ok(size))
		return -EINVAL;
	if (flags & VR_REGION_SHARED) {
		if (!vr_trap_shared_ops())
			return -EOPNOTSUPP; /* S32 */
		struct vr_shm_tail t;
		struct stat st;
		int fd = vr_shared_create(name ? name : "vrange", size, &t);
		if (fd < 0)
			return fd;
		int err = fstat(fd, &st) < 0 ? -errno : region_join(ctx, fd, &st, &t, out);
		if (err < 0)
			close(fd);
		return err;
	}
	int fd = vr_memfd_create(name ? name : "vrange", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (vr_ftruncate(fd, (off_t)size) < 0 || fstat(fd, &st) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	int err = region_map(ctx, fd, &st, size, out);
	if (err < 0)
		close(fd);
	return err;
}

int vr_region_create_adopt(struct vr_ctx *ctx, void *addr, size_t len, unsigned flags,
			   struct vr_region **out)
{
	if (!ctx || !out || !addr || len == 0 || len > UINTPTR_MAX - (uintptr_t)addr ||
	    vr_inherited_ctx(ctx))
		return -EINVAL;
	/* S26: overlap with a live region first (its memfd mapping would
	 * otherwise fail the checks below as "shared") */
	if (vr_registry_overlaps(addr, len))
		return -EEXIST;
	if (flags || ((uintptr_t)addr & vr_page_mask()) || (len & vr_page_mask()))
		return -EINVAL;
	int prot;
	int err = vr_adopt_check(addr, len, &prot);
	if (err < 0)
		return err;
	/* the registry checks the overlap again, atomically with the insert */
	return region_setup(ctx, addr, len, len, -1, NULL, &vr_kind_adopted, prot, NULL, out);
}

int vr_region_create_from_fd(struct vr_ctx *ctx, int fd, unsigned flags, struct vr_region **out)
{
	struct stat st;
	struct statfs sfs;
	if (!ctx || !out || (flags & ~VR_REGION_SHARED) || fd < 0 || vr_inherited_ctx(ctx))
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return errno == EBADF ? -EINVAL : -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	/* the file system first: an empty hugetlb memfd is unsupported
	 * before it is empty */
	if (fstatfs(fd, &sfs) < 0)
		return -errno;
	if (sfs.f_type != TMPFS_MAGIC)
		return -EOPNOTSUPP; /* hugetlbfs memfds land here too */
	if (st.st_size <= 0 || !size_ok((size_t)st.st_size))
		return -EINVAL;
	/* S27: a file made with VR_REGION_SHARED is joined, with either flag */
	struct vr_shm_tail t;
	int shared = vr_shared_probe(fd, &st, &t);
	if (shared < 0)
		return shared;
	if (!shared && (flags & VR_REGION_SHARED))
		return -EINVAL;
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (nfd < 0)
		return -errno;
	int err = shared ? region_join(ctx, nfd, &st, &t, out)
			 : region_map(ctx, nfd, &st, (size_t)st.st_size, out);
	if (err < 0)
		close(nfd);
	else /* the caller has the file: see vr_region_fd */
		atomic_store_explicit(&(*out)->fd_out, true, memory_order_relaxed);
	return err;
}

void vr_region_release(struct vr_region *r, bool inherited)
{
	if (!inherited) {
		/* take what is still in the map out of the ctx gauges */
		struct vr_shard *sh = r->shard;
		atomic_fetch_sub(&sh->ranges, r->nranges);
		atomic_fetch_sub(&sh->volatile_bytes, r->volatile_bytes);
		atomic_fetch_sub(&sh->purged_bytes, r->purged_bytes);
	}
	/* a shared region's map is in the file's state: nothing to free, and
	 * in a fork child not even mapped; an inherited map that a thread was
	 * changing at the fork is left (fork.h) */
	if (!r->shm && (!inherited || vr_fork_was_unlocked(&r->lock)))
		vr_map_fini(r->map);
}

/* releases r, which is no longer registered nor linked (ctx.c): trap,
 * memory (unmapped and closed, or adopted: disarmed and left mapped),
 * map, shared state */
void vr_region_close(struct vr_region *r, bool inherited)
{
	vr_trap_detach(r, inherited);
	/* unmaps and closes, or (adopted) disarms and leaves the memory */
	r->kind->release(r, inherited);
	if (!inherited)
		pthread_mutex_destroy(&r->lock);
	vr_region_release(r, inherited);
	if (r->shm_map)
		vr_shared_put(r->shm_map, inherited);
	free(r);
}
