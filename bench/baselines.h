/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * baselines.h - what a user would pick instead of libvrange, written here
 * from the published techniques (no third-party code):
 *
 * madvfree-canary  (Chromium MadvFreeDiscardableMemoryPosix, skeeto/purgeable)
 *   unlock: save the first word of every page, write a cookie there,
 *           madvise(MADV_FREE) the object;
 *   lock:   compare-and-swap the cookie back to the saved word on every
 *           page; any mismatch means the kernel reclaimed a page (it reads
 *           as zero) and the whole object counts as purged.
 *   There is no budget: only the kernel's reclaim takes pages away.
 *
 * heap-lru  (Chromium's 2014 emulated discardable memory)
 *   a budgeted LRU of malloc'd buffers; unlocked buffers are evictable,
 *   purge = free(); lock of an evicted object mallocs a fresh buffer and
 *   reports it purged.
 */
#ifndef VRBENCH_BASELINES_H
#define VRBENCH_BASELINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- madvfree-canary ---- */
extern uint64_t canary_cookie;
void canary_init(void);
/* p page aligned, len a page multiple; saved has len / page_size words */
void canary_unlock(void *p, size_t len, uint64_t *saved);
/* true: intact (every page got its word back); false: purged.  On false
 * the pages that still held the cookie got their word back as well. */
bool canary_lock(void *p, size_t len, const uint64_t *saved);

/* ---- heap-lru ---- */
struct hlru_entry {
	void *buf;
	size_t len;
	struct hlru_entry *prev, *next; /* LRU links while unlocked and present */
	bool locked;
};

struct hlru {
	struct hlru_entry *e; /* one entry per object id */
	size_t n;
	size_t budget, bytes;
	struct hlru_entry *head, *tail; /* oldest ... youngest */
	uint64_t evictions;
};

int hlru_init(struct hlru *h, size_t nobjs, const size_t *lens, size_t budget);
void hlru_fini(struct hlru *h);
/* returns the buffer; *purged = true when it had to be (re)allocated */
void *hlru_lock(struct hlru *h, size_t id, bool *purged);
void hlru_unlock(struct hlru *h, size_t id);
/* frees every unlocked buffer; returns bytes freed */
size_t hlru_purge_all(struct hlru *h);

#endif
