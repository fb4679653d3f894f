/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-limit.c - survive a hard memory limit (API S34), end to end
 *
 * Each run makes a child memory cgroup nested in this process's own
 * (tests/vt-cgroup.h: v1 memcg here, a delegated v2 cgroup elsewhere)
 * with a 256 MiB limit, forks a child that moves itself into it and runs
 * a cache: 1 GiB of 64 KiB objects written into one region, each marked
 * volatile as soon as it is written, then random re-reads (unmark; an
 * intact object must hold its data, a purged one is refilled; mark
 * again).  The child reports through its exit status; SIGKILL is the OOM
 * killer.  The parent removes the cgroup after reaping the child, on
 * failure and on SIGTERM/SIGINT too.  Exit 77 when there is no writable
 * cgroup of our own.
 *
 *   VT_LIMIT_RUNS=N   runs with the defaults (default 3; 20 in development)
 *
 * A last run sets VRANGE_MEMORY_LIMIT=128m under the same 256 MiB cgroup:
 * the override must be the limit watched, and the cgroup's peak usage
 * must stay under it.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>

#include <vrange.h>

#include "vt-cgroup.h"

#define LIMIT (256ull << 20)
#define TOTAL (1ull << 30)
#define OBJ (64u << 10)
#define REREADS 8192

static struct vt_cg cg;
static volatile pid_t child = -1;

static void cleanup(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
	vt_cg_remove(&cg);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t word(size_t obj, size_t w, unsigned gen)
{
	return ((uint64_t)obj << 32) ^ ((uint64_t)gen << 24) ^ w ^ 0x5bd1e995u;
}

static void fill(uint64_t *p, size_t obj, unsigned gen)
{
	for (size_t w = 0; w < OBJ / 8; w++)
		p[w] = word(obj, w, gen);
}

static bool intact(const uint64_t *p, size_t obj, unsigned gen)
{
	for (size_t w = 0; w < OBJ / 8; w++)
		if (p[w] != word(obj, w, gen))
			return false;
	return true;
}

/* the child: exit 0 survived with correct data; 3 wrong data; 4 limit
 * not detected; 5 a call failed; 6 cannot enter the cgroup */
static int child_main(uint64_t expect_limit)
{
	if (vt_cg_enter(&cg) < 0)
		return 6;
	struct vr_ctx *c;
	struct vr_region *r;
	if (vr_ctx_new(0, &c) < 0 || vr_region_new(c, "vt-limit", TOTAL, 0, &r) < 0)
		return 5;
	if (vr_ctx_memory_limit(c) != expect_limit ||
	    !(vr_ctx_monitor_sources(c) & (1u << VR_MONITOR_LIMIT))) {
		fprintf(stderr, "limit %" PRIu64 " (expected %" PRIu64 "), sources %#x\n",
			vr_ctx_memory_limit(c), expect_limit, vr_ctx_monitor_sources(c));
		return 4;
	}
	uint8_t *base = vr_region_base(r);
	size_t n = TOTAL / OBJ;
	unsigned *gen = calloc(n, sizeof(*gen));
	if (!gen)
		return 5;
	for (size_t i = 0; i < n; i++) {
		fill((uint64_t *)(base + i * OBJ), i, 0);
		if (vr_mark(r, i * OBJ, OBJ) < 0)
			return 5;
	}
	uint64_t rng = 0x9e3779b97f4a7c15ull, hits = 0;
	for (int k = 0; k < REREADS; k++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		size_t i = rng % n;
		uint64_t *p = (uint64_t *)(base + i * OBJ);
		int rc = vr_unmark(r, i * OBJ, OBJ);
		if (rc < 0)
			return 5;
		if (rc == VR_INTACT) {
			if (!intact(p, i, gen[i]))
				return 3; /* discarded bytes read as data */
			hits++;
		} else {
			fill(p, i, ++gen[i]);
		}
		if (vr_mark(r, i * OBJ, OBJ) < 0)
			return 5;
	}
	printf("    hits %.3f, limit events %" PRIu64 ", limit purges %" PRIu64 ", purges %" PRIu64
	       ", first byte %.2f ms after a crossing (max)\n",
	       (double)hits / REREADS, vr_ctx_stat(c, VR_STAT_LIMIT_EVENTS),
	       vr_ctx_stat(c, VR_STAT_LIMIT_PURGES), vr_ctx_stat(c, VR_STAT_PURGES),
	       vr_ctx_stat(c, VR_STAT_LIMIT_LATENCY_NS) / 1e6);
	fflush(stdout);
	vr_ctx_destroy(c);
	free(gen);
	return 0;
}

/* one run: 0 survived, 1 failed, 77 no cgroup */
static int run(int no, const char *override, uint64_t expect_limit)
{
	const char *why = NULL;
	int rc = vt_cg_create(&cg, LIMIT, &why);
	if (rc) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		cleanup();
		return 1;
	}
	if (pid == 0) {
		if (override)
			setenv("VRANGE_MEMORY_LIMIT", override, 1);
		else
			unsetenv("VRANGE_MEMORY_LIMIT");
		unsetenv("VRANGE_MONITOR");
		_exit(child_main(expect_limit));
	}
	child = pid;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	child = -1;
	bool v2 = cg.v2;
	uint64_t peak = vt_cg_read(cg.dir, v2 ? "memory.peak" : "memory.max_usage_in_bytes");
	uint64_t fail = v2 ? vt_cg_key(cg.dir, "memory.events", "max")
			   : vt_cg_read(cg.dir, "memory.failcnt");
	uint64_t ooms = v2 ? vt_cg_key(cg.dir, "memory.events", "oom_kill")
			   : vt_cg_key(cg.dir, "memory.oom_control", "oom_kill");
	if (vt_cg_remove(&cg) < 0)
		printf("    warning: cgroup not removed\n");
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("run %2d%s: %s (%s %d), peak %.1f MiB of %.0f, limit hits %" PRIu64
	       ", oom kills %" PRIu64 "\n",
	       no, override ? " (VRANGE_MEMORY_LIMIT)" : "", ok ? "survived" : "FAILED",
	       WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
	       peak / 1048576.0, LIMIT / 1048576.0, fail, ooms);
	if (ok && override && peak >= expect_limit) {
		printf("    peak usage above the VRANGE_MEMORY_LIMIT override\n");
		ok = false;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 6) {
		printf("SKIP: cannot move a process into the child cgroup\n");
		return 77;
	}
	return ok ? 0 : 1;
}

int main(void)
{
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	atexit(cleanup);
	const char *e = getenv("VT_LIMIT_RUNS");
	int runs = e ? atoi(e) : 3, survived = 0;
	for (int i = 0; i < runs; i++) {
		int rc = run(i, NULL, LIMIT);
		if (rc == 77)
			return 77;
		survived += rc == 0;
	}
	int orc = run(runs, "128m", 128ull << 20);
	if (orc == 77)
		return 77;
	printf("survived %d/%d with the defaults at %llu MiB, %llu MiB written; override run %s\n",
	       survived, runs, LIMIT >> 20, TOTAL >> 20, orc == 0 ? "ok" : "FAILED");
	return survived == runs && orc == 0 ? 0 : 1;
}
