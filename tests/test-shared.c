/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-shared.c - volatility shared by every process that maps a memfd
 * (VR_REGION_SHARED, API S27-S31), against the public contract only
 *
 * Each scenario runs in a fresh process (tests.h) that drives peers,
 * other processes with ctxs of their own that joined the file with
 * vr_region_from_fd on an fd received as SCM_RIGHTS (vt-shared.h):
 *   basic     S27: marks, unmarks and purges seen through every handle,
 *             last call wins, S4 across processes, the creator leaving,
 *             the state outliving every mapping
 *   flags     S27/S2: the flag rules, the data size, the seals, pages
 *             never written, a partial last page never purged
 *   traps     S28: after another process's purge every mapper traps at
 *             the exact address (handler or SIGBUS), system calls get
 *             EFAULT, neighbours stay readable, a late joiner traps too
 *   refill    S13/S7 across processes: one process's handler refills,
 *             the others read the new data; partial pages keep theirs
 *   edges     another process's partial unmark of a purged range, the
 *             re-fault bound, the state past the data, a limit set before
 *             other processes mark, objects and ranges on one clock, two
 *             shared files in one LRU
 *   ages      S29: S8 order per file whoever marked, across processes
 *             and against the ctx's private regions
 *   stats     S29: gauges count the file's ranges once, cumulative
 *             stats what the ctx did
 *   pressure  S29: one ctx's pressure (MODERATE, CRITICAL), limit (at
 *   limit     vr_ctx_set_limit and vr_mark) and vr_obj_unpin's limit take
 *   unpin     the ranges other processes marked
 *   capacity  S31: the documented range capacity, -ENOSPC changes nothing
 *   data      non-volatile data of each process kept across purges of
 *             neighbouring ranges
 *   unpriv    basic and traps as an unprivileged user (setpriv)
 * Processes, trap backends and the environment: test-shared-env.c; death
 * and stress: test-shared-kill.c.  Scenarios run under the suite's
 * VRANGE_TRAP, the default backend, VRANGE_TRAP=uffd and =guard.
 */
#define _GNU_SOURCE
#include "vt-shared.h"
#include "vt-cgroup.h"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>

/* ---- S27 ---- */
static void sc_basic(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 16 * P);
	CK_EQ(vs_call(&A, VS_SIZE, ra, 0, 0, 0), 16 * P);
	FILL(&A, ra, 0, 16 * P, 1);
	struct vs_proc B = vs_spawn(), C = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	int rc = join_from(&C, &A, ra, VR_REGION_SHARED);
	CK_EQ(vs_call(&B, VS_SIZE, rb, 0, 0, 0), 16 * P);
	CK_EQ(vs_call(&C, VS_SIZE, rc, 0, 0, 0), 16 * P);
	VS_EXPECT_DATA(&B, rb, 0, 16 * P, 1);

	/* a mark in A is volatile for B and C */
	CK_EQ(MARK(&A, ra, P, 2 * P), VR_INTACT);
	CK_EQ(STATUS(&B, rb, P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(STATUS(&B, rb, 0, P), 0);
	CK_EQ(STATUS(&B, rb, 3 * P, P), 0);
	CK_EQ(STATUS(&C, rc, 2 * P, 1), VR_STATE_VOLATILE);
	/* an unmark in B is non-volatile for A and C */
	CK_EQ(UNMARK(&B, rb, P, 2 * P), VR_INTACT);
	CK_EQ(STATUS(&A, ra, 0, 16 * P), 0);
	CK_EQ(STATUS(&C, rc, 0, 16 * P), 0);

	/* last call wins: no pin counts */
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&C, rc, 4 * P + 1, 10), VR_INTACT);
	CK_EQ(UNMARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(STATUS(&B, rb, 4 * P, 2 * P), 0);
	CK_EQ(STATUS(&C, rc, 4 * P, 2 * P), 0);
	/* one process's split is everybody's */
	CK_EQ(MARK(&B, rb, 4 * P, 4 * P), VR_INTACT);
	CK_EQ(UNMARK(&A, ra, 5 * P, P), VR_INTACT);
	CK_EQ(STATUS(&C, rc, 4 * P, P), VR_STATE_VOLATILE);
	CK_EQ(STATUS(&C, rc, 5 * P, P), 0);
	CK_EQ(STATUS(&C, rc, 6 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&C, rc, 4 * P, 4 * P), VR_INTACT);
	CK_EQ(STATUS(&B, rb, 0, 16 * P), 0);
	VS_EXPECT_DATA(&A, ra, 4 * P, 4 * P, 1);

	/* a purge by B: A's unmark reports it, the pages read 0 for all */
	CK_EQ(MARK(&A, ra, 8 * P, 4 * P), VR_INTACT);
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)(4 * P));
	CK_EQ(STATUS(&A, ra, 8 * P, 4 * P), VP);
	CK_EQ(STATUS(&C, rc, 11 * P, 1), VP);
	CK_EQ(STATUS(&B, rb, 7 * P, 2 * P), VP);
	CK_EQ(UNMARK(&A, ra, 8 * P, 4 * P), VR_PURGED);
	CK_EQ(STATUS(&B, rb, 0, 16 * P), 0);
	CK_EQ(UNMARK(&C, rc, 8 * P, 4 * P), VR_INTACT); /* consumed (S6) */
	VS_EXPECT_DATA(&A, ra, 8 * P, 4 * P, VS_ZERO);
	VS_EXPECT_DATA(&B, rb, 8 * P, 4 * P, VS_ZERO);
	VS_EXPECT_DATA(&C, rc, 8 * P, 4 * P, VS_ZERO);
	VS_EXPECT_DATA(&C, rc, 0, 8 * P, 1);
	VS_EXPECT_DATA(&C, rc, 12 * P, 4 * P, 1);

	/* reported to a third process: A marks, B purges, C unmarks */
	CK_EQ(MARK(&A, ra, 12 * P, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)(2 * P));
	CK_EQ(UNMARK(&C, rc, 12 * P, 2 * P), VR_PURGED);
	CK_EQ(STATUS(&A, ra, 12 * P, 2 * P), 0);

	/* S4 across processes: B's mark overlapping A's purged range is
	 * purged at once, its new whole page discarded for C too */
	FILL(&A, ra, 0, 4 * P, 2);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&C, SIZE_MAX), (int64_t)(2 * P));
	CK_EQ(MARK(&B, rb, P, 2 * P), VR_PURGED);
	CK_EQ(STATUS(&A, ra, 2 * P, P), VP);
	VS_EXPECT_TRAP(&C, rc, 2 * P + 5);
	VS_EXPECT_DATA(&C, rc, 3 * P, P, 2);
	CK_EQ(UNMARK(&A, ra, 0, 3 * P), VR_PURGED);

	/* the creator's region goes: the state stays with the file */
	CK_EQ(vs_call(&A, VS_DESTROY, ra, 0, 0, 0), 0);
	CK_EQ(MARK(&B, rb, 6 * P, P), VR_INTACT);
	CK_EQ(STATUS(&C, rc, 6 * P, P), VR_STATE_VOLATILE);
	CK_EQ(PURGE(&C, SIZE_MAX), (int64_t)P);
	VS_EXPECT_TRAP(&B, rb, 6 * P + 100);
	CK_EQ(UNMARK(&B, rb, 6 * P, P), VR_PURGED);

	/* nobody maps the file: a process joining later finds the state */
	int keep = vs_fd_of(&B, rb);
	CK_EQ(MARK(&B, rb, 2 * P, P), VR_INTACT);
	CK_EQ(PURGE(&C, SIZE_MAX), (int64_t)P);
	CK_EQ(vs_call(&B, VS_DESTROY, rb, 0, 0, 0), 0);
	CK_EQ(vs_call(&C, VS_DESTROY, rc, 0, 0, 0), 0);
	int again = vs_join(&A, keep, 0);
	close(keep);
	CK(again >= 0, "(%d)", again);
	CK_EQ(STATUS(&A, again, 0, 16 * P), VP);
	CK_EQ(STATUS(&A, again, 2 * P, P), VP);
	VS_EXPECT_TRAP(&A, again, 2 * P + 1);
	VS_EXPECT_DATA(&A, again, 3 * P, P, 2);
	CK_EQ(UNMARK(&A, again, 2 * P, P), VR_PURGED);
	vs_stop(&B);
	vs_stop(&C);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S27, S2: flags, sizes, seals ---- */
static void sc_flags(void)
{
	size_t P = vt_pg();
	vs_init();
	struct vr_region *r = NULL;
	CK_EQ(vr_region_new(VS.ctx, "vt", 4 * P, VR_REGION_SHARED | VR_REGION_ANON, &r), -EINVAL);
	CK(r == NULL);
	CK_EQ(vr_region_new(VS.ctx, "vt", 4 * P, VR_REGION_SHARED | (1u << 7), &r), -EINVAL);
	CK_EQ(vr_ctx_stat(VS.ctx, VR_STAT_REGIONS), 0);

	/* a memfd made outside the library, and a plain region's memfd */
	int mfd = memfd_create("vt-plain", MFD_CLOEXEC);
	CK(mfd >= 0);
	CK_EQ(ftruncate(mfd, (off_t)(4 * P)), 0);
	CK_EQ(vr_region_from_fd(VS.ctx, mfd, VR_REGION_SHARED, &r), -EINVAL);
	CK(r == NULL);
	int pa = vs_new(&A, 4 * P, 0);
	CK(pa >= 0);
	struct vs_proc B = vs_spawn();
	int fd = vs_fd_of(&A, pa);
	CK_EQ(vs_join(&B, fd, VR_REGION_SHARED), -EINVAL);
	int pb = vs_join(&B, fd, 0);
	close(fd);
	CK(pb >= 0, "(%d)", pb);
	/* a plain memfd keeps per-process state (S17) */
	CK_EQ(MARK(&A, pa, 0, P), VR_INTACT);
	CK_EQ(STATUS(&B, pb, 0, P), 0);

	/* a shared region whose size is not a page multiple */
	size_t sz = 3 * P + 100;
	int ra = vs_new_shared(&A, sz);
	CK_EQ(vs_call(&A, VS_SIZE, ra, 0, 0, 0), sz);
	int rb = join_from(&B, &A, ra, 0);
	CK_EQ(vs_call(&B, VS_SIZE, rb, 0, 0, 0), sz);
	/* never written: zeros to loads and to the kernel, in both */
	VS_EXPECT_DATA(&B, rb, 0, sz, VS_ZERO);
	int64_t v[4];
	CK_EQ(vs_call_fd(&A, VS_SYSOUT, ra, 2 * P, P, VS_ZERO, -1, v), (int64_t)P);
	CK_EQ(v[0], -1);
	CK_EQ(vs_call(&B, VS_SYSIN, rb, P, P, 3), (int64_t)P);
	VS_EXPECT_DATA(&A, ra, P, P, 3);
	/* the state after the data is not addressable through the API */
	CK_EQ(MARK(&A, ra, sz, 1), -EINVAL);
	CK_EQ(MARK(&B, rb, sz - 1, 2), -EINVAL);
	CK_EQ(STATUS(&B, rb, 0, sz + 1), -EINVAL);
	CK_EQ(MARK(&B, rb, sz - 100, 100), VR_INTACT);
	CK_EQ(STATUS(&A, ra, 0, sz), VR_STATE_VOLATILE);
	/* no whole page: never chosen by a purge (S7) */
	CK_EQ(PURGE(&B, SIZE_MAX), 0);
	CK_EQ(STATUS(&B, rb, sz - 100, 100), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&A, ra, 0, sz), VR_INTACT);
	VS_EXPECT_DATA(&A, ra, 2 * P, sz - 2 * P, VS_ZERO);

	/* one byte: a page that is never whole */
	int r1 = vs_new_shared(&A, 1);
	int j1 = join_from(&B, &A, r1, VR_REGION_SHARED);
	CK_EQ(vs_call(&B, VS_SIZE, j1, 0, 0, 0), 1);
	CK_EQ(MARK(&B, j1, 0, 1), VR_INTACT);
	CK_EQ(MARK(&A, r1, 0, 2), -EINVAL);
	CK_EQ(PURGE(&B, SIZE_MAX), 0);
	CK_EQ(STATUS(&A, r1, 0, 1), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&A, r1, 0, 1), VR_INTACT);

	/* sealed against resizing */
	int sfd = vs_fd_of(&A, ra);
	int seals = fcntl(sfd, F_GET_SEALS);
	CK(seals >= 0 && (seals & F_SEAL_GROW) && (seals & F_SEAL_SHRINK), "(seals %#x)", seals);
	struct stat st;
	CK_EQ(fstat(sfd, &st), 0);
	CK_EQ(ftruncate(sfd, st.st_size + (off_t)P), -1);
	CK_EQ(ftruncate(sfd, (off_t)P), -1);
	/* joining with bad flags */
	CK_EQ(vs_join(&B, sfd, VR_REGION_SHARED | VR_REGION_ANON), -EINVAL);
	CK_EQ(vs_join(&B, sfd, 1u << 9), -EINVAL);
	close(sfd);
	close(mfd);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S28 ---- */
static void sc_traps(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 16 * P);
	FILL(&A, ra, 0, 16 * P, 2);
	struct vs_proc B = vs_spawn(), C = vs_spawn(), D = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	int rc = join_from(&C, &A, ra, VR_REGION_SHARED);
	VS_EXPECT_DATA(&B, rb, 0, 16 * P, 2);
	VS_EXPECT_DATA(&C, rc, 0, 16 * P, 2);
	CK_EQ(vs_call(&B, VS_HANDLER, rb, VS_H_SIGBUS, 0, 0), 0);

	CK_EQ(MARK(&A, ra, 4 * P, 4 * P), VR_INTACT);
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)(4 * P));
	/* no handler in A: SIGBUS BUS_ADRERR at the exact address */
	VS_EXPECT_TRAP(&A, ra, 5 * P + 123);
	VS_EXPECT_TRAP(&A, ra, 4 * P);
	/* B's handler is called with the purged range, then SIGBUS */
	VS_EXPECT_TRAP(&B, rb, 7 * P + P - 1);
	int64_t v[4];
	CK_EQ(vs_call_fd(&B, VS_HINFO, rb, 0, 0, 0, -1, v), 1);
	CK_EQ(v[0], 4 * P);
	CK_EQ(v[1], 4 * P);
	CK_EQ(v[2], 8 * P - 1);
	VS_EXPECT_TRAP(&C, rc, 6 * P + 1);
	/* a write traps as well */
	CK_EQ(vs_call_fd(&C, VS_FILL, rc, 5 * P + 8, 8, 3, -1, v), VS_TRAPPED);
	CK_EQ(v[0], 5 * P + 8);
	CK_EQ(STAT(&A, VR_STAT_FAULTS), 2);
	CK_EQ(STAT(&B, VR_STAT_FAULTS), 1);
	CK_EQ(STAT(&C, VR_STAT_FAULTS), 2);

	/* system calls: EFAULT on the hole (S14), no fault counted */
	CK_EQ(vs_call_fd(&A, VS_SYSOUT, ra, 5 * P, 16, 2, -1, v), -EFAULT);
	CK_EQ(vs_call(&A, VS_SYSIN, ra, 6 * P, 16, 4), -EFAULT);
	CK_EQ(vs_call_fd(&C, VS_SYSOUT, rc, 7 * P + 9, 16, 2, -1, v), -EFAULT);
	CK_EQ(STAT(&A, VR_STAT_FAULTS), 2);
	/* the neighbours read and write through system calls */
	CK_EQ(vs_call_fd(&A, VS_SYSOUT, ra, 3 * P, P, 2, -1, v), (int64_t)P);
	CK_EQ(v[0], -1);
	CK_EQ(vs_call(&A, VS_SYSIN, ra, 8 * P, P, 5), (int64_t)P);
	VS_EXPECT_DATA(&B, rb, 8 * P, P, 5);
	CK_EQ(vs_call_fd(&C, VS_SYSOUT, rc, 8 * P, P, 5, -1, v), (int64_t)P);
	CK_EQ(v[0], -1);
	CK_EQ(vs_call_fd(&C, VS_SYSOUT, rc, 4 * P - 64, 64, 2, -1, v), 64);
	CK_EQ(v[0], -1);

	/* a late joiner sees the purge and traps */
	int rd = join_from(&D, &B, rb, 0);
	CK_EQ(STATUS(&D, rd, 4 * P, 4 * P), VP);
	CK_EQ(STATUS(&D, rd, 0, 4 * P), 0);
	VS_EXPECT_TRAP(&D, rd, 6 * P + 7);
	CK_EQ(vs_call_fd(&D, VS_SYSOUT, rd, 5 * P, 16, 2, -1, v), -EFAULT);
	VS_EXPECT_DATA(&D, rd, 0, 4 * P, 2);
	VS_EXPECT_DATA(&D, rd, 8 * P, P, 5);
	VS_EXPECT_DATA(&D, rd, 9 * P, 7 * P, 2);
	/* and everybody still traps, on every page */
	for (size_t pg = 4; pg < 8; pg++) {
		VS_EXPECT_TRAP(&A, ra, pg * P + 11);
		VS_EXPECT_TRAP(&B, rb, pg * P + 12);
		VS_EXPECT_TRAP(&C, rc, pg * P + 13);
		VS_EXPECT_TRAP(&D, rd, pg * P + 14);
	}
	/* D's unmark consumes the purge for all: zeros, no trap */
	CK_EQ(UNMARK(&D, rd, 4 * P, 4 * P), VR_PURGED);
	VS_EXPECT_DATA(&A, ra, 4 * P, 4 * P, VS_ZERO);
	VS_EXPECT_DATA(&B, rb, 4 * P, 4 * P, VS_ZERO);
	VS_EXPECT_DATA(&C, rc, 4 * P, 4 * P, VS_ZERO);
	CK_EQ(vs_call_fd(&C, VS_SYSOUT, rc, 5 * P, 16, VS_ZERO, -1, v), 16);
	CK_EQ(v[0], -1);
	CK_EQ(vs_call(&B, VS_SYSIN, rb, 6 * P, P, 6), (int64_t)P);
	VS_EXPECT_DATA(&D, rd, 6 * P, P, 6);
	vs_stop(&B);
	vs_stop(&C);
	vs_stop(&D);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S13 and S7 across processes ---- */
static void sc_refill(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 8 * P);
	FILL(&A, ra, 0, 8 * P, 3);
	struct vs_proc B = vs_spawn(), C = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	int rc = join_from(&C, &A, ra, 0);
	/* whole pages 2 and 3; the bytes on pages 1 and 4 are kept */
	CK_EQ(MARK(&A, ra, P + 100, 3 * P), VR_INTACT);
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)(2 * P));
	CK_EQ(STATUS(&B, rb, P + 100, 1), VP);
	VS_EXPECT_DATA(&B, rb, P + 100, P - 100, 3);
	VS_EXPECT_DATA(&C, rc, 4 * P, 100, 3);
	VS_EXPECT_TRAP(&C, rc, 2 * P);
	VS_EXPECT_TRAP(&C, rc, 4 * P - 1);
	/* A's handler unmarks and refills: A reads the new data */
	CK_EQ(vs_call(&A, VS_HANDLER, ra, VS_H_REFILL, 7, 0), 0);
	int64_t v[4];
	CK_EQ(vs_call_fd(&A, VS_READ, ra, 3 * P + 5, 0, 0, -1, v), 0);
	CK_EQ(v[0], vt_pat(7, 3 * P + 5));
	CK_EQ(vs_call_fd(&A, VS_HINFO, ra, 0, 0, 0, -1, v), 1);
	CK_EQ(v[0], P + 100);
	CK_EQ(v[1], 3 * P);
	CK_EQ(v[2], 3 * P + 5);
	CK_EQ(v[3], VR_PURGED);
	CK_EQ(STAT(&A, VR_STAT_FAULTS), 1);
	/* ... and so do the others, without a trap */
	CK_EQ(STATUS(&B, rb, 0, 8 * P), 0);
	VS_EXPECT_DATA(&B, rb, P + 100, 3 * P, 7);
	VS_EXPECT_DATA(&C, rc, P + 100, 3 * P, 7);
	VS_EXPECT_DATA(&C, rc, 0, P + 100, 3);
	VS_EXPECT_DATA(&B, rb, 4 * P + 100, 4 * P - 100, 3);
	CK_EQ(STAT(&C, VR_STAT_FAULTS), 2);
	/* a handler in B fixes B's trap on C's purge of B's range */
	CK_EQ(vs_call(&B, VS_HANDLER, rb, VS_H_REFILL, 8, 0), 0);
	CK_EQ(MARK(&B, rb, 5 * P, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&C, SIZE_MAX), (int64_t)(2 * P));
	CK_EQ(vs_call_fd(&B, VS_READ, rb, 6 * P + 1, 0, 0, -1, v), 0);
	CK_EQ(v[0], vt_pat(8, 6 * P + 1));
	VS_EXPECT_DATA(&A, ra, 5 * P, 2 * P, 8);
	vs_stop(&B);
	vs_stop(&C);
	vr_ctx_destroy(VS.ctx);
}

/* ---- edges: partial unmarks, the re-fault bound, the state past the
 * data, limits set before other processes mark, two files ---- */
static void sc_edges(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 16 * P);
	FILL(&A, ra, 0, 16 * P, 9);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	/* B unmarks part of A's purged range: that part reads 0, the rest
	 * still traps for both */
	CK_EQ(MARK(&A, ra, 4 * P, 4 * P), VR_INTACT);
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)(4 * P));
	CK_EQ(UNMARK(&B, rb, 5 * P, P), VR_PURGED);
	VS_EXPECT_DATA(&A, ra, 5 * P, P, VS_ZERO);
	VS_EXPECT_TRAP(&A, ra, 4 * P + 1);
	VS_EXPECT_TRAP(&A, ra, 6 * P + 1);
	VS_EXPECT_TRAP(&B, rb, 7 * P + 1);
	CK_EQ(STATUS(&A, ra, 4 * P, P), VP);
	CK_EQ(STATUS(&A, ra, 5 * P, P), 0);
	CK_EQ(STATUS(&A, ra, 6 * P, 2 * P), VP);
	CK_EQ(STAT(&A, VR_STAT_RANGES), 2);
	CK_EQ(STAT(&A, VR_STAT_PURGED_BYTES), 3 * P);
	/* re-marking the hole: fresh and unpurged, next to purged pieces */
	CK_EQ(MARK(&A, ra, 5 * P, P), VR_INTACT);
	CK_EQ(STATUS(&B, rb, 5 * P, P), VR_STATE_VOLATILE);
	VS_EXPECT_DATA(&B, rb, 5 * P, P, VS_ZERO);
	CK_EQ(UNMARK(&B, rb, 4 * P, 4 * P), VR_PURGED);
	CK_EQ(STAT(&B, VR_STAT_RANGES), 0);

	/* a handler that retries without fixing: SIGBUS after at most 8
	 * re-faults, never a loop (S13) */
	CK_EQ(vs_call(&B, VS_HANDLER, rb, VS_H_RETRY, 0, 0), 0);
	CK_EQ(MARK(&A, ra, 10 * P, P), VR_INTACT);
	CK_EQ(PURGE(&A, SIZE_MAX), (int64_t)P);
	VS_EXPECT_TRAP(&B, rb, 10 * P + 77);
	int64_t v[4];
	int64_t calls = vs_call_fd(&B, VS_HINFO, rb, 0, 0, 0, -1, v);
	CK(calls >= 1 && calls <= 9, "(%" PRId64 " handler calls)", calls);
	CK_EQ(v[2], 10 * P + 77);
	CK(STAT(&B, VR_STAT_FAULTS) >= calls, "(faults %" PRId64 ")", STAT(&B, VR_STAT_FAULTS));
	CK_EQ(vs_call(&B, VS_HANDLER, rb, VS_H_NONE, 0, 0), 0);
	CK_EQ(UNMARK(&A, ra, 10 * P, P), VR_PURGED);

	/* the state after the data is no part of the region */
	struct vr_region *r = VS.r[ra];
	uint8_t *end = (uint8_t *)vr_region_base(r) + 16 * P;
	CK(vr_region_of(end) != r, "(vr_region_of past the data is the region)");
	CK(vr_region_of(end - 1) == r);
	CK_EQ(vr_mark_ptr(end, 1), -EINVAL);
	CK_EQ(vr_mark_ptr(end - 1, 2), -EINVAL);
	CK_EQ(vr_status(r, 0, 16 * P), 0);

	/* B's limit, set before A marks: B's next mark keeps it */
	CK_EQ(vs_call(&B, VS_LIMIT, 0, 3 * P, 0, 0), 0);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 8 * P, 2 * P), VR_INTACT);
	CK_EQ(STAT(&B, VR_STAT_VOLATILE_BYTES), 2 * P);
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 8 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(vs_call(&B, VS_LIMIT, 0, 0, 0, 0), 0);
	CK_EQ(UNMARK(&A, ra, 0, 16 * P), VR_PURGED);

	/* another process unmarks the file's oldest range: this ctx's order
	 * follows (a private range marked after it is older than the
	 * file's next range) */
	int pa = vs_new(&A, 4 * P, 0);
	CK(pa >= 0);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, pa, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&A, 0), 0); /* A's ctx looks at the file now */
	CK_EQ(UNMARK(&B, rb, 0, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&A, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(&A, pa, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VR_STATE_VOLATILE);
	/* ... and B's purge of the file's oldest, likewise */
	CK_EQ(UNMARK(&A, pa, 0, 4 * P), VR_PURGED);
	CK_EQ(MARK(&A, pa, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 8 * P, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&B, 1), (int64_t)(2 * P)); /* B's oldest: [4P, 6P) */
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VP);
	CK_EQ(PURGE(&A, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(&A, pa, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 8 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&A, ra, 0, 16 * P), VR_PURGED);
	CK_EQ(vs_call(&A, VS_DESTROY, pa, 0, 0, 0), 0);

	/* B's objects and the file's ranges: one clock (S22, S29) */
	CK_EQ(vs_call(&B, VS_OBJ, 0, P, 0, 0), 0);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&B, 1), (int64_t)P); /* the object, older */
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(vs_call(&B, VS_OBJ, 0, P, 0, 0), 0);
	CK_EQ(PURGE(&B, 1), (int64_t)(2 * P)); /* now the range is older */
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VP);
	CK_EQ(UNMARK(&A, ra, 0, 16 * P), VR_PURGED);
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)P);

	/* two shared files in one ctx: one LRU */
	int ra2 = vs_new_shared(&A, 8 * P);
	int rb2 = join_from(&B, &A, ra2, 0);
	CK_EQ(MARK(&B, rb2, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb2, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&A, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(&A, ra2, 0, 2 * P), VP);
	CK_EQ(PURGE(&B, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra2, 4 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(STAT(&A, VR_STAT_RANGES), 3);
	CK_EQ(STAT(&B, VR_STAT_PURGED_BYTES), 4 * P + 2 * P); /* and B's two objects */
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S29: ages ---- */

/* which of two 2-page ranges x, y (offsets in region r) one range's
 * purge by p takes: must be x */
static void purge_takes(struct vs_proc *p, struct vs_proc *q, int rq, size_t x, size_t y, int rx,
			struct vs_proc *px)
{
	size_t P = vt_pg();
	CK_EQ(PURGE(p, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(px, rx, x, 2 * P), VP);
	CK_EQ(STATUS(q, rq, y, 2 * P), VR_STATE_VOLATILE);
}

static void sc_ages(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 32 * P);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	/* A then B: purged by A, by B */
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 4 * P, 2 * P), VR_INTACT);
	purge_takes(&A, &B, rb, 0, 4 * P, ra, &A);
	CK_EQ(MARK(&A, ra, 8 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 12 * P, 2 * P), VR_INTACT);
	/* (the purged range 0 is not purgeable: the next oldest is 4P) */
	purge_takes(&B, &A, ra, 4 * P, 8 * P, rb, &B);
	purge_takes(&B, &A, ra, 8 * P, 12 * P, rb, &B);
	CK_EQ(UNMARK(&A, ra, 0, 32 * P), VR_PURGED);
	/* B then A: purged by A, by B */
	CK_EQ(MARK(&B, rb, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	purge_takes(&A, &A, ra, 0, 4 * P, rb, &B);
	CK_EQ(UNMARK(&A, ra, 0, 32 * P), VR_PURGED);
	CK_EQ(MARK(&B, rb, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	purge_takes(&B, &A, ra, 0, 4 * P, rb, &B);
	CK_EQ(UNMARK(&B, rb, 0, 32 * P), VR_PURGED);

	/* growth by another process makes a range young */
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 2 * P, 1), VR_INTACT); /* adjacent: joins [0, 2P) */
	CK_EQ(PURGE(&A, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(&B, rb, 4 * P, 2 * P), VP);
	CK_EQ(STATUS(&B, rb, 0, 2 * P + 1), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&B, rb, 0, 32 * P), VR_PURGED);
	/* a mark inside an existing range by another process: no rejuvenation */
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, P, P), VR_INTACT);
	purge_takes(&B, &B, rb, 0, 4 * P, ra, &A);
	CK_EQ(UNMARK(&B, rb, 0, 32 * P), VR_PURGED);
	/* pieces of another process's split keep their age */
	CK_EQ(MARK(&A, ra, 0, 6 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 8 * P, 2 * P), VR_INTACT);
	CK_EQ(UNMARK(&B, rb, 2 * P, 2 * P), VR_INTACT);
	CK_EQ(PURGE(&B, 1), (int64_t)(2 * P));
	CK_EQ(PURGE(&A, 1), (int64_t)(2 * P));
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 8 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&A, ra, 0, 32 * P), VR_PURGED);

	/* against A's private region: one clock */
	int pa = vs_new(&A, 8 * P, 0);
	CK(pa >= 0);
	CK_EQ(MARK(&A, pa, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 0, 2 * P), VR_INTACT);
	purge_takes(&A, &B, rb, 0, 0, pa, &A);
	CK_EQ(UNMARK(&A, pa, 0, 8 * P), VR_PURGED);
	CK_EQ(UNMARK(&A, ra, 0, 32 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, pa, 0, 2 * P), VR_INTACT);
	purge_takes(&A, &A, pa, 0, 0, rb, &B);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S29: stats ---- */
static void expect_gauges(struct vs_proc *p, uint64_t ranges, uint64_t vol, uint64_t purged)
{
	CK_EQ(STAT(p, VR_STAT_RANGES), ranges);
	CK_EQ(STAT(p, VR_STAT_VOLATILE_BYTES), vol);
	CK_EQ(STAT(p, VR_STAT_PURGED_BYTES), purged);
}

static void expect_done(struct vs_proc *p, uint64_t purges, uint64_t reclaimed)
{
	CK_EQ(STAT(p, VR_STAT_PURGES), purges);
	CK_EQ(STAT(p, VR_STAT_RECLAIMED_BYTES), reclaimed);
}

static void sc_stats(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 32 * P);
	struct vs_proc B = vs_spawn(), C = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	int rb2 = join_from(&B, &A, ra, 0); /* B maps the file twice: S33 */
	int rc = join_from(&C, &A, ra, 0);
	int pc = vs_new(&C, 8 * P, 0); /* and C has a private region */
	CK(pc >= 0);
	CK_EQ(STAT(&B, VR_STAT_REGIONS), 2);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&B, rb, 4 * P, 3 * P), VR_INTACT);
	CK_EQ(MARK(&C, pc, 0, P), VR_INTACT);
	expect_gauges(&A, 2, 5 * P, 0);
	expect_gauges(&B, 2, 5 * P, 0);
	expect_gauges(&C, 3, 6 * P, 0);
	CK_EQ(PURGE(&A, 1), (int64_t)(2 * P));
	expect_done(&A, 1, 2 * P);
	expect_done(&B, 0, 0);
	expect_done(&C, 0, 0);
	expect_gauges(&A, 2, 3 * P, 2 * P);
	expect_gauges(&B, 2, 3 * P, 2 * P);
	expect_gauges(&C, 3, 4 * P, 2 * P);
	/* B's purge of everything: its own count, A's unchanged */
	CK_EQ(PURGE(&B, SIZE_MAX), (int64_t)(3 * P));
	expect_done(&B, 1, 3 * P);
	expect_done(&A, 1, 2 * P);
	expect_gauges(&A, 2, 0, 5 * P);
	expect_gauges(&B, 2, 0, 5 * P);
	/* C's purge takes its private range only (the rest is purged) */
	CK_EQ(PURGE(&C, SIZE_MAX), (int64_t)P);
	expect_done(&C, 1, P);
	expect_gauges(&C, 3, 0, 6 * P);
	CK_EQ(UNMARK(&C, rc, 0, 32 * P), VR_PURGED);
	expect_gauges(&A, 0, 0, 0);
	expect_gauges(&B, 0, 0, 0);
	expect_gauges(&C, 1, 0, P);
	/* B's second region goes: the file still counts once */
	CK_EQ(vs_call(&B, VS_DESTROY, rb2, 0, 0, 0), 0);
	CK_EQ(MARK(&A, ra, 0, P), VR_INTACT);
	expect_gauges(&B, 1, P, 0);
	CK_EQ(STAT(&B, VR_STAT_REGIONS), 1);
	/* B's first region goes while a third one stays */
	int rb3 = join_from(&B, &A, ra, 0);
	CK_EQ(vs_call(&B, VS_DESTROY, rb, 0, 0, 0), 0);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	expect_gauges(&B, 2, 3 * P, 0);
	CK_EQ(PURGE(&B, 1), (int64_t)P);
	expect_gauges(&B, 2, 2 * P, P);
	expect_gauges(&A, 2, 2 * P, P);
	expect_done(&B, 2, 4 * P);
	CK_EQ(STATUS(&B, rb3, 0, P), VP);
	/* C's only region of the file goes: its gauges forget the file */
	expect_gauges(&C, 3, 2 * P, 2 * P);
	CK_EQ(vs_call(&C, VS_DESTROY, rc, 0, 0, 0), 0);
	expect_gauges(&C, 1, 0, P);
	CK_EQ(MARK(&A, ra, 8 * P, P), VR_INTACT);
	expect_gauges(&C, 1, 0, P);
	CK_EQ(PURGE(&C, SIZE_MAX), 0);
	CK_EQ(STATUS(&A, ra, 8 * P, P), VR_STATE_VOLATILE);
	vs_stop(&B);
	vs_stop(&C);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S29: the limit and pressure of one ctx take every process's ranges ---- */
/* A marks three 2-page ranges at 0, 4P, 8P in a file B joined */
static void three_ranges(int *ra, struct vs_proc *B, int *rb)
{
	size_t P = vt_pg();
	vs_init();
	*ra = vs_new_shared(&A, 16 * P);
	*B = vs_spawn();
	*rb = join_from(B, &A, *ra, 0);
	for (size_t i = 0; i < 3; i++)
		CK_EQ(MARK(&A, *ra, 4 * i * P, 2 * P), VR_INTACT);
}

static void sc_pressure(void)
{
	size_t P = vt_pg();
	struct vs_proc B;
	int ra, rb;
	three_ranges(&ra, &B, &rb);
	/* MODERATE in B: down to half of 6 pages, oldest first */
	CK_EQ(vs_call(&B, VS_PRESSURE, 0, VR_PRESSURE_MODERATE, 0, 0), (int64_t)(4 * P));
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 8 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(STAT(&B, VR_STAT_PRESSURE_EVENTS), 1);
	CK_EQ(STAT(&A, VR_STAT_PRESSURE_EVENTS), 0);
	CK_EQ(STAT(&B, VR_STAT_PURGES), 2);
	CK_EQ(STAT(&A, VR_STAT_PURGES), 0);
	/* CRITICAL: everything purgeable */
	CK_EQ(MARK(&B, rb, 12 * P, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 14 * P, P), VR_INTACT); /* adjacent: joins B's range */
	CK_EQ(vs_call(&B, VS_PRESSURE, 0, VR_PRESSURE_CRITICAL, 0, 0), (int64_t)(5 * P));
	CK_EQ(STATUS(&A, ra, 8 * P, 8 * P), VP);
	CK_EQ(STAT(&A, VR_STAT_VOLATILE_BYTES), 0);
	VS_EXPECT_TRAP(&A, ra, 14 * P);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

static void sc_limit(void)
{
	size_t P = vt_pg();
	struct vs_proc B;
	int ra, rb;
	three_ranges(&ra, &B, &rb);
	/* B's limit: at vr_ctx_set_limit and at each of B's marks (S10) */
	CK_EQ(vs_call(&B, VS_LIMIT, 0, 3 * P, 0, 0), 0);
	CK_EQ(STAT(&B, VR_STAT_VOLATILE_BYTES), 2 * P);
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 8 * P, 2 * P), VR_STATE_VOLATILE);
	CK_EQ(MARK(&B, rb, 12 * P, 2 * P), VR_INTACT);
	CK_EQ(STAT(&B, VR_STAT_VOLATILE_BYTES), 2 * P);
	CK_EQ(STATUS(&A, ra, 8 * P, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 12 * P, 2 * P), VR_STATE_VOLATILE);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

/* S10 with S29: a limit purge that ran dry (only a range with no whole
 * page left) must still take a range another process marked since: B's
 * next vr_mark, even one that changes nothing in B, keeps B's limit */
static void sc_limit_dry(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 16 * P);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	CK_EQ(vs_call(&B, VS_LIMIT, 0, 100, 0, 0), 0);
	/* P bytes over the limit, with no whole page: nothing purgeable */
	CK_EQ(MARK(&B, rb, P / 2, P), VR_INTACT);
	CK_EQ(STATUS(&A, ra, P / 2, P), VR_STATE_VOLATILE);
	/* A marks a purgeable page; A has no limit */
	CK_EQ(MARK(&A, ra, 4 * P, P), VR_INTACT);
	CK_EQ(STATUS(&A, ra, 4 * P, P), VR_STATE_VOLATILE);
	/* a mark inside B's range: no change, but the limit holds on return */
	CK_EQ(MARK(&B, rb, P / 2, 10), VR_INTACT);
	CK_EQ(STATUS(&A, ra, 4 * P, P), VP);
	CK_EQ(STAT(&B, VR_STAT_VOLATILE_BYTES), P);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

static void sc_unpin(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 16 * P);
	struct vs_proc B = vs_spawn();
	join_from(&B, &A, ra, 0);
	CK_EQ(vs_call(&B, VS_LIMIT, 0, 3 * P, 0, 0), 0);
	CK_EQ(MARK(&A, ra, 0, 2 * P), VR_INTACT);
	CK_EQ(MARK(&A, ra, 4 * P, 2 * P), VR_INTACT);
	/* B's vr_obj_unpin keeps B's limit (S22) with A's ranges counted */
	CK_EQ(vs_call(&B, VS_OBJ, 0, P, 0, 0), 0);
	CK_EQ(STAT(&B, VR_STAT_VOLATILE_BYTES), 3 * P);
	CK_EQ(STATUS(&A, ra, 0, 2 * P), VP);
	CK_EQ(STATUS(&A, ra, 4 * P, 2 * P), VR_STATE_VOLATILE);
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

/* ---- S31: capacity ---- */

/* the documented capacity of a shared region of n pages */
static size_t capacity(size_t pages)
{
	return pages / 16 > 512 ? pages / 16 : 512;
}

static void expect_full(struct vs_proc *p, int r, size_t cap, size_t vol)
{
	CK_EQ(STAT(p, VR_STAT_RANGES), cap);
	CK_EQ(STAT(p, VR_STAT_VOLATILE_BYTES), vol);
	(void)r;
}

static void fill_to_capacity(size_t pages)
{
	size_t P = vt_pg(), cap = capacity(pages);
	int ra = vs_new_shared(&A, pages * P);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	/* cap ranges of 3 bytes, 1 byte apart, marked by A and B in turn */
	for (size_t i = 0; i < cap; i++)
		CK_EQ(MARK(i % 2 ? &B : &A, i % 2 ? rb : ra, 4 * i, 3), VR_INTACT);
	expect_full(&A, ra, cap, 3 * cap);
	expect_full(&B, rb, cap, 3 * cap);
	/* one more: -ENOSPC, nothing changes */
	CK_EQ(MARK(&A, ra, 4 * cap, 3), -ENOSPC);
	CK_EQ(MARK(&B, rb, 4 * cap + 100, 3), -ENOSPC);
	CK_EQ(STATUS(&A, ra, 4 * cap, 200), 0);
	expect_full(&B, rb, cap, 3 * cap);
	/* an unmark that splits a range: -ENOSPC, nothing changes */
	CK_EQ(UNMARK(&B, rb, 4 * 20 + 1, 1), -ENOSPC);
	CK_EQ(UNMARK(&A, ra, 4 * 21 + 1, 1), -ENOSPC);
	CK_EQ(STATUS(&A, ra, 4 * 20 + 1, 1), VR_STATE_VOLATILE);
	CK_EQ(STATUS(&B, rb, 4 * 21 + 1, 1), VR_STATE_VOLATILE);
	expect_full(&A, ra, cap, 3 * cap);
	/* what needs no new entry still works when full */
	CK_EQ(UNMARK(&A, ra, 4 * 20, 1), VR_INTACT); /* an end: no split */
	CK_EQ(STATUS(&B, rb, 4 * 20, 1), 0);
	expect_full(&B, rb, cap, 3 * cap - 1);
	CK_EQ(MARK(&B, rb, 4 * 30 + 3, 1), VR_INTACT); /* joins two */
	expect_full(&A, ra, cap - 1, 3 * cap);
	CK_EQ(MARK(&A, ra, 4 * cap, 3), VR_INTACT); /* room for one */
	expect_full(&B, rb, cap, 3 * cap + 3);
	CK_EQ(UNMARK(&B, rb, 4 * 40, 3), VR_INTACT);     /* a whole range */
	CK_EQ(UNMARK(&A, ra, 4 * 41 + 1, 1), VR_INTACT); /* now it may split */
	expect_full(&B, rb, cap, 3 * cap - 1);
	CK_EQ(STATUS(&B, rb, 4 * 41, 1), VR_STATE_VOLATILE);
	CK_EQ(STATUS(&B, rb, 4 * 41 + 1, 1), 0);
	CK_EQ(STATUS(&B, rb, 4 * 41 + 2, 1), VR_STATE_VOLATILE);
	CK_EQ(UNMARK(&A, ra, 0, pages * P), VR_INTACT);
	expect_full(&B, rb, 0, 0);
	vs_stop(&B);
	CK_EQ(vs_call(&A, VS_DESTROY, ra, 0, 0, 0), 0);
}

static void sc_capacity(void)
{
	vs_init();
	fill_to_capacity(64);
	fill_to_capacity(16 * 1024 + 16); /* 1025 */
	vr_ctx_destroy(VS.ctx);
}

/* ---- non-volatile data of each process across neighbours' purges ---- */
static void sc_data(void)
{
	size_t P = vt_pg();
	vs_init();
	int ra = vs_new_shared(&A, 16 * P);
	struct vs_proc B = vs_spawn();
	int rb = join_from(&B, &A, ra, 0);
	/* A's data, V1, a gap of A's, V2, B's data; V1, V2 share pages
	 * with their non-volatile neighbours */
	size_t v1 = 4 * P + 100, v1n = 4 * P, gap = v1 + v1n, v2 = gap + 100;
	size_t bdata = 12 * P - 100, v2n = bdata - v2;
	FILL(&A, ra, 0, v1, 10);
	FILL(&A, ra, gap, 100, 12);
	FILL(&B, rb, bdata, 16 * P - bdata, 11);
	struct vs_proc *who[2] = { &A, &B };
	int reg[2] = { ra, rb };
	for (uint64_t round = 0; round < 40; round++) {
		uint64_t g = 100 + 2 * round;
		int m1 = round % 2, m2 = (round / 2) % 2, pu = (round / 4) % 2;
		FILL(who[m1], reg[m1], v1, v1n, g);
		FILL(who[m2], reg[m2], v2, v2n, g + 1);
		CK_EQ(MARK(who[m1], reg[m1], v1, v1n), VR_INTACT);
		CK_EQ(MARK(who[m2], reg[m2], v2, v2n), VR_INTACT);
		int64_t n = PURGE(who[pu], round % 3 ? 1 : SIZE_MAX);
		CK(n == (int64_t)(3 * P) || n == (int64_t)(5 * P), "(purged %" PRId64 ")", n);
		for (int k = 0; k < 2; k++) {
			VS_EXPECT_DATA(who[k], reg[k], 0, v1, 10);
			VS_EXPECT_DATA(who[k], reg[k], gap, 100, 12);
			VS_EXPECT_DATA(who[k], reg[k], bdata, 16 * P - bdata, 11);
		}
		/* the other process unmarks; what it reports is the truth */
		int64_t u1 = UNMARK(who[1 - m1], reg[1 - m1], v1, v1n);
		int64_t u2 = UNMARK(who[1 - m2], reg[1 - m2], v2, v2n);
		CK_EQ(u1, VR_PURGED); /* the oldest goes first: V1 */
		CK_EQ(u2, n == (int64_t)(5 * P) ? VR_PURGED : VR_INTACT);
		VS_EXPECT_DATA(who[m1], reg[m1], 5 * P, 3 * P, VS_ZERO);
		VS_EXPECT_DATA(who[m1], reg[m1], v1, 5 * P - v1, g);
		if (u2 == VR_INTACT)
			VS_EXPECT_DATA(who[m2], reg[m2], v2, v2n, g + 1);
		else
			VS_EXPECT_DATA(who[m2], reg[m2], 9 * P, 2 * P, VS_ZERO);
		VS_EXPECT_DATA(who[m2], reg[m2], v2, 9 * P - v2, g + 1);
	}
	vs_stop(&B);
	vr_ctx_destroy(VS.ctx);
}

static const struct vt_scenario scenarios[] = {
	{ "peer", vs_peer_main },    { "basic", sc_basic },         { "flags", sc_flags },
	{ "traps", sc_traps },       { "refill", sc_refill },       { "edges", sc_edges },
	{ "ages", sc_ages },         { "stats", sc_stats },         { "pressure", sc_pressure },
	{ "limit", sc_limit },       { "limit_dry", sc_limit_dry }, { "unpin", sc_unpin },
	{ "capacity", sc_capacity }, { "data", sc_data },
};

SHARED_TEST(basic)
SHARED_TEST(flags)
SHARED_TEST(traps)
SHARED_TEST(refill)
SHARED_TEST(edges)
SHARED_TEST(ages)
SHARED_TEST(stats)
SHARED_TEST(pressure)
SHARED_TEST(limit)
SHARED_TEST(limit_dry)
SHARED_TEST(unpin)
SHARED_TEST(capacity)
SHARED_TEST(data)

/* basic and traps as an unprivileged user: exit 77 (skip) without root,
 * setpriv or an unprivileged account */
static void test_unprivileged(void **state)
{
	(void)state;
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
		printf("[  SKIP    ] unprivileged run: needs root and setpriv\n");
		skip();
	}
	struct passwd *pw = getpwnam("nobody");
	if (!pw && system("useradd -r -M -s /usr/sbin/nologin vrange-test >/dev/null 2>&1") == 0)
		pw = getpwnam("vrange-test");
	if (!pw) {
		printf("[  SKIP    ] unprivileged run: no unprivileged account\n");
		skip();
	}
	const char *names[] = { "basic", "traps" };
	const char *traps[] = { NULL, "uffd" };
	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < 2; i++) {
			char uid[32], gid[32];
			snprintf(uid, sizeof(uid), "--reuid=%u", (unsigned)pw->pw_uid);
			snprintf(gid, sizeof(gid), "--regid=%u", (unsigned)pw->pw_gid);
			fflush(stdout);
			pid_t pid = fork();
			assert_true(pid >= 0);
			if (pid == 0) {
				if (traps[t])
					setenv("VRANGE_TRAP", traps[t], 1);
				else
					unsetenv("VRANGE_TRAP");
				execl("/usr/bin/setpriv", "setpriv", uid, gid, "--clear-groups",
				      "--inh-caps=-all", program_invocation_name, "--scenario",
				      names[i], (char *)NULL);
				_exit(127);
			}
			int st = 0;
			assert_int_equal(waitpid(pid, &st, 0), pid);
			if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
				fail_msg("%s as uid %u: skipped", names[i], (unsigned)pw->pw_uid);
			vt_assert_exit_ok(st);
		}
}

/* child() runs in a fork child inside a new 64 MiB memory cgroup and
 * exits; its exit must be 0 and no charge may have hit the limit */
static void in_small_cgroup(const char *what, void (*child)(void))
{
	struct vt_cg cg;
	const char *why = NULL;
	if (vt_cg_create(&cg, 64u << 20, &why) != 0) {
		printf("[  SKIP    ] %s: %s\n", what, why);
		skip();
	}
	fflush(stdout);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (vt_cg_enter(&cg) < 0)
			_exit(4);
		child();
		_exit(0);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	uint64_t failcnt = cg.v2 ? vt_cg_key(cg.dir, "memory.events", "max")
				 : vt_cg_read(cg.dir, "memory.failcnt");
	assert_int_equal(vt_cg_remove(&cg), 0);
	vt_assert_exit_ok(st);
	assert_int_equal(failcnt, 0);
}

/* S1/S27: a size the system's RAM and swap cannot hold fails with
 * -ENOMEM before a page is committed.  Without that check the creation's
 * fallocate committed pages until the OOM killer ran (machine-wide, where
 * it picks other processes), so the call runs in a child inside a 64 MiB
 * memory cgroup: there the bug is the child's own OOM kill, or a charge
 * that hit the limit (skip where no child cgroup can be made) */
static void beyond_memory(void)
{
	struct sysinfo si;
	struct vr_ctx *ctx;
	struct vr_region *r = NULL;
	if (sysinfo(&si) < 0 || vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) < 0)
		_exit(4);
	size_t size = ((size_t)si.totalram + si.totalswap) * si.mem_unit + (1ul << 30);
	int rc = vr_region_new(ctx, "huge", size, VR_REGION_SHARED, &r);
	vr_ctx_destroy(ctx);
	_exit(rc == -ENOMEM ? 0 : 3);
}

static void test_size_beyond_memory(void **state)
{
	(void)state;
	in_small_cgroup("size beyond memory", beyond_memory);
}

/* the same below the machine's memory but beyond the memory cgroup's
 * limit (96 MiB in 64 MiB): the commit was charged to the cgroup until
 * its OOM killer ran, which killed the caller.  Now -ENOMEM, nothing
 * charged up to the limit; a region that fits (16 MiB) is still made,
 * written and read */
static void beyond_cgroup(void)
{
	struct vr_ctx *ctx;
	struct vr_region *r = NULL;
	if (vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) < 0)
		_exit(4);
	if (vr_region_new(ctx, "big", 96u << 20, VR_REGION_SHARED, &r) != -ENOMEM)
		_exit(3);
	size_t fits = 16u << 20;
	if (vr_region_new(ctx, "fits", fits, VR_REGION_SHARED, &r) != 0)
		_exit(5);
	uint8_t *b = vr_region_base(r);
	vt_fill(b, 0, fits, 7);
	if (vr_mark(r, 0, fits) != VR_INTACT || vr_unmark(r, 0, fits) != VR_INTACT ||
	    vt_check(b, 0, fits, 7) != SIZE_MAX)
		_exit(6);
	vr_ctx_destroy(ctx);
	_exit(0);
}

static void test_size_beyond_cgroup(void **state)
{
	(void)state;
	in_small_cgroup("size beyond the cgroup", beyond_cgroup);
}

/* the same under a parent's larger limit that leaves less room: a 96 MiB
 * region in an empty 128 MiB cgroup whose 160 MiB parent holds 100 MiB of
 * a sibling's (anonymous memory, no swap needed to see it).  Only the
 * smallest limit was read (the child's: 128 MiB of room), the region was
 * made, and its commit ran the parent's OOM killer (here it killed the
 * sibling).  Now -ENOMEM, the sibling lives, the parent never hit its
 * limit */
#define MiB_ (1ull << 20)

static void sibling_hog(const struct vt_cg *sib)
{
	if (vt_cg_enter(sib) < 0)
		_exit(4);
	uint8_t *p =
		mmap(NULL, 100 * MiB_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(5);
	memset(p, 0x3c, 100 * MiB_);
	for (;;)
		pause();
}

static void test_size_beyond_parent_cgroup(void **state)
{
	(void)state;
	struct vt_cg outer, in, sib;
	const char *why = NULL;
	if (vt_cg_create(&outer, 160 * MiB_, &why) != 0) {
		printf("[  SKIP    ] size beyond the parent cgroup: %s\n", why);
		skip();
	}
	if (vt_cg_create_in(&in, &outer, 128 * MiB_, &why) != 0) {
		vt_cg_remove(&outer);
		printf("[  SKIP    ] size beyond the parent cgroup: %s\n", why);
		skip();
	}
	sib.v2 = outer.v2;
	assert_true((size_t)snprintf(sib.dir, sizeof(sib.dir), "%s/sib", outer.dir) <
		    sizeof(sib.dir));
	assert_int_equal(mkdir(sib.dir, 0755), 0);
	const char *usage = outer.v2 ? "memory.current" : "memory.usage_in_bytes";
	fflush(stdout);
	pid_t hog = fork();
	assert_true(hog >= 0);
	if (hog == 0)
		sibling_hog(&sib);
	while (vt_cg_read(sib.dir, usage) < 100 * MiB_)
		assert_int_equal(waitpid(hog, NULL, WNOHANG), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct vr_ctx *ctx;
		struct vr_region *r = NULL;
		if (vt_cg_enter(&in) < 0 || vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) < 0)
			_exit(4);
		int rc = vr_region_new(ctx, "big", 96 * MiB_, VR_REGION_SHARED, &r);
		printf("vr_region_new: %d\n", rc);
		fflush(stdout);
		_exit(rc == -ENOMEM ? 0 : 3);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	bool hog_alive = waitpid(hog, NULL, WNOHANG) == 0;
	kill(hog, SIGKILL);
	waitpid(hog, NULL, 0);
	uint64_t failcnt = outer.v2 ? vt_cg_key(outer.dir, "memory.events", "max")
				    : vt_cg_read(outer.dir, "memory.failcnt");
	assert_int_equal(vt_cg_remove(&sib), 0);
	assert_int_equal(vt_cg_remove(&in), 0);
	assert_int_equal(vt_cg_remove(&outer), 0);
	vt_assert_exit_ok(st);
	assert_true(hog_alive);
	assert_int_equal(failcnt, 0);
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios,
				      sizeof(scenarios) / sizeof(scenarios[0]), 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_traps),
		cmocka_unit_test(test_refill),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_ages),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_pressure),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_limit_dry),
		cmocka_unit_test(test_unpin),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_data),
		cmocka_unit_test(test_unprivileged),
		cmocka_unit_test(test_size_beyond_memory),
		cmocka_unit_test(test_size_beyond_cgroup),
		cmocka_unit_test(test_size_beyond_parent_cgroup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
