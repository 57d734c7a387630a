# SPDX-License-Identifier: GPL-2.0-or-later
#
# lib.sh - shared set-up for the FUSE tests, sourced by every tests/fs script.
#
# A test calls bcf_init (skips with 77 without /dev/fuse or fusermount3,
# makes a private temp dir and installs the cleanup trap), then bcf_mount.
# $BCF_TRANSPORT picks how the mount reaches its agent:
#   shm  bluecachefs local:DIR (a private agent over a unix socket, shm data)
#   tcp  a separately started bluecache-agent on a free loopback port with a
#        secret file and --squash none, mounted as tcp://127.0.0.1:PORT
#        -o transport=tcp
#   rdma as tcp, but on the RDMA device's address $RDMA_IP with the agent's
#        --rdma-listen: bulk data moves by RDMA (tests/rdma/check-rdma.sh
#        runs the suite so inside a VM with Soft-RoCE); skips without
#        RDMA_IP.  The mount must end up on rdma (the agent logs it).
# $BCF_STORE picks what the agent persists into:
#   posix   (default) the directory $BCF_BACK, --root $BCF_BACK
#   cephfs  a CephFS: bcf_init starts a throwaway cluster of its own
#           (tests/ceph/ceph-up.sh, one mon, one memstore OSD, one MDS, in
#           $BCF_TMP/ceph; about 5 s), mounts the file system's root on
#           $BCF_BACK with ceph-fuse, so that a test reaches the objects
#           behind the mount as it reaches a posix root, and every agent
#           started for $BCF_BACK gets --store cephfs:/,conf=$CEPH_CONF
#           instead of --root.  The daemon's private agent (local:DIR)
#           has no store option: bcf_mount over shm starts an agent on a
#           unix socket instead.  Skips without the Ceph daemons or
#           ceph-fuse, or when the agent has no --store or was built
#           without libcephfs, or with BCF_CEPHFS=0 (a run that has
#           covered them already).  The trap unmounts $BCF_BACK and stops
#           the cluster after the agents.
# The daemon runs in the foreground (-f) in the background of the shell so
# every line it logs lands in $BCF_TMP/fs.log; the agent logs to agent.log.
# On exit the trap unmounts, stops what was started, and fails the test when
# a log holds a line containing "error" or a sanitizer report, unless the
# line matches $BCF_LOG_ALLOW (an extended regular expression).
#
# BCF_KEEP=1 keeps the temp dir of a failed test for inspection.
# Every wait is bounded.  Outcomes: 0 pass, 1 fail, 77 skip, 99 hard error.

BCF_TRANSPORT=${BCF_TRANSPORT:-shm}
BCF_STORE=${BCF_STORE:-posix}
BCF_CEPH_DIR=
BCF_CEPH_FUSE_PID=
BCF_STORE_SPEC=
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-}
BCF_NAME=$(basename "$0" .sh)
BCF_STORE_TAG=
[ "$BCF_STORE" = posix ] || BCF_STORE_TAG=,$BCF_STORE
BCF_FS_PID=
BCF_AGENT_PID=
BCF_MNT=
BCF_TMP=

bcf_log()
{
	echo "$BCF_NAME[$BCF_TRANSPORT$BCF_STORE_TAG]: $*"
}

bcf_fail()
{
	echo "FAIL: $BCF_NAME[$BCF_TRANSPORT$BCF_STORE_TAG]: $*" >&2
	exit 1
}

bcf_hard()
{
	echo "HARD FAILURE: $BCF_NAME[$BCF_TRANSPORT$BCF_STORE_TAG]: $*" >&2
	exit 99
}

bcf_skip()
{
	echo "SKIP: $BCF_NAME[$BCF_TRANSPORT$BCF_STORE_TAG]: $*"
	exit 77
}

# bcf_wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds
bcf_wait_for()
{
	local n=$(($1 * 10))

	shift
	while [ "$n" -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

bcf_is_mounted()
{
	# /proc/self/mountinfo field 5 is the mount point
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

bcf_init()
{
	[ -n "${top_builddir:-}" ] || bcf_hard "top_builddir is not set"
	[ -n "${top_srcdir:-}" ] || bcf_hard "top_srcdir is not set"
	# absolute: tests cd into their mounts, the trap runs from there
	top_builddir=$(cd "$top_builddir" && pwd) &&
		top_srcdir=$(cd "$top_srcdir" && pwd) ||
		bcf_hard "top_builddir or top_srcdir is not a directory"
	BCF_FS=$top_builddir/fs/bluecachefs
	BCF_AGENT=$top_builddir/agent/bluecache-agent
	case $BCF_TRANSPORT in
	shm|tcp) ;;
	rdma)
		[ -n "${RDMA_IP:-}" ] ||
			bcf_skip "RDMA_IP is not set (no RDMA device here)"
		;;
	*) bcf_hard "unknown BCF_TRANSPORT '$BCF_TRANSPORT'" ;;
	esac
	[ -c /dev/fuse ] || bcf_skip "/dev/fuse is missing"
	command -v fusermount3 >/dev/null 2>&1 || bcf_skip "fusermount3 is missing"
	[ -x "$BCF_FS" ] || bcf_hard "$BCF_FS is not built"
	[ -x "$BCF_AGENT" ] || bcf_hard "$BCF_AGENT is not built"
	BCF_TMP=$(mktemp -d "${TMPDIR:-/tmp}/bcf-$BCF_NAME.XXXXXX") ||
		bcf_hard "cannot make a temp dir"
	# resolve symlinks so the mount point matches /proc/self/mountinfo
	BCF_TMP=$(cd "$BCF_TMP" && pwd -P)
	chmod 755 "$BCF_TMP"
	BCF_MNT=$BCF_TMP/mnt
	BCF_BACK=$BCF_TMP/back
	mkdir "$BCF_MNT" "$BCF_BACK" || bcf_hard "cannot make $BCF_MNT"
	: > "$BCF_TMP/fs.log"
	: > "$BCF_TMP/agent.log"
	trap bcf_cleanup EXIT
	trap 'exit 130' INT TERM HUP
	export BLUECACHE_AGENT=$BCF_AGENT
	case $BCF_STORE in
	posix) ;;
	cephfs) bcf_ceph_init ;;
	*) bcf_hard "unknown BCF_STORE '$BCF_STORE'" ;;
	esac
}

# bcf_ceph_usable: skip unless this machine can run a cluster and this
# agent can serve a CephFS.  The agent is asked with a conf file that
# does not exist: one built with libcephfs fails on reading it, one
# built without says so, both at once and without a cluster.
bcf_ceph_usable()
{
	local c out

	[ "${BCF_CEPHFS:-1}" = 0 ] &&
		bcf_skip "BCF_CEPHFS=0 leaves the cephfs store's tests out"
	for c in ceph-mon ceph-osd ceph-mds ceph monmaptool rados ceph-fuse \
		 uuidgen bc; do
		command -v "$c" >/dev/null 2>&1 ||
			bcf_skip "$c is missing (the cephfs store's tests" \
				"need the Ceph packages)"
	done
	bcf_agent_has --store ||
		bcf_skip "this bluecache-agent has no --store option"
	out=$(timeout 20 "$BCF_AGENT" --foreground \
		--store "cephfs:/,conf=$BCF_TMP/no-such.conf" \
		--listen "unix:$BCF_TMP/probe.sock" 2>&1 </dev/null)
	case $out in
	*"built without libcephfs"*)
		bcf_skip "bluecache-agent was built without libcephfs" \
			"(configure --with-cephfs)"
		;;
	esac
}

# bcf_ceph_init: the cluster, $BCF_BACK and the store spec (see the top)
bcf_ceph_init()
{
	local env try

	bcf_ceph_usable
	BCF_CEPH_DIR=$BCF_TMP/ceph
	for try in 1 2; do
		# a random monitor port may be taken: one more try
		env=$(WITH_MDS=1 WITH_MGR=0 timeout 180 \
			"$top_srcdir/tests/ceph/ceph-up.sh" "$BCF_CEPH_DIR" \
			2>"$BCF_TMP/ceph-up.log") && break
		"$top_srcdir/tests/ceph/ceph-down.sh" "$BCF_CEPH_DIR"
		env=
	done
	if [ -z "$env" ]; then
		tail -n 30 "$BCF_TMP/ceph-up.log" >&2
		BCF_CEPH_DIR=
		bcf_hard "the Ceph cluster did not start"
	fi
	eval "$env"
	export CEPH_CONF CEPH_FS
	BCF_STORE_SPEC=cephfs:/,conf=$CEPH_CONF
	# foreground in the background, like the daemons, so the trap
	# knows its pid; its log goes to the cluster's log dir
	ceph-fuse -f -c "$CEPH_CONF" "$BCF_BACK" \
		>"$BCF_TMP/ceph-fuse.log" 2>&1 &
	BCF_CEPH_FUSE_PID=$!
	if ! bcf_wait_for 60 eval 'bcf_running "$BCF_CEPH_FUSE_PID" &&
	     bcf_is_mounted "$BCF_BACK"'; then
		cat "$BCF_TMP/ceph-fuse.log" >&2
		bcf_hard "ceph-fuse did not mount the CephFS on $BCF_BACK"
	fi
	bcf_log "cephfs store: $(tail -n 1 "$BCF_TMP/ceph-up.log")"
}

# bcf_ceph_session PID: the id of the MDS's session of the Ceph client of
# process PID (an agent's), empty when it lists none; fails when the MDS's
# list cannot be read
bcf_ceph_session()
{
	ceph tell mds.a client ls 2>/dev/null | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    if s.get("client_metadata", {}).get("pid") == sys.argv[1]:
        print(s["id"])' "$1"
}

# bcf_ceph_mount DIR: one more ceph-fuse mount of the test's CephFS on
# DIR (made if missing), unmounted by the trap; for a test that needs a
# second view of the cluster
bcf_ceph_mount()
{
	local pid

	mkdir -p "$1" || bcf_hard "cannot make $1"
	ceph-fuse -f -c "$CEPH_CONF" "$1" >>"$BCF_TMP/ceph-fuse.log" 2>&1 &
	pid=$!
	BCF_CEPH_EXTRA+=("$1:$pid")
	bcf_wait_for 60 eval 'bcf_running '"$pid"' && bcf_is_mounted '"'$1'" ||
		bcf_hard "ceph-fuse did not mount the CephFS on $1"
}
BCF_CEPH_EXTRA=()

# bcf_ceph_fini: unmount every ceph-fuse mount and stop the cluster;
# returns 1 when ceph-fuse hangs or fails
bcf_ceph_fini()
{
	local rc=0 e mnt pid

	for e in "${BCF_CEPH_EXTRA[@]}" "$BCF_BACK:$BCF_CEPH_FUSE_PID"; do
		mnt=${e%:*}
		pid=${e##*:}
		[ -n "$pid" ] || continue
		if bcf_is_mounted "$mnt"; then
			fusermount3 -u "$mnt" 2>/dev/null ||
				umount "$mnt" 2>/dev/null ||
				{ sleep 1; fusermount3 -uz "$mnt"; }
		fi
		if ! bcf_wait_for 20 bcf_pid_gone "$pid"; then
			echo "ceph-fuse on $mnt did not exit" >&2
			kill -KILL "$pid" 2>/dev/null
			rc=1
		fi
		wait "$pid" 2>/dev/null
	done
	BCF_CEPH_EXTRA=()
	BCF_CEPH_FUSE_PID=
	# ceph-down.sh removes the cluster's directory: BCF_KEEP keeps its logs
	[ -n "${BCF_KEEP:-}" ] && cp -a "$BCF_CEPH_DIR/log" "$BCF_TMP/ceph-log" \
		2>/dev/null
	"$top_srcdir/tests/ceph/ceph-down.sh" "$BCF_CEPH_DIR"
	BCF_CEPH_DIR=
	return $rc
}

# bcf_free_port: print a loopback TCP port that was free a moment ago
bcf_free_port()
{
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# bcf_secret FILE: write a random secret, mode 0600
bcf_secret()
{
	(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' \
		> "$1") || bcf_hard "cannot write $1"
	chmod 600 "$1"
}

# bcf_sigterm_blocked PID: every thread of the agent PID blocks SIGTERM
# (its signalfd takes it), the threads its store started too: one that
# does not would die of SIGTERM's default action instead of stopping
bcf_sigterm_blocked()
{
	local st blk

	for st in /proc/"$1"/task/*/status; do
		blk=$(awk '/^SigBlk:/ { print $2 }' "$st" 2>/dev/null)
		[ -n "$blk" ] || continue	# the thread is gone
		(( (16#$blk >> 14) & 1 )) ||
			bcf_fail "agent thread ${st%/status} does not block" \
				"SIGTERM (SigBlk $blk)"
	done
}

# bcf_start_agent ROOT LISTEN [ARGS...]: start bluecache-agent in the
# background, wait for its "ready" on --ready-fd; sets BCF_AGENT_PID.
# Returns 1 (with the agent gone) if it did not become ready.
bcf_start_agent()
{
	local root=$1 listen=$2 ready=$BCF_TMP/agent.ready

	shift 2
	: > "$ready"
	# the cephfs store stands in for the directory the tests know
	local store=(--root "$root")
	if [ -n "$BCF_STORE_SPEC" ] && [ "$root" = "$BCF_BACK" ]; then
		store=(--store "$BCF_STORE_SPEC")
	fi
	"$BCF_AGENT" "${store[@]}" --listen "$listen" --foreground \
		--ready-fd 3 "$@" 3>"$ready" 2>>"$BCF_TMP/agent.log" &
	BCF_AGENT_PID=$!
	if bcf_wait_for 20 grep -q '^ready$' "$ready"; then
		bcf_sigterm_blocked "$BCF_AGENT_PID"
		return 0
	fi
	kill "$BCF_AGENT_PID" 2>/dev/null
	wait "$BCF_AGENT_PID" 2>/dev/null
	BCF_AGENT_PID=
	return 1
}

bcf_stop_agent()
{
	local rc=0

	[ -n "$BCF_AGENT_PID" ] || return 0
	kill "$BCF_AGENT_PID" 2>/dev/null
	if ! bcf_wait_for 20 bcf_pid_gone "$BCF_AGENT_PID"; then
		echo "agent $BCF_AGENT_PID did not stop on SIGTERM" >&2
		kill -KILL "$BCF_AGENT_PID" 2>/dev/null
		rc=1
	fi
	wait "$BCF_AGENT_PID" 2>/dev/null
	BCF_AGENT_PID=
	return $rc
}

bcf_pid_gone()
{
	! kill -0 "$1" 2>/dev/null
}

# bcf_listen_for_transport: where a test's agent listens and how a mount
# reaches it over $BCF_TRANSPORT: sets listen, agent_args (the agent's
# options that go with it) and opts (the mount's -o); tcp and rdma get a
# free port and a secret (BCF_PORT, BCF_SECRET)
bcf_listen_for_transport()
{
	case $BCF_TRANSPORT in
	shm)
		listen=unix:$BCF_TMP/agent.sock
		agent_args=()
		opts=transport=shm
		;;
	*)
		BCF_SECRET=$BCF_TMP/secret
		bcf_secret "$BCF_SECRET"
		BCF_PORT=$(bcf_free_port) ||
			bcf_hard "python3 found no free port"
		listen=tcp://127.0.0.1:$BCF_PORT
		agent_args=(--secret-file "$BCF_SECRET" --squash none)
		opts=transport=$BCF_TRANSPORT,secret_file=$BCF_SECRET
		;;
	esac
}

# bcf_agent_tcp [AGENT OPTION]...: start the tcp agent for $BCF_BACK; sets
# BCF_PORT, BCF_SECRET
bcf_agent_tcp()
{
	local try

	BCF_SECRET=$BCF_TMP/secret
	[ -f "$BCF_SECRET" ] || bcf_secret "$BCF_SECRET"
	for try in 1 2 3; do
		BCF_PORT=$(bcf_free_port) || bcf_hard "python3 found no free port"
		# a trusted host: root's ids are stored as root's, so
		# the suite sees the ownership a local file system keeps
		bcf_start_agent "$BCF_BACK" "tcp://127.0.0.1:$BCF_PORT" \
			--secret-file "$BCF_SECRET" --squash none "$@" &&
			return 0
	done
	cat "$BCF_TMP/agent.log" >&2
	bcf_fail "bluecache-agent did not become ready"
}

# bcf_agent_rdma: as bcf_agent_tcp, on $RDMA_IP with --rdma-listen
bcf_agent_rdma()
{
	local try

	BCF_SECRET=$BCF_TMP/secret
	[ -f "$BCF_SECRET" ] || bcf_secret "$BCF_SECRET"
	for try in 1 2 3; do
		BCF_PORT=$(bcf_free_port) || bcf_hard "python3 found no free port"
		bcf_start_agent "$BCF_BACK" "tcp://$RDMA_IP:$BCF_PORT" \
			--rdma-listen "$RDMA_IP:0" --secret-file "$BCF_SECRET" \
			--squash none \
			${BCF_RDMA_AGENT_ARGS:-} && return 0
	done
	cat "$BCF_TMP/agent.log" >&2
	bcf_fail "bluecache-agent did not become ready for rdma"
}

# bcf_mount [-o OPTS]: mount $BCF_BACK on $BCF_MNT over $BCF_TRANSPORT.
# Extra mount options come as one -o argument.
bcf_mount()
{
	local opts= agent

	if [ "${1:-}" = -o ]; then
		opts=$2
	fi
	case $BCF_TRANSPORT in
	shm)
		agent=local:$BCF_BACK
		if [ -n "$BCF_STORE_SPEC" ]; then
			# local: starts a posix agent: start the store's own
			[ -n "$BCF_AGENT_PID" ] ||
				bcf_start_agent "$BCF_BACK" \
					"unix:$BCF_TMP/agent.sock" ||
				bcf_fail "bluecache-agent did not become ready"
			agent=unix:$BCF_TMP/agent.sock
		fi
		opts=transport=shm${opts:+,$opts}
		;;
	tcp)
		[ -n "$BCF_AGENT_PID" ] || bcf_agent_tcp
		agent=tcp://127.0.0.1:$BCF_PORT
		opts=transport=tcp,secret_file=$BCF_SECRET${opts:+,$opts}
		;;
	rdma)
		[ -n "$BCF_AGENT_PID" ] || bcf_agent_rdma
		agent=tcp://$RDMA_IP:$BCF_PORT
		opts=transport=rdma,secret_file=$BCF_SECRET${opts:+,$opts}
		;;
	esac
	local nrdma
	nrdma=$(grep -c 'rdma session .* connected' "$BCF_TMP/agent.log")
	"$BCF_FS" "$agent" "$BCF_MNT" -f -o "$opts" 2>>"$BCF_TMP/fs.log" &
	BCF_FS_PID=$!
	if ! bcf_wait_for 20 bcf_mount_up; then
		cat "$BCF_TMP/fs.log" >&2
		bcf_fail "bluecachefs $agent $BCF_MNT -o $opts did not mount"
	fi
	if [ "$BCF_TRANSPORT" = rdma ] &&
	   ! bcf_wait_for 10 eval '[ "$(grep -c "rdma session .* connected" \
		"$BCF_TMP/agent.log")" -gt "$nrdma" ]'; then
		cat "$BCF_TMP/agent.log" >&2
		bcf_fail "the mount did not connect over rdma"
	fi
}

bcf_mount_up()
{
	bcf_pid_gone "$BCF_FS_PID" && return 1
	bcf_is_mounted "$BCF_MNT"
}

# bcf_unmount_quiet: unmount and wait for the daemon; returns 1 with a
# message if the daemon hangs or exits with a non-zero status (a crash, a
# sanitizer abort)
bcf_unmount_quiet()
{
	local st n=0

	[ -n "$BCF_FS_PID" ] || return 0
	cd / || true
	while bcf_is_mounted "$BCF_MNT"; do
		fusermount3 -u "$BCF_MNT" 2>/dev/null && break
		n=$((n + 1))
		if [ $n -ge 50 ]; then
			fusermount3 -uz "$BCF_MNT"
			echo "$BCF_MNT stayed busy; lazily unmounted" >&2
			break
		fi
		sleep 0.2
	done
	if ! bcf_wait_for 30 bcf_pid_gone "$BCF_FS_PID"; then
		kill -KILL "$BCF_FS_PID" 2>/dev/null
		wait "$BCF_FS_PID" 2>/dev/null
		BCF_FS_PID=
		echo "bluecachefs did not exit after unmount" >&2
		return 1
	fi
	wait "$BCF_FS_PID"
	st=$?
	BCF_FS_PID=
	if [ $st -ne 0 ]; then
		echo "bluecachefs exited with status $st after unmount" >&2
		return 1
	fi
	return 0
}

bcf_umount()
{
	bcf_unmount_quiet || bcf_fail "unmount failed"
}

# bcf_remount: unmount and mount again (drops every kernel cache)
bcf_remount()
{
	bcf_umount
	bcf_mount "$@"
}

# bcf_dump_procs PID...: what each process is doing (for a failure that
# finds one still running): state, every thread's wait channel and kernel
# stack, and a backtrace when gdb is there
bcf_dump_procs()
{
	local pid t

	for pid in "$@"; do
		echo "--- process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
		grep -E '^(State|PPid)' "/proc/$pid/status" 2>/dev/null
		for t in /proc/"$pid"/task/*; do
			echo "thread ${t##*/} $(cat "$t/comm" 2>/dev/null)" \
				"wchan=$(cat "$t/wchan" 2>/dev/null)"
			cat "$t/stack" 2>/dev/null | head -8
		done
		command -v gdb > /dev/null &&
			timeout 20 gdb -p "$pid" -batch -ex 'thread apply all bt' \
				2>/dev/null | grep -E '^(#|Thread)' | head -80
	done >&2
}

# bcf_check_logs: print and count unexpected log lines
bcf_check_logs()
{
	local f bad=0 lines

	for f in "$BCF_TMP/fs.log" "$BCF_TMP/agent.log"; do
		[ -s "$f" ] || continue
		lines=$(grep -E 'error|Sanitizer|runtime error|SUMMARY:' "$f")
		if [ -n "$BCF_LOG_ALLOW" ] && [ -n "$lines" ]; then
			lines=$(printf '%s\n' "$lines" | grep -Ev "$BCF_LOG_ALLOW")
		fi
		if [ -n "$lines" ]; then
			echo "unexpected lines in $(basename "$f"):" >&2
			printf '%s\n' "$lines" | head -20 >&2
			bad=1
		fi
	done
	return $bad
}

bcf_cleanup()
{
	local rc=$?

	trap - EXIT
	cd / || true
	if [ -n "$BCF_FS_PID" ]; then
		bcf_unmount_quiet || { [ $rc -eq 0 ] && rc=1; }
	fi
	if [ -n "$BCF_MNT" ] && bcf_is_mounted "$BCF_MNT"; then
		fusermount3 -uz "$BCF_MNT" 2>/dev/null
	fi
	bcf_stop_agent || { [ $rc -eq 0 ] && rc=1; }
	# after the agents, the cluster they used; before rm -rf, which
	# must not walk into the CephFS
	if [ -n "$BCF_CEPH_DIR" ]; then
		bcf_ceph_fini || { [ $rc -eq 0 ] && rc=1; }
	fi
	if [ -n "$BCF_TMP" ] && [ -d "$BCF_TMP" ]; then
		if ! bcf_check_logs; then
			[ $rc -eq 0 ] || [ $rc -eq 77 ] && rc=1
		fi
		# a failure's test log shows what the daemon and agent said
		if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
			local f
			for f in "$BCF_TMP"/fs.log "$BCF_TMP"/agent.log; do
				[ -s "$f" ] || continue
				echo "---- last lines of ${f##*/}" >&2
				tail -n 40 "$f" >&2
			done
		fi
		if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -n "${BCF_KEEP:-}" ]; then
			echo "keeping $BCF_TMP" >&2
		else
			rm -rf "$BCF_TMP"
		fi
	fi
	exit $rc
}

# bcf_gen SEED BYTES: a reproducible pseudo-random byte stream on stdout
bcf_gen()
{
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -iter 1 -pass "pass:$1" \
		< /dev/zero 2>/dev/null | head -c "$2"
}

bcf_sha()
{
	sha256sum < "$1" | cut -d' ' -f1
}

# bcf_same_sha A B: fail unless files A and B have the same sha256
bcf_same_sha()
{
	local a b

	a=$(bcf_sha "$1") || bcf_fail "cannot read $1"
	b=$(bcf_sha "$2") || bcf_fail "cannot read $2"
	[ "$a" = "$b" ] || bcf_fail "sha256 differs: $1 ($a) vs $2 ($b)"
}

# bcf_eq WHAT EXPECTED GOT
bcf_eq()
{
	[ "$2" = "$3" ] || bcf_fail "$1: expected '$2', got '$3'"
}

# bcf_agent_pids: the agents serving the mount: the separately started one
# ($BCF_AGENT_PID) and the daemon's private one (a child of $BCF_FS_PID)
bcf_agent_pids()
{
	local c

	[ -n "$BCF_AGENT_PID" ] && echo "$BCF_AGENT_PID"
	[ -n "$BCF_FS_PID" ] || return 0
	for c in $(cat /proc/"$BCF_FS_PID"/task/*/children 2>/dev/null); do
		case $(tr '\0' '\n' < "/proc/$c/cmdline" 2>/dev/null |
		       head -n 1) in
		*bluecache-agent) echo "$c" ;;
		esac
	done
}

# bcf_running PID: the process exists and is not a zombie
bcf_running()
{
	local st

	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# bcf_alive [PID...]: the daemon and the given agents (by default those
# bcf_agent_pids finds now; pass the ones found right after bcf_mount to
# notice a private agent that died) still run; names each one that does
# not, and returns 1 then
bcf_alive()
{
	local p bad=0 pids

	if [ -n "$BCF_FS_PID" ] && ! bcf_running "$BCF_FS_PID"; then
		echo "bluecachefs ($BCF_FS_PID) is gone" >&2
		bad=1
	fi
	if [ $# -gt 0 ]; then
		pids="$*"
	else
		pids=$(bcf_agent_pids)
	fi
	for p in $pids; do
		if ! bcf_running "$p"; then
			echo "bluecache-agent ($p) is gone" >&2
			bad=1
		fi
	done
	return $bad
}

# bcf_mount_counted AGENT OPTS: mount AGENT on $BCF_MNT with -o OPTS and
# the metrics endpoint on a free loopback port (its number in
# BCF_METRICS_PORT), for a test that counts the requests the mount sends;
# skips when the agent does not tell of changes made elsewhere.
bcf_mount_counted()
{
	"$BCF_FS" "$1" "$BCF_MNT" -f -o "$2,metrics=127.0.0.1:0" \
		2>>"$BCF_TMP/fs.log" &
	BCF_FS_PID=$!
	bcf_wait_for 20 bcf_mount_up || bcf_fail "mount 1 did not come up"
	if grep -q 'does not tell of changes' "$BCF_TMP/fs.log"; then
		bcf_skip "this agent does not tell of changes made elsewhere"
	fi
	BCF_METRICS_PORT=$(sed -n \
		's|.*metrics on http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' \
		"$BCF_TMP/fs.log" | tail -1)
	[ -n "$BCF_METRICS_PORT" ] ||
		bcf_fail "mount 1 did not say where its metrics are"
}

# Extra mounts, for a test with several mounts of one agent.
# bcf_mount_extra NAME AGENT OPTS: mount AGENT on $BCF_TMP/NAME with -o OPTS
# (and -f), the daemon logging to $BCF_TMP/fs-NAME.log; its pid lands in
# BCF_EXTRA_PID[NAME].  The first call makes the EXIT trap continue every
# stopped extra daemon, unmount them all and check their logs (sanitizer
# reports in any; "error" lines, minus $BCF_LOG_ALLOW, in all but those
# named in $BCF_EXTRA_NOISY) before bcf_cleanup runs.  Returns 1 (with the
# log shown) when the mount does not come up within 20 s.
declare -A BCF_EXTRA_PID=()
BCF_EXTRA_NOISY=${BCF_EXTRA_NOISY:-}

bcf_mount_extra()
{
	local name=$1 agent=$2 opts=$3 mnt=$BCF_TMP/$1 pid

	if [ ${#BCF_EXTRA_PID[@]} -eq 0 ]; then
		trap bcf_cleanup_extra EXIT
	fi
	mkdir -p "$mnt" || bcf_hard "cannot make $mnt"
	"$BCF_FS" "$agent" "$mnt" -f -o "$opts" \
		2>>"$BCF_TMP/fs-$name.log" &
	pid=$!
	BCF_EXTRA_PID[$name]=$pid
	if ! bcf_wait_for 20 eval 'bcf_running '"$pid"' &&
	     bcf_is_mounted '"'$mnt'"; then
		tail -n 20 "$BCF_TMP/fs-$name.log" >&2
		echo "bluecachefs $agent $mnt -o $opts did not mount" >&2
		return 1
	fi
	return 0
}

# bcf_umount_extra NAME: continue, unmount and reap one extra daemon;
# returns 1 with a message when it hangs or exits with a non-zero status
bcf_umount_extra()
{
	local name=$1 mnt=$BCF_TMP/$1 pid=${BCF_EXTRA_PID[$1]:-} n=0 st

	[ -n "$pid" ] || return 0
	kill -CONT "$pid" 2>/dev/null
	cd / || true
	while bcf_is_mounted "$mnt"; do
		fusermount3 -u "$mnt" 2>/dev/null && break
		n=$((n + 1))
		if [ $n -ge 50 ]; then
			fusermount3 -uz "$mnt"
			echo "$mnt stayed busy; lazily unmounted" >&2
			break
		fi
		sleep 0.2
	done
	unset "BCF_EXTRA_PID[$name]"
	if ! bcf_wait_for 30 bcf_pid_gone "$pid"; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		echo "bluecachefs on $mnt did not exit after unmount" >&2
		return 1
	fi
	wait "$pid"
	st=$?
	if [ $st -ne 0 ]; then
		echo "bluecachefs on $mnt exited with status $st" >&2
		return 1
	fi
	return 0
}

# bcf_check_extra_logs: as bcf_check_logs, for the extra mounts' logs
bcf_check_extra_logs()
{
	local f name bad=0 lines pat

	for f in "$BCF_TMP"/fs-*.log; do
		[ -s "$f" ] || continue
		name=${f##*/fs-}
		name=${name%.log}
		pat='error|Sanitizer|runtime error|SUMMARY:'
		case " $BCF_EXTRA_NOISY " in
		*" $name "*) pat='Sanitizer|runtime error|SUMMARY:' ;;
		esac
		lines=$(grep -E "$pat" "$f")
		if [ -n "$BCF_LOG_ALLOW" ] && [ -n "$lines" ]; then
			lines=$(printf '%s\n' "$lines" |
				grep -Ev "$BCF_LOG_ALLOW")
		fi
		if [ -n "$lines" ]; then
			echo "unexpected lines in ${f##*/}:" >&2
			printf '%s\n' "$lines" | head -20 >&2
			bad=1
		fi
	done
	return $bad
}

bcf_cleanup_extra()
{
	local rc=$? name

	for name in "${!BCF_EXTRA_PID[@]}"; do
		kill -CONT "${BCF_EXTRA_PID[$name]}" 2>/dev/null
	done
	for name in "${!BCF_EXTRA_PID[@]}"; do
		bcf_umount_extra "$name" || { [ $rc -eq 0 ] && rc=1; }
	done
	if [ -n "$BCF_TMP" ] && [ -d "$BCF_TMP" ] &&
	   ! bcf_check_extra_logs; then
		[ $rc -eq 0 ] || [ $rc -eq 77 ] && rc=1
	fi
	(exit $rc)
	bcf_cleanup
}

# bcf_mount_at AGENT OPTS: mount AGENT (any address the daemon takes) on
# $BCF_MNT with -o OPTS, the daemon in the foreground logging to fs.log,
# as bcf_mount does for the agents it starts; sets BCF_FS_PID, so the
# EXIT trap unmounts it.  For a test that runs its own agent.
bcf_mount_at()
{
	"$BCF_FS" "$1" "$BCF_MNT" -f -o "$2" 2>>"$BCF_TMP/fs.log" &
	BCF_FS_PID=$!
	if ! bcf_wait_for 20 bcf_mount_up; then
		tail -n 30 "$BCF_TMP/fs.log" >&2
		bcf_fail "bluecachefs $1 $BCF_MNT -o $2 did not mount"
	fi
}

# bcf_fd_count PID: how many descriptors PID holds now (empty when it
# is gone)
bcf_fd_count()
{
	local n

	n=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
	bcf_running "$1" && echo "$n"
}

# bcf_sleep_ms LO HI: sleep a random time between LO and HI milliseconds
bcf_sleep_ms()
{
	local ms=$(($1 + RANDOM % ($2 - $1 + 1)))

	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

# bcf_kill_tree PID: SIGKILL PID and every descendant it has now
# (deepest first), for the EXIT trap to end a test's own workloads
bcf_kill_tree()
{
	local c

	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		bcf_kill_tree "$c"
	done
	kill -KILL "$1" 2>/dev/null
}

# bcf_agent_has OPTION: the agent's --help lists OPTION
bcf_agent_has()
{
	"$BCF_AGENT" --help 2>&1 | grep -q -e "$1"
}

# bcf_fs_has OPTION: the daemon's --help lists OPTION
bcf_fs_has()
{
	"$BCF_FS" --help 2>&1 | grep -q -e "$1"
}

# bcf_pauses [LOG]: the seconds of every "agent connection restored after
# S s" line in LOG (fs.log), one a line
bcf_pauses()
{
	sed -n 's/.*agent connection restored after \([0-9.]*\) s.*/\1/p' \
		"${1:-$BCF_TMP/fs.log}"
}

# bcf_pause_stats [LOG]: "count N p50 S p99 S max S" of bcf_pauses
# (nearest-rank percentiles); "count 0" when there are none
bcf_pause_stats()
{
	bcf_pauses "$@" | sort -g | awk '
	{ v[++n] = $1 }
	function rank(p,  r) { r = int(p * n + 0.999999); return v[r < 1 ? 1 : r] }
	END {
		if (!n) { print "count 0"; exit }
		printf "count %d p50 %.3f p99 %.3f max %.3f\n", n,
			rank(0.5), rank(0.99), v[n]
	}'
}
