/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fault.h - the process-wide SIGSEGV (and SIGBUS) entry (fault.c)
 */
#ifndef VR_FAULT_H
#define VR_FAULT_H

#include "base/fork.h"

int vr_fault_install(void);                    /* installs the SIGSEGV handler once */
extern const struct vr_atfork vr_fault_atfork; /* child: fill slots reset */

#endif
