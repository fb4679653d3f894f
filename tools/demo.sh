#!/usr/bin/env bash
# The README's demo command: install what is missing (as root, with
# apt-get; otherwise it says what to install), configure and build in
# BUILD_DIR (default build), run the image-cache demo.
# Usage: tools/demo.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
vr_deps
b=${1:-build}
[ -f "$b/build.ninja" ] || meson setup "$b" >/dev/null
ninja -C "$b" >/dev/null
exec "./$b/examples/image-cache" ${2:+"$2"}
