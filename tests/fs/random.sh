#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# random.sh - randomized writes, truncates, reads, shared mappings,
# fallocate and copy_file_range on a few files, compared with the same
# operations on a local directory (tests/fs/random-check).  The seed is
# printed; BCF_SEED=N replays it.
# Runs once with the default mount options and once with writeback caching;
# then a file read through every cache is rewritten with O_DIRECT and read
# back without it, and the other way round.
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

# direct_over: a file read through every cache (the agent's store's too)
# is rewritten with O_DIRECT, then read again without it, and the other
# way round: a read must never find the bytes a write replaced
direct_over()
{
	local f=$BCF_MNT/dio i

	head -c 4M /dev/urandom > "$BCF_TMP/dio.old" || bcf_hard "urandom"
	head -c 4M /dev/urandom > "$BCF_TMP/dio.new" || bcf_hard "urandom"
	cp "$BCF_TMP/dio.old" "$f" || bcf_fail "cp to the mount"
	cmp -s "$f" "$BCF_TMP/dio.old" || bcf_fail "dio: first read differs"
	# the agent closes what the kernel released a moment later
	sleep 1
	for i in 1 2; do
		dd if="$BCF_TMP/dio.new" of="$f" bs=64k oflag=direct \
			conv=notrunc status=none || bcf_fail "dd oflag=direct"
		echo 3 > /proc/sys/vm/drop_caches
		cmp -s "$f" "$BCF_TMP/dio.new" ||
			bcf_fail "dio: a read after a direct write found old bytes ($i)"
		dd if="$f" of="$BCF_TMP/dio.back" bs=64k iflag=direct \
			status=none || bcf_fail "dd iflag=direct"
		cmp -s "$BCF_TMP/dio.back" "$BCF_TMP/dio.new" ||
			bcf_fail "dio: a direct read found old bytes ($i)"
		# the other way: rewritten through the caches, read directly
		cp "$BCF_TMP/dio.old" "$f" || bcf_fail "cp to the mount"
		dd if="$f" of="$BCF_TMP/dio.back" bs=64k iflag=direct \
			status=none || bcf_fail "dd iflag=direct"
		cmp -s "$BCF_TMP/dio.back" "$BCF_TMP/dio.old" ||
			bcf_fail "dio: a direct read after a cached write found old bytes ($i)"
		sleep 1
	done
	rm -f "$f"
}

bcf_mount
run "default options"
bcf_mount -o writeback
run "writeback" -o writeback
bcf_mount
direct_over
bcf_umount
exit 0
