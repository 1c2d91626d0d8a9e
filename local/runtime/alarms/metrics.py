"""CloudWatch metrics as the local alarms see them: samples, statistics, EMF, math and Insights.

Stands in for CloudWatch's metric store and query side: raw samples per series (namespace, name,
exact dimensions), statistics per period (``Sum``, ``Average``, ``pNN``, ...), metrics the
functions emit as Embedded Metric Format lines, and what an alarm watches: one ``MetricStat``,
metric math over several, or a Metrics Insights query.
"""

from __future__ import annotations

import ast
import bisect
import json
import math
import operator
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from local.runtime.alarms.rules import UnobservableAlarm

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
    """Raw samples per series (namespace, name, dimensions), kept for ``retention_seconds`` of ``clock``.

    Each series is kept in timestamp order, so a period's samples are found by bisection, not by a
    scan (docs/local-stack.md, Alarms).
    """

    def __init__(self, retention_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.retention_seconds = retention_seconds
        self._clock = clock
        self._lock = threading.Lock()
        # (namespace, name) -> dimensions -> (timestamp, value), oldest first.
        self._series: dict[tuple[str, str], dict[Dimensions, list[tuple[float, float]]]] = {}

    def put(self, namespace: str, name: str, dimensions: Mapping[str, str], value: float, timestamp: float) -> None:
        dimension_set = frozenset((str(k), str(v)) for k, v in dimensions.items())
        sample = (timestamp, float(value))
        with self._lock:
            samples = self._series.setdefault((namespace, name), {}).setdefault(dimension_set, [])
            if samples and timestamp < samples[-1][0]:
                # EMF timestamps come from the lines' own clocks: a late line goes in its place.
                bisect.insort_right(samples, sample)
            else:
                samples.append(sample)
            expired = bisect.bisect_left(samples, (self._clock() - self.retention_seconds, -math.inf))
            if expired:
                del samples[:expired]

    def samples(
        self, namespace: str, name: str, select: Callable[[Dimensions], bool], start: float, end: float
    ) -> list[float]:
        """Every sample in [start, end) of the series of this metric whose dimensions ``select`` accepts."""
        found: list[float] = []
        with self._lock:
            for dimensions, samples in self._series.get((namespace, name), {}).items():
                if not select(dimensions):
                    continue
                first = bisect.bisect_left(samples, (start, -math.inf))
                last = bisect.bisect_left(samples, (end, -math.inf), lo=first)
                found.extend(value for _, value in samples[first:last])
        return found

    def names(self) -> set[tuple[str, str]]:
        with self._lock:
            return set(self._series)


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
