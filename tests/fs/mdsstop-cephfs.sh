#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# mdsstop-cephfs.sh - an agent asked to stop while its MDS does not
# answer (stopped with SIGSTOP) stops within its drain and --store-timeout,
# saying so in one line, and loses nothing it answered: a file the mount
# wrote before the MDS stopped is whole through the mount and through
# another Ceph client once the MDS is back and the agent started again.
# A create is left waiting on the stopped MDS meanwhile, so that a host's
# call is inside the Ceph client when the stop comes.
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-tcp}
# the line the stop says, and the create that waited on the stopped MDS
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'did not finish stopping within|made-while-stopped'}
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "mdsstop runs on a cephfs store"
bcf_init

bcf_listen_for_transport
agent_args+=(--store-timeout 5)
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
bcf_mount -o reconnect_timeout=120

head -c $((3 << 20)) /dev/urandom > "$BCF_TMP/src"
cp "$BCF_TMP/src" "$BCF_MNT/f" || bcf_fail "cp to the mount failed"

mds=$(cat "$BCF_CEPH_DIR/run/mds.a.pid") || bcf_hard "no MDS pid"
kill -STOP "$mds" || bcf_hard "cannot stop the MDS"
timeout 200 touch "$BCF_MNT/made-while-stopped" 2>/dev/null &
toucher=$!
sleep 1

t0=$(date +%s)
kill -TERM "$BCF_AGENT_PID"
if ! bcf_wait_for 60 bcf_pid_gone "$BCF_AGENT_PID"; then
	kill -CONT "$mds"
	bcf_fail "the agent did not stop in 60 s with its MDS stopped" \
		"(drain 10 s, --store-timeout 5)"
fi
wait "$BCF_AGENT_PID"
rc=$?
t=$(($(date +%s) - t0))
BCF_AGENT_PID=
kill -CONT "$mds"
echo "the agent stopped in $t s (exit $rc) with its MDS stopped"
[ "$t" -le 30 ] || bcf_fail "the agent took $t s to stop"
grep -q "did not finish stopping within" "$BCF_TMP/agent.log" ||
	bcf_fail "the agent did not say why it stopped without its store"

bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not start again"
wait "$toucher" 2>/dev/null
bcf_wait_for 60 cmp -s "$BCF_TMP/src" "$BCF_MNT/f" ||
	bcf_fail "the file the mount wrote is not whole through the mount"
bcf_wait_for 60 cmp -s "$BCF_TMP/src" "$BCF_BACK/f" ||
	bcf_fail "the file the mount wrote is not whole in the CephFS"
echo "the file written before the MDS stopped is whole"
bcf_umount
bcf_check_logs
