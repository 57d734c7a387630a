#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# limits.sh - an agent with few descriptors behaves as a local file
# system does at its limits.
#
# Inode numbers given out again: files are created and removed in one
# directory while symbolic links, directories and files are made in
# another and checked at once: readlink gives the target, the type is
# the one made.  A store that reuses freed inode numbers (ext4 does, at
# once) gives a new object the number of a file this host may still
# hold; with few descriptors cached (--fd-cache 8) nothing keeps that
# number taken, and an agent that matched its nodes by number alone
# answered for the old object (readlink: EINVAL).  Bounded: at most 3
# rounds or 60 seconds.
#
# Open files (--max-files 16): once a session holds all it may, open(2)
# fails with EMFILE, and an O_CREAT open that fails so has made nothing;
# once one is closed, opens work again.
#
# A private agent (local:DIR) serves one host: with a hard limit of 4096
# descriptors it lets that host hold 900 files open at once (it held 408,
# an eighth of what was left after 128 sessions' reserve).
#
# A file grown far past what the store holds (fallocate at 2^62) fails
# with EFBIG, or truncates back at once: a cephfs store let libcephfs grow
# it past the file system's max_file_size, and the truncate walked every
# object of the range in the agent's memory until the OOM killer came.
. "$(dirname "$0")/lib.sh"
bcf_init
# few descriptors cached: a node of a removed file soon holds none, and
# then nothing keeps its inode number from being handed out again
case $BCF_TRANSPORT in
shm)
	bcf_start_agent "$BCF_BACK" "unix:$BCF_TMP/agent.sock" --fd-cache 8 \
		--max-files 16 ||
		bcf_fail "bluecache-agent did not become ready"
	agent=unix:$BCF_TMP/agent.sock
	opts=transport=shm
	;;
*)
	bcf_agent_tcp --fd-cache 8 --max-files 16
	agent=tcp://127.0.0.1:$BCF_PORT
	opts=transport=tcp,secret_file=$BCF_SECRET
	;;
esac
"$BCF_FS" "$agent" "$BCF_MNT" -f -o "$opts" 2>>"$BCF_TMP/fs.log" &
BCF_FS_PID=$!
bcf_wait_for 20 bcf_mount_up || bcf_fail "the mount did not come up"
m=$BCF_MNT
mkdir "$m/churn" "$m/made" || bcf_fail "mkdir"

python3 - "$m" <<'PY' || bcf_fail "a new object answered as an old one"
import os, stat, sys, time

m = sys.argv[1]
churn, made = os.path.join(m, "churn"), os.path.join(m, "made")
target = os.path.join(made, "target")
open(target, "w").close()
bad = []
t0 = time.monotonic()
rounds = 0
while rounds < 3 and time.monotonic() - t0 < 60 and len(bad) < 5:
    rounds += 1
    for i in range(800):
        if time.monotonic() - t0 > 60:
            break
        # free inode numbers: create, look up, remove
        for j in range(4):
            p = os.path.join(churn, "f%d" % j)
            with open(p, "w"):
                pass
            os.stat(p)
            os.unlink(p)
        kind = i % 3
        p = os.path.join(made, "n%d" % i)
        try:
            if kind == 0:
                os.symlink(target, p)
                if os.readlink(p) != target:
                    bad.append((p, "readlink gave another target"))
                if not stat.S_ISLNK(os.lstat(p).st_mode):
                    bad.append((p, "not a symbolic link"))
            elif kind == 1:
                os.mkdir(p)
                open(os.path.join(p, "x"), "w").close()
                if os.listdir(p) != ["x"]:
                    bad.append((p, "directory lists %r" % os.listdir(p)))
            else:
                with open(p, "w") as f:
                    f.write(p)
                with open(p) as f:
                    if f.read() != p:
                        bad.append((p, "file reads another content"))
        except OSError as e:
            bad.append((p, str(e)))
    for i in range(800):
        p = os.path.join(made, "n%d" % i)
        if not os.path.lexists(p):
            continue
        try:
            if i % 3 == 1:
                os.unlink(os.path.join(p, "x"))
                os.rmdir(p)
            else:
                os.unlink(p)
        except OSError as e:
            bad.append((p, "removing: " + str(e)))
for b in bad:
    print("limits: %s: %s" % b, file=sys.stderr)
print("limits: %d rounds in %.1f s" % (rounds, time.monotonic() - t0),
      file=sys.stderr)
sys.exit(1 if bad else 0)
PY
python3 - "$m" <<'PY' || bcf_fail "at the open file limit"
import errno, os, sys, time

d = os.path.join(sys.argv[1], "open")
os.mkdir(d)
fds = []
for i in range(64):
    p = os.path.join(d, "f%d" % i)
    try:
        fds.append(os.open(p, os.O_CREAT | os.O_RDWR, 0o644))
    except OSError as e:
        if e.errno != errno.EMFILE:
            sys.exit("limits: create %s: %s" % (p, e))
        if os.path.lexists(p):
            sys.exit("limits: a create failed with EMFILE, yet made %s" % p)
        break
else:
    sys.exit("limits: 64 files open, the agent allows 16")
if not fds:
    sys.exit("limits: no file could be opened")
try:
    os.close(os.open(os.path.join(d, "f0"), os.O_RDONLY))
    sys.exit("limits: an open past the limit worked")
except OSError as e:
    if e.errno != errno.EMFILE:
        sys.exit("limits: open past the limit: %s, not EMFILE" % e)
os.close(fds.pop())
# a release is not waited for: the agent frees the slot a little later
p = os.path.join(d, "again")
t0 = time.monotonic()
while True:
    try:
        fds.append(os.open(p, os.O_CREAT | os.O_RDWR, 0o644))
        break
    except OSError as e:
        if e.errno != errno.EMFILE or time.monotonic() - t0 > 5:
            sys.exit("limits: create after a close: %s" % e)
        time.sleep(0.02)
os.write(fds[-1], b"still works")
for fd in fds:
    os.close(fd)
with open(p, "rb") as f:
    if f.read() != b"still works":
        sys.exit("limits: the file made after the limit reads wrong")
PY
# a file grown far past what the store holds: EFBIG (or ENOSPC), or, where
# the store takes it (a sparse file on xfs), a truncate back that ends soon
python3 - "$m" <<'PY' || bcf_fail "a file grown past the store's limit"
import errno, os, sys, threading, time

p = os.path.join(sys.argv[1], "huge")
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
try:
    os.posix_fallocate(fd, 1 << 62, 1)
except OSError as e:
    if e.errno not in (errno.EFBIG, errno.ENOSPC):
        sys.exit("limits: fallocate at 2^62: %s, not EFBIG" % e)
done = []
t = threading.Thread(target=lambda: done.append(os.ftruncate(fd, 0)),
                     daemon=True)
t0 = time.monotonic()
t.start()
t.join(10)
if not done:
    sys.exit("limits: truncating it back took more than 10 s")
os.write(fd, b"small again")
os.close(fd)
with open(p, "rb") as f:
    if f.read() != b"small again":
        sys.exit("limits: the file reads wrong after it shrank")
print("limits: grown and truncated in %.1f s" % (time.monotonic() - t0),
      file=sys.stderr)
PY
bcf_umount

# local:DIR, whose private agent inherits the daemon's descriptor limit
if [ "$BCF_TRANSPORT" = shm ] && command -v prlimit >/dev/null; then
	emnt=$BCF_TMP/emnt
	mkdir -p "$emnt" "$BCF_TMP/edata" || bcf_hard "mkdir"
	prlimit --nofile=4096:4096 "$BCF_FS" "local:$BCF_TMP/edata" "$emnt" \
		-f 2>>"$BCF_TMP/fs.log" &
	epid=$!
	if ! bcf_wait_for 20 bcf_is_mounted "$emnt"; then
		kill "$epid" 2>/dev/null
		bcf_fail "the local: mount did not come up"
	fi
	python3 - "$emnt" <<'PY'
import os, resource, sys

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < 1000:
    print("limits: a hard limit of %d descriptors here: 900 open files "
          "not tried" % hard, file=sys.stderr)
    sys.exit(0)
resource.setrlimit(resource.RLIMIT_NOFILE, (1000, hard))
fds = []
try:
    for i in range(900):
        fds.append(os.open(os.path.join(sys.argv[1], "f%d" % i),
                           os.O_CREAT | os.O_RDWR, 0o644))
except OSError as e:
    sys.exit("limits: local: with 4096 descriptors: open file %d: %s"
             % (len(fds) + 1, e))
for i, fd in enumerate(fds):
    os.pwrite(fd, b"%d" % i, 0)
for fd in fds:
    os.close(fd)
with open(os.path.join(sys.argv[1], "f899"), "rb") as f:
    if f.read() != b"899":
        sys.exit("limits: local: f899 reads wrong")
PY
	erc=$?
	fusermount3 -u "$emnt" || fusermount3 -uz "$emnt"
	bcf_wait_for 20 bcf_pid_gone "$epid" ||
		bcf_fail "the local: daemon did not exit"
	wait "$epid" 2>/dev/null
	[ $erc -eq 0 ] || bcf_fail "a private agent's open file limit"
fi
echo PASS

