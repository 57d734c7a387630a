#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# agentloss.sh - the agent dies under a live mount.  Applications get EIO
# (not ENOTCONN, which on a FUSE mount means its daemon died), nothing
# hangs, the daemon stays up and unmounts cleanly.
. "$(dirname "$0")/lib.sh"
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'lost|agent .*(killed|signal|exited|died)|connection'}
bcf_init
bcf_mount
echo before > "$BCF_MNT/f" || bcf_fail "write before the loss"

if [ "$BCF_TRANSPORT" = shm ]; then
	apid=$(pgrep -P "$BCF_FS_PID" -x bluecache-agent)
else
	apid=$BCF_AGENT_PID
fi
[ -n "$apid" ] || bcf_hard "no agent process found"
kill -KILL "$apid"
[ "$BCF_TRANSPORT" = shm ] || { wait "$apid" 2>/dev/null; BCF_AGENT_PID=; }
# dead: gone, or (the embedded agent, the daemon's child) a zombie
agent_dead()
{
	[ ! -e "/proc/$1" ] || grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"
}
bcf_wait_for 10 agent_dead "$apid" || bcf_fail "the agent did not die"

timeout 30 python3 - "$BCF_MNT" <<'PY' || bcf_fail "errors after the agent died"
import errno, os, sys
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
expect_eio("create",
           lambda: os.open(os.path.join(m, "new"), os.O_CREAT | os.O_WRONLY,
                           0o644))

def direct_read():
    fd = os.open(os.path.join(m, "f"), os.O_RDONLY | os.O_DIRECT)
    try:
        os.read(fd, 4096)
    finally:
        os.close(fd)
expect_eio("O_DIRECT read", direct_read)
PY
bcf_pid_gone "$BCF_FS_PID" && bcf_fail "the daemon died with the agent"
bcf_umount
exit 0
