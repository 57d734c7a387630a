#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# fairness.sh - one stalled host and a flood of unauthenticated connections
# must not starve a well-behaved host of the same agent.
#
# One agent with a single worker (--workers 1, --xfer-timeout 10000 when it
# has the option) on a unix socket, and three mounts of it:
#   A  -o transport=tcp; several readers of large files, then its daemon
#      is stopped (SIGSTOP) in the middle, with transfers in flight;
#   C  ($BCF_TRANSPORT) reads a 64 MiB file once before the attack and
#      another one during it, both checked by sha256; the read under
#      attack must end within $BCF_FAIR_BOUND s (60);
#   B  ($BCF_TRANSPORT) mounted during the attack (a new session must get
#      in) and reads a 4 MiB file.
# Meanwhile tests/fs/fairness-flood.py holds $BCF_FLOOD_CONNS (1000; 0: no
# flood, to see what the stalled host alone does) unix
# connections that sent a valid HELLO and never authenticate, reopening
# each one the agent drops.  Afterwards A is continued and every mount is
# unmounted (from the trap too).  A's own log may hold errors (its session
# may be cut); a sanitizer report anywhere fails the test.
. "$(dirname "$0")/lib.sh"
bcf_init
flood=$top_srcdir/tests/fs/fairness-flood.py
bound=${BCF_FAIR_BOUND:-60}
conns=${BCF_FLOOD_CONNS:-1000}
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"
BCF_EXTRA_NOISY=A
# the agent may say why it cut A's session or dropped a flood connection
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'time[sd]? ?out|handshake|unauthenticated'}

mib=1048576
sock=$BCF_TMP/agent.sock
agent=unix:$sock
# 16 staging slots: fewer than the 32 batches one session may have in
# flight, so that a stalled host can hold every slot it is not kept from
args=(--workers 1 --queue-depth 16)
if "$BCF_AGENT" --help 2>&1 | grep -q -- --xfer-timeout; then
	# long enough that a benign host under sanitizers and load is never
	# taken for a stalled one; the stalled one holds only its share of
	# slots meanwhile
	args+=(--xfer-timeout 10000)
else
	bcf_log "this agent has no --xfer-timeout; started without it"
fi
bcf_start_agent "$BCF_BACK" "$agent" "${args[@]}" ||
	bcf_fail "bluecache-agent ${args[*]} did not become ready"

bcf_gen fair-base $((64 * mib)) > "$BCF_BACK/base"
bcf_gen fair-victim $((64 * mib)) > "$BCF_BACK/victim"
bcf_gen fair-b $((4 * mib)) > "$BCF_BACK/small"
nread=${BCF_FAIR_READERS:-32}
for i in $(seq 1 $nread); do
	truncate -s 4G "$BCF_BACK/big$i" || bcf_hard "cannot make big$i"
done

bcf_mount_extra A "$agent" transport=tcp || bcf_fail "mount A failed"
bcf_mount_extra C "$agent" "transport=$BCF_TRANSPORT" ||
	bcf_fail "mount C failed"

now()
{
	date +%s.%N
}

# elapsed T0 T1: seconds from T0 to T1, two decimals
elapsed()
{
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", b - a }'
}

# read_check MOUNT NAME: read NAME through MOUNT, killed after the bound
# (and 5 s); prints the seconds it took
read_check()
{
	local t0 t1 got want st

	want=$(bcf_sha "$BCF_BACK/$2")
	t0=$(now)
	got=$(timeout -k 5 $((bound + 5)) dd if="$BCF_TMP/$1/$2" bs=1M \
		status=none | sha256sum | cut -d' ' -f1
		exit "${PIPESTATUS[0]}")
	st=$?
	t1=$(now)
	[ $st -lt 124 ] ||
		bcf_fail "$1/$2: the read did not end within $((bound + 5)) s" \
			"(killed; $(elapsed "$t0" "$t1") s)"
	[ "$got" = "$want" ] ||
		bcf_fail "$1/$2: sha256 $got, expected $want (dd status $st," \
			"after $(elapsed "$t0" "$t1") s)"
	elapsed "$t0" "$t1"
}

# on the way out the flooder and A's readers go before A is unmounted
readers=()
flood_pid=
fair_cleanup()
{
	local rc=$?

	[ -n "$flood_pid" ] && kill "$flood_pid" 2>/dev/null
	if [ ${#readers[@]} -gt 0 ]; then
		kill -KILL "${readers[@]}" 2>/dev/null
		wait "${readers[@]}" 2>/dev/null
	fi
	(exit $rc)
	bcf_cleanup_extra
}
trap fair_cleanup EXIT

base=$(read_check C base) || exit 1
bcf_log "C read 64 MiB in $base s without attackers"

# A: readers of large files, stopped with transfers in flight
for i in $(seq 1 $nread); do
	dd if="$BCF_TMP/A/big$i" of=/dev/null bs=1M status=none 2>/dev/null &
	readers+=($!)
done
read_bytes()
{
	local p n=0 r

	for p in "${readers[@]}"; do
		r=$(awk '/^rchar:/ { print $2 }' "/proc/$p/io" 2>/dev/null)
		n=$((n + ${r:-0}))
	done
	echo $n
}
bcf_wait_for 30 eval '[ "$(read_bytes)" -ge $((256 * mib)) ]' ||
	bcf_fail "A's readers did not get going ($(read_bytes) bytes)"
kill -STOP "${BCF_EXTRA_PID[A]}"
bcf_log "A stopped after $(($(read_bytes) / mib)) MiB"

echo "no flood" > "$BCF_TMP/flood.status"
if [ "$conns" -gt 0 ]; then
	python3 "$flood" "$sock" "$conns" "$BCF_TMP/flood.status" &
	flood_pid=$!
	bcf_wait_for 20 grep -q "^open" "$BCF_TMP/flood.status" ||
		bcf_fail "the flooder did not start"
fi
sleep 2
bcf_log "flood: $(cat "$BCF_TMP/flood.status")"

attacked=$(read_check C victim) || exit 1
bcf_log "C read 64 MiB in $attacked s with A stopped and the flood" \
	"($base s without)"
bcf_log "flood: $(cat "$BCF_TMP/flood.status")"
awk -v a="$attacked" -v b="$bound" 'BEGIN { exit !(a <= b) }' ||
	bcf_fail "C took $attacked s to read 64 MiB under attack" \
		"(bound $bound s, $base s without)"

bcf_mount_extra B "$agent" "transport=$BCF_TRANSPORT" ||
	bcf_fail "mount B failed during the attack"
t=$(read_check B small) || exit 1
bcf_log "B mounted during the attack and read 4 MiB in $t s"

if [ -n "$flood_pid" ]; then
	kill "$flood_pid"
	wait "$flood_pid" 2>/dev/null
fi
kill -CONT "${BCF_EXTRA_PID[A]}"
# A's readers end, with data or with an error if its session was cut
for p in "${readers[@]}"; do
	kill "$p" 2>/dev/null
done
bcf_wait_for 60 eval '! kill -0 ${readers[*]} 2>/dev/null' ||
	bcf_fail "A's readers did not end after SIGCONT"
wait "${readers[@]}" 2>/dev/null
for m in A B C; do
	bcf_umount_extra $m || bcf_fail "unmount of $m failed"
done
bcf_stop_agent || bcf_fail "the agent did not stop"
! grep -q " $BCF_TMP/" /proc/self/mountinfo ||
	bcf_fail "a mount is left: $(grep " $BCF_TMP/" /proc/self/mountinfo)"
exit 0
