/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor-policy.c - the monitor's decisions, free of system state: every
 * function takes the time as a parameter and reads no file, so
 * tests/test-policy.c drives them directly.
 *
 * Pressure levels: events are coalesced, at most one action per level per
 * MON_GAP_MS; events arriving in between fold into one pending action,
 * and a CRITICAL action swallows a pending MODERATE one.  Level-triggered
 * sources raise when their level rises and repeat while it persists.
 *
 * The limit (S34): with L the smallest applicable limit,
 *   threshold = L - L/32 (~97%): crossing it starts a purge,
 *   line      = L - L/16 (~94%): the budget keeps usage under it,
 *   target    = L * 3/4:          a threshold purge stops here.
 * The budget is what vr_mark enforces synchronously: the line minus all
 * the cgroup holds that is not this ctx's unpurged volatile bytes.  It is
 * exact however fast the ctx marks, stale only in the other usage.
 */
#include "monitor/monitor.h"

void mon_pol_raise(struct mon_policy *p, int level)
{
	if (level <= VR_PRESSURE_NONE || level > VR_PRESSURE_CRITICAL)
		return;
	if (p->pending[level])
		p->coalesced[level]++;
	p->pending[level] = true;
}

int mon_pol_take(struct mon_policy *p, uint64_t now, unsigned *coalesced)
{
	for (int l = VR_PRESSURE_CRITICAL; l >= VR_PRESSURE_MODERATE; l--) {
		if (!p->pending[l])
			continue;
		if (p->acted[l] && now - p->acted_ms[l] < MON_GAP_MS)
			continue; /* stays pending: coalesced into one later action */
		p->pending[l] = false;
		if (l == VR_PRESSURE_CRITICAL && p->pending[VR_PRESSURE_MODERATE]) {
			p->pending[VR_PRESSURE_MODERATE] = false; /* swallowed */
			p->coalesced[l] += 1 + p->coalesced[VR_PRESSURE_MODERATE];
			p->coalesced[VR_PRESSURE_MODERATE] = 0;
		}
		p->acted[l] = true;
		p->acted_ms[l] = now;
		*coalesced = p->coalesced[l];
		p->coalesced[l] = 0;
		return l;
	}
	return VR_PRESSURE_NONE;
}

uint64_t mon_pol_deadline(const struct mon_policy *p)
{
	uint64_t d = UINT64_MAX;
	for (int l = VR_PRESSURE_MODERATE; l <= VR_PRESSURE_CRITICAL; l++) {
		if (!p->pending[l])
			continue;
		uint64_t due = p->acted[l] ? p->acted_ms[l] + MON_GAP_MS : 0;
		if (due < d)
			d = due;
	}
	return d;
}

bool mon_hold_update(struct mon_hold *h, int level, uint64_t now)
{
	bool raise = false;
	if (level > h->held)
		raise = true;
	else if (level != VR_PRESSURE_NONE)
		raise = now - h->held_ms >= (level == VR_PRESSURE_CRITICAL
						     ? MON_REPEAT_CRITICAL_MS
						     : MON_REPEAT_MODERATE_MS);
	if (raise)
		h->held_ms = now;
	h->held = level;
	return raise;
}

/* cur >= pct% of lim, without overflow */
static bool at_pct(uint64_t cur, uint64_t lim, unsigned pct)
{
	return (unsigned __int128)cur * 100 >= (unsigned __int128)lim * pct;
}

#define MON_CG2_MODERATE_PCT 90
#define MON_CG2_CRITICAL_PCT 97
#define MON_MEMINFO_MODERATE_PCT 75
#define MON_MEMINFO_CRITICAL_PCT 85

int mon_cg2_level(bool have, uint64_t cur, uint64_t high, uint64_t max)
{
	if (!have)
		return VR_PRESSURE_NONE;
	if (max != UINT64_MAX && at_pct(cur, max, MON_CG2_CRITICAL_PCT))
		return VR_PRESSURE_CRITICAL;
	if (max != UINT64_MAX && at_pct(cur, max, MON_CG2_MODERATE_PCT))
		return VR_PRESSURE_MODERATE;
	if (high != UINT64_MAX && cur > high)
		return VR_PRESSURE_MODERATE;
	return VR_PRESSURE_NONE;
}

int mon_meminfo_level(int used_pct)
{
	if (used_pct >= MON_MEMINFO_CRITICAL_PCT)
		return VR_PRESSURE_CRITICAL;
	if (used_pct >= MON_MEMINFO_MODERATE_PCT)
		return VR_PRESSURE_MODERATE;
	return VR_PRESSURE_NONE;
}

void mon_limit_plan(uint64_t limit, struct mon_limit_plan *out)
{
	out->limit = limit;
	out->threshold = limit - limit / 32;
	out->line = limit - limit / 16;
	out->target = limit / 4 * 3;
	out->file_reserve = limit / MON_FILE_RESERVE_DIV;
}

uint64_t mon_file_reserve(uint64_t limit, uint64_t readahead)
{
	uint64_t lo = limit / MON_FILE_RESERVE_DIV, hi = limit / MON_FILE_RESERVE_MAX_DIV;
	uint64_t r = readahead > UINT64_MAX / 2 ? UINT64_MAX : 2 * readahead;
	return r < lo ? lo : r > hi ? hi : r;
}

uint64_t mon_limit_excess(const struct mon_limit_plan *pl, uint64_t usage)
{
	return usage > pl->target ? usage - pl->target : 0;
}

uint64_t mon_limit_reclaimable(const struct mon_limit_plan *pl, uint64_t file)
{
	return file > pl->file_reserve ? file - pl->file_reserve : 0;
}

bool mon_pressure_file_first(const struct mon_limit_plan *pl, uint64_t reclaimable)
{
	return pl->limit && reclaimable > pl->limit / MON_FILE_FIRST_DIV;
}

uint64_t mon_limit_budget(const struct mon_limit_plan *pl, uint64_t usage, uint64_t own_volatile)
{
	uint64_t other = usage > own_volatile ? usage - own_volatile : 0;
	return pl->line > other + 1 ? pl->line - other : 1;
}

unsigned mon_limit_interval(const struct mon_limit_plan *pl, uint64_t usage, uint64_t prev_usage,
			    unsigned prev_ms)
{
	uint64_t dist = usage < pl->threshold ? pl->threshold - usage : 0;
	uint64_t ms = dist / MON_FILL_RATE_BPMS;
	uint64_t moved = usage > prev_usage ? usage - prev_usage : prev_usage - usage;
	/* standing still (under 1/64 of the limit since the last poll):
	 * back off, but never past the fill-time bound by more than 2x */
	if (moved < pl->limit / 64 && prev_ms && usage < pl->threshold) {
		uint64_t slow = (uint64_t)prev_ms * 2;
		if (slow > ms && slow <= 2 * ms + MON_LIMIT_MIN_MS * 8)
			ms = slow;
	}
	if (ms < MON_LIMIT_MIN_MS)
		ms = MON_LIMIT_MIN_MS;
	if (ms > MON_LIMIT_MAX_MS)
		ms = MON_LIMIT_MAX_MS;
	return (unsigned)ms;
}
