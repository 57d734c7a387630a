#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Throwaway single-node Ceph (1 mon, 1 OSD, optional mgr and MDS) on 127.0.0.1, no systemd.
# Usage: ceph-up.sh DIR   (env: STORE=memstore|bluestore WITH_MGR=0|1 WITH_RGW=0|1 WITH_MDS=0|1 FS=name MON_PORT=N RGW_PORT=N POOL=name MEMSTORE_BYTES=N
#        OSD_CONF='option = value' lines added to the [osd] section)
# Prints: export CEPH_CONF=DIR/ceph.conf.  Tear down: ceph-down.sh DIR
set -euo pipefail
DIR=$(realpath -m "${1:?usage: $0 DIR}")
STORE=${STORE:-memstore}; WITH_MGR=${WITH_MGR:-1}; WITH_RGW=${WITH_RGW:-0}; WITH_MDS=${WITH_MDS:-0}; FS=${FS:-cephfs}; POOL=${POOL:-test}
MON_PORT=${MON_PORT:-$((20000 + RANDOM % 20000))}; RGW_PORT=${RGW_PORT:-$((MON_PORT + 1))}
T0=$(date +%s.%N)
rm -rf "$DIR"; mkdir -p "$DIR"/{log,run,mon.a,osd.0,mgr.x,rgw,mds.a}
FSID=$(uuidgen)
cat > "$DIR/ceph.conf" <<EOF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = /dev/null
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
crash dir = $DIR/log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
auth allow insecure global id reclaim = false
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
[mon]
# a map change is proposed at once, not after a second of batching: the
# cluster is up in a few seconds instead of a dozen
paxos propose interval = 0.05
mon data = $DIR/mon.\$id
mon cluster log file = $DIR/log/cluster.log
[osd]
osd data = $DIR/osd.\$id
osd objectstore = $STORE
memstore device bytes = ${MEMSTORE_BYTES:-2147483648}
bluestore block create = true
bluestore block size = 4294967296
osd memory target = 1073741824
${OSD_CONF:-}
[mgr]
mgr data = $DIR/mgr.\$id
[mds]
mds data = $DIR/mds.\$id
[client]
log file = $DIR/log/client.log
[client.rgw.gw]
rgw data = $DIR/rgw
ms mon client mode = crc
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
EOF
export CEPH_CONF=$DIR/ceph.conf
C="timeout 30 ceph --connect-timeout 20"
fail() { echo "ceph-up FAILED: $1" >&2; tail -n 20 "$DIR"/log/* >&2
  for f in "$DIR"/run/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done; exit 1; }
trap 'fail "line $LINENO"' ERR
wait_for() { local n=0; until eval "$1" >/dev/null 2>&1; do
  n=$((n+1)); [ $n -ge "$2" ] && fail "timeout: $1"; sleep 1; done; }

monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
ceph-mon --mkfs -i a --monmap "$DIR/monmap" --keyring /dev/null
ceph-mon -f -i a >"$DIR/log/mon.a.out" 2>&1 & echo $! > "$DIR/run/mon.a.pid"
wait_for "$C -s" 30

if [ "$WITH_MGR" = 1 ]; then
  ceph-mgr -f -i x >"$DIR/log/mgr.x.out" 2>&1 & echo $! > "$DIR/run/mgr.x.pid"
fi

OSD_UUID=$(uuidgen)
OSD_ID=$($C osd new "$OSD_UUID")
ceph-osd --mkfs -i "$OSD_ID" --osd-uuid "$OSD_UUID" >"$DIR/log/osd.mkfs.out" 2>&1
ceph-osd -f -i "$OSD_ID" >"$DIR/log/osd.$OSD_ID.out" 2>&1 & echo $! > "$DIR/run/osd.$OSD_ID.pid"
if [ "$WITH_MDS" = 1 ]; then
  # the file system's pools, the file system and its MDS while the OSD boots
  $C osd pool create "$FS.meta" 8 8 >/dev/null 2>&1
  $C osd pool create "$FS.data" 8 8 >/dev/null 2>&1
  $C fs new "$FS" "$FS.meta" "$FS.data" >/dev/null 2>&1
  ceph-mds -f -i a >"$DIR/log/mds.a.out" 2>&1 & echo $! > "$DIR/run/mds.a.pid"
fi
wait_for "$C osd dump | grep -q '^osd.$OSD_ID up'" 60

$C osd pool create "$POOL" 8 8 >/dev/null 2>&1
$C osd pool application enable "$POOL" rados >/dev/null 2>&1
# ready = a write to the new pool succeeds (PGs active)
wait_for "timeout 10 rados -p $POOL put __ready /etc/hostname && rados -p $POOL rm __ready" 60
if [ "$WITH_MGR" = 1 ]; then wait_for "$C mgr stat | grep -q '\"available\": true'" 60; fi
if [ "$WITH_MDS" = 1 ]; then
  wait_for "$C mds stat | grep -q up:active" 90
  echo "export CEPH_FS=$FS"
fi
if [ "$WITH_RGW" = 1 ]; then
  radosgw -f -n client.rgw.gw >"$DIR/log/rgw.out" 2>&1 & echo $! > "$DIR/run/rgw.gw.pid"
  wait_for "curl -sf http://127.0.0.1:$RGW_PORT/" 120
  echo "export S3_ENDPOINT=http://127.0.0.1:$RGW_PORT"
fi
echo "cluster ready in $(echo "$(date +%s.%N) - $T0" | bc) s (store=$STORE mgr=$WITH_MGR mds=$WITH_MDS port=$MON_PORT)" >&2
echo "export CEPH_CONF=$DIR/ceph.conf"
