#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# bluecache-agent's command line: --help and the man page list the same
# options, every key of the example configuration is an option, the
# refusal to listen on a non-loopback address without a secret is clear,
# and bad usage exits 2.
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

# a configuration file is read, and the command line overrides it
printf '[agent]\nroot = %s\nlisten = tcp://0.0.0.0:1\nlog-level = debug\n' \
	"$tmp/root" > "$tmp/c.conf"
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
echo "PASS"
exit 0
