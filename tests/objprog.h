/*
 * objprog.h - objects mixed with ranges, against the model of vrmodel.h
 *
 * op_run(data, size, faults) interprets a byte string as a program of
 * operations on one ctx holding one region (ranges) and up to 64 objects
 * (small ones of sizes that never straddle a page, large ones of 1-4
 * pages): new, free, pin, unpin, status, write, vr_obj_of, mark, unmark,
 * purge(n), pressure, limit, and (with faults) a touch of a purged object
 * that the object fault handler repairs.  After every operation the
 * return value, the statistics and the content of pinned objects must be
 * the model's; a mismatch prints "MODEL MISMATCH" and aborts.
 *
 * Used by the libFuzzer target tests/fuzz/fuzz-obj.c and by
 * tests/test-model.c (random programs, in a scenario process so that the
 * fault path works).
 */
#ifndef VT_OBJPROG_H
#define VT_OBJPROG_H

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vrange.h>

#include "vrmodel.h"

#define OP_NOBJ 64
#define OP_RPAGES 16

struct op_state {
	const uint8_t *p;
	size_t n;
	size_t P;
	struct vr_ctx *ctx;
	struct vr_region *r;
	struct vm m;
	struct vr_obj *o[OP_NOBJ];
	uint8_t *expect[OP_NOBJ];
	uint64_t faults, gen;
};

static struct op_state OS_;
/* written by the fault handler: volatile, or the compiler keeps them in
 * registers across the faulting access */
static volatile int op_fault_calls;
static struct vr_obj *volatile op_fault_obj;

static unsigned op_take(unsigned bytes)
{
	unsigned v = 0;
	for (unsigned i = 0; i < bytes; i++) {
		v <<= 8;
		if (OS_.n) {
			v |= *OS_.p++;
			OS_.n--;
		}
	}
	return v;
}

__attribute__((noreturn)) static void op_die(const char *what, long long got, long long want)
{
	fprintf(stderr, "MODEL MISMATCH: %s: library %lld, model %lld\n", what, got, want);
	for (int k = 0; k < OP_NOBJ; k++) {
		const struct vm_obj *o = &OS_.m.obj[k];
		if (o->live)
			fprintf(stderr,
				"  model object %d: size %zu pages %#lx-%#lx %s%s age %llu\n", k,
				o->size, (unsigned long)o->pg0, (unsigned long)o->pg1,
				o->pinned ? "pinned" : "unpinned", o->purged ? " purged" : "",
				(unsigned long long)o->age);
	}
	abort();
}
#define OP_EQ(what, got, want)                                                                     \
	do {                                                                                       \
		long long g_ = (long long)(got), w_ = (long long)(want);                           \
		if (g_ != w_)                                                                      \
			op_die(what, g_, w_);                                                      \
	} while (0)

/* VT_OP_TRACE=1: print every operation (to find a mismatch's cause) */
static bool op_trace;
#define OP_T(...)                                                                                  \
	do {                                                                                       \
		if (op_trace)                                                                      \
			fprintf(stderr, __VA_ARGS__);                                              \
	} while (0)

static void op_stats(void)
{
	struct vr_ctx *c = OS_.ctx;
	OP_EQ("objects", vr_ctx_stat(c, VR_STAT_OBJECTS), vm_nobjs(&OS_.m));
	OP_EQ("ranges", vr_ctx_stat(c, VR_STAT_RANGES), OS_.m.nrg);
	OP_EQ("volatile bytes", vr_ctx_stat(c, VR_STAT_VOLATILE_BYTES), vm_bytes(&OS_.m, false));
	OP_EQ("purged bytes", vr_ctx_stat(c, VR_STAT_PURGED_BYTES), vm_bytes(&OS_.m, true));
	OP_EQ("reclaimed", vr_ctx_stat(c, VR_STAT_RECLAIMED_BYTES), OS_.m.reclaimed);
	OP_EQ("purges", vr_ctx_stat(c, VR_STAT_PURGES), OS_.m.purges);
	OP_EQ("faults", vr_ctx_stat(c, VR_STAT_FAULTS), OS_.faults);
}

/* a size whose class divides the page (no straddling), or 1-4 pages */
static size_t op_size(unsigned sel)
{
	size_t P = OS_.P;
	if (sel & 0x80) {
		size_t pages = (sel >> 4) % 3 + 1;
		return pages * P + (sel & 1 ? (sel * 37) % P : 0);
	}
	size_t cls = (size_t)16 << (sel % 9); /* 16 .. 4096 */
	if (cls > P)
		cls = P;
	/* stay above the next smaller class: 16-byte steps up to 128, then
	 * 8 classes per doubling (a step of cls / 16 just below cls) */
	size_t step = cls <= 128 ? 16 : cls / 16;
	size_t cut = (sel >> 3) % step;
	return cls - cut - (cls == P && cut == 0 ? 1 : 0);
}

static void op_check_content(int k)
{
	const uint8_t *p = vr_obj_ptr(OS_.o[k]);
	for (size_t i = 0; i < OS_.m.obj[k].size; i++)
		if (p[i] != OS_.expect[k][i]) {
			fprintf(stderr, "MODEL MISMATCH: object %d byte %zu = %u, model %u\n", k, i,
				p[i], OS_.expect[k][i]);
			abort();
		}
}

static int op_fault(struct vr_obj *o, void *addr, void *arg)
{
	(void)addr;
	(void)arg;
	op_fault_calls++;
	op_fault_obj = o;
	return vr_obj_pin(o) == VR_PURGED ? VR_FAULT_RETRY : VR_FAULT_SIGBUS;
}

static void op_obj(unsigned op, int k, bool faults)
{
	struct vm *m = &OS_.m;
	struct vm_obj *mo = &m->obj[k];
	if (!mo->live) {
		size_t size = op_size(op_take(1));
		if (vr_obj_new(OS_.ctx, size, 0, &OS_.o[k]) != 0)
			abort();
		vm_obj_new(m, k, size, (uintptr_t)vr_obj_ptr(OS_.o[k]));
		OP_T("new %d size %zu at %p pages %#lx-%#lx\n", k, size, vr_obj_ptr(OS_.o[k]),
		     (unsigned long)m->obj[k].pg0, (unsigned long)m->obj[k].pg1);
		OS_.expect[k] = calloc(size, 1);
		op_check_content(k); /* zero-filled */
		return;
	}
	OP_T("obj op %u on %d\n", op, k);
	switch (op) {
	case 0:
		vr_obj_free(OS_.o[k]);
		vm_obj_free(m, k);
		free(OS_.expect[k]);
		OS_.expect[k] = NULL;
		break;
	case 1:
	case 2: {
		int rc = vm_obj_pin(m, k);
		OP_EQ("pin", vr_obj_pin(OS_.o[k]), rc);
		if (rc == VR_PURGED)
			memset(OS_.expect[k], 0, mo->size);
		op_check_content(k);
		break;
	}
	case 3:
	case 4:
		OP_EQ("unpin", vr_obj_unpin(OS_.o[k]), vm_obj_unpin(m, k));
		break;
	case 5:
		OP_EQ("obj status", vr_obj_status(OS_.o[k]), vm_obj_status(m, k));
		break;
	case 6: /* write a pinned object */
		if (mo->pinned) {
			uint8_t *p = vr_obj_ptr(OS_.o[k]);
			OS_.gen++;
			for (size_t i = 0; i < mo->size; i++)
				p[i] = OS_.expect[k][i] = (uint8_t)(OS_.gen * 31 + i) | 1;
		}
		break;
	case 7: {
		uint8_t *p = vr_obj_ptr(OS_.o[k]);
		size_t at = op_take(2) % mo->size;
		if (vr_obj_of(p + at) != OS_.o[k] || vr_obj_size(OS_.o[k]) != mo->size)
			op_die("vr_obj_of", 0, k);
		break;
	}
	case 8: /* touch a purged large object: the handler pins it */
		if (faults && mo->large && !mo->pinned && mo->purged) {
			volatile uint8_t *p = vr_obj_ptr(OS_.o[k]);
			size_t at = op_take(2) % mo->size;
			op_fault_calls = 0;
			uint8_t v = p[at];
			OP_EQ("fault handler calls", op_fault_calls, 1);
			OP_EQ("faulted object", op_fault_obj == OS_.o[k], 1);
			OP_EQ("faulted byte", v, 0);
			vm_obj_pin(m, k);
			memset(OS_.expect[k], 0, mo->size);
			OS_.faults++;
		}
		break;
	}
}

static void op_one(bool faults)
{
	struct vm *m = &OS_.m;
	size_t P = OS_.P, rsize = OP_RPAGES * P;
	unsigned op = op_take(1);
	unsigned kind = op % 16;
	if (kind >= 9)
		OP_T("op kind %u\n", kind);
	if (kind < 9) {
		op_obj(kind, (int)(op_take(1) % OP_NOBJ), faults);
	} else if (kind < 11) { /* ranges of the region, page-aligned or not */
		size_t a = op_take(2) % rsize, b = a + op_take(2) % (3 * P) + 1;
		if (b > rsize)
			b = rsize;
		OP_T("  [%zu, %zu) limit %zu volatile %llu\n", a, b, m->limit,
		     (unsigned long long)vm_bytes(m, false));
		if (kind == 9) {
			OP_EQ("mark", vr_mark(OS_.r, a, b - a), vm_mark(m, 0, a, b));
		} else {
			OP_EQ("unmark", vr_unmark(OS_.r, a, b - a), vm_unmark(m, 0, a, b));
		}
	} else if (kind < 13) {
		unsigned v = op_take(1);
		size_t n = v == 0xff ? SIZE_MAX : v * P / 8;
		OP_EQ("purge", vr_ctx_purge(OS_.ctx, n), n ? vm_purge(m, true, n) : 0);
	} else if (kind == 13) {
		unsigned l = op_take(1) % 3;
		uint64_t want = 0;
		if (l) {
			m->events++;
			want = l == 2 ? vm_purge(m, true, UINT64_MAX)
				      : vm_purge(m, false, vm_bytes(m, false) / 2);
		}
		OP_EQ("pressure", vr_ctx_notify_pressure(OS_.ctx, (enum vr_pressure)l), want);
	} else if (kind == 14) {
		unsigned v = op_take(1);
		size_t lim = v < 160 ? 0 : (size_t)(v - 159) * P / 2;
		OP_EQ("limit", vr_ctx_set_limit(OS_.ctx, lim), 0);
		m->limit = lim;
		vm_enforce_limit(m);
	} else { /* pin + check content of every pinned object */
		for (int k = 0; k < OP_NOBJ; k++)
			if (m->obj[k].live && m->obj[k].pinned)
				op_check_content(k);
	}
	op_stats();
}

static void op_run(const uint8_t *data, size_t size, bool faults)
{
	OS_.p = data;
	OS_.n = size;
	OS_.P = (size_t)sysconf(_SC_PAGESIZE);
	OS_.faults = 0;
	op_trace = getenv("VT_OP_TRACE") != NULL;
	if (vr_ctx_new(VR_CTX_NO_MONITOR, &OS_.ctx) != 0 ||
	    vr_region_new(OS_.ctx, "objprog", OP_RPAGES * OS_.P, 0, &OS_.r) != 0 ||
	    vr_ctx_set_obj_fault_handler(OS_.ctx, op_fault, NULL) != 0)
		abort();
	vm_init(&OS_.m, OS_.P);
	vm_region_new(&OS_.m, 0, OP_RPAGES * OS_.P);
	for (int ops = 0; OS_.n && ops < 2000; ops++)
		op_one(faults);
	/* every live object pinned again: content as the model says */
	for (int k = 0; k < OP_NOBJ; k++) {
		if (!OS_.m.obj[k].live)
			continue;
		int rc = vm_obj_pin(&OS_.m, k);
		OP_EQ("final pin", vr_obj_pin(OS_.o[k]), rc);
		if (rc == VR_PURGED)
			memset(OS_.expect[k], 0, OS_.m.obj[k].size);
		op_check_content(k);
		if (k % 2) /* half freed here, half with the ctx */
			vr_obj_free(OS_.o[k]);
		free(OS_.expect[k]);
		OS_.expect[k] = NULL;
	}
	vr_ctx_destroy(OS_.ctx);
	vm_fini(&OS_.m);
	memset(OS_.m.obj, 0, sizeof(OS_.m.obj));
}

#endif
