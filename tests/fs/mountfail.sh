#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# mountfail.sh - start-up failures of bluecachefs (without -f, the way it
# is normally started): an agent that is not listening, a wrong secret, a
# malformed AGENT string, a missing local: directory, options with values
# that are not numbers, a missing mountpoint, a host name that does not
# resolve, a mountpoint whose daemon was killed, and a second mount on the
# same mountpoint.  Each must exit non-zero within a few seconds with one
# line on stderr that names the problem (the exact line where the test
# knows it), and leave no mount and no process behind.  A good mount in
# the same mode is the control: it returns, silently, only once the mount
# is usable.
. "$(dirname "$0")/lib.sh"
bcf_init

# procs_of PATTERN: pids of processes whose command line contains PATTERN
procs_of()
{
	local p

	for p in /proc/[0-9]*; do
		case $(cat "$p/comm" 2>/dev/null) in
		bluecache*) ;;
		*) continue ;;
		esac
		tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF -- "$1" &&
			echo "${p#/proc/}"
	done
}

# none_of PATTERN: no such process (a function, so that each poll of
# bcf_wait_for looks again)
none_of()
{
	test -z "$(procs_of "$1")"
}

nfail=0
# expect_fail NAME REGEX AGENT [OPTS]: the mount must fail like described
expect_fail()
{
	local name=$1 re=$2 agent=$3 opts=${4:-} mnt=$BCF_TMP/m-$1 t0 rc el
	local err=$BCF_TMP/$1.err

	mkdir "$mnt"
	t0=$(date +%s%N)
	timeout 30 "$BCF_FS" "$agent" "$mnt" ${opts:+-o "$opts"} 2> "$err"
	rc=$?
	el=$((($(date +%s%N) - t0) / 1000000))
	bcf_log "$name: exit $rc after ${el} ms: $(head -3 "$err")"
	if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
		echo "FAIL $name: bluecachefs $agent exited $rc, expected" \
			"a failure" >&2
		nfail=$((nfail + 1))
	elif [ $el -gt 12000 ]; then
		echo "FAIL $name: took $el ms to fail" >&2
		nfail=$((nfail + 1))
	fi
	if [ "$(grep -c . "$err")" -ne 1 ]; then
		echo "FAIL $name: expected one line on stderr, got:" >&2
		cat "$err" >&2
		nfail=$((nfail + 1))
	elif ! grep -qiE "$re" "$err"; then
		echo "FAIL $name: message does not match /$re/: $(cat "$err")" >&2
		nfail=$((nfail + 1))
	fi
	if bcf_is_mounted "$mnt"; then
		echo "FAIL $name: $mnt is still mounted" >&2
		fusermount3 -uz "$mnt"
		nfail=$((nfail + 1))
	fi
	if bcf_wait_for 5 none_of "$mnt"; then
		:
	else
		echo "FAIL $name: processes left: $(procs_of "$mnt")" >&2
		kill $(procs_of "$mnt") 2>/dev/null
		nfail=$((nfail + 1))
	fi
}

# expect_line NAME LINE LEFT ARGS...: bluecachefs ARGS fails with LINE
# alone on stderr, and leaves no process whose command line has LEFT
# (- when another mount there has one)
expect_line()
{
	local name=$1 line=$2 left=$3 err=$BCF_TMP/$1.err rc

	shift 3
	timeout 30 "$BCF_FS" "$@" 2> "$err"
	rc=$?
	bcf_log "$name: exit $rc: $(head -3 "$err")"
	if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
		echo "FAIL $name: bluecachefs $* exited $rc, expected" \
			"a failure" >&2
		nfail=$((nfail + 1))
	fi
	if [ "$(cat "$err")" != "$line" ]; then
		echo "FAIL $name: expected the line: $line" >&2
		echo "got:" >&2
		cat "$err" >&2
		nfail=$((nfail + 1))
	fi
	[ "$left" = - ] && return
	if ! bcf_wait_for 5 none_of "$left"; then
		echo "FAIL $name: processes left: $(procs_of "$left")" >&2
		kill $(procs_of "$left") 2>/dev/null
		nfail=$((nfail + 1))
	fi
}

case $BCF_TRANSPORT in
shm) topt=transport=shm ;;
tcp) topt=transport=tcp ;;
esac

# nothing listens on this port (it was free a moment ago) or socket
port=$(bcf_free_port) || bcf_hard "no free port"
expect_fail closed-port 'refused|unreachable|connect' \
	"tcp://127.0.0.1:$port" transport=tcp
expect_fail no-socket 'no such|not found|refused|connect|unreachable' \
	"unix:$BCF_TMP/no-such.sock" "$topt"

# a wrong secret
bcf_secret "$BCF_TMP/right"
bcf_secret "$BCF_TMP/wrong"
if [ "$BCF_TRANSPORT" = tcp ]; then
	port=$(bcf_free_port) || bcf_hard "no free port"
	listen=tcp://127.0.0.1:$port
else
	listen=unix:$BCF_TMP/agent.sock
fi
bcf_start_agent "$BCF_BACK" "$listen" --secret-file "$BCF_TMP/right" ||
	{ cat "$BCF_TMP/agent.log"; bcf_fail "the agent did not start"; }
expect_fail wrong-secret 'secret|auth|denied|permission|EACCES' \
	"$listen" "$topt,secret_file=$BCF_TMP/wrong"
grep -q 'warning' "$BCF_TMP/agent.log" ||
	{ echo "FAIL wrong-secret: the agent logged no warning" >&2
	  nfail=$((nfail + 1)); }
expect_fail no-secret 'secret|auth|denied|permission|EACCES' \
	"$listen" "$topt"
# the control: the right secret mounts (in daemon mode)
mkdir "$BCF_TMP/good"
timeout 30 "$BCF_FS" "$listen" "$BCF_TMP/good" \
	-o "$topt,secret_file=$BCF_TMP/right" 2> "$BCF_TMP/good.err" ||
	{ cat "$BCF_TMP/good.err"; bcf_fail "a good mount of $listen failed"; }
# usable at once: no waiting
bcf_is_mounted "$BCF_TMP/good" || bcf_fail "bluecachefs returned unmounted"
# and silent, as mount(8) and sshfs are
[ -s "$BCF_TMP/good.err" ] &&
	{ echo "FAIL: a good mount printed: $(cat "$BCF_TMP/good.err")" >&2
	  nfail=$((nfail + 1)); }
# a second mount on it is refused before anything starts: no stacking
expect_line twice "bluecachefs: error: $BCF_TMP/good: $listen already mounted" \
	- "$listen" "$BCF_TMP/good" -o "$topt,secret_file=$BCF_TMP/right"
# counted, not fatal: the unmounts below must still run
n=$(awk -v m="$BCF_TMP/good" '$5 == m' /proc/self/mountinfo | wc -l)
[ "$n" -eq 1 ] ||
	{ echo "FAIL twice: $n mounts on $BCF_TMP/good" >&2
	  nfail=$((nfail + 1)); }
n=$(procs_of "$BCF_TMP/good" | wc -l)
[ "$n" -eq 1 ] ||
	{ echo "FAIL twice: $n daemons of $BCF_TMP/good" >&2
	  nfail=$((nfail + 1)); }
echo hello > "$BCF_TMP/good/hello" || bcf_fail "write to a fresh mount"
bcf_eq "read from a fresh mount" hello "$(cat "$BCF_TMP/good/hello")"
bcf_eq "file in the agent's directory" hello "$(cat "$BCF_BACK/hello")"
fusermount3 -u "$BCF_TMP/good" || bcf_fail "fusermount3 -u"
# a stacked mount (counted above) goes too
for i in 1 2 3; do
	bcf_is_mounted "$BCF_TMP/good" && fusermount3 -u "$BCF_TMP/good"
done
bcf_wait_for 10 none_of "$BCF_TMP/good" || {
	bcf_dump_procs $(procs_of "$BCF_TMP/good")
	bcf_fail "bluecachefs still runs after unmount: $(procs_of "$BCF_TMP/good")"
}
bcf_stop_agent || bcf_fail "the agent did not stop"
# the agent's "wrong secret" warnings are expected; nothing else is
mv "$BCF_TMP/agent.log" "$BCF_TMP/agent-secret.log"
grep -E 'error|Sanitizer' "$BCF_TMP/agent-secret.log" &&
	{ echo "FAIL: unexpected agent log lines" >&2; nfail=$((nfail + 1)); }
: > "$BCF_TMP/agent.log"

# a malformed AGENT string
expect_fail bad-agent 'agent|address|invalid|unknown|bogus' \
	"bogus://example" "$topt"
expect_fail bad-port 'agent|address|invalid|port' \
	"tcp://127.0.0.1:99999" transport=tcp
# a missing local: directory
expect_fail missing-local "no-such-dir|no such|not found|directory" \
	"local:$BCF_TMP/no-such-dir" transport=shm

# option values that are not numbers: one line, no usage
mkdir "$BCF_TMP/m-opt"
expect_line max-batch \
	"bluecachefs: error: max_batch=x: give a whole number from 1 to 1024" \
	"$BCF_TMP/m-opt" \
	"local:$BCF_BACK" "$BCF_TMP/m-opt" -o max_batch=x
expect_line attr-timeout \
	"bluecachefs: error: attr_timeout=abc: give a number of seconds, 0 or more (0.5 is half a second)" \
	"$BCF_TMP/m-opt" \
	"local:$BCF_BACK" "$BCF_TMP/m-opt" -o attr_timeout=abc
# a missing mountpoint is named
expect_line no-mountpoint \
	"bluecachefs: error: missing MOUNTPOINT: usage: bluecachefs AGENT MOUNTPOINT [-o opt,...] (see --help)" \
	"$BCF_BACK" \
	"local:$BCF_BACK"
# a name that does not resolve is said so, in the resolver's words
gai=$(python3 -c 'import socket
try:
    socket.getaddrinfo("nosuchhost.invalid", None, type=socket.SOCK_STREAM)
except socket.gaierror as e:
    print(e.strerror)')
if [ -n "$gai" ]; then
	expect_line no-such-host \
		"bluecachefs: error: cannot resolve nosuchhost.invalid: $gai" \
		"$BCF_TMP/m-opt" \
		tcp://nosuchhost.invalid:1 "$BCF_TMP/m-opt" -o transport=tcp
else
	bcf_log "nosuchhost.invalid resolves here: not tried"
fi
# a dead mount: its daemon killed, the mountpoint gives ENOTCONN
mkdir "$BCF_TMP/dead"
"$BCF_FS" "local:$BCF_BACK" "$BCF_TMP/dead" -f 2> "$BCF_TMP/dead.log" &
dead=$!
bcf_wait_for 20 bcf_is_mounted "$BCF_TMP/dead" ||
	{ kill $dead; cat "$BCF_TMP/dead.log"; bcf_fail "no mount to kill"; }
kill -KILL $dead
wait $dead 2>/dev/null
bcf_wait_for 10 none_of "$BCF_TMP/dead" || bcf_fail "the killed mount's agent stays"
expect_line dead-mount \
	"bluecachefs: error: mountpoint $BCF_TMP/dead: Transport endpoint is not connected: its daemon is gone; unmount it first with fusermount3 -u $BCF_TMP/dead" \
	"$BCF_TMP/dead" \
	"local:$BCF_BACK" "$BCF_TMP/dead"
fusermount3 -u "$BCF_TMP/dead" || bcf_fail "fusermount3 -u of the dead mount"
# the control: local: in daemon mode
mkdir "$BCF_TMP/good-local"
timeout 30 "$BCF_FS" "local:$BCF_BACK" "$BCF_TMP/good-local" \
	2> "$BCF_TMP/good.err" ||
	{ cat "$BCF_TMP/good.err"; bcf_fail "a good local: mount failed"; }
[ -s "$BCF_TMP/good.err" ] &&
	{ echo "FAIL: a good mount printed: $(cat "$BCF_TMP/good.err")" >&2
	  nfail=$((nfail + 1)); }
expect_line twice-local \
	"bluecachefs: error: $BCF_TMP/good-local: local:$BCF_BACK already mounted" \
	- \
	"local:$BCF_BACK" "$BCF_TMP/good-local"
n=$(procs_of "$BCF_TMP/good-local" | wc -l)
[ "$n" -eq 1 ] ||
	{ echo "FAIL twice-local: $n daemons of $BCF_TMP/good-local" >&2
	  nfail=$((nfail + 1)); }
bcf_eq "read through local:" hello "$(cat "$BCF_TMP/good-local/hello")"
fusermount3 -u "$BCF_TMP/good-local" || bcf_fail "fusermount3 -u"
for i in 1 2 3; do
	bcf_is_mounted "$BCF_TMP/good-local" &&
		fusermount3 -u "$BCF_TMP/good-local"
done
bcf_wait_for 10 none_of "$BCF_TMP/good-local" || {
	bcf_dump_procs $(procs_of "$BCF_TMP/good-local")
	bcf_fail "processes left after unmount of local:"
}
bcf_wait_for 10 none_of "$BCF_BACK" || {
	bcf_dump_procs $(procs_of "$BCF_BACK")
	bcf_fail "the embedded agent still runs: $(procs_of "$BCF_BACK")"
}

[ $nfail -eq 0 ] || bcf_fail "$nfail start-up failure checks failed"
exit 0
