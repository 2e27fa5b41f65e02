#!/bin/busybox sh
# perfline guest agent: /init of the initramfs perfline boots in a VM.
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

/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# No tmpfs on /tmp: the initramfs already lives in RAM, and a mount there would hide
# the benchmark's programs, packed at their host paths, when the checkout is under /tmp.
mkdir -p /tmp/work

CHANNEL=/dev/ttyS1
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
		(cd /tmp/work && sh /tmp/request < /dev/null > /tmp/stdout 2> /tmp/stderr)
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
