#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# random.sh - randomized writes, truncates, reads and shared mappings on a
# few files, compared with the same operations on a local directory
# (tests/fs/random-check).  The seed is printed; BCF_SEED=N replays it.
# Runs once with the default mount options and once with writeback caching.
. "$(dirname "$0")/lib.sh"
bcf_init
check=$top_builddir/tests/fs/random-check
[ -x "$check" ] || bcf_hard "$check is not built"
ops=${BCF_RANDOM_OPS:-5000}

run()
{
	local what=$1

	rm -rf "$BCF_TMP/ref" "$BCF_MNT/r"
	mkdir "$BCF_TMP/ref" "$BCF_MNT/r" || bcf_fail "mkdir on the mount"
	"$check" "$BCF_MNT/r" "$BCF_TMP/ref" "$ops" ||
		bcf_fail "random-check ($what) differs from a local directory"
	# and again, from the agent's copy after a remount
	bcf_remount "$@"
	for f in "$BCF_TMP"/ref/*; do
		cmp "$f" "$BCF_MNT/r/${f##*/}" ||
			bcf_fail "${f##*/} differs after remount ($what)"
	done
	bcf_umount
}

bcf_mount
run "default options"
bcf_mount -o writeback
run "writeback" -o writeback
exit 0
