"""The template's alarms, evaluated by the local stack (local/runtime/alarms/evaluator.py), really fire: an
upload event the Intake function keeps failing on is dead-lettered, the DLQ-depth alarm and the
Intake errors alarm go to ALARM in moto's CloudWatch and a subscriber of the alarm topic receives
CloudWatch's notifications; the Redrive function moves the message back, the document becomes
READY, and both alarms return to OK with their OK notifications. And a document FAILED with a system
code fires the Metrics Insights alarm over the EMF metric MarkFailed writes, until it ages out: the
test steps the stack's alarm clock (/_local/alarm-clock) through the periods instead of waiting."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from rag_ingest.core.ids import document_id_for_object

from local.client import OfflineClient
from local.runtime.alarms.evaluator import LOOKBACK_PERIODS
from local.runtime.harness import OfflineStackProcess

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# Periods are scaled by LOCAL_ALARM_PERIOD_SCALE (0.05: 60 s -> 3 s); these bounds leave room.
TRANSITION_TIMEOUT = 90.0


def by_prefix(mapping: dict[str, str], prefix: str) -> str:
    [value] = [value for key, value in mapping.items() if key.startswith(prefix)]
    return value


def wait_for(condition: Callable[[], Any], what: str, timeout: float = TRANSITION_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


class Subscriber:
    """An SQS queue subscribed to the alarm topic; keeps every alarm notification it received."""

    def __init__(self, sqs: Any, sns: Any, topic_arn: str) -> None:
        self.sqs, self.sns = sqs, sns
        self.url = sqs.create_queue(QueueName=f"alarm-subscriber-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.subscription = sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)["SubscriptionArn"]
        self.received: list[dict[str, Any]] = []

    def notification(self, alarm_name: str, new_state: str) -> dict[str, Any] | None:
        for message in self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10).get("Messages", []):
            envelope = json.loads(message["Body"])
            self.received.append({**json.loads(envelope["Message"]), "_subject": envelope.get("Subject")})
            self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return next(
            (n for n in self.received if n["AlarmName"] == alarm_name and n["NewStateValue"] == new_state), None
        )

    def forget(self) -> None:
        """Drop what arrived so far (transitions from before the test)."""
        self.notification("", "")
        self.received.clear()

    def close(self) -> None:
        self.sns.unsubscribe(SubscriptionArn=self.subscription)
        self.sqs.delete_queue(QueueUrl=self.url)


@pytest.fixture
def aws(local_stack: dict[str, Any]) -> dict[str, Any]:
    options = {
        "endpoint_url": local_stack["MotoEndpoint"],
        "region_name": local_stack["Region"],
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    return {name: boto3.client(name, **options) for name in ("sqs", "sns", "s3", "cloudwatch", "lambda")}  # type: ignore[call-overload]


@pytest.fixture
def subscriber(aws: dict[str, Any], local_stack: dict[str, Any]) -> Iterator[Subscriber]:
    subscriber = Subscriber(aws["sqs"], aws["sns"], local_stack["AlarmTopicArn"])
    try:
        yield subscriber
    finally:
        subscriber.close()


@pytest.fixture
def faults(stack_process: OfflineStackProcess) -> Iterator[OfflineStackProcess]:
    stack_process.clear_faults()
    try:
        yield stack_process
    finally:
        stack_process.clear_faults()


def exists(client: OfflineClient, document_id: str) -> bool:
    try:
        client.document(document_id)
    except requests.HTTPError as error:
        if error.response is not None and error.response.status_code == 404:
            return False
        raise
    return True


def queue_depth(sqs: Any, url: str) -> int:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[name]) for name in names)


def alarm_state(cloudwatch: Any, name: str) -> str:
    [alarm] = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    return str(alarm["StateValue"])


def scaled_period(cloudwatch: Any, name: str, stack: OfflineStackProcess) -> float:
    """The alarm's period (its own, or its returned query's) as the stack's alarm clock runs it."""
    [alarm] = cloudwatch.describe_alarms(AlarmNames=[name])["MetricAlarms"]
    period = alarm.get("Period") or next(q["Period"] for q in alarm["Metrics"] if q.get("ReturnData", True))
    return float(period) * float(stack.alarm_clock()["period_scale"])


def stepping(condition: Callable[[], Any], stack: OfflineStackProcess, seconds: float) -> Callable[[], Any]:
    """``condition``, with the stack's alarm clock stepped by ``seconds`` each time it does not hold yet."""

    def step() -> Any:
        result = condition()
        if not result:
            stack.advance_alarm_clock(seconds)
        return result

    return step


def test_a_dead_letter_fires_the_dlq_alarm_to_the_topic_and_redrive_clears_it(
    faults: OfflineStackProcess, local_stack: dict[str, Any], aws: dict[str, Any], subscriber: Subscriber
) -> None:
    sqs, cloudwatch = aws["sqs"], aws["cloudwatch"]
    dlq_alarm = by_prefix(local_stack["Alarms"], "MonitoringDeadLetterQueueAlarm")
    intake_alarm = by_prefix(local_stack["Alarms"], "MonitoringIntakeErrorsAlarm")
    queue_url, dlq_name = local_stack["IngestQueueUrl"], local_stack["DeadLetterQueueUrl"].rsplit("/", 1)[-1]
    # Both alarms' periods (a minute, scaled) pass on the alarm clock while the test waits.
    period = scaled_period(cloudwatch, dlq_alarm, faults)
    # Nothing dead-lettered by an earlier test may be left: this test needs the alarm OK first.
    wait_for(lambda: alarm_state(cloudwatch, dlq_alarm) == "OK", "the DLQ alarm to be OK before the test")
    subscriber.forget()
    max_receive = int(json.loads(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])[
        "Attributes"]["RedrivePolicy"])["maxReceiveCount"])  # fmt: skip

    # Nothing else in flight in the ingest queue: a failed batch would fail (and maybe dead-letter) it too.
    wait_for(lambda: queue_depth(sqs, queue_url) == 0, "the ingest queue to drain", timeout=240)
    tenant = f"alarms-{uuid.uuid4().hex[:8]}"
    marker = uuid.uuid4().hex
    key = f"raw/{tenant}/inbox/{marker}/sourdough.pdf"
    # Intake fails on every delivery of this upload's event until SQS dead-letters it.
    faults.arm_fault("IntakeFunction", "raise", times=max_receive, match=marker, error_type="TransientError")
    original = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    # The template's visibility timeout (6 x the Intake timeout) would make redeliveries take minutes.
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "2"})
    try:
        aws["s3"].put_object(Bucket=local_stack["BucketName"], Key=key, Body=(SAMPLES / "sourdough.pdf").read_bytes())
        wait_for(
            stepping(lambda: alarm_state(cloudwatch, dlq_alarm) == "ALARM", faults, period),
            "the DLQ alarm in moto's CloudWatch",
        )
    finally:
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes=original)
    # Whatever of the armed failures is left (a batching window longer than the 2 s visibility timeout
    # batches redeliveries together) must not hit the redriven message.
    faults.clear_faults()

    alarm = wait_for(lambda: subscriber.notification(dlq_alarm, "ALARM"), "the DLQ ALARM notification")
    assert alarm["OldStateValue"] == "OK"
    assert alarm["_subject"] == f'ALARM: "{dlq_alarm}" in US East (N. Virginia)'
    assert alarm["NewStateReason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints [1.0")
    assert alarm["Trigger"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Trigger"]["Namespace"] == "AWS/SQS"
    assert alarm["Trigger"]["Dimensions"] == [{"value": dlq_name, "name": "QueueName"}]
    assert alarm["AlarmActions"] == alarm["OKActions"] == [local_stack["AlarmTopicArn"]]
    [stored] = cloudwatch.describe_alarms(AlarmNames=[dlq_alarm])["MetricAlarms"]
    assert stored["StateReason"] == alarm["NewStateReason"]
    # The failed invocations themselves page too: the Intake function's errors alarm.
    errors = wait_for(
        stepping(lambda: subscriber.notification(intake_alarm, "ALARM"), faults, period),
        "the Intake errors notification",
    )
    assert errors["Trigger"]["MetricName"] == "Errors" and errors["Trigger"]["Namespace"] == "AWS/Lambda"

    document_id = document_id_for_object(local_stack["BucketName"], key)
    invoked = aws["lambda"].invoke(
        FunctionName=by_prefix(local_stack["Functions"], "OperationsRedriveFunction"),
        Payload=json.dumps({"action": "redrive", "document_id": document_id}).encode(),
    )
    assert "FunctionError" not in invoked
    report = json.loads(invoked["Payload"].read())
    assert [entry["document_ids"] for entry in report["moved"]] == [[document_id]]

    wait_for(stepping(lambda: alarm_state(cloudwatch, dlq_alarm) == "OK", faults, period), "the DLQ alarm back to OK")
    ok = wait_for(lambda: subscriber.notification(dlq_alarm, "OK"), "the DLQ OK notification")
    assert ok["OldStateValue"] == "ALARM"
    assert ok["NewStateReason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints [0.0")
    # Redriven, the upload is ingested after all, and Intake's errors alarm clears.
    client = OfflineClient(api_url=local_stack["ApiUrl"].rstrip("/"), tenant_id=tenant)
    wait_for(lambda: exists(client, document_id), "Intake to record the redriven upload")
    state = client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert state["status"] == "READY", state
    wait_for(
        stepping(lambda: subscriber.notification(intake_alarm, "OK"), faults, period),
        "the Intake errors OK notification",
    )


def test_a_system_failure_fires_the_emf_metrics_insights_alarm_until_it_ages_out(
    faults: OfflineStackProcess, local_stack: dict[str, Any], aws: dict[str, Any], subscriber: Subscriber
) -> None:
    """The DocumentsFailed EMF metric MarkFailed writes, summed by the alarm's Metrics Insights query."""
    cloudwatch = aws["cloudwatch"]
    system_alarm = by_prefix(local_stack["Alarms"], "MonitoringSystemFailuresAlarm")
    period = scaled_period(cloudwatch, system_alarm, faults)
    # An earlier test's system failure may still be in the alarm's evaluation range: step it out.
    wait_for(
        stepping(lambda: alarm_state(cloudwatch, system_alarm) == "OK", faults, period),
        "the system failures alarm to be OK first",
    )
    subscriber.forget()
    client = OfflineClient(api_url=local_stack["ApiUrl"].rstrip("/"), tenant_id=f"alarms-{uuid.uuid4().hex[:8]}")
    ticket = client.create_upload("sourdough.pdf")
    ticket.raise_for_status()
    document_id = ticket.json()["document_id"]
    # An unexpected error in Parse, every attempt (1 + the States.ALL retrier's 2): INTERNAL_ERROR, a system code.
    faults.arm_fault("ParseFunction", "raise", times=3, match=document_id, error_type="RuntimeError")
    form = ticket.json()["upload"]
    sent = requests.post(
        form["url"],
        data=form["fields"],
        files={"file": ("sourdough.pdf", (SAMPLES / "sourdough.pdf").read_bytes(), "application/pdf")},
        timeout=60,
    )
    assert sent.status_code in (200, 201, 204), sent.text
    failed = client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert (failed["status"], failed["error_code"]) == ("FAILED", "INTERNAL_ERROR")

    # Periods pass on the alarm clock, until the one holding the failure's datapoint has ended.
    alarm = wait_for(
        stepping(lambda: subscriber.notification(system_alarm, "ALARM"), faults, period),
        "the system failures notification",
    )
    assert alarm["OldStateValue"] == "OK"
    [query] = [metric for metric in alarm["Trigger"]["Metrics"] if metric.get("ReturnData", True)]
    assert query["Expression"] == "SELECT SUM(DocumentsFailed) FROM RagIngest WHERE Cause = 'system'"
    assert alarm_state(cloudwatch, system_alarm) in ("ALARM", "OK")  # OK again once it ages out
    # No more failures: the datapoint leaves the evaluation range and the alarm clears itself.
    faults.advance_alarm_clock(period * (1 + LOOKBACK_PERIODS + 1))
    ok = wait_for(lambda: subscriber.notification(system_alarm, "OK"), "the system failures OK notification")
    assert ok["OldStateValue"] == "ALARM"
    # The state is the last transition notified: OK, unless another system failure has fired the alarm
    # again since (for example the scheduled reaper failing an earlier test's stuck document STUCK).
    if alarm_state(cloudwatch, system_alarm) != "OK":

        def fired_again() -> bool:
            subscriber.notification(system_alarm, "ALARM")  # collects what arrived since
            after_ok = subscriber.received[subscriber.received.index(ok) + 1 :]
            return any(n["AlarmName"] == system_alarm and n["NewStateValue"] == "ALARM" for n in after_ok)

        wait_for(fired_again, "the notification of the alarm firing again")
