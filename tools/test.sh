#!/usr/bin/env bash
# The README's test command: install what is missing (as root, with
# apt-get; otherwise it says what to install), configure (once), build,
# run the unit and stress suites.  Usage: tools/test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
vr_deps test
b=${1:-build}
[ -f "$b/build.ninja" ] || meson setup "$b" >/dev/null
ninja -C "$b"
meson test -C "$b" --print-errorlogs --suite unit --suite stress
