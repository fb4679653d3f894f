/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vrange-sqlite.h - SQLite's page cache in purgeable memory
 *
 * libvrange-sqlite (pkg-config libvrange-sqlite) is a second library of
 * the project, built when SQLite's development files are present.  It
 * gives SQLite (through SQLITE_CONFIG_PCACHE2) a page cache whose pages
 * are libvrange objects: a page SQLite is not using (clean, unpinned) may
 * be purged by the library when memory runs short or a limit is reached,
 * and is then simply a cache miss that SQLite reads again from the
 * database file.  Every query gives the same results as with SQLite's
 * default page cache, whatever the library purges and when.
 *
 * Policy under a memory limit (vr_ctx_memory_limit() of the ctx not 0),
 * from the ctx's budget for volatile bytes (VR_STAT_BUDGET): while the
 * ctx's volatile bytes are within a quarter of the limit of the budget, a
 * page that is not in the cache reuses the oldest released page's memory
 * instead of a new object (the cache stops growing, with headroom for the
 * budget's moves between the monitor's polls); when the budget falls below
 * a reserve, 1/8 of the limit by default, a fetch of a page that is not in
 * the cache with createFlag 1 answers "no page" and the page count that
 * SQLite asks next answers "full", so that SQLite spills a dirty page to
 * its file (which then becomes clean and purgeable) instead of growing the
 * memory it pins, whatever its cache_spill threshold (PRAGMA
 * cache_spill=OFF forbids SQLite to spill: then its dirty pages grow as
 * with any page cache, and the limit may be reached).  SQLite's own rule is kept as
 * well: createFlag 1 answers "no page" when 90% of cache_size is pinned.
 * VRANGE_SQLITE_RESERVE=PERCENT (0..50, read by the install call) sets the
 * reserve in percent of the limit; 0 turns this policy off.
 *
 * Under a cgroup memory limit (vr_ctx_memory_limit_scope() returns
 * VR_LIMIT_CGROUP: the limit counts the kernel's file cache;
 * VRANGE_MEMORY_LIMIT's does not), a purgeable cache also holds at most a
 * share of the limit, 6% (about 1/16) by default, as if its cache_size
 * were that small: the file cache keeps the same database's pages and only
 * the kernel can reclaim it, so a page held twice leaves no room for
 * another and what neither holds is read from the disk.  A 100 MB database
 * with a 256 MiB cache_size in a 128 MiB cgroup took 3.5-4.0 s with the
 * share, 5.6-6.3 s without.  VRANGE_SQLITE_SHARE=PERCENT (0..100, read by
 * the install call) sets it; 0 lets a cache grow to its cache_size.
 *
 * Up to 64 pages SQLite released last (at most 1/8 of cache_size) stay
 * pinned until younger ones push them out: one more unpins the oldest
 * until half of them (32 of 64) are left (vr_obj_unpin_many, up to 32 in
 * one call): SQLite fetches the same few pages again and again, and a pin
 * and an unpin for each would cost more than the default cache's whole
 * lookup.
 *
 * Since 0.3 (libvrange-sqlite.so.0, version node LIBVRANGE_SQLITE_0.3).
 */
#ifndef VRANGE_SQLITE_H
#define VRANGE_SQLITE_H

#include <vrange.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * vr_sqlite_pcache_install - make SQLite keep its page cache in objects
 * @ctx: the context whose objects hold the pages, or NULL: a ctx of the
 *       library's own with the default monitor (vr_ctx_new(0)), created by
 *       this call and destroyed by sqlite3_shutdown() (and made again by
 *       the next sqlite3_initialize())
 *
 * Calls sqlite3_config(SQLITE_CONFIG_PCACHE2, ...): it must be called
 * before sqlite3_initialize() (which the first sqlite3_open() calls), or
 * after sqlite3_shutdown().  A @ctx given here must stay alive until
 * sqlite3_shutdown() returns; it is not used after that: a later
 * sqlite3_initialize() fails with SQLITE_MISUSE unless this is called
 * again first (with NULL, the library's own ctx is made again).  Each
 * SQLite cache (one per open database file, temporary ones included) has a group of its own in @ctx (priority
 * 4) and keeps one object per page (the page size), its bookkeeping and
 * SQLite's szExtra bytes in the object's side-car (never purged); its
 * unpinned pages are volatile.  The group's purge handler drops a page
 * from the cache when the library purges it (it runs on the purging
 * thread, the monitor's among them, and takes a mutex of the cache's).
 * xShrink (sqlite3_db_release_memory()) purges the unpinned pages of that
 * cache's group only.  The number of pages SQLite keeps (PRAGMA
 * cache_size) is respected as SQLite's default cache does; in-memory
 * databases are never purgeable.  Pages dropped stay as unpinned objects
 * for reuse (at least 8 MiB of them per cache), and a closed cache's group
 * with up to 8 MiB of them goes to the next cache of the same page size,
 * until sqlite3_shutdown() (a closed cache holding more is given back
 * whole).  See the policy under a memory limit above: a dirty page
 * spilled early makes a connection in rollback-journal mode take its
 * EXCLUSIVE lock earlier, so another connection may get SQLITE_BUSY
 * where it would have read (as under sqlite3_soft_heap_limit64() with
 * the default cache; WAL mode is not affected).
 *
 * fork(): the ctx and its groups are inherited (see vr_ctx_new()), and
 * calls on them fail in the child, so a child that opens a database or
 * grows a cache gets SQLITE_NOMEM.  A child that uses SQLite closes the
 * connections it inherited, calls sqlite3_shutdown() and this function
 * again, with a ctx of its own or NULL.
 *
 * Returns: 0, -EBUSY (SQLite is initialised already: nothing changed),
 * -EINVAL (VRANGE_SQLITE_RESERVE is not a number in 0..50, or
 * VRANGE_SQLITE_SHARE not one in 0..100), or the negative errno of
 * vr_ctx_new().
 * Since: 0.3
 * Context: not thread-safe (as sqlite3_config()); not while SQLite runs.
 */
int vr_sqlite_pcache_install(struct vr_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* VRANGE_SQLITE_H */
