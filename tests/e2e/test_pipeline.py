"""End to end on the local stack: presigned POST upload → READY/FAILED, chunks in OpenSearch once,
search finds the page, and a poison message reaches the DLQ without blocking its batch."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.core.ids import document_id_for_object
from rag_ingest.embeddings.base import Embedder
from rag_ingest.retrieval.query import SearchQuery
from rag_ingest.retrieval.search import search_passages

from local.client import OfflineClient

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())


def wait(client: OfflineClient, document_id: str, timeout: float = 300) -> dict[str, Any]:
    return client.wait_until_done([document_id], timeout_seconds=timeout)[document_id]


def test_uploaded_pdf_is_ready_indexed_once_and_found_by_page(
    client: OfflineClient, vector_store: VectorStore, embedder: Embedder
) -> None:
    document_id = client.upload(SAMPLES / "lighthouses.pdf")
    state = wait(client, document_id)

    assert state["status"] == "READY", f"{state['error_code']}: {state['error_detail']}"
    assert state["page_count"] == EXPECTED["lighthouses.pdf"]["page_count"]
    assert state["chunk_count"] and state["chunk_count"] > 0
    assert set(state["timings_ms"]) == {"VALIDATE", "PARSE", "CHUNK", "EMBED", "INDEX", "FINALIZE"}
    assert state["attempts"] == dict.fromkeys(state["timings_ms"], 1)
    # Exactly once: as many chunks in the index as the pipeline made, no more.
    assert vector_store.count(document_id=document_id) == state["chunk_count"]

    for sentence in EXPECTED["lighthouses.pdf"]["sentences"]:
        query = SearchQuery(tenant_id=client.tenant_id, text=sentence["text"], k=3)
        [top, *_] = search_passages(vector_store, embedder, query)
        assert top.document_id == document_id
        assert top.page_start <= sentence["page"] <= top.page_end, (sentence, top)
    # Another tenant sees none of it.
    stranger = SearchQuery(tenant_id=f"other-{uuid.uuid4().hex[:6]}", text="lighthouse")
    other = search_passages(vector_store, embedder, stranger)
    assert other == []


@pytest.mark.parametrize(
    ("sample", "error_code", "stage"),
    [("not-a-pdf.pdf", "UNSUPPORTED_TYPE", "VALIDATE"), ("encrypted.pdf", "ENCRYPTED_PDF", "PARSE")],
)
def test_bad_files_fail_with_their_code_without_retry_loops(
    client: OfflineClient, sample: str, error_code: str, stage: str
) -> None:
    document_id = client.upload(SAMPLES / "invalid" / sample)
    state = wait(client, document_id, timeout=120)
    assert state["status"] == "FAILED"
    assert state["error_code"] == error_code
    assert state["stage"] == stage
    assert state["attempts"][stage] == 1  # a permanent error is never retried


def test_upload_request_for_a_type_that_is_not_accepted_is_refused(client: OfflineClient) -> None:
    response = client.create_upload("animation.gif", content_type="image/gif")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "UNSUPPORTED_TYPE"


def test_unknown_document_is_404_and_other_tenants_cannot_read(client: OfflineClient) -> None:
    document_id = client.upload(SAMPLES / "sourdough.pdf")
    assert client.document(document_id)["document_id"] == document_id
    intruder = OfflineClient(api_url=client.api_url, tenant_id="intruder")
    with pytest.raises(Exception, match="404"):
        intruder.document(document_id)
    wait(client, document_id)


def test_poison_message_goes_to_the_dlq_while_its_batch_succeeds(
    client: OfflineClient, local_stack: dict[str, Any], aws_clients: dict[str, Any]
) -> None:
    sqs, s3 = aws_clients["sqs"], aws_clients["s3"]
    queue_url, dlq_url = local_stack["IngestQueueUrl"], local_stack["DeadLetterQueueUrl"]
    redrive = json.loads(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])[
        "Attributes"]["RedrivePolicy"])  # fmt: skip
    max_receive = int(redrive["maxReceiveCount"])
    original = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    # The template's visibility timeout (6 x the intake timeout) would make this test take minutes;
    # shorten it here only. Redrive after maxReceiveCount is SQS's own behaviour either way.
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"VisibilityTimeout": "2"})
    try:
        # An object put without the API (no AWAITING_UPLOAD record): its own notification also arrives.
        key = f"raw/{client.tenant_id}/inbox/{uuid.uuid4().hex[:8]}/urban-birds.pdf"
        put = s3.put_object(Bucket=local_stack["BucketName"], Key=key, Body=(SAMPLES / "urban-birds.pdf").read_bytes())
        s3_event = {
            "Records": [
                {
                    "eventName": "ObjectCreated:Put",
                    "eventTime": "2026-01-01T00:00:00.000Z",
                    "s3": {
                        "bucket": {"name": local_stack["BucketName"]},
                        "object": {"key": key, "size": 1, "versionId": put.get("VersionId") or put["ETag"]},
                    },
                }
            ]
        }
        poison = f"poison-{uuid.uuid4().hex}"
        sqs.send_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": "good", "MessageBody": json.dumps(s3_event)}, {"Id": "bad", "MessageBody": poison}],
        )
        deadline = time.monotonic() + 120
        dead: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not dead:
            messages = sqs.receive_message(
                QueueUrl=dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            dead = [m for m in messages if m["Body"] == poison]
            for message in messages:
                if message["Body"] == poison:
                    sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    sqs.change_message_visibility(
                        QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )
        assert dead, "the poison message never reached the DLQ"
        assert int(dead[0]["Attributes"]["ApproximateReceiveCount"]) >= max_receive
    finally:
        sqs.set_queue_attributes(QueueUrl=queue_url, Attributes=original)

    # The good record of the same batch became exactly one READY document.
    executions = aws_clients["stepfunctions"].list_executions(stateMachineArn=local_stack["StateMachineArn"])
    document_id = document_id_for_object(local_stack["BucketName"], key)
    mine = [e for e in executions["executions"] if e["name"].startswith(document_id)]
    assert len(mine) == 1
    assert client.wait_until_done([document_id], timeout_seconds=300)[document_id]["status"] == "READY"


def test_document_events_reach_eventbridge_consumers(client: OfflineClient, aws_clients: dict[str, Any]) -> None:
    sqs, events = aws_clients["sqs"], aws_clients["events"]
    suffix = uuid.uuid4().hex[:8]
    queue_url = sqs.create_queue(QueueName=f"document-events-{suffix}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = f"document-events-{suffix}"
    events.put_rule(Name=rule, EventPattern=json.dumps({"source": ["rag-ingest"]}))
    events.put_targets(Rule=rule, Targets=[{"Id": "queue", "Arn": queue_arn}])
    try:
        ready_id = client.upload(SAMPLES / "sourdough.pdf")
        failed_id = client.upload(SAMPLES / "invalid" / "truncated.pdf")
        client.wait_until_done([ready_id, failed_id], timeout_seconds=300)
        received: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(received) < 2:
            for message in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                event = json.loads(message["Body"])
                if event["detail"]["document_id"] in (ready_id, failed_id):
                    received[event["detail-type"]] = event["detail"]
        assert received["DocumentReady"]["document_id"] == ready_id
        assert received["DocumentReady"]["chunk_count"] > 0
        assert set(received["DocumentReady"]["timings_ms"]) >= {"PARSE", "EMBED", "INDEX"}
        assert received["DocumentFailed"]["document_id"] == failed_id
        assert received["DocumentFailed"]["error_code"] == "CORRUPT_PDF"
    finally:
        events.remove_targets(Rule=rule, Ids=["queue"])
        events.delete_rule(Name=rule)
