/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-vma.c - VMA exhaustion (architecture.md problem 1; API S5, S8, S9)
 *
 * With the mprotect trap backend every purged range that is not next to a
 * protected neighbour splits the region's mapping, and vm.max_map_count
 * (65530 here) ends that after ~32K alternating pages: mprotect fails with
 * ENOMEM.  The purge engine must then skip (and count in VR_STAT_SKIPPED),
 * never crash, abort or lose data; an unmark that cannot restore access
 * must fail cleanly and change nothing.  With the guard backend
 * (MADV_GUARD_INSTALL) the same scenarios cost no VMA at all: everything is
 * purged and nothing skipped.
 *
 * Each scenario runs in a re-exec'd process with VRANGE_TRAP set before
 * vr_ctx_new, once per backend:
 *   alt_each   1 GiB region, 131072 alternating one-page ranges, purge all,
 *              check counts and stats, purge again, pressure and limit; at
 *              the limit a range between two purged pages (its trap merges
 *              VMAs) is still purged; then unmark every range one by one
 *              (VR_PURGED, VR_INTACT + exact data, or a clean negative
 *              errno with nothing changed).
 *   alt_all    the same purge, then one vr_unmark over the whole region.
 *   app_eats   the application's own mappings first use ~60000 VMAs
 *              (alternating PROT_NONE / RW anonymous pages), then the
 *              library purges a 16-page range and 8176 one-page ranges:
 *              skips and counts, data preserved; a mark over a purged
 *              sub-page piece (S4 purge-at-once needing a split) still
 *              says VR_PURGED; unmarking one page in the middle of the
 *              purged 16-page range needs 2 more VMAs: with mprotect it
 *              must fail cleanly (or succeed), never lie.
 * Only the first 8 bytes of touched pages are written, and only marked
 * pages plus every 8th unmarked page are touched (~576 MiB of the 1 GiB).
 * Numbers (purged/skipped counts, VMA counts, times) go to stderr.
 */
#include "tests.h"

#include <stdbool.h>

static size_t P;
static bool guard; /* backend in use */
static struct vr_ctx *ctx;

#define GEN_REGION 0x5eed
#define GEN_APP 0xa99

/* ---- /proc helpers: no malloc and no mmap (the budget may be gone) ---- */

/* lines of /proc/self/maps containing @needle; for NULL all VMAs: every
 * line but the [vsyscall] gate (shown there, not counted by max_map_count) */
static long count_maps(const char *needle)
{
	static char buf[1 << 16];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	long n = 0;
	size_t have = 0;
	ssize_t k;
	while ((k = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		have += (size_t)k;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n'))) {
			*nl = 0;
			if (needle ? strstr(line, needle) != NULL
				   : strstr(line, "[vsyscall]") == NULL)
				n++;
			line = nl + 1;
		}
		have = (size_t)(buf + have - line); /* a partial line: keep it */
		memmove(buf, line, have);
	}
	close(fd);
	return n;
}

static long count_vmas(void)
{
	return count_maps(NULL);
}

static long max_map_count(void)
{
	char buf[64] = { 0 };
	int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return k > 0 ? strtol(buf, NULL, 10) : -1;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t st_get(enum vr_stat s)
{
	return vr_ctx_stat(ctx, s);
}

static void open_ctx(void)
{
	P = vt_pg();
	const char *want = getenv("VRANGE_TRAP");
	CK(want, "(VRANGE_TRAP must be set by the caller)");
	int err = vr_ctx_new(VR_CTX_NO_MONITOR, &ctx);
	if (err == -EOPNOTSUPP) {
		fprintf(stderr, "skip: trap backend %s not available here\n", want);
		exit(77);
	}
	CK_EQ(err, 0);
	/* uffd traps memfd pages without touching the VMAs, like guard
	 * markers (and anonymous memory with guard markers, trap.c) */
	bool uffd = strcmp(want, "uffd") == 0;
	guard = strcmp(want, "guard") == 0 || uffd;
	CK_EQ(vr_trap_backend(), uffd ? VR_TRAP_UFFD : guard ? VR_TRAP_GUARD : VR_TRAP_MPROTECT);
	fprintf(stderr, "backend %s, vm.max_map_count %ld, VMAs at start %ld\n", want,
		max_map_count(), count_vmas());
}

/* 8-byte stamps: pattern of generation gen at the page's offset */
static void stamp(uint8_t *base, size_t pg, uint64_t gen)
{
	vt_fill(base + pg * P, pg * P, 8, gen);
}

static bool stamped(const uint8_t *base, size_t pg, uint64_t gen)
{
	return vt_check(base + pg * P, pg * P, 8, gen) == SIZE_MAX &&
	       vt_all_zero(base + pg * P + 8, 8);
}

/* ---------------------------------------------------------------------- */
/* (1) 1 GiB region, 131072 alternating one-page ranges, purge all         */

#define ALT_SIZE ((size_t)1 << 30)

static struct vr_region *alt_r;
static uint8_t *alt_b;
static size_t alt_npg, alt_nr;
static bool *alt_purged; /* per marked range (index pg / 2) */

static void alt_setup_and_purge(void)
{
	open_ctx();
	long maxmap = max_map_count();
	alt_npg = ALT_SIZE / P;
	alt_nr = alt_npg / 2;
	alt_purged = calloc(alt_nr, sizeof(bool));
	CK(alt_purged);
	CK_EQ(vr_region_new(ctx, "vt-vma", ALT_SIZE, 0, &alt_r), 0);
	alt_b = vr_region_base(alt_r);

	double t0 = now_s();
	for (size_t pg = 0; pg < alt_npg; pg++)
		if (pg % 2 == 0 || pg % 16 == 1)
			stamp(alt_b, pg, GEN_REGION);
	for (size_t pg = 0; pg < alt_npg; pg += 2)
		CK_EQ(vr_mark(alt_r, pg * P, P), VR_INTACT);
	double t1 = now_s();
	CK_EQ(st_get(VR_STAT_RANGES), alt_nr);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), alt_nr * P);
	long vmas0 = count_vmas();

	ssize_t n = vr_ctx_purge(ctx, SIZE_MAX);
	double t2 = now_s();
	long vmas1 = count_vmas();
	uint64_t purged = st_get(VR_STAT_PURGES), skipped = st_get(VR_STAT_SKIPPED);
	fprintf(stderr,
		"alt: %zu ranges marked (setup %.2f s); purge(SIZE_MAX) = %zd in %.2f s: "
		"purged %" PRIu64 ", skipped %" PRIu64 "; VMAs %ld -> %ld (max %ld)\n",
		alt_nr, t1 - t0, n, t2 - t1, purged, skipped, vmas0, vmas1, maxmap);
	CK(n >= 0, "(purge returned %zd)", n);
	CK_EQ((uint64_t)n, purged * P);
	CK_EQ(st_get(VR_STAT_RECLAIMED_BYTES), (uint64_t)n);
	/* one purge run visits every range once: purged or skipped */
	CK_EQ(purged + skipped, alt_nr);
	if (guard) {
		CK_EQ(skipped, 0);
		/* the whole point of guard markers: the region stays one VMA */
		CK_EQ(count_maps("/memfd:vt-vma (deleted)"), 1);
	} else if (maxmap > 0 && (uint64_t)maxmap < 2 * alt_nr) {
		CK(skipped > 0, "(mprotect purged all %" PRIu64 " with max_map_count %ld?)", purged,
		   maxmap);
		CK(purged > 0);
	}
	CK(maxmap <= 0 || vmas1 <= maxmap);
	/* purging never merges ranges */
	CK_EQ(st_get(VR_STAT_RANGES), alt_nr);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), (alt_nr - purged) * P);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), purged * P);

	/* per-range status agrees with the counters */
	uint64_t seen = 0;
	for (size_t i = 0; i < alt_nr; i++) {
		int st = vr_status(alt_r, 2 * i * P, P);
		CK(st == VR_STATE_VOLATILE || st == (VR_STATE_VOLATILE | VR_STATE_PURGED),
		   "(status of page %zu = %d)", 2 * i, st);
		alt_purged[i] = st & VR_STATE_PURGED;
		seen += alt_purged[i];
		/* S7: a one-page range is all whole page: purged means gone,
		 * and the unmarked neighbours are never part of it */
		int nb = vr_status(alt_r, (2 * i + 1) * P, P);
		CK_EQ(nb, 0);
	}
	CK_EQ(seen, purged);

	/* S9: the non-volatile pages never changed */
	for (size_t pg = 1; pg < alt_npg; pg += 16)
		CK(stamped(alt_b, pg, GEN_REGION), "(non-volatile page %zu changed)", pg);

	/* purge again: the skipped ranges kept their place and are tried
	 * again (and skipped again if nothing changed); nothing crashes */
	double t3 = now_s();
	ssize_t n2 = vr_ctx_purge(ctx, SIZE_MAX);
	double t4 = now_s();
	uint64_t purged2 = st_get(VR_STAT_PURGES) - purged,
		 skipped2 = st_get(VR_STAT_SKIPPED) - skipped;
	fprintf(stderr,
		"alt: second purge = %zd in %.2f s: purged %" PRIu64 ", skipped %" PRIu64
		"; VMAs %ld\n",
		n2, t4 - t3, purged2, skipped2, count_vmas());
	CK(n2 >= 0);
	CK_EQ((uint64_t)n2, purged2 * P);
	CK_EQ(purged2 + skipped2, alt_nr - purged);
	ssize_t n3 = vr_ctx_notify_pressure(ctx, VR_PRESSURE_CRITICAL);
	ssize_t n4 = vr_ctx_notify_pressure(ctx, VR_PRESSURE_MODERATE);
	CK(n3 >= 0 && n4 >= 0, "(pressure: %zd %zd)", n3, n4);
	CK_EQ(vr_ctx_set_limit(ctx, P), 0);
	CK_EQ(vr_ctx_set_limit(ctx, 0), 0);
	CK_EQ(st_get(VR_STAT_PRESSURE_EVENTS), 2);
	/* re-read the purged set: the extra purges may have taken some */
	purged = st_get(VR_STAT_PURGES);
	seen = 0;
	for (size_t i = 0; i < alt_nr; i++) {
		int st = vr_status(alt_r, 2 * i * P, P);
		CK(st > 0);
		CK(!alt_purged[i] || (st & VR_STATE_PURGED), "(S6: purged state vanished)");
		alt_purged[i] = st & VR_STATE_PURGED;
		seen += alt_purged[i];
	}
	CK_EQ(seen, purged);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), purged * P);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), (alt_nr - purged) * P);
	CK_EQ(st_get(VR_STAT_RANGES), alt_nr);

	/* at the limit, a range whose trap merges with a protected neighbour
	 * costs no VMA: the purge skips the older ranges it cannot trap and
	 * goes on to purge it (S8).  Take the odd page between the last two
	 * purged ranges (guard: any two), so that marking it merges with
	 * nothing (S3: its neighbours are purged) and trapping it joins the
	 * two PROT_NONE neighbours. */
	size_t ip = alt_nr / 2;
	if (!guard)
		for (size_t i = 1; i + 1 < alt_nr; i++)
			if (alt_purged[i] && !alt_purged[i + 1])
				ip = i;
	CK(alt_purged[ip] && alt_purged[ip - 1]);
	size_t odd = 2 * ip - 1;
	uint64_t pu0 = st_get(VR_STAT_PURGES), sk0 = st_get(VR_STAT_SKIPPED);
	CK_EQ(vr_mark(alt_r, odd * P, P), VR_INTACT); /* adjacency to purged: no merge */
	CK_EQ(st_get(VR_STAT_RANGES), alt_nr + 1);
	ssize_t n5 = vr_ctx_purge(ctx, SIZE_MAX);
	fprintf(stderr,
		"alt: page %zu next to purged page %zu: purge = %zd (purged %" PRIu64
		", skipped %" PRIu64 "); VMAs %ld\n",
		odd, odd - 1, n5, st_get(VR_STAT_PURGES) - pu0, st_get(VR_STAT_SKIPPED) - sk0,
		count_vmas());
	CK_EQ(n5, (ssize_t)P);
	CK_EQ(vr_status(alt_r, odd * P, P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(st_get(VR_STAT_PURGES) - pu0, 1);
	CK_EQ(st_get(VR_STAT_SKIPPED) - sk0, alt_nr - purged);
	CK_EQ(vr_unmark(alt_r, odd * P, P), VR_PURGED);
	CK(vt_all_zero(alt_b + odd * P, 16), "(discarded page %zu not zero)", odd);
	if (odd % 16 == 1)
		stamp(alt_b, odd, GEN_REGION);
	CK_EQ(st_get(VR_STAT_RANGES), alt_nr);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), purged * P);
}

/* a failed unmark changed nothing (S5) */
static void check_unchanged(size_t off, size_t len, int st_before, uint64_t ranges, uint64_t vol,
			    uint64_t pur)
{
	CK_EQ(vr_status(alt_r, off, len), st_before);
	CK_EQ(st_get(VR_STAT_RANGES), ranges);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), vol);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), pur);
}

static void alt_finish(void)
{
	CK_EQ(st_get(VR_STAT_RANGES), 0);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), 0);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), 0);
	CK_EQ(vr_status(alt_r, 0, ALT_SIZE), 0);
	for (size_t pg = 1; pg < alt_npg; pg += 16)
		CK(stamped(alt_b, pg, GEN_REGION), "(non-volatile page %zu changed)", pg);
	fprintf(stderr, "alt: VMAs after unmarking everything %ld\n", count_vmas());
	vr_ctx_destroy(ctx);
	free(alt_purged);
	exit(0);
}

static void sc_alt_each(void)
{
	alt_setup_and_purge();
	double t0 = now_s();
	unsigned long intact = 0, lost = 0, errs = 0;
	int first_err = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < alt_nr; i++) {
			size_t pg = 2 * i;
			int st = vr_status(alt_r, pg * P, P);
			if (st == 0)
				continue; /* done in pass 0 */
			uint64_t ranges = st_get(VR_STAT_RANGES),
				 vol = st_get(VR_STAT_VOLATILE_BYTES),
				 pur = st_get(VR_STAT_PURGED_BYTES);
			int rc = vr_unmark(alt_r, pg * P, P);
			if (rc < 0) {
				/* S5: a clean error, nothing changed */
				errs++;
				if (!first_err)
					first_err = rc;
				check_unchanged(pg * P, P, st, ranges, vol, pur);
				continue;
			}
			if (alt_purged[i]) {
				CK_EQ(rc, VR_PURGED);
				CK(vt_all_zero(alt_b + pg * P, 16), "(discarded page %zu not zero)",
				   pg);
				lost++;
			} else {
				CK_EQ(rc, VR_INTACT);
				CK(stamped(alt_b, pg, GEN_REGION),
				   "(skipped page %zu lost its data)", pg);
				intact++;
			}
			CK_EQ(vr_status(alt_r, pg * P, P), 0);
		}
		if (pass == 0)
			fprintf(stderr,
				"alt_each: unmark one by one in %.2f s: %lu VR_PURGED, %lu "
				"VR_INTACT, "
				"%lu errors (first %d)\n",
				now_s() - t0, lost, intact, errs, first_err);
	}
	/* the second pass retried the failures: with every other page
	 * restored there is budget again, so nothing may be left */
	CK_EQ(lost + intact, alt_nr);
	alt_finish();
}

static void sc_alt_all(void)
{
	alt_setup_and_purge();
	uint64_t purged = st_get(VR_STAT_PURGES);
	uint64_t ranges = st_get(VR_STAT_RANGES), vol = st_get(VR_STAT_VOLATILE_BYTES),
		 pur = st_get(VR_STAT_PURGED_BYTES);
	int st = vr_status(alt_r, 0, ALT_SIZE);
	double t0 = now_s();
	int rc = vr_unmark(alt_r, 0, ALT_SIZE);
	fprintf(stderr, "alt_all: one vr_unmark over 1 GiB = %d in %.2f s; VMAs %ld\n", rc,
		now_s() - t0, count_vmas());
	if (rc < 0) {
		check_unchanged(0, ALT_SIZE, st, ranges, vol, pur);
		/* then one by one (each restore only merges VMAs) */
		for (size_t i = 0; i < alt_nr; i++) {
			int r2 = vr_unmark(alt_r, 2 * i * P, P);
			CK_EQ(r2, alt_purged[i] ? VR_PURGED : VR_INTACT);
		}
	} else {
		CK_EQ(rc, purged ? VR_PURGED : VR_INTACT);
	}
	for (size_t i = 0; i < alt_nr; i++) {
		size_t pg = 2 * i;
		if (alt_purged[i])
			CK(vt_all_zero(alt_b + pg * P, 16), "(discarded page %zu not zero)", pg);
		else
			CK(stamped(alt_b, pg, GEN_REGION), "(skipped page %zu lost its data)", pg);
	}
	alt_finish();
}

/* ---------------------------------------------------------------------- */
/* (3) the application's own mappings eat most of the budget first         */

#define APP_TARGET_FREE 5500 /* VMAs left for the library: ~60000 used of 65530 */
#define EAT_REGION_PAGES 16384
#define BIG_PAGES 16    /* one 16-page range at pages [0, 16) */
#define PIECE_PG 18     /* a purged sub-page piece at the end of page 19 */
#define SINGLES_FROM 32 /* one-page ranges at 32, 34, ... */

static void sc_app_eats(void)
{
	open_ctx();
	long maxmap = max_map_count();
	CK(maxmap > 0);
	/* allocate before the budget is gone (ASan's allocator mmaps) */
	size_t nsingles = (EAT_REGION_PAGES - SINGLES_FROM) / 2, nr = nsingles + 1;
	bool *sp = calloc(nsingles, sizeof(bool));
	CK(sp);
	long v0 = count_vmas();
	long eat = maxmap - APP_TARGET_FREE - v0;
	if (eat < 1000) {
		fprintf(stderr, "skip: vm.max_map_count %ld too small\n", maxmap);
		exit(77);
	}
	/* one anonymous mapping, every other page PROT_NONE: 2 VMAs each */
	size_t app_pages = (size_t)eat + 2;
	uint8_t *app = mmap(NULL, app_pages * P, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	CK(app != MAP_FAILED);
	for (size_t pg = 0; pg < app_pages; pg += 32)
		stamp(app, pg, GEN_APP);
	double t0 = now_s();
	size_t prot = 0;
	for (size_t pg = 1; pg + 1 < app_pages && (long)(2 * prot) < eat; pg += 2) {
		if (mprotect(app + pg * P, P, PROT_NONE) < 0) {
			CK(errno == ENOMEM, "(mprotect: %s)", strerror(errno));
			break;
		}
		prot++;
	}
	long v1 = count_vmas();
	fprintf(stderr,
		"app_eats: application made %zu PROT_NONE holes: VMAs %ld -> %ld (%.2f s)\n", prot,
		v0, v1, now_s() - t0);
	CK(v1 >= maxmap - APP_TARGET_FREE - 16, "(the application could not eat the budget)");

	struct vr_region *r;
	/* VT_ANON=1: a VR_REGION_ANON region, whose mprotect traps cost VMAs
	 * the same way (kind.c) */
	unsigned fl = getenv("VT_ANON") ? VR_REGION_ANON : 0;
	CK_EQ(vr_region_new(ctx, "vt-vma-eat", EAT_REGION_PAGES * P, fl, &r), 0);
	uint8_t *b = vr_region_base(r);
	for (size_t pg = 0; pg < EAT_REGION_PAGES; pg++)
		stamp(b, pg, GEN_REGION);
	/* a purged range with no whole page left, for the S4 check below:
	 * purge [18, 20) pages while there is budget, then unmark all of it
	 * but its last 100 bytes (restoring pages only merges VMAs) */
	CK_EQ(vr_mark(r, PIECE_PG * P, 2 * P), VR_INTACT);
	CK_EQ(vr_ctx_purge(ctx, 1), (ssize_t)(2 * P));
	CK_EQ(vr_unmark(r, PIECE_PG * P, 2 * P - 100), VR_PURGED);
	CK_EQ(vr_status(r, (PIECE_PG + 2) * P - 100, 100), VR_STATE_VOLATILE | VR_STATE_PURGED);
	const uint64_t purged0 = st_get(VR_STAT_PURGES),
		       reclaimed0 = st_get(VR_STAT_RECLAIMED_BYTES);
	const uint64_t piece = 100;
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), piece);

	/* the big range first: oldest, purged first */
	CK_EQ(vr_mark(r, 0, BIG_PAGES * P), VR_INTACT);
	for (size_t pg = SINGLES_FROM; pg < EAT_REGION_PAGES; pg += 2)
		CK_EQ(vr_mark(r, pg * P, P), VR_INTACT);
	CK_EQ(st_get(VR_STAT_RANGES), nr + 1);

	double t1 = now_s();
	ssize_t n = vr_ctx_purge(ctx, SIZE_MAX);
	double t2 = now_s();
	uint64_t purged = st_get(VR_STAT_PURGES) - purged0, skipped = st_get(VR_STAT_SKIPPED);
	long v2 = count_vmas();
	fprintf(stderr,
		"app_eats: purge(SIZE_MAX) of %zu ranges = %zd in %.3f s: purged %" PRIu64
		", skipped %" PRIu64 "; VMAs %ld -> %ld (max %ld)\n",
		nr, n, t2 - t1, purged, skipped, v1, v2, maxmap);
	CK(n >= 0);
	CK_EQ(purged + skipped, nr);
	CK(v2 <= maxmap);
	if (guard) {
		CK_EQ(skipped, 0);
		CK_EQ(count_maps("/memfd:vt-vma-eat (deleted)"), 1);
	} else {
		CK(skipped > 0, "(nothing skipped with %ld VMAs free?)", maxmap - v1);
	}
	int stbig = vr_status(r, 0, BIG_PAGES * P);
	CK(stbig == (VR_STATE_VOLATILE | VR_STATE_PURGED), "(the oldest range was not purged: %d)",
	   stbig);
	uint64_t reclaimed = BIG_PAGES * P;
	uint64_t seen = 1;
	for (size_t i = 0; i < nsingles; i++) {
		int st = vr_status(r, (SINGLES_FROM + 2 * i) * P, P);
		CK(st == VR_STATE_VOLATILE || st == (VR_STATE_VOLATILE | VR_STATE_PURGED));
		sp[i] = st & VR_STATE_PURGED;
		seen += sp[i];
		reclaimed += sp[i] ? P : 0;
	}
	CK_EQ(seen, purged);
	CK_EQ((uint64_t)n, reclaimed);
	CK_EQ(st_get(VR_STAT_RECLAIMED_BYTES), reclaimed0 + reclaimed);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), reclaimed + piece);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), (nr - purged) * P);

	/* pressure and limit at the VMA limit: degrade, never abort */
	CK(vr_ctx_notify_pressure(ctx, VR_PRESSURE_CRITICAL) >= 0);
	CK(vr_ctx_notify_pressure(ctx, VR_PRESSURE_MODERATE) >= 0);
	CK_EQ(vr_ctx_set_limit(ctx, P), 0);
	CK_EQ(vr_ctx_set_limit(ctx, 0), 0);
	purged = st_get(VR_STAT_PURGES) - purged0;
	for (size_t i = 0; i < nsingles; i++) {
		int st = vr_status(r, (SINGLES_FROM + 2 * i) * P, P);
		CK(!sp[i] || (st & VR_STATE_PURGED));
		sp[i] = st & VR_STATE_PURGED;
	}
	fprintf(stderr, "app_eats: after pressure/limit: purged %" PRIu64 ", skipped %" PRIu64 "\n",
		purged, st_get(VR_STAT_SKIPPED));

	/* S9: non-volatile region pages and the application's pages */
	for (size_t pg = BIG_PAGES; pg < EAT_REGION_PAGES; pg++)
		if ((pg < SINGLES_FROM || pg % 2) && pg != PIECE_PG && pg != PIECE_PG + 1)
			CK(stamped(b, pg, GEN_REGION), "(non-volatile page %zu changed)", pg);

	/* S4 at the VMA limit: marking [piece, +4 pages) joins the purged
	 * piece, so its whole pages must be discarded at once; with mprotect
	 * that needs a split in the middle of a RW mapping.  Whatever
	 * happens, the result is VR_PURGED and a later unmark works. */
	{
		size_t a = (PIECE_PG + 2) * P - piece, len = piece + 4 * P;
		uint64_t sk0 = st_get(VR_STAT_SKIPPED), rc0 = st_get(VR_STAT_RECLAIMED_BYTES);
		uint64_t pb0 = st_get(VR_STAT_PURGED_BYTES), rg0 = st_get(VR_STAT_RANGES);
		int mrc = vr_mark(r, a, len);
		uint64_t sk = st_get(VR_STAT_SKIPPED) - sk0,
			 rcl = st_get(VR_STAT_RECLAIMED_BYTES) - rc0;
		fprintf(stderr,
			"app_eats: mark over a purged piece at the limit = %d: reclaimed %" PRIu64
			", skipped %" PRIu64 "\n",
			mrc, rcl, sk);
		CK_EQ(mrc, VR_PURGED);
		CK_EQ(vr_status(r, a, len), VR_STATE_VOLATILE | VR_STATE_PURGED);
		CK(rcl == 4 * P || (rcl == 0 && sk > 0),
		   "(reclaimed %" PRIu64 ", skipped %" PRIu64 ")", rcl, sk);
		if (guard)
			CK_EQ(rcl, 4 * P);
		CK_EQ(st_get(VR_STAT_PURGED_BYTES), pb0 + 4 * P);
		CK_EQ(st_get(VR_STAT_RANGES), rg0);
		int urc = vr_unmark(r, a, len);
		CK_EQ(urc, VR_PURGED);
		CK_EQ(st_get(VR_STAT_RANGES), rg0 - 1);
		CK_EQ(st_get(VR_STAT_PURGED_BYTES), pb0 - piece);
		/* readable and writable again (S5): a trap left here would kill us */
		for (size_t pg = PIECE_PG + 2; pg < PIECE_PG + 6; pg++) {
			CK(vt_all_zero(b + pg * P, 16) || stamped(b, pg, GEN_REGION));
			if (guard || rcl)
				CK(vt_all_zero(b + pg * P, 16), "(discarded page %zu not zero)",
				   pg);
			stamp(b, pg, GEN_REGION);
		}
	}

	/* unmark one page in the middle of the purged 16-page range: with
	 * mprotect that splits a PROT_NONE VMA (2 more VMAs) */
	size_t mid = BIG_PAGES / 2;
	uint64_t ranges = st_get(VR_STAT_RANGES), vol = st_get(VR_STAT_VOLATILE_BYTES),
		 pur = st_get(VR_STAT_PURGED_BYTES);
	int rc = vr_unmark(r, mid * P, P);
	fprintf(stderr, "app_eats: unmark of page %zu inside the purged %d-page range = %d (%s)\n",
		mid, BIG_PAGES, rc, rc < 0 ? strerror(-rc) : "ok");
	if (guard)
		CK_EQ(rc, VR_PURGED);
	if (rc < 0) {
		/* S5: nothing changed, and it is still purged (never accessible) */
		CK_EQ(vr_status(r, mid * P, P), VR_STATE_VOLATILE | VR_STATE_PURGED);
		CK_EQ(vr_status(r, 0, BIG_PAGES * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
		CK_EQ(st_get(VR_STAT_RANGES), ranges);
		CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), vol);
		CK_EQ(st_get(VR_STAT_PURGED_BYTES), pur);
		/* the application gives back some VMAs: now it must work */
		CK_EQ(mprotect(app + P, 4 * P, PROT_READ | PROT_WRITE), 0);
		rc = vr_unmark(r, mid * P, P);
		fprintf(stderr, "app_eats: after freeing 4 VMAs, unmark = %d\n", rc);
	}
	CK_EQ(rc, VR_PURGED);
	CK(vt_all_zero(b + mid * P, P), "(discarded page not zero)");
	CK_EQ(st_get(VR_STAT_RANGES), ranges + 1); /* split in two pieces */
	CK_EQ(vr_status(r, 0, mid * P), VR_STATE_VOLATILE | VR_STATE_PURGED);
	CK_EQ(vr_status(r, (mid + 1) * P, (BIG_PAGES - mid - 1) * P),
	      VR_STATE_VOLATILE | VR_STATE_PURGED);

	/* unmark all the singles while the application still holds its VMAs */
	unsigned long lost = 0, intact = 0, errs = 0;
	for (size_t i = 0; i < nsingles; i++) {
		size_t pg = SINGLES_FROM + 2 * i;
		int st = vr_status(r, pg * P, P);
		uint64_t rg = st_get(VR_STAT_RANGES), vo = st_get(VR_STAT_VOLATILE_BYTES),
			 pu = st_get(VR_STAT_PURGED_BYTES);
		int rc2 = vr_unmark(r, pg * P, P);
		if (rc2 < 0) {
			errs++;
			CK_EQ(vr_status(r, pg * P, P), st);
			CK_EQ(st_get(VR_STAT_RANGES), rg);
			CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), vo);
			CK_EQ(st_get(VR_STAT_PURGED_BYTES), pu);
			continue;
		}
		if (sp[i]) {
			CK_EQ(rc2, VR_PURGED);
			CK(vt_all_zero(b + pg * P, 16), "(discarded page %zu not zero)", pg);
			lost++;
		} else {
			CK_EQ(rc2, VR_INTACT);
			CK(stamped(b, pg, GEN_REGION), "(skipped page %zu lost its data)", pg);
			intact++;
		}
	}
	fprintf(stderr, "app_eats: singles unmarked: %lu VR_PURGED, %lu VR_INTACT, %lu errors\n",
		lost, intact, errs);
	CK_EQ(errs, 0); /* restoring a lone page only merges VMAs */
	CK_EQ(vr_unmark(r, 0, BIG_PAGES * P), VR_PURGED);
	CK_EQ(st_get(VR_STAT_RANGES), 0);
	CK_EQ(st_get(VR_STAT_VOLATILE_BYTES), 0);
	CK_EQ(st_get(VR_STAT_PURGED_BYTES), 0);
	for (size_t pg = 0; pg < app_pages; pg += 32)
		CK(stamped(app, pg, GEN_APP), "(application page %zu changed)", pg);
	CK_EQ(munmap(app, app_pages * P), 0);
	fprintf(stderr, "app_eats: total %.2f s\n", now_s() - t0);
	free(sp);
	vr_ctx_destroy(ctx);
	exit(0);
}

/* ---------------------------------------------------------------------- */

static const struct vt_scenario scenarios[] = {
	{ "alt_each", sc_alt_each },
	{ "alt_all", sc_alt_all },
	{ "app_eats", sc_app_eats },
};

static void run_scenario(const char *name, const char *trap, bool anon)
{
	setenv("VRANGE_TRAP", trap, 1);
	if (anon)
		setenv("VT_ANON", "1", 1);
	int st = vt_run_scenario(name);
	unsetenv("VRANGE_TRAP");
	unsetenv("VT_ANON");
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 77)
		skip();
	vt_assert_exit_ok(st);
}

#define VMA_TEST(sc, trap)                                                                         \
	static void test_##sc##_##trap(void **state)                                               \
	{                                                                                          \
		(void)state;                                                                       \
		run_scenario(#sc, #trap, false);                                                   \
	}
VMA_TEST(alt_each, guard)
VMA_TEST(alt_each, mprotect)
VMA_TEST(alt_all, guard)
VMA_TEST(alt_all, mprotect)
VMA_TEST(app_eats, guard)
VMA_TEST(app_eats, mprotect)
VMA_TEST(alt_each, uffd)
VMA_TEST(alt_all, uffd)
VMA_TEST(app_eats, uffd)

/* the same budget on anonymous memory */
static void test_app_eats_anon_mprotect(void **state)
{
	(void)state;
	run_scenario("app_eats", "mprotect", true);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 120);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alt_each_guard),
		cmocka_unit_test(test_alt_each_mprotect),
		cmocka_unit_test(test_alt_all_guard),
		cmocka_unit_test(test_alt_all_mprotect),
		cmocka_unit_test(test_app_eats_guard),
		cmocka_unit_test(test_app_eats_mprotect),
		cmocka_unit_test(test_app_eats_anon_mprotect),
		cmocka_unit_test(test_alt_each_uffd),
		cmocka_unit_test(test_alt_all_uffd),
		cmocka_unit_test(test_app_eats_uffd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
