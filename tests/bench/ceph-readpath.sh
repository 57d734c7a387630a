#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# ceph-readpath.sh - where a 4 KiB O_DIRECT read at queue depth 1 spends
# its time on a CephFS: a file of 256 MiB written by one Ceph client (a
# ceph-fuse mount) is read at random by bluecachefs over an agent with
# the cephfs store, once with libcephfs's object cacher on (the default)
# and once off (client_oc = false in the agent's configuration), and by a
# second ceph-fuse mount: IOPS and median latency, side by side, on one
# throwaway cluster (tests/ceph/ceph-up.sh).  Needs root, fio, ceph-fuse
# and an agent built --with-cephfs; run from the build tree:
#     tests/bench/ceph-readpath.sh [SECONDS]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
rt=${1:-6}
for t in fio ceph-fuse python3; do
	command -v $t >/dev/null || { echo "ceph-readpath: no $t" >&2; exit 77; }
done
[ -x "$top/agent/bluecache-agent" ] || { echo "ceph-readpath: no agent/bluecache-agent in $top" >&2; exit 2; }
T=$(mktemp -d /tmp/bcf-readpath.XXXXXX) || exit 2
C=$T/ceph
AP=
cleanup()
{
	fusermount3 -u "$T/mnt" 2>/dev/null
	fusermount3 -u "$T/cf2" 2>/dev/null
	[ -n "$AP" ] && kill "$AP" 2>/dev/null
	wait
	umount "$T/cf" 2>/dev/null
	"$top/tests/ceph/ceph-down.sh" "$C" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
WITH_MDS=1 WITH_MGR=0 "$top/tests/ceph/ceph-up.sh" "$C" > "$T/up.log" 2>&1 ||
	{ cat "$T/up.log"; exit 1; }
mkdir -p "$T/cf" "$T/mnt" "$T/cf2"
ceph-fuse -c "$C/ceph.conf" "$T/cf" >/dev/null 2>&1 || { echo "ceph-fuse failed" >&2; exit 1; }
mkdir -p "$T/cf/a"
fio --name=w --filename="$T/cf/a/f" --size=256M --rw=write --bs=1M \
	--end_fsync=1 >/dev/null || exit 1
run()
{
	sync
	echo 3 > /proc/sys/vm/drop_caches
	fio --output-format=json --name=r --filename="$1/f" --size=256M \
		--ioengine=psync --rw=randread --bs=4k --direct=1 --time_based \
		--runtime="$rt" --randrepeat=0 > "$T/fio.json" || exit 1
	python3 - "$T/fio.json" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
print("%-22s %7.0f IOPS  p50 %5.0f us" % (sys.argv[2], j["iops"],
      j["clat_ns"]["percentile"]["50.000000"] / 1000))
PY
}
for oc in true false; do
	cp "$C/ceph.conf" "$T/agent.conf"
	printf '[client]\nclient_oc = %s\n' $oc >> "$T/agent.conf"
	"$top/agent/bluecache-agent" --store "cephfs:/a,conf=$T/agent.conf" \
		--listen "unix:$T/agent.sock" --foreground 2>"$T/agent.log" &
	AP=$!
	sleep 4
	"$top/fs/bluecachefs" "unix:$T/agent.sock" "$T/mnt" ||
		{ cat "$T/agent.log"; exit 1; }
	run "$T/mnt" "bluecachefs client_oc=$oc"
	fusermount3 -u "$T/mnt"
	kill "$AP"
	wait "$AP"
	AP=
done
ceph-fuse -c "$C/ceph.conf" -r /a "$T/cf2" >/dev/null 2>&1 || exit 1
run "$T/cf2" "ceph-fuse"
