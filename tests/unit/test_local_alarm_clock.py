"""The alarms' injected clock (local/runtime/alarms/clock.py): the evaluator steps through periods
without waiting, in-process on a manual clock, and the stack's ``/_local/alarm-clock`` control
advances it; an EMF metric's alarm goes OK -> ALARM -> OK with its notifications, as in real time."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from werkzeug.test import Client
from werkzeug.wrappers import Response

from local.runtime.alarms.clock import AlarmClock, manual_clock
from local.runtime.alarms.clock_control import ALARM_CLOCK_PATH, with_alarm_clock_control
from local.runtime.alarms.evaluator import LOOKBACK_PERIODS, AlarmEvaluator
from local.runtime.alarms.metrics import MetricStore
from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver
from local.runtime.lambda_.runner import InvocationResult
from local.runtime.settings import RuntimeSettings

pytestmark = pytest.mark.unit
ACCOUNT = "123456789012"
TOPIC_ARN = f"arn:aws:sns:us-east-1:{ACCOUNT}:AlarmTopic"
START = 1_800_000_000.0  # a multiple of every scaled period below
SCALED_PERIOD = 300 * 0.05


def test_the_clock_is_its_source_plus_an_offset_that_only_grows() -> None:
    readings = iter([100.0, 101.0, 102.0])
    clock = AlarmClock(source=lambda: next(readings))
    assert clock.now() == 100.0
    clock.advance(50)
    assert clock.offset_seconds == 50
    assert clock.now() == 151.0
    assert clock.source_now() == 102.0
    assert clock.from_source(90.0) == 140.0
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)


def test_a_manual_clock_moves_only_when_advanced() -> None:
    clock = manual_clock(START)
    assert clock.now() == clock.now() == START
    clock.advance(2.5)
    assert clock.now() == START + 2.5


def test_the_store_forgets_samples_by_its_clock_not_the_wall() -> None:
    clock = manual_clock(START)
    store = MetricStore(retention_seconds=60, clock=clock.now)
    store.put("NS", "M", {}, 1, START)
    assert store.samples("NS", "M", lambda _: True, START, START + 1) == [1.0]
    clock.advance(61)
    store.put("NS", "M", {}, 2, START + 61)  # a put expires what is older than the retention
    assert store.samples("NS", "M", lambda _: True, 0, START + 100) == [2.0]


def _template() -> CloudFormationTemplate:
    return CloudFormationTemplate(
        body={
            "Resources": {
                "AlarmTopic": {"Type": "AWS::SNS::Topic"},
                "SystemFailuresAlarm": {
                    "Type": "AWS::CloudWatch::Alarm",
                    "Properties": {
                        "Namespace": "RagIngest",
                        "MetricName": "DocumentsFailed",
                        "Dimensions": [{"Name": "Cause", "Value": "system"}],
                        "Statistic": "Sum",
                        "Period": 300,
                        "EvaluationPeriods": 1,
                        "Threshold": 0,
                        "ComparisonOperator": "GreaterThanThreshold",
                        "TreatMissingData": "notBreaching",
                        "AlarmActions": [{"Ref": "AlarmTopic"}],
                        "OKActions": [{"Ref": "AlarmTopic"}],
                    },
                },
            }
        },
        path=Path("Local.template.json"),
    )


def _emf_line(timestamp_ms: float) -> str:
    return json.dumps(
        {
            "_aws": {
                "Timestamp": int(timestamp_ms),
                "CloudWatchMetrics": [
                    {"Namespace": "RagIngest", "Dimensions": [["Cause"]], "Metrics": [{"Name": "DocumentsFailed"}]}
                ],
            },
            "Cause": "system",
            "DocumentsFailed": 1,
        }
    )


class Subscriber:
    def __init__(self) -> None:
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.url = self.sqs.create_queue(QueueName="alarm-subscriber")["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        boto3.client("sns", region_name="us-east-1").subscribe(TopicArn=TOPIC_ARN, Protocol="sqs", Endpoint=arn)

    def notifications(self) -> list[dict[str, Any]]:
        messages = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10).get("Messages", [])
        for message in messages:
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return [json.loads(json.loads(message["Body"])["Message"]) for message in messages]


@pytest.fixture
def evaluator() -> Iterator[AlarmEvaluator]:
    with mock_aws():
        settings = RuntimeSettings.from_env({"LOCAL_STACK_NAME": "Local", "LOCAL_ALARM_PERIOD_SCALE": "0.05"})
        resolver = IntrinsicResolver(_template(), region="us-east-1", account_id=ACCOUNT, stack_name="Local")
        resolver.set_resource("AlarmTopic", TOPIC_ARN)
        evaluator = AlarmEvaluator(_template(), resolver, settings, queues={}, functions=[], clock=manual_clock(START))
        # In-process moto's clients, in place of clients of a moto server.
        evaluator._clients = {name: boto3.client(name, region_name="us-east-1") for name in ("sns", "cloudwatch")}
        evaluator.provision()
        yield evaluator


def _state_change_time(notification: dict[str, Any]) -> float:
    return datetime.datetime.strptime(notification["StateChangeTime"], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def test_an_emf_alarm_fires_and_ages_out_as_the_clock_is_stepped(evaluator: AlarmEvaluator) -> None:
    subscriber = Subscriber()
    cloudwatch = evaluator._clients["cloudwatch"]
    [alarm] = evaluator.alarms

    def state() -> str:
        return str(cloudwatch.describe_alarms(AlarmNames=[alarm.name])["MetricAlarms"][0]["StateValue"])

    assert [(a.logical_id, old, v.state) for a, old, v in evaluator.tick()] == [
        ("SystemFailuresAlarm", "INSUFFICIENT_DATA", "OK")
    ]
    assert [n["NewStateValue"] for n in subscriber.notifications()] == ["OK"]
    evaluator.advance(100)  # nothing happens for a while
    assert state() == "OK" and subscriber.notifications() == []

    # A failure's EMF line, stamped by the function's clock (the source clock).
    failed_at = evaluator.clock.source_now()
    evaluator.record_invocation("MarkFailed", InvocationResult("{}", False, _emf_line(failed_at * 1000)), 12.0)
    assert evaluator.tick() == []  # its period is not complete yet
    fired = evaluator.advance(SCALED_PERIOD)
    assert [(old, verdict.state) for _, old, verdict in fired] == [("OK", "ALARM")]
    [alarm_notification] = subscriber.notifications()
    assert (alarm_notification["OldStateValue"], alarm_notification["NewStateValue"]) == ("OK", "ALARM")
    assert alarm_notification["NewStateReason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints [1.0")
    # At the first tick after the datapoint's period ends, in alarm time.
    assert START + 100 < _state_change_time(alarm_notification) <= START + 100 + SCALED_PERIOD + evaluator.tick_seconds
    assert state() == "ALARM"

    # The datapoint leaves the evaluation range: the alarm clears itself, its OK notification sent.
    cleared = evaluator.advance(SCALED_PERIOD * (1 + LOOKBACK_PERIODS + 1))
    assert [(old, verdict.state) for _, old, verdict in cleared] == [("ALARM", "OK")]
    [ok] = subscriber.notifications()
    assert (ok["OldStateValue"], ok["NewStateValue"]) == ("ALARM", "OK")
    assert ok["NewStateReason"].startswith("Threshold Crossed: no datapoints were received")
    assert state() == "OK"
    assert evaluator.clock.now() == pytest.approx(START + 100 + SCALED_PERIOD * (2 + LOOKBACK_PERIODS + 1))


def test_advancing_runs_every_tick_in_between(evaluator: AlarmEvaluator) -> None:
    rounds: list[float] = []
    evaluator.sample_executions = lambda: rounds.append(evaluator.clock.now())  # type: ignore[method-assign]
    evaluator.advance(evaluator.tick_seconds * 3 + 0.5)
    assert rounds == pytest.approx([START + evaluator.tick_seconds * k for k in (1, 2, 3)] + [rounds[-1]])
    assert rounds[-1] == pytest.approx(START + evaluator.tick_seconds * 3 + 0.5)
    with pytest.raises(ValueError):
        evaluator.advance(-1)


def test_the_control_route_advances_the_evaluator_and_passes_everything_else_on(
    evaluator: AlarmEvaluator,
) -> None:
    def moto(environ: dict[str, Any], start_response: Any) -> Any:
        return Response("moto answered")(environ, start_response)

    current: list[AlarmEvaluator | None] = [None]
    client = Client(with_alarm_clock_control(moto, lambda: current[0]))
    assert client.get(ALARM_CLOCK_PATH).status_code == 503
    current[0] = evaluator
    assert client.get("/").get_data(as_text=True) == "moto answered"
    clock = client.get(ALARM_CLOCK_PATH).get_json()
    assert clock == {"now": START, "offset_seconds": 0.0, "period_scale": 0.05, "tick_seconds": 2.0}
    answer = client.post(ALARM_CLOCK_PATH, json={"advance_seconds": 4}).get_json()
    assert answer["now"] == START + 4 and answer["offset_seconds"] == 4
    assert answer["transitions"] == [
        {"alarm": "SystemFailuresAlarm", "name": evaluator.alarms[0].name, "from": "INSUFFICIENT_DATA", "to": "OK"}
    ]
    for bad in ({}, {"advance_seconds": -1}, {"advance_seconds": "soon"}, {"advance_seconds": 10**6}):
        assert client.post(ALARM_CLOCK_PATH, json=bad).status_code == 400
    assert client.delete(ALARM_CLOCK_PATH).status_code == 405
    assert evaluator.clock.now() == START + 4
