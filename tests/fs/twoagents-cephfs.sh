#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# twoagents-cephfs.sh - two DPUs on one CephFS: two agents with
# --store cephfs:/ on the same cluster, a bluecachefs mount of each (A and
# B, over $BCF_TRANSPORT, tcp by default).
#
# Two promises (doc/design.md, "Long caches, told by the agent"):
#   - without notifications, what the timeouts bound: A and B run with
#     -o attr_timeout=1,entry_timeout=1; close-to-open for data (an open
#     drops the cached pages when mtime or size moved, at once, even
#     with the reader's pages cached), and a rename, unlink, mkdir or a
#     new size is seen by the next lookup or stat once the entry or
#     attribute cache expired: "within 1 s, plus a second of slack";
#   - with the default (long) caches: each agent learns from its Ceph
#     client what the other client changed (the store's sweep of held
#     objects, ino_cb, dentry_cb) and tells its mounts, so a mkdir, a
#     write and close, a chmod, a truncate, a rename and an unlink made
#     through one agent's mount (AN, BN: no cache options) are seen
#     through the other's soon (bound 60 below), names the reader had
#     found missing too, and a change made by a third Ceph client (the
#     ceph-fuse mount $BCF_BACK) is seen the same way, also on one of
#     2500 files held (more than one pass of the store's sweep takes).
# The test also fails if a change is seen before it was made (a wrong
# cache would show as an old value, never as a new one too early).
# Every check runs in both directions.
BCF_STORE=${BCF_STORE:-cephfs}
BCF_TRANSPORT=${BCF_TRANSPORT:-tcp}
. "$(dirname "$0")/lib.sh"
[ "$BCF_STORE" = cephfs ] || bcf_hard "twoagents runs on a cephfs store"
[ "$BCF_TRANSPORT" = tcp ] || bcf_skip "twoagents runs over tcp"
bcf_init

TMO=1
OPTS=attr_timeout=$TMO,entry_timeout=$TMO
# bound N: a change may stay hidden N tenths of a second (HIDDEN); under
# the sanitizers, with other tests beside this one on two cores, five
# times that
bound()
{
	HIDDEN=$1
	[ -n "${BCF_SAN_CFLAGS:-}" ] && HIDDEN=$((HIDDEN * 5))
}
bound $(((TMO + 1) * 10))
AGENT_B_PID=
# mount B first, then its agent, then what bcf_cleanup_extra does (the
# other extra mounts, their logs, bcf_cleanup: mount A, agent A, the
# cluster)
tb_cleanup()
{
	local rc=$?

	cd / || true
	bcf_umount_extra B || { [ $rc -eq 0 ] && rc=1; }
	bcf_umount_extra AN || { [ $rc -eq 0 ] && rc=1; }
	bcf_umount_extra BN || { [ $rc -eq 0 ] && rc=1; }
	if [ -n "$AGENT_B_PID" ]; then
		kill "$AGENT_B_PID" 2>/dev/null
		bcf_wait_for 20 bcf_pid_gone "$AGENT_B_PID" || {
			echo "agent B did not stop on SIGTERM" >&2
			kill -KILL "$AGENT_B_PID"
			[ $rc -eq 0 ] && rc=1
		}
		wait "$AGENT_B_PID"
		AGENT_B_PID=
	fi
	(exit $rc)
	bcf_cleanup_extra
}
trap tb_cleanup EXIT

# agent A, and the first mount
bcf_agent_tcp
port_a=$BCF_PORT
bcf_mount_at "tcp://127.0.0.1:$port_a" \
	"transport=tcp,secret_file=$BCF_SECRET,$OPTS"
A=$BCF_MNT

# agent B: its own process, Ceph client and log (agent-b.log), the same
# store; agent.log is A's
start_b()
{
	local ready=$BCF_TMP/agent-b.ready

	: > "$ready"
	port_b=$(bcf_free_port) || bcf_hard "python3 found no free port"
	"$BCF_AGENT" --store "$BCF_STORE_SPEC" \
		--listen "tcp://127.0.0.1:$port_b" --foreground --ready-fd 3 \
		--secret-file "$BCF_SECRET" --squash none \
		3>"$ready" 2>>"$BCF_TMP/agent-b.log" &
	AGENT_B_PID=$!
	bcf_wait_for 30 grep -q '^ready$' "$ready" && return 0
	kill "$AGENT_B_PID" 2>/dev/null
	wait "$AGENT_B_PID" 2>/dev/null
	AGENT_B_PID=
	return 1
}
start_b || start_b || {
	tail -n 20 "$BCF_TMP/agent-b.log" >&2
	bcf_fail "the second agent did not become ready"
}
# its log is checked as the daemons' are: bcf_check_extra_logs reads
# every fs-*.log
ln -s agent-b.log "$BCF_TMP/fs-agent-b.log"
bcf_mount_extra B "tcp://127.0.0.1:$port_b" \
	"transport=tcp,secret_file=$BCF_SECRET,$OPTS"
st=$?
# bcf_mount_extra installed bcf_cleanup_extra: ours calls it
trap tb_cleanup EXIT
[ $st -eq 0 ] || bcf_fail "mount B did not come up"
B=$BCF_TMP/B
# and a mount of each with the default caches, which only notifications
# keep coherent
bcf_mount_extra AN "tcp://127.0.0.1:$port_a" \
	"transport=tcp,secret_file=$BCF_SECRET" ||
	bcf_fail "mount AN did not come up"
bcf_mount_extra BN "tcp://127.0.0.1:$port_b" \
	"transport=tcp,secret_file=$BCF_SECRET" ||
	bcf_fail "mount BN did not come up"
trap tb_cleanup EXIT
AN=$BCF_TMP/AN
BN=$BCF_TMP/BN

# within WHAT COMMAND...: COMMAND succeeds within $HIDDEN tenths of a
# second; prints how long it took.  A failure still looks for 10 s more,
# to tell a late change from one never told.
within()
{
	local what=$1 n=0 t0 ms

	shift
	t0=$(date +%s%N)
	until "$@"; do
		n=$((n + 1))
		[ $n -gt $((HIDDEN + 100)) ] &&
			bcf_fail "$what: not seen within $((HIDDEN / 10)).$((HIDDEN % 10)) s, nor 10 s later"
		sleep 0.1
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $n -gt "$HIDDEN" ] &&
		bcf_fail "$what: not seen within $((HIDDEN / 10)).$((HIDDEN % 10)) s (seen after $ms ms)"
	bcf_log "$what: seen after $ms ms"
}

reads() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
gone() { ! stat "$1" >/dev/null 2>&1; }
listed() { ls "$1" 2>/dev/null | grep -qxF "$2"; }
size_is() { [ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]; }
mode_is() { [ "$(stat -c %a "$1" 2>/dev/null)" = "$2" ]; }

# one_way W R: what is done through mount W, mount R sees
one_way()
{
	local w=$1 r=$2 d=$3 fd

	mkdir "$w/$d" || bcf_fail "mkdir $d"
	within "$d: a new directory, looked up" test -d "$r/$d"

	# a new file, closed, is read on the next open
	printf 'version one\n' > "$w/$d/f" || bcf_fail "write $d/f"
	bcf_eq "$d/f read on its first open" "version one" "$(cat "$r/$d/f")"

	# the reader's pages cached, and its descriptor open: an overwrite
	# of the same size, closed, is read by the next open at once
	exec {fd}< "$r/$d/f"
	bcf_eq "$d/f cached" "version one" "$(cat "$r/$d/f")"
	sleep 0.05	# a new mtime, even where it has coarse ticks
	printf 'version two\n' > "$w/$d/f" || bcf_fail "rewrite $d/f"
	bcf_eq "$d/f overwritten, read on the next open" "version two" \
		"$(cat "$r/$d/f")"
	exec {fd}<&-

	# a new size: the next open reads every byte once the size the
	# reader's kernel holds has expired
	bcf_eq "$d/f cached again" "version two" "$(cat "$r/$d/f")"
	printf 'version three, longer\n' > "$w/$d/f" ||
		bcf_fail "grow $d/f"
	within "$d/f grown, its new size" size_is "$r/$d/f" 22
	bcf_eq "$d/f grown, read on the next open" \
		"version three, longer" "$(cat "$r/$d/f")"

	# names: a rename and an unlink, the reader having looked up both
	printf 'moved\n' > "$w/$d/g" || bcf_fail "write $d/g"
	within "$d/g: a new file" reads "$r/$d/g" moved
	gone "$r/$d/h" || bcf_fail "$d/h exists before it was made"
	mv "$w/$d/g" "$w/$d/h" || bcf_fail "rename $d/g $d/h"
	within "$d/g renamed to h: the new name" reads "$r/$d/h" moved
	within "$d/g renamed to h: the old name gone" gone "$r/$d/g"
	within "$d/g renamed to h: the listing" listed "$r/$d" h
	rm "$w/$d/h" || bcf_fail "unlink $d/h"
	within "$d/h unlinked" gone "$r/$d/h"
	rm "$w/$d/f" && rmdir "$w/$d" || bcf_fail "rm -r $d"
	within "$d removed" gone "$r/$d"
}

one_way "$A" "$B" ab
one_way "$B" "$A" ba

# told W R D: what is done through mount W (or $BCF_BACK), mount R, with
# the default caches, sees within 1 s; R looked up and cached everything
# first (the attributes, and the names as missing)
told()
{
	local w=$1 r=$2 d=$3 fd

	gone "$r/$d" || bcf_fail "$d exists before it was made"
	mkdir "$w/$d" || bcf_fail "mkdir $d"
	within "told $d: a directory where a name was missing" \
		test -d "$r/$d"
	gone "$r/$d/f" || bcf_fail "$d/f exists before it was made"
	printf 'one\n' > "$w/$d/f" || bcf_fail "write $d/f"
	within "told $d/f: a new file" reads "$r/$d/f" one

	# the reader holds f open and its attributes cached
	exec {fd}< "$r/$d/f"
	size_is "$r/$d/f" 4 || bcf_fail "$d/f: size"
	mode_is "$r/$d/f" 644 || bcf_fail "$d/f: mode"
	printf 'two, longer\n' > "$w/$d/f" || bcf_fail "rewrite $d/f"
	within "told $d/f written and closed: its size" \
		size_is "$r/$d/f" 12
	bcf_eq "told $d/f written: read on the next open" "two, longer" \
		"$(cat "$r/$d/f")"
	chmod 600 "$w/$d/f" || bcf_fail "chmod $d/f"
	within "told $d/f: chmod" mode_is "$r/$d/f" 600
	truncate -s 3 "$w/$d/f" || bcf_fail "truncate $d/f"
	within "told $d/f: truncated" size_is "$r/$d/f" 3
	bcf_eq "told $d/f truncated: read on the next open" "two" \
		"$(cat "$r/$d/f")"
	exec {fd}<&-

	printf 'moved\n' > "$w/$d/g" || bcf_fail "write $d/g"
	within "told $d/g: a new file" reads "$r/$d/g" moved
	gone "$r/$d/h" || bcf_fail "$d/h exists before it was made"
	ls "$r/$d" > /dev/null
	mv "$w/$d/g" "$w/$d/h" || bcf_fail "rename $d/g $d/h"
	within "told $d/g renamed to h: the new name" reads "$r/$d/h" moved
	within "told $d/g renamed to h: the old name gone" gone "$r/$d/g"
	within "told $d/g renamed to h: the listing" listed "$r/$d" h
	rm "$w/$d/h" || bcf_fail "unlink $d/h"
	within "told $d/h unlinked" gone "$r/$d/h"
	rm "$w/$d/f" && rmdir "$w/$d" || bcf_fail "rm -r $d"
	within "told $d removed" gone "$r/$d"
}

# Well under a second as a rule (70-300 ms), but on two busy cores one
# change in a few runs took 3.5 to 5 s, late and never lost: the sweep's
# getattr or listing waits on the MDS, whose tick is 5 s (we take that to
# be the cause; not proven).  6 s then, and "never" is 16 s.
bound 60
told "$AN" "$BN" tab
told "$BN" "$AN" tba
told "$BCF_BACK" "$AN" tfa
told "$BCF_BACK" "$BN" tfb

# More files held than a sweep takes in one pass (1000): the passes come
# round to every one of them, within a second or so
mkdir "$BCF_BACK/many" && (cd "$BCF_BACK/many" && seq 1 2500 | xargs touch) ||
	bcf_fail "cannot make 2500 files"
[ "$(ls -l "$BN/many" | grep -c '^-')" = 2500 ] ||
	bcf_fail "BN does not list the 2500 files"
for i in 1 1250 2500; do
	mode_is "$BN/many/$i" 644 || bcf_fail "many/$i: mode"
done
sleep 1
chmod 600 "$BCF_BACK/many/1" "$BCF_BACK/many/1250" "$BCF_BACK/many/2500" ||
	bcf_fail "chmod many/*"
bound 30
for i in 1 1250 2500; do
	within "told many/$i: chmod, among 2500 files held" \
		mode_is "$BN/many/$i" 600
done
rm -rf "$BCF_BACK/many" || bcf_fail "rm -r many"

# both write, each its own file, then read the other's: nothing of one
# agent's writes is lost to the other's Ceph client
bcf_gen twoagents-a $((4 << 20)) > "$BCF_TMP/ra"
bcf_gen twoagents-b $((4 << 20)) > "$BCF_TMP/rb"
cp "$BCF_TMP/ra" "$A/big-a" & pa=$!
cp "$BCF_TMP/rb" "$B/big-b" & pb=$!
wait $pa || bcf_fail "cp through A"
wait $pb || bcf_fail "cp through B"
within "big-a through B" test -e "$B/big-a"
within "big-b through A" test -e "$A/big-b"
bcf_same_sha "$BCF_TMP/ra" "$B/big-a"
bcf_same_sha "$BCF_TMP/rb" "$A/big-b"
# and the CephFS holds both, as a third Ceph client sees it
bcf_same_sha "$BCF_TMP/ra" "$BCF_BACK/big-a"
bcf_same_sha "$BCF_TMP/rb" "$BCF_BACK/big-b"
exit 0
