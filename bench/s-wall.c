/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-wall.c - scenario wall: objects and ranges at the memory wall (issue
 * 26), next to the floors measured in the same process.
 *
 * Floors: a DRAM miss (a pointer chase in a random cyclic order over the
 * cache lines of a buffer far larger than the last-level cache: each load
 * depends on the previous one), once on 4 KiB pages (MADV_NOHUGEPAGE: the
 * miss plus a TLB miss whose page walk misses too) and once on 2 MiB pages
 * (MADV_HUGEPAGE: the miss alone, where the kernel gave huge pages; a note
 * says how much it did); an uncontended mutex lock+unlock, two of them
 * (what a pair would pay with a lock per call), and a CAS.
 *
 * Rows (s-objpair.c and s-markpair.c measure them, here under "wall"):
 * the object pin+unpin pair, random over 10^3, 10^6 and 10^7 objects of
 * 256 bytes, and the hot pair (one object); the range unmark+mark pair,
 * random over 10^3, 10^6 and 10^7 ranges; metadata bytes per object and
 * per range; at 10^6 and 10^7, the range pair's memory floor, its chain
 * of cold reads alone (bench_tree_floor).  The parent divides them by the
 * floors (vrbench.c,
 * derive_wall).  10^7 runs in full mode only (about 1.5 GB of metadata);
 * --quick stops at 10^6, --smoke at 10^4.
 *
 * Style "hp-off" runs the same with VRANGE_HUGEPAGES=0: the library's
 * metadata arenas on 4 KiB pages; "hp-on" with the library's default.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

#include <vrange.h>

#define SCEN "wall"
#define STEPS 256

struct line {
	struct line *next;
	char pad[56];
};

/* a dependent pointer chase in a random cyclic order over the cache lines
 * of len bytes (on 2 MiB pages if huge), as row name.  dram: a buffer far
 * larger than the cache, and a note of how much of it the kernel put on
 * huge pages; else a small one, walked once whole before the samples so
 * that what fits the cache is in it */
static void bench_chase(const char *name, size_t len, bool huge, bool dram)
{
	size_t n = len / sizeof(struct line);
	uint64_t hp0 = smaps_rollup_kib("AnonHugePages");
	struct line *l = map_huge(len, huge);
	uint32_t *ord = malloc(n * sizeof(*ord));
	CHECK(ord);
	uint64_t rng = 0x5eed + huge;
	for (size_t i = 0; i < n; i++)
		ord[i] = (uint32_t)i;
	for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
		size_t j = rng_below(&rng, i + 1);
		uint32_t t = ord[i];
		ord[i] = ord[j];
		ord[j] = t;
	}
	for (size_t i = 0; i < n; i++) /* one cycle through every line */
		l[ord[i]].next = &l[ord[(i + 1) % n]];
	free(ord);
	uint64_t hp = smaps_rollup_kib("AnonHugePages") - hp0;
	struct line *p = &l[0];
	for (size_t i = 0; !dram && i < n; i++)
		p = p->next;
	struct samples s = { 0 };
	size_t nsamp = BY_MODE(200, 1000, 4000);
	for (size_t i = 0; i <= nsamp; i++) {
		uint64_t t = now_ns();
		for (size_t j = 0; j < STEPS; j++)
			p = p->next;
		if (i) /* the first batch warms up */
			samples_add(&s, (double)(now_ns() - t) / STEPS);
	}
	CHECK(p != NULL);
	emit_samples(SCEN, name, &s, "ns");
	if (dram)
		emit_note("wall %s: DRAM-miss buffer of %zu MiB on %s pages: %llu MiB of it huge",
			  bopt.variant, len / MiB, huge ? "2 MiB" : "4 KiB",
			  (unsigned long long)(hp / 1024));
	samples_free(&s);
	unmap_huge(l, len);
}

static void bench_dram(bool huge)
{
	bench_chase(huge ? "dram-miss-2m" : "dram-miss-4k", BY_MODE(64 * MiB, 256 * MiB, 1 * GiB),
		    huge, true);
}

/* One random read in a buffer the size of the range tree's level above
 * its leaves at n ranges: what a descent pays for that level when it
 * stays cached as well as such a buffer does.  A sequential build fills
 * every node (src/map/map.h: 30 keys per 512-byte node), so that level
 * holds n / 900 nodes: 0.57 MB at 10^6 ranges, 5.7 MB at 10^7.  At 10^6
 * it sits beside the levels above it in a core's L2; at 10^7 it is as
 * large as the share of the last-level cache a virtual machine gets. */
static void bench_index_level(size_t n, const char *tag)
{
	char name[48];
	snprintf(name, sizeof(name), "index-level-read-%s", tag);
	bench_chase(name, (n / 900) * 512, true, false);
}

/*
 * The memory floor of the range pair: what a random unmark+mark pair must
 * read cold at n ranges, with nothing else (no code, no lock, no clock),
 * as one dependent chain per pair over buffers of the tree's sizes (a
 * sequential build: 30 ranges per 512-byte leaf, 32-byte records):
 *   - "leaf+record": a leaf (its 8 lines asked for at once, as map.c
 *     does, all read) and then one record line, read and written: the
 *     floor of any ordered index whose levels above the leaves stay in
 *     the cache.  Beyond the cache at both sizes, its 10^7 / 10^6 ratio
 *     says how much of the pair's own ratio is the machine's;
 *   - "tree": first a node of the level above the leaves (8 lines asked
 *     for, its 5 key lines read), then the same: the floor of this tree's
 *     shape, where that level stays cached only as well as the chain's
 *     own traffic lets it.
 * Each step's addresses depend on the previous step's loads (the buffers
 * hold zeros the compiler cannot see), so steps do not overlap, as pairs
 * do not: a pair is over a thousand instructions.
 */
static void bench_tree_floor(size_t n, const char *tag, bool parent)
{
	size_t lv = parent ? (n / 900) * 512 : 512, lf = (n / 30) * 512, rc = n * 32;
	char *P = map_huge(lv, true), *L = map_huge(lf, true), *R = map_huge(rc, true);
	memset(P, 0, lv); /* resident, and the zeros every load returns */
	memset(L, 0, lf);
	memset(R, 0, rc);
	size_t np = lv / 512, nl = lf / 512, nr = rc / 64;
	uint64_t rng = 0x7ee5 + n, dep = 0;
	struct samples s = { 0 };
	size_t nsamp = BY_MODE(100, 500, 2000);
	for (size_t i = 0; i <= nsamp; i++) {
		uint64_t t = now_ns();
		for (size_t j = 0; j < 64; j++) {
			uint64_t x = rng_next(&rng) + dep;
			if (parent) {
				const char *q = P + ((x >> 40) % np) * 512;
				for (int k = 0; k < 512; k += 64)
					__builtin_prefetch(q + k);
				for (int k = 0; k < 5 * 64; k += 64)
					x += *(const volatile uint64_t *)(q + k);
			}
			const char *l = L + ((x >> 20) % nl) * 512;
			for (int k = 0; k < 512; k += 64)
				__builtin_prefetch(l + k);
			for (int k = 0; k < 512; k += 64)
				x += *(const volatile uint64_t *)(l + k);
			volatile uint64_t *r = (volatile uint64_t *)(R + (x % nr) * 64);
			dep = *r;
			r[1] = dep; /* the pair writes its record */
		}
		if (i) /* the first batch warms up */
			samples_add(&s, (double)(now_ns() - t) / 64);
	}
	char name[48];
	snprintf(name, sizeof(name), "%s-floor-%s", parent ? "tree" : "leaf-rec", tag);
	emit_samples(SCEN, name, &s, "ns");
	samples_free(&s);
	unmap_huge(P, lv);
	unmap_huge(L, lf);
	unmap_huge(R, rc);
}

int run_wall(const char *style)
{
	bool off = style && !strcmp(style, "hp-off");
	if (off)
		setenv("VRANGE_HUGEPAGES", "0", 1); /* read at the first vr_ctx_new */
	bopt.variant = off ? "hp-off" : "hp-on";
	bench_dram(false);
	bench_dram(true);
	bench_floor_mutex(SCEN);
	bench_mutex_pair(SCEN);
	bench_floor_cas(SCEN);
	bench_floor_stamp(SCEN);
	/* smoke: 10^3, 10^4; quick: 10^3, 10^6; full: 10^3, 10^6, 10^7 */
	static const char *const tags[] = { "1e3", "1e4", "1e6", "1e7" };
	static const size_t sizes[] = { 1000, 10000, 1000000, 10000000 };
	static const unsigned modes[] = { 7, 1, 6, 4 }; /* bit (1 << mode) */
	for (size_t i = 0; i < 4; i++) {
		if (!(modes[i] & (1u << bopt.mode)))
			continue;
		if (sizes[i] >= 1000000) {
			bench_index_level(sizes[i], tags[i]);
			bench_tree_floor(sizes[i], tags[i], false);
			bench_tree_floor(sizes[i], tags[i], true);
		}
		bench_obj_pairs(SCEN, sizes[i], 256, tags[i]);
		struct vr_ctx *ctx;
		VRCHECK(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx));
		bench_range_pairs(SCEN, ctx, sizes[i], tags[i]);
		vr_ctx_destroy(ctx);
	}
	return 0;
}
