#!/usr/bin/env bash
# tools/check-man.sh MAN_DIR
#   The man pages the build generated (tools/gen-man.py, into MAN_DIR:
#   BUILD_DIR/doc) are complete and render cleanly:
#   - every function exported by src/libvrange.map has its page NAME.3,
#     and libvrange.7 (the overview) exists;
#   - each page's NAME line names it, and it renders with
#     groff -man -ww -z (every warning enabled) printing nothing;
#   (tools/check-install.sh runs man on an installed page.)
# Exit: 0 ok, 1 a missing page or a warning (printed), 77 no groff, 2 usage.
set -uo pipefail
srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 MAN_DIR" >&2; exit 2; }
dir=$1
command -v groff >/dev/null || { echo "SKIP: groff not found (apt-get install groff-base)"; exit 77; }
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}
export LC_ALL=C.UTF-8 MANWIDTH=80

mapfile -t exported < <(sed 's/#.*//' "$srcdir/src/libvrange.map" |
	grep -oE '^[[:space:]]*vr_[a-z0-9_]+[[:space:]]*;' | tr -d ' \t;' | sort -u)
[ ${#exported[@]} -gt 0 ] || bad "no functions found in src/libvrange.map"
for f in "${exported[@]}"; do
	[ -f "$dir/$f.3" ] || bad "no man page $f.3 for the exported function $f"
done
[ -f "$dir/libvrange.7" ] || bad "no libvrange.7 (the overview)"

n=0
for page in "$dir"/*.[37]; do
	[ -f "$page" ] || continue
	n=$((n + 1))
	name=$(basename "$page")
	name=${name%.*}
	grep -A1 -x '\.SH NAME' "$page" | tail -1 | grep -q "^$name \\\\- ." ||
		bad "$page: the NAME section does not start with '$name \\- summary'"
	out=$(groff -man -ww -z "$page" 2>&1)
	[ -z "$out" ] || bad "$page: groff -man -ww: $out"
done
[ $n -gt 0 ] || bad "no man pages in $dir"
[ $fail -eq 0 ] && echo "ok: $n man pages, one per exported function (${#exported[@]}) and" \
	"callback type plus libvrange(7), render without warnings"
exit $fail
