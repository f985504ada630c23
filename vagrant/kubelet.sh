# The real-kubelet steps (issue 36), sourced by provision.sh: upstream kubelet v1.20.2 runs
# standalone in this guest (static hostNetwork pods, read-only port 10255 on loopback, Debian's
# containerd and runc from the box, images built here and imported: no registry) and judges
# cgalloc. Each step is recorded as "kubelet/<guest>-<driver> <N>: <title>" in the steps file
# (results.py turns them into the per-guest table) with its evidence; the files behind it are
# in $results/kubelet/<config>/. A failing kubelet step does not stop the others: the machine
# is then "failed", and so is the lane.
#
# Configurations (what the kubelet's cgroup driver follows):
#   v1 guest: "cgroupfs" (steps 1-4 and 8), then "systemd", the node's own (every step; its
#             boot unit and the reboot: steps 7 and 8 after `vagrant reload`)
#   v2 guest: "systemd" (1.20's systemd driver is broken on v2: steps 1-2 record what it does),
#             then "cgroupfs", the node's own (every step, the reboot as above)
#
# Needs from provision.sh: $machine $want $results $work $src $cg, step/check/snapshot/hierarchy.

K_NAME=kubelet-v1.20.2-linux-amd64
K_BIN=/usr/local/bin/kubelet
K_DIR=/etc/kubernetes
K_CONFIG=$K_DIR/kubelet.yaml
K_ENV=$K_DIR/kubelet.env
K_MANIFESTS=$K_DIR/manifests
K_EVID=$results/kubelet
K_PY=(/usr/bin/python3 "$src/vagrant/kubelet/steps.py")
K_RUNTIME_FLAGS="--container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock --runtime-request-timeout=10m"
K_IMAGE=docker.io/local/busybox:1
K_PAUSE=docker.io/local/pause:3.2
# Reservations of the kubelet config (2 GiB guests): kubepods' memory limit comes out near 1 GiB,
# small enough for two pods to pass it together without pressing the node. 400m of CPU in all, so
# the pods' 500m of requests are admitted on a one-vCPU guest too (CI's lane).
K_KUBE_RESERVED='{cpu: 200m, memory: 384Mi, pid: "1000"}'
K_SYSTEM_RESERVED='{cpu: 200m, memory: 512Mi}'
K_POD_PIDS=1024
K_HUGEPAGES=16 # 2 MiB pages: the Guaranteed pod takes 4 MiB of them
# Seconds a step waits for its pods to start, or for their OOM kill: container starts are slow
# under emulation, and slower on a guest beside others (v1's step 2 took 311 s so).
K_WAIT=${CGALLOC_KUBELET_WAIT:-600}
# The cost step's window (at the kubelet's cAdvisor housekeeping interval, 10 s) and rounds.
K_COST_WINDOW=${CGALLOC_KUBELET_COST_WINDOW:-30}
K_COST_ROUNDS=${CGALLOC_KUBELET_COST_ROUNDS:-3}

# kstep CONFIG ID TITLE CMD...: a kubelet step; recorded, never stops the run. Returns CMD's status.
kstep() {
	local config=$1 id=$2 title=$3
	shift 3
	run_step "kubelet/$config $id: $title" 0 60 "$@" || tail -n 30 "$work/out" >&2
	mkdir -p "$K_EVID/$config"
	cp "$work/out" "$K_EVID/$config/step-$id.txt"
	return "$STEP_RC"
}

# ---- per-configuration inputs ------------------------------------------------------------------

# k_use CONFIG: the driver, cgroups and flags of a configuration (v1-systemd, v2-cgroupfs, ...).
k_use() {
	K_CFG=$1
	K_DRIVER=${1#*-}
	K_KUBE=/kube-reserved
	K_DAEMON_SLICE=system.slice
	K_KUBEPODS=kubepods
	K_MAIN=0
	K_PODS=(guaranteed burstable) # what a configuration that does not measure runs
	[[ $K_CFG == v2-systemd ]] && K_PODS=(burstable) # a record: one pod shows where it lands
	if [[ $K_DRIVER == systemd ]]; then
		K_KUBE=/kube.slice K_KUBEPODS=kubepods.slice
	fi
	# the node's own configuration: the boot unit (daemons in kube.slice with the systemd driver)
	if [[ $K_CFG == v1-systemd || $K_CFG == v2-cgroupfs ]]; then
		K_MAIN=1 K_PODS=("${K_QUIET[@]}")
		[[ $K_DRIVER == systemd ]] && K_DAEMON_SLICE=kube.slice
	fi
	# Node Allocatable inputs given as flags, the same to the kubelet and to cgalloc.
	K_ALLOC_FLAGS=(--enforce-node-allocatable=pods,kube-reserved,system-reserved
		"--kube-reserved-cgroup=$K_KUBE" --system-reserved-cgroup=/system.slice)
	K_CG_ARGS=(--config "$K_CONFIG" "${K_ALLOC_FLAGS[@]}" "${K_VERSION_FLAG[@]}")
	# systemd is PID 1 in both guests: setup refuses the cgroupfs driver there unless told to
	# go on (cgalloc's option, not the kubelet's)
	[[ $K_DRIVER == cgroupfs ]] && K_CG_ARGS+=(--allow-driver-mismatch)
	# Per-configuration pod UIDs: a pod of an earlier configuration is never taken for this one's.
	K_UID_PREFIX=$(printf 'c9a1%04x' "$(cksum <<<"$K_CFG" | cut -c1-4)")
}

k_config_file() {
	cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: $K_DRIVER
staticPodPath: $K_MANIFESTS
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 10255
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
failSwapOn: false
kubeReserved: $K_KUBE_RESERVED
systemReserved: $K_SYSTEM_RESERVED
podPidsLimit: $K_POD_PIDS
kubeletCgroups: /$K_DAEMON_SLICE/kubelet.service
runtimeCgroups: /$K_DAEMON_SLICE/containerd.service
EOF
}

k_containerd_config() {
	local systemd_cgroup=false
	[[ $K_DRIVER == systemd ]] && systemd_cgroup=true
	cat <<EOF
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$K_PAUSE"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = $systemd_cgroup
EOF
}

# k_pod NAME N [RESOURCES_YAML] [COMMAND_JSON] [INIT_YAML] [RESTART]: a static pod manifest.
# The default command waits and exits on SIGTERM (pause.c): `sleep` as a container's PID 1
# ignores it, so a stop waits for the pod's grace period, the reboot's shutdown for systemd's.
k_pod() {
	local name=$1 n=$2 res=${3:-'{}'} cmd=${4:-'["/bin/tool"]'} init=${5:-} restart=${6:-Always}
	cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: default
  uid: $K_UID_PREFIX-0000-4000-8000-0000000000$(printf %02d "$n")
spec:
  hostNetwork: true
  restartPolicy: $restart
  terminationGracePeriodSeconds: 2
EOF
	if [[ -n $init ]]; then
		cat <<EOF
  initContainers:
  - name: init
    image: $K_IMAGE
    imagePullPolicy: Never
    command: ["true"]
    resources: $init
EOF
	fi
	cat <<EOF
  containers:
  - name: main
    image: $K_IMAGE
    imagePullPolicy: Never
    command: $cmd
    resources: $res
EOF
}

# k_add NAME...: move the named pods' manifests into staticPodPath (written elsewhere first: a
# half-written file was read once).
k_add() {
	local p
	for p in "$@"; do
		k_manifest "$p" >"$K_DIR/$p.yaml.new" && mv "$K_DIR/$p.yaml.new" "$K_MANIFESTS/$p.yaml"
	done
}
k_del() {
	local p
	for p in "$@"; do rm -f "$K_MANIFESTS/$p.yaml"; done
}

# The pods: the quiet set (one per QoS class: the Guaranteed one with hugepages, the Burstable
# one with an init container; every pod gets the config's podPidsLimit), then the enforcement
# pods (started together: under emulation every container start costs seconds).
K_QUIET=(guaranteed burstable besteffort)
K_ENFORCE=(oom spin fill-a fill-b)
k_manifest() {
	local half=$((K_KUBEPODS_MIB * 6 / 10))
	case $1 in
	guaranteed) k_pod guaranteed 1 '{limits: {cpu: 200m, memory: 64Mi, hugepages-2Mi: 4Mi}}' ;;
	burstable)
		k_pod burstable 2 '{requests: {cpu: 100m, memory: 16Mi}, limits: {memory: 48Mi}}' '' \
			'{requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 96Mi}}'
		;;
	besteffort) k_pod besteffort 3 ;;
	oom) k_pod oom 5 '{limits: {cpu: 100m, memory: 32Mi}}' '["/bin/tool", "hog", "96"]' ;;
	spin) k_pod spin 6 '{limits: {cpu: 100m, memory: 32Mi}}' '["sh", "-c", "while :; do :; done"]' ;;
	fill-a) k_pod fill-a 7 '{}' "[\"/bin/tool\", \"hog\", \"$half\"]" ;;
	fill-b) k_pod fill-b 8 '{}' "[\"/bin/tool\", \"hog\", \"$half\"]" ;;
	late) k_pod late 9 ;;
	esac
}

# ---- helpers -------------------------------------------------------------------------------------

# A cgroup directory of a controller (v1) or the tree (v2), below the mount.
k_path() { ctl "$1" "$2"; }
k_read() { cat "$(ctl "$1" "$2")/$3" 2>/dev/null || echo "(absent)"; }

# The cgroup directories of every hierarchy (services and scopes left out: they come and go).
k_dirs() {
	find "$cg" -mindepth 1 -type d -not -path '*/user.slice/*' -not -name '*.service' \
		-not -name '*.scope' -not -name '*.mount' -not -name '*.socket' -not -path '*.service/*' \
		-not -path '*.scope/*' -printf '%P\n' | sort
}

# system.slice's limit files (the refused start writes some; daemon-reload resets some).
k_sys_files() {
	if [[ $(hierarchy) == v2 ]]; then
		printf '%s\n' system.slice/memory.max system.slice/memory.min system.slice/cpu.weight \
			system.slice/cpu.max system.slice/pids.max
	else
		printf '%s\n' memory/system.slice/memory.limit_in_bytes cpu,cpuacct/system.slice/cpu.shares \
			cpu,cpuacct/system.slice/cpu.cfs_quota_us pids/system.slice/pids.max
	fi
}
k_sys_values() {
	local f
	for f in $(k_sys_files); do
		[[ -f $cg/$f ]] && echo "$f $(head -n1 "$cg/$f")"
	done
}

# The kubelet's log since EPOCH (in a file: grep -q closing a pipe early fails it under pipefail).
k_journal() {
	journalctl -u kubelet.service --since "@$1" -o cat --no-pager >"$work/k-journal" 2>/dev/null
	cat "$work/k-journal"
}
k_logged() { k_journal "$1" >/dev/null; grep -q -- "$2" "$work/k-journal"; }

# The kubelet has started and stays up: active 30 s or more after its start without a restart,
# no ContainerManager failure in its log.
k_started() {
	local since=$1 i
	for i in $(seq 60); do
		k_logged "$since" 'Started kubelet' && break
		sleep 2
	done
	local left=$((since + 30 - $(date +%s)))
	[[ $left -gt 0 ]] && sleep "$left"
	systemctl show kubelet.service -p ActiveState -p SubState -p NRestarts -p MainPID
	k_journal "$since" >/dev/null
	grep -E 'Started kubelet|Failed to start ContainerManager|Failed to enforce' "$work/k-journal" | head -n 5
	[[ $(systemctl show -p ActiveState --value kubelet.service) == active ]] &&
		[[ $(systemctl show -p NRestarts --value kubelet.service) == 0 ]] &&
		! k_logged "$since" 'Failed to start ContainerManager' && k_logged "$since" 'Started kubelet'
}

k_start() { systemctl reset-failed kubelet.service 2>/dev/null; systemctl start kubelet.service; }
k_stop() { systemctl stop kubelet.service; systemctl reset-failed kubelet.service 2>/dev/null; true; }

# ---- once per guest ------------------------------------------------------------------------------

kubelet_prepare() {
	local gz=$src/vagrant/kubelet/$K_NAME.gz sums=$src/vagrant/kubelet/SHA256SUMS got blanked bid
	[[ -f $gz ]] || { echo "no $gz: the lane runs vagrant/kubelet-fetch on the host"; return 1; }
	gzip -dc "$gz" >"$K_BIN.new" && chmod 755 "$K_BIN.new" && mv "$K_BIN.new" "$K_BIN"
	read -r got blanked bid < <(python3 "$src/vagrant/kubelet/binhash.py" "$K_BIN")
	echo "kubelet sha256 $got, Go build ID $bid ($blanked with it blanked)"
	# the pinned binary, or a rebuild of it in another directory (vagrant/kubelet-build)
	grep -qE "^($got  $K_NAME|$blanked  $K_NAME.nobuildid)\$" "$sums" || { echo "not pinned in $sums"; return 1; }
	"$K_BIN" --version | tee "$results/kubelet-version"
	echo "$got" >"$results/kubelet-sha256"
	# hugepages for the hugepages pod, before the kubelet and cgalloc read the capacity (and at
	# every boot, for the reboot step)
	echo "vm.nr_hugepages = $K_HUGEPAGES" >/etc/sysctl.d/80-cgalloc-hugepages.conf
	sysctl -q -w vm.nr_hugepages=$K_HUGEPAGES
	grep HugePages_Total /proc/meminfo
	# the pods' binaries and images
	mkdir -p "$work/img" "$K_MANIFESTS"
	gcc -static -O2 -o "$work/img/tool" "$src/vagrant/kubelet/pause.c" || return 1
	"${K_PY[@]}" image "$work/img/pause.tar" local/pause:3.2 /pause --file "$work/img/tool=/pause" || return 1
	local links=() applet
	for applet in sh sleep true cat; do links+=(--link "/bin/$applet=busybox"); done
	"${K_PY[@]}" image "$work/img/busybox.tar" local/busybox:1 sh --file /bin/busybox=/bin/busybox \
		--file "$work/img/tool=/bin/tool" "${links[@]}" || return 1
	# the unit: after the boot unit and containerd; the flags in an environment file
	cat >/etc/systemd/system/kubelet.service <<EOF
[Unit]
Description=kubelet v1.20.2 (cgalloc's real-kubelet steps)
Wants=containerd.service
After=containerd.service cgalloc-setup.service

[Service]
EnvironmentFile=$K_ENV
ExecStart=$K_BIN --config=$K_CONFIG \$KUBELET_ALLOC_FLAGS \$KUBELET_RUNTIME_FLAGS
Restart=on-failure
RestartSec=10
CPUAccounting=yes
MemoryAccounting=yes

[Install]
WantedBy=multi-user.target
EOF
	systemctl daemon-reload
	# cgalloc's model of this kubelet: the flag that names its minor, when cgalloc has it
	echo "cgalloc's flags for this kubelet: ${K_VERSION_FLAG[*]:-(none: no --kubelet-version 1.20)}"
}

# k_runtime: containerd configured for this configuration's driver, running, images imported.
k_runtime() {
	mkdir -p /etc/containerd
	k_containerd_config >/etc/containerd/config.toml
	systemctl enable containerd.service 2>/dev/null
	systemctl restart containerd.service || return 1
	local i
	for i in $(seq 30); do ctr version >/dev/null 2>&1 && break; sleep 1; done
	ctr -n k8s.io images import "$work/img/pause.tar" && ctr -n k8s.io images import "$work/img/busybox.tar" &&
		ctr -n k8s.io images ls -q | grep local/
}

# k_write_inputs: the kubelet's config file and the flags the unit passes.
k_write_inputs() {
	mkdir -p "$K_DIR" "$K_MANIFESTS"
	k_config_file >"$K_CONFIG"
	printf 'KUBELET_ALLOC_FLAGS=%s\nKUBELET_RUNTIME_FLAGS=%s\n' "${K_ALLOC_FLAGS[*]}" "$K_RUNTIME_FLAGS" >"$K_ENV"
	cp "$K_CONFIG" "$K_ENV" "$K_EVID/$K_CFG/"
	cat "$K_CONFIG" "$K_ENV"
}

# ---- the steps -------------------------------------------------------------------------------------

# 1: with the reserved cgroups missing the kubelet refuses to start; its log line is kept. What
# the refused start wrote is then removed (it is not the node's "before").
k_refuses() {
	local since
	since=$(date +%s)
	k_start
	local i line=""
	for i in $(seq 60); do
		k_journal "$since" >/dev/null
		line=$(grep -m1 'Failed to start ContainerManager' "$work/k-journal")
		[[ -n $line ]] && break
		sleep 2
	done
	sleep 2
	echo "log: ${line:-(no ContainerManager failure within 120 s)}"
	systemctl show kubelet.service -p ExecMainStatus -p ExecMainCode -p NRestarts -p SubState
	k_stop
	echo "started at $since, refused after $(($(date +%s) - since)) s (or less)"
	[[ -n $line ]]
}

# What a kubelet run left beside the baseline: new directories, changed system.slice values.
k_leftovers() {
	k_dirs >"$work/k-dirs-now"
	comm -13 "$K_EVID/$K_CFG/dirs-before" "$work/k-dirs-now" | sed 's/^/new cgroup: /'
	k_sys_values >"$work/k-sys-now"
	diff "$K_EVID/$K_CFG/sys-before" "$work/k-sys-now" | grep '^>' | sed 's/^> /changed: /'
	return 0
}

# Remove what the kubelet made (after it stopped): its transient kubepods slices, the empty
# directories it left, system.slice's values back.
k_remove_leftovers() {
	local u d f old
	if [[ $K_DRIVER == systemd ]]; then
		for u in kubepods-burstable.slice kubepods-besteffort.slice kubepods.slice; do
			systemctl stop "$u" 2>/dev/null
		done
	fi
	k_dirs >"$work/k-dirs-now"
	comm -13 "$K_EVID/$K_CFG/dirs-before" "$work/k-dirs-now" | awk '{print length, $0}' | sort -rn |
		cut -d' ' -f2- | while read -r d; do
		[[ -d $cg/$d ]] || continue
		find "$cg/$d" -depth -type d -exec rmdir {} + 2>/dev/null
		[[ -d $cg/$d ]] && echo "kept $d"
	done
	while read -r f old; do
		[[ $(head -n1 "$cg/$f") == "$old" ]] || { echo "$old" >"$cg/$f" && echo "restored $f to $old"; }
	done <"$K_EVID/$K_CFG/sys-before"
	# the kubelet's own cgroups of the stopped run (kubeletCgroups made by its cgroupfs manager)
	return 0
}

k_step1() {
	k_refuses || return 1
	echo "--- what the refused start wrote (removed now):"
	k_leftovers
	k_remove_leftovers
	echo "--- after the removal, beside the baseline:"
	k_leftovers
}

# 2: cgalloc setup with the kubelet's own inputs; the kubelet starts, enforces, runs its pods.
k_step2() {
	if [[ $K_MAIN == 1 ]]; then
		# the node's own configuration: the boot unit runs this setup at every boot, before the
		# kubelet and containerd (with the systemd driver they go in the kube-reserved slice).
		# Installed first: its daemon-reload would undo what setup writes on cgroupfs (step 9).
		local daemons=()
		[[ $K_DRIVER == systemd ]] && daemons=(--daemons kubelet,containerd)
		rm -f /etc/cgalloc/setup.conf # an earlier run's (install-unit keeps an existing one)
		if [[ $(hierarchy) == v1 ]]; then
			k_image_install "${daemons[@]}" -- "${K_CG_ARGS[@]}" || return 1
		else
			cgalloc install-unit "${daemons[@]}" -- "${K_CG_ARGS[@]}" || return 1
		fi
		systemctl daemon-reload
	fi
	echo "\$ cgalloc setup ${K_CG_ARGS[*]}"
	cgalloc setup "${K_CG_ARGS[@]}" >"$K_EVID/$K_CFG/setup.txt" 2>&1 || { cat "$K_EVID/$K_CFG/setup.txt"; return 1; }
	tail -n 12 "$K_EVID/$K_CFG/setup.txt"
	# containerd into its slice (install-unit's drop-in), under the tree setup made; it starts
	# at boot (after the boot unit: step 7). The kubelet is started by the reboot check instead
	# (provision.sh reboot_check): with it enabled, the v1 guest's kernel hung during the boot
	# under TCG (both vCPUs spinning with interrupts off; not seen without it).
	if [[ $K_MAIN == 1 ]]; then
		systemctl enable containerd.service || return 1
		systemctl restart containerd.service || return 1
	fi
	k_add "${K_PODS[@]}"
	local since
	since=$(date +%s)
	k_start
	"${K_PY[@]}" pods "${K_PODS[@]/#/--want=}" --timeout "$K_WAIT" || return 1
	k_started "$since" || return 1
	echo "kubepods memory limit the kubelet enforces: $(k_read memory "$K_KUBEPODS" "$(k_memfile)")"
	local pid
	pid=$(systemctl show -p MainPID --value kubelet.service)
	echo "kubelet (pid $pid) in $(grep -m1 -E '^0::|name=systemd' "/proc/$pid/cgroup" | cut -d: -f3)"
}

# The v1 guest's boot unit as an image build writes it: install-unit below a root that is not
# its own (the guest's root bound at a mount point, as a chroot build's target), so it tells no
# systemd; the reboot (step 7) is then the first boot of a root with those files.
k_image_install() {
	local image=/mnt/cgalloc-image rc=0
	mkdir -p "$image" && mount --bind / "$image" || return 1
	echo "\$ cgalloc install-unit --root $image $*"
	cgalloc install-unit --root "$image" "$@" || rc=1
	umount "$image" && rmdir "$image" || rc=1
	return $rc
}

k_memfile() { [[ $(hierarchy) == v2 ]] && echo memory.max || echo memory.limit_in_bytes; }

# 3: after the kubelet wrote its own values, cgalloc verify (the running pods' manifests given).
k_verify() {
	echo "\$ cgalloc verify ${K_CG_ARGS[*]} --static-pods"
	cgalloc verify "${K_CG_ARGS[@]}" --static-pods
}

# 7d: the same, given the kubelet's QoS loop time to catch up after its start. Its first
# UpdateCgroups can run before the static pods are admitted (burstable cpu.shares 2, seen once
# after the reboot on v1-systemd); it writes the pods' sum at the latest at its next periodic
# update, a minute later (periodicQOSCgroupUpdateInterval, pkg/kubelet/cm/
# qos_container_manager_linux.go). Each attempt's drift is kept; the step passes once the tree
# is in sync, within 90 s.
k_verify_settled() {
	local t0 rc
	t0=$(date +%s)
	while :; do
		k_verify
		rc=$?
		[[ $rc == 0 ]] && { echo "in sync $(($(date +%s) - t0)) s after the first attempt"; return 0; }
		[[ $(($(date +%s) - t0)) -ge 90 ]] && return "$rc"
		echo "--- not yet: the kubelet's periodic QoS update comes within a minute; again in 15 s"
		sleep 15
	done
}

# 4: each pod cgroup's files against cgalloc show --pods (the same manifests), file by file.
k_step4() {
	cgalloc show "${K_CG_ARGS[@]}" --pods "$K_MANIFESTS" -o json >"$K_EVID/$K_CFG/show.json" || return 1
	"${K_PY[@]}" compare-pods "$K_EVID/$K_CFG/show.json" "$(hierarchy)"
}

# 5: /stats/summary and cgalloc stats -o json at the same moment, on the quiet pods.
k_step5() {
	sleep 15 # the quiet pods settle; the kubelet's housekeeping has sampled them
	"${K_PY[@]}" summary-vs-stats "$K_EVID/$K_CFG/summary" -- cgalloc stats "${K_CG_ARGS[@]}" -o json
}

# The kernel's memcg OOM kills since the enforcement pods started (dmesg past the line count
# then): "oom_memcg=<whose limit>,task_memcg=<the victim's>".
k_oom_log() {
	dmesg | tail -n +$((K_DMESG_LINES + 1)) | grep -o 'oom-kill:constraint=CONSTRAINT_MEMCG.*' |
		grep -o 'oom_memcg=[^,]*,task_memcg=[^,]*,task=[^,]*'
}

# 6: the enforcement pods, all at once (each check below waits for its own evidence).
k_enforce_start() {
	K_DMESG_LINES=$(dmesg | wc -l)
	[[ $(hierarchy) == v1 ]] && echo 0 >"$(ctl memory "$K_KUBEPODS")/memory.max_usage_in_bytes"
	k_add "${K_ENFORCE[@]}"
}

# 6a: a pod allocating past its limit is OOM-killed in its pod cgroup.
k_step6_oom() {
	local uid cgroup line="" deadline=$((SECONDS + K_WAIT))
	uid=$K_UID_PREFIX-0000-4000-8000-000000000005
	while ((SECONDS < deadline)); do
		[[ -z ${cgroup:-} ]] && cgroup=$(k_pod_cgroup "$uid")
		line=$(k_oom_log | grep -F -e "${uid//-/_}" -e "$uid")
		[[ -n $line && -n $cgroup ]] && break
		sleep 2
	done
	echo "pod cgroup: ${cgroup:-(none)}, memory limit $(k_read memory "${cgroup:-none}" "$(k_memfile)")"
	echo "kernel: ${line:-(no memcg OOM kill of this pod within $K_WAIT s)}"
	[[ $(hierarchy) == v2 && -n $cgroup ]] && echo "pod cgroup memory.events: $(tr '\n' ' ' <"$cg/$cgroup/memory.events")"
	sleep 4
	"${K_PY[@]}" pods --timeout 1 2>&1 | grep '^oom'
	# the victim's cgroup is inside the pod cgroup
	[[ -n $line && -n $cgroup && $line == *"task_memcg=/${cgroup}/"* ]]
}

# k_pod_cgroup UID: the pod cgroup's path (memory hierarchy) the kubelet made for UID.
k_pod_cgroup() {
	local base d
	base=$(ctl memory "$K_KUBEPODS")
	d=$(find "$base" -maxdepth 3 -type d \( -name "pod$1" -o -name "*pod${1//-/_}.slice" \) 2>/dev/null | head -n1)
	[[ -n $d ]] && echo "${d#"$(ctl memory "")"}"
}

# k_cpu_stat CGROUP: "usage_us throttled_periods" of CGROUP.
k_cpu_stat() {
	if [[ $(hierarchy) == v2 ]]; then
		awk '$1 == "usage_usec" {u = $2} $1 == "nr_throttled" {t = $2} END {print u, t}' "$cg/$1/cpu.stat"
	else
		echo "$(($(cat "$cg/cpu,cpuacct/$1/cpuacct.usage") / 1000)) $(awk '$1 == "nr_throttled" {print $2}' "$cg/cpu,cpuacct/$1/cpu.stat")"
	fi
}

# 6b: a CPU-bound pod is throttled at its quota (100m: 0.1 CPU).
k_step6_cpu() {
	local uid cgroup i
	uid=$K_UID_PREFIX-0000-4000-8000-000000000006
	"${K_PY[@]}" pods --want spin --timeout "$K_WAIT" >/dev/null
	cgroup=$(k_pod_cgroup "$uid")
	[[ -n $cgroup ]] || { echo "no pod cgroup for spin"; return 1; }
	sleep 5
	local u0 t0 u1 t1 w0 w1
	read -r u0 t0 <<<"$(k_cpu_stat "$cgroup")"
	w0=$(date +%s%N)
	sleep 20
	read -r u1 t1 <<<"$(k_cpu_stat "$cgroup")"
	w1=$(date +%s%N)
	local quota
	if [[ $(hierarchy) == v2 ]]; then quota=$(cat "$cg/$cgroup/cpu.max"); else
		quota="$(cat "$cg/cpu,cpuacct/$cgroup/cpu.cfs_quota_us") $(cat "$cg/cpu,cpuacct/$cgroup/cpu.cfs_period_us")"
	fi
	python3 - "$cgroup" "$quota" "$u0" "$u1" "$t0" "$t1" "$w0" "$w1" <<'EOF'
import sys
cgroup, quota, u0, u1, t0, t1, w0, w1 = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
q, p = quota.split()
limit = int(q) / int(p)
used = (u1 - u0) / ((w1 - w0) / 1000)
print(f"pod cgroup {cgroup}: quota {quota} = {limit} CPU")
print(f"over {(w1 - w0) / 1e9:.1f} s it used {used:.3f} CPU; throttled in {t1 - t0} more periods")
# CFS enforces the quota per period; 25 % over allows the period edges and the emulated clock.
ok = t1 > t0 and used <= limit * 1.25
print("throttled at its quota" if ok else "NOT held at its quota")
sys.exit(0 if ok else 1)
EOF
}

# 6c: pods together cannot pass kubepods' limit (capacity - reservations): two BestEffort pods
# of 60 % of it each; the kernel OOM-kills inside kubepods and its usage never passes the limit.
k_step6_fill() {
	local limit peak_file line="" deadline=$((SECONDS + K_WAIT))
	limit=$(k_read memory "$K_KUBEPODS" "$(k_memfile)")
	if [[ $(hierarchy) == v2 ]]; then peak_file=memory.peak; else peak_file=memory.max_usage_in_bytes; fi
	echo "kubepods memory limit $limit; each fill pod allocates $((K_KUBEPODS_MIB * 6 / 10)) MiB"
	while ((SECONDS < deadline)); do
		line=$(k_oom_log | grep -F "oom_memcg=/$K_KUBEPODS,")
		[[ -n $line ]] && break
		sleep 2
	done
	local peak
	peak=$(k_read memory "$K_KUBEPODS" "$peak_file")
	echo "kernel: ${line:-(no OOM kill at the kubepods limit within $K_WAIT s)}"
	echo "kubepods $peak_file: $peak (limit $limit)"
	"${K_PY[@]}" pods --timeout 1 2>&1 | grep '^fill'
	[[ -n $line && $peak != "(absent)" && $peak -le $limit ]]
}

# 9: daemon-reload (every package install runs one) and a new pod's slice leave the enforcement
# as it was set: the files cgalloc and the kubelet wrote, and verify.
k_enforced_values() {
	local f
	for f in $(k_sys_files); do echo "$f $(head -n1 "$cg/$f" 2>/dev/null)"; done
	local files=(memory.max cpu.weight cpu.max pids.max)
	[[ $(hierarchy) == v1 ]] && files=(memory/X/memory.limit_in_bytes cpu,cpuacct/X/cpu.shares
		cpu,cpuacct/X/cpu.cfs_quota_us pids/X/pids.max)
	local c x
	for c in "$K_KUBEPODS" "$K_KUBEPODS/$(k_tier burstable)" "$K_KUBEPODS/$(k_tier besteffort)" "${K_KUBE#/}"; do
		for x in "${files[@]}"; do
			if [[ $(hierarchy) == v2 ]]; then f=$c/$x; else f=${x/X/$c}; fi
			echo "$f $(head -n1 "$cg/$f" 2>/dev/null)"
		done
	done
}
k_tier() { [[ $K_DRIVER == systemd ]] && echo "kubepods-$1.slice" || echo "$1"; }

k_step9() {
	k_enforced_values >"$K_EVID/$K_CFG/enforced-before"
	systemctl daemon-reload
	k_add late
	# without the new pod's slice the step proves only the daemon-reload half
	if ! "${K_PY[@]}" pods --want late --timeout "$K_WAIT" >"$work/k-late"; then
		cat "$work/k-late"
		echo "the new pod did not run within $K_WAIT s"
		k_del late
		return 1
	fi
	sleep 5
	k_enforced_values >"$K_EVID/$K_CFG/enforced-after"
	echo "--- values changed by daemon-reload and the new pod (before -> after):"
	local changed=0
	if ! diff "$K_EVID/$K_CFG/enforced-before" "$K_EVID/$K_CFG/enforced-after" >"$work/k-diff"; then
		changed=1
		cat "$work/k-diff"
	fi
	echo "--- cgalloc verify (the new pod's manifest included):"
	k_verify
	local rc=$?
	k_del late
	[[ $changed == 0 && $rc == 0 ]]
}

k_v2_systemd() {
	local d f
	echo "the kubelet's cgroupfs-named twins (nothing runs in them):"
	for d in kubepods kubepods/burstable kubepods/besteffort kube.slice system.slice; do
		[[ -d $cg/$d ]] || continue
		echo "  /$d: procs $(wc -l <"$cg/$d/cgroup.procs"), $(for f in memory.max cpu.weight pids.max; do
			printf '%s=%s ' "$f" "$(cat "$cg/$d/$f" 2>/dev/null)"; done)"
	done
	ls -d "$cg"/kubepods*/*pod* "$cg"/kubepods/*/pod* 2>/dev/null | sed "s|$cg|  pod cgroup: |"
	echo "the slices systemd runs (where the pods' processes are):"
	for d in kubepods.slice kubepods.slice/kubepods-burstable.slice; do
		echo "  /$d: $(for f in memory.max cpu.weight pids.max; do printf '%s=%s ' "$f" "$(cat "$cg/$d/$f" 2>/dev/null)"; done)"
	done
	k_journal "$(($(date +%s) - 600))" >/dev/null
	grep -m3 -i 'cgroup v2\|current cgroup' "$work/k-journal"
	echo "--- cgalloc verify (exit status recorded, not judged):"
	k_verify
	echo "verify exit $?"
	return 0
}

# 10: the cost beside the kubelet's (emulated CPU: reported, no verdict): stats against
# /stats/summary, and the exporter's scrapes against the kubelet's /metrics/cadvisor and
# /metrics/resource for the same pods.
k_step10() {
	local pid epid rc
	pid=$(systemctl show -p MainPID --value kubelet.service)
	cgalloc exporter "${K_CG_ARGS[@]}" --listen 127.0.0.1:9847 2>"$work/exporter.err" &
	epid=$!
	"${K_PY[@]}" cost "$K_EVID/$K_CFG/cost.json" --kubelet-pid "$pid" --window "$K_COST_WINDOW" \
		--interval 10 --rounds "$K_COST_ROUNDS" --exporter http://127.0.0.1:9847/metrics \
		--exporter-pid "$epid" -- cgalloc stats "${K_CG_ARGS[@]}" -o json
	rc=$?
	kill "$epid"
	wait "$epid"
	echo "exporter: exit $? after SIGTERM; its stderr:"
	cat "$work/exporter.err"
	return "$rc"
}

# 11-12: `cgalloc record` samples the node for 5m10s (just past 5m, the shortest window recommend
# accepts) beside steps 6-9, with a load this step makes in kube-reserved; then `cgalloc
# recommend` on that window must cover the peaks it recorded, the vendors' formulas beside it.
# The recorder has ended before step 10 measures CPU.
K_REC_MIB=64
K_REC_LOAD='import os, sys, time
for path in sys.argv[2:]:
    with open(path, "w") as f:
        f.write(str(os.getpid()))
held = []
for _ in range(int(sys.argv[1])):
    b = bytearray(1 << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    held.append(b)
    time.sleep(0.1)
time.sleep(20)
print(f"the load held {len(held)} MiB for 20 s")'

# The kernel's high-water mark of a cgroup's memory (v1's can be reset by writing 0).
k_peakfile() { [[ $(hierarchy) == v2 ]] && echo memory.peak || echo memory.max_usage_in_bytes; }
k_kernel_peak() { k_read memory "${K_KUBE#/}" "$(k_peakfile)"; }

k_step11() {
	local procs=() ctrl dir
	rm -f "$work/history.jsonl"
	cgalloc record "${K_CG_ARGS[@]}" --for 5m10s --every 5s --history "$work/history.jsonl" \
		>"$work/record.out" 2>&1 &
	K_REC_PID=$!
	for ctrl in memory cpu,cpuacct pids; do
		dir=$(ctl "$ctrl" "${K_KUBE#/}")
		[[ -f $dir/cgroup.procs ]] && procs+=("$dir/cgroup.procs")
		[[ $(hierarchy) == v2 ]] && break
	done
	[[ $(hierarchy) == v1 ]] && echo 0 >"$(k_path memory "${K_KUBE#/}")/$(k_peakfile)"
	sleep 20 # a quiet start: the load comes inside the window
	echo "recorder pid $K_REC_PID; the load (${K_REC_MIB} MiB) joins ${procs[*]}"
	python3 -c "$K_REC_LOAD" "$K_REC_MIB" "${procs[@]}" || return 1
	echo "kube-reserved's high-water mark (the kernel's): $(k_kernel_peak) bytes"
	kill -0 "$K_REC_PID" && echo "the recorder is still running"
}

k_step12() {
	local deadline=$((SECONDS + 600)) rc out=$K_EVID/$K_CFG
	[[ -n ${K_REC_PID:-} ]] || { echo "no recorder: step 11 did not start one"; return 1; }
	while kill -0 "$K_REC_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 5; done
	kill "$K_REC_PID" 2>/dev/null && echo "the recorder outlived its window by 600 s: stopped"
	wait "$K_REC_PID"
	rc=$?
	K_REC_PID=
	echo "cgalloc record: exit $rc"
	tail -n 5 "$work/record.out"
	local args=("${K_CG_ARGS[@]}" --history "$work/history.jsonl" --min-window 5m)
	echo "\$ cgalloc recommend ${args[*]}"
	cgalloc recommend "${args[@]}" >"$out/recommend.txt" 2>&1
	cat "$out/recommend.txt"
	cgalloc recommend "${args[@]}" -o json >"$out/recommend.json" || return 1
	"${K_PY[@]}" recommend-covers "$out/recommend.json" --load-mib "$K_REC_MIB" \
		--kernel-peak "$(k_kernel_peak)" && [[ $rc == 0 ]]
}

# 8: with the kubelet and containerd stopped, teardown leaves the node as before setup; what
# the kubelet made itself is left to it and must be named in teardown's report.
k_step8() {
	k_del "${K_PODS[@]}"
	"${K_PY[@]}" pods "${K_PODS[@]/#/--gone=}" --timeout 180 >/dev/null
	local i
	echo "[$(date +%T)] pods gone from the kubelet"
	for i in $(seq 45); do # the kubelet removes a stopped pod's cgroup in its housekeeping
		[[ -z $(find "$(ctl memory "$K_KUBEPODS")" -mindepth 1 -type d \( -name 'pod*' -o -name '*-pod*.slice' \) 2>/dev/null) ]] && break
		sleep 2
	done
	echo "[$(date +%T)] pod cgroups gone"
	k_stop
	systemctl stop containerd.service
	local shims
	shims=$(pgrep -f containerd-shim)
	[[ -n $shims ]] && { echo "containerd shims left running: $shims (stopped)"; kill $shims; sleep 2; }
	echo "\$ cgalloc teardown"
	cgalloc teardown >"$K_EVID/$K_CFG/teardown.txt" 2>&1
	local rc=$?
	cat "$K_EVID/$K_CFG/teardown.txt"
	echo "teardown exit $rc"
	if [[ $rc == 1 ]]; then
		# Kept only because cgroups that are not cgalloc's are below (seen on v1 with the
		# cgroupfs driver: pod and container directories the kubelet and runc left in pids):
		# the operator's next move, removing those (teardown named them) and running teardown
		# again, must finish it.
		local left kept k ok=1
		left=$(sed -n 's/^ *left \(.*\): not made by cgalloc.*/\1/p' "$K_EVID/$K_CFG/teardown.txt" |
			awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
		kept=$(sed -n 's/^ *kept \([^:]*\):.*/\1/p' "$K_EVID/$K_CFG/teardown.txt")
		while read -r k; do
			[[ -z $k ]] && continue
			grep -q "^$k/" <<<"$left" || { echo "kept with nothing foreign below it: $k"; ok=0; }
		done <<<"$kept"
		if [[ $ok == 1 && -n $kept ]]; then
			echo "--- removing what teardown named as not cgalloc's, then teardown again"
			while read -r d; do rmdir "$cg/$d" 2>/dev/null; done <<<"$left"
			cgalloc teardown >"$K_EVID/$K_CFG/teardown-2.txt" 2>&1
			rc=$?
			cat "$K_EVID/$K_CFG/teardown-2.txt"
			cat "$K_EVID/$K_CFG/teardown-2.txt" >>"$K_EVID/$K_CFG/teardown.txt"
			echo "second teardown exit $rc"
		fi
	fi
	if [[ $K_MAIN == 1 ]]; then
		# after the reboot systemd, not setup, started the kube slice for the daemons' Slice=
		# drop-ins: --uninstall stops it (teardown leaves it), which the comparison below checks
		cgalloc install-unit --uninstall || rc=1
	fi
	sleep 3
	k_leftovers >"$K_EVID/$K_CFG/leftovers.txt"
	echo "--- beside the node before setup:"
	cat "$K_EVID/$K_CFG/leftovers.txt"
	# every difference must be a directory the kubelet made itself, named by teardown
	local bad=0 d
	while read -r line; do
		case $line in
		"new cgroup: "*)
			d=${line#new cgroup: }
			# the path as a word of teardown's report (alone, or with a controller prefix)
			if [[ $K_CFG == v2-systemd && ${d%%/*} =~ ^(kube|system|kubepods)$ ]]; then
				# 1.20's v2 systemd driver writes to cgroupfs-named twins of the slices (step
				# 3x): its own, outside the tree cgalloc made, which teardown does not name
				echo "the v2 systemd driver's twin (recorded in 3x): $d"
			elif python3 -c 'import re, sys
sys.exit(not re.search(r"(^|[\s/])" + re.escape(sys.argv[1]) + r"(:|,|\s|$)", open(sys.argv[2]).read(), re.M))' \
				"$d" "$K_EVID/$K_CFG/teardown.txt"; then
				echo "kubelet's own, named by teardown: $d"
			else
				echo "NOT named by teardown: $d"
				bad=1
			fi
			;;
		*) echo "NOT as before: $line"; bad=1 ;;
		esac
	done <"$K_EVID/$K_CFG/leftovers.txt"
	[[ $rc == 0 && $bad == 0 ]]
}

# After a configuration: the lane removes what the kubelet left (named in step 8) so the next
# one starts from the same node; the kubelet's state goes too.
k_reset() {
	k_stop
	k_remove_leftovers
	rm -rf /var/lib/kubelet "${K_MANIFESTS:?}"/*
	mkdir -p "$K_MANIFESTS"
	k_leftovers
}

# ---- a configuration ---------------------------------------------------------------------------

kubelet_config() {
	k_use "$1"
	local c=$K_CFG
	mkdir -p "$K_EVID/$c"
	k_write_inputs >/dev/null
	K_KUBEPODS_MIB=0
	kstep "$c" 0 "containerd for the $K_DRIVER driver, images imported, inputs written" k_runtime ||
		return 1
	k_dirs >"$K_EVID/$c/dirs-before"
	k_sys_values >"$K_EVID/$c/sys-before"
	snapshot >"$K_EVID/$c/snapshot-before"
	kstep "$c" 1 "refuses to start without the reserved cgroups (the seeds' failure)" k_step1
	if ! kstep "$c" 2 "cgalloc setup with the kubelet's inputs: it starts, enforces, runs its pods" k_step2; then
		# nothing else can run on this configuration: leave the node clean for the next one
		kstep "$c" 8 "clean exit: teardown leaves the node as before setup" k_step8
		kstep "$c" reset "the lane removes the kubelet's leftovers for the next configuration" k_reset
		[[ $K_MAIN == 1 ]] && touch "$results/kubelet-main-failed"
		return 1
	fi
	K_KUBEPODS_MIB=$(($(k_read memory "$K_KUBEPODS" "$(k_memfile)") >> 20))
	sleep 10 # the kubelet's QoS loop after the pods' admission
	if [[ $c == v2-systemd ]]; then
		# 1.20's systemd driver on cgroup v2 writes its limits to cgroupfs-named twins nothing
		# runs in: the kubelet's behaviour, recorded (never a verdict on cgalloc)
		kstep "$c" 3x "recorded: what 1.20's v2 systemd driver wrote, and verify's view" k_v2_systemd
	else
		kstep "$c" 3 "cgalloc verify exits 0 after the kubelet ran" k_verify
		kstep "$c" 4 "each pod cgroup's files = cgalloc show --pods" k_step4
	fi
	if [[ $K_MAIN == 1 ]]; then
		kstep "$c" 5 "/stats/summary = cgalloc stats -o json, same moment (tolerance)" k_step5
		kstep "$c" 11 "cgalloc record: a 5-minute window begins; a load runs in kube-reserved" k_step11
		k_enforce_start
		kstep "$c" 6a "a pod past its memory limit is OOM-killed in its pod cgroup" k_step6_oom
		kstep "$c" 6b "a CPU-bound pod is throttled at its quota" k_step6_cpu
		kstep "$c" 6c "pods together cannot pass kubepods' memory limit" k_step6_fill
		k_del "${K_ENFORCE[@]}"
		"${K_PY[@]}" pods "${K_ENFORCE[@]/#/--gone=}" --timeout 180 >/dev/null
		kstep "$c" 9 "daemon-reload and a new pod slice leave the enforcement as set" k_step9
		kstep "$c" 12 "cgalloc recommend covers the recorded peaks, beside the vendors' formulas" k_step12
		kstep "$c" 10 "cost: the kubelet's CPU and scrapes beside cgalloc stats and exporter (no verdict)" k_step10
	else
		kstep "$c" 8 "clean exit: teardown leaves the node as before setup" k_step8
		kstep "$c" reset "the lane removes the kubelet's leftovers for the next configuration" k_reset
	fi
}

# 7 after `vagrant reload`: the boot unit ran before the kubelet, which starts without error;
# its static pods run again; verify exits 0. Then 8 on the node's own configuration.
kubelet_after_reboot() {
	K_VERSION_FLAG=()
	[[ -s $results/kubelet-cgalloc-flags ]] && mapfile -t K_VERSION_FLAG <"$results/kubelet-cgalloc-flags"
	k_use "$(cat "$results/kubelet-main")"
	local c=$K_CFG
	if [[ -e $results/kubelet-main-failed ]]; then
		kstep "$c" 7 "reboot with the real kubelet" bash -c 'echo "step 2 failed before the reboot: nothing to reboot with"; exit 1'
		return 0
	fi
	kstep "$c" 7a "the boot unit finished before the kubelet and containerd started" k_boot_order
	kstep "$c" 7b "the kubelet started without error after the boot" k_started "$(k_boot_epoch)"
	kstep "$c" 7c "its static pods run again" "${K_PY[@]}" pods "${K_PODS[@]/#/--want=}" --timeout "$K_WAIT"
	kstep "$c" 7d "cgalloc verify exits 0" k_verify_settled
	kstep "$c" 8 "clean exit: teardown leaves the node as before setup" k_step8
}

k_boot_epoch() { echo $(($(date +%s) - $(cut -d. -f1 /proc/uptime))); }

k_boot_order() {
	local done_at d start
	done_at=$(systemctl show -p ActiveEnterTimestampMonotonic --value cgalloc-setup.service)
	systemctl show cgalloc-setup.service -p Result -p ExecMainStatus
	echo "cgalloc-setup.service active at $done_at us"
	[[ $done_at -gt 0 ]] || return 1
	for d in kubelet containerd; do
		start=$(systemctl show -p ExecMainStartTimestampMonotonic --value "$d.service")
		echo "$d.service started at $start us"
		[[ $start -gt 0 && $done_at -le $start ]] || return 1
	done
	[[ $(systemctl show -p Result --value cgalloc-setup.service) == success ]]
}

# The whole first phase: prepare, then the guest's configurations in order.
kubelet_checks() {
	K_VERSION_FLAG=()
	if cgalloc show --kubelet-version 1.20 -o json >/dev/null 2>&1; then
		K_VERSION_FLAG=(--kubelet-version 1.20)
	fi
	k_use "v0-none"
	mkdir -p "$K_EVID"
	kstep "$machine" prep "the kubelet binary (pinned sha256), hugepages, images, unit" kubelet_prepare || return 0
	local configs=(v1-cgroupfs v1-systemd)
	[[ $(hierarchy) == v2 ]] && configs=(v2-systemd v2-cgroupfs)
	echo "${configs[1]}" >"$results/kubelet-main"
	printf '%s\n' "${K_VERSION_FLAG[@]}" | grep -v '^$' >"$results/kubelet-cgalloc-flags"
	local c
	for c in "${configs[@]}"; do
		kubelet_config "$c"
	done
}
