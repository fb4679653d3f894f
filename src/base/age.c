/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * age.c - LRU age stamps without a shared counter
 *
 * S8 needs one least-recently-marked order across all regions of a ctx.
 * A shared atomic counter gives it, but every vr_mark would then bounce
 * one cache line between the cores marking different regions (measured:
 * two threads on two regions ran at 0.7-0.8x of one thread).  Instead a
 * stamp is CLOCK_MONOTONIC in nanoseconds, raised where needed to stay
 * strictly above the calling thread's previous stamp and the region's
 * previous stamp.  That keeps every order S8 can observe: marks in one
 * thread, marks in one region (serialized by its lock), and marks in
 * different threads ordered by any synchronization (which takes far more
 * than a nanosecond).  Marks in different threads that no synchronization
 * orders are concurrent, and any order between them is correct.
 *
 * clock_gettime is a system call on clocksources without vDSO support;
 * there (and if the clocksource cannot be read) a process-wide atomic
 * counter stands in, trading scalability for S16's "no system call".
 * Ages have 60 bits (map/map.h keeps 4 flag bits): 36 years of
 * nanoseconds.  Shared files always use the clock (S29), even where
 * private regions use the counter; then the two do not compare, and a
 * purge takes private ranges first.
 *
 * WHY THE CLOCK (issue 26, measured 2026-12-03 on the 2-vCPU AMD EPYC VM,
 * kvm-clock with a stable TSC, invariant TSC flags set)
 *   cost of one stamp source alone / the hot object pin+unpin pair with it
 *   (vrbench objpair, one run each, twice, load 7-13):
 *     CLOCK_MONOTONIC (vDSO)        25 ns   / 67.5, 67.3 ns
 *     rdtscp (the TSC, ordered)     20 ns   / 62.9, 71.1 ns
 *     rdtsc alone / lfence+rdtsc    10.5 / 18-22 ns
 *     a process-wide counter        6 ns uncontended / 49.2, 51.0 ns
 *     CLOCK_MONOTONIC_COARSE        3.5 ns  / 45.1, 53.2 ns
 *   A stamp must exceed every stamp that happened before it (a mark in
 *   another thread, ordered by a lock or a message the library never
 *   sees), and a shared file's stamps must compare with every process's
 *   (S29).  Between threads only two things carry that order: a word every
 *   stamp writes, or a clock synchronized across CPUs read after the
 *   synchronization.
 *   - The counter is such a word: exact within the process, but every
 *     stamp then moves one cache line between the cores (two threads on
 *     two regions ran at 0.7-0.8x of one), and its values mean nothing in
 *     another process (S29 would need the clock beside it, and the two do
 *     not compare).  Only the fallback where the clock is a system call.
 *   - The coarse clock ticks every few ms: two marks in two threads within
 *     one tick, ordered by a lock, would get ages in either order.
 *     Refining it by a counter brings the shared word back.
 *   - The TSC is the clock minus its arithmetic: ordering it needs
 *     rdtscp or lfence (a bare rdtsc may execute before the load that
 *     observed the other thread's mark), which costs 20 of the clock's
 *     25 ns in this VM, and its ticks are not the nanoseconds other
 *     processes already wrote into a shared file.  Not worth a second
 *     unit of age for 5 ns.
 *   So the stamp stays CLOCK_MONOTONIC through the vDSO: what a
 *   synchronized, ordered clock costs here.  The order stays exact
 *   because the clock is monotonic across CPUs, its read is ordered after
 *   the caller's earlier loads (the vDSO reads the TSC with rdtsc_ordered),
 *   any synchronization between two threads takes longer than its 1 ns
 *   resolution, and the raise above the thread's and the region's last
 *   stamp makes equal readings strictly increasing.  The hot pair's other
 *   ~42 ns are its seven atomic read-modify-writes (obj.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "vrange.h"
#include "base/age.h"
#include "base/log.h"

static bool use_clock;
static _Atomic uint64_t counter;
/* this thread's last stamp, one per source (index: clock or not): under
 * the counter a shared file's clock stamp must not raise the thread's next
 * counter stamps into the clock's range, above those of every other thread
 * (private ranges and objects out of order; a group made there would get
 * an age base above other threads' later unpins); under the clock both
 * are one */
static __thread uint64_t tls_last[2] __attribute__((tls_model("initial-exec")));

void vr_age_init(void)
{
	static const char *const vdso_ok[] = { "tsc", "kvm-clock", "arch_sys_counter",
					       "hyperv_clocksource_tsc_page", "riscv_clocksource" };
	char buf[64] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	for (size_t i = 0; i < VR_ARRAY_SIZE(vdso_ok); i++)
		if (strcmp(buf, vdso_ok[i]) == 0)
			use_clock = true;
	vr_dbg("age stamps: %s (clocksource '%s')", use_clock ? "monotonic clock" : "counter", buf);
}

static uint64_t stamp(uint64_t *last, bool clock)
{
	uint64_t t;
	if (clock) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	} else {
		t = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) + 1;
	}
	if (t <= tls_last[clock])
		t = tls_last[clock] + 1;
	if (t <= *last)
		t = *last + 1;
	tls_last[clock] = *last = t;
	return t;
}

uint64_t vr_age_after(uint64_t *last)
{
	return stamp(last, use_clock);
}

/* a shared file's stamps always come from CLOCK_MONOTONIC (S29: ages of
 * different processes compare), whatever private regions use */
uint64_t vr_age_after_clock(uint64_t *last)
{
	return stamp(last, true);
}
