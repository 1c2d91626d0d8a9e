"""Redrive against moto's SQS: dry run, move, filter, idempotent second run."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.queues import Queues
from rag_ingest.ids import new_document_id
from rag_ingest.redrive import RedriveRequest, redrive

from tests.support.aws import moto_server

pytestmark = pytest.mark.integration
EVENT = json.loads((Path(__file__).parent.parent / "events" / "s3_object_created.json").read_text())


@pytest.fixture
def queues() -> Iterator[tuple[Any, str, str]]:
    with moto_server():
        sqs = boto3.client("sqs")
        suffix = uuid.uuid4().hex[:6]
        dlq_url = sqs.create_queue(QueueName=f"dlq-{suffix}")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue_url = sqs.create_queue(
            QueueName=f"ingest-{suffix}",
            Attributes={
                "VisibilityTimeout": "1",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"}),
            },
        )["QueueUrl"]
        yield sqs, queue_url, dlq_url


def body_for(document_id: str) -> str:
    event = json.loads(json.dumps(EVENT))
    event["Records"][0]["s3"]["object"]["key"] = f"raw/acme/{document_id}/a.pdf"
    return json.dumps(event)


def depth(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def dead_letter(sqs: Any, queue_url: str, bodies: list[str]) -> None:
    """Fail each message once (receive, never delete) so SQS moves it to the DLQ."""
    for body in bodies:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    deadline = time.monotonic() + 20
    while depth(sqs, queue_url) and time.monotonic() < deadline:
        sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        time.sleep(1.1)
    assert depth(sqs, queue_url) == 0


def test_redrive_dry_run_filter_move_and_rerun(queues: tuple[Any, str, str]) -> None:
    sqs, queue_url, dlq_url = queues
    wanted, other = new_document_id(), new_document_id()
    dead_letter(sqs, queue_url, [body_for(wanted), body_for(other), "poison"])
    assert depth(sqs, dlq_url) == 3
    adapter = Queues(sqs)

    dry = redrive(adapter, dlq_url=dlq_url, queue_url=queue_url, request=RedriveRequest(dry_run=True))
    assert len(dry.would_move) == 3 and dry.moved == []
    assert depth(sqs, dlq_url) == 3 and depth(sqs, queue_url) == 0

    only = redrive(adapter, dlq_url=dlq_url, queue_url=queue_url, request=RedriveRequest(document_id=wanted))
    assert len(only.moved) == 1
    assert {s.reason for s in only.skipped} == {"filter: other document"} and len(only.skipped) == 2
    [moved] = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)["Messages"]
    assert wanted in moved["Body"]
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=moved["ReceiptHandle"])

    rest = redrive(adapter, dlq_url=dlq_url, queue_url=queue_url, request=RedriveRequest(max_messages=10))
    assert len(rest.moved) == 2
    assert depth(sqs, dlq_url) == 0 and depth(sqs, queue_url) == 2
    again = redrive(adapter, dlq_url=dlq_url, queue_url=queue_url, request=RedriveRequest())
    assert again.moved == [] and depth(sqs, queue_url) == 2
