/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* refault.c - the per-thread re-fault record (refault.h) */
#include "base/refault.h"

__thread struct vr_refault vr_refault_tls __attribute__((tls_model("initial-exec")));
