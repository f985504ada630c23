"""`cgalloc install-unit` below a root a hostile local user prepared (issue 35): a symlinked
directory leading out of --root, a planted temporary, a config file or unit directory others
may change, a packaged unit or another link at cgalloc's paths, an interpreter a user could
change. Each is refused with exit 2 before anything is written, and nothing outside --root is
touched; uninstall removes only what install-unit wrote."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from clirun import files_below as files
from clirun import run_cli

UNIT = "etc/systemd/system/cgalloc-setup.service"
LINK = "etc/systemd/system/multi-user.target.wants/cgalloc-setup.service"
CONF = "etc/cgalloc/setup.conf"
SYSTEMD_ARGS = ["--cgroup-driver", "systemd", "--kube-reserved-cgroup", "/kube.slice"]
NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")


def install(capsys, root: Path, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "install-unit", "--root", str(root), *args)


@pytest.fixture
def image(tmp_path):
    root = tmp_path / "image"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    return d


# ---------------------------------------------------------------- symlinks below --root


@pytest.mark.parametrize("uninstall", [False, True], ids=["install", "uninstall"])
def test_a_symlinked_etc_systemd_leading_out_of_root_is_refused(capsys, image, outside, uninstall):
    (image / "etc").mkdir()
    (image / "etc" / "systemd").symlink_to(outside)
    # what a user may have put there for uninstall to remove: cgalloc's unit, marker and all
    (outside / "system").mkdir()
    (outside / "system" / "cgalloc-setup.service").write_text("# Written by cgalloc install-unit\n")
    before = files(outside)
    args = ["--uninstall"] if uninstall else ["--", *SYSTEMD_ARGS]
    code, out, err = install(capsys, image, *args)
    assert (code, out) == (2, ""), err
    assert err == (
        f"cgalloc: --root {image}: /etc/systemd is a symbolic link; install-unit resolves every "
        "path below --root without following one (it could lead out of --root), so it wrote "
        "nothing: make it a directory, or give the directory it points to as --root.\n"
    )
    assert files(outside) == before
    assert files(image) == {"etc/systemd": f"-> {outside}"}


def test_a_symlink_pointing_inside_root_is_refused_too(capsys, image):
    # the same on every kernel: openat2 where it exists, the O_NOFOLLOW walk where not
    (image / "usr" / "etc").mkdir(parents=True)
    (image / "etc").symlink_to("usr/etc")
    code, _, err = install(capsys, image, "--", *SYSTEMD_ARGS)
    assert code == 2 and f"--root {image}: /etc is a symbolic link" in err, err
    assert list((image / "usr" / "etc").iterdir()) == []


def test_a_planted_temporary_is_refused_and_its_target_untouched(capsys, image, outside):
    victim = outside / "victim"
    victim.write_text("precious\n")
    (image / "etc/systemd/system").mkdir(parents=True)
    (image / "etc/systemd/system/.cgalloc-setup.service.cgalloc-tmp").symlink_to(victim)
    code, out, err = install(capsys, image, "--", *SYSTEMD_ARGS)
    assert (code, out) == (2, ""), err
    assert "/etc/systemd/system/.cgalloc-setup.service.cgalloc-tmp is a symbolic link" in err
    assert victim.read_text() == "precious\n"
    assert not (image / UNIT).exists() and not (image / "etc/cgalloc").exists()


def test_a_config_file_that_is_a_symlink_is_refused(capsys, image, outside):
    (outside / "setup.conf").write_text("CGALLOC_SETUP_ARGS=--cgroup-driver systemd\n")
    (image / "etc" / "cgalloc").mkdir(parents=True)
    (image / CONF).symlink_to(outside / "setup.conf")
    code, out, err = install(capsys, image, "--", *SYSTEMD_ARGS)
    assert (code, out) == (2, ""), err
    assert f"/{CONF} is a symbolic link (to {outside / 'setup.conf'})" in err
    assert not (image / UNIT).exists()


def test_unit_files_get_their_mode_whatever_the_umask(capsys, image):
    old = os.umask(0o077)
    try:
        assert install(capsys, image, "--", *SYSTEMD_ARGS)[0] == 0
    finally:
        os.umask(old)
    assert os.stat(image / UNIT).st_mode & 0o7777 == 0o644
    assert os.stat(image / CONF).st_mode & 0o7777 == 0o644
    assert os.stat(image / "etc/systemd/system").st_mode & 0o7777 == 0o755


# ---------------------------------------------------------------- who may change it


@pytest.mark.parametrize(
    ("path", "change", "problem"),
    [
        (CONF, lambda p: os.chmod(p, 0o666), f"/{CONF} is writable by its group and others"),
        ("etc/cgalloc", lambda p: os.chmod(p, 0o777), "/etc/cgalloc is writable by its group"),
        ("etc/systemd/system", lambda p: os.chmod(p, 0o1777), "/etc/systemd/system is writable"),
        ("etc", lambda p: os.chmod(p, 0o757), "/etc is writable by others (mode 0757)"),
        (".", lambda p: os.chmod(p, 0o775), "image is writable by its group (mode 0775)"),
    ],
)
def test_a_config_file_or_unit_directory_others_may_change_is_refused(
    capsys, image, path, change, problem
):
    (image / "etc/cgalloc").mkdir(parents=True)
    (image / "etc/systemd/system").mkdir(parents=True)
    (image / CONF).write_text(f"CGALLOC_SETUP_ARGS={' '.join(SYSTEMD_ARGS)}\n")
    change(image / path)
    before = files(image)
    code, out, err = install(capsys, image)
    assert (code, out) == (2, ""), err
    assert err.startswith(f"cgalloc: --root {image}: the boot unit runs as root what these ")
    assert problem in err
    assert files(image) == before


@needs_root
def test_a_config_file_another_user_owns_is_refused(capsys, image):
    (image / "etc/cgalloc").mkdir(parents=True)
    (image / CONF).write_text(f"CGALLOC_SETUP_ARGS={' '.join(SYSTEMD_ARGS)}\n")
    os.chown(image / CONF, NOBODY, -1)
    code, _, err = install(capsys, image)
    assert code == 2 and f"/{CONF} is owned by uid 65534, not by root" in err, err
    assert not (image / UNIT).exists()


@pytest.fixture
def unsafe_python(tmp_path, monkeypatch):
    """The interpreter the boot unit would run, writable by every user."""
    exe = tmp_path / "bin" / "python3"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o757)
    monkeypatch.setattr(sys, "executable", str(exe))
    return exe


def test_an_interpreter_others_may_change_is_refused(capsys, image, unsafe_python):
    code, out, err = install(capsys, image, "--", *SYSTEMD_ARGS)
    assert (code, out) == (2, ""), err
    assert err == (
        f"cgalloc: the boot unit would run {unsafe_python} -m cgalloc as root at every boot, but "
        f"a user other than root can change what it runs ({unsafe_python} is writable by others "
        "(mode 0757)); install cgalloc where only root can change it (a root-owned virtual "
        "environment, or the system's packages), or give --allow-unsafe-interpreter to install "
        "it anyway.\n"
    )
    assert files(image) == {}


def test_allow_unsafe_interpreter_installs_with_a_warning(capsys, image, unsafe_python):
    code, _, err = install(capsys, image, "--allow-unsafe-interpreter", "--", *SYSTEMD_ARGS)
    assert code == 0, err
    assert err.startswith(f"cgalloc: warning: the boot unit would run {unsafe_python} -m ")
    assert "installing it as --allow-unsafe-interpreter asks." in err
    assert f"ExecStart={unsafe_python} -m cgalloc setup" in files(image)[UNIT]


def test_the_suites_own_interpreter_and_package_pass_the_check():
    from cgalloc.host import safefs
    from cgalloc.ops.bootunit import boot_code_paths

    paths = boot_code_paths(sys.executable)
    assert sys.executable in paths
    assert any(p.endswith("cgalloc/ops/bootunit.py") for p in paths)
    assert safefs.first_problems(paths) == ([], 0)


# ---------------------------------------------------------------- what install-unit wrote


def test_uninstall_keeps_a_packaged_unit_and_a_link_to_it(capsys, image):
    packaged = "[Unit]\nDescription=cgalloc from the distribution\n"
    (image / "etc/systemd/system/multi-user.target.wants").mkdir(parents=True)
    (image / UNIT).write_text(packaged)
    (image / LINK).symlink_to("/usr/lib/systemd/system/cgalloc-setup.service")
    before = files(image)
    code, out, err = install(capsys, image, "--uninstall")
    assert (code, out.strip()) == (0, "nothing to change"), err
    assert files(image) == before


def test_uninstall_removes_its_own_link_and_unit_only(capsys, image):
    assert install(capsys, image, "--", *SYSTEMD_ARGS)[0] == 0
    dropin = image / "etc/systemd/system/kubelet.service.d/50-cgalloc.conf"
    dropin.parent.mkdir(parents=True)
    dropin.symlink_to("/usr/lib/kubelet-dropin.conf")  # an operator's link, not cgalloc's file
    code, out, _ = install(capsys, image, "--uninstall")
    assert code == 0 and "removed 2 files" in out
    assert set(files(image)) == {CONF, "etc/systemd/system/kubelet.service.d/50-cgalloc.conf"}


@pytest.mark.parametrize(
    ("path", "plant", "what"),
    [
        (UNIT, lambda p: p.write_text("[Unit]\nDescription=packaged\n"), "was not written by"),
        (UNIT, lambda p: p.symlink_to("/usr/lib/systemd/system/x.service"), "is a symbolic link"),
        (LINK, lambda p: p.symlink_to("/usr/lib/systemd/system/x.service"), "links to /usr/lib"),
    ],
)
def test_install_replaces_only_what_it_wrote(capsys, image, path, plant, what):
    (image / path).parent.mkdir(parents=True)
    plant(image / path)
    before = files(image)
    code, out, err = install(capsys, image, "--", *SYSTEMD_ARGS)
    assert (code, out) == (2, ""), err
    assert f"/{path} {what}" in err
    assert files(image) == before
