"""Runs inside the v2-systemd qemu lane (``tests/deploy/test_ansible_role.py`` boots it): the
Ansible role against the VM itself, ``ansible-playbook -c local``, four times:

1. apply: installs cgalloc from the wheelhouse, writes setup.conf and the boot unit, finds drift
   and applies the tree through cgalloc-setup.service, verifies;
2. apply again: no task reports a change;
3. ``--check``: no change reported, nothing written;
4. ``--check`` with other setup arguments: the plan is shown (changes reported), and neither
   setup.conf nor the tree changes.

As it goes, prints each task's line (``ROLE <run> +<seconds>s ...``) and each run's end
(``ROLE-RUN``); last, one line ``ROLE-RESULT <json>`` with what each run reported and what the
node holds.
Usage: python role_in_vm.py WHEELHOUSE
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
SITE = CHECKOUT / "deploy/ansible/site.yml"
VENV = "/opt/cgalloc"
CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
kubeReserved: {memory: 150Mi}
kubeReservedCgroup: /kube.slice
enforceNodeAllocatable: [pods, kube-reserved]
evictionHard: {memory.available: 1Mi}
"""
PROGRESS = ("TASK [", "ok:", "changed:", "skipping:", "fatal:", "PLAY RECAP")
RECAP = re.compile(r"^localhost\s*:\s*(.*)$", re.M)


def playbook(wheelhouse: str, config: str, *extra: str, reserved: str = "150Mi") -> dict:
    args = ["--config", config, "--kube-reserved", f"memory={reserved}"]
    variables = {
        "cgalloc_hosts": "localhost",
        "cgalloc_python": sys.executable,
        "cgalloc_venv": VENV,
        "cgalloc_wheelhouse": wheelhouse,
        "cgalloc_setup_args": args,
        "ansible_python_interpreter": sys.executable,
    }
    env = {
        **os.environ,
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_LOCAL_TEMP": tempfile.mkdtemp(prefix="ansible-"),
    }
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local"]
    argv += ["-i", "localhost,", str(SITE), "-e", json.dumps(variables), *extra]
    started = time.monotonic()
    name = " ".join(extra) or "apply"
    lines = []
    # each task and its outcome on the console as it comes, with the seconds since the run
    # began, so a run the VM's timeout cuts short shows where it was
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(PROGRESS):
                elapsed = time.monotonic() - started
                print(f"ROLE {name} +{elapsed:.0f}s {line.rstrip()[:160]}", flush=True)
    out = "".join(lines)
    seconds = round(time.monotonic() - started)
    recap = RECAP.findall(out)
    counts = dict(kv.split("=") for kv in recap[-1].split()) if recap else {}
    print(f"ROLE-RUN {name}: rc {proc.returncode}, {seconds} s", flush=True)
    return {
        "seconds": seconds,
        "rc": proc.returncode,
        "recap": {k: int(v) for k, v in counts.items()},
        "changedTasks": _changed_tasks(out),
        "tail": out[-5000:],
        "planShown": "dry run:" in out and "changes planned" in out,
    }


def _changed_tasks(out: str) -> list[str]:
    tasks, current = [], None
    for line in out.splitlines():
        match = re.match(r"^TASK \[(?:cgalloc : )?(.*)\]", line)
        if match:
            current = match.group(1)
        elif line.startswith("changed:") and current:
            tasks.append(current)
    return tasks


def snapshot() -> dict:
    paths = ["/etc/cgalloc/setup.conf", "/etc/systemd/system/cgalloc-setup.service"]
    files = {p: Path(p).read_text() if Path(p).exists() else None for p in paths}
    tree = {}
    for rel in ("kubepods.slice/memory.max", "kube.slice/memory.max"):
        f = Path("/sys/fs/cgroup") / rel
        tree[rel] = f.read_text().strip() if f.exists() else None
    show = subprocess.run(
        ["systemctl", "show", "cgalloc-setup.service", "-p", "ActiveState", "-p",
         "UnitFileState", "-p", "ExecMainStartTimestampMonotonic"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return {"files": files, "tree": tree, "unit": show.stdout.split()}


def main() -> None:
    wheelhouse = sys.argv[1]
    work = Path(tempfile.mkdtemp(prefix="role-"))
    config = work / "config.yaml"
    config.write_text(CONFIG)
    result: dict = {"runs": []}
    result["runs"].append(playbook(wheelhouse, str(config)))
    result["after1"] = snapshot()
    result["runs"].append(playbook(wheelhouse, str(config)))
    result["after2"] = snapshot()
    result["runs"].append(playbook(wheelhouse, str(config), "--check", "--diff"))
    result["after3"] = snapshot()
    result["runs"].append(playbook(wheelhouse, str(config), "--check", "--diff", reserved="200Mi"))
    result["after4"] = snapshot()
    verify = subprocess.run(
        [f"{VENV}/bin/cgalloc", "verify", "--config", str(config), "--kube-reserved",
         "memory=150Mi"], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    result["verify"] = {"rc": verify.returncode, "out": verify.stdout + verify.stderr}
    print("ROLE-RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
