"""cgalloc.yamlout against PyYAML itself: for every document it accepts, the bytes are
yaml.safe_dump's (sort_keys=True, default_flow_style=False), and yaml.safe_load reads the data
back; whatever it refuses is Unsupported, never a different text."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cgalloc import yamlout
from cgalloc.cli.render import OutputFormat, dumps

PROPS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=600)

# Text rich in what changes a scalar's style: indicators, spaces, digits, words YAML resolves.
TRICKY = st.one_of(
    st.text(alphabet="abyYnNoO01-+.:#,?[]{}&*!|>'\"%@`~=< _exINFnaul/\t", max_size=12),
    st.sampled_from(
        [
            "yes",
            "No",
            "on",
            "OFF",
            "true",
            "null",
            "~",
            "",
            "<<",
            "=",
            "0x1f",
            "0o7",
            "017",
            "1_000",
            "1:30",
            "1:30.5",
            ".inf",
            "-.Inf",
            ".NaN",
            "1e3",
            "1.5e+3",
            "2001-12-14",
            "2001-12-14 21:59:43.10 -5",
            "---",
            "...",
            "- a",
            "a #b",
            "500m",
            "2Gi",
            "/kubepods.slice",
            "cpu=500m,memory=1Gi",
        ]
    ),
    st.text(max_size=90),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), TRICKY)
DOCS = st.recursive(
    SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(TRICKY, kids, max_size=4)),
    max_leaves=25,
)


def _pyyaml(data: object) -> str:
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False)


@PROPS
@given(DOCS)
@example({"a": [{"b": [1, [2, []]], "c": {}}], "b": {"c": {"d": "1"}}})
@example({"note": "a long note with spaces that PyYAML would fold past eighty columns ......"})
def test_dump_is_pyyaml_byte_for_byte_or_unsupported(data):
    # Oracle: PyYAML 6 yaml/emitter.py Emitter.choose_scalar_style and yaml/resolver.py.
    try:
        text = yamlout.dump(data)
    except yamlout.Unsupported:
        return
    assert text == _pyyaml(data)
    assert yaml.safe_load(text) == data


# Strings of the shapes cgalloc prints are all written here, not handed back to PyYAML.
@pytest.mark.parametrize(
    "data",
    [
        {"kubeReserved": {"cpu": "500m", "memory": "2Gi"}, "cgroupsPerQOS": True,
         "enforceNodeAllocatable": ["pods", "kube-reserved"], "podPidsLimit": -1,
         "evictionHard": {"memory.available": "100Mi", "nodefs.available": "10%"},
         "kubeReservedCgroup": "/kube.slice", "systemReservedCgroup": None},
        [{"name": "kubepods", "limits": {"cpu.shares": 30720, "memory.limit_in_bytes": "max"}}],
    ],
)  # fmt: skip
def test_cgalloc_shapes_need_no_fallback(data):
    assert yamlout.dump(data) == _pyyaml(data)


def test_refused_shapes_raise_unsupported():
    shared: dict = {}
    for data in (1.5, {1: "a"}, "é", "a\nb", {"a": shared, "b": shared}, ("a",)):
        with pytest.raises(yamlout.Unsupported):
            yamlout.dump(data)


def test_render_falls_back_to_pyyaml_for_refused_shapes():
    data = {"ratio": 0.5, "name": "ü"}
    assert dumps(data, OutputFormat.yaml) == _pyyaml(data).rstrip("\n")
