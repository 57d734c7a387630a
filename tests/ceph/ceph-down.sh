#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Stop the daemons started by ceph-up.sh (by their PID files; clients first, mon last) and remove DIR.
# The cluster is thrown away, so its daemons are killed at once: an MDS
# asked to stop spends 8 s flushing a journal nobody will read.
DIR=$(realpath -m "${1:?usage: $0 DIR}")
for n in rgw.gw mds.a osd.0 mgr.x mon.a; do
  f=$DIR/run/$n.pid; [ -f "$f" ] || continue; p=$(cat "$f")
  kill -9 "$p" 2>/dev/null
  for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
done
rm -rf "$DIR"
