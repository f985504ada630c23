"""Every validation rule through `cgalloc show`: exit 2, one sentence naming the field."""

import json

import pytest
import typer
from clirun import run_cli

from cgalloc.cli import app

BASE = ("show", "--capacity", "cpu=2,memory=4Gi")


def run(capsys, *args):
    return run_cli(capsys, *BASE, *args)


def problems(capsys, *args):
    code, out, err = run(capsys, *args)
    assert code == 2, err
    assert out == ""
    lines = err.splitlines()
    assert all(line.startswith("cgalloc: ") and line.endswith(".") for line in lines)
    return lines


ENF = "enforceNodeAllocatable (--enforce-node-allocatable)"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--enforce", "pods,bogus"],
         f'option "bogus" specified for {ENF}; valid options are "pods", "system-reserved",'
         ' "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible"'
         ' or "none".'),
        (["--enforce-node-allocatable", "pods", "--enforce-node-allocatable", "pods"],
         f'duplicated enforcements "pods" in {ENF}'),
        (["--enforce", "none,pods"],
         f'{ENF} may not contain additional enforcements when "none" is specified'),
        (["--enforce", "pods,system-reserved"],
         "systemReservedCgroup (--system-reserved-cgroup) must be specified when"
         f' "system-reserved" or "system-reserved-compressible" included in {ENF}'),
        (["--enforce", "kube-reserved-compressible"],
         "kubeReservedCgroup (--kube-reserved-cgroup) must be specified when"),
        (["--enforce", "kube-reserved,kube-reserved-compressible",
          "--kube-reserved-cgroup", "/kube.slice"],
         f'both "kube-reserved" and "kube-reserved-compressible" cannot be specified together'
         f" in {ENF}"),
        (["--cgroups-per-qos=false"],
         f'cgroupsPerQOS (--cgroups-per-qos) must be set to true when "pods" contained in {ENF}'),
        (["--reserved-cpus", "0", "--system-reserved-cgroup", "/system.slice"],
         "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup"),
        (["--reserved-cpus", "0-3"],
         "reservedSystemCPUs (--reserved-cpus): 0-3 is not a subset of online-cpus 0-1"),
        (["--reserved-cpus", "3-1"], "unable to parse reservedSystemCPUs (--reserved-cpus)"),
        (["--kube-reserved", "nvidia.com/gpu=1"],
         'kubeReserved (--kube-reserved): cannot reserve "nvidia.com/gpu" resource'),
        (["--system-reserved", "hugepages-2Mi=1Gi"],
         'systemReserved (--system-reserved): cannot reserve "hugepages-2Mi" resource'),
        (["--kube-reserved", "memory=-1Gi"],
         'kubeReserved (--kube-reserved): resource quantity for "memory" cannot be negative'),
        (["--system-reserved", "cpu=1.5.0"],
         'systemReserved (--system-reserved): failed to parse quantity "1.5.0" for "cpu"'),
        (["--kube-reserved", "cpu"], 'kubeReserved (--kube-reserved): malformed pair "cpu"'),
        # a long value is cut in the sentence: a 100 KB one was echoed whole
        (["--kube-reserved", "cpu=" + "9" * 100_000 + "x"],
         f'failed to parse quantity "{"9" * 60}..." (100001 characters) for "cpu" resource'),
        (["--eviction-hard", "memory.available=1Gi"],
         'evictionHard (--eviction-hard): malformed pair "memory.available=1Gi"'),
        (["--eviction-hard", "memory.free<1Gi"],
         'evictionHard (--eviction-hard): unsupported eviction signal "memory.free"'),
        (["--eviction-hard", "nodefs.available<101%"],
         "eviction percentage threshold nodefs.available must be <= 100%: 101%"),
        (["--eviction-hard", "nodefs.available<-1%"],
         "eviction percentage threshold nodefs.available must be >= 0%: -1%"),
        (["--eviction-hard", "memory.available<0"],
         "eviction threshold memory.available must be positive: 0"),
        (["--qos-reserved", "memory=50"],
         'qosReserved (--qos-reserved): percentage expected, got "50"'),
        (["--qos-reserved", "memory=101%"],
         "qosReserved (--qos-reserved): percentage must be between 0 and 100"),
        # pkg/kubelet/cm/helpers.go parsePercentage: ParseInt(TrimRight(v, "%"), 10, 0); cases
        # from helpers_test.go TestParsePercentage/TestParseQOSReserved, and "+-5%" (a traceback)
        (["--qos-reserved", "memory=5.5%"],
         'qosReserved (--qos-reserved): invalid number in percentage "5.5%"'),
        (["--qos-reserved", "memory=abc%"],
         'qosReserved (--qos-reserved): invalid number in percentage "abc%"'),
        (["--qos-reserved", "memory=%"],
         'qosReserved (--qos-reserved): invalid number in percentage "%"'),
        (["--qos-reserved", "memory=+-5%"],
         'qosReserved (--qos-reserved): invalid number in percentage "+-5%"'),
        (["--qos-reserved", "memory=1_0%"],
         'qosReserved (--qos-reserved): invalid number in percentage "1_0%"'),
        # past int64, ParseInt's range error: "invalid number" (5000 digits raised ValueError
        # from int(), a traceback)
        (["--qos-reserved", "memory=" + "1" * 5000 + "%"],
         "qosReserved (--qos-reserved): invalid number in percentage"),
        (["--qos-reserved", "memory=9223372036854775808%"],
         "qosReserved (--qos-reserved): invalid number in percentage"),
        (["--qos-reserved", "memory=200%%"],
         "qosReserved (--qos-reserved): percentage must be between 0 and 100"),
        (["--qos-reserved", "memory="],
         'qosReserved (--qos-reserved): percentage expected, got ""'),
        (["--qos-reserved", "cpu=10%"], 'qosReserved (--qos-reserved): cannot reserve "cpu"'),
        (["--cgroup-driver", "runc"], 'cgroupDriver (--cgroup-driver): "runc" is not a cgroup'),
        (["--cgroups-per-qos=yes"], 'cgroupsPerQOS (--cgroups-per-qos): "yes" is not a boolean'),
        # pflag's boolValue.Set is strconv.ParseBool(s), untrimmed: " true" is an error
        (["--cgroups-per-qos= true"],
         'cgroupsPerQOS (--cgroups-per-qos): " true" is not a boolean'),
        # MapStringString.Set trims with strings.TrimSpace, which keeps \x1c-\x1f (Python's
        # strip() took them): "1\x1c" stays no quantity, as in the kubelet
        (["--kube-reserved", "cpu=1\x1c"], "kubeReserved (--kube-reserved)"),
        (["--experimental-allocatable-ignore-eviction=maybe"],
         '--experimental-allocatable-ignore-eviction: "maybe" is not a boolean'),
        (["--pod-max-pids", "many"], 'podPidsLimit (--pod-max-pids): "many" is not an integer'),
        # pflag StringSlice keeps the space and the empty item; ValidateKubeletConfiguration
        # (pkg/kubelet/apis/config/validation/validation.go) then refuses them as options
        (["--enforce", "pods, kube-reserved"], f'option " kube-reserved" specified for {ENF}'),
        (["--enforce", "pods,"], f'option "" specified for {ENF}'),
        # pflag's readAsCSV is encoding/csv's Read: a quote inside an item, or one left open,
        # is its ParseError (go/src/encoding/csv/reader.go readRecord), as the kubelet prints it
        (["--enforce", 'po"ds'],
         f'{ENF}: invalid argument "po\\"ds": parse error on line 1, column 3: bare " in'
         " non-quoted-field"),
        (["--enforce", '"pods'],
         f'{ENF}: invalid argument "\\"pods": parse error on line 1, column 6: extraneous or'
         ' missing " in quoted-field'),
        # a quoted item keeps its comma, and the kubelet refuses the option it makes
        (["--enforce", '"pods,kube-reserved"'], f'option "pods,kube-reserved" specified for {ENF}'),
        # Read gives the first record only: the kubelet would drop kube-reserved unseen
        (["--enforce", "pods\nkube-reserved"],
         f'{ENF}: "pods\\nkube-reserved" holds more than one CSV record'),
        (["--enforce", "\r\n\n"], f'{ENF}: "\\r\\n\\n" holds only line breaks'),
        (["--capacity", "gpus=2"], '--capacity: unknown "gpus" resource'),
        (["--capacity", "memory=lots"], '--capacity: failed to parse quantity "lots"'),
        # a size no kernel has names a hugetlb file no cgroup has: setup planned a write to a
        # file with a 300-character name (the hostile-input review)
        (["--capacity", "hugepages-1e400=1"], "--capacity: hugepages-1e400 is no huge page size"),
        (["--capacity", "hugepages-3Mi=0"], "--capacity: hugepages-3Mi is no huge page size"),
        (["--capacity", "hugepages-32Gi=0"], "a power of two from 64Ki to 16Gi"),
        (["--capacity", "cpu=-2"],
         '--capacity: resource quantity for "cpu" cannot be negative: -2'),
        (["--enforce", "pods,pods-compressible"],
         f'option "pods-compressible" specified for {ENF}'),
        (["--enforce", "system-reserved,system-reserved-compressible",
          "--system-reserved-cgroup", "/system.slice"],
         'both "system-reserved" and "system-reserved-compressible" cannot be specified together'),
        (["--enforce", "system-reserved-compressible", "--system-reserved-cgroup", "/s.slice",
          "--enforce", "system-reserved-compressible"],
         f'duplicated enforcements "system-reserved-compressible" in {ENF}'),
        (["--reserved-cpus", "1", "--kube-reserved-cgroup", "/kube.slice"],
         "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup"
         " (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)"),
        (["--reserved-cpus", "one"], 'unable to parse reservedSystemCPUs (--reserved-cpus) "one"'),
        (["--system-reserved", "ephemeral-storage=ten"],
         'systemReserved (--system-reserved): failed to parse quantity "ten" for'
         ' "ephemeral-storage"'),
        (["--kube-reserved", "pid=-5"],
         'kubeReserved (--kube-reserved): resource quantity for "pid" cannot be negative: -5'),
        (["--eviction-hard", "memory.available"],
         'evictionHard (--eviction-hard): malformed pair "memory.available"'),
        (["--eviction-hard", "memory.available<lots"],
         'evictionHard (--eviction-hard): eviction threshold memory.available has malformed'
         ' value "lots"'),
        (["--eviction-hard", "nodefs.available<ten%"],
         'eviction threshold nodefs.available has malformed percentage "ten%"'),
        (["--eviction-hard", "memory.available<-1Gi"],
         "eviction threshold memory.available must be positive: -1Gi"),
        (["--qos-reserved", "memory"], 'qosReserved (--qos-reserved): malformed pair "memory"'),
        (["--qos-reserved", "memory=-1%"],
         'qosReserved (--qos-reserved): percentage must be between 0 and 100, got "-1%"'),
    ],
)  # fmt: skip
def test_rule(capsys, args, expected):
    lines = problems(capsys, *args)
    assert len(lines) == 1, lines
    assert expected in lines[0]


def test_every_problem_is_reported_together(capsys):
    lines = problems(
        capsys,
        "--kube-reserved", "gpu=1,memory=-1",
        "--eviction-hard", "foo<1,memory.available<150%",
        "--enforce", "pods,bogus",
        "--cgroup-driver", "x",
    )  # fmt: skip
    assert len(lines) == 6
    for field in ("kubeReserved", "evictionHard", "enforceNodeAllocatable", "cgroupDriver"):
        assert any(field in line for line in lines)


def test_config_file_wrong_kind_and_ignored_fields(capsys, tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "featureGates: {Foo: true}\nstaticPodPath: /etc/kubernetes/manifests\n"
    )
    code, _, err = run(capsys, "--config", str(ok))
    assert code == 0, err
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n")
    lines = problems(capsys, "--config", str(bad))
    assert lines == [
        f'cgalloc: --config: {bad} has apiVersion "kubelet.config.k8s.io/v1alpha1" and kind'
        ' "KubeletConfiguration"; expected apiVersion kubelet.config.k8s.io/v1beta1 and kind'
        " KubeletConfiguration."
    ]


def test_config_file_problems_name_the_config_field(capsys, tmp_path):
    bad = tmp_path / "k.yaml"
    bad.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "enforceNodeAllocatable: [pods, nope]\nevictionHard: {memory.available: 200%}\n"
    )
    lines = problems(capsys, "--config", str(bad))
    assert len(lines) == 2
    assert ENF in lines[0] or ENF in lines[1]
    assert any("evictionHard (--eviction-hard)" in line for line in lines)


# ---- the kubelet's boolean flags take pflag's forms ----------------------------------------


def show_json(capsys, *args):
    code, out, err = run(capsys, "-o", "json", *args)
    assert code == 0, err
    return json.loads(out)


# 8Gi of memory, the default memory.available<100Mi: 8092Mi allocatable, 8Gi when ignored.
MEM = ("--capacity", "memory=8Gi,hugepages-2Mi=0,hugepages-1Gi=0")


@pytest.mark.parametrize(
    ("args", "allocatable"),
    [
        ([], "8092Mi"),
        (["--experimental-allocatable-ignore-eviction"], "8Gi"),
        (["--experimental-allocatable-ignore-eviction=true"], "8Gi"),
        (["--experimental-allocatable-ignore-eviction=false"], "8092Mi"),
        (["--experimental-allocatable-ignore-eviction=1"], "8Gi"),
        # a bare flag followed by another option does not swallow that option
        (["--experimental-allocatable-ignore-eviction", "--cgroup-driver", "systemd"], "8Gi"),
    ],
)
def test_ignore_eviction_forms(capsys, args, allocatable):
    doc = show_json(capsys, *MEM, *args)
    assert doc["allocatable"]["memory"] == allocatable


@pytest.mark.parametrize(
    ("args", "kubepods"),
    [
        (["--cgroups-per-qos"], "/kubepods"),
        (["--cgroups-per-qos=true"], "/kubepods"),
        (["--cgroups-per-qos=false", "--enforce", "none"], None),
        (["--enforce", "none", "--cgroups-per-qos=False"], None),
    ],
)
def test_cgroups_per_qos_forms(capsys, args, kubepods):
    doc = show_json(capsys, *MEM, *args)
    assert doc["kubepods"]["cgroup"] == kubepods


@pytest.mark.parametrize("word", ["false", "true"])
def test_bool_value_as_separate_argument_is_refused(capsys, word):
    lines = problems(capsys, "--cgroups-per-qos", word, "--enforce", "none")
    assert lines == [
        "cgalloc: cgroupsPerQOS (--cgroups-per-qos): a boolean flag takes its value after '=',"
        f" as in --cgroups-per-qos={word}; a bare --cgroups-per-qos means true."
    ]
    lines = problems(capsys, "--experimental-allocatable-ignore-eviction", word)
    assert lines == [
        "cgalloc: --experimental-allocatable-ignore-eviction: a boolean flag takes its value"
        f" after '=', as in --experimental-allocatable-ignore-eviction={word}; a bare"
        " --experimental-allocatable-ignore-eviction means true."
    ]


@pytest.mark.parametrize("command", ["show", "stats", "setup", "verify", "kubelet-config"])
def test_every_node_input_command_parses_bare_bools(command):
    group = typer.main.get_command(app)
    cmd = group.commands[command]
    args = ["--cgroups-per-qos", "--experimental-allocatable-ignore-eviction"]
    with cmd.make_context(command, args) as ctx:
        assert ctx.params["cgroups_per_qos"] == "true"
        assert ctx.params["ignore_eviction"] == "true"
    with cmd.make_context(command, ["--cgroups-per-qos=false"]) as ctx:
        assert ctx.params["cgroups_per_qos"] == "false"
