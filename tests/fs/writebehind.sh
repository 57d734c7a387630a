#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# writebehind.sh - a file the mount creates gathers its writes (fs/wb.c):
#  - tests/fs/wb-check.py, on a plain directory and then on the mount:
#    before close, stat, a listing, a second descriptor, mmap, ftruncate,
#    writes out of order and O_APPEND see what a local file system shows;
#    after close the content is exact;
#  - files written the way tar writes them (10 KiB records) cost the agent
#    one BATCH_PUSH each, not one per record (its shutdown summary);
#  - a second mount of the same agent sees the data and the mtime this
#    mount sees once the file is closed, even after a listing here handed
#    the kernel the file's attributes while its writes were gathered;
#  - a file written slowly and kept open (a log, a metrics file) reaches
#    the agent within a few seconds of each write, not at its close: the
#    store's own view of it ($BCF_BACK) has each line soon;
#  - posix store: a write the agent cannot make (its directory is full)
#    fails write(2) or close(2), never silently.
. "$(dirname "$0")/lib.sh"
bcf_init
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"

case $BCF_TRANSPORT in
shm)
	bcf_start_agent "$BCF_BACK" "unix:$BCF_TMP/agent.sock" ||
		bcf_fail "bluecache-agent did not become ready"
	agent=unix:$BCF_TMP/agent.sock
	opts=transport=shm
	;;
*)
	bcf_agent_tcp
	agent=tcp://127.0.0.1:$BCF_PORT
	opts=transport=$BCF_TRANSPORT,secret_file=$BCF_SECRET
	;;
esac
"$BCF_FS" "$agent" "$BCF_MNT" -f -o "$opts" 2>>"$BCF_TMP/fs.log" &
BCF_FS_PID=$!
bcf_wait_for 20 bcf_mount_up || bcf_fail "the mount did not come up"
bcf_mount_extra m2 "$agent" "$opts" || bcf_fail "mount 2 did not come up"
m=$BCF_MNT
m2=$BCF_TMP/m2

mkdir "$BCF_TMP/plain"
python3 "$top_srcdir/tests/fs/wb-check.py" "$BCF_TMP/plain" ||
	bcf_hard "wb-check.py fails on a plain directory"
python3 "$top_srcdir/tests/fs/wb-check.py" "$m" ||
	bcf_fail "wb-check.py failed on the mount"

# 40 files of 200 KiB in 10 KiB records, as tar writes them
mkdir "$m/tar"
bcf_gen wb $((200 * 1024)) > "$BCF_TMP/src"
for i in $(seq 40); do
	dd if="$BCF_TMP/src" of="$m/tar/f$i" bs=10k status=none ||
		bcf_fail "dd to tar/f$i failed"
done
for i in 1 17 40; do
	bcf_same_sha "$BCF_TMP/src" "$m2/tar/f$i"
done

# attributes handed out while gathering, then the close pushes: the
# mtime is the agent's, here and on the second mount
python3 - "$m/late" <<'EOF' || bcf_fail "writing late failed"
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"x" * 10240)
os.listdir(os.path.dirname(sys.argv[1]))
os.stat(sys.argv[1])
time.sleep(1.2)
os.write(fd, b"y" * 10240)
os.close(fd)
EOF
sleep 0.3
bcf_eq "late: mtime here and on mount 2" "$(stat -c '%s %Y' "$m2/late")" \
	"$(stat -c '%s %Y' "$m/late")"

# a slow writer keeps its file open: each line reaches the store soon
python3 - "$m/slow" "$BCF_BACK/slow" <<'EOF' ||
import os, sys, time
# a write after a pause goes through while the mount asks the agent
# whether the store has room to gather: ask first
with open(sys.argv[1] + ".first", "wb") as f:
    f.write(b"1")
time.sleep(0.5)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
want = b""
for i in range(3):
    line = b"line %d\n" % i
    os.write(fd, line)
    want += line
    t0 = time.monotonic()
    while True:
        try:
            with open(sys.argv[2], "rb") as f:
                got = f.read()
        except FileNotFoundError:
            got = b""
        if got == want:
            break
        if time.monotonic() - t0 > 10:
            print("the store has %r 10 s after %r was written, the file "
                  "still open" % (got, line))
            sys.exit(1)
        time.sleep(0.05)
    print("line %d in the store %.2f s after its write" %
          (i, time.monotonic() - t0))
os.close(fd)
EOF
	bcf_fail "a slow writer's lines wait for its close"

# a full directory: the error reaches the application
if [ "$BCF_STORE" = posix ] &&
   mkdir "$BCF_BACK/small" && mount -t tmpfs -o size=1m bcf "$BCF_BACK/small"; then
	python3 - "$m/small/big" <<'EOF' > "$BCF_TMP/full.out" 2>&1
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
try:
    for i in range(300):
        rec = b"z" * 10240
        while rec:
            rec = rec[os.write(fd, rec):]
except OSError as e:
    print("write:", errno.errorcode[e.errno])
    try:
        os.close(fd)	# may say it again: gathered writes were lost
    except OSError:
        pass
    sys.exit(0)
try:
    os.close(fd)
except OSError as e:
    print("close:", errno.errorcode[e.errno])
    sys.exit(0)
print("no error")
sys.exit(1)
EOF
	rc=$?
	rm -f "$m/small/big"
	# the agent may still hold the directory: detach it
	umount -l "$BCF_BACK/small"
	[ $rc -eq 0 ] || bcf_fail "3 MiB into a 1 MiB directory: $(cat "$BCF_TMP/full.out")"
	grep -q ENOSPC "$BCF_TMP/full.out" ||
		bcf_fail "a full directory: expected ENOSPC, got $(cat "$BCF_TMP/full.out")"
	bcf_log "a full directory: $(cat "$BCF_TMP/full.out")"
fi

bcf_umount_extra m2 || bcf_fail "mount 2 did not unmount cleanly"
bcf_umount
bcf_stop_agent || bcf_fail "the agent did not stop"
pushes=$(sed -n 's/.*summary: BATCH_PUSH *\([0-9]*\) ops.*/\1/p' \
	"$BCF_TMP/agent.log")
[ -n "$pushes" ] || bcf_fail "the agent's summary has no BATCH_PUSH line"
bcf_log "the agent served $pushes BATCH_PUSH"
# 800 records of the dd loop, 40 files: one push each, plus wb-check's
# and the rest's (about 40)
[ "$pushes" -le 150 ] ||
	bcf_fail "$pushes BATCH_PUSH for 40 files written in 800 records"
bcf_check_logs
exit 0
