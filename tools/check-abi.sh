#!/usr/bin/env bash
# tools/check-abi.sh [BUILD_DIR] [BASE]
#   The ABI of the 0.1 release is unchanged: builds BASE (default a2cc413,
#   the last 0.1 commit) from git into a temporary directory, then runs
#   abidiff (Debian: abigail-tools) on its libvrange.so against
#   BUILD_DIR/src/libvrange.so (default build), with the public headers.
#   Functions and enumerators may be added (0.2); nothing may be removed
#   or changed: no removed or changed function or variable, no
#   incompatible change (abidiff's exit bit 8).
# Exit: 0 unchanged, 1 the 0.1 ABI changed (the report is printed),
#       77 cannot check here (no abidiff, no git history of BASE).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
b=${1:-build}
base=${2:-a2cc413}
command -v abidiff >/dev/null 2>&1 || { echo "check-abi: abidiff not found (apt-get install abigail-tools)"; exit 77; }
git rev-parse -q --verify "$base^{commit}" >/dev/null 2>&1 || { echo "check-abi: commit $base not in this clone"; exit 77; }
new=$b/src/libvrange.so
[ -e "$new" ] || { echo "check-abi: no $new (build first)"; exit 2; }
t=$(mktemp -d "${TMPDIR:-/tmp}/vr-abi.XXXXXX")
trap 'rm -rf "$t"' EXIT
git archive "$base" | tar -x -C "$t" || exit 2
# the same compiler and debug info as the build being checked
(cd "$t" && meson setup build -Dtests=false -Dbench=false >/dev/null && ninja -C build >/dev/null) ||
	{ echo "check-abi: building $base failed"; exit 1; }
old=$t/build/src/libvrange.so
out=$t/abidiff.txt
abidiff --no-added-syms --headers-dir1 "$t/include" --headers-dir2 include "$old" "$new" >"$out" 2>&1
rc=$?
echo "check-abi: abidiff $base ($old) against $new: exit $rc"
cat "$out"
if [ $((rc & 1)) -ne 0 ]; then
	echo "check-abi: abidiff failed to run"
	exit 1
fi
if [ $((rc & 8)) -ne 0 ] || grep -Eq '[1-9][0-9]* Removed|[1-9][0-9]* Changed' "$out"; then
	echo "check-abi: the 0.1 ABI changed"
	exit 1
fi
echo "check-abi: the 0.1 ABI is unchanged (additions only)"
exit 0
