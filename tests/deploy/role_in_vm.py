"""Runs inside the v2-systemd qemu lane (``tests/deploy/test_ansible_role.py`` boots it): the
Ansible role against the VM itself, ``ansible-playbook -c local``, three times (role_runs.py
says which and what each must show). Prints each task's line as it goes and, last, one line
``ROLE-RESULT <json>`` with what each run reported and what the node holds.
Usage: python role_in_vm.py WHEELHOUSE
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import role_runs


def _local(argv: list[str]) -> tuple[int, str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def main() -> None:
    wheelhouse = sys.argv[1]
    config = Path(tempfile.mkdtemp(prefix="role-")) / "config.yaml"
    # no container runtime in the VM to disagree with: the driver of systemd as PID 1
    config.write_text(role_runs.config("systemd"))
    command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local",
               "-i", "localhost,"]  # fmt: skip
    variables = {
        "cgalloc_hosts": "localhost",
        "cgalloc_python": sys.executable,
        "cgalloc_wheelhouse": wheelhouse,
        "ansible_python_interpreter": sys.executable,
    }

    def snapshot() -> dict:
        return json.loads(_local([sys.executable, "-c", role_runs.SNAPSHOT])[1])

    node = role_runs.Node(str(config), "systemd", "/opt/cgalloc", snapshot, _local)
    result = role_runs.three_runs(command, variables, node)
    print("ROLE-RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
