#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# bench-vm.sh - `make bench-rdma`: in one boot of the rdma VM, measure
# ib_write_bw / ib_read_bw on the Soft-RoCE device and bluecachefs
# sequential write and read over rdma of the same total size, and print
# the ratios.  The VM is emulated (TCG): only the ratios mean anything.
# Not a test.  BCF_BENCH_MB sets the size (default 256).
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
