"""The Ansible role's three runs against one node, what the node holds after each, and their
verdicts. Shared by the role's qemu lane (``role_in_vm.py``: ``-c local`` inside the VM) and
the Vagrant lane (``vagrant/role.py``: over SSH from the host, as a fleet runs it).

The runs: apply (cgalloc installed, setup.conf and the boot unit written, the tree applied
through the unit, verified); apply again (no task changes anything, nothing on the node
differs); ``--check --diff`` with another reservation (the plan and setup.conf's diff shown,
nothing written). Then ``cgalloc verify`` exits 0.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
SITE = CHECKOUT / "deploy/ansible/site.yml"
RESERVED = "150Mi"
RESERVED_BYTES = 150 << 20
OTHER_RESERVED = "200Mi"
# The kube-reserved cgroup by the kubelet's cgroup driver.
RESERVED_CGROUP = {"systemd": "kube.slice", "cgroupfs": "kube-reserved"}


def config(driver: str) -> str:
    """The node's kubelet configuration for the role's setup: ``driver`` must be the node's
    (its container runtime's), or setup refuses the node."""
    return f"""\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: {driver}
kubeReserved: {{memory: {RESERVED}}}
kubeReservedCgroup: /{RESERVED_CGROUP[driver]}
enforceNodeAllocatable: [pods, kube-reserved]
evictionHard: {{memory.available: 1Mi}}
"""


@dataclass
class Node:
    """The node the role runs against, as the runs see it."""

    config: str  # the path of its kubelet configuration (config(driver) written there)
    driver: str
    venv: str  # where the role installs cgalloc
    snapshot: Callable[[], dict]  # SNAPSHOT's document, run on the node
    run: Callable[[list[str]], tuple[int, str]]  # a command on the node: exit status, output
    extra: tuple[str, ...] = ()  # setup arguments the node needs beyond the configuration


# The tasks the first run must report as changed.
APPLIED = {
    "Install cgalloc",
    "Setup arguments (/etc/cgalloc/setup.conf)",
    "Boot unit (cgalloc install-unit)",
    "Apply the tree through the boot unit (verify found drift)",
}
PROGRESS = ("TASK [", "ok:", "changed:", "skipping:", "fatal:", "PLAY RECAP")
RECAP = re.compile(r"^\S+\s*:\s*(ok=.*)$", re.M)
# Run on the node (as root) after each run: the files the role writes, the tree, the unit.
SNAPSHOT = """\
import json, pathlib, subprocess
paths = ["/etc/cgalloc/setup.conf", "/etc/systemd/system/cgalloc-setup.service"]
files = {p: pathlib.Path(p).read_text() if pathlib.Path(p).exists() else None for p in paths}
tree = {}
for rel in ("kubepods.slice", "kubepods", "kube.slice", "kube-reserved"):
    rel += "/memory.max"
    f = pathlib.Path("/sys/fs/cgroup") / rel
    tree[rel] = f.read_text().strip() if f.exists() else None
show = subprocess.run(
    ["systemctl", "show", "cgalloc-setup.service", "-p", "ActiveState", "-p", "UnitFileState",
     "-p", "ExecMainStartTimestampMonotonic"], capture_output=True, text=True, timeout=60)
print(json.dumps({"files": files, "tree": tree, "unit": show.stdout.split()}))
"""


def setup_args(node: Node, reserved: str = RESERVED) -> list[str]:
    return ["--config", node.config, "--kube-reserved", f"memory={reserved}", *node.extra]


def changed_tasks(out: str) -> list[str]:
    """The names of the tasks ansible-playbook reported as changed, in order."""
    tasks, current = [], None
    for line in out.splitlines():
        match = re.match(r"^TASK \[(?:cgalloc : )?(.*)\]", line)
        if match:
            current = match.group(1)
        elif line.startswith("changed:") and current:
            tasks.append(current)
    return tasks


def playbook(command: list[str], variables: dict, name: str, *extra: str) -> dict:
    """One ``ansible-playbook`` run of the site playbook: ``command`` is the program with its
    connection and inventory arguments. Each task is printed as it ends, with the seconds since
    the run began, so a run cut short shows where it was."""
    env = {
        **os.environ,
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_PIPELINING": "1",
        "ANSIBLE_HOST_KEY_CHECKING": "0",
        "ANSIBLE_LOCAL_TEMP": tempfile.mkdtemp(prefix="ansible-"),
    }
    argv = [*command, str(SITE), "-e", json.dumps(variables), *extra]
    started = time.monotonic()
    lines = []
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
        "name": name,
        "seconds": seconds,
        "rc": proc.returncode,
        "recap": {k: int(v) for k, v in counts.items()},
        "changedTasks": changed_tasks(out),
        "tail": out[-5000:],
        "planShown": "dry run:" in out and "changes planned" in out,
    }


def three_runs(command: list[str], variables: dict, node: Node) -> dict:
    """The three runs with ``variables`` (the node's own: hosts, python, install source), the
    node's state after each, and verify's exit status and output at the end."""
    result: dict = {"runs": [], "driver": node.driver}
    same = {**variables, "cgalloc_venv": node.venv, "cgalloc_setup_args": setup_args(node)}
    other = {**same, "cgalloc_setup_args": setup_args(node, OTHER_RESERVED)}
    runs = [
        ("apply", same, ()),
        ("apply again", same, ()),
        ("--check --diff, another reservation", other, ("--check", "--diff")),
    ]
    for n, (name, chosen, extra) in enumerate(runs, start=1):
        result["runs"].append(playbook(command, chosen, name, *extra))
        result[f"after{n}"] = node.snapshot()
    rc, out = node.run([f"{node.venv}/bin/cgalloc", "verify", *setup_args(node)])
    result["verify"] = {"rc": rc, "out": out}
    return result


def verdicts(result: dict) -> list[tuple[str, bool, str]]:
    """(check, passed, evidence) for each claim of the three runs."""
    runs = result.get("runs", [])
    if len(runs) != 3:
        return [("the role ran three times", False, json.dumps(result)[-2000:])]
    unread = [n for n in range(1, 4) if "files" not in result.get(f"after{n}", {})]
    if unread:
        return [("the node's state was read after each run", False, json.dumps(result)[-2000:])]
    first, second, plan = runs
    after = result["after1"]
    missing = APPLIED - set(first["changedTasks"])
    conf = after["files"]["/etc/cgalloc/setup.conf"] or ""
    unit = after["files"]["/etc/systemd/system/cgalloc-setup.service"]
    state = " ".join(after["unit"])
    limit = after["tree"].get(f"{RESERVED_CGROUP[result['driver']]}/memory.max")
    planned = {
        "Plan (check mode; cgalloc setup --dry-run)",
        "Setup arguments (/etc/cgalloc/setup.conf)",
    }
    out = [
        (f"run '{run['name']}' succeeded",
         run["rc"] == 0 and bool(run["recap"]) and run["recap"].get("failed") == 0,
         run["tail"][-1500:])
        for run in runs
    ]  # fmt: skip
    out += [
        ("apply: installed, configured, boot unit, tree applied through the unit", not missing,
         f"not changed: {sorted(missing)}; changed: {first['changedTasks']}"),
        ("apply: setup.conf holds the setup arguments", "CGALLOC_SETUP_ARGS=--config" in conf,
         conf),
        ("apply: the boot unit is written", unit is not None, str(unit)[:300]),
        ("apply: the kube-reserved cgroup's memory.max is the reservation",
         limit == str(RESERVED_BYTES), json.dumps(after["tree"])),
        ("apply: the unit is active and enabled",
         "ActiveState=active" in state and "UnitFileState=enabled" in state, state),
        ("apply again: no task changed anything", second["recap"].get("changed") == 0,
         str(second["changedTasks"])),
        ("apply again: the node is as the first run left it (the unit did not run again)",
         result["after2"] == after, json.dumps(result["after2"])[:1500]),
        ("--check, another reservation: the plan and setup.conf's diff are shown",
         planned <= set(plan["changedTasks"]) and plan["planShown"], plan["tail"][-1500:]),
        ("--check, another reservation: nothing written", result["after3"] == after,
         json.dumps(result["after3"])[:1500]),
        ("cgalloc verify exits 0", result["verify"]["rc"] == 0, result["verify"]["out"]),
    ]  # fmt: skip
    return out
