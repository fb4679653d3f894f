#!/usr/bin/env bash
# Run every libFuzzer target of a -Dfuzz=true build for a total time budget.
#   tools/fuzz.sh BUILD_DIR [SECONDS]     (default 60 s, split evenly)
# New corpus entries go to a scratch directory; the repo's corpus
# (tests/fuzz/corpus-*) is read as the seed and stays small.
set -euo pipefail
cd "$(dirname "$0")/.."
b=${1:?usage: tools/fuzz.sh BUILD_DIR [SECONDS]}
total=${2:-60}
targets=$(cd "$b/tests/fuzz" && find . -maxdepth 1 -type f -executable -name 'fuzz-*' ! -name '*-replay' -printf '%f\n' | sort)
[ -n "$targets" ] || { echo "no fuzz targets in $b (configure with -Dfuzz=true)"; exit 1; }
n=$(echo "$targets" | wc -w)
each=$((total / n))
for t in $targets; do
	name=${t#fuzz-}
	work=$(mktemp -d)
	echo "fuzzing $t for ${each}s"
	"$b/tests/fuzz/$t" -max_total_time="$each" -max_len=4096 -timeout=20 \
		-print_final_stats=1 "$work" "tests/fuzz/corpus-$name" 2>&1 | tail -n 12
	rm -rf "$work"
done
