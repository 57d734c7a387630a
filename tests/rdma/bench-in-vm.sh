# SPDX-License-Identifier: GPL-2.0-or-later
#
# bench-in-vm.sh - sourced inside the rdma VM by bench-vm.sh.  The same
# total size through the raw verbs tools and through a bluecachefs mount
# (transport rdma, agent --rdma-listen on the same device), sequential,
# 1 MiB messages and 1 MiB I/Os.
ulimit -l unlimited
mb=${BCF_BENCH_MB:-256}
ip=${RDMA_IP:-198.18.0.1}
dev=${RDMA_DEV:-rxe0}
iters=$mb
tmp=$(mktemp -d /tmp/bench.XXXXXX)

# perftest: the server in the background, the client prints MiB/s
perf()
{
	"$1" -d "$dev" -x 1 -s 1048576 -n "$iters" -F > "$tmp/$1.srv" 2>&1 &
	sleep 1
	"$1" -d "$dev" -x 1 -s 1048576 -n "$iters" -F "$ip" > "$tmp/$1.cli" 2>&1
	wait
	# columns: bytes iterations BW-peak BW-average MsgRate
	awk '$1 == 1048576 { print $4 }' "$tmp/$1.cli" | tail -1
}
wbw=$(perf ib_write_bw)
rbw=$(perf ib_read_bw)

# bluecachefs over rdma
mkdir -p "$tmp/back" "$tmp/mnt"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/secret"
chmod 600 "$tmp/secret"
port=18517
"$top_builddir/agent/bluecache-agent" --root "$tmp/back" \
	--listen "tcp://$ip:$port" --rdma-listen "$ip:0" \
	--secret-file "$tmp/secret" --foreground \
	${BCF_BENCH_AGENT_ARGS:-} 2> "$tmp/agent.log" &
apid=$!
sleep 2
"$top_builddir/fs/bluecachefs" "tcp://$ip:$port" "$tmp/mnt" \
	-o "transport=rdma,secret_file=$tmp/secret" 2> "$tmp/fs.log"
sleep 1
grep -q 'rdma session .* connected' "$tmp/agent.log" ||
	echo "bench: WARNING: the mount is not on rdma"
mbps()
{
	# MiB/s (perftest's MB) from dd's "... copied, S s, ..." line
	awk -v mb="$mb" '/copied/ { for (i = 1; i <= NF; i++)
		if ($i == "s,") printf "%.1f\n", mb / $(i - 1) }'
}
fw=$(dd if=/dev/zero of="$tmp/mnt/big" bs=1M count="$mb" conv=fsync 2>&1 |
	mbps)
echo 3 > /proc/sys/vm/drop_caches
fusermount3 -u "$tmp/mnt"
"$top_builddir/fs/bluecachefs" "tcp://$ip:$port" "$tmp/mnt" \
	-o "transport=$topt,secret_file=$tmp/secret" 2>> "$tmp/fs.log"
sleep 1
fr=$(dd if="$tmp/mnt/big" of=/dev/null bs=1M 2>&1 | mbps)
fusermount3 -u "$tmp/mnt"
kill "$apid"
wait "$apid"

echo "bench: $mb MiB, 1 MiB messages / I/Os, $dev in a TCG guest"
echo "bench: ib_write_bw        $wbw MiB/s"
echo "bench: ib_read_bw         $rbw MiB/s"
echo "bench: bluecachefs read   $fr MiB/s (agent RDMA WRITEs)"
echo "bench: bluecachefs write  $fw MiB/s (agent RDMA READs)"
awk -v fr="$fr" -v fw="$fw" -v w="$wbw" -v r="$rbw" 'BEGIN {
	if (w > 0) printf "bench: read  / ib_write_bw = %.2f\n", fr / w
	if (r > 0) printf "bench: write / ib_read_bw  = %.2f\n", fw / r
}'
grep -E 'error' "$tmp/agent.log" "$tmp/fs.log"
rm -rf "$tmp"
exit 0
