#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# truncrace-cephfs.sh - a file truncated while the Ceph client is still
# writing bytes past the new end keeps its size when the agent dies.
#
# An OSD write that a CephFS client sends before a truncate but that
# reaches the object after the MDS cut it ("old truncate_seq" in the OSD's
# log) is clipped to nothing, and a write of nothing past an object's end
# extends the object to its offset.  The MDS's size does not change, so
# nobody sees it, until the client dies: the MDS then recovers the sizes
# of the files it was writing from their objects, and the file grows back
# to where that write began.  The agent must make the cluster have every
# write of a file before it truncates it.
#
# The OSD here holds half the messages of a client back for up to
# $TR_DELAY_MS ms, so that the write-back of the agent's write log is
# still on its way when the truncates come.  $TR_FILES files, each open
# for writing; $TR_CYCLES times: $TR_ROUNDS rounds of a write past the end
# of each, a pause about as long as the log's flush interval, and a
# truncate of each followed by a write below its new end; then the agent
# gets SIGKILL and is started again (its Ceph session is reset, and the
# MDS recovers the sizes) and every file must have the size, and the
# bytes, it was left with.  Right before the SIGKILL, a second after the
# last write, each file grows by a fallocate: that size must stay too
# (the Ceph client keeps a larger size to itself for a while).
# BCF_TRUNCRACE_CYCLES sets the cycles.
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-tcp}
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'connection (lost|restored)|lost|closed'}
TR_DELAY_MS=300
TR_FILES=16
TR_ROUNDS=2
TR_CYCLES=${BCF_TRUNCRACE_CYCLES:-3}
OSD_CONF="ms inject delay type = client
ms inject delay max = $(awk "BEGIN { print $TR_DELAY_MS / 1000 }")
ms inject delay probability = 0.5"
export OSD_CONF
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "truncrace runs on a cephfs store"
bcf_init

mkdir -p "$BCF_TMP/state" || bcf_hard "cannot make $BCF_TMP/state"
bcf_listen_for_transport
agent_args+=(--state-dir "$BCF_TMP/state")
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
bcf_mount -o reconnect_timeout=120

# the workload: writes and truncates, then it waits (files open) for the
# agent to be killed and started again, checks every file; $TR_CYCLES
# times
python3 - "$BCF_MNT" "$BCF_TMP" "$TR_FILES" "$TR_ROUNDS" "$TR_CYCLES" \
	> "$BCF_TMP/work.log" 2>&1 <<'PY' &
import ctypes, os, random, sys, time
mnt, tmp = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                           ctypes.c_long]
nfiles, rounds, cycles = (int(a) for a in sys.argv[3:6])
rng = random.Random(4242)
MIB = 1 << 20
fds, want = [], []
for i in range(nfiles):
    data = bytearray(rng.randbytes(MIB))
    fd = os.open(f"{mnt}/f{i}", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
    fds.append(fd)
    want.append(data)
bad = 0
for c in range(cycles):
    for r in range(rounds):
        # past the end: the write log takes them, the cluster a moment
        # later, while the truncates below come one after another
        for i, fd in enumerate(fds):
            off = 2 * MIB + rng.randrange(MIB)
            b = rng.randbytes(64 << 10)
            os.pwrite(fd, b, off)
            if len(want[i]) < off:
                want[i].extend(bytes(off - len(want[i])))
            want[i][off:off + len(b)] = b
        time.sleep(0.05 + rng.random() * 0.1)
        for i, fd in enumerate(fds):
            size = MIB // 2 + rng.randrange(MIB // 2)
            os.ftruncate(fd, size)
            del want[i][size:]
            # below the new end: the cluster takes it with the new
            # truncate sequence, and an old write is clipped after it
            off = rng.randrange(size - 4096)
            b = rng.randbytes(4096)
            os.pwrite(fd, b, off)
            want[i][off:off + 4096] = b
    # whatever the cluster still takes lands; then each file grows by a
    # fallocate, the last thing before the agent dies
    time.sleep(1)
    for i, fd in enumerate(fds):
        grow = 4096 + rng.randrange(64 << 10)
        if libc.fallocate(fd, 0, ctypes.c_long(len(want[i])),
                          ctypes.c_long(grow)) != 0:
            print(f"fallocate f{i}: {os.strerror(ctypes.get_errno())}",
                  flush=True)
            sys.exit(1)
        want[i].extend(bytes(grow))
    print("cycle", c, "written", flush=True)
    open(f"{tmp}/written{c}", "w").close()
    while not os.path.exists(f"{tmp}/restarted{c}"):
        time.sleep(0.05)
    for i, fd in enumerate(fds):
        st = os.fstat(fd).st_size
        got = os.pread(fd, 4 * MIB, 0)
        if st != len(want[i]) or got != bytes(want[i]):
            print(f"cycle {c}: f{i}: size {st}, expected {len(want[i])}" +
                  ("" if got[:len(want[i])] == want[i]
                   else "; the bytes differ"), flush=True)
            bad += 1
print("checked", nfiles, "files", cycles, "times,", bad, "bad", flush=True)
for fd in fds:
    os.close(fd)
sys.exit(1 if bad else 0)
PY
work=$!
for c in $(seq 0 $((TR_CYCLES - 1))); do
	bcf_wait_for 120 test -e "$BCF_TMP/written$c" || {
		cat "$BCF_TMP/work.log" >&2
		bcf_fail "cycle $c: the writes and truncates did not end" \
			"within 120 s"
	}
	kill -KILL "$BCF_AGENT_PID"
	bcf_wait_for 30 bcf_pid_gone "$BCF_AGENT_PID" ||
		bcf_fail "the agent did not go on SIGKILL"
	wait "$BCF_AGENT_PID" 2>/dev/null
	BCF_AGENT_PID=
	bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
		bcf_fail "bluecache-agent did not start again"
	touch "$BCF_TMP/restarted$c"
done
wait "$work"
rc=$?
cat "$BCF_TMP/work.log"
[ $rc -eq 0 ] || bcf_fail "a file truncated before the agent died has" \
	"another size or other bytes after its restart"
# what the MDS now says is what the CephFS says
for i in $(seq 0 $((TR_FILES - 1))); do
	a=$(stat -c %s "$BCF_MNT/f$i") && b=$(stat -c %s "$BCF_BACK/f$i") ||
		bcf_fail "stat f$i failed"
	[ "$a" = "$b" ] || bcf_fail "f$i: $a bytes on the mount, $b in the CephFS"
done
echo "$TR_FILES files truncated while written kept their sizes across" \
	"$TR_CYCLES agent restarts"
bcf_umount
