/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-args.c - every public call with bad input (API S1, S2)
 *
 * Each error is checked twice: the return value, and "nothing changed":
 * every VR_STAT_* of the ctx, the volatility of every quarter page of the
 * fixture's regions (vr_status), the open fds and the memfd mappings of
 * the process are the same before and after the failing call.
 */
#include "tests.h"

#include <dirent.h>
#include <stdbool.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#define NSTAT (VR_STAT_LIMIT_LATENCY_NS + 1)
#define VR_ARRAY_N(a) (sizeof(a) / sizeof((a)[0]))
#define QMAX 64

static size_t P;

/* ---- "nothing changed" ---- */

struct fx {
	struct vr_ctx *c;
	struct vr_region *r[2];
	size_t size[2];
};

struct snap {
	uint64_t st[NSTAT];
	int status[2][QMAX];
	int nfd;
};

/* lines of /proc/self/maps that name the memfd @name */
static int count_maps(const char *name)
{
	char line[4096], pat[256];
	int n = 0;
	snprintf(pat, sizeof(pat), "/memfd:%s ", name);
	FILE *f = fopen("/proc/self/maps", "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, pat))
			n++;
	fclose(f);
	return n;
}

static int new_memfd(size_t size)
{
	int fd = memfd_create("vt-args-fd", MFD_CLOEXEC);
	assert_true(fd >= 0);
	if (size)
		assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

static void snap_take(const struct fx *f, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < NSTAT; i++)
		s->st[i] = vr_ctx_stat(f->c, (enum vr_stat)i);
	for (int k = 0; k < 2; k++) {
		size_t q = P / 4;
		for (size_t i = 0; i < QMAX && i * q < f->size[k]; i++) {
			size_t len = f->size[k] - i * q < q ? f->size[k] - i * q : q;
			s->status[k][i] = vr_status(f->r[k], i * q, len);
		}
	}
	s->nfd = vt_count_fds();
}

static void snap_same(const struct fx *f, const struct snap *a, const char *what)
{
	struct snap b;
	snap_take(f, &b);
	for (int i = 0; i < NSTAT; i++)
		if (a->st[i] != b.st[i])
			fail_msg("%s: stat %d changed %" PRIu64 " -> %" PRIu64, what, i, a->st[i],
				 b.st[i]);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < QMAX; i++)
			if (a->status[k][i] != b.status[k][i])
				fail_msg("%s: region %d quarter page %d status %d -> %d", what, k,
					 i, a->status[k][i], b.status[k][i]);
	if (a->nfd != b.nfd)
		fail_msg("%s: open fds %d -> %d", what, a->nfd, b.nfd);
}

/* a ctx with two regions, one of them not a page multiple, holding an
 * unpurged and a purged range so that any change shows */
static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->size[0] = 4 * P + 100;
	f->size[1] = 3 * P;
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, &f->c), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(vr_region_new(f->c, "vt-args", f->size[k], 0, &f->r[k]), 0);
	assert_int_equal(vr_mark(f->r[0], 0, 2 * P), VR_INTACT);
	assert_int_equal(vr_ctx_purge(f->c, 1), (ssize_t)(2 * P));
	assert_int_equal(vr_mark(f->r[0], 2 * P + 5, P + 45), VR_INTACT);
	assert_int_equal(vr_mark(f->r[1], P, P), VR_INTACT);
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_RANGES), 3);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	vr_ctx_destroy(f->c);
	free(f);
	return 0;
}

/* ---- contexts ---- */

static void test_ctx_new_bad(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_ctx *c = NULL;
	snap_take(f, &s);
	assert_int_equal(vr_ctx_new(0, NULL), -EINVAL);
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR, NULL), -EINVAL);
	assert_int_equal(vr_ctx_new(1u << 1, &c), -EINVAL);
	assert_int_equal(vr_ctx_new(1u << 31, &c), -EINVAL);
	assert_int_equal(vr_ctx_new(~0u, &c), -EINVAL);
	assert_int_equal(vr_ctx_new(VR_CTX_NO_MONITOR | (1u << 7), &c), -EINVAL);
	snap_same(f, &s, "vr_ctx_new");
}

static void test_destroy_null(void **state)
{
	struct fx *f = *state;
	struct snap s;
	snap_take(f, &s);
	vr_ctx_destroy(NULL);
	vr_region_destroy(NULL);
	snap_same(f, &s, "destroy(NULL)");
}

static void test_ctx_calls_null(void **state)
{
	struct fx *f = *state;
	struct snap s;
	snap_take(f, &s);
	assert_int_equal(vr_ctx_set_limit(NULL, 0), -EINVAL);
	assert_int_equal(vr_ctx_set_limit(NULL, 1), -EINVAL);
	assert_int_equal(vr_ctx_purge(NULL, 0), -EINVAL);
	assert_int_equal(vr_ctx_purge(NULL, SIZE_MAX), -EINVAL);
	assert_int_equal(vr_ctx_notify_pressure(NULL, VR_PRESSURE_NONE), -EINVAL);
	assert_int_equal(vr_ctx_notify_pressure(NULL, VR_PRESSURE_CRITICAL), -EINVAL);
	assert_int_equal(vr_ctx_monitor_source(NULL), VR_MONITOR_NONE);
	for (int i = -1; i <= NSTAT + 1; i++)
		assert_int_equal(vr_ctx_stat(NULL, (enum vr_stat)i), 0);
	snap_same(f, &s, "ctx calls on NULL");
}

static void test_pressure_level_out_of_enum(void **state)
{
	struct fx *f = *state;
	struct snap s;
	snap_take(f, &s);
	const int bad[] = { -1, 3, 4, 100, INT32_MAX, INT32_MIN };
	for (size_t i = 0; i < VR_ARRAY_N(bad); i++)
		assert_int_equal(vr_ctx_notify_pressure(f->c, (enum vr_pressure)bad[i]), -EINVAL);
	/* in particular: no PRESSURE_EVENTS, nothing purged */
	snap_same(f, &s, "notify_pressure(bad level)");
}

static void test_stat_unknown_which(void **state)
{
	struct fx *f = *state;
	struct snap s;
	snap_take(f, &s);
	assert_int_equal(vr_ctx_stat(f->c, (enum vr_stat) - 1), 0);
	assert_int_equal(vr_ctx_stat(f->c, (enum vr_stat)NSTAT), 0);
	assert_int_equal(vr_ctx_stat(f->c, (enum vr_stat)1000), 0);
	assert_int_equal(vr_ctx_stat(f->c, (enum vr_stat)INT32_MIN), 0);
	/* and a known one is not 0 here: the check above can fail */
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_REGIONS), 2);
	snap_same(f, &s, "vr_ctx_stat(unknown)");
}

static void test_purge_zero(void **state)
{
	struct fx *f = *state;
	struct snap s;
	snap_take(f, &s);
	/* not an error, but nothing may change */
	assert_int_equal(vr_ctx_purge(f->c, 0), 0);
	assert_int_equal(vr_ctx_notify_pressure(f->c, VR_PRESSURE_NONE), 0);
	snap_same(f, &s, "purge(0) / pressure NONE");
}

/* ---- regions ---- */

static void test_region_new_bad(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_region *r = NULL;
	const char *nm = "vt-args-leak";
	snap_take(f, &s);
	assert_int_equal(vr_region_new(NULL, nm, P, 0, &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, P, 0, NULL), -EINVAL);
	assert_int_equal(vr_region_new(NULL, nm, P, 0, NULL), -EINVAL);
	/* unknown bits, and VR_REGION_SHARED with VR_REGION_ANON (S26) */
	assert_int_equal(vr_region_new(f->c, nm, P, 1u << 2, &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, P, VR_REGION_ANON | VR_REGION_SHARED, &r),
			 -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, P, VR_REGION_ANON | (1u << 2), &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, 0, VR_REGION_ANON, &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, SIZE_MAX, VR_REGION_ANON, &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, P, 1u << 31, &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, P, ~0u, &r), -EINVAL);
	assert_int_equal(vr_region_new(f->c, nm, 0, 0, &r), -EINVAL);
	assert_int_equal(count_maps(nm), 0);
	snap_same(f, &s, "vr_region_new(bad)");
}

static void test_region_new_huge(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_region *r = NULL;
	const char *nm = "vt-args-huge";
	const size_t toff = (size_t)INT64_MAX; /* off_t max */
	/* page round-up overflows size_t or off_t: -EINVAL */
	const size_t einval[] = {
		SIZE_MAX,        SIZE_MAX - 1, SIZE_MAX - P + 2, SIZE_MAX - P + 1,
		toff + 1,        toff,         toff - P + 2, /* rounds up to 2^63 */
		(size_t)1 << 63,
	};
	snap_take(f, &s);
	for (size_t i = 0; i < VR_ARRAY_N(einval); i++) {
		if (vr_region_new(f->c, nm, einval[i], 0, &r) != -EINVAL)
			fail_msg("size %#zx: not -EINVAL", einval[i]);
	}
	/* the largest size whose round-up fits off_t is not an argument error,
	 * but the system cannot provide it: some negative errno, nothing leaked */
	size_t big = toff - P + 1;
	int rc = vr_region_new(f->c, nm, big, 0, &r);
	if (rc == 0)
		fail_msg("size %#zx: region created", big);
	assert_true(rc < 0);
	assert_int_equal(count_maps(nm), 0);
	snap_same(f, &s, "vr_region_new(huge)");
}

/* failures of the system come back as their negative errno, with no fd,
 * mapping or region left behind (S1) */
static void test_region_new_system_failures(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_region *r = NULL;
	char longname[300];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	snap_take(f, &s);
	/* memfd_create: name too long */
	assert_int_equal(vr_region_new(f->c, longname, P, 0, &r), -EINVAL);
	snap_same(f, &s, "memfd_create failure (name)");

	/* out of fds: memfd_create (vr_region_new) and dup (vr_region_from_fd)
	 * fail with EMFILE.  Fill the holes of the fd table, then lower the
	 * limit to just above the highest open fd. */
	struct rlimit old, rl;
	int mfd = new_memfd(P), fill[512], nfill = 0, hi = -1;
	for (int fd = 0; fd < 65536; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			hi = fd;
	for (;;) {
		int x = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(x >= 0);
		if (x > hi || nfill == 512) {
			close(x);
			break;
		}
		fill[nfill++] = x;
	}
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = (rlim_t)hi + 1;
	bool lim = setrlimit(RLIMIT_NOFILE, &rl) == 0; /* not under valgrind */
	struct vr_region *r2 = NULL;
	int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int rc1 = vr_region_new(f->c, "vt-args-emfile", P, 0, &r);
	int rc2 = vr_region_from_fd(f->c, mfd, 0, &r2);
	setrlimit(RLIMIT_NOFILE, &old);
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	close(mfd);
	if (probe >= 0)
		close(probe);
	if (probe >= 0 || !lim) {
		/* too many holes in the fd table, or no setrlimit (valgrind) */
		print_message("could not exhaust the fd table: EMFILE case skipped\n");
		if (rc1 == 0)
			vr_region_destroy(r);
		if (rc2 == 0)
			vr_region_destroy(r2);
	} else {
		assert_int_equal(rc1, -EMFILE);
		assert_int_equal(rc2, -EMFILE);
	}
	assert_int_equal(count_maps("vt-args-emfile"), 0);
	snap_same(f, &s, "out of fds");

	/* ftruncate: file size limit (SIGXFSZ ignored, so EFBIG) */
	struct sigaction ign = { .sa_handler = SIG_IGN }, oldsa;
	sigemptyset(&ign.sa_mask);
	assert_int_equal(sigaction(SIGXFSZ, &ign, &oldsa), 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	rl = old;
	rl.rlim_cur = 16 * P;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
	int rc = vr_region_new(f->c, "vt-args-efbig", 64 * P, 0, &r);
	int ok = vr_region_new(f->c, "vt-args-efbig", 8 * P, 0, &r);
	setrlimit(RLIMIT_FSIZE, &old);
	sigaction(SIGXFSZ, &oldsa, NULL);
	assert_int_equal(rc, -EFBIG);
	assert_int_equal(ok, 0);
	vr_region_destroy(r);
	assert_int_equal(count_maps("vt-args-efbig"), 0);
	snap_same(f, &s, "ftruncate failure");
}

/* mmap failure (address space limit): -ENOMEM, memfd closed.  Not under
 * valgrind or ASan, which manage the address space themselves. */
static void test_region_new_mmap_failure(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_region *r = NULL;
	bool asan = false;
#if defined(__SANITIZE_ADDRESS__)
	asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
	asan = true;
#endif
#endif
	if (asan || getenv("VT_VALGRIND")) {
		print_message("under ASan/valgrind: skipped\n");
		skip();
	}
	size_t vm = 0;
	char line[256];
	FILE *fp = fopen("/proc/self/status", "re");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "VmSize: %zu kB", &vm) == 1)
			break;
	fclose(fp);
	assert_true(vm > 0);
	struct rlimit old, rl;
	assert_int_equal(getrlimit(RLIMIT_AS, &old), 0);
	rl = old;
	rl.rlim_cur = (rlim_t)vm * 1024 + (64u << 20); /* 64 MiB of room */
	snap_take(f, &s);
	assert_int_equal(setrlimit(RLIMIT_AS, &rl), 0);
	int rc = vr_region_new(f->c, "vt-args-enomem", (size_t)1 << 30, 0, &r);
	setrlimit(RLIMIT_AS, &old);
	assert_int_equal(rc, -ENOMEM);
	assert_int_equal(count_maps("vt-args-enomem"), 0);
	snap_same(f, &s, "mmap failure");
}

static void test_getters_null(void **state)
{
	struct fx *f = *state;
	struct snap s;
	snap_take(f, &s);
	assert_null(vr_region_base(NULL));
	assert_int_equal(vr_region_size(NULL), 0);
	assert_int_equal(vr_region_fd(NULL), -EINVAL);
	assert_null(vr_region_of(NULL));
	assert_int_equal(vr_region_set_fault_handler(NULL, NULL, NULL), -EINVAL);
	assert_int_equal(vr_region_set_fault_handler(NULL, (vr_fault_fn)1, f), -EINVAL);
	/* removing a handler that was never set is fine */
	assert_int_equal(vr_region_set_fault_handler(f->r[0], NULL, f), 0);
	snap_same(f, &s, "getters(NULL)");
}

/* ---- vr_region_from_fd ---- */

static int from_fd_rc(struct fx *f, int fd, const char *what, struct snap *s)
{
	struct vr_region *r = NULL;
	int rc = vr_region_from_fd(f->c, fd, 0, &r);
	if (rc == 0) {
		vr_region_destroy(r);
		fail_msg("vr_region_from_fd(%s) succeeded", what);
	}
	snap_same(f, s, what);
	return rc;
}

static void test_from_fd_bad_args(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_region *r = NULL;
	int fd = new_memfd(P);
	snap_take(f, &s);
	assert_int_equal(vr_region_from_fd(NULL, fd, 0, &r), -EINVAL);
	assert_int_equal(vr_region_from_fd(f->c, fd, 0, NULL), -EINVAL);
	assert_int_equal(vr_region_from_fd(f->c, fd, 1, &r), -EINVAL);
	assert_int_equal(vr_region_from_fd(f->c, fd, ~0u, &r), -EINVAL);
	assert_int_equal(vr_region_from_fd(f->c, -1, 0, &r), -EINVAL);
	assert_int_equal(vr_region_from_fd(f->c, -100, 0, &r), -EINVAL);
	assert_int_equal(vr_region_from_fd(f->c, INT32_MIN, 0, &r), -EINVAL);
	snap_same(f, &s, "vr_region_from_fd(bad args)");
	/* the caller's fd is untouched */
	assert_true(fcntl(fd, F_GETFD) >= 0);
	close(fd);
}

static void test_from_fd_not_regular(void **state)
{
	struct fx *f = *state;
	struct snap s;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(null >= 0);
	int sk = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(sk >= 0);
	int empty = new_memfd(0);
	/* a directory on tmpfs (where memfds live), if there is one */
	int tdir = -1;
	struct statfs sfs;
	if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC)
		tdir = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snap_take(f, &s);
	if (tdir >= 0)
		assert_int_equal(from_fd_rc(f, tdir, "directory on tmpfs", &s), -EINVAL);
	assert_int_equal(from_fd_rc(f, p[0], "pipe read end", &s), -EINVAL);
	assert_int_equal(from_fd_rc(f, p[1], "pipe write end", &s), -EINVAL);
	assert_int_equal(from_fd_rc(f, dir, "directory", &s), -EINVAL);
	assert_int_equal(from_fd_rc(f, null, "/dev/null", &s), -EINVAL);
	assert_int_equal(from_fd_rc(f, sk, "socket", &s), -EINVAL);
	assert_int_equal(from_fd_rc(f, empty, "empty memfd", &s), -EINVAL);
	close(p[0]);
	close(p[1]);
	close(dir);
	close(null);
	close(sk);
	close(empty);
	if (tdir >= 0)
		close(tdir);
}

static void test_from_fd_closed_fd(void **state)
{
	struct fx *f = *state;
	struct snap s;
	int fd = new_memfd(P);
	close(fd); /* a number that is no open fd now */
	snap_take(f, &s);
	assert_true(from_fd_rc(f, fd, "closed fd", &s) < 0);
}

/* a memfd we may not map read/write: a system-call failure, nothing leaked */
static void test_from_fd_readonly(void **state)
{
	struct fx *f = *state;
	struct snap s;
	char path[64];
	int fd = new_memfd(P);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int ro = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(ro >= 0);
	snap_take(f, &s);
	assert_true(from_fd_rc(f, ro, "O_RDONLY memfd", &s) < 0);
	assert_int_equal(count_maps("vt-args-fd"), 0);
	close(ro);
	close(fd);
}

static void test_from_fd_not_tmpfs(void **state)
{
	struct fx *f = *state;
	struct snap s;
	const char *dirs[] = { ".", "/var/tmp", "/tmp" };
	char path[4096];
	int fd = -1;
	for (size_t i = 0; i < VR_ARRAY_N(dirs) && fd < 0; i++) {
		struct statfs sfs;
		if (statfs(dirs[i], &sfs) < 0 || sfs.f_type == TMPFS_MAGIC ||
		    sfs.f_type == HUGETLBFS_MAGIC)
			continue;
		snprintf(path, sizeof(path), "%s/vt-args-XXXXXX", dirs[i]);
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0) {
		print_message("no writable non-tmpfs directory: case skipped\n");
		skip();
	}
	assert_int_equal(ftruncate(fd, (off_t)(2 * P)), 0);
	snap_take(f, &s);
	assert_int_equal(from_fd_rc(f, fd, "file not on tmpfs", &s), -EOPNOTSUPP);
	/* not a multiple of the page size either */
	assert_int_equal(ftruncate(fd, (off_t)(P + 1)), 0);
	assert_int_equal(from_fd_rc(f, fd, "file not on tmpfs (odd size)", &s), -EOPNOTSUPP);
	close(fd);
}

static void test_from_fd_hugetlb(void **state)
{
	struct fx *f = *state;
	struct snap s;
	int fd = memfd_create("vt-args-huge", MFD_CLOEXEC | MFD_HUGETLB);
	if (fd < 0) {
		print_message("MFD_HUGETLB: %s: case skipped\n", strerror(errno));
		skip();
	}
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	size_t hp = st.st_blksize > 0 ? (size_t)st.st_blksize : 2u << 20;
	if (ftruncate(fd, (off_t)hp) < 0) {
		print_message("ftruncate(hugetlb memfd, %zu): %s: case skipped\n", hp,
			      strerror(errno));
		close(fd);
		skip();
	}
	snap_take(f, &s);
	assert_int_equal(from_fd_rc(f, fd, "hugetlb memfd", &s), -EOPNOTSUPP);
	close(fd);
	/* empty: unsupported before it is empty */
	fd = memfd_create("vt-args-huge", MFD_CLOEXEC | MFD_HUGETLB);
	assert_true(fd >= 0);
	assert_int_equal(from_fd_rc(f, fd, "empty hugetlb memfd", &s), -EOPNOTSUPP);
	close(fd);
}

/* a memfd too large to map, and one whose page round-up overflows off_t */
static void test_from_fd_huge_file(void **state)
{
	struct fx *f = *state;
	struct snap s;
	int fd = new_memfd(0);
	snap_take(f, &s);
	if (ftruncate(fd, INT64_MAX) == 0)
		assert_int_equal(from_fd_rc(f, fd, "memfd of INT64_MAX bytes", &s), -EINVAL);
	else
		print_message("ftruncate(INT64_MAX): %s: case skipped\n", strerror(errno));
	if (ftruncate(fd, (off_t)1 << 62) == 0)
		assert_true(from_fd_rc(f, fd, "memfd of 2^62 bytes", &s) < 0);
	else
		print_message("ftruncate(2^62): %s: case skipped\n", strerror(errno));
	assert_int_equal(count_maps("vt-args-fd"), 0);
	close(fd);
}

/* a good fd for contrast: the call works, dup()s, and the caller keeps fd */
static void test_from_fd_good(void **state)
{
	struct fx *f = *state;
	struct vr_region *r = NULL;
	int fd = new_memfd(P + 7);
	assert_int_equal(vr_region_from_fd(f->c, fd, 0, &r), 0);
	assert_int_not_equal(vr_region_fd(r), fd);
	assert_int_equal(vr_region_size(r), P + 7);
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_REGIONS), 3);
	close(fd);
	/* beyond size: not addressable */
	assert_int_equal(vr_mark(r, P + 7, 1), -EINVAL);
	assert_int_equal(vr_mark(r, P + 6, 1), VR_INTACT);
	vr_region_destroy(r);
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_REGIONS), 2);
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_RANGES), 3);
}

/* ---- mark / unmark / status, file-offset style ---- */

typedef int (*span_fn)(struct vr_region *, size_t, size_t);
static const struct {
	const char *name;
	span_fn fn;
} span_fns[] = {
	{ "vr_mark", vr_mark },
	{ "vr_unmark", vr_unmark },
	{ "vr_status", vr_status },
};

static void span_bad(struct fx *f, struct vr_region *r, size_t off, size_t len)
{
	for (size_t i = 0; i < VR_ARRAY_N(span_fns); i++) {
		struct snap s;
		char what[128];
		snap_take(f, &s);
		int rc = span_fns[i].fn(r, off, len);
		snprintf(what, sizeof(what), "%s(%p, %#zx, %#zx)", span_fns[i].name, (void *)r, off,
			 len);
		if (rc != -EINVAL)
			fail_msg("%s = %d, expected -EINVAL", what, rc);
		snap_same(f, &s, what);
	}
}

static void test_span_null_region(void **state)
{
	struct fx *f = *state;
	span_bad(f, NULL, 0, 1);
	span_bad(f, NULL, 0, P);
	span_bad(f, NULL, 0, 0);
}

static void test_span_len_zero(void **state)
{
	struct fx *f = *state;
	for (int k = 0; k < 2; k++) {
		size_t sz = f->size[k];
		span_bad(f, f->r[k], 0, 0);
		span_bad(f, f->r[k], P, 0); /* inside a range or not */
		span_bad(f, f->r[k], P + 10, 0);
		span_bad(f, f->r[k], sz - 1, 0);
		span_bad(f, f->r[k], sz, 0);
		span_bad(f, f->r[k], sz + 1, 0);
	}
}

static void test_span_overflow(void **state)
{
	struct fx *f = *state;
	for (int k = 0; k < 2; k++) {
		size_t sz = f->size[k];
		span_bad(f, f->r[k], 1, SIZE_MAX);
		span_bad(f, f->r[k], P, SIZE_MAX - P + 1); /* off + len == 0 */
		span_bad(f, f->r[k], P, SIZE_MAX - P + 2); /* off + len == 1 */
		span_bad(f, f->r[k], SIZE_MAX, 1);
		span_bad(f, f->r[k], SIZE_MAX, SIZE_MAX);
		span_bad(f, f->r[k], sz, SIZE_MAX - sz + 1);
		span_bad(f, f->r[k], SIZE_MAX - 10, 20);
	}
}

static void test_span_past_end(void **state)
{
	struct fx *f = *state;
	for (int k = 0; k < 2; k++) {
		size_t sz = f->size[k];
		span_bad(f, f->r[k], sz, 1);
		span_bad(f, f->r[k], sz + 1, 1);
		span_bad(f, f->r[k], 0, sz + 1);
		span_bad(f, f->r[k], sz - 1, 2);
		span_bad(f, f->r[k], P, sz);
		span_bad(f, f->r[k], 100 * P, P);
	}
}

/* region 0 is 4P + 100 bytes: the mapping covers 5 pages, but the 4P - 100
 * bytes past the size are not addressable through the API */
static void test_span_tail_of_partial_page(void **state)
{
	struct fx *f = *state;
	struct vr_region *r = f->r[0];
	size_t sz = f->size[0], rounded = 5 * P;
	span_bad(f, r, sz, rounded - sz);
	span_bad(f, r, 4 * P, P);
	span_bad(f, r, 4 * P + 99, 2);
	span_bad(f, r, rounded - 1, 1);
	/* the last byte itself is fine */
	assert_int_equal(vr_mark(r, sz - 1, 1), VR_INTACT);
	assert_int_equal(vr_status(r, sz - 1, 1), VR_STATE_VOLATILE);
	assert_int_equal(vr_unmark(r, 4 * P, 100), VR_INTACT);
	assert_int_equal(vr_status(r, 4 * P, 100), 0);
}

/* a destroyed region's memory is no region any more */
static void test_ptr_destroyed_region(void **state)
{
	struct fx *f = *state;
	struct snap s;
	struct vr_region *r;
	assert_int_equal(vr_region_new(f->c, "vt-args-gone", 2 * P, 0, &r), 0);
	uint8_t *b = vr_region_base(r);
	assert_ptr_equal(vr_region_of(b), r);
	vr_region_destroy(r);
	snap_take(f, &s);
	assert_null(vr_region_of(b));
	assert_null(vr_region_of(b + P));
	assert_int_equal(vr_mark_ptr(b, P), -EINVAL);
	assert_int_equal(vr_unmark_ptr(b, P), -EINVAL);
	snap_same(f, &s, "ptr calls on a destroyed region");
}

/* ---- pointer style ---- */

typedef int (*ptr_fn)(void *, size_t);
static const struct {
	const char *name;
	ptr_fn fn;
} ptr_fns[] = {
	{ "vr_mark_ptr", vr_mark_ptr },
	{ "vr_unmark_ptr", vr_unmark_ptr },
};

static void ptr_bad(struct fx *f, void *addr, size_t len)
{
	for (size_t i = 0; i < VR_ARRAY_N(ptr_fns); i++) {
		struct snap s;
		char what[128];
		snap_take(f, &s);
		int rc = ptr_fns[i].fn(addr, len);
		snprintf(what, sizeof(what), "%s(%p, %#zx)", ptr_fns[i].name, addr, len);
		if (rc != -EINVAL)
			fail_msg("%s = %d, expected -EINVAL", what, rc);
		snap_same(f, &s, what);
	}
}

static void test_ptr_outside(void **state)
{
	struct fx *f = *state;
	int local = 0;
	void *heap = malloc(64);
	assert_non_null(heap);
	ptr_bad(f, NULL, 1);
	ptr_bad(f, NULL, P);
	ptr_bad(f, &local, sizeof(local));
	ptr_bad(f, heap, 64);
	ptr_bad(f, (void *)test_ptr_outside, 16);
	ptr_bad(f, (void *)(uintptr_t)-P, P - 1);
	free(heap);
}

static void test_ptr_bad_len(void **state)
{
	struct fx *f = *state;
	for (int k = 0; k < 2; k++) {
		uint8_t *b = vr_region_base(f->r[k]);
		size_t sz = f->size[k];
		ptr_bad(f, b, 0);
		ptr_bad(f, b + P, 0);
		ptr_bad(f, b, SIZE_MAX);
		ptr_bad(f, b + 10, SIZE_MAX - 9);                    /* addr + len wraps to 1 */
		ptr_bad(f, b + 10, (size_t)0 - (uintptr_t)(b + 10)); /* ends at address 0 */
		ptr_bad(f, b, sz + 1);
		ptr_bad(f, b + sz - 1, 2);
		/* past size (inside the mapping of region 0), unless another
		 * region happens to start right there (region 1) */
		if (!vr_region_of(b + sz))
			ptr_bad(f, b + sz, 1);
		else
			assert_true(k == 1);
		ptr_bad(f, b - 1, 2); /* starts before the region */
		ptr_bad(f, b - P, P + 1);
	}
}

static void test_ptr_good(void **state)
{
	struct fx *f = *state;
	uint8_t *b = vr_region_base(f->r[0]);
	size_t sz = f->size[0];
	uint64_t v = vr_ctx_stat(f->c, VR_STAT_VOLATILE_BYTES);
	assert_ptr_equal(vr_region_of(b), f->r[0]);
	assert_ptr_equal(vr_region_of(b + sz - 1), f->r[0]);
	assert_null(vr_region_of(b + sz));
	assert_int_equal(vr_mark_ptr(b + sz - 3, 3), VR_INTACT);
	assert_int_equal(vr_status(f->r[0], sz - 3, 3), VR_STATE_VOLATILE);
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_VOLATILE_BYTES), v + 3);
	assert_int_equal(vr_unmark_ptr(b + sz - 3, 3), VR_INTACT);
	assert_int_equal(vr_ctx_stat(f->c, VR_STAT_VOLATILE_BYTES), v);
}

/* a span running from one region into the next, when they are adjacent
 * in the address space (they usually are: mmap hands out neighbouring
 * addresses), or into whatever follows */
static void test_ptr_spanning_regions(void **state)
{
	struct fx *f = *state;
	enum { N = 12 };
	struct vr_region *r[N];
	int found = 0;
	for (int i = 0; i < N; i++)
		assert_int_equal(vr_region_new(f->c, "vt-args-adj", 2 * P, 0, &r[i]), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(vr_mark(r[i], P, P / 2), VR_INTACT);
	for (int i = 0; i < N; i++) {
		uint8_t *end = (uint8_t *)vr_region_base(r[i]) + 2 * P;
		for (int j = 0; j < N; j++) {
			if (vr_region_base(r[j]) != end)
				continue;
			found++;
			uint64_t st[NSTAT];
			for (int k = 0; k < NSTAT; k++)
				st[k] = vr_ctx_stat(f->c, (enum vr_stat)k);
			ptr_bad(f, end - 10, 20);
			ptr_bad(f, end - 1, 2);
			ptr_bad(f, end - 2 * P, 4 * P);
			ptr_bad(f, end - P, P + P / 2); /* from a range into a range */
			assert_int_equal(vr_status(r[i], 0, 2 * P), VR_STATE_VOLATILE);
			assert_int_equal(vr_status(r[i], 0, P), 0);
			assert_int_equal(vr_status(r[j], 0, P), 0);
			for (int k = 0; k < NSTAT; k++)
				assert_int_equal(vr_ctx_stat(f->c, (enum vr_stat)k), st[k]);
			/* each side alone is fine */
			assert_int_equal(vr_mark_ptr(end - 10, 10), VR_INTACT);
			assert_int_equal(vr_mark_ptr(end, 10), VR_INTACT);
			assert_int_equal(vr_unmark_ptr(end - 10, 10), VR_INTACT);
			assert_int_equal(vr_unmark_ptr(end, 10), VR_INTACT);
		}
		ptr_bad(f, end - 1, 2 * P);
	}
	if (!found)
		print_message("no two regions were adjacent: only spans past a region's end were "
			      "checked\n");
	for (int i = 0; i < N; i++)
		vr_region_destroy(r[i]);
}

int main(void)
{
	P = vt_pg();
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		T(test_ctx_new_bad),
		T(test_destroy_null),
		T(test_ctx_calls_null),
		T(test_pressure_level_out_of_enum),
		T(test_stat_unknown_which),
		T(test_purge_zero),
		T(test_region_new_bad),
		T(test_region_new_huge),
		T(test_region_new_system_failures),
		T(test_region_new_mmap_failure),
		T(test_from_fd_huge_file),
		T(test_getters_null),
		T(test_from_fd_bad_args),
		T(test_from_fd_not_regular),
		T(test_from_fd_closed_fd),
		T(test_from_fd_readonly),
		T(test_from_fd_not_tmpfs),
		T(test_from_fd_hugetlb),
		T(test_from_fd_good),
		T(test_span_null_region),
		T(test_span_len_zero),
		T(test_span_overflow),
		T(test_span_past_end),
		T(test_span_tail_of_partial_page),
		T(test_ptr_destroyed_region),
		T(test_ptr_outside),
		T(test_ptr_bad_len),
		T(test_ptr_good),
		T(test_ptr_spanning_regions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
