#!/bin/busybox sh
# perfline guest agent: /init of the initramfs perfline boots in a VM.
#
# When the initramfs holds /perfline/root (the root disk's device, for benchmarks that
# need a Debian root file system), it loads the disk's modules listed in
# /perfline/modules/order, mounts the disk and switch_roots into it, where this same
# script, copied with busybox to a tmpfs on /run/perfline, serves as PID 1 with the
# argument --rootfs. Its own commands are still busybox's (the static busybox runs
# its applets before any PATH lookup); requests run with the root file system's sh.
#
# It serves one request at a time on the second serial port (ttyS1); the first one
# (ttyS0) is the kernel console, which the host keeps as a log. A UART needs no
# driver module, unlike virtio-serial, so this works with any x86 kernel that has
# CONFIG_SERIAL_8250=y. Requests, one line each:
#   RUN <base64 of a shell command line>   run it in /tmp/work, stdin from /dev/null
#   POWEROFF                               power the VM off
# Every reply line starts with "@perfline " so that the host can tell it from noise:
#   ready <uptime>                  once, when the agent is serving
#   out <base64> / err <base64>     the command's stdout / stderr, in 76-char pieces
#   done <status> <start> <end>     exit status; wall clock before and after, in s
# If this script ends, the kernel panics ("attempted to kill init") and, with
# panic=-1 and qemu -no-reboot, the VM exits: the host never waits on a dead agent.

CHANNEL=/dev/ttyS1
RUNTIME=/run/perfline
DRIVERS="CONFIG_VIRTIO_PCI=y, CONFIG_VIRTIO_BLK=y and CONFIG_EXT4_FS=y"

# Before the channel is open: say why the root disk cannot be used, and stop.
boot_failed() {
	stty -F "$CHANNEL" raw -echo
	echo "@perfline error $*" > "$CHANNEL"
	poweroff -f
}

switch_to_root_disk() {
	root=$(cat /perfline/root)
	if [ -e /perfline/modules/order ]; then
		while read -r module; do
			insmod "/perfline/modules/$module" || boot_failed "insmod $module failed"
		done < /perfline/modules/order
	fi
	waited=0
	while [ ! -b "$root" ]; do
		[ "$waited" -lt 100 ] || boot_failed "no root disk $root after 10 s: the kernel needs $DRIVERS, or those drivers as modules registered with it (perfline kernels add IMAGE --modules DIR)"
		sleep 0.1
		waited=$((waited + 1))
	done
	mkdir -p /newroot
	mount -t ext4 "$root" /newroot || boot_failed "cannot mount $root as ext4 (the kernel needs $DRIVERS)"
	mount -t tmpfs -o mode=0755 tmpfs /newroot/run
	mkdir "/newroot$RUNTIME"
	cp /bin/busybox /init "/newroot$RUNTIME/"
	for fs in proc sys dev; do
		mount --move "/$fs" "/newroot/$fs"
	done
	exec switch_root /newroot "$RUNTIME/busybox" sh "$RUNTIME/init" --rootfs
}

if [ "$1" = --rootfs ]; then
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
	REQUEST_SHELL=/bin/sh
	# POSIX shared memory (PostgreSQL's) lives there; the servers listen on loopback.
	mkdir -p /dev/shm
	mount -t tmpfs tmpfs /dev/shm
	ip link set lo up
else
	/bin/busybox --install -s /bin
	export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp
	REQUEST_SHELL=sh
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	[ -e /perfline/root ] && switch_to_root_disk
fi
# No tmpfs on /tmp: the initramfs already lives in RAM, and a mount there would hide
# the benchmark's programs, packed at their host paths, when the checkout is under /tmp.
mkdir -p /tmp/work

# Raw: no echo of requests back to the host and no newline translation of replies.
stty -F "$CHANNEL" raw -echo
exec 3<>"$CHANNEL"

reply() {
	echo "@perfline $*" >&3
}

# Seconds since the epoch with microseconds: busybox date has no %N, its ts has %.s.
now() {
	echo | ts '%.s'
}

send() {
	# $1: out or err; $2: the file whose content to send
	base64 "$2" | sed "s/^/@perfline $1 /" >&3
}

reply ready "$(cut -d' ' -f1 /proc/uptime)"
while read -r verb argument <&3; do
	case "$verb" in
	RUN)
		echo "$argument" | base64 -d > /tmp/request
		start=$(now)
		(cd /tmp/work && $REQUEST_SHELL /tmp/request < /dev/null > /tmp/stdout 2> /tmp/stderr)
		status=$?
		end=$(now)
		send out /tmp/stdout
		send err /tmp/stderr
		reply done "$status" $start $end
		;;
	POWEROFF)
		sync
		poweroff -f
		;;
	*)
		reply error "unknown request $verb"
		;;
	esac
done
