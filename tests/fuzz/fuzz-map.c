/*
 * fuzz-map.c - libFuzzer target: the range map alone (src/map/map.c)
 *
 * Random inserts, erases, in-place shrinks, LRU appends/removals, purge
 * peeks and queries on a small key space, against a plain array of
 * intervals; the B+-tree (fanout 4, so that it grows deep), the LRU log
 * and flags are checked with vr_map_check() after every operation.
 */
#include <stdio.h>
#include <stdlib.h>

#include "map/map.h"

#define SPACE 512 /* byte offsets 0..SPACE-1; page size 16 (shift 4) */
#define MAXR 128

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static void fail(const char *what)
{
	fprintf(stderr, "MODEL MISMATCH: range map: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct vr_map m;
	struct vr_range *model[MAXR];
	size_t n = 0;
	uint64_t age = 0;
	uint64_t gen = 0;
	vr_map_init(&m, 4);
	m.fanout = 4;
	while (in.n) {
		unsigned op = take(&in) % 6;
		uint64_t a = take(&in) * 2 % SPACE, len = take(&in) % 48 + 1, b = a + len;
		if (b > SPACE)
			b = SPACE;
		struct vr_range *hit = vr_map_first_end_after(&m, a);
		/* the model's answer to first_end_after(a) */
		struct vr_range *want = NULL;
		for (size_t i = 0; i < n; i++)
			if (model[i]->end > a && (!want || model[i]->start < want->start))
				want = model[i];
		if (hit != want)
			fail("first_end_after");
		struct vr_range *before = vr_map_last_start_before(&m, a), *wb = NULL;
		for (size_t i = 0; i < n; i++)
			if (model[i]->start < a && (!wb || model[i]->start > wb->start))
				wb = model[i];
		if (before != wb)
			fail("last_start_before");
		struct vr_range got;
		int found = vr_map_lookup_racy(&m, a, &got);
		if (found != (want && want->start <= a) || (found && got.start != want->start))
			fail("lookup_racy");
		if (hit && vr_map_prev(&m, hit) !=
				   (hit == want ? vr_map_last_start_before(&m, hit->start) : NULL))
			fail("prev");
		switch (op) {
		case 0:
		case 1: /* insert [a, b) if free */
			if ((hit && hit->start < b) || n == MAXR)
				break;
			struct vr_range *r = vr_map_alloc(&m);
			if (!r)
				abort();
			r->start = a;
			r->end = b;
			r->age_flags = 0;
			vr_range_set_age(r, ++age);
			if (len % 2) { /* neighbours first: the insert takes its hint */
				struct vr_range *p, *q;
				vr_map_neighbours(&m, a, &p, &q);
				if (p != wb || q != hit)
					fail("neighbours");
			}
			vr_map_insert(&m, r);
			if (vr_whole_pages(a, b, 4, NULL, NULL))
				vr_lru_append(&m, r);
			model[n++] = r;
			break;
		case 2: /* erase the range at a */
			if (!hit || hit->start > a)
				break;
			if (vr_range_on_lru(hit))
				vr_lru_remove(&m, hit);
			if (len % 2) {
				vr_ref *link = vr_map_find_link(&m, a);
				if (!link || vr_map_link_rec(&m, link) != hit)
					fail("find_link");
				vr_map_erase_at(&m, link);
			} else {
				vr_map_erase(&m, hit);
			}
			for (size_t i = 0; i < n; i++)
				if (model[i] == hit)
					model[i] = model[--n];
			vr_map_free(&m, hit);
			break;
		case 3: /* shrink in place from the left (as vr_unmark does) */
			if (!hit || hit->end - hit->start < 2)
				break;
			vr_map_set_start(&m, hit, hit->start + (hit->end - hit->start) / 2);
			if (vr_range_on_lru(hit) &&
			    !vr_whole_pages(hit->start, hit->end, 4, NULL, NULL))
				vr_lru_remove(&m, hit);
			break;
		case 5: { /* a new purge generation: its first candidate is the oldest */
			struct vr_range *c = vr_lru_peek(&m, ++gen), *old = NULL;
			for (size_t i = 0; i < n; i++)
				if (vr_range_on_lru(model[i]) &&
				    (!old || vr_range_age(model[i]) < vr_range_age(old)))
					old = model[i];
			if (c != old)
				fail("lru peek");
			if (c && take(&in) % 2) { /* purge it */
				vr_lru_remove(&m, c);
				c->age_flags |= VR_RANGE_PURGED;
			}
			vr_lru_pop(&m);
			break;
		}
		case 4: /* walk forward from hit with next() */
			for (struct vr_range *x = hit; x; x = vr_map_next(&m, x)) {
				struct vr_range *nx = NULL;
				for (size_t i = 0; i < n; i++)
					if (model[i]->start >= x->end &&
					    (!nx || model[i]->start < nx->start))
						nx = model[i];
				if (vr_map_next(&m, x) != nx)
					fail("next");
			}
			break;
		}
		if (vr_map_check(&m) < 0 || m.nranges != n)
			fail("vr_map_check");
	}
	vr_map_fini(&m);
	return 0;
}

#ifdef VT_FUZZ_MAIN
int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	uint64_t s = 88172645463325252ull;
	static uint8_t buf[3000];
	for (int k = 0; k < 500; k++) {
		for (size_t j = 0; j < sizeof(buf); j++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			buf[j] = (uint8_t)s;
		}
		LLVMFuzzerTestOneInput(buf, sizeof(buf));
	}
	printf("500 generated programs agree with the model\n");
	return 0;
}
#endif
