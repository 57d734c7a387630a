#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# namespace.sh - random operations on names (tests/fs/namespace-check.py)
# give what a local directory gives: the same results and errors, the
# same times moved, the same tree.  First through one mount; then
# through two mounts of the same agent at random, each change seen
# through the other mount within a second.  The seed is printed;
# BCF_SEED=N replays it.  BCF_NAMESPACE_OPS sets the count (1500; 750
# on a cephfs store, where each change reaches the second mount through
# the cluster and the run takes four times as long).
. "$(dirname "$0")/lib.sh"
bcf_init
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"
check=$top_srcdir/tests/fs/namespace-check.py
ops=${BCF_NAMESPACE_OPS:-1500}
[ "${BCF_STORE:-posix}" = cephfs ] && ops=${BCF_NAMESPACE_OPS:-750}
# a CephFS has no atomic exchange (syscall-check says the same)
[ "${BCF_STORE:-posix}" = cephfs ] && export NS_NO_EXCHANGE=1

bcf_listen_for_transport
bcf_start_agent "$BCF_BACK" "$listen" "${agent_args[@]}" ||
	bcf_fail "bluecache-agent did not become ready"
bcf_mount_at "$listen" "$opts"
bcf_mount_extra m2 "$listen" "$opts" || bcf_fail "mount 2 did not come up"

run()
{
	local what=$1

	shift
	rm -rf "$BCF_TMP/ref" "$BCF_MNT/ns"
	mkdir "$BCF_TMP/ref" "$BCF_MNT/ns" || bcf_fail "mkdir on the mount"
	env "$@" python3 "$check" "$BCF_MNT/ns" "$BCF_TMP/ref" "$ops" ||
		bcf_fail "namespace-check ($what) differs from a local directory"
}

run "one mount"
if grep -q 'does not tell of changes' "$BCF_TMP/fs.log"; then
	bcf_log "the agent does not tell of changes: no second mount part"
else
	run "two mounts" NS_SECOND="$BCF_TMP/m2/ns"
	# a cephfs store: a sequence that once left a directory's mtime
	# where a utime put it after a mkdir in it (a time the store set
	# and held dirty went back over the MDS's)
	if [ "${BCF_STORE:-posix}" = cephfs ] && [ -z "${BCF_SEED:-}" ]; then
		run "two mounts, seed 320300115" NS_SECOND="$BCF_TMP/m2/ns" \
			BCF_SEED=320300115
	fi
fi
bcf_umount_extra m2 || bcf_fail "mount 2 did not unmount cleanly"
bcf_umount
exit 0
