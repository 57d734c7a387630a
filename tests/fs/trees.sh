#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# trees.sh - directory trees and metadata through everyday tools.
#
# A tree of a few hundred files (nested directories, symlinks, hard links,
# odd modes, times, xattrs) goes into the mount and back out with rsync -a,
# tar and cp -a, compared with diff -r and a listing of modes, sizes, times
# and link targets; a second rsync finds nothing to do.  Then find and du,
# mv, ln, ln -s, chmod, chown, touch -d, setfattr/getfattr, df and flock.
. "$(dirname "$0")/lib.sh"
bcf_init
bcf_mount

src=$BCF_TMP/src
mkdir "$src"

# make_tree DIR: a deterministic tree
make_tree()
{
	local d=$1 i j

	for i in $(seq 1 12); do
		mkdir -p "$d/dir$i/sub$((i % 3))/deep/er"
		for j in $(seq 1 20); do
			bcf_gen "t$i-$j" $(((i * 7919 + j * 104729) % 70000)) \
				> "$d/dir$i/file$j"
		done
		for j in 1 2 3; do
			echo "nested $i $j" > "$d/dir$i/sub$((i % 3))/deep/n$j"
			echo "deeper $i $j" > "$d/dir$i/sub$((i % 3))/deep/er/x$j"
		done
		ln -s "file1" "$d/dir$i/link-to-file1"
		ln -s "../dir$(((i % 12) + 1))" "$d/dir$i/link-to-dir"
		ln -s "does/not/exist" "$d/dir$i/dangling"
		ln "$d/dir$i/file2" "$d/dir$i/hardlink-to-file2"
	done
	: > "$d/empty"
	mkdir "$d/emptydir"
	chmod 0600 "$d/dir1/file1"
	chmod 0751 "$d/dir2"
	chmod 0444 "$d/dir3/file3"
	chmod 4755 "$d/dir4/file4"
	chmod 2750 "$d/dir5"
	chmod 1777 "$d/dir6"
	touch -d '2001-02-03 04:05:06' "$d/dir7/file7"
	touch -h -d '2002-03-04 05:06:07' "$d/dir7/link-to-file1"
	printf 'name with spaces\n' > "$d/dir8/a file with spaces"
	printf 'utf8\n' > "$d/dir8/ünïcödé-名前"
	chown 1234:5678 "$d/dir9/file9"
}
make_tree "$src"
nfiles=$(find "$src" | wc -l)
[ "$nfiles" -gt 300 ] || bcf_hard "the source tree has only $nfiles entries"

# listing DIR: one line per entry: path type mode uid gid size mtime target
listing()
{
	(cd "$1" && find . -printf '%p %y %m %U %G %s %T@ %l\n' |
		sed 's/ \([0-9]*\)\.[0-9]* / \1 /' |
		awk '$2 == "d" { $6 = "-" } { print }' | sort)
}

same_tree()
{
	diff -r --no-dereference "$1" "$2" > "$BCF_TMP/diff" 2>&1 ||
		{ head -20 "$BCF_TMP/diff"; bcf_fail "$3: diff -r differs"; }
	listing "$1" > "$BCF_TMP/l1"
	listing "$2" > "$BCF_TMP/l2"
	diff "$BCF_TMP/l1" "$BCF_TMP/l2" > "$BCF_TMP/diff" ||
		{ head -20 "$BCF_TMP/diff"; bcf_fail "$3: metadata differs"; }
}

# rsync in and out
rsync -aH "$src/" "$BCF_MNT/rs/" || bcf_fail "rsync -aH into the mount"
same_tree "$src" "$BCF_MNT/rs" "rsync in"
changes=$(rsync -aH --itemize-changes "$src/" "$BCF_MNT/rs/") ||
	bcf_fail "second rsync into the mount"
[ -z "$changes" ] || { echo "$changes" | head; \
	bcf_fail "a second rsync -a still finds changes"; }
rsync -aH "$BCF_MNT/rs/" "$BCF_TMP/rs-out/" || bcf_fail "rsync out"
same_tree "$src" "$BCF_TMP/rs-out" "rsync out"
# hard links survive
a=$(stat -c %i "$BCF_MNT/rs/dir3/file2")
b=$(stat -c %i "$BCF_MNT/rs/dir3/hardlink-to-file2")
bcf_eq "inode of a hard link" "$a" "$b"
bcf_eq "link count" 2 "$(stat -c %h "$BCF_MNT/rs/dir3/file2")"

# tar both ways
tar -C "$src" -cf "$BCF_MNT/tree.tar" . || bcf_fail "tar create on the mount"
mkdir "$BCF_TMP/untar"
tar -C "$BCF_TMP/untar" -xpf "$BCF_MNT/tree.tar" || bcf_fail "tar extract"
same_tree "$src" "$BCF_TMP/untar" "tar to the mount"
mkdir "$BCF_MNT/untar"
tar -C "$src" -cf - . | tar -C "$BCF_MNT/untar" -xpf - ||
	bcf_fail "tar extract into the mount"
same_tree "$src" "$BCF_MNT/untar" "tar extract into the mount"
tar -C "$BCF_MNT/untar" -cf "$BCF_TMP/back.tar" . || bcf_fail "tar from mount"
mkdir "$BCF_TMP/untar2"
tar -C "$BCF_TMP/untar2" -xpf "$BCF_TMP/back.tar"
same_tree "$src" "$BCF_TMP/untar2" "tar from the mount"

# cp -a both ways
cp -a "$src" "$BCF_MNT/cpa" || bcf_fail "cp -a into the mount"
same_tree "$src" "$BCF_MNT/cpa" "cp -a in"
cp -a "$BCF_MNT/cpa" "$BCF_TMP/cpa-out" || bcf_fail "cp -a out of the mount"
same_tree "$src" "$BCF_TMP/cpa-out" "cp -a out"

# everything again after a remount
bcf_remount
same_tree "$src" "$BCF_MNT/rs" "rsync copy after remount"

# find and du agree with the source
a=$(cd "$src" && find . | sort | sha256sum)
b=$(cd "$BCF_MNT/rs" && find . | sort | sha256sum)
bcf_eq "find listing" "$a" "$b"
a=$(cd "$src" && find . -type f | wc -l)
b=$(cd "$BCF_MNT/rs" && find . -type f | wc -l)
bcf_eq "find -type f count" "$a" "$b"
a=$(cd "$src" && find . -type l | wc -l)
b=$(cd "$BCF_MNT/rs" && find . -type l | wc -l)
bcf_eq "find -type l count" "$a" "$b"
# directory sizes differ between file systems: compare the files only
du_files()
{
	(cd "$1" && find . -type d | sed 's/^/D /'; du -alb --apparent-size .) |
		awk '$1 == "D" { d[$2] = 1; next } !($2 in d)' | sort -k2
}
du_files "$src" > "$BCF_TMP/du1"
du_files "$BCF_MNT/rs" > "$BCF_TMP/du2"
diff "$BCF_TMP/du1" "$BCF_TMP/du2" > "$BCF_TMP/diff" ||
	{ head "$BCF_TMP/diff"; bcf_fail "du -alb differs"; }
[ "$(wc -l < "$BCF_TMP/du2")" -gt 250 ] || bcf_fail "du -a lists too little"
a=$(du -sk "$src" | cut -f1)
b=$(du -sk "$BCF_MNT/rs" | cut -f1)
[ "$b" -ge $((a / 2)) ] && [ "$b" -le $((a * 2)) ] ||
	bcf_fail "du -sk: $b KiB on the mount, $a KiB in the source"

# mv within and across directories
m=$BCF_MNT/rs
mv "$m/dir1/file5" "$m/dir1/file5-renamed" || bcf_fail "mv within a dir"
[ ! -e "$m/dir1/file5" ] || bcf_fail "mv left the old name"
cmp "$m/dir1/file5-renamed" "$src/dir1/file5" || bcf_fail "mv content"
mv "$m/dir1/file6" "$m/dir2/sub2/moved" || bcf_fail "mv across dirs"
cmp "$m/dir2/sub2/moved" "$src/dir1/file6" || bcf_fail "mv across content"
mv "$m/dir10" "$m/dir11/sub2/dir10-moved" || bcf_fail "mv of a directory"
diff -r --no-dereference "$src/dir10" "$m/dir11/sub2/dir10-moved" ||
	bcf_fail "moved directory differs"
mv "$m/dir1/file7" "$m/dir1/file8" || bcf_fail "mv onto an existing file"
cmp "$m/dir1/file8" "$src/dir1/file7" || bcf_fail "mv -f replaced content"
bcf_remount
cmp "$m/dir2/sub2/moved" "$src/dir1/file6" || bcf_fail "mv after remount"
[ ! -e "$m/dir10" ] || bcf_fail "moved directory still at its old name"
[ -d "$m/dir11/sub2/dir10-moved/sub1/deep/er" ] ||
	bcf_fail "moved directory lost its subtree after remount"

# ln and ln -s
ln "$m/dir12/file1" "$m/hl" || bcf_fail "ln"
bcf_eq "nlink after ln" 2 "$(stat -c %h "$m/dir12/file1")"
bcf_eq "nlink of the new name" 2 "$(stat -c %h "$m/hl")"
ln "$m/hl" "$m/dir12/sub0/hl2" || bcf_fail "ln into a subdir"
bcf_eq "nlink after a 2nd ln" 3 "$(stat -c %h "$m/dir12/file1")"
rm "$m/hl"
bcf_eq "nlink after rm" 2 "$(stat -c %h "$m/dir12/file1")"
ln -s "dir12/file1" "$m/sl" || bcf_fail "ln -s"
bcf_eq "readlink" "dir12/file1" "$(readlink "$m/sl")"
cmp "$m/sl" "$src/dir12/file1" || bcf_fail "read through a symlink"
bcf_eq "stat -c %F of a symlink" "symbolic link" "$(stat -c %F "$m/sl")"

# chmod, chown, touch -d
f=$m/meta
echo meta > "$f"
for mode in 0600 0755 0444 4711 2755 1777 0000; do
	chmod "$mode" "$f" || bcf_fail "chmod $mode"
	bcf_eq "mode after chmod $mode" "$(printf %o $((8#$mode)))" \
		"$(stat -c %a "$f")"
done
chmod 0644 "$f"
chown 4321:8765 "$f" || bcf_fail "chown"
bcf_eq "owner after chown" "4321:8765" "$(stat -c %u:%g "$f")"
chown -h 111:222 "$m/sl" || bcf_fail "chown -h of a symlink"
bcf_eq "symlink owner" "111:222" "$(stat -c %u:%g "$m/sl")"
touch -d '1999-12-31 23:59:58.5 UTC' "$f" || bcf_fail "touch -d"
bcf_eq "mtime after touch -d" "946684798.500000000" "$(stat -c %.9Y "$f")"
touch -a -d '2010-01-01 00:00:00 UTC' "$f"
bcf_eq "atime after touch -a" 1262304000 "$(stat -c %X "$f")"
bcf_eq "mtime unchanged by touch -a" 946684798 "$(stat -c %Y "$f")"
bcf_remount
bcf_eq "owner after remount" "4321:8765" "$(stat -c %u:%g "$f")"
bcf_eq "mtime after remount" 946684798 "$(stat -c %Y "$f")"

# xattrs
setfattr -n user.color -v blue "$f" || bcf_fail "setfattr"
setfattr -n user.bin -v 0x00ff10 "$f" || bcf_fail "setfattr binary"
v=$(getfattr --absolute-names -n user.color "$f" | grep '^user.color=')
bcf_eq "getfattr user.color" 'user.color="blue"' "$v"
v=$(getfattr --absolute-names -e hex -n user.bin "$f" | grep '^user.bin=')
bcf_eq "getfattr user.bin" 'user.bin=0x00ff10' "$v"
v=$(getfattr --absolute-names -d "$f" | grep -c '^user\.')
bcf_eq "getfattr -d count" 2 "$v"
setfattr -x user.color "$f" || bcf_fail "setfattr -x"
getfattr -n user.color "$f" > /dev/null 2>&1 &&
	bcf_fail "user.color still there after setfattr -x"
v=$(getfattr --absolute-names -e hex -n user.bin "$BCF_BACK/rs/meta" |
	grep '^user.bin=')
bcf_eq "xattr on the backing file" 'user.bin=0x00ff10' "$v"

# A file capability set through the mount is seen at once, although a
# write has just cached its absence, and the next write drops it (the
# kernel's rule for written files).  v2 capability: cap_net_raw, effective.
c=$m/capfile
printf 'x' > "$c" && printf 'y' >> "$c" || bcf_fail "write capfile"
if setfattr -n security.capability -v 0x0100000200200000000000000000000000000000 \
	"$c" 2> "$BCF_TMP/setcap.err"; then
	v=$(getfattr --absolute-names -e hex -n security.capability "$c" |
		grep '^security.capability=')
	bcf_eq "capability right after it was set" \
		'security.capability=0x0100000200200000000000000000000000000000' "$v"
	printf 'z' >> "$c" || bcf_fail "write to capfile"
	getfattr -n security.capability "$c" > /dev/null 2>&1 &&
		bcf_fail "a write left security.capability in place"
	getfattr -n security.capability "$BCF_BACK/rs/capfile" > /dev/null 2>&1 &&
		bcf_fail "a write left security.capability on the backing file"
else
	echo "trees[$BCF_TRANSPORT]: cannot set file capabilities here" \
		"($(cat "$BCF_TMP/setcap.err")): capability check skipped"
fi

# df shows sizes
df -P "$BCF_MNT" > "$BCF_TMP/df" || bcf_fail "df"
total=$(awk 'NR == 2 { print $2 }' "$BCF_TMP/df")
[ -n "$total" ] && [ "$total" -gt 0 ] || bcf_fail "df shows size '$total'"
btotal=$(df -P "$BCF_BACK" | awk 'NR == 2 { print $2 }')
[ "$total" -ge $((btotal / 2)) ] && [ "$total" -le $((btotal * 2)) ] ||
	bcf_fail "df size $total KiB, backing file system $btotal KiB"

# flock: a second process cannot take a held lock
lock=$m/lockfile
: > "$lock"
flock -x "$lock" sh -c "touch '$BCF_TMP/held'; sleep 3" &
holder=$!
bcf_wait_for 10 test -e "$BCF_TMP/held" || bcf_fail "flock -x did not lock"
if flock -n -x "$lock" true; then
	kill $holder 2>/dev/null
	bcf_fail "flock -n got a lock another process holds"
fi
t0=$SECONDS
flock -w 10 -x "$lock" true || bcf_fail "flock -w did not get the lock"
wait $holder || bcf_fail "the lock holder failed"
[ $((SECONDS - t0)) -ge 1 ] || bcf_fail "the blocking flock did not wait"
flock -n -x "$lock" true || bcf_fail "flock -n on a free lock"
exit 0
