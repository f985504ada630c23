"""Property tests of the input parsers: any text either parses or is an InputError naming its
field (never another exception), and valid values survive a format → parse round trip."""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cgalloc.errors import InputError
from cgalloc.inputs.config import load_node_config
from cgalloc.inputs.fields import BY_CONFIG, BY_FLAG, FIELDS
from cgalloc.inputs.thresholds import ThresholdError, parse_threshold, split_pair
from cgalloc.model.cpuset import parse_cpuset
from cgalloc.model.eviction import KNOWN_SIGNALS

PROPS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)

ONLINE = frozenset(range(256))
# Text made of what the parsers split on, next to anything at all.
SYNTAX = st.text(alphabet="cpumemoryi.<=,%-+0123456789 eEKMGTPkmnu_/", max_size=40)
ANY_TEXT = st.one_of(st.text(max_size=40), SYNTAX)
# A CPU list short enough that a range like 0-999999 stays small.
CPU_TEXT = st.one_of(st.text(alphabet="0123456789-, x", max_size=7), st.text(max_size=12))


def load(flags: dict[str, list[str]]):
    return load_node_config(flags, online_cpus=lambda: ONLINE)


def parses_or_names(flag: str, text: str) -> None:
    """``--flag text`` gives a NodeConfig or an InputError whose every line names the field."""
    try:
        load({flag: [text]})
    except InputError as err:
        assert err.problems
        for problem in err.problems:
            assert BY_FLAG[flag].label in problem, problem


@pytest.mark.parametrize(
    "flag", ["kube-reserved", "system-reserved", "eviction-hard", "qos-reserved", "capacity"]
)
@PROPS
@given(text=ANY_TEXT)
def test_map_flags_parse_or_name_the_field(flag, text):
    parses_or_names(flag, text)


@PROPS
@given(text=CPU_TEXT)
def test_reserved_cpus_parse_or_name_the_field(text):
    parses_or_names("reserved-cpus", text)


@PROPS
@given(text=CPU_TEXT)
def test_cpuset_parser_returns_a_set_or_value_error(text):
    try:
        cpus = parse_cpuset(text)
    except ValueError as err:
        assert "CPU list" in str(err)
    else:
        assert all(isinstance(c, int) and c >= 0 for c in cpus)


@PROPS
@given(item=ANY_TEXT)
def test_eviction_pair_parser_returns_a_threshold_or_threshold_error(item):
    try:
        signal, value = split_pair(item)
        parse_threshold(signal, value)
    except ThresholdError as err:
        assert str(err)


@PROPS
@given(
    flags=st.dictionaries(
        st.sampled_from(sorted(BY_FLAG)), st.lists(ANY_TEXT, min_size=1, max_size=2), max_size=6
    )
)
def test_any_flags_give_a_config_or_input_errors_naming_a_field(flags):
    if "reserved-cpus" in flags:  # keep CPU ranges small (see CPU_TEXT)
        flags["reserved-cpus"] = [t[:7] for t in flags["reserved-cpus"]]
    try:
        load(flags)
    except InputError as err:
        labels = [f.label for f in FIELDS]
        for problem in err.problems:
            assert any(label in problem for label in labels), problem


@PROPS
@given(body=st.one_of(st.text(max_size=200), SYNTAX.map(lambda t: "kubeReserved: {" + t + "}")))
def test_any_config_file_gives_a_config_or_input_errors_naming_it(body):
    head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    with tempfile.TemporaryDirectory() as tmp:
        for text in (body, head + body):
            path = os.path.join(tmp, "kubelet.yaml")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            try:
                load_node_config(config=path, online_cpus=lambda: ONLINE)
            except InputError as err:
                for problem in err.problems:
                    # the file, or the config field written in it (a value's problem is named
                    # by its field and flag: "kubeReserved (--kube-reserved): ...")
                    field = problem.split(" ")[0]
                    named = "--config" in problem or f"in {path}" in problem
                    assert named or (field in BY_CONFIG and field in text), problem


# ---- round trips --------------------------------------------------------------------------

MULTIPLIERS = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}  # fmt: skip
AMOUNT = st.tuples(st.integers(0, 10**6), st.sampled_from(sorted(MULTIPLIERS)))


@PROPS
@given(
    amounts=st.dictionaries(
        st.sampled_from(["cpu", "memory", "ephemeral-storage", "pid"]), AMOUNT, min_size=1
    ),
    milli_cpu=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_reservation_map_round_trip(amounts, milli_cpu):
    texts = {name: f"{n}{suffix}" for name, (n, suffix) in amounts.items()}
    if milli_cpu is not None:
        texts["cpu"] = f"{milli_cpu}m"
    flag = ",".join(f"{name}={text}" for name, text in texts.items())
    cfg = load({"kube-reserved": [flag], "system-reserved": [flag.replace(",", " , ")]})
    for reserved in (cfg.kube_reserved, cfg.system_reserved):
        assert set(reserved) == set(texts)
        for name, (n, suffix) in amounts.items():
            if name == "cpu" and milli_cpu is not None:
                assert reserved[name].milli_value() == milli_cpu
            else:
                assert reserved[name].value() == n * MULTIPLIERS[suffix]
        # the canonical form parses back to the same quantities
        again = ",".join(f"{name}={q}" for name, q in reserved.items())
        assert load({"kube-reserved": [again]}).kube_reserved == reserved


@st.composite
def cpu_lists(draw) -> tuple[str, frozenset[int]]:
    """A CPU list string in any order, with singles and ranges, and the set it names."""
    items = draw(
        st.lists(st.tuples(st.integers(0, 200), st.integers(0, 8), st.booleans()), max_size=6)
    )
    parts, cpus = [], set()
    for start, extra, as_range in items:
        if as_range:
            parts.append(f"{start}-{start + extra}")
            cpus.update(range(start, start + extra + 1))
        else:
            parts.append(str(start))
            cpus.add(start)
    return ",".join(parts), frozenset(cpus)


@PROPS
@given(case=cpu_lists())
def test_cpuset_round_trip(case):
    text, cpus = case
    assert parse_cpuset(text) == cpus
    if text:
        assert load({"reserved-cpus": [text]}).reserved_cpus == cpus


def float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


@PROPS
@given(
    signal=st.sampled_from(KNOWN_SIGNALS),
    amount=AMOUNT.filter(lambda a: a[0] > 0),
    percent=st.integers(1, 99),
)
def test_eviction_pairs_round_trip(signal, amount, percent):
    n, suffix = amount
    cfg = load({"eviction-hard": [f" {signal} < {n}{suffix} "]})
    threshold = cfg.eviction_hard[signal]
    assert threshold.quantity is not None
    assert threshold.quantity.value() == n * MULTIPLIERS[suffix]
    assert str(threshold) == f"{signal}<{n}{suffix}"
    cfg = load({"eviction-hard": [f"{signal}<{percent}%"]})
    # the kubelet's float32 division, percent / 100
    assert cfg.eviction_hard[signal].percentage == float32(float32(percent) / float32(100.0))
