#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Build a tiny initramfs (busybox-static + the modules needed to mount the host's /
# over virtio-9p with a tmpfs overlay) for the Debian kernel K into DIR.
# usage: mkinitramfs.sh OUTFILE   (env K=kernel version, default: newest in /lib/modules)
set -eu
OUTFILE=$1
K=${K:-$(ls /lib/modules | sort -V | tail -1)}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
mkdir -p "$D"/bin "$D"/lib/modules "$D"/proc "$D"/sys "$D"/dev "$D"/lower "$D"/rw "$D"/newroot
cp /bin/busybox "$D"/bin/busybox
for a in sh mount umount mkdir insmod switch_root echo cat sleep; do ln -s busybox "$D"/bin/$a; done
MODS=""
for m in virtio_pci 9pnet_virtio 9p overlay; do
  for ko in $(modprobe -S "$K" --show-depends $m | awk '$1=="insmod"{print $2}'); do
    case " $MODS " in *" $ko "*) ;; *) MODS="$MODS $ko"; cp "$ko" "$D"/lib/modules/;; esac
  done
done
: > "$D"/lib/modules/order
for ko in $MODS; do basename "$ko" >> "$D"/lib/modules/order; done
cat > "$D"/init <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t devtmpfs dev /dev
for ko in $(cat /lib/modules/order); do insmod /lib/modules/$ko || echo "initramfs: insmod $ko failed"; done
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot /lower || { echo "initramfs: 9p mount failed"; echo o > /proc/sysrq-trigger; }
mount -t tmpfs -o size=1g tmpfs /rw && mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || { echo "initramfs: overlay failed"; echo o > /proc/sysrq-trigger; }
umount /proc /dev
exec switch_root /newroot ${GUEST_INIT:-/bin/sh}
INIT
chmod +x "$D"/init
(cd "$D" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUTFILE"
