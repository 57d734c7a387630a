#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# tree.sh - a tree of 50,000 files through an agent limited to 4096
# descriptors, whose descriptor count must stay bounded.
#
# A tree of TREE_DIRS x TREE_FILES (50 x 1000) small files is created
# through the mount (one process, each file opened, written and closed),
# listed with ls -lR (the regular files counted), walked with find
# (counted), measured with du -s (equal to du of the agent's directory),
# read back (sha256 of all contents in name order equal to the one the
# creator computed) and deleted with rm -rf (the agent's directory is
# then empty).  The agent runs with `ulimit -n 4096` (TREE_FD_LIMIT): the
# test shell sets it before starting the agent (tcp) or the daemon that
# starts its private agent (shm, local:DIR).  Every 0.2 s during each
# phase the agent's open descriptors are counted; the test fails if the
# count ever exceeds TREE_FD_BOUND, 1,500: the host knows 50,000 files,
# and an agent whose descriptors grow with what the host knows runs out.
# 1,500 holds with the agent's per-session bound on open descriptors
# (its default --fd-cache, and the handles and open files it keeps) plus
# listeners, sessions and io_uring, far below the 4096 limit.  Each phase
# is bounded by TREE_PHASE_SECONDS (600), a guard against a hang, not a
# measure of speed; the whole takes two to four minutes on an idle
# machine.  A table of seconds and peak descriptors per phase is printed.
#
# On a cephfs store (BCF_STORE=cephfs) the agent holds no descriptor per
# file, so the bound checks its Ceph client's sockets, and the tree is
# 10 x 1000: the test's one-OSD, in-memory cluster makes a few hundred
# files a second, whoever its client is.  Over tcp the tree is 10 x 1000
# too: names and attributes take the control socket as they do with shm,
# whose run makes the big tree, and 10,000 files are still more than twice
# the agent's descriptor limit.
. "$(dirname "$0")/lib.sh"
bcf_init
ndirs=${TREE_DIRS:-50}
[ "$BCF_STORE" = cephfs ] && ndirs=${TREE_DIRS:-10}
[ "$BCF_TRANSPORT" = tcp ] && ndirs=${TREE_DIRS:-10}
nfiles=${TREE_FILES:-1000}
fd_limit=${TREE_FD_LIMIT:-4096}
fd_bound=${TREE_FD_BOUND:-1500}
phase_max=${TREE_PHASE_SECONDS:-600}
total=$((ndirs * nfiles))

# the agent (tcp) or the daemon and its private agent (shm) inherit it
ulimit -n "$fd_limit" || bcf_hard "ulimit -n $fd_limit"
# attributes and names cached for a long time: the kernel keeps the
# inodes, and the host goes on knowing every file it created
bcf_mount -o attr_timeout=3600,entry_timeout=3600
agents=$(bcf_agent_pids)
[ -n "$agents" ] || bcf_hard "found no agent behind the mount"
for a in $agents; do
	lim=$(awk '/^Max open files/ { print $4 }' "/proc/$a/limits")
	[ "$lim" = "$fd_limit" ] ||
		bcf_hard "agent $a: descriptor limit $lim, not $fd_limit"
done
bcf_log "agent $agents, descriptor limit $fd_limit, bound $fd_bound"

# The sampler: "PHASE COUNT" lines, the phase read from a file each time
echo start > "$BCF_TMP/phase"
sampler()
{
	local a n fds phase

	while [ ! -e "$BCF_TMP/sampler.stop" ]; do
		read -r phase < "$BCF_TMP/phase"
		for a in $agents; do
			fds=(/proc/"$a"/fd/*)
			n=${#fds[@]}
			bcf_running "$a" && echo "$phase $n"
		done
		sleep 0.2
	done >> "$BCF_TMP/fds"
}
sampler &
sampler_pid=$!
tree_cleanup()
{
	local rc=$?

	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
	(exit $rc)
	bcf_cleanup
}
trap tree_cleanup EXIT

# peak PHASE: the most descriptors sampled in PHASE (0 when none)
peak()
{
	awk -v p="$1" '$1 == p && $2 > m { m = $2 } END { print m + 0 }' \
		"$BCF_TMP/fds"
}

report=
# phase NAME COMMAND...: run COMMAND (bounded) as phase NAME, sampling
# before it ends; fails naming the phase, its error and its peak
phase()
{
	local name=$1 t0 rc p

	shift
	echo "$name" > "$BCF_TMP/phase"
	t0=$EPOCHREALTIME
	timeout -k 5 "$phase_max" "$@" > "$BCF_TMP/out" 2> "$BCF_TMP/err"
	rc=$?
	# one more sample of the phase's end state
	sleep 0.5
	p=$(peak "$name")
	report+=$(awk -v n="$name" -v a="$t0" -v b="$EPOCHREALTIME" \
		-v p="$p" 'BEGIN { printf "%-8s %8.1f s %6d fds", n,
			b - a - 0.5, p }')$'\n'
	if [ $rc -ne 0 ]; then
		head -n 5 "$BCF_TMP/err" >&2
		printf '%s' "$report" >&2
		[ $rc -eq 124 ] && bcf_fail "$name: not done in $phase_max s" \
			"(peak $p descriptors in the agent)"
		bcf_fail "$name failed with status $rc (peak $p descriptors" \
			"in the agent): $(tail -n 1 "$BCF_TMP/err")"
	fi
	[ "$p" -le "$fd_bound" ] || {
		printf '%s' "$report" >&2
		bcf_fail "$name: the agent held $p descriptors, more than" \
			"$fd_bound, with $total files known to the host"
	}
	bcf_alive $agents || bcf_fail "$name: a process died"
}

# create: the files, and the sha256 of all contents in name order
phase create python3 - "$BCF_MNT/tree" "$ndirs" "$nfiles" <<'PY'
import hashlib, os, sys
root, nd, nf = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
h = hashlib.sha256()
os.mkdir(root)
for d in range(nd):
    dd = os.path.join(root, "d%04d" % d)
    os.mkdir(dd)
    for f in range(nf):
        data = ("%d/%d\n" % (d, f)).encode() * (1 + (d * nf + f) % 7)
        fd = os.open(os.path.join(dd, "f%05d" % f),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.close(fd)
        h.update(data)
print(h.hexdigest())
PY
expect_sha=$(cat "$BCF_TMP/out")

cd "$BCF_MNT" || bcf_fail "cd $BCF_MNT"
phase ls ls -lR tree
n=$(grep -c '^-' "$BCF_TMP/out")
bcf_eq "regular files in ls -lR" "$total" "$n"

phase find find tree
n=$(wc -l < "$BCF_TMP/out")
bcf_eq "entries found by find" "$((total + ndirs + 1))" "$n"

phase du du -s tree
du_mnt=$(cut -f1 "$BCF_TMP/out")
du_back=$(cd "$BCF_BACK" && du -s tree | cut -f1)
bcf_eq "du -s of the mount (the agent's directory: $du_back)" \
	"$du_back" "$du_mnt"

phase read sh -c 'find tree -type f -print0 | LC_ALL=C sort -z |
	xargs -0 cat | sha256sum'
bcf_eq "sha256 of all contents" "$expect_sha" "$(cut -d' ' -f1 "$BCF_TMP/out")"

phase delete rm -rf tree
[ -e "$BCF_BACK/tree" ] && bcf_fail "tree is still in the agent's directory"
[ -z "$(ls -A "$BCF_MNT")" ] || bcf_fail "the mount is not empty after rm -rf"
cd / || true

touch "$BCF_TMP/sampler.stop"
wait "$sampler_pid"
sampler_pid=
bcf_log "phase, seconds, peak descriptors in the agent:"
printf '%s' "$report" | sed "s/^/$BCF_NAME[$BCF_TRANSPORT]:   /"
bcf_umount
exit 0
