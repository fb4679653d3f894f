/*
 * fuzz-api.c - libFuzzer target: the public API against tests/vrmodel.h
 *
 * The input is a program of small operations on up to 4 regions of up to
 * 64 pages (sizes not always page multiples), so adjacency, coalescing and
 * partial pages happen all the time.  After every operation the return
 * value, every VR_STAT_* gauge and counter, and (where the bytes can be
 * read without trapping) the memory content must equal the model's.
 * Operations: mark, unmark (+ content check of the interval), status,
 * purge(n), pressure, limit, write, read, touch a discarded page expecting
 * the fault handler, destroy/recreate a region.  Regions are memfds, or
 * (bit 0x80 of the creating byte) anonymous memory: VR_REGION_ANON, or a
 * span of the program's own mapping adopted with vr_region_adopt, whose
 * memory is checked after destroy (mapped, discarded pages reading 0).
 *
 * Built three ways: with -fsanitize=fuzzer (meson -Dfuzz=true), and as a
 * plain program that replays files given on the command line (the corpus
 * replay test in the unit suite).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vrange.h>

#include "../vrmodel.h"

#define NREG VM_MAX_REGIONS
#define MAXPAGES 64

static size_t P;
static struct vr_ctx *ctx;
static struct vr_region *R[NREG];
static struct vm M;
static uint64_t wgen, model_faults;
static uint8_t *adopted[NREG]; /* the program's mapping of an adopted region */

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in, unsigned bytes)
{
	unsigned v = 0;
	for (unsigned i = 0; i < bytes; i++) {
		v <<= 8;
		if (in->n) {
			v |= *in->p++;
			in->n--;
		}
	}
	return v;
}

static void die(const char *what, long long got, long long want)
{
	fprintf(stderr, "MODEL MISMATCH: %s: library %lld, model %lld\n", what, got, want);
	abort();
}
#define EQ(what, got, want)                                                                        \
	do {                                                                                       \
		long long g_ = (long long)(got), w_ = (long long)(want);                           \
		if (g_ != w_)                                                                      \
			die(what, g_, w_);                                                         \
	} while (0)

static void check_stats(void)
{
	EQ("ranges", vr_ctx_stat(ctx, VR_STAT_RANGES), M.nrg);
	EQ("volatile bytes", vr_ctx_stat(ctx, VR_STAT_VOLATILE_BYTES), vm_bytes(&M, false));
	EQ("purged bytes", vr_ctx_stat(ctx, VR_STAT_PURGED_BYTES), vm_bytes(&M, true));
	EQ("reclaimed", vr_ctx_stat(ctx, VR_STAT_RECLAIMED_BYTES), M.reclaimed);
	EQ("purges", vr_ctx_stat(ctx, VR_STAT_PURGES), M.purges);
	EQ("pressure events", vr_ctx_stat(ctx, VR_STAT_PRESSURE_EVENTS), M.events);
}

/* an interval [a, b) of region i, 1 byte to the whole region */
static void interval(struct in *in, int i, size_t *a, size_t *b)
{
	size_t size = M.reg[i].size;
	unsigned mode = take(in, 1);
	size_t x, y;
	if (mode & 1) { /* page-aligned, the common case */
		x = take(in, 1) % M.reg[i].pages * P;
		y = x + (take(in, 1) % 8 + 1) * P;
	} else {
		x = take(in, 2) % (M.reg[i].pages * 2) * (P / 2) + (mode >> 4) * 37 % 97;
		y = x + take(in, 2) % (4 * P) + 1;
	}
	if (x >= size)
		x = size - 1;
	if (y > size)
		y = size;
	*a = x;
	*b = y;
}

static bool touches_discarded(int i, size_t a, size_t b)
{
	for (size_t p = a / P; p * P < b; p++)
		if (M.reg[i].discarded[p])
			return true;
	return false;
}

static void check_content(int i, size_t a, size_t b, const char *what)
{
	const uint8_t *base = vr_region_base(R[i]);
	for (size_t k = a; k < b; k++)
		if (base[k] != M.reg[i].expect[k]) {
			fprintf(stderr, "MODEL MISMATCH: %s: region %d byte %zu = %u, model %u\n",
				what, i, k, base[k], M.reg[i].expect[k]);
			abort();
		}
}

/* the fault handler for touch operations: record, then unmark */
/* written by the fault handler: volatile, or the compiler may keep them in registers */
static volatile int fault_calls;
static volatile size_t fault_off, fault_len;
static int on_fault(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	(void)addr;
	(void)arg;
	fault_calls++;
	fault_off = off;
	fault_len = len;
	return vr_unmark(r, off, len) == VR_PURGED ? VR_FAULT_RETRY : VR_FAULT_SIGBUS;
}

static void region_create(int i, unsigned sel)
{
	size_t pages = sel % MAXPAGES + 1;
	size_t size = pages * P - ((sel & 0x40) ? (sel * 13) % (P - 1) : 0);
	if ((sel & 0xe0) == 0xa0) {
		size = pages * P;
		adopted[i] = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				  -1, 0);
		if (adopted[i] == MAP_FAILED || vr_region_adopt(ctx, adopted[i], size, 0, &R[i]))
			abort();
	} else if (vr_region_new(ctx, "fuzz", size, (sel & 0x80) ? VR_REGION_ANON : 0, &R[i]) != 0)
		abort();
	vr_region_set_fault_handler(R[i], on_fault, NULL);
	vm_region_new(&M, i, size);
}

/* after destroy, an adopted region's memory is the program's again:
 * discarded pages read 0, the others what they held */
static void adopted_gone(int i)
{
	if (!adopted[i])
		return;
	for (size_t k = 0; k < M.reg[i].size; k++) {
		uint8_t want = M.reg[i].discarded[k / P] ? 0 : M.reg[i].expect[k];
		if (adopted[i][k] != want)
			die("destroyed adopted region's memory", adopted[i][k], want);
	}
	memset(adopted[i], 0x5a, M.reg[i].size);
	munmap(adopted[i], M.reg[i].size);
	adopted[i] = NULL;
}

static void one_op(struct in *in)
{
	unsigned op = take(in, 1) % 12;
	int i = (int)(take(in, 1) % NREG);
	size_t a, b;
	if (!M.reg[i].live) {
		region_create(i, take(in, 1));
		return;
	}
	interval(in, i, &a, &b);
	switch (op) {
	case 0:
	case 1:
		EQ("mark", vr_mark(R[i], a, b - a), vm_mark(&M, i, a, b));
		break;
	case 2:
	case 3:
		EQ("unmark", vr_unmark(R[i], a, b - a), vm_unmark(&M, i, a, b));
		check_content(i, a, b, "after unmark");
		break;
	case 4:
		EQ("status", vr_status(R[i], a, b - a), vm_status(&M, i, a, b));
		break;
	case 5: {
		size_t n = take(in, 1) == 0xff ? SIZE_MAX : take(in, 1) * P / 4;
		ssize_t got = vr_ctx_purge(ctx, n);
		EQ("purge", got, n ? vm_purge(&M, true, n) : 0);
		break;
	}
	case 6: {
		unsigned l = take(in, 1) % 3;
		uint64_t want = 0;
		if (l) {
			M.events++;
			want = l == 2 ? vm_purge(&M, true, UINT64_MAX)
				      : vm_purge(&M, false, vm_bytes(&M, false) / 2);
		}
		EQ("pressure", vr_ctx_notify_pressure(ctx, (enum vr_pressure)l), want);
		break;
	}
	case 7: {
		unsigned v = take(in, 1);
		size_t lim = v < 128 ? 0 : (size_t)(v - 127) * P / 2;
		EQ("limit", vr_ctx_set_limit(ctx, lim), 0);
		M.limit = lim;
		vm_enforce_limit(&M);
		break;
	}
	case 8: /* write where nothing traps */
		if (!touches_discarded(i, a, b)) {
			uint8_t *base = vr_region_base(R[i]);
			wgen++;
			for (size_t k = a; k < b; k++)
				base[k] = M.reg[i].expect[k] = (uint8_t)(wgen * 31 + k);
		}
		break;
	case 9:
		if (!touches_discarded(i, a, b))
			check_content(i, a, b, "read");
		break;
	case 10: { /* touch a discarded page: the handler gets its range */
		size_t p = a / P;
		while (p < M.reg[i].pages && !M.reg[i].discarded[p])
			p++;
		if (p >= M.reg[i].pages)
			break;
		int k = vm_find(&M, i, p * P);
		if (k < 0 || !M.rg[k].purged)
			die("discarded page outside a purged range", (long long)p, k);
		struct vm_range r = M.rg[k];
		size_t at = p * P + b % P;
		volatile uint8_t *base = vr_region_base(R[i]);
		fault_calls = 0;
		uint8_t v = base[at];
		EQ("fault handler calls", fault_calls, 1);
		EQ("fault range off", fault_off, r.start);
		EQ("fault range len", fault_len, r.end - r.start);
		EQ("faulted byte", v, 0);
		vm_unmark(&M, i, r.start, r.end);
		model_faults++;
		EQ("faults", vr_ctx_stat(ctx, VR_STAT_FAULTS), model_faults);
		break;
	}
	case 11:
		vr_region_destroy(R[i]);
		R[i] = NULL;
		adopted_gone(i);
		vm_region_destroy(&M, i);
		break;
	}
	check_stats();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	if (!P)
		P = (size_t)sysconf(_SC_PAGESIZE);
	if (vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) != 0)
		abort();
	vm_init(&M, P);
	model_faults = 0;
	for (int i = 0; i < NREG; i++)
		R[i] = NULL;
	for (int ops = 0; in.n && ops < 2000; ops++)
		one_op(&in);
	/* everything still volatile comes back with the model's content */
	for (int i = 0; i < NREG; i++) {
		if (!R[i])
			continue;
		EQ("final unmark", vr_unmark(R[i], 0, M.reg[i].size),
		   vm_unmark(&M, i, 0, M.reg[i].size));
		check_content(i, 0, M.reg[i].size, "final");
	}
	check_stats();
	vr_ctx_destroy(ctx);
	for (int i = 0; i < NREG; i++)
		if (R[i])
			adopted_gone(i);
	vm_fini(&M);
	return 0;
}

#ifdef VT_FUZZ_MAIN
/* replay: each argument is an input file, or a directory of them */
#include <dirent.h>

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	static uint8_t buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0;
	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		if (!d) {
			if (replay_file(argv[i]) < 0)
				return 1;
			files++;
			continue;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			char path[4096];
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (replay_file(path) < 0)
				return 1;
			files++;
		}
		closedir(d);
	}
	/* and a few thousand pseudo-random programs */
	uint64_t s = 0x9E3779B97F4A7C15ull;
	static uint8_t buf[4096];
	for (int k = 0; k < 300; k++) {
		for (size_t j = 0; j < sizeof(buf); j++) {
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			buf[j] = (uint8_t)s;
		}
		LLVMFuzzerTestOneInput(buf, sizeof(buf));
	}
	printf("replayed %d corpus files and 300 generated programs\n", files);
	return 0;
}
#endif
