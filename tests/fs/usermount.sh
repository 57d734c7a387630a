#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# usermount.sh - a user who is not root mounts local:DIR, with the locked
# memory limit of a Debian login (RLIMIT_MEMLOCK 8 MiB), the way sshfs is
# used: bluecachefs local:DIR MNT on a directory the user owns, cp a file
# in, read it back, fusermount3 -u, and nothing left behind: no process, no
# socket, no private directory.  A second mount of the same user works
# beside the first.  Where the limit cannot hold the private agent's
# staging, the mount fails with one line that names RLIMIT_MEMLOCK and
# leaves nothing behind.  The user is uid 65534, switched to with setpriv.
. "$(dirname "$0")/lib.sh"
bcf_init
[ "$(id -u)" = 0 ] || bcf_skip "switching to another user needs root"
command -v setpriv > /dev/null || bcf_skip "setpriv is missing"
command -v prlimit > /dev/null || bcf_skip "prlimit is missing"
[ -u "$(command -v fusermount3)" ] ||
	bcf_skip "fusermount3 is not setuid: users cannot mount"

UID_USER=65534
MEMLOCK=8388608
# the user runs the built programs: a build tree under a private directory
# (a 0700 temp dir) cannot be reached by them
setpriv --reuid=$UID_USER --regid=$UID_USER --clear-groups \
	test -x "$top_builddir/fs/bluecachefs" ||
	bcf_skip "user $UID_USER cannot run $top_builddir/fs/bluecachefs"
U=$BCF_TMP/user
D=$U/data
RUN=$U/run
mkdir -p "$D" "$RUN" "$U/m1" "$U/m2" "$U/m3" || bcf_hard "mkdir"
chown -R "$UID_USER:$UID_USER" "$U" || bcf_hard "chown"
chmod 700 "$RUN"

# as_user [--memlock BYTES] CMD...: run CMD as the user, in a login's
# environment: its own TMPDIR (where the private agent's socket goes), no
# runtime dir, the locked memory limit of a login
as_user()
{
	local ml=$MEMLOCK

	if [ "$1" = --memlock ]; then
		ml=$2
		shift 2
	fi
	timeout 30 setpriv --reuid=$UID_USER --regid=$UID_USER \
		--clear-groups env -u XDG_RUNTIME_DIR HOME="$U" TMPDIR="$RUN" \
		BLUECACHE_AGENT="$BCF_AGENT" \
		prlimit --memlock=$ml:$ml -- "$@"
}

# procs_of PATTERN: bluecache* processes whose command line has PATTERN
procs_of()
{
	local p

	for p in /proc/[0-9]*; do
		case $(cat "$p/comm" 2>/dev/null) in
		bluecache*) ;;
		*) continue ;;
		esac
		tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF -- "$1" &&
			echo "${p#/proc/}"
	done
}

none_of()
{
	test -z "$(procs_of "$1")"
}

user_cleanup()
{
	local rc=$? m

	for m in "$U"/m1 "$U"/m2 "$U"/m3; do
		bcf_is_mounted "$m" && fusermount3 -uz "$m"
	done
	bcf_wait_for 5 none_of "$D" || kill $(procs_of "$D") 2>/dev/null
	(exit $rc)
	bcf_cleanup
}
trap user_cleanup EXIT

# nothing_left: no process serves $D, no socket or private directory
nothing_left()
{
	bcf_wait_for 10 none_of "$D" || {
		bcf_dump_procs $(procs_of "$D")
		bcf_fail "processes left: $(procs_of "$D")"
	}
	[ -z "$(ls -A "$RUN")" ] ||
		bcf_fail "left in the user's TMPDIR: $(ls -A "$RUN")"
}

# expect_memlock NAME [--memlock BYTES] [-o OPTS]: the mount on m3 fails,
# with one line naming RLIMIT_MEMLOCK, and leaves nothing of its own
expect_memlock()
{
	local name=$1 ml=$MEMLOCK err=$BCF_TMP/$1.err rc

	shift
	if [ "$1" = --memlock ]; then
		ml=$2
		shift 2
	fi
	as_user --memlock "$ml" "$BCF_FS" "local:$D" "$U/m3" "$@" 2> "$err"
	rc=$?
	bcf_log "$name: exit $rc: $(cat "$err")"
	[ $rc -ne 0 ] && [ $rc -ne 124 ] ||
		bcf_fail "$name: exit $rc, expected a failure"
	[ "$(grep -c . "$err")" -eq 1 ] ||
		bcf_fail "$name: expected one line, got: $(cat "$err")"
	grep -q 'RLIMIT_MEMLOCK' "$err" ||
		bcf_fail "$name: the line does not name RLIMIT_MEMLOCK"
	bcf_is_mounted "$U/m3" && bcf_fail "$name: $U/m3 is mounted"
	bcf_wait_for 10 none_of "$U/m3" ||
		bcf_fail "$name: processes left: $(procs_of "$U/m3")"
}

# a mount tool is silent when it works
as_user "$BCF_FS" "local:$D" "$U/m1" 2> "$BCF_TMP/m1.err" ||
	{ cat "$BCF_TMP/m1.err" >&2; bcf_fail "the user's local: mount failed"; }
[ -s "$BCF_TMP/m1.err" ] &&
	bcf_fail "a good mount printed: $(cat "$BCF_TMP/m1.err")"
bcf_is_mounted "$U/m1" || bcf_fail "bluecachefs returned unmounted"
owner=$(awk -v m="$U/m1" '$5 == m' /proc/self/mountinfo |
	grep -o 'user_id=[0-9]*')
bcf_eq "the mount's owner" "user_id=$UID_USER" "$owner"

bcf_gen user 3000000 > "$BCF_TMP/src"
chmod 644 "$BCF_TMP/src"
as_user cp "$BCF_TMP/src" "$U/m1/file" || bcf_fail "cp into the mount"
as_user cat "$U/m1/file" > "$BCF_TMP/readback" || bcf_fail "read it back"
bcf_same_sha "$BCF_TMP/src" "$BCF_TMP/readback"
bcf_same_sha "$BCF_TMP/src" "$D/file"

# a second mount of the same user beside it (the limit counts both)
as_user "$BCF_FS" "local:$D" "$U/m2" 2> "$BCF_TMP/m2.err" ||
	{ cat "$BCF_TMP/m2.err" >&2; bcf_fail "a second user mount failed"; }
bcf_eq "read through the second mount" "$(bcf_sha "$BCF_TMP/src")" \
	"$(as_user cat "$U/m2/file" | sha256sum | cut -d' ' -f1)"

# limits too small, said before the agent starts
expect_memlock tiny-limit --memlock 131072
expect_memlock asked-too-much -o queue_depth=64,slot_size=1M
# fits the limit alone, not beside the two mounts: the agent itself fails
expect_memlock agent-enomem -o queue_depth=7,slot_size=1M

for m in m2 m1; do
	as_user fusermount3 -u "$U/$m" || bcf_fail "fusermount3 -u $U/$m"
	bcf_is_mounted "$U/$m" && bcf_fail "$U/$m is still mounted"
done
nothing_left
exit 0
