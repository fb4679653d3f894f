/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * monitor-platform.c - where the monitor's files are: cgroup mounts, the
 * process's cgroups (/proc/self/cgroup, /proc/self/mountinfo), limit
 * files along a cgroup's ancestors, and parsing of the kernel's text
 * files.  The parsers take text, so tests feed them directly; the walk
 * takes directories, so tests point it at a scratch tree.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "monitor/monitor.h"
#include "base/log.h"

void mon_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* reads dir/name (or name if dir is NULL) into buf, NUL terminated;
 * bytes read or -errno */
ssize_t mon_read_text(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	if (dir) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
			return -ENAMETOOLONG;
		name = path;
	}
	int fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got < size - 1) {
		ssize_t n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

char *mon_slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (m) {
		char chunk[4096];
		size_t n;
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			fwrite(chunk, 1, n, m);
		fclose(m);
	}
	fclose(f);
	return buf;
}

bool mon_exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return false;
	return access(path, F_OK) == 0;
}

/* value of "key N" in a "key value" per line file (memory.events, meminfo) */
bool mon_find_key(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) != 0 ||
		    (p[klen] != ' ' && p[klen] != ':' && p[klen] != '\t'))
			continue;
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p + klen + 1, &end, 10);
		if (errno || end == p + klen + 1)
			return false;
		*out = v;
		return true;
	}
	return false;
}

/* v1 reports "no limit" as LONG_MAX rounded down to a page */
#define MON_V1_UNLIMITED (1ull << 62)

bool mon_parse_limit(const char *text, uint64_t *out)
{
	if (strncmp(text, "max", 3) == 0) {
		*out = UINT64_MAX;
		return true;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || end == text)
		return false;
	*out = v >= MON_V1_UNLIMITED ? UINT64_MAX : v;
	return true;
}

bool mon_read_u64_or_max(const char *dir, const char *name, uint64_t *out)
{
	char buf[64];
	if (mon_read_text(dir, name, buf, sizeof(buf)) <= 0)
		return false;
	return mon_parse_limit(buf, out);
}

uint64_t mon_parse_bytes(const char *s)
{
	if (!s || !*s)
		return UINT64_MAX;
	if (strcmp(s, "off") == 0)
		return 0;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return UINT64_MAX;
	unsigned shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || v == 0 || v > (UINT64_MAX >> 1) >> shift)
		return UINT64_MAX;
	return (uint64_t)v << shift;
}

const char *mon_cg2_mount(void)
{
	struct statfs sf;
	if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return "/sys/fs/cgroup";
	if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return "/sys/fs/cgroup/unified";
	return NULL;
}

char *mon_cg2_path(const char *proc_cgroup)
{
	for (const char *p = proc_cgroup; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, "0::", 3) == 0)
			return strndup(p + 3, strcspn(p + 3, "\n"));
	return NULL;
}

char *mon_cg2_find_dir(void)
{
	const char *mnt = mon_cg2_mount();
	if (!mnt) {
		vr_dbg("monitor: cgroup2 unusable: no cgroup2 mount at /sys/fs/cgroup(/unified)");
		return NULL;
	}
	char *text = mon_slurp("/proc/self/cgroup");
	char *path = text ? mon_cg2_path(text) : NULL, *dir = NULL;
	free(text);
	if (path && asprintf(&dir, "%s%s", mnt, strcmp(path, "/") == 0 ? "" : path) < 0)
		dir = NULL;
	if (!path)
		vr_dbg("monitor: cgroup2 unusable: no 0:: line in /proc/self/cgroup");
	free(path);
	return dir;
}

/* true if the comma-separated list has the word */
static bool has_word(const char *list, size_t len, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list, *end = list + len; p < end;) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		size_t n = c ? (size_t)(c - p) : (size_t)(end - p);
		if (n == wl && memcmp(p, word, wl) == 0)
			return true;
		p += n + 1;
	}
	return false;
}

/* "N:ctrl,ctrl:path" line of the v1 memory controller -> path */
static char *cg1_memory_path(const char *text)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		const char *eol = p + strcspn(p, "\n");
		const char *c1 = memchr(p, ':', (size_t)(eol - p));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (c2 && has_word(c1 + 1, (size_t)(c2 - c1 - 1), "memory"))
			return strndup(c2 + 1, (size_t)(eol - c2 - 1));
	}
	return NULL;
}

/* mount point and mounted root of the v1 memory hierarchy */
static int cg1_mount(const char *mountinfo, char **mnt, char **root)
{
	for (const char *p = mountinfo; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		/* id parent maj:min root mountpoint opts [optional...] - type source superopts */
		size_t len = strcspn(p, "\n");
		char *line = strndup(p, len);
		if (!line)
			return -ENOMEM;
		char *sep = strstr(line, " - ");
		char type[32], super[512], r[PATH_MAX], mp[PATH_MAX];
		bool ok = sep && sscanf(sep + 3, "%31s %*s %511s", type, super) == 2 &&
			  strcmp(type, "cgroup") == 0 &&
			  sscanf(line, "%*d %*d %*s %4095s %4095s", r, mp) == 2 &&
			  has_word(super, strlen(super), "memory");
		free(line);
		if (ok) {
			*mnt = strdup(mp);
			*root = strdup(r);
			return *mnt && *root ? 0 : -ENOMEM;
		}
	}
	return -ENOENT;
}

int mon_cg1_parse_dir(const char *proc_cgroup, const char *mountinfo, char **dir, char **mnt)
{
	char *root = NULL;
	*dir = *mnt = NULL;
	char *path = cg1_memory_path(proc_cgroup);
	if (!path)
		return -ENOENT;
	int err = cg1_mount(mountinfo, mnt, &root);
	if (err == 0) {
		size_t rl = strlen(root);
		const char *rel = path;
		if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0 &&
		    (path[rl] == '/' || !path[rl]))
			rel = path + rl;
		if (asprintf(dir, "%s%s", *mnt, strcmp(rel, "/") == 0 ? "" : rel) < 0) {
			*dir = NULL;
			err = -ENOMEM;
		}
	}
	free(root);
	free(path);
	if (err < 0) {
		free(*mnt);
		*mnt = NULL;
	}
	return err;
}

int mon_cg1_find_dir(char **dir, char **mnt)
{
	char *cg = mon_slurp("/proc/self/cgroup");
	char *mi = mon_slurp("/proc/self/mountinfo");
	int err = cg && mi ? mon_cg1_parse_dir(cg, mi, dir, mnt) : -ENOENT;
	free(cg);
	free(mi);
	return err;
}

/* @cur (a directory under @top, @tl its length) becomes its parent: false
 * when @cur is @top (nothing above to walk) */
static bool walk_up(char *cur, size_t tl)
{
	size_t len = strlen(cur);
	while (len > tl && cur[len - 1] == '/')
		len--;
	if (len <= tl)
		return false;
	char *slash = memrchr(cur, '/', len);
	if (!slash || (size_t)(slash - cur) < tl)
		return false;
	*slash = '\0';
	return (size_t)(slash - cur) >= tl;
}

/* the length of @top without trailing slashes, or -1 if @dir is not
 * under it */
static ssize_t top_len(const char *top, const char *dir)
{
	size_t tl = strlen(top);
	while (tl > 1 && top[tl - 1] == '/')
		tl--;
	if (strncmp(dir, top, tl) != 0 || (dir[tl] && dir[tl] != '/'))
		return -1;
	return (ssize_t)tl;
}

uint64_t mon_walk_limit(const char *top, const char *dir, const char *const *names, char **where)
{
	uint64_t best = UINT64_MAX;
	ssize_t tl = top_len(top, dir);
	if (tl < 0)
		return UINT64_MAX; /* not under top: walk nothing */
	char *cur = strdup(dir);
	if (where)
		*where = NULL;
	for (bool more = cur != NULL; more; more = walk_up(cur, (size_t)tl)) {
		for (const char *const *n = names; *n; n++) {
			uint64_t v;
			/* a tie goes to the ancestor (the walk goes up): its
			 * usage covers this cgroup's and its siblings', so its
			 * headroom is the smaller one (a pod and its container
			 * with one limit: the container's usage missed the
			 * sibling's memory and the pod's limit OOM-killed) */
			if (mon_read_u64_or_max(cur, *n, &v) && v != UINT64_MAX && v <= best) {
				best = v;
				if (where) {
					free(*where);
					*where = strdup(cur);
				}
			}
		}
	}
	free(cur);
	/* a limit of 0 (v2 memory.max or memory.high written 0) is a limit,
	 * the tightest: report it as 1 byte, because 0 means "none" to every
	 * caller (vr_ctx_memory_limit() included) */
	return best == 0 ? 1 : best;
}

uint64_t mon_walk_headroom(const char *top, const char *dir, const char *const *names, bool v1)
{
	uint64_t room = UINT64_MAX;
	ssize_t tl = top_len(top, dir);
	if (tl < 0)
		return UINT64_MAX;
	char *cur = strdup(dir);
	for (bool more = cur != NULL; more; more = walk_up(cur, (size_t)tl)) {
		uint64_t lim = UINT64_MAX, v, usage;
		for (const char *const *n = names; *n; n++)
			if (mon_read_u64_or_max(cur, *n, &v) && v < lim)
				lim = v;
		if (lim == UINT64_MAX ||
		    !mon_read_u64_or_max(cur, v1 ? "memory.usage_in_bytes" : "memory.current",
					 &usage) ||
		    usage == UINT64_MAX)
			continue;
		char buf[8192];
		uint64_t file = mon_read_text(cur, "memory.stat", buf, sizeof(buf)) > 0
					? mon_stat_file_cache(buf, v1)
					: 0;
		uint64_t held = usage > file ? usage - file : 0, r = lim > held ? lim - held : 0;
		if (r < room)
			room = r;
	}
	free(cur);
	return room;
}

uint64_t mon_readahead_max(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint64_t best = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char name[300];
		uint64_t kb;
		/* junk fails to parse; a negative or "max" reads as UINT64_MAX */
		if (e->d_name[0] == '.' ||
		    (size_t)snprintf(name, sizeof(name), "%s/queue/read_ahead_kb", e->d_name) >=
			    sizeof(name) ||
		    !mon_read_u64_or_max(dir, name, &kb) || kb > (UINT64_MAX >> 10))
			continue;
		if (kb << 10 > best)
			best = kb << 10;
	}
	closedir(d);
	return best;
}

/* The file cache the kernel can reclaim in a memory.stat text (API A3):
 * the whole file LRU, inactive and active (doc/monitor.md, "The usage
 * counted", has the measurement behind counting active too).  v1 has
 * the subtree's figures under total_, v2's are hierarchical already.
 * Missing keys count 0: the usage is then the raw usage, never less. */
uint64_t mon_stat_file_cache(const char *stat, bool v1)
{
	uint64_t inactive = 0, active = 0;
	if (!mon_find_key(stat, v1 ? "total_inactive_file" : "inactive_file", &inactive))
		inactive = 0;
	if (!mon_find_key(stat, v1 ? "total_active_file" : "active_file", &active))
		active = 0;
	return inactive + active;
}

/* this process's own memory in a /proc/self/status text: RssAnon +
 * RssShmem (kB); false if either is missing */
bool mon_status_own(const char *status, uint64_t *out)
{
	uint64_t anon, shmem;
	if (!mon_find_key(status, "RssAnon", &anon) || !mon_find_key(status, "RssShmem", &shmem))
		return false;
	*out = (anon + shmem) << 10;
	return true;
}
