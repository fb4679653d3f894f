#!/usr/bin/env bash
# tools/check-valgrind.sh BUILD_DIR
#   Programs using libvrange run cleanly under valgrind's memcheck with the
#   suppressions file the library installs (tests/valgrind.supp): a few
#   examples from BUILD_DIR/examples run with every leak kind reported as
#   an error (--show-leak-kinds=all --errors-for-leak-kinds=all) and must
#   exit 0 with no error, and valgrind must not warn about a system call
#   it does not know (the library does not probe userfaultfd, which
#   valgrind does not implement, when it runs under valgrind).
#   VRANGE_TRAP=uffd is dropped for these runs: valgrind cannot run that
#   backend (README, "Running under valgrind").
# Exit: 0 ok, 1 failure (valgrind's output is printed), 77 no valgrind or a
# sanitizer build (VR_SANITIZE as meson's b_sanitize), 2 usage.
set -uo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
b=$1
command -v valgrind >/dev/null || { echo "SKIP: valgrind not found"; exit 77; }
case ${VR_SANITIZE:-none} in
none | '') ;;
*) echo "SKIP: a sanitizer build ($VR_SANITIZE) does not run under valgrind"; exit 77 ;;
esac
[ "${VRANGE_TRAP:-}" = uffd ] && unset VRANGE_TRAP
supp=$srcdir/tests/valgrind.supp
fail=0
for name in ptr-api lazy-objects adopt cache-groups; do
	exe=$b/examples/$name
	[ -x "$exe" ] || { echo "FAIL: no $exe (build first)"; fail=1; continue; }
	out=$(valgrind --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=all \
		--error-exitcode=99 --suppressions="$supp" "$exe" 2>&1)
	rc=$?
	problems=
	[ $rc -eq 0 ] || problems="exit $rc;"
	grep -q 'WARNING: unhandled' <<<"$out" && problems="$problems a system call valgrind does not know;"
	grep -q 'ERROR SUMMARY: 0 errors' <<<"$out" || problems="$problems errors reported;"
	if [ -n "$problems" ]; then
		printf '%s\n' "$out"
		echo "FAIL: $name under valgrind: $problems"
		fail=1
	else
		echo "ok: $name under valgrind: $(grep -o 'ERROR SUMMARY.*' <<<"$out" | head -1)"
	fi
done
exit $fail
