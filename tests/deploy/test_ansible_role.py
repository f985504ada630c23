"""The Ansible role (deploy/ansible/roles/cgalloc): its syntax and variables on the host, and
the role run with ansible-core against a v2-systemd qemu VM itself (``-c local``): the first
run changes the node, the second reports no change, ``--check`` changes nothing and shows the
plan. The VM run is opt-in (``CGALLOC_ROLE_VM=1``): it does not fit CI's time budget. The VM
has no registry: cgalloc and its dependencies come as a wheelhouse built here, which the role
installs with ``--no-index`` (its ``cgalloc_wheelhouse`` path for such nodes).
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

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "deploy/ansible/roles/cgalloc"
SITE = ROOT / "deploy/ansible/site.yml"
PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
needs_ansible = pytest.mark.skipif(
    not PLAYBOOK.exists(), reason="ansible-core is not installed (the test extra has it)"
)
# The role in a VM is an opt-in lane: four ansible-playbook runs under TCG take longer than
# CI's budget leaves beside the Vagrant lane (docs/fleet.md has the measured time).
OPT_IN = "CGALLOC_ROLE_VM"
role_lane = pytest.mark.skipif(
    os.environ.get(OPT_IN) != "1",
    reason=f"the role's qemu lane is opt-in (beyond CI's time budget): set {OPT_IN}=1",
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
    first, second, check, plan = result["runs"]
    for run in result["runs"]:
        assert run["rc"] == 0, run["tail"]
        assert run["recap"]["failed"] == 0, run["tail"]
    # 1: installed, configured, unit, tree applied through the unit
    assert {"Install cgalloc", "Setup arguments (/etc/cgalloc/setup.conf)",
            "Boot unit (cgalloc install-unit)",
            "Apply the tree through the boot unit (verify found drift)"} <= set(
        first["changedTasks"]), first["tail"]  # fmt: skip
    after = result["after1"]
    assert "CGALLOC_SETUP_ARGS=--config" in after["files"]["/etc/cgalloc/setup.conf"]
    assert after["files"]["/etc/systemd/system/cgalloc-setup.service"] is not None
    assert after["tree"]["kube.slice/memory.max"] == str(150 << 20)
    assert "ActiveState=active" in after["unit"] and "UnitFileState=enabled" in after["unit"]
    # 2: nothing changes, the unit did not run again
    assert second["recap"]["changed"] == 0, second["changedTasks"]
    assert result["after2"] == after
    # 3: check mode, same inputs: no change reported, nothing written
    assert check["recap"]["changed"] == 0, check["changedTasks"]
    assert result["after3"] == after
    # 4: check mode, other inputs: the plan is shown, nothing written
    assert "Plan (check mode; cgalloc setup --dry-run)" in plan["changedTasks"], plan["tail"]
    assert "Setup arguments (/etc/cgalloc/setup.conf)" in plan["changedTasks"]
    assert plan["planShown"], plan["tail"]
    assert result["after4"] == after
    assert result["verify"]["rc"] == 0, result["verify"]["out"]
