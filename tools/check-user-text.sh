#!/usr/bin/env bash
# tools/check-user-text.sh [FILE...]
#   The text users read speaks their words, not the development process:
#   no internal rule numbers ("S8", "(S22)", "rules S1-S18", "A3") and no
#   tracker references ("issue 21", "item 8", "#13", "this branch") in
#   README.md, NEWS, include/vrange.h, include/vrange-sqlite.h and doc/*.md (doc/design.md, the
#   developers' document, excepted; doc/api.md and the man pages are made
#   from the header's comments).  Say what the rule says instead, and link
#   to the header's or doc/api.md's section to cross-reference.
#   The patterns first check themselves against samples of legitimate
#   text (hex literals, S_IFREG, Cortex-A53, x86-64 ...) and of references
#   they must catch, so a pattern tuned too loosely or too tightly fails.
# Exit: 0 clean, 1 a reference found (each printed as FILE:LINE: text),
# 2 the patterns fail their own samples or a file is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

# A rule: S or A, 1-2 digits, a word of its own (not 0xA1, S_IFREG, A1B2,
# Cortex-A53, "S3-compatible" stays caught: it is a rule-shaped word).
rule='(?<![\w\-/$#])[SA][0-9]{1,2}(?![\w])'
# A tracker reference: issue N, issues N, item N, items N-M, #N, this branch.
tracker='\b[Ii]ssues? #?[0-9]+|\b[Ii]tems? [0-9]+\b|(?<![\w&#/])#[0-9]+\b|\bthis branch\b'
pattern="$rule|$tracker"

must_pass=(
	'flags = 0xA1 | 0x5A12;'
	'S_IFREG and S_ISREG(st.st_mode)'
	'on a Cortex-A53 or an x86-64 machine'
	'SA_SIGINFO|SA_ONSTACK, SIGSEGV, SIGBUS, MADV_FREE'
	'the 2nd item of the list; see #define VR_INTACT and &#39;'
	'commit 19e6813, issued by the kernel, A1B2 S10x'
	'https://example.org/x#L12 and $S1 in a shell line'
)
must_fail=(
	'purged in S8 order'
	'as S10, with no system call'
	'(S22)'
	'rules S1-S18'
	'A3 (since 0.3): the usage'
	'before 0.3 (issue 21; test-misuse)'
	'Items 4, 5, 8 and 9'
	'as item 8 of it was'
	'fixed for #13.'
	'"this branch" for the rest'
)
selftest_ok=1
for s in "${must_pass[@]}"; do
	if printf '%s\n' "$s" | grep -qP -- "$pattern"; then
		echo "check-user-text: pattern flags legitimate text: $s"
		selftest_ok=0
	fi
done
for s in "${must_fail[@]}"; do
	if ! printf '%s\n' "$s" | grep -qP -- "$pattern"; then
		echo "check-user-text: pattern misses a reference: $s"
		selftest_ok=0
	fi
done
[ $selftest_ok -eq 1 ] || exit 2

if [ $# -gt 0 ]; then
	files=("$@")
else
	files=(README.md NEWS include/vrange.h include/vrange-sqlite.h)
	for f in doc/*.md; do
		[ "$f" = doc/design.md ] || files+=("$f")
	done
fi

fail=0
for f in "${files[@]}"; do
	[ -f "$f" ] || {
		echo "check-user-text: no $f"
		exit 2
	}
	if grep -nHP -- "$pattern" "$f"; then
		fail=1
	fi
done
if [ $fail -ne 0 ]; then
	echo "check-user-text: FAIL: internal rule or tracker references above;" \
		"say what the rule says (see tools/check-user-text.sh)"
	exit 1
fi
echo "check-user-text: ok: ${#files[@]} files"
