#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# agentloss.sh - the agent dies under a live mount.
#
# 1. It comes back within -o reconnect_timeout (tcp: started again on the
#    same port and state directory; shm: the daemon starts its private
#    agent again by itself): the requests made meanwhile wait and succeed,
#    and a file opened before the loss reads and writes after it; one
#    removed while open is gone with the agent, and its descriptor gives
#    EIO (not EBADF: it is valid to the application).
# 2. It does not come back: after reconnect_timeout=2 applications get EIO
#    (not ENOTCONN, which on a FUSE mount means its daemon died, and no
#    hang), the daemon stays up and unmounts cleanly.
# 3. It stops answering with its connection up (SIGSTOP; run before 2):
#    lookups in one directory fail together after about the timeout.
# 4. The mount is unmounted while the agent does not answer, and then the
#    agent dies (run before 2): the daemon exits at once.
# 5. shm: a mount in the background of a relative local:DIR starts its
#    agent again in DIR.
. "$(dirname "$0")/lib.sh"
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'lost|agent .*(killed|signal|exited|died|start)|connection|unreachable'}
bcf_init

state=$BCF_TMP/state
mkdir -p "$state" || bcf_hard "mkdir $state"
if [ "$BCF_TRANSPORT" = shm ]; then
	# the private agent, through a wrapper that refuses to start while
	# $BCF_TMP/no-agent exists (part 2)
	real_agent=${BLUECACHE_AGENT:-$top_builddir/agent/bluecache-agent}
	wrap=$BCF_TMP/agent-wrap.sh
	cat > "$wrap" <<EOF
#!/bin/sh
[ -e "$BCF_TMP/no-agent" ] && { echo "agent start refused by the test" >&2; exit 3; }
exec "$real_agent" "\$@"
EOF
	chmod +x "$wrap"
	export BLUECACHE_AGENT=$wrap
else
	BCF_SECRET=$BCF_TMP/secret
	bcf_secret "$BCF_SECRET"
	BCF_PORT=$(bcf_free_port) || bcf_hard "no free port"
fi

start_tcp_agent()
{
	bcf_start_agent "$BCF_BACK" "tcp://127.0.0.1:$BCF_PORT" \
		--secret-file "$BCF_SECRET" --squash none --state-dir "$state"
}

# agent_pid: the agent serving the mount now
agent_pid()
{
	if [ "$BCF_TRANSPORT" = shm ]; then
		pgrep -P "$BCF_FS_PID" -x bluecache-agent ||
			pgrep -P "$BCF_FS_PID" -f agent-wrap.sh
	else
		echo "$BCF_AGENT_PID"
	fi
}

# dead: gone, or (the embedded agent, the daemon's child) a zombie
agent_dead()
{
	[ ! -e "/proc/$1" ] || grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"
}

kill_agent()
{
	local apid

	apid=$(agent_pid)
	[ -n "$apid" ] || bcf_hard "no agent process found"
	kill -KILL "$apid"
	if [ "$BCF_TRANSPORT" != shm ]; then
		wait "$apid" 2>/dev/null
		BCF_AGENT_PID=
	fi
	bcf_wait_for 10 agent_dead "$apid" || bcf_fail "the agent did not die"
}

# ---- 1: the agent comes back -------------------------------------------
[ "$BCF_TRANSPORT" = shm ] || start_tcp_agent ||
	bcf_fail "bluecache-agent did not become ready"
bcf_mount -o reconnect_timeout=30
echo before > "$BCF_MNT/f" || bcf_fail "write before the loss"
mkdir "$BCF_MNT/d" && echo inside > "$BCF_MNT/d/g" ||
	bcf_fail "mkdir before the loss"

fifo=$BCF_TMP/step
mkfifo "$fifo" || bcf_hard "mkfifo"
timeout 60 python3 - "$BCF_MNT" "$fifo" <<'PY' &
import errno, os, sys
m, fifo = sys.argv[1], sys.argv[2]
fd = os.open(os.path.join(m, "held"), os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(fd, b"held before\n", 0)
os.fsync(fd)
# a removed file only the agent's descriptor kept: gone with the agent
gone = os.open(os.path.join(m, "gone"), os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(gone, b"gone\n", 0)
os.unlink(os.path.join(m, "gone"))
with open(fifo, "w") as f:
    f.write("opened\n")
with open(fifo) as f:
    f.read()
# the agent was killed: every call waits for it and then succeeds
def check(what, got, want):
    if got != want:
        sys.exit("%s: %r, expected %r" % (what, got, want))
check("read of the held file", os.pread(fd, 64, 0), b"held before\n")
# the descriptor is valid to the application: EIO, never EBADF
try:
    os.pread(gone, 64, 0)
    sys.exit("a removed file read after the agent was killed")
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("read of a removed file lost with the agent: %s, "
                 "expected EIO" % e.strerror)
try:
    os.close(gone)	# the descriptor goes; EIO may say the file was lost
except OSError as e:
    if e.errno != errno.EIO:
        sys.exit("close of a removed file lost with the agent: %s"
                 % e.strerror)
os.pwrite(fd, b"held after!\n", 0)
os.fsync(fd)
check("read back", os.pread(fd, 64, 0), b"held after!\n")
with open(os.path.join(m, "f")) as f:
    check("read of f", f.read(), "before\n")
with open(os.path.join(m, "d", "g")) as f:
    check("read of d/g", f.read(), "inside\n")
with open(os.path.join(m, "new"), "w") as f:
    f.write("new\n")
check("listing", sorted(os.listdir(m)), ["d", "f", "held", "new"])
os.close(fd)
PY
py=$!
read -r _ < "$fifo" || bcf_fail "the holder did not open its file"
kill_agent
if [ "$BCF_TRANSPORT" != shm ]; then
	sleep 0.5
	start_tcp_agent || bcf_fail "the agent did not start again"
fi
echo go > "$fifo"
wait "$py" || bcf_fail "the mount did not go on after the agent came back"
[ "$(cat "$BCF_MNT/held")" = "held after!" ] || bcf_fail "held file lost"
grep -q "agent connection restored" "$BCF_TMP/fs.log" ||
	bcf_fail "no line says the connection was restored"
bcf_umount

# ---- 3: the agent stops answering, its connection up ----------------------
# (SIGSTOP: a hung agent) Lookups of six names in one directory at once
# each fail after about the timeout (2 s), together, not one after the
# other (the kernel serializes the lookups of a directory unless told it
# need not); then the agent goes on and so does the mount.
# (s made beside the mount: of a directory it made itself, the daemon
# knows every name and answers lookups without the agent)
mkdir "$BCF_BACK/s" || bcf_hard "mkdir $BCF_BACK/s"
bcf_mount -o timeout=2,reconnect_timeout=30
ls "$BCF_MNT/s" > /dev/null || bcf_fail "listing before the stop"
apid=$(agent_pid)
[ -n "$apid" ] || bcf_hard "no agent process found"
kill -STOP "$apid"
t0=$(date +%s%N)
pids=
for i in 1 2 3 4 5 6; do
	timeout 60 stat "$BCF_MNT/s/n$i" > /dev/null 2> "$BCF_TMP/stop.$i" &
	pids="$pids $!"
done
wait $pids
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill -CONT "$apid"
echo "6 lookups in one directory of a stopped agent ended after $ms ms"
for i in 1 2 3 4 5 6; do
	grep -q 'Input/output error' "$BCF_TMP/stop.$i" ||
		bcf_fail "stat of s/n$i with the agent stopped:" \
			"$(cat "$BCF_TMP/stop.$i")"
done
[ "$ms" -lt 8000 ] || bcf_fail "6 lookups in one directory of a stopped" \
	"agent took $ms ms: they went one at a time"
echo after > "$BCF_MNT/s/after" && [ "$(cat "$BCF_MNT/s/after")" = after ] ||
	bcf_fail "the mount did not go on after the agent did"
bcf_umount

# ---- 4: unmounted while the agent does not answer, and then it dies ------
# The daemon's last call (its region's release) is out when the agent
# dies: the daemon must exit now, not wait reconnect_timeout for an agent
# to resume a session nobody mounts any more.
bcf_mount -o timeout=30,reconnect_timeout=120
echo x > "$BCF_MNT/u" || bcf_fail "write before the stop"
apid=$(agent_pid)
[ -n "$apid" ] || bcf_hard "no agent process found"
kill -STOP "$apid"
timeout 20 fusermount3 -u "$BCF_MNT" || bcf_fail "unmount with the agent stopped"
sleep 1
t0=$(date +%s%N)
kill -KILL "$apid"
kill -CONT "$apid" 2>/dev/null
[ "$BCF_TRANSPORT" = shm ] || { wait "$apid" 2>/dev/null; BCF_AGENT_PID=; }
bcf_wait_for 60 bcf_pid_gone "$BCF_FS_PID" ||
	bcf_fail "the daemon did not exit within 60 s of its agent's death" \
		"after an unmount"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "unmounted, then the agent died: the daemon exited $ms ms later"
[ "$ms" -lt 10000 ] || bcf_fail "the daemon exited $ms ms after its" \
	"agent died: it waited for a reconnect after the unmount"
wait "$BCF_FS_PID"
BCF_FS_PID=
[ "$BCF_TRANSPORT" = shm ] || start_tcp_agent ||
	bcf_fail "bluecache-agent did not start again"

# ---- 2: the agent does not come back --------------------------------------
bcf_mount -o reconnect_timeout=2
echo before > "$BCF_MNT/f2" || bcf_fail "write before the loss"
[ "$BCF_TRANSPORT" = shm ] && : > "$BCF_TMP/no-agent"
killed=$(date +%s.%N)
kill_agent

timeout 30 python3 - "$BCF_MNT" "$killed" <<'PY' ||
import errno, os, sys, time
m = sys.argv[1]

def expect_eio(what, fn):
    try:
        fn()
    except OSError as e:
        if e.errno != errno.EIO:
            sys.exit("%s: %s, expected EIO" % (what, e.strerror))
        return
    sys.exit("%s succeeded after the agent died" % what)

expect_eio("stat of a new name",
           lambda: os.stat(os.path.join(m, "never-looked-up")))
dt = time.time() - float(sys.argv[2])
if dt < 1.8 or dt > 10:
    sys.exit("EIO %.2f s after the kill, expected about 2 s" % dt)
t0 = time.monotonic()
expect_eio("create",
           lambda: os.open(os.path.join(m, "new2"), os.O_CREAT | os.O_WRONLY,
                           0o644))

def direct_read():
    fd = os.open(os.path.join(m, "f2"), os.O_RDONLY | os.O_DIRECT)
    try:
        os.read(fd, 4096)
    finally:
        os.close(fd)
expect_eio("O_DIRECT read", direct_read)
dt = time.monotonic() - t0
if dt > 1:
    sys.exit("EIO took %.2f s once the timeout had passed" % dt)
PY
	{ cat "$BCF_TMP/fs.log" >&2; bcf_fail "errors after the agent died"; }
bcf_pid_gone "$BCF_FS_PID" && bcf_fail "the daemon died with the agent"
bcf_umount

# ---- 5: a background mount of a relative local:DIR ------------------------
# The detached daemon's own directory is /: the private agent it starts
# again must still find DIR.
if [ "$BCF_TRANSPORT" = shm ]; then
	rm -f "$BCF_TMP/no-agent"
	mkdir "$BCF_TMP/rel" || bcf_hard "mkdir $BCF_TMP/rel"
	(cd "$BCF_TMP" && timeout 30 "$BCF_FS" local:rel "$BCF_MNT" \
		-o reconnect_timeout=30) 2>>"$BCF_TMP/fs.log" ||
		bcf_fail "a background mount of local:rel did not mount"
	BCF_FS_PID=$(pgrep -n -f -- "local:rel $BCF_MNT") ||
		bcf_hard "no daemon of the background mount"
	echo bg > "$BCF_MNT/b" || bcf_fail "write to the background mount"
	kill_agent
	[ "$(timeout 20 cat "$BCF_MNT/b")" = bg ] ||
		bcf_fail "the background mount of local:rel did not go on" \
			"after its agent died"
	[ "$(cat "$BCF_TMP/rel/b")" = bg ] || bcf_fail "b is not in rel"
	fusermount3 -u "$BCF_MNT" || bcf_fail "unmount of the background mount"
	bcf_wait_for 30 bcf_pid_gone "$BCF_FS_PID" ||
		bcf_fail "the background daemon did not exit after unmount"
	BCF_FS_PID=
	echo "a background mount of local:rel went on after its agent died"
fi
exit 0
