#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Run the decoder's libFuzzer target for ${BCF_FUZZ_SECONDS:-60} seconds,
# starting from a seed corpus of one valid frame per opcode and direction.
# Fails on any crash, leak, sanitizer report or encode/decode asymmetry.
set -u

: "${top_builddir:?top_builddir must be set}"
fuzzer="$top_builddir/tests/protocol/fuzz_decode"
seeder="$top_builddir/tests/protocol/fuzz-seed"
secs="${BCF_FUZZ_SECONDS:-60}"

if [ ! -x "$fuzzer" ]; then
	echo "SKIP: no clang with libFuzzer at configure time (FUZZ_CC), so $fuzzer was not built"
	exit 77
fi
[ -x "$seeder" ] || { echo "missing $seeder"; exit 99; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bcp-fuzz.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/corpus" "$tmp/seeds" || exit 99

"$seeder" "$tmp/seeds" || { echo "seed corpus failed"; exit 99; }
nseeds=$(ls "$tmp/seeds" | wc -l)
[ "$nseeds" -ge 100 ] || { echo "only $nseeds seeds"; exit 99; }

echo "fuzzing the decoder for $secs s from $nseeds seeds"
"$fuzzer" -max_total_time="$secs" -max_len=65536 -timeout=10 \
	-rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$tmp/" "$tmp/corpus" "$tmp/seeds" \
	>"$tmp/log" 2>&1
rc=$?
tail -n 20 "$tmp/log"
if [ $rc -ne 0 ] || grep -qE 'ERROR: |runtime error:' "$tmp/log"; then
	echo "FAIL: the fuzzer found a problem (exit $rc)"
	for a in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* \
		 "$tmp"/oom-*; do
		[ -f "$a" ] || continue
		echo "reproducer $(basename "$a"):"
		od -A d -t x1 "$a" | head -n 20
	done
	exit 1
fi
# the seeds must have been executed: libFuzzer reports its runs
grep -q 'stat::number_of_executed_units' "$tmp/log" || {
	echo "FAIL: no run statistics from the fuzzer"; exit 1; }
exit 0
