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
exit 0
