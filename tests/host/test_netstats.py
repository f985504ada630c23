"""Node network figures: which interfaces count (as cAdvisor counts them), and pyroute2 only on
the netlink path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from statstree import fake_sysfs_net, make_v2

from cgalloc.host import netstats

ZERO = dict(rx_bytes=0, rx_errors=0, tx_bytes=0, tx_errors=0)

# google/cadvisor container/libcontainer/handler.go, isIgnoredDevice / ignoredDevicePrefixes
# ("lo", "veth", "docker", "nerdctl", compared lower-cased), applied by scanInterfaceStats to
# the root container's interfaces (container/raw/handler.go gives the root cgroup pid 1).
DROPPED = ["lo", "veth1a2b3c", "VETHX", "docker0", "nerdctl0", "lowpan0"]
KEPT = ["cali12ab", "cni0", "eth0", "ens3", "flannel.1", "virbr0"]  # not in cAdvisor's list


def test_sysfs_counters_drop_the_interfaces_cadvisor_drops(tmp_path):
    net = fake_sysfs_net(tmp_path, {name: ZERO for name in DROPPED + KEPT})
    assert [i.name for i in netstats.from_sysfs(net)] == sorted(KEPT)


@pytest.mark.parametrize("name", DROPPED)
def test_ignored_matches_cadvisor_prefixes(name):
    assert netstats.ignored(name)


@pytest.mark.parametrize("name", KEPT)
def test_not_ignored(name):
    assert not netstats.ignored(name)


NETNS_SCRIPT = """
set -e
ip link add eth0 type veth peer name veth0
ip link add docker0 type veth peer name cni0
ip link add nerdctl0 type veth peer name flannel.1
mount -t sysfs sysfs "$1"
exec "$2" -c '
import json, sys
from cgalloc.host import netstats
print(json.dumps({
    "sysfs": [i.name for i in netstats.from_sysfs(sys.argv[1] + "/class/net")],
    "netlink": [i.name for i in netstats.from_netlink()],
}))' "$1"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a network namespace needs root")
@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("ip")), reason="no unshare/ip")
def test_a_network_namespace_of_veth_pairs_is_filtered_on_both_paths(tmp_path):
    """Real kernel interfaces, in a network (and mount) namespace this test creates: the veth
    pairs and the sysfs mount vanish with it; nothing touches the host's namespace."""
    mnt = tmp_path / "sys"
    mnt.mkdir()
    out = subprocess.run(
        ["unshare", "--net", "--mount", "--propagation", "private",
         "sh", "-c", NETNS_SCRIPT, "netns", str(mnt), sys.executable],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if out.returncode and "Operation not permitted" in out.stderr:
        pytest.skip(f"no network namespaces here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    names = json.loads(out.stdout)
    # lo, veth0, docker0 and nerdctl0 are dropped; cni0 and flannel.1 are kept as cAdvisor does
    assert names["sysfs"] == ["cni0", "eth0", "flannel.1"]
    assert names["netlink"] == names["sysfs"]


LOADED = (
    "import sys\nfrom cgalloc.cli import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
    "print('pyroute2' in sys.modules or any(m.startswith('pyroute2.') for m in sys.modules))"
)


@pytest.mark.parametrize("output", ["table", "json"])
def test_stats_does_not_import_pyroute2_where_sysfs_has_the_counters(tmp_path, output):
    """pyroute2 is for hosts without /sys/class/net only; the table shows no network figures."""
    if not os.path.isdir(netstats.SYSFS_NET):
        pytest.skip("this host has no /sys/class/net: the netlink path is the one taken")
    root = str(tmp_path / "cg")
    make_v2(root, "", usage=0)
    make_v2(root, "kubepods", usage=4096)
    out = subprocess.run(
        [sys.executable, "-c", LOADED, "stats", "--cgroupfs", root, "--interval", "0",
         "-o", output],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.strip().splitlines()[-1] == "False"
