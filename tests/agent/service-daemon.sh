#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# bluecache-agent as a daemon: detached, it lets go of the caller's stdout
# and stderr (a pipe from the caller ends), logs to --log-file; SIGHUP
# reopens the log file, applies what may change live from the
# configuration file, and keeps the rest with a warning.  The paths are
# relative to the directory it was started in (the detached agent's is /):
# the configuration file, the log file and the socket it removes at exit.
set -u
agent="$top_builddir/agent/bluecache-agent"
[ -x "$agent" ] || { echo "no $agent"; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/service-daemon.XXXXXX") || exit 99
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && cat "$tmp/log"; exit 1; }
wait_for() {	# wait_for SECONDS COMMAND...
	n=$(($1 * 10)); shift
	while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.1; n=$((n - 1)); done
	return 1
}

mkdir "$tmp/root"
cat > "$tmp/a.conf" <<EOC
[agent]
root = $tmp/root
listen = unix:s
workers = 1
queue-depth = 4
log-level = info
max-sessions = 64
EOC
# the caller's pipe must end when the agent is ready, not when it exits
timeout 10 sh -c "cd '$tmp' && '$agent' --config a.conf --log-file log \
	2>&1 | cat > '$tmp/out'"
rc=$?
[ $rc -ne 124 ] || fail "a detached agent kept the caller's pipe open"
[ $rc -eq 0 ] || fail "daemon start exit $rc"
wait_for 5 [ -S "$tmp/s" ] || fail "no socket"
wait_for 5 grep -q 'serving ' "$tmp/log" || fail "nothing logged to --log-file"
pid=$(fuser "$tmp/log" 2> /dev/null | tr -d ' ') ||
	pid=$(pgrep -n -f "bluecache-agent --config a.conf --log-file log")
[ -n "$pid" ] || fail "cannot find the agent's pid"
grep -q 'serving ' "$tmp/out" || fail "start-up lines did not reach the caller"

# SIGHUP: live keys change, fixed ones are kept with a warning
mv "$tmp/log" "$tmp/log.1"
sed -i -e 's/^log-level = info/log-level = debug/' \
	-e 's/^max-sessions = 64/max-sessions = 32/' \
	-e 's/^queue-depth = 4/queue-depth = 8/' "$tmp/a.conf"
kill -HUP "$pid"
wait_for 5 grep -q 'SIGHUP: reloaded' "$tmp/log" 2> /dev/null ||
	fail "no reload line in the reopened log file"
grep -q "SIGHUP: reloaded $tmp/a.conf: log-level info -> debug, max-sessions 64 -> 32$" \
	"$tmp/log" || fail "the reload line does not say what changed"
grep -q "warning: SIGHUP: queue-depth changed in $tmp/a.conf; kept as they are until a restart" \
	"$tmp/log" || fail "no warning for a key fixed at start-up"

# at debug level a refused request names its object and the session by
# its peer, the same in every line
fs="$top_builddir/fs/bluecachefs"
if [ -c /dev/fuse ] && [ -x "$fs" ]; then
	mkdir "$tmp/m"
	timeout 20 "$fs" "unix:$tmp/s" "$tmp/m" -o transport=shm ||
		fail "cannot mount the agent"
	stat "$tmp/m/nope" > /dev/null 2>&1 && fail "stat of a missing name"
	fusermount3 -u "$tmp/m" || fail "cannot unmount"
	wait_for 5 grep -q "LOOKUP 2/'nope': No such file or directory" \
		"$tmp/log" || fail "the debug line does not name the object"
	grep -q "session unix:pid=[0-9]*,uid=[0-9]*: authenticated (id " \
		"$tmp/log" || fail "the session is not named by its peer"
fi

# a broken file changes nothing
echo "bogus-key = 1" >> "$tmp/a.conf"
kill -HUP "$pid"
wait_for 5 grep -q 'not reloaded' "$tmp/log" || fail "a broken file was not refused"
grep -q "line 8: unknown configuration key 'bogus-key'" "$tmp/log" ||
	fail "the broken line is not named"

kill -TERM "$pid"
wait_for 10 eval '! kill -0 "$pid" 2> /dev/null' || fail "no exit on SIGTERM"
pid=
grep -q 'summary:' "$tmp/log" || fail "no summary in the log file"
[ ! -e "$tmp/s" ] || fail "socket left behind"
echo PASS
exit 0
