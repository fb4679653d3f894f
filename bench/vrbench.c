/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vrbench.c - libvrange against the physical floors and the peers, in one
 * run, as ratios.
 *
 * usage: vrbench [--quick | --smoke] [--only LIST] [--json FILE]
 *                [--plot-data FILE] [--list]
 *
 *   --quick      short runs (all scenarios < 60 s), for CI
 *   --smoke      shorter still (< 5 s per scenario): proves the benches work
 *   --only LIST  comma-separated scenarios (see --list); default: all
 *   --json FILE  write every row, ratio and note as JSON
 *   --plot-data FILE  write the cache workload's resident-bytes series
 *                (gnuplot blocks; render with bench/plot.gp)
 *
 * Every scenario runs in a child process (this binary re-executed with
 * --child NAME), with VRANGE_TRAP set when it measures one trap backend.
 * The parent prints the rows as they come, then the ratios with the goals
 * of issue 6, then one SUMMARY line.  The exit status is 0 unless a
 * scenario failed (a call failed or data came back wrong); timings are
 * never judged.
 */
#include "bench.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

struct job {
	const char *scen, *child, *backend, *style;
};

/* clang-format off */
static const struct job jobs[] = {
	{ "floors", "floors", NULL, NULL },
	{ "markpair", "markpair", NULL, NULL },
	{ "objpair", "objpair", NULL, NULL },
	{ "scaling", "scaling", NULL, NULL },
	{ "purge", "purge", "guard", NULL },
	{ "purge", "purge", "mprotect", NULL },
	{ "fault", "fault", "guard", NULL },
	{ "fault", "fault", "mprotect", NULL },
	{ "purge", "purge", "uffd", NULL },
	{ "fault", "fault", "uffd", NULL },
	{ "purge-anon", "purge", "guard", "anon" },
	{ "purge-anon", "purge", "mprotect", "anon" },
	{ "fault-anon", "fault", "guard", "anon" },
	{ "fault-anon", "fault", "mprotect", "anon" },
	{ "memory", "memory", NULL, NULL },
	{ "cache", "cache", NULL, "vr-explicit" },
	{ "cache", "cache", NULL, "vr-lazy" },
	{ "cache", "cache", NULL, "heap-lru" },
	{ "cache", "cache", NULL, "canary" },
	{ "limit", "limit", NULL, "vr-default" },
	{ "limit", "limit", NULL, "vr-app-budget" },
	{ "limit", "limit", NULL, "canary" },
	{ "limit", "limit", NULL, "droppable" },
	{ "limit", "limit", NULL, "heap-lru" },
	{ "limit", "limit", NULL, "malloc" },
	{ "limit", "limit", NULL, "vr-spike" },
	{ "limit", "limit", NULL, "vr-mixed" },
	{ "limit", "limit", NULL, "canary-mixed" },
	{ "limit", "limit", NULL, "droppable-mixed" },
	{ "shared", "shared", NULL, NULL },
	{ "shared", "shared", "uffd", NULL },
	{ "shared", "shared", "guard", "no-uffd" },
	{ "wall", "wall", NULL, "hp-on" },
	{ "wall", "wall", NULL, "hp-off" },
};
/* clang-format on */
#define NJOBS (sizeof(jobs) / sizeof(jobs[0]))
static const char *const cache_styles[] = { "vr-explicit", "vr-lazy", "heap-lru", "canary" };

/* ---- collected results ---- */
static struct row *rows;
static size_t nrows;
struct point {
	char style[24];
	uint64_t op, resident;
	double sec;
	int event;
};
static struct point *points;
static size_t npoints;
static char **notes;
static size_t nnotes;
static int failures, skips;

static void *grow(void *p, size_t n, size_t sz)
{
	if ((n & (n - 1)) == 0) { /* powers of two: double */
		p = realloc(p, (n ? 2 * n : 1) * sz);
		if (!p)
			die("out of memory");
	}
	return p;
}

static const char *mode_name(void)
{
	return bopt.mode == MODE_SMOKE ? "smoke" : bopt.mode == MODE_QUICK ? "quick" : "full";
}

static const struct row *find(const char *scen, const char *name, const char *variant)
{
	for (size_t i = 0; i < nrows; i++)
		if (!strcmp(rows[i].scen, scen) && !strcmp(rows[i].name, name) &&
		    (!variant || !strcmp(rows[i].variant, variant)))
			return &rows[i];
	return NULL;
}

static double med(const char *scen, const char *name, const char *variant)
{
	const struct row *r = find(scen, name, variant);
	return r ? r->median : NAN;
}

static void print_row(const struct row *r)
{
	char p99[32];
	if (isnan(r->p99))
		snprintf(p99, sizeof(p99), "%12s", "-");
	else
		snprintf(p99, sizeof(p99), "%12.4g", r->p99);
	printf("  %-9s %-30s %-9s %12.4g %s %-9s n=%ld\n", r->scen, r->name, r->variant, r->median,
	       p99, r->unit, r->n);
	fflush(stdout);
}

/* ---- one line from a child ---- */
static void take_line(char *line)
{
	char *f[9];
	int nf = 0;
	for (char *p = line; nf < 9;) {
		f[nf++] = p;
		p = strchr(p, '\t');
		if (!p)
			break;
		*p++ = 0;
	}
	if (!strcmp(f[0], "ROW") && nf == 8) {
		rows = grow(rows, nrows, sizeof(*rows));
		struct row *r = &rows[nrows++];
		memset(r, 0, sizeof(*r));
		snprintf(r->scen, sizeof(r->scen), "%s", f[1]);
		snprintf(r->name, sizeof(r->name), "%s", f[2]);
		snprintf(r->variant, sizeof(r->variant), "%s", f[3]);
		r->median = strtod(f[4], NULL);
		r->p99 = strtod(f[5], NULL);
		snprintf(r->unit, sizeof(r->unit), "%s", f[6]);
		r->n = strtol(f[7], NULL, 10);
		print_row(r);
	} else if (!strcmp(f[0], "SER") && nf == 6) {
		points = grow(points, npoints, sizeof(*points));
		struct point *pt = &points[npoints++];
		snprintf(pt->style, sizeof(pt->style), "%s", f[1]);
		pt->op = strtoull(f[2], NULL, 10);
		pt->sec = strtod(f[3], NULL);
		pt->resident = strtoull(f[4], NULL, 10);
		pt->event = atoi(f[5]);
	} else if (!strcmp(f[0], "NOTE") && nf == 2) {
		notes = grow(notes, nnotes, sizeof(*notes));
		notes[nnotes++] = strdup(f[1]);
		printf("  note: %s\n", f[1]);
	} else if (*f[0]) {
		fprintf(stderr, "vrbench: unexpected line from a child: %s\n", f[0]);
	}
}

static void run_job(const struct job *j)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	uint64_t t0 = now_ns();
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		char fdbuf[16];
		int wfd = fcntl(pfd[1], F_DUPFD, 10); /* without O_CLOEXEC */
		if (wfd < 0)
			_exit(127);
		snprintf(fdbuf, sizeof(fdbuf), "%d", wfd);
		const char *argv[16];
		int n = 0;
		argv[n++] = "vrbench";
		argv[n++] = "--child";
		argv[n++] = j->child;
		argv[n++] = "--mode";
		argv[n++] = mode_name();
		argv[n++] = "--rows-fd";
		argv[n++] = fdbuf;
		if (j->backend) {
			argv[n++] = "--backend";
			argv[n++] = j->backend;
			setenv("VRANGE_TRAP", j->backend, 1);
		}
		if (j->style) {
			argv[n++] = "--style";
			argv[n++] = j->style;
		}
		argv[n] = NULL;
		execv("/proc/self/exe", (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? 2 * cap : 65536;
			buf = realloc(buf, cap);
			if (!buf)
				die("out of memory");
		}
		ssize_t got = read(pfd[0], buf + len, cap - len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
		/* hand over complete lines as they come */
		char *start = buf, *nl;
		buf[len] = 0;
		while ((nl = strchr(start, '\n'))) {
			*nl = 0;
			take_line(start);
			start = nl + 1;
		}
		len -= (size_t)(start - buf);
		memmove(buf, start, len);
	}
	free(buf);
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	double secs = (double)(now_ns() - t0) / 1e9;
	char what[96];
	snprintf(what, sizeof(what), "%s%s%s%s%s", j->child, j->backend ? " backend=" : "",
		 j->backend ? j->backend : "", j->style ? " style=" : "", j->style ? j->style : "");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		printf("  [%s: %.1f s]\n", what, secs);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		printf("  [%s: skipped]\n", what);
		skips++;
	} else {
		if (WIFSIGNALED(st))
			printf("  [%s: FAILED, killed by signal %d]\n", what, WTERMSIG(st));
		else
			printf("  [%s: FAILED, exit status %d]\n", what, WEXITSTATUS(st));
		failures++;
	}
	fflush(stdout);
}

/* ---- ratios and goals ---- */
struct ratio {
	char name[80];
	double value;
	char unit[8];
	const char *goal; /* NULL: for information */
	bool ok;
};
static struct ratio ratios[192];
static size_t nratios;

static void add_ratio(double v, const char *unit, const char *goal, int dir, double target,
		      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void add_ratio(double v, const char *unit, const char *goal, int dir, double target,
		      const char *fmt, ...)
{
	if (isnan(v) || nratios == sizeof(ratios) / sizeof(ratios[0]))
		return;
	struct ratio *r = &ratios[nratios++];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->name, sizeof(r->name), fmt, ap);
	va_end(ap);
	r->value = v;
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
	r->goal = goal;
	r->ok = goal ? (dir > 0 ? v >= target : v <= target) : true;
}

/* issue 17's goals for objects (scenario objpair) */
static void derive_objpair(void)
{
	const char *S = "objpair";
	double canary = med(S, "canary-pair", NULL), mutex2 = med(S, "mutex-2x-lock-unlock", NULL);
	double p3 = med(S, "obj-pair-1e3", NULL), p6 = med(S, "obj-pair-1e6", NULL);
	double p7 = med(S, "obj-pair-1e7", NULL), p6k = med(S, "obj-pair-1e6-64k", NULL);
	add_ratio(p3, "ns", NULL, 0, 0, "objects: pin+unpin pair, 10^3 x 256 B");
	add_ratio(p6, "ns", "<= 400", -1, 400, "objects: pin+unpin pair, 10^6 x 256 B");
	add_ratio(p6k, "ns", "<= 400", -1, 400, "objects: pin+unpin pair, 10^6 x 64 KiB");
	add_ratio(p7, "ns", NULL, 0, 0, "objects: pin+unpin pair, 10^7 x 256 B");
	add_ratio(canary / p6, "x", ">= 7", 1, 7, "objects: speedup over madvfree-canary, 10^6");
	add_ratio(p7 / p6, "x", "<= 1.5", -1, 1.5, "objects: pair 10^7 / pair 10^6 (256 B)");
	add_ratio(p6 / med(S, "handle-read-floor-1e6", NULL), "x", NULL, 0, 0,
		  "objects: pair 10^6 / reading a random handle (the floor)");
	add_ratio(p7 / med(S, "handle-read-floor-1e7", NULL), "x", NULL, 0, 0,
		  "objects: pair 10^7 / reading a random handle (the floor)");
	add_ratio(med(S, "obj-pair-1e6-hot", NULL) / mutex2, "x", "<= 3", -1, 3,
		  "objects: hot pair / two mutex lock+unlock");
	add_ratio(med(S, "obj-meta-bytes-1e6", NULL), "B", "<= 64", -1, 64,
		  "objects: metadata per object, 10^6 x 256 B");
	add_ratio(med(S, "obj-waste-small-mix", NULL), "%", "<= 12.5", -1, 12.5,
		  "objects: small-object waste over a size-class mix");
	add_ratio(med(S, "obj-2t-ratio", NULL), "x", ">= 1.8", 1, 1.8,
		  "objects: 2 threads / 1 thread, own objects, one ctx");
	add_ratio(med(S, "mutex-2t-ratio", NULL), "x", NULL, 0, 0,
		  "objects: the same for private mutexes (what the machine scales)");
	/* issue 23: the pair with the objects in 4 groups (S35, S23 per group) */
	double g6 = med(S, "obj-pair-1e6-grp", NULL), g7 = med(S, "obj-pair-1e7-grp", NULL);
	add_ratio(g6 / p6, "x", NULL, 0, 0, "objects: pair 10^6 in 4 groups / default group");
	add_ratio(g7 / p7, "x", NULL, 0, 0, "objects: pair 10^7 in 4 groups / default group");
	add_ratio(g7 / g6, "x", "<= 1.5", -1, 1.5, "objects: pair 10^7 / 10^6, 4 groups");
}

/* issue 23: purging many small adjacent objects (scenario purge) */
static void derive_objpurge(void)
{
	const char *backends[] = { "guard", "mprotect" };
	for (int b = 0; b < 2; b++) {
		double v = med("purge", "vr-purge-obj-4k", backends[b]);
		add_ratio(v, "Mobj/s", NULL, 0, 0, "s3 purge of adjacent 4 KiB objects, %s",
			  backends[b]);
		add_ratio(v / med("purge", "raw-purge-obj-4k-span", backends[b]), "x", NULL, 0, 0,
			  "s3 the same / raw trap+punch of 1 MiB spans, %s", backends[b]);
		add_ratio(v / med("purge", "raw-purge-obj-4k-each", backends[b]), "x", NULL, 0, 0,
			  "s3 the same / raw trap+punch per object, %s", backends[b]);
	}
}

/* issue 15's goals for shared volatility (scenario shared), per job: "-"
 * the library's defaults, "uffd" every region on userfaultfd, "guard"
 * userfaultfd refused by seccomp (shared regions: the guard protocol) */
static void derive_shared(void)
{
	const char *S = "shared", *variants[] = { "-", "uffd", "guard" };
	for (int v = 0; v < 3; v++) {
		const char *b = variants[v];
		bool uffd = !strcmp(b, "uffd");
		double m1 = med(S, "shared-purge-64k-m1", b), pf = med(S, "private-fault", b);
		add_ratio(med(S, "shared-pair", b) / med(S, "private-pair", b), "x", "<= 2", -1, 2,
			  "shared: intact pair, shared / private region, %s", b);
		add_ratio(m1 / med(S, "private-purge-64k", b), "x", NULL, 0, 0,
			  "shared: purge 64 KiB, 1 mapper / private region, %s", b);
		add_ratio(med(S, "shared-purge-64k-m2", b) / m1, "x", NULL, 0, 0,
			  "shared: purge 64 KiB, 2 mappers / 1 mapper, %s", b);
		add_ratio(med(S, "shared-purge-64k-m8", b) / m1, "x", uffd ? "<= 1.5" : NULL, -1,
			  1.5, "shared: purge 64 KiB, 8 mappers / 1 mapper, %s", b);
		add_ratio(med(S, "shared-purge-64k-m8-untouched", b) / m1, "x", NULL, 0, 0,
			  "shared: purge, 8 mappers that never read it / 1, %s", b);
		add_ratio(med(S, "raw-punch-64k-m8", b) / med(S, "raw-punch-64k-m1", b), "x", NULL,
			  0, 0, "shared: the floor: punch 64 KiB, 8 mappers / 1, %s", b);
		add_ratio(med(S, "shared-purge-64k-m8", b) / med(S, "raw-punch-64k-m8", b), "x",
			  NULL, 0, 0, "shared: purge / the floor, 8 mappers, %s", b);
		add_ratio(med(S, "shared-fault-self", b) / pf, "x", NULL, 0, 0,
			  "shared: fault round trip, own purge / private region, %s", b);
		add_ratio(med(S, "shared-fault-peer", b) / pf, "x", NULL, 0, 0,
			  "shared: fault in a 2nd process / private region, %s", b);
	}
}

/* issue 26's goals at the memory wall (scenario wall), per huge-page
 * variant, each row against the floors of the same child process */
static void derive_wall(void)
{
	const char *S = "wall", *variants[] = { "hp-on", "hp-off" },
		   *tags[] = { "1e3", "1e6", "1e7" };
	char nm[48];
	for (int v = 0; v < 2; v++) {
		const char *b = variants[v];
		double d4 = med(S, "dram-miss-4k", b), d2 = med(S, "dram-miss-2m", b);
		double mutex2 = med(S, "mutex-2x-lock-unlock", b);
		add_ratio(d4, "ns", NULL, 0, 0, "wall: floor: DRAM miss, 4 KiB pages, %s", b);
		add_ratio(d2, "ns", NULL, 0, 0, "wall: floor: DRAM miss, 2 MiB pages, %s", b);
		add_ratio(med(S, "cas", b), "ns", NULL, 0, 0, "wall: floor: CAS, %s", b);
		add_ratio(mutex2, "ns", NULL, 0, 0, "wall: floor: two mutex lock+unlock, %s", b);
		for (int k = 0; k < 2; k++) { /* objects, then ranges */
			const char *what = k ? "range unmark+mark" : "object pin+unpin";
			for (int i = 0; i < 3; i++) {
				snprintf(nm, sizeof(nm), k ? "vr-pair-%s" : "obj-pair-%s", tags[i]);
				double p = med(S, nm, b);
				bool six = i == 1;
				add_ratio(p, "ns", six ? (k ? "<= 1000" : "<= 400") : NULL, -1,
					  k ? 1000 : 400, "wall: %s, 10^%c, %s", what, tags[i][2],
					  b);
				add_ratio(p / d4, "x", NULL, 0, 0,
					  "wall: %s 10^%c / DRAM miss 4k, %s", what, tags[i][2], b);
				add_ratio(p / d2, "x", NULL, 0, 0,
					  "wall: %s 10^%c / DRAM miss 2m, %s", what, tags[i][2], b);
			}
			snprintf(nm, sizeof(nm), k ? "vr-pair-1e7" : "obj-pair-1e7");
			double p7 = med(S, nm, b);
			snprintf(nm, sizeof(nm), k ? "vr-pair-1e6" : "obj-pair-1e6");
			add_ratio(p7 / med(S, nm, b), "x", "<= 1.5", -1, 1.5,
				  "wall: %s 10^7 / 10^6, %s", what, b);
		}
		add_ratio(med(S, "obj-pair-1e3-hot", b) / mutex2, "x", "<= 5", -1, 5,
			  "wall: hot object pair / two mutex pairs, %s", b);
		add_ratio(med(S, "obj-pair-1e3-hot", b) / med(S, "cas", b), "x", NULL, 0, 0,
			  "wall: hot object pair / CAS, %s", b);
		/* the floor with an exact age stamp (s-floors.c), and the
		 * batch call that reads the clock once for 16 objects */
		double hf = med(S, "hot-pair-floor", b);
		add_ratio(hf, "ns", NULL, 0, 0, "wall: floor: ordered clock + 2 CAS, %s", b);
		add_ratio(hf / mutex2, "x", NULL, 0, 0,
			  "wall: floor: ordered clock + 2 CAS / two mutex pairs, %s", b);
		add_ratio(med(S, "obj-pair-1e3-hot", b) / hf, "x", NULL, 0, 0,
			  "wall: hot object pair / its floor (clock + 2 CAS), %s", b);
		add_ratio(med(S, "obj-pair-1e3-hot-many", b) / mutex2, "x", NULL, 0, 0,
			  "wall: hot pair, 16 unpinned per vr_obj_unpin_many / two mutex pairs, %s",
			  b);
		/* what 10^7 / 10^6 costs any handle API: a random handle read */
		double hr = med(S, "handle-read-floor-1e7", b) / med(S, "handle-read-floor-1e6", b);
		add_ratio(hr, "x", NULL, 0, 0, "wall: floor: handle read 10^7 / 10^6, %s", b);
		/* each pair's 10^7 / 10^6 over that floor's, from the same run:
		 * the share of the 10^6 working set the host's cache holds
		 * moves both (the floor's ratio ran 1.19-2.10 between runs) */
		add_ratio(med(S, "obj-pair-1e7", b) / med(S, "obj-pair-1e6", b) / hr, "x", NULL, 0,
			  0, "wall: object pair 10^7 / 10^6 over the handle read's, %s", b);
		add_ratio(med(S, "vr-pair-1e7", b) / med(S, "vr-pair-1e6", b) / hr, "x", NULL, 0, 0,
			  "wall: range pair 10^7 / 10^6 over the handle read's, %s", b);
		/* the range tree's level above the leaves (s-wall.c): a read
		 * in a buffer of its size at 10^6 and 10^7 ranges, alone (in a
		 * pair, the pair's own cold lines compete with it) */
		add_ratio(med(S, "index-level-read-1e6", b), "ns", NULL, 0, 0,
			  "wall: floor: a read in the tree's level above its leaves, 10^6 (0.57 "
			  "MB), %s",
			  b);
		add_ratio(med(S, "index-level-read-1e7", b), "ns", NULL, 0, 0,
			  "wall: floor: a read in the tree's level above its leaves, 10^7 (5.7 "
			  "MB), %s",
			  b);
		/* the range pair's memory floor (s-wall.c, bench_tree_floor):
		 * its chain of cold reads alone, at both sizes */
		double lr6 = med(S, "leaf-rec-floor-1e6", b), lr7 = med(S, "leaf-rec-floor-1e7", b);
		double tr6 = med(S, "tree-floor-1e6", b), tr7 = med(S, "tree-floor-1e7", b);
		add_ratio(lr7 / lr6, "x", NULL, 0, 0,
			  "wall: floor: range pair's leaf + record reads 10^7 / 10^6, %s", b);
		add_ratio(tr7 / tr6, "x", NULL, 0, 0,
			  "wall: floor: range pair's tree-shaped reads 10^7 / 10^6, %s", b);
		/* the pair minus its floor: the code, locks and clock, which
		 * should not grow with n */
		add_ratio(med(S, "vr-pair-1e6", b) - tr6, "ns", NULL, 0, 0,
			  "wall: range pair 10^6 minus its tree-shaped floor, %s", b);
		add_ratio(med(S, "vr-pair-1e7", b) - tr7, "ns", NULL, 0, 0,
			  "wall: range pair 10^7 minus its tree-shaped floor, %s", b);
		add_ratio(med(S, "obj-meta-bytes-1e6", b), "B", "<= 64", -1, 64,
			  "wall: metadata per 256-byte object, 10^6, %s", b);
		add_ratio(med(S, "vr-rss-per-range-1e6", b), "B", "<= 64", -1, 64,
			  "wall: metadata per range (anonymous RSS), 10^6, %s", b);
	}
	for (int i = 1; i < 3; i++) {
		snprintf(nm, sizeof(nm), "obj-pair-%s", tags[i]);
		add_ratio(med(S, nm, "hp-off") / med(S, nm, "hp-on"), "x", NULL, 0, 0,
			  "wall: object pair 10^%c, huge pages off / on", tags[i][2]);
		snprintf(nm, sizeof(nm), "vr-pair-%s", tags[i]);
		add_ratio(med(S, nm, "hp-off") / med(S, nm, "hp-on"), "x", NULL, 0, 0,
			  "wall: range pair 10^%c, huge pages off / on", tags[i][2]);
	}
}

static void derive(void)
{
	const char *tags[] = { "1e3", "1e4", "1e5", "1e6" };
	double canary = med("markpair", "canary-pair", NULL);
	double mutex2 = med("markpair", "mutex-2x-lock-unlock", NULL);
	char nm[48];
	for (size_t i = 0; i < 4; i++) {
		snprintf(nm, sizeof(nm), "vr-pair-%s", tags[i]);
		double v = med("markpair", nm, NULL);
		add_ratio(v, "ns", NULL, 0, 0, "s1 libvrange mark+unmark pair, 10^%c ranges",
			  tags[i][2]);
		add_ratio(canary / v, "x", ">= 10", 1, 10,
			  "s1 speedup over madvfree-canary, 10^%c ranges", tags[i][2]);
		add_ratio(v / mutex2, "x", NULL, 0, 0, "s1 pair / two mutex lock+unlock, 10^%c",
			  tags[i][2]);
	}
	derive_objpair();
	derive_objpurge();
	derive_shared();
	derive_wall();
	add_ratio(med("scaling", "vr-1ctx-ratio", NULL), "x", ">= 1.8", 1, 1.8,
		  "s2 2 threads / 1 thread, 2 regions of 1 ctx");
	add_ratio(med("scaling", "vr-1ctx-ratio", NULL) / med("scaling", "mutex-ratio", NULL), "x",
		  NULL, 0, 0, "s2 the same, relative to the machine (mutex floor)");
	add_ratio(med("scaling", "vr-1ctx-cpu-eff", NULL), "x", NULL, 0, 0,
		  "s2 pairs per CPU-second, 2 threads / 1 thread, 1 ctx");
	add_ratio(med("scaling", "vr-2ctx-ratio", NULL), "x", NULL, 0, 0,
		  "s2 2 threads / 1 thread, 1 region per ctx");
	add_ratio(med("scaling", "vr-ptr-2ctx-ratio", NULL), "x", NULL, 0, 0,
		  "s2 2 threads / 1 thread, pointer calls, 1 region per ctx");
	add_ratio(med("scaling", "vr-ptr-2ctx-cpu-eff", NULL), "x", NULL, 0, 0,
		  "s2 pairs per CPU-second, pointer calls, 2 threads / 1 thread");
	add_ratio(med("scaling", "mutex-ratio", NULL), "x", NULL, 0, 0,
		  "s2 2 threads / 1 thread, private mutexes (machine)");
	add_ratio(med("scaling", "canary-ratio", NULL), "x", NULL, 0, 0,
		  "s2 2 threads / 1 thread, madvfree-canary");
	const char *backends[] = { "guard", "mprotect", "uffd" };
	for (int b = 0; b < 3; b++) {
		add_ratio(med("purge", "vr-purge-64k-bw", backends[b]) /
				  med("purge", "raw-purge-64k-bw", backends[b]),
			  "x", ">= 0.8", 1, 0.8, "s3 purge bytes/s vs raw, 64 KiB ranges, %s",
			  backends[b]);
		add_ratio(med("purge", "vr-purge-2m-bw", backends[b]) /
				  med("purge", "raw-purge-2m-bw", backends[b]),
			  "x", ">= 0.8", 1, 0.8, "s3 purge bytes/s vs raw, 2 MiB ranges, %s",
			  backends[b]);
	}
	/* the userfaultfd backend against guard markers, in one run */
	add_ratio(med("purge", "vr-purge-64k-bw", "uffd") /
			  med("purge", "vr-purge-64k-bw", "guard"),
		  "x", NULL, 0, 0, "s3 purge bytes/s, 64 KiB ranges, uffd / guard");
	add_ratio(med("purge", "vr-purge-2m-bw", "uffd") / med("purge", "vr-purge-2m-bw", "guard"),
		  "x", NULL, 0, 0, "s3 purge bytes/s, 2 MiB ranges, uffd / guard");
	add_ratio(med("fault", "vr-fault", "uffd") / med("fault", "vr-fault", "guard"), "x", NULL,
		  0, 0, "s4 fault round trip, uffd / guard");
	for (int b = 0; b < 3; b++) {
		double vr = med("fault", "vr-fault", backends[b]);
		add_ratio(vr / med("fault", "raw-pure", backends[b]), "x", "<= 2", -1, 2,
			  "s4 fault round trip vs raw SIGSEGV+disarm, %s", backends[b]);
		add_ratio(vr / med("fault", "raw-refill", backends[b]), "x", NULL, 0, 0,
			  "s4 fault round trip vs raw punch+trap+refill, %s", backends[b]);
	}
	for (int b = 0; b < 2; b++) {
		add_ratio(med("purge-anon", "vr-purge-64k-bw", backends[b]) /
				  med("purge-anon", "raw-purge-64k-bw", backends[b]),
			  "x", ">= 0.8", 1, 0.8, "s7 anon purge bytes/s vs raw, 64 KiB, %s",
			  backends[b]);
		add_ratio(med("purge-anon", "vr-purge-2m-bw", backends[b]) /
				  med("purge-anon", "raw-purge-2m-bw", backends[b]),
			  "x", ">= 0.8", 1, 0.8, "s7 anon purge bytes/s vs raw, 2 MiB, %s",
			  backends[b]);
		double vr = med("fault-anon", "vr-fault", backends[b]);
		add_ratio(vr / med("fault-anon", "raw-pure", backends[b]), "x", "<= 2", -1, 2,
			  "s7 anon fault round trip vs raw trap+disarm, %s", backends[b]);
		add_ratio(vr / med("fault-anon", "raw-refill", backends[b]), "x", NULL, 0, 0,
			  "s7 anon fault round trip vs raw free+trap+refill, %s", backends[b]);
	}
	add_ratio(med("memory", "vr-heap-per-range", NULL), "B", NULL, 0, 0,
		  "s5 heap bytes per range at 10^6 ranges (small arenas)");
	add_ratio(med("memory", "vr-rss-per-range", NULL), "B", "<= 64", -1, 64,
		  "s5 VmRSS bytes per range at 10^6 ranges");
	double heap_ops = med("cache", "heap-lru-ops", NULL);
	for (size_t s = 0; s < 4; s++) {
		snprintf(nm, sizeof(nm), "%s-ops", cache_styles[s]);
		add_ratio(med("cache", nm, NULL) / heap_ops, "x", NULL, 0, 0,
			  "s6 cache ops/s of %s / heap-lru", cache_styles[s]);
	}
}

static void print_cache_table(void)
{
	if (!find("cache", "budget-MiB", NULL))
		return;
	printf("\ncache workload (objects %.0f MiB, budget %.0f MiB):\n",
	       med("cache", "objects-MiB", NULL), med("cache", "budget-MiB", NULL));
	printf("  %-12s %6s %7s %6s %8s %8s %8s %8s %8s %9s %9s\n", "style", "hit %", "regens",
	       "cold", "kops/s", "hit p50", "hit p99", "miss p50", "miss p99", "res mean",
	       "res peak");
	for (size_t s = 0; s < 4; s++) {
		char nm[48];
		const char *st = cache_styles[s];
#define V(suffix) (snprintf(nm, sizeof(nm), "%s-%s", st, suffix), med("cache", nm, NULL))
		snprintf(nm, sizeof(nm), "%s-hit-latency", st);
		const struct row *hl = find("cache", nm, NULL);
		snprintf(nm, sizeof(nm), "%s-miss-latency", st);
		const struct row *ml = find("cache", nm, NULL);
		if (!hl || !ml)
			continue;
		printf("  %-12s %6.1f %7.0f %6.0f %8.1f %8.2f %8.2f %8.1f %8.1f %7.1f M %7.1f M\n",
		       st, V("hit-rate"), V("regens"), V("cold"), V("ops"), hl->median, hl->p99,
		       ml->median, ml->p99, V("resident-mean"), V("resident-peak"));
#undef V
	}
}

/* ---- machine ---- */
static char cpu_model[128] = "unknown", kernel[128] = "unknown";
static double load_start[3], load_end[3];

static void machine_facts(void)
{
	struct utsname u;
	if (uname(&u) == 0)
		snprintf(kernel, sizeof(kernel), "%s", u.release);
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[256];
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');
			if (p) {
				p++;
				while (*p == ' ')
					p++;
				p[strcspn(p, "\n")] = 0;
				snprintf(cpu_model, sizeof(cpu_model), "%s", p);
			}
			break;
		}
	}
	if (f)
		fclose(f);
}

static void read_load(double l[3])
{
	FILE *f = fopen("/proc/loadavg", "re");
	if (!f || fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
		l[0] = l[1] = l[2] = NAN;
	if (f)
		fclose(f);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

static int write_json(const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f) {
		fprintf(stderr, "vrbench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f,
		"{\n  \"mode\": \"%s\",\n  \"machine\": {\"nproc\": %ld, \"kernel\": ", mode_name(),
		sysconf(_SC_NPROCESSORS_ONLN));
	json_str(f, kernel);
	fprintf(f, ", \"cpu\": ");
	json_str(f, cpu_model);
	fprintf(f, ", \"page_size\": %zu, \"loadavg_start\": ", page_size);
	json_num(f, load_start[0]);
	fprintf(f, ", \"loadavg_end\": ");
	json_num(f, load_end[0]);
	fprintf(f, "},\n  \"failures\": %d,\n  \"rows\": [\n", failures);
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		fprintf(f, "    {\"scenario\": ");
		json_str(f, r->scen);
		fprintf(f, ", \"name\": ");
		json_str(f, r->name);
		fprintf(f, ", \"backend\": ");
		json_str(f, r->variant);
		fprintf(f, ", \"median\": ");
		json_num(f, r->median);
		fprintf(f, ", \"p99\": ");
		json_num(f, r->p99);
		fprintf(f, ", \"unit\": ");
		json_str(f, r->unit);
		fprintf(f, ", \"n\": %ld}%s\n", r->n, i + 1 < nrows ? "," : "");
	}
	fprintf(f, "  ],\n  \"ratios\": [\n");
	for (size_t i = 0; i < nratios; i++) {
		const struct ratio *r = &ratios[i];
		fprintf(f, "    {\"name\": ");
		json_str(f, r->name);
		fprintf(f, ", \"value\": ");
		json_num(f, r->value);
		fprintf(f, ", \"unit\": ");
		json_str(f, r->unit);
		fprintf(f, ", \"goal\": ");
		if (r->goal)
			json_str(f, r->goal);
		else
			fputs("null", f);
		fprintf(f, ", \"met\": %s}%s\n", r->goal ? (r->ok ? "true" : "false") : "null",
			i + 1 < nratios ? "," : "");
	}
	fprintf(f, "  ],\n  \"notes\": [\n");
	for (size_t i = 0; i < nnotes; i++) {
		fprintf(f, "    ");
		json_str(f, notes[i]);
		fprintf(f, "%s\n", i + 1 < nnotes ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

static int write_plot_data(const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f) {
		fprintf(stderr, "vrbench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	double ymax = 0;
	fprintf(f, "# vrbench cache workload (%s mode): resident bytes over time\n", mode_name());
	fprintf(f, "# one block per style (gnuplot index 0..3), then the pressure events "
		   "(index 4),\n# the budget (index 5), and a zoom on the first event "
		   "(index 6..10)\n");
	fprintf(f, "# columns: op seconds resident_MiB event(1 = just after a CRITICAL "
		   "pressure event)\n");
	for (size_t s = 0; s < 4; s++) {
		fprintf(f, "# style %s\n", cache_styles[s]);
		for (size_t i = 0; i < npoints; i++) {
			const struct point *p = &points[i];
			if (strcmp(p->style, cache_styles[s]))
				continue;
			double mib = (double)p->resident / MiB;
			if (mib > ymax)
				ymax = mib;
			fprintf(f, "%llu %.6f %.3f %d\n", (unsigned long long)p->op, p->sec, mib,
				p->event);
		}
		fprintf(f, "\n\n");
	}
	fprintf(f, "# pressure events (op, from 0 to the top of the plot)\n");
	bool any = false;
	for (size_t i = 0; i < npoints; i++) {
		const struct point *p = &points[i];
		if (!p->event || strcmp(p->style, cache_styles[0]))
			continue;
		fprintf(f, "%llu 0\n%llu %.3f\n\n", (unsigned long long)p->op,
			(unsigned long long)p->op, ymax * 1.05);
		any = true;
	}
	if (!any)
		fprintf(f, "0 0\n");
	/* the budget of the budgeted styles, as a horizontal line */
	uint64_t last = 0;
	for (size_t i = 0; i < npoints; i++)
		if (points[i].op > last)
			last = points[i].op;
	double budget = med("cache", "budget-MiB", NULL);
	fprintf(f, "\n\n# budget (MiB) of vr-explicit, vr-lazy and heap-lru (index 5)\n");
	if (isnan(budget))
		budget = 0;
	fprintf(f, "0 %.3f\n%llu %.3f\n", budget, (unsigned long long)last, budget);

	/* the zoom on the first pressure event: the same series cut to
	 * [ev - last/100, ev + last/50] (index 6..9), the budget over that
	 * window (index 10), so that the plot needs no clipping */
	uint64_t ev = 0;
	for (size_t i = 0; i < npoints && !ev; i++)
		if (points[i].event)
			ev = points[i].op;
	uint64_t lo = ev > last / 100 ? ev - last / 100 : 0, hi = ev + last / 50;
	for (size_t s = 0; s < 4; s++) {
		fprintf(f,
			"\n\n# zoom on the first pressure event (op %llu): style %s (index %zu)\n",
			(unsigned long long)ev, cache_styles[s], 6 + s);
		bool any_pt = false;
		for (size_t i = 0; i < npoints; i++) {
			const struct point *p = &points[i];
			if (strcmp(p->style, cache_styles[s]) || p->op < lo || p->op > hi)
				continue;
			fprintf(f, "%llu %.6f %.3f %d\n", (unsigned long long)p->op, p->sec,
				(double)p->resident / MiB, p->event);
			any_pt = true;
		}
		if (!any_pt)
			fprintf(f, "%llu 0 0 0\n", (unsigned long long)lo);
	}
	fprintf(f, "\n\n# zoom: budget (index 10)\n%llu %.3f\n%llu %.3f\n", (unsigned long long)lo,
		budget, (unsigned long long)hi, budget);
	return fclose(f) == 0 ? 0 : -1;
}

static void summary(void)
{
	printf("SUMMARY vrbench mode=%s", mode_name());
	struct {
		const char *key, *scen, *name, *variant;
	} keys[] = {
		{ "pair_1e3_ns", "markpair", "vr-pair-1e3", NULL },
		{ "pair_1e6_ns", "markpair", "vr-pair-1e6", NULL },
		{ "canary_pair_ns", "markpair", "canary-pair", NULL },
		{ "mutex2_ns", "markpair", "mutex-2x-lock-unlock", NULL },
		{ "scaling_2t", "scaling", "vr-1ctx-ratio", NULL },
		{ "bytes_per_range", "memory", "vr-rss-per-range", NULL },
		{ "fault_guard_us", "fault", "vr-fault", "guard" },
		{ "fault_raw_guard_us", "fault", "raw-pure", "guard" },
		{ "fault_mprotect_us", "fault", "vr-fault", "mprotect" },
		{ "fault_raw_mprotect_us", "fault", "raw-pure", "mprotect" },
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		double v = med(keys[i].scen, keys[i].name, keys[i].variant);
		if (!isnan(v))
			printf(" %s=%.4g", keys[i].key, v);
	}
	const char *backends[] = { "guard", "mprotect" };
	for (int b = 0; b < 2; b++) {
		double v64 = med("purge", "vr-purge-64k-bw", backends[b]) /
			     med("purge", "raw-purge-64k-bw", backends[b]);
		double v2m = med("purge", "vr-purge-2m-bw", backends[b]) /
			     med("purge", "raw-purge-2m-bw", backends[b]);
		if (!isnan(v64))
			printf(" purge64k_ratio_%s=%.3g purge2m_ratio_%s=%.3g", backends[b], v64,
			       backends[b], v2m);
	}
	int met = 0, missed = 0;
	for (size_t i = 0; i < nratios; i++)
		if (ratios[i].goal)
			ratios[i].ok ? met++ : missed++;
	printf(" goals_met=%d goals_missed=%d failures=%d\n", met, missed, failures);
}

static bool selected(const char *only, const char *scen)
{
	if (!only)
		return true;
	size_t l = strlen(scen);
	for (const char *p = only; *p;) {
		size_t n = strcspn(p, ",");
		if (n == l && !strncmp(p, scen, l))
			return true;
		p += n;
		if (*p)
			p++;
	}
	return false;
}

static int child_main(const char *name, const char *style)
{
	if (!strcmp(name, "floors"))
		return run_floors();
	if (!strcmp(name, "markpair"))
		return run_markpair();
	if (!strcmp(name, "objpair"))
		return run_objpair();
	if (!strcmp(name, "scaling"))
		return run_scaling();
	if (!strcmp(name, "purge"))
		return run_purge(style);
	if (!strcmp(name, "fault"))
		return run_fault(style);
	if (!strcmp(name, "memory"))
		return run_memory();
	if (!strcmp(name, "cache"))
		return run_cache(style);
	if (!strcmp(name, "limit"))
		return run_limit(style);
	if (!strcmp(name, "shared"))
		return run_shared(style);
	if (!strcmp(name, "wall"))
		return run_wall(style);
	die("unknown child %s", name);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: vrbench [--quick | --smoke] [--only LIST] [--json FILE] "
		   "[--plot-data FILE] [--list]\n"
		   "       vrbench --child NAME [--mode smoke|quick|full] [--backend B] "
		   "[--style S]\n");
}

int main(int argc, char **argv)
{
	const char *only = NULL, *json = NULL, *plot = NULL, *child = NULL, *style = NULL;
	bool quick = false, smoke = false;
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(opt) (!strcmp(a, opt) && (v ? (i++, true) : (usage(stderr), exit(2), false)))
		if (!strcmp(a, "--quick"))
			quick = true;
		else if (!strcmp(a, "--smoke"))
			smoke = true;
		else if (!strcmp(a, "--list")) {
			for (size_t j = 0; j < NJOBS; j++)
				if (j == 0 || strcmp(jobs[j].scen, jobs[j - 1].scen))
					printf("%s\n", jobs[j].scen);
			return 0;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (ARG("--only"))
			only = v;
		else if (ARG("--json"))
			json = v;
		else if (ARG("--plot-data"))
			plot = v;
		else if (ARG("--child"))
			child = v;
		else if (ARG("--backend"))
			bopt.backend = v;
		else if (ARG("--style"))
			style = v;
		else if (ARG("--rows-fd"))
			bopt.rows_fd = atoi(v);
		else if (ARG("--mode"))
			smoke = !strcmp(v, "smoke"), quick = !strcmp(v, "quick");
		else {
			usage(stderr);
			return 2;
		}
#undef ARG
	}
	bopt.mode = smoke ? MODE_SMOKE : quick ? MODE_QUICK : MODE_FULL;
	if (child)
		return child_main(child, style);

	setvbuf(stdout, NULL, _IOLBF, 0);
	machine_facts();
	read_load(load_start);
	printf("vrbench: %s mode; %ld CPUs, kernel %s, %s, loadavg %.2f\n", mode_name(),
	       sysconf(_SC_NPROCESSORS_ONLN), kernel, cpu_model, load_start[0]);
	printf("  %-9s %-30s %-9s %12s %12s %-9s\n", "scenario", "measurement", "backend", "median",
	       "p99", "unit");
	int ran = 0;
	for (size_t j = 0; j < NJOBS; j++) {
		if (!selected(only, jobs[j].scen))
			continue;
		run_job(&jobs[j]);
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "vrbench: nothing selected by --only %s\n", only ? only : "");
		return 2;
	}
	read_load(load_end);
	derive();
	print_cache_table();
	if (nratios) {
		printf("\nratios (all measured in this run):\n");
		for (size_t i = 0; i < nratios; i++) {
			const struct ratio *r = &ratios[i];
			printf("  %-58s %10.3g %-2s %-7s %s\n", r->name, r->value, r->unit,
			       r->goal ? r->goal : "", r->goal ? (r->ok ? "met" : "MISSED") : "");
		}
	}
	if (skips)
		printf("\n%d job(s) skipped\n", skips);
	int rc = failures ? 1 : 0;
	if (json && write_json(json) < 0)
		rc = 1;
	if (plot && write_plot_data(plot) < 0)
		rc = 1;
	summary();
	if (!rc && skips == ran)
		rc = 77;
	return rc;
}
