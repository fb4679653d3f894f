/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * vt-cgroup.h - a child memory cgroup of the calling process's own, and
 * the cache workload's objects, for tests/test-limit.c and
 * bench/s-limit.c (API S34).
 *
 * v1: the memory controller's directory of /proc/self/cgroup (through
 * /proc/self/mountinfo) gets a child "vt-limit-PID-N" with
 * memory.limit_in_bytes set.  v2, where the process's cgroup delegates
 * the memory controller (it is in cgroup.subtree_control): a child with
 * memory.max.  Nothing else of the machine's cgroups is ever written: the
 * only writes are the new directory's limit and cgroup.procs (by the
 * forked child moving itself), and the directory is removed afterwards.
 */
#ifndef VT_CGROUP_H
#define VT_CGROUP_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VT_CG_MAX_LIMIT (1ull << 30) /* never a larger limit than 1 GiB */

/* the cache workload's objects: 64 KiB, one page apart (adjacent volatile
 * ranges would coalesce into one, S3, and a purge takes a whole range);
 * word w of object obj in data generation gen is never 0 at a page start */
#define VT_OBJ (64u << 10)
#define VT_STRIDE (VT_OBJ + 4096u)

static inline uint64_t vt_obj_word(size_t obj, size_t w, unsigned gen)
{
	return ((uint64_t)obj << 32) ^ ((uint64_t)gen << 24) ^ w ^ 0x5bd1e995u;
}

static inline void vt_obj_fill(uint64_t *p, size_t obj, unsigned gen)
{
	for (size_t w = 0; w < VT_OBJ / 8; w++)
		p[w] = vt_obj_word(obj, w, gen);
}

static inline bool vt_obj_intact(const uint64_t *p, size_t obj, unsigned gen)
{
	for (size_t w = 0; w < VT_OBJ / 8; w++)
		if (p[w] != vt_obj_word(obj, w, gen))
			return false;
	return true;
}

struct vt_cg {
	char dir[PATH_MAX];
	bool v2;
};

static inline int vt_cg_write(const char *dir, const char *name, const char *text)
{
	char p[2 * PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int err = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return err;
}

/* a number from dir/name, or UINT64_MAX */
static inline uint64_t vt_cg_read(const char *dir, const char *name)
{
	char p[2 * PATH_MAX], buf[64];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return UINT64_MAX;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return UINT64_MAX;
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

/* the value of "key" in a "key value" file, or UINT64_MAX */
static inline uint64_t vt_cg_key(const char *dir, const char *name, const char *key)
{
	char p[2 * PATH_MAX], line[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "re");
	uint64_t v = UINT64_MAX;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			v = strtoull(line + kl + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* this process's own memory as VRANGE_MEMORY_LIMIT counts it (A3):
 * RssAnon + RssShmem of /proc/self/status, in bytes */
static inline uint64_t vt_own_memory(void)
{
	char line[256];
	uint64_t sum = 0, v;
	FILE *f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %" SCNu64, &v) == 1 ||
		    sscanf(line, "RssShmem: %" SCNu64, &v) == 1)
			sum += v << 10;
	if (f)
		fclose(f);
	return sum;
}

/* the process's own v1 memcg directory, or "" */
static inline void vt_cg_own_v1(char *out, size_t size)
{
	char line[PATH_MAX + 64], rel[PATH_MAX] = "", mnt[PATH_MAX] = "", root[PATH_MAX] = "";
	out[0] = '\0';
	FILE *f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		char *save, *t;
		for (t = strtok_r(c1 + 1, ",", &save); t; t = strtok_r(NULL, ",", &save))
			if (strcmp(t, "memory") == 0)
				break;
		if (t) {
			snprintf(rel, sizeof(rel), "%s", c2 + 1);
			rel[strcspn(rel, "\n")] = '\0';
		}
	}
	if (f)
		fclose(f);
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		char type[32], super[512], r[PATH_MAX], mp[PATH_MAX];
		if (!sep || sscanf(sep + 3, "%31s %*s %511s", type, super) != 2 ||
		    strcmp(type, "cgroup") != 0 || !strstr(super, "memory") ||
		    sscanf(line, "%*d %*d %*s %4095s %4095s", r, mp) != 2)
			continue;
		snprintf(mnt, sizeof(mnt), "%s", mp);
		snprintf(root, sizeof(root), "%s", r);
	}
	if (f)
		fclose(f);
	if (!rel[0] || !mnt[0])
		return;
	const char *p = rel;
	size_t rl = strlen(root);
	if (strcmp(root, "/") != 0 && strncmp(rel, root, rl) == 0)
		p += rl;
	snprintf(out, size, "%s%s", mnt, strcmp(p, "/") == 0 ? "" : p);
}

/* the process's own v2 cgroup if it delegates memory, or "" */
static inline void vt_cg_own_v2(char *out, size_t size)
{
	char line[PATH_MAX + 8], dir[2 * PATH_MAX] = "";
	out[0] = '\0';
	FILE *f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			const char *mnt = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0
						  ? "/sys/fs/cgroup"
						  : "/sys/fs/cgroup/unified";
			snprintf(dir, sizeof(dir), "%s%s", mnt,
				 strcmp(line + 3, "/") == 0 ? "" : line + 3);
		}
	if (f)
		fclose(f);
	char p[3 * PATH_MAX], ctl[256] = "";
	snprintf(p, sizeof(p), "%s/cgroup.subtree_control", dir);
	f = dir[0] ? fopen(p, "re") : NULL;
	if (f) {
		if (!fgets(ctl, sizeof(ctl), f))
			ctl[0] = '\0';
		fclose(f);
	}
	if (strstr(ctl, "memory"))
		snprintf(out, size, "%s", dir);
}

/* creates the child cgroup with the limit: 0, or 77 with *why set */
static inline int vt_cg_create(struct vt_cg *cg, uint64_t limit, const char **why)
{
	static unsigned seq;
	char own[PATH_MAX], val[32];
	if (limit > VT_CG_MAX_LIMIT) {
		*why = "limit above 1 GiB refused";
		return 77;
	}
	vt_cg_own_v1(own, sizeof(own));
	cg->v2 = false;
	if (!own[0] || access(own, W_OK) != 0) {
		vt_cg_own_v2(own, sizeof(own));
		cg->v2 = true;
	}
	if (!own[0] || access(own, W_OK) != 0) {
		*why = "no writable memory cgroup of this process's own (v1 memcg or delegated v2)";
		return 77;
	}
	if ((size_t)snprintf(cg->dir, sizeof(cg->dir), "%s/vt-limit-%d-%u", own, (int)getpid(),
			     seq++) >= sizeof(cg->dir) ||
	    mkdir(cg->dir, 0755) < 0) {
		cg->dir[0] = '\0';
		*why = "cannot create a child cgroup";
		return 77;
	}
	snprintf(val, sizeof(val), "%" PRIu64, limit);
	if (vt_cg_write(cg->dir, cg->v2 ? "memory.max" : "memory.limit_in_bytes", val) < 0 ||
	    vt_cg_read(cg->dir, cg->v2 ? "memory.max" : "memory.limit_in_bytes") != limit) {
		rmdir(cg->dir);
		*why = "cannot set the child cgroup's limit";
		return 77;
	}
	return 0;
}

/* a cgroup nested in @parent (made by vt_cg_create) with the limit: 0,
 * or 77 with *why set */
static inline int vt_cg_create_in(struct vt_cg *cg, const struct vt_cg *parent, uint64_t limit,
				  const char **why)
{
	char val[32];
	cg->v2 = parent->v2;
	if (limit > VT_CG_MAX_LIMIT) {
		*why = "limit above 1 GiB refused";
		return 77;
	}
	if ((size_t)snprintf(cg->dir, sizeof(cg->dir), "%s/in", parent->dir) >= sizeof(cg->dir) ||
	    mkdir(cg->dir, 0755) < 0) {
		cg->dir[0] = '\0';
		*why = "cannot create a nested child cgroup";
		return 77;
	}
	if (cg->v2 && vt_cg_write(parent->dir, "cgroup.subtree_control", "+memory") < 0) {
		rmdir(cg->dir);
		cg->dir[0] = '\0';
		*why = "cannot delegate memory to a nested cgroup2";
		return 77;
	}
	snprintf(val, sizeof(val), "%" PRIu64, limit);
	if (vt_cg_write(cg->dir, cg->v2 ? "memory.max" : "memory.limit_in_bytes", val) < 0) {
		rmdir(cg->dir);
		cg->dir[0] = '\0';
		*why = "cannot set the nested cgroup's limit";
		return 77;
	}
	return 0;
}

/* in the forked child: move the calling process into the cgroup */
static inline int vt_cg_enter(const struct vt_cg *cg)
{
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	return vt_cg_write(cg->dir, "cgroup.procs", pid);
}

/* after every process in it was reaped: remove (charges may take a moment
 * to drain: retry); 0 or -errno */
static inline int vt_cg_remove(struct vt_cg *cg)
{
	if (!cg->dir[0])
		return 0;
	for (int i = 0; i < 200; i++) {
		if (rmdir(cg->dir) == 0 || errno == ENOENT) {
			cg->dir[0] = '\0';
			return 0;
		}
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return -errno;
}

#endif
