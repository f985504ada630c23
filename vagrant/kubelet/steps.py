"""The real-kubelet steps' helpers, run in the guest by vagrant/kubelet.sh (python3, stdlib only).

    steps.py image OUT.tar REPO:TAG ENTRY... --file SRC=DEST ... [--link NAME=TARGET ...]
    steps.py pods [--want NAME ...] [--timeout S]   wait for the kubelet's pods to run
    steps.py compare-pods SHOW.json v1|v2 [--cgroupfs DIR]
    steps.py summary-vs-stats OUT_DIR -- CGALLOC_STATS_COMMAND...
    steps.py compare-summary SUMMARY.json STATS.json
    steps.py cost OUT.json --window S --rounds N [--exporter URL --exporter-pid PID] \
        -- CGALLOC_STATS_COMMAND...
    steps.py recommend-covers RECOMMEND.json --load-mib N --kernel-peak BYTES [--min-seconds S]

The kubelet's view comes from its read-only port (10255 on loopback): /pods, /stats/summary,
/metrics/cadvisor and /metrics/resource.
Every command prints its evidence and exits 1 when the kubelet and cgalloc disagree.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import resource
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from pathlib import Path

PORT = "http://127.0.0.1:10255"
CG = "/sys/fs/cgroup"
V1_UNLIMITED = "9223372036854771712"  # a v1 limit file's "max": LONG_MAX rounded to a page
# cgroup v1 pod files the kubelet writes, by the controller directory that holds them.
V1_CONTROLLERS = {"cpu": "cpu,cpuacct", "memory": "memory", "pids": "pids", "hugetlb": "hugetlb"}
HUGE_SIZES = {"2MB": "hugepages-2Mi", "1GB": "hugepages-1Gi"}
BINARY = {
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "k": 1000,
    "M": 10**6,
    "G": 10**9,
}


def get(path: str, timeout: float = 180) -> bytes:
    with urllib.request.urlopen(PORT + path, timeout=timeout) as r:
        return r.read()


# ---- images (no registry): a docker-archive tarball `ctr images import` takes --------------


def image(out: str, tag: str, entry: list[str], files: list[str], links: list[str]) -> None:
    """One-layer image: FILES (SRC=DEST, executable) and LINKS (NAME=TARGET) below /."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.USTAR_FORMAT) as t:
        dirs = sorted(
            {
                str(Path(d))
                for spec in files + links
                for d in Path(spec.split("=")[1].lstrip("/")).parents
                if str(d) != "."
            }
        )
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            t.addfile(info)
        for spec in files:
            src, dest = spec.split("=", 1)
            data = Path(src).read_bytes()
            info = tarfile.TarInfo(dest.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            t.addfile(info, io.BytesIO(data))
        for spec in links:
            name, target = spec.split("=", 1)
            info = tarfile.TarInfo(name.lstrip("/"))
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, 0
            t.addfile(info)
    layer_bytes = layer.getvalue()
    diff_id = hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entry, "Env": ["PATH=/bin:/usr/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "cgalloc vagrant/kubelet/steps.py image"}],
    }
    config_bytes = json.dumps(config).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": [f"{diff_id}/layer.tar"]}]
    with tarfile.open(out, "w") as t:
        for name, data in (
            (f"{diff_id}/layer.tar", layer_bytes),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            t.addfile(info, io.BytesIO(data))
    print(f"image {tag}: layer sha256:{diff_id} ({len(layer_bytes)} bytes) -> {out}")


# ---- the kubelet's pods ----------------------------------------------------------------------


def pod_states(doc: dict) -> dict[str, dict]:
    """name -> {uid, phase, ready, restarts, reasons} from the kubelet's /pods."""
    out = {}
    for p in doc.get("items") or []:
        st = p.get("status", {})
        cs = st.get("containerStatuses") or []
        reasons = []
        for c in cs + (st.get("initContainerStatuses") or []):
            for key in ("state", "lastState"):
                for kind, v in (c.get(key) or {}).items():
                    if v.get("reason"):
                        reasons.append(f"{c['name']}.{key}.{kind}: {v['reason']}")
        out[p["metadata"]["name"]] = {
            "uid": p["metadata"].get("uid"),
            "phase": st.get("phase"),
            "ready": bool(cs) and all(c.get("ready") for c in cs),
            "restarts": sum(c.get("restartCount", 0) for c in cs),
            "reasons": reasons,
        }
    return out


def _named(states: dict[str, dict], prefix: str) -> list[dict]:
    """The pods a manifest name stands for: the kubelet names a static pod NAME-<node>."""
    return [s for n, s in states.items() if n == prefix or n.startswith(prefix + "-")]


def wait_pods(want: list[str], gone: list[str], timeout: float) -> int:
    """Wait until every pod named in ``want`` (a prefix of the kubelet's name, which adds
    -<node>) runs with its containers ready and none in ``gone`` is listed."""
    deadline = time.time() + timeout
    states: dict[str, dict] = {}
    while True:
        try:
            states = pod_states(json.loads(get("/pods", timeout=20)))
            err = ""
        except OSError as e:
            err = str(e)

        ok = all(
            any(s["phase"] == "Running" and s["ready"] for s in _named(states, w)) for w in want
        )
        ok = ok and not any(_named(states, g) for g in gone) and not err
        if ok or time.time() > deadline:
            break
        time.sleep(2)
    for name, s in sorted(states.items()):
        print(
            f"{name}: uid {s['uid']} {s['phase']} ready={s['ready']} restarts={s['restarts']} "
            + " ".join(s["reasons"])
        )
    if err:
        print(f"/pods: {err}")
    print(f"{'all' if ok else 'NOT all'} of {want} running; gone: {gone}")
    return 0 if ok else 1


# ---- step 4: each pod cgroup's files against `cgalloc show --pods -o json` ------------------


def quantity(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]i|[kMG])?", str(text))
    if not m:
        raise ValueError(f"quantity {text!r}")
    return int(m.group(1)) * BINARY.get(m.group(2) or "", 1)


def shares_to_weight(shares: int) -> int:
    """The kubelet 1.20 (runc rc92) conversion of cpu.shares to cgroup v2 cpu.weight."""
    return 1 + ((shares - 2) * 9999) // 262142


def _limit(entry: dict, *names: str) -> str | None:
    """A prediction by any of ``names`` at the entry's top level or under "limits"."""
    for where in (entry, entry.get("limits") or {}):
        for n in names:
            if n in where:
                return str(where[n])
    return None


def expected_files(entry: dict, hierarchy: str) -> dict[str, str | None]:
    """What `show` predicts for each file the kubelet writes to this pod cgroup, named as the
    kernel names them (v1 "controller/file", v2 "file"); None where show predicts nothing.
    A "files" map in the entry (file -> value) is taken as it is."""
    if isinstance(entry.get("files"), dict):
        return {k: str(v) for k, v in entry["files"].items()}
    v2 = hierarchy == "v2"
    out: dict[str, str | None] = {}
    shares = int(entry["cpuShares"])
    quota, _, period = str(entry.get("cpuQuota", "-")).partition("/")
    period = period or "100000"
    no_quota = quota in ("-", "max", "-1")
    memory = str(entry.get("memory", "-"))
    pids = _limit(entry, "pid", "pids", "podPidsLimit")
    if v2:
        out["cpu.weight"] = str(shares_to_weight(shares))
        out["cpu.max"] = f"{'max' if no_quota else quota} {period}"
        out["memory.max"] = "max" if memory in ("-", "max") else str(quantity(memory))
        out["pids.max"] = None if pids is None else ("max" if pids in ("-1", "max", "-") else pids)
    else:
        out["cpu/cpu.shares"] = str(shares)
        out["cpu/cpu.cfs_quota_us"] = "-1" if no_quota else quota
        if not no_quota:
            out["cpu/cpu.cfs_period_us"] = period
        out["memory/memory.limit_in_bytes"] = (
            V1_UNLIMITED if memory in ("-", "max") else str(quantity(memory))
        )
        out["pids/pids.max"] = (
            None if pids is None else ("max" if pids in ("-1", "max", "-") else pids)
        )
    for size, resource_name in HUGE_SIZES.items():
        value = _limit(entry, resource_name)
        key = f"hugetlb.{size}.max" if v2 else f"hugetlb/hugetlb.{size}.limit_in_bytes"
        out[key] = None if value is None else str(quantity(value))
    return out


def read_files(
    cgroup: str, names: list[str], hierarchy: str, root: str = CG
) -> dict[str, str | None]:
    """Each file's first line (None when absent) below the pod cgroup ``cgroup``."""
    out: dict[str, str | None] = {}
    for name in names:
        if hierarchy == "v2":
            path = Path(root, cgroup.lstrip("/"), name)
        else:
            ctl, _, file = name.partition("/")
            path = Path(root, V1_CONTROLLERS[ctl], cgroup.lstrip("/"), file)
        try:
            out[name] = path.read_text().strip()
        except OSError:
            out[name] = None
    return out


def compare_pods(show: dict, hierarchy: str, root: str = CG) -> tuple[list[str], int]:
    """Lines of evidence (pod, file, show, kubelet, verdict) and the number of differences."""
    lines, bad = [], 0
    pods = show.get("pods") or []
    if not pods:
        return ["show -o json lists no pods"], 1
    for entry in pods:
        cgroup = entry["cgroup"]
        base = (
            Path(root, cgroup.lstrip("/"))
            if hierarchy == "v2"
            else Path(root, "memory", cgroup.lstrip("/"))
        )
        if not base.is_dir():
            lines.append(
                f"{entry['pod']}: no pod cgroup at {cgroup} (the kubelet put it elsewhere)"
            )
            bad += 1
            continue
        want = expected_files(entry, hierarchy)
        got = read_files(cgroup, sorted(want), hierarchy, root)
        for name in sorted(want):
            w, g = want[name], got[name]
            if g is None and w in (None, "0", "max", V1_UNLIMITED):
                verdict = "absent (not written)"
            elif w is None:
                verdict, bad = "DIFFERS: show predicts nothing", bad + 1
            elif g == w:
                verdict = "same"
            else:
                verdict, bad = "DIFFERS", bad + 1
            lines.append(
                f"{entry['pod']} {entry['qos']} {cgroup} {name}: show {w} kubelet {g}: {verdict}"
            )
    return lines, bad


# ---- step 5: /stats/summary and `cgalloc stats -o json` at the same moment -------------------


def summary_vs_stats(out_dir: str, command: list[str]) -> int:
    """Read the kubelet's summary and run cgalloc stats together (two threads started at once),
    save both with their wall-clock times, then compare."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    got: dict[str, object] = {}

    def kubelet() -> None:
        t0 = time.time()
        got["summary"] = get("/stats/summary")
        got["summary_t"] = (t0, time.time())

    def cgalloc() -> None:
        t0 = time.time()
        r = subprocess.run(command, capture_output=True)
        got["stats"], got["stats_err"], got["stats_rc"] = r.stdout, r.stderr, r.returncode
        got["stats_t"] = (t0, time.time())

    threads = [threading.Thread(target=f) for f in (kubelet, cgalloc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (out / "summary.json").write_bytes(got["summary"])
    (out / "stats.json").write_bytes(got["stats"])
    print(
        f"kubelet /stats/summary read {got['summary_t'][0]:.2f}-{got['summary_t'][1]:.2f}; "
        f"cgalloc stats ran {got['stats_t'][0]:.2f}-{got['stats_t'][1]:.2f} "
        f"(exit {got['stats_rc']})"
    )
    if got["stats_rc"] != 0:
        print(got["stats_err"].decode(errors="replace"))
        return 1
    lines, bad = compare_summary(json.loads(got["summary"]), json.loads(got["stats"]))
    print("\n".join(lines))
    return 1 if bad else 0


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not m:
        return None
    base = time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) - time.timezone
    if m.group(3) != "Z":
        sign = 1 if m.group(3)[0] == "+" else -1
        base -= sign * (int(m.group(3)[1:3]) * 3600 + int(m.group(3)[4:6]) * 60)
    return base + float(m.group(2) or 0)


# Tolerances (stated in the results and the README):
# - usageCoreNanoSeconds is a cumulative counter, read by each side at its own moment: the
#   kubelet's from cAdvisor's last housekeeping sample or at the request (its "time"), cgalloc's
#   when it ran. Between the two moments the counter cannot run backwards, nor faster than
#   every CPU of the node: cgalloc's value must lie in kubelet's value + [-(kubelet's time -
#   cgalloc's time), +(cgalloc's time - kubelet's time)] x CPUs (the negative part taken as 0),
#   widened by 2 s x CPUs for the whole-second times and the seconds a request takes under
#   emulation.
# - workingSetBytes is a gauge: on quiet pods (a sleeping busybox) it moves by a few pages;
#   pods within 1 MiB or 2 %, the node and system containers (the kubelet and cgalloc themselves
#   allocate while the sample is taken) within 32 MiB or 5 %.
CPU_SLACK_S = 2.0
POD_MEM = (1 << 20, 0.02)
NODE_MEM = (32 << 20, 0.05)


def _cpu_ok(k: dict, c: dict, cpus: int) -> tuple[bool, str]:
    kv, cv = k.get("usageCoreNanoSeconds"), c.get("usageCoreNanoSeconds")
    if kv is None or cv is None:
        return False, f"usageCoreNanoSeconds kubelet {kv} cgalloc {cv}"
    kt, ct = _ts(k.get("time")), _ts(c.get("time"))
    dt = (ct - kt) if kt is not None and ct is not None else 15.0
    lo = kv - (max(-dt, 0) + CPU_SLACK_S) * cpus * 1e9
    hi = kv + (max(dt, 0) + CPU_SLACK_S) * cpus * 1e9
    return lo <= cv <= hi, (
        f"usageCoreNanoSeconds kubelet {kv} cgalloc {cv} ({(cv - kv) / 1e6:+.1f} ms, cgalloc's "
        f"time {dt:+.0f} s from the kubelet's; "
        f"allowed {(lo - kv) / 1e6:.0f}..{(hi - kv) / 1e6:.0f} ms)"
    )


def _mem_ok(k: dict, c: dict, tol: tuple[int, float]) -> tuple[bool, str]:
    kv, cv = k.get("workingSetBytes"), c.get("workingSetBytes")
    if kv is None or cv is None:
        return False, f"workingSetBytes kubelet {kv} cgalloc {cv}"
    allowed = max(tol[0], tol[1] * kv)
    return abs(cv - kv) <= allowed, (
        f"workingSetBytes kubelet {kv} cgalloc {cv} (diff {cv - kv}, allowed ±{int(allowed)})"
    )


def _check(lines: list[str], what: str, ok: bool, text: str) -> int:
    lines.append(f"{'same' if ok else 'DIFFERS'}: {what}: {text}")
    return 0 if ok else 1


def _usage(lines: list[str], label: str, k: dict, c: dict, cpus: int, mem: tuple) -> int:
    """cpu and memory of one container (node, system container, pod) in both documents."""
    bad = _check(lines, f"{label} cpu", *_cpu_ok(k.get("cpu", {}), c.get("cpu", {}), cpus))
    return bad + _check(
        lines, f"{label} memory", *_mem_ok(k.get("memory", {}), c.get("memory", {}), mem)
    )


def compare_summary(k: dict, c: dict, cpus: int | None = None) -> tuple[list[str], int]:
    """Evidence lines and the number of differences between the kubelet's summary ``k`` and
    cgalloc's ``c``: same node, system containers, pods (uid, name, namespace), each pod's
    containers, node.fs and node.runtime.imageFs, values within the tolerances above."""
    cpus = cpus or os.cpu_count() or 1
    lines: list[str] = []
    bad = 0
    kn, cn = k.get("node", {}), c.get("node", {})
    bad += _check(
        lines,
        "node.nodeName",
        kn.get("nodeName") == cn.get("nodeName"),
        f"kubelet {kn.get('nodeName')} cgalloc {cn.get('nodeName')}",
    )
    for key in ("cpu", "memory", "network", "rlimit", "fs"):
        bad += _check(
            lines, f"node.{key} present", key in cn, f"kubelet {key in kn} cgalloc {key in cn}"
        )
    bad += _check(
        lines,
        "node.runtime.imageFs present",
        "imageFs" in (cn.get("runtime") or {}),
        f"kubelet {'imageFs' in (kn.get('runtime') or {})} "
        f"cgalloc {'imageFs' in (cn.get('runtime') or {})}",
    )
    if "cpu" in cn:
        bad += _check(lines, "node.cpu", *_cpu_ok(kn["cpu"], cn["cpu"], cpus))
    if "memory" in cn:
        bad += _check(lines, "node.memory", *_mem_ok(kn["memory"], cn["memory"], NODE_MEM))
    if "rlimit" in cn:
        km, cm = kn.get("rlimit", {}).get("maxpid"), cn["rlimit"].get("maxpid")
        bad += _check(lines, "node.rlimit.maxpid", km == cm, f"kubelet {km} cgalloc {cm}")
    if "fs" in cn:
        for f in ("capacityBytes", "inodes"):
            kv, cv = kn["fs"].get(f), cn["fs"].get(f)
            bad += _check(lines, f"node.fs.{f}", kv == cv, f"kubelet {kv} cgalloc {cv}")
    ks = {s["name"]: s for s in kn.get("systemContainers") or []}
    cs = {s["name"]: s for s in cn.get("systemContainers") or []}
    bad += _check(
        lines,
        "node.systemContainers names",
        set(ks) == set(cs),
        f"kubelet {sorted(ks)} cgalloc {sorted(cs)}",
    )
    for name in sorted(set(ks) & set(cs)):
        bad += _usage(lines, f"systemContainer {name}", ks[name], cs[name], cpus, NODE_MEM)
    kp = {p["podRef"]["uid"]: p for p in k.get("pods") or []}
    cp = {p.get("podRef", {}).get("uid"): p for p in c.get("pods") or []}
    bad += _check(
        lines, "pods (uids)", set(kp) == set(cp), f"kubelet {sorted(kp)} cgalloc {sorted(cp)}"
    )
    for uid in sorted(set(kp) & set(cp)):
        kpod, cpod = kp[uid], cp[uid]
        label = f"pod {kpod['podRef'].get('namespace')}/{kpod['podRef'].get('name')}"
        for f in ("name", "namespace"):
            kv, cv = kpod["podRef"].get(f), cpod["podRef"].get(f)
            bad += _check(lines, f"{label} podRef.{f}", kv == cv, f"kubelet {kv} cgalloc {cv}")
        kcs = {x["name"]: x for x in kpod.get("containers") or []}
        ccs = {x.get("name"): x for x in cpod.get("containers") or []}
        bad += _check(
            lines,
            f"{label} containers",
            sorted(kcs) == sorted(ccs),
            f"kubelet {sorted(kcs)} cgalloc {sorted(ccs)}",
        )
        bad += _usage(lines, label, kpod, cpod, cpus, POD_MEM)
        for name in sorted(set(kcs) & set(ccs)):
            bad += _usage(lines, f"{label} container {name}", kcs[name], ccs[name], cpus, POD_MEM)
    lines.append(f"{bad} differences")
    return lines, bad


# ---- step 10: what reading costs the kubelet and cgalloc --------------------------------------


def _proc_cpu(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads) in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_measured(command: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), rc


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _scrape(url: str, pid: int, background: float) -> tuple[float, float, int]:
    """(wall s, CPU s of the serving process ``pid`` beyond its ``background`` rate, series)
    of one GET of a Prometheus endpoint."""
    c0, t0 = _proc_cpu(pid), time.monotonic()
    with urllib.request.urlopen(url, timeout=180) as r:
        body = r.read()
    dt = time.monotonic() - t0
    series = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
    return dt, max(_proc_cpu(pid) - c0 - background * dt, 0.0), series


def _wait_up(url: str, timeout: float) -> None:
    """Until ``url`` answers (the exporter's first imports take seconds under emulation)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                r.read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


# The kubelet's own Prometheus endpoints for the same pods (its read-only port serves both).
KUBELET_METRICS = ("/metrics/cadvisor", "/metrics/resource")


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


def cost(
    out: str,
    kubelet_pid: int,
    window: int,
    interval: int,
    rounds: int,
    command: list[str],
    exporter: str | None = None,
    exporter_pid: int | None = None,
) -> int:
    """The kubelet's CPU over ``window`` seconds beside `cgalloc stats --watch interval` over
    the same window (and `cgalloc exporter`'s, unscraped, when given), then ``rounds``
    interleaved rounds of one /stats/summary request and one `cgalloc stats -o json`, and
    with the exporter one scrape each of /metrics/cadvisor, /metrics/resource and the
    exporter's /metrics. Ratios, reported with no verdict (emulated CPU)."""
    pods = len(json.loads(get("/pods")).get("items") or [])
    count = window // interval + 1  # samples: the first at 0, then one every interval
    watch = [*command, "--watch", str(interval), "--count", str(count)]
    if exporter and exporter_pid:
        _wait_up(exporter, 300)
    k0 = _proc_cpu(kubelet_pid)
    e0 = _proc_cpu(exporter_pid) if exporter_pid else 0.0
    wall, cg_cpu, rc = _run_measured(watch)
    k1 = _proc_cpu(kubelet_pid)
    e1 = _proc_cpu(exporter_pid) if exporter_pid else 0.0
    kubelet_window = k1 - k0
    doc: dict[str, object] = {
        "pods": pods,
        "window_s": round(wall, 2),
        "interval_s": interval,
        "kubelet_cpu_s": round(kubelet_window, 3),
        "cgalloc_watch_cpu_s": round(cg_cpu, 3),
        "cgalloc_watch_exit": rc,
        "watch_ratio": _ratio(cg_cpu, kubelet_window),
    }
    background = kubelet_window / wall if wall else 0.0  # the kubelet's CPU per second anyway
    e_background = (e1 - e0) / wall if wall else 0.0
    req_wall, req_cpu, one_wall, one_cpu = [], [], [], []
    scrapes: dict[str, list[tuple[float, float, int]]] = {}
    for _ in range(rounds):
        if exporter and exporter_pid:
            for path in KUBELET_METRICS:
                scrapes.setdefault(path, []).append(_scrape(PORT + path, kubelet_pid, background))
            scrapes.setdefault("exporter", []).append(_scrape(exporter, exporter_pid, e_background))
        c0, t0 = _proc_cpu(kubelet_pid), time.monotonic()
        get("/stats/summary")
        dt = time.monotonic() - t0
        req_wall.append(dt)
        req_cpu.append(max(_proc_cpu(kubelet_pid) - c0 - background * dt, 0.0))
        w, c, rc1 = _run_measured([*command, "--interval", "0"])
        one_wall.append(w)
        one_cpu.append(c)
        rc = rc or rc1
    doc.update(
        {
            "rounds": rounds,
            "summary_wall_s": [round(x, 4) for x in req_wall],
            "summary_kubelet_cpu_s": [round(x, 4) for x in req_cpu],
            "stats_json_wall_s": [round(x, 4) for x in one_wall],
            "stats_json_cpu_s": [round(x, 4) for x in one_cpu],
        }
    )
    mk, mc = _median(req_cpu), _median(one_cpu)
    doc["one_read_wall_ratio"] = round(_median(one_wall) / _median(req_wall), 2)
    doc["one_read_cpu_ratio"] = round(mc / mk, 2) if mk > 0 else None
    lines = _scrape_costs(doc, scrapes, kubelet_window, e1 - e0, wall)
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    print(
        f"{pods} pods; over {wall:.1f} s the kubelet used {kubelet_window:.2f} s of CPU, "
        f"cgalloc stats --watch {interval} ({count} samples) {cg_cpu:.2f} s: "
        f"ratio {doc['watch_ratio']} (cgalloc/kubelet)"
    )
    print(
        f"one read, medians of {rounds} interleaved: "
        f"/stats/summary {_median(req_wall) * 1000:.0f} ms "
        f"wall, {mk * 1000:.0f} ms of the kubelet's CPU (its background rate taken out); "
        f"cgalloc stats -o json {_median(one_wall) * 1000:.0f} ms wall, {mc * 1000:.0f} ms CPU; "
        f"ratios wall {doc['one_read_wall_ratio']}, CPU {doc['one_read_cpu_ratio']} "
        "(emulated CPU: reported, no verdict)"
    )
    print("\n".join(lines))
    return 1 if rc else 0


def _scrape_costs(
    doc: dict[str, object],
    scrapes: dict[str, list[tuple[float, float, int]]],
    kubelet_window: float,
    exporter_window: float,
    wall: float,
) -> list[str]:
    """The scrape rounds into ``doc`` and the lines that report them: each endpoint's median
    wall, CPU and series, and the exporter's CPU per scrape against each kubelet endpoint's."""
    if not scrapes:
        return []
    lines = [f"Prometheus scrapes, medians of {len(scrapes['exporter'])} interleaved rounds:"]
    med: dict[str, float] = {}
    for name, runs in scrapes.items():
        walls, cpus, series = zip(*runs, strict=True)
        med[name] = _median(list(cpus))
        doc[f"scrape {name}"] = {
            "wall_s": [round(x, 4) for x in walls],
            "cpu_s": [round(x, 4) for x in cpus],
            "series": series[-1],
        }
        who = "the exporter's" if name == "exporter" else "the kubelet's"
        lines.append(
            f"  {name}: {_median(list(walls)) * 1000:.0f} ms wall, {med[name] * 1000:.0f} ms of "
            f"{who} CPU, {series[-1]} series"
        )
    for path in KUBELET_METRICS:
        doc[f"exporter_scrape_cpu_ratio {path}"] = _ratio(med["exporter"], med[path])
        lines.append(
            f"  CPU per scrape, the exporter's / the kubelet's {path}: "
            f"{doc[f'exporter_scrape_cpu_ratio {path}']}"
        )
    doc["exporter_idle_cpu_s"] = round(exporter_window, 3)
    doc["exporter_idle_vs_kubelet_ratio"] = _ratio(exporter_window, kubelet_window)
    lines.append(
        f"  steady, unscraped, over the same {wall:.1f} s: the exporter used "
        f"{exporter_window:.2f} s of CPU, the kubelet (its housekeeping) {kubelet_window:.2f} s: "
        f"ratio {doc['exporter_idle_vs_kubelet_ratio']}"
    )
    return lines


# ---- step 12: `cgalloc recommend -o json` of the window step 11 recorded --------------------


def cores(text: str) -> float:
    """A CPU quantity as recommend prints it (``360m``, ``2``) in cores."""
    m = re.fullmatch(r"(\d+)(m?)", str(text))
    if not m:
        raise ValueError(f"cpu quantity {text!r}")
    return int(m.group(1)) / (1000 if m.group(2) else 1)


def recommend_covers(
    doc: dict, load_bytes: int, kernel_peak: int, min_seconds: float = 290
) -> tuple[list[str], int]:
    """Whether the recommendation covers what the window measured: each reservation's memory at
    least the largest working set seen and its pids at least the most tasks seen, its CPU at
    least the percentile's rate; the load made in kube-reserved seen by the recorder and by the
    kernel; a window as long as asked; the vendors' formulas beside it."""
    lines: list[str] = []
    bad = 0

    def check(ok: bool, text: str) -> None:
        nonlocal bad
        lines.append(f"{'ok' if ok else 'NOT'}: {text}")
        bad += not ok

    w = doc["window"]
    check(
        w["seconds"] >= min_seconds and w["samples"] >= 30,
        f"window {w['seconds']} s, {w['samples']} samples (at least {min_seconds} s and 30)",
    )
    rec = doc["recommendation"]
    for role, key in (("kube", "kubeReserved"), ("system", "systemReserved")):
        m, r = doc["measured"].get(role), rec.get(key, {})
        if m is None:
            check(False, f"{role}: nothing measured")
            continue
        memory = quantity(r.get("memory", "0"))
        check(
            memory >= m["memoryWorkingSetPeak"],
            f"{key} memory {r.get('memory')} = {memory} >= the largest working set seen "
            f"{m['memoryWorkingSetPeak']} (sources {', '.join(m['sources'])})",
        )
        if m.get("pidsPeak") is not None and "pid" in r:
            check(
                int(r["pid"]) >= m["pidsPeak"],
                f"{key} pid {r['pid']} >= {m['pidsPeak']} tasks seen",
            )
        if m.get("cpuCoresAtPercentile") is not None:
            cpu = cores(r.get("cpu", "0"))
            check(
                cpu >= m["cpuCoresAtPercentile"],
                f"{key} cpu {r.get('cpu')} >= {m['cpuCoresAtPercentile']:.3f} cores at the "
                f"percentile (peak {m['cpuCoresPeak']:.3f})",
            )
    kube_peak = doc["measured"].get("kube", {}).get("memoryWorkingSetPeak", 0)
    check(
        kube_peak >= load_bytes,
        f"the recorder saw the load: kube-reserved's largest working set {kube_peak} >= "
        f"{load_bytes}",
    )
    check(
        kernel_peak >= load_bytes,
        f"the kernel's own high-water mark of kube-reserved {kernel_peak} >= {load_bytes} "
        f"(recommended {rec.get('kubeReserved', {}).get('memory')})",
    )
    names = [row["name"] for row in doc.get("compared", [])]
    check(
        names[:2] == ["configured", "recommended"] and len(names) >= 6,
        f"side by side: {', '.join(names)}",
    )
    return lines, bad


def main(argv: list[str]) -> int:
    command: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(prog="steps.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("image")
    p.add_argument("out")
    p.add_argument("tag")
    p.add_argument("entry", nargs="+")
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--link", action="append", default=[])
    p = sub.add_parser("pods")
    p.add_argument("--want", action="append", default=[])
    p.add_argument("--gone", action="append", default=[])
    p.add_argument("--timeout", type=float, default=300)
    p = sub.add_parser("compare-pods")
    p.add_argument("show")
    p.add_argument("hierarchy", choices=["v1", "v2"])
    p.add_argument("--cgroupfs", default=CG)
    p = sub.add_parser("summary-vs-stats")
    p.add_argument("out_dir")
    p = sub.add_parser("compare-summary")
    p.add_argument("summary")
    p.add_argument("stats")
    p = sub.add_parser("cost")
    p.add_argument("out")
    p.add_argument("--kubelet-pid", type=int, required=True)
    p.add_argument("--window", type=int, default=60)
    p.add_argument("--interval", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--exporter", help="the exporter's /metrics URL")
    p.add_argument("--exporter-pid", type=int)
    p = sub.add_parser("recommend-covers")
    p.add_argument("doc")
    p.add_argument("--load-mib", type=int, required=True)
    p.add_argument("--kernel-peak", type=int, required=True)
    p.add_argument("--min-seconds", type=float, default=290)
    a = ap.parse_args(argv)
    if a.cmd == "cost" and (a.exporter is None) != (a.exporter_pid is None):
        ap.error("cost: --exporter and --exporter-pid go together")
    if a.cmd == "image":
        image(a.out, a.tag, a.entry, a.file, a.link)
        return 0
    if a.cmd == "pods":
        return wait_pods(a.want, a.gone, a.timeout)
    if a.cmd == "compare-pods":
        lines, bad = compare_pods(json.loads(Path(a.show).read_text()), a.hierarchy, a.cgroupfs)
        print("\n".join(lines))
        print(f"{bad} differences")
        return 1 if bad else 0
    if a.cmd == "summary-vs-stats":
        return summary_vs_stats(a.out_dir, command)
    if a.cmd == "compare-summary":
        lines, bad = compare_summary(
            json.loads(Path(a.summary).read_text()), json.loads(Path(a.stats).read_text())
        )
        print("\n".join(lines))
        return 1 if bad else 0
    if a.cmd == "recommend-covers":
        lines, bad = recommend_covers(
            json.loads(Path(a.doc).read_text()), a.load_mib << 20, a.kernel_peak, a.min_seconds
        )
        print("\n".join(lines))
        return 1 if bad else 0
    return cost(
        a.out, a.kubelet_pid, a.window, a.interval, a.rounds, command, a.exporter, a.exporter_pid
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
