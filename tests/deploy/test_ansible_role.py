"""The Ansible role (deploy/ansible/roles/cgalloc): its syntax and variables on the host, and
the role run with ansible-core against a v2-systemd qemu VM itself (``-c local``), three times
with the checks of role_runs.py. CI runs those runs and checks against a Vagrant guest over
SSH instead (vagrant/role.py, in .ci/vagrant-lane); this qemu run is opt-in
(``CGALLOC_ROLE_VM=1``) for a machine without Vagrant: its controller runs under emulation too,
which takes far longer. The VM has no registry: cgalloc and its dependencies come as a
wheelhouse built here, which the role installs with ``--no-index`` (its ``cgalloc_wheelhouse``
path for such nodes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import role_runs

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "deploy/ansible/roles/cgalloc"
SITE = role_runs.SITE
PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
needs_ansible = pytest.mark.skipif(
    not PLAYBOOK.exists(), reason="ansible-core is not installed (the test extra has it)"
)
# The role in a qemu VM is an opt-in lane: CI runs the same checks against a Vagrant guest.
OPT_IN = "CGALLOC_ROLE_VM"
role_lane = pytest.mark.skipif(
    os.environ.get(OPT_IN) != "1",
    reason=f"the role's qemu lane is opt-in (CI runs the role in the Vagrant lane): set {OPT_IN}=1",
)


@needs_ansible
def test_the_site_playbook_and_role_pass_ansibles_syntax_check():
    done = subprocess.run(
        [str(PLAYBOOK), "--syntax-check", "-i", "localhost,", str(SITE)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_variable_the_tasks_use_has_a_default():
    used = set(re.findall(r"\bcgalloc_[a-z_]+", (ROLE / "tasks/main.yml").read_text()))
    used |= set(re.findall(r"\bcgalloc_[a-z_]+", (ROLE / "templates/setup.conf.j2").read_text()))
    registered = set(
        re.findall(r"register: (cgalloc_[a-z_]+)", (ROLE / "tasks/main.yml").read_text())
    )
    defaults = set(yaml.safe_load((ROLE / "defaults/main.yml").read_text()))
    assert used - registered - defaults == set()
    assert defaults - used == set()  # no default is left unused


# ---- the role in a qemu VM -----------------------------------------------------------------


def _wheelhouse() -> Path:
    """cgalloc's wheel and its dependencies' (from the index or pip's cache), under build/."""
    house = ROOT / "build/deploy-test/wheelhouse"
    shutil.rmtree(house, ignore_errors=True)
    house.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
         "--wheel-dir", str(house), str(ROOT)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"building the wheelhouse failed:\n{done.stdout}{done.stderr}")
    return house


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.mark.vm
@needs_ansible
@role_lane
def test_the_role_in_a_v2_systemd_vm_is_idempotent_and_check_mode_changes_nothing():
    from vm.prereqs import MissingPrerequisite, find_prereqs

    try:
        find_prereqs()
    except MissingPrerequisite as missing:
        if _in_ci():
            pytest.fail(f"VM lanes need: {missing}")
        pytest.skip(f"VM lanes need: {missing}")
    house = _wheelhouse()
    script = ROOT / "tests/deploy/role_in_vm.py"
    limit = int(os.environ.get("CGALLOC_VM_TIMEOUT") or 3000)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tests.vm.run", "--lane", "v2-systemd", "--timeout", str(limit),
         "--", sys.executable, str(script), str(house)],
        capture_output=True, text=True, timeout=limit + 300, cwd=ROOT,
    )  # fmt: skip
    print(f"the role's VM run took {time.monotonic() - started:.0f} s")
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ROLE-RESULT ")), None)
    assert line is not None, f"rc {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    result = json.loads(line[len("ROLE-RESULT ") :])
    print("the role's runs took (s):", [run.get("seconds") for run in result["runs"]])
    failed = [f"{name}:\n{evidence}" for name, ok, evidence in role_runs.verdicts(result) if not ok]
    assert not failed, "\n\n".join(failed)
