#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# concurrency.sh - several processes at once on one mount: writers to
# different files, readers of one file, two writers to disjoint ranges of
# one file, and many small files created in parallel.  Every result is
# checked by sha256sum against locally generated data, also after a
# remount.  Then writers of one file with O_DIRECT: four at once, and
# two whose requests must be out at the same time.
. "$(dirname "$0")/lib.sh"
bcf_init
bcf_mount

mib=1048576
nw=4
src=$BCF_TMP/src
mkdir "$src"
for i in $(seq 1 $nw); do
	bcf_gen "writer-$i" $((24 * mib + i * 4099)) > "$src/w$i"
done
bcf_gen reader $((64 * mib)) > "$src/shared"
bcf_gen half-a $((16 * mib)) > "$src/a"
bcf_gen half-b $((16 * mib)) > "$src/b"
cat "$src/a" "$src/b" > "$src/ab"
cp "$src/shared" "$BCF_MNT/shared" || bcf_fail "cp of the shared file"
bcf_remount

# wait_all WHAT PID...: fail if any of the processes failed
wait_all()
{
	local what=$1 p bad=0

	shift
	for p in "$@"; do
		wait "$p" || bad=1
	done
	[ $bad -eq 0 ] || bcf_fail "$what: a process failed"
}

pids=()
# writers to different files, with different block sizes
for i in $(seq 1 $nw); do
	dd if="$src/w$i" of="$BCF_MNT/w$i" bs=$((i * 61440 + 7)) status=none &
	pids+=($!)
done
# readers of one file
for i in $(seq 1 4); do
	(dd if="$BCF_MNT/shared" bs=$((i * 32768 + 3)) status=none |
		sha256sum > "$BCF_TMP/read$i") &
	pids+=($!)
done
# two writers to disjoint halves of one file
: > "$BCF_MNT/ab"
dd if="$src/a" of="$BCF_MNT/ab" bs=65536 conv=notrunc status=none &
pids+=($!)
dd if="$src/b" of="$BCF_MNT/ab" bs=131072 seek=128 conv=notrunc status=none &
pids+=($!)
# many small files in parallel in one directory
mkdir "$BCF_MNT/small"
for i in 1 2 3; do
	(for j in $(seq 1 150); do
		echo "file $i $j" > "$BCF_MNT/small/f-$i-$j" || exit 1
	done) &
	pids+=($!)
done
wait_all "concurrent I/O" "${pids[@]}"

want=$(bcf_sha "$src/shared")
for i in $(seq 1 4); do
	bcf_eq "concurrent reader $i" "$want  -" "$(cat "$BCF_TMP/read$i")"
done
check_all()
{
	local i j

	for i in $(seq 1 $nw); do
		bcf_same_sha "$src/w$i" "$BCF_MNT/w$i"
	done
	bcf_same_sha "$src/ab" "$BCF_MNT/ab"
	bcf_eq "small files" 450 "$(ls "$BCF_MNT/small" | wc -l)"
	for i in 1 2 3; do
		for j in 1 77 150; do
			bcf_eq "small/f-$i-$j" "file $i $j" \
				"$(cat "$BCF_MNT/small/f-$i-$j")"
		done
	done
}
check_all
bcf_remount
check_all

# readers and a writer of different files at the same time, after remount
pids=()
for i in $(seq 1 $nw); do
	(sha256sum < "$BCF_MNT/w$i" > "$BCF_TMP/r$i") &
	pids+=($!)
done
cp "$src/shared" "$BCF_MNT/shared2" &
pids+=($!)
wait_all "readers next to a writer" "${pids[@]}"
for i in $(seq 1 $nw); do
	bcf_eq "reader of w$i" "$(bcf_sha "$src/w$i")  -" "$(cat "$BCF_TMP/r$i")"
done
bcf_same_sha "$src/shared" "$BCF_MNT/shared2"

# four O_DIRECT writers of disjoint quarters of one file, which exists
# at its full size first (writes within the size may run in parallel)
bcf_gen direct $((16 * mib)) > "$src/direct"
dd if=/dev/zero of="$BCF_MNT/direct" bs=$mib count=16 status=none ||
	bcf_fail "dd of the direct file"
pids=()
for i in 0 1 2 3; do
	bs=$((65536 << i))
	n=$((4 * mib / bs))
	dd if="$src/direct" of="$BCF_MNT/direct" bs=$bs count=$n \
		skip=$((n * i)) seek=$((n * i)) \
		iflag=direct oflag=direct conv=notrunc status=none &
	pids+=($!)
done
wait_all "O_DIRECT writers of one file" "${pids[@]}"
bcf_same_sha "$src/direct" "$BCF_MNT/direct"

# two O_DIRECT writes to one file are out at once: with the daemon
# stopped, each writer waits for its own answer (request_wait_answer),
# neither for the inode's lock, which the kernel holds across a write it
# serves through the page cache (Linux 6.6: FUSE_DIRECT_IO_ALLOW_MMAP)
python3 - "$BCF_MNT/direct" "$BCF_FS_PID" <<'EOF' ||
import mmap, os, re, signal, sys, threading, time

path, pid = sys.argv[1], int(sys.argv[2])
v = re.match(r"(\d+)\.(\d+)", os.uname().release)
if not v or (int(v.group(1)), int(v.group(2))) < (6, 6):
    print("Linux %s serialises them: not checked" % os.uname().release)
    sys.exit(0)
P = 4096
fd = os.open(path, os.O_RDWR | os.O_DIRECT)
tids = [None, None]

def write(t):
    tids[t] = threading.get_native_id()
    buf = mmap.mmap(-1, P)
    buf.write(bytes([65 + t]) * P)
    os.pwritev(fd, [buf], (1 + 64 * t) * P)

def stack(t):
    try:
        with open("/proc/self/task/%d/stack" % tids[t]) as f:
            return f.read()
    except (OSError, TypeError):
        return ""

bad = 0
os.kill(pid, signal.SIGSTOP)
try:
    ts = [threading.Thread(target=write, args=(t,)) for t in range(2)]
    for t in ts:
        t.start()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:
        if all("request_wait_answer" in stack(t) for t in range(2)):
            break
        time.sleep(0.02)
    else:
        if not os.access("/proc/self/task/%d/stack" % os.getpid(), os.R_OK):
            print("no /proc/PID/stack here: not checked")
        else:
            for t in range(2):
                print("writer %d waits in:\n%s" % (t, stack(t)),
                      file=sys.stderr)
            bad = 1
finally:
    os.kill(pid, signal.SIGCONT)
for t in ts:
    t.join()
for t in range(2):
    buf = mmap.mmap(-1, P)
    if (os.preadv(fd, [buf], (1 + 64 * t) * P) != P or
            buf[:] != bytes([65 + t]) * P):
        print("writer %d: its page did not read back" % t, file=sys.stderr)
        bad = 1
os.close(fd)
sys.exit(bad)
EOF
	bcf_fail "two O_DIRECT writers of one file were not out at once"
exit 0
