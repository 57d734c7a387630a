#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# bench-vm.sh - `make bench-rdma`: in one boot of the rdma VM, measure
# ib_write_bw / ib_read_bw on the Soft-RoCE device and bluecachefs
# sequential write and cold read over rdma of the same total size
# (bench-in-vm.sh), and print the medians and the ratios.  The VM is
# emulated (TCG): only the ratios mean anything.  Not a test.
#
# BCF_BENCH_MB sets the size (default 256), BCF_BENCH_RUNS the runs in
# the boot (default 3), BCF_BENCH_AGENT_ARGS extra agent options.  With
# RXE_VM_OUT=DIR the figures are also left in DIR/rdma-results.json
# (`make bench` reads them from there).  Exit status: 0, 1 when a
# measurement failed (or a mount was not on rdma), 124 when the VM timed
# out, 2 when something is missing.
set -u
[ -n "${top_builddir:-}" ] && [ -n "${top_srcdir:-}" ] || {
	echo "bench-vm.sh: top_srcdir/top_builddir not set" >&2
	exit 2
}
command -v ib_write_bw >/dev/null 2>&1 || {
	echo "bench-vm.sh: ib_write_bw is missing (apt-get install perftest)" >&2
	exit 2
}
here=$(cd "$(dirname "$0")" && pwd)
cd "$top_builddir" || exit 2
exec sh "$here/rxe-vm.sh" "$here/bench-in-vm.sh" "${BCF_RDMA_TIMEOUT:-900}"
