"""`cgalloc install-unit` below a temporary root: the files it writes, idempotence, refusals
checked before anything is written, rollback of a failure midway, and --uninstall.

The unit's effect (ordering at boot, Slice= after a restart, a failed setup in the journal) is
proven with systemd as PID 1 in tests/kernel/test_boot_unit_kernel.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from clirun import run_cli

UNIT = "etc/systemd/system/cgalloc-setup.service"
LINK = "etc/systemd/system/multi-user.target.wants/cgalloc-setup.service"
CONF = "etc/cgalloc/setup.conf"
KUBELET_DROPIN = "etc/systemd/system/kubelet.service.d/50-cgalloc.conf"
CONTAINERD_DROPIN = "etc/systemd/system/containerd.service.d/50-cgalloc.conf"
SYSTEMD_ARGS = ["--cgroup-driver", "systemd", "--kube-reserved-cgroup", "/kube.slice"]


def files(root: Path) -> dict[str, str]:
    """Every file and link below root: path -> content, or '-> target' for a link."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = path.read_text()
    return out


def directive(text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]


def install(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "install-unit", "--root", str(root), *args)


def test_installs_enables_and_writes_config_and_dropins(capsys, tmp_path):
    code, out, err = install(
        capsys, tmp_path, "--daemons", "kubelet,containerd", "--", *SYSTEMD_ARGS
    )
    assert (code, err) == (0, "")
    assert "cgalloc-setup.service installed and enabled: 5 files changed" in out
    got = files(tmp_path)
    assert set(got) == {UNIT, LINK, CONF, KUBELET_DROPIN, CONTAINERD_DROPIN}
    unit = got[UNIT]
    assert directive(unit, "ExecStart") == [
        f"{sys.executable} -m cgalloc setup $CGALLOC_SETUP_ARGS"
    ]
    assert directive(unit, "Before") == [
        "kubelet.service containerd.service crio.service shutdown.target"
    ]
    assert directive(unit, "DefaultDependencies") == ["no"]
    assert directive(unit, "Type") == ["oneshot"]
    assert directive(unit, "RemainAfterExit") == ["yes"]
    assert directive(unit, "EnvironmentFile") == ["/etc/cgalloc/setup.conf"]
    assert directive(unit, "WantedBy") == ["multi-user.target"]
    # what `systemctl enable` makes for WantedBy=multi-user.target
    assert got[LINK] == "-> /etc/systemd/system/cgalloc-setup.service"
    assert directive(got[CONF], "CGALLOC_SETUP_ARGS") == [" ".join(SYSTEMD_ARGS)]
    for dropin in (KUBELET_DROPIN, CONTAINERD_DROPIN):
        assert directive(got[dropin], "Slice") == ["kube.slice"]
        assert directive(got[dropin], "After") == ["cgalloc-setup.service"]
        assert directive(got[dropin], "Wants") == ["cgalloc-setup.service"]


def test_second_run_changes_nothing_and_keeps_the_config(capsys, tmp_path):
    assert install(capsys, tmp_path, "--daemons", "kubelet", "--", *SYSTEMD_ARGS)[0] == 0
    before = files(tmp_path)
    # without arguments the existing config file's are used
    code, out, _ = install(capsys, tmp_path, "--daemons", "kubelet")
    assert (code, out.strip()) == (0, "nothing to change")
    assert files(tmp_path) == before


def test_operator_edited_config_is_kept_and_other_arguments_refused(capsys, tmp_path):
    conf = tmp_path / CONF
    conf.parent.mkdir(parents=True)
    conf.write_text("CGALLOC_SETUP_ARGS=--cgroup-driver systemd\n")
    code, _, err = install(capsys, tmp_path, "--", *SYSTEMD_ARGS)
    assert code == 2
    assert "/etc/cgalloc/setup.conf already holds other setup arguments" in err
    assert files(tmp_path) == {CONF: "CGALLOC_SETUP_ARGS=--cgroup-driver systemd\n"}
    assert install(capsys, tmp_path)[0] == 0
    assert files(tmp_path)[CONF] == "CGALLOC_SETUP_ARGS=--cgroup-driver systemd\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "--kube-reserved", "memory=lots"], "--kube-reserved"),
        (["--", "--no-such-flag"], "No such option: --no-such-flag"),
        (["--", "--dry-run"], "--dry-run has no place in the boot unit"),
        (["--", "--capacity", "cpu=4"], "--capacity has no place in the boot unit"),
        (["--", "--config", "/nonexistent/config.yaml"], "cannot read /nonexistent/config.yaml"),
        (["--", "--root-dir", "/var/lib/my kubelet"], "without spaces"),
        (["--daemons", "dockerd", "--", *SYSTEMD_ARGS], "'dockerd' is not one of kubelet"),
        (
            ["--daemons", "kubelet", "--", "--kube-reserved-cgroup", "/kube"],
            "needs --cgroup-driver",
        ),
        (
            ["--daemons", "kubelet", "--", "--cgroup-driver", "systemd"],
            "needs --kube-reserved-cgroup",
        ),
        (
            [
                "--daemons",
                "kubelet",
                "--",
                "--cgroup-driver",
                "systemd",
                "--kube-reserved-cgroup",
                "/system.slice/containerd.service",
            ],
            "is another unit, not a slice",
        ),
    ],
)
def test_bad_input_exits_2_with_one_sentence_and_writes_nothing(capsys, tmp_path, args, message):
    code, out, err = install(capsys, tmp_path, *args)
    assert code == 2, out + err
    assert message in err
    assert err.startswith("cgalloc: ")
    assert files(tmp_path) == {}


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        (CONF, b"CGALLOC_SETUP_ARGS=--kube-reserved cpu=\xff\n", "is not UTF-8 text (byte 39"),
        (UNIT, b"[Unit]\nDescription=\xff\n", "is not UTF-8 text (byte 19"),
        (CONF, b"#" * ((4 << 20) + 1), "is larger than 4 MiB"),
    ],
)
def test_files_it_reads_below_root_are_bounded_and_strict(capsys, tmp_path, path, content, message):
    # install-unit read setup.conf and the unit with Path.read_text: bytes that are not UTF-8
    # raised UnicodeDecodeError (a traceback), and a 1 GiB sparse file took 2 GB of memory
    (tmp_path / path).parent.mkdir(parents=True)
    (tmp_path / path).write_bytes(content)
    args = ["--", *SYSTEMD_ARGS] if path == UNIT else []  # the default ones need a kubelet
    code, out, err = install(capsys, tmp_path, "--dry-run", *args)
    assert (code, out) == (2, ""), err
    assert err.startswith(f"cgalloc: --root: {tmp_path / path} ") and message in err
    assert err.endswith("give a UTF-8 systemd unit or environment file.\n") or "4 MiB" in err


def test_daemon_whose_unit_is_the_reservation_only_gets_the_ordering(capsys, tmp_path):
    args = ["--cgroup-driver", "systemd", "--kube-reserved-cgroup", "/system.slice/kubelet.service"]
    assert install(capsys, tmp_path, "--daemons", "kubelet", "--", *args)[0] == 0
    dropin = files(tmp_path)[KUBELET_DROPIN]
    assert directive(dropin, "Slice") == []
    assert directive(dropin, "After") == ["cgalloc-setup.service"]


def test_dry_run_prints_the_files_and_writes_nothing(capsys, tmp_path):
    code, out, _ = install(capsys, tmp_path, "--dry-run", "--daemons", "crio", "--", *SYSTEMD_ARGS)
    assert code == 0
    assert f"would write /{UNIT}" in out
    assert f"would link /{LINK} -> /etc/systemd/system/cgalloc-setup.service" in out
    assert "    Slice=kube.slice" in out
    assert out.rstrip().endswith("dry run: 4 files would change, nothing written")
    assert files(tmp_path) == {}


def test_failure_midway_restores_every_file(capsys, tmp_path):
    # a plain file where the kubelet's drop-in directory must go: the last write fails
    blocker = tmp_path / "etc/systemd/system/kubelet.service.d"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a directory")
    code, _, err = install(capsys, tmp_path, "--daemons", "kubelet", "--", *SYSTEMD_ARGS)
    assert code == 1
    assert f"cannot write /{KUBELET_DROPIN}" in err
    assert files(tmp_path) == {"etc/systemd/system/kubelet.service.d": "not a directory"}
    assert not (tmp_path / "etc/cgalloc").exists()
    assert not (tmp_path / "etc/systemd/system/multi-user.target.wants").exists()


def test_uninstall_removes_what_it_wrote_and_keeps_config_and_foreign_dropins(capsys, tmp_path):
    assert install(capsys, tmp_path, "--daemons", "kubelet", "--", *SYSTEMD_ARGS)[0] == 0
    foreign = tmp_path / "etc/systemd/system/containerd.service.d/50-cgalloc.conf"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("[Service]\nSlice=mine.slice\n")  # not cgalloc's: no marker line
    code, out, _ = install(capsys, tmp_path, "--uninstall")
    assert code == 0
    assert "removed 3 files; /etc/cgalloc/setup.conf kept" in out
    assert set(files(tmp_path)) == {CONF, CONTAINERD_DROPIN}
    assert install(capsys, tmp_path, "--uninstall")[1].strip() == "nothing to change"


@pytest.mark.parametrize(
    ("args", "given"),
    [(["--", *SYSTEMD_ARGS], "SETUP-ARGS"), (["--daemons", "kubelet"], "--daemons")],
)
def test_uninstall_refuses_install_arguments_and_removes_nothing(capsys, tmp_path, args, given):
    # they were ignored: an operator meaning to change the arguments lost the unit instead
    assert install(capsys, tmp_path, "--daemons", "kubelet", "--", *SYSTEMD_ARGS)[0] == 0
    before = files(tmp_path)
    code, out, err = install(capsys, tmp_path, "--uninstall", *args)
    assert (code, out) == (2, "")
    assert err == (
        f"cgalloc: --uninstall removes what install-unit wrote and takes no {given}; drop them.\n"
    )
    assert files(tmp_path) == before


def test_root_must_be_a_directory(capsys, tmp_path):
    code, _, err = install(capsys, tmp_path / "missing")
    assert code == 2
    assert "--root" in err


def test_an_empty_root_is_not_the_current_directory(capsys, tmp_path, monkeypatch):
    # Path("") is "."; --state-dir '' and --cgroupfs '' are refused, and so is --root ''
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "install-unit", "--root", "", "--", *SYSTEMD_ARGS)
    assert (code, out) == (2, "")
    assert err == "cgalloc: --root '' is not a directory; give an existing directory.\n"
    assert files(tmp_path) == {}


def test_moving_processes_by_name_says_it_does_not_persist(capsys, tmp_path, monkeypatch):
    from fakecgroup import fake_tree

    root = fake_tree(tmp_path, monkeypatch, "v2")
    code, _, err = run_cli(
        capsys,
        "setup",
        "--dry-run",
        "--capacity",
        "cpu=4,memory=8Gi,pid=4096,ephemeral-storage=100Gi",
        "--enforce",
        "pods,kube-reserved",
        "--kube-reserved",
        "memory=1Gi",
        "--kube-reserved-cgroup",
        "/kube.slice",
        "--kube-reserved-procs",
        "kubelet",
        "--cgroupfs",
        str(root),
    )
    assert code == 0
    assert "return to their unit's cgroup when they restart" in err
    assert "cgalloc install-unit --daemons" in err


def test_uninstall_names_only_the_slices_of_the_dropins_it_removes(capsys, tmp_path):
    # after --uninstall on a running node cgalloc may stop these (a slice systemd loaded at
    # boot only for its drop-ins); an operator's drop-in and its slice are not cgalloc's
    from cgalloc.host import safefs
    from cgalloc.ops.bootunit import dropin_slices, uninstall_changes

    assert install(capsys, tmp_path, "--daemons", "kubelet", "--", *SYSTEMD_ARGS)[0] == 0
    foreign = tmp_path / CONTAINERD_DROPIN
    foreign.parent.mkdir(parents=True)
    foreign.write_text("[Service]\nSlice=mine.slice\n")
    base = safefs.Beneath(str(tmp_path))
    try:
        assert dropin_slices(base, uninstall_changes(base)) == ["kube.slice"]
    finally:
        base.close()
