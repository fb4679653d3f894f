/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* macro.h - internal annotations (in the style of kmod's shared/macro.h) */
#ifndef VR_MACRO_H
#define VR_MACRO_H

#define _nonnull_(...) __attribute__((nonnull(__VA_ARGS__)))
#define _must_check_ __attribute__((warn_unused_result))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _export_ __attribute__((visibility("default")))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define VR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
