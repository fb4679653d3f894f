#!/usr/bin/env bash
# ABI checks for libvrange.
#
#   tools/check-symbols.sh symbols LIBVRANGE_SO
#       The dynamic symbols libvrange.so defines (nm -D --defined-only)
#       == the symbols listed in src/libvrange.map
#       == the functions declared in include/vrange.h.
#       Also: every export is a function (T) carrying a LIBVRANGE_* version,
#       the map ends in "local: *;", the SONAME is libvrange.so.0, and
#       debian/libvrange0.symbols lists the map's symbols with their
#       version nodes.
#
#   tools/check-symbols.sh header LIBVRANGE_SO
#       include/vrange.h compiles on its own as C99 and C11 with
#       -Wall -Wextra -Wpedantic -Werror, and as C++11 and C++17 with g++
#       (the same flags); a C++ program calling the API links against
#       LIBVRANGE_SO (extern "C" linkage) and runs.  Exit 77 (skip) if there
#       is no C++ compiler (CXX, else g++, else c++).  For a sanitizer build
#       (VR_SANITIZE=address,undefined... as meson's b_sanitize) the C++
#       program is linked with -fsanitize=VR_SANITIZE, by clang++ when
#       VR_CC (the build's C compiler) is clang.
#
# Exit: 0 ok, 1 mismatch (what differs is printed), 77 skip, 2 usage.
set -uo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
header=$srcdir/include/vrange.h
map=$srcdir/src/libvrange.map

usage() {
	echo "usage: $0 symbols|header LIBVRANGE_SO" >&2
	exit 2
}
[ $# -eq 2 ] || usage
mode=$1
so=$2
[ -f "$so" ] || { echo "no such library: $so" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}

# the functions declared in vrange.h: preprocess (drops comments), keep the
# lines that come from vrange.h itself, find "vr_name (" (a function
# declarator; the vr_fault_fn typedef reads "(*vr_fault_fn)(" and is not one)
header_functions() {
	"${CC:-cc}" -E -I"$srcdir/include" -x c "$header" |
		awk '/^# [0-9]+ "/ { inh = index($0, "vrange.h\"") > 0; next } inh' |
		tr '\n' ' ' | grep -oE '\bvr_[a-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:]]*($//' |
		sort -u
}

check_symbols() {
	command -v nm >/dev/null || { echo "SKIP: nm not found (binutils)"; exit 77; }

	nm -D --defined-only "$so" >"$tmp/nm" || { bad "nm -D $so"; return; }
	# exported names (without @@VERSION), and the version node symbols
	awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" | sort -u >"$tmp/exported"
	awk '$2 == "A" { print $3 }' "$tmp/nm" | sort -u >"$tmp/nodes"
	# map: every "name;" entry, in any version node
	sed 's/#.*//' "$map" | grep -oE '^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*[[:space:]]*;' |
		tr -d ' \t;' | sort -u >"$tmp/map"
	header_functions >"$tmp/header"

	for f in exported map header; do
		[ -s "$tmp/$f" ] || bad "no symbols found in the $f list"
	done
	if ! diff -u --label exported --label src/libvrange.map "$tmp/exported" "$tmp/map"; then
		bad "exported symbols != src/libvrange.map"
	fi
	if ! diff -u --label src/libvrange.map --label include/vrange.h "$tmp/map" "$tmp/header"; then
		bad "src/libvrange.map != functions declared in include/vrange.h"
	fi
	# every export is a function with a version from the map
	awk '$2 != "A" && $2 != "T" { print "  " $0 }' "$tmp/nm" >"$tmp/nonfunc"
	[ -s "$tmp/nonfunc" ] && { bad "exports that are not functions:"; cat "$tmp/nonfunc"; }
	awk '$2 != "A" && $3 !~ /@@?LIBVRANGE_[0-9.]+$/ { print "  " $3 }' "$tmp/nm" >"$tmp/nover"
	[ -s "$tmp/nover" ] && { bad "exports without a LIBVRANGE_* version:"; cat "$tmp/nover"; }
	grep -q 'LIBVRANGE_' "$tmp/nodes" || bad "no LIBVRANGE_* version node in $so"
	sed 's/#.*//' "$map" | tr -d ' \t\n' | grep -q 'local:\*;' || bad "$map lacks 'local: *;'"
	# debian/libvrange0.symbols lists the same symbols in the same version
	# nodes (name@NODE), and each node itself
	local deb=$srcdir/debian/libvrange0.symbols
	if [ -f "$deb" ]; then
		sed 's/#.*//' "$map" | awk '
			/^[[:space:]]*LIBVRANGE_[0-9.]+[[:space:]]*\{/ { node = $1; print node "@" node; next }
			/local:/ { node = "" }
			node != "" && /^[[:space:]]*vr_[a-z0-9_]+[[:space:]]*;/ { gsub(/[[:space:];]/, ""); print $0 "@" node }' |
			sort >"$tmp/map-nodes"
		awk '/^ / { print $1 }' "$deb" | sort >"$tmp/deb"
		if ! diff -u --label src/libvrange.map --label debian/libvrange0.symbols "$tmp/map-nodes" "$tmp/deb"; then
			bad "debian/libvrange0.symbols != src/libvrange.map (name@version node)"
		fi
	fi
	if command -v readelf >/dev/null; then
		soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
		[ "$soname" = libvrange.so.0 ] || bad "SONAME is '$soname', expected libvrange.so.0"
	fi
	[ $fail -eq 0 ] && echo "ok: $(wc -l <"$tmp/exported") symbols: exported == map == header;" \
		"all functions, versioned $(paste -sd, "$tmp/nodes"), SONAME libvrange.so.0"
}

check_header() {
	local cxx=${CXX:-} san=() sanitize=${VR_SANITIZE:-none}
	if [ "$sanitize" != none ] && [ -n "$sanitize" ]; then
		san=(-fsanitize="$sanitize")
		case ${VR_CC:-cc} in
		*clang*) [ -n "$cxx" ] || cxx=clang++ ;;
		esac
	fi
	if [ -z "$cxx" ]; then
		for c in g++ c++ clang++; do
			command -v "$c" >/dev/null && { cxx=$c; break; }
		done
	fi
	local warn=(-Wall -Wextra -Wpedantic -Werror)
	printf '#include <vrange.h>\n#include <vrange.h>\n' >"$tmp/alone.c"
	for std in c99 c11; do
		"${CC:-cc}" -std=$std "${warn[@]}" -I"$srcdir/include" -fsyntax-only "$tmp/alone.c" ||
			bad "vrange.h does not compile alone as $std"
	done
	if [ -z "$cxx" ] || ! command -v "$cxx" >/dev/null; then
		echo "SKIP: no C++ compiler (set CXX, or apt-get install g++); C checks: fail=$fail"
		[ $fail -eq 0 ] && exit 77
		return
	fi
	cat >"$tmp/use.cc" <<'EOF'
// vrange.h from C++: declarations, enums, extern "C" linkage
#include <vrange.h>
#include <cstdio>

static int handler(struct vr_region *, size_t, size_t, void *, void *)
{
	return VR_FAULT_SIGBUS;
}

int main()
{
	struct vr_ctx *ctx = nullptr;
	struct vr_region *r = nullptr;
	if (vr_ctx_new(VR_CTX_NO_MONITOR, &ctx) != 0)
		return 1;
	if (vr_region_new(ctx, "cxx", 4096, 0, &r) != 0)
		return 1;
	vr_fault_fn fn = handler;
	int ok = vr_region_set_fault_handler(r, fn, nullptr) == 0 &&
		 vr_mark(r, 0, 4096) == VR_INTACT &&
		 (vr_status(r, 0, 1) & VR_STATE_VOLATILE) &&
		 vr_region_of(vr_region_base(r)) == r &&
		 vr_ctx_stat(ctx, VR_STAT_RANGES) == 1 &&
		 vr_ctx_notify_pressure(ctx, VR_PRESSURE_NONE) == 0 &&
		 vr_trap_backend() != VR_TRAP_NONE &&
		 vr_monitor_source_name(VR_MONITOR_NONE) != nullptr;
	vr_ctx_destroy(ctx);
	std::printf("C++: %s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
EOF
	for std in c++11 c++17; do
		"$cxx" -std=$std "${warn[@]}" -I"$srcdir/include" -fsyntax-only "$tmp/use.cc" ||
			bad "vrange.h does not compile as $std with $cxx"
	done
	local libdir
	libdir=$(cd "$(dirname "$so")" && pwd)
	if "$cxx" -std=c++11 "${warn[@]}" "${san[@]}" -I"$srcdir/include" -o "$tmp/use" \
		"$tmp/use.cc" "$so" -Wl,-rpath,"$libdir"; then
		"$tmp/use" || bad "the C++ program failed"
	else
		bad "a C++ program does not link against $so"
	fi
	[ $fail -eq 0 ] && echo "ok: vrange.h compiles alone as C99, C11, C++11, C++17 ($cxx);" \
		"a C++ caller links and runs"
}

case $mode in
symbols) check_symbols ;;
header) check_header ;;
*) usage ;;
esac
exit $fail
