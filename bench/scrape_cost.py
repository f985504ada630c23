"""``python -m bench.scrape_cost URL DURATION``: what scraping a metrics endpoint costs, for the
VM comparison of ``cgalloc exporter`` with the kubelet's ``/metrics/cadvisor`` and
``/metrics/resource`` (issue 38), taken the same way for both.

  python -m bench.scrape_cost http://127.0.0.1:9847/metrics 5m --interval 10 --pid PID
  python -m bench.scrape_cost https://127.0.0.1:10250/metrics/cadvisor 5m --interval 10 \\
      --pid $(pidof kubelet) --bearer-token-file /tmp/token --insecure
  python -m bench.scrape_cost - 5m --pid $(pidof kubelet)      # no scrapes: housekeeping only

Scrapes URL every --interval seconds for DURATION (a Go duration or seconds) and prints, as
JSON: the scrapes' wall latency (median, min, max), the bytes and series of the last one, and
with --pid the target process's CPU (utime + stime from /proc/PID/stat) over the run: in
total, per second, and per scrape. Run it once with the URL "-" (no scrapes) to get the
steady housekeeping CPU to subtract: the kubelet's cAdvisor works between scrapes, the
exporter does not. The target's own ``process_cpu_seconds_total`` is read before and after
when it serves one (the exporter does; /metrics/cadvisor does not), as a second opinion.
Only requests to URL are made; stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import sys
import time
import urllib.request


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        from cgalloc.inputs.validate import parse_duration

        return parse_duration(text) / 1e9


def _ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _fetch(url: str, headers: dict, context) -> bytes:
    req = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(req, timeout=60, context=context) as resp:
        return resp.read()


def _own_cpu(body: bytes) -> float | None:
    for line in body.split(b"\n"):
        if line.startswith(b"process_cpu_seconds_total "):
            return float(line.split()[1])
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scrape_cost", description=__doc__)
    ap.add_argument("url", help='the metrics URL, or "-" for no scrapes')
    ap.add_argument("duration", help="how long: seconds or a Go duration (5m)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between scrapes")
    ap.add_argument("--pid", type=int, help="the serving process, for its CPU")
    ap.add_argument("--bearer-token-file", help="send its content as a bearer token")
    ap.add_argument("--insecure", action="store_true", help="skip TLS verification")
    args = ap.parse_args(argv)
    total = _seconds(args.duration)
    headers = {}
    if args.bearer_token_file:
        with open(args.bearer_token_file) as f:
            headers["Authorization"] = f"Bearer {f.read().strip()}"
    context = None
    if args.insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    tick = os.sysconf("SC_CLK_TCK")
    scrape = args.url != "-"
    first = _fetch(args.url, headers, context) if scrape else b""
    own0 = _own_cpu(first)
    ticks0 = _ticks(args.pid) if args.pid else None
    start = time.monotonic()
    latencies: list[float] = []
    body = first
    while time.monotonic() - start < total:
        if scrape:
            t0 = time.monotonic()
            body = _fetch(args.url, headers, context)
            latencies.append(time.monotonic() - t0)
        time.sleep(max(args.interval - (time.monotonic() - start) % args.interval, 0.0))
    elapsed = time.monotonic() - start
    out: dict = {"url": args.url, "seconds": round(elapsed, 3), "scrapes": len(latencies)}
    if latencies:
        out["latency_s"] = {"median": statistics.median(latencies), "min": min(latencies),
                            "max": max(latencies)}  # fmt: skip
        out["bytes"] = len(body)
        out["series"] = sum(1 for ln in body.split(b"\n") if ln and not ln.startswith(b"#"))
    if args.pid:
        cpu = (_ticks(args.pid) - ticks0) / tick
        out["cpu_s"] = cpu
        out["cpu_per_s"] = cpu / elapsed
        if latencies:
            out["cpu_per_scrape_s"] = cpu / len(latencies)
    own1 = _own_cpu(body)
    if own0 is not None and own1 is not None and latencies:
        out["own_process_cpu_per_scrape_s"] = (own1 - own0) / len(latencies)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
