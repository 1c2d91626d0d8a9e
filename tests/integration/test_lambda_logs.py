"""Logs and traces as AWS would see them: the Parse handler runs in a fresh process started the
way the Lambda runtime starts one (the local stack's worker: handler imported once, a Lambda
context, the environment the template gives it plus Lambda's reserved variables, with
``AWS_LAMBDA_LOG_FORMAT=JSON`` and ``AWS_LAMBDA_LOG_LEVEL=INFO``), on real sample PDFs in moto.

Asserted: every line on stdout is one JSON object; the domain's INFO lines are there (the
standard library's root logger at WARNING dropped them before); every line of a run carries
``document_id``, ``tenant_id`` and ``stage``, and the next invocation's lines carry only its
own; the X-Ray segments the tracer sends (to a UDP listener standing in for the daemon) name
the handler and the adapter calls.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import boto3
import pytest
from pypdf import PdfReader, PdfWriter
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.core.ids import new_document_id
from rag_ingest.core.job import ObjectRef
from rag_ingest.embeddings.local import LOCAL_MODEL_ID, MINILM_DIMENSION

from local.runtime.cloudformation.provisioned import FunctionDefinition
from local.runtime.lambda_.pool import Worker
from tests.support import hostile_pdfs
from tests.support.aws import REGION, moto_server
from tests.support.operations import create_documents_table, create_state_machine

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
SERVICE = "rag-ingest-stages"
FUNCTION_NAME = "RagIngest-ParseFunction-TEST"


def two_page_pdf_with_a_hostile_page() -> bytes:
    """A real sample page, then a page with 400,000 text operators (over its time budget)."""
    writer = PdfWriter()
    writer.append(PdfReader(SAMPLES / "lighthouses.pdf"), pages=[0])
    writer.append(PdfReader(io.BytesIO(hostile_pdfs.many_text_operators(400_000))))
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def world() -> Iterator[dict[str, Any]]:
    with moto_server() as endpoint:
        suffix = uuid.uuid4().hex[:8]
        bucket, table = f"docs-{suffix}", f"documents-{suffix}"
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        create_documents_table(table)
        status = DocumentsTable(table)
        jobs = []
        for tenant, data in (
            ("acme", two_page_pdf_with_a_hostile_page()),
            ("globex", (SAMPLES / "sourdough.pdf").read_bytes()),
        ):
            document_id = new_document_id()
            key = f"raw/{tenant}/{document_id}/file.pdf"
            version = s3.put_object(Bucket=bucket, Key=key, Body=data)["VersionId"]
            status.mark_queued(
                document_id=document_id,
                tenant_id=tenant,
                ref=ObjectRef(bucket=bucket, key=key, version=version),
                event_time="2026-01-01T00:00:00+00:00",
                size_bytes=len(data),
            )
            jobs.append(
                {"document_id": document_id, "tenant_id": tenant, "bucket": bucket, "key": key, "version": version}
            )
        yield {"endpoint": endpoint, "bucket": bucket, "table": table, "jobs": jobs}


@pytest.fixture(scope="module")
def xray_daemon() -> Iterator[socket.socket]:
    """A UDP socket where the X-Ray SDK sends its segment documents (the daemon's protocol)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(0.5)
        yield sock


def lambda_environment(
    world: dict[str, Any],
    daemon_port: int,
    *,
    code: str = "stages",
    handler: str = "app.parse",
    service: str = SERVICE,
    function_name: str = FUNCTION_NAME,
) -> dict[str, str]:
    code_dir = REPO / "functions" / code
    return {
        "PATH": os.environ.get("PATH", ""),
        # As the template gives it (infra: the stage functions' environment).
        "POWERTOOLS_SERVICE_NAME": service,
        "DOCUMENTS_TABLE": world["table"],
        "BUCKET_NAME": world["bucket"],
        "OPENSEARCH_ENDPOINT": "http://127.0.0.1:9",  # never reached by Parse
        "OPENSEARCH_INDEX": "unused",
        "EMBEDDING_PROVIDER": "local",
        "EMBEDDING_MODEL_ID": LOCAL_MODEL_ID,
        "EMBEDDING_DIMENSION": str(MINILM_DIMENSION),
        "MAX_FILE_BYTES": str(50 * 1024 * 1024),
        "MAX_PAGES": "500",
        "CHUNK_TOKENS": "300",
        "CHUNK_OVERLAP_TOKENS": "60",
        # The function's logging configuration (LogFormat JSON, ApplicationLogLevel INFO).
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "AWS_LAMBDA_LOG_LEVEL": "INFO",
        # Lambda's reserved variables.
        "AWS_LAMBDA_FUNCTION_NAME": function_name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function_name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]test",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "LAMBDA_TASK_ROOT": str(code_dir),
        "_HANDLER": handler,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": world["endpoint"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        # Active tracing: the daemon address and the trace header Lambda sets.
        "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{daemon_port}",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        "PYTHONPATH": os.pathsep.join([str(code_dir), str(REPO / "layers" / "common" / "python")]),
        "PYTHONUNBUFFERED": "1",
        "VIRTUAL_ENV": sys.prefix,
    }


def json_lines(logs: str) -> list[dict[str, Any]]:
    lines = [line for line in logs.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"a log line is not JSON: {line[:300]}")
    return parsed


def log_lines(logs: str) -> list[dict[str, Any]]:
    records = json_lines(logs)
    assert all("level" in record or "_aws" in record for record in records), records
    return [record for record in records if "level" in record]


def segment_names(segments: list[dict[str, Any]]) -> Iterator[str]:
    for segment in segments:
        yield str(segment.get("name"))
        yield from segment_names(segment.get("subsegments", []))


def received_segments(sock: socket.socket) -> list[dict[str, Any]]:
    segments = []
    while True:
        try:
            packet = sock.recv(65536)
        except TimeoutError:
            return segments
        header, _, body = packet.decode().partition("\n")
        assert json.loads(header) == {"format": "json", "version": 1}
        segments.append(json.loads(body))


def test_a_stage_logs_json_lines_with_the_run_keys_and_traces_its_calls(
    world: dict[str, Any], xray_daemon: socket.socket
) -> None:
    function = FunctionDefinition(
        logical_id="ParseFunctionTEST",
        name=FUNCTION_NAME,
        arn=f"arn:aws:lambda:{REGION}:123456789012:function:{FUNCTION_NAME}",
        handler="app.parse",
        runtime="python3.13",
        code_dir=REPO / "functions" / "stages",
        timeout_seconds=120,
        memory_mb=1024,
        environment={},
    )
    worker = Worker(function, lambda_environment(world, xray_daemon.getsockname()[1]), index=0)
    worker.start(init_timeout=120)
    try:
        hostile_job, plain_job = world["jobs"]
        first = worker.invoke(json.dumps(hostile_job), "request-1", None)
        first_logs = worker.collect_logs()
        second = worker.invoke(json.dumps(plain_job), "request-2", None)
        second_logs = worker.collect_logs()
    finally:
        worker.stop()

    assert first.response["type"] == "result", first.response
    assert json.loads(first.response["payload"])["failed_pages"] == [2]
    assert second.response["type"] == "result", second.response

    # Every stdout line is JSON: log lines (with a level) and EMF metric documents (with "_aws").
    lines = log_lines(first_logs)
    # The over-budget page (WARNING) and the stage's end (INFO, dropped before this change).
    budget = [line for line in lines if "over the page budget" in line["message"]]
    finished = [line for line in lines if line["message"] == "stage finished"]
    assert budget and budget[0]["level"] == "WARNING"
    assert finished and finished[0]["level"] == "INFO" and finished[0]["failed_pages"] == [2]
    for line in lines:
        assert line["service"] == SERVICE
        assert line["function_request_id"] == "request-1"
        assert (line["document_id"], line["tenant_id"], line["stage"]) == (
            hostile_job["document_id"],
            "acme",
            "PARSE",
        )

    # The next invocation: its own keys, nothing left over from the first.
    second_lines = log_lines(second_logs)
    assert any(line["message"] == "stage finished" for line in second_lines)
    for line in second_lines:
        assert line["function_request_id"] == "request-2"
        assert (line["document_id"], line["tenant_id"]) == (plain_job["document_id"], "globex")
        assert "failed_pages" not in line or line["failed_pages"] == []

    names = set(segment_names(received_segments(xray_daemon)))
    adapters = "## rag_ingest.adapters."
    expected = {
        "## parse",
        f"{adapters}object_store.ObjectStore.read",
        f"{adapters}documents_table.DocumentsTable.start_stage",
    }
    assert expected <= names, names
    assert {"s3", "dynamodb"} <= names  # botocore, auto-patched: the AWS calls themselves


def s3_event_body(bucket: str, key: str, version: str) -> str:
    """The body S3 sends to the queue for one ObjectCreated (the key URL-encoded, as S3 does)."""
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Post",
        "eventTime": "2026-01-01T00:00:00.000Z",
        "s3": {
            "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
            "object": {"key": quote_plus(key), "size": 1000, "eTag": "abc", "versionId": version},
        },
    }
    return json.dumps({"Records": [record]})


def test_intake_logs_each_record_with_its_own_keys(world: dict[str, Any], xray_daemon: socket.socket) -> None:
    """One SQS batch, three records: each record's lines carry its document and tenant, and
    nothing of the record before; the object under an invalid tenant is rejected (a WARNING with
    its code), and the batch has no failure (nothing retried, nothing dead-lettered)."""
    idempotency_table = f"idempotency-{uuid.uuid4().hex[:6]}"
    boto3.client("dynamodb").create_table(
        TableName=idempotency_table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    name = "RagIngest-IntakeFunction-TEST"
    environment = lambda_environment(
        world, xray_daemon.getsockname()[1], code="intake", handler="app.handler", service="rag-ingest-intake",
        function_name=name,
    )  # fmt: skip
    environment.update({"IDEMPOTENCY_TABLE": idempotency_table, "STATE_MACHINE_ARN": create_state_machine()})
    function = FunctionDefinition(
        logical_id="IntakeFunctionTEST",
        name=name,
        arn=f"arn:aws:lambda:{REGION}:123456789012:function:{name}",
        handler="app.handler",
        runtime="python3.13",
        code_dir=REPO / "functions" / "intake",
        timeout_seconds=60,
        memory_mb=256,
        environment={},
    )
    first, second = new_document_id(), new_document_id()
    keys = [f"raw/acme/{first}/a file.pdf", "raw/bad tenant!/b.pdf", f"raw/globex/{second}/c.pdf"]
    event = {
        "Records": [
            {
                "messageId": f"m{index}",
                "receiptHandle": f"r{index}",
                "body": s3_event_body(world["bucket"], key, f"v{index}"),
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:ingest",
                "awsRegion": REGION,
            }
            for index, key in enumerate(keys)
        ]
    }
    worker = Worker(function, environment, index=0)
    worker.start(init_timeout=120)
    try:
        outcome = worker.invoke(json.dumps(event), "intake-request", None)
        logs = worker.collect_logs()
    finally:
        worker.stop()
    assert outcome.response["type"] == "result", outcome.response
    assert json.loads(outcome.response["payload"]) == {"batchItemFailures": []}

    lines = log_lines(logs)
    by_key = {key: [line for line in lines if line.get("s3_key") == key] for key in keys}
    assert all(by_key.values()), lines
    [queued_first] = [line for line in by_key[keys[0]] if line["message"] == "document queued"]
    assert (queued_first["document_id"], queued_first["tenant_id"], queued_first["level"]) == (first, "acme", "INFO")
    [rejected] = by_key[keys[1]]
    assert (rejected["message"], rejected["level"], rejected["error_code"]) == (
        "object rejected",
        "WARNING",
        "INVALID_OBJECT_KEY",
    )
    assert "document_id" not in rejected and "tenant_id" not in rejected  # the first record's keys are gone
    [queued_second] = [line for line in by_key[keys[2]] if line["message"] == "document queued"]
    assert (queued_second["document_id"], queued_second["tenant_id"]) == (second, "globex")
    for line in lines:
        assert line["service"] == "rag-ingest-intake" and line["function_request_id"] == "intake-request"
