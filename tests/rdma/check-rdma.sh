#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# check-rdma.sh - the rdma suite, for real: boots one VM with a Soft-RoCE
# device (rxe-vm.sh) and runs inside it (in-vm.sh) the rdma transport
# tests (rdma_xfer: data in every completion mode, refused segments and
# connections, a host and an agent killed mid-transfer), then the FUSE
# integration suite of tests/fs with BCF_TRANSPORT=rdma.
#
# A test of `make check` and the body of `make check-rdma`.  Skips (77)
# with the reason when BCF_RDMA_VM=0, when not root, when the build has no
# rdma transport, or when qemu, the kernel package, busybox-static, cpio or
# the verbs provider are missing.  Bounded: BCF_RDMA_TIMEOUT seconds
# (default 1200) for the whole VM.
set -u

skip()
{
	echo "SKIP: check-rdma: $*"
	exit 77
}

[ -n "${top_builddir:-}" ] && [ -n "${top_srcdir:-}" ] || {
	echo "HARD FAILURE: check-rdma: top_srcdir/top_builddir not set" >&2
	exit 99
}
[ "${BCF_RDMA_VM:-1}" != 0 ] || skip "BCF_RDMA_VM=0"
[ "$(id -u)" = 0 ] || skip "needs root (9p root file system, verbs)"
agent=$top_builddir/agent/bluecache-agent
[ -x "$agent" ] || { echo "HARD FAILURE: $agent is not built" >&2; exit 99; }
"$agent" --help | grep -q rdma-listen ||
	skip "the rdma transport is not built (configure --with-rdma)"
grep -q '^#define HAVE_RDMA 1' "$top_builddir/config.h" 2>/dev/null ||
	skip "the rdma transport is not built (configure --with-rdma)"
[ -x "$top_builddir/tests/rdma/rdma_xfer" ] || {
	echo "HARD FAILURE: tests/rdma/rdma_xfer is not built" >&2; exit 99; }
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
	skip "qemu-system-x86_64 is missing (apt-get install qemu-system-x86)"
K=$(ls /lib/modules 2>/dev/null | sort -V | tail -1)
[ -n "$K" ] && [ -r "/boot/vmlinuz-$K" ] ||
	skip "no kernel image in /boot (apt-get install linux-image-amd64)"
modprobe -S "$K" --show-depends rdma_rxe >/dev/null 2>&1 ||
	skip "kernel $K has no rdma_rxe module"
[ -x /bin/busybox ] || skip "busybox is missing (apt-get install busybox-static)"
command -v cpio >/dev/null 2>&1 || skip "cpio is missing"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) is missing"
ls /usr/lib/*/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 ||
	skip "the rxe verbs provider is missing (apt-get install ibverbs-providers)"

here=$(cd "$(dirname "$0")" && pwd)
tmo=${BCF_RDMA_TIMEOUT:-1200}
echo "check-rdma: booting kernel $K under qemu (TCG), up to $tmo s"
cd "$top_builddir" || exit 99
sh "$here/rxe-vm.sh" "$here/in-vm.sh" "$tmo"
rc=$?
case $rc in
0) echo "check-rdma: every rdma test passed" ;;
124) echo "FAIL: check-rdma: the VM timed out after $tmo s" >&2; rc=1 ;;
125) echo "FAIL: check-rdma: the VM ended without reporting" >&2; rc=1 ;;
77) echo "SKIP: check-rdma: the VM has no RDMA device" ;;
*) echo "FAIL: check-rdma: $rc test(s) failed in the VM" >&2; rc=1 ;;
esac
exit $rc
