"""The local alarm evaluator (local/runtime/alarms/evaluator.py) on synthetic datapoints: M out of N, every
TreatMissingData, comparisons and statistics, the evaluation range over scaled periods, EMF lines,
the Metrics Insights and metric math the template's alarms use, and CloudWatch's notification."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.constructs.monitoring import SYSTEM_ERROR_CODES, system_failures_query
from local.runtime.alarms.evaluator import evaluation_range
from local.runtime.alarms.metrics import InsightsQuery, MathExpression, MetricStore, aggregate, alarm_metric, parse_emf
from local.runtime.alarms.moto_backends import oldest_message_age_seconds, verify_sqs_age_seam
from local.runtime.alarms.rules import ALARM, INSUFFICIENT_DATA, OK, AlarmRule, Datapoint, UnobservableAlarm, evaluate
from local.runtime.alarms.template_alarms import LocalAlarm, notification, notification_subject

pytestmark = pytest.mark.unit
X = 5.0  # breaching (> 0)
O = 0.0  # not breaching  # noqa: E741
NA = None  # missing


def points(*values: float | None) -> list[Datapoint]:
    return [Datapoint(1_000_000.0 + 60 * index, value) for index, value in enumerate(values)]


def rule(m: int, n: int, treat: str = "missing", comparison: str = "GreaterThanThreshold") -> AlarmRule:
    return AlarmRule(comparison=comparison, threshold=0, evaluation_periods=n, datapoints_to_alarm=m,
                     treat_missing_data=treat)  # fmt: skip


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((O, X, X), ALARM),  # 2 of the last 3 breach
        ((X, O, X), ALARM),  # not consecutive: still 2 of 3
        ((X, X, O, O, X), OK),  # only the most recent 3 count
        ((O, O, X), OK),
        ((X, X, X), ALARM),
    ],
)
def test_m_out_of_n(values: tuple[float, ...], expected: str) -> None:
    assert evaluate(rule(2, 3), points(*values), OK).state == expected


@pytest.mark.parametrize("treat", ["missing", "ignore", "breaching", "notBreaching"])
def test_enough_real_datapoints_in_the_range_make_missing_data_irrelevant(treat: str) -> None:
    # 3 real datapoints among 5: CloudWatch evaluates the 3 most recent real ones, whatever the treatment.
    assert evaluate(rule(3, 3, treat), points(X, NA, X, NA, X), OK).state == ALARM
    assert evaluate(rule(3, 3, treat), points(O, NA, X, NA, X), ALARM).state == OK


@pytest.mark.parametrize(
    ("treat", "current", "expected"),
    [
        ("missing", OK, INSUFFICIENT_DATA),
        ("missing", ALARM, INSUFFICIENT_DATA),
        ("ignore", ALARM, ALARM),
        ("ignore", OK, OK),
        ("breaching", OK, ALARM),
        ("notBreaching", ALARM, OK),
    ],
)
def test_no_data_at_all(treat: str, current: str, expected: str) -> None:
    verdict = evaluate(rule(1, 1, treat), points(NA, NA, NA), current)
    assert verdict.state == expected
    if treat == "notBreaching":
        assert "treated as [NonBreaching]" in verdict.reason


@pytest.mark.parametrize(
    ("values", "treat", "current", "expected"),
    [
        # one real breaching datapoint, two missing: the treatment fills the gap
        ((NA, X, NA), "breaching", OK, ALARM),
        ((NA, X, NA), "notBreaching", ALARM, OK),
        ((NA, X, NA), "ignore", ALARM, ALARM),
        ((NA, X, NA), "ignore", OK, OK),
        ((NA, X, NA), "missing", OK, INSUFFICIENT_DATA),
        # the real datapoints decide on their own: whatever the missing ones were, 3 of 3 cannot breach
        ((NA, O, NA), "missing", ALARM, OK),
        ((NA, O, NA), "ignore", ALARM, OK),
        ((NA, O, NA), "breaching", ALARM, OK),
    ],
)
def test_fewer_real_datapoints_than_evaluation_periods(
    values: tuple[float | None, ...], treat: str, current: str, expected: str
) -> None:
    assert evaluate(rule(3, 3, treat), points(*values), current).state == expected


def test_two_real_breaching_of_a_two_of_three_alarm_alarm_without_filling() -> None:
    assert evaluate(rule(2, 3, "missing"), points(X, NA, X), OK).state == ALARM


@pytest.mark.parametrize(
    ("comparison", "value", "breaches"),
    [
        ("GreaterThanThreshold", 0.0, False),
        ("GreaterThanOrEqualToThreshold", 0.0, True),
        ("LessThanThreshold", -1.0, True),
        ("LessThanOrEqualToThreshold", 0.5, False),
    ],
)
def test_comparisons(comparison: str, value: float, breaches: bool) -> None:
    assert rule(1, 1, comparison=comparison).breaches(value) is breaches


def test_anomaly_detection_comparisons_are_reported_as_not_evaluated() -> None:
    with pytest.raises(UnobservableAlarm, match="anomaly"):
        rule(1, 1, comparison="LessThanLowerOrGreaterThanUpperThreshold")


def test_alarm_reason_reads_like_cloudwatch() -> None:
    verdict = evaluate(rule(1, 1), points(O, O, 2.0), OK)
    assert verdict.state == ALARM
    assert verdict.reason.startswith("Threshold Crossed: 1 out of the last 1 datapoints [2.0 (")
    assert "was greater than the threshold (0.0)" in verdict.reason
    assert verdict.reason_data["recentDatapoints"] == [2.0]


def test_statistics() -> None:
    values = [float(v) for v in range(1, 11)]
    assert aggregate(values, "Sum") == 55
    assert aggregate(values, "Maximum") == 10
    assert aggregate(values, "Minimum") == 1
    assert aggregate(values, "Average") == 5.5
    assert aggregate(values, "SampleCount") == 10
    assert aggregate(values, "p90") == 9
    assert aggregate([], "Sum") is None
    with pytest.raises(UnobservableAlarm):
        aggregate(values, "TM(10%:90%)")


def test_evaluation_range_uses_complete_scaled_periods_and_exact_dimensions() -> None:
    # A 60 s period scaled by 0.05 lasts 3 s; at t=100.5 the last complete period is [96, 99).
    metric = alarm_metric(
        {"MetricName": "ApproximateNumberOfMessagesVisible", "Namespace": "AWS/SQS", "Statistic": "Maximum",
         "Period": 60, "Dimensions": [{"Name": "QueueName", "Value": "dlq"}]}
    )  # fmt: skip
    store = MetricStore(retention_seconds=10**10)
    store.put("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": "dlq"}, 0, 94.0)
    store.put("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": "dlq"}, 2, 97.0)
    store.put("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": "dlq"}, 1, 98.9)
    store.put("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": "dlq"}, 7, 99.5)  # still open
    store.put("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": "other"}, 9, 97.0)
    range_ = evaluation_range(metric, rule(1, 1), store, 0.05, now=100.5)
    assert [(p.timestamp, p.value) for p in range_] == [(90.0, None), (93.0, 0.0), (96.0, 2.0)]
    assert evaluate(rule(1, 1, "notBreaching"), range_, OK).state == ALARM


def test_the_store_finds_a_periods_samples_whatever_order_they_arrived_in_and_forgets_old_ones() -> None:
    store = MetricStore(retention_seconds=60)
    now = time.time()
    # EMF lines carry their own timestamps: a worker's late line lands among newer samples.
    for value, age in ((1, 50), (2, 30), (3, 10), (4, 40), (5, 30), (6, 100)):
        store.put("RagIngest", "Searches", {"service": "api"}, value, now - age)
    store.put("RagIngest", "Searches", {"service": "pipeline"}, 7, now - 30)
    api = frozenset({("service", "api")})

    def window(start: float, end: float) -> list[float]:
        return store.samples("RagIngest", "Searches", lambda dims: dims == api, now - start, now - end)

    assert sorted(window(45, 25)) == [2, 4, 5]  # [now-45, now-25): ages 40, 30, 30
    assert sorted(window(30, 29)) == [2, 5]  # the start is inclusive
    assert window(10, 0) == [3] and window(25, 10) == []  # the end is exclusive
    assert window(200, 0) == [1, 4, 2, 5, 3]  # oldest first; the 100-second-old sample is gone
    assert store.samples("RagIngest", "Searches", lambda dims: True, now - 200, now) == [1, 4, 2, 5, 3, 7]
    assert store.samples("RagIngest", "Other", lambda dims: True, now - 200, now) == []
    assert store.names() == {("RagIngest", "Searches")}


EMF_LINE = json.dumps(
    {
        "_aws": {
            "Timestamp": 1_700_000_000_000,
            "CloudWatchMetrics": [
                {
                    "Namespace": "RagIngest",
                    "Dimensions": [["service", "ErrorCode", "Cause"]],
                    "Metrics": [{"Name": "DocumentsFailed", "Unit": "Count"}],
                }
            ],
        },
        "service": "pipeline",
        "ErrorCode": "TIMEOUT",
        "Cause": "system",
        "DocumentsFailed": [1.0, 1.0],
    }
)


def test_emf_lines_become_metrics_and_other_lines_nothing() -> None:
    [(namespace, name, dimensions, values, timestamp)] = parse_emf(EMF_LINE, received_at=0)
    assert (namespace, name, dimensions, values) == (
        "RagIngest",
        "DocumentsFailed",
        {"service": "pipeline", "ErrorCode": "TIMEOUT", "Cause": "system"},
        [1.0, 1.0],
    )
    assert timestamp == 1_700_000_000
    assert parse_emf('{"level": "INFO", "message": "document ready"}', 0) == []
    assert parse_emf("START RequestId: 1", 0) == []
    assert parse_emf('{"_aws": not json', 0) == []


def test_the_templates_metrics_insights_query_sums_system_codes_over_every_series() -> None:
    query = InsightsQuery.parse(system_failures_query())
    store = MetricStore(retention_seconds=10**10)
    for [(namespace, name, dimensions, values, _timestamp)] in (parse_emf(EMF_LINE, 0),):
        for value in values:
            store.put(namespace, name, dimensions, value, 10.0)
    system = {"service": "other", "ErrorCode": SYSTEM_ERROR_CODES[0], "Cause": "system"}
    store.put("RagIngest", "DocumentsFailed", system, 1, 11.0)
    user_caused = {"service": "pipeline", "ErrorCode": "ENCRYPTED_PDF", "Cause": "input"}
    store.put("RagIngest", "DocumentsFailed", user_caused, 1, 11.0)
    assert query.value(store, 0, 20) == 3.0  # 2 TIMEOUT + 1 INTERNAL_ERROR, not the user's ENCRYPTED_PDF
    assert query.value(store, 20, 40) is None


@pytest.mark.parametrize(
    "expression",
    ["SELECT SUM(X) FROM RagIngest GROUP BY Stage", "SELECT SUM(X) FROM RagIngest WHERE (A = 'b' OR A = 'c')"],
)
def test_metrics_insights_outside_the_local_subset_is_not_evaluated(expression: str) -> None:
    with pytest.raises(UnobservableAlarm):
        InsightsQuery.parse(expression)


def test_the_error_rate_metric_math() -> None:
    expression = MathExpression("IF(invocations >= 10, 100 * errors / invocations, 0)")
    assert expression.ids == {"invocations", "errors"}
    assert expression.value({"invocations": 20, "errors": 5}) == 25.0
    assert expression.value({"invocations": 9, "errors": 9}) == 0.0
    assert expression.value({"invocations": None, "errors": 1}) is None
    with pytest.raises(UnobservableAlarm):
        MathExpression("FILL(errors, 0)")
    with pytest.raises(UnobservableAlarm):
        MathExpression("__import__('os')")


def test_an_error_rate_alarms_metrics_evaluate_per_period() -> None:
    def stat(metric: str) -> dict[str, Any]:
        return {"Metric": {"Dimensions": [{"Name": "FunctionName", "Value": "fn"}], "MetricName": metric,
                           "Namespace": "AWS/Lambda"}, "Period": 300, "Stat": "Sum"}  # fmt: skip

    metric = alarm_metric(
        {
            "Metrics": [
                {
                    "Expression": "IF(invocations >= 2, 100 * errors / invocations, 0)",
                    "Id": "expr_1",
                    "ReturnData": True,
                },
                {"Id": "errors", "MetricStat": stat("Errors"), "ReturnData": False},
                {"Id": "invocations", "MetricStat": stat("Invocations"), "ReturnData": False},
            ]
        }
    )
    store = MetricStore(retention_seconds=10**10)
    for errored in (1, 1, 0, 1):
        store.put("AWS/Lambda", "Invocations", {"FunctionName": "fn"}, 1, 1.0)
        store.put("AWS/Lambda", "Errors", {"FunctionName": "fn"}, errored, 1.0)
    assert metric.period == 300
    assert metric.value(store, 0, 15) == 75.0


def test_notification_has_cloudwatchs_shape() -> None:
    properties = {
        "AlarmActions": ["arn:aws:sns:us-east-1:123456789012:Topic"],
        "OKActions": ["arn:aws:sns:us-east-1:123456789012:Topic"],
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Namespace": "AWS/SQS",
        "Statistic": "Maximum",
        "Period": 60,
        "Dimensions": [{"Name": "QueueName", "Value": "dlq"}],
    }
    alarm = LocalAlarm(
        logical_id="DlqAlarm",
        name="Stack-DlqAlarm-ABC",
        arn="arn:aws:cloudwatch:us-east-1:123456789012:alarm:Stack-DlqAlarm-ABC",
        description="Messages in the DLQ",
        properties=properties,
        rule=rule(1, 1, "notBreaching"),
        metric=alarm_metric(properties),
        unobservable=None,
    )
    verdict = evaluate(alarm.rule, points(1.0), OK)  # type: ignore[arg-type]
    message = notification(alarm, OK, verdict, "us-east-1", "123456789012")
    assert message["AlarmName"] == "Stack-DlqAlarm-ABC"
    assert (message["OldStateValue"], message["NewStateValue"]) == ("OK", "ALARM")
    assert message["NewStateReason"] == verdict.reason
    assert message["Region"] == "US East (N. Virginia)"
    assert message["AlarmActions"] == message["OKActions"] == properties["AlarmActions"]
    trigger = message["Trigger"]
    assert trigger["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert trigger["Namespace"] == "AWS/SQS"
    assert trigger["Statistic"] == "MAXIMUM"
    assert trigger["Dimensions"] == [{"value": "dlq", "name": "QueueName"}]
    assert (trigger["Period"], trigger["EvaluationPeriods"], trigger["Threshold"]) == (60, 1, 0.0)
    assert trigger["ComparisonOperator"] == "GreaterThanThreshold"
    assert trigger["TreatMissingData"] == "notBreaching"
    json.dumps(message)  # serializable as is
    subject = notification_subject("x" * 200, "ALARM", "us-east-1")
    assert len(subject) == 100 and subject.startswith('ALARM: "xxx') and subject.endswith("in US East (N. Virginia)")


def test_queue_age_is_read_from_moto_without_receiving_and_counts_in_flight_messages() -> None:
    verify_sqs_age_seam()
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="aged")["QueueUrl"]
        assert oldest_message_age_seconds("123456789012", "us-east-1", "aged", time.time()) == 0.0
        sqs.send_message(QueueUrl=url, MessageBody="first")
        sent = time.time()
        sqs.send_message(QueueUrl=url, MessageBody="second")
        age = oldest_message_age_seconds("123456789012", "us-east-1", "aged", sent + 100)
        assert age is not None and 99 <= age <= 101
        # Reading the age received nothing: both messages are still visible, never received.
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "2"
        [first] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=60)["Messages"]
        assert first["Body"] == "first"
        in_flight = oldest_message_age_seconds("123456789012", "us-east-1", "aged", sent + 100)
        assert in_flight is not None and in_flight >= 99  # the in-flight oldest message still counts
        sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
        remaining = oldest_message_age_seconds("123456789012", "us-east-1", "aged", sent + 100)
        assert remaining is not None and remaining <= 100.01  # now the second message is the oldest
        assert oldest_message_age_seconds("123456789012", "us-east-1", "unknown", time.time()) is None
