"""CloudWatch alarm evaluation and alarm actions, for the local stack.

Stands in for what CloudWatch does with the template's ``AWS::CloudWatch::Alarm``s in AWS: it
collects the metrics the alarms watch, evaluates each alarm every period (statistic, period,
evaluation periods, datapoints to alarm, comparison, threshold, TreatMissingData), records each
state change in moto's CloudWatch (``set_alarm_state``; moto stores alarms but never evaluates
them) and publishes it to the alarm's actions (SNS topics, which moto delivers to their SQS
subscribers) as CloudWatch's notification JSON.

What it can observe locally:

- ``AWS/SQS`` ``ApproximateNumberOfMessagesVisible`` / ``...NotVisible`` / ``...Delayed``
  (GetQueueAttributes on moto) and ``ApproximateAgeOfOldestMessage``: SQS has no API that reads
  a message without receiving it (a receive would change the very receive counts and visibility
  the pipeline depends on), so the age is read from moto's in-process SQS backend: the oldest
  ``sent_timestamp`` of the queue's not-deleted messages (``verify_sqs_age_seam`` checks it);
- ``AWS/Lambda`` ``Invocations``, ``Errors``, ``Throttles``, ``Duration`` from the Lambda runner
  (``LambdaRunner.invocation_observers``); the runner queues an invocation instead of throttling
  it, so ``Throttles`` counts only invocations answered ``TooManyRequestsException`` (a fault);
- ``AWS/States`` execution end states (``ExecutionsTimedOut``, ...) from moto's executions;
- every custom metric the functions emit as CloudWatch EMF (``{"_aws": ...}`` lines of their
  output, as captured by the runner).

Alarms on anything else (OpenSearch domain, API Gateway, DynamoDB, Lambda iterator age, ...) stay
``INSUFFICIENT_DATA``; they are listed at startup and in ``status``, with the reason.

Periods are scaled by ``LOCAL_ALARM_PERIOD_SCALE`` (default 0.05: a 60 s period lasts 3 s), so
tests see transitions in seconds; thresholds (ages in seconds included) are never scaled.
"""

from __future__ import annotations

import ast
import datetime
import json
import logging
import math
import operator
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from local.runtime.aws import moto_client
from local.runtime.lambda_runner import InvocationResult
from local.runtime.settings import RuntimeSettings
from local.runtime.template import CloudFormationTemplate, IntrinsicResolver, generated_physical_name

LOG = logging.getLogger("local.runtime.alarms")

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
# An invocation answered with one of these was throttled: no Invocations, no Errors, one Throttles.
THROTTLE_ERROR_TYPES = frozenset({"TooManyRequestsException", "Lambda.TooManyRequestsException"})
SQS_COUNT_ATTRIBUTES = {
    "ApproximateNumberOfMessagesVisible": "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible": "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed": "ApproximateNumberOfMessagesDelayed",
}
SQS_AGE_METRIC = "ApproximateAgeOfOldestMessage"
LAMBDA_METRICS = frozenset({"Invocations", "Errors", "Throttles", "Duration"})
# Step Functions execution metrics: executions that ended in this status, counted at their stop time.
STATES_METRICS = {
    "ExecutionsSucceeded": "SUCCEEDED",
    "ExecutionsFailed": "FAILED",
    "ExecutionsAborted": "ABORTED",
    "ExecutionsTimedOut": "TIMED_OUT",
}
REGION_NAMES = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
}
# Beyond the evaluation periods, how many older periods CloudWatch may look back through for
# real datapoints when recent ones are missing (its "evaluation range"; AWS does not publish the
# exact number, which depends on the period).
LOOKBACK_PERIODS = 2
MIN_SCALED_PERIOD_SECONDS = 0.5
# Why the metrics of other AWS namespaces do not exist locally.
UNEMITTED_NAMESPACES = {
    "AWS/States": "moto's Step Functions emits no metrics; only the executions' end states are derived",
    "AWS/ES": "the local OpenSearch replaces the domain and emits no CloudWatch metrics",
    "AWS/ApiGateway": "the local API adapter emits no API Gateway metrics",
    "AWS/DynamoDB": "moto's DynamoDB emits no metrics",
    "AWS/Events": "schedules and rules are not run locally",
    "AWS/SNS": "moto's SNS emits no metrics",
    "AWS/S3": "moto's S3 emits no metrics",
}
# Template types the evaluator creates in moto (the provisioner skips them).
HANDLED_TYPES = frozenset({"AWS::CloudWatch::Alarm", "AWS::SNS::Topic", "AWS::SNS::Subscription"})


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


def evaluate(rule: AlarmRule, datapoints: Sequence[Datapoint], current_state: str) -> Verdict:
    """The alarm's state on ``datapoints`` (its evaluation range, oldest first), as CloudWatch decides.

    With at least N real datapoints in the range, the N most recent real ones decide and
    TreatMissingData is not used. With fewer, the missing ones are filled as TreatMissingData says
    (as few as needed): ``breaching``/``notBreaching`` count them; ``ignore`` keeps the current
    state and ``missing`` goes to INSUFFICIENT_DATA unless the real datapoints decide on their own
    (M of them breach, or so many do not that M can no longer be reached); with no real datapoint
    at all, ``missing`` is INSUFFICIENT_DATA.
    """
    n, m = rule.evaluation_periods, rule.datapoints_to_alarm
    real = [point for point in datapoints if point.value is not None]
    words = COMPARISONS[rule.comparison][1]
    data: dict[str, Any] = {"version": "1.0", "queryDate": _iso_now(), "threshold": float(rule.threshold)}
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
    return [{"timestamp": _iso(point.timestamp), "value": point.value} for point in points]


def _iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "+0000"


def _iso_now() -> str:
    return _iso(time.time())


# -- metrics ----------------------------------------------------------------------------------------

Dimensions = frozenset[tuple[str, str]]


def aggregate(values: Sequence[float], statistic: str) -> float | None:
    """One period's statistic of raw samples (None when there are none)."""
    if not values:
        return None
    if statistic == "Sum":
        return float(sum(values))
    if statistic == "Maximum":
        return float(max(values))
    if statistic == "Minimum":
        return float(min(values))
    if statistic == "Average":
        return float(sum(values) / len(values))
    if statistic == "SampleCount":
        return float(len(values))
    percentile = re.fullmatch(r"p(\d{1,2}(?:\.\d+)?|100)", statistic)
    if percentile:
        ordered = sorted(values)
        rank = max(0, math.ceil(float(percentile.group(1)) / 100 * len(ordered)) - 1)
        return float(ordered[rank])
    raise UnobservableAlarm(f"statistic {statistic} is not computed locally")


class MetricStore:
    """Raw samples per series (namespace, name, dimensions), kept for ``retention_seconds``."""

    def __init__(self, retention_seconds: float) -> None:
        self.retention_seconds = retention_seconds
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str, Dimensions], deque[tuple[float, float]]] = {}

    def put(self, namespace: str, name: str, dimensions: Mapping[str, str], value: float, timestamp: float) -> None:
        key = (namespace, name, frozenset((str(k), str(v)) for k, v in dimensions.items()))
        with self._lock:
            samples = self._series.setdefault(key, deque())
            samples.append((timestamp, float(value)))
            horizon = time.time() - self.retention_seconds
            while samples and samples[0][0] < horizon:
                samples.popleft()

    def samples(
        self, namespace: str, name: str, select: Callable[[Dimensions], bool], start: float, end: float
    ) -> list[float]:
        """Every sample in [start, end) of the series of this metric whose dimensions ``select`` accepts."""
        with self._lock:
            return [
                value
                for (series_namespace, series_name, dimensions), samples in self._series.items()
                if series_namespace == namespace and series_name == name and select(dimensions)
                for timestamp, value in samples
                if start <= timestamp < end
            ]

    def names(self) -> set[tuple[str, str]]:
        with self._lock:
            return {(namespace, name) for namespace, name, _ in self._series}


def parse_emf(line: str, received_at: float) -> list[tuple[str, str, dict[str, str], list[float], float]]:
    """The metrics of one EMF log line: (namespace, name, dimensions, values, timestamp) each.

    A line that is not an EMF document yields nothing. Each dimension set of a directive is a
    series of its own, as CloudWatch extracts them.
    """
    text = line.strip()
    if not text.startswith("{") or '"_aws"' not in text:
        return []
    try:
        document = json.loads(text)
    except ValueError:
        return []
    metadata = document.get("_aws") if isinstance(document, dict) else None
    if not isinstance(metadata, dict):
        return []
    stamp = metadata.get("Timestamp")
    timestamp = float(stamp) / 1000 if isinstance(stamp, int | float) else received_at
    found = []
    for directive in metadata.get("CloudWatchMetrics") or []:
        namespace = directive.get("Namespace")
        if not isinstance(namespace, str):
            continue
        dimension_sets = directive.get("Dimensions") or [[]]
        for metric in directive.get("Metrics") or []:
            name = metric.get("Name") if isinstance(metric, dict) else None
            raw = document.get(name) if name else None
            values = raw if isinstance(raw, list) else [raw]
            numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
            if not name or not numbers:
                continue
            for dimension_set in dimension_sets:
                dimensions = {key: str(document.get(key, "")) for key in dimension_set}
                found.append((namespace, str(name), dimensions, numbers, timestamp))
    return found


# -- what an alarm watches ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricStat:
    namespace: str
    name: str
    dimensions: Mapping[str, str]
    statistic: str
    period: int

    def value(self, store: MetricStore, start: float, end: float) -> float | None:
        wanted = frozenset(self.dimensions.items())
        # CloudWatch matches a series by its exact dimension set.
        return aggregate(
            store.samples(self.namespace, self.name, lambda dims: dims == wanted, start, end), self.statistic
        )

    def trigger(self) -> dict[str, Any]:
        return {
            "MetricName": self.name,
            "Namespace": self.namespace,
            "StatisticType": "ExtendedStatistic" if self.statistic.startswith("p") else "Statistic",
            "Statistic": self.statistic.upper(),
            "Unit": None,
            "Dimensions": [{"value": value, "name": name} for name, value in self.dimensions.items()],
            "Period": self.period,
        }


_INSIGHTS = re.compile(
    r"^\s*SELECT\s+(?P<function>SUM|AVG|MIN|MAX|COUNT)\s*\(\s*(?P<metric>[\w.-]+)\s*\)\s+"
    r"FROM\s+(?:SCHEMA\(\s*(?P<schema>[^)]*)\)|\"(?P<quoted>[^\"]+)\"|(?P<namespace>[\w/.:-]+))"
    r"(?:\s+WHERE\s+(?P<where>.+?))?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_CONDITION = re.compile(r"^\s*\"?(?P<key>[\w.:-]+)\"?\s*(?P<op>=|!=)\s*'(?P<value>[^']*)'\s*$")


@dataclass(frozen=True)
class InsightsQuery:
    """A Metrics Insights query of the subset ``SELECT FUNC(metric) FROM ns|SCHEMA(ns, dims...)
    [WHERE dim = 'v' AND/OR ...]`` (AND binds tighter than OR, no parentheses, no GROUP BY)."""

    function: str
    metric: str
    namespace: str
    schema_dimensions: frozenset[str] | None
    where: tuple[tuple[tuple[str, str, str], ...], ...]  # OR of ANDs of (key, op, value)

    @classmethod
    def parse(cls, expression: str) -> InsightsQuery:
        match = _INSIGHTS.match(expression)
        if match is None:
            raise UnobservableAlarm(f"Metrics Insights query outside the local subset: {expression}")
        schema = None
        if match.group("schema") is not None:
            parts = [part.strip().strip('"') for part in match.group("schema").split(",")]
            namespace, schema = parts[0], frozenset(part for part in parts[1:] if part)
        else:
            namespace = match.group("quoted") or match.group("namespace")
        where: list[tuple[tuple[str, str, str], ...]] = []
        if match.group("where"):
            for alternative in re.split(r"\s+OR\s+", match.group("where"), flags=re.IGNORECASE):
                conditions = []
                for condition in re.split(r"\s+AND\s+", alternative, flags=re.IGNORECASE):
                    parsed = _CONDITION.match(condition)
                    if parsed is None:
                        raise UnobservableAlarm(f"Metrics Insights condition outside the local subset: {condition}")
                    conditions.append((parsed.group("key"), parsed.group("op"), parsed.group("value")))
                where.append(tuple(conditions))
        return cls(match.group("function").upper(), match.group("metric"), namespace, schema, tuple(where))

    def accepts(self, dimensions: Dimensions) -> bool:
        values = dict(dimensions)
        if self.schema_dimensions is not None and set(values) != self.schema_dimensions:
            return False
        if not self.where:
            return True
        return any(
            all((values.get(key) == value) == (op == "=") for key, op, value in alternative)
            for alternative in self.where
        )

    def value(self, store: MetricStore, start: float, end: float) -> float | None:
        samples = store.samples(self.namespace, self.metric, self.accepts, start, end)
        statistic = {"SUM": "Sum", "AVG": "Average", "MIN": "Minimum", "MAX": "Maximum", "COUNT": "SampleCount"}
        return aggregate(samples, statistic[self.function])


_MATH_COMPARISONS: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_MATH_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


class MathExpression:
    """A metric math expression of arithmetic, comparisons (1/0), AND/OR/NOT and ``IF`` over the
    ids of other queries, evaluated per period; a missing operand makes the datapoint missing."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        python = re.sub(r"\bAND\b", " and ", re.sub(r"\bOR\b", " or ", re.sub(r"\bNOT\b", " not ", expression)))
        try:
            self._tree = ast.parse(python.strip(), mode="eval").body
        except SyntaxError as exc:
            raise UnobservableAlarm(f"metric math outside the local subset: {expression}") from exc
        self.ids: set[str] = set()
        self._check(self._tree)

    def _check(self, node: ast.AST) -> None:
        allowed: tuple[type[ast.AST], ...] = (
            ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Name, ast.Constant, ast.Call, ast.Load,
            ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, *_MATH_COMPARISONS, *_MATH_OPERATORS,
        )  # fmt: skip
        for child in ast.walk(node):
            if isinstance(child, ast.Call):
                if not (isinstance(child.func, ast.Name) and child.func.id == "IF" and len(child.args) in (2, 3)):
                    raise UnobservableAlarm(
                        f"metric math function outside the local subset (IF only): {self.expression}"
                    )
            elif isinstance(child, ast.Name):
                if child.id != "IF":
                    self.ids.add(child.id)
            elif isinstance(child, ast.Constant):
                if not isinstance(child.value, int | float) or isinstance(child.value, bool):
                    raise UnobservableAlarm(f"metric math constant outside the local subset: {self.expression}")
            elif not isinstance(child, allowed):
                raise UnobservableAlarm(f"metric math outside the local subset: {self.expression}")

    def value(self, values: Mapping[str, float | None]) -> float | None:
        try:
            return self._eval(self._tree, values)
        except (ZeroDivisionError, OverflowError):
            return None

    def _eval(self, node: ast.AST, values: Mapping[str, float | None]) -> float | None:
        if isinstance(node, ast.Constant):
            return float(node.value) if isinstance(node.value, int | float) else None
        if isinstance(node, ast.Name):
            return values.get(node.id)
        if isinstance(node, ast.UnaryOp):
            operand = self._eval(node.operand, values)
            if operand is None:
                return None
            if isinstance(node.op, ast.Not):
                return 0.0 if operand else 1.0
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, values), self._eval(node.right, values)
            if left is None or right is None:
                return None
            return _MATH_OPERATORS[type(node.op)](left, right)
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, values)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comparator, values)
                if left is None or right is None:
                    return None
                if not _MATH_COMPARISONS[type(op)](left, right):
                    return 0.0
                left = right
            return 1.0
        if isinstance(node, ast.BoolOp):
            operands = [self._eval(value, values) for value in node.values]
            if any(operand is None for operand in operands):
                return None
            truth = all if isinstance(node.op, ast.And) else any
            return 1.0 if truth(bool(operand) for operand in operands) else 0.0
        if isinstance(node, ast.Call):
            condition = self._eval(node.args[0], values)
            if condition is None:
                return None
            if condition:
                return self._eval(node.args[1], values)
            return self._eval(node.args[2], values) if len(node.args) == 3 else None
        raise UnobservableAlarm(f"metric math node {type(node).__name__}")


@dataclass(frozen=True)
class AlarmMetric:
    """What an alarm evaluates: one metric, or the returned query of its ``Metrics`` list."""

    period: int
    single: MetricStat | None = None
    stats: Mapping[str, MetricStat] = field(default_factory=dict)
    expression: MathExpression | InsightsQuery | None = None
    trigger: Mapping[str, Any] = field(default_factory=dict)

    def value(self, store: MetricStore, start: float, end: float) -> float | None:
        if self.single is not None:
            return self.single.value(store, start, end)
        if isinstance(self.expression, InsightsQuery):
            return self.expression.value(store, start, end)
        if isinstance(self.expression, MathExpression):
            return self.expression.value({key: stat.value(store, start, end) for key, stat in self.stats.items()})
        return None

    def watched(self) -> list[tuple[str, str, Mapping[str, str] | None]]:
        """(namespace, metric, exact dimensions or None for any) of every metric this reads."""
        if self.single is not None:
            return [(self.single.namespace, self.single.name, self.single.dimensions)]
        if isinstance(self.expression, InsightsQuery):
            return [(self.expression.namespace, self.expression.metric, None)]
        return [(stat.namespace, stat.name, stat.dimensions) for stat in self.stats.values()]


def alarm_metric(properties: Mapping[str, Any]) -> AlarmMetric:
    """The metric of an alarm's (resolved) properties; UnobservableAlarm for what is not evaluated."""
    if properties.get("MetricName"):
        statistic = properties.get("Statistic") or properties.get("ExtendedStatistic")
        if not statistic:
            raise UnobservableAlarm("the alarm has neither Statistic nor ExtendedStatistic")
        stat = MetricStat(
            namespace=str(properties["Namespace"]),
            name=str(properties["MetricName"]),
            dimensions={str(d["Name"]): str(d["Value"]) for d in properties.get("Dimensions") or []},
            statistic=str(statistic),
            period=int(properties["Period"]),
        )
        return AlarmMetric(period=stat.period, single=stat, trigger=stat.trigger())
    queries = list(properties.get("Metrics") or [])
    if not queries:
        raise UnobservableAlarm("the alarm has no metric")
    if properties.get("ThresholdMetricId"):
        raise UnobservableAlarm("anomaly detection bands are not evaluated locally")
    returned = [query for query in queries if query.get("ReturnData", True)]
    if len(returned) != 1 or "Expression" not in returned[0]:
        raise UnobservableAlarm("the alarm's Metrics do not return exactly one expression")
    stats: dict[str, MetricStat] = {}
    for query in queries:
        metric_stat = query.get("MetricStat")
        if metric_stat:
            metric = metric_stat["Metric"]
            stats[str(query["Id"])] = MetricStat(
                namespace=str(metric["Namespace"]),
                name=str(metric["MetricName"]),
                dimensions={str(d["Name"]): str(d["Value"]) for d in metric.get("Dimensions") or []},
                statistic=str(metric_stat["Stat"]),
                period=int(metric_stat["Period"]),
            )
        elif query is not returned[0]:
            raise UnobservableAlarm(f"query {query.get('Id')}: nested expressions are not evaluated locally")
    text = str(returned[0]["Expression"])
    expression: MathExpression | InsightsQuery
    if text.lstrip().upper().startswith("SELECT"):
        expression = InsightsQuery.parse(text)
        period = int(returned[0].get("Period") or 60)
    else:
        expression = MathExpression(text)
        unknown = expression.ids - set(stats)
        if unknown:
            raise UnobservableAlarm(f"metric math refers to {', '.join(sorted(unknown))}, not a metric of the alarm")
        periods = {stat.period for stat in stats.values()}
        period = int(returned[0].get("Period") or (periods.pop() if len(periods) == 1 else 60))
    trigger_metrics = [
        {
            key: value
            for key, value in query.items()
            if key in ("Id", "Expression", "Label", "ReturnData", "MetricStat", "Period")
        }
        for query in queries
    ]
    return AlarmMetric(
        period=period, stats=stats, expression=expression, trigger={"Period": period, "Metrics": trigger_metrics}
    )


# -- the template's alarms -------------------------------------------------------------------------------


@dataclass
class LocalAlarm:
    logical_id: str
    name: str
    arn: str
    description: str
    properties: dict[str, Any]
    rule: AlarmRule | None
    metric: AlarmMetric | None
    unobservable: str | None
    state: str = INSUFFICIENT_DATA
    state_reason: str = "Unchecked: Initial alarm creation"
    transitions: int = 0
    created_at: float = field(default_factory=time.time)

    def actions_for(self, state: str) -> list[str]:
        key = {ALARM: "AlarmActions", OK: "OKActions", INSUFFICIENT_DATA: "InsufficientDataActions"}[state]
        return [str(action) for action in self.properties.get(key) or []]

    def describe(self) -> dict[str, Any]:
        return {
            "logical_id": self.logical_id,
            "name": self.name,
            "state": self.state,
            "reason": self.state_reason,
            "transitions": self.transitions,
            "evaluated": self.unobservable is None,
            **({"not_observable": self.unobservable} if self.unobservable else {}),
        }


def notification(alarm: LocalAlarm, old_state: str, verdict: Verdict, region: str, account_id: str) -> dict[str, Any]:
    """CloudWatch's SNS message for a state change (the ``Message`` of the SNS notification)."""
    properties = alarm.properties
    trigger: dict[str, Any] = dict(alarm.metric.trigger) if alarm.metric else {}
    if alarm.rule is not None:
        trigger.update(
            {
                "EvaluationPeriods": alarm.rule.evaluation_periods,
                "DatapointsToAlarm": alarm.rule.datapoints_to_alarm,
                "ComparisonOperator": alarm.rule.comparison,
                "Threshold": float(alarm.rule.threshold),
                "TreatMissingData": alarm.rule.treat_missing_data,
                "EvaluateLowSampleCountPercentile": str(properties.get("EvaluateLowSampleCountPercentile", "")),
            }
        )
    return {
        "AlarmName": alarm.name,
        "AlarmDescription": alarm.description or None,
        "AWSAccountId": account_id,
        "AlarmConfigurationUpdatedTimestamp": _iso(alarm.created_at),
        "NewStateValue": verdict.state,
        "NewStateReason": verdict.reason,
        "StateChangeTime": _iso_now(),
        "Region": REGION_NAMES.get(region, region),
        "AlarmArn": alarm.arn,
        "OldStateValue": old_state,
        "OKActions": alarm.actions_for(OK),
        "AlarmActions": alarm.actions_for(ALARM),
        "InsufficientDataActions": alarm.actions_for(INSUFFICIENT_DATA),
        "Trigger": trigger,
    }


def notification_subject(alarm_name: str, state: str, region: str) -> str:
    # SNS subjects are at most 100 characters; CloudWatch truncates the alarm name.
    suffix = f'" in {REGION_NAMES.get(region, region)}'
    prefix = f'{state}: "'
    return prefix + alarm_name[: 100 - len(prefix) - len(suffix)] + suffix


def scaled_period(period: float, scale: float) -> float:
    return max(MIN_SCALED_PERIOD_SECONDS, period * scale)


def evaluation_range(
    metric: AlarmMetric, rule: AlarmRule, store: MetricStore, scale: float, now: float
) -> list[Datapoint]:
    """The datapoints of the last complete periods (oldest first), periods aligned on the epoch."""
    period = scaled_period(metric.period, scale)
    last = math.floor(now / period) - 1
    points = []
    for index in range(last - rule.evaluation_periods - LOOKBACK_PERIODS + 1, last + 1):
        start = index * period
        points.append(Datapoint(start, metric.value(store, start, start + period)))
    return points


# -- the moto side and the evaluation loop ------------------------------------------------------------------


def verify_sqs_age_seam() -> None:
    """Fail loudly if moto's SQS backend no longer keeps messages with a ``sent_timestamp``."""
    from moto.sqs.models import Message, Queue, sqs_backends  # noqa: F401

    if (
        "_messages" not in Queue.__init__.__code__.co_names
        or "sent_timestamp" not in Message.__init__.__code__.co_names
    ):
        raise RuntimeError("moto.sqs.models.Queue._messages / Message.sent_timestamp moved: queue age unobservable")


def oldest_message_age_seconds(account_id: str, region: str, queue_name: str, now: float) -> float | None:
    """ApproximateAgeOfOldestMessage without receiving: moto's in-process queue, every message not
    deleted (in flight too, as in SQS); 0 for an empty queue, None for an unknown one."""
    from moto.sqs.models import sqs_backends

    queue = sqs_backends[account_id][region].queues.get(queue_name)
    if queue is None:
        return None
    with queue._messages_lock:
        # moto types sent_timestamp as None until the message is sent (then epoch milliseconds).
        stamps = [float(getattr(message, "sent_timestamp", None) or 0) for message in queue._messages]
    stamps = [stamp for stamp in stamps if stamp > 0]
    return max(0.0, now - min(stamps) / 1000) if stamps else 0.0


def alarm_rule(properties: Mapping[str, Any]) -> AlarmRule:
    evaluation_periods = int(properties.get("EvaluationPeriods", 1))
    return AlarmRule(
        comparison=str(properties.get("ComparisonOperator")),
        threshold=float(properties.get("Threshold", 0)),
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=int(properties.get("DatapointsToAlarm", evaluation_periods)),
        treat_missing_data=str(properties.get("TreatMissingData", "missing")),
    )


def read_alarm(
    properties: Mapping[str, Any],
    *,
    queues: set[str] | None = None,
    functions: set[str] | None = None,
    state_machines: set[str] | None = None,
) -> tuple[AlarmRule | None, AlarmMetric | None, str | None]:
    """An alarm's rule and metric, and why it cannot be evaluated locally (None when it can).

    ``queues``/``functions``/``state_machines``: the local queue names, function names and state
    machine ARNs its dimensions must name; None skips that check (for the unresolved template,
    where every queue, function and state machine is local).
    """
    try:
        rule = alarm_rule(properties)
        metric = alarm_metric(properties)
    except UnobservableAlarm as exc:
        return None, None, str(exc)
    except (KeyError, TypeError, ValueError) as exc:  # CloudFormation would have refused it
        return None, None, f"malformed alarm properties: {type(exc).__name__}: {exc}"
    for namespace, name, dimensions in metric.watched():
        if namespace == "AWS/SQS":
            queue = (dimensions or {}).get("QueueName")
            if name not in SQS_COUNT_ATTRIBUTES and name != SQS_AGE_METRIC:
                return rule, metric, f"AWS/SQS {name} is not sampled locally"
            if queues is not None and queue not in queues:
                return rule, metric, f"AWS/SQS {name}: queue {queue} is not a local queue"
        elif namespace == "AWS/Lambda":
            function = (dimensions or {}).get("FunctionName")
            if name not in LAMBDA_METRICS:
                return rule, metric, f"AWS/Lambda {name} is not measured by the local Lambda runner"
            if set(dimensions or {}) != {"FunctionName"} or (functions is not None and function not in functions):
                return rule, metric, f"AWS/Lambda {name}: {dict(dimensions or {})} is not a function run locally"
        elif namespace == "AWS/States" and name in STATES_METRICS:
            arn = (dimensions or {}).get("StateMachineArn")
            if set(dimensions or {}) != {"StateMachineArn"} or (
                state_machines is not None and arn not in state_machines
            ):
                return rule, metric, f"AWS/States {name}: {dict(dimensions or {})} is not a local state machine"
        elif namespace.startswith("AWS/"):
            why = UNEMITTED_NAMESPACES.get(namespace, "the service does not run locally")
            return rule, metric, f"{namespace} {name}: {why}"
    return rule, metric, None


class AlarmEvaluator:
    """Evaluates the template's alarms in a thread of the ``serve`` process (which hosts moto)."""

    def __init__(
        self,
        template: CloudFormationTemplate,
        resolver: IntrinsicResolver,
        settings: RuntimeSettings,
        *,
        queues: Mapping[str, str],
        functions: Iterable[str],
        state_machines: Iterable[str] = (),
    ) -> None:
        """``queues``: local queue name → URL; ``functions``: local function names;
        ``state_machines``: local state machine ARNs."""
        self.settings = settings
        self.scale = settings.alarm_period_scale
        self._queues = dict(queues)
        self._functions = set(functions)
        self._state_machines = set(state_machines)
        # Executions already counted, per (state machine, status).
        self._counted_executions: dict[tuple[str, str], set[str]] = {}
        self._resolver = resolver
        self._template = template
        self.alarms: list[LocalAlarm] = []
        self.topics: dict[str, str] = {}  # logical id -> ARN
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._clients: dict[str, Any] = {}
        self._client_lock = threading.Lock()
        self._age_observable = True
        for resource in template.resources.values():
            if resource.type == "AWS::CloudWatch::Alarm":
                self.alarms.append(self._local_alarm(resource.logical_id, resource.properties))
        longest = max(
            (
                scaled_period(alarm.metric.period, self.scale) * (alarm.rule.evaluation_periods + LOOKBACK_PERIODS + 2)
                for alarm in self.alarms
                if alarm.metric and alarm.rule
            ),
            default=60.0,
        )
        self.store = MetricStore(retention_seconds=longest)
        evaluated = [alarm for alarm in self.alarms if alarm.metric is not None]
        shortest = min((scaled_period(a.metric.period, self.scale) for a in evaluated if a.metric), default=1.0)
        self.tick_seconds = min(2.0, max(0.2, shortest / 4))

    # -- setup --------------------------------------------------------------------------------------

    def _local_alarm(self, logical_id: str, raw: Mapping[str, Any]) -> LocalAlarm:
        properties = dict(self._resolver.resolve(dict(raw)) or {})
        name = str(properties.get("AlarmName") or generated_physical_name(
            self.settings.stack_name, logical_id, max_length=255))  # fmt: skip
        arn = f"arn:aws:cloudwatch:{self.settings.region}:{self.settings.account_id}:alarm:{name}"
        rule, metric, unobservable = read_alarm(
            properties, queues=set(self._queues), functions=self._functions, state_machines=self._state_machines
        )
        return LocalAlarm(
            logical_id=logical_id,
            name=name,
            arn=arn,
            description=str(properties.get("AlarmDescription", "")),
            properties=properties,
            rule=rule,
            metric=metric if unobservable is None else None,
            unobservable=unobservable,
        )

    def _client(self, service: str) -> Any:
        with self._client_lock:
            if service not in self._clients:
                self._clients[service] = moto_client(self.settings, service)
            return self._clients[service]

    def provision(self) -> None:
        """The alarm topics and their SQS subscriptions, and the alarms, in moto."""
        sns = self._client("sns")
        for resource in self._template.resources.values():
            if resource.type != "AWS::SNS::Topic":
                continue
            # The provisioner resolves Refs to a topic as arn:...:<LogicalId>: create it under that name.
            arn = str(self._resolver.resolve({"Ref": resource.logical_id}))
            created = sns.create_topic(Name=arn.rsplit(":", 1)[-1])["TopicArn"]
            if created != arn:
                raise RuntimeError(f"topic {resource.logical_id}: moto made {created}, the template refers to {arn}")
            self.topics[resource.logical_id] = arn
        for resource in self._template.resources.values():
            if resource.type != "AWS::SNS::Subscription":
                continue
            properties = self._resolver.resolve(dict(resource.properties)) or {}
            if properties.get("Protocol") == "sqs":
                sns.subscribe(TopicArn=properties["TopicArn"], Protocol="sqs", Endpoint=properties["Endpoint"])
            else:
                LOG.info(
                    "subscription %s (%s) is not delivered locally", resource.logical_id, properties.get("Protocol")
                )
        cloudwatch = self._client("cloudwatch")
        for alarm in self.alarms:
            request: dict[str, Any] = {
                key: alarm.properties[key]
                for key in (
                    "AlarmDescription", "ActionsEnabled", "OKActions", "AlarmActions", "InsufficientDataActions",
                    "MetricName", "Namespace", "Statistic", "ExtendedStatistic", "Dimensions", "Period", "Unit",
                    "EvaluationPeriods", "DatapointsToAlarm", "Threshold", "ComparisonOperator", "TreatMissingData",
                    "EvaluateLowSampleCountPercentile", "Metrics", "ThresholdMetricId",
                )
                if key in alarm.properties
            }  # fmt: skip
            cloudwatch.put_metric_alarm(AlarmName=alarm.name, **request)
        evaluated = [alarm.logical_id for alarm in self.alarms if alarm.unobservable is None]
        LOG.info(
            "alarms: %d evaluated locally (periods x%s, every %.1f s): %s",
            len(evaluated),
            self.scale,
            self.tick_seconds,
            ", ".join(evaluated) or "none",
        )
        for alarm in self.alarms:
            if alarm.unobservable is not None:
                LOG.info("alarm %s stays INSUFFICIENT_DATA locally: %s", alarm.logical_id, alarm.unobservable)

    # -- metrics in --------------------------------------------------------------------------------

    def record_invocation(self, function_name: str, result: InvocationResult, duration_ms: float) -> None:
        """A finished invocation: Lambda's metrics, and the EMF metrics in its output."""
        try:
            self._record_invocation(function_name, result, duration_ms)
        except Exception:  # metrics must never fail an invocation
            LOG.warning("could not record the metrics of an invocation of %s", function_name, exc_info=True)

    def _record_invocation(self, function_name: str, result: InvocationResult, duration_ms: float) -> None:
        now = time.time()
        dimensions = {"FunctionName": function_name}
        error_type = ""
        if result.errored:
            try:
                error_type = str(json.loads(result.output).get("errorType", ""))
            except (ValueError, AttributeError):
                error_type = ""
        if error_type in THROTTLE_ERROR_TYPES:
            self.store.put("AWS/Lambda", "Throttles", dimensions, 1, now)
        else:
            self.store.put("AWS/Lambda", "Invocations", dimensions, 1, now)
            self.store.put("AWS/Lambda", "Errors", dimensions, 1 if result.errored else 0, now)
            self.store.put("AWS/Lambda", "Duration", dimensions, duration_ms, now)
            self.store.put("AWS/Lambda", "Throttles", dimensions, 0, now)
        for line in result.logs.splitlines():
            for namespace, name, metric_dimensions, values, timestamp in parse_emf(line, now):
                for value in values:
                    self.store.put(namespace, name, metric_dimensions, value, timestamp)

    def sample_executions(self) -> None:
        """AWS/States execution metrics from moto's executions: each one that ended in a watched
        status counts 1 at its stop time (moto's interpreter enforces the definition's TimeoutSeconds)."""
        watched: set[tuple[str, str]] = set()
        for alarm in self.alarms:
            for namespace, name, dimensions in alarm.metric.watched() if alarm.metric else []:
                if namespace == "AWS/States" and name in STATES_METRICS and dimensions:
                    watched.add((dimensions["StateMachineArn"], name))
        stepfunctions = self._client("stepfunctions")
        for arn, name in watched:
            counted = self._counted_executions.setdefault((arn, name), set())
            pages = stepfunctions.get_paginator("list_executions").paginate(
                stateMachineArn=arn, statusFilter=STATES_METRICS[name]
            )
            for page in pages:
                for execution in page["executions"]:
                    if execution["executionArn"] in counted:
                        continue
                    counted.add(execution["executionArn"])
                    stopped = execution.get("stopDate")
                    at = stopped.timestamp() if stopped is not None else time.time()
                    self.store.put("AWS/States", name, {"StateMachineArn": arn}, 1, at)

    def sample_queues(self, now: float) -> None:
        watched: dict[str, set[str]] = {}
        for alarm in self.alarms:
            if alarm.metric is None:
                continue
            for namespace, name, dimensions in alarm.metric.watched():
                if namespace == "AWS/SQS" and dimensions and dimensions.get("QueueName") in self._queues:
                    watched.setdefault(dimensions["QueueName"], set()).add(name)
        sqs = self._client("sqs")
        for queue_name, names in watched.items():
            dimensions = {"QueueName": queue_name}
            counts = [name for name in names if name in SQS_COUNT_ATTRIBUTES]
            if counts:
                attributes = sqs.get_queue_attributes(
                    QueueUrl=self._queues[queue_name], AttributeNames=[SQS_COUNT_ATTRIBUTES[n] for n in counts]
                )["Attributes"]
                for name in counts:
                    self.store.put("AWS/SQS", name, dimensions, float(attributes[SQS_COUNT_ATTRIBUTES[name]]), now)
            if SQS_AGE_METRIC in names and self._age_observable:
                age = oldest_message_age_seconds(self.settings.account_id, self.settings.region, queue_name, now)
                if age is not None:
                    self.store.put("AWS/SQS", SQS_AGE_METRIC, dimensions, age, now)

    # -- evaluation --------------------------------------------------------------------------------

    def evaluate_all(self, now: float) -> list[tuple[LocalAlarm, str, Verdict]]:
        """Evaluate every observable alarm; apply and publish each state change."""
        changes = []
        for alarm in self.alarms:
            if alarm.metric is None or alarm.rule is None:
                continue
            points = evaluation_range(alarm.metric, alarm.rule, self.store, self.scale, now)
            verdict = evaluate(alarm.rule, points, alarm.state)
            if verdict.state == alarm.state:
                continue
            old = alarm.state
            try:
                self._apply(alarm, old, verdict)
            except Exception:  # not recorded: the next evaluation makes the transition again
                LOG.warning("alarm %s: %s -> %s not applied", alarm.logical_id, old, verdict.state, exc_info=True)
                continue
            alarm.state, alarm.state_reason = verdict.state, verdict.reason
            alarm.transitions += 1
            changes.append((alarm, old, verdict))
        return changes

    def _apply(self, alarm: LocalAlarm, old_state: str, verdict: Verdict) -> None:
        LOG.info("alarm %s: %s -> %s (%s)", alarm.logical_id, old_state, verdict.state, verdict.reason)
        self._client("cloudwatch").set_alarm_state(
            AlarmName=alarm.name,
            StateValue=verdict.state,
            StateReason=verdict.reason[:1023],
            StateReasonData=json.dumps(verdict.reason_data),
        )
        if not alarm.properties.get("ActionsEnabled", True):
            return
        message = json.dumps(notification(alarm, old_state, verdict, self.settings.region, self.settings.account_id))
        for action in alarm.actions_for(verdict.state):
            if not action.startswith("arn:aws:sns:"):
                LOG.info("alarm %s: action %s is not run locally", alarm.logical_id, action)
                continue
            self._client("sns").publish(
                TopicArn=action,
                Subject=notification_subject(alarm.name, verdict.state, self.settings.region),
                Message=message,
            )

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            verify_sqs_age_seam()
        except (ImportError, RuntimeError) as exc:
            self._age_observable = False
            LOG.warning("%s", exc)
        self._thread = threading.Thread(target=self._loop, name="alarm-evaluator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            try:
                self.sample_queues(now)
                self.sample_executions()
                self.evaluate_all(now)
            except Exception:  # one failed round must not end evaluation; the next retries
                LOG.warning("alarm evaluation failed", exc_info=True)
            self._stop.wait(self.tick_seconds)

    def status(self) -> list[dict[str, Any]]:
        return [alarm.describe() for alarm in self.alarms]
