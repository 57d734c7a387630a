#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ls-cold.sh - what ls -l of one directory costs through a mount that has
# not seen it yet (cold) and a second time (warm), beside the same
# directory listed natively.
#
# Usage: ls-cold.sh [-n FILES] [-r ROUNDS] BLUECACHEFS [BLUECACHEFS...]
#
# A directory of FILES (2000) one-byte files is made in $TMPDIR
# (/var/tmp).  Each BLUECACHEFS (a daemon binary: two builds are compared
# side by side; each runs the agent built beside it) mounts it as
# local:DIR, in turn, ROUNDS (3) times each: one stat of the mount, a
# second's pause, then ls -l timed twice, then the mount goes and the
# directory is listed natively.  Prints seconds and the ratios to the
# native listing of the same round.  A report, not a test.
set -u
n=2000
rounds=3
usage="usage: $0 [-n FILES] [-r ROUNDS] BLUECACHEFS [BLUECACHEFS...]"
while getopts n:r: opt; do
	case $opt in
	n) n=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
command -v fusermount3 >/dev/null ||
	{ echo "ls-cold: fusermount3 is missing" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/ls-cold.XXXXXX") || exit 2
mnt=$tmp/mnt
trap 'fusermount3 -u -z "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/data" "$mnt" || exit 2
(cd "$tmp/data" && for i in $(seq 1 "$n"); do echo > "f$i"; done) || exit 2

# secs CMD...: the seconds CMD took, its output dropped
secs()
{
	local t0 t1

	t0=$(date +%s%N)
	"$@" > /dev/null || return 1
	t1=$(date +%s%N)
	echo "$(((t1 - t0) / 1000000))" |
		awk '{ printf "%.3f", $1 / 1000 }'
}

printf "%-40s %8s %8s %8s %6s %6s\n" "ls -l of $n files" cold warm native \
	cold/n warm/n
for r in $(seq 1 "$rounds"); do
	for fs in "$@"; do
		"$fs" "local:$tmp/data" "$mnt" ||
			{ echo "ls-cold: $fs did not mount" >&2; exit 1; }
		stat "$mnt" > /dev/null
		sleep 1
		cold=$(secs ls -l "$mnt")
		warm=$(secs ls -l "$mnt")
		fusermount3 -u "$mnt"
		native=$(secs ls -l "$tmp/data")
		printf "%-40s %8s %8s %8s %6.1f %6.1f\n" "$fs" "$cold" \
			"$warm" "$native" \
			"$(echo "$cold $native" | awk '{ print $1 / $2 }')" \
			"$(echo "$warm $native" | awk '{ print $1 / $2 }')"
	done
done
