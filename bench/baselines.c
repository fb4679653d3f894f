/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* baselines.c - madvfree-canary and heap-lru (see baselines.h) */
#include "bench.h"
#include "baselines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint64_t canary_cookie;

void canary_init(void)
{
	uint64_t s = now_ns() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	canary_cookie = rng_next(&s) | 1; /* never zero: a reclaimed page reads 0 */
}

void canary_unlock(void *p, size_t len, uint64_t *saved)
{
	size_t np = len / page_size;
	for (size_t i = 0; i < np; i++) {
		uint64_t *w = (uint64_t *)((char *)p + i * page_size);
		saved[i] = *w;
		__atomic_store_n(w, canary_cookie, __ATOMIC_RELAXED);
	}
	if (madvise(p, len, MADV_FREE) < 0)
		die("madvise(MADV_FREE): %s", strerror(errno));
}

bool canary_lock(void *p, size_t len, const uint64_t *saved)
{
	size_t np = len / page_size;
	bool intact = true;
	for (size_t i = 0; i < np; i++) {
		uint64_t *w = (uint64_t *)((char *)p + i * page_size);
		uint64_t expect = canary_cookie;
		if (!__atomic_compare_exchange_n(w, &expect, saved[i], false, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			intact = false;
	}
	return intact;
}

/* ---- heap-lru ---- */
int hlru_init(struct hlru *h, size_t nobjs, const size_t *lens, size_t budget)
{
	*h = (struct hlru){ .n = nobjs, .budget = budget };
	h->e = calloc(nobjs, sizeof(*h->e));
	if (!h->e)
		return -ENOMEM;
	for (size_t i = 0; i < nobjs; i++)
		h->e[i].len = lens[i];
	return 0;
}

static void lru_unlink(struct hlru *h, struct hlru_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		h->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		h->tail = e->prev;
	e->prev = e->next = NULL;
}

static void evict(struct hlru *h, struct hlru_entry *e)
{
	lru_unlink(h, e);
	free(e->buf);
	e->buf = NULL;
	h->bytes -= e->len;
	h->evictions++;
}

void hlru_fini(struct hlru *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->e[i].buf);
	free(h->e);
	*h = (struct hlru){ 0 };
}

void *hlru_lock(struct hlru *h, size_t id, bool *purged)
{
	struct hlru_entry *e = &h->e[id];
	if (e->locked)
		die("heap-lru: object %zu locked twice", id);
	if (e->buf) {
		lru_unlink(h, e);
		*purged = false;
	} else {
		e->buf = malloc(e->len);
		if (!e->buf)
			die("heap-lru: out of memory");
		h->bytes += e->len;
		*purged = true;
	}
	e->locked = true;
	return e->buf;
}

void hlru_unlock(struct hlru *h, size_t id)
{
	struct hlru_entry *e = &h->e[id];
	e->locked = false;
	e->next = NULL;
	e->prev = h->tail;
	if (h->tail)
		h->tail->next = e;
	else
		h->head = e;
	h->tail = e;
	/* the budget counts every allocated buffer, as Chromium's did */
	while (h->budget && h->bytes > h->budget && h->head)
		evict(h, h->head);
}

size_t hlru_purge_all(struct hlru *h)
{
	size_t freed = 0;
	while (h->head) {
		freed += h->head->len;
		evict(h, h->head);
	}
	return freed;
}
