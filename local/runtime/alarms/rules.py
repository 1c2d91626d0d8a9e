"""CloudWatch's evaluation of one alarm on its datapoints: M out of N, TreatMissingData, states.

Pure: given an alarm's rule (comparison, threshold, evaluation periods, datapoints to alarm,
TreatMissingData) and the datapoints of its evaluation range, the new state and CloudWatch's
reason for it. :mod:`local.runtime.alarms.evaluator` feeds it from what the local stack observes.
"""

from __future__ import annotations

import datetime
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

OK = "OK"
ALARM = "ALARM"
INSUFFICIENT_DATA = "INSUFFICIENT_DATA"

COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanThreshold": (operator.gt, "greater than"),
    "GreaterThanOrEqualToThreshold": (operator.ge, "greater than or equal to"),
    "LessThanThreshold": (operator.lt, "less than"),
    "LessThanOrEqualToThreshold": (operator.le, "less than or equal to"),
}
TREAT_MISSING_DATA = ("missing", "ignore", "breaching", "notBreaching")


class UnobservableAlarm(Exception):
    """The alarm's metric cannot be observed locally (the message says why)."""


# -- evaluation of one alarm on its datapoints (pure) ---------------------------------------------


@dataclass(frozen=True)
class AlarmRule:
    comparison: str
    threshold: float
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing_data: str = "missing"

    def __post_init__(self) -> None:
        if self.comparison not in COMPARISONS:
            raise UnobservableAlarm(f"comparison {self.comparison} (anomaly detection) is not evaluated locally")
        if self.treat_missing_data not in TREAT_MISSING_DATA:
            raise ValueError(f"TreatMissingData {self.treat_missing_data!r} is not one of {TREAT_MISSING_DATA}")
        if not 1 <= self.datapoints_to_alarm <= self.evaluation_periods:
            raise ValueError("DatapointsToAlarm must be between 1 and EvaluationPeriods")

    def breaches(self, value: float) -> bool:
        return COMPARISONS[self.comparison][0](value, self.threshold)


@dataclass(frozen=True)
class Datapoint:
    timestamp: float  # start of its period (seconds since the epoch)
    value: float | None  # None: missing


@dataclass(frozen=True)
class Verdict:
    state: str
    reason: str
    reason_data: dict[str, Any]


def _format_point(point: Datapoint) -> str:
    moment = datetime.datetime.fromtimestamp(point.timestamp, datetime.UTC).strftime("%d/%m/%y %H:%M:%S")
    return f"{point.value} ({moment})"


def evaluate(
    rule: AlarmRule, datapoints: Sequence[Datapoint], current_state: str, *, evaluated_at: float | None = None
) -> Verdict:
    """The alarm's state on ``datapoints`` (its evaluation range, oldest first), as CloudWatch decides.

    With at least N real datapoints in the range, the N most recent real ones decide and
    TreatMissingData is not used. With fewer, the missing ones are filled as TreatMissingData says
    (as few as needed): ``breaching``/``notBreaching`` count them; ``ignore`` keeps the current
    state and ``missing`` goes to INSUFFICIENT_DATA unless the real datapoints decide on their own
    (M of them breach, or so many do not that M can no longer be reached); with no real datapoint
    at all, ``missing`` is INSUFFICIENT_DATA. ``evaluated_at`` (default: now) is the reason data's query date.
    """
    n, m = rule.evaluation_periods, rule.datapoints_to_alarm
    real = [point for point in datapoints if point.value is not None]
    words = COMPARISONS[rule.comparison][1]
    query_date = iso_now() if evaluated_at is None else iso_timestamp(evaluated_at)
    data: dict[str, Any] = {"version": "1.0", "queryDate": query_date, "threshold": float(rule.threshold)}
    if len(real) >= n:
        window = real[-n:]
        breaching = [point for point in window if rule.breaches(float(point.value or 0.0))]
        data.update(recentDatapoints=[point.value for point in window], evaluatedDatapoints=_points(window))
        shown = ", ".join(_format_point(point) for point in reversed(window))
        if len(breaching) >= m:
            return Verdict(
                ALARM,
                f"Threshold Crossed: {len(breaching)} out of the last {n} datapoints [{shown}] was {words} the "
                f"threshold ({float(rule.threshold)}) (minimum {m} datapoint{'s' if m > 1 else ''} for OK -> ALARM "
                "transition).",
                data,
            )
        return Verdict(
            OK,
            f"Threshold Crossed: {n - len(breaching)} out of the last {n} datapoints [{shown}] was not {words} the "
            f"threshold ({float(rule.threshold)}) (minimum {n - m + 1} datapoint{'s' if n > m else ''} for "
            "ALARM -> OK transition).",
            data,
        )
    missing = n - len(real)
    breaching_real = sum(1 for point in real if rule.breaches(float(point.value or 0.0)))
    data.update(recentDatapoints=[point.value for point in real], evaluatedDatapoints=_points(real))
    treatment = rule.treat_missing_data
    if treatment in ("breaching", "notBreaching"):
        counted = breaching_real + (missing if treatment == "breaching" else 0)
        label = "Breaching" if treatment == "breaching" else "NonBreaching"
        state = ALARM if counted >= m else OK
        received = (
            f"no datapoints were received for {n} period{'s' if n > 1 else ''}"
            if not real
            else f"{len(real)} datapoint{'s' if len(real) > 1 else ''} ({breaching_real} breaching) were received"
        )
        return Verdict(
            state,
            f"Threshold Crossed: {received} and {missing} missing datapoint{'s were' if missing > 1 else ' was'} "
            f"treated as [{label}].",
            data,
        )
    if real and breaching_real >= m:
        return Verdict(ALARM, f"Threshold Crossed: {breaching_real} real datapoints were {words} the threshold.", data)
    if real and len(real) - breaching_real > n - m:
        return Verdict(OK, f"Threshold Crossed: {len(real) - breaching_real} real datapoints were not {words} "
                       "the threshold.", data)  # fmt: skip
    if treatment == "ignore":
        return Verdict(current_state, "Missing datapoints ignored: the current state is kept.", data)
    return Verdict(
        INSUFFICIENT_DATA,
        f"Insufficient Data: {len(real)} datapoint{'s were' if len(real) != 1 else ' was'} unknown.",
        data,
    )


def _points(points: Sequence[Datapoint]) -> list[dict[str, Any]]:
    return [{"timestamp": iso_timestamp(point.timestamp), "value": point.value} for point in points]


def iso_timestamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000"


def iso_now() -> str:
    return iso_timestamp(time.time())
