#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# badagent.sh - the FUSE daemon on a real mount, against a fake agent
# (tests/fs/badagent) that misbehaves in one way per mount:
#   readdir-form    plain entries for a READDIRPLUS: ls -l fails with EIO
#                   (it does not list a short directory), one log line
#   xattr-oversize  64 bytes for a getxattr of size 16: EIO, not ERANGE,
#                   one log line per bad reply
#   garbage         junk for a LOOKUP reply: EIO, and EIO for what follows
#                   (the session is given up)
#   unknown-id      a reply to a request id never used: EIO likewise
#   busy            a LOOKUP never answered while PINGs are: it waits
#                   past timeout (1 s here) until busy_timeout (5 s), then
#                   EIO; the session goes on
#   mute            nothing answered from a LOOKUP on, the connection up:
#                   EIO at about the timeout, long before busy_timeout;
#                   then more requests at once than the fake takes (16):
#                   EIO too, once all it took are past their timeout
#   busy-notify     a LOOKUP never answered, nothing read for 8 s (the
#                   PINGs wait), but NOTIFY BUSY every 500 ms: as busy
# A first mount of the well-behaved fake ("none") runs the same steps and
# must see them succeed: the checks can tell one from the other.  In every
# mode the daemon stays up until fusermount3 -u, then exits 0, and so does
# the fake once the daemon has closed the session.  Every step is bounded.
. "$(dirname "$0")/lib.sh"
# the daemon's lines about the bad replies, checked mode by mode below
BA_LINES='READDIR reply does not parse|bytes of an extended attribute'
BA_LINES=$BA_LINES'|bad frame from agent'
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-$BA_LINES}
bcf_init
[ "$BCF_TRANSPORT" = shm ] ||
	bcf_skip "the fake agent serves the shm transport only"
BADAGENT=$top_builddir/tests/fs/badagent
[ -x "$BADAGENT" ] || bcf_hard "$BADAGENT is not built"
SOCK=$BCF_TMP/agent.sock
bcf_secret "$BCF_TMP/secret"

# ba_try OP PATH: run one system call on PATH in python, print "ok" or the
# errno's name.  OP: stat, listdir, getxattr16 (getxattr of user.x into a
# 16-byte buffer, through libc: python's own would ask for more)
ba_try()
{
	timeout 20 python3 - "$@" <<'PY' || echo "python3 failed or hung: $?"
import errno, os, sys
op, path = sys.argv[1], sys.argv[2]
try:
    if op == "stat":
        os.stat(path)
    elif op == "listdir":
        os.listdir(path)
    elif op == "getxattr16":
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.getxattr.restype = ctypes.c_ssize_t
        buf = ctypes.create_string_buffer(16)
        n = libc.getxattr(path.encode(), b"user.x", buf, ctypes.c_size_t(16))
        if n < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        if buf.raw[:n] != b"0123456789abcdef":
            print("value", buf.raw[:n])
            sys.exit(0)
    else:
        sys.exit("unknown op " + op)
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}

# ba_timed_stat PATH: stat PATH in python; print the errno's name (or ok)
# and the milliseconds the system call took, python's start left out
ba_timed_stat()
{
	timeout 30 python3 - "$1" <<'PY' || echo "python3 failed or hung: $?"
import errno, os, sys, time
t0 = time.monotonic()
try:
    os.stat(sys.argv[1])
    r = "ok"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
print(r, int((time.monotonic() - t0) * 1000))
PY
}

# ba_expect WHAT OP PATH ERRNO_NAME_OR_ok
ba_expect()
{
	local got

	got=$(ba_try "$2" "$3")
	bcf_eq "$MODE: $1" "$4" "$got"
}

# ba_mount MODE [SECRET_FILE]: start the fake in MODE and mount it.  The
# fake serves one session: once it is gone, requests wait for a new agent
# for reconnect_timeout (2 s here), then fail with EIO.
ba_mount()
{
	local opts=transport=shm,reconnect_timeout=2${BA_OPTS:+,$BA_OPTS}

	MODE=$1
	rm -f "$SOCK"
	: > "$BCF_TMP/agent.ready"
	"$BADAGENT" "$SOCK" "$MODE" ${2:+"$2"} > "$BCF_TMP/agent.ready" \
		2>> "$BCF_TMP/agent.log" &
	BCF_AGENT_PID=$!
	bcf_wait_for 10 grep -q '^ready$' "$BCF_TMP/agent.ready" ||
		bcf_hard "$MODE: the fake agent did not start"
	[ -n "${2:-}" ] && opts=$opts,secret_file=$2
	"$BCF_FS" "unix:$SOCK" "$BCF_MNT" -f -o "$opts" \
		2>> "$BCF_TMP/fs.log" &
	BCF_FS_PID=$!
	if ! bcf_wait_for 20 bcf_mount_up; then
		cat "$BCF_TMP/fs.log" "$BCF_TMP/agent.log" >&2
		bcf_fail "$MODE: bluecachefs did not mount the fake agent"
	fi
}

# ba_umount PATTERN COUNT: the daemon is still up; unmount it (it must
# exit 0), the fake must see the session end and exit 0; then fs.log must
# hold COUNT lines matching PATTERN (COUNT "+" for at least one) and no
# other "error" line.  The logs of the mode are then set aside.
ba_umount()
{
	local pat=$1 count=$2 n lines st

	# the daemon only: the fake may be gone with a session given up
	bcf_running "$BCF_FS_PID" ||
		bcf_fail "$MODE: the daemon died under the bad agent"
	bcf_umount
	if ! bcf_wait_for 10 bcf_pid_gone "$BCF_AGENT_PID"; then
		bcf_dump_procs "$BCF_AGENT_PID"
		bcf_fail "$MODE: the fake agent did not see the session end"
	fi
	wait "$BCF_AGENT_PID"
	st=$?
	BCF_AGENT_PID=
	[ "$st" -eq 0 ] || bcf_fail "$MODE: the fake agent exited with $st"
	if [ -n "$pat" ]; then
		n=$(grep -cE "$pat" "$BCF_TMP/fs.log")
		if [ "$count" = + ]; then
			[ "$n" -ge 1 ] ||
				bcf_fail "$MODE: no log line matches '$pat'"
		else
			bcf_eq "$MODE: log lines matching '$pat'" "$count" "$n"
		fi
	fi
	lines=$(grep -E 'error|Sanitizer|runtime error|SUMMARY:' \
		"$BCF_TMP/fs.log" "$BCF_TMP/agent.log")
	[ -n "$pat" ] && lines=$(printf '%s\n' "$lines" | grep -Ev "$pat")
	if [ -n "$lines" ]; then
		printf '%s\n' "$lines" >&2
		bcf_fail "$MODE: unexpected log lines"
	fi
	cat "$BCF_TMP/fs.log" >> "$BCF_TMP/fs.all"
	cat "$BCF_TMP/agent.log" >> "$BCF_TMP/agent.all"
	: > "$BCF_TMP/fs.log"
	: > "$BCF_TMP/agent.log"
}

# ---- the control: a fake agent that behaves ----------------------------
ba_mount none
out=$(timeout 20 ls -l "$BCF_MNT" 2>&1) ||
	bcf_fail "none: ls -l failed: $out"
bcf_eq "none: files ls -l lists" 4 "$(printf '%s\n' "$out" | grep -c '^-')"
ba_expect "getxattr of size 16" getxattr16 "$BCF_MNT/a" ok
ba_expect "stat of a" stat "$BCF_MNT/a" ok
ba_expect "stat of bad" stat "$BCF_MNT/bad" ENOENT
ba_umount '' 0

# ---- a READDIR reply in the other form ---------------------------------
ba_mount readdir-form "$BCF_TMP/secret"
out=$(timeout 20 ls -l "$BCF_MNT" 2>&1)
st=$?
[ $st -ne 124 ] || bcf_fail "readdir-form: ls -l hung"
[ $st -ne 0 ] || bcf_fail "readdir-form: ls -l listed a short directory: $out"
case $out in
*"Input/output error"*) ;;
*) bcf_fail "readdir-form: ls -l failed otherwise than with EIO: $out" ;;
esac
grep -q 'READDIR plus: answering plain' "$BCF_TMP/agent.log" ||
	bcf_hard "readdir-form: the fake never sent its plain entries"
# the session itself is fine: the bad reply was the agent's only fault
ba_expect "stat of b after" stat "$BCF_MNT/b" ok
ba_umount 'READDIR reply does not parse' 1

# ---- more extended-attribute bytes than asked for ----------------------
ba_mount xattr-oversize "$BCF_TMP/secret"
ba_expect "getxattr of size 16" getxattr16 "$BCF_MNT/a" EIO
# getfattr asks for more than 64 bytes: only a small buffer sees it
ba_expect "getxattr of size 16, again" getxattr16 "$BCF_MNT/b" EIO
ba_expect "stat of b after" stat "$BCF_MNT/b" ok
n=$(grep -c 'answering 64 bytes' "$BCF_TMP/agent.log")
[ "$n" -ge 1 ] || bcf_hard "xattr-oversize: the fake never answered 64 bytes"
ba_umount 'answered 64 bytes of an extended attribute when 16 were' "$n"

# ---- garbage for a reply, and a reply to no request --------------------
for MODE in garbage unknown-id; do
	ba_mount "$MODE"
	ba_expect "stat of a before" stat "$BCF_MNT/a" ok
	# the request the junk answered fails at once, not sent again to
	# wait for a new agent (that would take reconnect_timeout)
	read -r got ms <<< "$(ba_timed_stat "$BCF_MNT/bad")"
	bcf_eq "$MODE: stat of bad" EIO "$got"
	[ "$ms" -lt 1500 ] ||
		bcf_fail "$MODE: stat of bad took $ms ms: it waited for a new agent"
	grep -q 'LOOKUP bad: answering' "$BCF_TMP/agent.log" ||
		bcf_hard "$MODE: the fake never misbehaved"
	# the session is given up: what the kernel has not cached waits for
	# a new agent, and fails after reconnect_timeout
	ba_expect "stat of a2 after" stat "$BCF_MNT/a2" EIO
	ba_expect "listing after" listdir "$BCF_MNT" EIO
	ba_expect "stat of c after" stat "$BCF_MNT/c" EIO
	ba_umount 'bad frame from agent' +
done

# ---- an agent at work on a slow store, and a hung one ------------------
# ba_stalled MODE LINE: mount the fake in MODE, then stat bad, whose LOOKUP
# it leaves unanswered (LINE in its log says so): EIO, after $ms ms
ba_stalled()
{
	ba_mount "$1"
	ba_expect "stat of a before" stat "$BCF_MNT/a" ok
	read -r got ms <<< "$(ba_timed_stat "$BCF_MNT/bad")"
	bcf_eq "$1: stat of bad" EIO "$got"
	echo "$1: the LOOKUP never answered failed after $ms ms"
	grep -q "LOOKUP bad: $2" "$BCF_TMP/agent.log" ||
		bcf_hard "$1: the fake never misbehaved"
}

# timeout=1: the LOOKUP of bad is past its timeout after a second
BA_OPTS=timeout=1,busy_timeout=6
ba_stalled busy 'never answered'
[ "$ms" -ge 5500 ] || bcf_fail "busy: stat of bad failed after $ms ms," \
	"before busy_timeout (6 s), with the agent answering PINGs"
[ "$ms" -lt 20000 ] ||
	bcf_fail "busy: stat of bad took $ms ms: busy_timeout (6 s) did not end it"
n=$(grep -c '^badagent: PING$' "$BCF_TMP/agent.log")
[ "$n" -ge 2 ] || bcf_fail "busy: $n PING(s) while the LOOKUP waited"
# the session goes on
ba_expect "stat of a2 after" stat "$BCF_MNT/a2" ok
ba_umount '' 0

ba_stalled mute 'mute from now on'
[ "$ms" -lt 4500 ] || bcf_fail "mute: stat of bad took $ms ms: an agent" \
	"that answers nothing was waited for past the timeout (1 s)"
ba_expect "stat of a2 after" stat "$BCF_MNT/a2" EIO
# more requests than the agent takes at once (16), each left unanswered:
# they must still fail, not wait for a request slot the agent never
# gives back
pids=
for i in $(seq 1 24); do
	ba_timed_stat "$BCF_MNT/m$i" > "$BCF_TMP/mute.$i" &
	pids="$pids $!"
done
wait $pids
for i in $(seq 1 24); do
	read -r got ms < "$BCF_TMP/mute.$i"
	bcf_eq "mute: stat of m$i, 24 at once" EIO "$got"
	[ "$ms" -lt 15000 ] ||
		bcf_fail "mute: stat of m$i, 24 at once, took $ms ms"
done
read -r got ms <<< "$(ba_timed_stat "$BCF_MNT/m25")"
bcf_eq "mute: stat of m25 after" EIO "$got"
[ "$ms" -lt 4500 ] || bcf_fail "mute: stat of m25 after took $ms ms"
ba_umount '' 0

# an agent that reads nothing for 8 s (a PING waits unread) but says it
# is at work: waited for as the busy one is
ba_stalled busy-notify 'never answered, busy for 8 s'
grep -q 'LOOKUP bad: never answered, busy for 8 s, saying so' \
	"$BCF_TMP/agent.log" ||
	bcf_fail "busy-notify: the daemon did not ask for BCP_FEAT_BUSY"
[ "$ms" -ge 5500 ] || bcf_fail "busy-notify: stat of bad failed after" \
	"$ms ms, before busy_timeout (6 s), with the agent saying it is busy"
[ "$ms" -lt 20000 ] || bcf_fail "busy-notify: stat of bad took $ms ms:" \
	"busy_timeout (6 s) did not end it"
# read again 2 s later: past the timeout, but the agent said it is busy
ba_expect "stat of a2 after" stat "$BCF_MNT/a2" ok
ba_umount '' 0
BA_OPTS=
