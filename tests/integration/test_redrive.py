"""Redrive and replay against moto's SQS, DynamoDB and Step Functions: dry run, filters (document,
error code, age), what moved and what was skipped and why, idempotent re-runs, replay naming."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from rag_ingest.core.errors import ErrorCode
from rag_ingest.core.ids import execution_name, new_document_id
from rag_ingest.operations.redrive import Recovery, RedriveRequest
from rag_ingest.operations.replay import ReplayRequest
from rag_ingest.wiring import recovery_for

from tests.support.aws import moto_server
from tests.support.operations import RecordWriter, create_documents_table, create_state_machine

pytestmark = pytest.mark.integration
EVENT = json.loads((Path(__file__).parent.parent / "events" / "s3_object_created.json").read_text())


@pytest.fixture
def world() -> Iterator[dict[str, Any]]:
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
        table = f"documents-{suffix}"
        create_documents_table(table)
        state_machine_arn = create_state_machine()
        operations = recovery_for(
            documents_table_name=table, state_machine_arn=state_machine_arn, dlq_url=dlq_url, queue_url=queue_url
        )
        yield {
            "sqs": sqs,
            "queue_url": queue_url,
            "dlq_url": dlq_url,
            "operations": operations,
            "records": RecordWriter(table),
            "state_machine_arn": state_machine_arn,
        }


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


def test_redrive_dry_run_filter_move_and_rerun(world: dict[str, Any]) -> None:
    sqs, queue_url, dlq_url = world["sqs"], world["queue_url"], world["dlq_url"]
    operations: Recovery = world["operations"]
    wanted, other = new_document_id(), new_document_id()
    dead_letter(sqs, queue_url, [body_for(wanted), body_for(other), "poison"])
    assert depth(sqs, dlq_url) == 3

    dry = operations.redrive(RedriveRequest(dry_run=True))
    assert sorted(e.document_ids[0] for e in dry.would_move) == sorted([wanted, other]) and dry.moved == []
    [poison] = dry.skipped
    assert poison.reason.startswith("unparseable: message body is not JSON")
    assert depth(sqs, dlq_url) == 3 and depth(sqs, queue_url) == 0

    only = operations.redrive(RedriveRequest(document_id=wanted))
    assert [e.document_ids for e in only.moved] == [[wanted]]
    assert sorted(s.reason.split(":")[0] for s in only.skipped) == ["filter", "unparseable"]
    [moved] = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=1)["Messages"]
    assert wanted in moved["Body"]
    sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=moved["ReceiptHandle"])

    rest = operations.redrive(RedriveRequest(max_messages=10, include_unparseable=True))
    assert len(rest.moved) == 2 and rest.skipped == []
    assert depth(sqs, dlq_url) == 0 and depth(sqs, queue_url) == 2
    # Idempotent: nothing left, nothing moves twice.
    again = operations.redrive(RedriveRequest())
    assert again.moved == [] and again.skipped == [] and depth(sqs, queue_url) == 2


def test_redrive_filters_by_error_code_of_the_status_record_and_by_age(world: dict[str, Any]) -> None:
    sqs, queue_url, dlq_url = world["sqs"], world["queue_url"], world["dlq_url"]
    operations: Recovery = world["operations"]
    records: RecordWriter = world["records"]
    internal, timeout, unknown = new_document_id(), new_document_id(), new_document_id()
    records.put(internal, "FAILED", error_code="INTERNAL_ERROR")
    records.put(timeout, "FAILED", error_code="TIMEOUT")
    dead_letter(sqs, queue_url, [body_for(internal), body_for(timeout), body_for(unknown)])

    # Every message was sent seconds ago: "older than an hour" moves none of them, and says why.
    old = operations.redrive(RedriveRequest(older_than_seconds=3600))
    assert old.moved == [] and len(old.skipped) == 3
    assert all("not older than 3600s" in s.reason for s in old.skipped)
    recent = operations.redrive(RedriveRequest(newer_than_seconds=3600, dry_run=True))
    assert len(recent.would_move) == 3

    by_code = operations.redrive(RedriveRequest(error_codes=[ErrorCode.INTERNAL_ERROR, ErrorCode.STUCK]))
    assert [e.document_ids for e in by_code.moved] == [[internal]]
    reasons = {s.document_ids[0]: s.reason for s in by_code.skipped}
    assert reasons[timeout] == "filter: error code TIMEOUT not in INTERNAL_ERROR, STUCK"
    assert reasons[unknown] == "filter: error code none not in INTERNAL_ERROR, STUCK"
    assert depth(sqs, dlq_url) == 2 and depth(sqs, queue_url) == 1


def test_replay_resets_failed_documents_and_starts_a_replay_execution(world: dict[str, Any]) -> None:
    operations: Recovery = world["operations"]
    records: RecordWriter = world["records"]
    sfn = boto3.client("stepfunctions")
    system, user, ready = new_document_id(), new_document_id(), new_document_id()
    records.put(system, "FAILED", age_seconds=120, error_code="TRANSIENT_RETRIES_EXHAUSTED", error_detail="throttled")
    records.put(user, "FAILED", age_seconds=120, error_code="ENCRYPTED_PDF")
    records.put(ready, "READY", age_seconds=120)

    dry = operations.replay(ReplayRequest(dry_run=True))
    assert [d.document_id for d in dry.would_replay] == [system]
    assert dry.would_replay[0].execution_name == execution_name(system, "v1", replay=1)
    assert records.get(system)["status"] == "FAILED"

    # Default filter: system error codes only; the encrypted PDF would just fail again.
    first = operations.replay(ReplayRequest())
    [replayed] = first.replayed
    assert (replayed.document_id, replayed.replay, replayed.previous_error_code) == (
        system,
        1,
        "TRANSIENT_RETRIES_EXHAUSTED",
    )
    record = records.get(system)
    assert record["status"] == "QUEUED" and record["replays"] == 1
    assert record["execution_arn"] == replayed.execution_arn
    assert record["last_error_code"] == "TRANSIENT_RETRIES_EXHAUSTED"
    assert "error_code" not in record and "error_detail" not in record
    execution = sfn.describe_execution(executionArn=replayed.execution_arn)
    assert execution["name"].endswith("-r1") and execution["status"] == "RUNNING"
    assert json.loads(execution["input"])["document_id"] == system

    # Run twice: the document is QUEUED now, so nothing is replayed again.
    again = operations.replay(ReplayRequest(document_ids=[system]))
    assert again.replayed == [] and again.skipped[0].reason == "status is QUEUED, not FAILED"

    # Named documents: any error code unless a filter is given; the READY one is refused.
    named = operations.replay(ReplayRequest(document_ids=[user, ready, "missing"]))
    assert [d.document_id for d in named.replayed] == [user]
    assert {s.document_id: s.reason for s in named.skipped} == {
        ready: "status is READY, not FAILED",
        "missing": "no such document",
    }
    # A second failure and a second replay: the name counts on.
    records.put(user, "FAILED", error_code="ENCRYPTED_PDF", replays=1)
    second = operations.replay(ReplayRequest(document_ids=[user]))
    assert second.replayed[0].execution_name == execution_name(user, "v1", replay=2)


def test_replay_age_filters_use_the_time_of_failure(world: dict[str, Any]) -> None:
    operations: Recovery = world["operations"]
    records: RecordWriter = world["records"]
    old, recent = new_document_id(), new_document_id()
    records.put(old, "FAILED", age_seconds=7200, error_code="INTERNAL_ERROR")
    records.put(recent, "FAILED", age_seconds=60, error_code="INTERNAL_ERROR")
    older = operations.replay(ReplayRequest(dry_run=True, older_than_seconds=3600))
    assert [d.document_id for d in older.would_replay] == [old]
    newer = operations.replay(ReplayRequest(dry_run=True, newer_than_seconds=3600))
    assert [d.document_id for d in newer.would_replay] == [recent]
