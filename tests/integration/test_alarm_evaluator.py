"""The local alarm evaluator against moto's server: an alarm on a state machine's ExecutionsTimedOut
(an execution moto's interpreter times out) goes to ALARM in moto's CloudWatch, a queue subscribed
to its topic receives CloudWatch's notification, and the alarm returns to OK once the datapoint
leaves its evaluation range. CloudWatch's own periods (scale 1), stepped on the alarm clock."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.core.config import default_user_config

from local.runtime.alarms.clock import AlarmClock
from local.runtime.alarms.evaluator import LOOKBACK_PERIODS, AlarmEvaluator
from local.runtime.alarms.moto_backends import queue_message_counts
from local.runtime.alarms.template_alarms import SQS_COUNT_ATTRIBUTES
from local.runtime.cloudformation.template import CloudFormationTemplate, IntrinsicResolver
from local.runtime.settings import RuntimeSettings
from tests.support.aws import moto_server

pytestmark = pytest.mark.integration
ACCOUNT = "123456789012"
TOPIC_ARN = f"arn:aws:sns:us-east-1:{ACCOUNT}:AlarmTopic"


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return result


def template() -> CloudFormationTemplate:
    return CloudFormationTemplate(
        body={
            "Resources": {
                "AlarmTopic": {"Type": "AWS::SNS::Topic"},
                "Machine": {"Type": "AWS::StepFunctions::StateMachine"},
                "TimedOutAlarm": {
                    "Type": "AWS::CloudWatch::Alarm",
                    "Properties": {
                        "AlarmDescription": "Workflow executions timed out",
                        "Namespace": "AWS/States",
                        "MetricName": "ExecutionsTimedOut",
                        "Dimensions": [{"Name": "StateMachineArn", "Value": {"Ref": "Machine"}}],
                        "Statistic": "Sum",
                        "Period": 60,
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


def test_a_timed_out_execution_fires_the_alarm_to_the_topic_and_it_clears(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Run executions for real (as the local stack configures moto), in this process's moto only.
    monkeypatch.setitem(default_user_config["stepfunctions"], "execute_state_machine", True)
    with moto_server() as endpoint:
        sfn, sqs, sns, cloudwatch = (boto3.client(name) for name in ("stepfunctions", "sqs", "sns", "cloudwatch"))
        machine = sfn.create_state_machine(
            name="slow",
            definition=json.dumps(
                {
                    "StartAt": "Wait",
                    "TimeoutSeconds": 1,
                    "States": {"Wait": {"Type": "Wait", "Seconds": 10, "End": True}},
                }
            ),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn",
        )["stateMachineArn"]
        settings = RuntimeSettings.from_env(
            {
                "LOCAL_MOTO_PORT": endpoint.rsplit(":", 1)[-1],
                "LOCAL_ALARM_PERIOD_SCALE": "1",
                "LOCAL_STACK_NAME": "Local",
            }
        )
        resolver = IntrinsicResolver(template(), region="us-east-1", account_id=ACCOUNT, stack_name="Local")
        resolver.set_resource("AlarmTopic", TOPIC_ARN)
        resolver.set_resource("Machine", machine)
        kept_states = tmp_path / "alarm-states.json"
        # The wall clock, stepped by the test: a 60 s period passes in one advance().
        clock = AlarmClock()
        evaluator = AlarmEvaluator(
            template(),
            resolver,
            settings,
            queues={},
            functions=[],
            state_machines=[machine],
            state_file=kept_states,
            clock=clock,
        )
        [alarm] = evaluator.alarms
        assert alarm.unobservable is None
        evaluator.provision()
        subscriber = sqs.create_queue(QueueName="alarm-subscriber")["QueueUrl"]
        subscriber_arn = sqs.get_queue_attributes(QueueUrl=subscriber, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(TopicArn=TOPIC_ARN, Protocol="sqs", Endpoint=subscriber_arn)
        received: list[dict[str, Any]] = []

        def notification(state: str, old: str) -> dict[str, Any] | None:
            for message in sqs.receive_message(QueueUrl=subscriber, MaxNumberOfMessages=10).get("Messages", []):
                received.append(json.loads(json.loads(message["Body"])["Message"]))
                sqs.delete_message(QueueUrl=subscriber, ReceiptHandle=message["ReceiptHandle"])
            return next((n for n in received if (n["OldStateValue"], n["NewStateValue"]) == (old, state)), None)

        def state() -> str:
            return str(cloudwatch.describe_alarms(AlarmNames=[alarm.name])["MetricAlarms"][0]["StateValue"])

        evaluator.start()
        try:
            wait_for(lambda: state() == "OK", "the alarm's first evaluation (no data: OK)")
            execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]
            wait_for(lambda: sfn.describe_execution(executionArn=execution)["status"] == "TIMED_OUT", "the timeout")
            evaluator.advance(60)  # the period holding the timeout ends
            fired = wait_for(lambda: notification("ALARM", "OK"), "the ALARM notification")
            assert fired["AlarmName"] == alarm.name == "Local-TimedOutAlarm-" + alarm.name.rsplit("-", 1)[-1]
            assert fired["Trigger"]["MetricName"] == "ExecutionsTimedOut"
            assert fired["Trigger"]["Dimensions"] == [{"value": machine, "name": "StateMachineArn"}]
            # A restarted stack's evaluator starts from the kept state, in moto's CloudWatch too.
            restarted = AlarmEvaluator(
                template(),
                resolver,
                settings,
                queues={},
                functions=[],
                state_machines=[machine],
                state_file=kept_states,
            )
            restarted.provision()
            [kept] = restarted.alarms
            assert (kept.state, kept.state_reason) == ("ALARM", fired["NewStateReason"])
            assert state() == "ALARM"
            evaluator.advance(60 * (1 + LOOKBACK_PERIODS + 1))  # the datapoint leaves the evaluation range
            cleared = wait_for(lambda: notification("OK", "ALARM"), "the OK notification once the timeout ages out")
            assert cleared["NewStateReason"].startswith("Threshold Crossed: no datapoints were received")
            assert state() == "OK"
        finally:
            evaluator.stop()


def test_queue_counts_read_in_process_are_what_get_queue_attributes_answers() -> None:
    """The evaluator reads a queue's counts from moto's backend in its own process (no request):
    the same three numbers GetQueueAttributes gives, with a message visible, one received (in
    flight) and one delayed; an unknown queue has none."""
    with moto_server() as endpoint:
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
        url = sqs.create_queue(QueueName="counted")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="received")
        assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=60).get("Messages", [])) == 1
        sqs.send_message(QueueUrl=url, MessageBody="visible")
        sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=60)
        names = list(SQS_COUNT_ATTRIBUTES.values())
        answered = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]

        counts = queue_message_counts(ACCOUNT, "us-east-1", "counted")

        assert counts == {name: int(answered[name]) for name in names}
        assert counts == {
            "ApproximateNumberOfMessages": 1,
            "ApproximateNumberOfMessagesNotVisible": 1,
            "ApproximateNumberOfMessagesDelayed": 1,
        }
        assert queue_message_counts(ACCOUNT, "us-east-1", "no-such-queue") is None
