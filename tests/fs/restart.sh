#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# restart.sh - the agent killed and restarted under a live mount; the
# applications on the mount notice nothing beyond a pause.
#
# The test starts the agent itself, with a fixed --state-dir under the temp
# dir kept across restarts: over tcp on one loopback port, over shm on a
# unix socket (unix:PATH, -o transport=shm), and mounts it with
# -o reconnect_timeout=60.  Three workloads run on the mount meanwhile,
# each in a loop until the restarts are over:
#   random  tests/fs/random-check against a reference directory outside
#           the mount, a new run of $RS_RC_OPS operations per round;
#   tar     extraction of a tarball (a few thousand small files and some
#           larger ones, tarred natively first), then diff -r against a
#           native extraction, then rm -rf;
#   fsync   tests/fs/fsync-writer: numbered, checksummed records, fsync
#           every few, the last fsynced number kept outside the mount.
# Meanwhile the agent gets SIGKILL $RS_KILLS (10) times, then SIGTERM
# $RS_TERMS (10) times, at random moments 0.5-2 s apart, and is started
# again 0-3 s after it is gone.  SIGTERM gets as many rounds as SIGKILL:
# an agent that stops cleanly exits at once, so they take no longer.
# The restarts stop after $RS_DEADLINE (150) s whatever is left, so that
# the test stays near three minutes on a slow machine; it says so.
# Every workload must exit 0; afterwards random-check's files must equal
# their references, the last extraction the native one, and every
# fsynced record must be there, intact, once: on the mount and again in
# the agent's directory after the unmount.  The pauses the daemon logged
# ("agent connection restored after S s") are printed.
#
# Over shm a second part mounts local:DIR (the daemon's private agent),
# runs the random and fsync workloads and kills the private agent
# $RS_LOCAL_KILLS (2) times: the daemon must start a new one each time
# and the work must go on.
#
# BCF_RESTART_KILLS, BCF_RESTART_TERMS, BCF_RESTART_LOCAL_KILLS set the
# counts (0 0 0 checks the harness alone; on a cephfs store 5 and 5 by
# default: each restart waits for the cluster's session, and the posix
# runs cover the daemon's side of each restart the same way),
# BCF_RESTART_TREE_DIRS the tar
# tree's directories of 100 files (30), BCF_RESTART_SIGNALS a list of
# signals (KILL or TERM) to send in order instead, BCF_RESTART_DEADLINE
# the seconds for the restarts.  tests/fs/soak.sh runs this for many
# restarts and prints the pause statistics.  Seeds are printed in the
# workload logs; BCF_KEEP=1 keeps them on failure.
. "$(dirname "$0")/lib.sh"
# the daemon logs the loss and the recovery; the agent, a peer it lost
RS_ALLOW='connection (lost|restored|reset|closed)|lost|reconnect|restor'
RS_ALLOW+='|agent .*(killed|signal|exited|died|terminated|gone)'
RS_ALLOW+='|Connection reset|Broken pipe|end of file|EOF'
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-$RS_ALLOW}
bcf_init

RS_RC=$top_builddir/tests/fs/random-check
RS_FW=$top_builddir/tests/fs/fsync-writer
[ -x "$RS_RC" ] || bcf_hard "$RS_RC is not built"
[ -x "$RS_FW" ] || bcf_hard "$RS_FW is not built"
RS_KILLS=${BCF_RESTART_KILLS:-10}
RS_TERMS=${BCF_RESTART_TERMS:-10}
if [ "${BCF_STORE:-posix}" = cephfs ]; then
	RS_KILLS=${BCF_RESTART_KILLS:-5}
	RS_TERMS=${BCF_RESTART_TERMS:-5}
fi
RS_LOCAL_KILLS=${BCF_RESTART_LOCAL_KILLS:-2}
RS_DEADLINE=${BCF_RESTART_DEADLINE:-150}
RS_RC_OPS=${BCF_RESTART_RC_OPS:-1500}
RS_TREE_DIRS=${BCF_RESTART_TREE_DIRS:-30}
# one round of a workload: far above reconnect_timeout, so that a request
# the daemon gives up on shows as the error it returns, not as a timeout
RS_STEP=240
# after the restarts, the time the workloads get to finish their round
RS_DRAIN=300
RS_REF=$BCF_TMP/ref
RS_STATE=$BCF_TMP/state
declare -A RS_PID=()

rs_cleanup()
{
	local rc=$? n

	touch "$BCF_TMP/stop" 2>/dev/null
	for n in "${!RS_PID[@]}"; do
		bcf_kill_tree "${RS_PID[$n]}"
	done
	(exit $rc)
	bcf_cleanup
}
trap rs_cleanup EXIT

if [ -n "${BCF_RESTART_SIGNALS:-}" ]; then
	RS_SIGNALS=$BCF_RESTART_SIGNALS
else
	RS_SIGNALS=
	for i in $(seq 1 "$RS_KILLS"); do RS_SIGNALS+="KILL "; done
	for i in $(seq 1 "$RS_TERMS"); do RS_SIGNALS+="TERM "; done
fi

# The options the restartable product offers.  An agent or a daemon that
# does not have them yet still runs (a run without restarts checks the
# harness), and restarts then show what applications see without them.
RS_MOUNT_OPTS=
if bcf_fs_has reconnect_timeout; then
	RS_MOUNT_OPTS=reconnect_timeout=60
else
	bcf_log "NOTE: bluecachefs has no -o reconnect_timeout"
fi
RS_AGENT_ARGS=()
if bcf_agent_has --state-dir; then
	mkdir -p "$RS_STATE" || bcf_hard "cannot make $RS_STATE"
	RS_AGENT_ARGS+=(--state-dir "$RS_STATE")
else
	bcf_log "NOTE: bluecache-agent has no --state-dir"
fi

# --- the data the workloads use --------------------------------------

# a tree of 3,000 small files in 30 directories (RS_TREE_DIRS) and 8
# larger ones, tarred
mkdir -p "$RS_REF/src" || bcf_hard "cannot make $RS_REF/src"
python3 - "$RS_REF/src" "$RS_TREE_DIRS" <<'PY' || bcf_hard "cannot make the tar tree"
import os, random, sys
root = sys.argv[1]
rng = random.Random(20240)
for d in range(int(sys.argv[2])):
    dd = os.path.join(root, "d%02d" % d)
    os.makedirs(os.path.join(dd, "sub"))
    for f in range(100):
        p = os.path.join(dd, "sub" if f % 4 == 0 else "", "f%03d" % f)
        with open(p, "wb") as o:
            o.write(rng.randbytes(rng.randint(0, 4000)))
for b in range(8):
    with open(os.path.join(root, "big%d" % b), "wb") as o:
        o.write(rng.randbytes(rng.randint(256 << 10, 3 << 20)))
PY
tar -C "$RS_REF/src" -cf "$RS_REF/tree.tar" . || bcf_hard "tar -c"
mkdir "$RS_REF/native" && tar -C "$RS_REF/native" -xf "$RS_REF/tree.tar" ||
	bcf_hard "native tar -x"

# --- the workloads ---------------------------------------------------

# rs_status RC: how a command ended, for a message
rs_status()
{
	case $1 in
	124) echo "timed out after $RS_STEP s" ;;
	12[5-8]|[0-9]|[0-9][0-9]|1[01][0-9]|12[0-3])
		echo "exited with status $1" ;;
	*)
		case $(kill -l $(($1 - 128))) in
		KILL) echo "killed by SIGKILL (a round that timed out)" ;;
		BUS) echo "killed by SIGBUS (EIO on a mapped page)" ;;
		*) echo "killed by SIG$(kill -l $(($1 - 128)))" ;;
		esac
		;;
	esac
}

# rs_tail LOG: the last lines of a workload's log, on one line
rs_tail()
{
	grep -v -e '^random-check: ' -e '^--- round' "$1" |
		tail -n 3 | tr '\n' ' '
}

# rs_wl_fail TAG WHAT REASON...: record why a workload failed and end it
rs_wl_fail()
{
	local tag=$1 what=$2

	shift 2
	echo "$*" > "$BCF_TMP/wl-$tag-$what.fail"
	exit 1
}

# rs_wl_random TAG: random-check rounds on $BCF_MNT/TAG-rc until stopped
rs_wl_random()
{
	local tag=$1 i=0 rc log=$BCF_TMP/wl-$1-random.log

	while :; do
		i=$((i + 1))
		echo "--- round $i" >> "$log"
		timeout -k 5 $RS_STEP "$RS_RC" "$BCF_MNT/$tag-rc" \
			"$RS_REF/$tag-rc" "$RS_RC_OPS" >> "$log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || rs_wl_fail "$tag" random \
			"round $i: random-check $(rs_status $rc):" \
			"$(grep '^random-check: BCF_SEED=' "$log" | tail -n 1)" \
			"$(rs_tail "$log")"
		[ -e "$BCF_TMP/stop" ] && break
	done
	echo "$i rounds" > "$BCF_TMP/wl-$tag-random.done"
}

# rs_wl_tar TAG: extract, compare, remove on $BCF_MNT/TAG-tar until
# stopped; the last extraction stays for the final check
rs_wl_tar()
{
	local tag=$1 i=0 rc d log=$BCF_TMP/wl-$1-tar.log

	while :; do
		i=$((i + 1))
		d=$BCF_MNT/$tag-tar/x$i
		echo "--- round $i" >> "$log"
		mkdir "$d" 2>> "$log" ||
			rs_wl_fail "$tag" tar \
				"round $i: mkdir $d: $(tail -n 1 "$log")"
		timeout -k 5 $RS_STEP tar -C "$d" -xf "$RS_REF/tree.tar" \
			>> "$log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || rs_wl_fail "$tag" tar \
			"round $i: tar -x $(rs_status $rc): $(rs_tail "$log")"
		timeout -k 5 $RS_STEP diff -r "$RS_REF/native" "$d" \
			>> "$log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || rs_wl_fail "$tag" tar \
			"round $i: diff -r against the native extraction" \
			"$(rs_status $rc): $(rs_tail "$log")"
		[ -e "$BCF_TMP/stop" ] && break
		timeout -k 5 $RS_STEP rm -rf "$d" >> "$log" 2>&1
		rc=$?
		[ $rc -eq 0 ] || rs_wl_fail "$tag" tar \
			"round $i: rm -rf $(rs_status $rc): $(rs_tail "$log")"
	done
	echo "$i" > "$BCF_TMP/wl-$tag-tar.last"
	echo "$i rounds" > "$BCF_TMP/wl-$tag-tar.done"
}

# rs_wl_fsync TAG: one fsync-writer until stopped
rs_wl_fsync()
{
	local tag=$1 rc log=$BCF_TMP/wl-$1-fsync.log

	timeout -k 5 $((RS_DEADLINE + RS_DRAIN)) "$RS_FW" write \
		"$BCF_MNT/$tag-fw/records" "$BCF_TMP/$tag-fw.progress" \
		"$BCF_TMP/stop" 4 >> "$log" 2>&1
	rc=$?
	[ $rc -eq 0 ] || rs_wl_fail "$tag" fsync \
		"fsync-writer $(rs_status $rc): $(rs_tail "$log")"
	tail -n 1 "$log" > "$BCF_TMP/wl-$tag-fsync.done"
}

# rs_start TAG WORKLOAD...: make the directories and start the workloads
rs_start()
{
	local tag=$1 w

	shift
	rm -f "$BCF_TMP/stop"
	for w in "$@"; do
		case $w in
		random)
			mkdir -p "$RS_REF/$tag-rc" "$BCF_MNT/$tag-rc" ;;
		tar)	mkdir -p "$BCF_MNT/$tag-tar" ;;
		fsync)	mkdir -p "$BCF_MNT/$tag-fw" ;;
		esac || bcf_fail "cannot make the $w directories on the mount"
		(cd / && "rs_wl_$w" "$tag") &
		RS_PID[$tag-$w]=$!
	done
	# each has begun before anything is killed
	sleep 1
}

# rs_failed: the workloads that have failed so far, by name
rs_failed()
{
	local f

	for f in "$BCF_TMP"/wl-*.fail; do
		[ -e "$f" ] || continue
		f=${f##*/wl-}
		echo "${f%.fail}"
	done
}

# rs_bad WORDS...: one more failure for rs_finish to report
rs_bad()
{
	bad+="  $*"$'\n'
}

# rs_check_mount TAG WORKLOAD...: the workloads' data on the mount; adds
# a line to $bad for each that differs
rs_check_mount()
{
	local tag=$1 w i last rc=$RS_REF/$1-rc mrc=$BCF_MNT/$1-rc

	shift
	for w in "$@"; do
		case $w in
		random)
			for i in 0 1 2 3; do
				timeout 60 cmp "$rc/file$i" "$mrc/file$i" >&2 ||
					rs_bad "random: file$i on the mount" \
						"differs from its reference"
			done
			;;
		tar)
			last=$(cat "$BCF_TMP/wl-$tag-tar.last")
			timeout 120 diff -r "$RS_REF/native" \
				"$BCF_MNT/$tag-tar/x$last" >&2 ||
				rs_bad "tar: the last extraction (x$last)" \
					"differs from the native one"
			;;
		fsync)
			timeout 120 "$RS_FW" check "$BCF_MNT/$tag-fw/records" \
				"$BCF_TMP/$tag-fw.progress" >&2 ||
				rs_bad "fsync: records fsynced are missing or" \
					"damaged on the mount"
			;;
		esac
	done
}

# rs_finish TAG WORKLOAD...: stop the workloads, wait for them (bounded)
# and check their results on the mount; fails naming every workload that
# failed and how
rs_finish()
{
	local tag=$1 w pid st t0

	bad=

	shift
	touch "$BCF_TMP/stop"
	t0=$SECONDS
	for w in "$@"; do
		pid=${RS_PID[$tag-$w]}
		while bcf_running "$pid" &&
		      [ $((SECONDS - t0)) -lt $RS_DRAIN ]; do
			sleep 0.2
		done
		if bcf_running "$pid"; then
			rs_bad "$w: still running $RS_DRAIN s after the" \
				"restarts ended"
			bcf_dump_procs $BCF_FS_PID $(bcf_agent_pids) \
				$(cat /proc/"$pid"/task/*/children 2>/dev/null)
			bcf_kill_tree "$pid"
		fi
		wait "$pid"
		st=$?
		unset "RS_PID[$tag-$w]"
		if [ -e "$BCF_TMP/wl-$tag-$w.fail" ]; then
			rs_bad "$w: $(cat "$BCF_TMP/wl-$tag-$w.fail")"
		elif [ $st -ne 0 ]; then
			rs_bad "$w: exited with status $st"
		else
			bcf_log "$tag $w: $(cat "$BCF_TMP/wl-$tag-$w.done")"
		fi
	done
	bcf_running "$BCF_FS_PID" || rs_bad "bluecachefs ($BCF_FS_PID) is gone"
	[ -z "$bad" ] && rs_check_mount "$tag" "$@"
	[ -z "$bad" ] && return 0
	printf 'workloads that failed (%s):\n%s' "$tag" "$bad" >&2
	rs_show_pauses
	bcf_fail "$(printf '%s' "$bad" | sed 's/^  //' | head -n 1)"
}

# rs_check_back TAG WORKLOAD...: after the unmount, the agent's directory
# holds what the applications wrote
rs_check_back()
{
	local tag=$1 w i

	shift
	for w in "$@"; do
		case $w in
		random)
			for i in 0 1 2 3; do
				cmp "$RS_REF/$tag-rc/file$i" \
					"$BCF_BACK/$tag-rc/file$i" >&2 &&
					continue
				bcf_fail "random: file$i in the agent's" \
					"directory differs from its reference"
			done
			;;
		fsync)
			"$RS_FW" check "$BCF_BACK/$tag-fw/records" \
				"$BCF_TMP/$tag-fw.progress" >&2 ||
				bcf_fail "fsync: records fsynced are missing" \
					"or damaged in the agent's directory"
			;;
		esac
	done
}

rs_show_pauses()
{
	local p

	p=$(bcf_pauses | tr '\n' ' ')
	bcf_log "pauses the daemon logged (s): ${p:-none}"
	bcf_log "pause statistics: $(bcf_pause_stats)"
}

# rs_report ROUNDS SECONDS: the pauses as a markdown table for doc/
rs_report()
{
	local nk nt stats

	nk=$(echo $RS_SIGNALS | tr ' ' '\n' | head -n "$1" | grep -c KILL)
	nt=$(($1 - nk))
	stats=$(bcf_pause_stats)
	echo
	echo "Agent restarts under load ($BCF_TRANSPORT, $(date +%Y-%m-%d)," \
		"$(nproc) CPUs; random-check, tar -x and fsync-writer on" \
		"the mount):"
	echo
	echo "| transport | restarts (SIGKILL/SIGTERM) | seconds | pauses |" \
		"p50 (s) | p99 (s) | max (s) |"
	echo "|---|---|---|---|---|---|---|"
	echo "$stats" | awk -v x="$BCF_TRANSPORT" -v r="$1 ($nk/$nt)" \
		-v s="$2" '{
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", x, r, s,
			$2, $4 == "" ? "-" : $4, $6 == "" ? "-" : $6,
			$8 == "" ? "-" : $8 }'
	echo
}

# --- the restartable agent -------------------------------------------

case $BCF_TRANSPORT in
shm)
	RS_LISTEN=unix:$BCF_TMP/agent.sock
	RS_AGENT=$RS_LISTEN
	RS_OPTS=transport=shm
	;;
tcp)
	BCF_SECRET=$BCF_TMP/secret
	bcf_secret "$BCF_SECRET"
	RS_AGENT_ARGS+=(--secret-file "$BCF_SECRET" --squash none)
	RS_LISTEN=
	RS_HOST=127.0.0.1
	RS_OPTS=transport=tcp,secret_file=$BCF_SECRET
	;;
rdma)
	# a new queue pair on every restart: the agent's RDMA port may change,
	# its HELLO says which
	[ -n "${RDMA_IP:-}" ] || bcf_skip "no RDMA device address (RDMA_IP)"
	BCF_SECRET=$BCF_TMP/secret
	bcf_secret "$BCF_SECRET"
	RS_AGENT_ARGS+=(--secret-file "$BCF_SECRET" --squash none
			--rdma-listen "$RDMA_IP:0")
	RS_LISTEN=
	RS_HOST=$RDMA_IP
	RS_OPTS=transport=rdma,secret_file=$BCF_SECRET
	;;
*)
	bcf_skip "restart runs over shm, tcp and rdma"
	;;
esac

# rs_agent_start: start the agent on $RS_LISTEN; the same command each time
rs_agent_start()
{
	bcf_start_agent "$BCF_BACK" "$RS_LISTEN" "${RS_AGENT_ARGS[@]}"
}

if [ -z "$RS_LISTEN" ]; then
	for try in 1 2 3; do
		BCF_PORT=$(bcf_free_port) || bcf_hard "no free port"
		RS_LISTEN=tcp://$RS_HOST:$BCF_PORT
		rs_agent_start && break
		RS_LISTEN=
	done
	[ -n "$RS_LISTEN" ] || {
		tail -n 20 "$BCF_TMP/agent.log" >&2
		bcf_fail "bluecache-agent did not become ready"
	}
	RS_AGENT=tcp://$RS_HOST:$BCF_PORT
else
	rs_agent_start || {
		tail -n 20 "$BCF_TMP/agent.log" >&2
		bcf_fail "bluecache-agent did not become ready on $RS_LISTEN"
	}
fi
bcf_mount_at "$RS_AGENT" "$RS_OPTS${RS_MOUNT_OPTS:+,$RS_MOUNT_OPTS}"

# rs_restart SIG ROUND: signal the agent, wait for it to be gone, start it
# again on the same address 0-3 s later
rs_restart()
{
	local sig=$1 round=$2 pid=$BCF_AGENT_PID st

	kill -"$sig" "$pid" || bcf_hard "kill -$sig $pid"
	if ! bcf_wait_for 30 bcf_pid_gone "$pid"; then
		bcf_dump_procs "$pid"
		bcf_fail "round $round: the agent did not exit within 30 s" \
			"of SIG$sig"
	fi
	wait "$pid"
	st=$?
	BCF_AGENT_PID=
	# a clean stop is status 0; anything else is a crash or a report
	if [ "$sig" = TERM ] && [ $st -ne 0 ]; then
		tail -n 20 "$BCF_TMP/agent.log" >&2
		bcf_fail "round $round: the agent exited with status $st" \
			"on SIGTERM"
	fi
	bcf_sleep_ms 0 3000
	if ! rs_agent_start; then
		tail -n 20 "$BCF_TMP/agent.log" >&2
		bcf_fail "round $round: the agent did not start again on" \
			"$RS_LISTEN"
	fi
}

# --- part 1: the separately started agent ----------------------------

WL="random tar fsync"
rs_start main $WL
round=0
t0=$SECONDS
for sig in $RS_SIGNALS; do
	bcf_sleep_ms 500 2000
	if [ -n "$(rs_failed)" ]; then
		bcf_log "a workload failed; no more restarts"
		break
	fi
	if [ $((SECONDS - t0)) -ge "$RS_DEADLINE" ]; then
		bcf_log "NOTE: $round of $(echo $RS_SIGNALS | wc -w) restarts" \
			"done in the $RS_DEADLINE s given; no more"
		break
	fi
	round=$((round + 1))
	rs_restart "$sig" "$round"
	bcf_running "$BCF_FS_PID" ||
		bcf_fail "bluecachefs died after restart $round (SIG$sig)"
done
bcf_log "$round restarts in $((SECONDS - t0)) s"
rs_finish main $WL
rs_show_pauses
[ -n "${BCF_RESTART_REPORT:-}" ] && rs_report "$round" "$((SECONDS - t0))"
bcf_umount
bcf_stop_agent || bcf_fail "the agent did not stop"
rs_check_back main $WL

# --- part 2: the daemon's private agent (local:DIR) ------------------

if [ "$BCF_TRANSPORT" = shm ] && [ "$RS_LOCAL_KILLS" -gt 0 ]; then
	bcf_mount ${RS_MOUNT_OPTS:+-o "$RS_MOUNT_OPTS"}
	WL="random fsync"
	rs_start local $WL
	for k in $(seq 1 "$RS_LOCAL_KILLS"); do
		bcf_sleep_ms 500 2000
		old=$(bcf_agent_pids)
		[ -n "$old" ] ||
			bcf_fail "local kill $k: the mount has no private agent"
		kill -KILL $old
		new=
		for i in $(seq 1 300); do
			new=$(bcf_agent_pids | grep -vxF "$old")
			[ -n "$new" ] && break
			bcf_running "$BCF_FS_PID" ||
				bcf_fail "local kill $k: bluecachefs died" \
					"with its agent"
			sleep 0.1
		done
		if [ -z "$new" ]; then
			rs_failed | sed 's/^/workload failed: /' >&2
			for f in "$BCF_TMP"/wl-local-*.fail; do
				[ -e "$f" ] && cat "$f" >&2
			done
			bcf_fail "local kill $k: the daemon started no new" \
				"private agent within 30 s of SIGKILL to $old"
		fi
		bcf_log "local kill $k: agent $old replaced by $new"
	done
	rs_finish local $WL
	bcf_umount
	rs_check_back local $WL
fi
exit 0
