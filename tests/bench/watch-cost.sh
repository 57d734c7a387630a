#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# watch-cost.sh - what the agent's watcher (agent/watch.c) costs: the CPU
# of its thread while a process on the agent's machine creates, writes
# 100 bytes to and removes files beneath the agent's root (64 at a time).
#
# Usage: watch-cost.sh [-n FILES] [-r ROUNDS] AGENT [AGENT...]
#
# Each AGENT (a bluecache-agent binary: two builds are compared side by
# side) runs in turn, ROUNDS (3) times each, on a fresh root in
# $TMPDIR (/var/tmp), with --watch yes (root only: fanotify needs
# CAP_SYS_ADMIN); FILES (20000) files are made and removed per run.
# Prints the watcher thread's CPU (user + system) per run and the
# watcher's own counts.  A report, not a test.
set -u
n=20000
rounds=3
while getopts n:r: opt; do
	case $opt in
	n) n=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) echo "usage: $0 [-n FILES] [-r ROUNDS] AGENT [AGENT...]" >&2
	   exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-n FILES] [-r ROUNDS] AGENT [AGENT...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: fanotify needs root" >&2; exit 77; }
tck=$(getconf CLK_TCK)

one()
{
	local agent=$1 d pid tid t c0 c1 i

	d=$(mktemp -d "${TMPDIR:-/var/tmp}/watch-cost.XXXXXX") || return 1
	mkdir "$d/root" "$d/root/w"
	"$agent" --root "$d/root" --listen "unix:$d/sock" --foreground \
		--watch yes -L debug > "$d/log" 2>&1 &
	pid=$!
	for i in $(seq 100); do
		[ -S "$d/sock" ] && break
		sleep 0.1
	done
	tid=
	for i in $(seq 50); do
		for t in /proc/$pid/task/*; do
			[ "$(cat "$t/comm" 2>/dev/null)" = bca-watch ] &&
				tid=${t##*/}
		done
		[ -n "$tid" ] && break
		sleep 0.1
	done
	if [ -z "$tid" ]; then
		echo "$agent: no watcher thread; see $d/log" >&2
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 1
	fi
	c0=$(awk '{ print $14 + $15 }' "/proc/$pid/task/$tid/stat")
	python3 - "$d/root/w" "$n" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    fd = os.open("%s/f%d" % (d, i % 64), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 100)
    os.close(fd)
    if i % 64 == 63:
        for j in range(64):
            os.unlink("%s/f%d" % (d, j))
PY
	# the watcher reads with a short delay: let it catch up
	sleep 1
	c1=$(awk '{ print $14 + $15 }' "/proc/$pid/task/$tid/stat")
	kill -TERM "$pid"
	wait "$pid"
	printf '%s: watcher %d ms; %s\n' "$agent" \
		$(( (c1 - c0) * 1000 / tck )) \
		"$(grep -o 'watch: [0-9]* events.*' "$d/log")"
	rm -rf "$d"
}

for r in $(seq "$rounds"); do
	for a in "$@"; do
		one "$a"
	done
done
