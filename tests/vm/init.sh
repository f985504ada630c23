#!/bin/busybox sh
# Stage 1, PID 1 in the initramfs: the host root read-only over 9p under a tmpfs overlay,
# then switch_root into it and run stage2.sh with the same static busybox.
/bin/busybox --install -s /bin
export PATH=/bin

die() {
	echo "cgalloc-vm: stage1: $*"
	poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.order); do
	insmod "/modules/$m.ko" || die "insmod $m failed"
done
# cache=loose: the host files do not change during a run, and uncached 9p makes Python
# imports several times slower under TCG.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower ||
	die "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot ||
	die "cannot mount the overlay root"
mkdir -p /newroot/.cgalloc-vm
cp /bin/busybox /stage2.sh /newroot/.cgalloc-vm/
mount -o move /dev /newroot/dev
umount /proc /sys
exec switch_root /newroot /.cgalloc-vm/busybox sh /.cgalloc-vm/stage2.sh
