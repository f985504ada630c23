"""``--config-dir`` walked as the kubelet walks it.

Upstream: kubernetes/kubernetes cmd/kubelet/app/server.go mergeKubeletConfigurations, which
runs ``filepath.WalkDir`` over the drop-in directory and, for every entry that is not a
directory and whose ``filepath.Ext(name) == ".conf"``, calls loadDropinConfigFileIntoJSON; a
load failure aborts ("failed to load kubelet dropin file, path: ..."). WalkDir lstats the root,
lists each directory in byte order of the names (os.ReadDir), descends into a subdirectory where
its name sorts, never follows a symlink, and returns a subdirectory's listing error.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clirun import run_cli
from fakecgroup import fake_hierarchy, snapshot, use_fake_tree

from cgalloc.errors import InputError
from cgalloc.inputs import dropins as config_module
from cgalloc.inputs.config import load_node_config
from cgalloc.inputs.dropins import DROPIN_MAX_DEPTH, DROPIN_MAX_ENTRIES

HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
CAP = ["--capacity", "cpu=16,memory=32Gi,pid=4096,ephemeral-storage=100Gi"]


def dropin(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEAD + body)
    return path


def load(config_dir: Path | str):
    return load_node_config({}, config_dir=str(config_dir), online_cpus=lambda: frozenset(range(4)))


def reserved(config_dir: Path | str) -> dict[str, str]:
    return {k: str(v) for k, v in load(config_dir).kube_reserved.items()}


def problems(config_dir: Path | str) -> list[str]:
    with pytest.raises(InputError) as exc:
        load(config_dir)
    return exc.value.problems


def test_subdirectory_dropins_merge_where_the_subdirectory_sorts(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: WalkDir visits 10.conf, then
    descends 15/ (15/a.conf), then 20.conf; each later file wins."""
    dropin(tmp_path / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    dropin(tmp_path / "15" / "a.conf", 'kubeReserved: {cpu: "2", memory: 2Gi}\n')
    dropin(tmp_path / "20.conf", "kubeReserved: {memory: 3Gi}\n")
    # cpu 2: 15/a.conf came after 10.conf; memory 3Gi: 20.conf came after 15/a.conf
    assert reserved(tmp_path) == {"cpu": "2", "memory": "3Gi"}


def test_entries_go_in_byte_order_of_their_names(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: WalkDir lists a directory with
    os.ReadDir, sorted by the names' bytes (a name that is not UTF-8 included)."""
    # b"\xee\x80\x80" (U+E000) sorts before b"\xff"; Python's str order has it the other way
    dropin(tmp_path / "\ue000.conf", 'kubeReserved: {cpu: "1"}\n')
    dropin(Path(os.fsdecode(bytes(tmp_path) + b"/\xff.conf")), 'kubeReserved: {cpu: "2"}\n')
    assert reserved(tmp_path) == {"cpu": "2"}


def test_show_counts_a_subdirectory_dropin(tmp_path, capsys):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: the issue's reproduction, allocatable
    cpu 16 - 1 as the kubelet computes it."""
    dropin(tmp_path / "sub" / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    code, out, err = run_cli(
        capsys, "show", "--capacity", "cpu=16,memory=32Gi", "--config-dir", str(tmp_path),
        "-o", "json",
    )  # fmt: skip
    assert code == 0, err
    assert '"cpu": "15"' in out


def test_dangling_conf_symlink_fails_naming_the_path(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: a symlink is a non-directory entry,
    so 50.conf is loaded and its failure aborts the kubelet."""
    dropin(tmp_path / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    (tmp_path / "50.conf").symlink_to(tmp_path / "missing")
    got = problems(tmp_path)
    assert len(got) == 1
    assert got[0].startswith(f"--config-dir: cannot read {tmp_path / '50.conf'} (No such file")


def test_symlink_to_a_directory_named_conf_fails_to_load(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: WalkDir does not follow x.conf (a
    symlink to a directory), and loading it as a file fails."""
    dropin(tmp_path / "real" / "a.txt", "")
    (tmp_path / "x.conf").symlink_to(tmp_path / "real", target_is_directory=True)
    got = problems(tmp_path)
    assert got == [
        f"--config-dir: {tmp_path / 'x.conf'} is not a regular file; give a YAML or JSON file;"
        " expected a KubeletConfiguration document (apiVersion kubelet.config.k8s.io/v1beta1)."
    ]


def test_symlinked_directory_is_not_descended(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: WalkDir does not follow symlinks, so
    link/ (not a .conf name) is skipped with the drop-in behind it, and a loop is harmless."""
    outside = tmp_path / "outside"
    dropin(outside / "a.conf", 'kubeReserved: {cpu: "1"}\n')
    drop = tmp_path / "conf.d"
    dropin(drop / "10.conf", "kubeReserved: {memory: 1Gi}\n")
    (drop / "link").symlink_to(outside, target_is_directory=True)
    (drop / "loop").symlink_to(drop, target_is_directory=True)
    assert reserved(drop) == {"memory": "1Gi"}


def test_symlink_to_a_conf_file_is_loaded(tmp_path):
    """cmd/kubelet/app/server.go loadDropinConfigFileIntoJSON reads through a symlinked file."""
    target = dropin(tmp_path / "elsewhere.yaml", 'kubeReserved: {cpu: "1"}\n')
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "10.conf").symlink_to(target)
    assert reserved(tmp_path / "conf.d") == {"cpu": "1"}


def test_only_conf_names_are_loaded_and_hidden_ones_too(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: filepath.Ext(name) == ".conf" picks
    .a.conf and .conf (Ext(".conf") is ".conf") and skips the rest, whatever they hold."""
    dropin(tmp_path / ".a.conf", 'kubeReserved: {cpu: "1"}\n')
    dropin(tmp_path / ".conf", "kubeReserved: {memory: 1Gi}\n")
    for name in ("10.conf.bak", "10.yaml", "conf", "10.CONF", "sub/README"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("kind: Nonsense\n")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "missing")
    os.mkfifo(tmp_path / "fifo")
    assert reserved(tmp_path) == {"cpu": "1", "memory": "1Gi"}


def test_fifo_named_conf_is_refused_not_read(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations loads x.conf whatever it is; cgalloc
    refuses a FIFO rather than wait for a writer."""
    os.mkfifo(tmp_path / "x.conf")
    assert problems(tmp_path) == [
        f"--config-dir: {tmp_path / 'x.conf'} is not a regular file; give a YAML or JSON file;"
        " expected a KubeletConfiguration document (apiVersion kubelet.config.k8s.io/v1beta1)."
    ]


def test_unlistable_subdirectory_fails(tmp_path, monkeypatch):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: WalkDir passes a subdirectory's
    listing error to the callback, which returns it."""
    dropin(tmp_path / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    (tmp_path / "locked").mkdir()
    real = os.scandir

    def scandir(path):
        if str(path) == str(tmp_path / "locked"):  # root ignores a 0700 mode: fake the refusal
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(config_module.os, "scandir", scandir)
    assert problems(tmp_path) == [
        f"--config-dir: cannot list {tmp_path / 'locked'} (Permission denied); expected a"
        " directory of *.conf KubeletConfiguration drop-ins."
    ]


def test_the_root_is_lstat_ed_as_walkdir_does(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: WalkDir lstats the root, so a root
    that is a symlink (even to a directory) is an entry like any other: loaded if its name ends in
    .conf, skipped if not; a missing root is an error."""
    drop = tmp_path / "conf.d"
    dropin(drop / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    (tmp_path / "link.d").symlink_to(drop, target_is_directory=True)
    assert reserved(tmp_path / "link.d") == {}  # the kubelet loads nothing through it
    assert reserved(f"{tmp_path / 'link.d'}/") == {"cpu": "1"}  # a trailing / resolves it
    assert reserved(drop / "10.conf") == {"cpu": "1"}
    (tmp_path / "x.yaml").write_text("kind: Nonsense\n")
    assert reserved(tmp_path / "x.yaml") == {}
    assert problems(tmp_path / "missing") == [
        f"--config-dir: cannot list {tmp_path / 'missing'} (No such file or directory); expected"
        " a directory of *.conf KubeletConfiguration drop-ins."
    ]


def test_a_symlinked_root_is_loaded_as_the_kubelet_loads_it_with_a_warning(tmp_path, capsys):
    """As above the kubelet loads nothing through a symlinked root, silently; cgalloc does the
    same and says so on stderr, so the operator sees why the drop-ins had no effect."""
    drop = tmp_path / "conf.d"
    dropin(drop / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    (tmp_path / "link.d").symlink_to(drop, target_is_directory=True)
    code, out, err = run_cli(capsys, "kubelet-config", "--config-dir", str(tmp_path / "link.d"))
    assert code == 0, err
    assert "kubeReserved" not in out
    assert err == (
        f"cgalloc: warning: --config-dir {tmp_path / 'link.d'} is a symlink, which the kubelet's"
        " walk (filepath.WalkDir) does not follow: none of the drop-ins in it is loaded; give"
        " the directory it points to, or end the path with '/'.\n"
    )
    for given in (f"{tmp_path / 'link.d'}/", str(drop)):  # no warning where it loads
        code, out, err = run_cli(capsys, "kubelet-config", "--config-dir", given)
        assert (code, err) == (0, "") and "cpu: '1'" in out, (out, err)


def test_the_walk_is_bounded_in_entries(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations walks without bound; cgalloc refuses
    more than DROPIN_MAX_ENTRIES files and directories in the whole tree."""
    dropin(tmp_path / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    (tmp_path / "sub").mkdir()
    for i in range(DROPIN_MAX_ENTRIES - 2):  # with 10.conf and sub/: exactly at the bound
        (tmp_path / "sub" / f"{i}.txt").touch()
    assert reserved(tmp_path) == {"cpu": "1"}
    (tmp_path / "sub" / "one-more.txt").touch()
    assert problems(tmp_path) == [
        f"--config-dir: {tmp_path} holds more than {DROPIN_MAX_ENTRIES} files and directories;"
        f" give a drop-in directory of at most {DROPIN_MAX_ENTRIES}."
    ]


def test_the_walk_is_bounded_in_depth(tmp_path):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations walks without bound; cgalloc refuses
    subdirectories more than DROPIN_MAX_DEPTH levels below --config-dir."""
    deepest = tmp_path.joinpath(*["d"] * DROPIN_MAX_DEPTH)
    dropin(deepest / "a.conf", 'kubeReserved: {cpu: "1"}\n')
    assert reserved(tmp_path) == {"cpu": "1"}
    (deepest / "d").mkdir()
    assert problems(tmp_path) == [
        f"--config-dir: {deepest / 'd'} is nested more than {DROPIN_MAX_DEPTH} directories deep"
        f" in {tmp_path}; give a flatter drop-in directory."
    ]


def test_the_drop_ins_are_bounded_in_size_together(tmp_path):
    """Each drop-in may be 4 MiB; unbounded together, 60 such files took show 217 s and 3.9 GB
    (the hostile-input review). cgalloc refuses more than 4 MiB in all of them."""
    pad = "#" * (2 << 20) + "\n"
    dropin(tmp_path / "10.conf", 'kubeReserved: {cpu: "1"}\n' + pad)
    dropin(tmp_path / "20.conf", pad[:-200])
    assert reserved(tmp_path) == {"cpu": "1"}  # just under 4 MiB together
    dropin(tmp_path / "30.conf", pad)
    (problem,) = problems(tmp_path)
    assert problem.startswith(f"--config-dir: the drop-ins in {tmp_path} hold ")
    assert problem.endswith(" bytes together, more than 4 MiB; a KubeletConfiguration drop-in"
                            " is a few KiB.")  # fmt: skip


def test_setup_with_a_dangling_dropin_is_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """cmd/kubelet/app/server.go mergeKubeletConfigurations: the kubelet fails on a dangling
    sub/50.conf; cgalloc setup exits 2 with one sentence naming --config-dir and the path."""
    root, _ = fake_hierarchy(tmp_path, "v2")
    use_fake_tree(monkeypatch, tmp_path)
    before = snapshot(root)
    drop = tmp_path / "conf.d"
    dropin(drop / "10.conf", 'kubeReserved: {cpu: "1"}\n')
    (drop / "sub").mkdir()
    (drop / "sub" / "50.conf").symlink_to(tmp_path / "missing")
    state = tmp_path / "state"
    code, out, err = run_cli(
        capsys, "setup", *CAP, "--config-dir", str(drop), "--cgroupfs", str(root),
        "--state-dir", str(state),
    )  # fmt: skip
    assert code == 2, err
    assert out == ""
    assert err.splitlines() == [
        f"cgalloc: --config-dir: cannot read {drop / 'sub' / '50.conf'} (No such file or"
        " directory); expected a KubeletConfiguration document (apiVersion"
        " kubelet.config.k8s.io/v1beta1)."
    ]
    assert snapshot(root) == before
    assert not state.exists()
