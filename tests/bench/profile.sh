#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# profile.sh - where a 4 KiB read at queue depth 1 spends its time: the
# figures behind "What limits each metric" in doc/performance.md.
# `make profile` runs it (as root; fio, fuse-overlayfs and bindfs needed,
# perf optional).  Not a test: it prints, and never fails on a figure.
#
#  1. IOPS of fio (4 KiB random reads, O_DIRECT, psync) on bluecachefs over
#     shm, fuse-overlayfs and bindfs --multithreaded, each over a tmpfs,
#     with the processes free to use every CPU and then all pinned to CPU 0
#     (taskset): the difference is what waking a thread on another CPU
#     costs on this machine.
#  2. Context switches per I/O of every thread of the daemon and of the
#     agent (voluntary + involuntary, /proc/PID/task/*/status), unpinned.
#  3. With perf: `perf record -a -g` of the unpinned bluecachefs run, the
#     share of each command and the top kernel and user symbols.
#
# PROFILE_SECONDS (5) per fio run.
set -u
builddir=${1:-.}
secs=${PROFILE_SECONDS:-5}
fs=$builddir/fs/bluecachefs
export BLUECACHE_AGENT=$builddir/agent/bluecache-agent
[ "$(id -u)" = 0 ] || { echo "profile: needs root (tmpfs mounts)" >&2; exit 2; }
for t in fio fusermount3 taskset; do
	command -v $t >/dev/null || { echo "profile: $t is missing" >&2; exit 2; }
done
[ -x "$fs" ] || { echo "profile: $fs is not built" >&2; exit 2; }

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

# mount KIND [CPUS]: bluecachefs, fuse-overlayfs or bindfs on $mnt
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

# fio_qd1 [CPUS]: IOPS of a QD1 random read on $mnt (after fio_warm)
fio_qd1()
{
	local ts=

	[ -n "${1:-}" ] && ts="taskset -c $1"
	$ts fio $FIO_ARGS --directory="$mnt" --runtime="$secs" \
		--output-format=terse |
		awk -F';' 'NF > 20 { print $8 }'
}

# fio_warm: lay the file out and warm the caches for a second
fio_warm()
{
	fio $FIO_ARGS --directory="$mnt" --runtime=1 > /dev/null
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

echo "== 4 KiB random read, queue depth 1, ${secs} s, over tmpfs (IOPS)"
printf '%-16s %10s %12s\n' "" "any CPU" "all on CPU 0"
for k in bluecachefs fuse-overlayfs bindfs; do
	if [ $k != bluecachefs ] && ! command -v $k >/dev/null; then
		echo "$k: missing"
		continue
	fi
	mount_kind $k || continue
	fio_warm
	any=$(fio_qd1 "")
	umount_kind
	mount_kind $k 0 || continue
	fio_warm
	one=$(fio_qd1 0)
	umount_kind
	printf '%-16s %10s %12s\n' $k "$any" "$one"
done

echo
echo "== bluecachefs: context switches per I/O, by thread (any CPU)"
mount_kind bluecachefs || exit 1
fio_warm
ctxsw > "$tmp/cs.before"
ios=$(fio_qd1 "")
ctxsw > "$tmp/cs.after"
n=$((ios * secs))
join "$tmp/cs.before" "$tmp/cs.after" | awk -v n="$n" '
	{ d = $3 - $2; sub(/\.[0-9]+$/, "", $1)
	  if ($1 == "bluecachefs") $1 = "FUSE thread"
	  if (d > n / 100) printf "%-18s %6.2f\n", $1, d / n; t += d }
	END { printf "%-18s %6.2f  (fio itself not counted)\n", "all", t / n }'
echo "($ios IOPS)"

if command -v perf >/dev/null; then
	echo
	echo "== bluecachefs: perf record -a -g of the same run"
	perf record -q -a -g -o "$tmp/perf.data" -- sleep $((secs + 2)) \
		2>/dev/null &
	fio_qd1 "" > /dev/null
	wait $!
	perf report -i "$tmp/perf.data" --no-children --sort comm -g none \
		--stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
	echo "-- top symbols"
	perf report -i "$tmp/perf.data" --no-children --sort sym -g none \
		--stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
fi
umount_kind
exit 0
