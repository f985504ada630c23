"""Hard-eviction thresholds: the kubelet's parsing and its float32 percentages."""

import pytest

from cgalloc.inputs.gostrconv import parse_go_float
from cgalloc.inputs.thresholds import ThresholdError, parse_percentage, parse_threshold, split_pair
from cgalloc.model.eviction import DEFAULT_EVICTION_HARD, reservation
from cgalloc.model.quantity import Quantity

Q = Quantity.parse


def test_float32_percentage_of_8gi_matches_the_kubelet():
    # float32(0.1) = 0.100000001490116..., so 10% of 8Gi is 858993472, not 858993459.
    threshold = parse_threshold("memory.available", "10%")
    assert threshold.reserve(Q("8Gi")) == Quantity.from_int(858993472)


def test_float32_percentage_reproduces_the_aks_node():
    # AKS node: ephemeral-storage 129886128Ki, nodefs.available<10% -> Allocatable 119703055367.
    capacity = Q("129886128Ki")
    taken = parse_threshold("nodefs.available", "10%").reserve(capacity)
    assert (capacity - taken).value() == 119703055367


def test_float32_values():
    assert parse_go_float("0.1", 32) == 0.10000000149011612
    assert parse_go_float("1e1", 32) == 10.0
    assert parse_percentage("10%") == 0.10000000149011612
    assert parse_percentage("5%") == 0.05000000074505806


@pytest.mark.parametrize("n", [0, 1, 5, 10, 15, 99, 1000000, 9999999])
def test_whole_and_fractional_spellings_give_the_same_float32(n):
    assert parse_go_float(str(n), 32) == parse_go_float(f"{n}.0", 32) == float(n)
    assert parse_percentage(f"{n}%") == parse_percentage(f"{n}.0%")


def test_float32_whole_numbers_of_eight_digits_are_rounded_to_float32():
    # 2**24 + 1 is no float32 (ties to even give 2**24), 2**24 - 1 is one.
    assert parse_go_float("16777217", 32) == 16777216.0
    assert parse_go_float("16777215", 32) == 16777215.0


@pytest.mark.parametrize(
    ("value", "fraction"),
    [
        # strconv.ParseFloat's syntax, as the kubelet's parsePercentage reads it (atof_test.go:
        # "1_23.50_0_0e+1_2" is 1.235e+14, "0x1p-2" is 0.25): "_" between digits, hex floats
        ("1_0%", 0.10000000149011612),
        ("0x1p-3%", 0.0012499999720603228),
        ("1_0.2_5%", 0.10249999910593033),
        ("+5%", 0.05000000074505806),
        ("-0%", 0.0),  # -0 is not below 0: a threshold of nothing, not the disabling "0%"
    ],
)
def test_percentages_in_go_float_syntax(value, fraction):
    threshold = parse_threshold("memory.available", value)
    assert threshold.percentage == fraction
    # 10% of 8Gi is 858993472 however it is written
    if fraction == 0.10000000149011612:
        assert threshold.reserve(Q("8Gi")) == Quantity.from_int(858993472)


def test_absolute_threshold_is_returned_as_is():
    threshold = parse_threshold("memory.available", "100Mi")
    assert threshold.reserve(Q("32Gi")) == Q("100Mi")
    assert str(threshold) == "memory.available<100Mi"


@pytest.mark.parametrize("value", ["0%", "100%"])
def test_zero_and_hundred_percent_disable(value):
    assert parse_threshold("nodefs.available", value) is None


def test_every_trailing_percent_sign_is_trimmed():
    # pkg/kubelet/eviction/helpers.go parsePercentage: ParseFloat(strings.TrimRight(input, "%"),
    # 32); "10%%" was refused as malformed. "0%%" is not the literal "0%" that disables.
    assert parse_threshold("nodefs.available", "10%%%").percentage == pytest.approx(0.1)
    assert parse_threshold("nodefs.available", "0%%").percentage == 0


@pytest.mark.parametrize(
    ("signal", "value", "fragment"),
    [
        ("foo.available", "1Gi", 'unsupported eviction signal "foo.available"'),
        ("memory.available", "150%", "must be <= 100%: 150%"),
        ("memory.available", "-5%", "must be >= 0%: -5%"),
        ("memory.available", "abc%", 'malformed percentage "abc%"'),
        ("memory.available", "1__0%", 'malformed percentage "1__0%"'),
        ("memory.available", "0x1%", 'malformed percentage "0x1%"'),  # no p exponent
        # Go reads them as +-Inf: the range checks refuse them, with the kubelet's sentence
        ("memory.available", "inf%", "must be <= 100%: inf%"),
        ("memory.available", "-Infinity%", "must be >= 0%: -Infinity%"),
        ("memory.available", "1e50%", 'percentage "1e50%" beyond a float32\'s range'),
        # The kubelet takes NaN (it passes both range checks) and reserves an undefined amount;
        # cgalloc refuses it, as docs/kubelet-compatibility.md says.
        ("memory.available", "NaN%", 'percentage "NaN%", which is not a number'),
        # Go's ParseFloat can misplace the point past 800 digits before it (decimal.set)
        (
            "memory.available",
            "1" + "0" * 800 + "e-800%",
            "with more than 800 significant digits before",
        ),
        ("nodefs.available", "nan%", 'percentage "nan%", which is not a number'),
        ("memory.available", "0", "must be positive: 0"),
        ("memory.available", "-1Gi", "must be positive: -1Gi"),
        ("memory.available", "1 Gi", 'malformed value "1 Gi"'),
    ],
)
def test_bad_thresholds(signal, value, fragment):
    with pytest.raises(ThresholdError, match=None) as exc:
        parse_threshold(signal, value)
    assert fragment in str(exc.value)


def test_split_pair_trims_and_rejects_missing_angle():
    assert split_pair(" memory.available < 1Gi ") == ("memory.available", "1Gi")
    # strings.TrimSpace (LangleSeparatedMapStringString.Set): unicode.IsSpace, which takes
    # NBSP and U+3000 but not the separators \x1c-\x1f that Python's strip() would also take
    assert split_pair("\xa0memory.available<1Gi\u3000") == ("memory.available", "1Gi")
    assert split_pair("memory.available<10%\x1c") == ("memory.available", "10%\x1c")
    with pytest.raises(ThresholdError, match="malformed pair"):
        split_pair("memory.available=1Gi")


def test_reservation_counts_only_memory_and_nodefs_available():
    thresholds = {
        s: parse_threshold(s, v)
        for s, v in {**DEFAULT_EVICTION_HARD, "pid.available": "10%"}.items()
    }
    capacity = {"memory": Q("8Gi"), "ephemeral-storage": Q("8Gi"), "pid": Q("1000")}
    assert reservation(thresholds, capacity) == {
        "memory": Q("100Mi"),
        "ephemeral-storage": Quantity.from_int(858993472),
    }
