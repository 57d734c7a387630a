#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# tree-bench.sh - a million small files: the phases of tests/fs/tree.sh,
# timed, on a native directory and through bluecachefs.
#
# Usage: tree-bench.sh BUILDDIR   (make bench-tree)
#
# BENCH_TREE_DIRS x BENCH_TREE_FILES (1000 x 1000) small files are created
# (one process: open, write, close each), listed with ls -lR, walked with
# find, measured with du -s, read back (find | sort | xargs cat |
# sha256sum, checked against the creator's sum) and deleted with rm -rf,
# on each configuration of BENCH_TREE_CONFIGS (native shm tcp): native is
# a directory of the file system the agents serve; shm is a bluecachefs
# local: mount (its private agent); tcp a bluecache-agent on loopback
# mounted with -o transport=tcp.  The agent's open descriptors are sampled
# every 0.5 s; their peak is printed per configuration.  Prints a table of
# seconds per phase and the ratio mount/native.  A configuration that
# fails a phase says which and how, and the rest still run.  A report,
# not a test: it fails only when nothing could be measured.  Every phase
# is bounded by BENCH_TREE_PHASE_SECONDS (3600).
set -u
builddir=${1:-.}
ndirs=${BENCH_TREE_DIRS:-1000}
nfiles=${BENCH_TREE_FILES:-1000}
configs=${BENCH_TREE_CONFIGS:-native shm tcp}
phase_max=${BENCH_TREE_PHASE_SECONDS:-3600}
fs=$builddir/fs/bluecachefs
agent=$builddir/agent/bluecache-agent
export BLUECACHE_AGENT=$agent
PHASES="create ls find du read delete"
for t in fusermount3 python3 sha256sum; do
	command -v $t >/dev/null ||
		{ echo "tree-bench: $t is missing" >&2; exit 2; }
done
[ -x "$fs" ] && [ -x "$agent" ] ||
	{ echo "tree-bench: build the daemon and the agent" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bcf-tree-bench.XXXXXX") || exit 2
tmp=$(cd "$tmp" && pwd -P)
mnt=$tmp/mnt
fs_pid=
agent_pid=
sampler_pid=
cleanup()
{
	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
	unmount
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null &&
		wait "$agent_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
mkdir -p "$mnt" "$tmp/back" || exit 2

mounted()
{
	awk -v m="$mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

# wait_for SECONDS COMMAND...
wait_for()
{
	local n=$(($1 * 10))

	shift
	while [ $n -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

unmount()
{
	local i

	[ -n "$fs_pid" ] || return 0
	cd / || true
	for i in $(seq 1 50); do
		mounted || break
		fusermount3 -u "$mnt" 2>/dev/null && break
		sleep 0.2
	done
	mounted && fusermount3 -uz "$mnt"
	wait_for 30 eval '! kill -0 '"$fs_pid"' 2>/dev/null' ||
		kill -KILL "$fs_pid"
	wait "$fs_pid" 2>/dev/null
	fs_pid=
}

# agents: the agent serving the mount now (ours, or the daemon's child)
agents()
{
	local c

	[ -n "$agent_pid" ] && echo "$agent_pid"
	[ -n "$fs_pid" ] || return 0
	for c in $(cat /proc/"$fs_pid"/task/*/children 2>/dev/null); do
		case $(tr '\0' '\n' < "/proc/$c/cmdline" 2>/dev/null |
		       head -n 1) in
		*bluecache-agent) echo "$c" ;;
		esac
	done
}

# setup CONFIG: make $dir the directory to work in
setup()
{
	local port secret

	case $1 in
	native)
		dir=$tmp/back
		return 0
		;;
	shm)
		"$fs" "local:$tmp/back" "$mnt" -f -o transport=shm \
			2>>"$tmp/fs-shm.log" &
		fs_pid=$!
		;;
	tcp)
		secret=$tmp/secret
		(umask 077 && head -c 32 /dev/urandom | od -An -tx1 |
			tr -d ' \n' > "$secret")
		port=$(python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		: > "$tmp/ready"
		"$agent" --root "$tmp/back" --listen "tcp://127.0.0.1:$port" \
			--secret-file "$secret" --squash none --foreground \
			--ready-fd 3 3>"$tmp/ready" 2>>"$tmp/agent-tcp.log" &
		agent_pid=$!
		wait_for 20 grep -q '^ready$' "$tmp/ready" || {
			echo "tcp: the agent did not start" >&2
			tail -n 5 "$tmp/agent-tcp.log" >&2
			return 1
		}
		"$fs" "tcp://127.0.0.1:$port" "$mnt" -f \
			-o "transport=tcp,secret_file=$secret" \
			2>>"$tmp/fs-tcp.log" &
		fs_pid=$!
		;;
	*)
		echo "tree-bench: unknown configuration $1" >&2
		return 1
		;;
	esac
	if ! wait_for 20 mounted; then
		echo "$1: the mount did not come up" >&2
		tail -n 5 "$tmp/fs-$1.log" >&2
		return 1
	fi
	dir=$mnt
}

teardown()
{
	unmount
	if [ -n "$agent_pid" ]; then
		kill "$agent_pid" 2>/dev/null
		wait "$agent_pid" 2>/dev/null
		agent_pid=
	fi
	rm -rf "$tmp/back/tree"
}

# sampler: the most descriptors any agent held, kept in $tmp/peak
sampler()
{
	local a fds peak=0

	while :; do
		for a in $(agents); do
			fds=(/proc/"$a"/fd/*)
			[ ${#fds[@]} -gt $peak ] && peak=${#fds[@]} &&
				echo "$peak" > "$tmp/peak"
		done
		sleep 0.5
	done
}

declare -A secs=() peak=() failed=()
# run CONFIG: every phase on CONFIG, timed
run()
{
	local c=$1 p t0 rc sum

	echo 0 > "$tmp/peak"
	setup "$c" || { failed[$c]="setup"; teardown; return; }
	if [ "$c" != native ]; then
		sampler &
		sampler_pid=$!
	fi
	cd "$dir" || exit 2
	for p in $PHASES; do
		: > "$tmp/err"
		t0=$EPOCHREALTIME
		case $p in
		create)
			timeout "$phase_max" python3 - tree "$ndirs" "$nfiles" \
				> "$tmp/sum" 2> "$tmp/err" <<'PY'
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
			;;
		ls) timeout "$phase_max" ls -lR tree ;;
		find) timeout "$phase_max" find tree ;;
		du) timeout "$phase_max" du -s tree ;;
		read)
			sum=$(timeout "$phase_max" sh -c 'find tree -type f \
				-print0 | LC_ALL=C sort -z | xargs -0 cat |
				sha256sum' 2> "$tmp/err" | cut -d' ' -f1)
			[ "$sum" = "$(cat "$tmp/sum")" ] ||
				echo "sha256 $sum, expected $(cat "$tmp/sum")" \
					>> "$tmp/err"
			! [ -s "$tmp/err" ]
			;;
		delete) timeout "$phase_max" rm -rf tree ;;
		esac > /dev/null 2>> "$tmp/err"
		rc=$?
		secs[$c,$p]=$(awk -v a="$t0" -v b="$EPOCHREALTIME" \
			'BEGIN { printf "%.2f", b - a }')
		if [ $rc -ne 0 ]; then
			failed[$c]="$p: $(tail -n 1 "$tmp/err")"
			echo "$c: $p failed: $(tail -n 1 "$tmp/err")" >&2
			break
		fi
		echo "$c: $p ${secs[$c,$p]} s" >&2
	done
	cd / || true
	if [ -n "$sampler_pid" ]; then
		kill "$sampler_pid" 2>/dev/null
		wait "$sampler_pid" 2>/dev/null
		sampler_pid=
		peak[$c]=$(cat "$tmp/peak")
	fi
	teardown
}

echo "tree-bench: $ndirs x $nfiles files, configurations: $configs" >&2
for c in $configs; do
	run "$c"
done

# the table: seconds per phase, and mount/native
echo
echo "Tree of $ndirs x $nfiles files ($(date +%Y-%m-%d), $(nproc) CPUs," \
	"$(df -T "$tmp" | awk 'NR == 2 { print $2 }') underneath):"
echo
hdr="| phase |"
sep="|---|"
for c in $configs; do
	hdr+=" $c (s) |"
	sep+="---|"
	[ "$c" != native ] && case " $configs " in *" native "*)
		hdr+=" $c/native |"; sep+="---|" ;; esac
done
echo "$hdr"
echo "$sep"
for p in $PHASES; do
	row="| $p |"
	for c in $configs; do
		v=${secs[$c,$p]:-}
		f=${failed[$c]:-}
		[ -n "$v" ] && [ "$f" != "${f#$p:}" ] && v=failed
		row+=" ${v:--} |"
		[ "$c" != native ] || continue
		case " $configs " in *" native "*) ;; *) continue ;; esac
		n=${secs[native,$p]:-}
		if [ -n "$n" ] && [ -n "$v" ] && [ "$v" != failed ]; then
			row+=" $(awk -v a="$v" -v b="$n" 'BEGIN {
				if (b > 0) printf "%.1f", a / b
				else print "-" }') |"
		else
			row+=" - |"
		fi
	done
	echo "$row"
done
echo
for c in $configs; do
	[ "$c" = native ] && continue
	echo "$c: peak agent descriptors ${peak[$c]:--}${failed[$c]:+" \
		"(failed in ${failed[$c]})}"
done
[ ${#secs[@]} -gt 0 ]
