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
#
# Then, a cluster that stalls is not a dead agent: on a mount with
# -o timeout=1, a create waiting for the MDS and an fsync waiting for the
# OSD, each stopped for 4 s, succeed (the agent answers the daemon's PINGs
# meanwhile: -o busy_timeout) rather than fail with EIO after a second;
# so do 40 creates at once, more than the agent's session may have out
# (the PING then waits unread behind them, and the agent's NOTIFY BUSY
# tells the daemon it is at work).
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-tcp}
# the line the stop says, the create that waited on the stopped MDS, and
# the agent's listing of the directories the host holds while it stalls
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'did not finish stopping within|made-while-stopped|sweep: listing of inode'}
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "mdsstop runs on a cephfs store"
bcf_init

bcf_listen_for_transport
agent_args+=(--store-timeout 5)
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"

mds=$(cat "$BCF_CEPH_DIR/run/mds.a.pid") || bcf_hard "no MDS pid"
osd=$(cat "$BCF_CEPH_DIR/run/osd.0.pid") || bcf_hard "no OSD pid"

# ms_stalled WHAT PID: WHAT (create or fsync, of $BCF_MNT/slow-*; creates:
# 40 at once in directories of their own, more than the agent's session
# has store calls out) while PID is stopped for 4 s; prints "ok MS" or the
# errno's name and MS.  WHAT starts once PID is stopped (fsync: the write
# too, so that none of its bytes can have reached the cluster before).
ms_stalled()
{
	local what=$1 pid=$2

	python3 - "$what" "$BCF_MNT" "$BCF_TMP" > "$BCF_TMP/out.$what" <<'PY' &
import errno, os, sys, threading, time
what, mnt, tmp = sys.argv[1:4]
errs = []
def create(name):
    try:
        os.close(os.open(mnt + "/" + name, os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError as e:
        errs.append(e.errno)
ready = tmp + "/ready." + what
if what == "creates":
    # a directory each: the kernel makes one name at a time in a directory
    for i in range(40):
        os.mkdir(mnt + "/slow-d%d" % i)
if what == "fsync":
    data = os.urandom(1 << 20)
    with open(tmp + "/slow-fsync.src", "wb") as f:
        f.write(data)
    fd = os.open(mnt + "/slow-fsync", os.O_WRONLY | os.O_CREAT, 0o644)
open(ready, "w").close()
stopped = tmp + "/stopped." + what
t0 = time.monotonic()
while not os.path.exists(stopped) and time.monotonic() - t0 < 30:
    time.sleep(0.01)
t0 = time.monotonic()
try:
    if what == "fsync":
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
    elif what == "create":
        create("slow-create")
    else:
        ts = [threading.Thread(target=create, args=("slow-d%d/f" % i,))
              for i in range(40)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    if errs:
        raise OSError(errs[0], "%d of the creates failed" % len(errs))
    r = "ok"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
print(r, int((time.monotonic() - t0) * 1000))
PY
	local py=$!
	bcf_wait_for 30 test -e "$BCF_TMP/ready.$what" ||
		bcf_fail "$what: the writer did not start"
	kill -STOP "$pid" || bcf_hard "cannot stop $pid"
	: > "$BCF_TMP/stopped.$what"
	sleep 4
	kill -CONT "$pid"
	wait "$py"
	cat "$BCF_TMP/out.$what"
}

bcf_mount -o reconnect_timeout=120

head -c $((3 << 20)) /dev/urandom > "$BCF_TMP/src"
cp "$BCF_TMP/src" "$BCF_MNT/f" || bcf_fail "cp to the mount failed"

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

bcf_mount -o timeout=1,reconnect_timeout=120
for step in "fsync $osd OSD" "create $mds MDS" "creates $mds MDS"; do
	set -- $step
	read -r got ms <<< "$(ms_stalled "$1" "$2")"
	echo "$1 with the $3 stopped for 4 s: $got after $ms ms"
	bcf_eq "$1 with the $3 stopped (timeout=1)" ok "$got"
	[ "$ms" -ge 2000 ] || bcf_hard "$1 did not wait for the stopped $3" \
		"($ms ms): nothing checked"
done
cmp -s "$BCF_TMP/slow-fsync.src" "$BCF_MNT/slow-fsync" ||
	bcf_fail "the file fsynced while the OSD was stopped is not whole"
[ -f "$BCF_MNT/slow-create" ] && [ ! -s "$BCF_MNT/slow-create" ] ||
	bcf_fail "the file created while the MDS was stopped is not there"
n=$(find "$BCF_MNT" -mindepth 2 -maxdepth 2 -path '*/slow-d*/f' -type f |
	wc -l)
bcf_eq "files of the 40 creates while the MDS was stopped" 40 "$n"
bcf_umount
bcf_check_logs
