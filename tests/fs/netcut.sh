#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# netcut.sh - the mount's connections to a live agent are cut (ss -K: the
# kernel resets both ends, as a network that drops a connection would),
# and the mount reconnects by itself.
#   - a file removed while a process holds it open keeps its bytes, and
#     reads, writes, fstat and fsync go on through the same descriptor,
#     after one cut and after a second one (agent/linger.c keeps the lost
#     session's descriptor, a cephfs store's Fh, until the new session
#     opened the file again);
#   - once the process closes it, the agent holds no descriptor of it (its
#     space is free: the lingering one was closed when the file was opened
#     again, not a minute later, as the agent says when it stops);
#   - a file with a name, open across the cuts, keeps going too.
# Needs root (ss -K needs CAP_NET_ADMIN) and a kernel that destroys
# sockets on request (CONFIG_INET_DIAG_DESTROY).
. "$(dirname "$0")/lib.sh"
BCF_LOG_ALLOW=${BCF_LOG_ALLOW:-'lost|connection|reset|closed by'}
bcf_init
[ "$(id -u)" = 0 ] || bcf_skip "ss -K needs root"
command -v ss >/dev/null 2>&1 || bcf_skip "ss (iproute2) is missing"
command -v python3 >/dev/null 2>&1 || bcf_skip "python3 is missing"

bcf_mount -o reconnect_timeout=30

# cut: reset every TCP connection to or from the agent's port; fails when
# the kernel destroyed none
cut()
{
	local out

	out=$(ss -K -t -n state established \
		"( sport = :$BCF_PORT or dport = :$BCF_PORT )" 2>&1)
	printf '%s\n' "$out" | grep -q ":$BCF_PORT" || {
		printf '%s\n' "$out" >&2
		return 1
	}
}

restored()
{
	[ "$(grep -c 'agent connection restored' "$BCF_TMP/fs.log")" -ge "$1" ]
}

# two pipes, held open both ways here, so that neither side's open
# blocks and a read here can time out: the holder says where it is on
# up, and waits for a line on down
mkfifo "$BCF_TMP/up" "$BCF_TMP/down" || bcf_hard "mkfifo"
exec 3<>"$BCF_TMP/up" 4<>"$BCF_TMP/down"
timeout 120 python3 - "$BCF_MNT" "$BCF_TMP/up" "$BCF_TMP/down" <<'PY' &
import os, sys
m, up, down = sys.argv[1], sys.argv[2], sys.argv[3]
up = open(up, "w", buffering=1)
down = open(down)

def step(what):
    up.write(what + "\n")
    down.readline()

def check(what, got, want):
    if got != want:
        sys.exit("%s: %r, expected %r" % (what, got, want))

data = b"".join(b"%07d\n" % i for i in range(16384))	# 128 KiB
gone = os.open(os.path.join(m, "gone"), os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(gone, data, 0)
os.fsync(gone)
os.unlink(os.path.join(m, "gone"))
kept = os.open(os.path.join(m, "kept"), os.O_CREAT | os.O_RDWR, 0o644)
os.pwrite(kept, b"kept\n", 0)
for cut in (1, 2):
    step("cut %d" % cut)
    # the mount reconnected: the same descriptors go on
    check("cut %d: read of the removed file" % cut,
          os.pread(gone, len(data), 0), data)
    tail = b"after cut %d\n" % cut
    os.pwrite(gone, tail, len(data) + 16 * (cut - 1))
    os.fsync(gone)
    check("cut %d: read back" % cut, os.pread(gone, 16, len(data) +
                                              16 * (cut - 1))[:len(tail)],
          tail)
    st = os.fstat(gone)
    check("cut %d: links of the removed file" % cut, st.st_nlink, 0)
    check("cut %d: read of the named file" % cut, os.pread(kept, 64, 0),
          b"kept\n" if cut == 1 else b"kept after cut 1\n")
    os.pwrite(kept, b"kept after cut %d\n" % cut, 0)
check("the removed file's size", os.fstat(gone).st_size, len(data) + 28)
os.close(gone)
os.close(kept)
step("closed")
PY
py=$!

# the holder's next line, while it lives (60 s at most)
heard()
{
	local i

	for i in $(seq 60); do
		read -t 1 -r _ <&3 && return 0
		bcf_pid_gone "$py" && return 1
	done
	return 1
}

n=0
for cut_no in 1 2; do
	heard || bcf_fail "the holder did not reach cut $cut_no"
	cut || bcf_skip "ss -K destroyed no socket (a kernel without CONFIG_INET_DIAG_DESTROY?)"
	n=$((n + 1))
	bcf_wait_for 20 restored "$n" ||
		bcf_fail "the mount did not reconnect after cut $cut_no"
	echo go >&4
done
heard || bcf_fail "the holder failed after the cuts"
echo go >&4
wait "$py" || bcf_fail "a descriptor open across the cuts failed"
exec 3<&- 4>&-
bcf_eq "the named file" "kept after cut 2" "$(cat "$BCF_MNT/kept")"

# the removed file's last close reached the agent: nothing holds it now
# (a cephfs store has no descriptors: what the agent says when it stops,
# below, tells)
gone_fds()
{
	ls -l "/proc/$BCF_AGENT_PID/fd" 2>/dev/null | grep -c '/gone (deleted)'
}
no_gone_fd()
{
	[ "$(gone_fds)" = 0 ]
}
[ "$BCF_STORE" != posix ] || bcf_wait_for 10 no_gone_fd ||
	bcf_fail "the agent still holds $(gone_fds) descriptor(s) of the removed file after its last close"
bcf_umount
# every lingering copy was closed when its host opened the file again,
# none when its time ran out (or at this stop); none lingers when the
# host's REOPEN came before the lost session ended
bcf_stop_agent || bcf_fail "the agent did not stop"
grep 'linger: ' "$BCF_TMP/agent.log" >&2
! grep 'linger: .* [1-9][0-9]* closed unclaimed' "$BCF_TMP/agent.log" ||
	bcf_fail "a removed file was kept after its host opened it again"
echo PASS
