/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * s-floors.c - the physical floors, measured alone: uncontended mutex
 * lock+unlock and CAS, a trivial system call, fallocate(PUNCH_HOLE) of
 * populated memfd pages, an mprotect NONE+RW pair and a guard-marker
 * install+remove pair on 64 KiB and 2 MiB.  This child never creates a
 * libvrange context.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SCEN "floors"

/* also used by s-wall.c, which reports under its own scenario name */
void bench_floor_mutex(const char *scen)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	struct samples s = { 0 };
	size_t nsamp = BY_MODE(200, 1000, 5000), batch = 1000;
	for (size_t i = 0; i < nsamp; i++) {
		uint64_t t0 = now_ns();
		for (size_t j = 0; j < batch; j++) {
			pthread_mutex_lock(&m);
			__asm__ volatile("" ::: "memory");
			pthread_mutex_unlock(&m);
		}
		samples_add(&s, (double)(now_ns() - t0) / (double)batch);
	}
	emit_samples(scen, "mutex-lock-unlock", &s, "ns");
	samples_free(&s);
}

void bench_floor_cas(const char *scen)
{
	uint64_t word = 0;
	struct samples s = { 0 };
	size_t nsamp = BY_MODE(200, 1000, 5000), batch = 1000;
	for (size_t i = 0; i < nsamp; i++) {
		uint64_t t0 = now_ns();
		for (size_t j = 0; j < batch; j++) {
			uint64_t e = j;
			__atomic_compare_exchange_n(&word, &e, j + 1, false, __ATOMIC_ACQ_REL,
						    __ATOMIC_RELAXED);
		}
		samples_add(&s, (double)(now_ns() - t0) / (double)batch);
	}
	CHECK(word == batch);
	emit_samples(scen, "cas", &s, "ns");
	samples_free(&s);
}

/* the floor of an intact pin+unpin pair that keeps an exact LRU order
 * (src/base/age.c): one ordered clock read (the age stamp, vDSO) and one
 * compare-and-swap each for the pin and the unpin; and the clock alone */
void bench_floor_stamp(const char *scen)
{
	uint64_t word = 0, sink = 0;
	struct samples s = { 0 }, c = { 0 };
	size_t nsamp = BY_MODE(200, 1000, 5000), batch = 1000;
	for (size_t i = 0; i < nsamp; i++) {
		uint64_t t0 = now_ns();
		for (size_t j = 0; j < batch; j++) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			sink += (uint64_t)ts.tv_nsec;
		}
		uint64_t t1 = now_ns();
		for (size_t j = 0; j < batch; j++) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t e = word;
			__atomic_compare_exchange_n(&word, &e, e + 1, false, __ATOMIC_ACQ_REL,
						    __ATOMIC_RELAXED);
			e = word;
			__atomic_compare_exchange_n(&word, &e, e + (uint64_t)ts.tv_nsec, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		}
		samples_add(&c, (double)(t1 - t0) / (double)batch);
		samples_add(&s, (double)(now_ns() - t1) / (double)batch);
	}
	CHECK(sink != 1 && word != 0);
	emit_samples(scen, "clock-monotonic", &c, "ns");
	emit_samples(scen, "hot-pair-floor", &s, "ns");
	samples_free(&c);
	samples_free(&s);
}

static void bench_syscall(void)
{
	struct samples s = { 0 };
	size_t nsamp = BY_MODE(50, 300, 1000), batch = 100;
	for (size_t i = 0; i < nsamp; i++) {
		uint64_t t0 = now_ns();
		for (size_t j = 0; j < batch; j++)
			syscall(SYS_getppid);
		samples_add(&s, (double)(now_ns() - t0) / (double)batch);
	}
	emit_samples(SCEN, "syscall-getppid", &s, "ns");
	samples_free(&s);
}

struct shm {
	int fd;
	char *p;
	size_t len;
};

static struct shm shm_new(size_t len)
{
	struct shm m = { .len = len };
	m.fd = memfd_create("vrbench-floor", MFD_CLOEXEC);
	CHECK(m.fd >= 0);
	CHECK(ftruncate(m.fd, (off_t)len) == 0);
	m.p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	CHECK(m.p != MAP_FAILED);
	return m;
}

static void shm_free(struct shm *m)
{
	munmap(m->p, m->len);
	close(m->fd);
}

/* punch alone: populated pages, one fallocate per range */
static void bench_punch(size_t rlen, const char *name, const char *bwname)
{
	size_t total = BY_MODE(16 * MiB, 128 * MiB, 512 * MiB), reps = BY_MODE(1, 2, 3);
	struct samples s = { 0 };
	double bytes = 0, ns = 0;
	for (size_t rep = 0; rep < reps; rep++) {
		struct shm m = shm_new(total);
		populate(m.p, total);
		for (size_t off = 0; off < total; off += rlen) {
			uint64_t t0 = now_ns();
			if (fallocate(m.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
				      (off_t)rlen) < 0)
				die("fallocate: %s", strerror(errno));
			uint64_t dt = now_ns() - t0;
			samples_add(&s, (double)dt / 1000.0);
			ns += (double)dt;
			bytes += (double)rlen;
		}
		shm_free(&m);
	}
	emit_samples(SCEN, name, &s, "us/range");
	emit_row(SCEN, bwname, bytes / ns, NAN, "GB/s", (long)s.n);
	samples_free(&s);
}

/* a protection pair (NONE then RW) or a guard pair (install then remove)
 * on a populated range of a shared memfd mapping */
static void bench_pair(size_t rlen, bool guard, const char *name)
{
	size_t nranges = 16, nsamp = BY_MODE(100, 1000, 5000);
	size_t stride = rlen + page_size;
	struct shm m = shm_new(nranges * stride);
	for (size_t i = 0; i < nranges; i++)
		populate(m.p + i * stride, rlen);
	struct samples s = { 0 };
	for (size_t i = 0; i < nsamp; i++) {
		char *p = m.p + (i % nranges) * stride;
		populate(p, rlen); /* a guard install zaps the page-table entries */
		uint64_t t0 = now_ns();
		int a, b;
		if (guard) {
			a = madvise(p, rlen, MADV_GUARD_INSTALL);
			b = madvise(p, rlen, MADV_GUARD_REMOVE);
		} else {
			a = mprotect(p, rlen, PROT_NONE);
			b = mprotect(p, rlen, PROT_READ | PROT_WRITE);
		}
		uint64_t dt = now_ns() - t0;
		if (a < 0 || b < 0) {
			if (guard && errno == EINVAL) {
				emit_note("guard markers not supported here: %s skipped", name);
				break;
			}
			die("%s: %s", name, strerror(errno));
		}
		samples_add(&s, (double)dt / 1000.0);
	}
	if (s.n)
		emit_samples(SCEN, name, &s, "us");
	samples_free(&s);
	shm_free(&m);
}

int run_floors(void)
{
	bench_floor_mutex(SCEN);
	bench_floor_cas(SCEN);
	bench_floor_stamp(SCEN);
	bench_syscall();
	bench_punch(64 * KiB, "punch-64k", "punch-64k-bw");
	bench_punch(2 * MiB, "punch-2m", "punch-2m-bw");
	bench_pair(64 * KiB, false, "mprotect-pair-64k");
	bench_pair(2 * MiB, false, "mprotect-pair-2m");
	bench_pair(64 * KiB, true, "guard-pair-64k");
	bench_pair(2 * MiB, true, "guard-pair-2m");
	return 0;
}
