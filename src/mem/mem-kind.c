/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kind.c - the memory kinds of kind.h: memfd, anonymous, adopted
 *
 * Order (architecture.md, problem 2): mem-pages.c arms the trap first, so no
 * thread ever reads a freed page as zeros, then calls free_pages:
 *   memfd      fallocate(PUNCH_HOLE|KEEP_SIZE) (a read through an
 *              untrapped mapping would re-allocate the page as zeros);
 *   anonymous  nothing when a guard marker trapped the pages (installing
 *              it freed them), else MADV_DONTNEED.  mlock'ed memory
 *              refuses both (EINVAL from the guard install or from
 *              MADV_DONTNEED): the purge disarms and skips the range,
 *              data kept.
 * The VMA budget is the trap backend's: an mprotect that fails with
 * ENOMEM at vm.max_map_count skips the range for either kind.
 *
 * Restoring is the trap's business (mem-pages.c): a punched memfd page or a
 * freed anonymous page reads 0 once the trap is off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrange.h"
#include "base/inject.h"
#include "mem/mem-kind.h"
#include "base/sys.h"
#include "base/log.h"
#include "mem/mem.h"

/* ---- memfd ---- */

static int memfd_free(struct vr_region *r, uint64_t p0, uint64_t p1, bool trap_freed)
{
	(void)trap_freed; /* shared memory: a marker frees nothing */
	return vr_fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p0,
			    (off_t)(p1 - p0)) < 0
		       ? -errno
		       : 0;
}

static uint64_t memfd_footprint(struct vr_region *r)
{
	return vr_fd_bytes(r->fd);
}

/* inherited: nothing is mapped in the child (MADV_DONTFORK), the fd is
 * the child's own copy */
static void memfd_release(struct vr_region *r, bool inherited)
{
	vr_pages_forget(r);
	if (!inherited)
		munmap(r->base, r->map_size);
	close(r->fd);
}

const struct vr_kind_ops vr_kind_memfd = {
	.name = "memfd",
	.free_pages = memfd_free,
	.footprint = memfd_footprint,
	.release = memfd_release,
};

/* ---- anonymous ---- */

int vr_kind_map(int fd, size_t map_size, void **out)
{
	/* anonymous: MAP_NORESERVE, like a memfd the region commits nothing
	 * up front */
	void *p = fd >= 0 ? vr_mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
			  : vr_mmap(NULL, map_size, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (vr_madvise(p, map_size, MADV_DONTFORK) < 0) {
		int err = -errno;
		munmap(p, map_size);
		return err;
	}
	*out = p;
	return 0;
}

static int anon_free(struct vr_region *r, uint64_t p0, uint64_t p1, bool trap_freed)
{
	if (trap_freed)
		return 0;
	/* EINVAL: mlock'ed */
	return vr_madvise(r->base + p0, p1 - p0, MADV_DONTNEED) < 0 ? -errno : 0;
}

/* resident pages of the span, per mincore(2) */
static uint64_t anon_footprint(struct vr_region *r)
{
	unsigned char vec[4096];
	size_t pg = vr_page_size(), resident = 0;
	for (size_t off = 0; off < r->map_size;) {
		size_t n = (r->map_size - off) >> vr_page_shift();
		if (n > sizeof(vec))
			n = sizeof(vec);
		if (mincore(r->base + off, n * pg, vec) < 0)
			return 0;
		for (size_t i = 0; i < n; i++)
			resident += vec[i] & 1;
		off += n * pg;
	}
	return (uint64_t)resident * pg;
}

/* inherited: MADV_DONTFORK, the child has no mapping to release */
static void anon_release(struct vr_region *r, bool inherited)
{
	if (!inherited)
		munmap(r->base, r->map_size);
}

const struct vr_kind_ops vr_kind_anon = {
	.name = "anon",
	.free_pages = anon_free,
	.footprint = anon_footprint,
	.release = anon_release,
};

/* ---- adopted ---- */

/* The caller keeps the mapping: disarm every trapped page, never unmap.
 * Live: the map says which pages are trapped (whole pages of purged
 * ranges; a disarm of a page that a skipped at-once purge left untrapped
 * is harmless).  Inherited (fork child): the span was copied with its
 * traps, and the map may have been mid-change in another parent thread,
 * so the whole span is disarmed, in the child only. */
static void adopted_release(struct vr_region *r, bool inherited)
{
	if (inherited) {
		/* not (wholly) inherited, MADV_DONTFORK: the child may have
		 * mapped its own memory there since, which is not ours to
		 * disarm (a PROT_NONE guard made read/write, its guard
		 * markers removed); pages that were inherited keep their
		 * traps, never data */
		if (!r->span_lost)
			vr_restore_pages(r, 0, r->map_size);
		return;
	}
	unsigned sh = r->map->page_shift;
	for (struct vr_range *x = vr_map_first_end_after(r->map, 0); x;
	     x = vr_map_next(r->map, x)) {
		uint64_t p0, p1;
		if (!vr_range_purged(x) || !vr_whole_pages(x->start, x->end, sh, &p0, &p1))
			continue;
		int err = vr_restore_pages(r, p0, p1);
		if (err < 0)
			vr_dbg("destroy of adopted region %p: [%llu, %llu) stays trapped: %s",
			       (void *)r, (unsigned long long)p0, (unsigned long long)p1,
			       strerror(-err));
	}
}

const struct vr_kind_ops vr_kind_adopted = {
	.name = "adopted",
	.free_pages = anon_free,
	.footprint = anon_footprint,
	.release = adopted_release,
};

/* one mapping of /proc/self/smaps: its header line and its VmFlags */
struct vma {
	uintptr_t start, end;
	char perms[5];
	unsigned long inode;
	char name[32];   /* enough to tell [heap] and [anon:...] apart */
	char flags[128]; /* VmFlags */
};

/* the next mapping; false at the end or on a line it cannot parse */
static bool next_vma(FILE *f, char **line, size_t *cap, struct vma *v)
{
	bool head = false;
	while (getline(line, cap, f) >= 0) {
		char *l = *line;
		l[strcspn(l, "\n")] = 0;
		struct vma h;
		int name_at = 0;
		if (strncmp(l, "VmFlags:", 8) == 0) {
			snprintf(v->flags, sizeof(v->flags), "%s", l + 8);
			if (head)
				return true;
		} else if (sscanf(l, "%lx-%lx %4s %*x %*x:%*x %lu %n", &h.start, &h.end, h.perms,
				  &h.inode, &name_at) >= 4 &&
			   name_at > 0) {
			/* (sscanf fills h before it fails on "FilePmdMapped:") */
			*v = h;
			snprintf(v->name, sizeof(v->name), "%s", l + name_at);
			head = true;
		}
	}
	return false;
}

/* rwx is accepted: valgrind's heap is, and so may be a JIT's arena */
static bool private_anon_rw(const struct vma *v)
{
	if (strncmp(v->perms, "rw", 2) != 0 || v->perms[3] != 'p' || v->inode != 0)
		return false;
	return v->name[0] == 0 || strcmp(v->name, "[heap]") == 0 ||
	       strncmp(v->name, "[anon:", 6) == 0;
}

/* The span must be one mapping as the caller made it.  The kernel may
 * keep one mapping as several adjacent VMAs that it could not merge (in a
 * fork child, pieces that mprotect once split get separate anon_vmas), so
 * adjacent VMAs count as one mapping when their flags and names are the
 * same; a gap, or a neighbour with other flags (another mmap with
 * MADV_DONTFORK, mlock, MADV_HUGEPAGE, another name...), is not. */
int vr_adopt_check(const void *addr, size_t len, int *prot)
{
	uintptr_t a = (uintptr_t)addr, b = a + len, cur = a;
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	struct vma v, first;
	int rc = -EINVAL;
	while (next_vma(f, &line, &cap, &v)) {
		if (v.end <= cur)
			continue;
		if (v.start > cur || !private_anon_rw(&v))
			break;
		if (cur == a)
			first = v;
		else if (strcmp(v.flags, first.flags) != 0 || strcmp(v.name, first.name) != 0 ||
			 strcmp(v.perms, first.perms) != 0)
			break;
		cur = v.end;
		if (cur >= b) {
			*prot = PROT_READ | PROT_WRITE | (first.perms[2] == 'x' ? PROT_EXEC : 0);
			rc = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}
