/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * coop.c - the cooperative trap protocol (rules and layout: coop.h)
 *
 * Memory ordering, the three places that matter:
 *  - a ring entry is a one-writer seqlock: the requester stores
 *    seq - 1, fences, stores the fields, then stores seq (release); a
 *    reader keeps what it read only if it saw seq before and after.
 *  - a request is visible once c->seq holds its number (seq_cst store,
 *    then FUTEX_WAKE); listeners sleep on c->seq with the value they
 *    applied last, so a post between their check and their sleep makes
 *    the futex return at once.
 *  - acknowledgement vs. the requester's sleep is a Dekker pair: the
 *    listener stores its ack, bumps ackseq, then reads waiting; the
 *    requester stores waiting, reads ackseq, then reads the acks, and
 *    sleeps on ackseq with the value it read.  All seq_cst: one of the
 *    two always sees the other.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/sys.h"
#include "coop.h"

/* atomics that take a lock would take a process-local one: useless in
 * memory shared between processes */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LONG_LOCK_FREE == 2 &&
		       ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_BOOL_LOCK_FREE == 2,
	       "cross-process atomics must be lock-free");

enum { SLOT_FREE, SLOT_CLAIMING, SLOT_LIVE };
#define GEN_MASK ((1u << 30) - 1)
#define ACK_FAILED (1ull << 32)

/* the listener's own state, futex word (private memory) */
enum { M_STARTING, M_RUNNING, M_FAILED, M_EXITED };

struct vr_coop_member {
	struct vr_coop *c;
	const struct vr_coop_ops *ops;
	void *arg;
	pthread_t thread;
	_Atomic int slot;       /* index in c->slot, -1 before the claim */
	_Atomic uint64_t token; /* our slot word while we own it */
	_Atomic uint32_t stop;  /* vr_coop_leave asked the listener to exit */
	_Atomic uint32_t state; /* M_*: the listener's progress */
	int start_err;          /* M_FAILED: why */
	pid_t pid, tid;         /* written by the listener before M_RUNNING */
	uint64_t start;         /* the listener thread's start time */
	/* written by the listener only; atomics for vr_coop_caught_up */
	_Atomic uint32_t done;    /* the newest request applied */
	_Atomic bool need_resync; /* missed requests: ops->resync still to run */
};

/* ---- small helpers ---- */

static uint64_t mkword(uint32_t pid, uint32_t gen, unsigned state)
{
	return (uint64_t)pid << 32 | (uint64_t)(gen & GEN_MASK) << 2 | state;
}
static unsigned w_state(uint64_t w)
{
	return (unsigned)(w & 3);
}
static uint32_t w_gen(uint64_t w)
{
	return (uint32_t)(w >> 2) & GEN_MASK;
}
static pid_t w_pid(uint64_t w)
{
	return (pid_t)(w >> 32);
}
static uint64_t mkack(uint32_t seq, uint32_t gen, bool failed)
{
	return seq | (failed ? ACK_FAILED : 0) | (uint64_t)gen << 33;
}

/* sleep while *w == val, at most ns; shared: a futex other processes
 * wake through their own mapping of the same file page */
static void futex_wait(_Atomic uint32_t *w, uint32_t val, uint64_t ns, bool shared)
{
	struct timespec t = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
	syscall(SYS_futex, (uint32_t *)w, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, val, &t, NULL,
		0);
}
static void futex_wake(_Atomic uint32_t *w, bool shared)
{
	syscall(SYS_futex, (uint32_t *)w, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
		NULL, 0);
}

/* state letter and start time (field 22) of a /proc stat file: 0,
 * -ENOENT/-ESRCH when the task is gone, or another -errno */
static int proc_stat(const char *path, char *state, uint64_t *start)
{
	char buf[1024];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf) - 1)) < 0 && errno == EINTR)
		;
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold anything */
	if (!p || p[1] != ' ' || !p[2])
		return -EIO;
	p += 2;
	*state = *p;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return -EIO;
		p++;
	}
	*start = strtoull(p, NULL, 10);
	return 0;
}

/* is the owner of slot word w gone?  An unreadable /proc (other than
 * "no such task") answers no: a live mapper is never dropped on doubt. */
static bool slot_dead(const struct vr_coop_slot *sl, uint64_t w)
{
	char path[64], st = 0;
	uint64_t start = 0;
	if (w_state(w) == SLOT_LIVE)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", w_pid(w),
			 atomic_load(&sl->tid));
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", w_pid(w));
	int r = proc_stat(path, &st, &start);
	if (r == -ENOENT || r == -ESRCH)
		return true;
	if (r < 0)
		return false;
	if (st == 'Z' || st == 'X' || st == 'x')
		return true;
	return w_state(w) == SLOT_LIVE && start != atomic_load(&sl->start);
}

/* free slot i if it still holds word w (a re-claimed slot has another
 * generation, so a late drop never frees a new owner's slot) */
static void slot_drop(struct vr_coop *c, int i, uint64_t w)
{
	atomic_compare_exchange_strong(&c->slot[i].word, &w, mkword(0, w_gen(w), SLOT_FREE));
}

/* ---- the ring ---- */

static uint32_t post(struct vr_coop *c, int from, int op, uint64_t off, uint64_t len)
{
	uint32_t s = atomic_load_explicit(&c->seq, memory_order_relaxed) + 1;
	struct vr_coop_req *e = &c->ring[s % VR_COOP_RING];
	atomic_store_explicit(&e->seq, s - 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&e->op, (uint32_t)op, memory_order_relaxed);
	atomic_store_explicit(&e->from, (uint32_t)from, memory_order_relaxed);
	atomic_store_explicit(&e->off, off, memory_order_relaxed);
	atomic_store_explicit(&e->len, len, memory_order_relaxed);
	atomic_store_explicit(&e->seq, s, memory_order_release);
	atomic_store(&c->seq, s);
	futex_wake(&c->seq, true);
	return s;
}

struct req {
	uint32_t op, from;
	uint64_t off, len;
};

/* request s, if the ring still holds it whole */
static bool read_req(struct vr_coop *c, uint32_t s, struct req *q)
{
	struct vr_coop_req *e = &c->ring[s % VR_COOP_RING];
	if (atomic_load_explicit(&e->seq, memory_order_acquire) != s)
		return false;
	q->op = atomic_load_explicit(&e->op, memory_order_relaxed);
	q->from = atomic_load_explicit(&e->from, memory_order_relaxed);
	q->off = atomic_load_explicit(&e->off, memory_order_relaxed);
	q->len = atomic_load_explicit(&e->len, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&e->seq, memory_order_relaxed) == s;
}

/* ---- slots ---- */

/* claim a slot for m (listener thread, tid and start known): 0 or
 * -ENOSPC.  The member is caught up with the newest request from here. */
static int claim(struct vr_coop_member *m)
{
	struct vr_coop *c = m->c;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < VR_COOP_MAX; i++) {
			struct vr_coop_slot *sl = &c->slot[i];
			uint64_t w = atomic_load(&sl->word);
			if (w_state(w) != SLOT_FREE) {
				/* second pass: the table is full, reap the dead */
				if (pass == 0 || !slot_dead(sl, w))
					continue;
				slot_drop(c, i, w);
				w = atomic_load(&sl->word);
				if (w_state(w) != SLOT_FREE)
					continue;
			}
			uint32_t gen = w_gen(w) + 1;
			if (!atomic_compare_exchange_strong(
				    &sl->word, &w, mkword((uint32_t)m->pid, gen, SLOT_CLAIMING)))
				continue;
			atomic_store(&sl->tid, m->tid);
			atomic_store(&sl->start, m->start);
			m->done = atomic_load(&c->seq);
			atomic_store(&sl->ack, mkack(m->done, gen, false));
			uint64_t live = mkword((uint32_t)m->pid, gen, SLOT_LIVE);
			atomic_store(&m->token, live);
			atomic_store(&m->slot, i);
			atomic_store(&sl->word, live);
			return 0;
		}
	}
	return -ENOSPC;
}

static void release(struct vr_coop_member *m)
{
	int i = atomic_load(&m->slot);
	if (i >= 0)
		slot_drop(m->c, i, atomic_load(&m->token));
}

/* ---- the listener ---- */

static void apply(struct vr_coop_member *m, uint32_t s, const struct req *q)
{
	struct vr_coop *c = m->c;
	int i = atomic_load(&m->slot), r = 0;
	if (q->from == (uint32_t)i + 1)
		; /* our own process's requester applies it itself */
	else if (q->op == VR_COOP_ARM)
		r = m->ops->arm(m->arg, q->off, q->len);
	else if (q->op == VR_COOP_DISARM)
		r = m->ops->disarm(m->arg, q->off, q->len);
	else if (q->op == VR_COOP_RESYNC)
		m->need_resync = true; /* run by serve() once nothing is pending */
	else
		r = -EINVAL;
	if (r < 0 && q->op != VR_COOP_ARM)
		m->need_resync = true; /* markers may be left on live bytes */
	m->done = s;
	uint64_t tok = atomic_load(&m->token);
	if (atomic_load(&c->slot[i].word) != tok)
		return; /* dropped: never write another owner's ack */
	atomic_store(&c->slot[i].ack, mkack(s, w_gen(tok), r < 0));
	atomic_fetch_add(&c->ackseq, 1);
	if (atomic_load(&c->waiting))
		futex_wake(&c->ackseq, true);
}

/* apply every request after m->done up to s, in order; on a gap apply
 * the newest and leave the rest to resync */
static void catch_up(struct vr_coop_member *m, uint32_t s)
{
	struct vr_coop *c = m->c;
	struct req q;
	if (s - m->done <= VR_COOP_RING) {
		uint32_t i = m->done;
		do {
			if (!read_req(c, ++i, &q))
				goto gap;
			apply(m, i, &q);
		} while (i != s);
		return;
	}
gap:
	/* a failed read means a newer request overwrote it: c->seq moved */
	do
		s = atomic_load(&c->seq);
	while (!read_req(c, s, &q) && !atomic_load(&m->stop));
	if (atomic_load(&m->stop))
		return;
	m->need_resync = true; /* before done moves: never caught up meanwhile */
	apply(m, s, &q);
}

static void serve(struct vr_coop_member *m)
{
	struct vr_coop *c = m->c;
	while (!atomic_load(&m->stop)) {
		int i = atomic_load(&m->slot);
		if (atomic_load(&c->slot[i].word) != atomic_load(&m->token)) {
			/* dropped while alive (coop.h DEATH): claim again */
			m->need_resync = true;
			if (claim(m) < 0) {
				futex_wait(&c->seq, m->done, 100000000u, true);
				continue;
			}
		}
		uint32_t s = atomic_load(&c->seq);
		if (s != m->done) {
			catch_up(m, s);
			continue;
		}
		if (m->need_resync) {
			int r = m->ops->resync(m->arg, m);
			if (r == 0)
				m->need_resync = false;
			else if (!vr_coop_pending(m))
				futex_wait(&c->seq, m->done, 10000000u, true);
			continue;
		}
		/* a periodic wake-up: a request posted by a requester that
		 * died before its FUTEX_WAKE is seen within a second */
		futex_wait(&c->seq, m->done, 1000000000u, true);
	}
}

static void set_state(struct vr_coop_member *m, uint32_t st)
{
	atomic_store(&m->state, st);
	futex_wake(&m->state, false);
}

static void *listener_main(void *arg)
{
	struct vr_coop_member *m = arg;
	char path[64], st;
	m->tid = gettid();
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", m->tid);
	int r = proc_stat(path, &st, &m->start);
	if (r == 0)
		r = claim(m);
	if (r < 0) {
		m->start_err = r;
		set_state(m, M_FAILED);
		return NULL;
	}
	set_state(m, M_RUNNING);
	serve(m);
	release(m);
	set_state(m, M_EXITED);
	return NULL;
}

/* ---- the interface ---- */

int vr_coop_join(struct vr_coop *c, const struct vr_coop_ops *ops, void *arg,
		 struct vr_coop_member **out)
{
	struct vr_coop_member *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->c = c;
	m->ops = ops;
	m->arg = arg;
	m->pid = getpid();
	atomic_init(&m->slot, -1);
	/* the listener takes no application signal */
	int err = vr_thread_start(&m->thread, listener_main, m, "vrange-coop");
	if (err) {
		free(m);
		return -err;
	}
	while (atomic_load(&m->state) == M_STARTING)
		futex_wait(&m->state, M_STARTING, 100000000u, false);
	if (atomic_load(&m->state) == M_FAILED) {
		int r = m->start_err;
		pthread_join(m->thread, NULL);
		free(m);
		return r;
	}
	*out = m;
	return 0;
}

void vr_coop_leave(struct vr_coop_member *m)
{
	if (!m)
		return;
	atomic_store(&m->stop, 1);
	/* the listener may have checked stop just before it slept on c->seq:
	 * wake until it is out (spurious wake-ups of other listeners are
	 * harmless, they sleep again) */
	while (atomic_load(&m->state) != M_EXITED) {
		futex_wake(&m->c->seq, true);
		futex_wait(&m->state, M_RUNNING, 1000000u, false);
	}
	pthread_join(m->thread, NULL);
	free(m);
}

void vr_coop_leave_inherited(struct vr_coop_member *m)
{
	free(m);
}

bool vr_coop_pending(const struct vr_coop_member *m)
{
	return atomic_load(&m->c->seq) != m->done || atomic_load(&m->stop);
}

int vr_coop_sync_self(const struct vr_coop_member *m, int timeout_ms)
{
	if (pthread_equal(pthread_self(), m->thread))
		return 0; /* the listener itself: it runs ops only caught up */
	uint32_t s = atomic_load(&m->c->seq);
	uint64_t deadline = vr_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (atomic_load(&m->done) != s && !atomic_load(&m->stop)) {
		if (vr_now_ns() >= deadline)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
	return 0;
}

bool vr_coop_caught_up(const struct vr_coop_member *m)
{
	return atomic_load(&m->done) == atomic_load(&m->c->seq) && !atomic_load(&m->need_resync);
}

int vr_coop_count(const struct vr_coop *c)
{
	int n = 0;
	for (int i = 0; i < VR_COOP_MAX; i++)
		n += w_state(atomic_load(&c->slot[i].word)) == SLOT_LIVE;
	return n;
}

/* live mappers other than slot self that have not answered request s
 * (*failed: those that answered with a failure); check: look for the
 * dead among them and drop them */
static int unanswered(struct vr_coop *c, int self, uint32_t s, bool check, int *failed)
{
	int n = 0;
	*failed = 0;
	for (int i = 0; i < VR_COOP_MAX; i++) {
		struct vr_coop_slot *sl = &c->slot[i];
		uint64_t w = atomic_load(&sl->word);
		if (w_state(w) != SLOT_LIVE || i == self)
			continue;
		uint64_t a = atomic_load(&sl->ack);
		if ((uint32_t)a == s && a >> 33 == w_gen(w)) {
			*failed += !!(a & ACK_FAILED);
			continue;
		}
		if (check && slot_dead(sl, w)) {
			slot_drop(c, i, w);
			continue;
		}
		n++;
	}
	return n;
}

int vr_coop_request(struct vr_coop *c, struct vr_coop_member *self, int op, uint64_t off,
		    uint64_t len, int timeout_ms)
{
	if (op < VR_COOP_ARM || op > VR_COOP_RESYNC || timeout_ms < 0)
		return -EINVAL;
	int me = self ? atomic_load(&self->slot) : -1;
	if (me >= 0 && atomic_load(&c->slot[me].word) != atomic_load(&self->token))
		me = -1; /* our slot was lost: our listener serves this one too */
	uint32_t s = post(c, me + 1, op, off, len);
	uint64_t t = vr_now_ns(), deadline = t + (uint64_t)timeout_ms * 1000000u;
	uint64_t step = 1000000u, next_check = t + step;
	bool check = false;
	int failed, n;
	atomic_store(&c->waiting, 1);
	for (;;) {
		uint32_t v = atomic_load(&c->ackseq);
		n = unanswered(c, me, s, check, &failed);
		check = false;
		if (!n)
			break;
		t = vr_now_ns();
		if (t >= deadline) {
			/* the dead are not counted as late */
			if (timeout_ms)
				n = unanswered(c, me, s, true, &failed);
			break;
		}
		if (t >= next_check) {
			check = true;
			step *= 2;
			next_check = t + step;
			continue;
		}
		futex_wait(&c->ackseq, v, (deadline < next_check ? deadline : next_check) - t,
			   true);
	}
	atomic_store(&c->waiting, 0);
	return n + failed;
}
