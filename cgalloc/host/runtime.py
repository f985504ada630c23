"""Where the container runtimes keep the configuration that names their cgroup driver.

containerd: ``SystemdCgroup`` of its runc runtime in ``/etc/containerd/config.toml`` (and the
files its ``imports`` name); RKE2 and K3s run their own containerd with its config under
``/var/lib/rancher``. CRI-O: ``cgroup_manager`` in ``/etc/crio/crio.conf`` and the drop-ins of
``/etc/crio/crio.conf.d``. Parsing is ``cgalloc/inputs/runtime.py``'s.
"""

from __future__ import annotations

from cgalloc.host.kubelet import NodeFiles

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
# the containerd K3s and RKE2 run (their socket is /run/k3s/containerd/containerd.sock)
RANCHER_CONTAINERD_CONFIGS = (
    "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
    "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
)
CRIO_CONFIG = "/etc/crio/crio.conf"
CRIO_DROPIN_DIR = "/etc/crio/crio.conf.d"
BINARIES = {
    "containerd": ("/usr/bin/containerd", "/usr/local/bin/containerd", "/usr/sbin/containerd"),
    "CRI-O": ("/usr/bin/crio", "/usr/local/bin/crio", "/usr/sbin/crio"),
}


def containerd_config(files: NodeFiles, endpoint: str) -> str:
    """The config file of the containerd behind ``endpoint``."""
    if "/k3s/" in endpoint:
        found = [p for p in RANCHER_CONTAINERD_CONFIGS if files.exists(p)]
        return (found or list(RANCHER_CONTAINERD_CONFIGS))[0]
    return CONTAINERD_CONFIG


def crio_configs(files: NodeFiles) -> list[str]:
    """CRI-O's config files in the order it reads them: the main file, then the drop-ins by
    name."""
    found = [CRIO_CONFIG] if files.is_file(CRIO_CONFIG) else []
    return found + [
        f"{CRIO_DROPIN_DIR}/{n}"
        for n in files.listdir(CRIO_DROPIN_DIR)
        if files.is_file(f"{CRIO_DROPIN_DIR}/{n}")
    ]


def installed(files: NodeFiles, runtime: str) -> bool:
    """Whether the runtime's program is on the node (its built-in defaults then apply)."""
    return any(files.is_file(p) for p in BINARIES[runtime])
