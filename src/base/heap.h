/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * heap.h - binary min-heaps ordered by an `age` field, for the purge
 * engine's heap of LRU sources (purge.c) and the objects' requeue heap
 * (obj-lru.c): one sift_down/sift_up pair for any element type.
 *
 * VR_AGE_HEAP(name, type) defines
 *   static void name##_sift_down(type *h, size_t n, size_t i);
 *   static void name##_sift_up(type *h, size_t i);
 * No locks, no allocation; the caller owns the array.
 */
#ifndef VR_HEAP_H
#define VR_HEAP_H

#include <stddef.h>

#include "base/macro.h"

#define VR_AGE_HEAP(name, type)                                                                    \
	static inline _unused_ void name##_sift_down(type *h, size_t n, size_t i)                  \
	{                                                                                          \
		for (;;) {                                                                         \
			size_t l = 2 * i + 1, m = i;                                               \
			if (l < n && h[l].age < h[m].age)                                          \
				m = l;                                                             \
			if (l + 1 < n && h[l + 1].age < h[m].age)                                  \
				m = l + 1;                                                         \
			if (m == i)                                                                \
				return;                                                            \
			type t_ = h[i];                                                            \
			h[i] = h[m];                                                               \
			h[m] = t_;                                                                 \
			i = m;                                                                     \
		}                                                                                  \
	}                                                                                          \
	static inline _unused_ void name##_sift_up(type *h, size_t i)                              \
	{                                                                                          \
		while (i > 0 && h[(i - 1) / 2].age > h[i].age) {                                   \
			type t_ = h[i];                                                            \
			h[i] = h[(i - 1) / 2];                                                     \
			h[(i - 1) / 2] = t_;                                                       \
			i = (i - 1) / 2;                                                           \
		}                                                                                  \
	}

#endif
