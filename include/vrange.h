/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vrange.h - purgeable memory for Linux: volatile byte ranges on memfd
 *
 * libvrange implements John Stultz's 2012 "volatile ranges" semantics
 * (and Android ashmem's pin/unpin) in user space.  A *region* is a memfd
 * mapped MAP_SHARED read/write into this process, or private anonymous
 * memory (VR_REGION_ANON, or memory the caller already owns, adopted with
 * vr_region_adopt()).  Byte ranges of a region
 * can be marked *volatile*: the library may then discard them, whole range
 * at a time, least-recently-marked first, when the application asks, when a
 * byte limit is exceeded, or when the system or cgroup runs short of memory.
 * Unmarking reports whether anything was lost.  Touching discarded data
 * either calls a per-region fault handler (lazy regeneration) or raises
 * SIGBUS, as the kernel proposal did.
 *
 * Conventions
 *   - Every function returns 0 (or a documented non-negative value) on
 *     success and a negative errno on failure.  errno is not part of the
 *     contract.
 *   - Offsets and lengths are bytes; (off, len) is the half-open interval
 *     [off, off + len).
 *   - Handles are opaque.
 *
 * Thread safety (synchronization table)
 *   - Every function may be called from any thread at any time.
 *   - Calls on different regions do not serialize on a shared lock in the
 *     intact case; calls on one region serialize on that region's lock.
 *   - The purge engine (vr_ctx_purge, vr_ctx_set_limit, pressure, the
 *     monitor thread and the byte-limit and memory-limit check in vr_mark)
 *     runs one purge per ctx at a time and holds one region lock at a
 *     time, for one range.
 *   - vr_region_destroy / vr_ctx_destroy must not race with other calls on
 *     the same handle, nor with accesses to the region's memory.
 *   - Fault handlers (vr_fault_fn) run in signal context in the faulting
 *     thread and may call any vr_* function.  They must return (not leave
 *     with siglongjmp, nor let a SIGBUS handler jump out of them): a
 *     handler call is tracked until it returns (see
 *     vr_region_set_fault_handler()).  The same holds for purge handlers
 *     (vr_purge_fn) and log functions (vr_log_fn): none may leave with
 *     longjmp or pthread_exit, or replacing it waits for ever.
 *   - Signal handlers: a vr_* call made from an asynchronous signal
 *     handler on a region (or ctx) that the interrupted code of the same
 *     thread is using returns -EDEADLK instead of waiting for a lock its
 *     own thread holds; a touch of a discarded page there gets SIGBUS.
 *     A purge from such a handler (vr_ctx_purge, vr_ctx_set_limit,
 *     vr_ctx_notify_pressure, the limit check of vr_mark) returns
 *     -EDEADLK whenever the interrupted code is inside any vr_* call:
 *     it could wait for a purge in another thread that waits for a lock
 *     the interrupted call holds.  Calls that may allocate (vr_mark,
 *     vr_unmark, vr_obj_new, the setters) take malloc's locks: a handler
 *     that may interrupt malloc must not make them.
 *   - Thread cancellation (since 0.3): no vr_* call is a cancellation
 *     point, and none runs a fault handler, purge handler or log function
 *     with cancellation enabled: a deferred pthread_cancel pending or
 *     arriving meanwhile acts at the thread's next cancellation point
 *     after the call or the faulting access.  Asynchronous cancellation
 *     (PTHREAD_CANCEL_ASYNCHRONOUS) must not be enabled around vr_* calls
 *     or accesses to volatile memory.
 *
 * Signals
 *   The first successful vr_ctx_new() installs a process-wide SIGSEGV
 *   handler (SA_SIGINFO|SA_ONSTACK) and keeps the one it replaced; faults
 *   that are not on discarded pages of this library's regions are passed to
 *   that previous handler (or get the default action).  Applications that
 *   install a SIGSEGV handler later must chain to the one they replace.
 *   Where shared regions use userfaultfd (VR_REGION_SHARED, since 0.2) a
 *   discarded page of a shared region traps with SIGBUS BUS_ADRERR
 *   instead, and the same call also installs a SIGBUS handler the same way: SIGBUS that is not a trap
 *   on a discarded page (sent by kill/tgkill/sigqueue, or a kernel SIGBUS
 *   elsewhere), and the library's own SIGBUS for a fault that no handler
 *   fixed, go to the SIGBUS handler it replaced, once each.  An application
 *   SIGBUS handler is best installed before the first vr_ctx_new(); one
 *   installed later must chain to the library's (with SA_NODEFER, since
 *   the library's SIGBUS for an unfixed fault then arrives nested in it).
 *   Otherwise the library's SIGBUS arrives as the kernel's would: when the
 *   library's handler returns, at the faulting instruction, with its
 *   context (since 0.3).  A thread that touches a discarded page while it
 *   blocks SIGSEGV (SIGBUS under userfaultfd), for example inside a signal
 *   handler whose sa_mask blocks everything, is killed by that signal, as
 *   the kernel does with a fault signal it cannot deliver: no fault
 *   handler runs.
 *
 * System calls and EFAULT
 *   A system call that reads or writes a discarded page (for example
 *   write(fd, p, n) with p in a purged range) fails with EFAULT instead of
 *   trapping: the kernel does not deliver signals for its own accesses.
 *   Unmark (or let the fault handler unmark) before passing volatile memory
 *   to the kernel.  One exception: /proc/PID/mem (and ptrace peeks, as
 *   debuggers use) force access through PROT_NONE, so where a discarded
 *   range is trapped with mprotect (the mprotect backend, and ranges of
 *   2 MiB or more under the guard backend) they read zeros and re-allocate
 *   the punched page instead of failing; guard markers make them fail.
 *   A shared region trapped with userfaultfd: a discarded page is a hole
 *   of the memfd and system calls fail with EFAULT; to keep non-volatile
 *   pages that were never written readable and writable by the kernel, a
 *   shared file's pages are all made present (allocated, zero) when it is
 *   created, and a purged page again when it is unmarked.
 *
 * The library's memory and the application
 *   Regions' and objects' memory (adopted spans included, while adopted)
 *   keeps the protection and the backing the library gave it: changing
 *   them with mprotect, mremap, munmap, or holes of one's own (fallocate
 *   PUNCH_HOLE on vr_region_fd(), MADV_REMOVE) is not supported.  Where a
 *   discarded range is trapped with mprotect (the mprotect backend, and
 *   ranges of 2 MiB or more under the guard backend) an application
 *   mprotect removes the trap and discarded bytes then read 0; a hole
 *   punched in non-volatile bytes of a shared region trapped with
 *   userfaultfd faults with SIGBUS for ever.  Advice that frees nothing
 *   of the file (MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED, MADV_HUGEPAGE,
 *   MADV_DONTNEED on a memfd mapping), mlock and msync keep every promise
 *   (a purge skips locked pages it cannot free: where a range is
 *   trapped with guard markers, which cannot be placed on locked pages, a
 *   range holding a locked page is skipped, VR_STAT_SKIPPED; the mprotect
 *   trap, and userfaultfd for shared regions, purge it as any other,
 *   since a hole punch frees a memfd's locked pages too).
 *
 * fork()
 *   Region mappings are MADV_DONTFORK: a child has none of them.  In the
 *   child, inherited handles may only be destroyed (which frees the child's
 *   copies and closes its fds without touching the parent's memory); every
 *   other call on them fails with -EINVAL.  The child may create new
 *   contexts and regions.  Adopted spans (vr_region_adopt()) are the
 *   caller's memory and are inherited as such: in the child their
 *   discarded pages stay inaccessible (a touch is SIGSEGV) until the child
 *   destroys the inherited region, which makes them readable and writable
 *   in the child only, reading 0.  (In a span the application advised
 *   MADV_WIPEONFORK the child reads every page as 0: there discarded
 *   pages trapped with guard markers do not fault, those trapped with
 *   mprotect do.)
 *
 * Environment
 *   VRANGE_DEBUG=1        log purges, pressure events, sources, skips and
 *                         fatal faults to stderr
 *   VRANGE_MONITOR=off|psi|cgroup2|cgroup1|meminfo|limit
 *                         force the monitor's pressure source (limit:
 *                         the limit watcher alone; off: no source at all)
 *   VRANGE_MEMORY_LIMIT=BYTES|off
 *                         since 0.2: use BYTES (k, m, g suffixes) as
 *                         the process's memory limit instead of the one
 *                         detected from its cgroups, or watch none; since
 *                         0.3 BYTES limits this process's own memory
 *                         (RssAnon + RssShmem), not its cgroup's; any
 *                         other value (0, "512MB", "1.5g") is ignored as
 *                         if unset, with a VRANGE_DEBUG line only
 *   VRANGE_CGROUP_DIR=DIR use DIR as the process's cgroup v2 directory
 *   VRANGE_TRAP=guard|mprotect|uffd
 *                         force the trap backend (uffd: since 0.2;
 *                         vr_ctx_new() fails with -EOPNOTSUPP where the
 *                         forced backend does not work, e.g. userfaultfd
 *                         refused by a seccomp filter, or guard markers on
 *                         a kernel without them; any other value is
 *                         ignored with one VR_LOG_WARNING line).  Shared regions
 *                         (VR_REGION_SHARED) use userfaultfd wherever it
 *                         works whatever the backend, except under a
 *                         forced guard: then the guard protocol
 */
#ifndef VRANGE_H
#define VRANGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

/* the library version this header belongs to (libvrange.pc's Version) */
#define VRANGE_VERSION_MAJOR 0
#define VRANGE_VERSION_MINOR 2
#define VRANGE_VERSION_MICRO 0

#ifdef __cplusplus
extern "C" {
#endif

/** One LRU + budget + pressure monitor; owns regions. */
struct vr_ctx;
/** One memfd mapped MAP_SHARED read/write in this process, or a span of
 * private anonymous memory (VR_REGION_ANON, vr_region_adopt()). */
struct vr_region;
/** One purgeable object, owned by its ctx (0.2). */
struct vr_obj;
/** A group of objects of one ctx, with a priority, a limit and a purge
 * handler of its own (0.3). */
struct vr_group;

/* results of vr_mark / vr_unmark */
#define VR_INTACT 0
#define VR_PURGED 1

/* bits of vr_status() */
#define VR_STATE_VOLATILE (1u << 0) /* some byte of the range is volatile */
#define VR_STATE_PURGED (1u << 1)   /* some byte lies in a purged volatile range */

/* vr_region_new flags */
#define VR_REGION_ANON (1u << 0) /* private anonymous memory, no fd (since 0.2) */
#define VR_REGION_SHARED                                                                           \
	(1u << 1) /* the volatility state lives in the memfd and is
				      shared by every process that maps it (0.2) */

/* vr_ctx_new flags */
#define VR_CTX_NO_MONITOR (1u << 0) /* start no pressure-monitor thread */

/* fault handler results */
#define VR_FAULT_RETRY 0  /* handler repopulated: re-run the access */
#define VR_FAULT_SIGBUS 1 /* deliver SIGBUS as the kernel would     */

enum vr_pressure {
	VR_PRESSURE_NONE = 0,
	VR_PRESSURE_MODERATE = 1,
	VR_PRESSURE_CRITICAL = 2,
};

enum vr_stat {
	VR_STAT_REGIONS,         /* live regions in the ctx                        */
	VR_STAT_RANGES,          /* volatile ranges (purged or not) in the tree    */
	VR_STAT_VOLATILE_BYTES,  /* bytes in unpurged volatile ranges              */
	VR_STAT_PURGED_BYTES,    /* bytes in purged, still-volatile ranges         */
	VR_STAT_RECLAIMED_BYTES, /* cumulative bytes returned to the kernel        */
	VR_STAT_PURGES,          /* cumulative ranges purged                       */
	VR_STAT_FAULTS,          /* cumulative faults on purged ranges handled     */
	VR_STAT_PRESSURE_EVENTS, /* cumulative pressure signals acted on           */
	VR_STAT_SKIPPED,         /* cumulative purges skipped (trap not armable)   */
	/* Since 0.2: the memory-limit watcher */
	VR_STAT_LIMIT_EVENTS,     /* cumulative limit-threshold crossings purged for */
	VR_STAT_LIMIT_PURGES,     /* cumulative ranges purged by those crossings     */
	VR_STAT_BUDGET,           /* the budget vr_mark keeps to now, 0 = none       */
	VR_STAT_LIMIT_LATENCY_NS, /* longest crossing seen -> first range purged     */
	VR_STAT_OBJECTS,          /* 0.2: live objects in the ctx, pinned or not    */
	VR_STAT_FOOTPRINT,        /* 0.2: bytes the ctx's regions and objects hold
				     in the kernel now (memfd blocks, resident
				     anonymous pages), kept for reuse included   */
	VR_STAT_SKIPPED_BUSY,     /* 0.2: cumulative purges of shared ranges skipped
				     because a mapping process did not arm its
				     trap in time (guard protocol)               */
	VR_STAT_REPAIRS,          /* 0.2: cumulative repairs of a shared file's
				     state this ctx made after finding its lock
				     holder dead                                 */
	/* Since 0.3: what the limit watcher sees, 0 without a limit */
	VR_STAT_LIMIT_USAGE,      /* the usage it holds against the limit: the
				     cgroup's usage less LIMIT_FILE_CACHE, or
				     this process's own memory under
				     VRANGE_MEMORY_LIMIT (bytes, last poll)      */
	VR_STAT_LIMIT_FILE_CACHE, /* the reclaimable file cache it left out of
				     that usage (bytes, last poll)               */
};

/* ---------------------------------------------------------------------- */
/* context                                                                 */

/**
 * vr_ctx_new - create a context (an LRU, a byte limit, a pressure monitor)
 * @flags: 0 or VR_CTX_NO_MONITOR
 * @out: receives the new context
 *
 * Unless VR_CTX_NO_MONITOR is given, starts one monitor thread that purges
 * this context's volatile ranges when memory pressure is detected (see
 * vr_ctx_monitor_source()).  A missing pressure source is not an error.
 * The first successful call in a process installs the library's SIGSEGV
 * handler (and, under the userfaultfd trap backend, its SIGBUS handler); a
 * failing call installs nothing.  The first call also chooses the trap
 * backend for the life of the process, by probes that need a few fds and
 * some memory: a call that lacks them fails with that errno (-EMFILE,
 * -ENFILE, -ENOMEM) and chooses nothing, so that a later call chooses as
 * if the shortage never happened.
 *
 * Returns: 0, -EINVAL (NULL @out, unknown flag), -ENOMEM, -EOPNOTSUPP
 * (VRANGE_TRAP forces a backend that does not work here), or the negative
 * errno of a failed thread or fd creation.
 * Since: 0.1
 * Context: allocates; may create a thread; not from a fault handler.
 */
int vr_ctx_new(unsigned flags, struct vr_ctx **out);

/**
 * vr_ctx_destroy - destroy a context and every region it still owns
 * @ctx: the context, or NULL (no-op)
 *
 * Stops and joins the monitor thread, unmaps and closes every region.
 * A @ctx that is not live (destroyed already, or never returned by
 * vr_ctx_new()) is a programming error: since 0.3 the call prints
 * "libvrange: vr_ctx_destroy(PTR): not a live ctx" on stderr and aborts
 * the process (SIGABRT) instead of touching freed memory.
 * Since: 0.1
 * Context: may block until a running purge finishes; not from a fault
 * handler.
 */
void vr_ctx_destroy(struct vr_ctx *ctx);

/**
 * vr_ctx_set_limit - cap the context's unpurged volatile bytes
 * @ctx: the context
 * @bytes: the cap, 0 for no limit
 *
 * When this call returns and whenever vr_mark() returns, the context's
 * unpurged volatile bytes are at most @bytes, or nothing purgeable is left;
 * ranges are purged least-recently-marked first to get there.
 *
 * Returns: 0, -EINVAL, or -EDEADLK when a purge is needed and the call
 * comes from a signal handler that interrupted this thread inside a vr_*
 * call (the limit is set, not enforced).
 * Since: 0.1
 * Context: may purge (system calls); may block on region locks.
 */
int vr_ctx_set_limit(struct vr_ctx *ctx, size_t bytes);

/**
 * vr_ctx_purge - purge volatile ranges, least-recently-marked first
 * @ctx: the context
 * @bytes: purge until at least this many bytes were reclaimed or nothing
 *         purgeable is left; 0 purges nothing, SIZE_MAX purges everything
 *
 * Only whole pages are reclaimed; a range without a whole page is never
 * chosen.  A range whose trap cannot be armed (VMA limit) is skipped and
 * counted in VR_STAT_SKIPPED.
 *
 * Returns: the bytes reclaimed (a multiple of the page size), -EINVAL, or
 * -EDEADLK (as vr_ctx_set_limit(): nothing is purged).
 * Since: 0.1
 * Context: system calls; may block on region locks.
 */
ssize_t vr_ctx_purge(struct vr_ctx *ctx, size_t bytes);

/**
 * vr_ctx_notify_pressure - act on a memory-pressure signal
 * @ctx: the context
 * @level: VR_PRESSURE_NONE (does nothing), VR_PRESSURE_MODERATE (purge
 *         until unpurged volatile bytes are at most half of what they were)
 *         or VR_PRESSURE_CRITICAL (purge everything purgeable)
 *
 * MODERATE and CRITICAL each add one to VR_STAT_PRESSURE_EVENTS.
 *
 * Returns: the bytes reclaimed, -EINVAL (NULL ctx, unknown level), or
 * -EDEADLK (as vr_ctx_set_limit(): the event is counted, nothing is
 * purged).
 * Since: 0.1
 * Context: system calls; may block on region locks.
 */
ssize_t vr_ctx_notify_pressure(struct vr_ctx *ctx, enum vr_pressure level);

/**
 * vr_ctx_stat - read a statistic
 * @ctx: the context (NULL returns 0)
 * @which: a VR_STAT_* value (unknown values return 0)
 *
 * Returns: the statistic.
 * Since: 0.1
 * Context: lock-free for the gauges; takes the region-list lock briefly
 * (VR_STAT_FOOTPRINT, and the gauges of a ctx that maps shared files, to
 * read what other processes changed).  Called from a signal handler that
 * interrupted its own thread inside a vr_* call it never waits for that
 * thread: VR_STAT_FOOTPRINT is then 0, the gauges as last synced.
 */
uint64_t vr_ctx_stat(struct vr_ctx *ctx, enum vr_stat which);

/** Pressure sources reported by vr_ctx_monitor_source(). */
enum vr_monitor_source {
	VR_MONITOR_NONE = 0,    /* no monitor thread, or no source works / off */
	VR_MONITOR_CGROUP2 = 1, /* cgroup v2 memory.pressure / memory.events   */
	VR_MONITOR_PSI = 2,     /* system PSI trigger on /proc/pressure/memory */
	VR_MONITOR_CGROUP1 = 3, /* cgroup v1 memory.pressure_level              */
	VR_MONITOR_MEMINFO = 4, /* polling /proc/meminfo MemAvailable           */
	VR_MONITOR_LIMIT = 5,   /* Since 0.2: the memory-limit watcher          */
};

/**
 * vr_ctx_monitor_source - which pressure source the monitor uses
 * @ctx: the context
 *
 * The pressure source is one of cgroup2, psi, cgroup1, meminfo; the
 * limit watcher runs beside it and is reported by
 * vr_ctx_monitor_sources(), never here.
 *
 * Returns: a vr_monitor_source value (VR_MONITOR_NONE for NULL, for
 * VR_CTX_NO_MONITOR, or when no pressure source works).
 * Since: 0.1
 * Context: lock-free.
 */
int vr_ctx_monitor_source(struct vr_ctx *ctx);

/**
 * vr_monitor_source_name - printable name of a vr_monitor_source value
 * @source: the value
 *
 * Returns: "none", "cgroup2", "psi", "cgroup1", "meminfo", "limit" (since
 * 0.2) or "unknown".
 * Since: 0.1
 * Context: pure.
 */
const char *vr_monitor_source_name(int source);

/**
 * vr_ctx_monitor_sources - every source the monitor runs
 * @ctx: the context
 *
 * The monitor runs a set of sources together: the pressure source of
 * vr_ctx_monitor_source() and, when the process has a memory limit, the
 * limit watcher (vr_ctx_memory_limit()).  Bit (1u << VR_MONITOR_X) is set for each source
 * running now; a source that is lost clears its bit.
 *
 * Returns: the bitmask; 0 for NULL, VR_CTX_NO_MONITOR, or no source.
 * Since: 0.2
 * Context: lock-free.
 */
unsigned vr_ctx_monitor_sources(struct vr_ctx *ctx);

/**
 * vr_ctx_memory_limit - the memory limit the monitor keeps the ctx under
 * @ctx: the context
 *
 * When the process runs under a memory limit (cgroup v1
 * memory.limit_in_bytes, or cgroup v2 memory.max or memory.high, of its
 * own cgroup or of an ancestor: the smallest applies), a ctx with a
 * monitor keeps that limit from being reached because of its unpurged
 * volatile bytes: when usage crosses a threshold below the limit it
 * purges, least recently marked first, until usage is back under a
 * target below that threshold (never everything at once for a limit
 * event), and whenever vr_mark returns, the ctx's unpurged volatile bytes
 * are within a budget derived from the remaining headroom (enforced as
 * vr_ctx_set_limit()'s is, with no system call on the intact path), or
 * nothing purgeable is left.  A limit set with vr_ctx_set_limit() applies
 * as well; the smaller wins.
 * VRANGE_MEMORY_LIMIT=BYTES|off overrides the detected limit.  The limit
 * watcher runs together with the other pressure sources, not instead of
 * them.
 *
 * Since 0.3, the usage held against a cgroup limit is what the
 * kernel cannot reclaim without losing data: the cgroup's usage less its
 * reclaimable file cache (inactive and active file of memory.stat, less a
 * reserve for file I/O in flight: two of the largest readahead window of
 * the block devices, at least L/16, at most L/4), so reading and writing files
 * never makes the library purge while the kernel can still reclaim file
 * cache; VR_STAT_LIMIT_USAGE and VR_STAT_LIMIT_FILE_CACHE show both.
 * VRANGE_MEMORY_LIMIT=BYTES limits this process's own memory (RssAnon +
 * RssShmem), not its cgroup's: other processes do not count.  A limit
 * removed, raised or lowered (also on an ancestor), or appearing, is
 * followed within a second, this function included.  When the budget
 * falls to nothing the library says so once at VR_LOG_WARNING (the limit,
 * the usage, where both were read, even without VRANGE_DEBUG); per-event
 * debug lines are rate-limited.
 *
 * Lines drawn under the limit L: a crossing of L - L/32 purges down to
 * 3/4 L; the budget (VR_STAT_BUDGET) keeps the usage counted under
 * L - L/16: it is that line minus everything counted that is not this
 * ctx's unpurged volatile bytes, as the monitor last measured it.
 * Several ctxs and processes in one cgroup share the headroom first come,
 * first served (doc/monitor.md).
 *
 * Returns: the limit in bytes (1 for a limit of 0, as cgroup v2 allows:
 * the budget is then nothing), or 0 (NULL ctx, no monitor, no limit,
 * VRANGE_MEMORY_LIMIT=off, VRANGE_MONITOR=off).
 * Since: 0.2
 * Context: lock-free.
 */
uint64_t vr_ctx_memory_limit(struct vr_ctx *ctx);

/**
 * enum vr_limit_scope - what the memory usage held against a limit counts
 * @VR_LIMIT_NONE: no limit is watched
 * @VR_LIMIT_CGROUP: a cgroup's limit: the usage is the cgroup's, all its
 *	processes, less the file cache the kernel can reclaim.  The
 *	file cache lives in the same limit: bytes a cache keeps volatile
 *	there leave that much less room for the kernel's cache of files
 * @VR_LIMIT_PROCESS: VRANGE_MEMORY_LIMIT=BYTES: this process's own memory
 *	(RssAnon + RssShmem); the file cache and other processes do not count
 *
 * Since: 0.3
 */
enum vr_limit_scope {
	VR_LIMIT_NONE = 0,
	VR_LIMIT_CGROUP = 1,
	VR_LIMIT_PROCESS = 2,
};

/**
 * vr_ctx_memory_limit_scope - whose memory the watched limit counts
 * @ctx: the context
 *
 * Tells how to read vr_ctx_memory_limit(): a cache that holds copies of
 * file data (a database's page cache) competes with the kernel's own
 * cache of that file under a VR_LIMIT_CGROUP limit, and may want to hold
 * less than the budget allows; under VR_LIMIT_PROCESS it does not.
 * Follows the limit as vr_ctx_memory_limit() does (within a second of a
 * change); 0 exactly when vr_ctx_memory_limit() returns 0, except for the
 * instant between the two loads of a change.
 *
 * Returns: an enum vr_limit_scope: VR_LIMIT_NONE for NULL, no monitor or
 * no limit.
 * Since: 0.3
 * Context: lock-free.
 */
int vr_ctx_memory_limit_scope(struct vr_ctx *ctx);

/* ---------------------------------------------------------------------- */
/* regions                                                                 */

/**
 * vr_region_new - create a region: a new memfd, or anonymous memory,
 * mapped read/write
 * @ctx: the owning context
 * @name: memfd name (for /proc/self/maps), or NULL for "vrange"; unused
 *        with VR_REGION_ANON
 * @size: bytes, need not be a page multiple (the mapping is rounded up;
 *        bytes past @size are not addressable through the API)
 * @flags: 0 (a memfd) or VR_REGION_ANON (since 0.2: private anonymous
 *         memory, MAP_NORESERVE, MADV_DONTFORK, no fd: vr_region_fd()
 *         returns -EBADF) or VR_REGION_SHARED (since 0.2: see below)
 * @out: receives the region
 *
 * The region is wholly non-volatile and reads as zero; its memfd is
 * MFD_CLOEXEC, its base page aligned.  Both kinds follow the same rules
 * (marking, purging, faults, fork); a purge of an anonymous range traps
 * its whole pages and frees them (MADV_GUARD_INSTALL, or mprotect and
 * MADV_DONTNEED), so they read 0 after vr_unmark().
 *
 * VR_REGION_SHARED: the volatility state is stored in the
 * memfd after the data, and every process that maps the fd with
 * vr_region_from_fd() (a dup, an fd received over SCM_RIGHTS, with flags
 * 0 or VR_REGION_SHARED) joins that one state: a range marked through any
 * region of the file is volatile for all, vr_unmark() reports a purge made
 * by any process, and a purge discards for every mapping, each of which
 * traps on a discarded page (its fault handler, or SIGBUS BUS_ADRERR).
 * No pin counts: the last call wins.  The memfd is sealed against
 * resizing (F_SEAL_GROW, F_SEAL_SHRINK, F_SEAL_SEAL); its size is
 * vr_region_size() rounded up to a page plus the state.  The state holds
 * max(512, data pages / 16) ranges: a vr_mark() or a splitting
 * vr_unmark() beyond that returns -ENOSPC and changes nothing.  The data
 * pages are allocated (committed) when the file is created.  Every
 * mapping traps by itself: through its own userfaultfd
 * (UFFD_USER_MODE_ONLY, no privilege; SIGBUS feature) wherever the
 * system allows it, and a purge is a hole punch; else (a seccomp filter,
 * or VRANGE_TRAP=guard) through a protocol in which each process arms
 * guard markers on its own mapping before the punch (one listener thread
 * per region): a purge then waits up to 100 ms for every mapper, and one
 * that does not answer (a stopped process) makes it skip the range
 * (VR_STAT_SKIPPED_BUSY and VR_STAT_SKIPPED).  A file with mappers of
 * both kinds: the kernel drops the guard markers of every mapping of a
 * page when a userfaultfd mapping faults it in while a hole is punched
 * there (Linux 6.18), so after each punch the guard-protocol mappers arm
 * again and a page faulted in meanwhile is punched again; a thread of a
 * guard-protocol process touching a volatile page in the microseconds
 * between the punch and that arm may still read zeros (since 0.3; keep
 * every process of a file on one trap where that matters).  An unmark does not wait
 * for one either: a stopped mapper's own accesses to the unmarked bytes
 * fault and wait until it has caught up, but its system calls on them
 * fail with EFAULT until its listener has run.  A process killed at any
 * instant leaves the state consistent: the next process to take the
 * file's lock repairs it.  Processes sharing a file trust each other; a
 * mapping made outside the library does not trap.  Ages come from
 * CLOCK_MONOTONIC, so "least recently marked first" holds across
 * processes, and the purges, limit and monitor of every ctx that maps the
 * file take its ranges, whoever marked them.
 *
 * Returns: 0; -EINVAL for NULL @ctx/@out, @size 0 or too large, unknown
 * flags (any bit but VR_REGION_ANON and VR_REGION_SHARED, or both);
 * -EOPNOTSUPP (VR_REGION_SHARED where neither userfaultfd nor guard
 * markers work); -ENOMEM (also VR_REGION_SHARED with a @size the
 * system's RAM and swap cannot hold, or, since 0.3, more than the
 * process's memory cgroup can still take under its limit or an
 * ancestor's (the least room of them), its file cache
 * counted free: its pages are committed at creation, and a commit beyond
 * the limit would run the cgroup's OOM killer; a best-effort check, as
 * other processes may charge the cgroup meanwhile); or the negative errno of
 * memfd_create/ftruncate/fallocate/mmap/madvise/userfaultfd (nothing is
 * leaked).
 * Since: 0.1; VR_REGION_ANON and VR_REGION_SHARED since 0.2
 * Context: allocates, system calls.
 */
int vr_region_new(struct vr_ctx *ctx, const char *name, size_t size, unsigned flags,
		  struct vr_region **out);

/**
 * vr_region_from_fd - map an existing memfd as a region
 * @ctx: the owning context
 * @fd: a memfd (or other tmpfs file); it is dup()ed, the caller keeps @fd
 * @flags: 0, or VR_REGION_SHARED (since 0.2) to require a shared file
 * @out: receives the region
 *
 * A memfd made with VR_REGION_SHARED (in this or another process) is
 * joined: the region maps its data and shares its volatility state (see
 * vr_region_new()), also when this process maps the file as a
 * region already (then both regions are views of one state, and every
 * mapping traps).
 *
 * Any other file is mapped whole with fresh, wholly non-volatile state
 * (volatility is per process).  Discarding is a property of the
 * file: a purge in any process is seen by every mapping (others read
 * zeros without a trap).  Within one process such a file is one region:
 * a second region on a file this process already maps as a live
 * region -- the same fd, a dup of it, or the file reopened, in this ctx
 * or any other -- is refused with -EBUSY, since two mappings with
 * separate states would let one region's purge destroy the other's
 * non-volatile bytes.  Files are compared by st_dev and st_ino.  Once
 * that region is destroyed the file can be mapped again.
 *
 * Returns: 0; -EINVAL (negative fd, not a regular file, size 0, unknown
 * flags, VR_REGION_SHARED on a file without a shared state, NULL
 * pointers); -EOPNOTSUPP (not on tmpfs, or hugetlb; or a shared file
 * where neither userfaultfd nor guard markers work); -ENOSPC (a shared
 * file already has 64 processes in its guard protocol); -EPROTO (a shared state written by a
 * library of another layout or page size); -EBUSY (a non-shared file is
 * already a region of this process); or the negative errno of a failed
 * system call.
 * Since: 0.1; VR_REGION_SHARED since 0.2
 * Context: allocates, system calls.
 */
int vr_region_from_fd(struct vr_ctx *ctx, int fd, unsigned flags, struct vr_region **out);

/**
 * vr_region_adopt - make memory the caller already mapped a region
 * @ctx: the owning context
 * @addr: first byte, page aligned
 * @len: bytes, a positive multiple of the page size
 * @flags: must be 0
 * @out: receives the region
 *
 * [@addr, @addr + @len) must lie in one private anonymous read/write
 * mapping of this process (an mmap'ed arena, the page-aligned part of a
 * large malloc() block or of the brk heap), as /proc/self/smaps shows it:
 * not file-backed, not shared (adjacent pieces the kernel keeps apart
 * count as one mapping when their flags are the same).  Executable
 * memory stays executable.  The region starts
 * wholly non-volatile with the contents unchanged and follows the rules
 * of VR_REGION_ANON regions, except that the caller keeps the mapping:
 * vr_region_destroy() and vr_ctx_destroy() leave it mapped, every page
 * readable and writable (discarded pages read 0), and never unmap it.
 * Destroy the region before the memory is unmapped, remapped (guard
 * markers move with mremap) or freed.  mlock'ed pages are never
 * discarded: a purge skips their range (VR_STAT_SKIPPED).
 *
 * fork(): the span is inherited as the caller's memory.  A child never
 * reads a page discarded before the fork as data (a touch is SIGSEGV);
 * destroying the inherited region in the child makes the span readable
 * and writable in the child only (discarded pages read 0); until then the
 * child cannot adopt any of the span again (-EEXIST).  While a child
 * still shares pages, a purge in the parent frees nothing system-wide:
 * VR_STAT_RECLAIMED_BYTES counts what this process discarded (the pages
 * leave its resident set), not what the system got back.
 *
 * Returns: 0; -EEXIST if the span shares a byte with a live region
 * (checked first), or in a fork child with an inherited adopted region
 * the child has not destroyed yet; -EINVAL for NULL @ctx/@out/@addr, flags other than 0
 * (VR_REGION_ANON included), @addr not page aligned, @len 0 or not a page
 * multiple, a span that is not wholly inside one private anonymous
 * read/write mapping (unmapped memory, two mappings, file-backed or
 * shared memory); -ENOMEM; or the negative errno of opening
 * /proc/self/smaps.
 * Since: 0.2
 * Context: allocates, reads /proc/self/smaps; not from a fault handler.
 */
int vr_region_adopt(struct vr_ctx *ctx, void *addr, size_t len, unsigned flags,
		    struct vr_region **out);

/**
 * vr_region_destroy - unmap, close and free a region
 * @r: the region, or NULL (no-op)
 *
 * An adopted region (vr_region_adopt()) is not unmapped: its traps are
 * removed and the memory stays the caller's, readable and writable.
 *
 * Since: 0.1
 * Context: may block until a running purge of the ctx finishes.
 */
void vr_region_destroy(struct vr_region *r);

/**
 * vr_region_base - the region's first byte
 * @r: the region
 *
 * Returns: the base address, or NULL for NULL or an inherited handle.
 * Since: 0.1
 * Context: lock-free.
 */
void *vr_region_base(const struct vr_region *r);

/**
 * vr_region_size - the region's size in bytes as given at creation
 * @r: the region
 *
 * Returns: the size, or 0 for NULL or an inherited handle.
 * Since: 0.1
 * Context: lock-free.
 */
size_t vr_region_size(const struct vr_region *r);

/**
 * vr_region_fd - the region's memfd (owned by the region: do not close)
 * @r: the region
 *
 * Since 0.3, once a plain memfd region's fd was asked for (or the region
 * was made with vr_region_from_fd()), its purges trap with mprotect
 * instead of guard markers, at the cost of up to two VMAs per purged
 * range: the file may then be mapped elsewhere, and the kernel drops the
 * guard markers of every mapping of a page when another mapping faults
 * that page in while a hole is punched there (Linux 6.18).  Beyond 4096
 * such ranges in the process at a time (VMAs are the application's too),
 * or at the VMA limit, markers are used, placed anew after each punch; a
 * thread of this process touching a volatile page during its purge may
 * then, while another mapping reads the same page, read zeros.
 *
 * Returns: the fd, -EBADF for anonymous memory (VR_REGION_ANON or
 * adopted: no fd), or -EINVAL for NULL or an inherited handle.
 * Since: 0.1
 * Context: lock-free.
 */
int vr_region_fd(const struct vr_region *r);

/**
 * vr_region_of - find the region mapped at an address
 * @addr: any address
 *
 * Returns: the region with base <= @addr < base + size, or NULL.
 * Since: 0.1
 * Context: lock-free and async-signal-safe.
 */
struct vr_region *vr_region_of(const void *addr);

/* ---------------------------------------------------------------------- */
/* volatility, file-offset style                                           */

/**
 * vr_mark - mark [off, off + len) volatile
 * @r: the region
 * @off: first byte
 * @len: bytes, > 0
 *
 * Overlapping ranges are joined (purged if any of them was); the result
 * then absorbs adjacent ranges of the same purged state.  If the result is
 * purged, its whole pages are discarded at once.  A mark wholly inside one
 * existing range changes nothing.  The ctx byte limit is enforced before
 * returning: the smaller of vr_ctx_set_limit() and, since 0.2, the budget
 * the monitor derives from the process's memory limit
 * (vr_ctx_memory_limit()), purging the oldest ranges in this thread.
 *
 * Returns: VR_PURGED if any byte of the interval lies in a purged range
 * when the call returns, else VR_INTACT; -EINVAL for bad arguments
 * (nothing changes); -ENOMEM; -EDEADLK when called from a signal handler
 * that interrupted this thread inside a call on @r (nothing changes) or,
 * when the limit needs a purge, inside any other vr_* call (the mark is
 * made, the limit not enforced).
 * Since: 0.1
 * Context: no system call when nothing is purged; takes the region lock;
 * the limit check allocates nothing.
 */
int vr_mark(struct vr_region *r, size_t off, size_t len);

/**
 * vr_unmark - make [off, off + len) non-volatile again
 * @r: the region
 * @off: first byte
 * @len: bytes, > 0
 *
 * Covers the whole interval, across any number of ranges.  Afterwards the
 * interval is readable, writable and never purged; bytes on discarded
 * pages read as zero.
 *
 * Partial pages: protection is per page.  Unmarking part of a purged
 * range leaves the rest of it purged, and a page the interval shares with
 * that rest becomes readable too: those purged bytes then read 0 without
 * a fault.  They stay exact in the state: vr_status reports them
 * VR_STATE_PURGED, a purge takes nothing more from them, and vr_unmark of
 * them returns VR_PURGED.  A lazy reader that must never take such zeros
 * for data keeps its ranges page-aligned (and unmarks whole ranges: the
 * @off, @len its fault handler is given).
 *
 * Returns: VR_PURGED if any byte of the interval lay in a purged range
 * (treat all of it as lost), else VR_INTACT; -EINVAL for bad arguments;
 * -ENOMEM; -EDEADLK (as vr_mark(), nothing changes); or the negative
 * errno of mprotect/madvise when access to discarded pages cannot be
 * restored (then nothing changed).
 * Since: 0.1
 * Context: no system call when nothing in the interval was purged; may be
 * called from a fault handler.
 */
int vr_unmark(struct vr_region *r, size_t off, size_t len);

/**
 * vr_status - volatility of [off, off + len)
 * @r: the region
 * @off: first byte
 * @len: bytes, > 0
 *
 * Returns: a mask of VR_STATE_VOLATILE (some byte is volatile) and
 * VR_STATE_PURGED (some byte lies in a purged range), 0, -EINVAL, or
 * -EDEADLK (as vr_mark()).
 * Since: 0.1
 * Context: no system call.
 */
int vr_status(struct vr_region *r, size_t off, size_t len);

/* ---------------------------------------------------------------------- */
/* volatility, pointer style                                               */

/**
 * vr_mark_ptr - vr_mark() on the region that holds [addr, addr + len)
 * @addr: first byte, inside a region
 * @len: bytes, > 0; the interval must not leave the region
 *
 * Returns: as vr_mark(); -EINVAL if the interval is not wholly inside one
 * region.
 * Since: 0.1
 * Context: as vr_mark().
 */
int vr_mark_ptr(void *addr, size_t len);

/**
 * vr_unmark_ptr - vr_unmark() on the region that holds [addr, addr + len)
 * @addr: first byte, inside a region
 * @len: bytes, > 0; the interval must not leave the region
 *
 * Returns: as vr_unmark(); -EINVAL if the interval is not wholly inside one
 * region.
 * Since: 0.1
 * Context: as vr_unmark().
 */
int vr_unmark_ptr(void *addr, size_t len);

/* ---------------------------------------------------------------------- */
/* lazy access                                                             */

/**
 * vr_fault_fn - called when a thread touches a discarded page
 * @r: the region
 * @off: start of the purged range holding the page
 * @len: length of that range
 * @fault_addr: the faulting address, exact to the byte
 * @arg: the pointer given to vr_region_set_fault_handler()
 *
 * Runs in signal context in the faulting thread.  The pattern that never
 * shows zeros to other threads: regenerate the data into a buffer, then
 * vr_unmark_fill(r, off, len, buf), which writes it while the pages still
 * trap and restores access in one step (returns VR_PURGED), and return
 * VR_FAULT_RETRY.  (vr_region_fill() followed by vr_unmark() is not the
 * same: another thread may regenerate, re-mark and purge the range in
 * between, and the restore would then uncover the new hole.)  Threads that fault on the same
 * range while a handler runs for it wait until that handler returns and
 * then re-run their access, so with this pattern the data is regenerated
 * once per purge, however many threads touch it, and nobody reads zeros.
 * (Unmarking first and refilling through the mapping also works, but
 * other threads may read zeros in between.)  Partial pages:
 * protection is per page, so a vr_unmark of less than a page's worth of
 * a purged range (or a vr_obj_pin of one small object of a purged page)
 * makes the whole page readable, and the bytes of it that are still
 * purged then read 0 without calling this handler; they stay reported
 * purged (vr_status, vr_obj_status) and their own vr_unmark or
 * vr_obj_pin returns VR_PURGED.  A lazy reader that must never take such
 * zeros for data keeps its ranges page-aligned and its lazily read
 * objects a page or larger.  A thread that faults while
 * it is itself inside a fault handler does not wait (no deadlock between
 * two handlers), nor does a thread when 32 ranges are being regenerated
 * at once; a wait ends after about a second if the handler never
 * returns.
 *
 * Returns: VR_FAULT_RETRY to re-run the access, VR_FAULT_SIGBUS to get
 * SIGBUS (BUS_ADRERR, si_addr = @fault_addr).  After 8 consecutive
 * re-faults at one address with no purge or unmark in between, SIGBUS is
 * delivered whatever the handler returns.
 * Since: 0.1
 * Context: signal context (SIGSEGV handler, or SIGBUS for a shared region
 * trapped with userfaultfd) of the faulting thread; may
 * call any vr_* function; must not return into an access it did not fix
 * more than 8 times.
 */
typedef int (*vr_fault_fn)(struct vr_region *r, size_t off, size_t len, void *fault_addr,
			   void *arg);

/**
 * vr_region_set_fault_handler - set or remove the region's fault handler
 * @r: the region
 * @fn: called when a thread touches a discarded page of @r; NULL removes
 *      the handler (touches then raise SIGBUS)
 * @arg: passed to @fn
 *
 * When this returns, no call of the handler it replaced is running or
 * will start, in any thread, so the caller may free the old @arg; the
 * exception is a call from inside a fault handler or an object purge
 * handler, which does not wait (its own call is in flight, and two
 * threads replacing handlers from handlers would wait for each other).
 *
 * Returns: 0, -EINVAL, or -EDEADLK (as vr_mark()).
 * Since: 0.1
 * Context: takes the region lock; waits for handler calls in flight.
 */
int vr_region_set_fault_handler(struct vr_region *r, vr_fault_fn fn, void *arg);

/**
 * vr_region_fill - write data into a region through its memfd
 * @r: the region
 * @off: first byte
 * @src: the data
 * @len: bytes, > 0; the interval must lie inside the region
 *
 * Writes like memcpy(base + @off, @src, @len) but through the file, so it
 * works on discarded pages that still trap: a fault handler fills a
 * purged range before vr_unmark() restores access (see vr_fault_fn).  It
 * does not change volatility: bytes of a purged range stay purged until
 * unmarked (and read 0 if that range is purged again before).  A shared
 * region trapped with userfaultfd (VR_REGION_SHARED where
 * vr_trap_backend() is VR_TRAP_UFFD) traps a page by its absence from
 * the file: a page written stops trapping in every process at once, and
 * its bytes not written read 0 without a fault.  Fill whole pages of a
 * purged range there, or use vr_unmark_fill().
 * Anonymous regions (VR_REGION_ANON, vr_region_adopt()) have no file: a
 * fault handler there unmarks first and refills through the mapping.
 *
 * Returns: 0; -EINVAL for bad arguments; -EBADF for anonymous memory; or
 * the negative errno of pwrite (-ENOSPC on a full tmpfs, -ENOMEM).
 * Since: 0.2
 * Context: async-signal-safe (pwrite); no lock; may be called from a
 * fault handler.
 */
int vr_region_fill(struct vr_region *r, size_t off, const void *src, size_t len);

/**
 * vr_unmark_fill - write data into [off, off + len), then unmark it, as
 * one step
 * @r: the region
 * @off: first byte
 * @len: bytes, > 0; the interval must lie inside the region
 * @src: @len bytes of data
 *
 * Writes @src through the region's memfd (as vr_region_fill()) and makes
 * the interval non-volatile (as vr_unmark()) under one hold of the region
 * lock, so no purge can come between the two: when it returns, the
 * interval holds @src and is readable, and no thread ever read zeros in
 * it while the pages trapped.  This is the fault handler's call for lazy
 * regeneration (vr_fault_fn).  Bytes of the interval on pages it shares
 * with other bytes of a purged range are written too.
 *
 * Returns: as vr_unmark() (VR_PURGED if any byte of the interval lay in a
 * purged range, else VR_INTACT); -EINVAL for bad arguments or NULL @src;
 * -EBADF for anonymous memory (no file: unmark, then write through the
 * mapping); -EDEADLK (as vr_mark()); or the negative errno of pwrite
 * (then nothing changed in the volatility state; the bytes written may
 * have changed).
 * Since: 0.2
 * Context: takes the region lock; system calls; may be called from a
 * fault handler.
 */
int vr_unmark_fill(struct vr_region *r, size_t off, size_t len, const void *src);

/** Trap backends reported by vr_trap_backend(). */
enum vr_trap {
	VR_TRAP_NONE = 0,     /* not chosen yet (no ctx created)          */
	VR_TRAP_GUARD = 1,    /* madvise(MADV_GUARD_INSTALL/REMOVE)       */
	VR_TRAP_MPROTECT = 2, /* mprotect(PROT_NONE / PROT_READ|WRITE)    */
	VR_TRAP_UFFD = 3,     /* userfaultfd, missing mode + SIGBUS (0.2) */
};
/* VR_TRAP_UFFD (since 0.2): shared regions (VR_REGION_SHARED) are
 * registered once with a userfaultfd of their own (UFFD_USER_MODE_ONLY,
 * no privilege needed) in missing mode with the SIGBUS feature: the hole
 * a purge punches is the trap in every mapping of the file (no VMA split,
 * no trap system call per purge), and a touch raises SIGBUS BUS_ADRERR,
 * handled by the library's SIGBUS handler.  Each shared region then holds
 * two fds.  A hole is the file's, so only a state every mapping shares can
 * use it: plain memfd regions (whose state is per process: other
 * processes' purges read as zeros there, and other processes' reads must
 * not take their traps away), anonymous and adopted regions are trapped
 * with guard markers (or mprotect where those do not work), as under
 * VR_TRAP_GUARD, also when VRANGE_TRAP=uffd (since 0.3; in 0.2 plain memfd
 * regions were registered too).  As the process's backend only
 * chosen when VRANGE_TRAP=uffd forces it. */

/**
 * vr_trap_backend - which mechanism traps discarded pages
 * Returns: a vr_trap value; chosen once per process at the first
 * vr_ctx_new() (VRANGE_TRAP forces one; without it guard, else mprotect:
 * VR_TRAP_UFFD only when forced); since 0.2, VR_TRAP_UFFD from the moment
 * a shared region of this process traps with userfaultfd.
 * Since: 0.1
 * Context: lock-free.
 */
int vr_trap_backend(void);

/* ---------------------------------------------------------------------- */
/* objects (0.2)                                                           */
/*
 * An object is one purgeable unit allocated by the library: pin it
 * around each use, unpin it when it may be discarded.  Objects share the
 * ctx's LRU (least recently unpinned or marked first), limit, pressure
 * monitor and fault path with the ranges of its regions.  Objects of a
 * page or more sit on their own page-aligned spans; smaller ones are packed
 * in size-class slabs, several to a page, and a page of small objects is
 * purged as one unit once every object on it is unpinned.
 *
 * Thread safety: calls on different objects never serialize on a lock in
 * the pin/unpin path; vr_obj_new / vr_obj_free take a per-size-class lock.
 * Calls on one object from several threads are safe (atomic state), but
 * vr_obj_free must not race with other calls on the same handle.
 */

/**
 * vr_obj_new - allocate a purgeable object
 * @ctx: the owning context
 * @size: bytes (> 0)
 * @flags: 0 (no flags are defined in 0.2)
 * @out: receives the object
 *
 * The object is pinned (non-volatile) and reads as zero.  Its address is
 * aligned to 16 bytes, and to the page size when @size is at least one
 * page (then it shares no page with any other object).
 *
 * A large object costs no memory until it is touched (since 0.3 also its
 * page map: an object of 1 GiB or more has one of its own, written when
 * it is first purged).
 *
 * Returns: 0, -EINVAL (NULL @ctx or @out, @size 0 or too large to round up
 * to pages, unknown flags, a ctx inherited over fork), -ENOMEM (among
 * others at once for a @size larger than the system's memory and swap
 * together; or the negative errno of a failed memfd, mmap or ftruncate)
 * with nothing leaked,
 * -EDEADLK (called from a signal handler that interrupted an allocation of
 * the same size class in this thread, or a call of this thread that held
 * the object queue of the same group: a purge, an unpin, an allocation;
 * or, since 0.3, a purge of this ctx by this thread, when the free slot
 * found is on a page that purge has claimed).
 * Since: 0.2
 * Context: may allocate and make system calls; takes a size-class lock.
 */
int vr_obj_new(struct vr_ctx *ctx, size_t size, unsigned flags, struct vr_obj **out);

/**
 * vr_obj_free - free an object, pinned or not
 * @o: the object, or NULL (no-op)
 *
 * The handle must not be used again.  In a fork child an inherited object
 * may be freed; that never touches the parent's memory.
 *
 * Since: 0.2
 * Context: may make system calls (returns freed pages to the kernel);
 * takes a size-class lock.  Not from an asynchronous signal handler that
 * interrupted a call of the same thread on the same ctx (it returns no
 * error to say -EDEADLK, and would wait for a lock its thread holds).
 */
void vr_obj_free(struct vr_obj *o);

/**
 * vr_obj_ptr - the object's first byte
 * @o: the object
 *
 * Returns: the address, or NULL for NULL or an object inherited over fork.
 * Since: 0.2
 * Context: lock-free.
 */
void *vr_obj_ptr(const struct vr_obj *o);

/**
 * vr_obj_size - the size given to vr_obj_new()
 * @o: the object
 *
 * Returns: the size, or 0 for NULL or an object inherited over fork.
 * Since: 0.2
 * Context: lock-free.
 */
size_t vr_obj_size(const struct vr_obj *o);

/**
 * vr_obj_of - the live object whose bytes hold an address
 * @addr: any address
 *
 * Returns: the object, or NULL (not object memory, padding, a free slot,
 * an object inherited over fork).
 * Since: 0.2
 * Context: lock-free and async-signal-safe: callable from any signal
 * handler, also one that interrupted a vr_* call.
 */
struct vr_obj *vr_obj_of(const void *addr);

/**
 * vr_obj_unpin - make an object volatile (purgeable)
 * @o: the object
 *
 * Puts the object at the young end of the ctx's LRU.  Unpinning an
 * unpinned object changes nothing (no rejuvenation).  The ctx's limit
 * (vr_ctx_set_limit) is enforced before this call returns.
 *
 * Returns: 0, -EINVAL (NULL, inherited over fork), -ENOMEM (no memory for
 * the LRU log; nothing changed), -EDEADLK (called from a signal handler
 * that interrupted this thread inside the library; nothing changed).
 * Since: 0.2
 * Context: no system call and no lock shared with other objects' handles
 * in the common case; may purge when a limit is set.
 */
int vr_obj_unpin(struct vr_obj *o);

/**
 * vr_obj_unpin_many - make several objects volatile in one call
 * @objs: the objects (of any groups and ctxs)
 * @n: how many
 *
 * vr_obj_unpin() of each of @objs[0 .. @n), as at one instant: the objects
 * take one age, so a purge takes them before anything unpinned later and
 * after anything unpinned earlier, in any order among themselves.  It
 * reads the clock once and settles each group's gauges and limits once per
 * run of consecutive objects of that group, where @n calls of
 * vr_obj_unpin() would do each @n times: for a cache that releases
 * objects in batches (measured in doc/benchmarks.md).  An object that
 * cannot be unpinned (NULL, inherited over fork, -EDEADLK as for
 * vr_obj_unpin) is left as it was and the others are still unpinned;
 * unpinned objects stay as they are.
 *
 * Returns: 0, or the first error any object or limit gave; -EINVAL for
 * @objs NULL with @n > 0.
 * Since: 0.3
 * Context: as vr_obj_unpin().
 */
int vr_obj_unpin_many(struct vr_obj *const *objs, size_t n);

/**
 * vr_obj_pin - make an object non-volatile again
 * @o: the object
 *
 * After it returns the object is readable and writable and nothing in it
 * is purged until it is unpinned again.  Pinning a pinned object returns
 * VR_INTACT and changes nothing.
 *
 * Objects smaller than a page share pages: pinning one of a purged
 * page (or vr_obj_new() placing a new object on it) makes the whole page
 * readable, and the other objects on it, still purged, read 0 without a
 * fault; vr_obj_status reports them purged and
 * their own vr_obj_pin returns VR_PURGED.  Objects read lazily (through
 * the object fault handler) should be a page or larger.
 *
 * Returns: VR_INTACT (every byte as it was left), VR_PURGED (the contents
 * were discarded: every byte now reads 0), -EINVAL (NULL, inherited over
 * fork), -EDEADLK (called from a signal handler that interrupted this
 * thread inside the library, when access must be restored), or the
 * negative errno when access cannot be restored (nothing changed).
 * Since: 0.2
 * Context: no system call and no lock shared with other objects' handles
 * when the object is intact; may wait for a purge of its page to finish.
 * May be called from an object fault handler.
 */
int vr_obj_pin(struct vr_obj *o);

/**
 * vr_obj_status - the object's volatility
 * @o: the object
 *
 * Returns: 0 (pinned), VR_STATE_VOLATILE (unpinned), VR_STATE_VOLATILE |
 * VR_STATE_PURGED (unpinned and purged), or -EINVAL.
 * Since: 0.2
 * Context: lock-free.
 */
int vr_obj_status(const struct vr_obj *o);

/**
 * vr_obj_fault_fn - called when a thread touches a discarded object page
 * @o: the unpinned, purged object whose discarded page was touched
 * @fault_addr: the faulting address, exact to the byte
 * @arg: the pointer given to vr_ctx_set_obj_fault_handler()
 *
 * Typically calls vr_obj_pin(o) (which returns VR_PURGED and restores
 * access), refills the object and returns VR_FAULT_RETRY.
 *
 * Returns: VR_FAULT_RETRY or VR_FAULT_SIGBUS, as vr_fault_fn (same SIGBUS
 * delivery, same bound of 8 re-faults).
 * Since: 0.2
 * Context: signal context of the faulting thread; may call any vr_*
 * function.
 */
typedef int (*vr_obj_fault_fn)(struct vr_obj *o, void *fault_addr, void *arg);

/**
 * vr_ctx_set_obj_fault_handler - set or remove the ctx's object fault handler
 * @ctx: the context
 * @fn: the handler, or NULL to remove it (touches then raise SIGBUS)
 * @arg: passed to @fn
 *
 * Returns: 0 or -EINVAL (NULL ctx, inherited over fork), -ENOMEM.
 * Since: 0.2
 * Context: lock-free after the ctx's first object call.
 */
int vr_ctx_set_obj_fault_handler(struct vr_ctx *ctx, vr_obj_fault_fn fn, void *arg);

/* ---------------------------------------------------------------------- */
/* groups, side-car bytes, purge notification (0.3)                        */
/*
 * Every object belongs to one group of its ctx.  vr_obj_new() puts it in
 * the ctx's default group (priority 4); vr_obj_new_in() in any group.
 *
 * Order.  Purges of the whole ctx (vr_ctx_purge, vr_ctx_set_limit and the
 * limit at every vr_mark / vr_obj_unpin, pressure, the monitor) take the
 * lowest priority first: every purgeable unit of priority 0, then 1, ...,
 * then 7; within one priority, the least recently unpinned (or marked)
 * first across its groups.  The ranges of regions have priority 4.
 * Priority comes before age also for the limit: an object of priority 1
 * unpinned just now goes before older objects of priority 6.
 *
 * A group's own purge (vr_group_purge) and limit (vr_group_set_limit)
 * take only that group's objects, least recently unpinned first.  Small
 * objects of different groups never share a page.
 */

/**
 * vr_group_new - make a group of objects
 * @ctx: the owning context
 * @priority: 0 (purged first) .. 7 (purged last); the default group and
 *            the ranges of regions have 4
 * @out: receives the group
 *
 * Returns: 0, -EINVAL (NULL @ctx or @out, @priority outside 0..7, a ctx
 * inherited over fork), -ENOMEM.
 * Since: 0.3
 * Context: takes the ctx's purge lock; allocates.
 */
int vr_group_new(struct vr_ctx *ctx, int priority, struct vr_group **out);

/**
 * vr_group_destroy - free a group and every object in it
 * @g: the group, or NULL (no-op)
 *
 * Its objects' handles must not be used again.  The default group
 * (vr_ctx_group) is not destroyed: its objects are freed and the group
 * stays, with its limit and purge handler.  vr_ctx_destroy() destroys the
 * groups left.  Must not race with other calls on the group or its
 * objects, and must not be called from the group's own purge handler.
 * The group's purge handler is not running and is not called again when
 * this returns (called from inside a purge or fault handler, it does not
 * wait: see vr_group_set_purge_handler).
 *
 * Since: 0.3
 * Context: may make system calls; waits for the group's purge handler
 * calls in flight.
 */
void vr_group_destroy(struct vr_group *g);

/**
 * vr_ctx_group - the ctx's default group
 * @ctx: the context
 *
 * Returns: the group vr_obj_new() allocates in (priority 4), or NULL for
 * NULL or a ctx inherited over fork.
 * Since: 0.3
 * Context: lock-free.
 */
struct vr_group *vr_ctx_group(struct vr_ctx *ctx);

/**
 * vr_obj_new_in - allocate a purgeable object in a group
 * @g: the group
 * @size: bytes (> 0)
 * @extra: side-car bytes, 0..4096 (see vr_obj_extra)
 * @flags: 0
 * @out: receives the object
 *
 * As vr_obj_new() in @g's ctx; vr_obj_new(ctx, size, flags, out) is
 * vr_obj_new_in(vr_ctx_group(ctx), size, 0, flags, out).
 *
 * Returns: as vr_obj_new(), and -EINVAL for NULL @g, @extra above 4096, a
 * group inherited over fork.
 * Since: 0.3
 * Context: as vr_obj_new().
 */
int vr_obj_new_in(struct vr_group *g, size_t size, size_t extra, unsigned flags,
		  struct vr_obj **out);

/**
 * vr_obj_extra - the object's side-car bytes
 * @o: the object
 *
 * The side-car holds the @extra bytes given to vr_obj_new_in(): zeroed
 * at creation, 16-byte aligned, never purged, readable and writable
 * whether the object is pinned, unpinned or purged, also from a purge
 * handler or a fault handler.  It lies outside the object's memory: the
 * object's page rounding does not grow by it.  Typical use: a cache
 * entry's key and bookkeeping, kept next to a purgeable value.
 *
 * Returns: the side-car's first byte, or NULL (@extra was 0, NULL, an
 * object inherited over fork).
 * Since: 0.3
 * Context: lock-free and async-signal-safe.
 */
void *vr_obj_extra(const struct vr_obj *o);

/**
 * vr_group_purge - purge a group's objects
 * @g: the group
 * @bytes: reclaim at least this many bytes (whole pages), or everything
 *         purgeable in the group with SIZE_MAX; 0 purges nothing
 *
 * Purges only @g's unpinned objects, least recently unpinned first, as
 * vr_ctx_purge() does for a ctx.
 *
 * Returns: the bytes reclaimed (a multiple of the page size), -EINVAL
 * (NULL, inherited over fork), -EDEADLK (called from a signal handler
 * that interrupted a purge of the same ctx in this thread).
 * Since: 0.3
 * Context: makes system calls; takes the ctx's purge lock; calls the
 * group's purge handler after releasing it.
 */
ssize_t vr_group_purge(struct vr_group *g, size_t bytes);

/**
 * vr_group_set_limit - bound a group's unpurged unpinned bytes
 * @g: the group
 * @bytes: the limit, 0 for none
 *
 * When this returns, and whenever vr_obj_unpin() of an object of @g
 * returns, the group's unpurged unpinned bytes (its
 * VR_STAT_VOLATILE_BYTES) are at most @bytes, or nothing of the group is
 * left to purge: its objects are purged, least recently unpinned first.
 * The ctx's own limit applies as well.
 *
 * Returns: 0, -EINVAL (NULL, inherited over fork), -EDEADLK (as
 * vr_group_purge).
 * Since: 0.3
 * Context: may purge (system calls, the purge handler).
 */
int vr_group_set_limit(struct vr_group *g, size_t bytes);

/**
 * vr_group_stat - a statistic of a group
 * @g: the group
 * @which: VR_STAT_OBJECTS, VR_STAT_VOLATILE_BYTES, VR_STAT_PURGED_BYTES,
 *         VR_STAT_PURGES or VR_STAT_RECLAIMED_BYTES, counted over the
 *         group's objects as vr_ctx_stat() counts them over a ctx
 *
 * Returns: the value; 0 for any other @which, NULL, or a group inherited
 * over fork.
 * Since: 0.3
 * Context: lock-free.
 */
uint64_t vr_group_stat(struct vr_group *g, enum vr_stat which);

/**
 * vr_purge_fn - told that an object of its group was purged
 * @o: the object; it reports VR_STATE_VOLATILE | VR_STATE_PURGED
 * @arg: the pointer given to vr_group_set_purge_handler()
 *
 * Called exactly once per purge of @o, after the purge, by the thread
 * that purged: the ctx's monitor thread (pressure, the memory limit), or
 * a thread inside vr_ctx_purge, vr_group_purge, vr_ctx_set_limit,
 * vr_group_set_limit, vr_ctx_notify_pressure, or inside vr_obj_unpin or
 * vr_mark when a limit purged there.  No library lock is held.  It may
 * call vr_obj_free(@o) (typically after dropping the cache entry that
 * pointed at it; vr_obj_extra(@o) is still readable before that) and any
 * other vr_* function, except destroying its own group or the ctx.  It
 * should be short: the purging thread waits for it.  Another thread may
 * pin @o between the purge and the call (its vr_obj_pin returned
 * VR_PURGED): a handler that drops cache entries checks
 * vr_obj_status(@o) under the cache's own lock first.  Likewise another
 * thread may free @o during the call (an object freed before its call is
 * not reported at all, so the calls may be fewer than VR_STAT_PURGES
 * counts): the handle stays
 * valid memory (handles are reused, never unmapped, while the group
 * lives), so vr_obj_status(@o) then fails with -EINVAL or describes a new
 * object of the same group; a handler that frees or trusts @o does so
 * only for objects it finds in its own table under its own lock, and the
 * application frees objects under that lock too (libvrange-sqlite's
 * handler only queues @o; its own calls re-check and drop).  The same
 * object is not purged again before this call returned.  A purge called
 * from a handler reports what it purged before it returns, except when
 * handlers and purges are nested more than 8 deep in one thread: then
 * the outermost purge call reports it, before that call returns (so a
 * handler that purges on every call needs no stack per object).
 */
typedef void (*vr_purge_fn)(struct vr_obj *o, void *arg);

/**
 * vr_group_set_purge_handler - set or remove a group's purge handler
 * @g: the group
 * @fn: called after each purge of an object of @g, or NULL for none
 * @arg: passed to @fn
 *
 * A purge made while the group has no handler is never reported later.
 * When this returns, the handler it replaced is not running and will not
 * be called again, in any thread, so the caller may free the old @arg;
 * the exception is a call from inside a purge handler or a fault
 * handler, which does not wait at all (two threads replacing handlers
 * from handlers would wait for each other): another thread's call of the
 * old handler may then still be running.
 *
 * Returns: 0, -EINVAL (NULL, inherited over fork).
 * Since: 0.3
 * Context: waits for handler calls in flight.
 */
int vr_group_set_purge_handler(struct vr_group *g, vr_purge_fn fn, void *arg);

/* ---------------------------------------------------------------------- */
/* diagnostics                                                             */

/* priorities passed to a vr_log_fn (syslog's values) */
#define VR_LOG_ERR 3
#define VR_LOG_WARNING 4 /* since 0.3: printed to stderr also without VRANGE_DEBUG */
#define VR_LOG_INFO 6
#define VR_LOG_DEBUG 7

/**
 * vr_log_fn - receives one log line of the library
 * @priority: a VR_LOG_* value
 * @msg: the line, without a trailing newline; valid during the call only
 * @arg: the pointer given to vr_set_log_fn()
 */
typedef void (*vr_log_fn)(int priority, const char *msg, void *arg);

/**
 * vr_set_log_fn - route the library's log lines to the application
 * @fn: the function, or NULL to go back to the default (stderr, only with
 *      VRANGE_DEBUG=1)
 * @arg: passed to @fn
 *
 * While a function is set, the lines VRANGE_DEBUG=1 would print (purges,
 * pressure events, the chosen pressure source and trap backend, skipped
 * purges) go to it instead, whether VRANGE_DEBUG is set or not, with
 * VR_LOG_DEBUG; warnings (VR_LOG_WARNING, since 0.3: the limit's budget
 * fell to nothing) go to it too, and without a function to stderr.  @fn may be
 * called from any thread, including the monitor thread, sometimes with a
 * library lock held: it must not call vr_* functions.  The one line written
 * before a SIGBUS (VRANGE_DEBUG=1) is always written to stderr, since it is
 * written from a signal handler.
 *
 * When this returns, the function it replaced is not running and will not
 * be called again; it may be called from fault and purge handlers (it
 * waits for log calls there too), not from a log function, nor from an
 * asynchronous signal handler that may interrupt a vr_* call of its
 * thread: that call may be inside a log call, which this would wait for,
 * and there is no error to return instead.
 *
 * Since: 0.1
 * Context: process-wide; takes a leaf lock; waits for calls in flight.
 */
void vr_set_log_fn(vr_log_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* VRANGE_H */
