#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# PID 1 inside the qemu guest. Root = host / (9p, read-only) + tmpfs overlay, so the
# guest sees the host's binaries and the build tree in place; writes are thrown away.
# Brings up Soft-RoCE (rxe0 on dummy netdev rd0, 198.18.0.1/24: a benchmark range,
# nothing leaves the VM), runs /out/cmd.sh, stores its exit status in /out/rc, powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mkdir -p /out && mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /out
echo 1 > /proc/sys/kernel/sysrq
ulimit -l unlimited                      # verbs memory registration needs locked memory
ip link set lo up
IP=${RXE_IP:-198.18.0.1}
modprobe dummy numdummies=0 && ip link add rd0 type dummy
ip addr add $IP/24 dev rd0 && ip link set rd0 up &&
  modprobe rdma_rxe && modprobe rdma_ucm && modprobe ib_uverbs &&
  rdma link add rxe0 type rxe netdev rd0
echo "guest: rxe setup rc=$? at uptime $(cut -d' ' -f1 /proc/uptime)s"
modprobe fuse 2>/dev/null
# what a normal system has and tests rely on: /dev/fd (process
# substitution), and a scratch file system with user xattrs (the overlay's
# tmpfs has none on older kernels): ext4 on a RAM-backed loop device
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
if modprobe loop 2>/dev/null && modprobe ext4 2>/dev/null &&
   truncate -s "${RXE_SCRATCH_MB:-1536}M" /dev/shm/scratch.img &&
   mkfs.ext4 -q -F /dev/shm/scratch.img && mkdir -p /scratch &&
   mount -o loop /dev/shm/scratch.img /scratch; then
	chmod 1777 /scratch
	export TMPDIR=/scratch
else
	echo "guest: no ext4 scratch file system; using /tmp"
	export TMPDIR=/tmp
fi
export RDMA_DEV=rxe0 RDMA_IP=$IP RDMA_GID_INDEX=1
sh /out/cmd.sh > /dev/console 2>&1 < /dev/null
echo $? > /out/rc
sync; umount /out
exec busybox poweroff -f
