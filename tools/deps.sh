#!/usr/bin/env bash
# tools/deps.sh - sourced by tools/demo.sh and tools/test.sh: make sure
# what the build needs is installed.  On Debian/Ubuntu, as root, missing
# packages are installed with apt-get; otherwise the script says what to
# install and stops.  VR_NO_INSTALL=1: never install, only check.
#
#   vr_deps [test]     check (and install) the build dependencies; with
#                      "test" also what the test suites want
vr_deps() {
	local want=(gcc meson ninja-build pkg-config libcmocka-dev)
	local optional=(libunwind-dev g++ groff-base libsqlite3-dev universal-ctags)
	local missing=() m
	command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || missing+=(gcc)
	command -v meson >/dev/null 2>&1 || missing+=(meson)
	command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
	command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
	# cmocka: the test suites are built by default (meson option tests)
	if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists cmocka; then
		missing+=(libcmocka-dev)
	fi
	local opt_missing=()
	if [ "${1:-}" = test ]; then
		if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libunwind; then
			opt_missing+=(libunwind-dev)
		fi
		command -v g++ >/dev/null 2>&1 || opt_missing+=(g++)
		command -v groff >/dev/null 2>&1 || opt_missing+=(groff-base)
		# libvrange-sqlite (S38) and its test, built when sqlite3 is found
		if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists sqlite3; then
			opt_missing+=(libsqlite3-dev)
		fi
		# the layers test (tools/check-layers.py) reads ctags -x
		command -v ctags >/dev/null 2>&1 || opt_missing+=(universal-ctags)
	fi
	[ ${#missing[@]} -eq 0 ] && [ ${#opt_missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -z "${VR_NO_INSTALL:-}" ]; then
		echo "installing: ${missing[*]} ${opt_missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq "${missing[@]}" "${opt_missing[@]}" >/dev/null ||
			{ echo "apt-get install failed" >&2; return 1; }
		return 0
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		echo "missing: ${missing[*]}" >&2
		echo "install them first, for example (Debian/Ubuntu):" >&2
		echo "    sudo apt-get install -y ${want[*]} ${optional[*]}" >&2
		echo "(or run this script as root: it installs them with apt-get)" >&2
		return 1
	fi
	echo "note: optional packages not installed: ${opt_missing[*]} (backtraces in" \
		"VRANGE_DEBUG messages, the C++ check of the header, the man pages' rendering check," \
		"libvrange-sqlite);" \
		"the tests skip what needs them"
	return 0
}
