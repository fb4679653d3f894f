#!/usr/bin/env bash
# tools/check-deb.sh - build the Debian packages from a copy of this tree,
# install them on this machine, use them as a user would, remove them.
#
#   1. the tracked files (git ls-files, or the tree without build*/) are
#      copied to TMP/libvrange-VERSION and `dpkg-buildpackage -us -uc -b`
#      runs there (its output goes to TMP, never next to the checkout);
#   2. lintian on the result, if installed: no error or warning (the one
#      warning an initial release always gets, initial-upload-closes-no-bugs,
#      is not counted: there is no Debian bug to close);
#   3. apt-get install of libvrange0, libvrange-dev and libvrange0-dbgsym;
#      pkg-config --modversion is the version; `man vr_obj_pin` finds the
#      page; examples/image-cache.c and ptr-api.c are compiled with
#      `cc x.c $(pkg-config --cflags --libs libvrange)` only, must load
#      the installed /usr/lib/.../libvrange.so.0 and run; ptr-api also runs
#      under valgrind with the installed suppressions (if valgrind is here);
#   4. the packages are purged again (also on failure), so what runs next
#      uses the build tree.
# Needs root, apt-get and the build dependencies of debian/control
# (debhelper, dpkg-dev, fakeroot, meson, ninja-build, pkg-config, python3).
# Exit: 0 ok, 1 failure, 77 cannot run here (not root, no dpkg-buildpackage).
# KEEP=1 keeps TMP.
set -uo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (installs packages)"; exit 77; }
for c in apt-get dpkg-buildpackage dh; do
	command -v $c >/dev/null || { echo "SKIP: no $c (apt-get install debhelper dpkg-dev fakeroot)"; exit 77; }
done
version=$(sed -n '1s/^libvrange (\([^)]*\)).*/\1/p' "$srcdir/debian/changelog")
upstream=${version%-*}
pkgs=(libvrange0 libvrange-dev libvrange0-dbgsym)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vrange-deb.XXXXXX")
purge() {
	# only our own packages, by name
	local installed=()
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed' && installed+=("$p")
	done
	[ ${#installed[@]} -eq 0 ] || apt-get purge -y -qq "${installed[@]}" >/dev/null
}
cleanup() {
	purge
	[ "${KEEP:-0}" = 1 ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}
export DEBIAN_FRONTEND=noninteractive
purge

echo "== dpkg-buildpackage -us -uc -b ($version) in $tmp"
src=$tmp/libvrange-$upstream
mkdir -p "$src"
if git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$srcdir" && git ls-files -z --cached --others --exclude-standard | grep -zv '^build' |
		tar --null -cf - -T -) | tar -xf - -C "$src"
else
	(cd "$srcdir" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$src"
fi
t0=$(date +%s)
if ! (cd "$src" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1; then
	tail -40 "$tmp/build.log"
	echo "FAIL: dpkg-buildpackage"
	exit 1
fi
echo "built in $(($(date +%s) - t0)) s: $(cd "$tmp" && ls ./*.deb | tr '\n' ' ')"

if command -v lintian >/dev/null; then
	echo "== lintian"
	out=$(lintian -I --pedantic "$tmp"/libvrange_*.changes 2>&1 | grep -v 'running with root privileges')
	printf '%s\n' "$out"
	grep -E '^[EW]: ' <<<"$out" | grep -qv 'initial-upload-closes-no-bugs' &&
		bad "lintian reports errors or warnings"
fi

echo "== apt-get install the packages"
debs=()
for p in "${pkgs[@]}"; do
	# the debug symbols may come as a .ddeb, or not at all (DEB_BUILD_OPTIONS=noautodbgsym)
	d=$(ls "$tmp/${p}_"*.deb "$tmp/${p}_"*.ddeb 2>/dev/null | head -1)
	if [ -n "$d" ]; then
		debs+=("$d")
	elif [ "$p" != libvrange0-dbgsym ]; then
		bad "no package $p built"
	fi
done
apt-get install -y -qq "${debs[@]}" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; bad "apt-get install"; exit 1; }
v=$(pkg-config --modversion libvrange)
[ "$v" = "$upstream" ] && echo "ok: pkg-config --modversion libvrange: $v" ||
	bad "pkg-config --modversion libvrange says '$v', the package $upstream"
if command -v man >/dev/null; then
	page=$(man -w vr_obj_pin 2>&1)
	case $page in
	/usr/share/man/man3/vr_obj_pin.3*) echo "ok: man vr_obj_pin: $page" ;;
	*) bad "man -w vr_obj_pin: $page" ;;
	esac
fi

echo "== examples built with pkg-config against the installed packages"
mkdir -p "$tmp/bin"
for name in image-cache ptr-api; do
	exe=$tmp/bin/$name
	# shellcheck disable=SC2046 # pkg-config's output is a command line
	if ! cc -o "$exe" "$srcdir/examples/$name.c" $(pkg-config --cflags --libs libvrange); then
		bad "$name does not compile with pkg-config's flags"
		continue
	fi
	loaded=$(ldd "$exe" | awk '$1 == "libvrange.so.0" { print $3 }')
	packaged=$(dpkg -L libvrange0 | grep '/libvrange\.so\.0$')
	[ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$packaged")" ] ||
		bad "$name loads libvrange.so.0 from '$loaded', not the package's $packaged"
	args=
	[ "$name" = image-cache ] && args=2
	# shellcheck disable=SC2086
	if out=$("$exe" $args 2>&1) && grep -q '^summary:' <<<"$out"; then
		echo "ok: $name ($loaded): $(grep '^summary:' <<<"$out" | head -1)"
	else
		printf '%s\n' "$out"
		bad "$name failed against the installed package"
	fi
done
if command -v valgrind >/dev/null && [ -x "$tmp/bin/ptr-api" ] &&
	dpkg-query -W libvrange0-dbgsym >/dev/null 2>&1; then
	if out=$(valgrind --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=all \
		--error-exitcode=99 --suppressions=/usr/share/libvrange/valgrind.supp \
		"$tmp/bin/ptr-api" 2>&1) && ! grep -q 'WARNING: unhandled' <<<"$out"; then
		echo "ok: ptr-api under valgrind with /usr/share/libvrange/valgrind.supp (and the dbgsym package)"
	else
		printf '%s\n' "$out"
		bad "ptr-api under valgrind with the installed suppressions"
	fi
fi

purge
dpkg-query -W -f='${Status}\n' libvrange0 2>/dev/null | grep -q '^install ok installed' &&
	bad "libvrange0 is still installed"
[ $fail -eq 0 ] && echo "ok: packages $version built, installed, used and removed"
exit $fail
