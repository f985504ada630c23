"""Plain YAML scalars resolve as the kubelet's decoder resolves them: sigs.k8s.io/yaml's
YAMLToJSON unmarshals with go-yaml v2, whose resolve() (resolve.go) differs from PyYAML's YAML
1.1 rules. Found by a hostile-user probe: ``kubeReserved: {cpu: 1e3}`` was accepted as the
string "1e3", where the kubelet reads a number and refuses the file."""

from __future__ import annotations

import json
import math

import pytest
from clirun import run_cli

from cgalloc.inputs.gostrconv import go_yaml_scalar
from cgalloc.inputs.loading import load_yaml_documents


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # go-yaml v2 decode_test.go unmarshalTests (values of "v: ..."), and resolve()'s rules
        ("0.1", 0.1),
        (".1", 0.1),
        ("-.1", -0.1),
        ("-10", -10),
        ("0b10", 2),
        ("0x0A", 10),
        ("0o17", 15),
        ("010", 8),  # a leading 0 is octal (ParseInt base 0)
        ("08", 8.0),  # not octal, so yamlStyleFloat's float
        ("4294967296", 4294967296),
        ("18446744073709551615", 18446744073709551615),  # ParseUint
        ("18446744073709551616", 1.8446744073709552e19),  # beyond uint64: a float
        ("6.8523e+5", 685230.0),
        ("685.230_15e+03", 685230.15),
        ("685_230.15", 685230.15),
        ("1e3", 1000.0),  # a string to PyYAML
        ("1.5e3", 1500.0),  # a string to PyYAML (it wants a sign in the exponent)
        ("1_000", 1000),
        ("1e400", "1e400"),  # ParseFloat's ErrRange: the string stays
        ("190:20:30", "190:20:30"),  # no base-60 (PyYAML: 685230)
        ("1:30", "1:30"),
        ("y", True),
        ("Y", True),
        ("n", False),
        ("yes", True),
        ("off", False),
        ("TRUE", True),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("+", "+"),
        ("500m", "500m"),
        ("1Gi", "1Gi"),
        ("0x1p-2", "0x1p-2"),  # hex floats are not yamlStyleFloat
        # a scalar that starts with "." goes to ParseFloat as it stands, its "_" kept: Go's
        # float syntax takes one between digits (atof_test.go: "1_23.50_0_0e+1_2")
        (".1_5", 0.15),
        (".1__5", ".1__5"),
        (".5_", ".5_"),
        (".1e400", ".1e400"),  # ErrRange
        (".infinity", ".infinity"),
    ],
)
def test_go_yaml_scalar_is_go_yaml_v2_resolve(text, want):
    assert go_yaml_scalar(text) == want
    assert type(go_yaml_scalar(text)) is type(want)


def test_a_float_go_may_misread_is_refused():
    # ParseFloat's fallback (decimal.set) keeps 800 digits and places the point by that count:
    # "5<800 zeros>e-800" can read as 0.5 (maxPods then fails to decode), exactly it is 5.0
    with pytest.raises(ValueError, match="more than 800 significant digits"):
        go_yaml_scalar("5" + "0" * 800 + "e-800")
    assert go_yaml_scalar("0" * 900 + "5.5") == 5.5  # leading zeros are not significant


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        ("v: 1e3", 1000.0),
        ("v: y", True),
        ("v: '1e3'", "1e3"),  # quoted: a string, as in Go
        ('{"v": 1e3}', 1000.0),
        ("v: .nan", "nan"),
        ("v: t", "t"),
        ("v: 2006-01-02", "date"),  # timestamps resolve first, as go-yaml tries them first
    ],
)
def test_the_loader_resolves_plain_scalars_as_go_yaml(doc, want):
    value = load_yaml_documents(doc, "x")[0]["v"]
    if want == "nan":
        assert math.isnan(value)
    elif want == "date":
        assert type(value).__name__ == "date"
    else:
        assert value == want and type(value) is type(want)


def test_an_unquoted_exponent_in_kube_reserved_is_refused_as_the_kubelet_refuses_it(
    tmp_path, capsys
):
    config = tmp_path / "k.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "kubeReserved: {cpu: 1e3}\n"
    )
    code, _out, err = run_cli(
        capsys, "show", "--capacity", "cpu=4,memory=8Gi", "--config", str(config)
    )
    assert code == 2
    assert "cannot unmarshal number into Go struct field KubeletConfiguration.kubeReserved" in err


@pytest.mark.parametrize(
    ("value", "pods", "refused"),
    [
        # encoding/json decodes a float64 json.Marshal wrote as an integer literal into an int
        ("1e2", "100", None),
        ("1.5e2", "150", None),
        ("1.5", None, "cannot unmarshal number 1.5 into Go struct field"),
        ("1e21", None, "cannot unmarshal number 1e+21 into Go struct field"),
        ("1e10", None, "cannot unmarshal number 10000000000 into Go struct field"),
    ],
)  # fmt: skip
def test_a_float_max_pods_decodes_as_encoding_json_decodes_it(
    tmp_path, capsys, value, pods, refused
):
    config = tmp_path / "k.yaml"
    config.write_text(
        f"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: {value}\n"
    )
    code, out, err = run_cli(
        capsys, "show", "--capacity", "cpu=4,memory=8Gi", "--config", str(config), "-o", "json"
    )
    if refused:
        assert code == 2 and refused in err, err
    else:
        assert code == 0, err
        assert json.loads(out)["allocatable"]["pods"] == pods
