/*
 * test-dlopen.c - the library loaded with dlopen() and closed with
 * dlclose(), as a plug-in does
 *
 * This program is not linked with libvrange: it opens the library at
 * VT_LIBVRANGE (set by tests/meson.build) and calls it through dlsym.
 * The first vr_ctx_new installs the library's SIGSEGV handler, which
 * passes the faults that are not its own to the handler it replaced
 * (vrange.h, Signals).  After every handle is destroyed and the library
 * closed, a fault elsewhere must still reach the application's handler,
 * not jump into code that dlclose unmapped.
 */
#include "tests.h"

#include <dlfcn.h>

static void app_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	_exit(42);
}

/* dlopen, a ctx with a region marked and purged, destroy, dlclose:
 * rounds times; then a wild pointer */
static void closed_body(void)
{
	const char *path = getenv("VT_LIBVRANGE");
	CK(path != NULL, "VT_LIBVRANGE not set");
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	for (int round = 0; round < 3; round++) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		CK(h != NULL, "dlopen: %s", dlerror());
		int (*ctx_new)(unsigned, struct vr_ctx **) = dlsym(h, "vr_ctx_new");
		void (*ctx_destroy)(struct vr_ctx *) = dlsym(h, "vr_ctx_destroy");
		int (*region_new)(struct vr_ctx *, const char *, size_t, unsigned,
				  struct vr_region **) = dlsym(h, "vr_region_new");
		int (*mark)(struct vr_region *, size_t, size_t) = dlsym(h, "vr_mark");
		ssize_t (*purge)(struct vr_ctx *, size_t) = dlsym(h, "vr_ctx_purge");
		CK(ctx_new && ctx_destroy && region_new && mark && purge);
		struct vr_ctx *c;
		struct vr_region *r;
		CK_EQ(ctx_new(0, &c), 0);
		CK_EQ(region_new(c, "vt-dlopen", 16 * vt_pg(), 0, &r), 0);
		CK_EQ(mark(r, 0, 16 * vt_pg()), VR_INTACT);
		CK(purge(c, SIZE_MAX) > 0);
		ctx_destroy(c);
		CK_EQ(dlclose(h), 0);
	}
	int *volatile wild = (int *)(uintptr_t)8;
	*wild = 1; /* a wild pointer: the app's handler */
	CK(0, "the wild store returned");
}

static const struct vt_scenario scenarios[] = {
	{ "closed", closed_body },
};

static void test_fault_after_dlclose(void **state)
{
	(void)state;
	int st = vt_run_scenario("closed");
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 42))
		fail_msg("a fault after dlclose did not reach the application's handler: "
			 "status 0x%x (%s %d)",
			 st, WIFSIGNALED(st) ? "signal" : "exit",
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
	int rc = vt_scenario_dispatch(argc, argv, scenarios, 1, 60);
	if (rc >= 0)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fault_after_dlclose),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
