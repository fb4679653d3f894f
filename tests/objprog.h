/*
 * objprog.h - objects mixed with ranges, against the model of vrmodel.h
 *
 * op_run(data, size, faults) interprets a byte string as a program of
 * operations on one ctx holding one region (ranges) and up to 64 objects
 * (small ones of sizes that never straddle a page, large ones of 1-4
 * pages): new, free, pin, unpin, status, write, vr_obj_of, mark, unmark,
 * purge(n), pressure, limit, and (with faults) a touch of a purged object
 * that the object fault handler repairs; and groups (S35-S37): objects
 * made in up to four groups of random priorities with side-car bytes,
 * group new/destroy, purge and limit, a purge handler on every group that
 * counts its calls and frees some objects.  After every operation the
 * return value, the statistics (ctx and groups), the handler calls and
 * the content of pinned objects must be the model's; the side-car bytes
 * of every object are checked in every state; a mismatch prints "MODEL
 * MISMATCH" and aborts.
 *
 * Used by the libFuzzer target tests/fuzz/fuzz-obj.c and by
 * tests/test-model.c (random programs, in a scenario process so that the
 * fault path works).
 */
#ifndef VT_OBJPROG_H
#define VT_OBJPROG_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
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
	size_t extra[OP_NOBJ];
	struct vr_group *g[VM_MAX_GROUPS];
	uint64_t notified[VM_MAX_GROUPS];
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
	for (int g = 0; g < VM_MAX_GROUPS; g++) {
		const struct vm_group *mg = &OS_.m.grp[g];
		if (!mg->live)
			continue;
		struct vr_group *vg = OS_.g[g];
		OP_EQ("group objects", vr_group_stat(vg, VR_STAT_OBJECTS), vm_gobjs(&OS_.m, g));
		OP_EQ("group volatile", vr_group_stat(vg, VR_STAT_VOLATILE_BYTES),
		      vm_gbytes(&OS_.m, g, false));
		OP_EQ("group purged", vr_group_stat(vg, VR_STAT_PURGED_BYTES),
		      vm_gbytes(&OS_.m, g, true));
		OP_EQ("group purges", vr_group_stat(vg, VR_STAT_PURGES), mg->purges);
		OP_EQ("group reclaimed", vr_group_stat(vg, VR_STAT_RECLAIMED_BYTES), mg->reclaimed);
		OP_EQ("group ranges", vr_group_stat(vg, VR_STAT_RANGES), 0);
		OP_EQ("purge handler calls", OS_.notified[g], mg->notified);
	}
}

/* side-car bytes: a pattern of the object's slot, in every state (S36) */
static uint8_t op_xbyte(int k, size_t i)
{
	return (uint8_t)(k * 7 + i * 13 + 1);
}

static void op_check_extra(int k)
{
	uint8_t *x = vr_obj_extra(OS_.o[k]);
	if (!OS_.extra[k]) {
		if (x)
			op_die("extra of an object without side-car", 1, 0);
		return;
	}
	if (!x || ((uintptr_t)x & 15))
		op_die("extra pointer aligned", (long long)(uintptr_t)x, 16);
	for (size_t i = 0; i < OS_.extra[k]; i++)
		if (x[i] != op_xbyte(k, i))
			op_die("extra byte", x[i], op_xbyte(k, i));
}

/* objects with these slots are freed by the purge handler (S37) */
static bool op_free_on_purge(int k)
{
	return k % 8 == 7;
}

static int op_slot(const struct vr_obj *o)
{
	for (int k = 0; k < OP_NOBJ; k++)
		if (OS_.o[k] == o)
			return k;
	op_die("purge handler: unknown object", 0, 1);
}

static void op_forget(int k)
{
	OS_.o[k] = NULL;
	free(OS_.expect[k]);
	OS_.expect[k] = NULL;
}

static void op_purged(struct vr_obj *o, void *arg)
{
	int g = (int)(intptr_t)arg;
	OS_.notified[g]++;
	OP_EQ("state in the purge handler", vr_obj_status(o), VR_STATE_VOLATILE | VR_STATE_PURGED);
	int k = op_slot(o);
	op_check_extra(k);
	if (op_free_on_purge(k)) {
		vr_obj_free(o);
		op_forget(k);
	}
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
		unsigned sel = op_take(1);
		int g = (int)(sel % VM_MAX_GROUPS);
		static const size_t xs[4] = { 0, 8, 208, 4096 };
		size_t extra = xs[(sel >> 2) % 4];
		if (!m->grp[g].live)
			g = 0;
		if (vr_obj_new_in(OS_.g[g], size, extra, 0, &OS_.o[k]) != 0)
			abort();
		vm_obj_new_in(m, g, k, size, (uintptr_t)vr_obj_ptr(OS_.o[k]));
		mo->free_on_purge = op_free_on_purge(k);
		OP_T("new %d size %zu extra %zu group %d at %p pages %#lx-%#lx\n", k, size, extra,
		     g, vr_obj_ptr(OS_.o[k]), (unsigned long)m->obj[k].pg0,
		     (unsigned long)m->obj[k].pg1);
		OS_.expect[k] = calloc(size, 1);
		OS_.extra[k] = extra;
		uint8_t *x = vr_obj_extra(OS_.o[k]);
		for (size_t i = 0; i < extra; i++) {
			if (x[i])
				op_die("extra zeroed at creation", x[i], 0);
			x[i] = op_xbyte(k, i);
		}
		op_check_content(k); /* zero-filled */
		return;
	}
	OP_T("obj op %u on %d\n", op, k);
	switch (op) {
	case 0:
		op_check_extra(k);
		vr_obj_free(OS_.o[k]);
		vm_obj_free(m, k);
		op_forget(k);
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

static void op_group_new(int g, int prio)
{
	if (vr_group_new(OS_.ctx, prio, &OS_.g[g]) != 0 ||
	    vr_group_set_purge_handler(OS_.g[g], op_purged, (void *)(intptr_t)g) != 0)
		abort();
	vm_group_new(&OS_.m, g, prio);
	OS_.notified[g] = 0;
}

/* groups: new or destroy, purge, limit (S35) */
static void op_group(unsigned kind, unsigned v)
{
	struct vm *m = &OS_.m;
	int g = (int)(v % VM_MAX_GROUPS);
	v /= VM_MAX_GROUPS;
	OP_T("  group %d live %d prio %d v %u\n", g, m->grp[g].live, m->grp[g].prio, v);
	if (kind == 16) {
		if (!m->grp[g].live) {
			op_group_new(g, (int)(v % 8));
			return;
		}
		vr_group_destroy(OS_.g[g]);
		for (int k = 0; k < OP_NOBJ; k++)
			if (m->obj[k].live && m->obj[k].grp == g)
				op_forget(k);
		vm_group_destroy(m, g);
		if (g)
			OS_.g[g] = NULL;
		return;
	}
	if (!m->grp[g].live)
		g = 0;
	if (kind == 17) {
		size_t n = v == 63 ? SIZE_MAX : v * OS_.P / 4;
		OP_EQ("group purge", vr_group_purge(OS_.g[g], n),
		      n ? vm_purge_in(m, g, true, n) : 0);
	} else if (kind == 18) {
		size_t lim = v < 32 ? 0 : (size_t)(v - 31) * OS_.P / 4;
		OP_EQ("group limit", vr_group_set_limit(OS_.g[g], lim), 0);
		vm_group_set_limit(m, g, lim);
	} else {
		OP_EQ("group of NULL", vr_group_purge(NULL, 1), -EINVAL);
		OP_EQ("group priority 8", vr_group_new(OS_.ctx, 8, &(struct vr_group *){ NULL }),
		      -EINVAL);
	}
}

static void op_one(bool faults)
{
	struct vm *m = &OS_.m;
	size_t P = OS_.P, rsize = OP_RPAGES * P;
	unsigned op = op_take(1);
	unsigned kind = op % 20;
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
	} else if (kind == 15) { /* check content of every pinned object */
		for (int k = 0; k < OP_NOBJ; k++)
			if (m->obj[k].live && m->obj[k].pinned)
				op_check_content(k);
	} else {
		op_group(kind, op_take(1));
	}
	for (int k = 0; k < OP_NOBJ; k++)
		if (m->obj[k].live)
			op_check_extra(k);
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
	OS_.g[0] = vr_ctx_group(OS_.ctx);
	if (vr_group_set_purge_handler(OS_.g[0], op_purged, (void *)0) != 0)
		abort();
	OS_.notified[0] = 0;
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
		op_check_extra(k);
		if (k % 2) /* half freed here, half with the ctx */
			vr_obj_free(OS_.o[k]);
		op_forget(k);
	}
	for (int g = 1; g < VM_MAX_GROUPS; g++) /* some with the ctx */
		if (OS_.m.grp[g].live && g % 2)
			vr_group_destroy(OS_.g[g]);
	memset(OS_.g, 0, sizeof(OS_.g));
	vr_ctx_destroy(OS_.ctx);
	vm_fini(&OS_.m);
	memset(OS_.m.obj, 0, sizeof(OS_.m.obj));
}

#endif
