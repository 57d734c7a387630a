#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# errno.sh - exact results and errno values of system calls on the mount
# (tests/fs/syscall-check).  The checker runs first on a plain local
# directory, which proves the checker's expectations, then on the mount
# (with allow_other, so the cases that switch to an unprivileged user reach
# the file system and are judged by its permission checks).
. "$(dirname "$0")/lib.sh"
bcf_init
check=$top_builddir/tests/fs/syscall-check
[ -x "$check" ] || bcf_hard "$check is not built"
mkdir "$BCF_TMP/plain"
chmod 755 "$BCF_TMP/plain"
"$check" "$BCF_TMP/plain" > "$BCF_TMP/plain.out" 2>&1 ||
	{ cat "$BCF_TMP/plain.out"; bcf_hard "syscall-check fails on a plain directory"; }
bcf_mount -o allow_other
chmod 755 "$BCF_MNT"
# CephFS has no atomic exchange: the cephfs store refuses RENAME_EXCHANGE
# with EINVAL, as Ceph's own clients do (bluecache-agent(8))
[ "$BCF_STORE" = cephfs ] && export SYSCALL_CHECK_NO_EXCHANGE=1
"$check" "$BCF_MNT"
rc=$?
[ $rc -eq 0 ] || bcf_fail "syscall-check on the mount exited with $rc"

# Again on a store that is a tmpfs (root, local:): a tmpfs changes a
# file's times only as told (truncate(2) to the size a file has moves
# none), so what the store does must be all a call asks for:
# open(O_TRUNC) of an empty file moves its mtime and ctime.
errno_cleanup()
{
	local rc=$?

	bcf_umount_extra tmnt || rc=1
	if mountpoint -q "$BCF_TMP/tback"; then
		umount "$BCF_TMP/tback" 2>/dev/null ||
			umount -l "$BCF_TMP/tback" || rc=1
	fi
	(exit $rc)
	bcf_cleanup_extra
}
if [ "$(id -u)" = 0 ] && [ "$BCF_TRANSPORT" = shm ] &&
   [ "$BCF_STORE" = posix ]; then
	mkdir "$BCF_TMP/tback" || bcf_hard "cannot make $BCF_TMP/tback"
	if mount -t tmpfs -o mode=0755 bcf-errno "$BCF_TMP/tback"; then
		# bcf_mount_extra sets its own trap: ours goes on after it,
		# whether the mount came up or not
		trap errno_cleanup EXIT
		bcf_mount_extra tmnt "local:$BCF_TMP/tback" allow_other
		rc=$?
		trap errno_cleanup EXIT
		[ $rc -eq 0 ] ||
			bcf_fail "the mount of a tmpfs store did not come up"
		chmod 755 "$BCF_TMP/tmnt"
		"$check" "$BCF_TMP/tmnt"
		rc=$?
		[ $rc -eq 0 ] ||
			bcf_fail "syscall-check on a tmpfs store exited with $rc"
	else
		bcf_log "cannot mount a tmpfs here: no run on a tmpfs store"
	fi
fi

# Device nodes.  The agent local: starts makes them as a local file system
# does (the kernel lets only a caller with CAP_MKNOD ask); an agent across
# the trust boundary refuses them without --allow-devices (doc/security.md).
if [ "$(id -u)" = 0 ]; then
	if [ "$BCF_TRANSPORT" = shm ] && [ "$BCF_STORE" != cephfs ]; then
		mknod "$BCF_MNT/blk" b 1 2 && mknod "$BCF_MNT/chr" c 1 3 ||
			bcf_fail "mknod of a device on a local: mount"
		got=$(stat -c '%F %t,%T' "$BCF_MNT/blk" "$BCF_MNT/chr" \
			"$BCF_BACK/blk" "$BCF_BACK/chr" | tr '\n' ' ')
		want="block special file 1,2 character special file 1,3 "
		want="$want$want"
		[ "$got" = "$want" ] ||
			bcf_fail "device nodes: '$got', want '$want'"
		rm "$BCF_MNT/blk" "$BCF_MNT/chr" ||
			bcf_fail "removing device nodes"
	elif mknod "$BCF_MNT/chr" c 1 3 2>/dev/null; then
		bcf_fail "an agent without --allow-devices made a device node"
	fi
fi

# Times past 2106 and before 1970.  A CephFS keeps 32-bit seconds: there a
# time out of range is clamped to the range's end, as the kernel does for
# a file system it mounts with such a range, not wrapped (2^32 s became
# 1970); a posix store keeps them as given.
got=$(python3 - "$BCF_MNT/far-times" <<'PY'
import os, sys
p = sys.argv[1]
open(p, "w").close()
os.utime(p, ns=(2**31 * 10**9 + 5, 2**32 * 10**9 + 7))
a = os.stat(p)
os.utime(p, ns=(-10**9, -5 * 10**9))
b = os.stat(p)
os.unlink(p)
print(a.st_atime_ns, a.st_mtime_ns, b.st_atime_ns, b.st_mtime_ns)
PY
) || bcf_fail "setting times far from now"
if [ "$BCF_STORE" = cephfs ]; then
	want="$((2**31 * 10**9 + 5)) $(((2**32 - 1) * 10**9)) 0 0"
else
	want="$((2**31 * 10**9 + 5)) $((2**32 * 10**9 + 7)) -1000000000"
	want="$want -5000000000"
fi
[ "$got" = "$want" ] || bcf_fail "times far from now: '$got', want '$want'"
exit 0
