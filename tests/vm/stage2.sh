# Stage 2, PID 1 in the overlay root (busybox sh): mount the lane's cgroup layout, run the
# selected in-VM tests with the host's interpreter and checkout, write results, power off.
# The root cgroup's subtree_control is left as the kernel boots it: code under test must
# enable the controllers it needs.
# The v2-systemd lane instead execs systemd as PID 1, which mounts cgroup2 itself and runs
# `stage2.sh run` (the tests, then power off) from the oneshot unit cgalloc-vm.service.
BB=/.cgalloc-vm/busybox

say() { echo "cgalloc-vm: $*"; }
halt() {
	$BB sync
	$BB poweroff -f
}

# systemd boots only what the tests need: the cgalloc-vm.target it is started with
# (systemd.unit= on the kernel command line) pulls in basic.target and the test unit.
install_systemd_units() {
	$BB cat >/etc/systemd/system/cgalloc-vm.target <<EOF
[Unit]
Description=cgalloc VM lane
Requires=basic.target cgalloc-vm.service
After=basic.target
AllowIsolate=yes
EOF
	$BB cat >/etc/systemd/system/cgalloc-vm.service <<EOF
[Unit]
Description=cgalloc VM lane tests
After=basic.target

[Service]
Type=oneshot
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
ExecStart=$BB sh /.cgalloc-vm/stage2.sh run
EOF
	: >/etc/machine-id # systemd makes a transient one: first boot of a fresh machine
	: >/etc/fstab
}

boot_mounts() {
	$BB mount -t proc proc /proc
	$BB mount -t sysfs sysfs /sys
	$BB mkdir -p /dev/pts /dev/shm /results
	$BB mount -t devpts devpts /dev/pts
	$BB mount -t tmpfs -o mode=1777 tmpfs /dev/shm
	$BB mount -t tmpfs -o mode=0755 tmpfs /run
	$BB mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 results /results || {
		say "cannot mount the results share (9p tag results)"
		halt
	}
}

lane_setup() {
	# A fresh /tmp, keeping what the run needs from the host's /tmp (e.g. a virtualenv there).
	i=0
	for p in $KEEP_TMP; do
		$BB mkdir -p /run/keep/$i && $BB mount -o bind "$p" /run/keep/$i
		i=$((i + 1))
	done
	$BB mount -t tmpfs -o mode=1777 tmpfs /tmp
	i=0
	for p in $KEEP_TMP; do
		$BB mkdir -p "$p" && $BB mount -o move /run/keep/$i "$p"
		i=$((i + 1))
	done

	mount_v1() { # <dir> <options>
		$BB mkdir -p "/sys/fs/cgroup/$1" && $BB mount -t cgroup -o "$2" cgroup "/sys/fs/cgroup/$1"
	}
	case "$LANE" in
	v2)
		$BB mount -t cgroup2 cgroup2 /sys/fs/cgroup
		;;
	v2-systemd)
		install_systemd_units
		# The host may be a container: its marker would make systemd ignore the kernel
		# command line, so the options are passed as arguments as well.
		$BB rm -f /.dockerenv /run/.containerenv
		say "lane $LANE: starting systemd at $(uptime) s after boot"
		exec /lib/systemd/systemd --unit=cgalloc-vm.target --show-status=0
		;;
	v1)
		# A classic legacy layout: one hierarchy per controller, cpu,cpuacct and
		# net_cls,net_prio co-mounted with the usual symlinks, plus name=systemd.
		$BB mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup
		for c in $($BB awk '!/^#/ && $4 == 1 { print $1 }' /proc/cgroups); do
			case "$c" in
			cpu | cpuacct | net_cls | net_prio) ;;
			*) mount_v1 "$c" "$c" ;;
			esac
		done
		for pair in cpu,cpuacct net_cls,net_prio; do
			if mount_v1 "$pair" "$pair"; then
				$BB ln -s "$pair" "/sys/fs/cgroup/${pair%,*}"
				$BB ln -s "$pair" "/sys/fs/cgroup/${pair#*,}"
			fi
		done
		mount_v1 systemd none,name=systemd
		;;
	*)
		say "unknown lane '$LANE'"
		halt
		;;
	esac
}

uptime() { $BB cut -d' ' -f1 /proc/uptime; }
PHASE=${1:-boot} # "run": started by cgalloc-vm.service, everything is mounted already
[ "$PHASE" = run ] || boot_mounts
# LANE, RUN_MODE, PYTHON, CHECKOUT, GUEST_PATH, KEEP_TMP, NO_PLUGIN_AUTOLOAD, SLOW and
# `set -- <pytest args, or the command>`, written by the host (tests/vm/qemu.py).
. /results/job.env
[ "$PHASE" = run ] || lane_setup
if [ "$RUN_MODE" = pytest ]; then
	set -- "$PYTHON" -m pytest "$@"
fi
say "lane $LANE: running $RUN_MODE at $(uptime) s after boot"
cd "$CHECKOUT" || halt
$BB env -i HOME=/root PATH="$GUEST_PATH" LANG=C.UTF-8 TERM=dumb \
	CGALLOC_VM_LANE="$LANE" CGALLOC_VM_REPORT="/results/$LANE.json" \
	CGALLOC_VM_SELECT="/results/$LANE.select" CGALLOC_VM_SLOW="${SLOW:-}" \
	PYTEST_DISABLE_PLUGIN_AUTOLOAD="$NO_PLUGIN_AUTOLOAD" "$@"
echo $? >"/results/$LANE.rc"
say "lane $LANE: $RUN_MODE exited $(cat "/results/$LANE.rc") at $(uptime) s after boot"
halt
