"""Operations on the whole local stack: DELETE through the HTTP API, replay of a document FAILED by a
system error, and the reaper re-driving an execution that died without closing its record, both
through ``python -m rag_ingest_client.cli --local``; each ends READY with its chunks indexed once."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest_client.cli import main as cli

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess

pytestmark = pytest.mark.e2e
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# The template's TransientError retrier: 1 attempt + maxAttempts retries, then Catch → MarkFailed.
PARSE_ATTEMPTS = 7
MARK_FAILED_ATTEMPTS = 4


@pytest.fixture
def tenant_client(client: OfflineClient) -> OfflineClient:
    return OfflineClient(api_url=client.api_url, tenant_id=f"ops-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def faults(stack_process: OfflineStackProcess) -> Any:
    stack_process.clear_faults()
    yield stack_process
    stack_process.clear_faults()


def function_name(local_stack: dict[str, Any], construct_id: str) -> str:
    [name] = [n for logical_id, n in local_stack["Functions"].items() if logical_id.startswith(construct_id)]
    return str(name)


def upload(client: OfflineClient, sample: Path, before_sending: Any = None) -> str:
    """The browser flow, with a hook between the ticket and the file (to arm faults for its id)."""
    ticket = client.create_upload(sample.name)
    ticket.raise_for_status()
    body = ticket.json()
    if before_sending:
        before_sending(body["document_id"])
    form = body["upload"]
    sent = requests.post(
        form["url"], data=form["fields"], files={"file": (sample.name, sample.read_bytes(), "application/pdf")}
    )
    assert sent.status_code in (200, 201, 204), sent.text
    return str(body["document_id"])


def operations_cli(stack_process: OfflineStackProcess, *argv: str) -> None:
    assert cli(["--local", "--outputs", str(stack_process.state_dir / "outputs.json"), *argv]) == 0


def test_delete_erases_the_document_for_its_tenant_only(
    tenant_client: OfflineClient, local_stack: dict[str, Any], aws_clients: dict[str, Any], vector_store: VectorStore
) -> None:
    document_id = upload(tenant_client, SAMPLES / "sourdough.pdf")
    state = tenant_client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert state["status"] == "READY" and vector_store.count(document_id=document_id) == state["chunk_count"]
    intruder = OfflineClient(api_url=tenant_client.api_url, tenant_id="intruder").delete(document_id)
    assert intruder.status_code == 404
    deleted = tenant_client.delete(document_id)
    assert deleted.status_code == 200, deleted.text
    report = deleted.json()
    assert report["status"] == "DELETED" and report["chunks_deleted"] == state["chunk_count"]
    assert report["upload_versions_deleted"] == 1 and report["artifact_versions_deleted"] >= 3

    assert vector_store.count(document_id=document_id) == 0
    s3, bucket = aws_clients["s3"], local_stack["BucketName"]
    for prefix in (f"raw/{tenant_client.tenant_id}/{document_id}/", f"artifacts/{document_id}/"):
        listing = s3.list_object_versions(Bucket=bucket, Prefix=prefix)
        assert listing.get("Versions", []) == [] and listing.get("DeleteMarkers", []) == [], prefix
    assert tenant_client.document(document_id)["status"] == "DELETED"
    again = tenant_client.delete(document_id)
    assert (again.status_code, again.json()["chunks_deleted"]) == (200, 0)


def test_replay_resumes_a_document_failed_by_a_system_error(
    tenant_client: OfflineClient,
    local_stack: dict[str, Any],
    stack_process: OfflineStackProcess,
    faults: OfflineStackProcess,
    vector_store: VectorStore,
) -> None:
    parse = function_name(local_stack, "WorkflowParseFunction")
    document_id = upload(
        tenant_client,
        SAMPLES / "urban-birds.pdf",
        lambda doc: faults.arm_fault(parse, "raise", times=PARSE_ATTEMPTS, match=doc),
    )
    failed = tenant_client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    # The injected failures hit Parse's invocations before its code ran: the record still names VALIDATE.
    assert (failed["status"], failed["error_code"]) == ("FAILED", "TRANSIENT_RETRIES_EXHAUSTED")

    operations_cli(stack_process, "replay", "--document-id", document_id)
    ready = tenant_client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert ready["status"] == "READY", ready
    assert ready["error_code"] is None
    # Validate ran again (no checkpoint, cheap); every other stage once, after the replay.
    assert ready["attempts"]["VALIDATE"] == 2 and ready["attempts"]["PARSE"] == 1
    assert vector_store.count(document_id=document_id) == ready["chunk_count"]


def test_reaper_redrives_an_execution_that_died_without_closing_its_record(
    tenant_client: OfflineClient,
    local_stack: dict[str, Any],
    stack_process: OfflineStackProcess,
    faults: OfflineStackProcess,
    aws_clients: dict[str, Any],
    vector_store: VectorStore,
) -> None:
    parse = function_name(local_stack, "WorkflowParseFunction")
    mark_failed = function_name(local_stack, "WorkflowMarkFailedFunction")

    def arm(doc: str) -> None:
        faults.arm_fault(parse, "raise", times=PARSE_ATTEMPTS, match=doc)
        faults.arm_fault(mark_failed, "raise", times=MARK_FAILED_ATTEMPTS, match=doc)

    document_id = upload(tenant_client, SAMPLES / "sourdough.pdf", arm)
    dynamodb, table = aws_clients["dynamodb"], local_stack["DocumentsTableName"]
    key = {"document_id": {"S": document_id}}

    def record() -> dict[str, Any]:
        return dict(dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item", {}))

    # The execution fails (MarkFailed itself failed): the record stays PROCESSING, a stuck document.
    deadline = time.monotonic() + 300
    while not _execution_failed(aws_clients["stepfunctions"], record()):
        assert time.monotonic() < deadline, f"the execution of {document_id} did not fail"
        time.sleep(1)
    assert record()["status"]["S"] == "PROCESSING"

    # As if the deadline had passed: the reaper only suspects records not updated for a while.
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).isoformat(timespec="milliseconds")
    dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET updated_at = :old",
        ExpressionAttributeValues={":old": {"S": two_hours_ago}},
    )
    operations_cli(stack_process, "reap", "--stuck-after", "1h")
    assert record()["replays"]["N"] == "1"
    ready = tenant_client.wait_until_done([document_id], timeout_seconds=300)[document_id]
    assert ready["status"] == "READY", ready
    assert vector_store.count(document_id=document_id) == ready["chunk_count"]


def _execution_failed(sfn: Any, item: dict[str, Any]) -> bool:
    arn = item.get("execution_arn", {}).get("S")
    return bool(arn) and sfn.describe_execution(executionArn=arn)["status"] == "FAILED"
