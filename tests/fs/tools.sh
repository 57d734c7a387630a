#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# tools.sh - file contents through cp, cat, dd, truncate and fallocate.
#
# Files of edge sizes (0 B, 1 B, 4095-4097 B, 1 MiB+1, 100 MiB and, when
# BCF_BIG=1 (the default, but on a cephfs store) and there is room, 1 GiB)
# generated from a seeded pseudo-random stream are copied in and out and
# checked with sha256sum, also after a remount (no kernel cache); dd with
# odd block sizes and seek/skip offsets is compared with cmp against the
# same dd on a local file; truncate and fallocate (with --punch-hole when
# the backing file system supports it) are checked by size and content.
. "$(dirname "$0")/lib.sh"
bcf_init
bcf_mount

src=$BCF_TMP/src
out=$BCF_TMP/out
mkdir "$src" "$out"

sizes="0 1 4095 4096 4097 1048577 104857600"
big=0
# On a cephfs store the default is without it: the test cluster's OSD keeps
# every byte in memory, and the store's large transfers are the 100 MiB
# file's too (BCF_BIG=1 asks for it all the same).
bigdef=1
[ "$BCF_STORE" = cephfs ] && bigdef=0
if [ "${BCF_BIG:-$bigdef}" = 1 ]; then
	avail=$(df -Pk "$BCF_TMP" | awk 'NR == 2 { print $4 }')
	# the source, the backing copy and slack
	if [ "$avail" -gt $((3 * 1024 * 1024)) ]; then
		sizes="$sizes 1073741824"
		big=1
	else
		bcf_log "only ${avail} KiB free in $BCF_TMP: no 1 GiB file"
	fi
fi

for s in $sizes; do
	bcf_gen "seed-$s" "$s" > "$src/f$s" || bcf_hard "cannot generate $s"
	bcf_eq "generated size" "$s" "$(stat -c %s "$src/f$s")"
done

start=$SECONDS
for s in $sizes; do
	cp "$src/f$s" "$BCF_MNT/f$s" || bcf_fail "cp in of $s bytes"
	bcf_eq "size of f$s on the mount" "$s" "$(stat -c %s "$BCF_MNT/f$s")"
	cat "$BCF_MNT/f$s" > "$out/f$s" || bcf_fail "cat out of $s bytes"
	bcf_same_sha "$src/f$s" "$out/f$s"
done
bcf_log "copied in and out in $((SECONDS - start)) s (1 GiB: $big)"

# the agent's backing files hold the same bytes
for s in $sizes; do
	bcf_same_sha "$src/f$s" "$BCF_BACK/f$s"
done

# after a remount every byte comes from the agent again
bcf_remount
for s in $sizes; do
	bcf_same_sha "$src/f$s" "$BCF_MNT/f$s"
	cp "$BCF_MNT/f$s" "$out/g$s" || bcf_fail "cp out of $s bytes"
	bcf_same_sha "$src/f$s" "$out/g$s"
done
[ $big = 1 ] && rm -f "$src/f1073741824" "$out/f1073741824" \
	"$out/g1073741824" "$BCF_MNT/f1073741824"

# dd with odd block sizes, seek and skip; the same dd on a local file
# gives the expected result
ref=$BCF_TMP/ref
in=$src/f1048577
run_dd()
{
	# run_dd DEST ARGS...: the same dd into DEST on the mount and in ref
	local name=$1

	shift
	dd if="$in" of="$BCF_MNT/$name" "$@" status=none ||
		bcf_fail "dd of=$name $*"
	dd if="$in" of="$ref.$name" "$@" status=none ||
		bcf_hard "local dd $*"
	cmp "$BCF_MNT/$name" "$ref.$name" ||
		bcf_fail "dd $* on the mount differs from a local file"
}
run_dd dd7 bs=7 count=5000
run_dd dd4093 bs=4093 count=100 seek=3
run_dd dd1m3 bs=1048579 count=1 conv=notrunc
run_dd dd1m3 bs=1048579 count=1 seek=2 conv=notrunc
run_dd dd4093 bs=4093 count=50 skip=7 seek=11 conv=notrunc
run_dd dd7 bs=7 count=300 skip=1001 seek=13 conv=notrunc
# reading with odd block sizes and skip
for bs in 7 4093 1048579; do
	a=$(dd if="$BCF_MNT/f104857600" bs=$bs skip=3 count=40 status=none |
		sha256sum)
	b=$(dd if="$src/f104857600" bs=$bs skip=3 count=40 status=none |
		sha256sum)
	bcf_eq "dd read bs=$bs skip=3" "$b" "$a"
done

# truncate up and down
f=$BCF_MNT/trunc
cp "$src/f1048577" "$f"
cp "$src/f1048577" "$ref.trunc"
for len in 5000 5000 0 123457 3000000 4096 1 2000001; do
	truncate -s "$len" "$f" || bcf_fail "truncate -s $len"
	truncate -s "$len" "$ref.trunc"
	bcf_eq "size after truncate -s $len" "$len" "$(stat -c %s "$f")"
	cmp "$f" "$ref.trunc" || bcf_fail "contents after truncate -s $len"
	# new data below the size, then truncate around it
	dd if="$in" of="$f" bs=1000 count=3 seek=1 conv=notrunc status=none ||
		bcf_fail "dd after truncate -s $len"
	dd if="$in" of="$ref.trunc" bs=1000 count=3 seek=1 conv=notrunc \
		status=none
	cmp "$f" "$ref.trunc" || bcf_fail "write after truncate -s $len"
done
bcf_remount
cmp "$f" "$ref.trunc" || bcf_fail "truncated file differs after remount"

# fallocate: allocate extends the size with zeros; keep-size does not
f=$BCF_MNT/falloc
: > "$f"
fallocate -l 1000000 "$f" || bcf_fail "fallocate -l 1000000"
bcf_eq "size after fallocate" 1000000 "$(stat -c %s "$f")"
cmp "$f" <(head -c 1000000 /dev/zero) || bcf_fail "fallocated bytes not 0"
fallocate -n -o 1000000 -l 500000 "$f" || bcf_fail "fallocate --keep-size"
bcf_eq "size after fallocate -n" 1000000 "$(stat -c %s "$f")"

probe=$BCF_BACK/.probe
head -c 65536 /dev/urandom > "$probe"
if fallocate -p -o 4096 -l 8192 "$probe" 2>/dev/null; then
	rm -f "$probe"
	cp "$src/f1048577" "$f"
	cp "$src/f1048577" "$ref.falloc"
	fallocate -p -o 4096 -l 8192 "$f" || bcf_fail "fallocate --punch-hole"
	fallocate -p -o 4096 -l 8192 "$ref.falloc"
	bcf_eq "size after punch-hole" 1048577 "$(stat -c %s "$f")"
	cmp "$f" "$ref.falloc" || bcf_fail "contents after --punch-hole"
	bcf_remount
	cmp "$f" "$ref.falloc" || bcf_fail "punched file differs after remount"
else
	rm -f "$probe"
	bcf_log "backing file system cannot punch holes: part skipped"
fi
exit 0
