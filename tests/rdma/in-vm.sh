# SPDX-License-Identifier: GPL-2.0-or-later
#
# in-vm.sh - sourced inside the rdma VM (rxe-vm.sh) by check-rdma.sh: runs
# the already built rdma tests, then the FUSE suite with transport rdma.
# Nothing is built here (the tree is read-only in the guest).  Its status
# is the number of failed tests (77 when the VM has no RDMA device).
if ! ibv_devices 2>/dev/null | grep -q "${RDMA_DEV:-rxe0}"; then
	echo "in-vm: no RDMA device ${RDMA_DEV:-rxe0}"
	exit 77
fi
ulimit -l unlimited
export TMPDIR=${TMPDIR:-/tmp} BCF_BIG=0 BCF_RANDOM_OPS=${BCF_RANDOM_OPS:-1000}
# restart.sh under emulation: 4 kills and 3 restarts of the agent rather
# than 10 and 10 (200 s of the VM's 500); each round takes the rdma
# transport through the same reconnect
export BCF_RESTART_KILLS=${BCF_RESTART_KILLS:-4}
export BCF_RESTART_TERMS=${BCF_RESTART_TERMS:-3}
# and a tar tree of 800 small files, not 3000: a round of its workload
# (extract, compare, remove) took 100 s of the test's 156 under emulation
export BCF_RESTART_TREE_DIRS=${BCF_RESTART_TREE_DIRS:-8}
in_vm_fail=0
in_vm_run()
{
	local name=$1 t0 rc

	shift
	t0=$(cut -d' ' -f1 /proc/uptime)
	echo "=== $name"
	timeout -k 5 "${BCF_RDMA_TEST_TIMEOUT:-400}" "$@"
	rc=$?
	echo "=== $name: rc=$rc ($t0 -> $(cut -d' ' -f1 /proc/uptime) s)"
	case $rc in
	0|77) ;;
	*) in_vm_fail=$((in_vm_fail + 1)) ;;
	esac
}

in_vm_run rdma_xfer "$top_builddir/tests/rdma/rdma_xfer"
export BCF_TRANSPORT=rdma
# git's many small files take the same transport paths as tools and
# random (54 s under emulation, with the VM alone at the end of make
# check): BCF_RDMA_FS_TESTS="... git" runs it too
for t in ${BCF_RDMA_FS_TESTS:-errno tools random concurrency sqlite restart}; do
	[ "$t" = none ] && continue
	in_vm_run "fs/$t[rdma]" bash "$top_srcdir/tests/fs/$t.sh"
done
echo "in-vm: $in_vm_fail failed"
exit $in_vm_fail
