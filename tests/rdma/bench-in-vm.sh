# SPDX-License-Identifier: GPL-2.0-or-later
#
# bench-in-vm.sh - sourced inside the rdma VM by bench-vm.sh.  The same
# total size through the raw verbs tools and through a bluecachefs mount
# (transport rdma, agent --rdma-listen on the same device), sequential,
# 1 MiB messages and 1 MiB I/Os, BCF_BENCH_RUNS times (default 3) in this
# one boot, interleaved: ib_write_bw, ib_read_bw, a bluecachefs write
# (dd conv=fsync) and a cold bluecachefs read (page cache dropped, fresh
# mount).  Each bluecachefs phase has its own agent, whose shutdown
# summary gives the segments per batch and proves the bytes went through
# it; each mount is checked to be on rdma, else the benchmark fails.
#
# Prints the human-readable figures, and writes the medians and every
# run's figures as JSON to /out/rdma-results.json (rxe-vm.sh copies /out
# to $RXE_VM_OUT on the host).  The backing directory is a tmpfs, as in
# `make bench`.  Status: 0, or 1 when a measurement failed.
ulimit -l unlimited
mb=${BCF_BENCH_MB:-256}
runs=${BCF_BENCH_RUNS:-3}
ip=${RDMA_IP:-198.18.0.1}
dev=${RDMA_DEV:-rxe0}
port=18517
bytes=$((mb * 1048576))
json=/out/rdma-results.json
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench.XXXXXX")

bench_die()
{
	echo "bench: FAILED: $*" >&2
	fusermount3 -uz "$tmp/mnt" 2>/dev/null
	[ -n "${fpid:-}" ] && kill "$fpid" 2>/dev/null
	[ -n "${apid:-}" ] && kill "$apid" 2>/dev/null
	wait
	umount -l "$tmp/back" 2>/dev/null
	rm -rf "$tmp"
	exit 1
}

# perftest: the server in the background, the client prints MiB/s
# (perftest's MB/sec are 2^20 bytes per second)
perf()
{
	local tool=$1 spid bw try

	timeout 300 "$tool" -d "$dev" -x 1 -s 1048576 -n "$mb" -F \
		> "$tmp/$tool.srv" 2>&1 &
	spid=$!
	bw=
	for try in 1 2 3 4 5; do
		sleep 1
		timeout 300 "$tool" -d "$dev" -x 1 -s 1048576 -n "$mb" -F \
			"$ip" > "$tmp/$tool.cli" 2>&1
		# columns: bytes iterations BW-peak BW-average MsgRate
		bw=$(awk '$1 == 1048576 { print $4 }' "$tmp/$tool.cli" |
		     tail -1)
		[ -n "$bw" ] && break
		kill -0 "$spid" 2>/dev/null || break
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	if [ -z "$bw" ]; then
		cat "$tmp/$tool.srv" "$tmp/$tool.cli" >&2
		return 1
	fi
	echo "$bw"
}

# MiB/s from dd's "N bytes ... copied, S s, ..." line
dd_mibps()
{
	awk '/copied/ { for (i = 1; i <= NF; i++)
		if ($i == "s,") printf "%.1f\n", $1 / $(i - 1) / 1048576 }'
}

# the median of the numeric arguments, or null
median()
{
	printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g |
	awk '{ v[NR] = $1 } END {
		if (!NR) print "null";
		else if (NR % 2) print v[(NR + 1) / 2];
		else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Start an agent logging to $1, mount, and check the mount is on rdma.
bcfs_up()
{
	local alog=$1 ready i

	rm -f "$tmp/ready"
	mkfifo "$tmp/ready"
	"$top_builddir/agent/bluecache-agent" --root "$tmp/back" \
		--listen "tcp://$ip:$port" --rdma-listen "$ip:0" \
		--secret-file "$tmp/secret" --foreground --log-level info \
		--ready-fd 3 ${BCF_BENCH_AGENT_ARGS:-} 3> "$tmp/ready" \
		2> "$alog" &
	apid=$!
	read -r ready < "$tmp/ready"
	[ "$ready" = ready ] || { cat "$alog"; bench_die "no agent"; }
	"$top_builddir/fs/bluecachefs" "tcp://$ip:$port" "$tmp/mnt" -f \
		-o "transport=rdma,secret_file=$tmp/secret" \
		2>> "$tmp/fs.log" &
	fpid=$!
	i=0
	until grep -q " $tmp/mnt fuse" /proc/mounts; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$fpid" 2>/dev/null; then
			cat "$tmp/fs.log"
			bench_die "bluecachefs did not mount"
		fi
		sleep 0.1
	done
	grep -q 'rdma session .* connected' "$alog" || {
		cat "$alog" "$tmp/fs.log"
		bench_die "the mount is not on rdma"
	}
}

# Unmount, stop the agent; sets segs, batches, pulled and pushed from its
# shutdown summary.
bcfs_down()
{
	local alog=$1

	fusermount3 -u "$tmp/mnt" || bench_die "cannot unmount"
	wait "$fpid"
	fpid=
	kill "$apid"
	wait "$apid"
	apid=
	cat "$alog" >> "$tmp/agent.log"
	# shellcheck disable=SC2046
	set -- $(awk '/summary: .* sessions,/ {
		for (i = 1; i <= NF; i++) {
			if ($(i + 1) == "segments") s = $i
			if ($(i + 1) == "bytes" && $(i + 2) == "pulled") pl = $i
			if ($(i + 1) == "bytes" && $(i + 2) == "pushed") ps = $i
		} }
	     /summary: BATCH_PU(LL|SH) / { for (i = 1; i < NF; i++)
		if ($i ~ /^BATCH_PU(LL|SH)$/) b += $(i + 1) }
	     END { printf "%.0f %.0f %.0f %.0f\n", s, b, pl, ps }' "$alog")
	segs=$1 batches=$2 pulled=$3 pushed=$4
}

# "$1 / $2 / $3" with one decimal, or null
per()
{
	awk -v a="$1" -v b="$2" -v u="${3:-1}" 'BEGIN {
		if (b > 0) printf "%.1f\n", a / b / u; else print "null" }'
}

mkdir -p "$tmp/back" "$tmp/mnt"
mount -t tmpfs -o size=$((mb + 64))m bcf-bench "$tmp/back" ||
	bench_die "cannot mount a tmpfs for the backing directory"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secret"
chmod 600 "$tmp/secret"
: > "$tmp/fs.log"
: > "$tmp/agent.log"
t0=$(cut -d' ' -f1 /proc/uptime)
W= R= FW= FR= SW= SR= KW= KR= per_run=
run=0
while [ $run -lt "$runs" ]; do
	wbw=$(perf ib_write_bw) || bench_die "ib_write_bw gave no figure"
	rbw=$(perf ib_read_bw) || bench_die "ib_read_bw gave no figure"

	rm -f "$tmp/back/big"
	bcfs_up "$tmp/agent.w.log"
	fw=$(dd if=/dev/zero of="$tmp/mnt/big" bs=1M count="$mb" \
	     conv=fsync 2>&1 | dd_mibps)
	bcfs_down "$tmp/agent.w.log"
	[ -n "$fw" ] || bench_die "the bluecachefs write gave no figure"
	[ "$pushed" -ge "$bytes" ] ||
		bench_die "the agent received $pushed bytes, not $bytes"
	sw=$(per "$segs" "$batches")
	kw=$(per "$pushed" "$segs" 1024)

	sync
	echo 3 > /proc/sys/vm/drop_caches
	bcfs_up "$tmp/agent.r.log"
	fr=$(dd if="$tmp/mnt/big" of=/dev/null bs=1M 2>&1 | dd_mibps)
	bcfs_down "$tmp/agent.r.log"
	[ -n "$fr" ] || bench_die "the bluecachefs read gave no figure"
	[ "$pulled" -ge "$bytes" ] ||
		bench_die "the agent sent $pulled bytes, not $bytes (cached?)"
	sr=$(per "$segs" "$batches")
	kr=$(per "$pulled" "$segs" 1024)

	echo "bench: run $run: ib_write_bw $wbw, ib_read_bw $rbw," \
	     "bluecachefs write $fw, read $fr MiB/s"
	W="$W $wbw" R="$R $rbw" FW="$FW $fw" FR="$FR $fr"
	SW="$SW $sw" SR="$SR $sr" KW="$KW $kw" KR="$KR $kr"
	per_run="$per_run${per_run:+,
}  {\"ib_write_bw_mibps\": $wbw, \"ib_read_bw_mibps\": $rbw,
   \"bcfs_seq_write_mibps\": $fw, \"bcfs_seq_read_mibps\": $fr,
   \"segs_per_batch_write\": $sw, \"segs_per_batch_read\": $sr,
   \"seg_kib_write\": $kw, \"seg_kib_read\": $kr}"
	run=$((run + 1))
done
t1=$(cut -d' ' -f1 /proc/uptime)
# shellcheck disable=SC2086
{
	wbw=$(median $W) rbw=$(median $R) fw=$(median $FW) fr=$(median $FR)
	sw=$(median $SW) sr=$(median $SR) kw=$(median $KW) kr=$(median $KR)
}
# daemon log lines a test would fail on, as JSON strings
bad=$(grep -hE 'error|Sanitizer|SUMMARY:' "$tmp/agent.log" "$tmp/fs.log" |
      sed 's/\\/\\\\/g; s/"/\\"/g; s/^/  "/; s/$/"/' | paste -sd, -)

cat > "$json" <<EOF
{
 "size": $bytes,
 "runs": $runs,
 "device": "$dev",
 "guest_kernel": "$(uname -r)",
 "guest_cpus": $(nproc),
 "on_rdma": true,
 "agent_args": "${BCF_BENCH_AGENT_ARGS:-}",
 "seconds": $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'),
 "ib_write_bw_mibps": $wbw,
 "ib_read_bw_mibps": $rbw,
 "bcfs_seq_write_mibps": $fw,
 "bcfs_seq_read_mibps": $fr,
 "segs_per_batch_write": $sw,
 "segs_per_batch_read": $sr,
 "seg_kib_write": $kw,
 "seg_kib_read": $kr,
 "per_run": [
$per_run
 ],
 "log_lines": [
$bad
 ]
}
EOF

echo "bench: $mb MiB, 1 MiB messages / I/Os, $dev in a TCG guest," \
     "median of $runs run(s)"
echo "bench: ib_write_bw        $wbw MiB/s"
echo "bench: ib_read_bw         $rbw MiB/s"
echo "bench: bluecachefs read   $fr MiB/s (agent RDMA WRITEs," \
     "$sr segs/batch of $kr KiB)"
echo "bench: bluecachefs write  $fw MiB/s (agent RDMA READs," \
     "$sw segs/batch of $kw KiB)"
awk -v fr="$fr" -v fw="$fw" -v w="$wbw" -v r="$rbw" 'BEGIN {
	if (r > 0) printf "bench: read  / ib_read_bw  = %.2f (target 0.9)\n", fr / r
	if (w > 0) printf "bench: read  / ib_write_bw = %.2f\n", fr / w
	if (r > 0) printf "bench: write / ib_read_bw  = %.2f\n", fw / r
}'
[ -n "$bad" ] && echo "bench: unexpected daemon log lines:" &&
	grep -hE 'error|Sanitizer|SUMMARY:' "$tmp/agent.log" "$tmp/fs.log"
umount -l "$tmp/back"
rm -rf "$tmp"
exit 0
