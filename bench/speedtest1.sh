#!/usr/bin/env bash
# bench/speedtest1.sh - SQLite's own benchmark program (speedtest1.c, from
# SQLite's source; not part of this project) on SQLite's default page
# cache and on libvrange-sqlite's, in the same run, the caches alternating.
#
#   bench/speedtest1.sh [-r ROUNDS] [-s SPEEDTEST1_C] BUILD_DIR [speedtest1 options]
#
# speedtest1.c: -s, or $SPEEDTEST1_C, or else fetched with
# `apt-get source sqlite3` (needs a deb-src line in apt's sources) into a
# temporary directory; the version should be the system SQLite's.  It is
# compiled with its main() renamed and linked with bench/speedtest1-main.c
# against the system libsqlite3 and BUILD_DIR's libvrange-sqlite.
# speedtest1 options default to: --size 100 --nosync --verify; the
# database is in $TMPDIR (default /dev/shm, so that disk writes do not
# swamp the cache's cost).
# -d adds two runs per round that take the cost apart (speedtest1-main.c):
# default-mt, SQLite's cache in a process with an idle second thread (what
# libvrange's monitor thread costs a single-threaded program, in the
# kernel and in glibc), and vrange-nomon, libvrange-sqlite on a ctx
# without a monitor (the page cache's own cost).
# Prints per round each cache's CPU time (user+sys) and wall time (the
# order of the caches is reversed every other round), then the medians
# and minima and the ratios vrange/default (the minimum is the run least
# disturbed by other processes), the median and quartiles of the ratio
# within each round, and whether speedtest1's verification hashes (a hash
# of every query result) are identical.
# Nothing is asserted about time: exit 1 only when the hashes differ or a
# run fails, 77 when speedtest1.c cannot be found.
set -euo pipefail
rounds=5 src=${SPEEDTEST1_C:-} caches="default vrange"
while getopts dr:s: o; do
	case $o in
	d) caches="default vrange default-mt vrange-nomon" ;;
	r) rounds=$OPTARG ;;
	s) src=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-d] [-r ROUNDS] [-s SPEEDTEST1_C] BUILD_DIR [options]" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(--size 100 --nosync --verify)
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/dev/shm}/speedtest1.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -z "$src" ]; then
	if (cd "$work" && apt-get source -qq sqlite3 >/dev/null 2>&1); then
		src=$(find "$work" -path '*/test/speedtest1.c' | head -n 1)
	fi
	if [ -z "$src" ]; then
		echo "speedtest1: no speedtest1.c (give -s FILE, or add a deb-src line for apt-get source sqlite3)" >&2
		exit 77
	fi
fi
cc=${CC:-cc}
$cc -O2 -w -Dmain=speedtest1_main $(pkg-config --cflags sqlite3) -c "$src" -o "$work/st1.o"
$cc -O2 -I"$here/include" -o "$work/speedtest1" "$here/bench/speedtest1-main.c" "$work/st1.o" \
	-L"$build/sqlite" -L"$build/src" -Wl,-rpath,"$build/sqlite:$build/src" \
	-lvrange-sqlite -lvrange $(pkg-config --libs sqlite3)

# one run: prints "CPU WALL HASH"; CPU is the user+sys time of the
# children this (sub)shell waited for, before and after
run() {
	local t0 t1 hz me=$BASHPID
	hz=$(getconf CLK_TCK)
	t0=$(awk '{print $16+$17}' "/proc/$me/stat")
	"$work/speedtest1" "$1" "${opts[@]}" "$work/st1.db" >"$work/out" || {
		echo "speedtest1 $1 failed" >&2
		return 1
	}
	t1=$(awk '{print $16+$17}' "/proc/$me/stat")
	printf '%s %s %s\n' "$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN{printf "%.2f", (b-a)/hz}')" \
		"$(sed -n 's/^ *TOTAL\.* *\([0-9.]*\)s$/\1/p' "$work/out")" \
		"$(sed -n 's/^Verification Hash: //p' "$work/out" | tr ' ' '-')"
}

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A cpu wall hash
printf '%-6s %-12s %8s %8s  %s\n' round cache cpu_s wall_s hash
for ((i = 1; i <= rounds; i++)); do
	# the order alternates, so that no cache always runs in one place
	order=$caches
	((i % 2)) || order=$(tr ' ' '\n' <<<"$caches" | tac | tr '\n' ' ')
	for c in $order; do
		read -r c_cpu c_wall c_hash < <(run $c)
		printf '%-6s %-12s %8s %8s  %s\n' "$i" "$c" "$c_cpu" "$c_wall" "$c_hash"
		cpu[$c]+="$c_cpu "
		wall[$c]+="$c_wall "
		hash[$c]+="$c_hash "
	done
done
status=0
stat() { tr ' ' '\n' | grep . | if [ "$1" = min ]; then sort -n | head -n 1; else median; fi; }
for c in $caches; do
	printf '%-12s cpu median %ss min %ss   wall median %ss min %ss\n' "$c" \
		"$(stat median <<<"${cpu[$c]}")" "$(stat min <<<"${cpu[$c]}")" \
		"$(stat median <<<"${wall[$c]}")" "$(stat min <<<"${wall[$c]}")"
done
for k in cpu wall; do
	declare -n a=$k
	for f in median min; do
		awk -v d="$(stat $f <<<"${a[default]}")" -v v="$(stat $f <<<"${a[vrange]}")" \
			-v k="$k" -v f="$f" 'BEGIN{printf "ratio vrange/default (%s, %ss): %.3f\n", k, f, v/d}'
	done
done
# the ratio within each round (the two runs a few seconds apart share
# most of the machine's moods), its median and quartiles over the rounds
same_round() {
	paste <(tr ' ' '\n' <<<"${cpu[$1]}" | grep .) <(tr ' ' '\n' <<<"${cpu[$2]}" | grep .) |
		awk '{print $1 / $2}' | sort -n |
		awk -v n="$1/$2" '{a[NR]=$1} END{m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2;
			printf "ratio %s (cpu, median of %d same-round ratios): %.3f (quartiles %.3f-%.3f)\n",
			n, NR, m, a[int((NR+3)/4)], a[int((3*NR+3)/4)]}'
}
same_round vrange default
if [ "$caches" != "default vrange" ]; then
	# the second thread's own cost, and the page cache's without it
	same_round default-mt default
	same_round vrange default-mt
	same_round vrange-nomon default
fi
if [ "$(tr ' ' '\n' <<<"${hash[*]}" | grep . | sort -u | wc -l)" = 1 ]; then
	echo "results: identical (speedtest1 verification hash)"
else
	echo "results: DIFFER"
	status=1
fi
exit $status
