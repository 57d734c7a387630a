#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# dbench.sh - an ordinary mixed workload side by side: dbench (creates,
# renames, removes, directory listings, small reads and writes from
# CLIENTS processes) on a native directory, through bindfs (a plain
# passthrough), and through each bluecachefs given (local: of a private
# agent: shm), then a listing loop (a directory of 300 names listed 2000
# times, and listed with a stat of every name 300 times).
#
# Usage: dbench.sh [-t SECONDS] [-c CLIENTS] [-r ROUNDS] BLUECACHEFS...
#
# Each BLUECACHEFS is a bluecachefs binary (two builds are compared side
# by side; BLUECACHE_AGENT names the agent, else the one beside the
# first binary's tree).  Configurations are interleaved inside each of
# ROUNDS (2) rounds, each on a fresh directory in $TMPDIR (/var/tmp).
# Prints dbench's throughput and the listing times per run, and each
# configuration's median against native and against bindfs.  A report,
# not a test.
set -u
t=20
clients=4
rounds=2
usage() { echo "usage: $0 [-t SECONDS] [-c CLIENTS] [-r ROUNDS] BLUECACHEFS..." >&2; exit 2; }
while getopts t:c:r: opt; do
	case $opt in
	t) t=$OPTARG ;;
	c) clients=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
command -v dbench > /dev/null || { echo "$0: dbench is not installed" >&2; exit 77; }
have_bindfs=1
command -v bindfs > /dev/null || have_bindfs=0
if [ -z "${BLUECACHE_AGENT:-}" ]; then
	BLUECACHE_AGENT=$(cd "$(dirname "$1")/.." && pwd)/agent/bluecache-agent
	export BLUECACHE_AGENT
fi
work=$(mktemp -d "${TMPDIR:-/var/tmp}/dbench-bench.XXXXXX") || exit 1
mnt=$work/mnt
mkdir "$mnt"
cleanup() { fusermount3 -u "$mnt" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# list DIR: "LISTING_S STAT_S" of the listing loop in DIR
list()
{
	python3 - "$1" <<'PY'
import os, sys, time
d = os.path.join(sys.argv[1], "ls")
os.mkdir(d)
for i in range(300):
    with open(os.path.join(d, "f%d" % i), "w") as f:
        f.write("%d\n" % i)
t = time.perf_counter()
for i in range(2000):
    with os.scandir(d) as it:
        sum(1 for e in it)
a = time.perf_counter() - t
t = time.perf_counter()
for i in range(300):
    with os.scandir(d) as it:
        for e in it:
            e.stat()
b = time.perf_counter() - t
print("%.3f %.3f" % (a, b))
PY
}

# one NAME: mount configuration NAME on $mnt (or not), run both, unmount
one()
{
	local name=$1 data=$work/data dir tp ls rc=0

	rm -rf "$data"
	mkdir "$data"
	case $name in
	native) dir=$data ;;
	bindfs) bindfs --multithreaded "$data" "$mnt" || return 1; dir=$mnt ;;
	*) "${name#*=}" "local:$data" "$mnt" || return 1; dir=$mnt ;;
	esac
	mkdir "$dir/db"
	tp=$(cd "$work" && timeout $((t + 120)) dbench -D "$dir/db" -t "$t" \
		"$clients" 2>&1 | sed -n 's/^Throughput \([0-9.]*\) MB.*/\1/p')
	ls=$(list "$dir") || rc=1
	[ "$dir" = "$data" ] || fusermount3 -u "$mnt" || rc=1
	[ -n "$tp" ] || rc=1
	printf '%s %s %s\n' "${name%%=*}" "${tp:-0}" "${ls:-0 0}" >> "$work/results"
	printf '%-14s dbench %8s MB/s   list x2000 %7s s   list+stat x300 %7s s\n' \
		"${name%%=*}" "${tp:-?}" ${ls:-? ?}
	return $rc
}

configs=(native)
[ $have_bindfs = 1 ] && configs+=(bindfs)
i=0
for b in "$@"; do
	i=$((i + 1))
	configs+=("bcfs$i=$b")
done
echo "dbench -t $t $clients, $rounds rounds; bcfsN: the Nth binary given"
for r in $(seq "$rounds"); do
	for c in "${configs[@]}"; do
		one "$c" || echo "$c: failed" >&2
	done
done
python3 - "$work/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    n, tp, a, b = line.split()
    runs.setdefault(n, []).append((float(tp), float(a), float(b)))
med = {n: [statistics.median(x[i] for x in v) for i in range(3)]
       for n, v in runs.items()}
print("medians, and ratios (throughput: x/ref; times: ref/x; above 1 is faster)")
for n, (tp, a, b) in med.items():
    out = "%-8s %8.1f MB/s %7.3f s %7.3f s" % (n, tp, a, b)
    for ref in ("native", "bindfs"):
        if ref in med and ref != n and med[ref][0] and a and b:
            r = med[ref]
            out += "   vs %s: dbench %.2f list %.2f list+stat %.2f" % (
                ref, tp / r[0], r[1] / a, r[2] / b)
    print(out)
PY
