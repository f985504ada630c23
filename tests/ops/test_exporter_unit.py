"""`cgalloc install-exporter-unit` below a temporary root: the unit, its link and config file,
re-running, the exporter arguments checked first, uninstalling."""

from __future__ import annotations

import os

from clirun import files_below, run_cli


def test_install_reinstall_uninstall(capsys, tmp_path):
    args = ("--kube-reserved-cgroup", "/kube.slice", "--listen", "0.0.0.0:9847")
    code, out, err = run_cli(capsys, "install-exporter-unit", "--root", str(tmp_path), "--", *args)
    assert code == 0, err
    assert "installed and enabled: 3 files changed" in out
    unit = (tmp_path / "etc/systemd/system/cgalloc-exporter.service").read_text()
    assert unit.startswith("# Written by cgalloc install-unit")
    assert "exporter $CGALLOC_EXPORTER_ARGS" in unit
    assert "CapabilityBoundingSet=\n" in unit and "ProtectControlGroups=yes" in unit
    link = tmp_path / "etc/systemd/system/multi-user.target.wants/cgalloc-exporter.service"
    assert os.readlink(link) == "/etc/systemd/system/cgalloc-exporter.service"
    conf = (tmp_path / "etc/cgalloc/exporter.conf").read_text()
    assert conf.splitlines()[-1] == "CGALLOC_EXPORTER_ARGS=" + " ".join(args)
    code, out, _ = run_cli(capsys, "install-exporter-unit", "--root", str(tmp_path))
    assert (code, out.strip()) == (0, "nothing to change")
    code, _, err = run_cli(capsys, "install-exporter-unit", "--root", str(tmp_path), "--",
                           "--listen", "127.0.0.1:1")  # fmt: skip
    assert code == 2 and "already holds other exporter arguments" in err
    code, out, _ = run_cli(capsys, "install-exporter-unit", "--root", str(tmp_path), "--uninstall")
    assert code == 0 and "removed 2 files" in out
    assert not link.exists() and (tmp_path / "etc/cgalloc/exporter.conf").exists()


def test_bad_exporter_arguments_write_nothing(capsys, tmp_path):
    for args in (["--listen", "nowhere"], ["--no-such-option"], ["--kube-reserved", "cpu=x"]):
        code, _, err = run_cli(capsys, "install-exporter-unit", "--root", str(tmp_path), "--",
                               *args)  # fmt: skip
        assert code == 2, (args, err)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------- below a root a local user prepared (issue 35)

UNIT = "etc/systemd/system/cgalloc-exporter.service"
LINK = "etc/systemd/system/multi-user.target.wants/cgalloc-exporter.service"
ARGS = ("--", "--kube-reserved-cgroup", "/kube.slice")


def test_a_symlinked_etc_systemd_leading_out_of_the_root_is_refused(capsys, tmp_path):
    image, outside = tmp_path / "image", tmp_path / "outside"
    (image / "etc").mkdir(parents=True)
    (outside / "system").mkdir(parents=True)
    (image / "etc" / "systemd").symlink_to(outside)
    code, out, err = run_cli(capsys, "install-exporter-unit", "--root", str(image), *ARGS)
    assert (code, out) == (2, ""), err
    assert f"--root {image}: /etc/systemd is a symbolic link" in err
    assert files_below(outside) == {}
    assert files_below(image) == {"etc/systemd": f"-> {outside}"}


def test_a_config_file_others_may_change_is_refused(capsys, tmp_path):
    conf = tmp_path / "etc/cgalloc/exporter.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("CGALLOC_EXPORTER_ARGS=--kube-reserved-cgroup /kube.slice\n")
    os.chmod(conf, 0o666)
    code, out, err = run_cli(capsys, "install-exporter-unit", "--root", str(tmp_path))
    assert (code, out) == (2, ""), err
    assert "the exporter unit runs as root what these files say" in err
    assert "/etc/cgalloc/exporter.conf" in err
    assert not (tmp_path / UNIT).exists()


def test_uninstall_keeps_a_packaged_unit_and_a_link_to_another(capsys, tmp_path):
    (tmp_path / LINK).parent.mkdir(parents=True)
    (tmp_path / UNIT).write_text("[Unit]\nDescription=packaged exporter\n")
    (tmp_path / LINK).symlink_to("/usr/lib/systemd/system/cgalloc-exporter.service")
    before = files_below(tmp_path)
    code, out, err = run_cli(
        capsys, "install-exporter-unit", "--root", str(tmp_path), "--uninstall"
    )
    assert (code, out.strip()) == (0, "nothing to change"), err
    assert files_below(tmp_path) == before
