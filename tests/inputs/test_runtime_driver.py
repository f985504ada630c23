"""The container runtime's cgroup driver from its config text, and the driver sanity check's
sentences (cgalloc/inputs/runtime.py)."""

from __future__ import annotations

import pytest

from cgalloc.inputs import runtime as rt

# containerd 1.x's config as the kubeadm docs have it (config version 2)
V2_SYSTEMD = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
"""
# containerd 2.x (config version 3)
V3_SYSTEMD = """\
version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
"""


@pytest.mark.parametrize(
    ("texts", "driver", "source"),
    [
        ([("/c", V2_SYSTEMD)], "systemd", "SystemdCgroup = true for runtime runc in /c"),
        ([("/c", V3_SYSTEMD)], "systemd", "SystemdCgroup = true for runtime runc in /c"),
        # kubernetes#111776: a config without SystemdCgroup is containerd's default, cgroupfs
        ([("/c", 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                 'snapshotter = "overlayfs"\n')],
         "cgroupfs", "SystemdCgroup unset for runtime runc in /c, so cgroupfs"),
        # no file at all: containerd's built-in default
        ([], "cgroupfs", "containerd's default (no config file), so cgroupfs"),
        # kubernetes#105762: without "version = 2" the file is version 1, whose CRI plugin is
        # "cri"; the v2 section names a plugin version 1 does not have
        ([("/c", V2_SYSTEMD.replace("version = 2\n", ""))], "cgroupfs",
         "/c (no 'cri' section for config version 1), so cgroupfs"),
        ([("/c", "[plugins.cri.containerd.runtimes.runc.options]\nSystemdCgroup = true\n")],
         "systemd", "SystemdCgroup = true for runtime runc in /c"),
        # the key's case does not matter to containerd's decoder
        ([("/c", V2_SYSTEMD.replace("SystemdCgroup", "systemdCgroup"))], "systemd",
         "SystemdCgroup = true for runtime runc in /c"),
        # the default runtime's options count, not runc's
        ([("/c", V2_SYSTEMD + '[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                 'default_runtime_name = "crun"\n')],
         "cgroupfs", "SystemdCgroup unset for runtime crun in /c, so cgroupfs"),
        # an import's CRI section replaces the main file's (containerd 1.x mergeConfig)
        ([("/c", V2_SYSTEMD),
          ("/d/x.toml",
           'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "p"\n')],
         "cgroupfs", "SystemdCgroup unset for runtime runc in /d/x.toml, so cgroupfs"),
        # version 3 imports merge key by key (containerd 2.x)
        ([("/c", V3_SYSTEMD),
          ("/d/x.toml", "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nx = 1\n")],
         "systemd", "SystemdCgroup = true for runtime runc in /d/x.toml"),
    ],
)  # fmt: skip
def test_containerd_driver(texts, driver, source):
    got = rt.containerd_driver(texts)
    assert (got.runtime, got.driver, got.source) == ("containerd", driver, source)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version = 2\n[plugins", "is not valid TOML"),
        ("version = 7\n", "config version 7"),
        (V2_SYSTEMD.replace("true", '"true"'), "is not a boolean"),
    ],
)
def test_containerd_config_containerd_would_refuse(text, message):
    with pytest.raises(ValueError, match=message):
        rt.containerd_driver([("/c", text)])


def test_containerd_imports_are_taken_from_the_files_directory():
    text = 'imports = ["/etc/containerd/conf.d/*.toml", "extra.toml"]\n'
    assert rt.containerd_imports(text, "/etc/containerd/config.toml") == [
        "/etc/containerd/conf.d/*.toml",
        "/etc/containerd/extra.toml",
    ]


def test_crio_driver_defaults_to_systemd_and_the_last_file_wins():
    assert rt.crio_driver([]).driver == "systemd"
    got = rt.crio_driver(
        [
            ("/etc/crio/crio.conf", '[crio.runtime]\ncgroup_manager = "cgroupfs"\n'),
            ("/etc/crio/crio.conf.d/10-x.conf", "[crio.runtime]\nconmon = \"/usr/bin/conmon\"\n"),
        ]
    )
    assert (got.driver, got.source) == (
        "cgroupfs",
        'cgroup_manager = "cgroupfs" in /etc/crio/crio.conf',
    )


@pytest.mark.parametrize(
    ("endpoint", "runtime"),
    [
        ("unix:///run/containerd/containerd.sock", "containerd"),
        ("unix:///run/k3s/containerd/containerd.sock", "containerd"),
        ("unix:///var/run/crio/crio.sock", "CRI-O"),
        ("unix:///var/run/cri-dockerd.sock", None),
    ],
)
def test_runtime_of_endpoint(endpoint, runtime):
    assert rt.runtime_of(endpoint) == runtime


def test_driver_problems():
    runtime = rt.RuntimeDriver("containerd", "systemd", "SystemdCgroup = true in /c")
    assert rt.driver_problems("systemd", "x", True, runtime) == []
    assert rt.driver_problems("systemd", "x", False, None) == []
    [pid1] = rt.driver_problems("cgroupfs", "the kubelet's default", True, None)
    assert pid1.startswith(
        "the kubelet's cgroup driver is cgroupfs (the kubelet's default) but systemd is PID 1"
    )
    assert pid1.endswith("or give --allow-driver-mismatch to go on.")
    both = rt.driver_problems("cgroupfs", "cgroupDriver in /k.yaml", True, runtime)
    assert len(both) == 2
    assert both[1].startswith(
        "the kubelet's cgroup driver is cgroupfs (cgroupDriver in /k.yaml) but containerd's is"
        " systemd (SystemdCgroup = true in /c)"
    )
    assert "kubernetes#111776" in both[1]
