#!/usr/bin/env bash
# Install a build into a temporary DESTDIR and use the installed copy the
# way a user would: through pkg-config only.
#
#   tools/check-install.sh BUILD_DIR
#
# 1. meson install --destdir TMP (BUILD_DIR must be built; nothing is rebuilt)
# 2. the header, libvrange.so.0 (SONAME) and its libvrange.so link, and
#    libvrange.pc are installed; a man page per exported function, and
#    `man vr_obj_pin` shows its page with the installed man directory;
#    share/libvrange/valgrind.supp is tests/valgrind.supp; the installed library's exports match
#    src/libvrange.map and include/vrange.h (tools/check-symbols.sh)
# 3. every examples/*.c is compiled with
#        cc x.c $(pkg-config --cflags --libs libvrange)
#    where pkg-config sees the DESTDIR (PKG_CONFIG_PATH to its .pc
#    directory, PKG_CONFIG_SYSROOT_DIR=TMP) and nothing else of the tree,
#    then run with LD_LIBRARY_PATH pointing into the DESTDIR; the binary
#    must load the installed libvrange.so.0, exit 0 and print its summary
#    (sqlite-cache.c with libvrange-sqlite's flags, if that was installed).
# Exit: 0 ok, 1 failure, 2 usage.  MESON, CC and KEEP=1 (keep TMP) are honoured;
# for a sanitizer build, VR_SANITIZE (meson's b_sanitize) and VR_CC (the
# build's C compiler) make the examples build as the library was built.
set -uo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
b=$(cd "$1" && pwd) || exit 2
meson=${MESON:-meson}
cc=${CC:-${VR_CC:-cc}}
san=
if [ -n "${VR_SANITIZE:-}" ] && [ "$VR_SANITIZE" != none ]; then
	san=-fsanitize=$VR_SANITIZE
fi

dest=$(mktemp -d "${TMPDIR:-/tmp}/vrange-install.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$dest"' EXIT
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}

echo "== meson install --destdir $dest"
if ! $meson install -C "$b" --no-rebuild --destdir "$dest" >"$dest.log" 2>&1; then
	cat "$dest.log"
	rm -f "$dest.log"
	echo "FAIL: meson install"
	exit 1
fi
rm -f "$dest.log"

# what was installed
find_one() {
	find "$dest" -name "$1" "${@:2}" | head -1
}
hdr=$(find_one vrange.h -path '*/include/*')
pc=$(find_one libvrange.pc -path '*/pkgconfig/*')
so0=$(find_one 'libvrange.so.0')
sodev=$(find_one 'libvrange.so')
sofile=$(find_one 'libvrange.so.0.*' -type f)
[ -n "$hdr" ] || bad "no include/vrange.h installed"
[ -n "$pc" ] || bad "no pkgconfig/libvrange.pc installed"
[ -n "$sofile" ] || bad "no libvrange.so.0.* installed"
{ [ -n "$so0" ] && [ -L "$so0" ]; } || bad "no libvrange.so.0 symlink (SONAME) installed"
{ [ -n "$sodev" ] && [ -L "$sodev" ]; } || bad "no libvrange.so development symlink installed"
[ $fail -eq 0 ] || exit 1
cmp -s "$hdr" "$srcdir/include/vrange.h" || bad "installed vrange.h differs from include/vrange.h"
libdir=$(dirname "$sofile")
echo "installed: ${hdr#"$dest"} ${sofile#"$dest"} ${pc#"$dest"}"
docdir=$(find "$dest" -type d -path '*/share/doc/libvrange' | head -1)
if [ -n "$docdir" ]; then
	echo "installed docs: $(cd "$docdir" && find . -type f | sed 's|^\./||' | sort | paste -sd' ')"
else
	echo "note: no share/doc/libvrange installed"
fi

supp=$(find_one valgrind.supp -path '*/share/libvrange/*')
if [ -z "$supp" ]; then
	bad "no share/libvrange/valgrind.supp installed"
else
	cmp -s "$supp" "$srcdir/tests/valgrind.supp" || bad "installed valgrind.supp differs from tests/valgrind.supp"
	echo "installed: ${supp#"$dest"}"
fi

echo "== man pages"
man3=$(find "$dest" -type d -path '*/man/man3' | head -1)
if [ -z "$man3" ]; then
	bad "no man/man3 installed"
else
	mandir=$(dirname "$man3")
	[ -f "$mandir/man7/libvrange.7" ] || bad "no man7/libvrange.7 installed"
	missing=
	for f in $(sed 's/#.*//' "$srcdir/src/libvrange.map" | grep -oE '^[[:space:]]*vr_[a-z0-9_]+[[:space:]]*;' | tr -d ' \t;'); do
		[ -f "$man3/$f.3" ] || missing="$missing $f"
	done
	[ -z "$missing" ] || bad "no installed man page for:$missing"
	# what a user types, with the installed tree as the manual path
	if command -v man >/dev/null; then
		if MANWIDTH=80 man -M "$mandir" vr_obj_pin 2>&1 | grep -q 'vr_obj_pin - make an object'; then
			echo "ok: man vr_obj_pin (MANPATH ${mandir#"$dest"}): $(find "$mandir" -name '*.[37]' | wc -l) pages"
		else
			bad "man -M ${mandir#"$dest"} vr_obj_pin does not show the page"
		fi
	fi
fi

echo "== exported symbols of the installed library"
"$srcdir/tools/check-symbols.sh" symbols "$sofile" || bad "symbols of the installed library"

echo "== pkg-config"
pcdir=$(dirname "$pc")
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_SYSROOT_DIR="$dest"
flags=$(pkg-config --cflags --libs libvrange) || { bad "pkg-config --cflags --libs libvrange"; exit 1; }
echo "pkg-config --cflags --libs libvrange: $flags"
echo "pkg-config --modversion libvrange: $(pkg-config --modversion libvrange)"
case " $flags " in
*" -I$dest/"*) ;;
*) bad "pkg-config's -I does not point into the DESTDIR" ;;
esac
case " $flags " in
*" -L$dest/"*) ;;
*) bad "pkg-config's -L does not point into the DESTDIR" ;;
esac

echo "== examples against the installed copy"
mkdir -p "$dest/bin"
for src in "$srcdir"/examples/*.c; do
	name=$(basename "$src" .c)
	exe=$dest/bin/$name
	ex_flags=$flags
	# libvrange-sqlite's example: its own .pc, installed when SQLite was found
	if [ "$name" = sqlite-cache ]; then
		ex_flags=$(pkg-config --cflags --libs libvrange-sqlite 2>/dev/null) ||
			{ echo "skip: $name (no libvrange-sqlite installed)"; continue; }
	fi
	# word splitting of $ex_flags is intended: it is a command line
	# shellcheck disable=SC2086
	if ! (cd "$dest/bin" && $cc $san -o "$exe" "$src" $ex_flags); then
		bad "$name does not compile with pkg-config's flags"
		continue
	fi
	loaded=$(LD_LIBRARY_PATH="$libdir" ldd "$exe" | awk '$1 == "libvrange.so.0" { print $3 }')
	case $loaded in
	"$dest"/*) ;;
	*) bad "$name loads libvrange.so.0 from '$loaded', not from the DESTDIR" ;;
	esac
	args=
	[ "$name" = image-cache ] && args=2
	if out=$(LD_LIBRARY_PATH="$libdir" "$exe" $args 2>&1) && grep -q '^summary:' <<<"$out"; then
		echo "ok: $name: $(grep '^summary:' <<<"$out" | head -1)"
	else
		printf '%s\n' "$out"
		bad "$name failed against the installed library"
	fi
done

[ $fail -eq 0 ] && echo "ok: installed into a DESTDIR, examples built with pkg-config only and run"
exit $fail
