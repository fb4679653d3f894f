/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shared-fd.c - sharing a region with another process over a UNIX socket
 *
 * Shows: a region's memfd (vr_region_fd) sent to another process with
 * SCM_RIGHTS and mapped there with vr_region_from_fd(), as a producer
 * would share decoded data with a consumer.  Here the other process is a
 * fork()ed child; it first drops everything it inherited from the
 * parent's library state (in a child of fork() inherited handles may only
 * be destroyed), so the only way it can see the data is the fd it
 * receives.
 *
 * What is shared, and what is not (api.md S17, v0.1):
 *   - the bytes are shared: the child reads what the parent wrote;
 *   - volatility is per process: the child's region starts wholly
 *     non-volatile, whatever the parent marked;
 *   - discarding is a property of the file: when the parent purges a
 *     range, the child reads zeros there, without a fault.  Processes
 *     that share a memfd must agree on who marks which bytes.
 *
 * Build (installed library):
 *   cc -o shared-fd shared-fd.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./shared-fd
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vrange.h>

#define NPAGES 8

static size_t pg;

static void check(bool ok, const char *who, const char *what)
{
	if (!ok) {
		fprintf(stderr, "shared-fd %s: FAILED: %s\n", who, what);
		exit(1);
	}
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 13 + i / 4096 + 1) | 0x40;
}

/* ---- fd passing ---- */
static int send_fd(int sock, int fd)
{
	char byte = 'F';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* one byte messages to take turns */
static void say(int sock, char c, const char *who)
{
	check(write(sock, &c, 1) == 1, who, "write to socket");
}

static void await(int sock, char c, const char *who)
{
	char got = 0;
	check(read(sock, &got, 1) == 1 && got == c, who, "read from socket");
}

/* ---- the consumer ---- */
static int child(int sock, struct vr_ctx *inherited)
{
	const char *me = "child";
	struct vr_ctx *ctx;
	struct vr_region *r;

	/* inherited handles: destroy only (frees the copies, closes their fds) */
	vr_ctx_destroy(inherited);

	int fd = recv_fd(sock);
	check(fd >= 0, me, "receive the memfd");
	check(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) == 0, me, "vr_ctx_new");
	check(vr_region_from_fd(ctx, fd, 0, &r) == 0, me, "vr_region_from_fd");
	close(fd); /* the region holds its own dup */
	const uint8_t *p = vr_region_base(r);
	size_t size = vr_region_size(r);
	check(size == NPAGES * pg, me, "region size is the file size");
	for (size_t i = 0; i < size; i++)
		check(p[i] == pattern(i), me, "data written by the parent");
	check(vr_status(r, 0, size) == 0, me, "volatility is per process");
	printf("child:  mapped the parent's memfd, %zu bytes verified\n", size);
	fflush(stdout);
	say(sock, 'R', me);

	await(sock, 'P', me); /* the parent purged its first half */
	size_t zeros = 0;
	for (size_t i = 0; i < size / 2; i++)
		zeros += p[i] == 0;
	check(zeros == size / 2, me, "purged bytes read as zeros");
	for (size_t i = size / 2; i < size; i++)
		check(p[i] == pattern(i), me, "the parent's non-volatile half");
	printf("child:  after the parent's purge: first half reads zeros (no fault), "
	       "second half intact\n");
	vr_ctx_destroy(ctx);
	fflush(stdout); /* the caller leaves with _exit() */
	return 0;
}

/* ---- the producer ---- */
int main(void)
{
	const char *me = "parent";
	struct vr_ctx *ctx;
	struct vr_region *r;
	int sv[2];

	pg = (size_t)sysconf(_SC_PAGESIZE);
	check(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) == 0, me, "vr_ctx_new");
	check(vr_region_new(ctx, "shared", NPAGES * pg, 0, &r) == 0, me, "vr_region_new");
	uint8_t *p = vr_region_base(r);
	for (size_t i = 0; i < NPAGES * pg; i++)
		p[i] = pattern(i);
	check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, me, "socketpair");
	fflush(stdout);

	pid_t pid = fork();
	check(pid >= 0, me, "fork");
	if (pid == 0) {
		close(sv[0]);
		_exit(child(sv[1], ctx));
	}
	close(sv[1]);
	printf("parent: sending the memfd of a %zu-byte region over a UNIX socket\n", NPAGES * pg);
	fflush(stdout);
	check(send_fd(sv[0], vr_region_fd(r)) == 0, me, "send the memfd");
	await(sv[0], 'R', me);

	/* purge the first half: it becomes zeros in every mapping */
	check(vr_mark(r, 0, NPAGES * pg / 2) == VR_INTACT, me, "vr_mark");
	check(vr_ctx_purge(ctx, SIZE_MAX) == (ssize_t)(NPAGES * pg / 2), me, "vr_ctx_purge");
	check(vr_unmark(r, 0, NPAGES * pg / 2) == VR_PURGED, me, "vr_unmark reports the loss");
	printf("parent: marked and purged the first half\n");
	fflush(stdout);
	say(sv[0], 'P', me);

	int status;
	check(waitpid(pid, &status, 0) == pid, me, "waitpid");
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, me, "the child's checks");
	vr_ctx_destroy(ctx);
	printf("summary: ok\n");
	return 0;
}
