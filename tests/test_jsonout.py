"""cgalloc.jsonout against the json module itself: for every document, the text is
``json.dumps(data, indent=2, sort_keys=True)``'s, byte for byte."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cgalloc import jsonout
from cgalloc.cli.render import OutputFormat, dumps
from cgalloc.plan import Action, actions_text

PROPS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=500)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),  # any code point: ensure_ascii escapes, surrogates included
)
KEYS = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none())
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=3),  # keys the json module converts or refuses
    ),
    max_leaves=25,
)


def _reference(data: object) -> str | type[Exception]:
    try:
        return json.dumps(data, indent=2, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return type(exc)


@PROPS
@given(DOCS)
def test_the_same_text_as_the_json_module(data):
    want = _reference(data)
    if isinstance(want, str):
        assert jsonout.dump(data) == want
        assert dumps(data, OutputFormat.json) == want
    else:
        with pytest.raises(want):
            jsonout.dump(data)


class Colour(str, enum.Enum):
    red = "red"


@pytest.mark.parametrize(
    "data",
    [
        {"a": Colour.red},  # a str subclass: the json module's own rules
        OrderedDict(b=1, a=[{}, [], ()]),
        {"x": 1.5, "y": float("nan")},
        {"deep": [[[[{"k": "\u00e9\ud800"}]]]]},
        [],
        {},
        "plain",
    ],
)
def test_types_the_fast_path_hands_over(data):
    assert jsonout.dump(data) == json.dumps(data, indent=2, sort_keys=True)


def test_a_circular_document_is_refused_as_the_json_module_refuses_it():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        jsonout.dump(loop)


TRICKY = st.sampled_from(['", "', ', "', '\\", "', "\\", '"', ", ", "}, {", "\u2028", "\udc80", ""])


@PROPS
@given(
    st.dictionaries(
        st.text(max_size=6) | TRICKY,
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            TRICKY,
            st.text(max_size=6) | TRICKY.map(lambda t: t + t),
        ),
        max_size=6,
    )
)
def test_a_flat_mapping_whose_strings_look_like_separators(data):
    """Text inside a flat mapping's strings that looks like JSON's own (`, "`, a quote, a
    brace pair) is a string's content, encoded as the json module encodes it."""
    assert jsonout.dump([data, {"k": data}]) == json.dumps(
        [data, {"k": data}], indent=2, sort_keys=True
    )


@PROPS
@given(DOCS, st.integers(0, 3))
def test_a_value_encoded_ahead_is_written_as_the_value_itself(value, depth):
    """jsonout.Encoded (setup's report, encoded while the core works): at the depth it was
    encoded for, elsewhere, and inside a document the json module must encode (a float), the
    text is that of the plain value in its place."""
    for doc, plain in [
        (jsonout.Encoded(value, depth), value),
        ({"a": jsonout.Encoded(value, depth)}, {"a": value}),
        ({"a": [{"b": jsonout.Encoded(value, depth)}]}, {"a": [{"b": value}]}),
        ({"x": 1.5, "a": jsonout.Encoded(value, depth)}, {"x": 1.5, "a": value}),
    ]:
        want = _reference(plain)
        if isinstance(want, str):
            assert jsonout.dump(doc) == want
        else:
            with pytest.raises(want):
                jsonout.dump(doc)


@PROPS
@given(DOCS, st.integers(0, 3))
def test_a_value_encoded_ahead_and_moved_one_level_deeper(value, depth):
    """Encoded.deeper (setup's done list is its plan's actions one level up): the text is the
    value's as encoded at the deeper level, and it is written as the plain value there."""
    ahead = jsonout.Encoded(value, depth)
    assert ahead.deeper().text == jsonout.Encoded(value, depth + 1).text
    want = _reference({"a": {"b": value}})
    if isinstance(want, str) and depth == 1:
        assert jsonout.dump({"a": {"b": ahead.deeper()}}) == want


# setup's report: the plan's actions written straight from the Actions (plan.actions_text)
_PIECES = st.sampled_from(["", "/", "a", "a/b", "b/", "./c", "..", "é", '"q"', "\\", "x\ny"])
_NAMES = st.lists(_PIECES, max_size=3).map("/".join) | st.text(max_size=6)
ACTIONS = st.lists(
    st.builds(
        Action,
        kind=st.sampled_from(["mkdir", "rmdir", "write", "enable", "restore"]),
        mount=st.sampled_from(["/cg", "/cg/", "/cg/memory", "/other", "/cg/./x"]),
        path=_NAMES,
        file=_NAMES,
        old=st.none() | st.text(max_size=5),
        new=st.text(max_size=5),
        cgroup=_NAMES,
        note=st.just(""),
    ),
    max_size=6,
)


@PROPS
@given(ACTIONS, st.sampled_from(["/cg", "/cg/"]), st.integers(0, 3))
def test_the_actions_text_is_the_encoded_dicts(actions, root, depth):
    """plan.actions_text gives, without the dicts, jsonout's text of each Action.to_json
    (that is json.dumps' with indent=2 and sorted keys)."""
    dicts = [a.to_json(root) for a in actions]
    text = actions_text(actions, root, depth)
    assert text == jsonout.Encoded(dicts, depth).text
    ahead = jsonout.Encoded.ahead(actions_text(actions, root, 1), 1, lambda: dicts)
    for doc, plain in [
        ({"done": ahead}, {"done": dicts}),
        ({"x": 1.5, "done": ahead}, {"x": 1.5, "done": dicts}),
    ]:
        assert jsonout.dump(doc) == json.dumps(plain, indent=2, sort_keys=True)
    assert jsonout.dump({"plan": {"actions": ahead.deeper()}}) == json.dumps(
        {"plan": {"actions": dicts}}, indent=2, sort_keys=True
    )


@pytest.mark.parametrize(
    "odd",
    [
        Action("move", "/cg/cpu", "kubepods", "cgroup.procs", "/", "42", "kubepods", "kubelet"),
        Action("stop", "/cg", "kube.slice", note="kube.slice"),
        Action("unit", "/cg", "", "CPUWeight", note="kube.slice"),
        Action("mkdir", "/cg", "a", cgroup="a", note="anything noted"),
    ],
)
def test_an_action_with_keys_of_its_own_leaves_the_dicts_to_encode(odd):
    """A process move, a unit or anything with a note has keys the plain actions' text does
    not write: actions_text says so (None), and setup encodes the dicts instead."""
    plain = Action("mkdir", "/cg", "a", cgroup="a")
    assert actions_text([plain, odd], "/cg", 1) is None
    assert actions_text([plain], "/cg", 1) is not None
