"""Reads the final state of a running local stack for the reliability tests: the status table,
the executions, the index, the artifacts and the queues. Every wait polls with a deadline."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote_plus

import boto3
import requests
from opensearchpy import helpers
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.vector_store import connect
from rag_ingest.core.ids import version_hash
from rag_ingest.core.record import DocumentRecord, DocumentStatus
from rag_ingest.core.s3_keys import artifact_key
from rag_ingest.embeddings.local import MINILM_DIMENSION
from rag_ingest.wiring import vector_store_for

from local.client import OfflineClient
from local.runtime.harness import OfflineStackProcess

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# The three smallest valid samples (4-5 chunks each: one embedding batch).
VALID_SAMPLES = (SAMPLES / "sourdough.pdf", SAMPLES / "urban-birds.pdf", SAMPLES / "lighthouses.pdf")
INVALID_SAMPLES = SAMPLES / "invalid"
TERMINAL = frozenset({DocumentStatus.READY, DocumentStatus.FAILED, DocumentStatus.DELETED})
FINISHED_EXECUTION = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
# The stage functions by construct id (Workflow/<Stage>Function), in workflow order.
STAGE_FUNCTIONS = {
    "VALIDATE": "ValidateFunction",
    "PARSE": "ParseFunction",
    "CHUNK": "ChunkFunction",
    "EMBED": "EmbedFunction",
    "INDEX": "IndexFunction",
    "FINALIZE": "FinalizeFunction",
}

T = TypeVar("T")


def wait_until(check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.5) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)


def new_tenant(prefix: str = "rel") -> str:
    # OpenSearch keeps data between runs (moto does not): a fresh tenant never sees old chunks.
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class UploadTicket:
    """An upload granted by the API: the document id is known before any byte is sent."""

    document_id: str
    key: str
    url: str
    fields: dict[str, str]


def s3_notification_body(bucket: str, key: str, version: str, size: int, etag: str) -> str:
    """An S3 ObjectCreated notification as S3 sends it to SQS (key URL-encoded)."""
    record = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": "us-east-1",
        "eventTime": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "eventName": "ObjectCreated:Post",
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "reliability-copy",
            "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
            "object": {
                "key": quote_plus(key, safe=""),
                "size": size,
                "eTag": etag.strip('"'),
                "versionId": version,
                "sequencer": f"{time.time_ns():016X}",
            },
        },
    }
    return json.dumps({"Records": [record]})


def reconcile_through_cli(outputs_path: Path, tenant_id: str) -> dict[str, Any]:
    """``rag-ingest --outputs <outputs.json> --tenant T reconcile --json --grace 0``, as an operator runs
    it against a local stack: the Reconciler function's report (findings: the drift). ``--grace 0``:
    the test's objects are all uploaded, so an object without a record is drift at once."""
    command = [sys.executable, "-m", "rag_ingest_client.cli", "--outputs", str(outputs_path), "--tenant", tenant_id]
    result = subprocess.run(
        [*command, "reconcile", "--json", "--grace", "0"], capture_output=True, text=True, timeout=300, check=False
    )
    if result.returncode not in (0, 1):  # 1: findings left; anything else: it did not run
        raise RuntimeError(f"rag-ingest reconcile exited with {result.returncode}: {result.stderr[-2000:]}")
    return dict(json.loads(result.stdout))


def intake_poller_stats(stack: OfflineStackProcess) -> dict[str, int]:
    """The intake poller's counters (received, deleted, failed, invocation_errors) so far."""
    status = stack.control("GET", "/_local/status") or {}
    # The ingest queue -> intake mapping (the webhook queues have their own pollers).
    [poller] = [p for p in status["pollers"] if str(p["mapping"]).startswith("IntakeIntakeFunction")]
    return {name: int(poller[name]) for name in ("received", "deleted", "failed", "invocation_errors")}


class PipelineProbe:
    """One local stack (its outputs) seen from outside, as an operator would check it."""

    def __init__(self, outputs: dict[str, Any], opensearch_url: str) -> None:
        self.outputs = outputs
        options: dict[str, Any] = {
            "endpoint_url": outputs["MotoEndpoint"],
            "region_name": outputs.get("Region", "us-east-1"),
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.sqs = boto3.client("sqs", **options)
        self.s3 = boto3.client("s3", **options)
        self.sfn = boto3.client("stepfunctions", **options)
        self.dynamodb = boto3.resource("dynamodb", **options)
        self.table_name = str(outputs["DocumentsTableName"])
        self.status = DocumentsTable(self.table_name, table=self.dynamodb.Table(self.table_name))
        # Straight to OpenSearch (not through any proxy the stack's functions may be given).
        self.index_name = str(outputs.get("OpenSearchIndex", "rag-chunks"))
        self.vector_store = vector_store_for(opensearch_url, self.index_name, MINILM_DIMENSION)
        self.opensearch = connect(opensearch_url)
        self.api_url = str(outputs["ApiUrl"]).rstrip("/")
        self.bucket = str(outputs["BucketName"])
        self.queue_url = str(outputs["IngestQueueUrl"])
        self.dlq_url = str(outputs["DeadLetterQueueUrl"])
        self.state_machine_arn = str(outputs["StateMachineArn"])

    # -- functions ----------------------------------------------------------------------------
    def function_name(self, construct_id: str) -> str:
        """The deployed name of ``Workflow/<construct_id>`` or ``Intake/<construct_id>``."""
        for logical_id, name in self.outputs["Functions"].items():
            if logical_id.removeprefix("Workflow").removeprefix("Intake").startswith(construct_id):
                return str(name)
        raise KeyError(f"no function {construct_id} in {sorted(self.outputs['Functions'])}")

    def stage_function(self, stage: str) -> str:
        return self.function_name(STAGE_FUNCTIONS[stage])

    # -- uploads ------------------------------------------------------------------------------
    def client(self, tenant_id: str) -> OfflineClient:
        return OfflineClient(api_url=self.api_url, tenant_id=tenant_id)

    def ticket(self, client: OfflineClient, filename: str) -> UploadTicket:
        response = client.create_upload(filename)
        response.raise_for_status()
        body = response.json()
        fields = dict(body["upload"]["fields"])
        return UploadTicket(str(body["document_id"]), fields["key"], body["upload"]["url"], fields)

    def send(self, ticket: UploadTicket, path: Path) -> str:
        """POST the file with the ticket's form, as a browser does; returns the new S3 version."""
        response = requests.post(
            ticket.url,
            data=ticket.fields,
            files={"file": (path.name, path.read_bytes(), "application/pdf")},
            timeout=30,
        )
        if response.status_code not in (200, 201, 204):
            raise RuntimeError(f"upload of {path.name} failed: {response.status_code} {response.text[:300]}")
        return str(self.s3.head_object(Bucket=self.bucket, Key=ticket.key)["VersionId"])

    def upload(self, client: OfflineClient, path: Path) -> UploadTicket:
        ticket = self.ticket(client, path.name)
        self.send(ticket, path)
        return ticket

    # -- the status table ---------------------------------------------------------------------
    def record(self, document_id: str) -> DocumentRecord:
        record = self.status.get(document_id)
        if record is None:
            raise LookupError(f"document {document_id} has no status record")
        return record

    def records(self, document_ids: Iterable[str]) -> dict[str, DocumentRecord]:
        ids = list(document_ids)
        found: dict[str, DocumentRecord] = {}
        for start in range(0, len(ids), 100):
            keys = [{"document_id": i} for i in ids[start : start + 100]]
            request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
            while request:
                response = self.dynamodb.batch_get_item(RequestItems=request)
                for item in response["Responses"].get(self.table_name, []):
                    found[item["document_id"]] = DocumentRecord.model_validate(item)
                request = response.get("UnprocessedKeys") or {}
        return found

    def wait_terminal(self, document_ids: Iterable[str], timeout: float = 180) -> dict[str, DocumentRecord]:
        """Every document READY, FAILED or DELETED, and every execution of it finished."""
        ids = list(document_ids)

        def finished() -> dict[str, DocumentRecord] | None:
            records = self.records(ids)
            done = all(i in records and records[i].status in TERMINAL for i in ids)
            return records if done else None

        records = wait_until(finished, timeout=timeout, what=f"{len(ids)} document(s) terminal", interval=1.0)
        wait_until(
            lambda: all(e["status"] in FINISHED_EXECUTION for e in self.executions_of(ids)),
            timeout=60,
            what="their executions finished",
        )
        return records

    # -- executions ---------------------------------------------------------------------------
    def executions(self) -> list[dict[str, Any]]:
        paginator = self.sfn.get_paginator("list_executions")
        return [e for page in paginator.paginate(stateMachineArn=self.state_machine_arn) for e in page["executions"]]

    def executions_of(self, document_ids: Iterable[str]) -> list[dict[str, Any]]:
        # Execution names are "<document_id>-<version hash>[-r<replay>]" (rag_ingest.core.ids.execution_name).
        prefixes = tuple(f"{i}-" for i in document_ids)
        return [e for e in self.executions() if e["name"].startswith(prefixes)]

    def executions_per_version(self, document_id: str) -> Counter[str]:
        """Executions of the document, counted by the version hash in their name."""
        names = [e["name"].removeprefix(f"{document_id}-") for e in self.executions_of([document_id])]
        return Counter(name.split("-")[0] for name in names)

    def retrier(self, state_name: str, error: str) -> dict[str, Any]:
        """The first Retry entry of a Task state that matches ``error`` (as deployed: scaled waits)."""
        definition = json.loads(self.sfn.describe_state_machine(stateMachineArn=self.state_machine_arn)["definition"])

        def states(machine: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
            for name, state in machine.get("States", {}).items():
                yield name, state
                for nested in (state.get("ItemProcessor"), state.get("Iterator"), *state.get("Branches", [])):
                    if nested:
                        yield from states(nested)

        for name, state in states(definition):
            if name == state_name:
                for retry in state.get("Retry", []):
                    if error in retry["ErrorEquals"] or "States.ALL" in retry["ErrorEquals"]:
                        return dict(retry)
        raise KeyError(f"no retrier for {error} on state {state_name}")

    def function_invocations(self, execution_arn: str) -> Counter[str]:
        """How many times the execution invoked each function (retries included), by function name."""
        events: list[dict[str, Any]] = []
        paginator = self.sfn.get_paginator("get_execution_history")
        for page in paginator.paginate(executionArn=execution_arn):
            events.extend(page["events"])
        return Counter(
            event["lambdaFunctionScheduledEventDetails"]["resource"].rsplit(":", 1)[-1]
            for event in events
            if event["type"] == "LambdaFunctionScheduled"
        )

    # -- the index ----------------------------------------------------------------------------
    def index_count(self, document_id: str, version: str | None = None) -> int:
        return self.vector_store.count(document_id=document_id, version=version)

    def index_counts(self, tenant_id: str) -> dict[str, Counter[str]]:
        """Chunks in the index per document of a tenant, by version hash."""
        self.opensearch.indices.refresh(index=self.index_name)
        body = {
            "size": 0,
            "query": {"term": {"tenant_id": tenant_id}},
            "aggs": {
                "documents": {
                    "terms": {"field": "document_id", "size": 10000},
                    "aggs": {"versions": {"terms": {"field": "version", "size": 100}}},
                }
            },
        }
        response = self.opensearch.search(index=self.index_name, body=body)
        return {
            bucket["key"]: Counter({v["key"]: int(v["doc_count"]) for v in bucket["versions"]["buckets"]})
            for bucket in response["aggregations"]["documents"]["buckets"]
        }

    def duplicate_passages(self, tenant_id: str) -> dict[str, int]:
        """Passages of a tenant in the index more than once: two chunk documents for one (document,
        version, chunk index), or the same text twice in one document version (extra copies counted)."""
        self.opensearch.indices.refresh(index=self.index_name)
        positions: Counter[tuple[str, str, int]] = Counter()
        texts: Counter[tuple[str, str, str]] = Counter()
        for hit in helpers.scan(
            self.opensearch,
            index=self.index_name,
            query={"query": {"term": {"tenant_id": tenant_id}}},
            _source=["document_id", "version", "chunk_index", "text"],
        ):
            source = hit["_source"]
            document, version = str(source["document_id"]), str(source["version"])
            positions[(document, version, int(source["chunk_index"]))] += 1
            texts[(document, version, hashlib.sha256(str(source["text"]).encode()).hexdigest())] += 1
        return {
            "same_chunk_index": sum(count - 1 for count in positions.values()),
            "same_text": sum(count - 1 for count in texts.values()),
        }

    # -- artifacts ----------------------------------------------------------------------------
    def artifact_versions(self, document_id: str, version: str) -> dict[str, int]:
        """Each checkpoint object of a document version and how many times it was written
        (the bucket is versioned: a redone stage leaves a second version)."""
        prefix = artifact_key(document_id, version, "")
        written: Counter[str] = Counter()
        paginator = self.s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            written.update(v["Key"].removeprefix(prefix) for v in page.get("Versions", []))
        return dict(written)

    # -- queues -------------------------------------------------------------------------------
    def queue_depth(self, queue_url: str) -> int:
        """Messages in the queue: visible, in flight and delayed."""
        attributes = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        return sum(
            int(attributes.get(name, 0))
            for name in (
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            )
        )

    def wait_ingest_queue_drained(self, timeout: float = 60) -> None:
        wait_until(lambda: self.queue_depth(self.queue_url) == 0, timeout=timeout, what="ingest queue empty")

    def dead_letters(self, marker: str) -> list[dict[str, Any]]:
        """DLQ messages whose body contains ``marker``; all messages stay in the DLQ."""
        seen: dict[str, dict[str, Any]] = {}
        handles: list[str] = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=self.dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=30,
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in messages if m["MessageId"] not in seen]
            if not fresh:
                break
            for message in fresh:
                seen[message["MessageId"]] = message
            handles.extend(m["ReceiptHandle"] for m in messages)
        for handle in handles:  # visible again at once: peeking must not hide them from anyone
            self.sqs.change_message_visibility(QueueUrl=self.dlq_url, ReceiptHandle=handle, VisibilityTimeout=0)
        return [m for m in seen.values() if marker in m["Body"]]

    def delete_dead_letters(self, marker: str) -> int:
        """Remove this test's messages from the DLQ (so later tests start from a clean DLQ)."""
        deleted = 0
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=5).get(
                "Messages", []
            )
            mine = [m for m in messages if marker in m["Body"]]
            for message in messages:
                if marker in message["Body"]:
                    self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=message["ReceiptHandle"])
                else:
                    self.sqs.change_message_visibility(
                        QueueUrl=self.dlq_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                    )
            deleted += len(mine)
            if not mine:
                return deleted

    def send_to_ingest_queue(self, *bodies: str) -> None:
        for start in range(0, len(bodies), 10):
            entries = [{"Id": str(n), "MessageBody": body} for n, body in enumerate(bodies[start : start + 10])]
            response = self.sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            if response.get("Failed"):
                raise RuntimeError(f"send_message_batch failed: {response['Failed']}")

    @contextmanager
    def visibility_timeout(self, seconds: int) -> Iterator[None]:
        """Shorten the ingest queue's VisibilityTimeout for one test (6 x the intake timeout would
        make a redelivery take minutes); the template's value is restored afterwards."""
        original = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["VisibilityTimeout"])[
            "Attributes"
        ]
        self.sqs.set_queue_attributes(QueueUrl=self.queue_url, Attributes={"VisibilityTimeout": str(seconds)})
        try:
            yield
        finally:
            self.sqs.set_queue_attributes(QueueUrl=self.queue_url, Attributes=original)

    # -- the assertions every test ends with --------------------------------------------------
    def assert_ready_exactly_once(self, document_id: str) -> DocumentRecord:
        """READY; one execution per version, the current one SUCCEEDED; the index holds the
        current version's chunks once (as many as chunk_count) and nothing of other versions."""
        record = self.record(document_id)
        assert record.status == DocumentStatus.READY, record
        assert record.error_code is None, record
        assert record.version is not None and record.chunk_count, record
        per_version = self.executions_per_version(document_id)
        assert all(count == 1 for count in per_version.values()), f"{document_id}: executions {per_version}"
        current = [e for e in self.executions_of([document_id]) if e["name"].endswith(version_hash(record.version))]
        assert [e["status"] for e in current] == ["SUCCEEDED"], current
        assert self.index_count(document_id, record.version) == record.chunk_count
        assert self.index_count(document_id) == record.chunk_count, "chunks of another version are in the index"
        return record

    def assert_queues_settled(self, marker: str) -> None:
        """Nothing left in the ingest queue, and nothing of this test (``marker``) in the DLQ."""
        self.wait_ingest_queue_drained()
        assert self.dead_letters(marker) == []
