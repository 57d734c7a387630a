#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# notify.sh - two mounts of one agent, with the default options (long
# caches): what one mount changes, the other sees within a second without
# opening anything again, because the agent tells it.  Mount 2 first caches
# what it is about to be told (a file's pages and attributes through an
# open descriptor, a directory listing, a negative lookup), then mount 1
#   - appends to the file: the descriptor in mount 2 reads the new bytes,
#     fstat and stat see the new size;
#   - overwrites it in place: a new open in mount 2 reads the new bytes at
#     once (close-to-open), the descriptor within the second;
#   - appends to a file both mounts hold open with O_APPEND, by turns
#     with mount 2: every line lands after the one before;
#   - changes its mode: stat in mount 2 sees it;
#   - creates the name mount 2 looked up in vain: it appears there, in a
#     lookup and in the listing;
#   - removes the file: it disappears from mount 2.
# Then the agent is killed, a file mount 2 holds open is changed in its
# directory while no agent runs, and the agent is started again: mount 2,
# which was told nothing, must drop its caches once it is reconnected.
# Skips when the agent does not tell of changes (the mount says so).
. "$(dirname "$0")/lib.sh"
bcf_init

# the agent is restarted with the same arguments; its state directory lets
# the mounts take their handles back
state=(--state-dir "$BCF_TMP/state")
case $BCF_TRANSPORT in
shm)
	listen=unix:$BCF_TMP/agent.sock
	agent_args=("${state[@]}")
	agent=$listen
	opts=transport=shm
	;;
*)
	BCF_SECRET=$BCF_TMP/secret
	bcf_secret "$BCF_SECRET"
	BCF_PORT=$(bcf_free_port) || bcf_hard "python3 found no free port"
	listen=tcp://${RDMA_IP:-127.0.0.1}:$BCF_PORT
	agent_args=(--secret-file "$BCF_SECRET" --squash none "${state[@]}")
	[ "$BCF_TRANSPORT" = rdma ] &&
		agent_args+=(--rdma-listen "$RDMA_IP:0")
	agent=$listen
	opts=transport=$BCF_TRANSPORT,secret_file=$BCF_SECRET
	;;
esac
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"

m1=$BCF_MNT
m2=$BCF_TMP/mnt2
mkdir "$m2"
M2_PID=
trap 'rc=$?; exec 5<&-; cd /; if [ -n "$M2_PID" ]; then
	fusermount3 -u "$m2" 2>/dev/null || fusermount3 -uz "$m2";
	wait "$M2_PID"; fi; (exit $rc); bcf_cleanup' EXIT

# both daemons run in the foreground, logging to fs.log
"$BCF_FS" "$agent" "$m1" -f -o "$opts" 2>>"$BCF_TMP/fs.log" &
BCF_FS_PID=$!
bcf_wait_for 20 bcf_mount_up || bcf_fail "mount 1 did not come up"
"$BCF_FS" "$agent" "$m2" -f -o "$opts" 2>>"$BCF_TMP/fs.log" &
M2_PID=$!
bcf_wait_for 20 bcf_is_mounted "$m2" || bcf_fail "mount 2 did not come up"
if grep -q 'does not tell of changes' "$BCF_TMP/fs.log"; then
	bcf_skip "this agent does not tell of changes made elsewhere"
fi
grep -q 'tells of changes' "$BCF_TMP/fs.log" ||
	bcf_fail "the mount did not say whether its agent tells of changes"

PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$top_srcdir/tests/fs \
	timeout 60 python3 - "$m1" "$m2" <<'PY' || bcf_fail "see above"
import errno, os, stat, sys, time
from fscheck import fail
import fscheck

m1, m2 = sys.argv[1], sys.argv[2]
WITHIN = 1.0

def within(what, check):
    """check() true within WITHIN seconds, polled every 10 ms"""
    return fscheck.within(what, check, WITHIN)

def put(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    os.write(fd, data)
    os.close(fd)

def read(path):
    with open(path, "rb") as f:
        return f.read()

def lookup_fails(path):
    try:
        os.stat(path)
        return False
    except FileNotFoundError:
        return True

put(m1 + "/f", b"one\n")
# mount 2 caches the file: attributes, pages, an open descriptor
if read(m2 + "/f") != b"one\n":
    fail("mount 2 does not read what mount 1 wrote")
fd = os.open(m2 + "/f", os.O_RDONLY)
if os.pread(fd, 100, 0) != b"one\n" or os.fstat(fd).st_size != 4:
    fail("mount 2's descriptor")
os.stat(m2 + "/f")
# ... a listing and a negative lookup
os.listdir(m2)
if not lookup_fails(m2 + "/later"):
    fail("'later' exists before it was made")

# append through mount 1
put(m1 + "/f", b"two\n", os.O_WRONLY | os.O_APPEND)
new = b"one\ntwo\n"
within("descriptor reads the append",
       lambda: os.pread(fd, 100, 0) == new)
within("fstat sees the new size", lambda: os.fstat(fd).st_size == len(new))
within("stat sees the new size",
       lambda: os.stat(m2 + "/f").st_size == len(new))

# overwrite in place, same size: at once at the next open
time.sleep(0.01)
put(m1 + "/f", b"ONE\nTWO\n", os.O_WRONLY)
got = read(m2 + "/f")
if got != b"ONE\nTWO\n":
    fail("next open after an overwrite reads %r" % got)
within("descriptor reads the overwrite",
       lambda: os.pread(fd, 100, 0) == b"ONE\nTWO\n")

# and a new open right after an append
put(m1 + "/f", b"three\n", os.O_WRONLY | os.O_APPEND)
got = read(m2 + "/f")
if got != b"ONE\nTWO\nthree\n":
    fail("next open after an append reads %r" % got)
os.close(fd)

# a log both mounts keep open for appending, written by turns: each
# append lands after the other mount's (the kernel takes an append's
# offset from the size it holds, which the news must have brought)
a1 = os.open(m1 + "/log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
a2 = os.open(m2 + "/log", os.O_WRONLY | os.O_APPEND)
want = b""
for i in range(3):
    for name, afd in (("one", a1), ("two", a2)):
        line = b"%s %d\n" % (name.encode(), i)
        os.write(afd, line)
        want += line
        time.sleep(WITHIN)
os.close(a1)
os.close(a2)
got = read(m1 + "/log")
if got != want:
    fail("appends by turns through two mounts left %r, not %r" %
         (got, want))

# mode
os.chmod(m1 + "/f", 0o600)
within("stat sees the new mode",
       lambda: stat.S_IMODE(os.stat(m2 + "/f").st_mode) == 0o600)

# the name mount 2 looked up in vain
put(m1 + "/later", b"made\n")
within("a negative lookup turns positive",
       lambda: os.stat(m2 + "/later").st_size == 5)
within("a created name is listed", lambda: "later" in os.listdir(m2))
os.mkdir(m1 + "/d")
within("a made directory is listed", lambda: "d" in os.listdir(m2))

# removed
os.stat(m2 + "/later")
os.unlink(m1 + "/later")
within("a removed name disappears", lambda: lookup_fails(m2 + "/later"))
within("a removed name is not listed",
       lambda: "later" not in os.listdir(m2))
os.rmdir(m1 + "/d")
within("a removed directory disappears", lambda: lookup_fails(m2 + "/d"))

# renamed over: the name names the new file
put(m1 + "/g", b"old\n")
if read(m2 + "/g") != b"old\n":
    fail("mount 2 reads g")
put(m1 + "/g.new", b"replaced\n")
os.rename(m1 + "/g.new", m1 + "/g")
within("a name renamed over reads the new file",
       lambda: read(m2 + "/g") == b"replaced\n")

# listings mount 2 read (and the kernel may keep) follow renames, in a
# directory and out of one
os.mkdir(m1 + "/s")
put(m1 + "/s/a", b"a\n")
put(m1 + "/s/b", b"b\n")
within("a new directory's names are listed",
       lambda: sorted(os.listdir(m2 + "/s")) == ["a", "b"])
sorted(os.listdir(m2))
os.rename(m1 + "/s/a", m1 + "/s/c")
within("a name renamed in a directory is listed under its new name",
       lambda: sorted(os.listdir(m2 + "/s")) == ["b", "c"])
os.rename(m1 + "/s/b", m1 + "/moved")
within("a name moved out is no longer listed",
       lambda: sorted(os.listdir(m2 + "/s")) == ["c"])
within("a name moved in is listed",
       lambda: "moved" in os.listdir(m2))
os.unlink(m1 + "/moved")
os.unlink(m1 + "/s/c")
within("an emptied directory lists nothing",
       lambda: os.listdir(m2 + "/s") == [])
os.rmdir(m1 + "/s")

sys.exit(fscheck.status())
PY

# missed while no agent ran: told by nobody, dropped after the reconnect
printf 'held\n' > "$m1/h"
exec 5< "$m2/h"
bcf_eq "mount 2 reads h" "held" "$(cat "$m2/h")"
bcf_eq "mount 2's size of h" 5 "$(stat -L -c %s /proc/$$/fd/5)"
kill -KILL "$BCF_AGENT_PID"
wait "$BCF_AGENT_PID" 2>/dev/null
BCF_AGENT_PID=
printf 'changed while no agent ran\n' >> "$BCF_BACK/h"
# (without the descriptor: it would keep mount 2 busy)
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" 5<&- ||
	bcf_fail "bluecache-agent did not start again"
# reconnects are tried every 200 ms at most
n=0
until [ "$(stat -L -c %s /proc/$$/fd/5)" = 32 ]; do
	n=$((n + 1))
	[ $n -gt 30 ] && bcf_fail "after a reconnect, mount 2's descriptor" \
		"still has size $(stat -L -c %s /proc/$$/fd/5), not 32"
	sleep 0.1
done
bcf_log "mount 2 dropped its caches $((n / 10)).$((n % 10)) s after the restart"
bcf_eq "descriptor after a reconnect" \
	"$(printf 'held\nchanged while no agent ran')" "$(cat <&5)"
exec 5<&-

fusermount3 -u "$m2" || bcf_fail "cannot unmount mount 2"
wait "$M2_PID" || bcf_fail "mount 2's daemon exited with $?"
M2_PID=
echo PASS
