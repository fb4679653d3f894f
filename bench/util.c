/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* util.c - samples, rows, Zipf, memory facts for vrbench */
#include "bench.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct bench_opts bopt = { .mode = MODE_FULL, .rows_fd = -1 };
size_t page_size;

/* ---- Zipf ---- */
int zipf_init(struct zipf *z, size_t n, double s)
{
	z->cdf = malloc(n * sizeof(double));
	if (!z->cdf)
		return -ENOMEM;
	z->n = n;
	double sum = 0;
	for (size_t i = 0; i < n; i++) {
		sum += 1.0 / pow((double)(i + 1), s);
		z->cdf[i] = sum;
	}
	for (size_t i = 0; i < n; i++)
		z->cdf[i] /= sum;
	return 0;
}

size_t zipf_next(const struct zipf *z, uint64_t *rng)
{
	double u = rng_unit(rng);
	size_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void zipf_fini(struct zipf *z)
{
	free(z->cdf);
	z->cdf = NULL;
}

/* ---- samples ---- */
void samples_add(struct samples *s, double v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->v = realloc(s->v, s->cap * sizeof(double));
		if (!s->v)
			die("out of memory");
	}
	s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double samples_pct(struct samples *s, double pct)
{
	if (!s->n)
		return NAN;
	qsort(s->v, s->n, sizeof(double), cmp_double);
	/* nearest rank */
	size_t k = (size_t)ceil(pct / 100.0 * (double)s->n);
	if (k < 1)
		k = 1;
	if (k > s->n)
		k = s->n;
	return s->v[k - 1];
}

double samples_sum(const struct samples *s)
{
	double t = 0;
	for (size_t i = 0; i < s->n; i++)
		t += s->v[i];
	return t;
}

void samples_free(struct samples *s)
{
	free(s->v);
	*s = (struct samples){ 0 };
}

/* ---- output to the parent ---- */
static void out_line(const char *line)
{
	if (bopt.rows_fd < 0) {
		fputs(line, stdout);
		fflush(stdout);
		return;
	}
	size_t len = strlen(line), done = 0;
	while (done < len) {
		ssize_t w = write(bopt.rows_fd, line + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		done += (size_t)w;
	}
}

void emit_row(const char *scen, const char *name, double median, double p99, const char *unit,
	      long n)
{
	char buf[256];
	if (bopt.rows_fd < 0)
		snprintf(buf, sizeof(buf),
			 "%-10s %-30s %-9s median %12.4g  p99 %12.4g %-8s (n=%ld)\n", scen, name,
			 bopt.variant ? bopt.variant : bopt.backend ? bopt.backend : "-", median, p99, unit, n);
	else
		snprintf(buf, sizeof(buf), "ROW\t%s\t%s\t%s\t%.17g\t%.17g\t%s\t%ld\n", scen, name,
			 bopt.variant ? bopt.variant : bopt.backend ? bopt.backend : "-", median, p99, unit, n);
	out_line(buf);
}

void emit_samples(const char *scen, const char *name, struct samples *s, const char *unit)
{
	double med = samples_pct(s, 50), p99 = samples_pct(s, 99);
	emit_row(scen, name, med, p99, unit, (long)s->n);
}

void emit_series(const char *style, uint64_t op, double seconds, uint64_t resident, int event)
{
	char buf[160];
	snprintf(buf, sizeof(buf), "SER\t%s\t%llu\t%.6f\t%llu\t%d\n", style, (unsigned long long)op,
		 seconds, (unsigned long long)resident, event);
	if (bopt.rows_fd >= 0)
		out_line(buf);
}

void emit_note(const char *fmt, ...)
{
	char msg[400], buf[420];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	snprintf(buf, sizeof(buf), bopt.rows_fd < 0 ? "note: %s\n" : "NOTE\t%s\n", msg);
	out_line(buf);
}

void die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "vrbench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---- memory facts ---- */
static uint64_t proc_field_kib(const char *path, const char *field)
{
	FILE *f = fopen(path, "re");
	char line[256];
	size_t fl = strlen(field);
	uint64_t v = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
			v = strtoull(line + fl + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

uint64_t proc_status_kib(const char *field)
{
	return proc_field_kib("/proc/self/status", field);
}

uint64_t smaps_rollup_kib(const char *field)
{
	return proc_field_kib("/proc/self/smaps_rollup", field);
}

uint64_t statm_resident_bytes(void)
{
	char buf[128];
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long long size = 0, res = 0;
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f))
		sscanf(buf, "%llu %llu", &size, &res);
	fclose(f);
	return res * page_size;
}

size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

void populate(void *p, size_t len)
{
	if (madvise(p, len, MADV_POPULATE_WRITE) == 0)
		return;
	for (size_t o = 0; o < len; o += page_size)
		((volatile char *)p)[o] = 1;
}

void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap(%zu): %s", len, strerror(errno));
	return p;
}

void *map_huge(size_t len, bool huge)
{
	const size_t h = 2 * MiB;
	len = (len + h - 1) & ~(h - 1);
	char *m = map_anon(len + h);
	char *a = (char *)(((uintptr_t)m + h - 1) & ~(uintptr_t)(h - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	munmap(a + len, (size_t)(m + h - a));
	if (madvise(a, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) < 0)
		die("madvise: %s", strerror(errno));
	return a;
}

void unmap_huge(void *p, size_t len)
{
	munmap(p, (len + 2 * MiB - 1) & ~(2 * MiB - 1));
}

/* the raw floor of the uffd backend: [p, p + len) registered in missing
 * mode with the SIGBUS feature (unprivileged: UFFD_USER_MODE_ONLY); the
 * userfaultfd, or -1 where the system refuses it */
int uffd_register(void *p, size_t len)
{
#ifdef SYS_userfaultfd
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | 1 /* USER_MODE_ONLY */);
	if (fd < 0)
		return -1;
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_SIGBUS };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)p, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	if (ioctl(fd, UFFDIO_API, &api) < 0 || ioctl(fd, UFFDIO_REGISTER, &reg) < 0) {
		close(fd);
		return -1;
	}
	return fd;
#else
	(void)p;
	(void)len;
	return -1;
#endif
}
