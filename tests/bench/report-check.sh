#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# report-check.sh - report.py on a fixed result set (sample-results.json):
# medians, ratios taken run by run (their median differs from the ratio of
# the medians in this set on purpose), CPU per GiB, segments per batch, the
# target lines and the chart; then the rdma (Soft-RoCE VM) section and
# target on variants of the set: met, not met, not measured, failed, and
# alone (no other configuration).  The benchmark itself is `make bench`.
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
# rdma: per-run read / ib_read_bw 0.7, 0.864, 1.11 (the medians, 95 and
# 100, would give 0.95 and meet it)
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **NOT MET** (0.864x: 95 vs 100 MiB/s)"
expect "| bcfs-rdma seq write 1M (agent RDMA READs) | 50 | 1 |"
expect "| bcfs-rdma seq read 1M (cold; agent RDMA WRITEs) | 95 | 2 |"
expect "| ib_write_bw | 100 |  |"
expect "| ib_read_bw | 100 |  |"
expect "- bcfs_seq_read / ib_write_bw = 0.95x (information"
expect "- bcfs_seq_write / ib_read_bw = 0.5x (information"
expect "- sshfs create run 3: sshfs did not mount"
expect "Left out: disk (missing: nothing, a fixture)."
if [ -z "$chart" ]; then
	grep -q '<svg' "$tmp/results.svg" || fail "results.svg is not an SVG"
	expect "![chart](results.svg)"
fi

# charted NAME WHAT CONFIG...: the set without CONFIGs still has a chart
charted()
{
	local name=$1 what=$2

	shift 2
	mkdir -p "$tmp/$name" || exit 99
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
drop = sys.argv[3:]
d["meta"]["configs"] = [c for c in d["meta"]["configs"] if c not in drop]
d["results"] = [r for r in d["results"] if r["config"] not in drop]
json.dump(d, open(sys.argv[2], "w"))' \
		"$tmp/results.json" "$tmp/$name/results.json" "$@" || exit 99
	python3 "$top_srcdir/tests/bench/report.py" "$tmp/$name" \
		> "$tmp/$name/out" 2>&1 ||
		fail "report.py failed $what"
	grep -q "no chart" "$tmp/$name/out" &&
		fail "no chart $what: $(cat "$tmp/$name/out")"
	grep -q '<svg' "$tmp/$name/results.svg" 2>/dev/null ||
		fail "no chart $what"
}

if [ -z "$chart" ]; then
	# BENCH_CONFIGS=bcfs-cephfs,ceph-fuse, say: no ratios of bcfs-shm
	# to draw, the chart is made without that panel
	charted noshm "without bcfs-shm" bcfs-shm
	# bcfs-shm beside the passthroughs only: the ratio panel draws the
	# one series it has
	charted passonly "without tmpfs and sshfs" tmpfs sshfs
fi

# variants of the set: variant NAME PYTHON-STATEMENTS (on the document d)
variant()
{
	mkdir -p "$tmp/$1" || exit 99
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))' \
		"$tmp/results.json" "$tmp/$1/results.json" "$2" || exit 99
	python3 "$top_srcdir/tests/bench/report.py" "$tmp/$1" --no-chart \
		> /dev/null || fail "report.py failed on the $1 variant"
	md=$tmp/$1/results.md
}
# run 0 read 99: per-run ratios 0.99, 0.864, 1.11
variant rdma-met 'd["meta"]["rdma"]["per_run"][0]["bcfs_seq_read_mibps"] = 99
d["meta"]["rdma"]["bcfs_seq_read_mibps"] = 99'
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **met** (0.99x: 99 vs 100 MiB/s)"
# a summary without its runs: the ratio of the medians
variant rdma-summary 'del d["meta"]["rdma"]["per_run"]'
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **met** (0.95x: 95 vs 100 MiB/s)"
variant rdma-none 'del d["meta"]["rdma"]'
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **not measured** (not measured in this run)"
grep -q "bcfs-rdma (Soft-RoCE VM)" "$md" && fail "an rdma section without figures"
variant rdma-failed 'd["meta"]["rdma"] = {"failed": "the mount was not on rdma"}'
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **not measured** (failed: the mount was not on rdma)"
expect "Not measured: the mount was not on rdma."
variant rdma-left-out 'del d["meta"]["rdma"]
d["meta"]["skipped"]["bcfs-rdma"] = "missing: ib_read_bw"'
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **not measured** (left out: missing: ib_read_bw)"
expect "Left out: bcfs-rdma (missing: ib_read_bw)."
# BENCH_CONFIGS=bcfs-rdma: no host configuration, the rdma target alone
variant rdma-alone 'd["meta"]["configs"] = []
d["results"] = []'
expect "all other targets: **not measured** (bcfs-shm was not measured in this run)"
expect "rdma seq read >= 0.9x ib_read_bw (Soft-RoCE VM): **NOT MET** (0.864x: 95 vs 100 MiB/s)"
echo "$name: ok"
