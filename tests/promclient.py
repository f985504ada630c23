"""What the tests that run a real Prometheus share: its HTTP API, and ending a process they
started (by its handle, so by its pid)."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request


def get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def query(base: str, expr: str) -> list:
    """An instant query's result vector (the API's status checked)."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    doc = json.loads(get(url, timeout=10))
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
