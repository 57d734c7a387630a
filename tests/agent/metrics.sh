#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# bluecache-agent --metrics-listen: a non-loopback address is refused
# without a secret (and served with one), ADDR without a port is refused,
# /healthz answers 200 while the agent serves, /metrics passes promtool
# (skipped with a message when promtool is missing) and lists every family
# doc/metrics.md documents, and the endpoint stops with the agent.
set -u
agent="$top_builddir/agent/bluecache-agent"
http="python3 $top_srcdir/tests/fs/metrics-http.py"
doc="$top_srcdir/doc/metrics.md"
[ -x "$agent" ] || { echo "no $agent"; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/agent_metrics.XXXXXX") || exit 99
pid=
cleanup()
{
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && cat "$tmp/log"; exit 1; }
mkdir "$tmp/root"

# start ARGS...: the agent in the background; sets pid, port
start()
{
	: > "$tmp/ready"
	"$agent" --root "$tmp/root" --listen "unix:$tmp/a.sock" --foreground \
		--ready-fd 3 "$@" 3>"$tmp/ready" 2>"$tmp/log" &
	pid=$!
	n=0
	while ! grep -q ready "$tmp/ready"; do
		n=$((n + 1))
		[ $n -lt 100 ] || fail "the agent did not become ready"
		kill -0 "$pid" 2>/dev/null || fail "the agent exited"
		sleep 0.1
	done
	port=$(sed -n 's|.*metrics on http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' \
		"$tmp/log")
	[ -n "$port" ] || fail "the agent did not say where its metrics are"
}

timeout 10 "$agent" --root "$tmp/root" --listen "unix:$tmp/a.sock" \
	--foreground --metrics-listen 0.0.0.0:0 > "$tmp/log" 2>&1 &&
	fail "served metrics on 0.0.0.0 without a secret"
grep -q 'refusing to serve metrics on 0.0.0.0:0 without a secret' \
	"$tmp/log" || fail "refusal not explained"
timeout 10 "$agent" --root "$tmp/root" --listen "unix:$tmp/a.sock" \
	--foreground --metrics-listen 127.0.0.1 > "$tmp/log" 2>&1 &&
	fail "took an address without a port"
grep -q 'expected ADDR:PORT' "$tmp/log" || fail "no port: not explained"

(umask 077 && head -c 32 /dev/urandom | od -An -tx1 > "$tmp/secret")
start --secret-file "$tmp/secret" --metrics-listen 0.0.0.0:0
url=http://127.0.0.1:$port
[ "$($http status "$url/healthz")" = 200 ] || fail "/healthz is not 200"
$http get "$url/metrics" > "$tmp/m" || fail "/metrics"
if command -v promtool > /dev/null 2>&1; then
	promtool check metrics < "$tmp/m" > "$tmp/lint" 2>&1 ||
		{ cat "$tmp/lint"; fail "promtool refuses /metrics"; }
else
	echo "SKIP step: promtool is missing (Debian's prometheus package)"
fi
# every family served is documented, and every documented one served
sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$tmp/m" | sort > "$tmp/served"
grep -o '^| `bluecache_agent_[a-z_]*`' "$doc" | tr -d '|` ' | sort \
	> "$tmp/documented"
diff -u "$tmp/documented" "$tmp/served" ||
	fail "doc/metrics.md and /metrics list different agent metrics"
kill "$pid"
wait "$pid"
pid=
$http status "$url/healthz" > /dev/null 2>&1 &&
	fail "the endpoint outlived the agent"
grep -E 'error|Sanitizer' "$tmp/log" && fail "error lines in the log"
exit 0
