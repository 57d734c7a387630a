#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# evict-cephfs.sh - the cluster evicts the agent's Ceph client (as it
# does a client that stopped answering for too long, or an operator with
# `client evict`): every call of that client now fails with EBLOCKLISTED.
# The agent says so in one line and exits 75 at once, never answering a
# host with that error; started again (as its service manager does), it
# replays its write log and the mount carries on: a file written just
# before the eviction is whole through the mount and in the CephFS, a
# read made while the agent was away is answered, new files are written.
# Then the MDS evicts it on its own, the agent stopped for longer than
# the cluster's session_autoclose: the same once it runs again.
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-tcp}
# the agent's line on its eviction
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'fenced this agent off'}
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "evict runs on a cephfs store"
bcf_init

bcf_listen_for_transport
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
bcf_mount -o reconnect_timeout=120

head -c $((3 << 20)) /dev/urandom > "$BCF_TMP/src"
cp "$BCF_TMP/src" "$BCF_MNT/f" || bcf_fail "cp to the mount failed"
head -c 5000 /dev/urandom > "$BCF_TMP/small"
# written right before the eviction: it may be in the write log only
cp "$BCF_TMP/small" "$BCF_MNT/g" || bcf_fail "cp to the mount failed"

# agent_session: the agent's session on the MDS, by its pid (fails when
# the MDS's list cannot be read)
agent_session()
{
	bcf_ceph_session "$BCF_AGENT_PID"
}
id=$(agent_session) || id=
[ -n "$id" ] || bcf_hard "the MDS lists no session of the agent" \
	"(pid $BCF_AGENT_PID)"
ceph tell mds.a client evict id="$id" >/dev/null 2>&1 ||
	bcf_hard "ceph tell mds.a client evict id=$id failed"
echo "evicted the agent's client $id"

# a call of the host's while the agent is fenced off, then away
(cat "$BCF_MNT/f" > "$BCF_TMP/read-meanwhile") 2> "$BCF_TMP/read.err" &
reader=$!

bcf_wait_for 30 bcf_pid_gone "$BCF_AGENT_PID" ||
	bcf_fail "the agent did not exit within 30 s of its eviction"
wait "$BCF_AGENT_PID"
rc=$?
BCF_AGENT_PID=
[ "$rc" -eq 75 ] || bcf_fail "the agent exited $rc after its eviction, not 75"
grep -q "fenced this agent off" "$BCF_TMP/agent.log" ||
	bcf_fail "the agent did not say why it exited"
echo "the agent exited 75 and said why"

bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not start again after its eviction"
# ESHUTDOWN, were the agent to answer with it
wait "$reader" || bcf_fail "a read made meanwhile failed:" \
	"$(cat "$BCF_TMP/read.err")"
cmp -s "$BCF_TMP/src" "$BCF_TMP/read-meanwhile" ||
	bcf_fail "a read made meanwhile is not the file"
cmp -s "$BCF_TMP/src" "$BCF_MNT/f" ||
	bcf_fail "the file written before the eviction is not whole"
cmp -s "$BCF_TMP/small" "$BCF_MNT/g" ||
	bcf_fail "the file written just before the eviction is not whole"
bcf_wait_for 30 cmp -s "$BCF_TMP/small" "$BCF_BACK/g" ||
	bcf_fail "the file written just before the eviction is not whole" \
		"in the CephFS"
cp "$BCF_TMP/small" "$BCF_MNT/h" && cmp -s "$BCF_TMP/small" "$BCF_MNT/h" ||
	bcf_fail "a file written after the restart is not whole"
echo "the mount carried on with the agent started again; nothing lost"

# The same when the MDS evicts the agent's client on its own: the agent
# stopped (a DPU paused, a debugger) for longer than session_autoclose
# (30 s, the least the cluster takes); once it runs again, its calls fail
# with EBLOCKLISTED and it exits 75 as above, not waiting on the cluster.
ceph fs set cephfs session_timeout 30 >/dev/null 2>&1 &&
	ceph fs set cephfs session_autoclose 30 >/dev/null 2>&1 ||
	bcf_hard "the cluster takes no session_timeout/session_autoclose of 30 s"
id=$(agent_session) || id=
[ -n "$id" ] || bcf_hard "the MDS lists no session of the restarted agent"
kill -STOP "$BCF_AGENT_PID"
# gone: the MDS lists its sessions, and not the stopped agent's
gone()
{
	local s
	s=$(agent_session) || return 1
	[ -z "$s" ]
}
# (the MDS looks at its sessions every few seconds: 30 s stale, 30 more)
t0=$SECONDS
until gone; do
	[ $((SECONDS - t0)) -lt 120 ] || {
		kill -CONT "$BCF_AGENT_PID"
		bcf_fail "the MDS kept the stopped agent's session for 120 s"
	}
	sleep 2
done
echo "the MDS evicted the stopped agent's client $id"
kill -CONT "$BCF_AGENT_PID"
cat "$BCF_MNT/h" > "$BCF_TMP/read-after" 2> "$BCF_TMP/read.err" &
reader=$!
pid=$BCF_AGENT_PID
bcf_wait_for 30 bcf_pid_gone "$pid" ||
	bcf_fail "the agent did not exit within 30 s of running again" \
		"after its eviction"
wait "$pid"
rc=$?
BCF_AGENT_PID=
[ "$rc" -eq 75 ] ||
	bcf_fail "the agent exited $rc after its eviction on a timeout, not 75"
echo "the agent evicted on a timeout exited 75"
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not start again after its eviction"
wait "$reader" || bcf_fail "a read made meanwhile failed:" \
	"$(cat "$BCF_TMP/read.err")"
cmp -s "$BCF_TMP/small" "$BCF_TMP/read-after" ||
	bcf_fail "a read made meanwhile is not the file"
cp "$BCF_TMP/src" "$BCF_MNT/i" && cmp -s "$BCF_TMP/src" "$BCF_MNT/i" ||
	bcf_fail "a file written after the second restart is not whole"
echo "the mount carried on again"
bcf_umount
bcf_check_logs
