#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# concurrency.sh - several processes at once on one mount: writers to
# different files, readers of one file, two writers to disjoint ranges of
# one file, and many small files created in parallel.  Every result is
# checked by sha256sum against locally generated data, also after a
# remount.
. "$(dirname "$0")/lib.sh"
bcf_init
bcf_mount

mib=1048576
nw=4
src=$BCF_TMP/src
mkdir "$src"
for i in $(seq 1 $nw); do
	bcf_gen "writer-$i" $((24 * mib + i * 4099)) > "$src/w$i"
done
bcf_gen reader $((64 * mib)) > "$src/shared"
bcf_gen half-a $((16 * mib)) > "$src/a"
bcf_gen half-b $((16 * mib)) > "$src/b"
cat "$src/a" "$src/b" > "$src/ab"
cp "$src/shared" "$BCF_MNT/shared" || bcf_fail "cp of the shared file"
bcf_remount

# wait_all WHAT PID...: fail if any of the processes failed
wait_all()
{
	local what=$1 p bad=0

	shift
	for p in "$@"; do
		wait "$p" || bad=1
	done
	[ $bad -eq 0 ] || bcf_fail "$what: a process failed"
}

pids=()
# writers to different files, with different block sizes
for i in $(seq 1 $nw); do
	dd if="$src/w$i" of="$BCF_MNT/w$i" bs=$((i * 61440 + 7)) status=none &
	pids+=($!)
done
# readers of one file
for i in $(seq 1 4); do
	(dd if="$BCF_MNT/shared" bs=$((i * 32768 + 3)) status=none |
		sha256sum > "$BCF_TMP/read$i") &
	pids+=($!)
done
# two writers to disjoint halves of one file
: > "$BCF_MNT/ab"
dd if="$src/a" of="$BCF_MNT/ab" bs=65536 conv=notrunc status=none &
pids+=($!)
dd if="$src/b" of="$BCF_MNT/ab" bs=131072 seek=128 conv=notrunc status=none &
pids+=($!)
# many small files in parallel in one directory
mkdir "$BCF_MNT/small"
for i in 1 2 3; do
	(for j in $(seq 1 150); do
		echo "file $i $j" > "$BCF_MNT/small/f-$i-$j" || exit 1
	done) &
	pids+=($!)
done
wait_all "concurrent I/O" "${pids[@]}"

want=$(bcf_sha "$src/shared")
for i in $(seq 1 4); do
	bcf_eq "concurrent reader $i" "$want  -" "$(cat "$BCF_TMP/read$i")"
done
check_all()
{
	local i j

	for i in $(seq 1 $nw); do
		bcf_same_sha "$src/w$i" "$BCF_MNT/w$i"
	done
	bcf_same_sha "$src/ab" "$BCF_MNT/ab"
	bcf_eq "small files" 450 "$(ls "$BCF_MNT/small" | wc -l)"
	for i in 1 2 3; do
		for j in 1 77 150; do
			bcf_eq "small/f-$i-$j" "file $i $j" \
				"$(cat "$BCF_MNT/small/f-$i-$j")"
		done
	done
}
check_all
bcf_remount
check_all

# readers and a writer of different files at the same time, after remount
pids=()
for i in $(seq 1 $nw); do
	(sha256sum < "$BCF_MNT/w$i" > "$BCF_TMP/r$i") &
	pids+=($!)
done
cp "$src/shared" "$BCF_MNT/shared2" &
pids+=($!)
wait_all "readers next to a writer" "${pids[@]}"
for i in $(seq 1 $nw); do
	bcf_eq "reader of w$i" "$(bcf_sha "$src/w$i")  -" "$(cat "$BCF_TMP/r$i")"
done
bcf_same_sha "$src/shared" "$BCF_MNT/shared2"
exit 0
