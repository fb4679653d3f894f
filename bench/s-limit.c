/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-limit.c - scenario "limit": a cache under a hard memory limit (S34).
 *
 * Each run makes a child memory cgroup nested in this process's own
 * (tests/vt-cgroup.h; skipped with 77 where there is none) with a
 * 256 MiB limit, forks a process that moves itself into it and writes
 * 1 GiB of 64 KiB objects (one page apart), releasing each as soon as it
 * is written, then re-reads random objects (an intact one must hold its
 * data, a lost one is refilled) and releases them again.  The cgroup is
 * removed after each run.  Styles, same limit and object count:
 *
 *   vr-default    libvrange, vr_ctx_new(0): the limit watcher and budget
 *   vr-app-budget libvrange, VRANGE_MEMORY_LIMIT=off and
 *                 vr_ctx_set_limit(limit - 16 MiB): v0.1's way
 *   canary        private anonymous memory, MADV_FREE + a canary per page
 *   droppable     MAP_DROPPABLE (6.11+; skipped on EINVAL)
 *   heap-lru      malloc'd buffers with an LRU budget of limit - 16 MiB
 *   malloc        plain malloc, nothing ever given back
 *   vr-spike      libvrange: 25/32 of the limit volatile (200 MiB), then
 *                 1/4 of it (64 MiB) of ordinary
 *                 memory at ~1 GiB/s, so only a threshold purge saves it
 *
 * Mixed (A3: file cache is not the cache's memory), in a 128 MiB
 * cgroup: 48 MiB of objects written and released, then a thread reads a
 * 384 MiB file (on a disk file system, its page cache dropped first)
 * twice while the main thread re-reads random objects; then every object
 * is checked once.  Rows: survived, kept (fraction of the objects intact
 * at the end), hit rate of the re-reads during the streaming:
 *
 *   vr-mixed, canary-mixed, droppable-mixed
 *
 * Rows: survived/runs, peak usage (memory.max_usage_in_bytes or
 * memory.peak), re-read hit rate (p99 column: the lowest run), longest
 * single write+release, and for libvrange the time from a threshold
 * crossing seen by the monitor to the first range purged
 * (VR_STAT_LIMIT_LATENCY_NS), the time from the kernel's own threshold
 * event (a second eventfd on the run's cgroup) to the first byte
 * reclaimed, and the usage a threshold purge left.
 */
#include "bench.h"
#include "baselines.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>
#include <unistd.h>

#include <vrange.h>

#include "../tests/vt-cgroup.h"

#define SCEN "limit"
#define OBJ VT_OBJ
#define STRIDE VT_STRIDE
#ifndef MAP_DROPPABLE
#define MAP_DROPPABLE 0x08
#endif

struct result {
	double kept; /* mixed: fraction of the objects intact at the end */
	double hit, stall_ms, latency_ms, after_mib;
	double event_ms; /* vr-spike: kernel threshold event -> first byte reclaimed */
	uint64_t limit_events, pressure_events;
	int skip; /* 1: style unsupported here */
};

static uint64_t LIMIT, TOTAL;
static size_t NOBJ, REREADS;

/* one cache, behind four calls */
struct cache {
	const char *style;
	uint8_t *base;
	struct vr_ctx *c;
	struct vr_region *r;
	uint64_t **saved; /* canary */
	struct hlru h;
	uint8_t **heap; /* malloc */
};

static void cache_open(struct cache *k, struct result *res)
{
	const char *s = k->style;
	size_t span = NOBJ * STRIDE;
	if (!strncmp(s, "vr-", 3)) {
		if (!strcmp(s, "vr-app-budget"))
			setenv("VRANGE_MEMORY_LIMIT", "off", 1);
		VRCHECK(vr_ctx_new(0, &k->c));
		VRCHECK(vr_region_new(k->c, "vrbench-limit", span, 0, &k->r));
		if (!strcmp(s, "vr-app-budget"))
			VRCHECK(vr_ctx_set_limit(k->c, LIMIT - 16 * MiB));
		k->base = vr_region_base(k->r);
	} else if (!strcmp(s, "canary") || !strcmp(s, "droppable")) {
		int fl = MAP_ANONYMOUS | (strcmp(s, "droppable") ? MAP_PRIVATE : MAP_DROPPABLE);
		void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, fl, -1, 0);
		if (p == MAP_FAILED) {
			CHECK(errno == EINVAL && !strcmp(s, "droppable"));
			res->skip = 1;
			return;
		}
		k->base = p;
		canary_init();
		k->saved = calloc(NOBJ, sizeof(*k->saved));
		CHECK(k->saved);
		for (size_t i = 0; i < NOBJ && !strcmp(s, "canary"); i++)
			CHECK(k->saved[i] = calloc(OBJ / page_size, sizeof(uint64_t)));
	} else if (!strcmp(s, "heap-lru")) {
		size_t *lens = malloc(NOBJ * sizeof(*lens));
		CHECK(lens);
		for (size_t i = 0; i < NOBJ; i++)
			lens[i] = OBJ;
		CHECK(hlru_init(&k->h, NOBJ, lens, LIMIT - 16 * MiB) == 0);
		free(lens);
	} else {
		CHECK(k->heap = calloc(NOBJ, sizeof(*k->heap)));
	}
}

/* the object's memory for writing, pinned; *lost: its data is gone */
static uint64_t *cache_get(struct cache *k, size_t i, bool first, bool *lost)
{
	const char *s = k->style;
	*lost = false;
	if (k->r) {
		if (!first)
			*lost = VRCHECK(vr_unmark(k->r, i * STRIDE, OBJ)) == VR_PURGED;
		return (uint64_t *)(k->base + i * STRIDE);
	}
	if (!strcmp(s, "canary")) {
		if (!first)
			*lost = !canary_lock(k->base + i * STRIDE, OBJ, k->saved[i]);
		return (uint64_t *)(k->base + i * STRIDE);
	}
	if (!strcmp(s, "droppable")) {
		uint64_t *p = (uint64_t *)(k->base + i * STRIDE);
		/* no lock: the kernel may drop pages at any time; a zero word
		 * at the start of each page means dropped (data never has 0
		 * there: word() of w = 0 is never 0 for these objects) */
		for (size_t pg = 0; !first && pg < OBJ / page_size; pg++)
			if (!p[pg * page_size / 8])
				*lost = true;
		return p;
	}
	if (!strcmp(s, "heap-lru"))
		return hlru_lock(&k->h, i, lost);
	if (!k->heap[i])
		CHECK(k->heap[i] = malloc(OBJ));
	return (uint64_t *)k->heap[i];
}

static void cache_put(struct cache *k, size_t i)
{
	if (k->r)
		VRCHECK(vr_mark(k->r, i * STRIDE, OBJ));
	else if (!strcmp(k->style, "canary"))
		canary_unlock(k->base + i * STRIDE, OBJ, k->saved[i]);
	else if (!strcmp(k->style, "heap-lru"))
		hlru_unlock(&k->h, i);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* the kernel's own view of the crossing: a second usage threshold on the
 * cgroup (ours: the run's child cgroup), and the time from its event to
 * the first byte the ctx reclaimed */
struct watch {
	int efd;
	struct vr_ctx *c;
	uint64_t base; /* reclaimed bytes before the spike */
	double ms;     /* -1: no event */
};

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct pollfd p = { .fd = w->efd, .events = POLLIN };
	if (poll(&p, 1, 10000) <= 0)
		return NULL;
	uint64_t t0 = now_ns();
	while (vr_ctx_stat(w->c, VR_STAT_RECLAIMED_BYTES) == w->base &&
	       now_ns() - t0 < 5000000000ull) {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
	w->ms = (double)(now_ns() - t0) / 1e6;
	return NULL;
}

static int watch_arm(const struct vt_cg *cg, uint64_t bytes)
{
	if (cg->v2)
		return -1;
	char p[2 * PATH_MAX], buf[96];
	snprintf(p, sizeof(p), "%s/memory.usage_in_bytes", cg->dir);
	int ufd = open(p, O_RDONLY | O_CLOEXEC), efd = eventfd(0, EFD_CLOEXEC);
	snprintf(buf, sizeof(buf), "%d %d %llu", efd, ufd, (unsigned long long)bytes);
	int rc = ufd >= 0 && efd >= 0 ? vt_cg_write(cg->dir, "cgroup.event_control", buf) : -1;
	if (ufd >= 0)
		close(ufd);
	if (rc < 0 && efd >= 0) {
		close(efd);
		efd = -1;
	}
	return efd;
}

/* the vr-spike workload (see tests/test-limit.c): result.after_mib */
static void spike(struct cache *k, const struct vt_cg *cg, struct result *res)
{
	size_t n = LIMIT / 32 * 25 / OBJ;
	bool lost;
	for (size_t i = 0; i < n; i++) {
		vt_obj_fill(cache_get(k, i, true, &lost), i, 0);
		cache_put(k, i);
	}
	struct watch w = { .efd = watch_arm(cg, LIMIT - LIMIT / 32),
			   .c = k->c,
			   .base = vr_ctx_stat(k->c, VR_STAT_RECLAIMED_BYTES),
			   .ms = -1 };
	pthread_t th;
	bool watching = w.efd >= 0 && pthread_create(&th, NULL, watch_main, &w) == 0;
	uint8_t *p = map_anon(LIMIT / 4);
	for (size_t off = 0; off < LIMIT / 4; off += MiB) {
		memset(p + off, 0x5a, MiB);
		sleep_ms(1);
	}
	for (int i = 0; i < 5000 && !vr_ctx_stat(k->c, VR_STAT_LIMIT_EVENTS); i++)
		sleep_ms(1);
	sleep_ms(100);
	if (watching) {
		pthread_join(th, NULL);
		res->event_ms = w.ms;
	}
	res->after_mib = vt_cg_read(cg->dir, cg->v2 ? "memory.current" : "memory.usage_in_bytes") /
			 (double)MiB;
}

/* ---- mixed: the cache and a file streamed through the same cgroup ---- */

#define MIX_LIMIT (128 * MiB)
#define MIX_FILE (384 * MiB)
#define MIX_OBJ (48 * MiB / OBJ)

static char mix_path[PATH_MAX];
static _Atomic bool mix_reading;

static void mix_drop(int fd)
{
	fsync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

static void *mix_reader(void *arg)
{
	static char buf[1 << 20];
	(void)arg;
	for (int pass = 0; pass < 2; pass++) {
		int fd = open(mix_path, O_RDONLY | O_CLOEXEC);
		CHECK(fd >= 0);
		mix_drop(fd);
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
	}
	atomic_store(&mix_reading, false);
	return NULL;
}

/* the file on a disk file system (tmpfs pages are no file cache): 0 or 77 */
static int mix_file(void)
{
	const char *dirs[] = { getenv("TMPDIR"), "/tmp", "." };
	for (size_t i = 0; i < 3 && !mix_path[0]; i++) {
		struct statfs sf;
		if (dirs[i] && *dirs[i] && statfs(dirs[i], &sf) == 0 && sf.f_type != TMPFS_MAGIC &&
		    access(dirs[i], W_OK) == 0)
			snprintf(mix_path, sizeof(mix_path), "%s/vrbench-limit-%d", dirs[i],
				 (int)getpid());
	}
	if (!mix_path[0])
		return 77;
	int fd = open(mix_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	static char chunk[1 << 20];
	memset(chunk, 0x5a, sizeof(chunk));
	for (size_t off = 0; off < MIX_FILE; off += sizeof(chunk))
		CHECK(write(fd, chunk, sizeof(chunk)) == (ssize_t)sizeof(chunk));
	mix_drop(fd);
	close(fd);
	return 0;
}

static void mixed(struct cache *k, struct result *res)
{
	bool lost;
	for (size_t i = 0; i < NOBJ; i++) {
		vt_obj_fill(cache_get(k, i, true, &lost), i, 0);
		cache_put(k, i);
	}
	pthread_t t;
	atomic_store(&mix_reading, true);
	CHECK(pthread_create(&t, NULL, mix_reader, NULL) == 0);
	uint64_t rng = 0x9e3779b97f4a7c15ull, hits = 0, reads = 0;
	unsigned *gen = calloc(NOBJ, sizeof(*gen));
	CHECK(gen);
	while (atomic_load(&mix_reading)) {
		size_t i = rng_below(&rng, NOBJ);
		uint64_t *p = cache_get(k, i, false, &lost);
		if (!lost) {
			CHECK(vt_obj_intact(p, i, gen[i]));
			hits++;
		} else {
			vt_obj_fill(p, i, ++gen[i]);
		}
		cache_put(k, i);
		reads++;
		sleep_ms(1);
	}
	pthread_join(t, NULL);
	size_t kept = 0;
	for (size_t i = 0; i < NOBJ; i++) {
		uint64_t *p = cache_get(k, i, false, &lost);
		if (!lost) {
			CHECK(vt_obj_intact(p, i, gen[i]));
			kept++;
		}
		cache_put(k, i);
	}
	free(gen);
	res->hit = reads ? (double)hits / (double)reads : 0;
	res->kept = (double)kept / (double)NOBJ;
}

static void workload(const char *style, const struct vt_cg *cg, int fd)
{
	struct result res = { 0 };
	/* "X-mixed" is cache X under the mixed workload ("vr-mixed": vr-default) */
	char base[32];
	size_t bl = strstr(style, "-mixed") ? (size_t)(strstr(style, "-mixed") - style) : strlen(style);
	snprintf(base, sizeof(base), "%.*s", (int)bl, style);
	struct cache k = { .style = strcmp(base, "vr") ? base : "vr-default" };
	if (vt_cg_enter(cg) < 0)
		_exit(78);
	cache_open(&k, &res);
	if (res.skip)
		goto out;
	if (!strcmp(style, "vr-spike")) {
		spike(&k, cg, &res);
		goto stats;
	}
	if (bl < strlen(style)) {
		mixed(&k, &res);
		goto stats;
	}
	unsigned *gen = calloc(NOBJ, sizeof(*gen));
	CHECK(gen);
	bool lost;
	for (size_t i = 0; i < NOBJ; i++) {
		uint64_t t0 = now_ns();
		vt_obj_fill(cache_get(&k, i, true, &lost), i, 0);
		cache_put(&k, i);
		double ms = (double)(now_ns() - t0) / 1e6;
		if (ms > res.stall_ms)
			res.stall_ms = ms;
	}
	uint64_t rng = 0x9e3779b97f4a7c15ull, hits = 0;
	for (size_t j = 0; j < REREADS; j++) {
		size_t i = rng_below(&rng, NOBJ);
		uint64_t *p = cache_get(&k, i, false, &lost);
		if (!lost) {
			CHECK(vt_obj_intact(p, i, gen[i])); /* lost data read as intact */
			hits++;
		} else {
			vt_obj_fill(p, i, ++gen[i]);
		}
		cache_put(&k, i);
	}
	res.hit = (double)hits / (double)REREADS;
stats:
	if (k.c) {
		res.latency_ms = vr_ctx_stat(k.c, VR_STAT_LIMIT_LATENCY_NS) / 1e6;
		res.limit_events = vr_ctx_stat(k.c, VR_STAT_LIMIT_EVENTS);
		res.pressure_events = vr_ctx_stat(k.c, VR_STAT_PRESSURE_EVENTS);
	}
out:
	CHECK(write(fd, &res, sizeof(res)) == sizeof(res));
	_exit(0);
}

int run_limit(const char *style)
{
	bool mix = strstr(style, "-mixed") != NULL;
	LIMIT = mix ? MIX_LIMIT : BY_MODE(64, 256, 256) * MiB;
	TOTAL = mix ? MIX_OBJ * OBJ : BY_MODE(256, 1024, 1024) * MiB;
	NOBJ = TOTAL / OBJ;
	if (mix && !mix_path[0] && mix_file()) {
		emit_note("limit: %s skipped: no disk file system to stream from", style);
		return 77;
	}
	REREADS = BY_MODE(1024, 8192, 8192);
	int runs = BY_MODE(1, 3, 20), survived = 0, done = 0;
	struct samples peak = { 0 }, hit = { 0 }, stall = { 0 }, lat = { 0 }, after = { 0 },
		       evt = { 0 }, kept = { 0 };
	uint64_t events = 0, pevents = 0;
	for (int run = 0; run < runs; run++) {
		struct vt_cg cg;
		const char *why;
		if (vt_cg_create(&cg, LIMIT, &why)) {
			emit_note("limit: skipped: %s", why);
			return 77;
		}
		int pfd[2];
		CHECK(pipe(pfd) == 0);
		fflush(NULL);
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			close(pfd[0]);
			workload(style, &cg, pfd[1]);
		}
		close(pfd[1]);
		struct result res = { 0 };
		ssize_t got = read(pfd[0], &res, sizeof(res));
		close(pfd[0]);
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		uint64_t pk =
			vt_cg_read(cg.dir, cg.v2 ? "memory.peak" : "memory.max_usage_in_bytes");
		vt_cg_remove(&cg);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 78) {
			emit_note("limit: skipped: cannot enter the child cgroup");
			return 77;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
			die("limit %s: workload failed (exit %d)", style, WEXITSTATUS(st));
		if (got == sizeof(res) && res.skip) {
			emit_note("limit: %s not supported here (skipped)", style);
			return 0;
		}
		done++;
		samples_add(&peak, (double)pk / (double)MiB);
		if (got == sizeof(res) && WIFEXITED(st)) {
			survived++;
			samples_add(&hit, res.hit);
			samples_add(&stall, res.stall_ms);
			if (mix)
				samples_add(&kept, res.kept);
			pevents += res.pressure_events;
			if (res.limit_events) {
				samples_add(&lat, res.latency_ms);
				events += res.limit_events;
			}
			if (!strcmp(style, "vr-spike"))
				samples_add(&after, res.after_mib);
			if (!strcmp(style, "vr-spike") && res.event_ms >= 0)
				samples_add(&evt, res.event_ms);
		}
	}
	char nm[48];
#define ROW(suffix, med, p99, unit, n)                                                             \
	(snprintf(nm, sizeof(nm), "%s-%s", style, suffix), emit_row(SCEN, nm, med, p99, unit, n))
	ROW("survived", (double)survived, (double)done, "of-runs", done);
	ROW("peak-MiB", samples_pct(&peak, 50), samples_pct(&peak, 100), "MiB", (long)peak.n);
	if (kept.n)
		ROW("kept", samples_pct(&kept, 50), samples_pct(&kept, 0), "ratio", (long)kept.n);
	if (hit.n && strcmp(style, "vr-spike"))
		ROW("hit-rate", samples_pct(&hit, 50), samples_pct(&hit, 0), "ratio", (long)hit.n);
	if (stall.n && strcmp(style, "vr-spike") && !mix)
		ROW("stall-ms", samples_pct(&stall, 50), samples_pct(&stall, 100), "ms",
		    (long)stall.n);
	if (lat.n)
		ROW("first-purge-ms", samples_pct(&lat, 50), samples_pct(&lat, 100), "ms",
		    (long)lat.n);
	if (evt.n)
		ROW("event-to-purge-ms", samples_pct(&evt, 50), samples_pct(&evt, 100), "ms",
		    (long)evt.n);
	if (after.n)
		ROW("after-purge-MiB", samples_pct(&after, 50), samples_pct(&after, 0), "MiB",
		    (long)after.n);
	if (!strncmp(style, "vr-", 3))
		emit_note("limit %s: %llu threshold events, %llu pressure events (PSI) over %d "
			  "runs (target %llu MiB)",
			  style, (unsigned long long)events, (unsigned long long)pevents, done,
			  (unsigned long long)(LIMIT / 4 * 3 / MiB));
	samples_free(&peak);
	samples_free(&hit);
	samples_free(&stall);
	samples_free(&lat);
	samples_free(&after);
	samples_free(&evt);
	samples_free(&kept);
	if (mix) { /* each style runs in its own vrbench child: its own file */
		unlink(mix_path);
		mix_path[0] = '\0';
	}
	return 0;
}
