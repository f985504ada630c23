"""cgalloc.host.safefs: the trust rules (sshd's StrictModes from / down, sticky parents
allowed), and files below a directory descriptor that are never followed through a symlink;
and the C core's open_beneath, which the boot unit's files below --root go through."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from cgalloc.host import core, safefs
from cgalloc.host.core import pure

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing owners needs root")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---------------------------------------------------------------- trust


def test_a_root_only_directory_below_tmp_is_trusted(tmp_path):
    d = safefs.open_trusted_dir(str(tmp_path))
    assert d is not None and d.path == str(tmp_path) and d.made == []
    d.close()


def test_a_missing_directory_is_none_and_nothing_is_made(tmp_path):
    assert safefs.open_trusted_dir(str(tmp_path / "a" / "b")) is None
    assert list(tmp_path.iterdir()) == []


@needs_root
@pytest.mark.parametrize("at", ["final", "parent"])
def test_an_owner_other_than_root_is_refused_wherever_it_is(tmp_path, at):
    (tmp_path / "p" / "d").mkdir(parents=True)
    os.chown(tmp_path / "p" / ("d" if at == "final" else ""), NOBODY, -1)
    bad = tmp_path / "p" / ("d" if at == "final" else "")
    with pytest.raises(safefs.Untrusted) as err:
        safefs.open_trusted_dir(str(tmp_path / "p" / "d"))
    assert err.value.reason == f"{str(bad).rstrip('/')} is owned by uid 65534, not by root"


@pytest.mark.parametrize(
    ("parent_mode", "final_mode", "problem"),
    [
        (0o775, 0o700, "p is writable by its group (mode 0775)"),
        (0o757, 0o700, "p is writable by others (mode 0757)"),
        (0o1777, 0o700, None),  # a sticky parent, as /tmp
        (0o755, 0o1777, "p/d is writable by its group and others (mode 1777)"),
        (0o755, 0o702, "p/d is writable by others (mode 0702)"),
        (0o755, 0o755, None),
    ],
)
def test_writable_by_others_is_refused_except_a_sticky_parent(
    tmp_path, parent_mode, final_mode, problem
):
    (tmp_path / "p" / "d").mkdir(parents=True)
    os.chmod(tmp_path / "p" / "d", final_mode)
    os.chmod(tmp_path / "p", parent_mode)
    if problem is None:
        safefs.open_trusted_dir(str(tmp_path / "p" / "d")).close()
        return
    with pytest.raises(safefs.Untrusted) as err:
        safefs.open_trusted_dir(str(tmp_path / "p" / "d"))
    assert err.value.reason == f"{tmp_path}/{problem}"


@needs_root
def test_a_symlink_is_followed_and_every_directory_it_leads_through_checked(tmp_path):
    (tmp_path / "theirs" / "d").mkdir(parents=True)
    os.chown(tmp_path / "theirs", NOBODY, -1)
    (tmp_path / "link").symlink_to("theirs/d")
    with pytest.raises(safefs.Untrusted, match=r"/theirs is owned by uid 65534"):
        safefs.open_trusted_dir(str(tmp_path / "link"))


def test_a_symlink_in_a_directory_others_may_write_is_refused(tmp_path):
    (tmp_path / "ok").mkdir()
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "link").symlink_to(tmp_path / "ok")
    os.chmod(tmp_path / "open", 0o777)
    with pytest.raises(safefs.Untrusted, match=r"/open is writable by its group and others"):
        safefs.open_trusted_dir(str(tmp_path / "open" / "link"))


def test_links_with_dot_dot_resolve_physically(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "a" / "b" / "up").symlink_to("../../c")
    d = safefs.open_trusted_dir(str(tmp_path / "a" / "b" / "up"))
    assert os.fstat(d.fd).st_ino == os.stat(tmp_path / "c").st_ino
    d.close()


def test_a_symlink_loop_is_refused(tmp_path):
    (tmp_path / "x").symlink_to("y")
    (tmp_path / "y").symlink_to("x")
    with pytest.raises(safefs.Untrusted, match="more than 40 symbolic links"):
        safefs.open_trusted_dir(str(tmp_path / "x"))


def test_a_file_on_the_way_is_not_a_directory(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(safefs.Untrusted, match=rf"^{tmp_path}/f is not a directory$"):
        safefs.open_trusted_dir(str(tmp_path / "f" / "state"))


def test_made_directories_get_exact_modes_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        d = safefs.open_trusted_dir(str(tmp_path / "a" / "b"), create_mode=0o700)
    finally:
        os.umask(old)
    assert [name for _fd, name in d.made] == ["a", "b"]
    assert (_mode(tmp_path / "a"), _mode(tmp_path / "a" / "b")) == (0o755, 0o700)
    d.remove_made()
    assert list(tmp_path.iterdir()) == []


def test_nothing_is_made_where_a_dangling_symlink_points(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(FileNotFoundError):
        safefs.open_trusted_dir(str(tmp_path / "dangling" / "state"), create_mode=0o700)
    assert not (tmp_path / "gone").exists()


def test_a_trusted_file_and_the_refusals_of_one(tmp_path):
    f = tmp_path / "python"
    f.write_text("")
    safefs.check_trusted_file(str(f))
    (tmp_path / "link").symlink_to("python")
    safefs.check_trusted_file(str(tmp_path / "link"))
    os.chmod(f, 0o664)
    with pytest.raises(safefs.Untrusted, match=r"/python is writable by its group"):
        safefs.check_trusted_file(str(tmp_path / "link"))
    os.chmod(f, 0o644)
    os.chmod(tmp_path, 0o777)
    try:
        refusal = rf"^{tmp_path} is writable by its group and others"
        with pytest.raises(safefs.Untrusted, match=refusal):
            safefs.check_trusted_file(str(f))
    finally:
        os.chmod(tmp_path, 0o700)
    with pytest.raises(safefs.Untrusted, match="is not a regular file"):
        safefs.check_trusted_file(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        safefs.check_trusted_file(str(tmp_path / "missing"))


# ---------------------------------------------------------------- files below a descriptor


@pytest.fixture
def dirfd(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def test_open_read_at_refuses_a_symlink_and_a_fifo_without_waiting(tmp_path, dirfd, no_hang):
    (tmp_path / "target").write_text("secret")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(safefs.Unsafe) as err:
        safefs.open_read_at(dirfd, "link")
    assert (err.value.errno, err.value.what) == (errno.ELOOP, "a symbolic link")
    with pytest.raises(safefs.Unsafe, match="not a regular file"):
        safefs.open_read_at(dirfd, "fifo")
    with pytest.raises(FileNotFoundError):
        safefs.open_read_at(dirfd, "missing")
    fd = safefs.open_read_at(dirfd, "target")
    assert os.read(fd, 10) == b"secret"
    os.close(fd)


@pytest.mark.parametrize("planted", ["name", "tmp"])
def test_replace_at_refuses_a_planted_symlink_and_leaves_its_target(tmp_path, dirfd, planted):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / ("owned.json" if planted == "name" else "owned.json.tmp")).symlink_to(victim)
    with pytest.raises(safefs.Unsafe):
        safefs.replace_at(dirfd, "owned.json", b"{}", 0o600)
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["victim", "owned.json" if planted == "name" else "owned.json.tmp"]
    )


def test_replace_at_sets_the_mode_on_the_descriptor_and_replaces_a_leftover(tmp_path, dirfd):
    (tmp_path / "f.tmp").write_text("a killed run's")
    old = os.umask(0o777)
    try:
        safefs.replace_at(dirfd, "f", b"data", 0o644)
    finally:
        os.umask(old)
    assert (tmp_path / "f").read_bytes() == b"data" and _mode(tmp_path / "f") == 0o644
    assert not (tmp_path / "f.tmp").exists()


def test_create_exclusive_refuses_a_hard_link_to_another_file(tmp_path, dirfd):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.link(victim, tmp_path / "t")
    with pytest.raises(safefs.Unsafe, match="has 2 hard links"):
        safefs.create_exclusive(dirfd, "t", 0o600)
    assert victim.read_text() == "precious"


def test_append_and_unlink_refuse_a_symlink(tmp_path, dirfd):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "journal").symlink_to(victim)
    with pytest.raises(safefs.Unsafe):
        safefs.append_at(dirfd, "journal", b"x", 0o600)
    with pytest.raises(safefs.Unsafe):
        safefs.unlink_at(dirfd, "journal")
    assert victim.read_text() == "precious" and (tmp_path / "journal").is_symlink()
    safefs.unlink_at(dirfd, "missing")  # nothing to remove is fine


# ---------------------------------------------------------------- core.open_beneath


@pytest.fixture(params=["native", "native-walk", "pure"])
def open_beneath(request):
    if request.param == "pure":
        return pure.open_beneath
    if core.IMPLEMENTATION != "native":
        pytest.skip("the C core is not built")
    walk = request.param == "native-walk"
    return lambda *a, **kw: core.open_beneath(*a, force_walk=walk, **kw)


def test_open_beneath_refuses_a_symlink_anywhere(tmp_path, dirfd, open_beneath):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "systemd").symlink_to(outside)
    (tmp_path / "etc" / "f").symlink_to(outside / "f")
    for rel in ("etc/systemd/x", "etc/f"):
        with pytest.raises(OSError) as err:
            open_beneath(dirfd, rel, os.O_WRONLY | os.O_CREAT, 0o644)
        assert err.value.errno == errno.ELOOP, rel
    assert list(outside.iterdir()) == []
    for rel in ("../x", "/etc", "etc/../x", ""):
        with pytest.raises(ValueError):
            open_beneath(dirfd, rel, os.O_RDONLY)


def test_open_beneath_creates_with_the_mode_given(tmp_path, dirfd, open_beneath):
    (tmp_path / "etc").mkdir()
    old = os.umask(0)
    try:
        fd = open_beneath(dirfd, "etc/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    finally:
        os.umask(old)
    os.close(fd)
    assert _mode(tmp_path / "etc" / "new") == 0o640
    with pytest.raises(FileExistsError):
        open_beneath(dirfd, "etc/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
