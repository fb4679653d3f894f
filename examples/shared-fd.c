/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shared-fd.c - a producer and a consumer sharing one volatility state
 *
 * Shows: a region made with VR_REGION_SHARED keeps its volatility state in
 * its memfd (api.md S27-S33), so every process that maps the file marks,
 * pins and sees purges of the same ranges, as with ashmem:
 *   - the producer creates the shared region, decodes "tiles" into it and
 *     marks them volatile (it does not need them now);
 *   - it sends the memfd over a UNIX socket (SCM_RIGHTS) to a consumer,
 *     here a fork()ed child, which joins the state with
 *     vr_region_from_fd() and pins (vr_unmark) the tile it is using;
 *   - the producer purges everything purgeable (as memory pressure
 *     would): the consumer's pinned tile is non-volatile for every
 *     process, so it survives; the others are discarded for everybody;
 *   - the consumer pins a second tile and gets VR_PURGED: it regenerates;
 *   - it touches a third tile without pinning it: the page traps in the
 *     consumer's own mapping and its fault handler regenerates the tile
 *     (a discarded page never reads as zeros in any process, S28).
 *
 * A memfd made WITHOUT VR_REGION_SHARED keeps per-process state (S17):
 * a process that maps it with vr_region_from_fd() starts wholly
 * non-volatile, and another process's purge shows there as zeros, without
 * a trap.  Processes that share a file trust each other (S33).
 *
 * Build (installed library):
 *   cc -o shared-fd shared-fd.c $(pkg-config --cflags --libs libvrange)
 * Run:
 *   ./shared-fd      (exit status 77: shared regions unavailable here)
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

#define NTILES 8
#define TILE (64 * 1024)
/* each tile is followed by a one-page gap: adjacent volatile ranges
 * coalesce into one range (S3), and a purge takes a whole range */
static size_t stride;
#define OFF(t) ((size_t)(t)*stride)

static void check(bool ok, const char *who, const char *what)
{
	if (!ok) {
		fprintf(stderr, "shared-fd %s: FAILED: %s\n", who, what);
		exit(1);
	}
}

/* "decoding" tile t: what the producer and the consumer both can make */
static void decode(unsigned t, uint8_t *dst)
{
	for (size_t i = 0; i < TILE; i++)
		dst[i] = (uint8_t)(t * 31 + i * 7 + 1);
}

static bool tile_ok(const uint8_t *base, unsigned t)
{
	static uint8_t want[TILE];
	decode(t, want);
	return memcmp(base + OFF(t), want, TILE) == 0;
}

/* ---- fd passing over a UNIX socket ---- */
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

/* one-byte messages to take turns */
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
static unsigned handler_calls;

/* Runs in the consumer, in signal context, when it touches a discarded
 * page: regenerate the whole tile and unmark it in one step, so no
 * thread of any process ever reads zeros in it, then re-run the access. */
static int regenerate(struct vr_region *r, size_t off, size_t len, void *addr, void *arg)
{
	static uint8_t buf[TILE];
	(void)addr;
	(void)arg;
	if (off % stride || len != TILE)
		return VR_FAULT_SIGBUS; /* not one of our tiles */
	decode((unsigned)(off / stride), buf);
	handler_calls++;
	return vr_unmark_fill(r, off, len, buf) == VR_PURGED ? VR_FAULT_RETRY : VR_FAULT_SIGBUS;
}

static int consumer(int sock)
{
	const char *me = "consumer";
	struct vr_ctx *ctx;
	struct vr_region *r;

	int fd = recv_fd(sock);
	if (fd < 0)
		return 1; /* no fd: the producer gave up, and says why */
	check(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) == 0, me, "vr_ctx_new");
	/* a memfd made with VR_REGION_SHARED: this joins its state */
	check(vr_region_from_fd(ctx, fd, 0, &r) == 0, me, "vr_region_from_fd");
	close(fd); /* the region holds its own dup */
	check(vr_region_set_fault_handler(r, regenerate, NULL) == 0, me, "fault handler");
	const uint8_t *p = vr_region_base(r);
	check(vr_region_size(r) == NTILES * stride, me, "region size is the data size");
	check(vr_status(r, 0, NTILES * stride) == VR_STATE_VOLATILE, me,
	      "the producer's marks are seen here");

	/* pin tile 0 while using it: non-volatile for every process */
	check(vr_unmark(r, 0, TILE) == VR_INTACT && tile_ok(p, 0), me, "pin tile 0");
	printf("consumer: joined the shared state; pinned tile 0 (intact)\n");
	fflush(stdout);
	say(sock, 'R', me);

	await(sock, 'P', me); /* the producer purged what it could */
	check(tile_ok(p, 0), me, "the pinned tile survived the producer's purge");
	check(vr_status(r, OFF(1), TILE) == (VR_STATE_VOLATILE | VR_STATE_PURGED), me,
	      "the producer's purge is seen here");
	/* pin tile 1: the call reports the loss, we regenerate */
	check(vr_unmark(r, OFF(1), TILE) == VR_PURGED, me, "pin tile 1 reports the purge");
	decode(1, (uint8_t *)p + OFF(1));
	/* touch tile 2 without pinning: the trap is in this mapping too */
	check(p[OFF(2) + 100] == (uint8_t)(2 * 31 + 100 * 7 + 1) && handler_calls == 1, me,
	      "the fault handler regenerated tile 2");
	check(tile_ok(p, 1) && tile_ok(p, 2), me, "tiles 1 and 2 regenerated");
	printf("consumer: after the purge: tile 0 intact (pinned), tile 1 VR_PURGED "
	       "(regenerated), tile 2 trapped here (fault handler regenerated it)\n");
	/* done with them: unpin tiles 0-2 for everybody */
	for (unsigned t = 0; t < 3; t++)
		check(vr_mark(r, OFF(t), TILE) == VR_INTACT, me, "unpin");
	vr_ctx_destroy(ctx);
	fflush(stdout); /* the caller leaves with _exit() */
	return 0;
}

/* ---- the producer ---- */
int main(void)
{
	const char *me = "producer";
	struct vr_ctx *ctx;
	struct vr_region *r;
	int sv[2];

	stride = TILE + (size_t)sysconf(_SC_PAGESIZE);
	/* the consumer is another program: here a child forked before the
	 * producer has any library state (a child of fork() may only destroy
	 * the handles it inherits, S18; it joins through the fd like anyone) */
	check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, me, "socketpair");
	fflush(stdout);
	pid_t pid = fork();
	check(pid >= 0, me, "fork");
	if (pid == 0) {
		close(sv[0]);
		_exit(consumer(sv[1]));
	}
	close(sv[1]);

	check(vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) == 0, me, "vr_ctx_new");
	int rc = vr_region_new(ctx, "tiles", NTILES * stride, VR_REGION_SHARED, &r);
	if (rc == -EOPNOTSUPP) {
		/* no way to trap a shared mapping here (S32): userfaultfd
		 * refused, e.g. by a seccomp filter or under valgrind */
		printf("shared-fd: shared regions unavailable here (%s)\n", strerror(-rc));
		vr_ctx_destroy(ctx);
		close(sv[0]); /* the consumer gets EOF and fails quietly */
		waitpid(pid, NULL, 0);
		return 77;
	}
	check(rc == 0, me, "vr_region_new(VR_REGION_SHARED)");
	uint8_t *p = vr_region_base(r);
	for (unsigned t = 0; t < NTILES; t++) {
		decode(t, p + OFF(t));
		check(vr_mark(r, OFF(t), TILE) == VR_INTACT, me, "vr_mark");
	}
	printf("producer: decoded %d tiles of %d KiB and marked them volatile\n", NTILES,
	       TILE / 1024);
	fflush(stdout);
	check(send_fd(sv[0], vr_region_fd(r)) == 0, me, "send the memfd");
	await(sv[0], 'R', me);

	/* purge everything purgeable, as memory pressure would: every tile
	 * but the one the consumer pinned */
	ssize_t got = vr_ctx_purge(ctx, SIZE_MAX);
	check(got == (NTILES - 1) * TILE, me, "the purge spared the consumer's pinned tile");
	check(vr_status(r, OFF(0), TILE) == 0 && tile_ok(p, 0), me, "tile 0 is pinned and intact");
	printf("producer: purged %zd KiB: every tile but the consumer's pinned one\n", got / 1024);
	fflush(stdout);
	say(sv[0], 'P', me);

	int status;
	check(waitpid(pid, &status, 0) == pid, me, "waitpid");
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, me, "the consumer's checks");
	/* what the consumer regenerated is in the file, unpinned again */
	for (unsigned t = 0; t < 3; t++)
		check(vr_status(r, OFF(t), TILE) == VR_STATE_VOLATILE &&
			      vr_unmark(r, OFF(t), TILE) == VR_INTACT && tile_ok(p, t),
		      me, "the consumer's tiles, seen from here");
	check(vr_unmark(r, OFF(3), TILE) == VR_PURGED, me, "tile 3 stays purged");
	printf("producer: tiles 0-2 as the consumer left them (intact); tile 3 purged\n");
	vr_ctx_destroy(ctx);
	printf("summary: ok\n");
	return 0;
}
