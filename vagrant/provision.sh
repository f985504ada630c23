#!/usr/bin/env bash
# Provision a node with cgalloc and prove it on this node's real systemd and cgroup hierarchy.
#
#   provision.sh MACHINE v1|v2 [checks|reboot-check|kubelet]   (as root; the Vagrantfile runs it)
#
# This is the script an operator adapts for their own nodes: install cgalloc from a checkout
# (wheels carried in when the node has no registry), then for each cgroup driver set up the
# Node Allocatable tree with real reserved slices and check every promise cgalloc makes, run the
# benchmarks (bench-read.json/.md, bench-setup.json/.md, bench.txt), then run the real kubelet
# v1.20.2 against cgalloc (vagrant/kubelet.sh: issue 36's steps, each driver this guest runs; the
# node's own configuration installs the boot unit, the kubelet and containerd ordered after it).
# "reboot-check" (the Vagrantfile's run-never provisioner, `vagrant reload --provision-with
# reboot-check`) runs after a reboot and proves the boot unit re-created the tree before the
# kubelet started, which runs its pods again; then the clean exit. The cgalloc-only checks stop
# at the first deviation; the kubelet's steps all run. It always writes RESULTS/provision.json
# (every step, its exit status, its output); status is "passed" only once the reboot check
# passed and no step failed.
#
# Environment: CGALLOC_SRC (checkout, /cgalloc), CGALLOC_VENV (/opt/cgalloc), CGALLOC_RESULTS
# (/var/lib/cgalloc-provision/MACHINE), CGALLOC_BENCH=full|ci|none (full), CGALLOC_BENCH_PODS,
# CGALLOC_BENCH_MACHINES (the machines that run the bench; default every one).
set -uo pipefail

machine=${1:?usage: provision.sh MACHINE v1|v2 [checks|reboot-check]}
want=${2:?usage: provision.sh MACHINE v1|v2 [checks|reboot-check]}
phase=${3:-checks}
src=${CGALLOC_SRC:-/cgalloc}
venv=${CGALLOC_VENV:-/opt/cgalloc}
results=${CGALLOC_RESULTS:-/var/lib/cgalloc-provision/$machine}
bench_mode=${CGALLOC_BENCH:-full}
cg=/sys/fs/cgroup
work=$(mktemp -d /var/tmp/cgalloc-provision.XXXXXX)
# The steps outlive the reboot between the two phases.
steps=$results/steps.tsv
started=$(date +%s)

# Node inputs shared by both drivers: the VM's own capacity, real reservations.
node=(--kube-reserved cpu=500m,memory=200Mi,pid=1000 --system-reserved cpu=500m,memory=256Mi
	--enforce pods,kube-reserved,system-reserved --system-reserved-cgroup /system.slice)

mkdir -p "$results"
if [[ $phase == checks || $phase == kubelet ]]; then
	rm -rf "${results:?}"/*
	: >"$steps"
	date +%s >"$results/started"
fi
started=$(cat "$results/started" 2>/dev/null || echo "$started")

write_result() {
	local status=$1
	python3 - "$steps" "$results/provision.json" "$machine" "$want" "$status" \
		"$(($(date +%s) - started))" <<'EOF'
import json, os, platform, subprocess, sys

steps_file, out, machine, want, status, seconds = sys.argv[1:]
steps = []
with open(steps_file) as f:
    for line in f:
        name, ok, rc, secs, detail = line.rstrip("\n").split("\t", 4)
        steps.append({"step": name, "ok": ok == "1", "rc": int(rc), "seconds": float(secs),
                      "detail": bytes(detail, "utf-8").decode("unicode_escape")})
fs = subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True, text=True)
systemd = subprocess.run(["systemctl", "--version"], capture_output=True, text=True)
doc = {
    "machine": machine,
    "expected_hierarchy": want,
    "cgroupfs_type": fs.stdout.strip(),
    "kernel": platform.release(),
    "systemd": systemd.stdout.split("\n")[0],
    "pid1": os.readlink("/proc/1/exe"),
    "cpus": os.cpu_count(),
    # a failed step fails the machine whatever phase it reached
    "status": "failed" if any(not s["ok"] for s in steps) and status == "passed" else status,
    "passed": sum(s["ok"] for s in steps),
    "failed": sum(not s["ok"] for s in steps),
    "seconds": int(seconds),
    "steps": steps,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
EOF
}

fail() {
	echo "PROVISION FAILED on $machine: $*" >&2
	write_result failed
	exit 1
}

# run_step NAME EXPECTED_RC TAIL CMD...: run CMD, record it with the last TAIL lines of its
# output (kept whole in $work/out); its exit status in STEP_RC. Succeeds when it was EXPECTED_RC.
run_step() {
	local name=$1 expect=$2 tail=$3
	shift 3
	local t0 t1 detail="" ok=1
	t0=$(date +%s%N)
	"$@" >"$work/out" 2>&1
	STEP_RC=$?
	t1=$(date +%s%N)
	[[ $STEP_RC -eq $expect ]] || ok=0
	# The output's tail on every step: a failure's reason, a passed check's evidence.
	detail=$(tail -n "$tail" "$work/out" | python3 -c 'import sys; print(sys.stdin.read().encode("unicode_escape").decode())')
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$ok" "$STEP_RC" "$(((t1 - t0) / 1000000))e-3" "$detail" >>"$steps"
	if [[ $ok -eq 1 ]]; then
		echo "ok   $name"
	else
		echo "FAIL $name: exit $STEP_RC, expected $expect" >&2
	fi
	[[ $ok -eq 1 ]]
}

# step NAME EXPECTED_RC CMD...: run_step, and stop everything on an unexpected exit status.
step() {
	local name=$1 expect=$2
	shift 2
	if ! run_step "$name" "$expect" 40 "$@"; then
		cat "$work/out" >&2
		fail "$name"
	fi
}

# A check is a step whose command is a shell snippet that must succeed.
check() {
	local name=$1
	shift
	step "$name" 0 bash -c "$*"
}

# What teardown must leave as it was: every cgroup directory except per-service/scope/session
# ones (they come and go with the daemons), the v2 root's enabled controllers, systemd's slice
# units and system.slice's limits as systemd and as the kernel see them.
snapshot() {
	find "$cg" -mindepth 1 -type d -not -path '*/user.slice/*' \
		-not -name '*.service' -not -name '*.scope' -not -name '*.mount' -not -name '*.socket' \
		-not -path '*.service/*' -not -path '*.scope/*' -printf '%P\n' | sort
	[[ -f $cg/cgroup.subtree_control ]] && echo "root subtree_control: $(cat "$cg/cgroup.subtree_control")"
	systemctl list-units --all --plain --no-legend --no-pager '*.slice' | awk '{print "unit", $1, $3, $4}' | sort
	systemctl show system.slice -p MemoryMax -p MemoryLimit -p CPUWeight -p CPUShares -p TasksMax \
		-p CPUQuotaPerSecUSec -p AllowedCPUs
	local f
	for f in system.slice/memory.max system.slice/cpu.weight system.slice/pids.max \
		memory/system.slice/memory.limit_in_bytes cpu,cpuacct/system.slice/cpu.shares \
		pids/system.slice/pids.max; do
		[[ -f $cg/$f ]] && echo "$f: $(cat "$cg/$f")"
	done
	return 0
}

# Teardown must restore the snapshot; systemd collects stopped transient units asynchronously.
same_as_before() {
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		snapshot >"$work/after"
		cmp -s "$work/before" "$work/after" && return 0
		sleep 1
	done
	diff -u "$work/before" "$work/after"
	return 1
}

hierarchy() {
	case $(stat -fc %T "$cg") in
	cgroup2fs) echo v2 ;;
	tmpfs) echo v1 ;;
	*) echo unknown ;;
	esac
}

# The installed cgalloc loads its C core ("native", printed): the pure-Python fallback would
# skew every benchmark.
core_native() {
	"$venv/bin/python" -c 'import sys, cgalloc.host.core as c; print(c.IMPLEMENTATION); sys.exit(c.IMPLEMENTATION != "native")'
}

install_cgalloc() {
	export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
	# A laptop box (debian/bookworm64) lacks the build tools; the CI box has them and no network.
	if ! dpkg-query -W python3-venv python3-dev gcc cgroup-tools >/dev/null 2>&1; then
		apt-get update -q && apt-get install -y -q --no-install-recommends \
			python3-venv python3-dev gcc libc6-dev cgroup-tools || return 1
	fi
	[[ -x $venv/bin/python ]] || python3 -m venv "$venv" || return 1
	# The boot unit runs this install as root, and install-unit refuses code another user could
	# change: the rsync'd checkout (an editable install's code) is the vagrant user's, so root's.
	chown -R root:root "$src" && chmod -R go-w "$src" || return 1
	local wheels=() carried="" installed=0
	if [[ -d $src/vagrant/wheelhouse ]]; then
		wheels=(--no-index --find-links "$src/vagrant/wheelhouse")
		carried=$(ls "$src"/vagrant/wheelhouse/cgalloc-*.whl 2>/dev/null | head -n1)
	fi
	# A cgalloc wheel built where the checkout came from (CI's lane): installed as it is, unless
	# the benchmarks run (they need the editable install below) or its C core does not load
	# here (built against another C library).
	if [[ $bench_mode == none && -n $carried ]]; then
		echo "installing ${carried##*/}, built on the host"
		if "$venv/bin/pip" install -q --no-compile "${wheels[@]}" "$carried" && core_native; then
			installed=1
		else
			echo "its C core does not load here: building from the checkout instead"
			"$venv/bin/pip" uninstall -q -y cgalloc
		fi
	fi
	# Editable: the benchmarks run from the checkout and must import the built C core. Only
	# what the node and the bench need (not the linters), and no byte-compiling of every
	# dependency up front: under software emulation each costs minutes. The build
	# requirements go into the venv once (the CI box has them, and every dependency, already)
	# instead of into a fresh isolated build environment: minutes more under emulation.
	if [[ $installed == 0 ]]; then
		local build_reqs
		mapfile -t build_reqs < <(python3 -c 'import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))' "$src/pyproject.toml")
		"$venv/bin/pip" install -q --no-compile "${wheels[@]}" "${build_reqs[@]}" &&
			"$venv/bin/pip" install -q --no-compile --no-build-isolation "${wheels[@]}" -e "$src" \
				pytest pytest-benchmark || return 1
		core_native || return 1
	fi
	ln -sf "$venv/bin/cgalloc" /usr/local/bin/cgalloc
}

# A path's directory for a controller: on v1 one hierarchy per controller, on v2 the one tree.
ctl() {
	local controller=$1 path=$2
	if [[ $(hierarchy) == v2 ]]; then
		echo "$cg/$path"
	else
		echo "$cg/$controller/$path"
	fi
}

# The whole cycle for one cgroup driver.
driver_cycle() {
	local driver=$1 kube kubepods state=$work/state-$1
	if [[ $driver == systemd ]]; then
		kube=/kube.slice kubepods=kubepods.slice
	else
		kube=/kube-reserved kubepods=kubepods
	fi
	local args=("${node[@]}" --cgroup-driver "$driver" --kube-reserved-cgroup "$kube")
	# The box runs systemd as PID 1 (setup refuses the cgroupfs driver there) and carries
	# Debian's containerd config (SystemdCgroup unset: cgroupfs, refused beside the systemd
	# driver). This cycle proves the tree, not a runtime, so both refusals are waived here;
	# vagrant/kubelet.sh configures containerd to agree and proves the refusal's absence.
	args+=(--allow-driver-mismatch)
	local v
	v=$(hierarchy)
	local cpuctl=cpu,cpuacct shares=cpu.shares drifted=3
	if [[ $v == v2 ]]; then
		shares=cpu.weight drifted=3
	fi

	snapshot >"$work/before"
	step "$driver: setup" 0 cgalloc setup "${args[@]}" --state-dir "$state"
	step "$driver: verify in sync" 0 cgalloc verify "${args[@]}"
	step "$driver: re-run writes nothing" 0 bash -c \
		"cgalloc setup ${args[*]} --state-dir $state -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[\"writes\"]); sys.exit(d[\"writes\"] != 0)'"
	check "$driver: kubepods memory limit on the kernel" \
		"test \"\$(cat $(ctl memory $kubepods)/memory.$([[ $v == v2 ]] && echo max || echo limit_in_bytes))\" != max"
	check "$driver: system.slice memory limit on the kernel" \
		"grep -qx $((256 << 20)) $(ctl memory system.slice)/memory.$([[ $v == v2 ]] && echo max || echo limit_in_bytes)"
	check "$driver: kube-reserved pids limit on the kernel" "grep -qx 1000 $(ctl pids "${kube#/}")/pids.max"
	if [[ $v == v1 ]]; then
		# systemd (252) does not manage cpuset or hugetlb on v1: cgalloc writes them on cgroupfs.
		check "$driver: v1 cpuset written on cgroupfs" \
			"test -n \"\$(cat $cg/cpuset/$kubepods/cpuset.cpus)\" && test -n \"\$(cat $cg/cpuset/$kubepods/cpuset.mems)\""
		check "$driver: v1 hugetlb limit written on cgroupfs" \
			"cat $cg/hugetlb/$kubepods/hugetlb.2MB.limit_in_bytes; test \"\$(cat $cg/hugetlb/$kubepods/hugetlb.2MB.limit_in_bytes)\" != \"\$(cat $cg/hugetlb/hugetlb.2MB.limit_in_bytes 2>/dev/null || echo 9223372036854771712)\""
	fi
	if [[ $driver == systemd ]]; then
		check "systemd: slices are active transient units" \
			"for u in kubepods.slice kubepods-burstable.slice kubepods-besteffort.slice kube.slice; do
			   systemctl is-active -q \$u && test \"\$(systemctl show \$u -p Transient --value)\" = yes || { echo \$u; exit 1; }; done"
		check "systemd: system.slice limit is systemd's property" \
			"systemctl show system.slice -p MemoryMax -p MemoryLimit | grep -qx 'Memory\(Max\|Limit\)=$((256 << 20))'"
	fi
	# systemd re-applies what it knows on daemon-reload; the systemd driver's limits are unit
	# properties, so they must survive it. The cgroupfs driver's writes to system.slice may not:
	# that is why the kubelet's docs pair a systemd host with the systemd driver.
	if [[ $driver == systemd ]]; then
		step "systemd: daemon-reload" 0 systemctl daemon-reload
		step "systemd: limits kept across daemon-reload (verify)" 0 cgalloc verify "${args[@]}"
	fi
	local target
	target=$(ctl "$cpuctl" "$kubepods")/$shares
	[[ $v == v2 ]] && target=$cg/$kubepods/$shares
	step "$driver: drift ($target = $drifted)" 0 bash -c "echo $drifted > $target"
	step "$driver: verify reports the drift" 1 cgalloc verify "${args[@]}"
	step "$driver: setup repairs the drift" 0 cgalloc setup "${args[@]}" --state-dir "$state"
	step "$driver: verify in sync again" 0 cgalloc verify "${args[@]}"
	step "$driver: stats -o json" 0 bash -c \
		"cgalloc stats ${args[*]} -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d, d'"
	step "$driver: kubelet-config" 0 bash -c \
		"cgalloc kubelet-config ${args[*]} | tee /dev/stderr | grep -q 'cgroupDriver: $driver'"
	step "$driver: teardown" 0 cgalloc teardown --state-dir "$state"
	step "$driver: tree and systemd's view as before" 0 same_as_before
}

# The one place the benchmarks are called (bench-read.json/.md: the interleaved read and
# whole-command suites; bench-setup.json/.md: the interleaved setup suite; bench.txt: the output).
# In CI each suite is bounded (CGALLOC_BENCH_TIMEOUT seconds, SIGINT so the bench removes its
# real tree); a suite stopped there is named in bench-cut.txt, which the result file carries.
# A suite that fails (python -m bench exits non-zero: a "failed: ..." row, or a crash) fails the
# step; bench-failed.txt names each failed row, and the result file carries it.
run_bench() {
	local full=1000 pods rounds=3 limit=() rc=0
	pods=${CGALLOC_BENCH_PODS:-$full}
	case $bench_mode in
	none) return 0 ;;
	esac
	if [[ -n ${CGALLOC_BENCH_MACHINES:-} && " $CGALLOC_BENCH_MACHINES " != *" $machine "* ]]; then
		echo "benchmarks: not on $machine (CGALLOC_BENCH_MACHINES=$CGALLOC_BENCH_MACHINES)" |
			tee -a "$results/bench-cut.txt"
		return 0
	fi
	case $bench_mode in
	ci)
		# Under software emulation (TCG) every round takes minutes: one round, each suite
		# bounded, and the read suite's tree halved so the cold lane keeps CI under an hour.
		rounds=1
		limit=(timeout -s INT -k 60 "${CGALLOC_BENCH_TIMEOUT:-900}")
		pods=${CGALLOC_BENCH_PODS:-500}
		[[ $pods -lt $full ]] &&
			echo "python -m bench --trees real: $pods pods, not $full (CI budget under TCG)" >>"$results/bench-cut.txt"
		;;
	esac
	cd "$src" || return 1
	local start=$SECONDS
	"${limit[@]}" env CGALLOC_BENCH_REAL=1 CGALLOC_BENCH_PODS="$pods" CGALLOC_BENCH_ROUNDS="$rounds" \
		CGALLOC_BENCH_SLOW_ROUNDS="$([[ $bench_mode == ci ]] && echo 0 || echo 3)" \
		"$venv/bin/python" -m bench --trees real --json "$results/bench-read.json" \
		--markdown "$results/bench-read.md" >"$results/bench.txt" 2>&1
	bench_outcome $? "python -m bench --trees real" $((SECONDS - start)) "${#limit[@]}" || rc=1
	# setup vs its C floor and the batched shell script, interleaved, a fresh tree per contender
	# per round; under TCG one 1000-pod round takes far longer than the CI bound allows.
	local setup_pods=$pods
	if [[ $bench_mode == ci ]]; then
		setup_pods=${CGALLOC_BENCH_SETUP_PODS:-100}
		echo "python -m bench --suites setup: $setup_pods pods, not $full (CI budget under TCG)" >>"$results/bench-cut.txt"
	fi
	start=$SECONDS
	"${limit[@]}" env CGALLOC_BENCH_REAL=1 CGALLOC_BENCH_PODS="$setup_pods" CGALLOC_BENCH_ROUNDS="$rounds" \
		"$venv/bin/python" -m bench --suites setup --json "$results/bench-setup.json" \
		--markdown "$results/bench-setup.md" >>"$results/bench.txt" 2>&1
	bench_outcome $? "python -m bench --suites setup" $((SECONDS - start)) "${#limit[@]}" || rc=1
	cd - >/dev/null || true
	# bench.txt holds both runs: the failed rows they printed, named once in the result file
	grep '^bench: FAILED row: ' "$results/bench.txt" | sed 's/^bench: FAILED row: //' >>"$results/bench-failed.txt"
	tail -n 40 "$results/bench.txt"
	# last, so the step's recorded output tail holds them
	[[ -f $results/bench-cut.txt ]] && cat "$results/bench-cut.txt"
	[[ -s $results/bench-failed.txt ]] && sed 's/^/FAILED: /' "$results/bench-failed.txt"
	return $rc
}

# bench_outcome EXIT_STATUS WHAT SECONDS BOUNDED: a bench run stopped by the CI bound (timeout's
# 124, or 137 when it had to kill) is cut, not failed; any other non-zero status is a failure —
# so is a 124/137 without a bound or before it ran out (an OOM kill also gives 137).
bench_outcome() {
	local code=$1 what=$2 took=$3 bounded=$4
	if [[ $code == 124 || $code == 137 ]] && ((bounded == 0 || took < ${CGALLOC_BENCH_TIMEOUT:-900})); then
		code="$code (killed, not by the CI bound)"
	fi
	case $code in
	0) return 0 ;;
	124 | 137)
		echo "$what: stopped after ${CGALLOC_BENCH_TIMEOUT:-900} s (CI bound)" >>"$results/bench-cut.txt"
		return 0
		;;
	*)
		echo "$what: exit $code" >>"$results/bench-failed.txt"
		return 1
		;;
	esac
}

# The boot story (issues 10 and 36): the node as an operator leaves it, with the real kubelet.
# kubelet.sh's node configuration ran `cgalloc install-unit` with its setup arguments (the
# systemd driver's adds --daemons kubelet,containerd: Slice= drop-ins into /kube.slice).
daemons=(kubelet containerd)

# Each daemon runs in /kube.slice (its main pid's cgroup).
daemons_in_slice() {
	local d pid where
	for d in "${daemons[@]}"; do
		pid=$(systemctl show -p MainPID --value "$d.service")
		[[ $pid -gt 0 ]] || { echo "$d.service is not running"; return 1; }
		where=$(grep -m1 -E '^0::|name=systemd' "/proc/$pid/cgroup" | cut -d: -f3)
		echo "$d.service (pid $pid): $where"
		[[ $where == "/kube.slice/$d.service" ]] || return 1
	done
}

reboot_check() {
	check "reboot: a new boot" "! grep -qx \"\$(cat /proc/sys/kernel/random/boot_id)\" $results/boot_id"
	# SSH answers before the boot's jobs are done: under emulation the boot unit was still
	# activating when this ran (its Result and ExecMainStatus are then the defaults). Wait for
	# the job queue to empty (running, or degraded with a failed unit: judged below).
	echo "boot: $(timeout 600 systemctl is-system-running --wait), $(cut -d. -f1 /proc/uptime) s after it began"
	# systemctl show prints properties in its own order, not the order asked for
	check "reboot: cgalloc-setup.service succeeded" \
		"out=\$(systemctl show cgalloc-setup.service -p ActiveState -p Result -p ExecMainStatus)
		 echo \"\$out\"
		 for want in ActiveState=active Result=success ExecMainStatus=0; do
		   grep -qx \$want <<<\"\$out\" || exit 1; done"
	# The kubelet is not enabled at boot in the lane (see kubelet.sh k_step2): started here,
	# after the boot unit, as its unit's After=cgalloc-setup.service would at boot.
	if [[ -s $results/kubelet-main && ! -e $results/kubelet-main-failed ]]; then
		step "reboot: the kubelet starts on the tree the boot unit made" 0 systemctl start kubelet.service
	fi
	if [[ $(cat "$results/kubelet-main" 2>/dev/null) == *-systemd ]]; then
		step "reboot: kubelet and containerd in /kube.slice after boot" 0 daemons_in_slice
	fi
	kubelet_after_reboot
}

# shellcheck source=vagrant/kubelet.sh
source "$src/vagrant/kubelet.sh"

if [[ $phase == reboot-check ]]; then
	echo "== after the reboot of $machine"
	reboot_check
	write_result passed
	rm -rf "$work"
	nfailed=$(awk -F'\t' '$2 == 0' "$steps" | wc -l)
	if [[ $nfailed -gt 0 ]]; then
		echo "PROVISION FAILED on $machine (with the reboot): $nfailed of $(wc -l <"$steps") steps failed" >&2
		exit 1
	fi
	echo "PROVISION PASSED on $machine (with the reboot): $(wc -l <"$steps") steps"
	exit 0
fi
echo "== provisioning $machine (expects cgroup $want)"
step "systemd is PID 1" 0 bash -c 'readlink /proc/1/exe | grep -q systemd'
step "cgroup hierarchy is $want" 0 bash -c "test \"$(hierarchy)\" = $want"
step "install cgalloc from $src" 0 install_cgalloc
if [[ $phase == kubelet ]]; then
	# a developer's shortcut: the kubelet's steps alone (then reload with reboot-check as usual)
	kubelet_checks
	cat /proc/sys/kernel/random/boot_id >"$results/boot_id"
	write_result awaiting-reboot
	exit 0
fi
for driver in cgroupfs systemd; do
	driver_cycle "$driver"
done
write_result benchmarking # the checks are in even if the bench is stopped
step "benchmarks ($bench_mode)" 0 run_bench
# The real kubelet's steps; its node configuration leaves the boot unit installed.
kubelet_checks
cat /proc/sys/kernel/random/boot_id >"$results/boot_id"
# "passed" only after the reboot: `vagrant reload --provision-with reboot-check`.
write_result awaiting-reboot
rm -rf "$work"
echo "PROVISIONED $machine: $(wc -l <"$steps") steps; now reboot it: vagrant reload $machine --provision-with reboot-check"
