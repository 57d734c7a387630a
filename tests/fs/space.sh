#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# space.sh - a store that fills up behaves as a full local file system:
# writes fail with ENOSPC, and none that said it wrote is lost (the mount
# gathers a new file's writes only while the store has room to spare;
# they were answered before the store had them, and the run that failed
# was lost), and the space of a file removed (rm, or
# a rename over it) is free at once, as soon as nothing holds the file
# open: a write right after the rm of a big file works, and statfs
# through the mount says so.  A file open while it is removed keeps its
# space and its data until its last close.  A write that fills the store
# partway says what it wrote, and a new file's gathered writes that find
# the store full at close make the close fail with ENOSPC.  The store is
# a 160 MiB tmpfs of the test's own (needs root): big enough that new
# files gather while it has room.
#
# The agent caches a descriptor of each object its host looked up, and
# the host forgets the object only some time after the rm: that
# descriptor kept a removed file's blocks allocated, and a write right
# after the rm of a file that filled the store failed with ENOSPC.
. "$(dirname "$0")/lib.sh"
bcf_init
[ "$(id -u)" -eq 0 ] || bcf_skip "needs root: the store is a tmpfs of its own"
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"
mount -t tmpfs -o size=160m,mode=0755 bcf-space "$BCF_BACK" ||
	bcf_skip "cannot mount a tmpfs here"

space_cleanup()
{
	local rc=$?

	cd / || true
	bcf_unmount_quiet || rc=1
	bcf_stop_agent || rc=1
	umount "$BCF_BACK" 2>/dev/null || umount -l "$BCF_BACK" || rc=1
	(exit $rc)
	bcf_cleanup
}
trap space_cleanup EXIT

bcf_listen_for_transport
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
bcf_mount "$listen" "$opts"

PYTHONDONTWRITEBYTECODE=1 timeout 300 python3 - "$BCF_MNT" "$BCF_BACK" <<'PY' ||
import errno, os, sys, time

mnt, back = sys.argv[1], sys.argv[2]
MiB = 1 << 20
SIZE = 160 * MiB	# the store
bad = 0

def fail(msg):
    global bad
    print(msg)
    bad += 1

def free():
    st = os.statvfs(mnt)
    return st.f_bavail * st.f_frsize

def freed(what):
    """The space of a removed big file is free at once, or a moment
    later when the FUSE thread that took the closed file's RELEASE was
    overtaken by the one that took the rm (doc/design.md, "No FUSE thread
    waits for the agent"): at most 2 s, said when it was late.  A
    descriptor that kept the blocks would keep them for good."""
    t0 = time.monotonic()
    while free() < SIZE - 8 * MiB:
        if time.monotonic() - t0 > 2:
            fail("%s: %d MiB free" % (what, free() // MiB))
            return
        time.sleep(0.01)
    if time.monotonic() > t0 + 0.01:
        print("%s: free %.3f s later" % (what, time.monotonic() - t0))

def fill(path, rec=MiB):
    """Write a new file in records of rec bytes until the store is full:
    the bytes write said it wrote, the error seen."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    buf = b"f" * rec
    n, err = 0, None
    try:
        while n < 2 * SIZE:
            n += os.write(fd, buf)
    except OSError as e:
        err = e.errno
    try:
        os.close(fd)
    except OSError as e:
        err = err or e.errno
    return n, err

def write_new(path, size):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"n" * size)
        os.fsync(fd)
    finally:
        os.close(fd)

# a new file written in records until the store is full: every byte a
# write said it wrote is in the file, and no other, as on a local file
# system (the last write is short: it says what it wrote, also where it
# ends inside a page and where it started inside one)
for r, rec in enumerate((65536, 60000, 12345)):
    path = os.path.join(mnt, "acked")
    acked, err = fill(path, rec)
    size = os.stat(path).st_size
    if err not in (errno.ENOSPC, errno.EDQUOT) or size != acked:
        fail("round %d: %d bytes written (%s), the file has %d" %
             (r, acked, err and errno.errorcode[err], size))
    os.unlink(path)

for r in range(5):
    n, err = fill(os.path.join(mnt, "big"))
    if err not in (errno.ENOSPC, errno.EDQUOT):
        fail("round %d: filling the store: %s after %d MiB" %
             (r, err and errno.errorcode[err], n // MiB))
    size = os.stat(os.path.join(mnt, "big")).st_size
    if size != n:
        fail("round %d: %d bytes written in 1 MiB records, the file "
             "has %d" % (r, n, size))
    os.unlink(os.path.join(mnt, "big"))
    # nothing holds it open: free at once, or within the RELEASE's moment
    freed("round %d: right after the rm" % r)
    try:
        write_new(os.path.join(mnt, "after"), 8 * MiB)
    except OSError as e:
        fail("round %d: a write right after the rm: %s" % (r, e))
    os.unlink(os.path.join(mnt, "after"))

# a rename over a big file frees it as well
open(os.path.join(mnt, "small"), "wb").close()
fill(os.path.join(mnt, "big"))
os.rename(os.path.join(mnt, "small"), os.path.join(mnt, "big"))
freed("right after a rename over the big file")
try:
    write_new(os.path.join(mnt, "after"), 8 * MiB)
except OSError as e:
    fail("a write right after a rename over the big file: %s" % e)
os.unlink(os.path.join(mnt, "after"))
os.unlink(os.path.join(mnt, "big"))

# a file open while it is removed keeps its space and its data
path = os.path.join(mnt, "open")
write_new(path, 32 * MiB)
fd = os.open(path, os.O_RDONLY)
os.unlink(path)
if free() > SIZE - 24 * MiB:
    fail("%d MiB free with a removed 32 MiB file open" % (free() // MiB))
st = os.fstat(fd)
if st.st_size != 32 * MiB or st.st_nlink != 0:
    fail("fstat of a removed file open: size %d, %d links" %
         (st.st_size, st.st_nlink))
data = os.pread(fd, MiB, 16 * MiB)
if data != b"n" * MiB:
    fail("a removed file open reads %r..." % data[:8])
os.close(fd)
# its last close frees it (the host's release is asynchronous)
for i in range(100):
    if free() >= SIZE - 8 * MiB:
        break
    time.sleep(0.05)
else:
    fail("%d MiB free 5 s after the last close of a removed file" %
         (free() // MiB))

# a new file's writes gathered while the store had room, which another
# process on the agent's side then fills but for 100 KiB: the push at
# close writes that much and fails, and the close says why (ENOSPC), as
# a local file system's close after a failed writeback does.  A run the
# flusher pushed (a second old) before the store was full is tried again.
def late_close():
    """The close's errno, or None when the writes were not gathered or
    were pushed before the store was full."""
    path, filler = os.path.join(mnt, "late"), os.path.join(back, "filler")
    want = 4096 + (200 << 10)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, b"l" * 4096)	# may go through, asking about room
        time.sleep(0.3)
        os.write(fd, b"l" * (200 << 10))
        if os.stat(os.path.join(back, "late")).st_size >= want:
            return None			# went through
        ffd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            while os.write(ffd, b"z" * MiB):
                pass
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        os.ftruncate(ffd, os.fstat(ffd).st_size // 4096 * 4096 -
                     (100 << 10))
        os.close(ffd)
        if os.stat(os.path.join(back, "late")).st_size >= want:
            return None			# the flusher pushed it first
        try:
            os.close(fd)
        except OSError as e:
            return e.errno
        return 0
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
        for p in (path, filler):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

for attempt in range(10):
    err = late_close()
    if err is not None:
        if err != errno.ENOSPC:
            fail("close of gathered writes the store had no room for: %s"
                 % (errno.errorcode[err] if err else "no error"))
        break
else:
    fail("a new file's writes were never gathered until the store filled")
print("%d checks failed" % bad)
sys.exit(1 if bad else 0)
PY
	bcf_fail "the space of a removed file is not free when it should be"
bcf_umount
echo PASS
