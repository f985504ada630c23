"""Hard-eviction thresholds as the kubelet reads them: ``signal<value`` pairs and
``parseThresholdStatement`` (``pkg/kubelet/eviction/helpers.go``), percentages in Go's float
syntax held as float32."""

from __future__ import annotations

import json
import math
import struct

from cgalloc.inputs.gostrconv import go_may_misread, parse_go_float, trim_space
from cgalloc.model.eviction import KNOWN_SIGNALS, Threshold
from cgalloc.model.quantity import Quantity, QuantityError


class ThresholdError(ValueError):
    """A threshold or signal<value pair the kubelet would reject; the message says why."""


def quote(text: str) -> str:
    """Go's ``%q`` for the plain strings in messages; past 80 characters, the start and the
    length (a 100 KB value is not echoed whole)."""
    if len(text) > 80:
        return f'{json.dumps(text[:60])[:-1]}..." ({len(text)} characters)'
    return json.dumps(text)


def _to_float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def parse_percentage(text: str) -> float | str | None:
    """Eviction ``parsePercentage``: ``float32(ParseFloat(TrimRight(s, "%"), 32)) / 100`` in
    float32 (every trailing '%' goes). Go's float syntax, so ``1_0%`` is 10% and ``0x1p-3%``
    0.125%; "range" and None as :func:`cgalloc.inputs.gostrconv.parse_go_float` gives them."""
    value = parse_go_float(text.rstrip("%"), 32)
    return value if not isinstance(value, float) else _to_float32(value / _to_float32(100.0))


def parse_threshold(signal: str, value: str) -> Threshold | None:
    """``parseThresholdStatement``: one threshold, or None when ``0%``/``100%`` disables it."""
    if signal not in KNOWN_SIGNALS:
        raise ThresholdError(
            f"unsupported eviction signal {quote(signal)};"
            f" known signals are {', '.join(KNOWN_SIGNALS)}"
        )
    if value.endswith("%"):
        if value in ("0%", "100%"):
            return None
        if go_may_misread(value.rstrip("%")):
            raise ThresholdError(
                f"eviction threshold {signal} has percentage {quote(value)} with more than 800"
                " significant digits before its point, which the kubelet's ParseFloat can misread;"
                " use a percentage between 0% and 100%"
            )
        percentage = parse_percentage(value)
        if percentage is None:
            raise ThresholdError(
                f"eviction threshold {signal} has malformed percentage {quote(value)};"
                " expected a number followed by %, such as 10%"
            )
        if percentage == "range":
            raise ThresholdError(
                f"eviction threshold {signal} has percentage {quote(value)} beyond a float32's"
                " range; use a percentage between 0% and 100%"
            )
        if math.isnan(percentage):
            # the kubelet takes it (NaN passes both range checks) and reserves an undefined
            # amount (int64 of NaN); refused, as docs/kubelet-compatibility.md says
            raise ThresholdError(
                f"eviction threshold {signal} has percentage {quote(value)}, which is not a"
                " number; use a percentage between 0% and 100%"
            )
        if percentage < 0:
            raise ThresholdError(
                f"eviction percentage threshold {signal} must be >= 0%: {value};"
                " use a percentage between 0% and 100%"
            )
        if percentage > 1:
            raise ThresholdError(
                f"eviction percentage threshold {signal} must be <= 100%: {value};"
                " use a percentage between 0% and 100%"
            )
        return Threshold(signal, value, percentage=percentage)
    try:
        quantity = Quantity.parse(value)
    except QuantityError:
        raise ThresholdError(
            f"eviction threshold {signal} has malformed value {quote(value)};"
            " expected a quantity such as 100Mi or a percentage such as 10%"
        ) from None
    if quantity.sign() <= 0:
        raise ThresholdError(
            f"eviction threshold {signal} must be positive: {quantity};"
            " use a quantity above 0 such as 100Mi, or a percentage such as 10%"
        )
    return Threshold(signal, value, quantity=quantity)


def split_pair(item: str) -> tuple[str, str]:
    """One ``signal<value`` item of ``LangleSeparatedMapStringString``, trimmed."""
    signal, sep, value = item.partition("<")
    if not sep:
        raise ThresholdError(
            f"malformed pair {quote(item)}, expect signal<value pairs separated by commas"
            " such as memory.available<100Mi"
        )
    return trim_space(signal), trim_space(value)
