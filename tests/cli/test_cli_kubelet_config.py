"""kubelet-config emits the daemons' cgroups (issue 10 §1): kubeletCgroups, runtimeCgroups,
systemCgroups matching the reserved cgroups setup makes; cgalloc reads them from a config."""

from __future__ import annotations

import json

import pytest
import yaml
from clirun import run_cli

from cgalloc.errors import InputError
from cgalloc.inputs.config import load_node_config

KUBE = ["--kube-reserved", "cpu=500m", "--system-reserved", "cpu=500m"]


def fragment(capsys, *args: str) -> dict:
    code, out, err = run_cli(capsys, "kubelet-config", *KUBE, *args)
    assert code == 0, err
    return yaml.safe_load(out)


def _daemons(doc: dict) -> dict:
    return {
        k: v for k, v in doc.items() if k in ("kubeletCgroups", "runtimeCgroups", "systemCgroups")
    }


def test_cgroupfs_daemons_run_in_the_reserved_cgroups_themselves(capsys):
    # --kube-reserved-procs puts kubelet and the runtime into the kube-reserved cgroup itself;
    # the kubelet opens these names as cgroupfs paths (pkg/kubelet/cm newSystemCgroups)
    doc = fragment(
        capsys, "--enforce", "pods,kube-reserved,system-reserved",
        "--kube-reserved-cgroup", "/kube-reserved", "--system-reserved-cgroup", "/system",
    )  # fmt: skip
    assert _daemons(doc) == {
        "kubeletCgroups": "/kube-reserved",
        "runtimeCgroups": "/kube-reserved",
        "systemCgroups": "/system",
    }


def test_systemd_daemons_are_units_in_the_kube_reserved_slice(capsys):
    # install-unit --daemons gives kubelet.service and containerd.service Slice=kube-reserved
    # .slice; systemd places a unit in its slice's expanded path (kube.slice/kube-reserved.slice)
    doc = fragment(
        capsys, "--cgroup-driver", "systemd", "--enforce", "pods,kube-reserved,system-reserved",
        "--kube-reserved-cgroup", "/kube-reserved.slice", "--system-reserved-cgroup",
        "/system.slice",
    )  # fmt: skip
    assert _daemons(doc) == {
        "kubeletCgroups": "/kube.slice/kube-reserved.slice/kubelet.service",
        "runtimeCgroups": "/kube.slice/kube-reserved.slice/containerd.service",
        "systemCgroups": "/system.slice",
    }


def test_unenforced_reservations_name_no_daemon_cgroup(capsys):
    # setup makes a reserved cgroup only when it is enforced
    doc = fragment(capsys, "--kube-reserved-cgroup", "/kube", "--system-reserved-cgroup", "/sys")
    assert _daemons(doc) == {}


def test_values_from_a_kubelet_config_are_read_and_kept(tmp_path, capsys):
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "kubeletCgroups: /kubelet\nruntimeCgroups: /runtime.slice/containerd.service\n"
        "systemCgroups: /system.slice\ncgroupRoot: /\n"
    )
    cfg = load_node_config({}, config=str(config))
    assert (cfg.kubelet_cgroups, cfg.runtime_cgroups, cfg.system_cgroups) == (
        "/kubelet",
        "/runtime.slice/containerd.service",
        "/system.slice",
    )
    doc = fragment(capsys, "--config", str(config), "--enforce", "pods,kube-reserved",
                   "--kube-reserved-cgroup", "/kube")  # fmt: skip
    assert _daemons(doc) == {
        "kubeletCgroups": "/kubelet",
        "runtimeCgroups": "/runtime.slice/containerd.service",
        "systemCgroups": "/system.slice",
    }


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        # pkg/kubelet/cm setupNode: "system container cannot be root"
        (
            "systemCgroups: /\ncgroupRoot: /\n",
            "systemCgroups (--system-cgroups): the system container cannot",
        ),
        # ValidateKubeletConfiguration: systemCgroups without cgroupRoot; the config types
        # give cgroupRoot no default (server.go's run() makes it "/" after validation), so
        # leaving it out is refused too (cgalloc had defaulted it to "/" and accepted the file)
        (
            "systemCgroups: /system.slice\ncgroupRoot: ''\n",
            "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was",
        ),
        (
            "systemCgroups: /system.slice\n",
            "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was",
        ),
        # the kubelet stops at validation before setupNode's root check
        ("systemCgroups: /\ncgroupRoot: ''\n", "cgroupRoot (--cgroup-root) was not specified"),
        ("kubeletCgroups: kubelet\n", 'kubeletCgroups (--kubelet-cgroups): "kubelet" is not abs'),
    ],
)
def test_daemon_cgroups_the_kubelet_refuses(tmp_path, yaml_text, message):
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + yaml_text
    )
    with pytest.raises(InputError) as err:
        load_node_config({}, config=str(config))
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("args", "warning"),
    [
        (["--cgroup-root", "/" + "a" * 300],
         "setup refuses this cgroup: cgroupRoot (--cgroup-root): the cgroup /aaa"),
        ([*KUBE, "--enforce", "pods,kube-reserved", "--kube-reserved-cgroup", "/kubepods/k"],
         "setup refuses this placement: kubeReservedCgroup (--kube-reserved-cgroup) /kubepods/k"
         " must not be kubepods (/kubepods) or inside it"),
    ],
)  # fmt: skip
def test_a_cgroup_setup_refuses_is_warned_as_show_warns(capsys, args, warning):
    # tree.setup_refusals: kubelet-config printed a fragment for a tree setup would refuse,
    # without a word (the hostile-input review); show says the same sentence
    for command in ("kubelet-config", "show"):
        code, out, err = run_cli(capsys, command, "--capacity", "cpu=4,memory=8Gi", *args)
        assert code == 0 and out, err
        warnings = [line for line in err.splitlines() if "setup refuses" in line]
        assert len(warnings) == 1 and warnings[0].startswith(f"cgalloc: warning: {warning}"), err


def test_cpu_manager_policy_options_are_printed_one_flag_each(capsys):
    # The kubelet's flag is cliflag.NewMapStringStringNoSplit (cmd/kubelet/app/options/options.go):
    # "--cpu-manager-policy-options=a=true,b=true" is option a = "true,b=true", which it refuses.
    static = ["--cpu-manager-policy=static", "--reserved-cpus=0"]
    code, out, err = run_cli(
        capsys, "kubelet-config", *KUBE, *static,
        "--cpu-manager-policy-options", "full-pcpus-only=true",
        "--cpu-manager-policy-options", "strict-cpu-reservation=true",
    )  # fmt: skip
    assert code == 0, err
    prefix = "#   --cpu-manager-policy-options="
    flags = [line[len("#   ") :] for line in out.splitlines() if line.startswith(prefix)]
    assert flags == [
        "--cpu-manager-policy-options=full-pcpus-only=true",
        "--cpu-manager-policy-options=strict-cpu-reservation=true",
    ]
    # the printed flags read back (a single comma-joined flag is now refused, as the kubelet does)
    code, _, err = run_cli(capsys, "show", "--capacity", "cpu=4,memory=8Gi", *static, *flags)
    assert code == 0, err


def test_memory_reservation_policy_goes_in_the_config_with_a_note(tmp_path, capsys):
    config = tmp_path / "kubelet.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "memoryReservationPolicy: TieredReservation\n"
    )
    code, out, err = run_cli(capsys, "kubelet-config", "--config", str(config), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["memoryReservationPolicy"] == "TieredReservation"
    note = "memoryReservationPolicy has no kubelet flag; put it in the config file."
    assert f"cgalloc: note: {note}" in err.splitlines()
    code, out, _ = run_cli(capsys, "kubelet-config", "--config", str(config), "-o", "flags")
    assert code == 0 and "reservation" not in out.lower()  # the kubelet has no flag
