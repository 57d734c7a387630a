#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# soak.sh - many agent restarts under a live mount (make soak; not part of
# make check).
#
# Runs tests/fs/restart.sh for $SOAK_RESTARTS (100) restarts, SIGKILL and
# SIGTERM in a random mix (both at least once), over $BCF_TRANSPORT (shm:
# an agent on a unix socket; or tcp), with the same workloads and checks,
# and prints the pauses the daemon logged as count, p50, p99 and max, in a
# markdown table for doc/.  The restarts get $SOAK_DEADLINE seconds (by
# default 12 a restart).  The local: part of restart.sh is left out.
# Needs top_builddir and top_srcdir in the environment (make soak sets
# them).  The outcome is restart.sh's: 0 pass, 1 fail, 77 skip, 99 error.
n=${SOAK_RESTARTS:-100}
case $n in
''|*[!0-9]*|0) echo "soak: SOAK_RESTARTS must be a positive count" >&2
	exit 99 ;;
esac
signals=
for i in $(seq 1 "$n"); do
	if [ "$i" -eq 1 ]; then
		signals+="KILL "
	elif [ "$i" -eq 2 ]; then
		signals+="TERM "
	elif [ $((RANDOM % 2)) -eq 0 ]; then
		signals+="KILL "
	else
		signals+="TERM "
	fi
done
BCF_TRANSPORT=${BCF_TRANSPORT:-shm}
BCF_RESTART_SIGNALS=$signals
BCF_RESTART_LOCAL_KILLS=0
BCF_RESTART_DEADLINE=${SOAK_DEADLINE:-$((n * 12))}
BCF_RESTART_REPORT=1
export BCF_TRANSPORT BCF_RESTART_SIGNALS BCF_RESTART_LOCAL_KILLS \
	BCF_RESTART_DEADLINE BCF_RESTART_REPORT
exec bash "$(dirname "$0")/restart.sh"
