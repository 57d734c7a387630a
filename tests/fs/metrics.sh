#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# metrics.sh - the metrics of a live mount and of its agent:
#  - with I/O running, the agent's --metrics-listen and the daemon's
#    -o metrics endpoints answer, promtool accepts what they serve (the
#    step is skipped when promtool is missing), and the byte counters agree
#    with what the test did: bytes written through the mount equal the
#    agent's counter for the session's transport and the daemon's own;
#    bytes the agent sent equal what the daemon received;
#  - a change made through a second mount of the agent counts as a
#    notification of an inode in this mount's metrics, and --stats shows it;
#  - bluecachefs --stats prints its table on the mount, and refuses a path
#    that is not on a bluecachefs mount in one line, non-zero;
#  - without a secret, a non-loopback -o metrics address fails the mount;
#  - 200 idle or half-sent scraper connections on each endpoint do not slow
#    reads through the mount more than METRICS_SLOWDOWN allows, and the
#    endpoints serve again once they are gone.
# The agent is started here (unix socket for shm, tcp with a secret) so
# that its endpoint can be reached.
set -u
. "$(dirname "$0")/lib.sh"
bcf_init

HTTP="python3 $top_srcdir/tests/fs/metrics-http.py"
MIB=1048576

# metric NAME{LABELS} FILE: its value (empty when absent)
metric()
{
	awk -v k="$1" '$1 == k { print $2; f = 1 } END { exit !f }' "$2"
}

# port_of LOG: the port of the "metrics on http://HOST:PORT/" line
port_of()
{
	sed -n 's|.*metrics on http://[^ ]*:\([0-9]*\)/metrics.*|\1|p' "$1" |
		tail -1
}

# best_read FILE RUNS: the best of RUNS O_DIRECT reads of FILE, in kB/s
best_read()
{
	local i best=0 r

	for i in $(seq "$2"); do
		# "N bytes (...) copied, S s, R MB/s": N / S
		r=$(LC_ALL=C dd if="$1" of=/dev/null bs=1M iflag=direct 2>&1 |
			awk '/copied/ { print int($1 / $(NF-3) / 1000) }')
		[ -n "$r" ] || bcf_fail "dd of $1 failed"
		[ "$r" -gt "$best" ] && best=$r
	done
	echo "$best"
}

case $BCF_TRANSPORT in
shm)
	bcf_start_agent "$BCF_BACK" "unix:$BCF_TMP/agent.sock" \
		--metrics-listen 127.0.0.1:0 ||
		bcf_fail "the agent did not start"
	agent=unix:$BCF_TMP/agent.sock
	opts=transport=shm
	xport=shm
	;;
tcp)
	BCF_SECRET=$BCF_TMP/secret
	bcf_secret "$BCF_SECRET"
	BCF_PORT=$(bcf_free_port) || bcf_hard "no free port"
	bcf_start_agent "$BCF_BACK" "tcp://127.0.0.1:$BCF_PORT" \
		--secret-file "$BCF_SECRET" --squash none \
		--metrics-listen 127.0.0.1:0 ||
		bcf_fail "the agent did not start"
	agent=tcp://127.0.0.1:$BCF_PORT
	opts=transport=tcp,secret_file=$BCF_SECRET
	xport=tcp
	;;
*)
	bcf_skip "metrics runs over shm and tcp only"
	;;
esac
if [ "$BCF_TRANSPORT" = shm ]; then
	# no secret: a non-loopback endpoint is refused, and the mount fails
	timeout 20 "$BCF_FS" "$agent" "$BCF_MNT" -f \
		-o "$opts,metrics=0.0.0.0:0" 2> "$BCF_TMP/refused.log" &&
		bcf_fail "the daemon served metrics on 0.0.0.0 without a secret"
	grep -q 'refusing to serve metrics on 0.0.0.0:0 without a secret' \
		"$BCF_TMP/refused.log" ||
		{ cat "$BCF_TMP/refused.log" >&2; bcf_fail "refusal not said"; }
	bcf_is_mounted "$BCF_MNT" && bcf_fail "the refused mount stayed"
fi
"$BCF_FS" "$agent" "$BCF_MNT" -f -o "$opts,metrics=127.0.0.1:0" \
	2>>"$BCF_TMP/fs.log" &
BCF_FS_PID=$!
bcf_wait_for 20 bcf_mount_up || {
	cat "$BCF_TMP/fs.log" >&2
	bcf_fail "the mount did not come up"
}
aport=$(port_of "$BCF_TMP/agent.log")
fport=$(port_of "$BCF_TMP/fs.log")
[ -n "$aport" ] || bcf_fail "the agent did not say where its metrics are"
[ -n "$fport" ] || bcf_fail "the daemon did not say where its metrics are"
AURL=http://127.0.0.1:$aport
FURL=http://127.0.0.1:$fport

bcf_eq "agent /healthz" 200 "$($HTTP status "$AURL/healthz")"
bcf_eq "daemon /healthz" 200 "$($HTTP status "$FURL/healthz")"
bcf_eq "agent unknown path" 404 "$($HTTP status "$AURL/nothing")"
bcf_eq "agent POST" 405 "$($HTTP status "$AURL/metrics" POST)"

$HTTP get "$AURL/metrics" > "$BCF_TMP/a0" || bcf_fail "agent /metrics"
$HTTP get "$FURL/metrics" > "$BCF_TMP/f0" || bcf_fail "daemon /metrics"
aw0=$(metric "bluecache_agent_bytes_total{transport=\"$xport\",direction=\"write\"}" "$BCF_TMP/a0") ||
	bcf_fail "no agent byte counter for $xport"
ar0=$(metric "bluecache_agent_bytes_total{transport=\"$xport\",direction=\"read\"}" "$BCF_TMP/a0")
fw0=$(metric 'bluecachefs_bytes_total{direction="write"}' "$BCF_TMP/f0") ||
	bcf_fail "no daemon byte counter"
fr0=$(metric 'bluecachefs_bytes_total{direction="read"}' "$BCF_TMP/f0")

# I/O running while the endpoints are scraped
bcf_gen metrics $((8 * MIB)) > "$BCF_TMP/src"
$HTTP loop 20 "$AURL/metrics" "$FURL/metrics" &
scraper=$!
dd if="$BCF_TMP/src" of="$BCF_MNT/f" bs=64k conv=fsync 2>/dev/null ||
	bcf_fail "write through the mount"
wait $scraper || bcf_fail "a scrape failed during I/O"
dd if="$BCF_MNT/f" of="$BCF_TMP/back-read" bs=1M iflag=direct 2>/dev/null ||
	bcf_fail "O_DIRECT read through the mount"
bcf_same_sha "$BCF_TMP/src" "$BCF_TMP/back-read"

$HTTP get "$AURL/metrics" > "$BCF_TMP/a1" || bcf_fail "agent /metrics"
$HTTP get "$FURL/metrics" > "$BCF_TMP/f1" || bcf_fail "daemon /metrics"
if command -v promtool > /dev/null 2>&1; then
	for f in a1 f1; do
		promtool check metrics < "$BCF_TMP/$f" > "$BCF_TMP/$f.lint" 2>&1 ||
			{ cat "$BCF_TMP/$f.lint" >&2; bcf_fail "promtool refuses $f"; }
	done
else
	bcf_log "SKIP step: promtool is missing (Debian's prometheus package)"
fi
aw1=$(metric "bluecache_agent_bytes_total{transport=\"$xport\",direction=\"write\"}" "$BCF_TMP/a1")
ar1=$(metric "bluecache_agent_bytes_total{transport=\"$xport\",direction=\"read\"}" "$BCF_TMP/a1")
fw1=$(metric 'bluecachefs_bytes_total{direction="write"}' "$BCF_TMP/f1")
fr1=$(metric 'bluecachefs_bytes_total{direction="read"}' "$BCF_TMP/f1")
bcf_eq "agent $xport bytes written" $((8 * MIB)) $((aw1 - aw0))
bcf_eq "daemon bytes written" $((8 * MIB)) $((fw1 - fw0))
[ $((fr1 - fr0)) -ge $((8 * MIB)) ] ||
	bcf_fail "daemon read $((fr1 - fr0)) bytes, expected 8 MiB or more"
bcf_eq "agent $xport bytes read vs the daemon's" $((fr1 - fr0)) \
	$((ar1 - ar0))
for st in dispatch storage; do
	n=$(metric "bluecache_agent_stage_duration_seconds_count{family=\"write\",stage=\"$st\"}" "$BCF_TMP/a1")
	[ "${n:-0}" -gt 0 ] || bcf_fail "no write $st stage samples"
done
n=$(metric 'bluecachefs_requests_total{op="write"}' "$BCF_TMP/f1")
[ "${n:-0}" -ge 128 ] || bcf_fail "daemon counted ${n:-0} writes, not >= 128"
n=$(metric 'bluecache_agent_sessions' "$BCF_TMP/a1")
[ "${n:-0}" -ge 1 ] || bcf_fail "agent counts ${n:-0} sessions"

# a change made through another mount reaches this one as a notification
n0=$(metric 'bluecachefs_notices_total{kind="inode"}' "$BCF_TMP/f1") ||
	bcf_fail "no daemon notice counter"
bcf_mount_extra two "$agent" "$opts" || bcf_fail "mount two did not come up"
stat "$BCF_MNT/f" > /dev/null || bcf_fail "stat f"
echo more >> "$BCF_TMP/two/f" || bcf_fail "append through mount two"
notices_grew()
{
	local n

	$HTTP get "$FURL/metrics" > "$BCF_TMP/f2" || return 1
	n=$(metric 'bluecachefs_notices_total{kind="inode"}' "$BCF_TMP/f2")
	[ "${n:-0}" -gt "$n0" ]
}
bcf_wait_for 10 notices_grew ||
	bcf_fail "no inode notification counted for a change made elsewhere"
bcf_umount_extra two || bcf_fail "mount two did not unmount"

# --stats: the table on the mount (and a path inside it), refusal elsewhere
"$BCF_FS" --stats "$BCF_MNT" --interval 1 --count 2 > "$BCF_TMP/stats" \
	2>&1 || { cat "$BCF_TMP/stats" >&2; bcf_fail "--stats on the mount"; }
grep -q '^op  *ops/s  *err/s  *p50 us  *p90 us  *p99 us$' "$BCF_TMP/stats" ||
	{ cat "$BCF_TMP/stats" >&2; bcf_fail "--stats printed no table"; }
grep -q '^write  *[0-9.]* ' "$BCF_TMP/stats" ||
	{ cat "$BCF_TMP/stats" >&2; bcf_fail "--stats shows no writes"; }
grep -q '^read .* reconnects 0  notices [1-9][0-9]*$' "$BCF_TMP/stats" ||
	{ cat "$BCF_TMP/stats" >&2; bcf_fail "--stats shows no notices"; }
[ "$(grep -c 'ops/s' "$BCF_TMP/stats")" -eq 2 ] ||
	bcf_fail "--interval 1 --count 2 did not print two reports"
"$BCF_FS" --stats "$BCF_MNT/f" > /dev/null 2>&1 ||
	bcf_fail "--stats on a file in the mount"
"$BCF_FS" --stats "$BCF_TMP" > "$BCF_TMP/nostats" 2>&1 &&
	bcf_fail "--stats on a plain directory succeeded"
[ "$(wc -l < "$BCF_TMP/nostats")" -eq 1 ] &&
	grep -q 'not a bluecachefs mount' "$BCF_TMP/nostats" ||
	{ cat "$BCF_TMP/nostats" >&2; bcf_fail "--stats refusal not one line"; }

# hostile scrapers: reads through the mount keep their pace
bcf_gen metrics2 $((32 * MIB)) > "$BCF_MNT/big" || bcf_fail "write big"
quiet=$(best_read "$BCF_MNT/big" 3)
$HTTP hostile 8 "127.0.0.1:$aport" "127.0.0.1:$fport" > "$BCF_TMP/held" &
hostile=$!
bcf_wait_for 10 test -s "$BCF_TMP/held" || bcf_fail "no hostile connections"
busy=$(best_read "$BCF_MNT/big" 3)
wait $hostile
bcf_log "O_DIRECT reads: $((quiet / 1000)) MB/s alone," \
	"$((busy / 1000)) MB/s with 400 scraper connections tried," \
	"$(cat "$BCF_TMP/held") connected"
# bounded slowdown: at least a third of the pace (the scraper process
# itself takes CPU from two shared cores, more so under sanitizers)
[ $((busy * ${METRICS_SLOWDOWN:-3})) -ge "$quiet" ] ||
	bcf_fail "reads slowed from $quiet to $busy kB/s"
# once they are gone (or timed out), the endpoints serve again
bcf_wait_for 10 $HTTP get "$AURL/metrics" > /dev/null ||
	bcf_fail "agent endpoint did not recover"
bcf_wait_for 10 $HTTP get "$FURL/metrics" > /dev/null ||
	bcf_fail "daemon endpoint did not recover"
bcf_umount
exit 0
