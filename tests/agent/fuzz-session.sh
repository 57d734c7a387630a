#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Run the session fuzzer for ${BCF_FUZZ_SECONDS:-60} seconds, starting from
# a seed corpus of real host sequences (and every sample request).  Fails
# on any crash, leak, sanitizer report, hang (no answer or a session never
# freed), undecodable reply or error line of the agent.
set -u

: "${top_builddir:?top_builddir must be set}"
fuzzer="$top_builddir/tests/agent/fuzz_session"
seeder="$top_builddir/tests/agent/fuzz_session_seed"
secs="${BCF_FUZZ_SECONDS:-60}"

if [ ! -x "$fuzzer" ]; then
	echo "SKIP: no clang with libFuzzer at configure time (FUZZ_CC), so $fuzzer was not built"
	exit 77
fi
[ -x "$seeder" ] || { echo "missing $seeder"; exit 99; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bcf-fuzz-session.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/corpus" "$tmp/seeds" "$tmp/data" || exit 99

"$seeder" "$tmp/seeds" || { echo "seed corpus failed"; exit 99; }
nseeds=$(ls "$tmp/seeds" | wc -l)
[ "$nseeds" -ge 20 ] || { echo "only $nseeds seeds"; exit 99; }

echo "fuzzing the agent's sessions for $secs s from $nseeds seeds"
# TMPDIR: the data root lives under $tmp and goes with it
TMPDIR="$tmp/data" "$fuzzer" -max_total_time="$secs" -max_len=16384 \
	-timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$tmp/" "$tmp/corpus" "$tmp/seeds" \
	>"$tmp/log" 2>&1
rc=$?
tail -n 20 "$tmp/log"
if [ $rc -ne 0 ] || grep -qE 'ERROR: |runtime error:|fuzz_session: ' \
		"$tmp/log"; then
	echo "FAIL: the fuzzer found a problem (exit $rc)"
	grep -E -A40 'ERROR: |runtime error:|fuzz_session: ' "$tmp/log" |
		head -n 80
	for a in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* \
		 "$tmp"/oom-*; do
		[ -f "$a" ] || continue
		echo "reproducer $(basename "$a"):"
		od -A d -t x1 "$a" | head -n 40
	done
	exit 1
fi
grep -q 'stat::number_of_executed_units' "$tmp/log" || {
	echo "FAIL: no run statistics from the fuzzer"; exit 1; }
exit 0
