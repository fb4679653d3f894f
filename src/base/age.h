/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * age.h - LRU age stamps (age.c)
 */
#ifndef VR_AGE_H
#define VR_AGE_H

#include <stdint.h>

#include "base/macro.h"

/* a stamp younger than every stamp this thread got before, than *last
 * (updated; the caller serializes *last) and than every mark that
 * happened before this call in real time */
uint64_t vr_age_after(uint64_t *last) _nonnull_();
uint64_t vr_age_after_clock(uint64_t *last) _nonnull_(); /* always the clock */
void vr_age_init(void);

#endif
