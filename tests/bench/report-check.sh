#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# report-check.sh - report.py on a fixed result set (sample-results.json):
# medians, ratios taken run by run (their median differs from the ratio of
# the medians in this set on purpose), CPU per GiB, segments per batch, the
# target lines and the chart.  The benchmark itself is `make bench`.
# Outcomes: 0 pass, 1 fail, 77 skip (no python3), 99 hard error.
set -u
name=report-check
fail()
{
	echo "FAIL: $name: $*" >&2
	exit 1
}

[ -n "${top_srcdir:-}" ] || { echo "$name: top_srcdir is not set" >&2; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: $name: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bcf-$name.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
cp "$top_srcdir/tests/bench/sample-results.json" "$tmp/results.json" ||
	exit 99
chart=
command -v gnuplot >/dev/null 2>&1 || chart=--no-chart
# shellcheck disable=SC2086
python3 "$top_srcdir/tests/bench/report.py" "$tmp" $chart > "$tmp/out" ||
	fail "report.py failed"
md=$tmp/results.md
[ -s "$md" ] || fail "no results.md"

expect()
{
	grep -qF -- "$1" "$md" || fail "results.md lacks: $1"
}

# medians over the three runs, one column per configuration
expect "| seq read 1M (cold) | MiB/s | 4000 | 1100 | 200 | 1000 | 1000 |"
expect "| create 4K files | files/s | 9000 | 100 | 30 | 200 | 300 |"
# best passthrough per run 1000, 1000, 2000: ratios 1.2, 1.0, 0.55
expect "seq_read >= 1.0x the better of bindfs/fuse-overlayfs: **met** (1x)"
# vs sshfs per run: 6, 10, 3.67
expect "seq_read >= 5x sshfs: **met** (6x)"
expect "create >= 1.0x the better of bindfs/fuse-overlayfs: **NOT MET** (0.333x)"
expect "create >= 4x sshfs: **NOT MET** (3.33x)"
# 0.2 + 0.2 CPU s per GiB against 0.5 (bindfs) and 0.3 (fuse-overlayfs)
expect "seq_read daemon+agent CPU/GiB <= the passthroughs' daemon CPU/GiB: **NOT MET** (0.4 vs 0.5 / 0.3 s/GiB)"
expect "| seq read 1M (cold) | 0.2 + 0.2 | 0.6 + 1.2 | 0.5 + 0 | 0.3 + 0 | 3 |"
# 0.2 CPU s for 1000 files = 200 ms per 1000 files
expect "| create 4K files | 100 + 100 | 100 + 100 | 100 + 100 | 100 + 100 | - |"
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **not measured** (not measured in this run)"
expect "- sshfs create run 3: sshfs did not mount"
expect "Left out: disk (missing: nothing, a fixture)."
if [ -z "$chart" ]; then
	grep -q '<svg' "$tmp/results.svg" || fail "results.svg is not an SVG"
	expect "![chart](results.svg)"
fi
echo "$name: ok"
