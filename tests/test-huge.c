/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-huge.c - huge pages for the metadata walked at random (base/sys.c):
 * vr_map_huge's alignment and advice, VRANGE_HUGEPAGES=0, and that the
 * call sites use them: object handles (obj-alloc.c) and the range map's
 * arenas once the map is large (map/map.c).  What the kernel was asked is read back from
 * the VMA's VmFlags in /proc/self/smaps ("hg" MADV_HUGEPAGE, "nh"
 * MADV_NOHUGEPAGE): deterministic, unlike whether it found huge pages.
 */
#include "tests.h"

#include "base/sys.h"
#include "map/map.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_huge),
		cmocka_unit_test(test_obj_handles),
		cmocka_unit_test(test_map_arenas),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
