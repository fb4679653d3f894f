/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * registry.h - address -> region (or object chunk), lock-free for readers
 * (registry.c)
 */
#ifndef VR_REGISTRY_H
#define VR_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/macro.h"

struct vr_region;

/* 0, -ENOMEM, -EBUSY when a live region maps the same file (S33), or
 * -EEXIST if [base, base + size) overlaps a live region (an adopted span)
 * or, in a fork child, an inherited adopted one.  adopted: r's span is
 * the caller's memory (vr_region_adopt), which fork children inherit */
int vr_registry_add(struct vr_region *r, bool adopted) _nonnull_();
void vr_registry_remove(struct vr_region *r) _nonnull_();
struct vr_region *vr_registry_lookup(const void *addr); /* async-signal-safe */
/* entries of other kinds (object chunks, obj.c): lookup by kind */
enum { VR_REG_REGION, VR_REG_OBJ };
int vr_registry_add_kind(void *p, const void *base, size_t size, int kind) _nonnull_();
void vr_registry_remove_any(void *p) _nonnull_();
void *vr_registry_find(const void *addr, int kind); /* async-signal-safe */
/* some live region, or in a fork child an inherited adopted region not
 * destroyed yet, shares a byte with [addr, addr + len) */
bool vr_registry_overlaps(const void *addr, size_t len);
void vr_registry_atfork_prepare(void);
void vr_registry_atfork_parent(void);
void vr_registry_atfork_child(void);

#endif
