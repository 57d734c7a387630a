#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# rxe-vm.sh SCRIPT [TIMEOUT_S] - run SCRIPT inside a qemu guest that has a
# real RDMA device: Debian's kernel with Soft-RoCE (rdma_rxe) on a dummy
# netdev, 198.18.0.1 (a benchmark range: nothing leaves the VM).
#
# The guest's root is this machine's / read-only with a tmpfs overlay, so
# the build tree and every installed binary are there unchanged; writes
# vanish, except under /out.  SCRIPT is sourced by sh in the caller's
# working directory with top_srcdir, top_builddir and the BCF_* variables
# of the caller; RDMA_DEV, RDMA_IP and RDMA_GID_INDEX describe the device.
# Exit status: SCRIPT's, 124 when the VM timed out, 125 when it ended
# without reporting.
#
# Emulation only (-accel tcg): a guest under this machine's kvm hangs.
# The initramfs is cached under $XDG_CACHE_HOME, else $TMPDIR or /tmp.
# Needs root and qemu-system-x86 linux-image-amd64 busybox-static cpio kmod
# iproute2 ibverbs-providers (perftest for the benchmark).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$(readlink -f "$1")
TMO=${2:-600}
K=${RXE_VM_KERNEL:-$(ls /lib/modules | sort -V | tail -1)}
CACHE=${RXE_VM_CACHE:-${XDG_CACHE_HOME:-${TMPDIR:-/tmp}}/bluecachefs-rxe-vm}
mkdir -p "$CACHE"
INITRD=$CACHE/initramfs-$K.cpio.gz
if [ ! -f "$INITRD" ]; then
	K=$K "$HERE/mkinitramfs.sh" "$INITRD.$$"
	mv -f "$INITRD.$$" "$INITRD"
fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
{
	for v in top_srcdir top_builddir $(env | sed -n 's/^\(BCF_[A-Z_]*\)=.*/\1/p'); do
		eval "val=\${$v:-}"
		printf "%s='%s'; export %s\n" "$v" "$val" "$v"
	done
	printf 'cd %s || exit 1\n. %s\n' "$PWD" "$SCRIPT"
} > "$OUT/cmd.sh"
set +e
timeout -k 5 "$TMO" qemu-system-x86_64 -accel tcg -smp "${RXE_VM_SMP:-2}" \
	-m "${RXE_VM_MEM:-4096}" -display none -vga none -monitor none \
	-serial stdio -no-reboot -nic none \
	-kernel "/boot/vmlinuz-$K" -initrd "$INITRD" \
	-append "console=ttyS0 panic=-1 quiet mitigations=off GUEST_INIT=$HERE/guest-init.sh" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$OUT",mount_tag=out,security_model=none < /dev/null
q=$?
if [ $q -eq 124 ] || [ $q -eq 137 ]; then
	rc=124
elif [ -f "$OUT/rc" ]; then
	rc=$(cat "$OUT/rc")
else
	rc=125
fi
if [ -n "${RXE_VM_OUT:-}" ] && [ -d "$RXE_VM_OUT" ]; then
	cp -r "$OUT"/. "$RXE_VM_OUT"/ 2>/dev/null
fi
exit "$rc"
