#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# bluecache-agent's command line: --help and the man page list the same
# options, every key of the example configuration is an option, the
# refusal to listen on a non-loopback address without a secret is clear,
# bad usage exits 2, and the store is named by --store, store = or --root,
# each mistake in its spec refused with one line.
set -u
agent="$top_builddir/agent/bluecache-agent"
man="$top_srcdir/doc/bluecache-agent.8"
conf="$top_srcdir/contrib/bluecache-agent.conf"
[ -x "$agent" ] || { echo "no $agent"; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent_cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }

"$agent" --help > "$tmp/help" || fail "--help exits non-zero"
grep -o -- '--[a-z][a-z-]*' "$tmp/help" | sort -u > "$tmp/h"
# man page: option lines are .BR -x ", " \-\-name
grep -o -- '\\-\\-[a-z][a-z\\-]*' "$man" | sed 's/\\//g' | sort -u > "$tmp/m"
diff -u "$tmp/h" "$tmp/m" > "$tmp/d" || { cat "$tmp/d"; fail "--help and man page differ"; }
[ "$(wc -l < "$tmp/h")" -ge 12 ] || fail "too few options in --help"

# every configuration key is a long option
for key in $(sed -n 's/^#* *\([a-z-]*\) *=.*/\1/p' "$conf" | sort -u); do
	grep -qx -- "--$key" "$tmp/h" || fail "config key $key is not an option"
done

"$agent" --version | grep -q '^bluecache-agent [0-9]' || fail "--version"

mkdir "$tmp/root"
"$agent" --root "$tmp/root" --listen tcp://0.0.0.0:0 --foreground \
	> "$tmp/out" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "listened on 0.0.0.0 without a secret"
grep -q 'refusing to listen on tcp://0.0.0.0:0 without a secret' "$tmp/out" ||
	{ cat "$tmp/out"; fail "refusal not explained"; }
grep -q -- '--secret-file' "$tmp/out" || fail "refusal does not say how to fix it"

"$agent" --root "$tmp/root" --no-such-option > "$tmp/out" 2>&1
[ $? -eq 2 ] || fail "bad option does not exit 2"
"$agent" --root "$tmp/root" --queue-depth 0 > "$tmp/out" 2>&1
[ $? -eq 2 ] || fail "queue-depth 0 accepted"
grep -q "invalid value '0' for queue-depth" "$tmp/out" || fail "bad value not explained"
"$agent" --root "$tmp/root" --meta-io async > "$tmp/out" 2>&1
[ $? -eq 2 ] || fail "meta-io async accepted"
grep -q "invalid value 'async' for meta-io" "$tmp/out" || fail "bad meta-io not explained"

# the identity and limit options: bad values name the option and the range
bad() {
	want="$1"; shift
	"$agent" --root "$tmp/root" "$@" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || { cat "$tmp/out"; fail "$* exits $rc, not 2"; }
	[ "$(wc -l < "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "$*: not one line"; }
	grep -q -- "$want" "$tmp/out" || { cat "$tmp/out"; fail "$*: not explained"; }
}
bad "invalid value 'some' for squash: expected none, root or all" --squash some
bad "invalid value '65' for max-regions: expected 1..64" --max-regions 65
bad "invalid value '2T' for max-region-bytes: expected 4K..1024G" \
	--max-region-bytes 2T
bad "invalid value '65' for max-slots: expected 1..queue-depth (64)" \
	--max-slots 65
bad "invalid value '9' for max-slots: expected 1..queue-depth (8)" \
	--max-slots 9 --queue-depth 8
bad "invalid value '0' for max-sessions: expected 1..65536" --max-sessions 0
bad "invalid value '5s' for handshake-timeout: expected 10..600000 ms" \
	--handshake-timeout 5s
bad "invalid value '-1' for xfer-timeout" --xfer-timeout -1
bad "invalid value '15' for max-handles: expected 16..1048576" \
	--max-handles 15
bad "invalid value '4294967295' for anon-uid" --anon-uid 4294967295
bad "invalid value '0' for pool-threads: expected 1..64" --pool-threads 0
printf '[agent]\nroot = %s\nallow-devices = maybe\n' "$tmp/root" > "$tmp/b.conf"
"$agent" --config "$tmp/b.conf" > "$tmp/out" 2>&1
[ $? -eq 2 ] || fail "allow-devices = maybe accepted"
grep -q "invalid value 'maybe' for allow-devices: expected yes or no" \
	"$tmp/out" || { cat "$tmp/out"; fail "bad allow-devices not explained"; }

# too few descriptors for the sessions allowed: one clear line, exit 1
(ulimit -n 200 && exec "$agent" --root "$tmp/root" --listen "unix:$tmp/n" \
	--foreground) > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/out"; fail "tiny descriptor limit: exit $rc"; }
[ "$(wc -l < "$tmp/out")" -eq 1 ] || { cat "$tmp/out"; fail "fd limit: not one line"; }
grep -q 'descriptor limit 200 is too small.*--max-sessions' "$tmp/out" ||
	{ cat "$tmp/out"; fail "tiny descriptor limit not explained"; }

# a configuration file is read, and the command line overrides it
printf '[agent]\nroot = %s\nlisten = tcp://0.0.0.0:1\nlog-level = debug\n' \
	"$tmp/root" > "$tmp/c.conf"
printf 'squash = all\nallow-devices = yes\nmax-region-bytes = 1G\n' \
	>> "$tmp/c.conf"
printf 'max-slots = 2\nhandshake-timeout = 250\nxfer-timeout = 0\n' \
	>> "$tmp/c.conf"
"$agent" --config "$tmp/c.conf" --foreground > "$tmp/out" 2>&1
grep -q 'refusing to listen on tcp://0.0.0.0:1' "$tmp/out" ||
	{ cat "$tmp/out"; fail "config file not read"; }
exec 3> "$tmp/ready"
"$agent" --config "$tmp/c.conf" --listen "unix:$tmp/s" --foreground \
	--ready-fd 3 > "$tmp/out" 2>&1 &
pid=$!
exec 3>&-
i=0
while [ $i -lt 100 ] && ! grep -q ready "$tmp/ready"; do sleep 0.1; i=$((i+1)); done
grep -q ready "$tmp/ready" || { kill $pid; fail "not ready with a config file"; }
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "exit status $rc after SIGTERM"
grep -q 'summary:' "$tmp/out" || fail "no summary"
if grep -q error "$tmp/out"; then cat "$tmp/out"; fail "error in log"; fi

# start-up refusals: exactly one line each, saying what is wrong
exact() {	# exact STATUS LINE ARGS...: the agent prints LINE only
	st="$1" want="$2"; shift 2
	"$agent" "$@" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq "$st" ] || { cat "$tmp/out"; fail "$*: exit $rc, not $st"; }
	[ "$(cat "$tmp/out")" = "$want" ] ||
		{ printf 'got:  %s\nwant: %s\n' "$(cat "$tmp/out")" "$want"; fail "$*"; }
}
E="bluecache-agent: error:"
printf 'x\n' > "$tmp/sec"
chmod 644 "$tmp/sec"
exact 1 "$E secret file $tmp/sec is readable by group or others (mode 0644): run chmod 600 $tmp/sec" \
	--root "$tmp/root" --secret-file "$tmp/sec" --foreground
exact 1 "$E secret file $tmp/nosec: No such file or directory" \
	--root "$tmp/root" --secret-file "$tmp/nosec" --foreground
exact 2 "$E configuration file $tmp/nope.conf: No such file or directory" \
	--root "$tmp/root" --config "$tmp/nope.conf"
printf '[agent]\nroot = %s\nlisen = unix:x\n' "$tmp/root" > "$tmp/typo.conf"
exact 2 "$E configuration file $tmp/typo.conf, line 3: unknown configuration key 'lisen'" \
	--config "$tmp/typo.conf"
printf '[agnt]\nroot = %s\n' "$tmp/root" > "$tmp/sect.conf"
exact 2 "$E configuration file $tmp/sect.conf, line 2: unknown section [agnt] (the keys belong in [agent])" \
	--config "$tmp/sect.conf"
exact 2 "$E invalid value '1000' for slot-size: expected a multiple of 4K (4096 bytes) from 4K to 8M" \
	--root "$tmp/root" -S 1000
: > "$tmp/regular"
exact 1 "$E cannot listen on unix:$tmp/regular: $tmp/regular exists and is not a socket; it will not be replaced" \
	--root "$tmp/root" --listen "unix:$tmp/regular" --foreground
[ -f "$tmp/regular" ] || fail "a regular file at the socket path was removed"
exact 2 "$E invalid value '0999' for socket-mode: expected an octal mode from 0 to 0777" \
	--root "$tmp/root" --socket-mode 0999

# the store: --store SPEC, store = SPEC, --root DIR as the short form
exact 2 "$E --root and --store both given: --root DIR is short for --store posix:DIR; give one" \
	--root "$tmp/root" --store "posix:$tmp/root"
exact 2 "$E --root and --store both given: --root DIR is short for --store posix:DIR; give one" \
	--store "posix:$tmp/root" --root "$tmp/root"
exact 2 "$E store 'bogus:x': expected posix:DIR or cephfs:[PATH][,conf=FILE][,id=NAME][,fs=NAME]" \
	--store bogus:x
exact 2 "$E store posix: needs a directory (posix:DIR)" --store posix:
exact 2 "$E store cephfs: the path 'relative' must be absolute" \
	--store cephfs:relative
exact 2 "$E store cephfs: an empty field in '/a,,id=x'" --store 'cephfs:/a,,id=x'
exact 2 "$E store cephfs: an empty field in '/a,'" --store 'cephfs:/a,'
exact 2 "$E store cephfs: the path '/a' must come first" \
	--store 'cephfs:id=x,/a'
exact 2 "$E store cephfs: unknown option 'key' (conf=, id=, fs=)" \
	--store 'cephfs:/,key=x'
exact 2 "$E store cephfs: id= given twice" --store 'cephfs:/,id=a,id=b'
exact 2 "$E no store: pass --store SPEC or --root DIR (see --help)" \
	--listen "unix:$tmp/x"
exact 2 "$E invalid value '0' for store-timeout: expected 1..3600 seconds" \
	--store "posix:$tmp/root" --store-timeout 0
printf '[agent]\nroot = %s\nstore = posix:%s\n' "$tmp/root" "$tmp/root" \
	> "$tmp/both.conf"
exact 2 "$E configuration file $tmp/both.conf, line 3: root and store both set: root = DIR is short for store = posix:DIR; keep one" \
	--config "$tmp/both.conf"
printf '[agent]\nstore = cephfs:rel\n' > "$tmp/rel.conf"
exact 2 "$E configuration file $tmp/rel.conf, line 2: store cephfs: the path 'rel' must be absolute" \
	--config "$tmp/rel.conf"

# serve ARGS...: the agent starts, says what it serves, stops on SIGTERM
serve() {
	want="$1"; shift
	rm -f "$tmp/sready" "$tmp/ss"
	exec 3> "$tmp/sready"
	"$agent" "$@" --listen "unix:$tmp/ss" --foreground --ready-fd 3 \
		--workers 1 --queue-depth 4 > "$tmp/out" 2>&1 &
	pid=$!
	exec 3>&-
	i=0
	while [ $i -lt 100 ] && ! grep -q ready "$tmp/sready"; do
		sleep 0.1; i=$((i+1))
	done
	grep -q ready "$tmp/sready" ||
		{ kill $pid; cat "$tmp/out"; fail "$*: not ready"; }
	[ -S "$tmp/ss" ] || { kill $pid; fail "$*: no socket"; }
	kill -TERM $pid
	wait $pid
	rc=$?
	[ $rc -eq 0 ] || { cat "$tmp/out"; fail "$*: exit $rc after SIGTERM"; }
	grep -q "serving $want with" "$tmp/out" ||
		{ cat "$tmp/out"; fail "$*: does not say it serves $want"; }
	if grep -q error "$tmp/out"; then cat "$tmp/out"; fail "$*: error in log"; fi
}
serve "$tmp/root" --store "posix:$tmp/root"
serve "$tmp/root" --root "$tmp/root" --store-timeout 5
printf '[agent]\nstore = posix:%s\n' "$tmp/root" > "$tmp/st.conf"
serve "$tmp/root" --config "$tmp/st.conf"
# the command line's --store or --root overrides the file's either
mkdir "$tmp/root2"
serve "$tmp/root2" --config "$tmp/st.conf" --root "$tmp/root2"
printf '[agent]\nroot = %s\n' "$tmp/root" > "$tmp/rt.conf"
serve "$tmp/root2" --config "$tmp/rt.conf" --store "posix:$tmp/root2"

# cephfs: without libcephfs one line says so; with it, a cluster that
# cannot be reached fails at start-up with one line, soon
"$agent" --store cephfs: --listen "unix:$tmp/c" --foreground \
	> "$tmp/out" 2>&1
rc=$?
if grep -q 'built without libcephfs' "$tmp/out"; then
	[ $rc -eq 1 ] || { cat "$tmp/out"; fail "cephfs stub: exit $rc"; }
	[ "$(cat "$tmp/out")" = "$E store cephfs: this bluecache-agent was built without libcephfs (configure --with-cephfs)" ] ||
		{ cat "$tmp/out"; fail "cephfs stub: not one line"; }
	echo "built without libcephfs: not checking a bad ceph.conf"
else
	t0=$(date +%s)
	timeout 60 "$agent" --store 'cephfs:/,conf=/nonexistent' \
		--store-timeout 5 --listen "unix:$tmp/c" --foreground \
		> "$tmp/out" 2>&1
	rc=$?
	t1=$(date +%s)
	[ $rc -eq 1 ] || { cat "$tmp/out"; fail "cephfs bad conf: exit $rc"; }
	[ "$(wc -l < "$tmp/out")" -eq 1 ] ||
		{ cat "$tmp/out"; fail "cephfs bad conf: not one line"; }
	grep -q "^$E .*/nonexistent" "$tmp/out" ||
		{ cat "$tmp/out"; fail "cephfs bad conf: does not name the file"; }
	[ $((t1 - t0)) -le 10 ] || fail "cephfs bad conf: $((t1 - t0)) s"
	# a monitor that does not answer holds the start up to the
	# timeout, but SIGTERM ends it at once, with one line
	printf '[global]\nmon_host = 127.0.0.1:9\nauth_client_required = none\n' \
		> "$tmp/deaf.conf"
	t0=$(date +%s)
	timeout 60 "$agent" --store "cephfs:/,conf=$tmp/deaf.conf" \
		--store-timeout 30 --listen "unix:$tmp/c" --foreground \
		> "$tmp/out" 2>&1 &
	pid=$!
	sleep 1
	kill -TERM $pid
	wait $pid
	rc=$?
	t1=$(date +%s)
	[ $rc -eq 1 ] || { cat "$tmp/out"; fail "cephfs SIGTERM at start: exit $rc"; }
	grep -qx "$E stopped by SIGTERM while opening the store" "$tmp/out" ||
		{ cat "$tmp/out"; fail "cephfs SIGTERM at start: no line"; }
	[ $((t1 - t0)) -le 5 ] || fail "cephfs SIGTERM at start: $((t1 - t0)) s"
	# with a cluster (tests/ceph/ceph-up.sh prints CEPH_CONF and
	# CEPH_FS): --watch yes is refused, auto serves without watching,
	# and /healthz asks the store
	if [ -n "${CEPH_CONF:-}" ] && [ -r "$CEPH_CONF" ]; then
		cs="cephfs:/,conf=$CEPH_CONF${CEPH_FS:+,fs=$CEPH_FS}"
		timeout 60 "$agent" --store "$cs" --watch yes \
			--listen "unix:$tmp/c" --foreground > "$tmp/out" 2>&1
		rc=$?
		[ $rc -eq 1 ] || { cat "$tmp/out"; fail "cephfs --watch yes: exit $rc"; }
		[ "$(grep -c "^$E" "$tmp/out")" -eq 1 ] &&
			grep -q "(--watch yes): only a posix store can be watched" \
				"$tmp/out" ||
			{ cat "$tmp/out"; fail "cephfs --watch yes: not one line"; }
		rm -f "$tmp/cready"
		exec 3> "$tmp/cready"
		"$agent" --store "$cs" --listen "unix:$tmp/c" --foreground \
			--ready-fd 3 --workers 1 --queue-depth 4 \
			--metrics-listen 127.0.0.1:0 > "$tmp/out" 2>&1 &
		pid=$!
		exec 3>&-
		i=0
		while [ $i -lt 300 ] && ! grep -q ready "$tmp/cready"; do
			sleep 0.1; i=$((i+1))
		done
		grep -q ready "$tmp/cready" ||
			{ kill $pid; cat "$tmp/out"; fail "cephfs: not ready"; }
		grep -q "not watching cephfs:" "$tmp/out" ||
			{ kill $pid; cat "$tmp/out"; fail "cephfs: watch auto not off"; }
		port=$(sed -n 's|.*metrics on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' \
			"$tmp/out")
		st=$(python3 "$top_srcdir/tests/fs/metrics-http.py" status \
			"http://127.0.0.1:$port/healthz")
		kill -TERM $pid
		wait $pid
		rc=$?
		[ "$st" = 200 ] || { cat "$tmp/out"; fail "cephfs: /healthz $st"; }
		[ $rc -eq 0 ] || { cat "$tmp/out"; fail "cephfs: exit $rc"; }
		if grep -q error "$tmp/out"; then
			cat "$tmp/out"; fail "cephfs: error in log"
		fi
	else
		echo "no CEPH_CONF: not serving a cephfs store"
	fi
fi

# too little locked memory for the staging slots: one line naming
# RLIMIT_MEMLOCK (CAP_IPC_LOCK would lift the limit: drop it)
drop=
if [ "$(id -u)" -eq 0 ]; then
	command -v setpriv > /dev/null &&
		drop="setpriv --inh-caps=-all --bounding-set=-ipc_lock --"
fi
if [ "$(id -u)" -ne 0 ] || [ -n "$drop" ]; then
	(ulimit -l 1024 && exec $drop "$agent" --root "$tmp/root" \
		--listen "unix:$tmp/m" --workers 2 --queue-depth 16 \
		--slot-size 64K --foreground) > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 1 ] || { cat "$tmp/out"; fail "small memlock limit: exit $rc"; }
	[ "$(cat "$tmp/out")" = "$E RLIMIT_MEMLOCK is 1024 KiB but the staging slots need 2048 KiB (2 worker(s) x queue-depth 16 x slot-size 65536); raise it (ulimit -l, LimitMEMLOCK=), grant CAP_IPC_LOCK, or lower --queue-depth, --slot-size or --workers" ] ||
		{ cat "$tmp/out"; fail "small memlock limit not explained in one line"; }
else
	echo "no setpriv: not checking the memlock message"
fi

# --socket-mode and --socket-group are applied to the bound socket
grp=$(id -gn)
exec 3> "$tmp/ready2"
"$agent" --root "$tmp/root" --listen "unix:$tmp/perm.sock" --foreground \
	--socket-mode 0660 --socket-group "$grp" --ready-fd 3 \
	--workers 1 --queue-depth 4 > "$tmp/out" 2>&1 &
pid=$!
exec 3>&-
i=0
while [ $i -lt 100 ] && ! grep -q ready "$tmp/ready2"; do sleep 0.1; i=$((i+1)); done
grep -q ready "$tmp/ready2" || { kill $pid; cat "$tmp/out"; fail "not ready with --socket-mode"; }
[ "$(stat -c '%a %G' "$tmp/perm.sock")" = "660 $grp" ] ||
	{ kill $pid; fail "socket is $(stat -c '%a %G' "$tmp/perm.sock")"; }
kill -TERM $pid
wait $pid
echo "PASS"
exit 0
