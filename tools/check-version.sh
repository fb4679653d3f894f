#!/usr/bin/env bash
# tools/check-version.sh [BUILD_DIR]
#   One version everywhere: the meson project version (meson.build) ==
#   VRANGE_VERSION_MAJOR.MINOR.MICRO in include/vrange.h == the first
#   (newest) entry of NEWS == debian/changelog's upstream version (when
#   debian/ exists); and, with a configured and built BUILD_DIR, == the
#   Version of the generated libvrange.pc == the real name of the built
#   library (libvrange.so.VERSION, SONAME libvrange.so.MAJOR).
# Exit: 0 all agree, 1 a mismatch (each one printed), 2 usage.
set -uo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
b=${1:-}
[ $# -le 1 ] || { echo "usage: $0 [BUILD_DIR]" >&2; exit 2; }
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}

# meson.build: the version: line of project()
meson_v=$(sed -n "/^project(/,/)/s/^[[:space:]]*version:[[:space:]]*'\([^']*\)'.*/\1/p" \
	"$srcdir/meson.build" | head -1)
[ -n "$meson_v" ] || bad "no version: in meson.build's project()"
echo "meson.build:        $meson_v"

macro() {
	sed -n "s/^#define VRANGE_VERSION_$1[[:space:]]\{1,\}\([0-9]\{1,\}\)[[:space:]]*$/\1/p" \
		"$srcdir/include/vrange.h"
}
hdr_v="$(macro MAJOR).$(macro MINOR).$(macro MICRO)"
echo "include/vrange.h:   $hdr_v"
[ "$hdr_v" = "$meson_v" ] || bad "VRANGE_VERSION_* in include/vrange.h say $hdr_v, meson.build $meson_v"

# NEWS: the first "libvrange X.Y.Z (date)" heading
news_v=$(sed -n 's/^libvrange \([0-9][0-9.]*\) (.*)$/\1/p' "$srcdir/NEWS" 2>/dev/null | head -1)
echo "NEWS (newest):      ${news_v:-none}"
[ "$news_v" = "$meson_v" ] || bad "the newest NEWS entry is '${news_v:-none}', meson.build says $meson_v"

if [ -f "$srcdir/debian/changelog" ]; then
	deb_v=$(sed -n '1s/^libvrange (\([^)-]*\)-[^)]*).*/\1/p' "$srcdir/debian/changelog")
	echo "debian/changelog:   ${deb_v:-unreadable}"
	[ "$deb_v" = "$meson_v" ] || bad "debian/changelog's upstream version is '$deb_v', meson.build says $meson_v"
fi

if [ -n "$b" ]; then
	pc=$b/meson-private/libvrange.pc
	pc_v=$(sed -n 's/^Version:[[:space:]]*//p' "$pc" 2>/dev/null)
	echo "libvrange.pc:       ${pc_v:-missing ($pc)}"
	[ "$pc_v" = "$meson_v" ] || bad "$pc says Version '${pc_v}', meson.build $meson_v"
	so=$b/src/libvrange.so.$meson_v
	if [ -f "$so" ]; then
		echo "library:            ${so#"$b"/}"
		if command -v readelf >/dev/null; then
			soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
			[ "$soname" = "libvrange.so.${meson_v%%.*}" ] ||
				bad "SONAME of $so is '$soname', expected libvrange.so.${meson_v%%.*}"
		fi
	else
		bad "no $so: the library's file version is not the project version"
	fi
fi

[ $fail -eq 0 ] && echo "ok: version $meson_v everywhere"
exit $fail
