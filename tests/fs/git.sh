#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# git.sh - a git repository on the mount: init, add, commit, log, clone
# from the mount to a local directory and from a local repository into the
# mount, and git fsck on every copy.  Git exercises renames, hard links,
# lock files, mmap of pack files and many small files.
. "$(dirname "$0")/lib.sh"
bcf_init
command -v git > /dev/null || bcf_skip "git is not installed"
bcf_mount

export GIT_AUTHOR_NAME=Test GIT_AUTHOR_EMAIL=test@example.com
export GIT_COMMITTER_NAME=Test GIT_COMMITTER_EMAIL=test@example.com
export GIT_CONFIG_NOSYSTEM=1 HOME=$BCF_TMP
git config --global init.defaultBranch main
git config --global safe.directory '*'

g()
{
	git -C "$@" > "$BCF_TMP/git.out" 2>&1 ||
		{ cat "$BCF_TMP/git.out"; bcf_fail "git -C $*"; }
}

r=$BCF_MNT/repo
g "$BCF_MNT" init -q repo
for c in $(seq 1 15); do
	mkdir -p "$r/d$((c % 4))"
	bcf_gen "git-$c" $((c * 3001)) | od -An -tx1 > "$r/d$((c % 4))/f$c"
	echo "line $c" >> "$r/README"
	g "$r" add -A
	g "$r" commit -q -m "commit $c"
done
git -C "$r" mv README README.md || bcf_fail "git mv"
g "$r" commit -q -m "rename"
bcf_eq "commit count" 16 "$(git -C "$r" rev-list --count HEAD)"
bcf_eq "last subject" rename "$(git -C "$r" log -1 --format=%s)"
g "$r" gc -q
g "$r" fsck --strict --full
bcf_eq "git status after gc" "" "$(git -C "$r" status --porcelain)"

# clone from the mount to a local directory
g "$BCF_TMP" clone -q "$r" out
g "$BCF_TMP/out" fsck --strict --full
bcf_eq "HEAD of the clone" "$(git -C "$r" rev-parse HEAD)" \
	"$(git -C "$BCF_TMP/out" rev-parse HEAD)"
diff -r -x .git "$r" "$BCF_TMP/out" || bcf_fail "clone out differs"

# a local repository cloned into the mount
l=$BCF_TMP/local
g "$BCF_TMP" init -q local
for c in $(seq 1 10); do
	bcf_gen "local-$c" $((c * 5003)) | od -An -tx1 > "$l/l$c"
	g "$l" add -A
	g "$l" commit -q -m "local $c"
done
g "$BCF_MNT" clone -q --no-local "$l" cloned
g "$BCF_MNT/cloned" fsck --strict --full
bcf_eq "HEAD of the clone in the mount" "$(git -C "$l" rev-parse HEAD)" \
	"$(git -C "$BCF_MNT/cloned" rev-parse HEAD)"
diff -r -x .git "$l" "$BCF_MNT/cloned" || bcf_fail "clone in differs"

# after a remount the repositories are still sound
bcf_remount
g "$r" fsck --strict --full
g "$BCF_MNT/cloned" fsck --strict --full
bcf_eq "log after remount" 16 "$(git -C "$r" log --oneline | wc -l)"
g "$BCF_MNT/cloned" pull -q "$r" main --allow-unrelated-histories --no-rebase \
	--no-edit
g "$BCF_MNT/cloned" fsck --strict
exit 0
