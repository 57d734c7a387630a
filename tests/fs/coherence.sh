#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# coherence.sh - close-to-open: what another host changes is seen here.
#
# The agent's directory is changed behind the mount, as the agent does for
# another host: a file cached here (its pages read, an open descriptor
# keeping the inode) is appended to, overwritten in place with the same
# size, replaced by a rename and removed.  Once the attribute and entry
# timeouts passed, stat sees the new size and a new open reads the new
# bytes, never the cached ones; an open descriptor reads the new bytes too
# once the size changed.  A second mount of the same data (its own agent
# for shm, the same agent for tcp) sees this mount's writes at its next
# open.
. "$(dirname "$0")/lib.sh"
bcf_init
to=0.2
bcf_mount -o attr_timeout=$to,entry_timeout=$to
m=$BCF_MNT
b=$BCF_BACK
# a failure must not leave the mount busy with our descriptors
trap 'rc=$?; exec 3<&- 4<&-; fusermount3 -u "$BCF_TMP/mnt2" 2>/dev/null;
	(exit $rc); bcf_cleanup' EXIT
settle()
{
	sleep 0.3	# beyond both timeouts
}

printf 'first version\n' > "$m/f"
bcf_eq "read back" "first version" "$(cat "$m/f")"
exec 3< "$m/f"		# the inode and its pages stay cached

# appended behind the mount
printf 'appended elsewhere\n' >> "$b/f"
settle
bcf_eq "size after an append elsewhere" 33 "$(stat -c %s "$m/f")"
bcf_eq "new open after an append elsewhere" \
	"$(printf 'first version\nappended elsewhere')" "$(cat "$m/f")"
bcf_eq "open descriptor after an append elsewhere" \
	"$(printf 'first version\nappended elsewhere')" "$(cat <&3)"

# overwritten in place, same size: only the mtime tells
cat "$m/f" > /dev/null
sleep 0.05
printf 'FIRST VERSION\nAPPENDED ELSEWHERE\n' | dd of="$b/f" conv=notrunc \
	status=none
settle
bcf_eq "new open after an overwrite elsewhere" \
	"$(printf 'FIRST VERSION\nAPPENDED ELSEWHERE')" "$(cat "$m/f")"
exec 3<&-

# replaced by a rename: a new inode under the same name
cat "$m/f" > /dev/null
printf 'replacement\n' > "$b/f.new"
mv "$b/f.new" "$b/f"
settle
bcf_eq "open after a replace elsewhere" "replacement" "$(cat "$m/f")"

# removed
rm "$b/f"
settle
[ ! -e "$m/f" ] || bcf_fail "a file removed elsewhere is still there"
cat "$m/f" 2>/dev/null && bcf_fail "a file removed elsewhere can be read"

# made elsewhere, in a directory already listed here
ls "$m" > /dev/null
mkdir "$b/d"
printf 'new\n' > "$b/d/g"
settle
bcf_eq "listing after a create elsewhere" "d" "$(ls "$m")"
bcf_eq "file made elsewhere" "new" "$(cat "$m/d/g")"

# a second mount of the same data sees this mount's writes at its next open
m2=$BCF_TMP/mnt2
mkdir "$m2"
case $BCF_TRANSPORT in
shm) "$BCF_FS" "local:$b" "$m2" -o transport=shm,attr_timeout=$to,entry_timeout=$to \
	2>>"$BCF_TMP/fs.log" ;;
*) "$BCF_FS" "tcp://${RDMA_IP:-127.0.0.1}:$BCF_PORT" "$m2" \
	-o "transport=$BCF_TRANSPORT,secret_file=$BCF_SECRET,attr_timeout=$to,entry_timeout=$to" \
	2>>"$BCF_TMP/fs.log" ;;
esac || bcf_fail "second mount failed"
bcf_eq "second mount reads" "new" "$(cat "$m2/d/g")"
exec 4< "$m2/d/g"
printf 'grown by the first mount\n' >> "$m/d/g"
settle
bcf_eq "second mount after the first appended" \
	"$(printf 'new\ngrown by the first mount')" "$(cat "$m2/d/g")"
exec 4<&-
fusermount3 -u "$m2" || bcf_fail "cannot unmount the second mount"
echo PASS
