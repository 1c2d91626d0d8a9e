"""The status table's compare-and-set transitions and the intake handler, against moto's server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.core.errors import ErrorCode, StaleWriteError
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import ObjectRef, Stage
from rag_ingest.core.record import DocumentStatus, QueueOutcome

from tests.support.aws import FakeLambdaContext, import_handler, moto_server

pytestmark = pytest.mark.integration
EVENTS = Path(__file__).parent.parent / "events"
PASS_ROLE = "arn:aws:iam::123456789012:role/sfn"


@pytest.fixture(scope="module")
def aws() -> Iterator[dict[str, str]]:
    with moto_server():
        dynamodb = boto3.client("dynamodb")
        names = {"documents": f"docs-{uuid.uuid4().hex[:6]}", "idempotency": f"idem-{uuid.uuid4().hex[:6]}"}
        for table, key in ((names["documents"], "document_id"), (names["idempotency"], "id")):
            dynamodb.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        definition = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}
        names["state_machine_arn"] = boto3.client("stepfunctions").create_state_machine(
            name=f"sm-{uuid.uuid4().hex[:6]}", definition=json.dumps(definition), roleArn=PASS_ROLE
        )["stateMachineArn"]
        yield names


@pytest.fixture
def repo(aws: dict[str, str]) -> DocumentsTable:
    return DocumentsTable(aws["documents"])


def ref(version: str, tenant: str = "acme", document_id: str = "doc") -> ObjectRef:
    return ObjectRef(bucket="bucket", key=f"raw/{tenant}/{document_id}/a.pdf", version=version)


def test_transitions_are_compare_and_set(repo: DocumentsTable) -> None:
    document_id = new_document_id()
    repo.create_awaiting_upload(document_id=document_id, tenant_id="acme", filename="a.pdf", bucket="b", key="k")
    first = repo.mark_queued(document_id=document_id, tenant_id="acme", ref=ref("v1"), event_time="t1", size_bytes=9)
    assert first.outcome is QueueOutcome.QUEUED
    # The same version again (duplicate event) before the workflow ran: resume, not a second document.
    again = repo.mark_queued(document_id=document_id, tenant_id="acme", ref=ref("v1"), event_time="t1", size_bytes=9)
    assert again.outcome is QueueOutcome.RESUME

    repo.start_stage(document_id, "v1", Stage.PARSE)
    repo.start_stage(document_id, "v1", Stage.PARSE)
    record = repo.get(document_id)
    assert record is not None
    assert (record.status, record.stage, record.attempts) == (DocumentStatus.PROCESSING, Stage.PARSE, {"PARSE": 2})
    duplicate = repo.mark_queued(
        document_id=document_id, tenant_id="acme", ref=ref("v1"), event_time="t1", size_bytes=9
    )
    assert duplicate.outcome is QueueOutcome.DUPLICATE

    # Another tenant cannot take the document over by naming it in a key.
    foreign = repo.mark_queued(document_id=document_id, tenant_id="evil", ref=ref("v9"), event_time="t9", size_bytes=1)
    assert foreign.outcome is QueueOutcome.REJECTED

    # A re-upload (new version) takes over; the old run's late writes are rejected, not applied.
    newer = repo.mark_queued(document_id=document_id, tenant_id="acme", ref=ref("v2"), event_time="t2", size_bytes=9)
    assert newer.outcome is QueueOutcome.QUEUED
    with pytest.raises(StaleWriteError):
        repo.start_stage(document_id, "v1", Stage.CHUNK)
    with pytest.raises(StaleWriteError):
        repo.mark_failed(document_id, "v1", ErrorCode.INTERNAL_ERROR, "late")
    # An older event arriving after a newer one is not applied.
    late = repo.mark_queued(document_id=document_id, tenant_id="acme", ref=ref("v0"), event_time="t0", size_bytes=9)
    assert late.outcome is QueueOutcome.REJECTED

    repo.start_stage(document_id, "v2", Stage.FINALIZE)
    repo.mark_ready(document_id, "v2")
    with pytest.raises(StaleWriteError):
        repo.mark_failed(document_id, "v2", ErrorCode.INTERNAL_ERROR, "READY is terminal for this version")
    final = repo.get(document_id)
    assert final is not None and final.status is DocumentStatus.READY and final.version == "v2"


@pytest.fixture(scope="module")
def intake(aws: dict[str, str]) -> ModuleType:
    return import_handler(
        "intake",
        {
            "DOCUMENTS_TABLE": aws["documents"],
            "IDEMPOTENCY_TABLE": aws["idempotency"],
            "STATE_MACHINE_ARN": aws["state_machine_arn"],
            "POWERTOOLS_SERVICE_NAME": "intake-test",
            # What IntakeEnv reads for S3 sidecars (none arrive here), stated rather than leaked from
            # whichever test ran before in the same process.
            "BUCKET_NAME": "uploads",
            "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9",
            "OPENSEARCH_INDEX": "rag-chunks",
            "EMBEDDING_DIMENSION": "384",
        },
    )


def sqs_event(*bodies: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m-{index}-{uuid.uuid4().hex[:6]}",
                "receiptHandle": "rh",
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "x",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ingest",
                "awsRegion": "us-east-1",
            }
            for index, body in enumerate(bodies)
        ]
    }


def s3_body(key: str, version: str) -> str:
    event = json.loads((EVENTS / "s3_object_created.json").read_text())
    event["Records"][0]["s3"]["object"]["key"] = key
    event["Records"][0]["s3"]["object"]["versionId"] = version
    return json.dumps(event)


def executions(aws: dict[str, str]) -> list[dict[str, Any]]:
    return boto3.client("stepfunctions").list_executions(stateMachineArn=aws["state_machine_arn"])["executions"]


def test_intake_starts_one_execution_per_version_and_reports_poison(
    aws: dict[str, str], intake: ModuleType, repo: DocumentsTable
) -> None:
    document_id = new_document_id()
    key = f"raw/acme/{document_id}/report.pdf"
    before = len(executions(aws))
    event = sqs_event(s3_body(key, "v1"), "this is not an S3 event", s3_body(key, "v1"))
    response = intake.handler(event, FakeLambdaContext())

    # Only the poison record is reported; the duplicate S3 event in the same batch is a no-op.
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["messageId"]}]}
    assert len(executions(aws)) == before + 1
    record = repo.get(document_id)
    assert record is not None and record.status is DocumentStatus.QUEUED and record.tenant_id == "acme"
    assert record.execution_arn in {e["executionArn"] for e in executions(aws)}

    # SQS redelivers the same message: still one execution.
    assert intake.handler(sqs_event(s3_body(key, "v1")), FakeLambdaContext()) == {"batchItemFailures": []}
    assert len(executions(aws)) == before + 1

    # A new version of the same document is a new execution.
    intake.handler(sqs_event(s3_body(key, "v2")), FakeLambdaContext())
    assert len(executions(aws)) == before + 2


def test_test_event_is_acknowledged(intake: ModuleType) -> None:
    body = (EVENTS / "s3_test_event.json").read_text()
    assert intake.handler(sqs_event(body), FakeLambdaContext()) == {"batchItemFailures": []}
