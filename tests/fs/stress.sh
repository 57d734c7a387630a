#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# stress.sh - 8 threads with 100 open files each on one mount for
# ${BCF_STRESS_SECONDS:-60} s (tests/fs/stress): random reads, writes,
# appends, truncates, renames within and across two directories, opens,
# closes and fstat, each checked against the exact content the thread
# keeps.  The session holds several hundred open files while transfers
# are in flight.  Afterwards the daemon and the agent must still run,
# the agent's backing directory must hold exactly the expected files
# (compared after unmount), and the logs must be clean (no "error", no
# sanitizer report).  The seed is printed; BCF_SEED=N replays it.
. "$(dirname "$0")/lib.sh"
bcf_init
stress=$top_builddir/tests/fs/stress
[ -x "$stress" ] || bcf_hard "$stress is not built"
secs=${BCF_STRESS_SECONDS:-60}

# A stress test of correctness, run beside other suites on two cores (and
# under sanitizers): a request slowed past the default 30 s must not count
# as a lost agent.  A request that is really lost still fails, after 120 s.
bcf_mount -o timeout=120
agents=$(bcf_agent_pids)
[ -n "$agents" ] || bcf_hard "found no agent behind the mount"
mkdir "$BCF_MNT/stress" "$BCF_TMP/expect" || bcf_fail "mkdir on the mount"
# the program ends itself; the bound is for a hang it cannot end
timeout -k 10 $((secs + 300)) "$stress" ${BCF_SEED:+-s "$BCF_SEED"} \
	-e "$BCF_TMP/expect" "$BCF_MNT/stress" "$secs"
rc=$?
if [ $rc -ne 0 ]; then
	bcf_alive $agents || true
	[ $rc -ge 124 ] && bcf_dump_procs $BCF_FS_PID $agents
	bcf_fail "stress exited with status $rc"
fi
bcf_alive $agents || bcf_fail "a process died under stress"
bcf_umount
bcf_stop_agent || bcf_fail "the agent did not stop"
diff -r "$BCF_TMP/expect" "$BCF_BACK/stress" >&2 ||
	bcf_fail "the agent's files differ from the expected ones"
exit 0
