"""`cgalloc install-exporter-unit` below a temporary root: the unit, its link and config file,
re-running, the exporter arguments checked first, uninstalling."""

from __future__ import annotations

import os

from clirun import run_cli


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
