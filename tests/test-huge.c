/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-huge.c - huge pages for the metadata walked at random (base/sys.c):
 * vr_map_huge's alignment and advice, VRANGE_HUGEPAGES=0, and that the
 * call sites use them: object handles (obj-alloc.c) and the range map's
 * arenas once the map is large (map/map.c).  What the kernel was asked
 * is read back from the VMA's VmFlags in /proc/self/smaps ("hg"
 * MADV_HUGEPAGE, "nh" MADV_NOHUGEPAGE): deterministic, unlike whether it
 * found huge pages.
 */
#include "tests.h"

#include "base/sys.h"
#include "map/map.h"
#include "obj/obj.h"

#define MiB ((size_t)1 << 20)

/* THP "never": the library advises no huge pages either */
static bool thp_never(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (!f)
		return true;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return strstr(buf, "[never]") != NULL;
}

/* the VmFlags of the mapping holding addr has flag (a two-letter word) */
static bool vma_has_flag(const void *addr, const char *flag)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	assert_non_null(f);
	char line[512];
	bool in = false, found = false, seen = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			continue;
		}
		if (in && strncmp(line, "VmFlags:", 8) == 0) {
			seen = true;
			for (char *t = strtok(line + 8, " \n"); t; t = strtok(NULL, " \n"))
				found |= strcmp(t, flag) == 0;
			break;
		}
	}
	fclose(f);
	assert_true(seen); /* addr is mapped */
	return found;
}

static void set_huge(bool on)
{
	if (on)
		unsetenv("VRANGE_HUGEPAGES");
	else
		setenv("VRANGE_HUGEPAGES", "0", 1);
	vr_huge_init();
}

static void test_map_huge(void **state)
{
	(void)state;
	bool on = !thp_never();
	for (int pass = 0; pass < 2; pass++) {
		set_huge(pass == 0);
		bool want = pass == 0 && on;
		uint64_t before = vr_huge_advised();
		uint8_t *p = vr_map_huge(4 * MiB);
		assert_true(p != MAP_FAILED);
		assert_int_equal((uintptr_t)p % VR_HUGE_SIZE, 0);
		for (size_t i = 0; i < 4 * MiB; i += 4096)
			assert_int_equal(p[i], 0);
		p[4 * MiB - 1] = 1; /* all of it is ours */
		assert_true(vma_has_flag(p, want ? "hg" : "nh"));
		assert_true(vma_has_flag(p + 4 * MiB - 1, want ? "hg" : "nh"));
		assert_false(vma_has_flag(p, want ? "nh" : "hg"));
		assert_true(vr_huge_advised() == before + (want ? 4 * MiB : 0));
		munmap(p, 4 * MiB);
	}
	set_huge(true);
}

/* object handles and page descriptors live in vr_map_huge memory */
static void test_obj_handles(void **state)
{
	(void)state;
	bool on = !thp_never();
	for (int pass = 0; pass < 2; pass++) {
		set_huge(pass == 0);
		struct vr_ctx *ctx;
		assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx), 0);
		struct vr_obj *small, *large;
		assert_int_equal(vr_obj_new(ctx, 100, 0, &small), 0);
		assert_int_equal(vr_obj_new(ctx, 64 * 4096, 0, &large), 0);
		const char *flag = pass == 0 && on ? "hg" : "nh";
		assert_true(vma_has_flag(small, flag));
		assert_true(vma_has_flag(large, flag));
		vr_ctx_destroy(ctx);
	}
	set_huge(true);
}

/* once a range map holds 16 MiB (about half a million records of 32
 * bytes), each new arena is whole 2 MiB pages, aligned, mapped and
 * advised (map/map.c, HUGE PAGES); with VRANGE_HUGEPAGES=0 the same
 * arenas are advised MADV_NOHUGEPAGE */
static void test_map_arenas(void **state)
{
	(void)state;
	bool on = !thp_never();
	size_t want = (size_t)2 << 20; /* records: more than 16 MiB of them */
	for (int pass = 0; pass < 2; pass++) {
		set_huge(pass == 0);
		struct vr_map m;
		vr_map_init(&m, 12);
		uint64_t before = vr_huge_advised();
		size_t n = 0;
		for (; n < want; n++) {
			struct vr_range *r = vr_map_alloc(&m);
			assert_non_null(r);
			if (pass == 0 && on && vr_huge_advised() > before)
				want = n + 1; /* the first arena advised; pass 1 goes as far */
			r->start = n;         /* it is ours: writable */
		}
		uint64_t advised = vr_huge_advised() - before;
		if (pass == 0 && on)
			assert_true(advised >= VR_HUGE_SIZE && advised % VR_HUGE_SIZE == 0);
		else
			assert_true(advised == 0);
		/* the newest arena: the one that holds the last record */
		const uint8_t *a = (const uint8_t *)m.arenas;
		assert_int_equal((uintptr_t)a % VR_HUGE_SIZE, 0);
		assert_true(vma_has_flag(a, pass == 0 && on ? "hg" : "nh"));
		vr_map_fini(&m);
	}
	set_huge(true);
}

/* obj.h, PAGE HINTS: the hint of every small object's handle names its
 * page descriptor within the two lines a pin prefetches (classes up to
 * 1 KiB; larger ones: a descriptor of its slab at or before its own), and
 * a wrong hint changes no answer */
static void test_obj_page_hints(void **state)
{
	(void)state;
	static const size_t sizes[] = { 16, 48, 100, 256, 1000, 1024, 2048, 3000 };
	enum { PER = 700 };
	static struct vr_obj *o[8][PER];
	struct vr_ctx *ctx;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx), 0);
	size_t covered = 0, small = 0;
	for (size_t k = 0; k < 8; k++)
		for (size_t i = 0; i < PER; i++) {
			struct vr_obj *x;
			assert_int_equal(vr_obj_new(ctx, sizes[k], 0, &x), 0);
			o[k][i] = x;
			assert_false(atomic_load(&x->state) & OS_LARGE);
			uintptr_t blk = obj_meta_block(x);
			uint16_t h = *obj_hint_slot(x);
			assert_int_not_equal(h, 0);
			uintptr_t p = blk + ((uintptr_t)h << OBJ_HINT_UNIT),
				  home = (uintptr_t)x->home;
			bool in = home >= p &&
				  home + sizeof(struct vr_opage) <= (p & ~(uintptr_t)63) + 128;
			if (sizes[k] <= 1024)
				assert_true(in);
			else
				assert_true(home >= p && home - p < 16 * sizeof(struct vr_opage));
			covered += in;
			small++;
		}
	print_message("page hints: %zu of %zu small handles covered\n", covered, small);
	/* a hint is only a prefetch: with every hint of the table pointing
	 * elsewhere (the block's first handle bytes, or none), pins and
	 * unpins still count on the right pages: data kept while pinned,
	 * then every object purged once all are unpinned */
	uint16_t *tbl = (uint16_t *)obj_meta_block(o[0][0]);
	uint16_t *keep = malloc(OBJ_HINT_BYTES);
	assert_non_null(keep);
	assert_true((uintptr_t)obj_hint_slot(o[7][PER - 1]) - (uintptr_t)tbl < OBJ_HINT_BYTES);
	memcpy(keep, tbl, OBJ_HINT_BYTES);
	for (size_t i = 0; i < OBJ_HINT_BYTES / 2; i++)
		tbl[i] = i % 2 ? 0 : (uint16_t)(OBJ_HINT_BYTES >> OBJ_HINT_UNIT);
	for (size_t k = 0; k < 8; k++)
		for (size_t i = 0; i < PER; i++) {
			memset(vr_obj_ptr(o[k][i]), 0x5a, sizes[k]);
			assert_int_equal(vr_obj_unpin(o[k][i]), 0);
			assert_int_equal(vr_obj_pin(o[k][i]), VR_INTACT);
			assert_int_equal(((unsigned char *)vr_obj_ptr(o[k][i]))[sizes[k] - 1],
					 0x5a);
			assert_int_equal(vr_obj_unpin(o[k][i]), 0);
		}
	assert_true(vr_ctx_purge(ctx, SIZE_MAX) > 0);
	for (size_t k = 0; k < 8; k++)
		for (size_t i = 0; i < PER; i++)
			assert_int_equal(vr_obj_pin(o[k][i]), VR_PURGED);
	memcpy(tbl, keep, OBJ_HINT_BYTES);
	free(keep);
	vr_ctx_destroy(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_huge),
		cmocka_unit_test(test_obj_handles),
		cmocka_unit_test(test_map_arenas),
		cmocka_unit_test(test_obj_page_hints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
