/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vt-seccomp.h - a seccomp filter that refuses userfaultfd(), as Docker's
 * default profile does (S32's fallback), for tests of the trap backends
 */
#ifndef VT_SECCOMP_H
#define VT_SECCOMP_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* From now on userfaultfd() fails with err in this process and its
 * children, and no other system call is touched.  0, or -errno when the
 * filter cannot be installed or does not work (then the test must fail:
 * it would pass without testing the refusal). */
static inline int vt_block_userfaultfd(int err)
{
	struct sock_filter f[] = {
#if defined(__x86_64__)
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
#endif
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
		return -errno;
	/* the filter works: the test can fail */
	errno = 0;
	if (syscall(__NR_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */) != -1)
		return -EEXIST;
	return errno == err ? 0 : -errno;
}

#endif
