#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# sweeprace-cephfs.sh - a listing of a directory the store's sweep read
# before a change of our own is never taken for another client's.  The
# cephfs store lists every held directory and publishes what changed
# there; a name a session made meanwhile, which a session's lookup has
# since put into the remembered listing, is missing from that older
# listing, and was published as a DELETE of a live directory (and at the
# next sweep as a new ENTRY).  The agent's summary must count no name
# published by the sweep, and every directory must stay usable.
# Then, with one mount: a name another Ceph client makes in a directory
# this agent's mount is filling with creates is told to the mount once
# it stops, and the mount's own writes are not told to it as news: not
# the files' new sizes, nor what they do to the directories above (a
# CephFS directory's size is the bytes under it, and its times and link
# count follow its names seconds late).  A chmod of that directory by
# the other client right after is told all the same.
#
# The agent waits BLUECACHE_CEPH_SWEEP_PAUSE_MS between reading a held
# object (a directory's listing, a file's attributes) and comparing it,
# so that most changes fall in between.  First mount 1 writes a file
# again and again: attributes the sweep read before one of those writes
# must not be kept as what it saw last (the next sweep then told the
# mount of its own write, and it dropped the file's pages).  Then two
# mounts of one agent, both holding a directory: mount 1 makes a
# directory in it, mount 2 looks it up,
# and after the sweeps mount 1 must still create in it, stat it and list
# it, and so must mount 2.  Eight rounds.
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-tcp}
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "sweeprace runs on a cephfs store"
bcf_init
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"

bcf_listen_for_transport
BLUECACHE_CEPH_SWEEP_PAUSE_MS=600 \
	bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
m1=$BCF_MNT
m2=$BCF_TMP/m2
bcf_mount "$listen" "$opts"
bcf_mount_extra m2 "$listen" "$opts" || bcf_fail "mount 2 did not come up"

PYTHONDONTWRITEBYTECODE=1 timeout 300 python3 - "$m1" "$m2" <<'PY' ||
import os, sys, time
m1, m2 = sys.argv[1] + "/top", sys.argv[2] + "/top"
bad = 0
# a file mount 1 goes on writing while the sweep waits between reading
# its attributes and comparing them: the last write falls in such a
# wait, and the attributes read before it must not be kept as what the
# sweep saw last, or the next sweep tells mount 1 of its own write
f = os.path.join(sys.argv[1], "written")
with open(f, "wb") as fh:
    fh.write(b"w")
time.sleep(1.5)
for i in range(20):
    with open(f, "r+b") as fh:
        fh.write(b"%02d" % i)
    time.sleep(0.1)
# a sweep's pause (0.6 s) plus two sweeps
time.sleep(1.5)
# a directory both mounts hold, which the store's sweep lists
os.mkdir(m1)
os.listdir(m1)
os.listdir(m2)
time.sleep(1.5)
for r in range(8):
    name = "race%d" % r
    os.mkdir(os.path.join(m1, name))
    # mount 2's lookup puts the name into the store's remembered listing
    os.stat(os.path.join(m2, name))
    # a sweep's pause (0.6 s) plus two sweeps
    time.sleep(1.5)
    for m in (m1, m2):
        d = os.path.join(m, name)
        try:
            fd = os.open(os.path.join(d, "f-%s" % (m == m1)),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            os.stat(d)
            if name not in os.listdir(m):
                raise OSError("not listed")
        except OSError as e:
            print("round %d: %s: %s" % (r, d, e))
            bad += 1
print("%d of 16 checks failed" % bad)
sys.exit(1 if bad else 0)
PY
	bcf_fail "a directory made through a mount was taken for removed"

# every change was ours: the sweep told of none (the agent's summary),
# not the directories' times the MDS moved seconds after our names
bcf_umount_extra m2 || bcf_fail "mount 2 did not unmount"
bcf_umount
bcf_stop_agent || bcf_fail "the agent did not stop"
line=$(grep 'changes by other clients' "$BCF_TMP/agent.log")
echo "$line"
case $line in
*" 0 from the sweep (0 of names)"*)
	;;
*)
	bcf_fail "the sweep published changes our own mounts made"
	;;
esac
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not start again"
bcf_mount "$listen" "$opts"
# A name another Ceph client makes in a directory mount 1 is filling (a
# stream of creates: the sweep leaves it alone meanwhile) is told once
# the stream stops.  Mount 1 made the directory, so without that news it
# answers the name's lookup itself (ENOENT) for entry_timeout (60 s).
PYTHONDONTWRITEBYTECODE=1 timeout 300 python3 - "$m1" "$BCF_BACK" <<'PY' ||
import os, sys, threading, time
m1, back = sys.argv[1], sys.argv[2]
d = os.path.join(m1, "stream")
os.mkdir(d)
done = threading.Event()
def stream():
    for i in range(2000):
        fd = os.open(os.path.join(d, "s%05d" % i),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"s" * 4096)
        os.close(fd)
    done.set()
t = threading.Thread(target=stream)
t.start()
time.sleep(0.5)
# through the CephFS's other client, while the stream goes on
with open(os.path.join(back, "stream", "foreign"), "wb") as f:
    f.write(b"f")
if done.is_set():
    print("the stream ended before the other client's create: too fast")
t.join()
t0 = time.monotonic()
while True:
    try:
        os.stat(os.path.join(d, "foreign"))
        break
    except FileNotFoundError:
        if time.monotonic() - t0 > 15:
            print("mount 1 does not see the other client's name 15 s "
                  "after its own stream stopped")
            sys.exit(1)
        time.sleep(0.1)
print("the other client's name seen %.1f s after the stream" %
      (time.monotonic() - t0))
# its mode: the mount's own name changes there are seconds old
os.chmod(os.path.join(back, "stream"), 0o700)
t0 = time.monotonic()
while os.stat(d).st_mode & 0o777 != 0o700:
    if time.monotonic() - t0 > 15:
        print("mount 1 does not see the other client's chmod of the "
              "directory 15 s after it")
        sys.exit(1)
    time.sleep(0.1)
print("the other client's chmod seen %.1f s after it" %
      (time.monotonic() - t0))
PY
	bcf_fail "another client's change in a directory being filled stays hidden"
# the stream's own 2000 writes were not taken for another client's (one
# INODE event each to the writing mount, which dropped its cached pages;
# or one for each directory above, each sweep): the other client's name
# and chmod, and at most one more
bcf_umount
bcf_stop_agent || bcf_fail "the agent did not stop"
line=$(grep 'changes by other clients' "$BCF_TMP/agent.log" | tail -n 1)
echo "$line"
n=$(echo "$line" | sed -n 's/.* \([0-9]*\) from the sweep.*/\1/p')
[ -n "$n" ] && [ "$n" -le 3 ] ||
	bcf_fail "the sweep took the mount's own writes for news ($n events)"
echo PASS
