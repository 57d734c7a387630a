#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# coherence.sh - with the default options (long caches), what changes
# elsewhere is seen here within a second, because the agent tells.
#
# A file cached here (its pages read, an open descriptor keeping the
# inode) is appended to, overwritten in place with the same size,
# replaced by a rename and removed; files made here are replaced
# elsewhere at once (within one sweep of a cephfs store); a directory
# already listed here gains a subdirectory, one listed here loses names
# renamed and removed; an ACL set elsewhere denies a
# user what this mount let it read.  stat sees the new size, a
# new open reads the new bytes, never the cached ones, an open
# descriptor reads them too, names come and go.  A second mount of the
# same agent sees this mount's writes.
#
# The changes are made behind the mount, in the agent's directory, when
# the agent watches it (--watch); an agent without --watch cannot see
# them, and then they are made through a second mount of the same agent.
# On a cephfs store ($BCF_BACK is a ceph-fuse mount of the same CephFS,
# another Ceph client) they are made there: what the agent hears of them
# comes from the Ceph client's capabilities, no watch is needed.
# Skips when the agent does not tell of changes (the mount says so), or
# cannot watch its directory here.
. "$(dirname "$0")/lib.sh"
bcf_init
m=$BCF_MNT
b=$BCF_BACK
m2=$BCF_TMP/mnt2
mkdir "$m2"
M2_PID=
# a failure must not leave the mount busy with our descriptors
trap 'rc=$?; exec 3<&- 4<&-; cd /; if [ -n "$M2_PID" ]; then
	fusermount3 -u "$m2" 2>/dev/null || fusermount3 -uz "$m2";
	wait "$M2_PID"; fi; (exit $rc); bcf_cleanup' EXIT

watch=()
if [ "$BCF_STORE" = cephfs ]; then
	other=ceph
elif "$BCF_AGENT" --help 2>&1 | grep -q -- '--watch'; then
	watch=(--watch yes)
fi
case $BCF_TRANSPORT in
shm)
	bcf_start_agent "$b" "unix:$BCF_TMP/agent.sock" "${watch[@]}" ||
		started=no
	agent=unix:$BCF_TMP/agent.sock
	opts=transport=shm
	;;
*)
	BCF_SECRET=$BCF_TMP/secret
	bcf_secret "$BCF_SECRET"
	BCF_PORT=$(bcf_free_port) || bcf_hard "python3 found no free port"
	bcf_start_agent "$b" "tcp://${RDMA_IP:-127.0.0.1}:$BCF_PORT" \
		--secret-file "$BCF_SECRET" --squash none "${watch[@]}" ||
		started=no
	agent=tcp://${RDMA_IP:-127.0.0.1}:$BCF_PORT
	opts=transport=$BCF_TRANSPORT,secret_file=$BCF_SECRET
	;;
esac
if [ "${started:-}" = no ]; then
	# --watch yes refuses to start where fanotify is not allowed
	[ ${#watch[@]} -gt 0 ] && : > "$BCF_TMP/agent.log" &&
		bcf_skip "the agent cannot watch its directory here"
	bcf_fail "bluecache-agent did not become ready"
fi

mount_on()
{
	"$BCF_FS" "$agent" "$1" -f -o "$opts" 2>>"$BCF_TMP/fs.log" &
}
mount_on "$m"
BCF_FS_PID=$!
bcf_wait_for 20 bcf_mount_up || bcf_fail "the mount did not come up"
mount_on "$m2"
M2_PID=$!
bcf_wait_for 20 bcf_is_mounted "$m2" || bcf_fail "mount 2 did not come up"
grep -q 'does not tell of changes' "$BCF_TMP/fs.log" &&
	bcf_skip "this agent does not tell of changes made elsewhere"
if [ ${#watch[@]} -gt 0 ] || [ "${other:-}" = ceph ]; then
	c=$b
else
	bcf_log "the agent has no --watch: changes elsewhere are made" \
		"through a second mount of the same agent"
	c=$m2
fi

# soon WHAT EXPECTED COMMAND...: COMMAND prints EXPECTED within a second
soon()
{
	local what=$1 want=$2 got n=0

	shift 2
	while :; do
		got=$("$@" 2>&1)
		[ "$got" = "$want" ] && return 0
		n=$((n + 1))
		[ $n -gt 20 ] && bcf_fail "$what: expected '$want', got '$got'"
		sleep 0.05
	done
}

printf 'first version\n' > "$m/f"
bcf_eq "read back" "first version" "$(cat "$m/f")"
exec 3< "$m/f"		# the inode and its pages stay cached

# appended elsewhere
printf 'appended elsewhere\n' >> "$c/f"
soon "size after an append elsewhere" 33 stat -c %s "$m/f"
bcf_eq "new open after an append elsewhere" \
	"$(printf 'first version\nappended elsewhere')" "$(cat "$m/f")"
bcf_eq "open descriptor after an append elsewhere" \
	"$(printf 'first version\nappended elsewhere')" "$(cat <&3)"

# overwritten in place, same size: only the mtime tells
cat "$m/f" > /dev/null
sleep 0.05
printf 'FIRST VERSION\nAPPENDED ELSEWHERE\n' | dd of="$c/f" conv=notrunc \
	status=none
soon "new open after an overwrite elsewhere" \
	"$(printf 'FIRST VERSION\nAPPENDED ELSEWHERE')" cat "$m/f"
exec 3<&-

# replaced by a rename: a new inode under the same name
cat "$m/f" > /dev/null
printf 'replacement\n' > "$c/f.new"
mv "$c/f.new" "$c/f"
soon "open after a replace elsewhere" "replacement" cat "$m/f"

# removed
rm "$c/f"
soon "a file removed elsewhere" "gone" \
	sh -c '[ -e "$1" ] && echo there || echo gone' sh "$m/f"
cat "$m/f" 2>/dev/null && bcf_fail "a file removed elsewhere can be read"

# made here and at once replaced elsewhere: what the agent knows it made
# under the name is not what the name names now
for k in 1 2 3; do
	printf 'made here\n' > "$m/g$k"
	cat "$m/g$k" > /dev/null
	printf 'replaced at once\n' > "$c/g$k.new"
	mv "$c/g$k.new" "$c/g$k"
	soon "a file made here and at once replaced elsewhere ($k)" \
		"replaced at once" cat "$m/g$k"
	rm "$m/g$k"
done

# made elsewhere, in a directory already listed here
ls "$m" > /dev/null
mkdir "$c/d"
printf 'new\n' > "$c/d/g"
soon "listing after a create elsewhere" "d" ls "$m"
bcf_eq "file made elsewhere" "new" "$(cat "$m/d/g")"

# a listing kept here follows names renamed and removed elsewhere
mkdir "$c/e"
printf 'x\n' > "$c/e/x"
soon "listing of a directory made elsewhere" "x" ls "$m/e"
mv "$c/e/x" "$c/e/y"
soon "listing after a rename elsewhere" "y" ls "$m/e"
rm "$c/e/y"
soon "listing after a remove elsewhere" "" ls "$m/e"
rmdir "$c/e"

# an ACL set elsewhere on a file whose lack of one this mount has seen: the
# kernel checks the new one within a second (the agent tells, the cached
# answer "no ACL" goes)
if [ "$BCF_STORE" != cephfs ] && command -v setpriv > /dev/null; then
	as_nobody() {
		setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	}
	printf 'for all\n' > "$m/acl"
	chmod 644 "$m/acl"
	bcf_eq "read by another user" "for all" "$(as_nobody cat "$m/acl")"
	# user 65534: no access; the rest as the mode says
	python3 - "$c/acl" <<'PY' || bcf_fail "cannot set an ACL elsewhere"
import struct, sys
e = [(0x01, 6, 0xffffffff), (0x02, 0, 65534), (0x04, 4, 0xffffffff),
     (0x10, 4, 0xffffffff), (0x20, 4, 0xffffffff)]
v = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *x) for x in e)
import os
os.setxattr(sys.argv[1], "system.posix_acl_access", v)
PY
	soon "read by the user an ACL set elsewhere denies" "denied" \
		sh -c 'setpriv --reuid=65534 --regid=65534 --clear-groups \
			cat "$1" > /dev/null 2>&1 && echo read || echo denied' \
		sh "$m/acl"
	rm "$m/acl"
fi

# the second mount sees this mount's writes at its next open
bcf_eq "second mount reads" "new" "$(cat "$m2/d/g")"
exec 4< "$m2/d/g"
printf 'grown by the first mount\n' >> "$m/d/g"
bcf_eq "second mount after the first appended" \
	"$(printf 'new\ngrown by the first mount')" "$(cat "$m2/d/g")"
bcf_eq "second mount's descriptor after the first appended" \
	"$(printf 'new\ngrown by the first mount')" "$(cat <&4)"
exec 4<&-
fusermount3 -u "$m2" || bcf_fail "cannot unmount the second mount"
wait "$M2_PID" || bcf_fail "the second mount's daemon exited with $?"
M2_PID=
echo PASS
