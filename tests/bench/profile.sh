#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# profile.sh - where a 4 KiB I/O at queue depth 1 spends its time: the
# figures behind "What limits each metric" in doc/performance.md.
# `make profile` runs it (as root; fio, fuse-overlayfs and bindfs needed,
# perf optional).  Not a test: it prints, and never fails on a figure.
#
#  1. IOPS of fio (4 KiB, O_DIRECT, psync) on bluecachefs over shm at each
#     spin setting, fuse-overlayfs and bindfs --multithreaded, each over a
#     tmpfs: random reads at queue depth 1 with the processes free to use
#     every CPU and then all pinned to CPU 0 (taskset: the difference is
#     what waking a thread on another CPU costs on this machine), random
#     reads by 4 jobs, random writes at queue depth 1.  PROFILE_ROUNDS
#     rounds, the configurations alternating within each, with the load
#     (/proc/loadavg, whose fourth field counts the threads runnable now)
#     before each round: the machine may be shared.
#  2. Context switches per I/O of every thread of the daemon and of the
#     agent (voluntary + involuntary, /proc/PID/task/*/status), unpinned,
#     at each spin setting.
#  3. With perf: `perf record -a -g` of an unpinned QD1 read at the last
#     spin setting, the share of each command and the top symbols.
#
# PROFILE_SECONDS (5) per fio run; PROFILE_ROUNDS (1); PROFILE_SPIN
# ("0 default"): the spin settings to measure, each a number of
# microseconds given to both the daemon (BLUECACHE_SPIN_USEC) and the
# agent (--spin-usec), or "default" for both programs' own defaults.
set -u
builddir=${1:-.}
secs=${PROFILE_SECONDS:-5}
rounds=${PROFILE_ROUNDS:-1}
spins=${PROFILE_SPIN:-0 default}
fs=$builddir/fs/bluecachefs
agent=$builddir/agent/bluecache-agent
[ "$(id -u)" = 0 ] || { echo "profile: needs root (tmpfs mounts)" >&2; exit 2; }
for t in fio fusermount3 taskset; do
	command -v $t >/dev/null || { echo "profile: $t is missing" >&2; exit 2; }
done
[ -x "$fs" ] || { echo "profile: $fs is not built" >&2; exit 2; }
[ -x "$agent" ] || { echo "profile: $agent is not built" >&2; exit 2; }
agent=$(cd "$(dirname "$agent")" && pwd)/bluecache-agent

tmp=$(mktemp -d /tmp/bcf-profile.XXXXXX)
mnt=$tmp/mnt
cleanup()
{
	fusermount3 -u "$mnt" 2>/dev/null
	for i in 1 2 3 4 5 6 7 8 9 10; do
		umount "$tmp/back" 2>/dev/null && break
		sleep 0.5
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$mnt" "$tmp/back"

# The agent the daemon starts (local:), with the spin of $AGENT_SPIN.
printf '%s\n' '#!/bin/sh' \
	'[ "${AGENT_SPIN:-default}" = default ] && exec "$REAL_AGENT" "$@"' \
	'exec "$REAL_AGENT" --spin-usec "$AGENT_SPIN" "$@"' > "$tmp/agent"
chmod +x "$tmp/agent"
export REAL_AGENT=$agent
export BLUECACHE_AGENT=$tmp/agent

# spin_env SETTING: both programs' spinning for the next mount
spin_env()
{
	export AGENT_SPIN=$1
	if [ "$1" = default ]; then
		unset BLUECACHE_SPIN_USEC
	else
		export BLUECACHE_SPIN_USEC=$1
	fi
}

# mount_kind KIND [CPUS]: bluecachefs, fuse-overlayfs or bindfs on $mnt
mount_kind()
{
	local ts=

	[ -n "${2:-}" ] && ts="taskset -c $2"
	mount -t tmpfs tmpfs "$tmp/back" || return 1
	case $1 in
	bluecachefs) $ts "$fs" "local:$tmp/back" "$mnt" 2>>"$tmp/fs.log" ;;
	fuse-overlayfs)
		mkdir "$tmp/back/l" "$tmp/back/u" "$tmp/back/w"
		$ts fuse-overlayfs -o "lowerdir=$tmp/back/l,upperdir=$tmp/back/u,workdir=$tmp/back/w" "$mnt" 2>/dev/null ;;
	bindfs) $ts bindfs --multithreaded "$tmp/back" "$mnt" 2>/dev/null ;;
	esac
}

umount_kind()
{
	fusermount3 -u "$mnt"
	for i in 1 2 3 4 5 6 7 8 9 10; do
		umount "$tmp/back" 2>/dev/null && return 0
		sleep 0.5
	done
}

FIO_ARGS="--name=qd1 --size=256M --rw=randread --bs=4k --direct=1
	--ioengine=psync --time_based"

# fio_qd1 [CPUS [FIO ARGS...]]: IOPS (reads + writes of all jobs) of a
# QD1 random read on $mnt, or of the job the arguments make of it
fio_qd1()
{
	local ts=

	[ -n "${1:-}" ] && ts="taskset -c $1"
	shift
	$ts fio $FIO_ARGS --directory="$mnt" --runtime="$secs" \
		--group_reporting "$@" --output-format=terse |
		awk -F';' 'NF > 20 { print $8 + $49 }'
}

# fio_warm [FIO ARGS...]: lay the files out and warm the caches
fio_warm()
{
	fio $FIO_ARGS --directory="$mnt" --runtime=1 "$@" > /dev/null
}

# ctxsw: "thread-name total" for every thread of the daemon and the agent
ctxsw()
{
	local p t

	for p in $(pgrep -f "$tmp/back"); do
		for t in /proc/"$p"/task/*; do
			printf '%s.%s %s\n' "$(cat "$t/comm")" "${t##*/}" \
				"$(awk '/ctxt_switches/ { s += $2 } END { print s }' "$t/status")"
		done
	done | sort
}

# one_run KIND[:SPIN] CPUS [FIO ARGS...]: IOPS on a fresh mount of KIND
one_run()
{
	local k=${1%%:*} sp=${1#*:} cpus=$2 ios

	shift 2
	[ "$k" = bluecachefs ] && spin_env "$sp"
	mount_kind "$k" "$cpus" || { echo -; return; }
	fio_warm "$@"
	ios=$(fio_qd1 "$cpus" "$@")
	umount_kind
	echo "${ios:--}"
}

kinds=
for sp in $spins; do
	kinds="$kinds bluecachefs:$sp"
done
for k in fuse-overlayfs bindfs; do
	if command -v $k >/dev/null; then
		kinds="$kinds $k"
	else
		echo "$k: missing"
	fi
done

echo "== 4 KiB O_DIRECT psync, ${secs} s per run, over tmpfs (IOPS)"
for r in $(seq 1 "$rounds"); do
	echo "-- round $r of $rounds: $(nproc) CPUs, /proc/loadavg $(cut -d' ' -f1-4 /proc/loadavg)"
	printf '%-24s %9s %9s %9s %9s\n' "" "QD1 read" "on CPU 0" \
		"4 jobs" "QD1 write"
	for kind in $kinds; do
		a=$(one_run "$kind" "")
		o=$(one_run "$kind" 0)
		j=$(one_run "$kind" "" --numjobs=4 --size=64M)
		w=$(one_run "$kind" "" --rw=randwrite)
		printf '%-24s %9s %9s %9s %9s\n' "${kind/:/ spin=}" \
			"$a" "$o" "$j" "$w"
	done
done

for sp in $spins; do
	echo
	echo "== bluecachefs spin=$sp: context switches per I/O, by thread (QD1 read, any CPU)"
	spin_env "$sp"
	mount_kind bluecachefs || exit 1
	fio_warm
	ctxsw > "$tmp/cs.before"
	ios=$(fio_qd1 "")
	ctxsw > "$tmp/cs.after"
	n=$((${ios:-0} * secs))
	[ "$n" -gt 0 ] && join "$tmp/cs.before" "$tmp/cs.after" |
	awk -v n="$n" '
		{ d = $3 - $2; sub(/\.[0-9]+$/, "", $1)
		  if ($1 == "bluecachefs") $1 = "FUSE thread"
		  if (d > n / 100) printf "%-18s %6.2f\n", $1, d / n; t += d }
		END { printf "%-18s %6.2f  (fio itself not counted)\n", "all", t / n }'
	echo "($ios IOPS; /proc/loadavg $(cut -d' ' -f1-4 /proc/loadavg))"
	umount_kind
done

if command -v perf >/dev/null; then
	echo
	echo "== bluecachefs spin=$sp: perf record -a -g of a QD1 read"
	mount_kind bluecachefs || exit 1
	fio_warm
	perf record -q -a -g -o "$tmp/perf.data" -- sleep $((secs + 2)) \
		2>/dev/null &
	fio_qd1 "" > /dev/null
	wait $!
	perf report -i "$tmp/perf.data" --no-children --sort comm -g none \
		--stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
	echo "-- top symbols"
	perf report -i "$tmp/perf.data" --no-children --sort sym -g none \
		--stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
	umount_kind
fi
exit 0
