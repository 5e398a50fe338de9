#!/bin/sh
# PID 1 of the test VM (tests/vm/npmvm.py): the host's root is the guest's, read-only over
# 9p; /mnt/out is the host's work directory of this run (read-write). Runs ./test.sh there,
# leaves its output and exit status beside it, and powers off whatever happens.
mount -t proc proc /proc
mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mount -t tmpfs run /run
# A writable /tmp that still shows the host's (a build tree may live there): its entries as links,
# made by one ln, not one per entry -- under software emulation each process costs tens of
# milliseconds, and a host's /tmp with 800 entries made this loop a minute of every boot.
mkdir -p /run/hosttmp
mount --bind /tmp /run/hosttmp
mount -t tmpfs tmp /tmp
find /run/hosttmp -mindepth 1 -maxdepth 1 -exec ln -s -t /tmp {} +
mount -t tmpfs mnt /mnt
mkdir -p /mnt/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /mnt/out
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8
hostname npm-vm
ip link set lo up
cd /mnt/out && timeout "$(cat timeout 2>/dev/null || echo 300)" sh ./test.sh >output 2>&1
echo $? >/mnt/out/rc
sync
echo o >/proc/sysrq-trigger
while :; do sleep 1; done
