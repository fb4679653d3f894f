#!/usr/bin/env bash
# Check that the C sources follow .clang-format (nothing is rewritten).
# Usage: tools/check-format.sh [FILE...]
#        (default: src/*.[ch] src/*/*.[ch] include/*.h examples/*.c)
# Exit: 0 clean, 1 some file needs formatting (clang-format prints where),
# 77 no clang-format found.  CLANG_FORMAT=path picks the binary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
	for c in clang-format clang-format-19 clang-format-18 clang-format-17 clang-format-16 \
		clang-format-15 clang-format-14; do
		if command -v "$c" >/dev/null 2>&1; then
			cf=$c
			break
		fi
	done
fi
if [ -z "$cf" ]; then
	echo "check-format: SKIP: no clang-format found (apt-get install clang-format)"
	exit 77
fi

if [ $# -gt 0 ]; then
	files=("$@")
else
	files=(src/*.c src/*.h src/*/*.c src/*/*.h include/*.h examples/*.c)
fi

bad=0
for f in "${files[@]}"; do
	if ! "$cf" --style=file --dry-run -Werror "$f"; then
		bad=$((bad + 1))
	fi
done
if [ "$bad" -ne 0 ]; then
	echo "check-format: $bad of ${#files[@]} files need formatting ($cf --style=file -i FILE)"
	exit 1
fi
echo "check-format: ${#files[@]} files clean ($("$cf" --version | head -1))"
