"""The Ansible role (deploy/ansible) against a Vagrant guest, over SSH from this host as a fleet
runs it: three ansible-playbook runs (tests/deploy/role_runs.py says which and what each must
show), cgalloc and its dependencies installed from the wheelhouse the guest already holds
(pip's --no-index --find-links, as for a node behind an internal mirror). The virtualenv is the
one the guest's image has (the box makes it: ensurepip takes minutes under emulation); the cgalloc
provisioning installed in it is removed first, so the role installs it again.

Run by .ci/vagrant-lane on a guest whose reboot check has passed (its kubelet steps ended with
a clean exit, so the node is as before setup). The kubelet configuration it gives setup has the
cgroup driver of the guest's own kubelet configuration (the one its container runtime uses).
Writes OUT (JSON: each check as a step, as provision.json has them, and the runs' recaps and
times) and exits 1 when a check failed.

Usage: python vagrant/role.py SSH_CONFIG HOST FIND_LINKS OUT
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests/deploy"))

import role_runs
from results import ROLE_PREFIX  # vagrant/results.py, beside this script

CONFIG = "/etc/cgalloc/role-kubelet.yaml"
VENV = "/opt/cgalloc"


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__.strip().rsplit("\n\n", 1)[1], file=sys.stderr)
        return 2
    ssh_config, host, find_links, out = argv
    started = time.monotonic()

    def on_node(argv: list[str], stdin: str | None = None) -> tuple[int, str]:
        cmd = ["ssh", "-F", ssh_config, host, "sudo " + shlex.join(argv)]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=900)
        return done.returncode, done.stdout + done.stderr

    def snapshot() -> dict:
        rc, text = on_node(["python3", "-"], role_runs.SNAPSHOT)
        return json.loads(text) if rc == 0 else {"error": text}

    def run(driver: str) -> dict:
        command = [str(Path(sys.executable).with_name("ansible-playbook")), "-i", f"{host},"]
        variables = {
            "cgalloc_hosts": host,
            "cgalloc_python": "/usr/bin/python3",
            "cgalloc_pip_args": ["--no-index", "--find-links", find_links],
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_common_args": f"-F {ssh_config}",
        }
        # systemd is PID 1: setup refuses the cgroupfs driver there unless told to go on, as
        # the guest's own setup is
        extra = ("--allow-driver-mismatch",) if driver == "cgroupfs" else ()
        node = role_runs.Node(CONFIG, driver, VENV, snapshot, on_node, extra)
        return role_runs.three_runs(command, variables, node)

    # "<guest>-<driver>": the configuration kubelet.sh ran as the node's own
    rc, main = on_node(["cat", f"/var/lib/cgalloc-provision/{host}/kubelet-main"])
    driver = main.strip().rpartition("-")[2]
    if rc != 0 or driver not in role_runs.RESERVED_CGROUP:
        result: dict = {"error": f"the node's cgroup driver (kubelet-main on {host}): {main}"}
    else:
        rc, said = on_node(["install", "-D", "-m", "0644", "/dev/stdin", CONFIG],
                           role_runs.config(driver))  # fmt: skip
        if rc == 0:
            rc, said = on_node([f"{VENV}/bin/python", "-m", "pip", "uninstall", "-y", "-q",
                                "--disable-pip-version-check", "cgalloc"])  # fmt: skip
        result = {"error": f"preparing {host}: {said}"} if rc else run(driver)
    seconds = round(time.monotonic() - started)
    steps = [
        {"step": f"{ROLE_PREFIX}{name}", "ok": ok, "rc": 0 if ok else 1, "seconds": 0.0,
         "detail": "" if ok else evidence[-3000:]}
        for name, ok, evidence in role_runs.verdicts(result)
    ]  # fmt: skip
    runs = [{k: r[k] for k in ("name", "seconds", "rc", "recap", "changedTasks")}
            for r in result.get("runs", [])]  # fmt: skip
    doc = {"host": host, "seconds": seconds, "runs": runs, "steps": steps}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    failed = [s["step"] for s in steps if not s["ok"]]
    took = ", ".join(f"{r['name']} {r['seconds']} s" for r in runs)
    print(f"role on {host}: {len(steps) - len(failed)} passed, {len(failed)} failed in {seconds} s"
          f" (runs: {took})")  # fmt: skip
    for name in failed:
        print(f"  FAILED: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
