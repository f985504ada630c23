"""The flag layer: kubelet flags as the kubelet (pflag and its flag types) reads them — maps,
``signal<value`` pairs, CSV lists, feature gates, integers — into setting values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cgalloc.inputs import gocsv
from cgalloc.inputs.fields import (
    BOOL_WORDS,
    BY_FLAG,
    CONFIG_ONLY,
    Field,
    parse_bool,
)
from cgalloc.inputs.gostrconv import parse_go_int, trim_space
from cgalloc.inputs.kubeletconfig import (
    GO_INT_TYPES,
    INT_RANGES,
)
from cgalloc.inputs.thresholds import ThresholdError, quote
from cgalloc.inputs.thresholds import split_pair as split_eviction_pair

# ---- flag layers -------------------------------------------------------------------------


# Map flags the kubelet declares with cliflag.NewMapStringStringNoSplit (cmd/kubelet/app/options/
# options.go): "a=true,b=true" is the one option "a" with the value "true,b=true".
NO_SPLIT_MAPS = frozenset({"cpu-manager-policy-options"})


def _split_map(f: Field, occurrences: Sequence[str], problems: list[str]) -> dict[str, str]:
    """``MapStringString.Set`` over every occurrence: "k=v,k2=v2", trimmed, later keys win."""
    out: dict[str, str] = {}
    no_split = f.flag in NO_SPLIT_MAPS
    for text in occurrences:
        # NoSplit maps take one pair per occurrence, commas and all, and no empty one
        for item in [text] if no_split else [i for i in text.split(",") if i]:
            key, sep, value = item.partition("=")
            if not sep:
                problems.append(f"{f.label}: malformed pair {quote(item)}; expected {f.form}.")
                continue
            out[trim_space(key)] = trim_space(value)
    return out


def _fold_flag(f: Field, occurrences: Sequence[str], problems: list[str]) -> object:
    """One flag's value from its occurrences, in the kubelet's flag semantics."""
    if f.kind == "map":
        return _split_map(f, occurrences, problems)
    if f.kind == "pairs":
        pairs: dict[str, str] = {}
        for item in (i for text in occurrences for i in text.split(",") if i):
            try:
                signal, value = split_eviction_pair(item)
            except ThresholdError as err:
                problems.append(f"{f.label}: {err}.")
                continue
            pairs[signal] = value
        return pairs
    if f.kind == "gates":
        gates: dict[str, bool] = {}
        for text in occurrences:
            problem = _parse_gates(text, gates)
            if problem:
                problems.append(f"{f.label}: {problem}; expected {f.form}.")
        return gates
    if f.kind == "list":
        return [i for text in occurrences if text for i in _csv_items(f, text, problems)]
    last = occurrences[-1]
    if f.kind == "bool":
        try:
            return parse_bool(last)  # pflag's boolValue.Set: ParseBool(s), untrimmed
        except ValueError:
            problems.append(f"{f.label}: {quote(last)} is not a boolean; use {f.form}.")
            return None
    if f.kind == "int":
        go_type = GO_INT_TYPES.get(f.config or "", "int64")
        number = parse_go_int(last, INT_RANGES[go_type])
        if isinstance(number, int):
            return number
        problem = "is not an integer" if number is None else f"is out of range for an {go_type}"
        problems.append(f"{f.label}: {quote(last)} {problem}; use {f.form}.")
        return None
    return last


def _csv_items(f: Field, text: str, problems: list[str]) -> list[str]:
    """pflag's StringSlice ``readAsCSV``: one occurrence as one CSV record, so items keep their
    spaces, an empty item stays ("pods, kube-reserved" and "pods," are refused later as the
    kubelet refuses them) and a quoted item may hold a comma."""
    reader = gocsv.Reader(text)
    try:
        items = reader.read()
    except gocsv.CsvError as err:
        problems.append(f"{f.label}: invalid argument {quote(text)}: {err}; expected {f.form}.")
        return []
    if items is None:
        problems.append(f"{f.label}: {quote(text)} holds only line breaks; expected {f.form}.")
        return []
    try:
        more = reader.read() is not None
    except gocsv.CsvError:
        more = True
    if more:  # the kubelet drops every record after the first: what they name goes unenforced
        problems.append(
            f"{f.label}: {quote(text)} holds more than one CSV record (a line break outside"
            " quotes) and the kubelet reads only the first; give the list on one line."
        )
        return []
    return items


def _parse_gates(text: str, into: dict[str, bool]) -> str | None:
    """``cliflag.MapStringBool.Set`` (the kubelet's --feature-gates, component-base/cli/flag/
    map_string_bool.go): "A=true,B=false" into ``into``; the kubelet's error."""
    for item in text.split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = trim_space(key)
        if not sep:
            return "malformed pair, expect string=bool"
        value = trim_space(value)
        if value not in BOOL_WORDS:
            return (
                f"invalid value of {key}: {value}, err: strconv.ParseBool:"
                f' parsing "{value}": invalid syntax'
            )
        into[key] = BOOL_WORDS[value]
    return None


def flag_layer(
    args: Mapping[str, Sequence[str]], problems: list[str], allowed: frozenset[str] | None = None
) -> dict[str, object]:
    """Flag values from ``{flag name: [occurrences]}``; flags outside ``allowed`` are ignored."""
    out: dict[str, object] = {}
    for flag, occurrences in args.items():
        f = BY_FLAG.get(flag)
        if f is None or not occurrences or flag in CONFIG_ONLY:
            continue
        if allowed is not None and flag not in allowed:
            continue
        value = _fold_flag(f, occurrences, problems)
        if value is not None:
            out[flag] = value
    return out
