"""host/podlogs.py: pod and container names from the kubelet's log directories, read without
following a link."""

from __future__ import annotations

import os

from cgalloc.host import podlogs

CID = "3f" * 32  # a runtime's container ID: 64 lowercase hex digits
UID = "c9a10a2c-0000-4000-8000-000000000001"


def link(directory, name: str, target: str) -> None:
    os.makedirs(directory, exist_ok=True)
    os.symlink(target, os.path.join(directory, name))


def test_pod_names_from_the_pod_log_directory(tmp_path):
    (tmp_path / "kube-system_coredns-abc_0000-1111").mkdir()
    (tmp_path / "a_b").mkdir()
    (tmp_path / "x__y").mkdir()
    assert podlogs.pod_names(str(tmp_path)) == {"0000-1111": ("kube-system", "coredns-abc")}
    assert podlogs.pod_names(str(tmp_path / "missing")) == {}


def test_a_container_link_names_its_pod_namespace_container_and_id():
    # kuberuntime legacyLogSymlink: <pod>_<namespace>_<container>-<id>.log ->
    # /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
    name = f"guaranteed-cgalloc_default_main-{CID}.log"
    target = f"/var/log/pods/default_guaranteed-cgalloc_{UID}/main/0.log"
    ref = podlogs.parse_link(name, target)
    assert ref == podlogs.ContainerRef("default", "guaranteed-cgalloc", UID, "main", CID)
    assert ref.log_dir == f"default_guaranteed-cgalloc_{UID}/main"
    # a container name with dashes keeps them; the ID is what follows the last one
    dashed = podlogs.parse_link(f"p_ns_side-car-{CID}.log", f"/x/ns_p_{UID}/side-car/3.log")
    assert dashed is not None and dashed.name == "side-car"
    # podLogsDir (1.30+) moves the pod directory; the link's last three parts still tell
    assert podlogs.parse_link(name, f"/data/pods/default_guaranteed-cgalloc_{UID}/main/0.log")


def test_links_that_are_not_the_kubelets_are_left_out():
    target = f"/var/log/pods/default_p_{UID}/main/0.log"
    for name in (
        f"p_default_main-{CID}",  # no .log
        f"p_default_main-{CID[:-1]}.log",  # not an ID
        f"p_default_main-{CID.upper()}.log",
        f"p_default_{CID}.log",  # no container name
        f"p_default_x_main-{CID}.log",  # four parts
        f"p_other_main-{CID}.log",  # the target's namespace differs
        f"q_default_main-{CID}.log",  # the target's pod differs
        f"p_default_side-{CID}.log",  # the target's container differs
    ):
        assert podlogs.parse_link(name, target) is None, name
    assert podlogs.parse_link(f"p_default_main-{CID}.log", "0.log") is None


def test_container_refs_read_the_links_text_only(tmp_path):
    links = tmp_path / "containers"
    good = f"/var/log/pods/default_p_{UID}/main/0.log"  # nothing there: never opened
    link(links, f"p_default_main-{CID}.log", good)
    link(links, f"p_default_main-{'ab' * 32}.log", "/elsewhere/0.log")
    (links / f"p_default_plain-{'cd' * 32}.log").write_text("a file, not a link")
    got = podlogs.container_refs(str(links))
    assert list(got) == [CID]
    assert got[CID].pod_uid == UID
    assert podlogs.container_refs(str(tmp_path / "missing")) == {}


def test_reads_are_bounded(tmp_path, monkeypatch):
    for i in range(5):
        (tmp_path / f"ns_p{i}_uid{i}").mkdir()
    monkeypatch.setattr(podlogs, "MAX_ENTRIES", 3)
    assert len(podlogs.pod_names(str(tmp_path))) == 3


def test_container_ids():
    assert podlogs.is_container_id(CID)
    assert not podlogs.is_container_id(CID[:-1])
    assert not podlogs.is_container_id("g" * 64)
