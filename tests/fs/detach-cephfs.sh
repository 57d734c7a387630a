#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# detach-cephfs.sh - bluecache-agent on a cephfs store, detached (started
# without --foreground, as a user starts it from a shell or an init
# script of the forking kind): the Ceph client's threads must be the
# detached process's. The MDS lists a session of the detached agent's
# pid; a mount of it lists, writes and reads back; what it wrote is in
# the CephFS; and the agent stops on SIGTERM.
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-shm}
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "detach runs on a cephfs store"
bcf_init

sock=$BCF_TMP/agent.sock
# the parent returns once the detached agent is ready
timeout 60 "$BCF_AGENT" --store "$BCF_STORE_SPEC" --listen "unix:$sock" \
	--log-file "$BCF_TMP/agent.log" --log-level info \
	>"$BCF_TMP/start.out" 2>&1
rc=$?
[ $rc -eq 0 ] || bcf_fail "the detached agent did not start (exit $rc):" \
	"$(cat "$BCF_TMP/start.out")"
BCF_AGENT_PID=$(pgrep -n -f -- "--listen unix:$sock") ||
	bcf_hard "cannot find the detached agent's pid"
echo "the detached agent runs as pid $BCF_AGENT_PID"

[ -n "$(bcf_ceph_session "$BCF_AGENT_PID")" ] ||
	bcf_fail "the MDS lists no session of the detached agent" \
		"(pid $BCF_AGENT_PID): its Ceph client stayed with the parent"

"$BCF_FS" "unix:$sock" "$BCF_MNT" -f -o transport=shm \
	2>>"$BCF_TMP/fs.log" &
BCF_FS_PID=$!
bcf_wait_for 20 bcf_mount_up || bcf_fail "the mount did not come up"

timeout 30 ls -la "$BCF_MNT" >"$BCF_TMP/ls.out" 2>&1 ||
	bcf_fail "ls of the mount failed: $(cat "$BCF_TMP/ls.out")"
head -c $((1 << 20)) /dev/urandom >"$BCF_TMP/src"
timeout 30 cp "$BCF_TMP/src" "$BCF_MNT/f" ||
	bcf_fail "cp to the mount failed"
timeout 30 mkdir "$BCF_MNT/d" || bcf_fail "mkdir on the mount failed"
echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
timeout 30 cmp "$BCF_TMP/src" "$BCF_MNT/f" ||
	bcf_fail "the file read back through the mount differs"
bcf_wait_for 30 cmp -s "$BCF_TMP/src" "$BCF_BACK/f" ||
	bcf_fail "the file is not whole in the CephFS"
[ -d "$BCF_BACK/d" ] || bcf_fail "the directory is not in the CephFS"
echo "the detached agent's mount lists, writes and reads back"

bcf_unmount_quiet || bcf_fail "the mount did not come down"
kill "$BCF_AGENT_PID"
bcf_wait_for 30 bcf_pid_gone "$BCF_AGENT_PID" ||
	bcf_fail "the detached agent did not stop on SIGTERM"
BCF_AGENT_PID=
grep -q 'summary:' "$BCF_TMP/agent.log" ||
	bcf_fail "the detached agent logged no summary"
echo "the detached agent stopped on SIGTERM"
