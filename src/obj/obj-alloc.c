/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * obj-alloc.c - where objects live: chunks, page spans, size-class slabs
 *
 * Address space.  A chunk is one memfd, ftruncate'd and mapped MAP_SHARED
 * whole at creation (OBJ_CHUNK_SHIFT: 1 GiB of address space; an object
 * larger than that gets a chunk of its own size).  A memfd page costs
 * memory only once written, so a mostly empty chunk costs a 2 MiB page map
 * of address space and nothing else.  Chunks are MADV_DONTFORK (S25) and
 * registered in the registry so the fault path finds them lock-free.
 *
 * Spans.  Pages are handed out by a bump pointer in the current chunk,
 * and freed spans go to size-segregated bins (exact sizes up to 32 pages,
 * then one bin per power of two, first fit), coalesced with free
 * neighbours through boundary tags in the page map; a free span that ends
 * at the bump pointer gives its pages back to the bump instead.  Freed
 * spans are hole-punched, so memory returns to the kernel at once and a
 * reused span reads as zero without a memset.
 *
 * Slabs.  Objects smaller than a page are packed in slabs: a span of 1-16
 * pages cut into slots of one size class (16-byte steps up to 128, then 8
 * classes per doubling up to the page size; internal waste <= 1/9 of an
 * object, 3-5% on average).  Slots are laid edge to edge and may straddle
 * a page boundary, so the tail of a slab wastes at most 1/64 of it (the
 * page count per class is chosen for that).  A straddling object belongs
 * to both pages: pinning it holds both, purging either purges it.  The
 * lowest free slot is used first, so live objects gather at the start of
 * their slabs and pages that lose their last object are punched at once.
 * Slabs keep their span for their class for the life of the ctx.
 *
 * Locks: a class lock for its slabs (slots, nlive, restoring discarded
 * pages), span_lock (leaf) for chunks, spans, large handles, the slab list.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#include "base/inject.h"
#include "obj/obj.h"
#include "base/lock.h"
#include "base/registry.h"
#include "mem/mem.h"

/* ---- size classes ---- */
static unsigned slab_pages_for(uint32_t size)
{
	size_t pg = vr_page_size(), best = 1, best_waste = SIZE_MAX;
	for (size_t n = 1; n <= OBJ_MAX_SLAB_PAGES; n++) {
		size_t span = n * pg, waste = span % size;
		if (waste * 64 <= span)
			return (unsigned)n;
		if (waste * best < best_waste * n) { /* waste/span smaller */
			best = n;
			best_waste = waste;
		}
	}
	return (unsigned)best;
}

int vr_objs_alloc_init(struct vr_objs *os)
{
	size_t pg = vr_page_size();
	uint32_t sizes[256];
	unsigned n = 0;
	for (uint32_t s = 16; s <= 128; s += 16)
		sizes[n++] = s;
	for (uint32_t base = 128; base < pg && n < 248; base *= 2)
		for (uint32_t k = 1; k <= 8; k++) {
			uint32_t s = base + k * (base / 8);
			if (s > pg)
				break;
			sizes[n++] = s;
		}
	if (sizes[n - 1] != pg)
		sizes[n++] = (uint32_t)pg;
	os->classes = vr_calloc_aligned(n * sizeof(*os->classes));
	if (!os->classes)
		return -ENOMEM;
	os->nclasses = n;
	for (unsigned i = 0; i < n; i++) {
		struct vr_class *c = &os->classes[i];
		pthread_mutex_init(&c->lock, NULL);
		c->size = sizes[i];
		c->npages = slab_pages_for(sizes[i]);
		c->nslots = (uint32_t)(c->npages * pg / sizes[i]);
	}
	return 0;
}

/* S36: the classes of objects with side-car bytes of one stride: the
 * same sizes, slabs of their own (a slab's side-cars are one array) */
static struct vr_class *xclasses_get(struct vr_objs *os, uint32_t xstride)
{
	_Atomic(struct vr_class *) *slot = &os->xclasses[xstride / 16 - 1];
	struct vr_class *x = atomic_load_explicit(slot, memory_order_acquire);
	if (x)
		return x;
	vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
	x = atomic_load(slot);
	if (!x && (x = vr_calloc_aligned(os->nclasses * sizeof(*x)))) {
		for (unsigned i = 0; i < os->nclasses; i++) {
			x[i] = (struct vr_class){ .size = os->classes[i].size,
						  .npages = os->classes[i].npages,
						  .nslots = os->classes[i].nslots,
						  .xstride = xstride };
			pthread_mutex_init(&x[i].lock, NULL);
		}
		atomic_store_explicit(slot, x, memory_order_release);
	}
	vr_unlock(&os->span_lock);
	return x;
}

static struct vr_class *class_of(struct vr_objs *os, size_t size, uint32_t xstride)
{
	unsigned lo = 0, hi = os->nclasses - 1;
	while (lo < hi) { /* first class >= size */
		unsigned mid = (lo + hi) / 2;
		if (os->classes[mid].size >= size)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (!xstride)
		return &os->classes[lo];
	struct vr_class *x = xclasses_get(os, xstride);
	return x ? &x[lo] : NULL;
}

/* ---- chunks (span_lock held) ---- */
static struct vr_chunk *chunk_new(struct vr_objs *os, size_t min_bytes, int *err)
{
	size_t size = (size_t)1 << OBJ_CHUNK_SHIFT;
	if (min_bytes > size)
		size = min_bytes;
	size_t np = size >> vr_page_shift();
	struct vr_chunk *ch = calloc(1, sizeof(*ch));
	struct vr_chunk **arr = os->chunks;
	if (os->nchunks == os->cap_chunks) {
		size_t cap = os->cap_chunks ? 2 * os->cap_chunks : 8;
		arr = realloc(os->chunks, cap * sizeof(*arr));
		if (arr) {
			os->chunks = arr;
			os->cap_chunks = cap;
		}
	}
	*err = -ENOMEM;
	if (!ch || !arr)
		goto fail_ch;
	ch->fd = vr_memfd_create("vrange-objects", MFD_CLOEXEC);
	if (ch->fd < 0) {
		*err = -errno;
		goto fail_ch;
	}
	ch->base = MAP_FAILED;
	ch->map = MAP_FAILED;
	if (vr_ftruncate(ch->fd, (off_t)size) < 0)
		goto fail_sys;
	ch->base =
		vr_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, ch->fd, 0);
	if (ch->base == MAP_FAILED || vr_madvise(ch->base, size, MADV_DONTFORK) < 0)
		goto fail_sys;
	ch->map = vr_mmap(NULL, np * sizeof(*ch->map), PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ch->map == MAP_FAILED)
		goto fail_sys;
	ch->size = size;
	ch->objs = os;
	ch->fork_gen = os->ctx->fork_gen;
	*err = vr_registry_add_kind(ch, ch->base, size, VR_REG_OBJ);
	if (*err < 0)
		goto fail;
	os->chunks[os->nchunks++] = ch;
	return ch;
fail_sys:
	*err = -errno;
fail:
	if (ch->map != MAP_FAILED)
		munmap((void *)ch->map, np * sizeof(*ch->map));
	if (ch->base != MAP_FAILED)
		munmap(ch->base, size);
	close(ch->fd);
fail_ch:
	free(ch);
	return NULL;
}

void vr_objs_unregister(struct vr_objs *os)
{
	vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
	for (size_t i = 0; i < os->nchunks; i++)
		vr_registry_remove_any(os->chunks[i]);
	vr_unlock(&os->span_lock);
}

static void chunk_free(struct vr_chunk *ch, bool inherited)
{
	if (!inherited) {
		vr_registry_remove_any(ch);
		munmap(ch->base, ch->size);
	}
	munmap((void *)ch->map, (ch->size >> vr_page_shift()) * sizeof(*ch->map));
	close(ch->fd);
	free(ch);
}

/* ---- spans (span_lock held) ---- */
static unsigned bin_of(size_t np)
{
	if (np <= 32)
		return (unsigned)np - 1;
	unsigned b = 32 + (63 - (unsigned)__builtin_clzll(np)) - 5;
	return b < OBJ_NBINS ? b : OBJ_NBINS - 1;
}

/* stores only what changes: a page of the map that was never written
 * stays unallocated when it is cleared (an object of a chunk of its own
 * leaves its pages untagged until its first discard, below) */
static void map_set(struct vr_chunk *ch, size_t page, size_t np, uintptr_t v)
{
	for (size_t i = 0; i < np; i++)
		if (atomic_load_explicit(&ch->map[page + i], memory_order_relaxed) != v)
			atomic_store_explicit(&ch->map[page + i], v, memory_order_release);
}

/* An object with a chunk of its own (OBJ_CHUNK_SHIFT or larger) tags only
 * its first page when it is made: tagging them all would cost 8 bytes of
 * memory per page (2 GiB for 1 TiB) before a byte of it is touched.
 * vr_objs_at finds it through page 0; the fault
 * path (obj.c's classify) reads the page's own tag, which
 * vr_objs_discard writes before it arms the first trap. */
static bool whole_chunk(const struct vr_chunk *ch, const uint8_t *p, size_t len)
{
	return p == ch->base && len == ch->size;
}

static void fspan_unlink(struct vr_objs *os, struct vr_fspan *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		os->bins[bin_of(f->npages)] = f->next;
	if (f->next)
		f->next->prev = f->prev;
}

static void fspan_link(struct vr_objs *os, struct vr_fspan *f)
{
	unsigned b = bin_of(f->npages);
	f->prev = NULL;
	f->next = os->bins[b];
	if (f->next)
		f->next->prev = f;
	os->bins[b] = f;
	uintptr_t tag = (uintptr_t)f | PM_FREE;
	atomic_store(&f->chunk->map[f->page], tag);
	atomic_store(&f->chunk->map[f->page + f->npages - 1], tag);
}

/* free spans are tagged on their first and last page only */
static void fspan_untag(struct vr_fspan *f)
{
	atomic_store(&f->chunk->map[f->page], 0);
	atomic_store(&f->chunk->map[f->page + f->npages - 1], 0);
}

/* a span of np pages: 0 and *chp, *pagep, or -errno */
static int span_alloc(struct vr_objs *os, size_t np, struct vr_chunk **chp, size_t *pagep)
{
	for (unsigned b = bin_of(np); b < OBJ_NBINS; b++) {
		for (struct vr_fspan *f = os->bins[b]; f; f = f->next) {
			if (f->npages < np)
				continue;
			fspan_unlink(os, f);
			fspan_untag(f);
			*chp = f->chunk;
			*pagep = f->page;
			if (f->npages > np) {
				f->page += np;
				f->npages -= np;
				fspan_link(os, f);
			} else {
				free(f);
			}
			return 0;
		}
	}
	size_t bytes = np << vr_page_shift();
	struct vr_chunk *ch = os->cur;
	if (!ch || ch->size - ch->bump < bytes) {
		int err;
		struct vr_chunk *nc = chunk_new(os, bytes, &err);
		if (!nc)
			return err;
		if (bytes >= ((size_t)1 << OBJ_CHUNK_SHIFT)) {
			nc->bump = bytes; /* a chunk of its own */
			*chp = nc;
			*pagep = 0;
			return 0;
		}
		os->cur = nc;
		struct vr_fspan *f = ch && ch->bump < ch->size ? malloc(sizeof(*f)) : NULL;
		if (f) { /* the old chunk's tail stays usable */
			size_t tail = ch->bump >> vr_page_shift();
			*f = (struct vr_fspan){ .chunk = ch,
						.page = tail,
						.npages = (ch->size >> vr_page_shift()) - tail };
			fspan_link(os, f);
			ch->bump = ch->size;
		}
		ch = nc;
	}
	*chp = ch;
	*pagep = ch->bump >> vr_page_shift();
	ch->bump += bytes;
	return 0;
}

/* give [page, page + np) back (already punched or never written) */
static void span_free(struct vr_objs *os, struct vr_chunk *ch, size_t page, size_t np)
{
	map_set(ch, page, np, 0);
	if (page > 0) {
		uintptr_t v = atomic_load(&ch->map[page - 1]);
		if (PM_TAG(v) == PM_FREE) {
			struct vr_fspan *l = PM_PTR(v);
			fspan_unlink(os, l);
			fspan_untag(l);
			page = l->page;
			np += l->npages;
			free(l);
		}
	}
	size_t end = page + np, pages = ch->size >> vr_page_shift();
	if (end < pages) {
		uintptr_t v = atomic_load(&ch->map[end]);
		if (PM_TAG(v) == PM_FREE) {
			struct vr_fspan *r = PM_PTR(v);
			fspan_unlink(os, r);
			fspan_untag(r);
			np += r->npages;
			free(r);
		}
	}
	if (ch == os->cur && ((page + np) << vr_page_shift()) == ch->bump) {
		ch->bump = page << vr_page_shift();
		return;
	}
	struct vr_fspan *f = malloc(sizeof(*f));
	if (!f)
		return; /* the pages stay unused: address space, not memory */
	*f = (struct vr_fspan){ .chunk = ch, .page = page, .npages = np };
	fspan_link(os, f);
}

/* ---- discard / restore (purge.c's order: trap first, then punch) ----
 * Object memory belongs to no region, so it is trapped directly: guard
 * markers with the guard backend, else mprotect (which every kernel has;
 * the chunks are MAP_SHARED memfd mappings, PROT_READ|PROT_WRITE). */
static int obj_trap(void *p, size_t len, bool arm)
{
	int rc = vr_trap_current() == VR_TRAP_GUARD
			 ? vr_madvise(p, len, arm ? MADV_GUARD_INSTALL : MADV_GUARD_REMOVE)
			 : vr_mprotect(p, len, arm ? PROT_NONE : PROT_READ | PROT_WRITE);
	return rc < 0 ? -errno : 0;
}

/* false if the pages keep their bytes (the punch failed): a span whose
 * punch failed must not be handed out again as zero (S19) */
static bool punch(struct vr_chunk *ch, uint8_t *p, size_t len)
{
	return vr_fallocate(ch->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			    (off_t)(p - ch->base), (off_t)len) == 0;
}

int vr_objs_discard(struct vr_objs *os, struct vr_chunk *ch, uint8_t *p, size_t len)
{
	if (whole_chunk(ch, p, len)) /* every page tagged before it can trap */
		map_set(ch, 1, (len >> vr_page_shift()) - 1, atomic_load(&ch->map[0]));
	atomic_store(&os->trap_gen, vr_trap_gen_next());
	atomic_fetch_add_explicit(&os->ndiscard, 1, memory_order_relaxed);
	int err = obj_trap(p, len, true);
	if (err == 0 && !punch(ch, p, len))
		err = -errno;
	if (err == 0)
		return 0;
	/* an arm may fail part-way, a punch after a whole one: take the trap
	 * back; if even that fails, pages with data stay trapped and must be
	 * taken as purged (never reported intact: a pin would not restore
	 * them, and the caller's first touch would be a SIGSEGV) */
	if (obj_trap(p, len, false) < 0) {
		atomic_fetch_add(&os->nstuck, 1);
		return OBJ_DISCARD_STUCK;
	}
	return err;
}

/* after a purged large object's restore: its pages read 0 (S20), also
 * when a discard was left trapped but not punched (OBJ_DISCARD_STUCK);
 * false if they may still hold data */
bool vr_objs_zeroed(struct vr_objs *os, struct vr_chunk *ch, uint8_t *p, size_t len)
{
	if (!atomic_load_explicit(&os->nstuck, memory_order_relaxed))
		return true;
	return punch(ch, p, len);
}

int vr_objs_restore(struct vr_objs *os, uint8_t *p, size_t len)
{
	atomic_store(&os->trap_gen, vr_trap_gen_next());
	atomic_fetch_add_explicit(&os->nrestore, 1, memory_order_relaxed);
	return obj_trap(p, len, false);
}

/* ---- metadata memory (span_lock held) ----
 * Slabs (with their handles and page descriptors) and large objects'
 * handles come from 2 MiB-aligned anonymous mappings advised
 * MADV_HUGEPAGE (vr_map_huge, base/sys.h), bump-allocated and freed only with the ctx (they are
 * type-stable anyway).  10^6 objects' handles are 32 MB: with 4 KiB pages
 * a random pin would pay a TLB miss (a two-dimensional page walk in a VM)
 * on top of the cache miss.  Each block starts with its page hints
 * (obj.h, PAGE HINTS). */
#define META_BYTES OBJ_META_BYTES
static void *meta_alloc(struct vr_objs *os, size_t size)
{
	size = (size + 63) & ~(size_t)63;
	if (size > META_BYTES - OBJ_HINT_BYTES)
		return NULL;
	if (!os->meta_cur || META_BYTES - os->meta_used < size) {
		if (os->nblocks == os->cap_blocks) {
			size_t cap = os->cap_blocks ? 2 * os->cap_blocks : 16;
			void **b = realloc(os->blocks, cap * sizeof(*b));
			if (!b)
				return NULL;
			os->blocks = b;
			os->cap_blocks = cap;
		}
		uint8_t *a = vr_map_huge(META_BYTES);
		if (a == MAP_FAILED)
			return NULL;
		os->blocks[os->nblocks++] = a;
		os->meta_cur = a;
		os->meta_used = OBJ_HINT_BYTES; /* the block's page hints (obj.h) */
	}
	void *p = os->meta_cur + os->meta_used;
	os->meta_used += size;
	return p; /* zero: fresh anonymous memory */
}

/* ---- handles of large objects (span_lock held) ---- */
#define HBLOCK 128
static void handle_put(struct vr_objs *os, struct vr_obj *o)
{
	o->home = os->free_handles;
	os->free_handles = o;
}

static struct vr_obj *handle_get(struct vr_objs *os)
{
	if (!os->free_handles) {
		struct vr_lhandle *blk = meta_alloc(os, HBLOCK * sizeof(*blk));
		if (!blk)
			return NULL;
		for (int i = 0; i < HBLOCK; i++)
			handle_put(os, &blk[i].o);
	}
	struct vr_obj *o = os->free_handles;
	os->free_handles = o->home;
	return o;
}

/* ---- slabs ---- */
bool vr_opage_hold_unless(struct vr_opage *p, bool self)
{
	atomic_fetch_add(&p->pw, 1);
	while (atomic_load(&p->pw) & PG_PURGING) {
		if (self)
			return false;
		sched_yield();
	}
	return true;
}

void vr_opage_hold(struct vr_opage *p)
{
	(void)vr_opage_hold_unless(p, false);
}

void vr_slab_page_slots(const struct vr_slab *s, size_t pi, uint32_t *lo, uint32_t *hi)
{
	size_t a = pi << vr_page_shift(), b = ((pi + 1) << vr_page_shift()) - 1;
	*lo = (uint32_t)(a / s->size);
	size_t h = b / s->size;
	*hi = (uint32_t)(h < s->nslots ? h : s->nslots - 1);
}

/* class lock held */
static struct vr_slab *slab_new(struct vr_objs *os, struct vr_class *c, int *err)
{
	size_t nw = (c->nslots + 63) / 64;
	size_t off_pages = (sizeof(struct vr_slab) + nw * 8 + 31) & ~(size_t)31;
	size_t off_objs = off_pages + c->npages * sizeof(struct vr_opage);
	size_t page, bytes = off_objs + c->nslots * sizeof(struct vr_obj);
	vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
	struct vr_slab *s = meta_alloc(os, bytes);
	*err = -ENOMEM;
	if (!s) {
		vr_unlock(&os->span_lock);
		return NULL;
	}
	s->freemap = (uint64_t *)(s + 1);
	s->pages = (struct vr_opage *)((uint8_t *)s + off_pages);
	s->objs = (struct vr_obj *)((uint8_t *)s + off_objs);
	s->xstride = c->xstride;
	if (c->xstride && !(s->extra = vr_malloc((size_t)c->nslots * c->xstride)))
		*err = -ENOMEM;
	else
		*err = span_alloc(os, c->npages, &s->chunk, &page);
	if (*err < 0) {
		free(s->extra);
		os->meta_used -= (bytes + 63) & ~(size_t)63; /* the last block: give it back */
		memset(s, 0, bytes);
		vr_unlock(&os->span_lock);
		return NULL;
	}
	s->all = os->slabs;
	os->slabs = s;
	s->base = s->chunk->base + (page << vr_page_shift());
	s->cls = c;
	s->size = c->size;
	s->nslots = s->nfree = c->nslots;
	s->npages = c->npages;
	for (uint32_t i = 0; i < c->npages; i++) {
		s->pages[i].slab = s;
		s->pages[i].objs = os;
	}
	uintptr_t blk = obj_meta_block(s);
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct vr_obj *o = &s->objs[i];
		o->ptr = s->base + (size_t)i * c->size;
		o->home = &s->pages[((size_t)i * c->size) >> vr_page_shift()];
		s->freemap[i / 64] |= 1ull << (i % 64);
		/* the page hint of the first handle in each hint unit (obj.h) */
		if (i == 0 || !((uintptr_t)o & (((uintptr_t)1 << OBJ_HINT_SHIFT) - 1)))
			__atomic_store_n(obj_hint_slot(o),
					 (uint16_t)(((uintptr_t)o->home - blk) >> OBJ_HINT_UNIT),
					 __ATOMIC_RELAXED);
	}
	map_set(s->chunk, page, c->npages, (uintptr_t)s | PM_SLAB);
	vr_unlock(&os->span_lock);
	return s;
}

static void partial_link(struct vr_class *c, struct vr_slab *s)
{
	s->prev = NULL;
	s->next = c->partial;
	if (s->next)
		s->next->prev = s;
	c->partial = s;
}

static void partial_unlink(struct vr_class *c, struct vr_slab *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		c->partial = s->next;
	if (s->next)
		s->next->prev = s->prev;
}

/* restore the discarded pages among n pages from p (one slab), one trap
 * call for each run of them; class lock held */
static int restore_pages(struct vr_objs *os, struct vr_opage *p, unsigned n)
{
	struct vr_slab *s = p->slab;
	for (unsigned i = 0; i < n;) {
		unsigned j = i;
		while (j < n && (atomic_load(&p[j].pw) & PG_DISCARDED))
			j++;
		if (j == i) {
			i++;
			continue;
		}
		int err = vr_objs_restore(os,
					  s->base + ((size_t)(&p[i] - s->pages) << vr_page_shift()),
					  (size_t)(j - i) << vr_page_shift());
		if (err < 0)
			return err;
		for (; i < j; i++)
			atomic_fetch_and(&p[i].pw, ~PG_DISCARDED);
	}
	return 0;
}

int vr_objs_restore_small(struct vr_objs *os, struct vr_obj *o)
{
	struct vr_opage *p;
	unsigned n;
	obj_pages(o, &p, &n);
	struct vr_class *c = p->slab->cls;
	if (vr_held(&c->lock))
		return -EDEADLK; /* a signal handler interrupted this class's lock */
	vr_lock(&c->lock, VR_RANK_OBJ_CLASS);
	int err = restore_pages(os, p, n);
	vr_unlock(&c->lock);
	return err;
}

static int alloc_small(struct vr_objs *os, size_t size, uint32_t xstride, uint64_t gen,
		       struct vr_obj **out)
{
	if (vr_held(&os->span_lock))
		return -EDEADLK; /* a signal handler interrupted an allocation */
	struct vr_class *c = class_of(os, size, xstride);
	int err = 0;
	if (!c)
		return -ENOMEM;
	if (vr_held(&c->lock))
		return -EDEADLK;
	vr_lock(&c->lock, VR_RANK_OBJ_CLASS);
	struct vr_slab *s = c->partial;
	if (!s) {
		s = slab_new(os, c, &err);
		if (!s)
			goto out;
		partial_link(c, s);
	}
	uint32_t slot = 0;
	for (uint32_t w = 0;; w++)
		if (s->freemap[w]) {
			slot = w * 64 + (uint32_t)__builtin_ctzll(s->freemap[w]);
			break;
		}
	struct vr_obj *o = &s->objs[slot];
	/* an atomic store: vr_objs_at reads it without a lock */
	__atomic_store_n(&o->size_gen, (uint64_t)size << 16 | gen, __ATOMIC_RELAXED);
	struct vr_opage *p;
	unsigned n;
	obj_pages(o, &p, &n);
	/* a free slot may sit on a page this thread's interrupted purge
	 * claimed, released only after this signal handler returns: no wait
	 * for it (pin_small does the same) */
	bool self = _unlikely_(vr_tls_held.n) && vr_held(&os->ctx->purge_lock);
	for (unsigned i = 0; i < n; i++)
		if (!vr_opage_hold_unless(&p[i], self)) {
			for (unsigned j = 0; j <= i; j++)
				vr_opage_drop(&p[j]);
			err = -EDEADLK;
			goto out;
		}
	err = restore_pages(os, p, n);
	if (err < 0) {
		for (unsigned i = 0; i < n; i++)
			vr_opage_drop(&p[i]);
		goto out;
	}
	for (unsigned i = 0; i < n; i++)
		p[i].nlive++;
	s->freemap[slot / 64] &= ~(1ull << (slot % 64));
	if (--s->nfree == 0)
		partial_unlink(c, s);
	bool dirty = slot < s->fresh;
	if (!dirty)
		s->fresh = slot + 1;
	if (xstride)
		memset(s->extra + (size_t)slot * xstride, 0, xstride);
	atomic_store(&o->state, OS_LIVE | OS_PINNED);
	vr_unlock(&c->lock);
	if (dirty) /* pinned: no purge can discard these pages now */
		memset(o->ptr, 0, size);
	*out = o;
	return 0;
out:
	vr_unlock(&c->lock);
	return err;
}

/* S19: more than the system's memory and swap can never be held: -ENOMEM
 * at once, rather than a memfd and a mapping of that size.  Only sizes that get a chunk of their own ask (one sysinfo). */
static bool beyond_system(size_t bytes)
{
	if (bytes < ((size_t)1 << OBJ_CHUNK_SHIFT))
		return false;
	struct sysinfo si;
	if (sysinfo(&si) < 0)
		return false; /* then mmap or the memfd says */
	uint64_t unit = si.mem_unit ? si.mem_unit : 1;
	uint64_t have = ((uint64_t)si.totalram + (uint64_t)si.totalswap) * unit;
	return (uint64_t)bytes > have;
}

int vr_objs_alloc(struct vr_objs *os, size_t size, size_t extra, struct vr_obj **out)
{
	uint64_t gen = atomic_load(&vr_fork_gen) & 0xffff;
	uint32_t xstride = (uint32_t)((extra + 15) & ~(size_t)15);
	if (size < vr_page_size())
		return alloc_small(os, size, xstride, gen, out);
	size_t np = (size + vr_page_size() - 1) >> vr_page_shift();
	if (beyond_system(np << vr_page_shift()))
		return -ENOMEM;
	struct vr_chunk *ch;
	size_t page;
	if (vr_held(&os->span_lock))
		return -EDEADLK;
	uint8_t *x = NULL;
	if (xstride && !(x = vr_calloc_aligned(xstride)))
		return -ENOMEM;
	vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
	struct vr_obj *o = handle_get(os);
	int err = o ? span_alloc(os, np, &ch, &page) : -ENOMEM;
	if (err < 0) {
		if (o)
			handle_put(os, o);
		vr_unlock(&os->span_lock);
		free(x);
		return err;
	}
	((struct vr_lhandle *)o)->extra = x;
	/* atomic stores: vr_objs_at reads them without a lock (a stale
	 * entry of the page map may lead it to this handle) */
	__atomic_store_n(&o->ptr, ch->base + (page << vr_page_shift()), __ATOMIC_RELAXED);
	o->home = ch;
	__atomic_store_n(&o->size_gen, (uint64_t)size << 16 | gen, __ATOMIC_RELAXED);
	atomic_store(&o->state, OS_LIVE | OS_PINNED | OS_LARGE);
	bool own = whole_chunk(ch, o->ptr, np << vr_page_shift());
	map_set(ch, page, own ? 1 : np, (uintptr_t)o | PM_LARGE);
	vr_unlock(&os->span_lock);
	*out = o;
	return 0;
}

/*
 * A handle freed while a purge handler call reporting it runs (its
 * OS_REPORTING set, obj-group.c report) is not handed out again before
 * that call returned: the reporter's clear of OS_REPORTING would
 * otherwise land on a new object in the same handle, one that may be
 * purged and reported meanwhile, and let it be purged again while its
 * own call runs (S37).  Likewise a handle freed purged but not reported
 * yet (OS_NOTIFY): its purge's batch still names it, and a new object
 * in it, purged by another thread, would be reported by this batch's
 * thread, which did not purge it (S37: by the thread that purged).  So
 * the free leaves OS_REPORTING or OS_NOTIFY (with OS_LARGE) in the dead
 * state, keeps the slot or handle out of the free lists, and the
 * reporter gives it back (vr_objs_release_handle).  true: kept for the
 * reporter.  The lock of the handle's free list is held.
 */
static bool handle_freed(struct vr_obj *o, uint64_t large)
{
	uint64_t s = atomic_load(&o->state), keep;
	do
		keep = s & (OS_REPORTING | OS_NOTIFY);
	while (!atomic_compare_exchange_weak(&o->state, &s, keep ? keep | large : 0));
	return keep;
}

/* slot o of slab sl is free; c->lock held */
static void slot_free(struct vr_class *c, struct vr_slab *sl, struct vr_obj *o)
{
	uint32_t slot = (uint32_t)(o - sl->objs);
	sl->freemap[slot / 64] |= 1ull << (slot % 64);
	if (sl->nfree++ == 0)
		partial_link(c, sl);
}

void vr_objs_release_handle(struct vr_objs *os, struct vr_obj *o)
{
	if (atomic_load(&o->state) & OS_LARGE) {
		vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
		atomic_store(&o->state, 0);
		handle_put(os, o);
		vr_unlock(&os->span_lock);
		return;
	}
	struct vr_slab *sl = ((struct vr_opage *)o->home)->slab;
	vr_lock(&sl->cls->lock, VR_RANK_OBJ_CLASS);
	slot_free(sl->cls, sl, o);
	vr_unlock(&sl->cls->lock);
}

static void release_large(struct vr_objs *os, struct vr_obj *o)
{
	uint64_t s = atomic_load(&o->state);
	struct vr_chunk *ch = o->home;
	size_t len = ((obj_size(o) - 1) | (vr_page_size() - 1)) + 1;
	bool reusable = true;
	if ((s & OS_PURGED) && !(s & OS_PINNED))
		/* else: stays trapped; or kept its bytes (OBJ_DISCARD_STUCK) */
		reusable = vr_objs_restore(os, o->ptr, len) == 0 &&
			   vr_objs_zeroed(os, ch, o->ptr, len);
	else /* a span that kept its bytes is not reused: a new object there
	      * would not read as zero (span_alloc hands spans out unwritten) */
		reusable = punch(ch, o->ptr, len);
	vr_lock(&os->span_lock, VR_RANK_OBJ_SPAN);
	bool keep = handle_freed(o, OS_LARGE);
	size_t page = (size_t)(o->ptr - ch->base) >> vr_page_shift();
	if (reusable)
		span_free(os, ch, page, len >> vr_page_shift());
	else
		map_set(ch, page, len >> vr_page_shift(), 0);
	/* the side-car is taken off before the handle goes on the free list:
	 * once there, another thread's vr_objs_alloc may give it a new one */
	uint8_t *x = ((struct vr_lhandle *)o)->extra;
	((struct vr_lhandle *)o)->extra = NULL;
	if (!keep)
		handle_put(os, o);
	vr_unlock(&os->span_lock);
	free(x);
}

/* small: the caller holds one pin on each page of o */
void vr_objs_release(struct vr_objs *os, struct vr_obj *o)
{
	uint64_t s = atomic_load(&o->state);
	if (s & OS_LARGE) {
		release_large(os, o);
		return;
	}
	struct vr_opage *p;
	unsigned n;
	obj_pages(o, &p, &n);
	struct vr_slab *sl = p->slab;
	struct vr_class *c = sl->cls;
	vr_lock(&c->lock, VR_RANK_OBJ_CLASS);
	if (!handle_freed(o, 0))
		slot_free(c, sl, o);
	for (unsigned i = 0; i < n; i++) {
		if (s & OS_PINNED)
			vr_opage_drop(&p[i]);
		if (--p[i].nlive == 0) {
			/* no live object left on the page: memory back to the kernel */
			restore_pages(os, &p[i], 1);
			/* best effort: slots are cleared when reused (alloc_small) */
			(void)punch(sl->chunk,
				    sl->base + ((size_t)(&p[i] - sl->pages) << vr_page_shift()),
				    vr_page_size());
			atomic_store(&p[i].youngest, 0);
		} else {
			vr_obj_page_requeue(os, &p[i]);
		}
	}
	vr_unlock(&c->lock);
}

struct vr_obj *vr_objs_at(struct vr_chunk *ch, uintptr_t a)
{
	uintptr_t base = (uintptr_t)ch->base;
	if (a < base || a - base >= ch->size)
		return NULL;
	uintptr_t v =
		atomic_load_explicit(&ch->map[(a - base) >> vr_page_shift()], memory_order_acquire);
	if (v == 0) /* an untagged page of an object with a chunk of its own */
		v = atomic_load_explicit(&ch->map[0], memory_order_acquire);
	struct vr_obj *o = NULL;
	if (PM_TAG(v) == PM_LARGE) {
		o = PM_PTR(v);
	} else if (PM_TAG(v) == PM_SLAB) {
		struct vr_slab *s = PM_PTR(v);
		size_t slot = (a - (uintptr_t)s->base) / s->size;
		if (slot >= s->nslots)
			return NULL;
		o = &s->objs[slot];
	} else {
		return NULL;
	}
	/* the handle may be freed and reused meanwhile (vr_obj_of races any
	 * call): its fields are read atomically and validated; a reuse
	 * stores them before its state */
	uint64_t st = atomic_load_explicit(&o->state, memory_order_acquire);
	uintptr_t ptr = (uintptr_t)__atomic_load_n(&o->ptr, __ATOMIC_RELAXED);
	size_t size = (size_t)(__atomic_load_n(&o->size_gen, __ATOMIC_RELAXED) >> 16);
	if (!(st & OS_LIVE) || a < ptr || a - ptr >= size)
		return NULL;
	return o;
}

void *vr_objs_extra(const struct vr_obj *o, uint64_t state)
{
	if (state & OS_LARGE)
		return ((const struct vr_lhandle *)o)->extra;
	const struct vr_slab *s = ((const struct vr_opage *)o->home)->slab;
	return s->extra ? s->extra + (size_t)(o - s->objs) * s->xstride : NULL;
}

void vr_objs_each_large(struct vr_objs *os, void (*fn)(struct vr_obj *o))
{
	/* no lock: nothing else runs on the group (destroy, fini; a fork
	 * child must not take its locks); fn may free objects */
	for (size_t i = 0; i < os->nchunks; i++) {
		struct vr_chunk *ch = os->chunks[i]; /* chunks stay until fini */
		size_t np = ch->bump >> vr_page_shift();
		for (size_t p = 0; p < np;) {
			uintptr_t v = atomic_load(&ch->map[p]);
			struct vr_obj *o = PM_PTR(v);
			if (PM_TAG(v) != PM_LARGE || o->ptr != ch->base + (p << vr_page_shift()) ||
			    !(atomic_load(&o->state) & OS_LIVE)) {
				p++;
				continue;
			}
			p += (obj_size(o) + vr_page_size() - 1) >> vr_page_shift();
			fn(o); /* may free o: not read after */
		}
	}
}

static void drop_extra(struct vr_obj *o)
{
	free(((struct vr_lhandle *)o)->extra);
}

void vr_objs_alloc_fini(struct vr_objs *os, bool inherited)
{
	vr_objs_each_large(os, drop_extra);
	for (struct vr_slab *s = os->slabs; s; s = s->all)
		free(s->extra);
	for (unsigned k = 0; k < OBJ_EXTRA_MAX / 16; k++) {
		struct vr_class *x = atomic_load(&os->xclasses[k]);
		for (unsigned i = 0; x && !inherited && i < os->nclasses; i++)
			pthread_mutex_destroy(&x[i].lock);
		free(x);
	}
	for (size_t i = 0; i < os->nchunks; i++)
		chunk_free(os->chunks[i], inherited);
	free(os->chunks);
	for (size_t i = 0; i < os->nblocks; i++) /* slabs and handles */
		munmap(os->blocks[i], META_BYTES);
	free(os->blocks);
	for (unsigned b = 0; b < OBJ_NBINS; b++)
		for (struct vr_fspan *f = os->bins[b], *next; f; f = next) {
			next = f->next;
			free(f);
		}
	if (!inherited)
		for (unsigned i = 0; i < os->nclasses; i++)
			pthread_mutex_destroy(&os->classes[i].lock);
	free(os->classes);
}
