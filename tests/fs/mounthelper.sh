#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# mounthelper.sh - mounting through the FUSE mount helper.
#
# "mount -t fuse.bluecachefs AGENT MNT -o ..." makes mount(8) run
# "mount.fuse3 AGENT MNT -t fuse.bluecachefs -o ...", which starts
# bluecachefs from PATH.  mount(8) drops PATH for its helpers, so the built
# daemon is reached by running mount.fuse3 directly with a PATH that holds
# a bluecachefs symlink, by "mount -t fuse PROGRAM#AGENT", and by an fstab
# line of that form (mount -T FILE MNT).  "mount -t fuse.bluecachefs"
# itself runs too when the bluecachefs that helpers find is the built one.
# Each time: the file system type in /proc/self/mountinfo, data through
# the mount, and umount ends the daemon.
. "$(dirname "$0")/lib.sh"
bcf_init
[ -x /sbin/mount.fuse3 ] || [ -x /usr/sbin/mount.fuse3 ] ||
	bcf_skip "mount.fuse3 is missing"
command -v mount > /dev/null || bcf_skip "mount(8) is missing"
[ "$(id -u)" = 0 ] || bcf_skip "mount(8) of a FUSE type needs root"

mkdir "$BCF_TMP/bin"
ln -s "$BCF_FS" "$BCF_TMP/bin/bluecachefs"
export PATH=$BCF_TMP/bin:$PATH

case $BCF_TRANSPORT in
shm)
	agent=local:$BCF_BACK
	opts=transport=shm
	;;
tcp)
	bcf_agent_tcp
	agent=tcp://127.0.0.1:$BCF_PORT
	opts=transport=tcp,secret_file=$BCF_SECRET
	;;
esac

fstype()
{
	awk -v m="$1" '$5 == m { for (i = 7; $i != "-"; i++); print $(i + 1) }' \
		/proc/self/mountinfo
}

daemons_of()
{
	local p

	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = bluecachefs ] || continue
		tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF -- "$1" &&
			echo "${p#/proc/}"
	done
}

# no_daemon_of MNT: none (a function, so that each poll looks again)
no_daemon_of()
{
	test -z "$(daemons_of "$1")"
}

# check_mount MNT NAME: the mount works and unmounts cleanly
check_mount()
{
	local mnt=$1 name=$2

	bcf_eq "file system type" fuse.bluecachefs "$(fstype "$mnt")"
	bcf_gen "$name" 3000000 > "$BCF_TMP/$name"
	cp "$BCF_TMP/$name" "$mnt/$name" || bcf_fail "cp into $mnt"
	bcf_same_sha "$BCF_TMP/$name" "$mnt/$name"
	bcf_same_sha "$BCF_TMP/$name" "$BCF_BACK/$name"
	umount "$mnt" || bcf_fail "umount $mnt"
	bcf_is_mounted "$mnt" && bcf_fail "$mnt is still mounted after umount"
	bcf_wait_for 10 no_daemon_of "$mnt" || {
		bcf_dump_procs $(daemons_of "$mnt")
		bcf_fail "bluecachefs still runs after umount"
	}
}

helper=$(command -v mount.fuse3 || echo /sbin/mount.fuse3)
m1=$BCF_TMP/m1
mkdir "$m1"
timeout 30 "$helper" "$agent" "$m1" -t fuse.bluecachefs -o "$opts" \
	2> "$BCF_TMP/mount.err" ||
	{ cat "$BCF_TMP/mount.err"; bcf_fail "mount.fuse3 $agent $m1"; }
check_mount "$m1" via-helper

m2=$BCF_TMP/m2
mkdir "$m2"
timeout 30 mount -t fuse "$BCF_FS#$agent" "$m2" -o "$opts" \
	2> "$BCF_TMP/mount.err" ||
	{ cat "$BCF_TMP/mount.err"; bcf_fail "mount -t fuse $BCF_FS#$agent"; }
check_mount "$m2" via-mount

m3=$BCF_TMP/m3
mkdir "$m3"
echo "$BCF_FS#$agent $m3 fuse $opts,noauto 0 0" > "$BCF_TMP/fstab"
timeout 30 mount -T "$BCF_TMP/fstab" "$m3" 2> "$BCF_TMP/mount.err" ||
	{ cat "$BCF_TMP/mount.err"; bcf_fail "mount of an fstab line"; }
check_mount "$m3" via-fstab
want="via-fstab via-helper via-mount"

# the PATH mount(8) gives its helpers
found=$(env -i /bin/sh -c 'command -v bluecachefs' 2>/dev/null)
if [ -n "$found" ] && [ "$found" -ef "$BCF_FS" ]; then
	m4=$BCF_TMP/m4
	mkdir "$m4"
	timeout 30 mount -t fuse.bluecachefs "$agent" "$m4" -o "$opts" \
		2> "$BCF_TMP/mount.err" ||
		{ cat "$BCF_TMP/mount.err"; bcf_fail "mount -t fuse.bluecachefs"; }
	check_mount "$m4" via-type
	want="$want via-type"
else
	bcf_log "helpers do not find this build's bluecachefs on PATH:" \
		"mount -t fuse.bluecachefs not run"
fi
bcf_eq "files from all mounts" "$want" "$(cd "$BCF_BACK" && echo via-*)"
exit 0
